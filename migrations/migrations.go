// Package migrations embeds terdut-server's goose SQL migrations into the binary.
package migrations

import "embed"

// FS holds every migration, applied in order of their numeric prefix.
//
//go:embed *.sql
var FS embed.FS

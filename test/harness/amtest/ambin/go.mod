module github.com/terdut-server/terdut-server/test/harness/amtest/ambin

// ambin only pins the real Alertmanager that test/harness/amtest builds and runs; it has no
// code. It is a module of its own so that Alertmanager's dependencies never reach
// terdut-server's module graph; its go.sum checks the module's zip when amtest downloads it.
//
// amtest cannot `go build` Alertmanager from here as kubebin's programs are built: ui/web.go
// embeds ui/app/dist, the web UI its release builds with npm, which the module zip lacks. So
// amtest.Build copies the module out of the module cache, adds a placeholder page there and
// builds ./cmd/alertmanager inside the copy, against the copy's own go.mod and go.sum.
//
// Pinned at v0.35.0 (`go mod download github.com/prometheus/alertmanager@v0.35.0`). `go mod
// tidy` would drop the requirement (nothing imports it): keep it by hand. Upgrade it together
// with amtest.Version.

go 1.26.8

require github.com/prometheus/alertmanager v0.35.0

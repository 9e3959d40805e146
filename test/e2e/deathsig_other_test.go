//go:build !linux

package e2e

import "os/exec"

// dieWithParent does nothing where the kernel cannot kill a child with its parent; the tests'
// cleanups stop every server they start.
func dieWithParent(*exec.Cmd) {}

package e2e

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process when the test process dies, so that a
// test killed by its timeout leaves no server running.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

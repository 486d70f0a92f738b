//go:build unix && !linux

package wasmhost

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the command in a group of its own, so that it is
// killed with everything it started.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

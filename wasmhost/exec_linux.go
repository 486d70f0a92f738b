package wasmhost

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the command in a group of its own (so that it
// is killed with everything it started) that dies with the thread that
// started it (confine.Start keeps that thread for the command's life).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

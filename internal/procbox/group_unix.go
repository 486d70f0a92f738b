//go:build unix

package procbox

import (
	"os/exec"
	"syscall"
)

func groupAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(attr)
	return attr
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (g *groupBox) signal(sig syscall.Signal) {
	if g.cmd.Process != nil {
		syscall.Kill(-g.cmd.Process.Pid, sig)
	}
}

func exitState(ee *exec.ExitError) State {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return State{ExitCode: -1, Signal: ws.Signal()}
	}
	return State{ExitCode: ee.ExitCode()}
}

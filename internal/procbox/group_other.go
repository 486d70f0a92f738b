//go:build !unix

package procbox

import (
	"os/exec"
	"syscall"
)

func groupAttr() *syscall.SysProcAttr { return nil }

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}

func (g *groupBox) signal(sig syscall.Signal) { killGroup(g.cmd) }

func exitState(ee *exec.ExitError) State { return State{ExitCode: ee.ExitCode()} }

//go:build !unix

package wasmhost

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

// killGroup kills the command alone: without process groups what it
// started may outlive it.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}

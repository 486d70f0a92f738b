//go:build !unix

package mcp

import (
	"os"
	"os/exec"
	"syscall"
)

// Elsewhere (Windows) a server is one process that Close kills; if wagent
// is killed the server sees its standard input close and exits. (A job
// object would make that certain; wagent does not create one yet.)
func setProcAttr(cmd *exec.Cmd) {}

const lockThread = false

func killGroup(pid int, sig syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

//go:build unix && !linux

package mcp

import (
	"os/exec"
	"syscall"
)

// On the BSDs and macOS there is no parent-death signal: a server runs in
// its own process group, which Close ends; if wagent is killed with
// SIGKILL the server sees its standard input close (the pipe's only
// writer is gone), and MCP stdio servers exit on that.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

const lockThread = false

func killGroup(pid int, sig syscall.Signal) { syscall.Kill(-pid, sig) }

//go:build linux

package mcp

import (
	"os/exec"
	"syscall"
)

// On Linux a server runs in its own process group (so that ending it ends
// whatever it started, such as npx's node) and gets SIGKILL when the
// thread that started it dies (Pdeathsig): if wagent is killed, even with
// SIGKILL, the kernel kills the server. Pdeathsig follows the starting
// thread, not the process, so the server is started from a goroutine
// locked to its thread for the server's whole life (see spawn).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

const lockThread = true

// killGroup signals the server's process group.
func killGroup(pid int, sig syscall.Signal) { syscall.Kill(-pid, sig) }

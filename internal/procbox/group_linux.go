//go:build linux

package procbox

import "syscall"

// setPdeathsig has the kernel kill the command when the thread that
// started it dies. Go never ends a thread that is not locked, and
// confine.Start keeps a confined command's thread for its life, so that
// means the owner's death.
func setPdeathsig(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

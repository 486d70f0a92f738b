//go:build unix && !linux

package procbox

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}

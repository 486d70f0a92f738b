//go:build unix || wasip1

package ops

import "syscall"

// noFollow makes an open fail on a symbolic link rather than follow it.
const noFollow = syscall.O_NOFOLLOW

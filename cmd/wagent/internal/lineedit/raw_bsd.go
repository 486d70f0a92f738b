//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package lineedit

import "golang.org/x/sys/unix"

const (
	ioctlGet = unix.TIOCGETA
	ioctlSet = unix.TIOCSETA
)

// TypedAhead is 0 here: the count of waiting bytes is not asked for (a
// key typed before the chat started reads as Ctrl-J would).
func TypedAhead(fd int) int { return 0 }

package lineedit

import "golang.org/x/sys/unix"

const (
	ioctlGet = unix.TCGETS
	ioctlSet = unix.TCSETS
)

// TypedAhead is how many bytes wait to be read from the terminal fd: keys
// typed before the editor put it in raw mode, which the terminal's line
// discipline took in its ordinary mode (Enter already turned into \n).
func TypedAhead(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

//go:build wasip1

package ops

import (
	"io/fs"
	"syscall"
)

// notRegularKind names what fi is when it is neither a regular file, a
// directory nor a link ("" when it is one of those). Through WASI a named
// pipe and a socket have the same type (unknown), which Go reports as a
// regular file; the Filetype behind it tells them apart from one.
func notRegularKind(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	switch st.Filetype {
	case syscall.FILETYPE_UNKNOWN:
		return "a named pipe (FIFO) or a socket"
	case syscall.FILETYPE_CHARACTER_DEVICE:
		return "a character device"
	case syscall.FILETYPE_BLOCK_DEVICE:
		return "a block device"
	case syscall.FILETYPE_SOCKET_DGRAM, syscall.FILETYPE_SOCKET_STREAM:
		return "a socket"
	}
	return ""
}

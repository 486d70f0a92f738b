//go:build !wasip1

package ops

import "io/fs"

// notRegularKind names what fi is when it is neither a regular file, a
// directory nor a link ("" when it is one of those). Natively (tests and
// benchmarks) the type is known exactly.
func notRegularKind(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeIrregular != 0:
		return "a file of an unknown type"
	}
	return ""
}

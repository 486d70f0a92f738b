//go:build unix

package rootfs

import (
	"errors"
	"os"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

var platformOpenFlags = []openFlag{
	{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY},
	{experimentalsys.O_NOFOLLOW, syscall.O_NOFOLLOW},
	{experimentalsys.O_DSYNC, syscall.O_DSYNC},
}

// openNonblock is added to every open: a FIFO's open does not wait for its
// other end, and a terminal device never becomes the host's controlling
// terminal.
const openNonblock = syscall.O_NONBLOCK | syscall.O_NOCTTY

// isNoDevice reports an open refused with ENXIO: a FIFO opened for writing
// without a reader, a socket, or a device node without its driver.
func isNoDevice(err error) bool { return errors.Is(err, syscall.ENXIO) }

// clearNonblock puts a regular file opened with oflag (and O_NONBLOCK) back
// in blocking mode.
func clearNonblock(f *os.File, oflag int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) { ferr = setBlocking(int(fd), oflag) })
	if err != nil {
		return err
	}
	return ferr
}

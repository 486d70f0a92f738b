//go:build unix && !linux

package rootfs

import "golang.org/x/sys/unix"

// setBlocking clears O_NONBLOCK, keeping the other status flags (which
// flags F_SETFL changes differs between systems: read them first).
func setBlocking(fd, _ int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	return err
}

package rootfs

import "golang.org/x/sys/unix"

// setBlocking clears O_NONBLOCK in one call (a system call costs, and
// every open makes one): on Linux F_SETFL changes only O_APPEND, O_ASYNC,
// O_DIRECT, O_NOATIME and O_NONBLOCK, and of those an open here sets only
// O_APPEND (from oflag, kept) and O_NONBLOCK.
func setBlocking(fd, oflag int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, oflag&unix.O_APPEND)
	return err
}

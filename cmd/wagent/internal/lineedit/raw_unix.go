//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package lineedit

import "golang.org/x/sys/unix"

// Raw puts the terminal fd in raw mode for the editor: no echo, no line
// buffering, no signals from keys (Ctrl-C and Ctrl-D are keys the editor
// reads), no CR→NL on input; output processing stays on, so \n written
// by anything in the program still starts a new line. restore puts back
// what was there. crlf is false: output needs no translation.
func Raw(fd int) (restore func() error, crlf bool, err error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGet)
	if err != nil {
		return nil, false, err
	}
	t := *old
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, ioctlSet, &t); err != nil {
		return nil, false, err
	}
	return func() error { return unix.IoctlSetTermios(fd, ioctlSet, old) }, false, nil
}

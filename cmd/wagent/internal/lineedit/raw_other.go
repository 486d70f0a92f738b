//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package lineedit

import "golang.org/x/term"

// Raw puts the terminal in raw mode (golang.org/x/term's, which turns
// output processing off too: crlf is true, the editor writes \n as \r\n).
func Raw(fd int) (restore func() error, crlf bool, err error) {
	st, err := term.MakeRaw(fd)
	if err != nil {
		return nil, false, err
	}
	return func() error { return term.Restore(fd, st) }, true, nil
}

// TypedAhead is 0 here: the count of waiting bytes is not asked for (a
// key typed before the chat started reads as Ctrl-J would).
func TypedAhead(fd int) int { return 0 }

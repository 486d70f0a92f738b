package app

import (
	"errors"
	"fmt"
)

// Reason says what kind of failure an Error is, for callers that branch
// on it (the CLI's exit code, the API's status).
type Reason int

const (
	// Failed: the request was fine but could not be done (a file that
	// does not load, a store that does not open).
	Failed Reason = iota
	// Invalid: the request itself is wrong (a setting, a flag): the
	// person must change what they asked.
	Invalid
	// Locked: another process holds the store and does not answer on its
	// socket (yet).
	Locked
	// Forbidden: the principal asking may not do this (a file outside
	// the project roots, a key for an untrusted base URL).
	Forbidden
)

func (r Reason) String() string {
	switch r {
	case Invalid:
		return "invalid"
	case Locked:
		return "locked"
	case Forbidden:
		return "forbidden"
	}
	return "failed"
}

// Error is a failure of the application layer: a one-line message for a
// person and a Reason for code. Callers branch with errors.As, never on
// the text.
type Error struct {
	Reason Reason
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Errorf makes an *Error.
func Errorf(r Reason, format string, args ...any) error {
	return &Error{Reason: r, Msg: fmt.Sprintf(format, args...)}
}

// ReasonOf is err's Reason if it is (or wraps) an *Error, else Failed.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return Failed
}

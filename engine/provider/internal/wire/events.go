// Package wire holds what the HTTP providers share: reading a model's
// event stream, Retry-After parsing, transport-failure normalisation and
// the idle and cancellation handling of a streamed request.
package wire

import (
	"io"

	"github.com/wagent/wagent/internal/sse"
)

// Events reads a model's server-sent events with internal/sse, with one
// leniency the standard does not have: an event whose lines are complete
// but whose blank line never came is still dispatched at the end. The
// model streams mark their own end ([DONE], message_stop), so an answer
// that a server forgot to terminate is whole, and a stream cut before that
// mark is still refused by the parser.
type Events struct {
	r       *sse.Reader
	pending bool // the pending event was returned
}

// NewEvents returns an Events of r, with sse.DefaultMaxSize as the limit
// of one line or one event's data.
func NewEvents(r io.Reader) *Events {
	return &Events{r: sse.NewReader(r, 0)}
}

// Next returns the next event's type and data, valid until the next call.
// At the end it returns io.EOF, or the read error that ended the stream;
// a line or event over the limit is an error wrapping sse.ErrTooLong.
func (e *Events) Next() (typ, data []byte, err error) {
	ev, err := e.r.Next()
	if err == nil {
		return ev.Type, ev.Data, nil
	}
	if p, ok := e.r.Pending(); ok && !e.pending {
		e.pending = true
		return p.Type, p.Data, nil
	}
	return nil, nil, err
}

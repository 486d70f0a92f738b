// Package sse reads server-sent events (text/event-stream) as the WHATWG
// HTML standard's EventSource parsing rules say. It is the one reader in
// the module: the model providers read their streaming answers with it,
// and the API client reads a session's stream with it.
//
// The rules, in short: the stream is UTF-8, with one byte order mark
// ignored at its start; lines end in LF, CRLF or CR; a line starting with
// ':' is a comment; any other line is "field: value" (one space after the
// colon is dropped; a line without a colon is a field with an empty
// value); the fields are event, data, id and retry, others are ignored;
// the data lines of one event are joined with LF; a blank line dispatches
// the event, unless it has no data line.
//
// Unlike a browser, the reader bounds what it buffers: a line or an
// event's data longer than the limit ends the stream with ErrTooLong,
// rather than growing without end.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// DefaultMaxSize bounds one line, and one event's data, when NewReader is
// given 0. A model's tool call can arrive whole in one event, so it is
// generous.
const DefaultMaxSize = 16 << 20

// ErrTooLong ends a stream with a line, or an event's data, longer than
// the reader's limit. The error returned wraps it and says the limit.
var ErrTooLong = errors.New("sse: line or event too long")

// Event is one dispatched event. Its byte slices are valid until the next
// call of Next.
type Event struct {
	// Type is the last event field's value; empty means the default type,
	// "message".
	Type []byte
	// Data is the event's data lines joined with LF.
	Data []byte
	// ID is the stream's last event ID when the event was dispatched: set
	// by an id field of this event or of an earlier one, as the standard
	// says (a client reconnecting sends it as Last-Event-ID).
	ID string
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	max int

	buf   []byte
	start int // unread bytes are buf[start:end]
	end   int
	eof   bool
	err   error // the read error that ended the stream, if not io.EOF

	bomChecked bool
	skipLF     bool // the last line ended in CR: a leading LF belongs to it
	scanned    int  // buf[start:start+scanned] holds no line end

	// The event being built.
	data    []byte
	hasData bool
	typ     []byte

	lastID string
	idBuf  string // the id field's value, made lastID at dispatch
	retry  time.Duration

	pending Event // what Pending returns after the end
	hasPend bool
}

// NewReader returns a Reader of r that refuses a line or an event's data
// longer than maxSize bytes (0: DefaultMaxSize).
func NewReader(r io.Reader, maxSize int) *Reader {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	return &Reader{r: r, max: maxSize, buf: make([]byte, min(16<<10, maxSize+1))}
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// or the read error that ended it. An event whose blank line never came
// is not dispatched, as the standard says; Pending returns it.
func (s *Reader) Next() (Event, error) {
	for {
		line, ok, err := s.line()
		if err != nil {
			return Event{}, err
		}
		if !ok {
			if s.hasData {
				s.pending = Event{Type: s.typ, Data: s.data, ID: s.idBuf}
				s.hasPend = true
				s.hasData = false
			}
			if s.err != nil {
				return Event{}, s.err
			}
			return Event{}, io.EOF
		}
		if len(line) == 0 {
			if ev, ok := s.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if s.hasData {
				if len(s.data)+1+len(value) > s.max {
					return Event{}, s.tooLong("an event's data")
				}
				s.data = append(s.data, '\n')
				s.data = append(s.data, value...)
			} else {
				s.data = append(s.data[:0], value...)
				s.hasData = true
			}
		case "event":
			s.typ = append(s.typ[:0], value...)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.idBuf = string(value)
			}
		case "retry":
			if n, ok := digits(value); ok {
				s.retry = time.Duration(n) * time.Millisecond
			}
		}
	}
}

// dispatch ends the event at a blank line: the last event ID is updated
// whatever the event holds, and an event without data is dropped.
func (s *Reader) dispatch() (Event, bool) {
	s.lastID = s.idBuf
	typ := s.typ
	s.typ = s.typ[:0]
	if !s.hasData {
		return Event{}, false
	}
	s.hasData = false
	return Event{Type: typ, Data: s.data, ID: s.lastID}, true
}

// Pending returns, after Next returned io.EOF or a read error, the event
// whose lines were all complete but whose blank line never came. The
// standard discards it; a reader of a stream that marks its own end (a
// model's [DONE] or message_stop) may take it rather than fail an answer
// that a server forgot to terminate.
func (s *Reader) Pending() (Event, bool) {
	return s.pending, s.hasPend
}

// LastEventID returns the id of the last event dispatched (the standard's
// last event ID buffer), "" when none came.
func (s *Reader) LastEventID() string { return s.lastID }

// Retry returns the reconnection time the stream last asked for with a
// retry field, 0 when it asked for none.
func (s *Reader) Retry() time.Duration { return s.retry }

// digits parses a retry value: ASCII digits only, else it is ignored.
func digits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 0, false
	}
	return n, true
}

func (s *Reader) tooLong(what string) error {
	return fmt.Errorf("%w: %s is longer than %d bytes", ErrTooLong, what, s.max)
}

// line returns the next complete line without its terminator. ok is false
// at the end of the stream (a trailing unterminated line is dropped).
func (s *Reader) line() (line []byte, ok bool, err error) {
	for {
		if s.skipLF && s.start < s.end {
			if s.buf[s.start] == '\n' {
				s.start++
			}
			s.skipLF = false
		}
		if !s.bomChecked {
			// The BOM is three bytes, which may come in separate reads.
			if b := s.buf[s.start:s.end]; len(b) < len(bom) && bytes.HasPrefix(bom, b) && !s.eof {
				if err := s.fill(); err != nil {
					return nil, false, err
				}
				continue
			}
			if bytes.HasPrefix(s.buf[s.start:s.end], bom) {
				s.start += len(bom)
			}
			s.bomChecked = true
		}
		b := s.buf[s.start:s.end]
		// Bytes before s.scanned were searched by an earlier call and hold
		// no line end: a long line arriving in many reads is scanned once.
		if k := bytes.IndexAny(b[s.scanned:], "\r\n"); k >= 0 {
			k += s.scanned
			s.scanned = 0
			s.start += k + 1
			if b[k] == '\r' {
				switch {
				case k+1 < len(b) && b[k+1] == '\n': // CRLF
					s.start++
				case k+1 == len(b): // its LF may come with the next read
					s.skipLF = true
				}
			}
			return b[:k], true, nil
		}
		s.scanned = len(b)
		if s.eof {
			return nil, false, nil
		}
		if err := s.fill(); err != nil {
			return nil, false, err
		}
	}
}

var bom = []byte("\xEF\xBB\xBF")

// fill reads more bytes, compacting or growing the buffer first. It fails
// only when the unread bytes already exceed the limit without a line end.
func (s *Reader) fill() error {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if s.end > s.max {
			return s.tooLong("a line")
		}
		nb := make([]byte, min(2*len(s.buf), s.max+1))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for range 100 { // io.Reader may return 0, nil; do not spin forever
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.err = err
			}
			return nil
		}
		if n > 0 {
			return nil
		}
	}
	s.eof, s.err = true, io.ErrNoProgress
	return nil
}

// Package wire holds what the HTTP providers share: a server-sent events
// reader, Retry-After parsing, transport-failure normalisation and the idle
// and cancellation handling of a streamed request.
package wire

import (
	"bytes"
	"errors"
	"io"
)

// MaxLine bounds one SSE line (and one event's data). A tool call's whole
// arguments can arrive in one chunk, so it is generous; past it the stream
// is refused rather than buffered without end.
const MaxLine = 16 << 20

// ErrLineTooLong ends a stream with a line or event over MaxLine.
var ErrLineTooLong = errors.New("an event stream line is longer than 16 MiB")

// Reader splits a text/event-stream into events as the WHATWG
// server-sent events rules say: lines end in LF, CRLF or CR (a CRLF may be
// split across two reads); a line starting with ':' is a comment; "data"
// lines of one event are joined with LF; a blank line dispatches the event.
// Only the data and event fields matter here; id and retry are ignored.
type Reader struct {
	r     io.Reader
	buf   []byte
	start int // unread bytes are buf[start:end]
	end   int
	eof   bool
	err   error // the read error that ended the stream, if not io.EOF

	skipLF  bool // the last line ended in CR: a leading LF belongs to it
	scanned int  // buf[start:start+scanned] holds no line end
	data    []byte
	hasData bool
	event   []byte
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, buf: make([]byte, 16<<10)}
}

// Next returns the next event's name and data, valid until the next call.
// At the end it returns io.EOF, or the read error that ended the stream. An
// event whose last line is complete but whose blank line never came is
// still dispatched at the end; an unterminated line is dropped.
func (s *Reader) Next() (event, data []byte, err error) {
	for {
		line, ok, err := s.line()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			if s.hasData {
				s.hasData = false
				return s.event, s.data, nil
			}
			if s.err != nil {
				return nil, nil, s.err
			}
			return nil, nil, io.EOF
		}
		if len(line) == 0 {
			ev := s.event
			s.event = s.event[:0]
			if s.hasData {
				s.hasData = false
				return ev, s.data, nil
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
				if len(s.data)+1+len(value) > MaxLine {
					return nil, nil, ErrLineTooLong
				}
				s.data = append(s.data, '\n')
				s.data = append(s.data, value...)
			} else {
				s.data = append(s.data[:0], value...)
				s.hasData = true
			}
		case "event":
			s.event = append(s.event[:0], value...)
		}
	}
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

// fill reads more bytes, compacting or growing the buffer first.
func (s *Reader) fill() error {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= MaxLine {
			return ErrLineTooLong
		}
		nb := make([]byte, 2*len(s.buf))
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

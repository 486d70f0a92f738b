package openai

import (
	"bytes"
	"errors"
	"io"
)

// maxLine bounds one SSE line (and one event's data). A tool call's whole
// arguments can arrive in one chunk, so it is generous; past it the stream
// is refused rather than buffered without end.
const maxLine = 16 << 20

var errLineTooLong = errors.New("an event stream line is longer than 16 MiB")

// sseReader splits a text/event-stream into events as the WHATWG
// server-sent events rules say: lines end in LF, CRLF or CR (a CRLF may be
// split across two reads); a line starting with ':' is a comment; "data"
// lines of one event are joined with LF; a blank line dispatches the event.
// Only the data and event fields matter here; id and retry are ignored.
type sseReader struct {
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

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: r, buf: make([]byte, 16<<10)}
}

// next returns the next event's type and data. The slices are valid until
// the following call. At the end of the stream it returns io.EOF, or the
// read error that ended it. An event whose blank line never came is still
// returned at a clean end when its last line was complete; a line cut off
// by the end of the stream is dropped, as the SSE rules say.
func (s *sseReader) next() (event, data []byte, err error) {
	for {
		line, ok, err := s.line()
		if err != nil {
			return nil, nil, err
		}
		if !ok { // end of stream
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
			if s.hasData {
				s.hasData = false
				ev := s.event
				s.event = s.event[:0]
				return ev, s.data, nil
			}
			s.event = s.event[:0]
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
				if len(s.data)+1+len(value) > maxLine {
					return nil, nil, errLineTooLong
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
func (s *sseReader) line() (line []byte, ok bool, err error) {
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
func (s *sseReader) fill() error {
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= maxLine {
			return errLineTooLong
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

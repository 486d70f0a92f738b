package sse_test

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/internal/sse"
)

// ev is an Event with strings, for comparing.
type ev struct {
	Type, Data, ID string
}

// readAll reads every event, then the pending one (marked with Type
// "pending:" prefixed) and the error that ended the stream.
func readAll(r *sse.Reader) ([]ev, error) {
	var out []ev
	for {
		e, err := r.Next()
		if err != nil {
			if p, ok := r.Pending(); ok {
				out = append(out, ev{"pending:" + string(p.Type), string(p.Data), p.ID})
			}
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		out = append(out, ev{string(e.Type), string(e.Data), e.ID})
	}
}

var cases = []struct {
	name   string
	stream string
	want   []ev
}{
	{"one event", "data: hello\n\n", []ev{{"", "hello", ""}}},
	{"no space after the colon", "data:hello\n\n", []ev{{"", "hello", ""}}},
	{"only one space is dropped", "data:  two\n\n", []ev{{"", " two", ""}}},
	{"multi-line data joined with LF", "data: one\ndata: two\ndata:\ndata: four\n\n", []ev{{"", "one\ntwo\n\nfour", ""}}},
	{"CRLF line ends", "event: a\r\ndata: x\r\ndata: y\r\n\r\n", []ev{{"a", "x\ny", ""}}},
	{"CR line ends", "event: a\rdata: x\rdata: y\r\r", []ev{{"a", "x\ny", ""}}},
	{"mixed line ends", "data: a\r\ndata: b\rdata: c\n\r\n", []ev{{"", "a\nb\nc", ""}}},
	{"comments ignored", ": keep-alive\n:\ndata: x\n: between\n\n", []ev{{"", "x", ""}}},
	{"BOM at the start", "\xEF\xBB\xBFdata: x\n\n", []ev{{"", "x", ""}}},
	{"BOM only once", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n", []ev{{"", "y", ""}}},
	{"BOM later is data", "data: \xEF\xBB\xBFx\n\n", []ev{{"", "\xEF\xBB\xBFx", ""}}},
	{"event type", "event: delta\ndata: {}\n\n", []ev{{"delta", "{}", ""}}},
	{"event type does not carry over", "event: a\ndata: 1\n\ndata: 2\n\n", []ev{{"a", "1", ""}, {"", "2", ""}}},
	{"event type of a dropped event does not carry over", "event: a\n\ndata: 2\n\n", []ev{{"", "2", ""}}},
	{"event without data is not dispatched", "event: a\n\n\n\ndata: x\n\n", []ev{{"", "x", ""}}},
	{"empty data is dispatched", "data\n\ndata:\n\n", []ev{{"", "", ""}, {"", "", ""}}},
	{"id persists", "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", []ev{{"", "a", "7"}, {"", "b", "7"}, {"", "c", ""}}},
	{"id without data still sets the last id", "id: 3\n\ndata: a\n\n", []ev{{"", "a", "3"}}},
	{"id with NUL ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []ev{{"", "a", "1"}, {"", "b", "1"}}},
	{"unknown fields ignored", "foo: bar\nData: no\ndata: yes\n\n", []ev{{"", "yes", ""}}},
	{"field without colon", "data\ndata\n\n", []ev{{"", "\n", ""}}},
	{"colon in the value", "data: a: b\n\n", []ev{{"", "a: b", ""}}},
	{"unterminated event is pending", "data: a\n\ndata: b\n", []ev{{"", "a", ""}, {"pending:", "b", ""}}},
	{"unterminated line is dropped", "data: a\n\ndata: b", []ev{{"", "a", ""}}},
	{"unterminated line after complete ones", "event: x\ndata: b\ndata: c", []ev{{"pending:x", "b", ""}}},
	{"empty stream", "", nil},
	{"only a BOM", "\xEF\xBB\xBF", nil},
	{"several events", "data: 1\n\ndata: 2\n\n: c\n\ndata: 3\n\n", []ev{{"", "1", ""}, {"", "2", ""}, {"", "3", ""}}},
}

func TestReader(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(sse.NewReader(strings.NewReader(tc.stream), 0))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReaderSplitAnywhere: the events do not depend on how the bytes
// arrive, a CR and its LF or the three bytes of a BOM in separate reads
// included.
func TestReaderSplitAnywhere(t *testing.T) {
	for _, tc := range cases {
		for at := 0; at <= len(tc.stream); at++ {
			r := io.MultiReader(strings.NewReader(tc.stream[:at]), iotest.OneByteReader(strings.NewReader(tc.stream[at:])))
			got, err := readAll(sse.NewReader(r, 0))
			if err != nil {
				t.Fatalf("%s, split at %d: %v", tc.name, at, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("%s, split at %d: mismatch (-want +got):\n%s", tc.name, at, diff)
			}
		}
	}
}

func TestReaderRetry(t *testing.T) {
	r := sse.NewReader(strings.NewReader("retry: 1500\ndata: a\n\nretry: 1x\ndata: b\n\n"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if got := r.Retry(); got != 1500*time.Millisecond {
		t.Errorf("Retry() = %v, want 1.5s", got)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if got := r.Retry(); got != 1500*time.Millisecond {
		t.Errorf("Retry() after a bad retry field = %v, want 1.5s kept", got)
	}
}

func TestReaderLastEventID(t *testing.T) {
	r := sse.NewReader(strings.NewReader("id: 9\ndata: a\n\nid: 10\n\n"), 0)
	if _, err := readAll(r); err != nil {
		t.Fatal(err)
	}
	if got := r.LastEventID(); got != "10" {
		t.Errorf("LastEventID() = %q, want 10", got)
	}
}

func TestReaderBounds(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		ok     []ev // the events before the failure
	}{
		{"line at the limit", "data:" + strings.Repeat("x", 11) + "\n\n", []ev{{"", strings.Repeat("x", 11), ""}}},
		{"line over the limit", "data: 1\n\ndata:" + strings.Repeat("x", 12) + "\n\n", []ev{{"", "1", ""}}},
		{"line over the limit without an end", strings.Repeat("x", 40), nil},
		{"data over the limit in short lines", "data: 123456789\ndata: 1234567\n\n", nil},
		{"comment over the limit", ":" + strings.Repeat("x", 40) + "\n\ndata: y\n\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(sse.NewReader(strings.NewReader(tc.stream), 16))
			wantErr := strings.Contains(tc.name, "over")
			if wantErr != errors.Is(err, sse.ErrTooLong) {
				t.Fatalf("err = %v, want ErrTooLong: %v", err, wantErr)
			}
			if wantErr && !strings.Contains(err.Error(), "16 bytes") {
				t.Errorf("err = %q, want it to name the limit", err)
			}
			if diff := cmp.Diff(tc.ok, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // longer than the initial buffer
	got, err := readAll(sse.NewReader(strings.NewReader("data: "+long+"\n\n"), 0))
	if err != nil || len(got) != 1 || got[0].Data != long {
		t.Fatalf("read %d events, %v; want one of %d bytes", len(got), err, len(long))
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := sse.NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), 0)
	got, err := readAll(r)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if diff := cmp.Diff([]ev{{"", "a", ""}, {"pending:", "b", ""}}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestReaderNoProgress(t *testing.T) {
	_, err := sse.NewReader(zeroReader{}, 0).Next()
	if !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// reference parses a whole stream the plain way, straight from the
// standard's text, as the fuzz target's oracle.
func reference(stream []byte, max int) (events []ev, tooLong bool) {
	s := string(bytes.TrimPrefix(stream, []byte("\xEF\xBB\xBF")))
	lines := regexp.MustCompile("\r\n|\r|\n").Split(s, -1)
	lines = lines[:len(lines)-1] // the last piece has no line end
	var data, typ, idBuf, lastID string
	hasData := false
	for _, line := range lines {
		if len(line) > max {
			return events, true
		}
		if line == "" {
			lastID = idBuf
			if hasData {
				events = append(events, ev{typ, data, lastID})
			}
			data, typ, hasData = "", "", false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			if hasData {
				data += "\n" + value
			} else {
				data, hasData = value, true
			}
			if len(data) > max {
				return events, true
			}
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf = value
			}
		}
	}
	if hasData {
		events = append(events, ev{"pending:" + typ, data, idBuf})
	}
	return events, false
}

// FuzzReader checks the reader against the plain reference on any bytes,
// arriving in any two pieces, the second one byte at a time.
func FuzzReader(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.stream), uint16(len(tc.stream)/2))
	}
	f.Add([]byte("data: a\r"), uint16(8))
	f.Add([]byte("\xEF\xBB"), uint16(1))
	f.Add([]byte("data: 0123456789abcdef0123\n\n"), uint16(3))
	const max = 24
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		at := int(cut) % (len(stream) + 1)
		r := io.MultiReader(bytes.NewReader(stream[:at]), iotest.OneByteReader(bytes.NewReader(stream[at:])))
		got, err := readAll(sse.NewReader(r, max))
		want, tooLong := reference(stream, max)
		if err != nil && !errors.Is(err, sse.ErrTooLong) {
			t.Fatalf("err = %v", err)
		}
		if tooLong != (err != nil) {
			// The reader may refuse an over-long unterminated last line
			// that the reference never looks at.
			if !(err != nil && !tooLong) {
				t.Fatalf("ErrTooLong = %v, reference says %v", err, tooLong)
			}
			return
		}
		if tooLong {
			if len(got) > len(want) {
				t.Fatalf("read %d events before the limit, reference %d", len(got), len(want))
			}
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("mismatch (-reference +reader):\n%s", diff)
		}
	})
}

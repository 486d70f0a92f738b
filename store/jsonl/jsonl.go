// Package jsonl reads and writes a session's log as JSON lines, the file
// wagent export writes and wagent import reads: a header line, then one
// event per line, each in the form the store keeps it (so a log moves
// between stores byte for byte).
//
//	{"wagent":"session/1","session":"s1","events":42,"pipeline":"sha256:…","modules":[…],"exported":"…"}
//	{"seq":1,"type":"session/created","time":"…","data":{…}}
//	{"seq":2,"type":"inbox/spliced","time":"…","data":{…}}
//	…
//
// The header names the format's version (a reader refuses another
// major), the session, how many events follow (a truncated file is
// refused), and what the session ran with: its pipeline's digest and the
// digest of each module the pipeline names. Read checks the file's shape
// (every line one event, seqs dense from 1, the count); whether the log
// makes sense is the engine's fold's to say (engine.Import).
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wagent/wagent/store"
)

// Format is the version this package writes, in the header's "wagent".
const Format = "session/1"

// Header is the first line of the file.
type Header struct {
	// Format is "session/MAJOR"; Write sets it.
	Format string `json:"wagent"`
	// Session is the exported session's id.
	Session string `json:"session"`
	// Events is how many event lines follow; Write sets it.
	Events int `json:"events"`
	// Pipeline is the digest of the pipeline the session runs with (its
	// settings at the head: session/created, or the latest
	// pipeline/changed).
	Pipeline string `json:"pipeline,omitempty"`
	// Modules are the modules that pipeline names, with their digests, as
	// they were when the file was written.
	Modules []Module `json:"modules,omitempty"`
	// Exported is when the file was written, and By what.
	Exported time.Time `json:"exported"`
	By       string    `json:"by,omitempty"`
}

// Module is one op of the pipeline: what it uses and the SHA-256 of its
// module's bytes (hex; none for an MCP server).
type Module struct {
	Use    string `json:"use"`
	Op     string `json:"op,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// maxLine bounds a line: the largest event a store keeps, and some.
const maxLine = store.MaxEventBytes + 4096

// Write writes h (with Format and Events set) and the events.
func Write(w io.Writer, h Header, events []store.Event) error {
	h.Format, h.Events = Format, len(events)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // as the store keeps them: a log is not HTML
	if err := enc.Encode(h); err != nil {
		return err
	}
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			return fmt.Errorf("jsonl: event %d: %w", events[i].Seq, err)
		}
	}
	return bw.Flush()
}

// ErrFormat is wrapped by every error Read returns for a file that is not
// a session export.
var ErrFormat = errors.New("jsonl: not a session export")

// Read reads a file Write wrote. Errors wrap ErrFormat and name the line.
func Read(r io.Reader) (Header, []store.Event, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var h Header
	line, err := readLine(br)
	if err == io.EOF {
		return h, nil, fmt.Errorf("%w: the file is empty", ErrFormat)
	}
	if err != nil {
		return h, nil, lineErr(1, err)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || dec.More() {
		return h, nil, fmt.Errorf("%w: line 1 is not a header (%s)", ErrFormat, oneLine(err))
	}
	major, _, _ := strings.Cut(h.Format, ".")
	if major != Format {
		return h, nil, fmt.Errorf("%w: line 1: format %q; this wagent reads %s", ErrFormat, h.Format, Format)
	}
	if h.Events < 0 {
		return h, nil, fmt.Errorf("%w: line 1: %d events", ErrFormat, h.Events)
	}
	events := make([]store.Event, 0, min(h.Events, 1<<16))
	for n := 2; ; n++ {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return h, nil, lineErr(n, err)
		}
		if len(events) == h.Events {
			return h, nil, fmt.Errorf("%w: line %d: more events than the header's %d", ErrFormat, n, h.Events)
		}
		var e store.Event
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || dec.More() {
			return h, nil, fmt.Errorf("%w: line %d is not an event (%s)", ErrFormat, n, oneLine(err))
		}
		if want := uint64(len(events) + 1); e.Seq != want {
			return h, nil, fmt.Errorf("%w: line %d has seq %d, want %d (seqs are dense from 1)", ErrFormat, n, e.Seq, want)
		}
		if e.Type == "" {
			return h, nil, fmt.Errorf("%w: line %d (seq %d) has no type", ErrFormat, n, e.Seq)
		}
		events = append(events, e)
	}
	if len(events) != h.Events {
		return h, nil, fmt.Errorf("%w: the file ends after %d events; its header says %d (is it cut short?)", ErrFormat, len(events), h.Events)
	}
	return h, events, nil
}

var errLong = fmt.Errorf("a line is over %d bytes", maxLine)

// readLine returns the next line without its newline (io.EOF at the
// end); a last line without a newline is a line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxLine {
			return nil, errLong
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, err
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
	}
}

func lineErr(n int, err error) error {
	if err == errLong {
		return fmt.Errorf("%w: line %d: %v", ErrFormat, n, err)
	}
	return fmt.Errorf("jsonl: line %d: %w", n, err)
}

func oneLine(err error) string {
	if err == nil {
		return "data after the JSON object"
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

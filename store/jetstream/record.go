package jetstream

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/wagent/wagent/store"
)

// Headers of a record, the one stream message an Append or a Create writes.
// They carry what Head and Read need without decoding any event.
const (
	// hdrFormat marks a wagent record and names its layout.
	hdrFormat = "Wagent-Log"
	// hdrHead is the session's head once this record is in: the seq of its
	// last event, 0 for the creation marker.
	hdrHead = "Wagent-Head"
	// hdrCount is how many events the record holds; 0 for the marker.
	hdrCount = "Wagent-Count"
	// hdrPrev is the stream sequence of the session's previous record, so
	// that Read can walk back from the last record with exact gets.
	hdrPrev = "Wagent-Prev"
	// hdrBase is the stream sequence of the session's creation marker: no
	// record of this session (this incarnation of its id) lies before it.
	hdrBase = "Wagent-Base"

	// formatVersion is the layout this package writes and reads.
	formatVersion = "1"
)

// headerBudget bounds the encoded NATS headers of a record, with the
// Nats-Expected-* headers the publish adds (about 260 bytes at most).
const headerBudget = 1 << 10

// record is one stored message of a session, decoded as far as its
// headers. Its events stay encoded in data until someone asks for them.
type record struct {
	seq   uint64 // stream sequence of the message
	head  uint64 // session head after this record
	count uint64 // events in the record; 0 for the creation marker
	prev  uint64 // stream sequence of the previous record; 0 for the marker
	base  uint64 // stream sequence of the creation marker (seq for the marker)
	data  []byte // the events, encoded as CheckAppend does, one per line
}

// first is the seq of the record's first event (head+1 for the marker,
// which holds none).
func (r record) first() uint64 { return r.head - r.count + 1 }

// marker reports whether r is a session's creation marker.
func (r record) marker() bool { return r.count == 0 }

// markerHeader returns the headers of a creation marker.
func markerHeader() nats.Header {
	return nats.Header{
		hdrFormat: {formatVersion},
		hdrHead:   {"0"},
		hdrCount:  {"0"},
	}
}

// appendHeader returns the headers of a record of count events that follows
// the record at stream sequence prev, ends at head, and belongs to the
// incarnation created at base.
func appendHeader(head, count, prev, base uint64) nats.Header {
	return nats.Header{
		hdrFormat: {formatVersion},
		hdrHead:   {strconv.FormatUint(head, 10)},
		hdrCount:  {strconv.FormatUint(count, 10)},
		hdrPrev:   {strconv.FormatUint(prev, 10)},
		hdrBase:   {strconv.FormatUint(base, 10)},
	}
}

// joinEvents lays encoded events out as a record's payload: one per line.
// encoding/json never writes a raw newline (it escapes them in strings and
// compacts raw messages), so a newline can only be a separator.
func joinEvents(session string, enc [][]byte) ([]byte, error) {
	n := len(enc) - 1
	for _, b := range enc {
		n += len(b)
	}
	out := make([]byte, 0, n)
	for i, b := range enc {
		if bytes.IndexByte(b, '\n') >= 0 {
			return nil, fmt.Errorf("%w: append to %s: event %d encodes with a newline", store.ErrInvalid, session, i)
		}
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, b...)
	}
	return out, nil
}

// corrupt returns an ErrCorrupt error about the message at stream sequence
// seq of session. want is the event seq the message should start with,
// when the caller knows it (0 when it does not).
func corrupt(session string, want, seq uint64, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if want > 0 {
		return fmt.Errorf("%w: session %s seq %d (stream message %d): %s", store.ErrCorrupt, session, want, seq, what)
	}
	return fmt.Errorf("%w: session %s stream message %d: %s", store.ErrCorrupt, session, seq, what)
}

// parseRecord decodes the headers of the message stored at stream sequence
// seq for session. It checks everything the headers promise about each
// other; the events themselves are checked by events. want is as for
// corrupt. Errors wrap store.ErrCorrupt and name the session.
func parseRecord(session string, want, seq uint64, h nats.Header, data []byte) (record, error) {
	bad := func(format string, args ...any) (record, error) {
		return record{}, corrupt(session, want, seq, format, args...)
	}
	one := func(key string) (string, bool) {
		v := h[key]
		return strings.Join(v, ","), len(v) == 1
	}
	num := func(key string) (uint64, error) {
		v, ok := one(key)
		if !ok {
			return 0, fmt.Errorf("header %s: want one value, got %q", key, h[key])
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("header %s: %q is not a number", key, v)
		}
		return n, nil
	}
	if v, ok := one(hdrFormat); !ok || v != formatVersion {
		if len(h[hdrFormat]) == 0 {
			return bad("not a wagent record (no %s header)", hdrFormat)
		}
		return bad("record format %q, this build reads %q", v, formatVersion)
	}
	r := record{seq: seq, data: data}
	var err error
	if r.head, err = num(hdrHead); err != nil {
		return bad("%v", err)
	}
	if r.count, err = num(hdrCount); err != nil {
		return bad("%v", err)
	}
	if r.marker() {
		switch {
		case r.head != 0:
			return bad("creation marker with head %d", r.head)
		case len(h[hdrPrev]) > 0 || len(h[hdrBase]) > 0:
			return bad("creation marker with a previous record")
		case len(data) > 0:
			return bad("creation marker with %d bytes of events", len(data))
		}
		r.base = seq
		return r, nil
	}
	if r.prev, err = num(hdrPrev); err != nil {
		return bad("%v", err)
	}
	if r.base, err = num(hdrBase); err != nil {
		return bad("%v", err)
	}
	switch {
	case r.count > store.MaxAppendEvents:
		return bad("record of %d events, the limit is %d", r.count, store.MaxAppendEvents)
	case r.count > r.head:
		return bad("record of %d events ends at seq %d", r.count, r.head)
	case r.prev == 0 || r.prev >= seq:
		return bad("previous record at stream message %d", r.prev)
	case r.base == 0 || r.base > r.prev:
		return bad("creation marker at stream message %d, after the previous record at %d", r.base, r.prev)
	case uint64(bytes.Count(data, []byte{'\n'})) != r.count-1:
		return bad("%d events promised, %d lines stored", r.count, bytes.Count(data, []byte{'\n'})+1)
	}
	return r, nil
}

// events decodes the record's events whose seqs lie in [from, to] and
// appends them to out.
func (r record) events(session string, from, to uint64, out []store.Event) ([]store.Event, error) {
	rest := r.data
	for seq := r.first(); seq <= r.head && seq <= to; seq++ {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		}
		if seq < from {
			continue
		}
		e, err := store.DecodeEvent(session, seq, line)
		if err != nil {
			return out, fmt.Errorf("%w (stream message %d)", err, r.seq)
		}
		out = append(out, e)
	}
	return out, nil
}

// Subjects. A session's subject is the store's prefix, a dot, and the
// session's token: its id with the two characters a subject token cannot
// carry safely percent-encoded, '.' as %2E and ':' as %3A. Session ids
// never contain '%' (see store.ValidSessionID), so the mapping is injective
// without escaping anything else, and a token decodes back to exactly one
// id. Ids never contain '*', '>' or whitespace either, which a subject
// could not hold at all.

// sessionToken returns the subject token of a valid session id.
func sessionToken(id string) string {
	if !strings.ContainsAny(id, ".:") {
		return id
	}
	var b strings.Builder
	b.Grow(len(id) + 8)
	for i := 0; i < len(id); i++ {
		switch id[i] {
		case '.':
			b.WriteString("%2E")
		case ':':
			b.WriteString("%3A")
		default:
			b.WriteByte(id[i])
		}
	}
	return b.String()
}

// sessionOfToken is the inverse of sessionToken. It accepts only tokens
// sessionToken writes: exactly the two escapes, upper case, decoding to a
// valid id.
func sessionOfToken(tok string) (string, bool) {
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		switch tok[i+1 : min(i+3, len(tok))] {
		case "2E":
			b.WriteByte('.')
		case "3A":
			b.WriteByte(':')
		default:
			return "", false
		}
		i += 2
	}
	id := b.String()
	if store.ValidSessionID(id) != nil || sessionToken(id) != tok {
		return "", false // not valid, or not how the id is written (a raw ':')
	}
	return id, true
}

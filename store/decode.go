package store

import (
	"bytes"
	"encoding/json"
	"math"
	"unicode/utf8"
)

// decodeCanonical decodes b if it is laid out exactly as json.Marshal lays
// out an Event (as CheckAppend encodes every stored event): the keys seq,
// type, turn, step, time, data in that order, turn, step and data optional,
// no spaces around the envelope, no escapes in the strings. It returns false
// for anything else, and DecodeEvent then falls back to encoding/json, which
// decodes every layout the same way but about three times slower, mostly in
// scanning the document twice through reflection. Reading a long session is
// dominated by this decoding. FuzzDecodeCanonical checks that the two agree.
func decodeCanonical(b []byte) (Event, bool) {
	var e Event
	p := canonical{b: b}
	if !p.lit(`{"seq":`) {
		return Event{}, false
	}
	var ok bool
	if e.Seq, ok = p.uint(); !ok {
		return Event{}, false
	}
	if !p.lit(`,"type":`) {
		return Event{}, false
	}
	if e.Type, ok = p.str(); !ok {
		return Event{}, false
	}
	if p.lit(`,"turn":`) {
		if e.Turn, ok = p.int(); !ok {
			return Event{}, false
		}
	}
	if p.lit(`,"step":`) {
		if e.Step, ok = p.int(); !ok {
			return Event{}, false
		}
	}
	if !p.lit(`,"time":`) {
		return Event{}, false
	}
	start := p.i
	if _, ok = p.str(); !ok {
		return Event{}, false
	}
	// The very method encoding/json calls with the quoted literal.
	if err := e.Time.UnmarshalJSON(b[start:p.i]); err != nil {
		return Event{}, false
	}
	if p.lit(`,"data":`) {
		// The rest up to the closing brace must be one JSON value, with no
		// space around it (encoding/json would trim the space).
		if len(b) < p.i+2 || b[len(b)-1] != '}' {
			return Event{}, false
		}
		v := b[p.i : len(b)-1]
		if isSpace(v[0]) || isSpace(v[len(v)-1]) || !json.Valid(v) {
			return Event{}, false
		}
		e.Data = bytes.Clone(v)
		p.i = len(b) - 1
	}
	if !p.lit("}") || p.i != len(b) {
		return Event{}, false
	}
	return e, true
}

type canonical struct {
	b []byte
	i int
}

// lit consumes s if the input continues with it.
func (p *canonical) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str consumes a string without escapes, control bytes or invalid UTF-8
// (encoding/json would rewrite those).
func (p *canonical) str() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[start:j]
			if !utf8.Valid(s) {
				return "", false
			}
			p.i = j + 1
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// uint consumes a JSON integer without sign, fraction or exponent that fits
// in a uint64.
func (p *canonical) uint() (uint64, bool) {
	start := p.i
	var n uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
		p.i++
	}
	digits := p.i - start
	if digits == 0 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	return n, true
}

// int consumes a JSON integer that fits in an int.
func (p *canonical) int() (int, bool) {
	neg := p.lit("-")
	n, ok := p.uint()
	if !ok {
		return 0, false
	}
	switch {
	case !neg && n <= math.MaxInt:
		return int(n), true
	case neg && n <= uint64(math.MaxInt)+1:
		return int(-n), true // wraps to math.MinInt for the largest n
	}
	return 0, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

package hostabi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file is a small, allocation-light JSON reader and writer for the
// ABI's own documents (views, messages, effects). It exists because
// reflection-based encoding/json dominates a Go guest's cost per call (see
// RATIONALE.md in this package); the host uses it too, so both sides share one codec.
//
// The grammar is RFC 8259. Differences from encoding/json, on purpose:
// object keys match exactly (encoding/json folds case), and a document
// must be a single value.

// ErrSyntax is wrapped by every decoding error of the lean codec.
var ErrSyntax = errors.New("malformed JSON")

// reader decodes a document in place. Decoders call its methods as they
// go; there is no separate tokenizing pass (in Go compiled to wasm such a
// pass measured slower than this).
type reader struct {
	b []byte
	i int
	// alias makes strings and raw values point into b instead of copying.
	alias bool
	// depth bounds nesting (0: maxDepth).
	depth int
}

func (d *reader) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrSyntax, d.i, fmt.Sprintf(format, args...))
}

func (d *reader) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte (0 at the end). The
// common case, no white space, is inlined: in a Go guest every call
// costs (see RATIONALE.md).
func (d *reader) peek() byte {
	if d.i < len(d.b) && d.b[d.i] > ' ' {
		return d.b[d.i]
	}
	return d.peekSpace()
}

func (d *reader) peekSpace() byte {
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return c
		}
	}
	return 0
}

// end checks that only white space is left.
func (d *reader) end() error {
	if d.ws(); d.i < len(d.b) {
		return d.errorf("data after the value")
	}
	return nil
}

func (d *reader) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// null consumes a null literal if one is next.
func (d *reader) null() bool {
	if d.peek() == 'n' {
		return d.lit("null")
	}
	return false
}

// object reads the opening brace of an object; it reports false for null.
func (d *reader) object() (bool, error) {
	switch d.peek() {
	case '{':
		d.i++
		return true, nil
	case 'n':
		if d.lit("null") {
			return false, nil
		}
	}
	return false, d.errorf("want an object")
}

// key returns the next key of an object, or ok=false at its closing brace.
// first tells whether no member has been read yet.
func (d *reader) key(first *bool) (key []byte, ok bool, err error) {
	// The fast path reads a key as the codec writes it, `,"name":` (or
	// `"name":` first), in a few branches; anything else (white space,
	// escapes, the end, errors) takes the general path below.
	b, i := d.b, d.i
	if !*first && i < len(b) && b[i] == ',' {
		i++
	}
	if (i > d.i || *first) && i < len(b) && b[i] == '"' {
		// plain's first word, inlined: most keys end in it.
		j := len(b)
		if i+9 <= len(b) {
			if t := stops(binary.LittleEndian.Uint64(b[i+1:])); t != 0 {
				j = i + 1 + bits.TrailingZeros64(t)/8
			}
		}
		if j == len(b) {
			j = plain(b, i+1)
		}
		if j+1 < len(b) && b[j] == '"' && b[j+1] == ':' {
			*first = false
			d.i = j + 2
			return b[i+1 : j], true, nil
		}
	}
	c := d.peek()
	if c == '}' {
		d.i++
		return nil, false, nil
	}
	if !*first {
		if c != ',' {
			return nil, false, d.errorf("want ',' or '}' in object")
		}
		d.i++
		c = d.peek()
	}
	*first = false
	if c != '"' {
		return nil, false, d.errorf("want a string key")
	}
	// Keys rarely need unescaping: read them here rather than through
	// strBytes, a call fewer per key.
	if j := plain(d.b, d.i+1); j < len(d.b) && d.b[j] == '"' {
		key, d.i = d.b[d.i+1:j], j+1
	} else if key, err = d.strBytes(nil); err != nil {
		return nil, false, err
	}
	if d.peek() != ':' {
		return nil, false, d.errorf("want ':' after key")
	}
	d.i++
	return key, true, nil
}

// array reads the opening bracket of an array; it reports false for null.
func (d *reader) array() (bool, error) {
	switch d.peek() {
	case '[':
		d.i++
		return true, nil
	case 'n':
		if d.lit("null") {
			return false, nil
		}
	}
	return false, d.errorf("want an array")
}

// elem reports whether another array element follows.
func (d *reader) elem(first *bool) (bool, error) {
	c := d.peek()
	if c == ']' {
		d.i++
		return false, nil
	}
	if !*first {
		if c != ',' {
			return false, d.errorf("want ',' or ']' in array")
		}
		d.i++
		if d.peek() == ']' {
			return false, d.errorf("trailing comma in array")
		}
	}
	*first = false
	return true, nil
}

// str reads a string (null gives "").
func (d *reader) str() (string, error) {
	c := d.peek()
	if c == 'n' && d.lit("null") {
		return "", nil
	}
	if c != '"' {
		return "", d.errorf("want a string")
	}
	start := d.i + 1
	// Fast path: no escapes, ASCII only.
	if j := plain(d.b, start); j < len(d.b) && d.b[j] == '"' {
		d.i = j + 1
		if d.alias {
			return unsafe.String(unsafe.SliceData(d.b[start:]), j-start), nil
		}
		return string(d.b[start:j]), nil
	}
	b, err := d.strBytes(nil)
	return string(b), err
}

// plain returns the index of the first byte of b at or after j that ends
// the fast path of a string: a quote, a backslash, a control character or
// a byte of a multi-byte UTF-8 sequence; len(b) if there is none. It looks
// at eight bytes at a time, which in a Go guest is several times faster
// than a byte at a time on the keys and short strings views are made of.
func plain(b []byte, j int) int {
	for ; j+8 <= len(b); j += 8 {
		if t := stops(binary.LittleEndian.Uint64(b[j:])); t != 0 {
			return j + bits.TrailingZeros64(t)/8
		}
	}
	for ; j < len(b); j++ {
		if c := b[j]; c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return j
		}
	}
	return j
}

// stops sets the high bit of each byte of x that is >= 0x80, < 0x20, '"'
// or '\\' (a byte that is 0 after the xor borrows in the subtraction).
// Borrows only ever flag bytes above a flagged one, so the lowest flagged
// byte is the first that ends the fast path.
func stops(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return (x | (x - 0x20*ones) | ((x ^ '"'*ones) - ones) | ((x ^ '\\'*ones) - ones)) & highs
}

// strBytes reads a string, unescaping it into dst (or aliasing the input
// when nothing needs unescaping). Invalid UTF-8 becomes U+FFFD, as in
// encoding/json.
func (d *reader) strBytes(dst []byte) ([]byte, error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, d.errorf("want a string")
	}
	d.i++
	start := d.i
	j := plain(d.b, start)
	if j < len(d.b) && d.b[j] == '"' {
		d.i = j + 1
		return d.b[start:j], nil
	}
	// What comes before j needs no unescaping.
	out := append(dst[:0], d.b[start:j]...)
	d.i = j
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return out, nil
		case c < 0x20:
			return nil, d.errorf("control character in string")
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return nil, d.errorf("unterminated escape")
			}
			e := d.b[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return nil, d.errorf("bad \\u escape")
				}
				if utf16.IsSurrogate(r) {
					r2 := utf8.RuneError
					save := d.i
					if len(d.b)-d.i >= 2 && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
						d.i += 2
						if x, ok := d.hex4(); ok {
							r2 = x
						} else {
							return nil, d.errorf("bad \\u escape")
						}
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						r = utf8.RuneError
						d.i = save
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return nil, d.errorf("bad escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, d.b[d.i:d.i+n]...)
			}
			d.i += n
		}
	}
	return nil, d.errorf("unterminated string")
}

func (d *reader) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}

// number scans a JSON number and returns its text. It works on locals
// and stores the offset once: in a Go guest every d.i++ is a store to
// linear memory.
func (d *reader) number() ([]byte, error) {
	d.peek()
	b, start := d.b, d.i
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		d.i = i
		return nil, d.errorf("want a number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == n {
			d.i = i
			return nil, d.errorf("want digits after '.'")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		n := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == n {
			d.i = i
			return nil, d.errorf("want digits in exponent")
		}
	}
	d.i = i
	return b[start:i], nil
}

// int reads an integer (null gives 0). Fractions and exponents are refused,
// as encoding/json refuses them for integer fields.
func (d *reader) int(bits int) (int64, error) {
	if d.null() {
		return 0, nil
	}
	num, err := d.number()
	if err != nil {
		return 0, err
	}
	// Most numbers are small plain integers: no strconv, no allocation.
	if len(num) <= 18 {
		neg := num[0] == '-'
		digits := num
		if neg {
			digits = num[1:]
		}
		var n int64
		ok := len(digits) > 0
		for _, c := range digits {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if ok {
			if neg {
				n = -n
			}
			if bits >= 64 || (n >= -(1<<(bits-1)) && n < 1<<(bits-1)) {
				return n, nil
			}
		}
	}
	n, perr := strconv.ParseInt(string(num), 10, bits)
	if perr != nil {
		return 0, d.errorf("number %s is not a %d-bit integer", num, bits)
	}
	return n, nil
}

// bool reads true or false (null gives false).
func (d *reader) bool() (bool, error) {
	switch d.peek() {
	case 't':
		if d.lit("true") {
			return true, nil
		}
	case 'f':
		if d.lit("false") {
			return false, nil
		}
	case 'n':
		if d.lit("null") {
			return false, nil
		}
	}
	return false, d.errorf("want true or false")
}

// skip reads any value and returns its bytes. Objects and arrays are
// walked in a loop with a stack of the open ones rather than by
// recursion: in a Go guest a call per member costs more than the member.
func (d *reader) skip(depth int) ([]byte, error) {
	limit := d.depth
	if limit == 0 {
		limit = maxDepth
	}
	if depth >= limit {
		return nil, d.errorf("nested deeper than %d", limit)
	}
	c := d.peek()
	start := d.i
	if c != '{' && c != '[' {
		if err := d.scalar(c); err != nil {
			return nil, err
		}
		return d.b[start:d.i], nil
	}
	var small [32]byte
	open := append(small[:0], c) // the brackets of the containers being read
	d.i++
	first := true
	for {
		var more bool
		var err error
		if open[len(open)-1] == '{' {
			_, more, err = d.key(&first)
		} else {
			more, err = d.elem(&first)
		}
		if err != nil {
			return nil, err
		}
		if !more {
			// The container closed: carry on in the one around it.
			if open = open[:len(open)-1]; len(open) == 0 {
				return d.b[start:d.i], nil
			}
			first = false
			continue
		}
		// A member or element follows, one level deeper.
		if depth+len(open) >= limit {
			return nil, d.errorf("nested deeper than %d", limit)
		}
		if c = d.peek(); c == '{' || c == '[' {
			open = append(open, c)
			d.i++
			first = true
			continue
		}
		if err := d.scalar(c); err != nil {
			return nil, err
		}
	}
}

// scalar reads a value that is not an object or an array; c is its first
// byte, at d.i.
func (d *reader) scalar(c byte) error {
	switch {
	case c == '"':
		if j := plain(d.b, d.i+1); j < len(d.b) && d.b[j] == '"' {
			d.i = j + 1
		} else if _, err := d.strBytes(nil); err != nil {
			return err
		}
	case c == 't':
		if !d.lit("true") {
			return d.errorf("bad literal")
		}
	case c == 'f':
		if !d.lit("false") {
			return d.errorf("bad literal")
		}
	case c == 'n':
		if !d.lit("null") {
			return d.errorf("bad literal")
		}
	case c == '-' || ('0' <= c && c <= '9'):
		if _, err := d.number(); err != nil {
			return err
		}
	default:
		return d.errorf("want a value")
	}
	return nil
}

// raw reads any value and returns it (a copy unless aliasing); null gives
// nil, like encoding/json does for json.RawMessage fields.
func (d *reader) raw() ([]byte, error) {
	v, err := d.skip(0)
	if err != nil {
		return nil, err
	}
	if string(v) == "null" {
		return nil, nil
	}
	if d.alias {
		return v[:len(v):len(v)], nil
	}
	return append([]byte(nil), v...), nil
}

func (d *reader) strings() ([]string, error) {
	ok, err := d.array()
	if err != nil || !ok {
		return nil, err
	}
	out := []string{}
	first := true
	for {
		more, err := d.elem(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
}

// maxDepth bounds nesting in host-made documents, as encoding/json does.
// Guest output is held to MaxEffectDepth.
const maxDepth = 10000

// MaxEffectDepth bounds how deeply a guest's effects document may nest
// (ABI.md §5): the effect list, an effect, a tool and its parameters'
// JSON Schema, which has room for 60 levels.
const MaxEffectDepth = 64

// CheckDepth reports whether the JSON text b nests at most max levels of
// arrays and objects. It looks only at brackets outside strings, so it is
// cheap to run before a decoder that recurses; b need not be valid JSON.
func CheckDepth(b []byte, max int) error {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return fmt.Errorf("%w: nested deeper than %d", ErrSyntax, max)
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// writer helpers.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD
// and <, >, & are left as they are (the ABI is not HTML).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	// The bytes plain skips are written as they are.
	sb := unsafe.Slice(unsafe.StringData(s), len(s))
	start := 0
	for i := 0; i < len(s); {
		if i = plain(sb, i); i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendKey(dst []byte, first *bool, key string) []byte {
	if !*first {
		dst = append(dst, ',')
	}
	*first = false
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

func appendStrings(dst []byte, list []string) []byte {
	if list == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// appendRaw appends a raw JSON value; empty means null. The value is
// copied as it is: callers hand in valid JSON (it came from a decoder or
// from json.Marshal).
func appendRaw(dst, raw []byte) []byte {
	if len(raw) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, raw...)
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

func toInt(n int64) int {
	if n > math.MaxInt || n < math.MinInt {
		return 0
	}
	return int(n)
}

// Field returns the raw JSON value of key in the top-level object doc, for
// ops that need one value out of a config or tool arguments without a
// reflection-based decoder. It reports false when doc is not an object or
// has no such key; the last duplicate wins. The value shares doc's memory.
func Field(doc []byte, key string) ([]byte, bool) {
	d := &reader{b: doc}
	ok, err := d.object()
	if err != nil || !ok {
		return nil, false
	}
	var found []byte
	first := true
	for {
		k, more, err := d.key(&first)
		if err != nil {
			return nil, false
		}
		if !more {
			break
		}
		v, err := d.skip(0)
		if err != nil {
			return nil, false
		}
		if string(k) == key {
			found = v
		}
	}
	if d.end() != nil || found == nil {
		return nil, false
	}
	return found, true
}

// String decodes a raw JSON string (null gives "").
func String(raw []byte) (string, error) {
	d := &reader{b: raw}
	s, err := d.str()
	if err != nil {
		return "", err
	}
	return s, d.end()
}

// Strings decodes a raw JSON array of strings (null gives nil).
func Strings(raw []byte) ([]string, error) {
	d := &reader{b: raw}
	s, err := d.strings()
	if err != nil {
		return nil, err
	}
	return s, d.end()
}

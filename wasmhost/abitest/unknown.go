package abitest

import (
	"github.com/wagent/wagent/wasmhost"
)

// Keys a later ABI minor might add, with values that take a real JSON
// parser to skip: nesting, every kind of scalar, escapes, and brackets
// inside strings. Their names are none of the ABI's.
const (
	unknownFirst = `"abitest_future_a":{"nested":[1,-2.5e3,0.125E-2,true,false,null,"s \"q\" \\ \u00e9 \ud83c\udf89 \/"],"empty":{},"lists":[[],[{}],[[1]]]},`
	unknownLast  = `,"abitest_future_z":[0.5,"}]\"{[",{"k":"{[","n":-0}]`
)

// addUnknownKeys is a wasmhost.DocumentFilter: it adds unknownFirst at the
// start and unknownLast at the end of every object of a view or message
// document, except inside the op's config and a call's arguments (which
// are not the ABI's to extend). Everything else is copied byte for byte.
func addUnknownKeys(kind wasmhost.Document, doc []byte) []byte {
	out := make([]byte, 0, len(doc)*3)
	w := &walker{in: doc, out: out}
	w.value(true)
	w.out = append(w.out, w.in[w.pos:]...)
	return w.out
}

type walker struct {
	in  []byte
	pos int
	out []byte
}

func (w *walker) ws() {
	for w.pos < len(w.in) {
		switch w.in[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.out = append(w.out, w.in[w.pos])
			w.pos++
		default:
			return
		}
	}
}

// str copies a string and returns its raw bytes (without the quotes).
func (w *walker) str() []byte {
	start := w.pos
	w.pos++ // the opening quote
	for w.pos < len(w.in) {
		c := w.in[w.pos]
		w.pos++
		if c == '\\' {
			w.pos++
			continue
		}
		if c == '"' {
			break
		}
	}
	w.out = append(w.out, w.in[start:w.pos]...)
	return w.in[start+1 : w.pos-1]
}

// value copies one value; insert says whether objects in it get the
// unknown keys.
func (w *walker) value(insert bool) {
	w.ws()
	if w.pos >= len(w.in) {
		return
	}
	switch w.in[w.pos] {
	case '"':
		w.str()
	case '{':
		w.out = append(w.out, '{')
		w.pos++
		w.ws()
		empty := w.pos < len(w.in) && w.in[w.pos] == '}'
		if insert {
			if empty {
				w.out = append(w.out, unknownFirst[:len(unknownFirst)-1]...)
			} else {
				w.out = append(w.out, unknownFirst...)
			}
		}
		for w.pos < len(w.in) && w.in[w.pos] != '}' {
			w.ws()
			key := string(w.str())
			w.ws()
			w.out = append(w.out, ':')
			w.pos++ // the colon
			w.value(insert && key != "config" && key != "arguments")
			w.ws()
			if w.pos < len(w.in) && w.in[w.pos] == ',' {
				w.out = append(w.out, ',')
				w.pos++
			}
		}
		if insert {
			w.out = append(w.out, unknownLast...)
		}
		w.out = append(w.out, '}')
		w.pos++
	case '[':
		w.out = append(w.out, '[')
		w.pos++
		for w.pos < len(w.in) && w.in[w.pos] != ']' {
			w.value(insert)
			w.ws()
			if w.pos < len(w.in) && w.in[w.pos] == ',' {
				w.out = append(w.out, ',')
				w.pos++
			}
			w.ws()
		}
		w.out = append(w.out, ']')
		w.pos++
	default: // a number, true, false or null
		start := w.pos
		for w.pos < len(w.in) {
			c := w.in[w.pos]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			w.pos++
		}
		w.out = append(w.out, w.in[start:w.pos]...)
	}
}

package hostabi

import (
	"strconv"
	"strings"
)

// Reading the documents an op decodes itself (its config, a tool call's
// arguments) without reflection, beside Field, String and Strings: Members
// walks an object once, and Int, Float and Bool read one value. The guest
// kit's argument and config decoding is built on these.

// Members calls each for every member of the JSON object doc, in order,
// with its key and its raw value (which may share doc's memory); null is
// an object without members. It stops at the first error each returns,
// and fails when doc is malformed or not an object.
func Members(doc []byte, each func(key, value []byte) error) error {
	d := &reader{b: doc}
	ok, err := d.object()
	if err != nil {
		return err
	}
	for first := true; ok; {
		k, more, err := d.key(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		v, err := d.skip(0)
		if err != nil {
			return err
		}
		if err := each(k, v); err != nil {
			return err
		}
	}
	return d.end()
}

// Int decodes a raw JSON integer (null gives 0); a fraction or an
// exponent is refused, as encoding/json refuses it for an int.
func Int(raw []byte) (int64, error) {
	d := &reader{b: raw}
	n, err := d.int(64)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Float decodes a raw JSON number (null gives 0).
func Float(raw []byte) (float64, error) {
	d := &reader{b: raw}
	if d.null() {
		return 0, d.end()
	}
	num, err := d.number()
	if err != nil {
		return 0, err
	}
	if err := d.end(); err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return 0, d.errorf("number %s is out of range", num)
	}
	return f, nil
}

// Bool decodes a raw JSON true or false (null gives false).
func Bool(raw []byte) (bool, error) {
	d := &reader{b: raw}
	b, err := d.bool()
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return false, err
	}
	return b, nil
}

// AppendString appends s to dst as a JSON string, as the codec writes
// strings (invalid UTF-8 becomes U+FFFD; <, > and & stay as they are).
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

// Clip shortens s to at most n bytes of whole runes, saying how long it
// was: for a message, the host's or an op's, that quotes what the other
// side sent (a URL, a path, a command line), which may be megabytes.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "… (" + strconv.Itoa(len(s)) + " bytes in all)"
}

package render

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Text from guests and models reaches a terminal through here. An op's
// log line, a fault message, a model's answer or a manifest field may hold
// escape sequences that clear the screen, set the window title or draw a
// fake "approved" line; human output shows every such character escaped.
// Only the caller's own sequences (values of type ANSI) and format strings
// are written as they are. JSON output is encoded by encoding/json, which
// escapes control characters itself.

// ANSI is a terminal sequence of the caller's own, written as it is.
type ANSI string

// ClearLine returns the cursor to the start of the line and clears it.
const ClearLine ANSI = "\r\x1b[2K"

// Safe returns s as it may be shown on a terminal: control characters
// other than newline and tab, C1 controls, the Unicode controls that
// reorder text (bidirectional overrides and isolates) and invalid UTF-8 are
// written as Go-style escapes (\x1b, \a, \r, \u202e).
func Safe(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= utf8.RuneSelf || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			break
		}
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\a':
			b.WriteString(`\a`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, reorders(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// reorders reports whether r is a Unicode control that changes the order
// in which a terminal shows the text around it.
func reorders(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// safeArg is an argument made safe, formatted with its verb.
type safeArg string

// Format writes the safe text under the verb and flags it was given; %q
// quotes the original, which Go's quoting escapes by itself.
func (s safeArg) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, fmt.FormatString(f, verb), string(s))
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), Safe(string(s)))
}

func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case ANSI:
			out[i] = string(v)
		case string:
			out[i] = safeArg(v)
		case []byte:
			out[i] = safeArg(v)
		case []string:
			q := make([]string, len(v))
			for j, s := range v {
				q[j] = Safe(s)
			}
			out[i] = q
		case error:
			out[i] = safeArg(v.Error())
		case fmt.Stringer:
			out[i] = safeArg(v.String())
		default:
			out[i] = a
		}
	}
	return out
}

// Fprintf is fmt.Fprintf for human output: the format is the caller's
// own; every argument but an ANSI one is made safe (see Safe).
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, safeArgs(args)...)
}

// Fprintln is fmt.Fprintln for human output.
func Fprintln(w io.Writer, args ...any) (int, error) { return fmt.Fprintln(w, safeArgs(args)...) }

// Fprint is fmt.Fprint for human output.
func Fprint(w io.Writer, args ...any) (int, error) { return fmt.Fprint(w, safeArgs(args)...) }

// Package lineedit is the chat's line editor: it owns the terminal for
// the chat's whole life, reading keys while a line is edited, while a turn
// streams and while an approval prompt waits, and keeps the line being
// typed drawn below whatever is printed meanwhile.
//
// It is small and the project's own because the chat needs what the line
// editors for Go do not give: they read the terminal only inside a
// ReadLine call (so keys typed while a turn streams are read by the
// terminal's cooked mode, echoed over the answer, lost on Ctrl-C, and a
// Ctrl-D there becomes a NUL at the start of the next line), they submit
// each line of a bracketed paste as its own line, and they cannot take a
// single key (an approval's y or n) without Enter. Here one goroutine
// decodes the terminal's bytes into keys all the time (Decode), the caller
// decides what each key means in its current state, and Editor draws the
// input area and edits its text.
//
// The terminal is put in raw mode with output processing left on (Raw),
// so text printed by the rest of the program keeps its line breaks.
package lineedit

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// Editor is the input area at the bottom of the terminal and the text
// being edited in it. Everything else the program prints goes through
// Output, which prints it above the input area and draws the area again
// below it. Its methods are safe to call from several goroutines.
type Editor struct {
	mu      sync.Mutex
	out     io.Writer
	width   func() int
	prompt  string // may hold the program's own colour sequences
	promptW int
	text    []rune
	pos     int
	hist    *History
	hidx    int    // the history entry shown (-1: the line being typed)
	draft   []rune // the line being typed while history is browsed

	visible bool // the input area is to be shown
	// hideEmpty: shown only while there is text
	hideEmpty bool
	drawn     bool        // it is on the screen; the cursor is saved where output goes on
	midLine   bool        // what was printed does not end a line
	curRow    int         // the cursor's row within the input area
	crlf      bool        // output needs \n written as \r\n (no output processing)
	later     *time.Timer // draws the area again after output
}

// New returns an editor drawing on out (the terminal), whose width in
// columns width gives (0: 80), with history hist (nil: none).
func New(out io.Writer, width func() int, hist *History) *Editor {
	if hist == nil {
		hist = &History{}
	}
	return &Editor{out: out, width: width, hist: hist, hidx: -1}
}

// SetCRLF makes the editor write \n as \r\n, for a terminal whose output
// processing is off.
func (e *Editor) SetCRLF(on bool) { e.mu.Lock(); e.crlf = on; e.mu.Unlock() }

// Output is a writer for everything the program prints: it goes above the
// input area.
func (e *Editor) Output() io.Writer { return output{e} }

type output struct{ e *Editor }

func (o output) Write(b []byte) (int, error) {
	e := o.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.erase()
	_, err := e.write(b)
	if len(b) > 0 {
		e.midLine = !endsLine(b)
	}
	// The area comes back once the output pauses: text printed in pieces
	// (a line in several writes, a streamed answer) is not cut by it.
	if e.later == nil {
		e.later = time.AfterFunc(redrawAfter, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.later = nil
			e.draw()
		})
	}
	return len(b), err
}

// redrawAfter is how long output pauses before the input area is drawn
// again below it.
const redrawAfter = 15 * time.Millisecond

// Terminal says the output is a terminal (term.IsTerminal asks).
func (o output) Terminal() bool { return true }

// endsLine reports whether the cursor is at the start of a line after b
// is written: b's last visible character is a line break or a carriage
// return (a cleared spinner line is one).
func endsLine(b []byte) bool {
	for len(b) > 0 {
		// Drop a trailing CSI sequence (colour, line clearing).
		if i := bytes.LastIndexByte(b, 0x1b); i >= 0 && i+1 < len(b) && b[i+1] == '[' && isFinal(b[len(b)-1]) && !bytes.ContainsAny(b[i+2:len(b)-1], "\r\n") {
			b = b[:i]
			continue
		}
		c := b[len(b)-1]
		return c == '\n' || c == '\r'
	}
	return false
}

func isFinal(c byte) bool { return c >= 0x40 && c <= 0x7e }

func (e *Editor) write(b []byte) (int, error) {
	if e.crlf && bytes.IndexByte(b, '\n') >= 0 {
		b = bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
	}
	return e.out.Write(b)
}

// Print writes s above the input area as whole lines: from the start of
// a line, ending one.
func (e *Editor) Print(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.erase()
	if e.midLine {
		e.write([]byte("\n"))
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	e.write([]byte(s))
	e.midLine = false
	e.draw()
}

// Show draws the input area (and keeps it drawn); Hide takes it off the
// screen.
func (e *Editor) Show() { e.mu.Lock(); e.visible = true; e.redraw(); e.mu.Unlock() }

// Hide takes the input area off the screen.
func (e *Editor) Hide() { e.mu.Lock(); e.erase(); e.visible = false; e.mu.Unlock() }

// SetPrompt sets the prompt (it may hold the program's colour sequences;
// its visible width is counted without them).
func (e *Editor) SetPrompt(p string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.prompt, e.promptW = p, StringWidth(stripCSI(p))
	e.redraw()
}

// Text is the text being edited.
func (e *Editor) Text() string { e.mu.Lock(); defer e.mu.Unlock(); return string(e.text) }

// SetText replaces the text being edited, the cursor at its end.
func (e *Editor) SetText(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.text = []rune(s)
	e.pos = len(e.text)
	e.hidx = -1
	e.redraw()
}

// Edit applies an editing key to the text and reports whether k was one
// (Enter, Interrupt and EOF are not: what they do is the caller's).
func (e *Editor) Edit(k Key) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, p := e.text, e.pos
	switch k.Code {
	case Rune:
		if e.echo(k.Rune) {
			return true
		}
		e.insert([]rune{k.Rune})
	case Paste:
		e.insert([]rune(k.Text))
	case Newline:
		e.insert([]rune{'\n'})
	case Backspace:
		if p > 0 {
			e.text = append(t[:p-1:p-1], t[p:]...)
			e.pos--
		}
	case Delete:
		if p < len(t) {
			e.text = append(t[:p:p], t[p+1:]...)
		}
	case Left:
		e.pos = max(0, p-1)
	case Right:
		e.pos = min(len(t), p+1)
	case WordLeft:
		e.pos = wordStart(t, p)
	case WordRight:
		for p < len(t) && !isWord(t[p]) {
			p++
		}
		for p < len(t) && isWord(t[p]) {
			p++
		}
		e.pos = p
	case Home:
		e.pos = lineStart(t, p)
	case End:
		for p < len(t) && t[p] != '\n' {
			p++
		}
		e.pos = p
	case KillEnd:
		end := p
		for end < len(t) && t[end] != '\n' {
			end++
		}
		if end == p && end < len(t) {
			end++ // at a line's end: join the next line
		}
		e.text = append(t[:p:p], t[end:]...)
	case KillStart:
		s := lineStart(t, p)
		e.text = append(t[:s:s], t[p:]...)
		e.pos = s
	case KillWord:
		s := wordStart(t, p)
		e.text = append(t[:s:s], t[p:]...)
		e.pos = s
	case Up:
		// Within a message of several lines, up moves a line; at its
		// first line, to the history's previous entry.
		if s := lineStart(t, p); s > 0 {
			e.pos = column(t, lineStart(t, s-1), s-1, p-s)
			break
		}
		entries := e.hist.Entries()
		if e.hidx == -1 && len(entries) > 0 {
			e.draft = append([]rune(nil), t...)
			e.hidx = len(entries)
		}
		if e.hidx > 0 {
			e.hidx--
			e.text = []rune(entries[e.hidx])
			e.pos = len(e.text)
		}
	case Down:
		end := p
		for end < len(t) && t[end] != '\n' {
			end++
		}
		if end < len(t) {
			next := end + 1
			nextEnd := next
			for nextEnd < len(t) && t[nextEnd] != '\n' {
				nextEnd++
			}
			e.pos = column(t, next, nextEnd, p-lineStart(t, p))
			break
		}
		if e.hidx >= 0 {
			entries := e.hist.Entries()
			e.hidx++
			if e.hidx >= len(entries) {
				e.text, e.hidx = e.draft, -1
			} else {
				e.text = []rune(entries[e.hidx])
			}
			e.pos = len(e.text)
		}
	case Redraw:
		e.erase()
		e.write([]byte("\x1b[H\x1b[2J"))
		e.midLine = false
	case Ignored, Escape:
	default:
		return false
	}
	e.redraw()
	return true
}

// echo writes a character typed at the end of the text as a terminal
// would, without drawing the area again, when it fits on the row.
func (e *Editor) echo(r rune) bool {
	if !e.drawn || e.pos != len(e.text) || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
		return false
	}
	w := e.cols()
	_, end := e.layout(new(strings.Builder), w)
	if rw := RuneWidth(r); rw == 0 || end.col+rw >= w {
		return false
	}
	e.text = append(e.text, r)
	e.pos++
	e.out.Write([]byte(string(r)))
	return true
}

// Keep leaves the input area on the screen as it is, as output, and
// empties the text: the next area is drawn below it. suffix is shown
// after the text (an approval prompt's answer).
func (e *Editor) Keep(suffix string) { e.KeepThen(suffix, "", false, false) }

// KeepThen is Keep, then the next area has prompt and hideEmpty (as
// SetPrompt and SetHideEmpty set them) when set is true.
func (e *Editor) KeepThen(suffix, prompt string, hideEmpty, set bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if suffix != "" {
		e.text = append(e.text, []rune(suffix)...)
		e.pos = len(e.text)
	}
	if !e.drawn || suffix != "" {
		e.erase()
		visible, hide := e.visible, e.hideEmpty
		e.visible, e.hideEmpty = true, false
		e.draw()
		e.visible, e.hideEmpty = visible, hide
	}
	// From the cursor to the area's end, and on to the next line.
	rows, cursor := e.layout(new(strings.Builder), e.cols())
	if down := rows - 1 - cursor.row; down > 0 {
		e.out.Write([]byte("\x1b[" + itoa(down) + "B"))
	}
	e.out.Write([]byte("\r\n"))
	e.drawn, e.midLine = false, false
	e.text, e.pos, e.draft = nil, 0, nil
	e.hidx = -1
	if set {
		e.prompt, e.promptW, e.hideEmpty = prompt, StringWidth(stripCSI(prompt)), hideEmpty
	}
	e.draw()
}

func (e *Editor) cols() int {
	if w := e.width(); w > 0 {
		return w
	}
	return 80
}

// SetHideEmpty makes the input area show only while it holds text (while
// a turn streams, an empty input line would only be in the way).
func (e *Editor) SetHideEmpty(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hideEmpty = on
	e.redraw()
}

// StartLine ends the output's line, if it is in the middle of one, so
// what comes next starts a line.
func (e *Editor) StartLine() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.midLine {
		e.erase()
		e.write([]byte("\n"))
		e.midLine = false
		e.draw()
	}
}

// column is the position in the line [start, end) at offset col, or its end.
func column(t []rune, start, end, col int) int { return min(start+col, end) }

func (e *Editor) insert(r []rune) {
	t := make([]rune, 0, len(e.text)+len(r))
	t = append(append(append(t, e.text[:e.pos]...), r...), e.text[e.pos:]...)
	e.text = t
	e.pos += len(r)
}

func lineStart(t []rune, p int) int {
	for p > 0 && t[p-1] != '\n' {
		p--
	}
	return p
}

func wordStart(t []rune, p int) int {
	for p > 0 && !isWord(t[p-1]) {
		p--
	}
	for p > 0 && isWord(t[p-1]) {
		p--
	}
	return p
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func (e *Editor) redraw() {
	e.erase()
	e.draw()
}

// The input area is drawn below the output: the cursor's place in the
// output is saved (ESC 7) and restored (ESC 8) to take the area off again,
// so a streamed answer goes on where it stopped, in the middle of its
// line. Room is made first with Index (ESC D), which moves down (scrolling
// at the bottom) without leaving the column, so the saved place stays
// right.

// erase takes the input area off the screen; the cursor is back where
// output goes on.
func (e *Editor) erase() {
	if !e.drawn {
		return
	}
	e.out.Write([]byte("\x1b8\x1b[J"))
	e.drawn = false
}

// draw draws the input area below the output, when it is to be shown.
func (e *Editor) draw() {
	if !e.visible || e.drawn || e.hideEmpty && len(e.text) == 0 {
		return
	}
	w := e.cols()
	var b strings.Builder
	rows, cursor := e.layout(&b, w)
	start := 0
	if e.midLine {
		start = 1
	}
	var s strings.Builder
	// Room for the area, then back to where output goes on, saved.
	if n := start + rows - 1; n > 0 {
		s.WriteString(strings.Repeat("\x1bD", n))
		s.WriteString("\x1b[" + itoa(n) + "A")
	}
	s.WriteString("\x1b7")
	if e.midLine {
		s.WriteString("\r\n")
	}
	s.WriteString("\r\x1b[J")
	s.WriteString(b.String())
	// From the area's end to the cursor.
	if up := rows - 1 - cursor.row; up > 0 {
		s.WriteString("\x1b[" + itoa(up) + "A")
	}
	s.WriteString("\r")
	if cursor.col > 0 {
		s.WriteString("\x1b[" + itoa(cursor.col) + "C")
	}
	e.out.Write([]byte(s.String()))
	e.drawn = true
}

type place struct{ row, col int }

// layout writes the prompt and the text as the terminal shows them, w
// columns wide, and returns how many rows they take and where the cursor
// is. The text's lines after the first are indented as far as the prompt;
// a character that does not fit goes to the next row.
func (e *Editor) layout(b *strings.Builder, w int) (rows int, cursor place) {
	// The prompt as the text is: its colour sequences written as they
	// are, every other control character shown (a mode or a tool name in
	// it is not the program's), a wide character that does not fit at a
	// row's end on the next row, as the terminal puts it.
	row, col := 0, 0
	p := e.prompt
	for len(p) > 0 {
		if n := csiLen(p); n > 0 {
			b.WriteString(p[:n])
			p = p[n:]
			continue
		}
		r, n := utf8.DecodeRuneInString(p)
		p = p[n:]
		shown, rw := visible(r)
		if col+rw > w {
			b.WriteString("\r\n")
			row++
			col = 0
		}
		b.WriteString(shown)
		col += rw
	}
	if col >= w {
		b.WriteString("\r\n")
		row++
		col = 0
	}
	indent := min(e.promptW, w/2)
	for i, r := range e.text {
		if i == e.pos {
			cursor = place{row, col}
		}
		if r == '\n' {
			b.WriteString("\x1b[K\r\n")
			row++
			b.WriteString(strings.Repeat(" ", indent))
			col = indent
			continue
		}
		shown, rw := visible(r)
		if col+rw > w {
			b.WriteString("\r\n")
			row++
			col = 0
		}
		b.WriteString(shown)
		col += rw
	}
	if e.pos >= len(e.text) {
		cursor = place{row, col}
	}
	if col >= w {
		// The terminal waits at the last column: put the cursor on the
		// next row, so it is where the layout says.
		b.WriteString("\r\n")
		row++
		if cursor.col >= w {
			cursor = place{row, 0}
		}
	}
	return row + 1, cursor
}

// visible is how the editor shows r and how many columns that takes: a
// tab as four spaces, other control characters as ^X.
func visible(r rune) (string, int) {
	switch {
	case r == '\t':
		return "    ", 4
	case r < 0x20 || r == 0x7f:
		return "^" + string(rune(r^0x40)), 2
	case r >= 0x80 && r < 0xa0:
		return "?", 1
	}
	return string(r), RuneWidth(r)
}

// RuneWidth is how many columns a terminal gives r: 2 for East Asian wide
// and full-width characters, 0 for combining marks and format characters.
func RuneWidth(r rune) int {
	if r == 0 || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || unicode.Is(unicode.Cf, r) {
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// StringWidth is the columns s takes (without control sequences).
func StringWidth(s string) int {
	n := 0
	for _, r := range s {
		_, w := visible(r)
		n += w
	}
	return n
}

// csiLen is the length of the CSI sequence (ESC [ … final) at the start
// of s, or 0: only parameter and intermediate bytes may come before its
// final byte, so no control character hides inside one.
func csiLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for j := 2; j < len(s); j++ {
		switch c := s[j]; {
		case isFinal(c):
			return j + 1
		case c < 0x20 || c > 0x3f:
			return 0
		}
	}
	return 0
}

func stripCSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if n := csiLen(s[i:]); n > 0 {
			i += n
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

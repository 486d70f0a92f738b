package session

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
	xterm "golang.org/x/term"

	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
)

// The session picker (wagent chat --resume with no id): the sessions,
// most recent first, in a short list drawn below the cursor; typing
// filters it (Matches), the arrows move, Enter picks, Esc or Ctrl-C
// leaves. It puts the terminal in raw mode only while it is shown, and
// draws with plain ANSI sequences (cursor up, clear line): a full-screen
// library would take the screen that the chat then scrolls in.

// ErrPickCanceled: the person left the picker without picking.
var ErrPickCanceled = fmt.Errorf("no session picked")

// Matches reports whether a session matches a search: its id, name,
// title (its first prompt) contain text, ignoring case.
func Matches(s event.Summary, text string) bool {
	if text == "" {
		return true
	}
	text = strings.ToLower(text)
	for _, f := range []string{s.ID, s.Name, s.Title} {
		if strings.Contains(strings.ToLower(f), text) {
			return true
		}
	}
	return false
}

// StatusWord is a session's status in a list: waiting, running, error,
// turn open, idle (unreadable for a log the fold refuses).
func StatusWord(s event.Summary) string {
	switch {
	case strings.HasPrefix(s.Status, "broken"):
		return "unreadable"
	case len(s.Waiting) > 0:
		return "waiting"
	case s.Status == event.StatusError:
		return "error"
	case s.TurnOpen && s.Status != "running":
		return "turn open"
	}
	return s.Status
}

// pickRows is how many sessions the picker shows at once.
const pickRows = 10

// Pick shows the picker at the terminal env.Stdin and env.Stdout and
// returns the id picked, or ErrPickCanceled (also once ctx ends: a
// signal the chat caught, which must not wait for a key).
func Pick(ctx context.Context, env *term.Env, list []event.Summary) (string, error) {
	in, ok := env.Stdin.(*os.File)
	if !ok || !term.IsTerminal(in) {
		return "", fmt.Errorf("the session picker needs a terminal")
	}
	state, err := xterm.MakeRaw(int(in.Fd()))
	if err != nil {
		return "", fmt.Errorf("the terminal: %v", err)
	}
	defer xterm.Restore(int(in.Fd()), state)
	p := &picker{out: env.Stdout, all: list, now: time.Now(), width: 100}
	if w, _, err := xterm.GetSize(int(in.Fd())); err == nil && w > 10 {
		p.width = w
	}
	p.filter()
	p.draw()
	defer p.clear()
	// Keys are read one at a time, each when asked for, so that no read
	// is left waiting to take a key typed after the picker (only when ctx
	// ends, and the program with it).
	type read struct {
		k    key
		text string
		err  error
	}
	ask, got := make(chan struct{}), make(chan read, 1)
	defer close(ask)
	go func() {
		r := bufio.NewReader(in)
		for range ask {
			k, text, err := readKey(r)
			got <- read{k, text, err}
		}
	}()
	for {
		ask <- struct{}{}
		var rd read
		select {
		case rd = <-got:
		case <-ctx.Done():
			return "", ErrPickCanceled
		}
		k, text, err := rd.k, rd.text, rd.err
		if err != nil {
			return "", ErrPickCanceled
		}
		switch k {
		case keyCancel:
			return "", ErrPickCanceled
		case keyEnter:
			if len(p.shown) > 0 {
				return p.shown[p.at].ID, nil
			}
		case keyUp:
			if p.at > 0 {
				p.at--
			}
		case keyDown:
			if p.at < len(p.shown)-1 {
				p.at++
			}
		case keyBackspace:
			if p.query != "" {
				_, n := utf8.DecodeLastRuneInString(p.query)
				p.query = p.query[:len(p.query)-n]
				p.filter()
			}
		case keyText:
			p.query += text
			p.filter()
		}
		p.draw()
	}
}

type picker struct {
	out   io.Writer
	all   []event.Summary
	shown []event.Summary
	query string
	at    int
	now   time.Time
	// width is the terminal's: a line never wraps, so that moving up as
	// many lines as were drawn lands on the first.
	width int
}

func (p *picker) filter() {
	p.shown = p.shown[:0]
	for _, s := range p.all {
		if Matches(s, p.query) {
			p.shown = append(p.shown, s)
		}
	}
	p.at = 0
}

// clear erases what the picker drew (the cursor is on its first line)
// and leaves the cursor where it began.
func (p *picker) clear() { io.WriteString(p.out, "\r\x1b[J") }

func (p *picker) draw() {
	var lines []string
	lines = append(lines, render.Safe(fmt.Sprintf("resume a session (type to search, ↑/↓, Enter picks, Esc leaves): %s", p.query)))
	start := 0
	if p.at >= pickRows {
		start = p.at - pickRows + 1
	}
	for i := start; i < len(p.shown) && i < start+pickRows; i++ {
		s := p.shown[i]
		mark := "  "
		if i == p.at {
			mark = "› "
		}
		title := s.Name
		if title == "" {
			title = s.Title
		}
		lines = append(lines, mark+render.Safe(fmt.Sprintf("%-22s %-40s %-10s %3d turns  %s", s.ID, render.Compact(title, 40), StatusWord(s), s.Turns, ago(p.now, s.LastActivity))))
	}
	switch {
	case len(p.all) == 0:
		lines = append(lines, "  (no sessions yet)")
	case len(p.shown) == 0:
		lines = append(lines, "  (no session matches)")
	case len(p.shown) > pickRows:
		lines = append(lines, fmt.Sprintf("  … %d in all", len(p.shown)))
	}
	for i, l := range lines {
		// One row each: no line break or tab of a name, title or status
		// (from the log, or a remote owner) reaches the terminal, and a
		// row is cut by the columns it takes (a wide character is two).
		l = strings.NewReplacer("\n", " ", "\t", " ").Replace(l)
		if runewidth.StringWidth(l) >= p.width {
			l = runewidth.Truncate(l, p.width-1, "…")
		}
		lines[i] = l
	}
	var b strings.Builder
	b.WriteString("\r\x1b[J")
	b.WriteString(strings.Join(lines, "\r\n"))
	// The cursor ends on the query line, after the query.
	if n := len(lines) - 1; n > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", n)
	}
	fmt.Fprintf(&b, "\r\x1b[%dC", runewidth.StringWidth(lines[0]))
	io.WriteString(p.out, b.String())
}

type key int

const (
	keyNone key = iota
	keyText
	keyEnter
	keyUp
	keyDown
	keyBackspace
	keyCancel
)

// readKey reads one key press from a raw terminal.
func readKey(r *bufio.Reader) (key, string, error) {
	c, _, err := r.ReadRune()
	if err != nil {
		return keyNone, "", err
	}
	switch c {
	case '\r', '\n':
		return keyEnter, "", nil
	case 3, 4: // Ctrl-C, Ctrl-D
		return keyCancel, "", nil
	case 127, 8:
		return keyBackspace, "", nil
	case 16: // Ctrl-P
		return keyUp, "", nil
	case 14: // Ctrl-N
		return keyDown, "", nil
	case 0x1b:
		// Esc alone leaves; Esc [ A / Esc O A are the arrows.
		if r.Buffered() == 0 {
			return keyCancel, "", nil
		}
		b, _ := r.ReadByte()
		if b != '[' && b != 'O' {
			return keyNone, "", nil
		}
		code, _ := r.ReadByte()
		for code >= '0' && code <= '9' || code == ';' { // modifiers: skip to the final byte
			code, _ = r.ReadByte()
		}
		switch code {
		case 'A':
			return keyUp, "", nil
		case 'B':
			return keyDown, "", nil
		}
		return keyNone, "", nil
	}
	if unicode.IsPrint(c) {
		return keyText, string(c), nil
	}
	return keyNone, "", nil
}

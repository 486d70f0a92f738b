package lineedit

import (
	"bytes"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Code is what a key does.
type Code int

// The keys the editor knows. Control keys with an editing meaning are
// named by that meaning (Ctrl-A is Home); Ctrl-C is Interrupt and Ctrl-D
// EOF, whatever the caller makes of them.
const (
	Rune      Code = iota // a character typed (Key.Rune)
	Paste                 // a bracketed paste, whole (Key.Text)
	Enter                 // Enter (CR)
	Newline               // Alt-Enter or Ctrl-J: a new line in the message
	Interrupt             // Ctrl-C
	EOF                   // Ctrl-D
	Backspace
	Delete
	Left
	Right
	WordLeft  // Alt-B, Ctrl-Left
	WordRight // Alt-F, Ctrl-Right
	Up
	Down
	Home      // Home, Ctrl-A
	End       // End, Ctrl-E
	KillEnd   // Ctrl-K
	KillStart // Ctrl-U
	KillWord  // Ctrl-W, Alt-Backspace
	Redraw    // Ctrl-L
	Escape    // a lone Esc
	Ignored   // a key the editor has no use for (a function key, Ctrl-Z)
)

// Key is one key press, or one paste.
type Key struct {
	Code Code
	Rune rune   // Rune
	Text string // Paste, with its line breaks as \n
	// At is when its bytes were read: a prompt takes as its answer only a
	// key typed after it showed.
	At time.Time
}

const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
	// escWait is how long a lone Esc waits for the rest of a sequence.
	escWait = 30 * time.Millisecond
	// pasteWait is how long a paste waits for more before it is taken as
	// ended without its end mark.
	pasteWait = 2 * time.Second
)

// Decode reads the terminal's bytes from r until it fails and sends the
// keys they make to keys, in order; then it closes keys. A paste between
// the terminal's bracketed-paste marks is one Paste key, its line breaks
// kept as \n (a terminal sends Enter as \r inside a paste too). Bytes
// that are not valid UTF-8 are dropped, never replaced: nothing reaches a
// message that was not typed or pasted.
func Decode(r io.Reader, keys chan<- Key) { DecodeAhead(r, keys, 0) }

// DecodeAhead is Decode for a terminal whose first ahead bytes were typed
// before it was put in raw mode (TypedAhead): the line discipline made
// their Enter a \n, which in raw mode is Ctrl-J (a new line in the
// message), so there a \n is Enter, as it was typed. Nothing else
// differs: no paste can be among them (bracketed paste is asked for after
// raw mode).
func DecodeAhead(r io.Reader, keys chan<- Key, ahead int) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 16)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 4096)
			n, err := r.Read(b)
			for i := 0; i < n && ahead > 0; i, ahead = i+1, ahead-1 {
				if b[i] == '\n' {
					b[i] = '\r'
				}
			}
			if n > 0 {
				chunks <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	defer close(keys)
	d := decoder{keys: keys}
	var timer <-chan time.Time
	for {
		select {
		case c, ok := <-chunks:
			if !ok {
				d.flush()
				return
			}
			d.buf, d.at = append(d.buf, c.b...), c.at
		case <-timer:
			// An Esc with nothing after it: the Esc key. A paste with no
			// end mark after a pause: the paste (typed into the line,
			// never sent by itself), and the keys after it keys.
			d.flush()
		}
		timer = nil
		if d.decode() {
			timer = time.After(escWait)
		} else if d.paste != nil {
			timer = time.After(pasteWait)
		}
	}
}

type decoder struct {
	keys  chan<- Key
	at    time.Time // when the last bytes were read
	buf   []byte
	paste *bytes.Buffer // inside a bracketed paste
}

func (d *decoder) send(k Key) {
	k.At = d.at
	d.keys <- k
}

// flush gives what waits as keys: a lone Esc, or an unfinished paste.
func (d *decoder) flush() {
	if d.paste != nil {
		d.paste.Write(d.buf)
		d.send(Key{Code: Paste, Text: pasteText(d.paste.Bytes())})
		d.paste, d.buf = nil, nil
		return
	}
	for len(d.buf) > 0 {
		if d.buf[0] == 0x1b {
			d.send(Key{Code: Escape})
			d.buf = d.buf[1:]
			d.decode()
			continue
		}
		d.decode()
		if len(d.buf) > 0 {
			d.buf = d.buf[1:] // an unfinished rune at the end: not a character
		}
	}
}

// decode sends the keys complete in buf; wait says an Esc may be the start
// of a sequence still arriving.
func (d *decoder) decode() (wait bool) {
	for len(d.buf) > 0 {
		if d.paste != nil {
			i := bytes.Index(d.buf, []byte(pasteEnd))
			if i < 0 {
				// Keep what may be the start of the end mark.
				keep := 0
				for k := min(len(pasteEnd)-1, len(d.buf)); k > 0; k-- {
					if bytes.HasSuffix(d.buf, []byte(pasteEnd[:k])) {
						keep = k
						break
					}
				}
				d.paste.Write(d.buf[:len(d.buf)-keep])
				d.buf = d.buf[len(d.buf)-keep:]
				return false
			}
			d.paste.Write(d.buf[:i])
			d.buf = d.buf[i+len(pasteEnd):]
			d.send(Key{Code: Paste, Text: pasteText(d.paste.Bytes())})
			d.paste = nil
			continue
		}
		k, n := parseKey(d.buf)
		if n == 0 {
			return len(d.buf) > 0 && d.buf[0] == 0x1b
		}
		d.buf = d.buf[n:]
		if k.Code == Paste {
			d.paste = new(bytes.Buffer)
			continue
		}
		if k.Code == Rune && k.Rune == utf8.RuneError {
			continue // an invalid byte: dropped
		}
		d.send(k)
	}
	return false
}

// pasteText is a paste's text with its line breaks as \n, and bytes that
// are not UTF-8 dropped (as typed ones are). Nothing else is changed.
func pasteText(b []byte) string {
	s := strings.ToValidUTF8(string(b), "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// parseKey reads one key at the start of b; n is 0 when b holds only the
// start of one.
func parseKey(b []byte) (Key, int) {
	c := b[0]
	switch {
	case c == 0x1b:
		return parseEscape(b)
	case c == '\r':
		return Key{Code: Enter}, 1
	case c == '\n':
		return Key{Code: Newline}, 1
	case c == 0x7f || c == 0x08:
		return Key{Code: Backspace}, 1
	case c == '\t':
		return Key{Code: Rune, Rune: '\t'}, 1
	case c < 0x20:
		return Key{Code: ctrlKeys[c]}, 1
	case c < utf8.RuneSelf:
		return Key{Code: Rune, Rune: rune(c)}, 1
	}
	if !utf8.FullRune(b) {
		return Key{}, 0
	}
	r, n := utf8.DecodeRune(b)
	return Key{Code: Rune, Rune: r}, n // RuneError for an invalid byte: dropped
}

var ctrlKeys = func() [0x20]Code {
	var k [0x20]Code
	for i := range k {
		k[i] = Ignored
	}
	k[0x01], k[0x02], k[0x03], k[0x04] = Home, Left, Interrupt, EOF
	k[0x05], k[0x06], k[0x0b], k[0x0c] = End, Right, KillEnd, Redraw
	k[0x0e], k[0x10], k[0x15], k[0x17] = Down, Up, KillStart, KillWord
	return k
}()

// parseEscape reads an escape sequence: CSI (ESC [ … final), SS3 (ESC O
// x), or Alt with a key (ESC then the key).
func parseEscape(b []byte) (Key, int) {
	if len(b) < 2 {
		return Key{}, 0
	}
	switch b[1] {
	case '[':
		// Parameters and intermediates, then a final byte in 0x40–0x7e.
		for i := 2; i < len(b); i++ {
			if b[i] >= 0x40 && b[i] <= 0x7e {
				return csiKey(string(b[2:i]), b[i]), i + 1
			}
			if b[i] < 0x20 || b[i] > 0x3f {
				return Key{Code: Ignored}, i // not a sequence: drop what came
			}
		}
		return Key{}, 0
	case 'O':
		if len(b) < 3 {
			return Key{}, 0
		}
		return csiKey("", b[2]), 3
	case '\r', '\n':
		return Key{Code: Newline}, 2
	case 0x7f, 0x08:
		return Key{Code: KillWord}, 2
	case 'b', 'B':
		return Key{Code: WordLeft}, 2
	case 'f', 'F':
		return Key{Code: WordRight}, 2
	case 0x1b:
		return Key{Code: Escape}, 1
	}
	// Alt with another key: the key alone would be a surprise (Alt-x
	// typing x), so it is ignored, and so are its bytes.
	_, n := parseKey(b[1:])
	if n == 0 {
		return Key{}, 0
	}
	return Key{Code: Ignored}, 1 + n
}

func csiKey(params string, final byte) Key {
	mod := ""
	if _, m, ok := strings.Cut(params, ";"); ok {
		mod = m
	}
	ctrl := mod == "5" || mod == "3" // Ctrl or Alt with an arrow
	switch final {
	case 'A':
		return Key{Code: Up}
	case 'B':
		return Key{Code: Down}
	case 'C':
		if ctrl {
			return Key{Code: WordRight}
		}
		return Key{Code: Right}
	case 'D':
		if ctrl {
			return Key{Code: WordLeft}
		}
		return Key{Code: Left}
	case 'H':
		return Key{Code: Home}
	case 'F':
		return Key{Code: End}
	case '~':
		n, _, _ := strings.Cut(params, ";")
		switch n {
		case "1", "7":
			return Key{Code: Home}
		case "4", "8":
			return Key{Code: End}
		case "3":
			return Key{Code: Delete}
		case "200":
			return Key{Code: Paste}
		}
	}
	return Key{Code: Ignored}
}

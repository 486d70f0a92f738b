package lineedit

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decode is every key the bytes make, written in the chunks given (a
// terminal's bytes arrive in pieces anywhere).
func decode(chunks ...string) []Key {
	pr, pw := io.Pipe()
	keys := make(chan Key, 64)
	go Decode(pr, keys)
	go func() {
		for _, c := range chunks {
			pw.Write([]byte(c))
		}
		pw.Close()
	}()
	var out []Key
	for k := range keys {
		out = append(out, Key{Code: k.Code, Rune: k.Rune, Text: k.Text})
	}
	return out
}

func runes(s string) []Key {
	var ks []Key
	for _, r := range s {
		ks = append(ks, Key{Code: Rune, Rune: r})
	}
	return ks
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []Key
	}{
		{"typing", []string{"hi\r"}, append(runes("hi"), Key{Code: Enter})},
		{"a paste of three lines is one key, its breaks as \\n", []string{"\x1b[200~one\rtwo\r\nthree\x1b[201~\r"},
			[]Key{{Code: Paste, Text: "one\ntwo\nthree"}, {Code: Enter}}},
		{"a paste's end mark split across reads", []string{"\x1b[200~a\rb\x1b[20", "1~"}, []Key{{Code: Paste, Text: "a\nb"}}},
		{"a paste keeps what it holds, a Ctrl-D included", []string{"\x1b[200~x\x04y\x1b[201~"}, []Key{{Code: Paste, Text: "x\x04y"}}},
		{"Ctrl-C, Ctrl-D and Ctrl-J are keys, never bytes of the line", []string{"\x03\x04\n"}, []Key{{Code: Interrupt}, {Code: EOF}, {Code: Newline}}},
		{"Alt-Enter is a new line", []string{"\x1b\r"}, []Key{{Code: Newline}}},
		{"arrows, Home, End, Delete", []string{"\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F\x1b[3~\x1bOH\x1b[1;5C"},
			[]Key{{Code: Up}, {Code: Down}, {Code: Right}, {Code: Left}, {Code: Home}, {Code: End}, {Code: Delete}, {Code: Home}, {Code: WordRight}}},
		{"editing controls", []string{"\x01\x05\x0b\x15\x17\x7f"}, []Key{{Code: Home}, {Code: End}, {Code: KillEnd}, {Code: KillStart}, {Code: KillWord}, {Code: Backspace}}},
		{"a character split across reads", []string{"é"[:1], "é"[1:] + "漢"}, runes("é漢")},
		{"a byte that is not UTF-8 is dropped, not replaced", []string{"a\xffb"}, runes("ab")},
		{"a lone Esc", []string{"\x1b"}, []Key{{Code: Escape}}},
		{"an unknown sequence is ignored whole", []string{"\x1b[99zok"}, append([]Key{{Code: Ignored}}, runes("ok")...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decode(tc.chunks...)); diff != "" {
				t.Errorf("keys mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// edit types keys into an editor and returns its text and cursor.
func edit(ks ...Key) (string, int) {
	e := New(io.Discard, func() int { return 40 }, nil)
	for _, k := range ks {
		e.Edit(k)
	}
	return e.Text(), e.pos
}

func TestEdit(t *testing.T) {
	k := func(c Code) Key { return Key{Code: c} }
	for _, tc := range []struct {
		name string
		keys []Key
		text string
		pos  int
	}{
		{"insert in the middle", append(append(runes("held"), k(Left), k(Left)), runes("llo wor")...), "hello world", 9},
		{"backspace and delete", append(runes("abc"), k(Left), k(Backspace), k(Delete)), "a", 1},
		{"Ctrl-A, Ctrl-E", append(runes("abc"), k(Home), Key{Code: Rune, Rune: '>'}, k(End), Key{Code: Rune, Rune: '<'}), ">abc<", 5},
		{"Ctrl-K kills to the end", append(runes("abcdef"), k(Left), k(Left), k(Left), k(KillEnd)), "abc", 3},
		{"Ctrl-U kills to the start", append(runes("abcdef"), k(Left), k(Left), k(KillStart)), "ef", 0},
		{"Ctrl-W kills a word", append(runes("one two  "), k(KillWord)), "one ", 4},
		{"a new line, and Home is its start", append(append(runes("one"), k(Newline)), append(runes("two"), k(Home))...), "one\ntwo", 4},
		{"up moves within a message of lines", append(append(runes("abc"), k(Newline)), append(runes("de"), k(Up))...), "abc\nde", 2},
		{"a paste goes in whole", []Key{{Code: Paste, Text: "a\nb"}, k(Left)}, "a\nb", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, pos := edit(tc.keys...)
			if text != tc.text || pos != tc.pos {
				t.Errorf("text %q at %d, want %q at %d", text, pos, tc.text, tc.pos)
			}
		})
	}
}

// What the program prints goes above the input line; the line comes back
// below it, and a streamed answer goes on where it stopped.
func TestOutputGoesAboveTheInputLine(t *testing.T) {
	var screen bytes.Buffer
	e := New(&screen, func() int { return 40 }, nil)
	e.SetPrompt("› ")
	e.Show()
	e.Edit(Key{Code: Rune, Rune: 'x'})
	screen.Reset()
	io.WriteString(e.Output(), "Once upon")
	got := screen.String()
	if !strings.HasPrefix(got, "\x1b8\x1b[J") || !strings.HasSuffix(got, "Once upon") {
		t.Fatalf("output wrote %q; want the input area taken off (restore, clear) and then the text", got)
	}
	e.Print("a notice")
	if !strings.Contains(screen.String(), "Once upon\na notice\n") || !strings.Contains(screen.String(), "\x1b7\r\x1b[J› x") {
		t.Fatalf("after a notice the screen got %q; want the notice on a line of its own, then the input line", screen.String())
	}
}

func TestHistory(t *testing.T) {
	data := t.TempDir()
	p := HistoryPath(data, "/some/project")
	if q := HistoryPath(data, "/other/project"); q == p {
		t.Fatal("two folders share a history file")
	}
	h := OpenHistory(p)
	h.Add("one")
	h.Add("two\nlines")
	h.Add("two\nlines") // the same again: once
	h.Add("  ")
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v, mode %v; want 0600", err, fi.Mode())
	}
	if d, _ := os.Stat(filepath.Dir(p)); d.Mode().Perm() != 0o700 {
		t.Errorf("history folder mode %v, want 0700", d.Mode().Perm())
	}
	if diff := cmp.Diff([]string{"one", "two\nlines"}, OpenHistory(p).Entries()); diff != "" {
		t.Errorf("entries read back mismatch (-want +got):\n%s", diff)
	}
	// Up brings them back, newest first; Down returns to what was typed.
	e := New(io.Discard, func() int { return 40 }, OpenHistory(p))
	e.Edit(Key{Code: Rune, Rune: 'z'})
	e.Edit(Key{Code: Up})
	if e.Text() != "two\nlines" {
		t.Fatalf("up: %q", e.Text())
	}
	e.Edit(Key{Code: Up}) // within the entry: to its first line
	e.Edit(Key{Code: Up})
	if e.Text() != "one" {
		t.Fatalf("up, up, up: %q", e.Text())
	}
	e.Edit(Key{Code: Down})
	e.Edit(Key{Code: Down})
	if e.Text() != "z" {
		t.Fatalf("down to the line typed: %q", e.Text())
	}
	// A line sent while the editor is open is the first Up brings back.
	e.Keep("")
	e.hist.Add("three")
	e.Edit(Key{Code: Up})
	if e.Text() != "three" {
		t.Fatalf("up after sending three: %q", e.Text())
	}
}

func TestRuneWidth(t *testing.T) {
	for r, w := range map[rune]int{'a': 1, '漢': 2, 'é': 1, '\u0301': 0, '！': 2} {
		if got := RuneWidth(r); got != w {
			t.Errorf("RuneWidth(%q) = %d, want %d", r, got, w)
		}
	}
}

// Keys typed before raw mode come with Enter as \n (the line discipline's
// ICRNL): in those bytes it is Enter, after them Ctrl-J, a new line.
func TestDecodeAheadTakesTypedEnter(t *testing.T) {
	keys := make(chan Key, 16)
	go DecodeAhead(strings.NewReader("/mode\na\nb"), keys, 6)
	var got []Code
	for k := range keys {
		got = append(got, k.Code)
	}
	want := []Code{Rune, Rune, Rune, Rune, Rune, Enter, Rune, Newline, Rune}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
}

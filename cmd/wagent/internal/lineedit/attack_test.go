package lineedit

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A prompt holding a line break or a tab (a permission mode or a tool
// name the chat shows in it comes from an op or a model) is drawn as the
// editor counts it: the terminal never gets a raw \n or \t from it, so
// the rows the area takes are the rows it reserved.
func TestPromptControlCharactersAreShownNotWritten(t *testing.T) {
	var screen bytes.Buffer
	e := New(&screen, func() int { return 40 }, nil)
	e.SetPrompt("\x1b[1mask\n\n\tx ›\x1b[0m ")
	e.Show()
	got := screen.String()
	if strings.ContainsAny(got, "\n\t") {
		t.Fatalf("the prompt wrote a raw line break or tab: %q", got)
	}
	if !strings.Contains(got, "\x1b[1mask^J^J    x ›\x1b[0m ") {
		t.Errorf("the prompt is drawn as %q; want its colour kept and \\n shown as ^J, \\t as spaces", got)
	}
}

// A wide character that does not fit at the end of a row goes to the
// next one, in the prompt as in the text: the cursor is where the
// terminal puts it.
func TestPromptWideCharactersWrapAsTheTerminalDoes(t *testing.T) {
	e := New(io.Discard, func() int { return 5 }, nil)
	e.SetPrompt("漢漢漢")
	rows, cursor := e.layout(new(strings.Builder), 5)
	// 漢漢 fill columns 0-3; the third cannot start at column 4.
	if rows != 2 || cursor != (place{1, 2}) {
		t.Errorf("rows %d, cursor %+v; want 2 rows, the cursor at row 1 column 2", rows, cursor)
	}
}

// Bytes of a paste that are not UTF-8 are dropped, as typed ones are:
// never a U+FFFD the person did not paste.
func TestPasteDropsInvalidUTF8(t *testing.T) {
	got := decode("\x1b[200~a\xffb\xc3\x1b[201~")
	if len(got) != 1 || got[0].Code != Paste || got[0].Text != "ab" {
		t.Errorf("keys %+v; want one paste \"ab\"", got)
	}
}

// A paste whose end mark never comes (a terminal gone wrong, a paste
// holding a start mark) does not take every later key, Ctrl-C and Enter
// included, for ever: once the input pauses, what came is a paste and
// the keys after it are keys.
func TestUnterminatedPasteEnds(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	keys := make(chan Key, 16)
	go Decode(pr, keys)
	pw.Write([]byte("\x1b[200~stuck"))
	select {
	case k := <-keys:
		if k.Code != Paste || k.Text != "stuck" {
			t.Fatalf("first key %+v; want the paste \"stuck\"", k)
		}
	case <-time.After(5 * pasteWait):
		t.Fatal("an unterminated paste held the input: no key came")
	}
	pw.Write([]byte("\x03"))
	if k := <-keys; k.Code != Interrupt {
		t.Errorf("after the paste, Ctrl-C is %+v; want Interrupt", k)
	}
}

// The history is never written through a link put in its place (a file
// of the person's, or anyone's, would get their lines appended and its
// mode changed).
func TestHistoryDoesNotFollowALink(t *testing.T) {
	data := t.TempDir()
	p := HistoryPath(data, "/some/project")
	os.MkdirAll(filepath.Dir(p), 0o700)
	target := filepath.Join(t.TempDir(), "bashrc")
	os.WriteFile(target, []byte("# mine\n"), 0o644)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	OpenHistory(p).Add("rm -rf ~")
	b, _ := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if string(b) != "# mine\n" || fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target became %q, mode %v", b, fi.Mode().Perm())
	}
}

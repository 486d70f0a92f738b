package chat

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wagent/wagent/cmd/wagent/internal/lineedit"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
)

func testChatter(colour bool) (*chatter, *bytes.Buffer) {
	var screen bytes.Buffer
	env := &term.Env{Colour: colour, Stdout: &screen, Stderr: &screen, Getenv: func(string) string { return "" }}
	ch := &chatter{env: env, ed: lineedit.New(&screen, func() int { return 80 }, nil), out: session.NewPrinter(env, false, "s")}
	return ch, &screen
}

// d at an approval prompt shows the call's preview, + and - lines in
// colour when colour is on, its text escaped; no preview is said.
func TestPreviewShowsTheDiff(t *testing.T) {
	ch, screen := testChatter(true)
	ch.preview(event.WaitingCall{Preview: "--- a/f.go\n+++ b/f.go\n@@ -1 +1 @@\n-old\n+new \x1b[2J\n"})
	for _, want := range []string{"\x1b[31m-old\x1b[0m", "\x1b[32m+new \\x1b[2J\x1b[0m", "\x1b[2m@@ -1 +1 @@"} {
		if !strings.Contains(screen.String(), want) {
			t.Errorf("the preview lacks %q:\n%q", want, screen.String())
		}
	}
	ch, screen = testChatter(false)
	ch.preview(event.WaitingCall{Preview: "-old\n+new\n"})
	if got := screen.String(); got != "  -old\n  +new\n" {
		t.Errorf("without colour the preview is %q", got)
	}
	screen.Reset()
	ch.preview(event.WaitingCall{})
	if !strings.Contains(screen.String(), "no preview for this call") {
		t.Errorf("an empty preview shows %q", screen.String())
	}
}

// The prompt names the permission mode when the session has one.
func TestPromptShowsTheMode(t *testing.T) {
	ch, _ := testChatter(false)
	if p := ch.prompt(); p != "› " {
		t.Errorf("prompt %q without a mode", p)
	}
	ch.mode = "edits"
	if p := ch.prompt(); p != "edits › " {
		t.Errorf("prompt %q in mode edits", p)
	}
}

// The mode comes from an op's note, which any op may write: the prompt
// shows it on one short line, its control characters escaped, never a
// raw line break, tab or escape sequence and never wider than a few words.
func TestPromptModeFromANoteIsTamed(t *testing.T) {
	ch, _ := testChatter(false)
	ch.mode = "ask\n\n\x1b]0;owned\a\t" + strings.Repeat("x", 500)
	p := ch.prompt()
	if strings.ContainsAny(p, "\n\t\x1b\a") || len([]rune(p)) > 24 {
		t.Errorf("prompt %q: a raw control character, or %d runes", p, len([]rune(p)))
	}
}

package session

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mattn/go-runewidth"

	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
)

// Every row the picker draws fits the terminal's width in columns, wide
// characters counted as two, and holds no raw control character, so that
// moving up as many lines as it drew lands on its first: a session title
// (a first prompt) in Chinese, or a status a remote owner sent, does not
// leave rows behind or draw over the output above.
func TestPickerRowsFitTheWidth(t *testing.T) {
	var out bytes.Buffer
	now := time.Now()
	p := &picker{out: &out, now: now, width: 100, all: []event.Summary{
		{ID: "s-1", Title: strings.Repeat("漢字", 30), LastActivity: now},
		{ID: "s-2", Name: "a\tb", Status: "idle\nfake › row", LastActivity: now},
	}}
	p.filter()
	p.draw()
	s := out.String()
	if strings.ContainsAny(strings.ReplaceAll(s, "\r\n", ""), "\n\t") {
		t.Errorf("the picker wrote a raw line break or tab: %q", s)
	}
	for _, l := range strings.Split(s, "\r\n") {
		l = stripSeq(l)
		if w := runewidth.StringWidth(l); w >= p.width {
			t.Errorf("a row %d columns wide on a terminal of %d: %q", w, p.width, l)
		}
	}
}

// stripSeq drops the picker's own sequences (ESC [ … final).
func stripSeq(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// The picker ends when its context does (the chat caught SIGTERM), not
// at the next key: a chat showing it is not left unkillable.
func TestPickEndsWithItsContext(t *testing.T) {
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("a pseudo-terminal: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	shown := make(chan struct{})
	go func() {
		var seen []byte
		b := make([]byte, 4096)
		for {
			n, err := ptm.Read(b)
			seen = append(seen, b[:n]...)
			if bytes.Contains(seen, []byte("resume a session")) {
				close(shown)
				io.Copy(io.Discard, ptm)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Pick(ctx, &term.Env{Stdin: tty, Stdout: tty}, []event.Summary{{ID: "s-1"}})
		done <- err
	}()
	<-shown
	cancel()
	select {
	case err := <-done:
		if err != ErrPickCanceled {
			t.Errorf("Pick returned %v; want ErrPickCanceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the picker still waits for a key after its context ended")
	}
}

package main

import (
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/wagent/wagent/cmd/wagent/internal/term/termtest"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// At a terminal the answer is drawn from its Markdown (bold, an aligned
// table), plain with NO_COLOR, and a chat that comes back to the session
// shows its last turn before the prompt (issue 30: Markdown was printed
// raw, "**126**", and a resumed chat showed none of the conversation).
func TestChatDrawsMarkdownAndRecapsOnReturn(t *testing.T) {
	const answer = "The answer is **126**.\n\n| fruit | n |\n|---|--:|\n| apples | 1 |\n| pears | 125 |\n"
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "sum", Reply: fakeopenai.Reply{Text: answer, Chunks: 9}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Noted."}},
	)
	env := chatEnv(t)
	s := startScreen(t, env, "run", "--session", "md", "--base-url", srv.URL, "--model", "m", "--api-key", "k")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("sum the fruit\r")
	s.waitFor(m, "pears  │ 125")
	shown := s.text()[m:]
	for _, want := range []string{"The answer is 126.\n", "fruit  │   n\n", "───────┼────\n", "apples │   1\n"} {
		if !strings.Contains(strings.ReplaceAll(shown, "\r", ""), want) {
			t.Errorf("the answer lacks %q; the screen:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, "**") {
		t.Errorf("the Markdown is shown raw:\n%s", shown)
	}
	if !strings.Contains(s.raw(), "\x1b[1m126\x1b[0m") {
		t.Errorf("126 is not bold: %q", s.raw())
	}
	s.waitFor(m, "› ")
	s.typeKeys("/exit\r")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}

	// Back, without colour: the last turn, drawn plain, then the header.
	plain := maps.Clone(env)
	plain["NO_COLOR"] = "1"
	s = startScreen(t, plain, "chat", "md")
	s.waitFor(0, "session md · m · 1 turn so far")
	txt := s.text()
	recap, header := strings.Index(txt, "› sum the fruit"), strings.Index(txt, "session md · m")
	if recap < 0 || recap > header || !strings.Contains(txt[recap:header], "The answer is 126.") || !strings.Contains(txt[recap:header], "pears  │ 125") {
		t.Errorf("the recap is not shown before the header; the screen:\n%s", txt)
	}
	if strings.Contains(s.raw(), "\x1b[1m126") {
		t.Errorf("colour with NO_COLOR: %q", s.raw())
	}
	m = s.mark()
	s.typeKeys("thanks\r")
	s.waitFor(m, "Noted.")
	s.typeKeys("/exit\r")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
}

// raw is everything the terminal received, control sequences and all.
func (s *screen) raw() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// wagent run at a terminal with its output sent to a file: the approval
// question is asked on the terminal (standard error), and the file gets
// the answer alone (issue 30: the question went into the file, where the
// person could not see it).
func TestRunAsksOnTheTerminalWhenOutputIsAFile(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "c1", Name: "calc_add", Arguments: `{"value":2}`}}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "The total is **2**."}},
	)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	outPath := filepath.Join(t.TempDir(), "out.md")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(wagentBin(t), "run", "--session", "q", "--pipeline", askPipeline(t), "--base-url", srv.URL, "--model", "m", "--api-key", "k", "add 2")
	cmd.Env = procEnv(chatEnv(t))
	cmd.Stdin, cmd.Stderr, cmd.Stdout = tty, tty, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var screen termtest.LockedBuffer
	go io.Copy(&screen, ptmx)
	// Write by write until the question shows (90 s: a cold compile of the
	// ops on a loaded machine).
	timeout := time.After(90 * time.Second)
	for !strings.Contains(screen.String(), `allow calc_add {"value":2}?`) {
		select {
		case <-screen.Writes():
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("no question on the terminal; it shows:\n%s", screen.String())
		}
	}
	ptmx.Write([]byte("y\r"))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v; the terminal:\n%s", err, screen.String())
	}
	b, _ := os.ReadFile(outPath)
	if string(b) != "The total is **2**.\n" {
		t.Errorf("the file holds %q, want the answer alone, as written; the terminal:\n%s", b, screen.String())
	}
}

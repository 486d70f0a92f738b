package main

import (
	"maps"
	"strings"
	"testing"

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

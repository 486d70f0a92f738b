package main

import (
	"fmt"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// A decision names what was shown (README.md, "The log"): in the chat too, keys
// that came before an approval prompt showed are not its answer. Attack:
// the person types "please add 2", Enter and "y" in one go (to answer a
// question the model's text asks, or out of habit); the first is sent,
// the model calls calc_add, and the approval prompt took the y waiting in
// the line editor's buffer: a call allowed that nobody had seen. The y
// stays on the input line (it is back there after the turn), the prompt
// says it was not taken, and the answer is the key typed after it showed.
func TestChatApprovalPromptTakesNoTypeAhead(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{Text: "Adding.", ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "calc_add", Arguments: `{"value":2}`}}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "Done."}},
	)
	pipe := writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf("ops:\n  - use: builtin:approval\n    config: {mode: ask}\n  - use: %s\n", exampleOp("calculator")))
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "paste", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("please add 2\ry")
	s.waitFor(m, `allow calc_add {"value":2}? [y]es [n]o [a]lways [e]xplain [d]iff:`)
	s.waitFor(m, "y was typed before this prompt showed; not taken as its answer")
	m = s.mark()
	s.typeKeys("n not now\r") // n, then why
	s.waitFor(m, "✗ 1.1.1 denied by terminal")
	s.waitFor(m, "Done.")
	s.waitFor(m, "› y")    // what was typed ahead is the input line's again
	s.typeKeys("\x15\x04") // Ctrl-U empties it, Ctrl-D leaves
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after Ctrl-D\n%s", code, s.text())
	}
	ds := dataOf[event.ApprovalDecision](t, logEvents(t, env, "paste"), event.EvApprovalDecision)
	if len(ds) != 1 || ds[0].Allow || ds[0].Note != "not now" {
		t.Fatalf("decisions %+v, want 1.1.1 denied at the prompt, after it showed\n%s", ds, s.text())
	}
}

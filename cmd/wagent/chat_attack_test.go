package main

import (
	"fmt"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// Ctrl-C typed right after an approval's key, while that decision is
// recorded and before the next prompt shows, ends the turn: it answers
// nothing, so it is never dropped as "typed before this prompt showed".
func TestChatCtrlCRightAfterAnAnswerEndsTheTurn(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_0", Name: "calc_add", Arguments: `{"value":2}`},
			{ID: "call_1", Name: "calc_add", Arguments: `{"value":3}`},
		}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "Added both."}},
	)
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "yc", "--pipeline", askPipeline(t), "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("please add 2 and 3\r")
	s.waitFor(m, chatAsks(2))
	s.typeKeys("y\x03")
	s.waitFor(m, chatAsks(3))
	// The second prompt shows; the Ctrl-C typed already ends the turn.
	s.waitFor(m, "ended: aborted")
	ds := dataOf[event.ApprovalDecision](t, logEvents(t, env, "yc"), event.EvApprovalDecision)
	if len(ds) != 1 || !ds[0].Allow || ds[0].CallID != "1.1.1" {
		t.Errorf("decisions %s; want only the first call allowed", fmt.Sprint(ds))
	}
}

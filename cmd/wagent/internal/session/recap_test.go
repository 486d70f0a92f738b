package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A chat that comes back to a session shows its last turns: what the
// person said, the answers drawn, each call as one line, and a turn that
// did not complete; earlier turns are counted (issue 30: a resumed chat
// showed none of the conversation).
func TestRecapShowsTheLastTurns(t *testing.T) {
	var evs []store.Event
	add := func(turn int, typ string, data any) {
		b, _ := json.Marshal(data)
		evs = append(evs, store.Event{Seq: uint64(len(evs) + 1), Turn: turn, Type: typ, Data: b})
	}
	add(0, event.EvSessionCreated, map[string]any{})
	for turn := 1; turn <= 4; turn++ {
		add(turn, event.EvTurnStart, event.TurnStart{Turn: turn})
		switch turn {
		case 3:
			add(turn, event.EvUserMessage, event.UserMessage{Content: "add 40"})
			add(turn, event.EvAssistantMessage, event.AssistantMessage{Content: "Adding.", ToolCalls: []hostabi.ToolCall{{ID: "3.1.1", Name: "calc_add", Arguments: json.RawMessage(`{"value":40}`)}}})
			add(turn, event.EvAssistantMessage, event.AssistantMessage{Content: "The answer is **126**.\n\n| a | b |\n|---|---|\n| 1 | 22 |\n"})
		case 4:
			add(turn, event.EvUserMessage, event.UserMessage{Content: "and \x1b[2J?"})
			add(turn, event.EvTurnEnd, event.TurnEnd{Turn: turn, Reason: "error", Error: "HTTP 500"})
			continue
		default:
			add(turn, event.EvUserMessage, event.UserMessage{Content: "question " + string(rune('0'+turn))})
			add(turn, event.EvAssistantMessage, event.AssistantMessage{Content: "answer " + string(rune('0'+turn))})
		}
		add(turn, event.EvTurnEnd, event.TurnEnd{Turn: turn, Reason: event.ReasonCompleted})
	}

	var b bytes.Buffer
	Recap(&b, evs, 3, true, false)
	want := strings.Join([]string{
		"… 1 earlier turn before",
		"› question 2",
		"answer 2",
		"› add 40",
		"Adding.",
		`  → calc_add {"value":40}`,
		"The answer is 126.",
		"",
		"a │ b",
		"──┼───",
		"1 │ 22",
		`› and \x1b[2J?`,
		"  (turn 4 ended: error: HTTP 500)",
		strings.Repeat("─", 40),
		"",
	}, "\n")
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("recap at a terminal without colour: mismatch (-want +got):\n%s", diff)
	}

	// Not a terminal: the answers as written.
	b.Reset()
	Recap(&b, evs, 1, false, false)
	if got := b.String(); !strings.HasPrefix(got, "… 3 earlier turns before\n› and") || strings.Contains(got, "126") {
		t.Errorf("recap of the last turn: %q", got)
	}
	b.Reset()
	Recap(&b, evs, 2, false, false)
	if got := b.String(); !strings.Contains(got, "The answer is **126**.\n") {
		t.Errorf("recap not at a terminal keeps the Markdown: %q", got)
	}
	// A session without turns shows nothing.
	b.Reset()
	Recap(&b, evs[:1], 3, true, true)
	if b.Len() != 0 {
		t.Errorf("recap of no turns: %q", b.String())
	}
}

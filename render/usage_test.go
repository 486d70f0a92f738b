package render_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/store"
)

// Each answer's tokens under it, the turn's at its end with the cost when
// the model has a price.
func TestLogShowsUsage(t *testing.T) {
	var evs []store.Event
	add := func(typ string, turn, step int, data any) {
		b, _ := json.Marshal(data)
		evs = append(evs, store.Event{Seq: uint64(len(evs) + 1), Type: typ, Turn: turn, Step: step, Time: time.Unix(0, 0), Data: b})
	}
	add(event.EvSessionCreated, 0, 0, event.SessionCreated{Model: "m1"})
	add(event.EvTurnStart, 1, 0, event.TurnStart{Turn: 1})
	add(event.EvRequestHeader, 1, 1, event.RequestHeader{Model: "m1"})
	add(event.EvAssistantMessage, 1, 1, event.AssistantMessage{Content: "a", Usage: &event.Usage{InputTokens: 1200, OutputTokens: 30}})
	add(event.EvRequestHeader, 1, 2, event.RequestHeader{Model: "m1"})
	add(event.EvAssistantMessage, 1, 2, event.AssistantMessage{Content: "b", Usage: &event.Usage{InputTokens: 1300, OutputTokens: 20}})
	add(event.EvTurnEnd, 1, 0, event.TurnEnd{Turn: 1, Reason: event.ReasonCompleted})
	add(event.EvTurnStart, 2, 0, event.TurnStart{Turn: 2})
	add(event.EvRequestHeader, 2, 1, event.RequestHeader{Model: "unpriced"})
	add(event.EvAssistantMessage, 2, 1, event.AssistantMessage{Content: "c", Usage: &event.Usage{InputTokens: 5, OutputTokens: 5}})
	add(event.EvTurnEnd, 2, 0, event.TurnEnd{Turn: 2, Reason: event.ReasonCompleted})
	var b strings.Builder
	cost := func(model string, in, out int) (float64, bool) {
		if model != "m1" {
			return 0, false
		}
		return float64(in)*1e-6 + float64(out)*2e-6, true
	}
	render.Log(&b, evs, render.Options{Session: "s", Cost: cost, Location: time.UTC})
	for _, want := range []string{
		"assistant: a\n    · 1,200 in + 30 out tokens\n",
		"turn 1 ended: completed · 2 steps, 2,500 in + 50 out tokens, ≈ $0.0026\n",
		"turn 2 ended: completed · 5 in + 5 out tokens\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, b.String())
		}
	}
	for usd, want := range map[float64]string{0: "≈ $0", 0.0004: "≈ $0.0004", 0.25: "≈ $0.250", 12.5: "≈ $12.50"} {
		if got := render.Dollars(usd); got != want {
			t.Errorf("Dollars(%v) = %q, want %q", usd, got, want)
		}
	}
}

// A compaction's summary request is a model request of its turn: its
// tokens are shown and in the turn's total and cost, priced for its own
// model; its request/header is not the step's (the step's tools still
// name the MCP server of a call after it, and its model still prices the
// step's answer).
func TestLogCountsTheSummaryRequest(t *testing.T) {
	var evs []store.Event
	add := func(typ string, turn, step int, data any) {
		b, _ := json.Marshal(data)
		evs = append(evs, store.Event{Seq: uint64(len(evs) + 1), Type: typ, Turn: turn, Step: step, Time: time.Unix(0, 0), Data: b})
	}
	add(event.EvSessionCreated, 0, 0, event.SessionCreated{Model: "m1"})
	add(event.EvTurnStart, 1, 0, event.TurnStart{Turn: 1})
	add(event.EvRequestHeader, 1, 1, event.RequestHeader{Model: "m1", Tools: []event.HeaderTool{{ToolSpec: hostabi.ToolSpec{Name: "files__read", Server: "files"}, Owner: "mcp.files"}}})
	add(event.EvRequestHeader, 1, 1, event.RequestHeader{Model: "m2", Compaction: &event.CompactionRequest{Op: "compaction", Reason: engine.CompactUsage, Through: 4}})
	add(event.EvContextCompacted, 1, 1, event.ContextCompacted{Op: "compaction", Reason: engine.CompactUsage, Through: 4, Summary: "s", Model: "m2", Usage: &event.Usage{InputTokens: 1000, OutputTokens: 100}})
	add(event.EvAssistantMessage, 1, 1, event.AssistantMessage{ToolCalls: []hostabi.ToolCall{{ID: "c1", Name: "files__read", Arguments: json.RawMessage(`{}`)}}, Usage: &event.Usage{InputTokens: 200, OutputTokens: 10}})
	add(event.EvTurnEnd, 1, 0, event.TurnEnd{Turn: 1, Reason: event.ReasonCompleted})
	var b strings.Builder
	cost := func(model string, in, out int) (float64, bool) {
		switch model {
		case "m1":
			return float64(in)*1e-6 + float64(out)*2e-6, true
		case "m2":
			return float64(in) * 1e-5, true
		}
		return 0, false
	}
	render.Log(&b, evs, render.Options{Session: "s", Cost: cost, Location: time.UTC})
	for _, want := range []string{
		"· summary 1,000 in + 100 out tokens\n",
		"call c1 read on MCP server files",
		// 1000×1e-5 + 200×1e-6 + 10×2e-6
		"turn 1 ended: completed · 1 step, 1 summary, 1,200 in + 110 out tokens, ≈ $0.010\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, b.String())
		}
	}
}

package session

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/store"
)

// The owner's stream does not order live text before durable events: an
// answer's assistant/message may come before its last deltas, or before
// all of them. The answer is shown once, whole, either way.
func TestPrinterShowsAnAnswerOnce(t *testing.T) {
	ev := func(typ string, data any) engine.Live {
		b, _ := json.Marshal(data)
		return engine.Live{Kind: "event", Event: &store.Event{Type: typ, Data: b}}
	}
	delta := func(s string) engine.Live { return engine.Live{Kind: "delta", Text: s} }
	header := ev(event.EvRequestHeader, event.RequestHeader{Model: "m"})
	msg := ev(event.EvAssistantMessage, event.AssistantMessage{Content: "The total is 2."})
	for name, seq := range map[string][]engine.Live{
		"in order":           {header, delta("The total "), delta("is 2."), msg},
		"message in between": {header, delta("The total "), msg, delta("is 2.")},
		"message first":      {header, msg, delta("The total "), delta("is 2.")},
		"no deltas":          {header, msg},
	} {
		var out bytes.Buffer
		p := NewPrinter(&term.Env{Stdout: &out, Stderr: &out}, false, "s")
		for _, l := range seq {
			p.Live(l)
		}
		p.Finish()
		if got := out.String(); strings.Count(got, "The total") != 1 || !strings.Contains(got, "The total is 2.\n") {
			t.Errorf("%s: shown %q", name, got)
		}
	}
}

// A compaction's summary request is a model request of the turn: its
// tokens are in the turn's line (issue 28: they were left out).
func TestPrinterCountsTheSummaryRequest(t *testing.T) {
	ev := func(typ string, data any) engine.Live {
		b, _ := json.Marshal(data)
		return engine.Live{Kind: "event", Event: &store.Event{Type: typ, Data: b}}
	}
	var out, usage bytes.Buffer
	p := NewPrinter(&term.Env{Stdout: &out, Stderr: &usage}, false, "s")
	for _, l := range []engine.Live{
		ev(event.EvTurnStart, event.TurnStart{Turn: 1}),
		ev(event.EvContextCompacted, event.ContextCompacted{Summary: "s", Model: "m", Usage: &event.Usage{InputTokens: 50, OutputTokens: 25}}),
		ev(event.EvRequestHeader, event.RequestHeader{Model: "m"}),
		ev(event.EvAssistantMessage, event.AssistantMessage{Content: "hi", Usage: &event.Usage{InputTokens: 60, OutputTokens: 30}}),
		ev(event.EvTurnEnd, event.TurnEnd{Turn: 1, Reason: event.ReasonCompleted}),
	} {
		p.Live(l)
	}
	p.Finish()
	if got := usage.String(); !strings.Contains(got, "summary 50+25, ") || !strings.Contains(got, "110 in") {
		t.Errorf("the turn's line %q; want the summary's 50+25 in it and 110 tokens in", got)
	}

	// A summary request's header, in the step before its answer, leaves
	// the step's model: the answer is priced at it.
	usage.Reset()
	p = NewPrinter(&term.Env{Stdout: &out, Stderr: &usage}, false, "s")
	p.Cost = func(model string, in, out int) (float64, bool) {
		return map[string]float64{"cheap": 1, "dear": 100}[model] * float64(in), true
	}
	for _, l := range []engine.Live{
		ev(event.EvTurnStart, event.TurnStart{Turn: 1}),
		ev(event.EvRequestHeader, event.RequestHeader{Model: "cheap"}),
		ev(event.EvRequestHeader, event.RequestHeader{Model: "dear", Compaction: &event.CompactionRequest{Op: "compaction", Reason: engine.CompactUsage}}),
		ev(event.EvContextCompacted, event.ContextCompacted{Summary: "s", Model: "dear", Usage: &event.Usage{InputTokens: 1}}),
		ev(event.EvAssistantMessage, event.AssistantMessage{Content: "hi", Usage: &event.Usage{InputTokens: 1}}),
		ev(event.EvTurnEnd, event.TurnEnd{Turn: 1, Reason: event.ReasonCompleted}),
	} {
		p.Live(l)
	}
	p.Finish()
	if got := usage.String(); !strings.Contains(got, render.Dollars(101)) {
		t.Errorf("the turn's line %q; want the step at the cheap model and the summary at the dear one: %s", got, render.Dollars(101))
	}
}

// /usage in chat prices a summary request at its own model, and a
// summary's request/header does not change the model the step after it is
// priced at (issue 28).
func TestUsagePricesTheSummaryAtItsModel(t *testing.T) {
	ev := func(typ string, turn int, data any) store.Event {
		b, _ := json.Marshal(data)
		return store.Event{Type: typ, Turn: turn, Data: b}
	}
	turns := TurnUsages([]store.Event{
		ev(event.EvTurnStart, 1, event.TurnStart{Turn: 1}),
		ev(event.EvRequestHeader, 1, event.RequestHeader{Model: "cheap"}),
		ev(event.EvRequestHeader, 1, event.RequestHeader{Model: "dear", Compaction: &event.CompactionRequest{Op: "compaction", Reason: engine.CompactUsage}}),
		ev(event.EvContextCompacted, 1, event.ContextCompacted{Summary: "s", Model: "dear", Usage: &event.Usage{InputTokens: 1000, OutputTokens: 0}}),
		ev(event.EvAssistantMessage, 1, event.AssistantMessage{Content: "hi", Usage: &event.Usage{InputTokens: 1000, OutputTokens: 0}}),
	})
	cfg := &app.Config{Prices: map[string]app.Price{"cheap": {Input: 1}, "dear": {Input: 100}}}
	if len(turns) != 1 {
		t.Fatalf("%d turns", len(turns))
	}
	// 1000 tokens at $1 and 1000 at $100 per million.
	if usd, ok := turns[0].Cost(cfg); !ok || math.Abs(usd-0.101) > 1e-12 || turns[0].total != (tokens{InputTokens: 2000}) {
		t.Errorf("turn cost %v (priced %v), total %v; want $0.101 for 2000 tokens", usd, ok, turns[0].total)
	}
}

// At a terminal the answer is drawn from its Markdown on standard output
// and everything else goes to standard error; an attempt cut short is
// ended before the retry's answer (issue 30).
func TestPrinterDrawsTheAnswerAlone(t *testing.T) {
	ev := func(typ string, data any) engine.Live {
		b, _ := json.Marshal(data)
		return engine.Live{Kind: "event", Event: &store.Event{Type: typ, Data: b}}
	}
	delta := func(s string) engine.Live { return engine.Live{Kind: "delta", Text: s} }
	var out, notes bytes.Buffer
	p := NewPrinter(&term.Env{Stdout: &out, Stderr: &notes, Terminal: true}, false, "s")
	for _, l := range []engine.Live{
		ev(event.EvTurnStart, event.TurnStart{Turn: 1}),
		ev(event.EvRequestHeader, event.RequestHeader{Model: "m"}),
		delta("Half **an"),
		ev(event.EvRetryScheduled, event.RetryScheduled{Attempt: 1}),
		ev(event.EvRequestHeader, event.RequestHeader{Model: "m"}),
		delta("The answer is **12"),
		delta("6**.\n\n| a |\n|--"),
		delta("-|\n| 1 |"),
		ev(event.EvAssistantMessage, event.AssistantMessage{Content: "The answer is **126**.\n\n| a |\n|---|\n| 1 |"}),
		ev(event.EvTurnEnd, event.TurnEnd{Turn: 1, Reason: "error", Error: "boom"}),
	} {
		p.Live(l)
	}
	p.Finish()
	if want := "Half **an\nThe answer is 126.\n\na\n─\n1\n"; out.String() != want {
		t.Errorf("standard output %q, want %q", out.String(), want)
	}
	if got := notes.String(); !strings.Contains(got, "retry 1") || !strings.Contains(got, "(turn 1 ended: error: boom)") || strings.Contains(got, "answer") {
		t.Errorf("standard error %q", got)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
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
	header := ev(engine.EvRequestHeader, engine.RequestHeader{Model: "m"})
	msg := ev(engine.EvAssistantMessage, engine.AssistantMessage{Content: "The total is 2."})
	for name, seq := range map[string][]engine.Live{
		"in order":           {header, delta("The total "), delta("is 2."), msg},
		"message in between": {header, delta("The total "), msg, delta("is 2.")},
		"message first":      {header, msg, delta("The total "), delta("is 2.")},
		"no deltas":          {header, msg},
	} {
		var out bytes.Buffer
		p := newPrinter(&cliEnv{stdout: &out, stderr: &out}, false, "s")
		for _, l := range seq {
			p.live(l)
		}
		p.finish()
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
	p := newPrinter(&cliEnv{stdout: &out, stderr: &usage}, false, "s")
	for _, l := range []engine.Live{
		ev(engine.EvTurnStart, engine.TurnStart{Turn: 1}),
		ev(engine.EvContextCompacted, engine.ContextCompacted{Summary: "s", Model: "m", Usage: &engine.Usage{InputTokens: 50, OutputTokens: 25}}),
		ev(engine.EvRequestHeader, engine.RequestHeader{Model: "m"}),
		ev(engine.EvAssistantMessage, engine.AssistantMessage{Content: "hi", Usage: &engine.Usage{InputTokens: 60, OutputTokens: 30}}),
		ev(engine.EvTurnEnd, engine.TurnEnd{Turn: 1, Reason: engine.ReasonCompleted}),
	} {
		p.live(l)
	}
	p.finish()
	if got := usage.String(); !strings.Contains(got, "summary 50+25, ") || !strings.Contains(got, "110 in") {
		t.Errorf("the turn's line %q; want the summary's 50+25 in it and 110 tokens in", got)
	}
}

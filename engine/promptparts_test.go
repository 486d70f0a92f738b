package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// The host's own prompt parts (a system prompt the person set) come first
// in the request's system text and are recorded in the request header as
// the host's, with their source, before the ops' parts.
func TestHostPromptParts(t *testing.T) {
	ctx := context.Background()
	log := store.NewMemory()
	if err := engine.Create(ctx, log, "s", event.SessionCreated{}, enginetest.Epoch); err != nil {
		t.Fatal(err)
	}
	var system string
	model := provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
		system = req.System
		return &provider.Response{Content: "ok", FinishReason: "stop"}, nil
	})
	op := enginetest.Static("project", []hostabi.Hook{hostabi.HookContribute}, nil, hostabi.Effect{Kind: hostabi.KindPromptPart, Text: "From AGENTS.md: be brief."})
	p, err := engine.NewPipeline(op)
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(ctx, engine.Config{Log: log, Session: "s", Pipeline: p, Provider: model,
		PromptParts: []event.Contribution{{Source: "--system", Text: "You are terse."}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if want := "You are terse.\n\nFrom AGENTS.md: be brief."; system != want {
		t.Errorf("system %q, want %q", system, want)
	}
	evs, _ := log.Read(ctx, "s", 1, 0)
	for _, e := range evs {
		if e.Type != event.EvRequestHeader {
			continue
		}
		var h event.RequestHeader
		json.Unmarshal(e.Data, &h)
		want := []event.Contribution{{Op: "host", Source: "--system", Text: "You are terse."}, {Op: "project", Text: "From AGENTS.md: be brief."}}
		if d := cmp.Diff(want, h.PromptParts); d != "" {
			t.Errorf("header prompt parts mismatch (-want +got):\n%s", d)
		}
		return
	}
	t.Fatal("no request/header")
}

package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/replay"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A model that reuses its call ids from turn to turn, as local servers
// do: every call is call_0. Replayed with the same pipeline nothing
// diverges (issue 28, item 3: replay keyed results, runs and persons by
// the model's id alone and mixed up the turns).
func TestReplayWithReusedCallIDs(t *testing.T) {
	ctx := context.Background()
	reuse := func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user" && strings.HasPrefix(last.Content, "add"):
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("call_0", "calc_add", `{"value":`+strings.TrimPrefix(last.Content, "add ")+`}`)}}
		case last.Role == "tool":
			return et.Reply{Text: "The total is " + last.Content + "."}
		}
		return et.Echo(req)
	}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: reuse},
		Ops: func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }}
	env.Create(t)
	for i, n := range []string{"2", "13", "7"} {
		env.Send(t, "add "+n)
		if o := env.RunContinuous(t); o != engine.Waiting {
			t.Fatalf("turn %d: %v, want waiting for call_0", i+1, o)
		}
		// The person allows the first and third, denies the second.
		d := engine.Decision{CallID: event.CallKey(i+1, 1, 1), Allow: i != 1, Who: "cli"}
		if !d.Allow {
			d.Note = "not that one"
		}
		if err := env.Open(t).Decide(ctx, d); err != nil {
			t.Fatal(err)
		}
		if o := env.RunContinuous(t); o != engine.Idle {
			t.Fatalf("turn %d after the decision: %v", i+1, o)
		}
	}
	evs := env.Events(t)
	rep, err := replay.Run(ctx, replay.Options{Session: "s", Events: evs,
		Pipeline: pipeline(approver(nil, nil), noTools(t))})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged() || rep.Ended != "" {
		t.Fatalf("diverged: stopped %+v, ended %q, divergences %+v", rep.Stopped, rep.Ended, rep.Divergences)
	}
}

package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A tool/result is stamped when the result came, not when the call
// started: a call that takes five seconds (on the session's clock) ends
// five seconds after its tool/call (issue 28, the log tells the truth
// about time).
func TestToolResultTimeIsWhenItCame(t *testing.T) {
	var mu sync.Mutex
	now := et.Epoch
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	slow := func(op engine.Operation) engine.Operation {
		return &engine.OpFunc{M: op.Manifest(), F: func(ctx context.Context, v *hostabi.View, rd engine.Reader) ([]hostabi.Effect, error) {
			if v.Hook == hostabi.HookTool && v.Tool.Run != "" {
				mu.Lock()
				now = now.Add(5 * time.Second)
				mu.Unlock()
			}
			return op.Handle(ctx, v, rd)
		}}
	}
	log := store.NewMemory()
	env := &et.Env{Log: log, Session: "s", Ops: calcOps}
	env.Create(t)
	env.Send(t, "go")
	answer := func(req *provider.Request) et.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "user" {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":2}`)}}
		}
		return et.Reply{Text: "done"}
	}
	p, err := engine.NewPipeline(et.Approver([]string{"calc_add"}, nil), slow(et.Calculator()))
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(context.Background(), engine.Config{Log: log, Session: "s", Pipeline: p, Provider: &et.Scripted{Answer: answer}, Durability: engine.SyncNever, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := log.Read(context.Background(), "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var called, answered time.Time
	for _, e := range evs {
		switch e.Type {
		case event.EvToolCall:
			called = e.Time
		case event.EvToolResult:
			answered = e.Time
		}
	}
	if called.IsZero() || answered.Sub(called) != 5*time.Second {
		t.Fatalf("tool/call at %v, tool/result at %v: want the result 5 s after the call", called, answered)
	}
}

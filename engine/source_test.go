package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A dynamic tool source: an op that owns a namespace ("fs__*") and
// learns its tools, and what they do, while it runs (an MCP server).

// source owns fs__* and contributes the given tools; runs are counted and
// answered by run (default: "ran NAME").
func source(r *runs, tools []hostabi.ToolSpec, run func(ctx context.Context, c hostabi.PendingCall) hostabi.Effect) engine.Operation {
	m := &hostabi.Manifest{Name: "mcp.fs", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"fs__*"}}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, rd engine.Reader) ([]hostabi.Effect, error) {
		if v.Hook == hostabi.HookContribute {
			var out []hostabi.Effect
			for i := range tools {
				t := tools[i]
				out = append(out, hostabi.Effect{Kind: hostabi.KindTool, Tool: &t})
			}
			return out, nil
		}
		if v.Tool.Run == "" {
			return nil, nil
		}
		c := v.Tool.Calls[0]
		if r != nil {
			r.add(c.ID)
		}
		if run != nil {
			return []hostabi.Effect{run(ctx, c)}, nil
		}
		return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: c.ID, Content: "ran " + c.Name}}, nil
	}}
}

// spyGuard is a guard that records the pending calls it was shown and
// allows them all.
type spyGuard struct {
	mu   sync.Mutex
	seen []hostabi.PendingCall
}

func (g *spyGuard) op() engine.Operation {
	m := &hostabi.Manifest{Name: "spy", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		var out []hostabi.Effect
		for _, c := range v.Tool.Calls {
			g.seen = append(g.seen, c)
			out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true})
		}
		return out, nil
	}}
}

// Ownership of a namespace is checked like ownership of a tool: no two
// ops may own a name, whether by namespace or exactly.
func TestPipelineRefusesOverlappingNamespaces(t *testing.T) {
	fs := source(nil, nil, nil)
	for _, tc := range []struct {
		tools []string
		want  string
	}{
		{[]string{"fs__read"}, `tools "fs__*" of "mcp.fs" and "fs__read" of "other" overlap`},
		{[]string{"fs__*"}, `tool "fs__*" is owned by both "mcp.fs" and "other"`},
		{[]string{"fs_*"}, "overlap"},
		{[]string{"fs__a__*"}, "overlap"},
	} {
		other := et.Static("other", []hostabi.Hook{hostabi.HookTool}, tc.tools)
		if _, err := engine.NewPipeline(fs, other); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tools %v: err = %v, want %q", tc.tools, err, tc.want)
		}
	}
	if _, err := engine.NewPipeline(fs, et.Static("other", []hostabi.Hook{hostabi.HookTool}, []string{"files__read", "f__*"})); err != nil {
		t.Errorf("disjoint names refused: %v", err)
	}
}

// A source contributes tools under its namespace, with what it says of
// them; the header records it, and a contribution outside the namespace,
// or naming the namespace itself, is refused whole.
func TestSourceContributesUnderItsNamespace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []hostabi.ToolSpec
		fault string
	}{
		{"inside", []hostabi.ToolSpec{{Name: "fs__read", Server: "fs", Annotations: &hostabi.ToolAnnotations{ReadOnly: true}}}, ""},
		{"outside", []hostabi.ToolSpec{{Name: "fs__read"}, {Name: "shell"}}, `tool "shell" is not in the op's manifest`},
		{"the namespace itself", []hostabi.ToolSpec{{Name: "fs__*"}}, `tool "fs__*" is not in the op's manifest`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Replay{Replies: []et.Reply{{Text: "hi"}}},
				Ops: func() []engine.Operation { return []engine.Operation{source(nil, tc.tools, nil)} }}
			env.Create(t)
			env.Send(t, "go")
			env.RunRebuilding(t)
			var h event.RequestHeader
			var fault string
			for _, e := range env.Events(t) {
				switch e.Type {
				case event.EvRequestHeader:
					mustDecode(t, e, &h)
				case event.EvOpFault:
					var f event.OpFault
					mustDecode(t, e, &f)
					fault = f.Message
				}
			}
			if tc.fault != "" {
				if !strings.Contains(fault, tc.fault) || len(h.Tools) != 0 {
					t.Fatalf("fault %q, header tools %v; want fault %q and no tools", fault, h.Tools, tc.fault)
				}
				return
			}
			if fault != "" || len(h.Tools) != 1 {
				t.Fatalf("fault %q, tools %+v", fault, h.Tools)
			}
			got := h.Tools[0]
			if got.Owner != "mcp.fs" || got.Server != "fs" || !got.Idempotent || got.Annotations == nil || !got.Annotations.ReadOnly {
				t.Errorf("header tool %+v: want owner mcp.fs, server fs, idempotent from the read-only hint", got)
			}
		})
	}
}

// Guards judge a call by what its source said of the tool: the server
// and annotations reach the guard's view and a waiting call.
func TestGuardsSeeTheToolsServerAndAnnotations(t *testing.T) {
	ann := &hostabi.ToolAnnotations{Destructive: true, OpenWorld: true}
	tools := []hostabi.ToolSpec{{Name: "fs__rm", Server: "fs", Annotations: ann}}
	g := &spyGuard{}
	env := &et.Env{Log: store.NewMemory(), Session: "s",
		Provider: &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "fs__rm", `{"path":"x"}`)}}, {Text: "done"}}},
		Ops:      func() []engine.Operation { return []engine.Operation{g.op(), source(nil, tools, nil)} }}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v", o)
	}
	if len(g.seen) == 0 {
		t.Fatal("the guard was never asked")
	}
	c := g.seen[0]
	if c.Owner != "mcp.fs" || c.Server != "fs" || c.Annotations == nil || *c.Annotations != *ann {
		t.Errorf("guard saw %+v; want owner mcp.fs, server fs, annotations %+v", c, *ann)
	}

	// A person's prompt names them too.
	env2 := &et.Env{Log: store.NewMemory(), Session: "s",
		Provider: &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "fs__rm", `{}`)}}}},
		Ops:      func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), source(nil, tools, nil)} }}
	env2.Create(t)
	sess, err := session.OpenSession(context.Background(), engine.Config{Log: env2.Log, Session: "s", Pipeline: mustPipeline(t, env2.Ops()...), Provider: env2.Provider, Durability: engine.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	if _, err := sess.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	sess.WhenIdle(context.Background())
	w := sess.Waiting()
	if len(w) != 1 || w[0].Server != "fs" || w[0].Owner != "mcp.fs" || w[0].Annotations == nil || !w[0].Annotations.Destructive {
		t.Errorf("waiting %+v; want the call with server fs and its annotations", w)
	}
}

func mustPipeline(t *testing.T, ops ...engine.Operation) *engine.Pipeline {
	t.Helper()
	p, err := engine.NewPipeline(ops...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// failResults fails every append that carries a tool result while armed:
// the process died after the intent was durable and before the result.
type failResults struct {
	store.Log
	armed bool
}

var errKilled = errors.New("killed")

func (l *failResults) Append(ctx context.Context, s string, head uint64, evs ...store.Event) (uint64, error) {
	for _, e := range evs {
		if l.armed && e.Type == event.EvToolResult {
			return 0, errKilled
		}
	}
	return l.Log.Append(ctx, s, head, evs...)
}

// A source's per-tool idempotency counts after a crash like a manifest's:
// the read-only tool runs again under the next writer, the other is
// answered TOOL_OUTCOME_UNKNOWN and never runs twice.
func TestSourceIdempotencySurvivesACrash(t *testing.T) {
	tools := []hostabi.ToolSpec{
		{Name: "fs__read", Annotations: &hostabi.ToolAnnotations{ReadOnly: true}},
		{Name: "fs__write", Annotations: &hostabi.ToolAnnotations{Destructive: true}},
	}
	for _, tc := range []struct {
		tool     string
		runs     int
		code     string
		rerunLog bool
	}{
		{"fs__read", 2, "", true},
		{"fs__write", 1, hostabi.CodeOutcomeUnknown, false},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			var r runs
			log := &failResults{Log: store.NewMemory()}
			prov := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", tc.tool, `{}`)}}, {Text: "ok"}}}
			env := &et.Env{Log: log, Session: "s", Provider: prov, Writer: "w1",
				Ops: func() []engine.Operation { return []engine.Operation{source(&r, tools, nil)} }}
			env.Create(t)
			env.Send(t, "go")
			log.armed = true
			if _, err := env.Open(t).Run(context.Background()); !errors.Is(err, errKilled) {
				t.Fatalf("first writer: err %v, want the kill", err)
			}
			log.armed = false
			env.Writer = "w2"
			if o := env.RunRebuilding(t); o != engine.Idle {
				t.Fatalf("outcome %v", o)
			}
			if got := r.get("1.1.1"); got != tc.runs {
				t.Errorf("the tool ran %d times, want %d", got, tc.runs)
			}
			var res event.ToolResult
			rerun := false
			for _, e := range env.Events(t) {
				switch e.Type {
				case event.EvToolResult:
					mustDecode(t, e, &res)
				case event.EvToolCall:
					var c event.ToolCallEvent
					mustDecode(t, e, &c)
					rerun = rerun || c.Rerun
				}
			}
			if res.Code != tc.code || rerun != tc.rerunLog {
				t.Errorf("result %+v rerun %v; want code %q rerun %v", res, rerun, tc.code, tc.rerunLog)
			}
		})
	}
}

// Cancelling a turn reaches an owner running a started call through
// TurnDone, with the cause, while its context stays alive so that its
// result (saying it was cancelled) is still recorded exactly once.
func TestTurnDoneReachesARunningOwner(t *testing.T) {
	if done, _ := engine.TurnDone(context.Background()); done != nil {
		t.Fatal("TurnDone outside a run must be nil")
	}
	started := make(chan struct{})
	run := func(ctx context.Context, c hostabi.PendingCall) hostabi.Effect {
		close(started)
		done, cause := engine.TurnDone(ctx)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			return hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, Content: "never told"}
		}
		if ctx.Err() != nil {
			return hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, Content: "the run's context died with the turn"}
		}
		return hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, IsError: true, Content: "cancelled: " + cause().Error()}
	}
	tools := []hostabi.ToolSpec{{Name: "fs__slow"}}
	env := &et.Env{Log: store.NewMemory(), Session: "s",
		Provider: &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "fs__slow", `{}`)}}}},
		Ops:      func() []engine.Operation { return []engine.Operation{source(nil, tools, run)} }}
	env.Create(t)
	env.Send(t, "go")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-started; cancel(errors.New("the user pressed Ctrl-C")) }()
	if _, err := env.Open(t).Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want cancelled", err)
	}
	var res event.ToolResult
	n := 0
	for _, e := range env.Events(t) {
		if e.Type == event.EvToolResult {
			mustDecode(t, e, &res)
			n++
		}
	}
	if n != 1 || res.Content != "cancelled: the user pressed Ctrl-C" || !res.IsError {
		t.Errorf("%d results, last %+v; want one saying it was cancelled, with the cause", n, res)
	}
}

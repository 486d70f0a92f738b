package builtins_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/wasmhost"
)

var update = flag.Bool("update", false, "rewrite golden logs in testdata/golden/builtins")

var (
	pooled, fresh *wasmhost.Runtime
	root          = ".."
)

func TestMain(m *testing.M) {
	ctx := context.Background()
	cache := filepath.Join(os.TempDir(), "wagent-builtins-test-cache")
	var err error
	// pooled keeps instances between calls, as in production; fresh keeps
	// none, so the rebuilding runner starts every call in a new instance.
	if pooled, err = wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(cache)); err != nil {
		panic(err)
	}
	if fresh, err = wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(cache), wasmhost.WithPool(0, 1)); err != nil {
		panic(err)
	}
	code := m.Run()
	pooled.Close(ctx)
	fresh.Close(ctx)
	os.Exit(code)
}

// spec is a pipeline of built-ins (by name, with config) and the example
// calculator, which owns the calc_* tools.
func spec(t *testing.T, entries ...pipeline.OpSpec) *pipeline.Spec {
	t.Helper()
	return &pipeline.Spec{Path: "test", Dir: root, Ops: entries}
}

func builtin(name, config string, mounts ...string) pipeline.OpSpec {
	op := pipeline.OpSpec{Use: "builtin:" + name, Mounts: mounts}
	if config != "" {
		op.Config = json.RawMessage(config)
	}
	return op
}

var calculator = pipeline.OpSpec{Use: "examples/wasm-ops/calculator/calculator.wasm"}

func ops(t *testing.T, s *pipeline.Spec, rt *wasmhost.Runtime) func() []engine.Operation {
	return func() []engine.Operation {
		l, err := s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: builtins.Bundle()})
		if err != nil {
			t.Fatalf("build pipeline: %v", err)
		}
		var out []engine.Operation
		for _, o := range l.Ops {
			out = append(out, o)
		}
		return out
	}
}

type run struct {
	env      *et.Env
	provider *et.Replay
}

// start makes a session on a fresh store with the pipeline and replies.
func start(t *testing.T, s *pipeline.Spec, replies []et.Reply, rebuild bool) *run {
	rt := pooled
	if rebuild {
		rt = fresh
	}
	p := &et.Replay{Replies: replies}
	env := &et.Env{Log: store.NewMemory(), Session: "b", Provider: p, Ops: ops(t, s, rt)}
	env.Create(t)
	return &run{env: env, provider: p}
}

func (r *run) go_(t *testing.T, rebuild bool) engine.Outcome {
	if rebuild {
		return r.env.RunRebuilding(t)
	}
	return r.env.RunContinuous(t)
}

// golden compares a log with its golden file.
func golden(t *testing.T, name string, evs []store.Event) {
	t.Helper()
	path := filepath.Join(root, "testdata", "golden", "builtins", name+".jsonl")
	got := et.Lines(evs)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("log mismatch (-want +got):\n%s", diff)
	}
}

// both runs a scenario continuously and with the machine and every wasm
// instance rebuilt after each transition, requires the same log from
// both, and checks it against the golden file.
func both(t *testing.T, name string, scenario func(t *testing.T, rebuild bool) []store.Event) []store.Event {
	t.Helper()
	cont := scenario(t, false)
	reb := scenario(t, true)
	if diff := cmp.Diff(et.Lines(cont), et.Lines(reb)); diff != "" {
		t.Fatalf("continuous and rebuilding runs differ (-continuous +rebuilding):\n%s", diff)
	}
	if _, err := event.Fold("b", cont); err != nil {
		t.Fatalf("fold refuses the log: %v", err)
	}
	golden(t, name, cont)
	return cont
}

func data[T any](t *testing.T, evs []store.Event, typ string) []T {
	var out []T
	for _, e := range evs {
		if e.Type == typ {
			var v T
			if err := json.Unmarshal(e.Data, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

func calls(id, name, args string) et.Reply {
	return et.Reply{Calls: []hostabi.ToolCall{et.Call(id, name, args)}}
}

func TestApprovalAskThenDecide(t *testing.T) {
	s := spec(t, builtin("approval", `{"mode":"ask","allow":["calc_total"]}`), calculator)
	evs := both(t, "approval-ask", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{
			{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":2}`), et.Call("c2", "calc_total", `{}`)}},
			{Text: "The total is 2."},
		}, rebuild)
		r.env.Send(t, "add 2")
		if o := r.go_(t, rebuild); o != engine.Waiting {
			t.Fatalf("outcome %v, want waiting", o)
		}
		// Nothing runs while a person decides.
		if n := len(data[event.ToolCallEvent](t, r.env.Events(t), event.EvToolCall)); n != 0 {
			t.Fatalf("%d calls ran before the decision", n)
		}
		// The decision comes from a fresh machine (another process).
		if err := r.env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.1", Allow: true, Who: "alice"}); err != nil {
			t.Fatal(err)
		}
		if o := r.go_(t, rebuild); o != engine.Idle {
			t.Fatalf("outcome %v after the decision", o)
		}
		return r.env.Events(t)
	})
	runs := 0
	for _, c := range data[event.ToolCallEvent](t, evs, event.EvToolCall) {
		if c.CallID == "1.1.1" {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("c1 ran %d times, want once", runs)
	}
}

func TestApprovalDenyRules(t *testing.T) {
	// The ask rule names a tool the model does not call: a rule on an
	// argument asks for every call of its tools whose argument is not a
	// string, and the calculator's are numbers.
	s := spec(t, builtin("approval", `{"mode":"auto","deny":["calc_div*"],"ask":[{"tool":"calc_mul*","arg":"value","match":"^13$"}]}`), calculator)
	evs := both(t, "approval-deny", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{
			{Calls: []hostabi.ToolCall{et.Call("c1", "calc_divide", `{"value":2}`), et.Call("c2", "calc_add", `{"value":5}`)}},
			{Text: "Divided? No: denied."},
		}, rebuild)
		r.env.Send(t, "go")
		if o := r.go_(t, rebuild); o != engine.Idle {
			t.Fatalf("outcome %v", o)
		}
		return r.env.Events(t)
	})
	ds := data[event.ApprovalDecision](t, evs, event.EvApprovalDecision)
	if len(ds) != 2 || ds[0].Allow || !ds[1].Allow {
		t.Fatalf("decisions %+v, want c1 denied and c2 allowed", ds)
	}
	for _, r := range data[event.ToolResult](t, evs, event.EvToolResult) {
		if r.CallID == "1.1.1" && r.Code != hostabi.CodeDenied {
			t.Errorf("c1 result code %q", r.Code)
		}
	}
}

func TestApprovalAlwaysIsRemembered(t *testing.T) {
	s := spec(t, builtin("approval", `{"mode":"ask"}`), calculator)
	both(t, "approval-always", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{
			calls("c1", "calc_add", `{"value":1}`), {Text: "one"},
			calls("c2", "calc_add", `{"value":1}`), {Text: "two"},
		}, rebuild)
		r.env.Send(t, "add one")
		if o := r.go_(t, rebuild); o != engine.Waiting {
			t.Fatalf("outcome %v", o)
		}
		if err := r.env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.1", Allow: true, Scope: hostabi.ScopeAlways, Who: "bob"}); err != nil {
			t.Fatal(err)
		}
		r.go_(t, rebuild)
		// The second turn's call is allowed by the remembered decision.
		r.env.Send(t, "add one again")
		if o := r.go_(t, rebuild); o != engine.Idle {
			t.Fatalf("second turn outcome %v, want idle (no second question)", o)
		}
		evs := r.env.Events(t)
		if n := len(data[event.ApprovalRequest](t, evs, event.EvApprovalRequest)); n != 1 {
			t.Errorf("%d approval requests, want 1", n)
		}
		return evs
	})
}

func TestSkillsListedAndLoaded(t *testing.T) {
	s := spec(t, builtin("approval", `{"mode":"ask","allow":["load_skill"]}`), builtin("skills", "", "testdata/skills:/skills:ro"))
	evs := both(t, "skills", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{
			calls("c1", "load_skill", `{"name":"release-notes"}`),
			{Text: "Noted."},
		}, rebuild)
		r.env.Send(t, "write release notes")
		r.env.Send(t, "/skills")
		if o := r.go_(t, rebuild); o != engine.Idle {
			t.Fatalf("outcome %v", o)
		}
		req := r.provider.Requests[0]
		if !strings.Contains(req.System, "- code-review: A checklist for reviewing a change: tests, errors, names.") ||
			!strings.Contains(req.System, "- release-notes: How we write release notes") || strings.Contains(req.System, "Start with one sentence") {
			t.Errorf("system prompt lists the skills wrongly:\n%s", req.System)
		}
		return r.env.Events(t)
	})
	res := data[event.ToolResult](t, evs, event.EvToolResult)
	if len(res) != 1 || !strings.Contains(res[0].Content, "\n\nStart with one sentence") || !strings.HasPrefix(res[0].Content, "Skill release-notes, in the folder /skills/release-notes.") || res[0].IsError {
		t.Errorf("load_skill result %+v", res)
	}
	reply := data[event.CommandReply](t, evs, event.EvCommandReply)
	if len(reply) != 1 || !strings.Contains(reply[0].Text, "- code-review") {
		t.Errorf("/skills reply %+v", reply)
	}
}

func TestRetry(t *testing.T) {
	s := spec(t, builtin("retry", `{"attempts":3,"initial_ms":100,"max_ms":1000,"jitter":0}`))
	var sleeps []time.Duration
	evs := both(t, "retry", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{
			{Fail: &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1500, Message: "slow down"}},
			{Fail: &hostabi.Failure{Code: hostabi.FailOverloaded, Status: 529, Message: "overloaded"}},
			{Text: "Answered after two retries."},
			{Fail: &hostabi.Failure{Code: hostabi.FailAuth, Status: 401, Message: "bad key"}},
		}, rebuild)
		r.env.Send(t, "first")
		r.go_(t, rebuild)
		r.env.Send(t, "second")
		r.go_(t, rebuild)
		sleeps = r.env.Sleeps
		return r.env.Events(t)
	})
	sched := data[event.RetryScheduled](t, evs, event.EvRetryScheduled)
	if len(sched) != 2 || sched[0].DelayMS != 1500 || sched[1].DelayMS != 200 {
		t.Errorf("retries %+v, want 1500 ms (Retry-After) then 200 ms (backoff)", sched)
	}
	if diff := cmp.Diff([]time.Duration{1500 * time.Millisecond, 200 * time.Millisecond}, sleeps); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	ends := data[event.TurnEnd](t, evs, event.EvTurnEnd)
	if len(ends) != 2 || ends[0].Reason != event.ReasonCompleted || ends[1].Reason != event.ReasonError {
		t.Errorf("turn ends %+v, want completed then error (auth is not retried)", ends)
	}
}

func TestRetryLongRetryAfterIsNotRetried(t *testing.T) {
	s := spec(t, builtin("retry", `{"max_retry_after_ms":5000}`))
	r := start(t, s, []et.Reply{{Fail: &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 60000}}}, false)
	r.env.Send(t, "x")
	r.go_(t, false)
	evs := r.env.Events(t)
	if n := len(data[event.RetryScheduled](t, evs, event.EvRetryScheduled)); n != 0 {
		t.Errorf("%d retries for a 60 s Retry-After over the 5 s cap", n)
	}
}

func TestTurnStoppingContinuesOnceThenEnds(t *testing.T) {
	s := spec(t, builtin("turn-stopping", `{"require_phrase":"DONE","max_continuations":1}`))
	evs := both(t, "turn-stopping", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{{Text: "Working on it."}, {Text: "Still working."}}, rebuild)
		r.env.Send(t, "finish with DONE")
		r.go_(t, rebuild)
		return r.env.Events(t)
	})
	steps := data[event.StepEnd](t, evs, event.EvStepEnd)
	if len(steps) != 2 || steps[0].Outcome != "steered" {
		t.Errorf("steps %+v, want one steered continuation then the end", steps)
	}
}

func TestMaxTurnsEndsWithLimit(t *testing.T) {
	s := spec(t, builtin("max-turns", `{"max_steps":2}`), calculator)
	evs := both(t, "max-turns", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{calls("c1", "calc_total", `{}`), calls("c2", "calc_total", `{}`)}, rebuild)
		r.env.Send(t, "loop")
		r.go_(t, rebuild)
		if len(r.provider.Requests) != 2 || len(r.provider.Requests[1].TopOfMind) != 1 || !strings.Contains(r.provider.Requests[1].TopOfMind[0], "request 2 of 2") {
			t.Errorf("requests %d; second top-of-mind %v", len(r.provider.Requests), r.provider.Requests[len(r.provider.Requests)-1].TopOfMind)
		}
		return r.env.Events(t)
	})
	ends := data[event.TurnEnd](t, evs, event.EvTurnEnd)
	if len(ends) != 1 || ends[0].Reason != event.ReasonLimit || !strings.Contains(ends[0].Message, "budget of 2") {
		t.Errorf("turn end %+v", ends)
	}
}

func TestUnknownTool(t *testing.T) {
	s := spec(t, calculator, builtin("unknown-tool", ""))
	evs := both(t, "unknown-tool", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{calls("c1", "shell", `{"command":"ls"}`), {Text: "No shell here."}}, rebuild)
		r.env.Send(t, "list files")
		r.go_(t, rebuild)
		return r.env.Events(t)
	})
	res := data[event.ToolResult](t, evs, event.EvToolResult)
	if len(res) != 1 || res[0].Op != "unknown-tool" || res[0].Code != hostabi.CodeUnknownTool ||
		!strings.Contains(res[0].Content, `no tool named "shell"`) || !strings.Contains(res[0].Content, "calc_add, calc_divide") {
		t.Errorf("result %+v", res)
	}
}

func TestFinalOutput(t *testing.T) {
	s := spec(t, builtin("final-output", `{"schema":{"type":"object","required":["answer"],"properties":{"answer":{"type":"string"}}}}`))
	evs := both(t, "final-output", func(t *testing.T, rebuild bool) []store.Event {
		r := start(t, s, []et.Reply{
			calls("c1", "final_output", `{"answer":42}`),
			calls("c2", "final_output", `{"answer":"42"}`),
		}, rebuild)
		r.env.Send(t, "what is six times seven?")
		r.go_(t, rebuild)
		return r.env.Events(t)
	})
	res := data[event.ToolResult](t, evs, event.EvToolResult)
	// Arguments that do not fit the schema are answered by the host before
	// the op (and any guard) sees them; the op takes the next call.
	if len(res) != 2 || !res[0].IsError || res[0].Code != hostabi.CodeBadArguments || !strings.Contains(res[0].Content, "at '/answer': got number, want string") || !res[1].ConcludesTurn || res[1].Content != `{"answer":"42"}` {
		t.Errorf("results %+v", res)
	}
	ends := data[event.TurnEnd](t, evs, event.EvTurnEnd)
	if len(ends) != 1 || ends[0].Reason != event.ReasonCompleted {
		t.Errorf("turn ends %+v", ends)
	}
}

// A fault forced in any built-in becomes op/fault; approval's fails closed.
func TestFaultsInEveryBuiltin(t *testing.T) {
	cases := []struct {
		name  string
		op    pipeline.OpSpec
		reply []et.Reply
		send  string
	}{
		{"approval", builtin("approval", `{"mode":"auto","_fault":"trap"}`), []et.Reply{calls("c1", "calc_add", `{"value":1}`), {Text: "denied"}}, "go"},
		{"skills", builtin("skills", `{"_fault":"error"}`, "testdata/skills:/skills:ro"), []et.Reply{{Text: "ok"}}, "go"},
		{"retry", builtin("retry", `{"_fault":"trap"}`), []et.Reply{{Fail: &hostabi.Failure{Code: hostabi.FailServer, Status: 500}}}, "go"},
		{"turn-stopping", builtin("turn-stopping", `{"require_phrase":"x","_fault":"trap"}`), []et.Reply{{Text: "ok"}}, "go"},
		{"max-turns", builtin("max-turns", `{"_fault":"error"}`), []et.Reply{{Text: "ok"}}, "go"},
		{"unknown-tool", builtin("unknown-tool", `{"_fault":"trap"}`), []et.Reply{calls("c1", "nope", `{}`), {Text: "ok"}}, "go"},
		{"final-output", builtin("final-output", `{"_fault":"error"}`), []et.Reply{{Text: "ok"}}, "go"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, spec(t, tc.op, calculator), tc.reply, false)
			r.env.Send(t, tc.send)
			r.go_(t, false)
			evs := r.env.Events(t)
			fs := data[event.OpFault](t, evs, event.EvOpFault)
			if len(fs) == 0 || fs[0].Op != tc.name {
				t.Fatalf("faults %+v, want one from %s\n%s", fs, tc.name, et.Lines(evs))
			}
			if _, err := event.Fold("b", evs); err != nil {
				t.Fatal(err)
			}
			if tc.name == "approval" {
				if n := len(data[event.ToolCallEvent](t, evs, event.EvToolCall)); n != 0 {
					t.Errorf("a call ran although approval faulted")
				}
				res := data[event.ToolResult](t, evs, event.EvToolResult)
				if len(res) != 1 || res[0].Code != hostabi.CodeDenied {
					t.Errorf("results %+v, want the call denied", res)
				}
			}
		})
	}
}

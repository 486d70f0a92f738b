package engine_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

var update = flag.Bool("update", false, "rewrite golden logs in testdata/golden")

type scenario struct {
	name    string
	replies []et.Reply
	ops     func() []engine.Operation
	sends   []string
	want    engine.Outcome
}

func calcOps() []engine.Operation { return []engine.Operation{et.Calculator()} }

var scenarios = []scenario{
	{
		name:    "plain-answer",
		replies: []et.Reply{{Text: "Hello there.", Chunks: 3}},
		ops:     calcOps,
		sends:   []string{"hi"},
	},
	{
		name: "one-tool-call",
		replies: []et.Reply{
			{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":2}`)}},
			{Text: "The total is 2."},
		},
		ops:   calcOps,
		sends: []string{"add 2"},
	},
	{
		name: "parallel-tool-calls",
		replies: []et.Reply{
			{Text: "Working.", Calls: []hostabi.ToolCall{
				et.Call("c1", "calc_add", `{"value":5}`),
				et.Call("c2", "calc_multiply", `{"value":3}`),
				et.Call("c3", "calc_total", `{}`),
			}},
			{Text: "The total is 15."},
		},
		ops:   calcOps,
		sends: []string{"add 5 then triple it"},
	},
	{
		name: "unknown-tool",
		replies: []et.Reply{
			{Calls: []hostabi.ToolCall{et.Call("c1", "shell", `{"command":"ls"}`)}},
			{Text: "I cannot run shell commands here."},
		},
		ops:   calcOps,
		sends: []string{"list files"},
	},
	{
		name: "tool-error",
		replies: []et.Reply{
			{Calls: []hostabi.ToolCall{et.Call("c1", "calc_divide", `{"value":0}`)}},
			{Text: "Division by zero is not allowed."},
		},
		ops:   calcOps,
		sends: []string{"divide by zero"},
	},
	{
		name: "steered-by-turn-stopping",
		replies: []et.Reply{
			{Text: "Thinking about it."},
			{Text: "All finished. DONE"},
		},
		ops:   func() []engine.Operation { return []engine.Operation{et.Calculator(), et.Stopper("DONE", 2)} },
		sends: []string{"do the work"},
	},
	{
		name: "concludes-turn",
		replies: []et.Reply{
			{Calls: []hostabi.ToolCall{et.Call("c1", "finish", `{"answer":"42"}`)}},
		},
		ops:   func() []engine.Operation { return []engine.Operation{et.Calculator(), et.Finisher()} },
		sends: []string{"answer and finish"},
	},
	{
		name: "retried-twice-then-answered",
		replies: []et.Reply{
			{Fail: &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1500, Message: "slow down"}},
			{Fail: &hostabi.Failure{Code: hostabi.FailServer, Status: 500, Message: "boom"}},
			{Text: "Third time lucky."},
		},
		ops: func() []engine.Operation {
			return []engine.Operation{et.Calculator(), et.Retrier(3, 200*time.Millisecond)}
		},
		sends: []string{"hello"},
	},
	{
		name: "not-retried",
		replies: []et.Reply{
			{Fail: &hostabi.Failure{Code: hostabi.FailAuth, Status: 401, Message: "invalid api key"}},
		},
		ops: func() []engine.Operation {
			return []engine.Operation{et.Calculator(), et.Retrier(3, 200*time.Millisecond)}
		},
		sends: []string{"hello"},
	},
	{
		name: "max-tokens-then-tool-call",
		replies: []et.Reply{
			{Text: "Let me add", Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":1}`)}, Finish: "length"},
			{Text: "The total is 1."},
		},
		ops:   calcOps,
		sends: []string{"add 1"},
	},
	{
		name: "three-turns-drain",
		replies: []et.Reply{
			{Text: "one"}, {Text: "two"}, {Text: "three"},
		},
		ops:   calcOps,
		sends: []string{"first", "second", "third"},
	},
}

func runScenario(t *testing.T, sc scenario, rebuild bool) ([]store.Event, *et.Replay) {
	t.Helper()
	p := &et.Replay{Replies: sc.replies}
	env := &et.Env{Log: store.NewMemory(), Session: "golden", Provider: p, Ops: sc.ops}
	env.Create(t)
	for _, s := range sc.sends {
		env.Send(t, s)
	}
	var o engine.Outcome
	if rebuild {
		o = env.RunRebuilding(t)
	} else {
		o = env.RunContinuous(t)
	}
	want := sc.want
	if want == engine.Progressed {
		want = engine.Idle
	}
	if o != want {
		t.Fatalf("outcome %v, want %v", o, want)
	}
	for i, r := range p.Requests {
		if err := et.Unanswered(r.Messages); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if p.Calls() != len(sc.replies) {
		t.Errorf("provider called %d times, %d replies scripted", p.Calls(), len(sc.replies))
	}
	return env.Events(t), p
}

func TestGoldenLogs(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			cont, _ := runScenario(t, sc, false)
			reb, _ := runScenario(t, sc, true)
			if diff := cmp.Diff(et.Lines(cont), et.Lines(reb)); diff != "" {
				t.Fatalf("continuous and rebuilding runs differ (-continuous +rebuilding):\n%s", diff)
			}
			if _, err := event.Fold("golden", cont); err != nil {
				t.Fatalf("fold refuses the log: %v", err)
			}
			path := filepath.Join("..", "testdata", "golden", "engine", sc.name+".jsonl")
			got := et.Lines(cont)
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
		})
	}
}

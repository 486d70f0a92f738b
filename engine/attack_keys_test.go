package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
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

// A call's key names one call in the session (DESIGN.md §12). Calls
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
	if !errors.Is(err, engine.ErrCorruptLog) || !strings.Contains(err.Error(), "has no key") {
		t.Fatalf("import: %v, want ErrCorruptLog: an answer without keys after one with them", err)
	}
	// Any id at all, once the session has keys.
	evs = rekey(t, keyedTwoTurns(t), 2, "2.1.1", "legacy-id")
	if _, err := engine.Fold("s", evs); !errors.Is(err, engine.ErrCorruptLog) {
		t.Fatalf("fold: %v, want ErrCorruptLog", err)
	}
	// A log written before keys throughout is still read.
	evs = rekey(t, rekey(t, keyedTwoTurns(t), 1, "1.1.1", "c"), 2, "2.1.1", "c")
	if _, err := engine.Fold("s", evs); err != nil {
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

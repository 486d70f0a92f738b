package engine_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/store"
)

func ev(seq uint64, typ string, data string) store.Event {
	return store.Event{Seq: seq, Type: typ, Time: time.Unix(0, 0).UTC(), Data: json.RawMessage(data)}
}

func TestFoldRefusesBrokenLogs(t *testing.T) {
	created := ev(1, engine.EvSessionCreated, `{}`)
	turn1 := ev(2, engine.EvTurnStart, `{"turn":1}`)
	cases := []struct {
		name string
		evs  []store.Event
		want string
	}{
		{"gap in seqs", []store.Event{created, ev(3, engine.EvTurnStart, `{"turn":1}`)}, "seq 3: expected seq 2"},
		{"no session/created", []store.Event{ev(1, engine.EvTurnStart, `{"turn":1}`)}, "seq 1: the first event is turn/start"},
		{"nested turns", []store.Event{created, turn1, ev(3, engine.EvTurnStart, `{"turn":2}`)}, "seq 3: turn 2 starts while turn 1 is open"},
		{"turn numbers skip", []store.Event{created, ev(2, engine.EvTurnStart, `{"turn":2}`)}, "seq 2: turn 2 starts after turn 0"},
		{"step numbers skip", []store.Event{created, turn1, ev(3, engine.EvStepStart, `{"turn":1,"step":2}`)}, "seq 3: step 2 starts after step 0"},
		{"turn ends with step open", []store.Event{created, turn1, ev(3, engine.EvStepStart, `{"turn":1,"step":1}`), ev(4, engine.EvTurnEnd, `{"turn":1,"reason":"completed"}`)}, "seq 4: turn 1 ends with step 1 open"},
		{"result for no call", []store.Event{created, turn1, ev(3, engine.EvStepStart, `{"turn":1,"step":1}`), ev(4, engine.EvToolResult, `{"call_id":"x","content":""}`)}, "seq 4: tool/result for call x"},
		{"message id twice", []store.Event{created,
			ev(2, engine.EvInboxSpliced, `{"list":"next-turn","start":0,"inserted":[{"id":"a","content":"1"}]}`),
			ev(3, engine.EvInboxSpliced, `{"list":"next-step","start":0,"inserted":[{"id":"a","content":"2"}]}`)}, "seq 3: inbox message id a used twice"},
		{"splice out of range", []store.Event{created, ev(2, engine.EvInboxSpliced, `{"list":"next-turn","start":0,"removed":1}`)}, "seq 2: splice of next-turn at 0 removing 1 is out of range"},
		{"malformed data", []store.Event{created, ev(2, engine.EvTurnStart, `{"turn":"one"}`)}, "seq 2: turn/start data"},
		{"answer without request", []store.Event{created, turn1, ev(3, engine.EvStepStart, `{"turn":1,"step":1}`), ev(4, engine.EvAssistantMessage, `{"content":"hi"}`)}, "seq 4: assistant message without a pending request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engine.Fold("s", tc.evs)
			if !errors.Is(err, engine.ErrCorruptLog) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrCorruptLog containing %q", err, tc.want)
			}
		})
	}
}

// The fold accepts every golden log, event by event.
func TestFoldAcceptsGoldenLogs(t *testing.T) {
	for _, sc := range scenarios {
		evs, _ := runScenario(t, sc, false)
		st, err := engine.Fold("s", evs)
		if err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
		if st.TurnOpen || st.Head != uint64(len(evs)) {
			t.Errorf("%s: turn open %v, head %d of %d", sc.name, st.TurnOpen, st.Head, len(evs))
		}
	}
}

// FuzzFold feeds the fold arbitrary events: it must never panic, and must
// either accept or refuse with ErrCorruptLog.
func FuzzFold(f *testing.F) {
	for _, sc := range scenarios[:4] {
		evs, _ := runScenarioF(f, sc)
		f.Add([]byte(et.Lines(evs)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var evs []store.Event
		for _, line := range strings.Split(string(b), "\n") {
			var e store.Event
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			evs = append(evs, e)
		}
		_, err := engine.Fold("s", evs)
		if err != nil && !errors.Is(err, engine.ErrCorruptLog) {
			t.Fatalf("error not wrapping ErrCorruptLog: %v", err)
		}
	})
}

func runScenarioF(f *testing.F, sc scenario) ([]store.Event, *et.Replay) {
	p := &et.Replay{Replies: sc.replies}
	env := &et.Env{Log: store.NewMemory(), Session: "golden", Provider: p, Ops: sc.ops}
	env.Create(f)
	for _, s := range sc.sends {
		env.Send(f, s)
	}
	env.RunContinuous(f)
	return env.Events(f), p
}

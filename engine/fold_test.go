package engine_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// ev makes an event; turn and step events are placed where their data
// says, others are left unplaced (0, 0), as input from outside may be.
func ev(seq uint64, typ string, data string) store.Event {
	e := store.Event{Seq: seq, Type: typ, Time: time.Unix(0, 0).UTC(), Data: json.RawMessage(data)}
	var place struct{ Turn, Step int }
	json.Unmarshal(e.Data, &place)
	switch typ {
	case event.EvTurnStart, event.EvTurnEnd:
		e.Turn = place.Turn
	case event.EvStepStart, event.EvStepEnd:
		e.Turn, e.Step = place.Turn, place.Step
	}
	return e
}

// at places an event at turn and step.
func at(e store.Event, turn, step int) store.Event {
	e.Turn, e.Step = turn, step
	return e
}

func TestFoldRefusesBrokenLogs(t *testing.T) {
	created := ev(1, event.EvSessionCreated, `{}`)
	turn1 := ev(2, event.EvTurnStart, `{"turn":1}`)
	cases := []struct {
		name string
		evs  []store.Event
		want string
	}{
		{"gap in seqs", []store.Event{created, ev(3, event.EvTurnStart, `{"turn":1}`)}, "seq 3: expected seq 2"},
		{"no session/created", []store.Event{ev(1, event.EvTurnStart, `{"turn":1}`)}, "seq 1: the first event is turn/start"},
		{"nested turns", []store.Event{created, turn1, ev(3, event.EvTurnStart, `{"turn":2}`)}, "seq 3: turn 2 starts while turn 1 is open"},
		{"turn numbers skip", []store.Event{created, ev(2, event.EvTurnStart, `{"turn":2}`)}, "seq 2: turn 2 starts after turn 0"},
		{"step numbers skip", []store.Event{created, turn1, ev(3, event.EvStepStart, `{"turn":1,"step":2}`)}, "seq 3: step 2 starts after step 0"},
		{"turn ends with step open", []store.Event{created, turn1, ev(3, event.EvStepStart, `{"turn":1,"step":1}`), ev(4, event.EvTurnEnd, `{"turn":1,"reason":"completed"}`)}, "seq 4: turn 1 ends with step 1 open"},
		{"result for no call", []store.Event{created, turn1, ev(3, event.EvStepStart, `{"turn":1,"step":1}`), ev(4, event.EvToolResult, `{"call_id":"x","content":""}`)}, "seq 4: tool/result for call x"},
		{"message id twice", []store.Event{created,
			ev(2, event.EvInboxSpliced, `{"list":"next-turn","start":0,"inserted":[{"id":"a","content":"1"}]}`),
			ev(3, event.EvInboxSpliced, `{"list":"next-step","start":0,"inserted":[{"id":"a","content":"2"}]}`)}, "seq 3: inbox message id a used twice"},
		{"splice out of range", []store.Event{created, ev(2, event.EvInboxSpliced, `{"list":"next-turn","start":0,"removed":1}`)}, "seq 2: splice of next-turn at 0 removing 1 is out of range"},
		{"malformed data", []store.Event{created, ev(2, event.EvTurnStart, `{"turn":"one"}`)}, "seq 2: turn/start data"},
		{"answer without request", []store.Event{created, turn1, ev(3, event.EvStepStart, `{"turn":1,"step":1}`), ev(4, event.EvAssistantMessage, `{"content":"hi"}`)}, "seq 4: assistant message without a pending request"},
		// The envelope and the data agree.
		{"envelope turn is not the data's", []store.Event{created, at(ev(2, event.EvTurnStart, `{"turn":1}`), 99, 0)}, "seq 2: turn/start is placed at turn 99 step 0, but its data says turn 1 step 0"},
		{"event placed in another turn", []store.Event{created, turn1, ev(3, event.EvStepStart, `{"turn":1,"step":1}`), at(ev(4, event.EvAssistantMessage, `{"content":"hi"}`), 99, 1)}, "seq 4: assistant/message is placed at turn 99 step 1, but the log is at turn 1 step 1"},
		{"step end placed outside its step", []store.Event{created, turn1, ev(3, event.EvStepStart, `{"turn":1,"step":1}`), at(ev(4, event.EvStepEnd, `{"turn":1,"step":1,"outcome":"x"}`), 1, 0)}, "seq 4: step/end is placed at turn 1 step 0, but its data says turn 1 step 1"},
		// Guards decide, owners run, in that order.
		{"owner answers before its intent", guarded(ev(9, event.EvToolResult, `{"call_id":"c1","content":"7","op":"calc"}`)), "seq 9: tool/result for call c1 from its owner calc before its tool/call"},
		{"another op answers an owned call", guarded(ev(9, event.EvToolResult, `{"call_id":"c1","content":"7","op":"mallory"}`)), `seq 9: tool/result for call c1 from "mallory", but the tool belongs to "calc"`},
		{"an op that is not a guard decides", guarded(ev(9, event.EvApprovalDecision, `{"call_id":"c1","allow":true,"guard":"mallory","who":"op:mallory"}`)), `seq 9: decision for call c1 counts for "mallory", which is not a guard of this step`},
		{"a person decides what no guard asked", guarded(ev(9, event.EvApprovalDecision, `{"call_id":"c1","allow":true,"guard":"approval","who":"eve"}`)), "seq 9: eve decided call c1 for approval, which asked no person"},
		{"an op that is not a guard asks", guarded(ev(9, event.EvApprovalRequest, `{"op":"mallory","call_ids":["c1"]}`)), "seq 9: approval requested by mallory, which is not a guard of this step"},
		{"a call runs without its guard", guarded(ev(9, event.EvToolCall, `{"call_id":"c1","name":"calc_add","op":"calc","writer":"w"}`)), "seq 9: tool/call for call c1 was not passed by guard approval"},
		{"a call runs after a denial", guarded(
			ev(9, event.EvApprovalDecision, `{"call_id":"c1","allow":false,"guard":"approval","who":"op:approval"}`),
			ev(10, event.EvToolCall, `{"call_id":"c1","name":"calc_add","op":"calc","writer":"w","guards":["approval"]}`)), "seq 10: tool/call for call c1, which a guard denied"},
		{"a call runs twice", guarded(
			ev(9, event.EvToolCall, `{"call_id":"c1","name":"calc_add","op":"calc","writer":"w","guards":["approval"]}`),
			ev(10, event.EvToolCall, `{"call_id":"c1","name":"calc_add","op":"calc","writer":"w","guards":["approval"],"rerun":true}`)), "seq 10: tool/call for call c1, which already started"},
		{"a call names the wrong owner", guarded(ev(9, event.EvToolCall, `{"call_id":"c1","name":"calc_add","op":"mallory","writer":"w","guards":["approval"]}`)), `seq 9: tool/call for call c1 names op "mallory", but the tool belongs to "calc"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := event.Fold("s", tc.evs)
			if !errors.Is(err, event.ErrCorruptLog) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrCorruptLog containing %q", err, tc.want)
			}
		})
	}
}

// guarded is a log at a step whose header names the guard approval and
// whose answer calls calc_add (owned by calc, not idempotent), followed by
// more.
func guarded(more ...store.Event) []store.Event {
	evs := []store.Event{
		ev(1, event.EvSessionCreated, `{}`),
		ev(2, event.EvInboxSpliced, `{"list":"next-turn","start":0,"inserted":[{"id":"m","content":"go"}]}`),
		ev(3, event.EvTurnStart, `{"turn":1}`),
		ev(4, event.EvInboxSpliced, `{"list":"next-turn","start":0,"removed":1,"outcome":"claimed"}`),
		ev(5, event.EvUserMessage, `{"id":"m","content":"go"}`),
		ev(6, event.EvStepStart, `{"turn":1,"step":1}`),
		ev(7, event.EvRequestHeader, `{"tools":[{"name":"calc_add","owner":"calc"}],"guards":["approval"]}`),
		ev(8, event.EvAssistantMessage, `{"content":"","tool_calls":[{"id":"c1","name":"calc_add","arguments":{}}]}`),
	}
	return append(evs, more...)
}

// The fold accepts every golden log, event by event.
func TestFoldAcceptsGoldenLogs(t *testing.T) {
	for _, sc := range scenarios {
		evs, _ := runScenario(t, sc, false)
		st, err := event.Fold("s", evs)
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
		_, err := event.Fold("s", evs)
		if err != nil && !errors.Is(err, event.ErrCorruptLog) {
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

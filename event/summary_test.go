package event_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// Summarize says error, with the error, for a session whose last turn
// ended in error and that nothing has run since, and names the session as
// its latest session/renamed does.
func TestSummarizeErrorAndName(t *testing.T) {
	at := time.Unix(0, 0)
	ev := func(typ string, turn int, data any) store.Event {
		b, _ := json.Marshal(data)
		return store.Event{Type: typ, Turn: turn, Time: at, Data: b}
	}
	created := ev(event.EvSessionCreated, 0, event.SessionCreated{})
	failed := []store.Event{created,
		ev(event.EvTurnStart, 1, event.TurnStart{Turn: 1}),
		ev(event.EvTurnEnd, 1, event.TurnEnd{Turn: 1, Reason: event.ReasonError, Error: "bad_request (HTTP 400): no"})}
	for _, tc := range []struct {
		what                 string
		events               []store.Event
		status, err, session string
	}{
		{"new", []store.Event{created}, "idle", "", ""},
		{"failed", failed, "error", "bad_request (HTTP 400): no", ""},
		{"retrying", append(failed[:3:3], ev(event.EvTurnStart, 2, event.TurnStart{Turn: 2, Retry: 1})), "idle", "", ""},
		{"retried", append(failed[:3:3], ev(event.EvTurnStart, 2, event.TurnStart{Turn: 2, Retry: 1}), ev(event.EvTurnEnd, 2, event.TurnEnd{Turn: 2, Reason: event.ReasonCompleted})), "idle", "", ""},
		{"renamed", append(failed[:3:3], ev(event.EvSessionRenamed, 0, event.SessionRenamed{Name: "first"}), ev(event.EvSessionRenamed, 0, event.SessionRenamed{Name: "second"})), "error", "bad_request (HTTP 400): no", "second"},
		{"unnamed", []store.Event{created, ev(event.EvSessionRenamed, 0, event.SessionRenamed{Name: "x"}), ev(event.EvSessionRenamed, 0, event.SessionRenamed{})}, "idle", "", ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			evs := make([]store.Event, len(tc.events))
			for i, e := range tc.events {
				e.Seq = uint64(i + 1)
				evs[i] = e
			}
			st, err := event.Fold("s", evs)
			if err != nil {
				t.Fatal(err)
			}
			sum := event.Summarize(st)
			got := []string{sum.Status, sum.Error, sum.Name}
			if d := cmp.Diff([]string{tc.status, tc.err, tc.session}, got); d != "" {
				t.Errorf("status, error, name mismatch (-want +got):\n%s", d)
			}
		})
	}
	// A name of two lines is refused by the fold, naming the seq.
	bad := []store.Event{created, ev(event.EvSessionRenamed, 0, event.SessionRenamed{Name: "a\nb"})}
	bad[0].Seq, bad[1].Seq = 1, 2
	if _, err := event.Fold("s", bad); err == nil {
		t.Error("a two-line name was folded")
	}
}

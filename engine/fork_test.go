package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// twoTurns records a session of two turns, the first with a tool call.
func twoTurns(t *testing.T) *et.Env {
	t.Helper()
	env := &et.Env{Log: store.NewMemory(), Session: "origin",
		Provider: &et.Scripted{Answer: answerFor},
		Ops:      func() []engine.Operation { return []engine.Operation{et.Calculator()} }}
	env.Create(t)
	env.Send(t, "add 2")
	env.RunContinuous(t)
	env.Send(t, "and now?")
	env.RunContinuous(t)
	return env
}

func seqOf(t *testing.T, evs []store.Event, typ string, nth int) uint64 {
	t.Helper()
	for _, e := range evs {
		if e.Type == typ {
			if nth--; nth == 0 {
				return e.Seq
			}
		}
	}
	t.Fatalf("no %s number %d", typ, nth)
	return 0
}

// A fork point is a turn boundary; a seq inside a turn is refused with the
// nearest boundaries before and after it.
func TestForkPointNamesTheNearestBoundaries(t *testing.T) {
	env := twoTurns(t)
	evs := env.Events(t)
	start2, end1, end2 := seqOf(t, evs, event.EvTurnStart, 2), seqOf(t, evs, event.EvTurnEnd, 1), seqOf(t, evs, event.EvTurnEnd, 2)
	for _, ok := range []uint64{1, end1, start2 - 1, end2} {
		if err := event.ForkPoint("origin", evs, ok); err != nil {
			t.Errorf("seq %d: %v, want a boundary", ok, err)
		}
	}
	err := event.ForkPoint("origin", evs, start2+2)
	var be *event.BoundaryError
	if !errors.As(err, &be) || !errors.Is(err, event.ErrNotBoundary) {
		t.Fatalf("inside turn 2: %v, want a BoundaryError", err)
	}
	want := event.BoundaryError{Session: "origin", Seq: start2 + 2, Turn: 2, Before: start2 - 1, After: end2}
	if diff := cmp.Diff(want, *be); diff != "" {
		t.Errorf("boundary error mismatch (-want +got):\n%s", diff)
	}
	for _, s := range []string{"inside turn 2", "nearest are " + u(start2-1), "or " + u(end2) + " (its turn/end)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q lacks %q", err, s)
		}
	}
	// Inside a turn that is still open at the head.
	open := evs[:start2+1]
	if err := event.ForkPoint("origin", open, start2+1); err == nil || !strings.Contains(err.Error(), "still open") {
		t.Errorf("inside an open turn: %v", err)
	}
	if err := event.ForkPoint("origin", evs, uint64(len(evs))+1); err == nil || !strings.Contains(err.Error(), "is not in session origin") {
		t.Errorf("past the head: %v", err)
	}
}

// Fork at a turn boundary and continue both sessions independently.
func TestForkAndContinueBoth(t *testing.T) {
	env := twoTurns(t)
	ctx := context.Background()
	before := env.Events(t)
	at := seqOf(t, before, event.EvTurnEnd, 1)
	if err := engine.Fork(ctx, env.Log, "origin", at, "fork", et.Epoch); err != nil {
		t.Fatal(err)
	}
	fork := &et.Env{Log: env.Log, Session: "fork", Provider: env.Provider, Ops: env.Ops}
	got := fork.Events(t)
	if diff := cmp.Diff(before[:at], got[:at]); diff != "" {
		t.Errorf("the fork's copy mismatch (-origin +fork):\n%s", diff)
	}
	if len(got) != int(at)+1 || got[at].Type != event.EvSessionForked || got[at].Seq != at+1 {
		t.Fatalf("the fork's log ends %+v, want session/forked at seq %d", got[len(got)-1], at+1)
	}
	if err := engine.Fork(ctx, env.Log, "origin", at, "fork", et.Epoch); !errors.Is(err, store.ErrExists) {
		t.Errorf("fork onto an existing session: %v, want ErrExists", err)
	}
	if err := engine.Fork(ctx, env.Log, "origin", at+2, "fork2", et.Epoch); !errors.Is(err, event.ErrNotBoundary) {
		t.Errorf("fork inside a turn: %v", err)
	}
	if _, err := env.Log.Head(ctx, "fork2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused fork left a session behind: %v", err)
	}

	fork.Send(t, "something else")
	fork.RunContinuous(t)
	env.Send(t, "a third prompt")
	env.RunContinuous(t)

	st, err := event.Fold("fork", fork.Events(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Forked == nil || st.Forked.Origin != "origin" || st.Forked.Seq != at || st.Turn != 2 {
		t.Errorf("fork state: forked %+v, turn %d", st.Forked, st.Turn)
	}
	last := st.Messages[len(st.Messages)-1]
	if last.Content != "echo: something else" {
		t.Errorf("the fork's last answer is %q", last.Content)
	}
	ost, err := event.Fold("origin", env.Events(t))
	if err != nil {
		t.Fatal(err)
	}
	if ost.Forked != nil || ost.Turn != 3 || ost.Messages[len(ost.Messages)-1].Content != "echo: a third prompt" {
		t.Errorf("origin: forked %+v, turn %d, last %q", ost.Forked, ost.Turn, ost.Messages[len(ost.Messages)-1].Content)
	}
	if diff := cmp.Diff(before, env.Events(t)[:len(before)]); diff != "" {
		t.Errorf("the origin's log changed under the fork (-before +after):\n%s", diff)
	}
}

// Import refuses a log the fold refuses, naming the seq, and writes
// nothing; a good log comes back exactly.
func TestImportChecksTheFold(t *testing.T) {
	env := twoTurns(t)
	ctx := context.Background()
	evs := env.Events(t)
	dst := store.NewMemory()
	if err := engine.Import(ctx, dst, "copy", evs, nil); err != nil {
		t.Fatal(err)
	}
	got, err := dst.Read(ctx, "copy", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(evs, got); diff != "" {
		t.Errorf("import mismatch (-exported +imported):\n%s", diff)
	}

	broken := append([]store.Event(nil), evs...)
	i := seqOf(t, evs, event.EvToolResult, 1) - 1
	broken[i].Data = []byte(`{"call_id":"nobody","content":"x"}`)
	err = engine.Import(ctx, dst, "broken", broken, nil)
	if !errors.Is(err, event.ErrCorruptLog) || !strings.Contains(err.Error(), "seq "+u(uint64(i+1))+":") {
		t.Errorf("import of a broken log: %v, want ErrCorruptLog naming seq %d", err, i+1)
	}
	if _, err := dst.Head(ctx, "broken"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused import left a session: %v", err)
	}
	gap := append(append([]store.Event(nil), evs[:3]...), evs[4:]...)
	if err := engine.Import(ctx, dst, "gap", gap, nil); err == nil || !strings.Contains(err.Error(), "seq 5: expected seq 4") {
		t.Errorf("import with a gap: %v", err)
	}
}

// Import hands check the settings as they stand after session/created
// and after each event that changes them, and refuses the log at the
// first it refuses, naming the seq and the event, with nothing written.
func TestImportChecksEverySettingsTheLogRecords(t *testing.T) {
	ctx := context.Background()
	evs := []store.Event{
		ev(1, event.EvSessionCreated, `{"model":"m","settings":{"pipeline":"a.yaml"}}`),
		ev(2, event.EvPipelineChanged, `{"model":"m","settings":{"pipeline":"b.yaml"}}`),
		ev(3, event.EvPipelineChanged, `{"model":"m","settings":{"pipeline":"b.yaml"}}`), // no change
		ev(4, event.EvPipelineChanged, `{"model":"m2","settings":{"pipeline":"c.yaml"}}`),
	}
	var seen []string
	refuse := ""
	check := func(set *event.SessionCreated) error {
		seen = append(seen, set.Model+" "+string(set.Settings))
		if strings.Contains(string(set.Settings), refuse) && refuse != "" {
			return errors.New("not this one")
		}
		return nil
	}
	dst := store.NewMemory()
	if err := engine.Import(ctx, dst, "ok", evs, check); err != nil {
		t.Fatal(err)
	}
	want := []string{`m {"pipeline":"a.yaml"}`, `m {"pipeline":"b.yaml"}`, `m2 {"pipeline":"c.yaml"}`}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("settings checked (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		refuse string
		seq    uint64
		typ    string
	}{{"a.yaml", 1, event.EvSessionCreated}, {"c.yaml", 4, event.EvPipelineChanged}} {
		seen, refuse = nil, c.refuse
		err := engine.Import(ctx, dst, "bad", evs, check)
		var se *event.SettingsError
		if !errors.As(err, &se) || se.Seq != c.seq || se.Type != c.typ || !strings.Contains(err.Error(), "seq "+u(c.seq)+" ("+c.typ+"): the recorded settings cannot be read: not this one") {
			t.Errorf("refusing %s: %v, want a SettingsError at seq %d (%s)", c.refuse, err, c.seq, c.typ)
		}
		if _, err := dst.Head(ctx, "bad"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refusing %s: the import left a session: %v", c.refuse, err)
		}
	}
}

// session/forked is accepted only right after the events it copied, at a
// turn boundary.
func TestFoldPlacesSessionForked(t *testing.T) {
	created := ev(1, event.EvSessionCreated, `{}`)
	cases := []struct {
		name string
		evs  []store.Event
		want string
	}{
		{"at a boundary", []store.Event{created, ev(2, event.EvSessionForked, `{"origin":"a","seq":1}`)}, ""},
		{"inside a turn", []store.Event{created, ev(2, event.EvTurnStart, `{"turn":1}`), ev(3, event.EvSessionForked, `{"origin":"a","seq":2}`)}, "seq 3: session/forked must follow"},
		{"not after its copy", []store.Event{created, ev(2, event.EvSessionForked, `{"origin":"a","seq":7}`)}, "seq 2: session/forked must follow"},
		{"no origin", []store.Event{created, ev(2, event.EvSessionForked, `{"seq":1}`)}, "seq 2: session/forked must follow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := event.Fold("s", c.evs)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("fold: %v, want %q", err, c.want)
			}
		})
	}
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// answerFor calls calc_add for "add N", answers a tool result with the
// total, and echoes anything else.
func answerFor(req *provider.Request) et.Reply {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == "tool":
		return et.Reply{Text: "the total is " + last.Content}
	case strings.HasPrefix(last.Content, "add "):
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("add-"+u(uint64(len(req.Messages))), "calc_add", `{"value":`+strings.TrimPrefix(last.Content, "add ")+`}`)}}
	}
	return et.Echo(req)
}

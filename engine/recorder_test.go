package engine_test

import (
	"context"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// TestRecorderFollowsOtherWriters: a session that only records (a server
// in front of workers) while another process drives it. The driver claims
// the recorder's queued prompt; the recorder then appends through its
// machine (a settings change) and queues another prompt. That prompt must
// be spliced into the inbox as the log has it, not as the recorder last
// saw it: the log folds, and the driver runs it.
func TestRecorderFollowsOtherWriters(t *testing.T) {
	ctx := context.Background()
	log := store.NewMemory()
	if err := engine.Create(ctx, log, "s", event.SessionCreated{}, et.Epoch); err != nil {
		t.Fatal(err)
	}
	rec, err := session.OpenSession(ctx, engine.Config{Log: log, Session: "s", Passive: true, Durability: engine.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	drive := func() {
		t.Helper()
		d, err := session.OpenSession(ctx, engine.Config{Log: log, Session: "s", Provider: &et.Scripted{Answer: et.Echo}, Durability: engine.SyncNever})
		if err != nil {
			t.Fatal(err)
		}
		d.Wake()
		if err := d.WhenIdle(ctx); err != nil {
			t.Fatal(err)
		}
		d.Close(ctx)
	}
	if _, err := rec.Send(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	drive() // another process: claims "one", runs its turn
	if err := rec.ChangePipeline(ctx, event.PipelineChanged{Model: "m2", By: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Send(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	evs, _ := log.Read(ctx, "s", 1, 0)
	if _, err := event.Fold("s", evs); err != nil {
		t.Fatalf("the recorder's second prompt broke the log: %v", err)
	}
	drive()
	evs, _ = log.Read(ctx, "s", 1, 0)
	st, err := event.Fold("s", evs)
	if err != nil {
		t.Fatal(err)
	}
	if st.Turn != 2 || len(st.NextTurn) != 0 {
		t.Fatalf("turns %d, queued %d; want both prompts run", st.Turn, len(st.NextTurn))
	}
}

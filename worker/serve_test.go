package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
)

// serveRemote starts the API over the fleet's store in the mode wagent
// serve --nats runs it: sessions passive, wake-ups to the bus.
func serveRemote(t *testing.T, f *fleet) *server.Client {
	t.Helper()
	p := f.proc()
	node, err := app.Open(context.Background(), app.Options{
		Log:  p.log,
		Wake: p.bus.Wake, Interrupt: p.bus.Interrupt,
		Resolve: func(ctx context.Context, id string, created *event.SessionCreated) (engine.Config, error) {
			return engine.Config{}, nil // recording needs no pipeline or provider
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(node, server.Options{Token: "t0ken"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { srv.Close(context.Background()) })
	return server.NewClient(hs.URL, "t0ken", &http.Client{})
}

// follow streams a session until the server says it is idle or waiting
// with every event up to then delivered, and returns that status.
func follow(ctx context.Context, cl *server.Client, id string, from uint64) (string, uint64, error) {
	var status string
	last, head := from-1, uint64(0)
	err := cl.Stream(ctx, id, from, func(ev server.StreamEvent) error {
		switch ev.Kind {
		case "event":
			last = ev.Event.Seq
		case "status":
			status, head = ev.Status, ev.Head
		}
		if (status == "idle" || status == "waiting") && last >= head {
			return server.ErrStop
		}
		return nil
	})
	return status, last, err
}

// TestServeFrontsWorkers: clients create sessions, send prompts, answer an
// approval and cancel through the API of a server that runs nothing
// itself, while two workers elsewhere run the sessions. The clients see
// each session's events and status as the workers append them.
func TestServeFrontsWorkers(t *testing.T) {
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	admin := f.proc()
	f.cleanup(admin.nc)
	ops := newSideEffects()
	cfg := base(t, ops, &et.Scripted{Answer: toolTurn}, et.Approver([]string{"look"}, nil))
	runWorker(t, f, "w1", cfg)
	runWorker(t, f, "w2", cfg)
	cl := serveRemote(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const n = 6
	for i := range n {
		id := fmt.Sprintf("api%d", i)
		if _, err := cl.Create(ctx, &server.CreateRequest{ID: id, Prompt: "go"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("api%d", i)
		// The guard asks a person about "effect": the session parks in a
		// worker, and the stream says so.
		status, last, err := follow(ctx, cl, id, 1)
		if err != nil || status != "waiting" {
			t.Fatalf("%s: stream ended %q (%v), want waiting", id, status, err)
		}
		got, err := cl.Session(ctx, id)
		if err != nil || got.Status != "waiting" || len(got.Waiting) != 1 || got.Waiting[0].Name != "effect" {
			t.Fatalf("%s: %+v (%v), want one call waiting", id, got, err)
		}
		if _, err := cl.Decide(ctx, id, server.DecideRequest{All: true, Decisions: []server.Decision{{Allow: true}}, Who: "test"}); err != nil {
			t.Fatalf("%s: decide: %v", id, err)
		}
		if status, _, err = follow(ctx, cl, id, last+1); err != nil || status != "idle" {
			t.Fatalf("%s: after the decision the stream ended %q (%v), want idle", id, status, err)
		}
		// A second prompt through send.
		if _, err := cl.Input(ctx, id, "send", "again"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("api%d", i)
		waitFor(t, 30*time.Second, id+"'s second turn", func() bool {
			s, err := cl.Session(ctx, id)
			return err == nil && (s.Status == "waiting" || s.Turns == 2 && s.Status == "idle")
		})
		if _, err := cl.Cancel(ctx, id, server.CancelRequest{Reason: "enough"}); err != nil {
			t.Fatal(err)
		}
		evs := events(t, admin.log, id)
		checkSession(t, id, evs, ops)
		if turnsEnded(evs) != 2 {
			t.Errorf("%s: %d turns ended, want 2", id, turnsEnded(evs))
		}
	}
	if _, err := cl.Step(ctx, "api0"); !server.IsCode(err, server.CodeBusy) {
		t.Errorf("step on a server fronting workers: %v, want refused as busy", err)
	}
	var ae *server.APIError
	if _, err := cl.Session(ctx, "nope"); !errors.As(err, &ae) || ae.Code != server.CodeNotFound {
		t.Errorf("an unknown session: %v", err)
	}
}

// TestCancelInterruptsTheWorker: a client cancels a turn whose model
// request is in progress in a worker. The server records the cancellation
// and interrupts the worker, whose request ends at once (not when the
// model would have answered); the prompt the cancellation kept runs next.
func TestCancelInterruptsTheWorker(t *testing.T) {
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	admin := f.proc()
	f.cleanup(admin.nc)
	interrupted := make(chan struct{}, 1)
	p := &et.Scripted{Answer: et.Echo, Hold: func(ctx context.Context, req *provider.Request) {
		if req.Messages[len(req.Messages)-1].Content != "slow" {
			return
		}
		select {
		case <-ctx.Done():
			interrupted <- struct{}{}
		case <-time.After(30 * time.Second):
		}
	}}
	runWorker(t, f, "w1", base(t, newSideEffects(), p))
	cl := serveRemote(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.Create(ctx, &server.CreateRequest{ID: "c", Prompt: "slow"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the model request", func() bool {
		s, err := cl.Session(ctx, "c")
		return err == nil && s.TurnOpen && s.Queued == 0
	})
	if _, err := cl.Input(ctx, "c", "send", "next"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := cl.Cancel(ctx, "c", server.CancelRequest{Reason: "changed my mind", KeepInbox: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-interrupted:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker's model request went on after the cancellation")
	}
	waitFor(t, 10*time.Second, "the kept prompt to run", func() bool { return turnsEnded(events(t, admin.log, "c")) == 2 })
	evs := events(t, admin.log, "c")
	checkSession(t, "c", evs, nil)
	var reasons []string
	for _, e := range evs {
		if e.Type == event.EvTurnEnd {
			var te event.TurnEnd
			json.Unmarshal(e.Data, &te)
			reasons = append(reasons, te.Reason)
		}
	}
	if strings.Join(reasons, ",") != "aborted,completed" {
		t.Errorf("turns ended %v, want aborted then completed", reasons)
	}
	t.Logf("interrupted %v after the cancel", time.Since(start).Round(time.Millisecond))
}

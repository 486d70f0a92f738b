package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// A create that loses the race for an id (it passed the "exists" check
// before the winner wrote the log, and is told 409 exists) must leave the
// winner's session as the winner made it: its secrets too.
func TestLosingCreateKeepsTheWinnersSecrets(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // id -> the "key" secret Resolve was last handed
	loserIn, loserGo := make(chan struct{}), make(chan struct{})
	var f *fixture
	f = newFixture(t, func(o *fixtureOptions) {
		o.Prepare = func(ctx context.Context, _ app.Principal, req app.Request) (event.SessionCreated, error) {
			if req.Secrets["key"] == "loser" {
				close(loserIn)
				<-loserGo // past the exists check; the winner creates now
			}
			return event.SessionCreated{Settings: req.Settings, CreatedBy: req.CreatedBy}, nil
		}
		o.Resolve = func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			mu.Lock()
			seen[id] = f.srv.Node().Secret(id, "key")
			mu.Unlock()
			p, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
			return engine.Config{Pipeline: p, Provider: &et.Scripted{Answer: answer}, Model: "m"}, err
		}
	})
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := f.client.Create(ctx, &server.CreateRequest{ID: "s1", Settings: json.RawMessage(`{"a":1}`), Secrets: map[string]string{"key": "loser"}})
		errc <- err
	}()
	<-loserIn
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "s1", Settings: json.RawMessage(`{"a":1}`), Secrets: map[string]string{"key": "winner"}}); err != nil {
		t.Fatal(err)
	}
	close(loserGo)
	err := <-errc
	if !server.IsCode(err, server.CodeExists) {
		t.Fatalf("loser: got %v, want 409 exists", err)
	}
	// The winner's session reopens (a settings change, no new secrets).
	if _, err := f.client.ChangeSettings(ctx, "s1", server.SettingsRequest{Settings: json.RawMessage(`{"a":2}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Session(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Input(ctx, "s1", "send", "hi"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := seen["s1"]
	mu.Unlock()
	if got != "winner" {
		t.Fatalf("the winner's session was resolved with secret %q after a losing create: want %q", got, "winner")
	}
}

// A create whose Resolve panics (embedder code, run inside host.Create
// while the id is reserved) must not leave the id reserved forever: the
// session is in the log, so it must be readable afterwards.
func TestPanickingCreateDoesNotWedgeTheID(t *testing.T) {
	var mu sync.Mutex
	panics := 1
	f := newFixture(t, func(o *fixtureOptions) {
		o.Resolve = func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			mu.Lock()
			p := panics > 0
			panics--
			mu.Unlock()
			if p {
				panic("resolve blew up")
			}
			pl, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
			return engine.Config{Pipeline: pl, Provider: &et.Scripted{Answer: answer}, Model: "m"}, err
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := f.client.Create(ctx, &server.CreateRequest{ID: "p1", Settings: json.RawMessage(`{"a":1}`)})
	t.Logf("create with panicking Resolve: %v", err)
	// Either outcome frees the id: the session is in the log (Create
	// appends session/created before Resolve runs, so today it is) and
	// works, or it is not, and a second create of the same id succeeds.
	if _, err := f.log.Head(ctx, "p1"); errors.Is(err, store.ErrNotFound) {
		if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "p1", Settings: json.RawMessage(`{"a":1}`)}); err != nil {
			t.Fatalf("p1 is not in the log after the panicking create, and a second create answers: %v", err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Session(ctx, "p1"); err != nil {
		t.Fatalf("session p1 is in the log but GET answers: %v", err)
	}
	if _, err := f.client.Input(ctx, "p1", "send", "hi"); err != nil {
		t.Fatalf("session p1 is in the log but a send answers: %v", err)
	}
}

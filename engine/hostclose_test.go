package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// Attack: a session opened while its host closes. Close disposes of what
// it finds open; a session whose open finished after that was added to
// the closed host and never disposed (its driver kept going, its input
// taken). An open that finishes after Close is refused with ErrClosed and
// its session disposed (and of two opens at once, the one not kept is
// disposed too).
func TestHostOpenRacingCloseLeavesNothingOpen(t *testing.T) {
	ctx := context.Background()
	pl, _ := engine.NewPipeline(et.Calculator())
	log := store.NewMemory()
	if err := engine.Create(ctx, log, "s", event.SessionCreated{}, et.Epoch); err != nil {
		t.Fatal(err)
	}
	// The open resolves the session's config while the host closes.
	resolving, release := make(chan struct{}), make(chan struct{})
	h := session.NewHostWith(engine.Config{Log: log, Durability: engine.SyncNever}, func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
		close(resolving)
		<-release
		return engine.Config{Pipeline: pl, Provider: &et.Scripted{Answer: et.Echo}}, nil
	})
	type opened struct {
		s   *session.Session
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := h.Open(ctx, "s")
		done <- opened{s, err}
	}()
	<-resolving
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	o := <-done
	if o.err == nil {
		_, err := o.s.Send(ctx, "hello")
		t.Fatalf("an open that finished after its host closed handed out a live session (send: %v), want ErrClosed", err)
	}
	if !errors.Is(o.err, session.ErrClosed) {
		t.Fatalf("open: %v, want ErrClosed", o.err)
	}
}

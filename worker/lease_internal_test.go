package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/internal/natstest"
)

// TestLeaseAtTheSameInstant: workers on their own connections take one
// session's lease at the same instant: exactly one gets it, every other is
// told who holds it. A holder whose lease ended unrenewed (a pause) and
// was taken by another finds out at its next renewal, never extends the
// newcomer's lease, and cannot delete it when it lets go.
func TestLeaseAtTheSameInstant(t *testing.T) {
	ns := natstest.Start(t)
	ctx := context.Background()
	const n = 8
	buses := make([]*Bus, n)
	for i := range buses {
		b, err := OpenBus(ctx, natstest.Connect(t, ns.ClientURL()), BusOptions{LeaseTTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		buses[i] = b
	}
	for round := range 20 {
		id := fmt.Sprintf("s.%d", round)
		var start, done sync.WaitGroup
		start.Add(1)
		leases := make([]*lease, n)
		errs := make([]error, n)
		for i := range n {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				leases[i], errs[i] = buses[i].acquire(ctx, id, fmt.Sprintf("w%d", i))
			}()
		}
		start.Done()
		done.Wait()
		won := 0
		for i := range n {
			var held *heldError
			switch {
			case errs[i] == nil:
				won++
			case errors.As(errs[i], &held):
			default:
				t.Fatalf("round %d, w%d: %v", round, i, errs[i])
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d workers took the lease at once, want 1 (%v)", round, won, errs)
		}
	}

	// A stale holder: its lease expires while it sleeps, another takes it.
	old, err := buses[0].acquire(ctx, "p", "sleeper")
	if err != nil {
		t.Fatal(err)
	}
	var heir *lease
	deadline := time.Now().Add(10 * time.Second)
	for heir == nil {
		if heir, err = buses[1].acquire(ctx, "p", "heir"); err != nil {
			var held *heldError
			if !errors.As(err, &held) || time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if heir.epoch <= old.epoch {
		t.Errorf("the heir's epoch %d is not above the sleeper's %d", heir.epoch, old.epoch)
	}
	if old.valid() {
		t.Error("the sleeper counts its expired lease as valid")
	}
	if err := old.renew(ctx); !errors.Is(err, errLeaseLost) {
		t.Errorf("the sleeper's renewal: %v, want errLeaseLost", err)
	}
	old.release(ctx)
	if err := heir.renew(ctx); err != nil {
		t.Errorf("the heir's lease after the sleeper let go: %v", err)
	}
	if _, err := buses[2].acquire(ctx, "p", "third"); err == nil {
		t.Error("a third worker took the heir's lease")
	}
}

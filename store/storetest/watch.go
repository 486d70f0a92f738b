package storetest

import (
	"testing"
	"time"

	"github.com/wagent/wagent/store"
)

// receive waits for a value on ch, or for ch to be closed.
func receive(t *testing.T, ch <-chan uint64) (uint64, bool) {
	t.Helper()
	select {
	case h, ok := <-ch:
		return h, ok
	case <-time.After(waitTimeout):
		t.Fatalf("no watch notification within %v", waitTimeout)
		return 0, false
	}
}

// quiet checks that nothing arrives on ch for a short while.
func quiet(t *testing.T, what string, ch <-chan uint64) {
	t.Helper()
	select {
	case h, ok := <-ch:
		t.Errorf("%s: got a notification (head %d, open %v), want none", what, h, ok)
	case <-time.After(50 * time.Millisecond):
	}
}

func testWatchDelivers(t *testing.T, l store.Log) {
	mustCreate(t, l, "s", "other")
	heads, stop := l.Watch("s")
	defer stop()
	heads2, stop2 := l.Watch("s")
	defer stop2()
	others, stopOthers := l.Watch("other")
	defer stopOthers()
	quiet(t, "before any append", heads)

	for _, n := range []int{1, 3, 2} {
		head := mustHead(t, l, "s")
		want := mustAppend(t, l, "s", head, evs("t", head+1, n, 0)...)
		for i, ch := range []<-chan uint64{heads, heads2} {
			if got, ok := receive(t, ch); !ok || got != want {
				t.Errorf("watcher %d: got head %d (open %v), want %d", i, got, ok, want)
			}
		}
	}
	quiet(t, "the watcher of another session", others)

	// A refused append notifies nobody.
	_, err := l.Append(ctx(t), "s", 0, ev("t", 1, 0))
	checkErr(t, "Append at a stale head", err, store.ErrConflict, "s")
	quiet(t, "after a refused append", heads)
}

func testWatchCoalesces(t *testing.T, l store.Log) {
	// A watcher that reads nothing while many appends commit never slows
	// them, and then sees the latest head rather than every one.
	const appends = 200
	mustCreate(t, l, "s")
	heads, stop := l.Watch("s")
	defer stop()
	var head uint64
	for range appends {
		head = mustAppend(t, l, "s", head, ev("t", head+1, 0))
	}
	var got []uint64
	for len(got) == 0 || got[len(got)-1] < head {
		h, ok := receive(t, heads)
		if !ok {
			t.Fatal("watch channel closed while the Log is open")
		}
		got = append(got, h)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("heads received %v are not strictly increasing", got)
			break
		}
	}
	if got[len(got)-1] != head {
		t.Errorf("last head received = %d, want %d", got[len(got)-1], head)
	}
	if len(got) >= appends {
		t.Errorf("received %d heads for %d appends to a reader that did not read: want them coalesced", len(got), appends)
	}
	quiet(t, "after the latest head", heads)
}

func testWatchStops(t *testing.T, l store.Log) {
	mustCreate(t, l, "s")
	heads, stop := l.Watch("s")
	stop()
	if _, ok := receive(t, heads); ok {
		t.Error("the channel of a stopped watch delivered a head, want it closed")
	}
	stop() // a second stop is harmless
	mustAppend(t, l, "s", 0, ev("t", 1, 0))

	// Close ends live watches, and later ones start closed.
	live, stopLive := l.Watch("s")
	defer stopLive()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := receive(t, live); ok {
		t.Error("a watch channel delivered a head after Close, want it closed")
	}
	stopLive() // stop after Close is harmless
	late, stopLate := l.Watch("s")
	defer stopLate()
	if _, ok := receive(t, late); ok {
		t.Error("Watch after Close delivered a head, want a closed channel")
	}
}

func testWatchAfterRecreate(t *testing.T, l store.Log) {
	// A watch follows the id: after the session is deleted and created
	// again, its new (lower) heads are delivered.
	mustCreate(t, l, "s")
	heads, stop := l.Watch("s")
	defer stop()
	mustAppend(t, l, "s", 0, evs("t", 1, 3, 0)...)
	if got, _ := receive(t, heads); got != 3 {
		t.Fatalf("got head %d, want 3", got)
	}
	if err := l.Delete(ctx(t), "s"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustCreate(t, l, "s")
	mustAppend(t, l, "s", 0, ev("t", 1, 0))
	for {
		got, ok := receive(t, heads)
		if !ok {
			t.Fatal("watch channel closed")
		}
		if got == 1 {
			break
		}
		if got != 3 { // a backend may report the old head late
			t.Fatalf("got head %d after the session was created again, want 1", got)
		}
	}
}

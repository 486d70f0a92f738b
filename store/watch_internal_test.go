package store

import "testing"

func TestHubDropsAnOlderHeadArrivingLate(t *testing.T) {
	// Two appenders notify after their commits without a common lock, so the
	// older head can arrive second. The watcher must not go backwards.
	var h Hub
	ch, stop := h.Watch("s")
	defer stop()
	h.Notify("s", 5)
	h.Notify("s", 4)
	if got := <-ch; got != 5 {
		t.Fatalf("got head %d, want 5", got)
	}
	select {
	case got := <-ch:
		t.Fatalf("got head %d after 5, want nothing", got)
	default:
	}
	h.Reset("s") // the session was deleted: lower heads are new again
	h.Notify("s", 1)
	if got := <-ch; got != 1 {
		t.Fatalf("got head %d after reset, want 1", got)
	}
}

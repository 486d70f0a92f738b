package storetest

import (
	"errors"
	"testing"

	"github.com/wagent/wagent/store"
)

// RunDurable runs Run and then the tests that need a store to outlive its
// Log. open(t, dir) opens the store kept at dir; the suite calls it again
// with the same dir after closing the first Log, and expects to find
// everything that was there. dir is a new t.TempDir for every subtest: an
// embedded backend keeps its files there, a networked one may use it as a
// unique name for a fresh namespace.
func RunDurable(t *testing.T, open func(t *testing.T, dir string) store.Log) {
	t.Helper()
	Run(t, func(t *testing.T) store.Log { return open(t, t.TempDir()) })
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, reopen func() store.Log)
	}{
		{"ReopenKeepsEverything", testReopenKeepsEverything},
		{"ReopenAfterDelete", testReopenAfterDelete},
		{"ReopenEmpty", testReopenEmpty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.fn(t, func() store.Log { return openLog(t, func(t *testing.T) store.Log { return open(t, dir) }) })
		})
	}
}

func closeLog(t *testing.T, l store.Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func testReopenKeepsEverything(t *testing.T, reopen func() store.Log) {
	l := reopen()
	mustCreate(t, l, "a", "b", "empty", "gone")
	var head uint64
	for i := range 30 {
		head = mustAppend(t, l, "a", head, evs("t", head+1, i%4+1, i*10)...)
	}
	// Large events, which some backends keep apart from small ones.
	mustAppend(t, l, "b", 0, evs("big", 1, 3, 300_000)...)
	mustAppend(t, l, "gone", 0, evs("t", 1, 5, 0)...)
	if err := l.Delete(ctx(t), "gone"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	want := takeSnapshot(t, l)
	if err := l.Sync(ctx(t)); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	closeLog(t, l)

	l = reopen()
	checkSnapshot(t, "after reopen", want, l)
	// Writers go on where they were; a stale head still conflicts.
	_, err := l.Append(ctx(t), "a", head-1, ev("t", head, 0))
	checkErr(t, "Append at a stale head after reopen", err, store.ErrConflict, "a")
	head = mustAppend(t, l, "a", head, ev("t", head+1, 0))
	mustAppend(t, l, "empty", 0, ev("t", 1, 0))
	checkErr(t, "Create of an existing session after reopen", l.Create(ctx(t), "b"), store.ErrExists, "b")
	want = takeSnapshot(t, l)
	closeLog(t, l) // without Sync: Close keeps what was appended

	l = reopen()
	checkSnapshot(t, "after a second reopen", want, l)
	if h := mustHead(t, l, "a"); h != head {
		t.Errorf("Head(a) after reopen = %d, want %d", h, head)
	}
}

func testReopenAfterDelete(t *testing.T, reopen func() store.Log) {
	l := reopen()
	mustCreate(t, l, "s", "keep")
	var head uint64
	for head < 1500 {
		head = mustAppend(t, l, "s", head, evs("old", head+1, 250, 0)...)
	}
	mustAppend(t, l, "keep", 0, ev("k", 1, 0))
	if err := l.Delete(ctx(t), "s"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	closeLog(t, l)

	l = reopen()
	want := snapshot{"keep": withSeqs(1, ev("k", 1, 0))}
	checkSnapshot(t, "after reopen", want, l)
	mustCreate(t, l, "s")
	mustAppend(t, l, "s", 0, ev("new", 1, 0))
	want["s"] = withSeqs(1, ev("new", 1, 0))
	closeLog(t, l)

	l = reopen()
	checkSnapshot(t, "after the second reopen", want, l)
}

func testReopenEmpty(t *testing.T, reopen func() store.Log) {
	closeLog(t, reopen())
	l := reopen()
	checkSnapshot(t, "a reopened empty store", snapshot{}, l)
	mustCreate(t, l, "s")
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close: got %v, want ErrClosed", err)
	}
	l = reopen()
	checkSnapshot(t, "after reopen", snapshot{"s": nil}, l)
}

package badger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wagent/wagent/store"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	bdb "github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
)

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func openTestBadger(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	b, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func testEvents(n int) []store.Event {
	out := make([]store.Event, n)
	for i := range out {
		out[i] = store.Event{Type: "t", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	return out
}

// rawSet writes value under key directly, as a bug or a disk could.
func rawSet(t *testing.T, b *Store, key, value []byte) {
	t.Helper()
	if err := b.db.Update(func(txn *bdb.Txn) error { return txn.Set(key, value) }); err != nil {
		t.Fatalf("raw set: %v", err)
	}
}

func rawDelete(t *testing.T, b *Store, key []byte) {
	t.Helper()
	if err := b.db.Update(func(txn *bdb.Txn) error { return txn.Delete(key) }); err != nil {
		t.Fatalf("raw delete: %v", err)
	}
}

// rawCount counts the keys under prefix.
func rawCount(t *testing.T, b *Store, prefix []byte) int {
	t.Helper()
	n := 0
	err := b.db.View(func(txn *bdb.Txn) error {
		it := txn.NewIterator(bdb.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("raw count: %v", err)
	}
	return n
}

func TestBadgerCorruptEvent(t *testing.T) {
	ctx := t.Context()
	b := openTestBadger(t, t.TempDir(), Options{})
	for _, s := range []string{"garbage", "wrongseq", "notype", "gap", "badhead"} {
		if err := b.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Append(ctx, s, 0, testEvents(5)...); err != nil {
			t.Fatal(err)
		}
	}
	rawSet(t, b, eventKey("garbage", 3), []byte("\x00\xffnot json"))
	rawSet(t, b, eventKey("wrongseq", 3), []byte(`{"seq":4,"type":"t","time":"2026-01-01T00:00:00Z"}`))
	rawSet(t, b, eventKey("notype", 3), []byte(`{"seq":3,"time":"2026-01-01T00:00:00Z"}`))
	rawDelete(t, b, eventKey("gap", 3))
	rawSet(t, b, headKey("badhead"), []byte{1, 2, 3})

	for _, tc := range []struct {
		name, session, want string
	}{
		{"garbage bytes", "garbage", "session garbage seq 3"},
		{"valid JSON under the wrong seq", "wrongseq", "session wrongseq seq 3: event says seq 4"},
		{"event without type", "notype", "session notype seq 3"},
		{"missing event below the head", "gap", "session gap seq 3: missing below head 5"},
		{"malformed head key", "badhead", "session badhead: head key holds 3 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Read(ctx, tc.session, 1, 0)
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read: got %v, want an error wrapping store.ErrCorrupt that says %q", err, tc.want)
			}
		})
	}
	// Reads that stay clear of the bad event still work.
	got, err := b.Read(ctx, "garbage", 4, 0)
	if err != nil {
		t.Fatalf("Read past the corrupt event: %v", err)
	}
	if len(got) != 2 || got[0].Seq != 4 || got[1].Seq != 5 {
		t.Errorf("Read past the corrupt event returned %+v, want seqs 4 and 5", got)
	}
	if _, err := b.Read(ctx, "garbage", 1, 2); err != nil {
		t.Errorf("Read before the corrupt event: %v", err)
	}
	if _, err := b.Head(ctx, "badhead"); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Head of a session with a malformed head key: got %v, want store.ErrCorrupt", err)
	}
	if _, err := b.Append(ctx, "badhead", 5, testEvents(1)...); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Append to a session with a malformed head key: got %v, want store.ErrCorrupt", err)
	}
}

func TestBadgerDeleteInBatches(t *testing.T) {
	defer func(n int) { deleteBatch = n }(deleteBatch)
	deleteBatch = 7
	ctx := t.Context()
	b := openTestBadger(t, t.TempDir(), Options{})
	for _, s := range []string{"s", "s:x"} {
		if err := b.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Append(ctx, s, 0, testEvents(50)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, "s"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if n := rawCount(t, b, eventPrefix("s")); n != 0 {
		t.Errorf("%d event keys left after Delete, want 0", n)
	}
	if n := rawCount(t, b, eventPrefix("s:x")); n != 50 {
		t.Errorf("the other session has %d event keys after Delete, want 50", n)
	}
}

func TestBadgerHalfDeletedSession(t *testing.T) {
	// A crash between Delete's batches leaves events without a head. The
	// session must not exist, and Create must start it empty.
	ctx := t.Context()
	b := openTestBadger(t, t.TempDir(), Options{})
	if err := b.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "s", 0, testEvents(30)...); err != nil {
		t.Fatal(err)
	}
	rawDelete(t, b, headKey("s")) // what the first batch of Delete does first
	rawDelete(t, b, eventKey("s", 1))

	if _, err := b.Head(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Head of a half-deleted session: got %v, want store.ErrNotFound", err)
	}
	if _, err := b.Read(ctx, "s", 1, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Read of a half-deleted session: got %v, want store.ErrNotFound", err)
	}
	if ids, _ := b.Sessions(ctx); len(ids) != 0 {
		t.Errorf("Sessions lists %q, want none", ids)
	}
	if err := b.Delete(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete of a half-deleted session: got %v, want store.ErrNotFound", err)
	}

	defer func(n int) { deleteBatch = n }(deleteBatch)
	deleteBatch = 4 // Create purges in several batches
	if err := b.Create(ctx, "s"); err != nil {
		t.Fatalf("Create over a half-deleted session: %v", err)
	}
	if n := rawCount(t, b, eventPrefix("s")); n != 0 {
		t.Errorf("%d old event keys left after Create, want 0", n)
	}
	if _, err := b.Append(ctx, "s", 0, testEvents(1)...); err != nil {
		t.Fatal(err)
	}
	got, err := b.Read(ctx, "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"i":0}`, string(got[0].Data)); len(got) != 1 || diff != "" {
		t.Errorf("Read after Create returned %d events; data mismatch (-want +got):\n%s", len(got), diff)
	}
}

func TestBadgerLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	first := openTestBadger(t, dir, Options{})
	start := time.Now()
	second, err := Open(dir, Options{Logger: discardLogger})
	if err == nil {
		second.Close()
		t.Fatal("a second Open of an open directory succeeded")
	}
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Errorf("second Open: got %v, want an error wrapping store.ErrLocked that names %s", err, dir)
	}
	if !strings.Contains(err.Error(), "in this process") {
		t.Errorf("second Open: %q does not say the holder is this process", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second Open took %v to fail, want it at once", d)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openTestBadger(t, dir, Options{}) // released by Close
}

func TestBadgerFormatVersion(t *testing.T) {
	dir := t.TempDir()
	b := openTestBadger(t, dir, Options{})
	rawSet(t, b, []byte(versionKey), []byte("wagent-store/99"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{Logger: discardLogger})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "wagent-store/99") {
		t.Fatalf("Open of a store in another format: got %v, want store.ErrInvalid naming the format", err)
	}
	// The failed open released the directory.
	if _, err := Open(dir, Options{Logger: discardLogger}); errors.Is(err, store.ErrLocked) {
		t.Errorf("a failed open kept the directory locked: %v", err)
	}
}

func TestBadgerValueLogGC(t *testing.T) {
	// Large events go to the value log; after they are deleted, background
	// GC runs, and Close stops it promptly.
	ctx := t.Context()
	b := openTestBadger(t, t.TempDir(), Options{GCInterval: 5 * time.Millisecond})
	if err := b.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	big := store.Event{Type: "t", Data: json.RawMessage(`"` + strings.Repeat("x", 900_000) + `"`)}
	var head uint64
	for range 20 {
		h, err := b.Append(ctx, "s", head, big)
		if err != nil {
			t.Fatal(err)
		}
		head = h
	}
	if err := b.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.gcRounds.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := b.gcRounds.Load(); n < 3 {
		t.Errorf("value-log GC ran %d rounds in 5s at a 5ms interval, want at least 3", n)
	}
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with GC running", d)
	}
}

func TestBadgerLeanMemory(t *testing.T) {
	// The lean profile keeps badger's heap after open small; its defaults
	// take about 86 MiB. Measured: 11.1 MiB (one 8 MiB memtable and the
	// caches' first allocations), the same in every run; 16 MiB leaves room
	// for a badger upgrade's small growth and fails on a second memtable or
	// a default-sized one.
	if testing.Short() {
		t.Skip("measures the heap")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := openTestBadger(t, t.TempDir(), Options{})
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap after open grew by %.1f MiB", float64(grown)/(1<<20))
	if grown > 16<<20 {
		t.Errorf("heap after open grew by %.1f MiB, want under 16 MiB", float64(grown)/(1<<20))
	}
	_ = b
}

func TestKeyLayout(t *testing.T) {
	// No key of one session starts with another session's event prefix or
	// equals its head key, whatever the ids.
	ids := []string{"a", "a:x", "a:", "aa", "b", "ab", strings.Repeat("a", 97), strings.Repeat("a", 128), "a\x01"}
	for _, x := range ids {
		for _, y := range ids {
			if x == y {
				continue
			}
			for _, seq := range []uint64{0, 1, 255, 1 << 40} {
				if bytes.HasPrefix(eventKey(y, seq), eventPrefix(x)) {
					t.Errorf("event key %q of %q starts with the event prefix of %q", eventKey(y, seq), y, x)
				}
			}
			if bytes.HasPrefix(headKey(y), headKey(x)) {
				t.Errorf("head key of %q starts with the head key of %q", y, x)
			}
		}
		if id, ok := sessionOfHeadKey(headKey(x)); !ok || id != x {
			t.Errorf("sessionOfHeadKey(headKey(%q)) = %q, %v", x, id, ok)
		}
		if seq, ok := seqOfEventKey(eventKey(x, 300), len(eventPrefix(x))); !ok || seq != 300 {
			t.Errorf("seqOfEventKey(eventKey(%q, 300)) = %d, %v", x, seq, ok)
		}
	}
	// Seqs sort numerically.
	if bytes.Compare(eventKey("s", 255), eventKey("s", 256)) >= 0 {
		t.Error("event key 255 does not sort before 256")
	}
}

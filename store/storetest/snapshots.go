package storetest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wagent/wagent/store"
)

// testSnapshots: a backend that keeps snapshots (store.Snapshots) keeps
// the newest per session, copies what it is given, refuses oversize ones,
// and drops them with their session. A backend without snapshots passes.
func testSnapshots(t *testing.T, l store.Log) {
	sn, ok := l.(store.Snapshots)
	if !ok {
		t.Log("the backend keeps no snapshots")
		return
	}
	ctx := context.Background()
	if _, _, err := sn.Snapshot(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("snapshot of a missing session: %v, want ErrNotFound", err)
	}
	mustCreate(t, l, "s")
	if seq, data, err := sn.Snapshot(ctx, "s"); err != nil || seq != 0 || data != nil {
		t.Fatalf("no snapshot yet: %d %q %v", seq, data, err)
	}
	mustAppend(t, l, "s", 0, evs("e", 1, 3, 0)...)
	first := []byte("state through 2")
	if err := sn.PutSnapshot(ctx, "s", 2, first); err != nil {
		t.Fatal(err)
	}
	first[0] = 'X' // the backend keeps its own copy
	if err := sn.PutSnapshot(ctx, "s", 3, []byte("state through 3")); err != nil {
		t.Fatal(err)
	}
	seq, data, err := sn.Snapshot(ctx, "s")
	if err != nil || seq != 3 || string(data) != "state through 3" {
		t.Fatalf("newest snapshot: %d %q %v", seq, data, err)
	}
	if err := sn.PutSnapshot(ctx, "s", 3, bytes.Repeat([]byte("x"), store.MaxSnapshotBytes+1)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("oversize snapshot: %v, want ErrInvalid", err)
	}
	if _, data, _ := sn.Snapshot(ctx, "s"); !strings.HasPrefix(string(data), "state through 3") {
		t.Fatalf("a refused snapshot replaced the last one: %q", data)
	}
	if err := l.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, l, "s")
	if seq, data, err := sn.Snapshot(ctx, "s"); err != nil || seq != 0 || data != nil {
		t.Fatalf("after delete and create: %d %q %v, want no snapshot", seq, data, err)
	}
}

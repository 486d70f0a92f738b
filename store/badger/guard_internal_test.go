package badger

import (
	"errors"
	"strings"
	"testing"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/wagent/wagent/store"
)

// A panic inside badger, on the caller's goroutine, is an error at the
// Store's boundary, and the Store refuses every operation after it.
func TestPanicInsideBadgerIsAnError(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	b := openTestBadger(t, dir, Options{})
	if err := b.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	err := b.view("read s", func(txn *bdb.Txn) error {
		var m map[string]int
		m["boom"]++ // a nil map: what a decoder fed damaged bytes does
		return nil
	})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("got %v, want an error wrapping store.ErrCorrupt", err)
	}
	for _, want := range []string{"store " + dir + ": read s: badger panicked (assignment to entry in nil map)", "restore the directory from a backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if _, herr := b.Head(ctx, "s"); herr == nil || herr.Error() != err.Error() {
		t.Errorf("Head after the panic: %v, want the same error", herr)
	}
	if _, aerr := b.Append(ctx, "s", 0, testEvents(1)...); !errors.Is(aerr, store.ErrCorrupt) {
		t.Errorf("Append after the panic: %v, want store.ErrCorrupt", aerr)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close after the panic: %v", err)
	}
	// This panic left badger sound, so Close closed it and the directory
	// opens again.
	b = openTestBadger(t, dir, Options{})
	if _, err := b.Head(ctx, "s"); err != nil {
		t.Fatalf("Head after reopening: %v", err)
	}
}

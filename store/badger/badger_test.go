package badger_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/store/storetest"
)

// quietLogger drops badger's warnings: tests check behaviour, not logs.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestBadgerConformance(t *testing.T) {
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Log {
		l, err := badger.Open(dir, badger.Options{Logger: quietLogger})
		if err != nil {
			t.Fatalf("badger.Open: %v", err)
		}
		return l
	})
}

func TestBadgerSyncWritesConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("fsyncs every append; run without -short")
	}
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Log {
		l, err := badger.Open(dir, badger.Options{SyncWrites: true, Logger: quietLogger})
		if err != nil {
			t.Fatalf("badger.Open: %v", err)
		}
		return l
	})
}

package badger

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBadgerOpensOverEmptyLogFiles(t *testing.T) {
	// A process killed between badger creating a memtable or value-log file
	// and sizing it leaves the file empty, and badger v4.9.6 then refuses to
	// open the directory ("Create a new file", dgraph-io/badger#2207).
	// Open removes such files first: they hold nothing.
	for _, name := range []string{"00009.mem", "000009.vlog", "000002.vlog"} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			b := openTestBadger(t, dir, Options{})
			if err := b.Create(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Append(ctx, "s", 0, testEvents(3)...); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			b = openTestBadger(t, dir, Options{})
			got, err := b.Read(ctx, "s", 1, 0)
			if err != nil || len(got) != 3 {
				t.Fatalf("Read after reopen: %d events, %v; want 3", len(got), err)
			}
			if _, err := b.Append(ctx, "s", 3, testEvents(1)...); err != nil {
				t.Fatalf("Append after reopen: %v", err)
			}
		})
	}
}

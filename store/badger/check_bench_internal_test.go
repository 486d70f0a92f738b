package badger

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/wagent/wagent/store"
)

// BenchmarkOpenChecks measures what the checks before badger cost on open,
// against badger's own read-only open of the same store as the baseline, and
// what checking every table block at open (badger's OnTableRead mode, or
// VerifyChecksum) would cost instead of checking blocks as they are read.
// The store: 100 sessions of 500 events of about 500 bytes, closed (all in
// tables); "crash image" is the same appends copied while the store is
// open (all in a write-ahead log, with a preallocated value log).
//
//	go test -run '^$' -bench OpenChecks -benchtime 20x ./store/badger/
func BenchmarkOpenChecks(b *testing.B) {
	closed, crashed := b.TempDir(), b.TempDir()
	s, err := Open(closed, Options{Logger: discardLogger, GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 18)
	ctx := context.Background()
	for i := range 100 {
		id := fmt.Sprintf("s%03d", i)
		if err := s.Create(ctx, id); err != nil {
			b.Fatal(err)
		}
		var head uint64
		for a := range 50 {
			evs := make([]store.Event, 10)
			for j := range evs {
				evs[j] = store.Event{Type: "t", Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"p":%q}`, a*10+j, pad))}
			}
			if head, err = s.Append(ctx, id, head, evs...); err != nil {
				b.Fatal(err)
			}
		}
		if i == 9 { // the crash image holds the first 10 sessions, in its .mem
			copyTree(b, closed, crashed)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	var tableBytes int64
	f, err := os.Open(filepath.Join(closed, manifestName))
	if err != nil {
		b.Fatal(err)
	}
	m, _, err := bdb.ReplayManifestFile(f, 0, bdb.DefaultOptions(closed))
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	for id := range m.Tables {
		info, err := os.Stat(table.NewFilename(id, closed))
		if err != nil {
			b.Fatal(err)
		}
		tableBytes += info.Size()
	}
	b.Logf("%d tables, %.1f MiB", len(m.Tables), float64(tableBytes)/(1<<20))

	report := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/open")
	}
	b.Run("badger-read-only-open", func(b *testing.B) {
		for b.Loop() {
			db, err := bdb.Open(badgerOptions(closed, Options{}, discardLogger).WithReadOnly(true))
			if err != nil {
				b.Fatal(err)
			}
			db.Close()
		}
		report(b)
	})
	b.Run("checks", func(b *testing.B) {
		for b.Loop() {
			if _, err := inspect(closed, badgerLogger{discardLogger}); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("checks-crash-image", func(b *testing.B) {
		for b.Loop() {
			if _, err := inspect(crashed, badgerLogger{discardLogger}); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("every-block-checksum", func(b *testing.B) {
		for b.Loop() {
			for id, tm := range m.Tables {
				mf, err := z.OpenMmapFile(table.NewFilename(id, closed), os.O_RDONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				t, err := table.OpenTable(mf, table.Options{BlockSize: blockSize, Compression: tm.Compression, ChkMode: options.OnTableRead})
				if err != nil {
					b.Fatal(err)
				}
				t.Close(-1)
			}
		}
		report(b)
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N)/(float64(tableBytes)/(1<<20)), "ms/MiB")
	})
	// Reading everything from a fresh open (a cold block cache), with and
	// without checking each block's checksum as it is read.
	for _, mode := range []options.ChecksumVerificationMode{options.NoVerification, options.OnBlockRead} {
		name := map[options.ChecksumVerificationMode]string{options.NoVerification: "read-all-no-block-checksums", options.OnBlockRead: "read-all-block-checksums"}[mode]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				db, err := bdb.Open(badgerOptions(closed, Options{}, discardLogger).WithReadOnly(true).WithChecksumVerificationMode(mode))
				if err != nil {
					b.Fatal(err)
				}
				s := &Store{dir: closed, db: db, readOnly: true}
				ids, err := s.Sessions(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, id := range ids {
					if _, err := s.Read(ctx, id, 1, 0); err != nil {
						b.Fatal(err)
					}
				}
				db.Close()
			}
			report(b)
		})
	}
	for _, ro := range []bool{true, false} {
		name := "Open-read-write"
		if ro {
			name = "Open-read-only"
		}
		for _, dir := range []string{closed, crashed} {
			sub := name
			if dir == crashed {
				sub += "-crash-image"
				if !ro {
					continue // a writer's open changes the image
				}
			}
			b.Run(sub, func(b *testing.B) {
				for b.Loop() {
					s, err := Open(dir, Options{ReadOnly: ro, Logger: discardLogger, GCInterval: -1})
					if err != nil {
						b.Fatal(err)
					}
					s.Close()
				}
				report(b)
			})
		}
	}
}

func copyTree(b *testing.B, from, to string) {
	entries, err := os.ReadDir(from)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			b.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

package badger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// Benchmarks for issue 2. Targets: synced append p50 within 2x of a raw
// 4 KiB write+fsync on the same disk; unsynced single-event appends at
// 30,000/s or more; reading a 10,000-event session in under 50 ms.
// BENCHMARKS.md records a run and the command.

// benchEvent is a typical small event: about 250 bytes encoded.
func benchEvent() store.Event {
	return store.Event{
		Type: "user/message", Turn: 3, Step: 1, Time: time.Now(),
		Data: json.RawMessage(`{"id":"m-0123456789","content":"` + strings.Repeat("lorem ipsum ", 13) + `"}`),
	}
}

func benchEvents(n int) []store.Event {
	out := make([]store.Event, n)
	for i := range out {
		out[i] = benchEvent()
	}
	return out
}

func openBench(b *testing.B, dir string, synced bool) *badger.Store {
	b.Helper()
	l, err := badger.Open(dir, badger.Options{SyncWrites: synced, Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// latencies collects per-operation times for percentiles.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkAppend measures one writer appending 1 or 8 events at a time,
// with and without SyncWrites.
func BenchmarkAppend(b *testing.B) {
	for _, synced := range []bool{false, true} {
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%v/events=%d", synced, n), func(b *testing.B) {
				ctx := context.Background()
				l := openBench(b, b.TempDir(), synced)
				if err := l.Create(ctx, "s"); err != nil {
					b.Fatal(err)
				}
				events := benchEvents(n)
				var head uint64
				var lat latencies
				for b.Loop() {
					start := time.Now()
					h, err := l.Append(ctx, "s", head, events...)
					lat = append(lat, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					head = h
				}
				b.ReportMetric(micros(lat.pct(0.50)), "p50-µs")
				b.ReportMetric(micros(lat.pct(0.99)), "p99-µs")
				b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "appends/s")
			})
		}
	}
}

// BenchmarkAppendParallel measures appends from concurrent writers, each to
// its own session: badger commits concurrent transactions together, so
// synced writers share fsyncs.
func BenchmarkAppendParallel(b *testing.B) {
	for _, synced := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v/events=1", synced), func(b *testing.B) {
			ctx := context.Background()
			l := openBench(b, b.TempDir(), synced)
			var next atomic.Int64
			b.SetParallelism(4) // 8 writers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprintf("s%d", next.Add(1))
				if err := l.Create(ctx, id); err != nil {
					b.Error(err)
					return
				}
				events := benchEvents(1)
				var head uint64
				for pb.Next() {
					h, err := l.Append(ctx, id, head, events...)
					if err != nil {
						b.Error(err)
						return
					}
					head = h
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// rawFsync appends 4 KiB to f and fsyncs it: the cheapest durable write a
// log can make on this disk.
func rawFsync(b *testing.B, f *os.File, block []byte) time.Duration {
	start := time.Now()
	if _, err := f.Write(block); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func openRaw(b *testing.B, dir string) *os.File {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "raw-fsync"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// BenchmarkFsyncBaseline is the baseline alone: a 4 KiB append plus fsync.
func BenchmarkFsyncBaseline(b *testing.B) {
	f := openRaw(b, b.TempDir())
	block := make([]byte, 4096)
	var lat latencies
	for b.Loop() {
		lat = append(lat, rawFsync(b, f, block))
	}
	b.ReportMetric(micros(lat.pct(0.50)), "p50-µs")
	b.ReportMetric(micros(lat.pct(0.99)), "p99-µs")
}

// BenchmarkSyncedAppendVsFsync alternates a synced append and a raw 4 KiB
// write+fsync in the same directory, so both see the same disk at the same
// moment, and reports the ratio of their medians (target: at most 2).
func BenchmarkSyncedAppendVsFsync(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			l := openBench(b, filepath.Join(dir, "store"), true)
			f := openRaw(b, dir)
			if err := l.Create(ctx, "s"); err != nil {
				b.Fatal(err)
			}
			events := benchEvents(n)
			block := make([]byte, 4096)
			var head uint64
			var app, raw latencies
			for b.Loop() {
				start := time.Now()
				h, err := l.Append(ctx, "s", head, events...)
				app = append(app, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				head = h
				raw = append(raw, rawFsync(b, f, block))
			}
			b.ReportMetric(micros(app.pct(0.50)), "append-p50-µs")
			b.ReportMetric(micros(raw.pct(0.50)), "fsync-p50-µs")
			b.ReportMetric(float64(app.pct(0.50))/float64(raw.pct(0.50)), "ratio-p50")
		})
	}
}

// BenchmarkRead10k reads a whole 10,000-event session (target: under 50 ms),
// from badger and, for reference, from memory.
func BenchmarkRead10k(b *testing.B) {
	const n = 10_000
	for _, backend := range []string{"badger", "memory"} {
		b.Run(backend, func(b *testing.B) {
			ctx := context.Background()
			var l store.Log
			if backend == "badger" {
				l = openBench(b, b.TempDir(), false)
			} else {
				l = store.NewMemory()
				b.Cleanup(func() { l.Close() })
			}
			if err := l.Create(ctx, "s"); err != nil {
				b.Fatal(err)
			}
			var head uint64
			for head < n {
				h, err := l.Append(ctx, "s", head, benchEvents(100)...)
				if err != nil {
					b.Fatal(err)
				}
				head = h
			}
			var lat latencies
			for b.Loop() {
				start := time.Now()
				events, err := l.Read(ctx, "s", 1, 0)
				lat = append(lat, time.Since(start))
				if err != nil || len(events) != n {
					b.Fatalf("Read returned %d events, %v", len(events), err)
				}
			}
			b.ReportMetric(float64(lat.pct(0.50))/float64(time.Millisecond), "p50-ms/read")
			b.ReportMetric(n/lat.pct(0.50).Seconds(), "events/s")
		})
	}
}

// BenchmarkHead looks up the head of one session among 1,000.
func BenchmarkHead(b *testing.B) {
	ctx := context.Background()
	l := openBench(b, b.TempDir(), false)
	for i := range 1000 {
		id := fmt.Sprintf("s%d", i)
		if err := l.Create(ctx, id); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(ctx, id, 0, benchEvents(3)...); err != nil {
			b.Fatal(err)
		}
	}
	var lat latencies
	for b.Loop() {
		start := time.Now()
		h, err := l.Head(ctx, "s500")
		lat = append(lat, time.Since(start))
		if err != nil || h != 3 {
			b.Fatalf("Head = %d, %v", h, err)
		}
	}
	b.ReportMetric(micros(lat.pct(0.50)), "p50-µs")
}

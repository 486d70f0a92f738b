package jetstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/store/jetstream"
)

// Benchmarks for issue 20: the JetStream store against badger, in the same
// run and on the same disk, each iteration doing one operation on each so
// that both see the machine at the same moment. Servers are embedded and
// reached over loopback TCP, as a worker reaches its cluster (a round trip
// through the kernel, not an in-process pipe). BENCHMARKS.md records a run.

// benchEvent is a typical small event: about 250 bytes encoded, as in the
// store package's benchmarks.
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

func openBadger(b *testing.B, synced bool) *badger.Store {
	b.Helper()
	l, err := badger.Open(b.TempDir(), badger.Options{SyncWrites: synced, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// openJetStream opens a Log on a fresh deployment: one server or three
// with an R3 stream, on file storage, fsyncing before each acknowledgement
// when synced (sync_interval: always).
func openJetStream(b *testing.B, replicas int, synced bool) *jetstream.Log {
	b.Helper()
	syncAlways := func(o *server.Options) { o.SyncAlways = synced }
	var ns *server.Server
	if replicas == 1 {
		ns = startServer(b, syncAlways)
	} else {
		ns = startCluster(b, replicas, syncAlways)[0]
	}
	l := openLog(b, connect(b, ns), b.Name(), jetstream.Options{Replicas: replicas})
	b.Cleanup(func() { l.Close() })
	return l
}

// pair runs op on badger and on JetStream once per iteration and reports
// both medians and their ratio.
func pair(b *testing.B, badger, js func() error) {
	b.Helper()
	var lb, lj latencies
	for b.Loop() {
		start := time.Now()
		if err := badger(); err != nil {
			b.Fatal(err)
		}
		lb = append(lb, time.Since(start))
		start = time.Now()
		if err := js(); err != nil {
			b.Fatal(err)
		}
		lj = append(lj, time.Since(start))
	}
	b.ReportMetric(micros(lb.pct(0.50)), "badger-p50-µs")
	b.ReportMetric(micros(lj.pct(0.50)), "js-p50-µs")
	b.ReportMetric(micros(lj.pct(0.99)), "js-p99-µs")
	b.ReportMetric(float64(lj.pct(0.50))/float64(lb.pct(0.50)), "ratio-p50")
}

// appender returns a func that appends events to a fresh session of l at
// the head it last reached, as one writer does.
func appender(b *testing.B, l store.Log, events []store.Event) func() error {
	b.Helper()
	ctx := context.Background()
	if err := l.Create(ctx, "s"); err != nil {
		b.Fatal(err)
	}
	var head uint64
	return func() error {
		h, err := l.Append(ctx, "s", head, events...)
		head = h
		return err
	}
}

// BenchmarkAppend: one writer appending 1 or 8 events at a time, unsynced
// (badger's default; JetStream's default sync_interval) and synced (badger
// SyncWrites; JetStream sync_interval: always), on one server and on three
// with an R3 stream.
func BenchmarkAppend(b *testing.B) {
	for _, synced := range []bool{false, true} {
		for _, replicas := range []int{1, 3} {
			for _, n := range []int{1, 8} {
				b.Run(fmt.Sprintf("sync=%v/R%d/events=%d", synced, replicas, n), func(b *testing.B) {
					bl := openBadger(b, synced)
					jl := openJetStream(b, replicas, synced)
					pair(b, appender(b, bl, benchEvents(n)), appender(b, jl, benchEvents(n)))
				})
			}
		}
	}
}

// fill appends n events to session s of each log, 4 to a record (one
// transition's worth).
func fill(b *testing.B, n int, logs ...store.Log) {
	b.Helper()
	ctx := context.Background()
	for _, l := range logs {
		if err := l.Create(ctx, "s"); err != nil {
			b.Fatal(err)
		}
		var head uint64
		for head < uint64(n) {
			h, err := l.Append(ctx, "s", head, benchEvents(4)...)
			if err != nil {
				b.Fatal(err)
			}
			head = h
		}
	}
}

// BenchmarkRead: reads of a 10,000-event session (2,500 records) on one
// server: the whole log, its last 4 events (one record, the incremental
// fold after a watch fires), the last 40 (ten records, the tail walk) and
// 100 from the middle (the binary search and a consumer).
func BenchmarkRead(b *testing.B) {
	const n = 10_000
	for _, tc := range []struct {
		name        string
		from, limit int
	}{
		{"all", 1, 0},
		{"last-4", n - 3, 0},
		{"last-40", n - 39, 0},
		{"middle-100", n / 2, 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bl := openBadger(b, false)
			jl := openJetStream(b, 1, false)
			fill(b, n, bl, jl)
			ctx := context.Background()
			read := func(l store.Log) func() error {
				return func() error {
					events, err := l.Read(ctx, "s", uint64(tc.from), tc.limit)
					want := n - tc.from + 1
					if tc.limit > 0 {
						want = min(want, tc.limit)
					}
					if err == nil && len(events) != want {
						return fmt.Errorf("read %d events, want %d", len(events), want)
					}
					return err
				}
			}
			pair(b, read(bl), read(jl))
		})
	}
}

// BenchmarkHead: the head of one session among 1,000, on one server and on
// three (R3, answered by the stream leader).
func BenchmarkHead(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", replicas), func(b *testing.B) {
			ctx := context.Background()
			bl := openBadger(b, false)
			jl := openJetStream(b, replicas, false)
			for _, l := range []store.Log{bl, jl} {
				for i := range 1000 {
					id := fmt.Sprintf("s%d", i)
					if err := l.Create(ctx, id); err != nil {
						b.Fatal(err)
					}
					if _, err := l.Append(ctx, id, 0, benchEvents(3)...); err != nil {
						b.Fatal(err)
					}
				}
			}
			head := func(l store.Log) func() error {
				return func() error {
					h, err := l.Head(ctx, "s500")
					if err == nil && h != 3 {
						return fmt.Errorf("head %d, want 3", h)
					}
					return err
				}
			}
			pair(b, head(bl), head(jl))
		})
	}
}

// BenchmarkAtomicity is the measurement behind RATIONALE.md's first
// choice: an append of n events as one message (what this package does)
// against an atomic batch of n messages (nats-server 2.12+, headers
// Nats-Batch-Id, Nats-Batch-Sequence, Nats-Batch-Commit), both conditional
// on the subject's last sequence, on file storage, on one server and on
// three with R3.
func BenchmarkAtomicity(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", replicas), func(b *testing.B) {
			ctx := context.Background()
			var ns *server.Server
			if replicas == 1 {
				ns = startServer(b)
			} else {
				ns = startCluster(b, replicas)[0]
			}
			nc := connect(b, ns)
			js, err := natsjs.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "ATOMIC", Subjects: []string{"atomic.*"}, AllowAtomicPublish: true, Replicas: replicas}); err != nil {
				b.Fatal(err)
			}
			event, err := json.Marshal(benchEvent())
			if err != nil {
				b.Fatal(err)
			}
			// -count runs each leaf again on this server: a new subject each time.
			runs := 0
			for _, n := range []int{1, 8} {
				b.Run(fmt.Sprintf("record/events=%d", n), func(b *testing.B) {
					runs++
					subj := fmt.Sprintf("atomic.record%d-%d", n, runs)
					payload := []byte(strings.TrimSuffix(strings.Repeat(string(event)+"\n", n), "\n"))
					var last uint64
					for b.Loop() {
						ack, err := js.Publish(ctx, subj, payload, natsjs.WithExpectLastSequencePerSubject(last))
						if err != nil {
							b.Fatal(err)
						}
						last = ack.Sequence
					}
				})
				b.Run(fmt.Sprintf("batch/events=%d", n), func(b *testing.B) {
					runs++
					subj := fmt.Sprintf("atomic.batch%d-%d", n, runs)
					var last uint64
					batch := 0
					for b.Loop() {
						batch++
						id := fmt.Sprintf("%s-%d", subj, batch)
						for k := 1; k <= n; k++ {
							m := nats.NewMsg(subj)
							m.Data = event
							m.Header.Set("Nats-Batch-Id", id)
							m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(k))
							if k == 1 {
								m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatUint(last, 10))
							}
							if k < n {
								if err := nc.PublishMsg(m); err != nil {
									b.Fatal(err)
								}
								continue
							}
							m.Header.Set("Nats-Batch-Commit", "1")
							ack, err := js.PublishMsg(ctx, m)
							if err != nil {
								b.Fatal(err)
							}
							last = ack.Sequence
						}
					}
				})
			}
		})
	}
}

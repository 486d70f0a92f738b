package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// countingLog counts appends: one per transition (and one per input).
type countingLog struct {
	store.Log
	appends atomic.Int64
}

func (c *countingLog) Append(ctx context.Context, s string, h uint64, evs ...store.Event) (uint64, error) {
	c.appends.Add(1)
	return c.Log.Append(ctx, s, h, evs...)
}

// BenchmarkThousandSessions opens 1,000 sessions on one badger store (no
// fsync), sends each a prompt that makes a tool turn with a zero-latency
// provider, and waits until all are idle: wall time per 1,000 sessions,
// transitions per second and peak heap.
func BenchmarkThousandSessions(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var wall time.Duration
	var transitions int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bl, err := badger.Open(b.TempDir(), badger.Options{GCInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		log := &countingLog{Log: bl}
		pl, _ := engine.NewPipeline(benchOps()...)
		for j := 0; j < n; j++ {
			if err := engine.Create(ctx, log, fmt.Sprintf("s%04d", j), event.SessionCreated{}, et.Epoch); err != nil {
				b.Fatal(err)
			}
		}
		log.appends.Store(0)
		b.StartTimer()
		start := time.Now()
		sessions := make([]*session.Session, n)
		for j := range sessions {
			s, err := session.OpenSession(ctx, engine.Config{Log: log, Session: fmt.Sprintf("s%04d", j), Pipeline: pl, Provider: zeroLatency, Durability: engine.SyncNever})
			if err != nil {
				b.Fatal(err)
			}
			sessions[j] = s
			if _, err := s.Send(ctx, "add one"); err != nil {
				b.Fatal(err)
			}
		}
		for _, s := range sessions {
			if err := s.WhenIdle(ctx); err != nil {
				b.Fatal(err)
			}
			if err := s.Err(); err != nil {
				b.Fatal(err)
			}
		}
		wall += time.Since(start)
		transitions += log.appends.Load()
		b.StopTimer()
		for _, s := range sessions {
			s.Close(ctx)
		}
		bl.Close()
		b.StartTimer()
	}
	close(stop)
	sampler.Wait()
	b.ReportMetric(wall.Seconds()/float64(b.N), "s/1000sessions")
	b.ReportMetric(float64(transitions)/wall.Seconds(), "transitions/s")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
}

package worker_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/worker"
)

var (
	benchSessions = flag.Int("bench.sessions", 1000, "sessions per run of BenchmarkWorkers")
	benchTakeover = flag.Int("bench.takeover", 40, "sessions a killed worker holds in BenchmarkTakeover")
)

// oneWorker is BenchmarkWorkers' transitions per second with one worker,
// by model latency, for the others' ratio (sub-benchmarks run in order).
var oneWorker = map[time.Duration]float64{}

// BenchmarkWorkers: 1,000 sessions, each a scripted tool turn (two calls,
// one answer), queued and woken at once, then driven by 1, 2 or 3 workers
// (each with its own connection, store and bus, as separate processes
// would have) with 16 sessions each at a time, on one embedded NATS
// server. It reports transitions per second (the engine's transitions
// that appended), sessions per second, and the ratio of transitions per
// second to one worker's. Everything shares this machine's cores: the
// server, the workers, the fake model and the tool. With model=0ms the
// model answers at once, so the run is bound by CPU; with model=50ms each
// request waits as a (fast) model would, so the run is bound by how many
// sessions the workers drive at once.
func BenchmarkWorkers(b *testing.B) {
	url := startServer(b)
	for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
		for _, n := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("model=%v/workers=%d", latency, n), func(b *testing.B) { benchWorkers(b, url, latency, n) })
		}
	}
}

func benchWorkers(b *testing.B, url string, latency time.Duration, n int) {
	{
		{
			f := newFleet(b, url, 1, 10*time.Second)
			client := f.proc()
			f.cleanup(client.nc)
			cfg := base(b, newSideEffects(), &et.Scripted{Answer: toolTurn, Hold: func(ctx context.Context, req *provider.Request) {
				if latency > 0 {
					time.Sleep(latency)
				}
			}})
			var transitions, sessions atomic.Int64
			var kmu sync.Mutex
			kinds := map[worker.EventKind]int{}
			for range n {
				p := f.proc()
				w, err := worker.New(worker.Options{Log: p.log, Bus: p.bus, Base: cfg, Concurrency: 16, Logger: quiet(), Observe: func(e worker.Event) {
					kmu.Lock()
					kinds[e.Kind]++
					kmu.Unlock()
					if e.Kind == worker.EventDrove {
						transitions.Add(int64(e.Transitions))
						if e.Outcome == engine.Idle && e.Transitions > 0 {
							sessions.Add(1)
						}
					}
				}})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { w.Run(ctx); close(done) }()
				b.Cleanup(func() { cancel(); <-done })
			}
			var elapsed time.Duration
			for i := range b.N {
				ids := make([]string, *benchSessions)
				for k := range ids {
					ids[k] = fmt.Sprintf("b%d-%d", i, k)
				}
				b.StopTimer()
				seed(b, client, ids)
				transitions.Store(0)
				sessions.Store(0)
				b.StartTimer()
				start := time.Now()
				wake(b, client, ids)
				for sessions.Load() < int64(len(ids)) {
					time.Sleep(time.Millisecond)
				}
				elapsed += time.Since(start)
			}
			if kinds[worker.EventHeld]+kinds[worker.EventFailed]+kinds[worker.EventLost] > 0 {
				b.Logf("%d workers: %v", n, kinds)
			}
			tps := float64(transitions.Load()) * float64(b.N) / elapsed.Seconds()
			b.ReportMetric(tps, "transitions/s")
			b.ReportMetric(float64(*benchSessions*b.N)/elapsed.Seconds(), "sessions/s")
			b.ReportMetric(0, "ns/op")
			if n == 1 {
				oneWorker[latency] = tps
			} else if one := oneWorker[latency]; one > 0 {
				b.ReportMetric(tps/one, "x_one_worker")
			}
		}
	}
}

// seed creates sessions with a queued prompt, without waking them.
func seed(b *testing.B, p *proc, ids []string) {
	var wg sync.WaitGroup
	ch := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for id := range ch {
				if err := engine.Create(ctx, p.log, id, event.SessionCreated{}, time.Now()); err != nil {
					b.Error(err)
					continue
				}
				m, err := engine.Open(ctx, engine.Config{Log: p.log, Session: id, Passive: true, Durability: engine.SyncNever})
				if err != nil {
					b.Error(err)
					continue
				}
				if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "go"}); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for _, id := range ids {
		ch <- id
	}
	close(ch)
	wg.Wait()
}

func wake(b *testing.B, p *proc, ids []string) {
	var wg sync.WaitGroup
	ch := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ch {
				if err := p.bus.Wake(context.Background(), id); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for _, id := range ids {
		ch <- id
	}
	close(ch)
	wg.Wait()
}

// BenchmarkTakeover: a worker drives 40 sessions, each in the middle of a
// tool call, when its connection goes (as if killed: no renewal, no ack,
// no release). A second worker takes every session over once its lease
// expires. Per session it measures from the lease's expiry (the dead
// worker's last successful write of it, plus the TTL) to the heir's first
// transition (its session/writer event), and reports the median and the
// 99th percentile, and the median time to the heir holding the lease.
func BenchmarkTakeover(b *testing.B) {
	url := startServer(b)
	const ttl = time.Second
	var takeover, acquire []time.Duration
	for i := range b.N {
		f := newFleet(b, url, 1, ttl)
		f.bus.Stream += fmt.Sprint(i)
		f.bus.Bucket += fmt.Sprint(i)
		f.log.Stream += fmt.Sprint(i)
		f.log.Subject += fmt.Sprint(i)
		f.bus.Subject += fmt.Sprint(i)
		client := f.proc()
		f.cleanup(client.nc)
		ops := newSideEffects()
		release := make(chan struct{})
		var started atomic.Int32
		ops.Hold = func(ctx context.Context, session, call string) {
			if ctx.Value(heirKey{}) == nil {
				started.Add(1)
				<-release
			}
		}
		p := &et.Scripted{Answer: func(req *provider.Request) et.Reply {
			if req.Messages[len(req.Messages)-1].Role == "user" {
				return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "effect", `{}`)}}
			}
			return et.Reply{Text: "ok"}
		}}
		cfg := base(b, ops, p)
		var mu sync.Mutex
		lastWrite := map[string]time.Time{}
		doomed := f.proc()
		dw, _ := worker.New(worker.Options{Log: doomed.log, Bus: doomed.bus, Base: cfg, Name: "doomed", Concurrency: 64, Logger: quiet(), Observe: func(e worker.Event) {
			if e.Kind == worker.EventAcquired || e.Kind == worker.EventRenewed {
				mu.Lock()
				lastWrite[e.Session] = e.Time
				mu.Unlock()
			}
		}})
		ctx, cancel := context.WithCancel(context.Background())
		go dw.Run(ctx)
		ids := make([]string, *benchTakeover)
		for k := range ids {
			ids[k] = fmt.Sprintf("t%d", k)
		}
		seed(b, client, ids)
		wake(b, client, ids)
		for int(started.Load()) < len(ids) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(ttl / 2) // a renewal or two in
		doomed.nc.Close()
		heirCfg := cfg
		heirCfg.Provider = p
		heir := f.proc()
		var done atomic.Int32
		acquired := map[string]time.Time{}
		hw, _ := worker.New(worker.Options{Log: heir.log, Bus: heir.bus, Base: heirCfg, Name: "heir", Concurrency: 64, Logger: quiet(), Observe: func(e worker.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case worker.EventAcquired:
				if _, ok := acquired[e.Session]; !ok {
					acquired[e.Session] = e.Time
				}
			case worker.EventDrove:
				done.Add(1)
			}
		}})
		hctx, hcancel := context.WithCancel(context.WithValue(context.Background(), heirKey{}, true))
		go hw.Run(hctx)
		for int(done.Load()) < len(ids) {
			time.Sleep(time.Millisecond)
		}
		for _, id := range ids {
			first := time.Time{}
			for _, e := range events(b, client.log, id) {
				var w event.SessionWriter
				if e.Type == event.EvSessionWriter && json.Unmarshal(e.Data, &w) == nil {
					if name, _, _ := worker.ParseWriterID(w.ID); name == "heir" {
						first = w.Start
						break
					}
				}
			}
			expiry := lastWrite[id].Add(ttl)
			takeover = append(takeover, first.Sub(expiry))
			acquire = append(acquire, acquired[id].Sub(expiry))
		}
		close(release)
		hcancel()
		cancel()
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(pct(takeover, 50), "takeover-p50-ms")
	b.ReportMetric(pct(takeover, 99), "takeover-p99-ms")
	b.ReportMetric(pct(acquire, 50), "lease-p50-ms")
}

// heirKey marks the heir's runs of the tool: they do not hold.
type heirKey struct{}

func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return float64(s[max(i, 0)].Microseconds()) / 1000
}

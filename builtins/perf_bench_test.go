package builtins_test

// Benchmarks of sessions with the real wasm pipeline (issue 21): the
// default built-ins bundle plus the example calculator, against the same
// turn with native ops, measured in one run.
//
//	go test ./builtins -run '^$' -bench 'WasmPipeline' -benchtime 200x
//
// BenchmarkWasmPipelineTransition (P1): one unsynced transition on badger,
// a tool turn with a zero-latency provider, wasm and native turns
// alternating in one store; x_native is the ratio.
// BenchmarkWasmPipelineThousandSessions (P6): 1,000 concurrent sessions,
// each a tool turn, transitions per second.
// BenchmarkWasmPipelineIdleMemory (P11): heap and stacks per idle session
// after 10,000 sessions are open, measured with runtime.MemStats after a GC.

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// zeroLatency answers at once: a calc_add call after user input, text
// after a tool result.
var zeroLatency = provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" {
		return &provider.Response{ToolCalls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}, FinishReason: "tool_calls"}, nil
	}
	onDelta(provider.Delta{Text: "done"})
	return &provider.Response{Content: "done", FinishReason: "stop"}, nil
})

// wasmPipeline is the default pipeline (approval allowing the calculator's
// tools, max-turns, retry, compaction, unknown-tool) plus the calculator:
// what `wagent run --pipeline` with the calculator added runs.
func wasmPipeline(b *testing.B) *engine.Pipeline {
	b.Helper()
	s := builtins.DefaultPipeline("")
	s.Path, s.Dir = "bench", root
	s.Ops[0].Config = []byte(`{"mode":"ask","allow":["load_skill","calc_*"]}`)
	s.Ops = append(s.Ops, calculator)
	l, err := s.Build(context.Background(), pipeline.Options{Runtime: pooled, Builtins: builtins.Bundle()})
	if err != nil {
		b.Fatal(err)
	}
	return l.Pipeline
}

// nativePipeline does the same turn with native ops: an approver, the
// calculator, a step limit and a retrier.
func nativePipeline(b *testing.B) *engine.Pipeline {
	calc := []string{"calc_add", "calc_subtract", "calc_multiply", "calc_divide", "calc_total"}
	p, err := engine.NewPipeline(et.Approver(calc, nil), et.Calculator(), et.Stopper("", 20), et.Retrier(3, 100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func openBadger(b *testing.B) store.Log {
	l, err := badger.Open(b.TempDir(), badger.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// template is a session log after two tool turns (about ten messages).
func template(b *testing.B, p *engine.Pipeline) []store.Event {
	ctx := context.Background()
	l := store.NewMemory()
	if err := engine.Create(ctx, l, "t", event.SessionCreated{}, et.Epoch); err != nil {
		b.Fatal(err)
	}
	m, err := engine.Open(ctx, engine.Config{Log: l, Session: "t", Pipeline: p, Provider: zeroLatency, Durability: engine.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "add one"}); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	evs, err := l.Read(ctx, "t", 1, 0)
	if err != nil {
		b.Fatal(err)
	}
	return evs
}

func clone(b *testing.B, l store.Log, session string, evs []store.Event) {
	ctx := context.Background()
	if err := l.Create(ctx, session); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(evs); i += store.MaxAppendEvents {
		j := min(i+store.MaxAppendEvents, len(evs))
		if _, err := l.Append(ctx, session, uint64(i), append([]store.Event(nil), evs[i:j]...)...); err != nil {
			b.Fatal(err)
		}
	}
}

func cpuDur() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// turn sends a message to a prepared session and runs the tool turn:
// transitions made, wall and CPU time.
func turn(b *testing.B, l store.Log, session string, p *engine.Pipeline) (int, time.Duration, time.Duration) {
	ctx := context.Background()
	m, err := engine.Open(ctx, engine.Config{Log: l, Session: session, Pipeline: p, Provider: zeroLatency, Durability: engine.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	before := m.State().Head
	cpu0, start := cpuDur(), time.Now()
	if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "add one"}); err != nil {
		b.Fatal(err)
	}
	n := 1
	for {
		o, err := m.Advance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if o != engine.Progressed {
			break
		}
		n++
	}
	d, c := time.Since(start), cpuDur()-cpu0
	if m.State().Head-before < 8 {
		b.Fatalf("the turn made only %d events", m.State().Head-before)
	}
	return n, d, c
}

// BenchmarkWasmPipelineTransition is P1: per-transition wall and CPU time
// of a tool turn with the wasm pipeline and with native ops, alternating,
// on one unsynced badger store.
func BenchmarkWasmPipelineTransition(b *testing.B) {
	wp, np := wasmPipeline(b), nativePipeline(b)
	wt, nt := template(b, wp), template(b, np)
	l := openBadger(b)
	for i := 0; i < b.N; i++ {
		clone(b, l, fmt.Sprintf("w%d", i), wt)
		clone(b, l, fmt.Sprintf("n%d", i), nt)
	}
	var wn, nn int
	var wd, nd, wc, nc time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, d, c := turn(b, l, fmt.Sprintf("w%d", i), wp)
		wn, wd, wc = wn+n, wd+d, wc+c
		n, d, c = turn(b, l, fmt.Sprintf("n%d", i), np)
		nn, nd, nc = nn+n, nd+d, nc+c
	}
	per := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(wd, wn), "wasm-ns/transition")
	b.ReportMetric(per(wc, wn), "wasm-cpu-ns/transition")
	b.ReportMetric(per(nd, nn), "native-ns/transition")
	b.ReportMetric(per(nc, nn), "native-cpu-ns/transition")
	b.ReportMetric(per(wd, wn)/per(nd, nn), "x_native")
	b.ReportMetric(per(wc, wn)/per(nc, nn), "x_native_cpu")
	b.ReportMetric(float64(wn)/float64(b.N), "transitions/turn")
	b.ReportMetric(0, "ns/op")
}

// countingLog counts appends: one per transition (and one per input).
type countingLog struct {
	store.Log
	appends atomic.Int64
}

func (c *countingLog) Append(ctx context.Context, s string, h uint64, evs ...store.Event) (uint64, error) {
	c.appends.Add(1)
	return c.Log.Append(ctx, s, h, evs...)
}

// thousand opens 1,000 sessions on a fresh badger store, sends each a
// prompt that makes a tool turn and waits until all are idle.
func thousand(b *testing.B, p *engine.Pipeline) (int64, time.Duration) {
	const n = 1000
	ctx := context.Background()
	bl, err := badger.Open(b.TempDir(), badger.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer bl.Close()
	log := &countingLog{Log: bl}
	for j := 0; j < n; j++ {
		if err := engine.Create(ctx, log, fmt.Sprintf("s%04d", j), event.SessionCreated{}, et.Epoch); err != nil {
			b.Fatal(err)
		}
	}
	log.appends.Store(0)
	start := time.Now()
	sessions := make([]*session.Session, n)
	for j := range sessions {
		s, err := session.OpenSession(ctx, engine.Config{Log: log, Session: fmt.Sprintf("s%04d", j), Pipeline: p, Provider: zeroLatency, Durability: engine.SyncNever})
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
	wall := time.Since(start)
	for _, s := range sessions {
		s.Close(ctx)
	}
	return log.appends.Load(), wall
}

// BenchmarkWasmPipelineThousandSessions is P6: 1,000 concurrent sessions,
// each a tool turn, with the wasm pipeline, then with native ops.
func BenchmarkWasmPipelineThousandSessions(b *testing.B) {
	wp, np := wasmPipeline(b), nativePipeline(b)
	thousand(b, wp) // warm the instance pools
	var wt, nt int64
	var wd, nd time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, d := thousand(b, wp)
		wt, wd = wt+t, wd+d
		t, d = thousand(b, np)
		nt, nd = nt+t, nd+d
	}
	b.ReportMetric(float64(wt)/wd.Seconds(), "wasm-transitions/s")
	b.ReportMetric(float64(nt)/nd.Seconds(), "native-transitions/s")
	b.ReportMetric(float64(nt)/nd.Seconds()/(float64(wt)/wd.Seconds()), "native/wasm")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWasmPipelineIdleMemory is P11: 10,000 sessions of two tool
// turns each are written, then all are opened as idle engine.Sessions with
// the wasm pipeline; heap in use plus goroutine stacks after a GC, over
// the same before they were opened, per session.
func BenchmarkWasmPipelineIdleMemory(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	wp := wasmPipeline(b)
	tmpl := template(b, wp)
	resident := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l := openBadger(b)
		for j := 0; j < n; j++ {
			clone(b, l, fmt.Sprintf("s%05d", j), tmpl)
		}
		// A turn in one session warms the pools, as a long-lived process
		// has them.
		s0, err := session.OpenSession(ctx, engine.Config{Log: l, Session: "s00000", Pipeline: wp, Provider: zeroLatency, Durability: engine.SyncNever})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s0.Send(ctx, "add one"); err != nil {
			b.Fatal(err)
		}
		if err := s0.WhenIdle(ctx); err != nil {
			b.Fatal(err)
		}
		s0.Close(ctx)
		base := resident()
		b.ReportMetric(float64(base)/(1<<20), "base-MiB")
		b.StartTimer()
		sessions := make([]*session.Session, n)
		for j := range sessions {
			s, err := session.OpenSession(ctx, engine.Config{Log: l, Session: fmt.Sprintf("s%05d", j), Pipeline: wp, Provider: zeroLatency, Durability: engine.SyncNever})
			if err != nil {
				b.Fatal(err)
			}
			sessions[j] = s
		}
		b.StopTimer()
		after := resident()
		b.ReportMetric(float64(int64(after)-int64(base))/n/1024, "KiB/session")
		for _, s := range sessions {
			s.Close(ctx)
		}
		b.StartTimer()
	}
	b.ReportMetric(0, "ns/op")
}

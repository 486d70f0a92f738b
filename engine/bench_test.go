package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// zeroLatency answers at once: a tool call after user input, text after a
// tool result. It never copies the conversation.
var zeroLatency = provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" {
		return &provider.Response{ToolCalls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}, FinishReason: "tool_calls"}, nil
	}
	onDelta(provider.Delta{Text: "done"})
	return &provider.Response{Content: "done", FinishReason: "stop"}, nil
})

// benchOps is a pipeline of seven native ops, each consulted on the way.
func benchOps() []engine.Operation {
	return []engine.Operation{
		et.Static("admit", []hostabi.Hook{hostabi.HookPrompt}, nil, hostabi.Effect{Kind: hostabi.KindAdmit}),
		et.Approver([]string{"calc_add", "calc_subtract", "calc_multiply", "calc_divide", "calc_total"}, nil),
		et.Calculator(),
		et.Static("mind", []hostabi.Hook{hostabi.HookContribute}, nil, hostabi.Effect{Kind: hostabi.KindTopOfMind, Text: "be brief"}),
		et.Finisher(),
		et.Retrier(3, 100*time.Millisecond),
		et.Stopper("", 1),
	}
}

// template builds a session log with about n prior messages.
func template(b *testing.B, n int) []store.Event {
	env := &et.Env{Log: store.NewMemory(), Session: "t", Provider: zeroLatency, Ops: benchOps}
	env.Create(b)
	m := env.Open(b)
	ctx := context.Background()
	for msgs := 0; msgs < n; msgs += 4 { // a tool turn adds 4 messages
		if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "add one"}); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return env.Events(b)
}

func clone(b *testing.B, l store.Log, session string, evs []store.Event) {
	ctx := context.Background()
	if err := l.Create(ctx, session); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(evs); i += store.MaxAppendEvents {
		j := min(i+store.MaxAppendEvents, len(evs))
		batch := append([]store.Event(nil), evs[i:j]...)
		if _, err := l.Append(ctx, session, uint64(i), batch...); err != nil {
			b.Fatal(err)
		}
	}
}

type benchStore struct {
	name string
	open func(b *testing.B) store.Log
	dur  engine.Durability
}

var benchStores = []benchStore{
	{"memory", func(b *testing.B) store.Log { return store.NewMemory() }, engine.SyncNever},
	{"badger-unsynced", openBadger, engine.SyncNever},
	{"badger-synced", openBadger, engine.SyncEveryAppend},
}

func openBadger(b *testing.B) store.Log {
	l, err := badger.Open(b.TempDir(), badger.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// oneTurn sends a message to a prepared session and runs the tool turn it
// starts, returning the transitions made and the time they took.
func oneTurn(b *testing.B, l store.Log, session string, dur engine.Durability) (int, time.Duration) {
	ctx := context.Background()
	p, _ := engine.NewPipeline(benchOps()...)
	m, err := engine.Open(ctx, engine.Config{Log: l, Session: session, Pipeline: p, Provider: zeroLatency, Durability: dur})
	if err != nil {
		b.Fatal(err)
	}
	// Collect the garbage of opening (a fold of up to thousands of events)
	// now, so the turn is not charged for it.
	runtime.GC()
	cpu0 := threadCPU()
	start := time.Now()
	before := m.State().Head
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
	d := time.Since(start)
	turnCPU += threadCPU() - cpu0
	if m.State().Head-before < 10 {
		b.Fatalf("the turn made only %d events", m.State().Head-before)
	}
	return n, d
}

// BenchmarkTransition measures one transition of a short tool turn with a
// zero-latency provider and seven native ops, at 10 and 1,000 prior
// messages. Opening and folding the session is outside the measurement.
func BenchmarkTransition(b *testing.B) {
	for _, hist := range []int{10, 1000} {
		tmpl := template(b, hist)
		for _, bs := range benchStores {
			b.Run(fmt.Sprintf("%s/history=%d", bs.name, hist), func(b *testing.B) {
				l := bs.open(b)
				var total time.Duration
				var transitions int
				turnCPU = 0
				for i := 0; i < b.N; i++ {
					session := fmt.Sprintf("s%d", i)
					clone(b, l, session, tmpl)
					n, d := oneTurn(b, l, session, bs.dur)
					transitions += n
					total += d
				}
				b.ReportMetric(float64(total.Nanoseconds())/float64(transitions), "ns/transition")
				b.ReportMetric(float64(transitions)/total.Seconds(), "transitions/s")
				b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/turn")
				b.ReportMetric(float64(turnCPU.Nanoseconds())/float64(b.N), "cpu-ns/turn")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkHistoryRatio runs a turn at 10 and at 1,000 prior messages
// alternately, in one store, and reports the ratio of their per-transition
// cost (target: at most 1.3). Both cases share the store, so what is
// compared is the engine's work on a longer history, not a bigger store.
func BenchmarkHistoryRatio(b *testing.B) {
	small, large := template(b, 10), template(b, 1000)
	for _, bs := range benchStores[:2] {
		b.Run(bs.name, func(b *testing.B) {
			l := bs.open(b)
			var ds, dl time.Duration
			var ns, nl int
			// All sessions are written first, so that no turn is measured
			// while the store digests a bulk write just made for it.
			for i := 0; i < b.N; i++ {
				clone(b, l, fmt.Sprintf("a%d", i), small)
				clone(b, l, fmt.Sprintf("b%d", i), large)
			}
			for i := 0; i < b.N; i++ {
				n, d := oneTurn(b, l, fmt.Sprintf("a%d", i), bs.dur)
				ns, ds = ns+n, ds+d
				n, d = oneTurn(b, l, fmt.Sprintf("b%d", i), bs.dur)
				nl, dl = nl+n, dl+d
			}
			per10 := float64(ds.Nanoseconds()) / float64(ns)
			per1000 := float64(dl.Nanoseconds()) / float64(nl)
			b.ReportMetric(per10, "ns/transition@10")
			b.ReportMetric(per1000, "ns/transition@1000")
			b.ReportMetric(per1000/per10, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// turnCPU sums the process's CPU time over the turns measured (all its
// threads, the forced collection before each turn excluded): the engine's
// own work, which the machine's other load changes far less than the wall
// time.
var turnCPU time.Duration

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

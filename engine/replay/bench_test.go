package replay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/replay"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	wpipeline "github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/wasmhost"
)

// zeroLatency is a model that answers at once: a user message with a call
// to a tool no op owns (the unknown-tool op answers it), a tool result
// with text; with usage, so the compaction op is asked before each request.
var zeroLatency = provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	usage := provider.Usage{InputTokens: 10 * len(req.Messages), OutputTokens: 5}
	if req.Attempt == 0 {
		return &provider.Response{Content: "a summary", Usage: usage}, nil
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" {
		return &provider.Response{ToolCalls: []hostabi.ToolCall{{ID: fmt.Sprintf("c%d", len(req.Messages)), Name: "lookup", Arguments: []byte(`{"q":"x"}`)}}, FinishReason: "tool_calls", Usage: usage}, nil
	}
	return &provider.Response{Content: "done: " + last.Content[:min(len(last.Content), 20)], FinishReason: "stop", Usage: usage}, nil
})

// BenchmarkReplayThousandTurns records a 1,000-turn session with the
// default pipeline (the built-in wasm ops) against a zero-latency model,
// then replays it unchanged, in the same run: transitions per second of
// each (per second of wall time, and of the process's CPU time), and the
// replay's time against the recording's.
//
//	go test ./engine/replay/ -run '^$' -bench ThousandTurns -benchtime 3x -count 3
func BenchmarkReplayThousandTurns(b *testing.B) {
	const turns = 1000
	ctx := context.Background()
	cache := filepath.Join(os.TempDir(), "wagent-replay-bench-cache")
	os.MkdirAll(cache, 0o755)
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(cache))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	spec := builtins.DefaultPipeline("")
	build := func(event.SessionCreated) (*engine.Pipeline, error) {
		l, err := spec.Build(ctx, wpipeline.Options{Runtime: rt, Builtins: builtins.Bundle()})
		if err != nil {
			return nil, err
		}
		return l.Pipeline, nil
	}
	build(event.SessionCreated{}) // compile outside the measurement
	var recorded, replayed, recCPU, repCPU time.Duration
	var recTransitions, repTransitions int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		log := store.NewMemory()
		if err := engine.Create(ctx, log, "long", event.SessionCreated{Model: "test-model"}, time.Now()); err != nil {
			b.Fatal(err)
		}
		p, err := build(event.SessionCreated{})
		if err != nil {
			b.Fatal(err)
		}
		m, err := engine.Open(ctx, engine.Config{Log: log, Session: "long", Pipeline: p, Provider: zeroLatency, Model: "test-model", Durability: engine.SyncNever, Writer: "rec", SnapshotEvery: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start, cpu := time.Now(), cpuTime()
		n := 0
		for turn := 0; turn < turns; turn++ {
			if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: fmt.Sprintf("question %d", turn)}); err != nil {
				b.Fatal(err)
			}
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
		}
		recorded += time.Since(start)
		recCPU += cpuTime() - cpu
		recTransitions += n
		b.StopTimer()
		evs, err := log.Read(ctx, "long", 1, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start, cpu = time.Now(), cpuTime()
		rep, err := replay.Run(ctx, replay.Options{Session: "long", Events: evs, Pipeline: build})
		if err != nil {
			b.Fatal(err)
		}
		replayed += time.Since(start)
		repCPU += cpuTime() - cpu
		repTransitions += rep.Transitions
		if rep.Diverged() || rep.Transitions != n {
			b.Fatalf("the replay diverged or made %d transitions of %d: %+v %+v", rep.Transitions, n, rep.Stopped, rep.Divergences[:min(3, len(rep.Divergences))])
		}
	}
	b.ReportMetric(float64(recTransitions)/recorded.Seconds(), "record-transitions/s")
	b.ReportMetric(float64(repTransitions)/replayed.Seconds(), "replay-transitions/s")
	b.ReportMetric(recorded.Seconds()/float64(b.N), "record-s/op")
	b.ReportMetric(replayed.Seconds()/float64(b.N), "replay-s/op")
	b.ReportMetric(replayed.Seconds()/recorded.Seconds(), "replay/record")
	b.ReportMetric(float64(recTransitions)/float64(b.N), "transitions/op")
	if recCPU > 0 {
		// Per second of this process's CPU time, GC included: the cost
		// apart from what other processes on a shared machine take.
		b.ReportMetric(float64(recTransitions)/recCPU.Seconds(), "record-transitions/cpu-s")
		b.ReportMetric(float64(repTransitions)/repCPU.Seconds(), "replay-transitions/cpu-s")
	}
}

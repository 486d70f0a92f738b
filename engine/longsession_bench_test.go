package engine_test

import (
	"context"
	"fmt"
	"strings"
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

// Sessions that run for weeks (issue 18): commands and figures in
// BENCHMARKS.md.
//
//	go test ./engine -run '^$' -bench 'LongSession' -benchtime 5x

// benchModel answers each prompt with one tool call and then a short
// text; its usage is the request's size (a token per 4 bytes), so the
// compactor below compacts about every 100 turns. It counts request bytes.
type benchModel struct {
	maxBytes, lastBytes int
}

func (p *benchModel) Complete(ctx context.Context, req *provider.Request, d func(provider.Delta)) (*provider.Response, error) {
	if strings.Contains(req.System, summaryMarker) {
		return &provider.Response{Content: "a summary of the turns so far: the total was raised by one each turn", Usage: provider.Usage{InputTokens: 100, OutputTokens: 20}}, nil
	}
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content) + 20
		for _, c := range m.ToolCalls {
			n += len(c.Arguments) + len(c.Name) + 20
		}
	}
	p.lastBytes = n
	p.maxBytes = max(p.maxBytes, n)
	usage := provider.Usage{InputTokens: n / 4, OutputTokens: 10}
	if last := req.Messages[len(req.Messages)-1]; last.Role == "user" {
		return &provider.Response{ToolCalls: []hostabi.ToolCall{et.Call(fmt.Sprintf("c%d", len(req.Messages)), "calc_add", `{"value":1}`)}, FinishReason: "tool_calls", Usage: usage}, nil
	}
	return &provider.Response{Content: "added one; the total is up to date", FinishReason: "stop", Usage: usage}, nil
}

// longWindow makes the compactor compact about every 100 turns.
const longWindow = 12500

type longSession struct {
	log  store.Log
	pl   *engine.Pipeline
	prov *benchModel
	m    *engine.Machine
}

func openLong(b *testing.B, log store.Log, id string) *longSession {
	pl, err := engine.NewPipeline(compactor(longWindow, false), et.Calculator())
	if err != nil {
		b.Fatal(err)
	}
	s := &longSession{log: log, pl: pl, prov: &benchModel{}}
	if err := engine.Create(context.Background(), log, id, event.SessionCreated{}, et.Epoch); err != nil {
		b.Fatal(err)
	}
	s.m = s.reopen(b, id)
	return s
}

func (s *longSession) reopen(b *testing.B, id string) *engine.Machine {
	m, err := engine.Open(context.Background(), engine.Config{Log: s.log, Session: id, Pipeline: s.pl, Provider: s.prov,
		Durability: engine.SyncNever, Writer: "bench", Warn: func(w string) { b.Fatal(w) }})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// turn runs one turn and returns its transitions and time.
func (s *longSession) turn(b *testing.B, i int) (int, time.Duration) {
	ctx := context.Background()
	if _, err := s.m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: fmt.Sprintf("turn %d: please add one to the total", i)}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	n := 0
	for {
		o, err := s.m.Advance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if o != engine.Progressed {
			return n, time.Since(start)
		}
		n++
	}
}

func badgerLog(b *testing.B) store.Log {
	l, err := badger.Open(b.TempDir(), badger.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkLongSessionOpen (P10) opens a session of about 100,000 events
// (compacted every 100 turns, with a snapshot) on badger and makes one
// transition, against the same for a session of about 100 events, in one
// run.
func BenchmarkLongSessionOpen(b *testing.B) {
	log := badgerLog(b)
	build := func(id string, events uint64) *longSession {
		s := openLong(b, log, id)
		for i := 0; s.m.State().Head < events; i++ {
			s.turn(b, i)
		}
		if err := s.m.Snapshot(context.Background()); err != nil {
			b.Fatal(err)
		}
		return s
	}
	small, large := build("small", 100), build("large", 100000)
	measure := func(s *longSession, id string) time.Duration {
		// A prompt waits; opening the session and claiming it is the
		// transition measured.
		head, _ := log.Head(context.Background(), id)
		ctx := context.Background()
		if _, err := s.m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "one more"}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		m := s.reopen(b, id)
		if _, err := m.Advance(ctx); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		// Finish the turn so the next round starts from rest.
		m.Run(ctx)
		s.m = m
		_ = head
		return d
	}
	var ts, tl time.Duration
	b.ResetTimer()
	for range b.N {
		ts += measure(small, "small")
		tl += measure(large, "large")
	}
	st := large.m.State()
	b.ReportMetric(float64(tl.Microseconds())/float64(b.N)/1000, "ms/open+transition@100k")
	b.ReportMetric(float64(ts.Microseconds())/float64(b.N)/1000, "ms/open+transition@100")
	b.ReportMetric(float64(tl)/float64(ts), "ratio")
	b.ReportMetric(float64(st.Head), "events")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLongSessionTransitions runs 2,000 turns with compaction every
// 100 or so and reports the time per transition at turn 10 against turn
// 2,000 (averaged over 10 turns each), and the request bytes.
func BenchmarkLongSessionTransitions(b *testing.B) {
	for _, backend := range []string{"badger", "memory"} {
		b.Run(backend, func(b *testing.B) { longTransitions(b, backend) })
	}
}

func longTransitions(b *testing.B, backend string) {
	for range b.N {
		log := store.NewMemory()
		if backend == "badger" {
			log = badgerLog(b)
		}
		s := openLong(b, log, "s")
		var early, late time.Duration
		var nEarly, nLate int
		for i := 0; i < 2000; i++ {
			n, d := s.turn(b, i)
			switch {
			case i >= 10 && i < 20:
				early += d
				nEarly += n
			case i >= 1990:
				late += d
				nLate += n
			}
		}
		st := s.m.State()
		compactions := 0
		if st.Compaction != nil {
			compactions = st.Stubbed
		}
		b.ReportMetric(float64(early.Nanoseconds())/float64(nEarly), "ns/transition@turn10")
		b.ReportMetric(float64(late.Nanoseconds())/float64(nLate), "ns/transition@turn2000")
		b.ReportMetric(float64(late.Nanoseconds())/float64(nLate)/(float64(early.Nanoseconds())/float64(nEarly)), "ratio")
		b.ReportMetric(float64(s.prov.maxBytes), "max-request-bytes")
		b.ReportMetric(float64(st.Head), "events")
		b.ReportMetric(float64(compactions), "messages-summarised")
		b.ReportMetric(0, "ns/op")
	}
}

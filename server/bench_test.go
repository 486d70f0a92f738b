package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// The owner's figures (issue 16): commands and results in BENCHMARKS.md.
//
//	go test ./server -run '^$' -bench . -benchtime 1x

// zeroLatency answers at once: a tool call after user input, text after a
// tool result.
var zeroLatency = provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" {
		return &provider.Response{ToolCalls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}, FinishReason: "tool_calls"}, nil
	}
	onDelta(provider.Delta{Text: "done"})
	return &provider.Response{Content: "done", FinishReason: "stop"}, nil
})

// countingLog counts appends: one per transition (two for a tool's) and
// one per input.
type countingLog struct {
	store.Log
	appends atomic.Int64
}

func (c *countingLog) Append(ctx context.Context, s string, h uint64, evs ...store.Event) (uint64, error) {
	c.appends.Add(1)
	return c.Log.Append(ctx, s, h, evs...)
}

func benchPipeline(b *testing.B) *engine.Pipeline {
	p, err := engine.NewPipeline(et.Approver([]string{"calc_add"}, nil), et.Calculator())
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func benchBadger(b *testing.B) *countingLog {
	bl, err := badger.Open(b.TempDir(), badger.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bl.Close() })
	return &countingLog{Log: bl}
}

// BenchmarkThousandSessionsAPI runs 1,000 concurrent sessions, each a
// tool turn, once driven through the HTTP API (create with the prompt,
// follow the stream until idle) and once by the in-process driver
// (session.Host), on badger without fsync, in one run, and reports
// transitions per second and the ratio (goal ≥ 0.5).
func BenchmarkThousandSessionsAPI(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	pl := benchPipeline(b)
	var apiT, hostT time.Duration
	var apiAppends, hostAppends int64
	for range b.N {
		// Through the API.
		log := benchBadger(b)
		srv, err := newServer(app.Options{Drive: true, Log: log, Base: engine.Config{Durability: engine.SyncNever}, Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			return engine.Config{Pipeline: pl, Provider: zeroLatency}, nil
		}}, server.Options{Token: "t"})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		cl := server.NewClient(hs.URL, "t", nil)
		start := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64) // clients at once (the HTTP client's connections)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				id := fmt.Sprintf("s%04d", i)
				if _, err := cl.Create(ctx, &server.CreateRequest{ID: id, Prompt: "add one"}); err != nil {
					b.Error(err)
					return
				}
				if err := follow(ctx, cl, id); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		apiT += time.Since(start)
		apiAppends += log.appends.Load()
		hs.Close()
		srv.Close(ctx)

		// In process.
		log = benchBadger(b)
		host := session.NewHost(engine.Config{Log: log, Pipeline: pl, Provider: zeroLatency, Durability: engine.SyncNever})
		start = time.Now()
		sessions := make([]*session.Session, n)
		for i := range sessions {
			s, err := host.Create(ctx, fmt.Sprintf("s%04d", i), event.SessionCreated{})
			if err != nil {
				b.Fatal(err)
			}
			sessions[i] = s
			s.Send(ctx, "add one")
		}
		for _, s := range sessions {
			if err := s.WhenIdle(ctx); err != nil {
				b.Fatal(err)
			}
		}
		hostT += time.Since(start)
		hostAppends += log.appends.Load()
		host.Close(ctx)
	}
	api := float64(apiAppends) / apiT.Seconds()
	inproc := float64(hostAppends) / hostT.Seconds()
	b.ReportMetric(api, "appends/s-api")
	b.ReportMetric(inproc, "appends/s-in-process")
	b.ReportMetric(api/inproc, "ratio")
	b.ReportMetric(0, "ns/op")
}

// follow reads a session's stream until it is idle with everything read.
func follow(ctx context.Context, cl *server.Client, id string) error {
	var last, head uint64
	done := false
	return cl.Stream(ctx, id, 1, func(ev server.StreamEvent) error {
		switch ev.Kind {
		case "event":
			last = ev.Event.Seq
		case "status":
			if ev.Status == "idle" && ev.Head > 2 {
				done, head = true, ev.Head
			}
		}
		if done && last >= head {
			return server.ErrStop
		}
		return nil
	})
}

// BenchmarkIdleSessionMemory creates 10,000 sessions through the API, each
// run through one tool turn and left idle in the owner, and reports the
// heap per idle session after a collection.
func BenchmarkIdleSessionMemory(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	pl := benchPipeline(b)
	for range b.N {
		log := benchBadger(b)
		srv, err := newServer(app.Options{Drive: true, Log: log, Base: engine.Config{Durability: engine.SyncNever, SnapshotEvery: -1}, Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			return engine.Config{Pipeline: pl, Provider: zeroLatency}, nil
		}}, server.Options{Token: "t"})
		if err != nil {
			b.Fatal(err)
		}
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			id := fmt.Sprintf("s%05d", i)
			if _, err := srv.Host().Create(ctx, id, event.SessionCreated{}); err != nil {
				b.Fatal(err)
			}
			s, _ := srv.Host().Get(id)
			s.Send(ctx, "add one")
			if err := s.WhenIdle(ctx); err != nil {
				b.Fatal(err)
			}
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := len(srv.Host().Sessions()); got != n {
			b.Fatalf("%d sessions open, want %d", got, n)
		}
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n/1024, "KiB/idle-session")
		srv.Close(ctx)
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStreamFanOut has 100 followers of one session while it runs
// 100 turns; it reports durable events delivered per second and fails if
// any follower missed one.
func BenchmarkStreamFanOut(b *testing.B) {
	const followers, turns = 100, 100
	ctx := context.Background()
	pl := benchPipeline(b)
	for range b.N {
		log := store.NewMemory()
		srv, err := newServer(app.Options{Drive: true, Log: log, Base: engine.Config{Durability: engine.SyncNever}, Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			return engine.Config{Pipeline: pl, Provider: zeroLatency}, nil
		}}, server.Options{Token: "t"})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		cl := server.NewClient(hs.URL, "t", nil)
		if _, err := cl.Create(ctx, &server.CreateRequest{ID: "s"}); err != nil {
			b.Fatal(err)
		}
		fctx, cancel := context.WithCancel(ctx)
		got := make([]atomic.Int64, followers)
		var wg sync.WaitGroup
		for f := range followers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fc := server.NewClient(hs.URL, "t", nil)
				next := uint64(1)
				fc.Stream(fctx, "s", 1, func(ev server.StreamEvent) error {
					if ev.Kind == "event" {
						if ev.Event.Seq != next {
							b.Errorf("follower %d: seq %d after %d", f, ev.Event.Seq, next-1)
						}
						next = ev.Event.Seq + 1
						got[f].Add(1)
					}
					return nil
				})
			}()
		}
		start := time.Now()
		for i := range turns {
			cl.Input(ctx, "s", "send", fmt.Sprintf("turn %d", i))
		}
		s, _ := srv.Host().Get("s")
		for {
			s.WhenIdle(ctx)
			if info, _ := cl.Session(ctx, "s"); info.Turns == turns && info.Status == "idle" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		head, _ := log.Head(ctx, "s")
		for f := range followers {
			for got[f].Load() < int64(head) {
				if time.Since(start) > time.Minute {
					b.Fatalf("follower %d has %d of %d events", f, got[f].Load(), head)
				}
				time.Sleep(time.Millisecond)
			}
		}
		d := time.Since(start)
		cancel()
		wg.Wait()
		hs.Close()
		srv.Close(ctx)
		b.ReportMetric(float64(head*followers)/d.Seconds(), "events-delivered/s")
		b.ReportMetric(float64(head), "events")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDecisionToPrompts measures, for 100 decisions, the time from a
// client's decision (the API call) to its approval/decision event reaching
// every open prompt: two followers over a Unix socket (the chat and wagent
// run, to the owner) and two over TCP (the console's SSE). It reports the
// median and p99 of the slowest follower per decision (issue 28).
//
//	go test ./server -run '^$' -bench DecisionToPrompts -benchtime 1x
func BenchmarkDecisionToPrompts(b *testing.B) {
	for range b.N {
		decisionToPrompts(b)
	}
}

func decisionToPrompts(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := newServer(app.Options{Drive: true, Log: store.NewMemory(), Base: engine.Config{Durability: engine.SyncNever}, Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
		p, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
		return engine.Config{Pipeline: p, Provider: &et.Scripted{Answer: et.Reuse}, Model: "m"}, err
	}}, server.Options{Version: "bench", Token: "t"})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(context.Background())
	tcp := httptest.NewServer(srv)
	defer tcp.Close()
	sock := filepath.Join(b.TempDir(), "owner.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	defer hs.Close()
	unix := server.NewClient("http://owner", "t", &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}})
	web := server.NewClient(tcp.URL, "t", nil)
	if _, err := web.Create(ctx, &server.CreateRequest{ID: "d"}); err != nil {
		b.Fatal(err)
	}
	// Each follower reports the calls whose decision it has seen.
	const n = 100
	followers := []*server.Client{unix, unix, web, web}
	seen := make([]chan string, len(followers))
	parked := make(chan struct{}, n+1)
	for i, cl := range followers {
		seen[i] = make(chan string, n)
		go cl.StreamFrom(ctx, "d", 1, nil, func(ev server.StreamEvent) error {
			if ev.Kind == "event" && ev.Event.Type == event.EvApprovalDecision {
				var d event.ApprovalDecision
				json.Unmarshal(ev.Event.Data, &d)
				seen[i] <- d.CallID
			}
			if i == 0 && ev.Kind == "status" && ev.Status == "waiting" {
				parked <- struct{}{}
			}
			return nil
		})
	}
	lat := make([]time.Duration, 0, n)
	for k := 1; k <= n; k++ {
		if _, err := web.Input(ctx, "d", "send", fmt.Sprintf("add %d", k)); err != nil {
			b.Fatal(err)
		}
		<-parked
		s, err := web.Session(ctx, "d")
		if err != nil || len(s.Waiting) != 1 {
			b.Fatalf("turn %d: waiting %+v %v", k, s, err)
		}
		w := s.Waiting[0]
		t0 := time.Now()
		if _, err := web.Decide(ctx, "d", server.DecideRequest{Decisions: []server.Decision{{CallID: w.ID, Digest: w.Digest, Allow: true}}}); err != nil {
			b.Fatal(err)
		}
		for _, ch := range seen {
			if got := <-ch; got != w.ID {
				b.Fatalf("a follower saw the decision of %s, want %s", got, w.ID)
			}
		}
		lat = append(lat, time.Since(t0))
	}
	cancel() // the followers leave before the servers close
	slices.Sort(lat)
	b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
}

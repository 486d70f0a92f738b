package worker_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/natstest"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
	"github.com/wagent/wagent/worker"
)

var (
	soak    = flag.Bool("soak", false, "run the long versions of the worker tests")
	useNATS = flag.String("nats", "", "run against this NATS server or cluster (comma-separated URLs) instead of an embedded one; every test makes streams of its own names and deletes them")
)

// fleet is what the tests share: the NATS servers and, per test, unique
// names for the log stream, the wake-up stream and the lease bucket, so
// that every test (and every process in it) finds the same ones.
type fleet struct {
	t    testing.TB
	urls string
	log  jetstream.Options
	bus  worker.BusOptions
}

func newFleet(t testing.TB, urls string, replicas int, ttl time.Duration) *fleet {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	id := fmt.Sprintf("%012x", h.Sum64()&0xffffffffffff)
	return &fleet{t: t, urls: urls,
		log: jetstream.Options{Stream: "L" + id, Subject: "l" + id, Replicas: replicas},
		bus: worker.BusOptions{Stream: "W" + id, Subject: "w" + id, Bucket: "B" + id, Consumer: "C" + id, Replicas: replicas, LeaseTTL: ttl}}
}

// proc is one "process": its own connection, store and bus.
type proc struct {
	nc  *nats.Conn
	log *jetstream.Log
	bus *worker.Bus
}

func (f *fleet) proc() *proc {
	f.t.Helper()
	nc, err := nats.Connect(f.urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	ctx := context.Background()
	l, err := jetstream.Open(ctx, nc, f.log)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { l.Close() })
	b, err := worker.OpenBus(ctx, nc, f.bus)
	if err != nil {
		f.t.Fatal(err)
	}
	return &proc{nc: nc, log: l, bus: b}
}

// cleanup deletes the test's streams when t ends.
func (f *fleet) cleanup(nc *nats.Conn) {
	f.t.Cleanup(func() {
		js, err := natsjs.New(nc)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		js.DeleteStream(ctx, f.log.Stream)
		js.DeleteStream(ctx, f.bus.Stream)
		js.DeleteKeyValue(ctx, f.bus.Bucket)
	})
}

// sideEffects is a tool op owning "effect" (not idempotent) and "look"
// (idempotent); it counts every run per session and call. Hold, if set,
// is called in each run and may block.
type sideEffects struct {
	mu   sync.Mutex
	runs map[string]int // session/call -> runs
	Hold func(ctx context.Context, session, call string)
}

func newSideEffects() *sideEffects { return &sideEffects{runs: map[string]int{}} }

func (s *sideEffects) Manifest() *hostabi.Manifest {
	return &hostabi.Manifest{Name: "effects", Version: "1", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"effect", "look"}, Idempotent: []string{"look"}}
}

func (s *sideEffects) Handle(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
	switch v.Hook {
	case hostabi.HookContribute:
		return []hostabi.Effect{
			{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "effect", Description: "does something once", Parameters: json.RawMessage(`{"type":"object"}`)}},
			{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "look", Description: "reads something", Parameters: json.RawMessage(`{"type":"object"}`)}},
		}, nil
	case hostabi.HookTool:
		if v.Tool.Run == "" {
			return nil, nil
		}
		if s.Hold != nil {
			s.Hold(ctx, v.Session, v.Tool.Run)
		}
		s.mu.Lock()
		s.runs[v.Session+"/"+v.Tool.Run]++
		s.mu.Unlock()
		return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: v.Tool.Run, Content: "done " + v.Tool.Run}}, nil
	}
	return nil, nil
}

func (s *sideEffects) count(session, call string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[session+"/"+call]
}

// toolTurn answers a user message with one call of each tool, and the
// tools' results with text: one scripted tool turn.
func toolTurn(req *provider.Request) et.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" {
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("", "effect", `{}`), et.Call("", "look", `{}`)}}
	}
	return et.Reply{Text: "done: " + last.Content}
}

// base returns a config with the tool op, the retrier and the provider.
func base(t testing.TB, ops *sideEffects, p provider.Provider, extra ...engine.Operation) engine.Config {
	t.Helper()
	pl, err := engine.NewPipeline(append([]engine.Operation{ops}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Config{Pipeline: pl, Provider: p, Durability: engine.SyncNever}
}

// create makes a session with a queued prompt, and wakes it.
func create(t testing.TB, p *proc, id, prompt string) {
	t.Helper()
	ctx := context.Background()
	if err := engine.Create(ctx, p.log, id, event.SessionCreated{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(ctx, engine.Config{Log: p.log, Session: id, Durability: engine.SyncNever, Passive: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: prompt}); err != nil {
		t.Fatal(err)
	}
	if err := p.bus.Wake(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// events reads a session's whole log.
func events(t testing.TB, log store.Log, id string) []store.Event {
	t.Helper()
	evs, err := log.Read(context.Background(), id, 1, 0)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return evs
}

// turnsEnded counts the session's turns that ended.
func turnsEnded(evs []store.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type == event.EvTurnEnd {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tally reads a log's tool calls: each call's tool, how many results it
// has and the code of its (last) result, by call id.
func tally(evs []store.Event) (calls map[string]string, results map[string]int, codes map[string]string) {
	calls, results, codes = map[string]string{}, map[string]int{}, map[string]string{}
	for _, e := range evs {
		switch e.Type {
		case event.EvAssistantMessage:
			var a event.AssistantMessage
			json.Unmarshal(e.Data, &a)
			for _, c := range a.ToolCalls {
				calls[c.ID] = c.Name
			}
		case event.EvToolResult:
			var r event.ToolResult
			json.Unmarshal(e.Data, &r)
			results[r.CallID]++
			codes[r.CallID] = r.Code
		}
	}
	return calls, results, codes
}

// checkSession checks what every test promises of a finished session: the
// log folds, the single-writer history holds, every call has exactly one
// result, and no non-idempotent call ran twice. It returns the results'
// codes by call.
func checkSession(t testing.TB, id string, evs []store.Event, ops *sideEffects) map[string]string {
	t.Helper()
	if _, err := event.Fold(id, evs); err != nil {
		t.Errorf("%s: %v", id, err)
	}
	if _, err := worker.CheckWriters(evs); err != nil {
		t.Errorf("%s: %v", id, err)
	}
	calls, results, codes := tally(evs)
	for c, name := range calls {
		if results[c] != 1 {
			t.Errorf("%s: call %s (%s) has %d results, want exactly 1", id, c, name, results[c])
		}
		if ops != nil && name == "effect" && ops.count(id, c) > 1 {
			t.Errorf("%s: the non-idempotent call %s ran %d times", id, c, ops.count(id, c))
		}
		if ops != nil && name == "effect" && ops.count(id, c) == 0 && codes[c] == "" {
			t.Errorf("%s: call %s never ran but its result claims it did", id, c)
		}
	}
	return codes
}

// quiet is a logger for workers whose warnings the test expects.
func quiet() *slog.Logger {
	if os.Getenv("WORKERLOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(discard{}, nil))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// startServer starts an embedded server, or returns -nats.
func startServer(t testing.TB) string {
	if *useNATS != "" {
		return *useNATS
	}
	return natstest.Start(t).ClientURL()
}

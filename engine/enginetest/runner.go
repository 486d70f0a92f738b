package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Reply is one scripted provider answer: a response or a failure.
type Reply struct {
	Text   string
	Calls  []hostabi.ToolCall
	Finish string
	Fail   *hostabi.Failure
	Chunks int // stream Text in this many deltas (default 1)
}

// Call makes a tool call for a Reply.
func Call(id, name, args string) hostabi.ToolCall {
	return hostabi.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// Replay is a provider that answers requests with its replies in order and
// records every request. It checks what a real server checks: every tool
// call in the conversation is answered before the next request.
type Replay struct {
	mu       sync.Mutex
	Replies  []Reply
	Requests []*provider.Request
	next     int
}

// Complete answers with the next reply.
func (p *Replay) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	p.mu.Lock()
	cp := *req
	cp.Messages = append([]hostabi.Message(nil), req.Messages...)
	p.Requests = append(p.Requests, &cp)
	if err := Unanswered(req.Messages); err != nil {
		p.mu.Unlock()
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Status: 400, Message: err.Error()}}
	}
	if p.next >= len(p.Replies) {
		p.mu.Unlock()
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Status: 400, Message: fmt.Sprintf("replay: no reply %d scripted", p.next+1)}}
	}
	r := p.Replies[p.next]
	p.next++
	p.mu.Unlock()
	if r.Fail != nil {
		return nil, &provider.Error{Failure: *r.Fail}
	}
	n := r.Chunks
	if n <= 0 {
		n = 1
	}
	text := r.Text
	for i := 0; i < n && text != ""; i++ {
		size := (len(text) + (n - i) - 1) / (n - i)
		onDelta(provider.Delta{Text: text[:size]})
		text = text[size:]
	}
	finish := r.Finish
	if finish == "" {
		finish = "stop"
		if len(r.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	return &provider.Response{Content: r.Text, ToolCalls: r.Calls, FinishReason: finish}, nil
}

// Calls returns how many requests were made.
func (p *Replay) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.Requests)
}

// Unanswered returns an error if an assistant tool call in msgs has no tool
// message answering it before the next assistant or user message, as
// providers require.
func Unanswered(msgs []hostabi.Message) error {
	open := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case "assistant", "user":
			for id := range open {
				return fmt.Errorf("message %d: tool call %s has no result", i, id)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case "tool":
			if !open[m.CallID] {
				return fmt.Errorf("message %d: result for unknown call %s", i, m.CallID)
			}
			delete(open, m.CallID)
		}
	}
	for id := range open {
		return fmt.Errorf("tool call %s has no result", id)
	}
	return nil
}

// Epoch is the fixed time test clocks return.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Env is what a test runner needs to build a machine for a session.
type Env struct {
	Log      store.Log
	Session  string
	Provider provider.Provider
	// Ops builds a fresh pipeline's ops; rebuild runs call it after every
	// transition.
	Ops func() []engine.Operation
	// Observer, if set, receives live events.
	Observer func(engine.Live)
	// Sleeps records the waits the machine asked for.
	Sleeps []time.Duration
	// Writer is the incarnation every machine Open builds runs as
	// (default "test"): rebuilding the machine is not a new process.
	Writer string
}

// Open builds a new machine (and new ops) from the store.
func (e *Env) Open(t testing.TB) *engine.Machine {
	t.Helper()
	p, err := engine.NewPipeline(e.Ops()...)
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	m, err := engine.Open(context.Background(), engine.Config{
		Log: e.Log, Session: e.Session, Pipeline: p, Provider: e.Provider,
		Model: "test-model", Durability: engine.SyncNever,
		Clock:    func() time.Time { return Epoch },
		Sleep:    func(ctx context.Context, d time.Duration) error { e.Sleeps = append(e.Sleeps, d); return ctx.Err() },
		Observer: e.Observer,
		Writer:   e.writer(),
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return m
}

func (e *Env) writer() string {
	if e.Writer == "" {
		return "test"
	}
	return e.Writer
}

// Create makes the session.
func (e *Env) Create(t testing.TB) {
	t.Helper()
	if err := engine.Create(context.Background(), e.Log, e.Session, event.SessionCreated{Model: "test-model", CreatedBy: "test"}, Epoch); err != nil {
		t.Fatalf("create: %v", err)
	}
}

// Send enqueues a next-turn message through a fresh machine.
func (e *Env) Send(t testing.TB, text string) {
	t.Helper()
	if _, err := e.Open(t).Enqueue(context.Background(), event.ListNextTurn, hostabi.InputMessage{Content: text}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// RunContinuous drives one machine until it waits or idles.
func (e *Env) RunContinuous(t testing.TB) engine.Outcome {
	t.Helper()
	o, err := e.Open(t).Run(context.Background())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return o
}

// RunRebuilding makes one transition per machine: after every transition
// the machine and every op are thrown away and rebuilt from the store.
func (e *Env) RunRebuilding(t testing.TB) engine.Outcome {
	t.Helper()
	for i := 0; i < 10000; i++ {
		o, err := e.Open(t).Advance(context.Background())
		if err != nil {
			t.Fatalf("advance %d: %v", i, err)
		}
		if o != engine.Progressed {
			return o
		}
	}
	t.Fatalf("no rest after 10000 transitions")
	return engine.Idle
}

// Events reads the whole log.
func (e *Env) Events(t testing.TB) []store.Event {
	t.Helper()
	evs, err := e.Log.Read(context.Background(), e.Session, 1, 0)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return evs
}

// Lines renders events one JSON object per line, for golden files.
func Lines(evs []store.Event) string {
	var b strings.Builder
	for _, e := range evs {
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// Scripted answers a request from a function of the request, so it can be
// shared by many sessions. Hold, if set, is called before answering and may
// block (it gets the request's context).
type Scripted struct {
	Answer func(req *provider.Request) Reply
	Hold   func(ctx context.Context, req *provider.Request)
	// PartialThenWait streams this text in answer to the first request and
	// then waits for the context to end, returning what was shown.
	PartialThenWait string

	mu    sync.Mutex
	calls int
}

// Complete implements provider.Provider.
func (p *Scripted) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	if p.Hold != nil {
		p.Hold(ctx, req)
	}
	if err := Unanswered(req.Messages); err != nil {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Status: 400, Message: err.Error()}}
	}
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	if p.PartialThenWait != "" && first {
		onDelta(provider.Delta{Text: p.PartialThenWait})
		<-ctx.Done()
		return &provider.Response{Content: p.PartialThenWait}, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled}, Err: ctx.Err()}
	}
	if err := ctx.Err(); err != nil {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled}, Err: err}
	}
	r := p.Answer(req)
	if r.Fail != nil {
		return nil, &provider.Error{Failure: *r.Fail}
	}
	if r.Text != "" {
		onDelta(provider.Delta{Text: r.Text})
	}
	finish := r.Finish
	if finish == "" {
		finish = "stop"
		if len(r.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	return &provider.Response{Content: r.Text, ToolCalls: r.Calls, FinishReason: finish}, nil
}

// Reuse answers like a local model server that reuses its call ids: "add
// N" (or "multiply N") calls calc_add (calc_multiply) with value N under
// the id call_0 in every turn, a tool result is answered "the total is R",
// anything else is echoed.
func Reuse(req *provider.Request) Reply {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return Reply{Text: "the total is " + last.Content}
	}
	if last.Role == "user" {
		for _, op := range []string{"add", "multiply"} {
			if n, ok := strings.CutPrefix(last.Content, op+" "); ok {
				v, _ := json.Marshal(n)
				if _, err := strconv.ParseFloat(n, 64); err == nil {
					v = []byte(n)
				}
				return Reply{Calls: []hostabi.ToolCall{Call("call_0", "calc_"+op, `{"value":`+string(v)+`}`)}}
			}
		}
	}
	return Echo(req)
}

// Echo answers every request with "echo: " and the last message's content.
func Echo(req *provider.Request) Reply {
	return Reply{Text: "echo: " + req.Messages[len(req.Messages)-1].Content}
}

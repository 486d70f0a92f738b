// Package providertest is the conformance suite every provider.Provider
// runs, as testing/slogtest is for slog handlers: streamed text, tool
// calls with their arguments, usage, failures normalised to
// *provider.Error with the right code (HTTP statuses, a malformed stream,
// a stream cut mid-event or ended early, a cancelled context) and the
// request a server is sent.
//
// A provider's test gives Run a Factory that builds the provider so that
// its next request meets a Scenario. A provider over HTTP serves the
// scenario with Handler, which needs only the provider's wire format
// (Wire); a provider that cannot produce a scenario (the scripted one has
// no HTTP status) returns nil and that case is skipped.
package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// Answer is what the model answers, in no wire format.
type Answer struct {
	// Text is the answer's text in the pieces it is streamed in.
	Text []string
	// Calls are the tool calls, arguments as compact JSON.
	Calls []hostabi.ToolCall
	// Usage is the usage the server reports.
	Usage provider.Usage
}

// FaultKind says how a request fails instead of being answered.
type FaultKind int

// The faults a scenario can have.
const (
	// NoFault: the answer is streamed whole.
	NoFault FaultKind = iota
	// HTTPError: the server answers Fault.Status with its API's error body
	// carrying Fault.Message, and a Retry-After header when
	// Fault.RetryAfter is set.
	HTTPError
	// Malformed: after the first text piece the stream carries an event
	// whose data is not JSON.
	Malformed
	// Cut: after the first text piece the connection drops in the middle
	// of the next event.
	Cut
	// Truncated: the stream ends cleanly after the first text piece,
	// without the format's end mark.
	Truncated
	// Hang: the server sends the first text piece, then nothing until the
	// request is cancelled.
	Hang
)

// Fault is how a request fails.
type Fault struct {
	Kind       FaultKind
	Status     int
	Message    string
	RetryAfter time.Duration
}

// Scenario is what the provider's next request meets.
type Scenario struct {
	Answer Answer
	Fault  Fault

	mu   sync.Mutex
	sent []Sent
}

// Record notes a request as the server read it. Handler calls it; a
// harness without a wire calls it itself or not at all.
func (s *Scenario) Record(r Sent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, r)
}

// Sent returns the requests recorded.
func (s *Scenario) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Sent is a request as the server read it, in no wire format.
type Sent struct {
	Model  string
	System string
	// Messages flattens the wire's turns: a turn holding several blocks
	// (Anthropic's user turn of tool results) is one message a block.
	Messages []SentMessage
}

// SentMessage is one message of a Sent request.
type SentMessage struct {
	Role string // user, assistant or tool
	Text string
	// Calls are an assistant message's tool calls, arguments as compact
	// JSON.
	Calls []hostabi.ToolCall `json:",omitempty"`
	// ResultFor is the id of the call a tool message answers.
	ResultFor string `json:",omitempty"`
}

// Factory returns a provider whose next request meets s, or nil when the
// provider cannot produce s.
type Factory func(t *testing.T, s *Scenario) provider.Provider

// Run runs the suite.
func Run(t *testing.T, f Factory) {
	t.Run("StreamsText", func(t *testing.T) { t.Parallel(); streamsText(t, f) })
	t.Run("ToolCalls", func(t *testing.T) { t.Parallel(); toolCalls(t, f) })
	t.Run("Usage", func(t *testing.T) { t.Parallel(); usage(t, f) })
	t.Run("HTTPErrors", func(t *testing.T) { t.Parallel(); httpErrors(t, f) })
	t.Run("BrokenStreams", func(t *testing.T) { t.Parallel(); brokenStreams(t, f) })
	t.Run("Cancel", func(t *testing.T) { t.Parallel(); cancel(t, f) })
	t.Run("CanceledBeforeSending", func(t *testing.T) { t.Parallel(); canceledBefore(t, f) })
	t.Run("RequestShape", func(t *testing.T) { t.Parallel(); requestShape(t, f) })
}

func build(t *testing.T, f Factory, s *Scenario) provider.Provider {
	t.Helper()
	p := f(t, s)
	if p == nil {
		t.Skip("the provider cannot produce this scenario")
	}
	return p
}

func userRequest(text string) *provider.Request {
	return &provider.Request{Model: "model-x", Messages: []hostabi.Message{{Role: "user", Content: text}}}
}

// complete sends a request and returns the answer and the deltas joined.
func complete(ctx context.Context, p provider.Provider, req *provider.Request, onDelta func(string)) (*provider.Response, string, error) {
	var mu sync.Mutex
	var streamed strings.Builder
	resp, err := p.Complete(ctx, req, func(d provider.Delta) {
		mu.Lock()
		streamed.WriteString(d.Text)
		mu.Unlock()
		if onDelta != nil {
			onDelta(d.Text)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return resp, streamed.String(), err
}

func streamsText(t *testing.T, f Factory) {
	pieces := []string{"The quick ", "brown fox — ", "jumps ✓\nover", " the lazy dog."}
	p := build(t, f, &Scenario{Answer: Answer{Text: pieces}})
	resp, streamed, err := complete(context.Background(), p, userRequest("go"), nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := strings.Join(pieces, "")
	if streamed != want {
		t.Errorf("streamed %q, want %q", streamed, want)
	}
	if resp.Content != want || resp.FinishReason != "stop" || len(resp.ToolCalls) != 0 {
		t.Errorf("Response = %+v, want content %q, finish stop and no calls", resp, want)
	}
}

func toolCalls(t *testing.T, f Factory) {
	calls := []hostabi.ToolCall{
		{ID: "call_a", Name: "calc", Arguments: json.RawMessage(`{"a":1,"b":[2,3],"note":"päd \"q\""}`)},
		{ID: "call_b", Name: "read", Arguments: json.RawMessage(`{"path":"/tmp/x"}`)},
	}
	p := build(t, f, &Scenario{Answer: Answer{Text: []string{"Let me see."}, Calls: calls}})
	resp, _, err := complete(context.Background(), p, userRequest("add"), nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.Content != "Let me see." || resp.FinishReason != "tool_calls" {
		t.Errorf("content %q, finish %q; want %q and tool_calls", resp.Content, resp.FinishReason, "Let me see.")
	}
	if diff := cmp.Diff(calls, compactCalls(t, resp.ToolCalls)); diff != "" {
		t.Errorf("tool calls mismatch (-want +got):\n%s", diff)
	}
}

func compactCalls(t *testing.T, calls []hostabi.ToolCall) []hostabi.ToolCall {
	t.Helper()
	var out []hostabi.ToolCall
	for _, c := range calls {
		var b bytes.Buffer
		if err := json.Compact(&b, c.Arguments); err != nil {
			t.Errorf("call %s has arguments that are not JSON: %q", c.ID, c.Arguments)
		}
		c.Arguments = b.Bytes()
		out = append(out, c)
	}
	return out
}

func usage(t *testing.T, f Factory) {
	want := provider.Usage{InputTokens: 1234, OutputTokens: 56}
	p := build(t, f, &Scenario{Answer: Answer{Text: []string{"hi"}, Usage: want}})
	resp, _, err := complete(context.Background(), p, userRequest("go"), nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if diff := cmp.Diff(want, resp.Usage); diff != "" {
		t.Errorf("usage mismatch (-want +got):\n%s", diff)
	}
}

// wantFailure checks err is a *provider.Error with the code, and that no
// Response came with it (only cancellation keeps one).
func wantFailure(t *testing.T, resp *provider.Response, err error, code hostabi.FailureCode) *provider.Error {
	t.Helper()
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("Complete error = %v (%T), want a *provider.Error", err, err)
	}
	if pe.Code != code {
		t.Errorf("code = %s (%v), want %s", pe.Code, err, code)
	}
	if resp != nil {
		t.Errorf("Complete returned a Response with a %s failure; only cancellation keeps one", pe.Code)
	}
	return pe
}

func httpErrors(t *testing.T, f Factory) {
	tests := []struct {
		status     int
		retryAfter time.Duration
		code       hostabi.FailureCode
	}{
		{400, 0, hostabi.FailBadRequest},
		{401, 0, hostabi.FailAuth},
		{403, 0, hostabi.FailAuth},
		{404, 0, hostabi.FailBadRequest},
		{429, 2 * time.Second, hostabi.FailRateLimit},
		{500, 0, hostabi.FailServer},
		{502, 0, hostabi.FailServer},
		{503, time.Second, hostabi.FailOverloaded},
		{529, 0, hostabi.FailOverloaded},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			msg := fmt.Sprintf("refused with %d for the test", tc.status)
			p := build(t, f, &Scenario{Fault: Fault{Kind: HTTPError, Status: tc.status, Message: msg, RetryAfter: tc.retryAfter}})
			resp, streamed, err := complete(context.Background(), p, userRequest("go"), nil)
			pe := wantFailure(t, resp, err, tc.code)
			if pe.Status != tc.status || !strings.Contains(pe.Message, msg) {
				t.Errorf("failure = %+v, want status %d and a message containing %q", pe.Failure, tc.status, msg)
			}
			if want := tc.retryAfter.Milliseconds(); pe.RetryAfter != want {
				t.Errorf("RetryAfter = %d ms, want %d", pe.RetryAfter, want)
			}
			if streamed != "" {
				t.Errorf("streamed %q from an error response", streamed)
			}
		})
	}
}

func brokenStreams(t *testing.T, f Factory) {
	for _, tc := range []struct {
		name string
		kind FaultKind
	}{
		{"malformed event", Malformed},
		{"connection cut mid-event", Cut},
		{"ended before the end mark", Truncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, f, &Scenario{Answer: Answer{Text: []string{"one ", "two"}}, Fault: Fault{Kind: tc.kind}})
			resp, streamed, err := complete(context.Background(), p, userRequest("go"), nil)
			wantFailure(t, resp, err, hostabi.FailStream)
			if streamed != "one " {
				t.Errorf("streamed %q before the failure, want %q", streamed, "one ")
			}
		})
	}
}

func cancel(t *testing.T, f Factory) {
	p := build(t, f, &Scenario{Answer: Answer{Text: []string{"one ", "two"}}, Fault: Fault{Kind: Hang}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	resp, streamed, err := complete(ctx, p, userRequest("go"), func(string) { go cancel() })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Complete returned %s after the cancel; it must stop at once", d)
	}
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Code != hostabi.FailCanceled {
		t.Fatalf("Complete error = %v, want a *provider.Error with code canceled", err)
	}
	if streamed != "one " || resp == nil || resp.Content != "one " || len(resp.ToolCalls) != 0 {
		t.Errorf("streamed %q, Response %+v; want the partial text %q in both", streamed, resp, "one ")
	}
}

func canceledBefore(t *testing.T, f Factory) {
	s := &Scenario{Answer: Answer{Text: []string{"x"}}}
	p := build(t, f, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, _, err := complete(ctx, p, userRequest("go"), nil)
	if provider.AsFailure(err).Code != hostabi.FailCanceled || resp == nil {
		t.Fatalf("Complete = %+v, %v; want an empty Response and canceled", resp, err)
	}
	if n := len(s.Sent()); n != 0 {
		t.Errorf("the server got %d requests after cancellation", n)
	}
}

func requestShape(t *testing.T, f Factory) {
	s := &Scenario{Answer: Answer{Text: []string{"done"}}}
	p := build(t, f, s)
	req := &provider.Request{
		Model:  "model-x",
		System: "You are terse.",
		Messages: []hostabi.Message{
			{Role: "user", Content: "add 1 and 2, read /a"},
			{Role: "assistant", Content: "Let me.", ToolCalls: []hostabi.ToolCall{
				{ID: "c1", Name: "calc", Arguments: json.RawMessage(`{"a": 1, "b": 2}`)},
				{ID: "c2", Name: "read", Arguments: json.RawMessage(`{"path":"/a"}`)},
			}},
			{Role: "tool", CallID: "c1", Content: "3"},
			{Role: "tool", CallID: "c2", Content: "no such file", IsError: true},
			{Role: "assistant", Content: "3, and /a is missing."},
			{Role: "user", Content: "thanks"},
		},
		Tools: []hostabi.ToolSpec{{Name: "calc"}, {Name: "read"}},
	}
	if _, _, err := complete(context.Background(), p, req, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	sent := s.Sent()
	if len(sent) == 0 {
		t.Skip("the provider records no request (it has no wire)")
	}
	if len(sent) != 1 {
		t.Fatalf("the server got %d requests, want 1", len(sent))
	}
	got := sent[0]
	for i := range got.Messages {
		got.Messages[i].Calls = compactCalls(t, got.Messages[i].Calls)
	}
	want := Sent{Model: "model-x", System: "You are terse.", Messages: []SentMessage{
		{Role: "user", Text: "add 1 and 2, read /a"},
		{Role: "assistant", Text: "Let me.", Calls: []hostabi.ToolCall{
			{ID: "c1", Name: "calc", Arguments: json.RawMessage(`{"a":1,"b":2}`)},
			{ID: "c2", Name: "read", Arguments: json.RawMessage(`{"path":"/a"}`)},
		}},
		{Role: "tool", ResultFor: "c1", Text: "3"},
		{Role: "tool", ResultFor: "c2", Text: "no such file"},
		{Role: "assistant", Text: "3, and /a is missing."},
		{Role: "user", Text: "thanks"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request mismatch (-want +got):\n%s", diff)
	}
}

// Wire is a provider's wire format over HTTP, for Handler.
type Wire struct {
	// Stream encodes an answer as the events of a streamed response, each
	// a whole server-sent event ending in its blank line.
	Stream func(a Answer) Events
	// ErrorBody is the API's JSON error body for an HTTP status.
	ErrorBody func(status int, message string) string
	// Decode reads a request's body.
	Decode func(body []byte) (Sent, error)
}

// Events is a streamed answer: the events before the text, one event a
// text piece, then the rest (calls, usage, finish reason, end mark).
type Events struct {
	Head, Text, Tail []string
}

// Handler serves s in the wire format w: it records each request it
// reads and answers it as s says.
func Handler(w Wire, s *Scenario) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		sent, err := w.Decode(body)
		if err != nil {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusBadRequest)
			io.WriteString(rw, w.ErrorBody(http.StatusBadRequest, "providertest: "+err.Error()))
			return
		}
		s.Record(sent)
		if s.Fault.Kind == HTTPError {
			rw.Header().Set("Content-Type", "application/json")
			if s.Fault.RetryAfter > 0 {
				rw.Header().Set("Retry-After", strconv.Itoa(int(s.Fault.RetryAfter/time.Second)))
			}
			rw.WriteHeader(s.Fault.Status)
			io.WriteString(rw, w.ErrorBody(s.Fault.Status, s.Fault.Message))
			return
		}
		ev := w.Stream(s.Answer)
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(http.StatusOK)
		fl, _ := rw.(http.Flusher)
		write := func(events ...string) {
			for _, e := range events {
				io.WriteString(rw, e)
			}
			if fl != nil {
				fl.Flush()
			}
		}
		write(ev.Head...)
		if s.Fault.Kind == NoFault {
			write(ev.Text...)
			write(ev.Tail...)
			return
		}
		write(ev.Text[:1]...)
		rest := append(ev.Text[1:len(ev.Text):len(ev.Text)], ev.Tail...)
		switch s.Fault.Kind {
		case Malformed:
			write("data: {\"this is not\n\n")
			write(rest...)
		case Cut:
			write(rest[0][:len(rest[0])/2])
			panic(http.ErrAbortHandler) // drops the connection
		case Truncated:
		case Hang:
			<-r.Context().Done()
		}
	})
}

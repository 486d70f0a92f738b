package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider/openai"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/wasmhost"
)

// End-to-end: the engine, real wasm ops and the real HTTP client, talking to
// the fake OpenAI-compatible server over HTTP. Nothing in between is
// replaced; only the engine's sleep is recorded instead of waited.

var repoRoot = filepath.Join("..", "..", "..")

// e2eEnv builds an engine environment whose provider is the real client
// pointed at srv and whose ops are the pipeline's wasm modules.
func e2eEnv(t *testing.T, srv *fakeopenai.Server, ops ...pipeline.OpSpec) *et.Env {
	t.Helper()
	ctx := context.Background()
	// A compile cache shared by runs of this test binary (as the builtins
	// tests do): a cold compile of the builtins bundle costs seconds.
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(filepath.Join(os.TempDir(), "wagent-openai-e2e-cache")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	spec := &pipeline.Spec{Path: "e2e", Dir: repoRoot, Ops: ops}
	l, err := spec.Build(ctx, pipeline.Options{Runtime: rt, Builtins: builtins.Bundle()})
	if err != nil {
		t.Fatalf("build pipeline: %v", err)
	}
	client, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "sk-test", Model: "test-model", IdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	env := &et.Env{
		Log: store.NewMemory(), Session: "e2e", Provider: client,
		Ops: func() []engine.Operation {
			out := make([]engine.Operation, len(l.Ops))
			for i, o := range l.Ops {
				out[i] = o
			}
			return out
		},
	}
	env.Create(t)
	return env
}

func ofType[T any](t *testing.T, evs []store.Event, typ string) ([]T, []store.Event) {
	t.Helper()
	var out []T
	var raw []store.Event
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		var v T
		if err := json.Unmarshal(e.Data, &v); err != nil {
			t.Fatalf("seq %d (%s): %v", e.Seq, typ, err)
		}
		out = append(out, v)
		raw = append(raw, e)
	}
	return out, raw
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// The model calls a tool whose arguments arrive in pieces; the calculator
// (a wasm op) runs it; its result goes back to the model with the call it
// answers; the model's text ends the turn.
func TestE2EToolCallRoundTrip(t *testing.T) {
	const args = `{"value": 2}`
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Times: 1, Reply: fakeopenai.Reply{
			ToolCalls: []fakeopenai.ToolCall{{ID: "call_add", Name: "calc_add", Arguments: args, Pieces: 5}},
		}},
		fakeopenai.Rule{ToolResult: "calc_add", Times: 1, Reply: fakeopenai.Reply{Text: "The total is 2.", Chunks: 3}},
	)
	env := e2eEnv(t, srv,
		pipeline.OpSpec{Use: "examples/wasm-ops/calculator/calculator.wasm"},
		pipeline.OpSpec{Use: "builtin:unknown-tool"},
	)
	var deltas strings.Builder
	env.Observer = func(l engine.Live) {
		if l.Kind == "delta" {
			deltas.WriteString(l.Text)
		}
	}
	env.Send(t, "add 2")
	if o := env.RunContinuous(t); o != engine.Idle {
		t.Fatalf("outcome %v, want idle", o)
	}
	evs := env.Events(t)
	if _, err := event.Fold("e2e", evs); err != nil {
		t.Fatalf("fold refuses the log: %v", err)
	}

	// The log: the call as the model made it (pieces joined), run by the
	// calculator, its result, and the final text.
	msgs, _ := ofType[event.AssistantMessage](t, evs, event.EvAssistantMessage)
	if len(msgs) != 2 {
		t.Fatalf("%d assistant messages, want 2:\n%s", len(msgs), et.Lines(evs))
	}
	if tc := msgs[0].ToolCalls; len(tc) != 1 || tc[0].ID != "1.1.1" || tc[0].ModelID != "call_add" || tc[0].Name != "calc_add" || !sameJSON(t, string(tc[0].Arguments), args) || msgs[0].FinishReason != "tool_calls" {
		t.Errorf("first answer %+v, want one calc_add call with %s", msgs[0], args)
	}
	if msgs[1].Content != "The total is 2." || len(msgs[1].ToolCalls) != 0 || msgs[1].FinishReason != "stop" {
		t.Errorf("final answer %+v", msgs[1])
	}
	if msgs[1].Usage == nil || msgs[1].Usage.InputTokens != fakeopenai.DefaultUsage.PromptTokens {
		t.Errorf("final answer usage %+v, want the fake's usage chunk", msgs[1].Usage)
	}
	if got := deltas.String(); !strings.Contains(got, "The total is 2.") {
		t.Errorf("streamed text %q", got)
	}
	calls, _ := ofType[event.ToolCallEvent](t, evs, event.EvToolCall)
	if len(calls) != 1 || calls[0].CallID != "1.1.1" || calls[0].Name != "calc_add" || calls[0].Op != "calculator" || !sameJSON(t, string(calls[0].Arguments), args) {
		t.Errorf("tool/call %+v, want 1.1.1 calc_add run by calculator", calls)
	}
	results, _ := ofType[event.ToolResult](t, evs, event.EvToolResult)
	if len(results) != 1 || results[0].CallID != "1.1.1" || results[0].Content != "2" || results[0].IsError || results[0].Op != "calculator" {
		t.Errorf("tool/result %+v, want 1.1.1 answered \"2\" by calculator", results)
	}
	ends, _ := ofType[event.TurnEnd](t, evs, event.EvTurnEnd)
	if len(ends) != 1 || ends[0].Reason != event.ReasonCompleted {
		t.Errorf("turn ends %+v, want one completed", ends)
	}

	// The wire: what the fake server saw.
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
			t.Errorf("request %d Authorization %q", i, got)
		}
		if !r.Body.Stream || r.Body.Model != "test-model" {
			t.Errorf("request %d: stream %v model %q", i, r.Body.Stream, r.Body.Model)
		}
		if err := fakeopenai.CheckHistory(r.Body.Messages); err != nil {
			t.Errorf("request %d breaks the tool pairing rule: %v", i, err)
		}
		var names []string
		for _, tool := range r.Body.Tools {
			names = append(names, tool.Function.Name)
		}
		sort.Strings(names)
		want := []string{"calc_add", "calc_divide", "calc_multiply", "calc_subtract", "calc_total"}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("request %d advertises tools %v, want %v", i, names, want)
		}
		for _, tool := range r.Body.Tools {
			if tool.Function.Name == "calc_add" && !strings.Contains(string(tool.Function.Parameters), `"value"`) {
				t.Errorf("calc_add parameters %s lack value", tool.Function.Parameters)
			}
		}
	}
	if m := reqs[0].Body.Messages; len(m) == 0 || m[len(m)-1].Role != "user" || m[len(m)-1].Text() != "add 2" {
		t.Errorf("first request messages %+v, want to end with the user's prompt", m)
	}
	// The second request carries the assistant's call and, right after it,
	// the tool message answering it.
	m := reqs[1].Body.Messages
	ai := -1
	for i, msg := range m {
		if msg.Role == "assistant" && len(msg.ToolCalls) > 0 {
			ai = i
		}
	}
	if ai < 0 || ai+1 >= len(m) {
		t.Fatalf("second request has no assistant tool call followed by a message: %+v", m)
	}
	wc := m[ai].ToolCalls
	if len(wc) != 1 || wc[0].ID != "call_add" || wc[0].Type != "function" || wc[0].Function.Name != "calc_add" || !sameJSON(t, wc[0].Function.Arguments, args) {
		t.Errorf("assistant tool calls on the wire %+v", wc)
	}
	if tm := m[ai+1]; tm.Role != "tool" || tm.ToolCallID != "call_add" || tm.Text() != "2" {
		t.Errorf("message after the call %+v, want the tool message for call_add with \"2\"", tm)
	}
	if last := m[len(m)-1]; last.Role != "tool" {
		t.Errorf("second request ends with a %s message, want the tool result", last.Role)
	}
}

// A 429 with Retry-After is normalised by the client, recorded as an
// attempt, retried by the builtin retry op after the server's delay, and
// answered in the same step.
func TestE2ERateLimitRetriedInSameStep(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Times: 1, Reply: fakeopenai.Reply{
			Status: http.StatusTooManyRequests, ErrorType: "requests", ErrorCode: "rate_limit_exceeded",
			ErrorMessage: "Rate limit reached for test-model on requests per min.",
			Header:       http.Header{"Retry-After": {"1"}},
		}},
		fakeopenai.Rule{Reply: fakeopenai.Reply{Text: "Answered after a retry."}},
	)
	env := e2eEnv(t, srv, pipeline.OpSpec{Use: "builtin:retry"})
	env.Send(t, "hello")
	if o := env.RunContinuous(t); o != engine.Idle {
		t.Fatalf("outcome %v, want idle", o)
	}
	evs := env.Events(t)
	if _, err := event.Fold("e2e", evs); err != nil {
		t.Fatalf("fold refuses the log: %v", err)
	}

	attempts, attemptEvs := ofType[event.AssistantAttempt](t, evs, event.EvAssistantAttempt)
	if len(attempts) != 1 {
		t.Fatalf("%d attempts, want 1:\n%s", len(attempts), et.Lines(evs))
	}
	want := hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1000}
	if f := attempts[0].Failure; f.Code != want.Code || f.Status != want.Status || f.RetryAfter != want.RetryAfter {
		t.Errorf("attempt failure %+v, want code %s status %d retry_after_ms %d", f, want.Code, want.Status, want.RetryAfter)
	}
	if !strings.Contains(attempts[0].Failure.Message, "Rate limit reached") {
		t.Errorf("attempt message %q, want the server's", attempts[0].Failure.Message)
	}
	sched, schedEvs := ofType[event.RetryScheduled](t, evs, event.EvRetryScheduled)
	if len(sched) != 1 || sched[0].DelayMS != 1000 || sched[0].Op != "retry" || sched[0].Failure.Code != hostabi.FailRateLimit {
		t.Fatalf("retry/scheduled %+v, want one by retry with delay_ms 1000", sched)
	}
	msgs, msgEvs := ofType[event.AssistantMessage](t, evs, event.EvAssistantMessage)
	if len(msgs) != 1 || msgs[0].Content != "Answered after a retry." {
		t.Fatalf("assistant messages %+v", msgs)
	}
	// Same turn, same step; and in this order.
	a, s, m := attemptEvs[0], schedEvs[0], msgEvs[0]
	if a.Turn != 1 || a.Step != 1 || s.Turn != a.Turn || s.Step != a.Step || m.Turn != a.Turn || m.Step != a.Step {
		t.Errorf("turn/step: attempt %d/%d, retry %d/%d, message %d/%d; want all 1/1", a.Turn, a.Step, s.Turn, s.Step, m.Turn, m.Step)
	}
	if !(a.Seq < s.Seq && s.Seq < m.Seq) {
		t.Errorf("order: attempt seq %d, retry seq %d, message seq %d", a.Seq, s.Seq, m.Seq)
	}
	if starts, _ := ofType[event.StepStart](t, evs, event.EvStepStart); len(starts) != 1 {
		t.Errorf("%d steps, want 1 (the retry stays in its step)", len(starts))
	}
	if !reflect.DeepEqual(env.Sleeps, []time.Duration{time.Second}) {
		t.Errorf("engine waits %v, want [1s]", env.Sleeps)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("the server saw %d requests, want 2", n)
	}
}

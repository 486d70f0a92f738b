package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
)

func newClient(t *testing.T, srv *fakeopenai.Server, mod ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{BaseURL: srv.URL, APIKey: "sk-test", Model: "gpt-test"}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func userReq(text string) *provider.Request {
	return &provider.Request{Messages: []hostabi.Message{{Role: "user", Content: text}}}
}

// TestStreamShapes drives the real client against the fake server for every
// stream shape the fake can produce.
func TestStreamShapes(t *testing.T) {
	calc := fakeopenai.ToolCall{ID: "call_1", Name: "calc", Arguments: `{"a":1,"b":[2,3],"note":"päd"}`, Pieces: 5}
	read := fakeopenai.ToolCall{ID: "call_2", Name: "read", Arguments: `{"path":"/tmp/x"}`, Pieces: 3}
	wantCalls := []hostabi.ToolCall{
		{ID: "call_1", Name: "calc", Arguments: json.RawMessage(calc.Arguments)},
		{ID: "call_2", Name: "read", Arguments: json.RawMessage(read.Arguments)},
	}
	usage := provider.Usage{InputTokens: fakeopenai.DefaultUsage.PromptTokens, OutputTokens: fakeopenai.DefaultUsage.CompletionTokens}
	text := "The quick brown fox — jumps ✓ over\nthe lazy dog."
	tests := []struct {
		name   string
		reply  fakeopenai.Reply
		want   *provider.Response
		code   hostabi.FailureCode // when an error is expected
		errHas string
	}{
		{name: "text in chunks", reply: fakeopenai.Reply{Text: text, Chunks: 7},
			want: &provider.Response{Content: text, FinishReason: "stop", Usage: usage}},
		{name: "split at every byte with CRLF", reply: fakeopenai.Reply{Text: text, Chunks: 3, Stream: fakeopenai.Stream{SplitEveryByte: true, LineEnding: "\r\n"}},
			want: &provider.Response{Content: text, FinishReason: "stop", Usage: usage}},
		{name: "split at every byte with CR", reply: fakeopenai.Reply{Text: text, Chunks: 3, ToolCalls: []fakeopenai.ToolCall{calc}, Stream: fakeopenai.Stream{SplitEveryByte: true, LineEnding: "\r"}},
			want: &provider.Response{Content: text, FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls[:1]}},
		{name: "comment lines", reply: fakeopenai.Reply{Text: text, Chunks: 4, Stream: fakeopenai.Stream{Comments: true}},
			want: &provider.Response{Content: text, FinishReason: "stop", Usage: usage}},
		{name: "multi-line data", reply: fakeopenai.Reply{Text: text, Chunks: 2, ToolCalls: []fakeopenai.ToolCall{calc}, Stream: fakeopenai.Stream{MultiLineData: true, LineEnding: "\r\n"}},
			want: &provider.Response{Content: text, FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls[:1]}},
		{name: "usage chunk with choices null", reply: fakeopenai.Reply{Text: "hi", Stream: fakeopenai.Stream{ChoicesNull: true}, Usage: &fakeopenai.Usage{PromptTokens: 5, CompletionTokens: 1}},
			want: &provider.Response{Content: "hi", FinishReason: "stop", Usage: provider.Usage{InputTokens: 5, OutputTokens: 1}}},
		{name: "no usage chunk", reply: fakeopenai.Reply{Text: "hi", Stream: fakeopenai.Stream{NoUsage: true}},
			want: &provider.Response{Content: "hi", FinishReason: "stop"}},
		{name: "last text with finish reason", reply: fakeopenai.Reply{Text: text, Chunks: 3, FinishReason: "length", Stream: fakeopenai.Stream{FinishWithText: true}},
			want: &provider.Response{Content: text, FinishReason: "length", Usage: usage}},
		{name: "content filter", reply: fakeopenai.Reply{Text: "I", FinishReason: "content_filter"},
			want: &provider.Response{Content: "I", FinishReason: "content_filter", Usage: usage}},
		{name: "no finish reason at all", reply: fakeopenai.Reply{Text: "ok", FinishReason: "none"},
			want: &provider.Response{Content: "ok", FinishReason: "stop", Usage: usage}},
		{name: "parallel tool calls in pieces", reply: fakeopenai.Reply{Text: "Let me see.", ToolCalls: []fakeopenai.ToolCall{calc, read}},
			want: &provider.Response{Content: "Let me see.", FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls}},
		{name: "parallel tool calls interleaved, byte by byte", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{calc, read}, Stream: fakeopenai.Stream{Interleave: true, SplitEveryByte: true}},
			want: &provider.Response{FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls}},
		{name: "single call without index", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{calc}, Stream: fakeopenai.Stream{OmitIndex: true}},
			want: &provider.Response{FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls[:1]}},
		{name: "parallel calls without index, id resent", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{calc, read}, Stream: fakeopenai.Stream{OmitIndex: true, ResendID: true}},
			want: &provider.Response{FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls}},
		{name: "id and name resent with index", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{calc, read}, Stream: fakeopenai.Stream{ResendID: true}},
			want: &provider.Response{FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls}},
		{name: "empty arguments become {}", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "c", Name: "now"}}},
			want: &provider.Response{FinishReason: "tool_calls", Usage: usage, ToolCalls: []hostabi.ToolCall{{ID: "c", Name: "now", Arguments: json.RawMessage(`{}`)}}}},
		{name: "missing call id is made up", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{Name: "now", Arguments: "{}"}}},
			want: &provider.Response{FinishReason: "tool_calls", Usage: usage, ToolCalls: []hostabi.ToolCall{{ID: "call_1_0", Name: "now", Arguments: json.RawMessage(`{}`)}}}},
		{name: "non-streamed JSON answer", reply: fakeopenai.Reply{Text: "whole", ToolCalls: []fakeopenai.ToolCall{calc}, Stream: fakeopenai.Stream{JSON: true}},
			want: &provider.Response{Content: "whole", FinishReason: "tool_calls", Usage: usage, ToolCalls: wantCalls[:1]}},

		{name: "invalid arguments", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "c", Name: "calc", Arguments: `{"a":1,`, Pieces: 2}}},
			code: hostabi.FailStream, errHas: "not valid JSON"},
		{name: "arguments cut by the token limit", reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "c", Name: "calc", Arguments: `{"a":[1,2`}}, FinishReason: "length"},
			code: hostabi.FailStream, errHas: "raise max_tokens"},
		{name: "no DONE", reply: fakeopenai.Reply{Text: text, Chunks: 4, Stream: fakeopenai.Stream{Break: fakeopenai.NoDone}},
			code: hostabi.FailStream, errHas: "before data: [DONE]"},
		{name: "cut mid-frame", reply: fakeopenai.Reply{Text: text, Chunks: 4, Stream: fakeopenai.Stream{Break: fakeopenai.CutMidFrame, BreakAfter: 3}},
			code: hostabi.FailStream, errHas: "before data: [DONE]"},
		{name: "connection dropped mid-frame", reply: fakeopenai.Reply{Text: text, Chunks: 4, Stream: fakeopenai.Stream{Break: fakeopenai.Drop, BreakAfter: 3}},
			code: hostabi.FailStream, errHas: "reading the stream"},
		{name: "garbage frame", reply: fakeopenai.Reply{Text: text, Stream: fakeopenai.Stream{Break: fakeopenai.Garbage, BreakAfter: 1}},
			code: hostabi.FailStream, errHas: "not a valid chat.completion.chunk"},
		{name: "error object mid-stream", reply: fakeopenai.Reply{Text: text, Chunks: 4, ErrorType: "server_error", ErrorMessage: "The server had an error processing your request.", Stream: fakeopenai.Stream{Break: fakeopenai.ErrorMidStream, BreakAfter: 2}},
			code: hostabi.FailServer, errHas: "server had an error"},
		{name: "error event mid-stream", reply: fakeopenai.Reply{Text: text, Chunks: 4, ErrorType: "overloaded_error", ErrorMessage: "Overloaded", Stream: fakeopenai.Stream{Break: fakeopenai.ErrorEvent}},
			code: hostabi.FailOverloaded, errHas: "Overloaded"},
		{name: "rate limit mid-stream", reply: fakeopenai.Reply{Text: text, ErrorType: "requests", ErrorCode: "rate_limit_exceeded", ErrorMessage: "Rate limit reached", Stream: fakeopenai.Stream{Break: fakeopenai.ErrorMidStream, BreakAfter: 1}},
			code: hostabi.FailRateLimit, errHas: "Rate limit reached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeopenai.New(t, fakeopenai.Rule{Reply: tc.reply})
			c := newClient(t, srv)
			var mu sync.Mutex
			var deltas strings.Builder
			resp, err := c.Complete(context.Background(), userReq("go"), func(d provider.Delta) {
				mu.Lock()
				deltas.WriteString(d.Text)
				mu.Unlock()
			})
			if tc.want == nil {
				var pe *provider.Error
				if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.errHas) {
					t.Fatalf("Complete = %v, want a %s failure containing %q", err, tc.code, tc.errHas)
				}
				if resp != nil {
					t.Errorf("Complete returned a Response with a %s failure; only cancellation keeps one", pe.Code)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(tc.want, resp); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if deltas.String() != tc.want.Content {
				t.Errorf("streamed %q, want %q", deltas.String(), tc.want.Content)
			}
		})
	}
}

func TestRequestEncoding(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Reply: fakeopenai.Reply{Text: "done"}})
	c := newClient(t, srv, func(cfg *Config) {
		cfg.Headers = http.Header{"X-Extra": {"1"}}
		cfg.MaxTokens = 512
	})
	temp := 0.2
	req := &provider.Request{
		Model:  "model-x",
		System: "You are terse.",
		Messages: []hostabi.Message{
			{Role: "user", Content: "add 1 and 2, read /a"},
			{Role: "assistant", ToolCalls: []hostabi.ToolCall{
				{ID: "c1", Name: "calc", Arguments: json.RawMessage(`{"a":1,"b":2}`)},
				{ID: "c2", Name: "read", Arguments: nil},
			}},
			{Role: "tool", CallID: "c1", Content: "3"},
			{Role: "tool", CallID: "c2", Content: "no such file", IsError: true},
		},
		TopOfMind:   []string{"2 turns left.", "Be brief."},
		Tools:       []hostabi.ToolSpec{{Name: "calc", Description: "adds", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"}}}`)}, {Name: "read"}},
		Temperature: &temp,
	}
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if h := got.Header.Get("Authorization"); h != "Bearer sk-test" {
		t.Errorf("Authorization = %q", h)
	}
	if h := got.Header.Get("X-Extra"); h != "1" {
		t.Errorf("X-Extra = %q", h)
	}
	var raw map[string]any
	if err := json.Unmarshal(got.Raw, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model":               "model-x",
		"stream":              true,
		"stream_options":      map[string]any{"include_usage": true},
		"max_tokens":          float64(512),
		"temperature":         0.2,
		"parallel_tool_calls": true,
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "calc", "description": "adds", "parameters": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}}}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}},
		},
		"messages": []any{
			map[string]any{"role": "system", "content": "You are terse."},
			map[string]any{"role": "user", "content": "add 1 and 2, read /a"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
				map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "calc", "arguments": `{"a":1,"b":2}`}},
				map[string]any{"id": "c2", "type": "function", "function": map[string]any{"name": "read", "arguments": `{}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "3"},
			map[string]any{"role": "tool", "tool_call_id": "c2", "content": "no such file"},
			map[string]any{"role": "user", "content": "2 turns left.\nBe brief."},
		},
	}
	if diff := cmp.Diff(want, raw); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
}

func TestRequestOptions(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Reply: fakeopenai.Reply{Text: "ok"}})
	c := newClient(t, srv, func(cfg *Config) {
		cfg.APIKey = ""
		cfg.MaxTokensField = "max_completion_tokens"
		cfg.TopOfMindRole = "system"
		cfg.OmitStreamOptions = true
	})
	req := userReq("hi")
	req.MaxTokens = 64
	req.TopOfMind = []string{"remember"}
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	b := got.Body
	if got.Header.Get("Authorization") != "" {
		t.Errorf("Authorization sent without a key: %q", got.Header.Get("Authorization"))
	}
	if b.MaxCompletionTokens == nil || *b.MaxCompletionTokens != 64 || b.MaxTokens != nil {
		t.Errorf("max_completion_tokens = %v, max_tokens = %v; want 64 and unset", b.MaxCompletionTokens, b.MaxTokens)
	}
	if b.StreamOptions != nil || b.ParallelToolCalls != nil || b.Model != "gpt-test" {
		t.Errorf("stream_options = %v, parallel_tool_calls = %v, model = %q", b.StreamOptions, b.ParallelToolCalls, b.Model)
	}
	if last := b.Messages[len(b.Messages)-1]; last.Role != "system" || last.Text() != "remember" {
		t.Errorf("last message = %+v, want the top-of-mind system message", last)
	}
}

func TestBrokenHistoryIsRefusedLikeTheRealServer(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Reply: fakeopenai.Reply{Text: "ok"}})
	c := newClient(t, srv)
	req := &provider.Request{Messages: []hostabi.Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", ToolCalls: []hostabi.ToolCall{{ID: "c1", Name: "f"}, {ID: "c2", Name: "f"}}},
		{Role: "tool", CallID: "c1", Content: "1"},
		{Role: "user", Content: "and?"},
	}}
	_, err := c.Complete(context.Background(), req, nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Code != hostabi.FailBadRequest || pe.Status != 400 || !strings.Contains(pe.Message, "did not have response messages: c2") {
		t.Fatalf("Complete = %v, want bad_request (HTTP 400) naming c2", err)
	}
}

func TestRequestRefusedBeforeSending(t *testing.T) {
	srv := fakeopenai.New(t)
	tests := []struct {
		name string
		req  *provider.Request
		msg  string
	}{
		{"no model", &provider.Request{Messages: []hostabi.Message{{Role: "user", Content: "x"}}}, "no model given"},
		{"tool result without call id", &provider.Request{Model: "m", Messages: []hostabi.Message{{Role: "tool", Content: "x"}}}, "no call id"},
		{"call without id", &provider.Request{Model: "m", Messages: []hostabi.Message{{Role: "assistant", ToolCalls: []hostabi.ToolCall{{Name: "f"}}}}}, "lacks an id"},
		{"tool without name", &provider.Request{Model: "m", Tools: []hostabi.ToolSpec{{}}}, "has no name"},
		{"tool with bad schema", &provider.Request{Model: "m", Tools: []hostabi.ToolSpec{{Name: "f", Parameters: json.RawMessage(`{`)}}}, "not valid JSON"},
	}
	c := newClient(t, srv, func(cfg *Config) { cfg.Model = "" })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Complete(context.Background(), tc.req, nil)
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Code != hostabi.FailBadRequest || !strings.Contains(pe.Message, tc.msg) {
				t.Fatalf("Complete = %v, want bad_request containing %q", err, tc.msg)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("server got %d requests; invalid requests must not be sent", n)
	}
}

func TestTimeouts(t *testing.T) {
	stall := fakeopenai.Rule{Reply: fakeopenai.Reply{Text: "a b", Chunks: 2, Stream: fakeopenai.Stream{StallAfter: 2}}}
	t.Run("idle timeout", func(t *testing.T) {
		c := newClient(t, fakeopenai.New(t, stall), func(cfg *Config) { cfg.IdleTimeout = 100 * time.Millisecond })
		resp, err := c.Complete(context.Background(), userReq("x"), nil)
		f := provider.AsFailure(err)
		if f.Code != hostabi.FailTimeout || !strings.Contains(f.Message, "sent nothing for 100ms") || resp != nil {
			t.Fatalf("Complete = %v, %v; want a timeout naming 100ms and no Response", resp, err)
		}
	})
	t.Run("http client timeout", func(t *testing.T) {
		c := newClient(t, fakeopenai.New(t, stall), func(cfg *Config) { cfg.HTTPClient = &http.Client{Timeout: 100 * time.Millisecond} })
		_, err := c.Complete(context.Background(), userReq("x"), nil)
		if f := provider.AsFailure(err); f.Code != hostabi.FailTimeout {
			t.Fatalf("Complete error = %v, want timeout", err)
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := newClient(t, fakeopenai.New(t, stall)).Complete(ctx, userReq("x"), nil)
		if f := provider.AsFailure(err); f.Code != hostabi.FailTimeout {
			t.Fatalf("Complete error = %v, want timeout", err)
		}
	})
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := New(Config{BaseURL: "http://" + addr + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), userReq("x"), nil)
	f := provider.AsFailure(err)
	if f.Code != hostabi.FailTransport || !strings.HasPrefix(f.Message, "POST http://"+addr+"/v1/chat/completions: cannot reach the server: ") || resp != nil {
		t.Fatalf("Complete = %v, %v; want a transport failure naming the URL", resp, err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	tests := []struct {
		cfg Config
		err string
	}{
		{Config{BaseURL: "localhost:8080"}, "not an http(s) URL"},
		{Config{BaseURL: "ftp://x/v1"}, "not an http(s) URL"},
		{Config{MaxTokensField: "max"}, "MaxTokensField"},
		{Config{TopOfMindRole: "tool"}, "TopOfMindRole"},
		{Config{MaxTokens: -1}, "MaxTokens is -1"},
	}
	for _, tc := range tests {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.cfg, err, tc.err)
		}
	}
	c, err := New(Config{BaseURL: " http://h:1/v1/ "})
	if err != nil || c.url != "http://h:1/v1/chat/completions" {
		t.Errorf("New trims the base URL: got %v, %v", c, err)
	}
	c, err = New(Config{})
	if err != nil || c.url != DefaultBaseURL+"/chat/completions" || c.idle != 5*time.Minute {
		t.Errorf("New(Config{}) = %+v, %v; want the defaults", c, err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_API_KEY": "k"}
	got := configFromEnv(func(k string) string { return env[k] })
	want := Config{BaseURL: "http://localhost:11434/v1", APIKey: "k"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestNotAnEventStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>welcome</html>"))
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), userReq("x"), nil)
	f := provider.AsFailure(err)
	if f.Code != hostabi.FailStream || !strings.Contains(f.Message, `Content-Type "text/html" and no events; check the base URL`) {
		t.Fatalf("Complete error = %v, want a stream failure pointing at the base URL", err)
	}
}

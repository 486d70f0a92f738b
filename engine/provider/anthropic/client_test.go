package anthropic

import (
	"context"
	"encoding/json"
	"io"
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
)

// reply is what the fake server answers.
type reply struct {
	status      int
	header      http.Header
	body        string // the error body, or the event stream
	contentType string // default text/event-stream (application/json for errors)
	everyByte   bool   // write and flush the body one byte at a time
	stallAfter  string // stop after the body up to and including this text, holding the connection
}

// seen is a request as the fake server received it.
type seen struct {
	path   string
	header http.Header
	body   map[string]any
	raw    []byte
}

type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func (f *fakeServer) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func newServer(t *testing.T, rep reply) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	release := make(chan struct{})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		s := seen{path: r.URL.Path, header: r.Header.Clone(), raw: raw}
		_ = json.Unmarshal(raw, &s.body)
		f.mu.Lock()
		f.reqs = append(f.reqs, s)
		f.mu.Unlock()
		for k, vs := range rep.header {
			w.Header()[k] = vs
		}
		ct := rep.contentType
		if ct == "" {
			ct = "text/event-stream"
			if rep.status >= 300 {
				ct = "application/json"
			}
		}
		w.Header().Set("Content-Type", ct)
		if rep.status != 0 {
			w.WriteHeader(rep.status)
		}
		body := rep.body
		if rep.stallAfter != "" {
			body = body[:strings.Index(body, rep.stallAfter)+len(rep.stallAfter)]
		}
		fl := w.(http.Flusher)
		if rep.everyByte {
			for i := range len(body) {
				if _, err := io.WriteString(w, body[i:i+1]); err != nil {
					return
				}
				fl.Flush()
			}
		} else {
			io.WriteString(w, body)
			fl.Flush()
		}
		if rep.stallAfter != "" {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	t.Cleanup(func() { close(release); f.Close() })
	return f
}

func newClient(t *testing.T, url string, mod ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{BaseURL: url, APIKey: "sk-ant-test", Model: "claude-test"}
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

// TestCompleteStreams runs stream shapes through the real client and an
// HTTP server, including one that flushes every byte on its own.
func TestCompleteStreams(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  *provider.Response
		code  hostabi.FailureCode
	}{
		{"text", reply{body: textStream("\n", "end_turn", splitPieces(fox, 5)...)},
			&provider.Response{Content: fox, FinishReason: "stop", Usage: usage}, ""},
		{"tool calls, every byte flushed, CRLF", reply{body: toolStream("\r\n", true), everyByte: true},
			&provider.Response{Content: "Let me see.", FinishReason: "tool_calls", Usage: provider.Usage{InputTokens: 10, OutputTokens: 42}, ToolCalls: wantCalls}, ""},
		{"tool call without id gets one", reply{body: stream("\n", "content_block_start", toolStart(0, "", "now"), "message_stop", msgStop)},
			&provider.Response{FinishReason: "tool_calls", ToolCalls: []hostabi.ToolCall{{ID: "toolu_1_0", Name: "now", Arguments: json.RawMessage(`{}`)}}}, ""},
		{"error event mid-stream", reply{body: stream("\n", "message_start", msgStart(1), "content_block_delta", textDelta(0, "x"),
			"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}, nil, hostabi.FailOverloaded},
		{"no message_stop", reply{body: strings.TrimSuffix(textStream("\n", "end_turn", "abc"), ev("\n", "message_stop", msgStop))}, nil, hostabi.FailStream},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tc.reply)
			var deltas strings.Builder
			got, err := newClient(t, srv.URL).Complete(context.Background(), userReq("go"), func(d provider.Delta) { deltas.WriteString(d.Text) })
			if tc.code != "" {
				if f := provider.AsFailure(err); f.Code != tc.code || got != nil {
					t.Fatalf("Complete = %+v, %v; want no Response and code %s", got, err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response mismatch (-want +got):\n%s", diff)
			}
			if deltas.String() != tc.want.Content {
				t.Errorf("deltas = %q, want %q", deltas.String(), tc.want.Content)
			}
		})
	}
}

// TestRequestBody checks the wire request: path, headers, roles merged,
// tool results grouped in one user turn, top-of-mind last, tools.
func TestRequestBody(t *testing.T) {
	srv := newServer(t, reply{body: textStream("\n", "end_turn", "ok")})
	temp := 0.5
	req := &provider.Request{
		System: "Be brief.",
		Messages: []hostabi.Message{
			{Role: "user", Content: "first"},
			{Role: "user", Content: "second"},
			{Role: "assistant", Content: "Looking.", ToolCalls: []hostabi.ToolCall{
				{ID: "toolu_a", Name: "calc", Arguments: json.RawMessage(`{"a":1}`)},
				{ID: "toolu_b", Name: "now"},
			}},
			{Role: "tool", CallID: "toolu_a", Content: "2"},
			{Role: "tool", CallID: "toolu_b", Content: "boom", IsError: true},
			{Role: "user", Content: "and then?"},
			{Role: "assistant", Content: "Then this."},
			{Role: "assistant", ToolCalls: []hostabi.ToolCall{{ID: "toolu_c", Name: "calc", Arguments: json.RawMessage(`{"a":2}`)}}},
			{Role: "tool", CallID: "toolu_c"},
		},
		TopOfMind:   []string{"budget: 3 steps", "be careful"},
		Tools:       []hostabi.ToolSpec{{Name: "calc", Description: "adds", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"}}}`)}, {Name: "now"}},
		Temperature: &temp,
	}
	if _, err := newClient(t, srv.URL+"/").Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests", len(reqs))
	}
	got := reqs[0]
	if got.path != "/v1/messages" {
		t.Errorf("path = %q, want /v1/messages", got.path)
	}
	for k, v := range map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got.header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v)
		}
	}
	if got.header.Get("Authorization") != "" {
		t.Errorf("an Authorization header was sent")
	}
	want := `{
		"model": "claude-test", "max_tokens": 4096, "system": "Be brief.", "temperature": 0.5, "stream": true,
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Looking."},
				{"type": "tool_use", "id": "toolu_a", "name": "calc", "input": {"a": 1}},
				{"type": "tool_use", "id": "toolu_b", "name": "now", "input": {}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_a", "content": "2"},
				{"type": "tool_result", "tool_use_id": "toolu_b", "content": "boom", "is_error": true},
				{"type": "text", "text": "and then?"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Then this."},
				{"type": "tool_use", "id": "toolu_c", "name": "calc", "input": {"a": 2}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_c"},
				{"type": "text", "text": "budget: 3 steps\nbe careful"}]}
		],
		"tools": [
			{"name": "calc", "description": "adds", "input_schema": {"type": "object", "properties": {"a": {"type": "number"}}}},
			{"name": "now", "input_schema": {"type": "object"}}
		]
	}`
	var wantBody map[string]any
	if err := json.Unmarshal([]byte(want), &wantBody); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantBody, got.body); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s\nraw: %s", diff, got.raw)
	}
}

func TestRequestOptions(t *testing.T) {
	srv := newServer(t, reply{body: textStream("\n", "end_turn", "ok")})
	c := newClient(t, srv.URL+"/v1", func(cfg *Config) { cfg.MaxTokens = 100; cfg.Version = "2099-01-01"; cfg.APIKey = "" })
	req := &provider.Request{Model: "claude-other", MaxTokens: 7, Messages: []hostabi.Message{{Role: "assistant", Content: "hi"}}, TopOfMind: []string{"remember"}}
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.requests()[0]
	if got.path != "/v1/messages" || got.body["model"] != "claude-other" || got.body["max_tokens"] != 7.0 || got.header.Get("Anthropic-Version") != "2099-01-01" {
		t.Errorf("request %s %v with version %q; want /v1/messages, model claude-other, max_tokens 7, version 2099-01-01", got.path, got.body, got.header.Get("Anthropic-Version"))
	}
	if _, ok := got.header["X-Api-Key"]; ok {
		t.Errorf("x-api-key sent without a key")
	}
	if _, ok := got.body["system"]; ok {
		t.Errorf("an empty system prompt was sent")
	}
	// A conversation ending on the assistant gets a new user turn.
	msgs, _ := json.Marshal(got.body["messages"])
	if want := `[{"content":[{"text":"hi","type":"text"}],"role":"assistant"},{"content":[{"text":"remember","type":"text"}],"role":"user"}]`; string(msgs) != want {
		t.Errorf("messages = %s, want %s", msgs, want)
	}
	if c := newClient(t, srv.URL); c.maxTokens != DefaultMaxTokens {
		t.Errorf("default max tokens = %d", c.maxTokens)
	}
}

func TestRequestRefusedBeforeSending(t *testing.T) {
	srv := newServer(t, reply{body: textStream("\n", "end_turn", "ok")})
	tests := map[string]*provider.Request{
		"nil":                  nil,
		"no model":             {Model: "", Messages: []hostabi.Message{{Role: "user", Content: "x"}}},
		"no role":              {Messages: []hostabi.Message{{Content: "x"}}},
		"unknown role":         {Messages: []hostabi.Message{{Role: "system", Content: "x"}}},
		"tool without call id": {Messages: []hostabi.Message{{Role: "tool", Content: "x"}}},
		"call without id":      {Messages: []hostabi.Message{{Role: "assistant", ToolCalls: []hostabi.ToolCall{{Name: "f"}}}}},
		"call with bad input":  {Messages: []hostabi.Message{{Role: "assistant", ToolCalls: []hostabi.ToolCall{{ID: "t", Name: "f", Arguments: json.RawMessage(`{`)}}}}},
		"tool without name":    {Messages: []hostabi.Message{{Role: "user", Content: "x"}}, Tools: []hostabi.ToolSpec{{}}},
		"tool with bad schema": {Messages: []hostabi.Message{{Role: "user", Content: "x"}}, Tools: []hostabi.ToolSpec{{Name: "f", Parameters: json.RawMessage(`{"type"`)}}},
	}
	for name, req := range tests {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, srv.URL)
			if name == "no model" {
				c.model = ""
			}
			resp, err := c.Complete(context.Background(), req, nil)
			if f := provider.AsFailure(err); f.Code != hostabi.FailBadRequest || resp != nil {
				t.Fatalf("Complete = %v, %v; want bad_request", resp, err)
			}
		})
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server got %d requests; invalid requests must not be sent", n)
	}
}

func TestTimeouts(t *testing.T) {
	stall := reply{body: textStream("\n", "end_turn", "a ", "b"), stallAfter: textDelta(0, "a ") + "\n\n"}
	t.Run("idle timeout", func(t *testing.T) {
		c := newClient(t, newServer(t, stall).URL, func(cfg *Config) { cfg.IdleTimeout = 100 * time.Millisecond })
		resp, err := c.Complete(context.Background(), userReq("x"), nil)
		f := provider.AsFailure(err)
		if f.Code != hostabi.FailTimeout || !strings.Contains(f.Message, "sent nothing for 100ms") || resp != nil {
			t.Fatalf("Complete = %v, %v; want a timeout naming 100ms and no Response", resp, err)
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		resp, err := newClient(t, newServer(t, stall).URL).Complete(ctx, userReq("x"), nil)
		if f := provider.AsFailure(err); f.Code != hostabi.FailTimeout || resp != nil {
			t.Fatalf("Complete = %v, %v; want a timeout", resp, err)
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
	resp, err := newClient(t, "http://"+addr).Complete(context.Background(), userReq("x"), nil)
	if f := provider.AsFailure(err); f.Code != hostabi.FailTransport || resp != nil {
		t.Fatalf("Complete = %v, %v; want a transport failure", resp, err)
	}
}

func TestNotAnEventStream(t *testing.T) {
	srv := newServer(t, reply{body: "<html>hello</html>", contentType: "text/html"})
	_, err := newClient(t, srv.URL).Complete(context.Background(), userReq("x"), nil)
	if f := provider.AsFailure(err); f.Code != hostabi.FailStream || !strings.Contains(f.Message, "check the base URL") {
		t.Fatalf("Complete error = %v, want a stream failure pointing at the base URL", err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	for _, cfg := range []Config{{BaseURL: "api.anthropic.com"}, {BaseURL: "ftp://x"}, {BaseURL: "http://"}, {MaxTokens: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.url != "https://api.anthropic.com/v1/messages" || c.version != DefaultVersion || c.maxTokens != DefaultMaxTokens || c.idle != 5*time.Minute {
		t.Errorf("defaults: %+v", c)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": "http://proxy:8080"}
	got := configFromEnv(func(k string) string { return env[k] })
	if got.APIKey != "sk-ant-x" || got.BaseURL != "http://proxy:8080" {
		t.Errorf("configFromEnv = %+v", got)
	}
}

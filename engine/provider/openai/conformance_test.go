package openai

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/providertest"
	"github.com/wagent/wagent/hostabi"
)

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T, s *providertest.Scenario) provider.Provider {
		srv := httptest.NewServer(providertest.Handler(chatWire, s))
		t.Cleanup(srv.Close)
		c, err := New(Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", IdleTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

// chatWire is the Chat Completions wire format, as providertest wants it.
var chatWire = providertest.Wire{
	Stream: func(a providertest.Answer) providertest.Events {
		chunk := func(v string) string { return "data: " + v + "\n\n" }
		delta := func(d any, finish any) string {
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}})
			return chunk(string(b))
		}
		var ev providertest.Events
		ev.Head = []string{delta(map[string]any{"role": "assistant"}, nil)}
		for _, p := range a.Text {
			ev.Text = append(ev.Text, delta(map[string]any{"content": p}, nil))
		}
		finish := "stop"
		for i, c := range a.Calls {
			finish = "tool_calls"
			args := string(c.Arguments)
			half := len(args) / 2
			ev.Tail = append(ev.Tail,
				delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": args[:half]}}}}, nil),
				delta(map[string]any{"tool_calls": []any{map[string]any{"index": i,
					"function": map[string]any{"arguments": args[half:]}}}}, nil))
		}
		ev.Tail = append(ev.Tail, delta(map[string]any{}, finish))
		u, _ := json.Marshal(map[string]any{"choices": []any{}, "usage": map[string]int{
			"prompt_tokens": a.Usage.InputTokens, "completion_tokens": a.Usage.OutputTokens}})
		ev.Tail = append(ev.Tail, chunk(string(u)), chunk("[DONE]"))
		return ev
	},
	ErrorBody: func(status int, message string) string {
		typ, code := "invalid_request_error", ""
		switch {
		case status == 429:
			typ, code = "requests", "rate_limit_exceeded"
		case status >= 500:
			typ = "server_error"
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "code": code}})
		return string(b)
	},
	Decode: func(body []byte) (providertest.Sent, error) {
		var r chatRequest
		if err := json.Unmarshal(body, &r); err != nil {
			return providertest.Sent{}, err
		}
		out := providertest.Sent{Model: r.Model}
		for i, m := range r.Messages {
			text := ""
			if m.Content != nil {
				text = *m.Content
			}
			if i == 0 && m.Role == "system" {
				out.System = text
				continue
			}
			sm := providertest.SentMessage{Role: m.Role, Text: text, ResultFor: m.ToolCallID}
			for _, c := range m.ToolCalls {
				if !json.Valid([]byte(c.Function.Arguments)) {
					return out, errors.New("arguments are not JSON")
				}
				sm.Calls = append(sm.Calls, hostabi.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments)})
			}
			out.Messages = append(out.Messages, sm)
		}
		return out, nil
	},
}

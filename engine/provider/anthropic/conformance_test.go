package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/providertest"
	"github.com/wagent/wagent/hostabi"
)

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T, s *providertest.Scenario) provider.Provider {
		srv := httptest.NewServer(providertest.Handler(messagesWire, s))
		t.Cleanup(srv.Close)
		c, err := New(Config{BaseURL: srv.URL, APIKey: "sk-ant-test", IdleTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

// messagesWire is the Messages API's wire format, as providertest wants it.
var messagesWire = providertest.Wire{
	Stream: func(a providertest.Answer) providertest.Events {
		event := func(name string, v any) string {
			b, _ := json.Marshal(v)
			return fmt.Sprintf("event: %s\ndata: %s\n\n", name, b)
		}
		var ev providertest.Events
		ev.Head = []string{
			event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
				"id": "msg_1", "role": "assistant", "usage": map[string]int{"input_tokens": a.Usage.InputTokens, "output_tokens": 1}}}),
			event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		}
		for _, p := range a.Text {
			ev.Text = append(ev.Text, event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": p}}))
		}
		ev.Tail = []string{event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})}
		stop := "end_turn"
		for i, c := range a.Calls {
			stop = "tool_use"
			args := string(c.Arguments)
			half := len(args) / 2
			ev.Tail = append(ev.Tail,
				event("content_block_start", map[string]any{"type": "content_block_start", "index": i + 1,
					"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}}),
				event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i + 1,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": args[:half]}}),
				event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i + 1,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": args[half:]}}),
				event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i + 1}))
		}
		ev.Tail = append(ev.Tail,
			event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop},
				"usage": map[string]int{"output_tokens": a.Usage.OutputTokens}}),
			event("message_stop", map[string]any{"type": "message_stop"}))
		return ev
	},
	ErrorBody: func(status int, message string) string {
		typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
			404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}[status]
		if typ == "" {
			typ = "api_error"
		}
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
		return string(b)
	},
	Decode: func(body []byte) (providertest.Sent, error) {
		var r messagesRequest
		if err := json.Unmarshal(body, &r); err != nil {
			return providertest.Sent{}, err
		}
		out := providertest.Sent{Model: r.Model, System: r.System}
		for _, m := range r.Messages {
			var text *providertest.SentMessage // consecutive text blocks join one message
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if text == nil {
						out.Messages = append(out.Messages, providertest.SentMessage{Role: m.Role})
						text = &out.Messages[len(out.Messages)-1]
					}
					text.Text += b.Text
				case "tool_use":
					if text == nil || m.Role != "assistant" {
						out.Messages = append(out.Messages, providertest.SentMessage{Role: m.Role})
						text = &out.Messages[len(out.Messages)-1]
					}
					text.Calls = append(text.Calls, hostabi.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
				case "tool_result":
					sm := providertest.SentMessage{Role: "tool", ResultFor: b.ToolUseID}
					if b.Content != nil {
						sm.Text = *b.Content
					}
					out.Messages = append(out.Messages, sm)
					text = nil
				default:
					return out, fmt.Errorf("unknown block type %q", b.Type)
				}
			}
		}
		return out, nil
	},
}

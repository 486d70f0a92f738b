package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// The request body, as the Messages API defines it.
type (
	messagesRequest struct {
		Model       string        `json:"model"`
		MaxTokens   int           `json:"max_tokens"`
		System      string        `json:"system,omitempty"`
		Messages    []wireMessage `json:"messages"`
		Tools       []wireTool    `json:"tools,omitempty"`
		Temperature *float64      `json:"temperature,omitempty"`
		Stream      bool          `json:"stream"`
	}
	wireMessage struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	}
	// wireBlock is a text, tool_use or tool_result content block.
	wireBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   *string         `json:"content,omitempty"`
		IsError   bool            `json:"is_error,omitempty"`
	}
	wireTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

// emptySchema is sent for a tool without parameters: the API requires an
// input_schema.
var emptySchema = json.RawMessage(`{"type":"object"}`)

// encode builds the request body.
func (c *Client) encode(req *provider.Request) ([]byte, error) {
	if req == nil {
		return nil, errors.New("anthropic: nil request")
	}
	model := req.Model
	if model == "" {
		model = c.model
	}
	if model == "" {
		return nil, errors.New("anthropic: no model given; set the model (--model, Config.Model or Request.Model)")
	}
	mr := messagesRequest{Model: model, MaxTokens: c.maxTokens, System: req.System, Temperature: req.Temperature, Stream: true}
	if req.MaxTokens > 0 {
		mr.MaxTokens = req.MaxTokens
	}
	msgs, err := encodeMessages(req.Messages, req.TopOfMind)
	if err != nil {
		return nil, err
	}
	mr.Messages = msgs
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("anthropic: tool %d has no name; every offered tool needs one", i)
		}
		schema := bytes.TrimSpace(t.Parameters)
		if len(schema) == 0 || string(schema) == "null" {
			schema = emptySchema
		} else if !json.Valid(schema) {
			return nil, fmt.Errorf("anthropic: tool %q has parameters that are not valid JSON; fix its schema", t.Name)
		}
		mr.Tools = append(mr.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return json.Marshal(mr)
}

// encodeMessages maps the conversation to Messages API turns. Tool results
// become tool_result blocks of a user turn; consecutive turns of the same
// role are merged into one, since the API wants roles to alternate; in a
// user turn, tool_result blocks come before text, as the API requires.
// Top-of-mind lines go last, as a text block of the final user turn.
func encodeMessages(in []hostabi.Message, topOfMind []string) ([]wireMessage, error) {
	var out []wireMessage
	ids := wireIDs{used: map[string]bool{}}
	add := func(role string, blocks ...wireBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, wireMessage{Role: role, Content: blocks})
	}
	for i, m := range in {
		switch m.Role {
		case "user":
			if strings.TrimSpace(m.Content) != "" { // the API refuses blank text blocks
				add("user", wireBlock{Type: "text", Text: m.Content})
			}
		case "assistant":
			ids.now = map[string]string{}
			var blocks []wireBlock
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, wireBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return nil, fmt.Errorf("anthropic: message %d: an assistant tool call lacks an id or a name (id %q, name %q)", i, tc.ID, tc.Name)
				}
				input := bytes.TrimSpace(tc.Arguments)
				if len(input) == 0 || string(input) == "null" {
					input = []byte("{}")
				} else if !json.Valid(input) {
					return nil, fmt.Errorf("anthropic: message %d: tool call %q has arguments that are not valid JSON", i, tc.ID)
				}
				blocks = append(blocks, wireBlock{Type: "tool_use", ID: ids.call(tc.ID), Name: tc.Name, Input: input})
			}
			add("assistant", blocks...)
		case "tool":
			if m.CallID == "" {
				return nil, fmt.Errorf("anthropic: message %d: a tool result has no call id; it must answer an assistant tool call", i)
			}
			b := wireBlock{Type: "tool_result", ToolUseID: ids.result(m.CallID), IsError: m.IsError}
			if m.Content != "" { // an empty result is sent without content
				content := m.Content
				b.Content = &content
			}
			add("user", b)
		case "":
			return nil, fmt.Errorf("anthropic: message %d has no role", i)
		default:
			return nil, fmt.Errorf("anthropic: message %d has role %q; the Messages API takes user, assistant and tool results only", i, m.Role)
		}
	}
	if tom := strings.Join(topOfMind, "\n"); strings.TrimSpace(tom) != "" {
		add("user", wireBlock{Type: "text", Text: tom})
	}
	for i := range out {
		if out[i].Role == "user" {
			resultsFirst(out[i].Content)
		}
	}
	return out, nil
}

// wireIDs names tool calls as the Messages API takes them: each tool_use
// id once in a request, of letters, digits, _ and - only. The ids a
// conversation holds are its models' (a session may have begun with
// another provider: a local server's call_0 in every turn, Kimi's
// functions.edit:0), so an id the API would refuse is sent with its other
// characters as _, and an id used before in the request with a suffix;
// every tool_result names the tool_use of the assistant message before
// it that it answers. An id the API takes, the first time, is sent as the
// model gave it.
type wireIDs struct {
	used map[string]bool
	now  map[string]string // the latest assistant message's calls: its id → the wire's
}

var notInID = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

func (w *wireIDs) call(id string) string {
	wid := notInID.ReplaceAllString(id, "_")
	for n, base := 2, wid; w.used[wid]; n++ {
		wid = fmt.Sprintf("%s_%d", base, n)
	}
	w.used[wid] = true
	if w.now != nil {
		w.now[id] = wid
	}
	return wid
}

func (w *wireIDs) result(id string) string {
	if wid, ok := w.now[id]; ok {
		return wid
	}
	return notInID.ReplaceAllString(id, "_")
}

// resultsFirst moves tool_result blocks before the other blocks, keeping
// the order within each group.
func resultsFirst(blocks []wireBlock) {
	var results, rest []wireBlock
	for _, b := range blocks {
		if b.Type == "tool_result" {
			results = append(results, b)
		} else {
			rest = append(rest, b)
		}
	}
	if len(results) == 0 || len(rest) == 0 {
		return
	}
	copy(blocks, results)
	copy(blocks[len(results):], rest)
}

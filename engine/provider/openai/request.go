package openai

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// The request body, as the Chat Completions API defines it.
type (
	chatRequest struct {
		Model               string         `json:"model"`
		Messages            []chatMessage  `json:"messages"`
		Tools               []chatTool     `json:"tools,omitempty"`
		ParallelToolCalls   *bool          `json:"parallel_tool_calls,omitempty"`
		Stream              bool           `json:"stream"`
		StreamOptions       *streamOptions `json:"stream_options,omitempty"`
		MaxTokens           int            `json:"max_tokens,omitempty"`
		MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
		Temperature         *float64       `json:"temperature,omitempty"`
	}
	streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	chatMessage struct {
		Role string `json:"role"`
		// Content is null for an assistant message that only calls tools.
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name string `json:"name"`
		// Arguments is the JSON text of the arguments, as a string.
		Arguments string `json:"arguments"`
	}
	chatTool struct {
		Type     string      `json:"type"`
		Function chatToolDef `json:"function"`
	}
	chatToolDef struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
)

// emptySchema is sent for a tool without parameters: several servers
// refuse a function without a parameters object.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// encode builds the request body.
func (c *Client) encode(req *provider.Request) ([]byte, error) {
	if req == nil {
		return nil, errors.New("openai: nil request")
	}
	model := req.Model
	if model == "" {
		model = c.model
	}
	if model == "" {
		return nil, errors.New("openai: no model given; set the model (--model, Config.Model or Request.Model)")
	}
	cr := chatRequest{Model: model, Stream: true}
	if !c.noStreamOp {
		cr.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if max := req.MaxTokens; max > 0 || c.maxTokens > 0 {
		if max <= 0 {
			max = c.maxTokens
		}
		if c.maxField == "max_completion_tokens" {
			cr.MaxCompletionTokens = max
		} else {
			cr.MaxTokens = max
		}
	}
	cr.Temperature = req.Temperature

	if req.System != "" {
		cr.Messages = append(cr.Messages, chatMessage{Role: "system", Content: ptr(req.System)})
	}
	for i, m := range req.Messages {
		cm, err := encodeMessage(m)
		if err != nil {
			return nil, fmt.Errorf("openai: message %d: %w", i, err)
		}
		cr.Messages = append(cr.Messages, cm)
	}
	if len(req.TopOfMind) > 0 {
		cr.Messages = append(cr.Messages, chatMessage{Role: c.tomRole, Content: ptr(strings.Join(req.TopOfMind, "\n"))})
	}

	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("openai: tool %d has no name; every offered tool needs one", i)
		}
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
			params = emptySchema
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("openai: tool %q has parameters that are not valid JSON; fix its schema", t.Name)
		}
		cr.Tools = append(cr.Tools, chatTool{Type: "function", Function: chatToolDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if len(cr.Tools) > 0 {
		cr.ParallelToolCalls = ptr(true)
	}
	return json.Marshal(cr)
}

// maxWireID is the longest tool call id Chat Completions takes.
const maxWireID = 40

// wireID is a tool call's id as Chat Completions takes it: as the model
// gave it, or, longer than maxWireID (another provider's, a proxy's: the
// host keeps a model's id up to 256 bytes), its start and a digest of the
// whole, the same in the call and in its result, and distinct for
// distinct ids.
func wireID(id string) string {
	if len(id) <= maxWireID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return strings.ToValidUTF8(id[:maxWireID-17], "_") + "_" + hex.EncodeToString(sum[:8])
}

func encodeMessage(m hostabi.Message) (chatMessage, error) {
	switch m.Role {
	case "assistant":
		cm := chatMessage{Role: "assistant", Content: ptr(m.Content)}
		if m.Content == "" && len(m.ToolCalls) > 0 {
			cm.Content = nil
		}
		for _, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return cm, fmt.Errorf("an assistant tool call lacks an id or a name (id %q, name %q)", tc.ID, tc.Name)
			}
			args := string(bytes.TrimSpace(tc.Arguments))
			if args == "" || args == "null" {
				args = "{}"
			}
			cm.ToolCalls = append(cm.ToolCalls, chatToolCall{ID: wireID(tc.ID), Type: "function", Function: chatFunction{Name: tc.Name, Arguments: args}})
		}
		return cm, nil
	case "tool":
		if m.CallID == "" {
			return chatMessage{}, errors.New("a tool result has no call id; it must answer an assistant tool call")
		}
		return chatMessage{Role: "tool", Content: ptr(m.Content), ToolCallID: wireID(m.CallID)}, nil
	case "":
		return chatMessage{}, errors.New("a message has no role")
	}
	// user, and system or developer messages a caller may have added.
	return chatMessage{Role: m.Role, Content: ptr(m.Content)}, nil
}

func ptr[T any](v T) *T { return &v }

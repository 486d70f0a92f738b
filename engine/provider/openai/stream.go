package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
)

// Parse reads a Chat Completions event stream (the body of a request made
// with "stream": true) until "data: [DONE]" and returns the whole answer.
// onDelta, when not nil, gets each piece of text as soon as its chunk is
// read.
//
// Parse is strict about the end and lenient about the shape:
//
//   - A stream that ends before [DONE], or whose read fails, is a
//     *provider.Error with code stream: a cut stream is never a success.
//   - An error object in the stream ({"error": {...}}, or an event named
//     "error") becomes a *provider.Error classified like an HTTP error body
//     (rate_limit, overloaded, context_length, …; server when it names
//     nothing known).
//   - A chunk that is not valid JSON, or whose fields have the wrong types,
//     is a stream error.
//   - Tool-call fragments are joined by their index; a fragment without an
//     index continues the call with the same id, starts a new call when its
//     id is new, and otherwise continues the last call. Ids and names that
//     are sent again are not repeated. At the end every call's arguments
//     must be valid JSON (empty or null arguments become {}); a call whose
//     arguments do not parse, or that has no name, fails the whole answer
//     with code stream, because an unusable call must never reach a tool,
//     and a fresh attempt may well produce a good one.
//   - The finish reason is normalised to stop, length, tool_calls or
//     content_filter (function_call → tool_calls, eos and end_turn → stop,
//     max_tokens → length); an answer with tool calls and a finish reason
//     of stop or none says tool_calls, as some servers get this wrong.
//   - Only choice 0 is read. Text in delta.refusal counts as content.
//
// On error Parse still returns a non-nil Response holding the text read so
// far (without tool calls), so a caller that was cancelled can keep it.
func Parse(r io.Reader, onDelta func(provider.Delta)) (*provider.Response, error) {
	var a accumulator
	a.onDelta = onDelta
	events := wire.NewEvents(r)
	for {
		event, data, err := events.Next()
		if err == io.EOF {
			return a.partial(), a.cutShort()
		}
		if err != nil {
			return a.partial(), wire.ReadFailure(err)
		}
		a.events++
		if len(bytes.TrimSpace(data)) == 0 { // an empty keep-alive event
			continue
		}
		if string(event) == "error" {
			return a.partial(), streamFailure(data)
		}
		if isDone(data) {
			resp, err := a.finish()
			if err != nil {
				return a.partial(), err
			}
			return resp, nil
		}
		if err := a.chunk(data); err != nil {
			return a.partial(), err
		}
	}
}

// parseJSON reads a non-streamed answer (a chat.completion object), for
// servers that ignore "stream": true and answer with application/json.
func parseJSON(body []byte, onDelta func(provider.Delta)) (*provider.Response, error) {
	var a accumulator
	a.onDelta = onDelta
	if err := a.chunk(body); err != nil {
		return a.partial(), err
	}
	return a.finish()
}

func isDone(data []byte) bool {
	return string(bytes.TrimSpace(data)) == "[DONE]"
}

// accumulator folds chunks into one answer.
type accumulator struct {
	onDelta func(provider.Delta)
	events  int

	content []byte
	calls   []callAcc
	finishR string
	usage   provider.Usage
}

type callAcc struct {
	index int
	id    string
	name  string
	args  []byte
}

// The shape of a chat.completion.chunk (and of a chat.completion, whose
// choices say message instead of delta), as far as the answer needs it.
// Chunks are decoded with encoding/json: a stream arrives at a few KB/s,
// far below what it decodes (see RATIONALE.md).
type (
	chunkJSON struct {
		Choices []choiceJSON    `json:"choices"`
		Usage   *usageJSON      `json:"usage"`
		Error   json.RawMessage `json:"error"`
		Object  json.RawMessage `json:"object"`
	}
	choiceJSON struct {
		Index        int        `json:"index"`
		Delta        *deltaJSON `json:"delta"`
		Message      *deltaJSON `json:"message"`
		FinishReason *string    `json:"finish_reason"`
	}
	deltaJSON struct {
		Content   string     `json:"content"`
		Refusal   string     `json:"refusal"`
		ToolCalls []fragJSON `json:"tool_calls"`
	}
	fragJSON struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function *struct {
			Name string `json:"name"`
			// Arguments is a string of JSON in pieces, as the API sends
			// it, or (from some servers) the whole object at once.
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	usageJSON struct {
		PromptTokens     *int `json:"prompt_tokens"`
		InputTokens      *int `json:"input_tokens"`
		CompletionTokens *int `json:"completion_tokens"`
		OutputTokens     *int `json:"output_tokens"`
	}
)

func chunkError(err error) error {
	return &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream,
		Message: "the server sent a chunk that is not a valid chat.completion.chunk: " + err.Error()}, Err: err}
}

// decodeError says which field of a chunk had the wrong type.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		want := "of type " + te.Type.String()
		switch te.Type.Kind() {
		case reflect.Slice:
			want = "an array"
		case reflect.Struct, reflect.Pointer:
			want = "an object"
		case reflect.String:
			want = "a string"
		case reflect.Int:
			want = "an integer"
		}
		got := te.Value
		switch got {
		case "object", "array":
			got = "an " + got
		case "string", "number":
			got = "a " + got
		}
		return chunkError(fmt.Errorf("%s is not %s (it is %s)", te.Field, want, got))
	}
	return chunkError(err)
}

// chunk decodes one data payload and applies it; a chunk that does not
// decode changes nothing.
func (a *accumulator) chunk(data []byte) error {
	if d := bytes.TrimSpace(data); len(d) == 0 || d[0] != '{' {
		return chunkError(errors.New("it is not a JSON object"))
	}
	var c chunkJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return decodeError(err)
	}
	if (len(c.Error) > 0 && string(c.Error) != "null") || string(c.Object) == `"error"` {
		return streamFailure(data)
	}
	if u := c.Usage; u != nil {
		a.usage = provider.Usage{InputTokens: first(u.PromptTokens, u.InputTokens), OutputTokens: first(u.CompletionTokens, u.OutputTokens)}
	}
	start := len(a.content)
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		if d == nil {
			d = ch.Message
		}
		if d != nil {
			a.content = append(a.content, d.Content...)
			a.content = append(a.content, d.Refusal...)
			for j := range d.ToolCalls {
				if err := a.applyFrag(&d.ToolCalls[j]); err != nil {
					return err
				}
			}
		}
		if ch.FinishReason != nil {
			a.finishR = internFinish(*ch.FinishReason)
		}
	}
	if a.onDelta != nil && len(a.content) > start {
		a.onDelta(provider.Delta{Text: string(a.content[start:])})
	}
	return nil
}

func first(a, b *int) int {
	switch {
	case a != nil:
		return *a
	case b != nil:
		return *b
	}
	return 0
}

func (a *accumulator) applyFrag(f *fragJSON) error {
	var name string
	var args json.RawMessage
	if f.Function != nil {
		name, args = f.Function.Name, f.Function.Arguments
	}
	c := a.findCall(f.Index, f.ID)
	if c.id == "" && f.ID != "" {
		c.id = f.ID
	}
	if c.name == "" && name != "" {
		c.name = name
	}
	switch {
	case len(args) == 0 || string(args) == "null":
	case args[0] == '"':
		var piece string
		if err := json.Unmarshal(args, &piece); err != nil {
			return chunkError(err)
		}
		c.args = append(c.args, piece...)
	default: // a whole object at once: it replaces, not extends
		c.args = append(c.args[:0], args...)
	}
	return nil
}

// findCall returns the call a fragment belongs to, starting one if needed.
func (a *accumulator) findCall(index *int, id string) *callAcc {
	if index != nil {
		// The latest call with this index, unless the fragment brings a
		// different id: some servers number every parallel call 0.
		for i := len(a.calls) - 1; i >= 0; i-- {
			if c := &a.calls[i]; c.index == *index {
				if id == "" || c.id == "" || c.id == id {
					return c
				}
				break
			}
		}
		return a.newCall(*index)
	}
	if id != "" {
		for i := range a.calls {
			if a.calls[i].id == id {
				return &a.calls[i]
			}
		}
		next := 0
		for _, c := range a.calls {
			if c.index >= next {
				next = c.index + 1
			}
		}
		return a.newCall(next)
	}
	if len(a.calls) > 0 {
		return &a.calls[len(a.calls)-1]
	}
	return a.newCall(0)
}

func (a *accumulator) newCall(index int) *callAcc {
	a.calls = append(a.calls, callAcc{index: index})
	return &a.calls[len(a.calls)-1]
}

// internFinish normalises a finish reason.
func internFinish(b string) string {
	switch b {
	case "stop", "eos", "eos_token", "end_turn", "stop_sequence":
		return "stop"
	case "length", "max_tokens":
		return "length"
	case "tool_calls", "function_call", "tool_use":
		return "tool_calls"
	case "content_filter":
		return "content_filter"
	}
	return b
}

func (a *accumulator) partial() *provider.Response {
	return &provider.Response{Content: string(a.content), Usage: a.usage}
}

func (a *accumulator) cutShort() error {
	e := &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream, Message: fmt.Sprintf(
		"the stream ended before data: [DONE] after %d events; the server or a proxy cut it short, try again", a.events)}}
	if a.events == 0 {
		e.Err = wire.ErrNoEvents
	}
	return e
}

// finish checks the tool calls and builds the answer.
func (a *accumulator) finish() (*provider.Response, error) {
	resp := &provider.Response{Content: string(a.content), FinishReason: a.finishR, Usage: a.usage}
	for i := range a.calls {
		c := &a.calls[i]
		if c.name == "" {
			return nil, a.badCall(c, "has no function name")
		}
		args := bytes.TrimSpace(c.args)
		switch {
		case len(args) == 0 || string(args) == "null":
			args = []byte("{}")
		case !json.Valid(args):
			return nil, a.badCall(c, fmt.Sprintf("has arguments that are not valid JSON (%d bytes: %s)", len(args), snippet(args)))
		default:
			args = bytes.Clone(args)
		}
		resp.ToolCalls = append(resp.ToolCalls, hostabi.ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	if len(resp.ToolCalls) > 0 && (resp.FinishReason == "" || resp.FinishReason == "stop") {
		resp.FinishReason = "tool_calls"
	}
	if resp.FinishReason == "" {
		resp.FinishReason = "stop"
	}
	return resp, nil
}

func (a *accumulator) badCall(c *callAcc, what string) error {
	msg := fmt.Sprintf("tool call %d (id %q, function %q) %s", c.index, c.id, c.name, what)
	if a.finishR == "length" {
		msg += "; the answer was cut at the token limit: raise max_tokens"
	} else {
		msg += "; the model produced an unusable call, try again"
	}
	return &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream, Message: msg}}
}

func snippet(b []byte) string {
	const n = 60
	if len(b) > n {
		return strconv.Quote(string(b[:n])) + "…"
	}
	return strconv.Quote(string(b))
}

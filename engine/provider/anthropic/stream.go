package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
)

// Parse reads a Messages event stream (the body of a request made with
// "stream": true) until the message_stop event and returns the whole
// answer. onDelta, when not nil, gets each piece of text as soon as its
// event is read.
//
// The events read are message_start (input usage), content_block_start
// (a text or tool_use block), content_block_delta (text_delta, and the
// tool input's input_json_delta pieces, joined per block index),
// content_block_stop, message_delta (stop reason, output usage),
// message_stop and error. ping and unknown events, and blocks of other
// types (thinking, server tools), are ignored.
//
// Parse is strict about the end:
//
//   - A stream that ends before message_stop, or whose read fails, is a
//     *provider.Error with code stream: a cut stream is never a success.
//   - An error event becomes a *provider.Error classified by its type
//     (overloaded_error → overloaded, rate_limit_error → rate_limit,
//     api_error → server, …).
//   - An event whose data is not valid JSON is a stream error.
//   - Every tool_use block's input must be valid JSON (empty or null input
//     becomes {}); a call whose input does not parse, or that has no name,
//     fails the whole answer with code stream, because an unusable call
//     must never reach a tool.
//   - The stop reason is normalised: end_turn and stop_sequence → stop,
//     max_tokens and model_context_window_exceeded → length, tool_use →
//     tool_calls, refusal → content_filter; others are kept as sent.
//
// On error Parse still returns a non-nil Response holding the text read so
// far (without tool calls), so a caller that was cancelled can keep it.
func Parse(r io.Reader, onDelta func(provider.Delta)) (*provider.Response, error) {
	a := accumulator{onDelta: onDelta}
	events := wire.NewEvents(r)
	for {
		name, data, err := events.Next()
		if err == io.EOF {
			return a.partial(), a.cutShort()
		}
		if err != nil {
			return a.partial(), wire.ReadFailure(err)
		}
		a.events++
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		done, err := a.event(name, data)
		if err != nil {
			return a.partial(), err
		}
		if done {
			resp, err := a.finish()
			if err != nil {
				return a.partial(), err
			}
			return resp, nil
		}
	}
}

// wireEvent is the union of the fields the stream's events carry.
type wireEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Usage      *wireUsage `json:"usage"`
		StopReason *string    `json:"stop_reason"`
	} `json:"message"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Text  string          `json:"text"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
}

type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	CacheCreationInputTokens int  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int  `json:"cache_read_input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
}

// accumulator folds events into one answer.
type accumulator struct {
	onDelta func(provider.Delta)
	events  int

	content []byte
	calls   []callAcc
	stop    string
	usage   provider.Usage
}

type callAcc struct {
	index   int
	id      string
	name    string
	start   json.RawMessage // the input sent with content_block_start
	input   []byte          // input_json_delta pieces
	deltas  bool            // whether any piece came
	stopped bool
}

func eventError(name string, err error) error {
	return &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream,
		Message: fmt.Sprintf("the server sent a %s event that is not valid: %v", name, err)}, Err: err}
}

// event applies one event. done is true after message_stop.
func (a *accumulator) event(name, data []byte) (done bool, err error) {
	// The data's type names the event; the event line is the fallback.
	typ := string(name)
	var head struct {
		Type string `json:"type"`
	}
	headErr := json.Unmarshal(data, &head)
	if headErr == nil && head.Type != "" && typ != "error" {
		typ = head.Type
	}
	switch typ {
	case "error":
		return false, streamFailure(data)
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
	case "":
		if headErr != nil {
			return false, eventError("data", headErr)
		}
		return false, nil
	default:
		return false, nil // ping, and event types added after this was written
	}
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return false, eventError(typ, err)
	}
	switch typ {
	case "message_start":
		if ev.Message != nil {
			a.addUsage(ev.Message.Usage)
			if r := ev.Message.StopReason; r != nil && *r != "" {
				a.stop = *r
			}
		}
	case "content_block_start":
		if b := ev.ContentBlock; b != nil {
			switch b.Type {
			case "text":
				a.text(b.Text)
			case "tool_use":
				a.calls = append(a.calls, callAcc{index: ev.Index, id: b.ID, name: b.Name, start: bytes.Clone(b.Input)})
			}
		}
	case "content_block_delta":
		if d := ev.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				a.text(d.Text)
			case "input_json_delta":
				if c := a.call(ev.Index); c != nil {
					c.input = append(c.input, d.PartialJSON...)
					c.deltas = true
				}
			}
		}
	case "content_block_stop":
		if c := a.call(ev.Index); c != nil {
			c.stopped = true
		}
	case "message_delta":
		if d := ev.Delta; d != nil && d.StopReason != nil && *d.StopReason != "" {
			a.stop = *d.StopReason
		}
		a.addUsage(ev.Usage)
	case "message_stop":
		return true, nil
	}
	// ping and unknown events: nothing to do.
	return false, nil
}

// call returns the open tool_use block at index, or nil (text, thinking
// and server tool blocks are not tracked).
func (a *accumulator) call(index int) *callAcc {
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i].index == index && !a.calls[i].stopped {
			return &a.calls[i]
		}
	}
	return nil
}

func (a *accumulator) text(s string) {
	if s == "" {
		return
	}
	a.content = append(a.content, s...)
	if a.onDelta != nil {
		a.onDelta(provider.Delta{Text: s})
	}
}

// addUsage records usage. Input counts cached tokens too (written to or
// read from the prompt cache), so it is the whole prompt's size. The
// output count in message_delta is cumulative: the last one wins.
func (a *accumulator) addUsage(u *wireUsage) {
	if u == nil {
		return
	}
	if u.InputTokens != nil {
		a.usage.InputTokens = *u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	}
	if u.OutputTokens != nil {
		a.usage.OutputTokens = *u.OutputTokens
	}
}

func (a *accumulator) partial() *provider.Response {
	return &provider.Response{Content: string(a.content), Usage: a.usage}
}

func (a *accumulator) cutShort() error {
	e := &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream, Message: fmt.Sprintf(
		"the stream ended before message_stop after %d events; the server or a proxy cut it short, try again", a.events)}}
	if a.events == 0 {
		e.Err = wire.ErrNoEvents
	}
	return e
}

// stopReason normalises a Messages stop reason to the provider's finish
// reasons.
func stopReason(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return "stop"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return r
}

// finish checks the tool calls and builds the answer.
func (a *accumulator) finish() (*provider.Response, error) {
	resp := &provider.Response{Content: string(a.content), FinishReason: stopReason(a.stop), Usage: a.usage}
	for i := range a.calls {
		c := &a.calls[i]
		if c.name == "" {
			return nil, a.badCall(i, c, "has no name")
		}
		input := c.input
		if !c.deltas {
			input = c.start
		}
		input = bytes.TrimSpace(input)
		switch {
		case len(input) == 0 || string(input) == "null":
			input = []byte("{}")
		case !json.Valid(input):
			return nil, a.badCall(i, c, fmt.Sprintf("has input that is not valid JSON (%d bytes: %s)", len(input), snippet(input)))
		default:
			input = bytes.Clone(input)
		}
		resp.ToolCalls = append(resp.ToolCalls, hostabi.ToolCall{ID: c.id, Name: c.name, Arguments: input})
	}
	if len(resp.ToolCalls) > 0 && (resp.FinishReason == "" || resp.FinishReason == "stop") {
		resp.FinishReason = "tool_calls"
	}
	if resp.FinishReason == "" {
		resp.FinishReason = "stop"
	}
	return resp, nil
}

func (a *accumulator) badCall(i int, c *callAcc, what string) error {
	msg := fmt.Sprintf("tool call %d (id %q, name %q) %s", i, c.id, c.name, what)
	if stopReason(a.stop) == "length" {
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

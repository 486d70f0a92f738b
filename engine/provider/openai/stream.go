package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	sse := wire.NewReader(r)
	for {
		event, data, err := sse.Next()
		if err == io.EOF {
			return a.partial(), a.cutShort()
		}
		if err != nil {
			return a.partial(), readFailure(err)
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

func readFailure(err error) error {
	if errors.Is(err, wire.ErrLineTooLong) {
		return &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream, Message: err.Error()}, Err: err}
	}
	return wire.TransportFailure(err, hostabi.FailStream, "reading the stream")
}

// accumulator folds chunks into one answer.
type accumulator struct {
	onDelta func(provider.Delta)
	events  int

	content []byte
	calls   []callAcc
	finishR string
	usage   provider.Usage

	// Per-chunk scratch, reused so a chunk costs no allocation of its own.
	choices []choiceView
	frags   []fragView
}

type callAcc struct {
	index int
	id    string
	name  string
	args  []byte
}

// choiceView is one parsed choice of the current chunk, still pointing into
// the chunk's bytes. A chunk is applied only once it has parsed whole.
type choiceView struct {
	index            int
	content, refusal []byte
	contentSlow      bool
	refusalSlow      bool
	finish           []byte
	hasFinish        bool
	frags            [2]int // frags[0]:frags[1] in accumulator.frags
}

type fragView struct {
	index         int
	hasIndex      bool
	id, name      []byte
	idSlow        bool
	nameSlow      bool
	args          []byte
	argsSlow      bool
	argsIsJSON    bool // arguments sent as an object rather than a string
	hasArgs       bool
	hasID, hasNam bool
}

func chunkError(err error) error {
	return &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream,
		Message: "the server sent a chunk that is not a valid chat.completion.chunk: " + err.Error()}, Err: err}
}

// chunk parses one data payload and applies it.
func (a *accumulator) chunk(data []byte) error {
	a.choices = a.choices[:0]
	a.frags = a.frags[:0]
	var (
		errRaw    []byte
		objError  bool
		usage     provider.Usage
		hasUsage  bool
		s         = scanner{b: data}
		typeError = func(field, want string) error {
			return chunkError(fmt.Errorf("%s is not %s", field, want))
		}
	)
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "choices":
			if s.null() {
				return nil
			}
			if s.peek() != '[' {
				return typeError("choices", "an array")
			}
			return s.array(func() error { return a.choice(&s) })
		case "usage":
			if s.null() {
				return nil
			}
			if s.peek() != '{' {
				return typeError("usage", "an object")
			}
			hasUsage = true
			return s.object(func(k []byte) error {
				switch string(k) {
				case "prompt_tokens", "input_tokens":
					n, err := s.intOrNull()
					usage.InputTokens = n
					return err
				case "completion_tokens", "output_tokens":
					n, err := s.intOrNull()
					usage.OutputTokens = n
					return err
				}
				return s.skip()
			})
		case "error":
			if s.null() {
				return nil
			}
			raw, err := s.raw()
			errRaw = raw
			return err
		case "object":
			if s.peek() == '"' {
				raw, _, err := s.str()
				objError = string(raw) == "error"
				return err
			}
		}
		return s.skip()
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		var pe *provider.Error
		if errors.As(err, &pe) {
			return err
		}
		return chunkError(err)
	}
	if errRaw != nil || objError {
		return streamFailure(data)
	}
	if hasUsage {
		a.usage = usage
	}
	start := len(a.content)
	for i := range a.choices {
		c := &a.choices[i]
		if c.index != 0 {
			continue
		}
		a.content = appendString(a.content, c.content, c.contentSlow)
		a.content = appendString(a.content, c.refusal, c.refusalSlow)
		for _, f := range a.frags[c.frags[0]:c.frags[1]] {
			a.applyFrag(&f)
		}
		if c.hasFinish {
			a.finishR = internFinish(c.finish)
		}
	}
	if a.onDelta != nil && len(a.content) > start {
		a.onDelta(provider.Delta{Text: string(a.content[start:])})
	}
	return nil
}

// choice parses one element of choices into a.choices.
func (a *accumulator) choice(s *scanner) error {
	if s.peek() != '{' {
		return chunkError(errors.New("a choice is not an object"))
	}
	a.choices = append(a.choices, choiceView{})
	c := &a.choices[len(a.choices)-1]
	c.frags[0] = len(a.frags)
	c.frags[1] = len(a.frags)
	return s.object(func(key []byte) error {
		switch string(key) {
		case "index":
			n, err := s.intOrNull()
			c.index = n
			return err
		case "finish_reason":
			if s.null() {
				return nil
			}
			raw, slow, err := s.str()
			if err != nil {
				return err
			}
			c.finish, c.hasFinish = raw, true
			if slow {
				c.finish = appendUnescaped(nil, raw)
			}
			return nil
		case "delta", "message":
			if s.null() {
				return nil
			}
			if s.peek() != '{' {
				return chunkError(fmt.Errorf("%s is not an object", key))
			}
			return s.object(func(k []byte) error {
				var err error
				switch string(k) {
				case "content":
					c.content, c.contentSlow, err = s.text()
				case "refusal":
					c.refusal, c.refusalSlow, err = s.text()
				case "tool_calls":
					if s.null() {
						return nil
					}
					c.frags[0] = len(a.frags)
					err = s.array(func() error { return a.frag(s) })
					c.frags[1] = len(a.frags)
				default:
					err = s.skip()
				}
				return err
			})
		}
		return s.skip()
	})
}

// frag parses one tool_calls element into a.frags.
func (a *accumulator) frag(s *scanner) error {
	if s.peek() != '{' {
		return chunkError(errors.New("a tool call is not an object"))
	}
	a.frags = append(a.frags, fragView{})
	f := &a.frags[len(a.frags)-1]
	return s.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "index":
			if s.null() {
				return nil
			}
			f.index, err = s.number()
			f.hasIndex = true
		case "id":
			f.id, f.idSlow, err = s.text()
			f.hasID = len(f.id) > 0
		case "function":
			if s.null() {
				return nil
			}
			if s.peek() != '{' {
				return chunkError(errors.New("function is not an object"))
			}
			return s.object(func(k []byte) error {
				var err error
				switch string(k) {
				case "name":
					f.name, f.nameSlow, err = s.text()
					f.hasNam = len(f.name) > 0
				case "arguments":
					switch s.peek() {
					case '"', 'n':
						f.args, f.argsSlow, err = s.text()
						f.argsIsJSON = false
					default:
						f.args, err = s.raw()
						f.argsIsJSON = true
					}
					f.hasArgs = true
				default:
					err = s.skip()
				}
				return err
			})
		default:
			err = s.skip()
		}
		return err
	})
}

func (a *accumulator) applyFrag(f *fragView) {
	var id []byte
	if f.hasID {
		id = f.id
		if f.idSlow {
			id = appendUnescaped(nil, f.id)
		}
	}
	c := a.findCall(f, id)
	if c.id == "" && len(id) > 0 {
		c.id = string(id)
	}
	if c.name == "" && f.hasNam {
		c.name = string(appendString(nil, f.name, f.nameSlow))
	}
	if f.hasArgs {
		if f.argsIsJSON { // a whole object at once: it replaces, not extends
			c.args = append(c.args[:0], f.args...)
		} else {
			c.args = appendString(c.args, f.args, f.argsSlow)
		}
	}
}

// findCall returns the call a fragment belongs to, starting one if needed.
func (a *accumulator) findCall(f *fragView, id []byte) *callAcc {
	if f.hasIndex {
		// The latest call with this index, unless the fragment brings a
		// different id: some servers number every parallel call 0.
		for i := len(a.calls) - 1; i >= 0; i-- {
			if c := &a.calls[i]; c.index == f.index {
				if len(id) == 0 || c.id == "" || c.id == string(id) {
					return c
				}
				break
			}
		}
		return a.newCall(f.index)
	}
	if len(id) > 0 {
		for i := range a.calls {
			if a.calls[i].id == string(id) {
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

// internFinish normalises a finish reason without allocating for the
// usual ones.
func internFinish(b []byte) string {
	switch string(b) {
	case "stop", "eos", "eos_token", "end_turn", "stop_sequence":
		return "stop"
	case "length", "max_tokens":
		return "length"
	case "tool_calls", "function_call", "tool_use":
		return "tool_calls"
	case "content_filter":
		return "content_filter"
	case "":
		return ""
	}
	return string(b)
}

func (a *accumulator) partial() *provider.Response {
	return &provider.Response{Content: string(a.content), Usage: a.usage}
}

// errNoEvents marks a stream that ended without a single event, which
// usually means the URL does not point at a Chat Completions endpoint.
var errNoEvents = errors.New("no events")

func (a *accumulator) cutShort() error {
	e := &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream, Message: fmt.Sprintf(
		"the stream ended before data: [DONE] after %d events; the server or a proxy cut it short, try again", a.events)}}
	if a.events == 0 {
		e.Err = errNoEvents
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

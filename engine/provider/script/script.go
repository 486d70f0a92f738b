// Package script is a provider.Provider that answers from a file instead of
// a model, for offline runs, tests and demos.
//
// # Format
//
// A script is YAML or JSON (JSON is read as YAML, so either works in a file
// of any name):
//
//	replies:            # used in order, one per answer
//	  - content: "I'll add those."
//	    tool_calls:
//	      - {name: calc_total, arguments: {items: [1, 2]}}
//	  - fail_first:     # attempts 1 and 2 of this answer fail, 3 succeeds
//	      - {code: rate_limit, status: 429, retry_after_ms: 10}
//	      - {code: overloaded, status: 529}
//	    deltas: ["The total ", "is 3."]
//	rules:              # matched against the request, before replies
//	  - when: {last_user_contains: weather}
//	    content: Sunny.
//	  - when: {after_tool: calc_total}
//	    content: Done adding.
//	fallback:           # when nothing else answers
//	  content: I have nothing scripted for that.
//
// A file that is just a list is read as replies. Keys not listed here are
// refused, with the file, line and path of the offending key.
//
// A reply has content (or deltas, the same text split into streamed
// pieces, with delta_delay_ms between them so a test can cancel midway),
// tool_calls ({id, name, arguments}; arguments is a mapping or a JSON
// string, default {}; a missing id becomes "call_A_I", A being the answer's
// number in the conversation and I the call's), finish_reason (stop,
// length, tool_calls or content_filter; default tool_calls when there are
// calls, else stop) and usage ({input_tokens, output_tokens}; default an
// estimate of four bytes a token). Instead it may have error ({code,
// status, message, retry_after_ms}, code being a hostabi.FailureCode),
// which fails every attempt, or fail_first, a list of such errors for the
// first attempts of the answer before it succeeds.
//
// # Choosing a reply
//
// The engine rebuilds providers at will and a session may resume in
// another process, so the choice depends on the Request alone, never on
// what the provider saw before:
//
//  1. The rules are tried in file order; the first whose when holds
//     answers. In when, last_user_contains requires the last message to be
//     a user message containing the text, last_contains the last message of
//     any role to contain it, and after_tool the trailing tool results to
//     include one for a call to that tool. All conditions given must hold.
//  2. Otherwise the answer is replies[N], N counting the assistant messages
//     in the request that no rule would have answered (the rules are
//     applied again to the conversation before each of them). With no
//     rules, N is simply the number of assistant messages.
//  3. Otherwise the fallback answers, if there is one; if not, the request
//     fails with code bad_request and a message naming the script, the
//     reply number and the last message, so a run that outgrows its script
//     stops with a clear error instead of looping.
//
// Request.Attempt picks among fail_first: attempt n ≤ len(fail_first) fails
// with fail_first[n-1]; later attempts get the reply.
package script

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// Script is a parsed script. It is a provider.Provider, immutable and safe
// for concurrent use.
type Script struct {
	name     string
	rules    []*reply
	replies  []*reply
	fallback *reply
}

var _ provider.Provider = (*Script)(nil)

type reply struct {
	line       int
	when       *when
	deltas     []string // the content, in streamed pieces
	delay      time.Duration
	toolCalls  []hostabi.ToolCall
	finish     string
	usage      *provider.Usage
	err        *hostabi.Failure
	failFirst  []hostabi.Failure
	hasContent bool
}

type when struct {
	lastUserContains string
	lastContains     string
	afterTool        string
}

// Load reads and parses the script at path. Errors name the path and line.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	return parse(path, data)
}

// Parse parses a script held in memory. Errors are prefixed "script:LINE".
func Parse(data []byte) (*Script, error) { return parse("script", data) }

// Name is the path the script was loaded from ("script" when parsed from
// bytes).
func (s *Script) Name() string { return s.name }

// Complete answers req from the script; see the package documentation for
// how the reply is chosen. Text is streamed to onDelta piece by piece; when
// ctx is cancelled between pieces, the text so far comes back with a
// canceled failure, as provider.Provider asks.
func (s *Script) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	if ctx.Err() != nil {
		return &provider.Response{}, canceled(ctx)
	}
	r, err := s.choose(req)
	if err != nil {
		return nil, err
	}
	attempt := max(req.Attempt, 1)
	if attempt <= len(r.failFirst) {
		return nil, &provider.Error{Failure: r.failFirst[attempt-1]}
	}
	if r.err != nil {
		return nil, &provider.Error{Failure: *r.err}
	}

	var text strings.Builder
	for i, d := range r.deltas {
		if i > 0 && r.delay > 0 {
			t := time.NewTimer(r.delay)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return &provider.Response{Content: text.String()}, canceled(ctx)
		}
		text.WriteString(d)
		if onDelta != nil && d != "" {
			onDelta(provider.Delta{Text: d})
		}
	}

	resp := &provider.Response{Content: text.String(), FinishReason: r.finish}
	answer := assistantCount(req.Messages) + 1
	for i, c := range r.toolCalls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d_%d", answer, i+1)
		}
		resp.ToolCalls = append(resp.ToolCalls, c)
	}
	if resp.FinishReason == "" {
		resp.FinishReason = "stop"
		if len(resp.ToolCalls) > 0 {
			resp.FinishReason = "tool_calls"
		}
	}
	if r.usage != nil {
		resp.Usage = *r.usage
	} else {
		resp.Usage = estimate(req, resp)
	}
	return resp, nil
}

func canceled(ctx context.Context) error {
	cause := context.Cause(ctx)
	return &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled, Message: cause.Error()}, Err: cause}
}

// choose picks the reply for req, as the package documentation describes.
func (s *Script) choose(req *provider.Request) (*reply, error) {
	msgs := req.Messages
	if r := s.rule(msgs); r != nil {
		return r, nil
	}
	n := 0
	for i, m := range msgs {
		if m.Role == "assistant" && s.rule(msgs[:i]) == nil {
			n++
		}
	}
	if n < len(s.replies) {
		return s.replies[n], nil
	}
	if s.fallback != nil {
		return s.fallback, nil
	}
	last := "no messages"
	if len(msgs) > 0 {
		m := msgs[len(msgs)-1]
		last = fmt.Sprintf("the last message (%s) %q", m.Role, excerpt(m.Content))
	}
	msg := fmt.Sprintf("script %s has no reply for this request: it would be reply %d but there are %d, and no rule matches %s; add a reply, a rule or a fallback",
		s.name, n+1, len(s.replies), last)
	return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Message: msg}}
}

// rule returns the first rule whose condition holds for msgs.
func (s *Script) rule(msgs []hostabi.Message) *reply {
	for _, r := range s.rules {
		if r.when.holds(msgs) {
			return r
		}
	}
	return nil
}

func (w *when) holds(msgs []hostabi.Message) bool {
	if len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1]
	if w.lastUserContains != "" && (last.Role != "user" || !strings.Contains(last.Content, w.lastUserContains)) {
		return false
	}
	if w.lastContains != "" && !strings.Contains(last.Content, w.lastContains) {
		return false
	}
	if w.afterTool != "" && !afterTool(msgs, w.afterTool) {
		return false
	}
	return true
}

// afterTool reports whether the trailing tool results include one for a
// call to the named tool.
func afterTool(msgs []hostabi.Message, name string) bool {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role == "tool" {
		i--
	}
	for _, res := range msgs[i:] {
		if callName(msgs[:i], res.CallID) == name {
			return true
		}
	}
	return false
}

// callName finds the tool name of call id among the assistant messages.
func callName(msgs []hostabi.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, c := range msgs[i].ToolCalls {
			if c.ID == id {
				return c.Name
			}
		}
	}
	return ""
}

func assistantCount(msgs []hostabi.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// estimate counts about four bytes a token, so budget ops have numbers to
// work with in scripted runs.
func estimate(req *provider.Request, resp *provider.Response) provider.Usage {
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.TopOfMind {
		in += len(t)
	}
	out := len(resp.Content)
	for _, c := range resp.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	return provider.Usage{InputTokens: (in + 3) / 4, OutputTokens: (out + 3) / 4}
}

func excerpt(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:60]) + "…"
	}
	return s
}

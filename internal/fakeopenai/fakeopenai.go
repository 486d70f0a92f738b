// Package fakeopenai is a fake OpenAI-compatible Chat Completions server
// for tests. It speaks the real wire format over real HTTP (httptest), so a
// client is tested the way it runs.
//
// A Server answers each request with the first Rule that matches the
// request's last message: text (in as many chunks as asked), tool calls
// (arguments in pieces, several in parallel), an HTTP error with a JSON
// body and Retry-After, or a deliberately broken stream. Stream knobs
// reproduce what real servers do: frames flushed one byte at a time, CRLF
// or CR line endings, keep-alive comments, data spread over several lines,
// "choices": null in the usage chunk, the last text and the finish reason
// in one chunk.
//
// Like the real API it refuses (HTTP 400, same message) a conversation in
// which an assistant tool call is not answered by a tool message before the
// next request; CheckHistory is that check on its own. Every request is
// recorded, decoded, for assertions.
package fakeopenai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL to configure a client with; it ends in /v1.
	URL string

	srv   *httptest.Server
	mu    sync.Mutex
	rules []*ruleState
	reqs  []Request
	// AllowBrokenHistory turns off the tool-pairing check. Set it before
	// the first request.
	AllowBrokenHistory bool
}

type ruleState struct {
	Rule
	used int
}

// New starts a server with rules, tried in order, and closes it when the
// test ends.
func New(t testing.TB, rules ...Rule) *Server {
	t.Helper()
	s := &Server{}
	s.Add(rules...)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

// Add appends rules after the existing ones.
func (s *Server) Add(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rules {
		s.rules = append(s.rules, &ruleState{Rule: r})
	}
}

// Requests returns every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Rule answers requests whose last message matches. Empty match fields
// match anything.
type Rule struct {
	// Role the last message must have (user, assistant, tool, system).
	Role string
	// Contains must be a substring of the last message's content.
	Contains string
	// ToolResult, when set, requires the last message to be a tool result
	// answering a call to the tool of this name.
	ToolResult string
	// Times limits how many requests the rule answers (0: no limit). Two
	// rules with the same match and Times 1 then 0 answer the first
	// request one way and later ones another.
	Times int

	Reply Reply
}

// Reply is what a rule answers.
type Reply struct {
	// Text is the answer's content.
	Text string
	// Chunks splits Text into this many pieces, one chunk each (default 1).
	Chunks int
	// ToolCalls are made after the text, in parallel.
	ToolCalls []ToolCall
	// FinishReason overrides the default (tool_calls when there are calls,
	// else stop); "none" sends no finish reason at all.
	FinishReason string
	// Usage overrides DefaultUsage in the usage chunk.
	Usage *Usage

	// Status, when neither 0 nor 200, answers with that HTTP status and a
	// JSON error body made of ErrorType, ErrorCode and ErrorMessage (or
	// Body verbatim when set). These fields also make the error object of
	// ErrorMidStream and ErrorEvent.
	Status       int
	ErrorType    string
	ErrorCode    string
	ErrorMessage string
	Body         string
	// Header is added to the response: Retry-After, retry-after-ms, Date.
	Header http.Header

	Stream Stream
}

// ToolCall is one call the fake model makes.
type ToolCall struct {
	ID, Name string
	// Arguments is the JSON text of the arguments, sent as is (it may be
	// deliberately invalid).
	Arguments string
	// Pieces splits Arguments over this many fragments (default 1).
	Pieces int
}

// Usage is the usage chunk's token counts.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// DefaultUsage is sent when a reply sets no Usage and the request asked for
// it with stream_options.include_usage.
var DefaultUsage = Usage{PromptTokens: 12, CompletionTokens: 34, TotalTokens: 46}

// Stream shapes the event stream of a successful reply.
type Stream struct {
	// SplitEveryByte writes and flushes the body one byte at a time.
	SplitEveryByte bool
	// LineEnding is "\n" (default), "\r\n" or "\r".
	LineEnding string
	// Comments sends a ": keep-alive" comment line before every frame.
	Comments bool
	// MultiLineData spreads each JSON payload over several data: lines.
	MultiLineData bool
	// ChoicesNull makes the usage chunk say "choices": null, not [].
	ChoicesNull bool
	// NoUsage leaves out the usage chunk even when it was asked for.
	NoUsage bool
	// FinishWithText sends the finish reason in the chunk with the last
	// text instead of a chunk of its own.
	FinishWithText bool
	// OmitIndex leaves "index" out of tool-call fragments.
	OmitIndex bool
	// ResendID repeats the call's id and name in every fragment.
	ResendID bool
	// Interleave sends parallel calls' fragments in turn (call 0 piece 1,
	// call 1 piece 1, …) instead of one call after the other.
	Interleave bool
	// JSON answers with one application/json chat.completion object, as a
	// server that ignores "stream": true does.
	JSON bool

	// Break makes the stream go wrong after BreakAfter frames (default:
	// half of them). Frames are the data events, role chunk included.
	Break      Break
	BreakAfter int
	// StallAfter, when positive, stops writing after that many frames and
	// holds the connection open until the client goes away.
	StallAfter int
}

// Break is a way for a stream to go wrong.
type Break int

// The ways a stream can break.
const (
	NoBreak        Break = iota
	CutMidFrame          // the body ends cleanly in the middle of a frame
	Drop                 // the connection is aborted in the middle of a frame
	NoDone               // every frame is sent, but no data: [DONE]
	ErrorMidStream       // data: {"error": {...}} instead of the next frame
	ErrorEvent           // event: error with the error object as data
	Garbage              // a frame whose data is not JSON
)

// Request is one recorded request.
type Request struct {
	Header http.Header
	// Body is the decoded body (zero if it did not decode).
	Body ChatRequest
	// Raw is the body as sent.
	Raw []byte
}

// ChatRequest is a Chat Completions request body. Fields not listed here
// are refused with a 400, which catches a client misspelling one.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	Seed                *int            `json:"seed,omitempty"`
	User                string          `json:"user,omitempty"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one request message.
type Message struct {
	Role string `json:"role"`
	// Content is nil when the JSON said null.
	Content    *string        `json:"content"`
	ToolCalls  []WireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

// Text returns the content, "" for null.
func (m Message) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// WireToolCall is a tool call in an assistant message.
type WireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is an advertised tool.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// CheckHistory applies the API's pairing rule: every assistant tool call
// must be answered by a tool message, after it and before the next message
// of another role, and every tool message must answer such a call. The
// error reads like the real server's.
func CheckHistory(msgs []Message) error {
	var open []string // calls of the last assistant message still unanswered
	for i, m := range msgs {
		if m.Role == "tool" {
			if m.ToolCallID == "" {
				return fmt.Errorf("messages.[%d].tool_call_id: a message with role 'tool' must have a tool_call_id", i)
			}
			k := indexOf(open, m.ToolCallID)
			if k < 0 {
				return fmt.Errorf("messages.[%d].role: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (no open call %q)", i, m.ToolCallID)
			}
			open = append(open[:k], open[k+1:]...)
			continue
		}
		if len(open) > 0 {
			return fmt.Errorf("messages.[%d].role: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", i, strings.Join(open, ", "))
		}
		if m.Role == "assistant" {
			for _, c := range m.ToolCalls {
				open = append(open, c.ID)
			}
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("messages.[%d].role: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", len(msgs), strings.Join(open, ", "))
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path))
		return
	}
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "cannot read body: "+err.Error())
		return
	}
	rec := Request{Header: r.Header.Clone(), Raw: raw.Bytes()}
	dec := json.NewDecoder(bytes.NewReader(rec.Raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&rec.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	check := !s.AllowBrokenHistory
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	body := &rec.Body
	if err := validate(body, check); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	rule := s.match(body.Messages)
	if rule == nil {
		last := Message{}
		if n := len(body.Messages); n > 0 {
			last = body.Messages[n-1]
		}
		writeError(w, http.StatusInternalServerError, "fake_error", "no_rule",
			fmt.Sprintf("fakeopenai: no rule matches the last message (role %q, content %q)", last.Role, last.Text()))
		return
	}
	reply := rule.Reply
	for k, vs := range reply.Header {
		w.Header()[http.CanonicalHeaderKey(k)] = vs
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		if reply.Body != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(reply.Status)
			_, _ = w.Write([]byte(reply.Body))
			return
		}
		writeError(w, reply.Status, reply.ErrorType, reply.ErrorCode, reply.ErrorMessage)
		return
	}
	usage := body.StreamOptions != nil && body.StreamOptions.IncludeUsage
	if reply.Stream.JSON {
		writeJSON(w, body.Model, &reply)
		return
	}
	s.stream(w, r, body.Model, &reply, usage)
}

func validate(b *ChatRequest, checkHistory bool) error {
	if b.Model == "" {
		return fmt.Errorf("you must provide a model parameter")
	}
	if len(b.Messages) == 0 {
		return fmt.Errorf("[] is too short - 'messages'")
	}
	for i, t := range b.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Errorf("tools.[%d]: a tool needs type 'function' and a function name", i)
		}
	}
	if b.ParallelToolCalls != nil && len(b.Tools) == 0 {
		return fmt.Errorf("invalid value for 'parallel_tool_calls': only allowed when 'tools' are specified")
	}
	if b.StreamOptions != nil && !b.Stream {
		return fmt.Errorf("the 'stream_options' parameter is only allowed when 'stream' is enabled")
	}
	for i, m := range b.Messages {
		for _, c := range m.ToolCalls {
			if !json.Valid([]byte(c.Function.Arguments)) {
				return fmt.Errorf("messages.[%d].tool_calls: arguments of %q are not valid JSON", i, c.ID)
			}
		}
	}
	if checkHistory {
		return CheckHistory(b.Messages)
	}
	return nil
}

func (s *Server) match(msgs []Message) *ruleState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last Message
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1]
	}
	for _, r := range s.rules {
		if r.Times > 0 && r.used >= r.Times {
			continue
		}
		if r.Role != "" && last.Role != r.Role {
			continue
		}
		if r.Contains != "" && !strings.Contains(last.Text(), r.Contains) {
			continue
		}
		if r.ToolResult != "" && (last.Role != "tool" || toolName(msgs, last.ToolCallID) != r.ToolResult) {
			continue
		}
		r.used++
		return r
	}
	return nil
}

// toolName finds the name of the call id among the assistant messages.
func toolName(msgs []Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, c := range msgs[i].ToolCalls {
			if c.ID == id {
				return c.Function.Name
			}
		}
	}
	return ""
}

func errorObject(typ, code, msg string) map[string]any {
	var c any
	if code != "" {
		c = code
	}
	return map[string]any{"message": msg, "type": typ, "param": nil, "code": c}
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": errorObject(typ, code, msg)})
}

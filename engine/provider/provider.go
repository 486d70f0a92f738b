// Package provider defines how the engine talks to a model: one Request in,
// a stream of live deltas out, one Response (or a normalised *Error) at the
// end. Adapters for real wire formats live in subpackages (openai, script).
package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// Provider sends one request to a model.
//
// Complete streams text through onDelta as it arrives and returns the whole
// answer once. On failure it returns a *Error. When ctx is cancelled it stops
// reading at once and returns the text received so far in a non-nil
// Response together with an *Error of code hostabi.FailCanceled, so the
// caller can keep what was already shown.
type Provider interface {
	Complete(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error)
}

// Func adapts a function to Provider.
type Func func(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error)

// Complete calls f.
func (f Func) Complete(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	return f(ctx, req, onDelta)
}

// Request is everything a model is sent for one step.
type Request struct {
	Model string `json:"model,omitempty"`
	// System is the system prompt, joined from contributed prompt parts.
	System string `json:"system,omitempty"`
	// Messages is the conversation, oldest first.
	Messages []hostabi.Message `json:"messages"`
	// TopOfMind lines go where the model reads them last (after the last
	// message), not in the durable conversation.
	TopOfMind []string `json:"top_of_mind,omitempty"`
	// Tools offered to the model.
	Tools []hostabi.ToolSpec `json:"tools,omitempty"`
	// MaxTokens caps the answer (0: the provider's default).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature, when non-nil, is sent as is.
	Temperature *float64 `json:"temperature,omitempty"`
	// Attempt is 1 for the first request of a step and one more for each
	// retry of it, counted from the log (0: unknown, read as 1). Network
	// providers ignore it; the scripted provider uses it to fail the first
	// attempts of a step deterministically, even across restarts.
	Attempt int `json:"attempt,omitempty"`
}

// Delta is a piece of a streamed answer.
type Delta struct {
	Text string `json:"text,omitempty"`
}

// Response is a model's whole answer.
type Response struct {
	Content   string             `json:"content"`
	ToolCalls []hostabi.ToolCall `json:"tool_calls,omitempty"`
	// FinishReason: "stop", "length", "tool_calls", "content_filter".
	FinishReason string `json:"finish_reason,omitempty"`
	Usage        Usage  `json:"usage,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
}

// Error is a normalised provider failure.
type Error struct {
	hostabi.Failure
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	msg := string(e.Code)
	if e.Status != 0 {
		msg += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", time.Duration(e.RetryAfter)*time.Millisecond)
	}
	return "provider: " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// AsFailure turns any error into a normalised failure: a *Error keeps its
// own, a context error becomes canceled or timeout, anything else transport.
func AsFailure(err error) hostabi.Failure {
	var pe *Error
	switch {
	case errors.As(err, &pe):
		return pe.Failure
	case errors.Is(err, context.Canceled):
		return hostabi.Failure{Code: hostabi.FailCanceled, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return hostabi.Failure{Code: hostabi.FailTimeout, Message: err.Error()}
	default:
		return hostabi.Failure{Code: hostabi.FailTransport, Message: err.Error()}
	}
}

package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
)

// maxMessage bounds the server message kept in a Failure, so a proxy that
// answers with a whole HTML page does not fill the log.
const maxMessage = 1000

// apiError is the error object of the Messages API, found in an error
// response body and in an "error" event:
//
//	{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
type apiError struct {
	Type    string
	Message string
}

// decodeAPIError reads an error body or error event. It accepts the
// Anthropic shape above, a bare {"type", "message"} object, {"error":
// "text"}, and, failing all of them, uses the text as the message.
func decodeAPIError(body []byte) apiError {
	body = bytes.TrimSpace(body)
	var top struct {
		Type    string          `json:"type"`
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &top) != nil {
		return apiError{Message: clip(string(body))}
	}
	if len(top.Error) > 0 && string(top.Error) != "null" {
		var inner struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		if json.Unmarshal(top.Error, &inner) == nil {
			return apiError{Type: inner.Type, Message: clip(inner.Message)}
		}
		var s string
		if json.Unmarshal(top.Error, &s) == nil {
			return apiError{Message: clip(s)}
		}
	}
	if top.Type == "error" { // a wrapper tag, not a kind
		top.Type = ""
	}
	if top.Type != "" || top.Message != "" {
		return apiError{Type: top.Type, Message: clip(top.Message)}
	}
	return apiError{Message: clip(string(body))}
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxMessage {
		s = s[:maxMessage] + "…"
	}
	return s
}

// classify maps an HTTP status (0 for an error event inside a stream) and
// the error object to a failure code.
func classify(status int, e apiError) hostabi.FailureCode {
	kind := strings.ToLower(e.Type)
	words := strings.ToLower(e.Type + " " + e.Message)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return hostabi.FailAuth
	case (status == http.StatusTooManyRequests || status == http.StatusBadRequest || status == http.StatusPaymentRequired) && isQuota(kind, words):
		return hostabi.FailQuota
	case status == 529 || status == http.StatusServiceUnavailable:
		return hostabi.FailOverloaded
	case status == http.StatusTooManyRequests:
		return hostabi.FailRateLimit
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout && kind == "timeout_error":
		return hostabi.FailTimeout
	case status >= 500 && kind == "overloaded_error":
		return hostabi.FailOverloaded
	case status >= 500:
		return hostabi.FailServer
	case status == http.StatusRequestEntityTooLarge || (status >= 400 && isContextLength(words)):
		return hostabi.FailContextLength
	case status >= 400:
		return hostabi.FailBadRequest
	}
	// No status: an error event inside the stream. Read its type.
	switch kind {
	case "overloaded_error":
		return hostabi.FailOverloaded
	case "rate_limit_error":
		if isQuota(kind, words) {
			return hostabi.FailQuota
		}
		return hostabi.FailRateLimit
	case "billing_error":
		return hostabi.FailQuota
	case "authentication_error", "permission_error":
		return hostabi.FailAuth
	case "timeout_error":
		return hostabi.FailTimeout
	case "request_too_large":
		return hostabi.FailContextLength
	case "invalid_request_error", "not_found_error":
		if isQuota(kind, words) {
			return hostabi.FailQuota
		}
		if isContextLength(words) {
			return hostabi.FailContextLength
		}
		return hostabi.FailBadRequest
	}
	if strings.Contains(words, "overloaded") {
		return hostabi.FailOverloaded
	}
	// api_error, or a kind we do not know: the server failed while answering.
	return hostabi.FailServer
}

// isQuota tells a spent budget (the workspace spend limit, an exhausted
// credit balance: not worth retrying) from a per-minute rate limit.
func isQuota(kind, words string) bool {
	if kind == "billing_error" {
		return true
	}
	for _, w := range []string{
		"spend limit", "spending limit", "usage limit", "credit balance",
		"billing", "quota exceeded", "insufficient_quota",
	} {
		if strings.Contains(words, w) {
			return true
		}
	}
	return false
}

func isContextLength(words string) bool {
	for _, w := range []string{
		"prompt is too long", "context limit", "context window", "context length",
		"maximum context", "too many tokens", "input is too long",
	} {
		if strings.Contains(words, w) {
			return true
		}
	}
	return false
}

// httpFailure normalises a non-2xx response.
func httpFailure(resp *http.Response, body []byte, now time.Time) *provider.Error {
	e := decodeAPIError(body)
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &provider.Error{Failure: hostabi.Failure{
		Code:       classify(resp.StatusCode, e),
		Status:     resp.StatusCode,
		RetryAfter: wire.RetryAfter(resp.Header, now),
		Message:    msg,
	}}
}

// streamFailure normalises an error event that arrived inside a 200 stream.
func streamFailure(raw []byte) *provider.Error {
	e := decodeAPIError(raw)
	msg := e.Message
	if msg == "" {
		msg = "the server sent an error event without a message"
	}
	if e.Type != "" {
		msg = e.Type + ": " + msg
	}
	return &provider.Error{Failure: hostabi.Failure{Code: classify(0, e), Message: msg}}
}

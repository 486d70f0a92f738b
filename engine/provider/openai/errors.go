package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
)

// maxMessage bounds the server message kept in a Failure, so a proxy that
// answers with a whole HTML page does not fill the log.
const maxMessage = 1000

// apiError is what OpenAI-compatible servers put in an error body or in an
// error object mid-stream. Servers disagree on the shape; decodeAPIError
// accepts the common ones.
type apiError struct {
	Message string
	Type    string
	Code    string // a string code, or a numeric one as text
	Status  int    // a numeric code or status field, read as an HTTP status
}

// decodeAPIError reads an error body. It accepts
//
//	{"error": {"message", "type", "code", "param"}}   OpenAI, vLLM, llama.cpp
//	{"error": "text"}                                  Ollama and others
//	{"object": "error", "message", "type", "code"}     older vLLM
//	{"type": "error", "error": {"type", "message"}}    Anthropic-style proxies
//	{"detail": "text"}                                 FastAPI servers
//
// and, failing all of them, uses the body's text as the message.
func decodeAPIError(body []byte) apiError {
	body = bytes.TrimSpace(body)
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return apiError{Message: clip(string(body))}
	}
	if raw, ok := top["error"]; ok && string(raw) != "null" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return apiError{Message: clip(s)}
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil {
			return fieldsError(inner)
		}
	}
	if e := fieldsError(top); e.Message != "" || e.Type != "" || e.Code != "" {
		return e
	}
	if raw, ok := top["detail"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return apiError{Message: clip(s)}
		}
		return apiError{Message: clip(string(raw))}
	}
	return apiError{Message: clip(string(body))}
}

func fieldsError(m map[string]json.RawMessage) apiError {
	var e apiError
	str := func(key string) string {
		var s string
		if raw, ok := m[key]; ok && json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	e.Message = clip(str("message"))
	e.Type = str("type")
	if e.Type == "error" { // {"type":"error", ...} is a wrapper tag, not a kind
		e.Type = ""
	}
	if raw, ok := m["code"]; ok {
		var n float64
		if json.Unmarshal(raw, &n) == nil {
			if n >= 100 && n <= 599 {
				e.Status = int(n)
			}
			e.Code = strconv.FormatFloat(n, 'f', -1, 64)
		} else {
			e.Code = str("code")
		}
	}
	for _, k := range []string{"status", "status_code"} {
		var n int
		if raw, ok := m[k]; ok && json.Unmarshal(raw, &n) == nil && n >= 100 && n <= 599 {
			e.Status = n
		}
	}
	return e
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxMessage {
		s = s[:maxMessage] + "…"
	}
	return s
}

// classify maps an HTTP status (0 when the error came mid-stream without
// one) and the server's error fields to a failure code.
func classify(status int, e apiError) hostabi.FailureCode {
	words := strings.ToLower(e.Type + " " + e.Code + " " + e.Message)
	kind := strings.ToLower(e.Type + " " + e.Code)
	if status == 0 {
		status = e.Status
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return hostabi.FailAuth
	case status == http.StatusTooManyRequests && isQuota(kind, words):
		return hostabi.FailQuota
	case status == 529 || strings.Contains(words, "overloaded"):
		return hostabi.FailOverloaded
	case status == http.StatusTooManyRequests:
		return hostabi.FailRateLimit
	case status == http.StatusServiceUnavailable:
		return hostabi.FailOverloaded
	case status == http.StatusRequestTimeout:
		return hostabi.FailTimeout
	case status >= 500:
		return hostabi.FailServer
	case status == http.StatusRequestEntityTooLarge || (status >= 400 && isContextLength(words)):
		return hostabi.FailContextLength
	case status >= 400:
		return hostabi.FailBadRequest
	}
	// No status: an error object inside a stream. Read its words.
	switch {
	case isQuota(kind, words):
		return hostabi.FailQuota
	case strings.Contains(words, "rate_limit") || strings.Contains(words, "rate limit"):
		return hostabi.FailRateLimit
	case isContextLength(words):
		return hostabi.FailContextLength
	case strings.Contains(kind, "auth") || strings.Contains(kind, "invalid_api_key") || strings.Contains(kind, "permission"):
		return hostabi.FailAuth
	case strings.Contains(kind, "invalid_request") || strings.Contains(kind, "badrequest"):
		return hostabi.FailBadRequest
	}
	// The server said it failed while answering: a server-side failure.
	return hostabi.FailServer
}

// isQuota tells a spent quota or billing limit (not worth retrying) from a
// per-minute rate limit (worth retrying). An explicit rate-limit code wins
// over quota wording in the message.
func isQuota(kind, words string) bool {
	if strings.Contains(kind, "insufficient_quota") || strings.Contains(kind, "billing") {
		return true
	}
	if strings.Contains(kind, "rate_limit") {
		return false
	}
	for _, w := range []string{"insufficient_quota", "exceeded your current quota", "quota exceeded", "quota_exceeded", "billing", "spend limit", "credit balance"} {
		if strings.Contains(words, w) {
			return true
		}
	}
	return false
}

func isContextLength(words string) bool {
	for _, w := range []string{
		"context_length_exceeded", "context length", "maximum context", "context window",
		"exceed_context_size", "context size", "prompt is too long", "too many tokens",
		"reduce the length", "input is too long", "string_above_max_length",
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

// streamFailure normalises an error object that arrived inside a 200 stream.
func streamFailure(raw []byte) *provider.Error {
	e := decodeAPIError(raw)
	msg := e.Message
	if msg == "" {
		msg = "the server sent an error object without a message"
	}
	return &provider.Error{Failure: hostabi.Failure{
		Code:    classify(0, e),
		Status:  e.Status,
		Message: msg,
	}}
}

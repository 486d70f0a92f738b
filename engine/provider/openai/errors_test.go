package openai

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// TestHTTPFailures sends requests the fake answers with an error status and
// checks the normalised failure, through the real client.
func TestHTTPFailures(t *testing.T) {
	date := "Sun, 06 Nov 1994 08:49:37 GMT"
	tests := []struct {
		name  string
		reply fakeopenai.Reply
		want  hostabi.Failure
	}{
		{"rate limit with Retry-After seconds",
			fakeopenai.Reply{Status: 429, ErrorType: "requests", ErrorCode: "rate_limit_exceeded", ErrorMessage: "Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 3, Used 3.", Header: http.Header{"Retry-After": {"2"}}},
			hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 2000, Message: "Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 3, Used 3."}},
		{"rate limit with Retry-After as an HTTP date",
			fakeopenai.Reply{Status: 429, ErrorMessage: "slow down", Header: http.Header{"Date": {date}, "Retry-After": {"Sun, 06 Nov 1994 08:49:40 GMT"}}},
			hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 3000, Message: "slow down"}},
		{"retry-after-ms wins over Retry-After",
			fakeopenai.Reply{Status: 429, ErrorMessage: "slow down", Header: http.Header{"Retry-After-Ms": {"1500.2"}, "Retry-After": {"9"}}},
			hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1501, Message: "slow down"}},
		{"quota by code",
			fakeopenai.Reply{Status: 429, ErrorType: "insufficient_quota", ErrorCode: "insufficient_quota", ErrorMessage: "You exceeded your current quota, please check your plan and billing details."},
			hostabi.Failure{Code: hostabi.FailQuota, Status: 429, Message: "You exceeded your current quota, please check your plan and billing details."}},
		{"quota by wording only",
			fakeopenai.Reply{Status: 429, Body: `{"error":{"code":429,"message":"Quota exceeded for quota metric 'Generate Content API requests per day'","status":"RESOURCE_EXHAUSTED"}}`},
			hostabi.Failure{Code: hostabi.FailQuota, Status: 429, Message: "Quota exceeded for quota metric 'Generate Content API requests per day'"}},
		{"rate-limit code wins over quota wording",
			fakeopenai.Reply{Status: 429, ErrorCode: "rate_limit_exceeded", ErrorMessage: "per-minute quota exceeded"},
			hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, Message: "per-minute quota exceeded"}},
		{"529",
			fakeopenai.Reply{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Header: http.Header{"Retry-After": {"1"}}},
			hostabi.Failure{Code: hostabi.FailOverloaded, Status: 529, RetryAfter: 1000, Message: "Overloaded"}},
		{"500 saying overloaded",
			fakeopenai.Reply{Status: 500, ErrorType: "overloaded_error", ErrorMessage: "try later"},
			hostabi.Failure{Code: hostabi.FailOverloaded, Status: 500, Message: "try later"}},
		{"503",
			fakeopenai.Reply{Status: 503, ErrorMessage: "The engine is currently overloaded, please try again later", Header: http.Header{"Retry-After": {"0"}}},
			hostabi.Failure{Code: hostabi.FailOverloaded, Status: 503, Message: "The engine is currently overloaded, please try again later"}},
		{"500",
			fakeopenai.Reply{Status: 500, ErrorType: "server_error", ErrorMessage: "The server had an error while processing your request."},
			hostabi.Failure{Code: hostabi.FailServer, Status: 500, Message: "The server had an error while processing your request."}},
		{"502 with an HTML body",
			fakeopenai.Reply{Status: 502, Body: "<html><h1>502 Bad Gateway</h1></html>"},
			hostabi.Failure{Code: hostabi.FailServer, Status: 502, Message: "<html><h1>502 Bad Gateway</h1></html>"}},
		{"504 with an empty body",
			fakeopenai.Reply{Status: 504, Body: " "},
			hostabi.Failure{Code: hostabi.FailServer, Status: 504, Message: "Gateway Timeout"}},
		{"401",
			fakeopenai.Reply{Status: 401, ErrorType: "invalid_request_error", ErrorCode: "invalid_api_key", ErrorMessage: "Incorrect API key provided: sk-test."},
			hostabi.Failure{Code: hostabi.FailAuth, Status: 401, Message: "Incorrect API key provided: sk-test."}},
		{"403",
			fakeopenai.Reply{Status: 403, ErrorCode: "unsupported_country_region_territory", ErrorMessage: "Country, region, or territory not supported"},
			hostabi.Failure{Code: hostabi.FailAuth, Status: 403, Message: "Country, region, or territory not supported"}},
		{"context length by code",
			fakeopenai.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorCode: "context_length_exceeded", ErrorMessage: "This model's maximum context length is 128000 tokens."},
			hostabi.Failure{Code: hostabi.FailContextLength, Status: 400, Message: "This model's maximum context length is 128000 tokens."}},
		{"context length, llama.cpp",
			fakeopenai.Reply{Status: 400, Body: `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`},
			hostabi.Failure{Code: hostabi.FailContextLength, Status: 400, Message: "the request exceeds the available context size, try increasing it"}},
		{"413",
			fakeopenai.Reply{Status: 413, Body: `{"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}`},
			hostabi.Failure{Code: hostabi.FailContextLength, Status: 413, Message: "Request exceeds the maximum size"}},
		{"400",
			fakeopenai.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "Invalid value for 'temperature'."},
			hostabi.Failure{Code: hostabi.FailBadRequest, Status: 400, Message: "Invalid value for 'temperature'."}},
		{"404 with a string error (Ollama)",
			fakeopenai.Reply{Status: 404, Body: `{"error":"model \"llama9\" not found, try pulling it first"}`},
			hostabi.Failure{Code: hostabi.FailBadRequest, Status: 404, Message: `model "llama9" not found, try pulling it first`}},
		{"422 with a FastAPI detail",
			fakeopenai.Reply{Status: 422, Body: `{"detail":"messages: field required"}`},
			hostabi.Failure{Code: hostabi.FailBadRequest, Status: 422, Message: "messages: field required"}},
		{"408",
			fakeopenai.Reply{Status: 408, ErrorMessage: "Request timed out."},
			hostabi.Failure{Code: hostabi.FailTimeout, Status: 408, Message: "Request timed out."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeopenai.New(t, fakeopenai.Rule{Reply: tc.reply})
			resp, err := newClient(t, srv).Complete(context.Background(), userReq("x"), nil)
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Complete = %v, want a *provider.Error", err)
			}
			// Every HTTP failure names the method and URL first.
			tc.want.Message = "POST " + srv.URL + "/chat/completions" + ": " + tc.want.Message
			if diff := cmp.Diff(tc.want, pe.Failure); diff != "" {
				t.Errorf("failure mismatch (-want +got):\n%s", diff)
			}
			if resp != nil {
				t.Errorf("Complete returned a Response with an HTTP failure")
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   int64
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"30"}}, 30000},
		{"fractional seconds", http.Header{"Retry-After": {"0.25"}}, 250},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"negative", http.Header{"Retry-After": {"-5"}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"date from local clock", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90000},
		{"date in the past", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"date measured from the Date header", http.Header{
			"Date":        {now.Add(-time.Hour).Format(http.TimeFormat)},
			"Retry-After": {now.Add(-time.Hour + 5*time.Second).Format(http.TimeFormat)},
		}, 5000},
		{"RFC 850 date", http.Header{"Retry-After": {now.Add(10 * time.Second).Format(time.RFC850)}}, 10000},
		{"ms", http.Header{"Retry-After-Ms": {"20"}}, 20},
		{"bad ms falls back to seconds", http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"1"}}, 1000},
		{"absurd date is capped", http.Header{"Retry-After": {"Fri, 31 Dec 9999 23:59:59 GMT"}}, int64(30 * 24 * time.Hour / time.Millisecond)},
	}
	for _, tc := range tests {
		if got := wire.RetryAfter(tc.header, now); got != tc.want {
			t.Errorf("%s: retryAfter = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestClassifyWithoutStatus(t *testing.T) {
	tests := []struct {
		e    apiError
		want hostabi.FailureCode
	}{
		{apiError{Type: "server_error", Message: "oops"}, hostabi.FailServer},
		{apiError{Message: "something odd"}, hostabi.FailServer},
		{apiError{Code: "rate_limit_exceeded"}, hostabi.FailRateLimit},
		{apiError{Code: "insufficient_quota"}, hostabi.FailQuota},
		{apiError{Type: "overloaded_error"}, hostabi.FailOverloaded},
		{apiError{Code: "context_length_exceeded"}, hostabi.FailContextLength},
		{apiError{Type: "authentication_error"}, hostabi.FailAuth},
		{apiError{Type: "invalid_request_error", Message: "bad"}, hostabi.FailBadRequest},
		{apiError{Status: 503}, hostabi.FailOverloaded},
		{apiError{Status: 429, Message: "You exceeded your current quota"}, hostabi.FailQuota},
	}
	for _, tc := range tests {
		if got := classify(0, tc.e); got != tc.want {
			t.Errorf("classify(0, %+v) = %s, want %s", tc.e, got, tc.want)
		}
	}
}

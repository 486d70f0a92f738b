package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
)

func errBody(typ, msg string) string {
	m, _ := json.Marshal(msg)
	return `{"type":"error","error":{"type":"` + typ + `","message":` + string(m) + `},"request_id":"req_1"}`
}

// TestHTTPFailures answers with error statuses and checks the normalised
// failure, through the real client.
func TestHTTPFailures(t *testing.T) {
	date := "Sun, 06 Nov 1994 08:49:37 GMT"
	tests := []struct {
		name  string
		reply reply
		want  hostabi.Failure
	}{
		{"429 with Retry-After seconds",
			reply{status: 429, body: errBody("rate_limit_error", "This request would exceed the rate limit for your organization of 50,000 input tokens per minute."), header: http.Header{"Retry-After": {"2"}}},
			hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 2000, Message: "This request would exceed the rate limit for your organization of 50,000 input tokens per minute."}},
		{"429 with Retry-After as an HTTP date",
			reply{status: 429, body: errBody("rate_limit_error", "slow down"), header: http.Header{"Date": {date}, "Retry-After": {"Sun, 06 Nov 1994 08:49:40 GMT"}}},
			hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 3000, Message: "slow down"}},
		{"retry-after-ms wins over Retry-After",
			reply{status: 429, body: errBody("rate_limit_error", "slow down"), header: http.Header{"Retry-After-Ms": {"1500.2"}, "Retry-After": {"9"}}},
			hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1501, Message: "slow down"}},
		{"429 spend limit is quota",
			reply{status: 429, body: errBody("rate_limit_error", "You have reached your specified workspace API spend limit."), header: http.Header{"Retry-After": {"60"}}},
			hostabi.Failure{Code: hostabi.FailQuota, Status: 429, RetryAfter: 60000, Message: "You have reached your specified workspace API spend limit."}},
		{"429 usage limits is quota",
			reply{status: 429, body: errBody("rate_limit_error", "You have reached your specified API usage limits. You will regain access on 2025-01-01 at 00:00 UTC.")},
			hostabi.Failure{Code: hostabi.FailQuota, Status: 429, Message: "You have reached your specified API usage limits. You will regain access on 2025-01-01 at 00:00 UTC."}},
		{"400 credit balance is quota",
			reply{status: 400, body: errBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")},
			hostabi.Failure{Code: hostabi.FailQuota, Status: 400, Message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}},
		{"529",
			reply{status: 529, body: errBody("overloaded_error", "Overloaded"), header: http.Header{"Retry-After": {"1"}}},
			hostabi.Failure{Code: hostabi.FailOverloaded, Status: 529, RetryAfter: 1000, Message: "Overloaded"}},
		{"503",
			reply{status: 503, body: "upstream unavailable", contentType: "text/plain"},
			hostabi.Failure{Code: hostabi.FailOverloaded, Status: 503, Message: "upstream unavailable"}},
		{"500 api_error",
			reply{status: 500, body: errBody("api_error", "Internal server error")},
			hostabi.Failure{Code: hostabi.FailServer, Status: 500, Message: "Internal server error"}},
		{"502 with an HTML body",
			reply{status: 502, body: "<html><h1>502 Bad Gateway</h1></html>", contentType: "text/html"},
			hostabi.Failure{Code: hostabi.FailServer, Status: 502, Message: "<html><h1>502 Bad Gateway</h1></html>"}},
		{"504 with an empty body",
			reply{status: 504, body: " "},
			hostabi.Failure{Code: hostabi.FailServer, Status: 504, Message: "Gateway Timeout"}},
		{"401",
			reply{status: 401, body: errBody("authentication_error", "invalid x-api-key")},
			hostabi.Failure{Code: hostabi.FailAuth, Status: 401, Message: "invalid x-api-key"}},
		{"403",
			reply{status: 403, body: errBody("permission_error", "Your API key does not have permission to use the specified resource.")},
			hostabi.Failure{Code: hostabi.FailAuth, Status: 403, Message: "Your API key does not have permission to use the specified resource."}},
		{"400 prompt too long",
			reply{status: 400, body: errBody("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")},
			hostabi.Failure{Code: hostabi.FailContextLength, Status: 400, Message: "prompt is too long: 210000 tokens > 200000 maximum"}},
		{"400 context limit",
			reply{status: 400, body: errBody("invalid_request_error", "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or `max_tokens` and try again")},
			hostabi.Failure{Code: hostabi.FailContextLength, Status: 400, Message: "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or `max_tokens` and try again"}},
		{"413",
			reply{status: 413, body: errBody("request_too_large", "Request exceeds the maximum allowed number of bytes.")},
			hostabi.Failure{Code: hostabi.FailContextLength, Status: 413, Message: "Request exceeds the maximum allowed number of bytes."}},
		{"400",
			reply{status: 400, body: errBody("invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\"")},
			hostabi.Failure{Code: hostabi.FailBadRequest, Status: 400, Message: "messages: roles must alternate between \"user\" and \"assistant\""}},
		{"404",
			reply{status: 404, body: errBody("not_found_error", "model: claude-nope")},
			hostabi.Failure{Code: hostabi.FailBadRequest, Status: 404, Message: "model: claude-nope"}},
		{"408",
			reply{status: 408, body: "timed out", contentType: "text/plain"},
			hostabi.Failure{Code: hostabi.FailTimeout, Status: 408, Message: "timed out"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tc.reply)
			resp, err := newClient(t, srv.URL).Complete(context.Background(), userReq("x"), nil)
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Complete = %v, want a *provider.Error", err)
			}
			// Every HTTP failure names the method and URL first.
			tc.want.Message = "POST " + srv.URL + "/v1/messages" + ": " + tc.want.Message
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
		h    http.Header
		want int64
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"3"}}, 3000},
		{http.Header{"Retry-After": {"0.25"}}, 250},
		{http.Header{"Retry-After": {"-1"}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {now.Add(2 * time.Second).Format(http.TimeFormat)}}, 2000},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After-Ms": {"120"}}, 120},
		{http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"1"}}, 1000},
		{http.Header{"Retry-After": {"1e12"}}, int64(30 * 24 * time.Hour / time.Millisecond)},
	}
	for _, tc := range tests {
		if got := wire.RetryAfter(tc.h, now); got != tc.want {
			t.Errorf("wire.RetryAfter(%v) = %d, want %d", tc.h, got, tc.want)
		}
	}
}

func TestClassifyStreamErrors(t *testing.T) {
	tests := map[string]hostabi.FailureCode{
		"overloaded_error":      hostabi.FailOverloaded,
		"rate_limit_error":      hostabi.FailRateLimit,
		"api_error":             hostabi.FailServer,
		"authentication_error":  hostabi.FailAuth,
		"permission_error":      hostabi.FailAuth,
		"invalid_request_error": hostabi.FailBadRequest,
		"not_found_error":       hostabi.FailBadRequest,
		"request_too_large":     hostabi.FailContextLength,
		"billing_error":         hostabi.FailQuota,
		"timeout_error":         hostabi.FailTimeout,
		"":                      hostabi.FailServer,
	}
	for typ, want := range tests {
		if got := streamFailure([]byte(errBody(typ, "m"))).Code; got != want {
			t.Errorf("error event of type %q: %s, want %s", typ, got, want)
		}
	}
	if got := streamFailure([]byte(errBody("rate_limit_error", "workspace spend limit reached"))).Code; got != hostabi.FailQuota {
		t.Errorf("spend limit mid-stream: %s, want quota_exhausted", got)
	}
}

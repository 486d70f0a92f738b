// Package openai is a provider.Provider for OpenAI-compatible Chat
// Completions servers: OpenAI itself, vLLM, llama.cpp, Ollama, LM Studio and
// the many proxies that speak the same wire format.
//
// The client always streams (server-sent events) so text reaches watchers
// as it arrives, and asks for usage in the final chunk. Parse, the stream
// parser, is exported so it can be used and measured on its own.
//
// Every failure is a *provider.Error with a normalised code: HTTP 429 is
// rate_limit (quota_exhausted when the body says the quota or billing limit
// is spent), 529, 503 and "overloaded" are overloaded, other 5xx server,
// 401/403 auth, a 4xx that mentions the context length context_length,
// other 4xx bad_request, timeouts timeout, connection failures transport,
// and a stream that breaks or ends before [DONE] stream. Retry-After (in
// seconds or as an HTTP date) and retry-after-ms become RetryAfter in
// milliseconds.
package openai

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Client. The zero value talks to api.openai.com
// without a key; ConfigFromEnv fills it from the usual variables.
type Config struct {
	// BaseURL is the API root, up to and including /v1
	// (http://localhost:11434/v1 for Ollama). Default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer KEY". Empty sends none,
	// which local servers accept.
	APIKey string
	// Model is used when the request names none.
	Model string
	// HTTPClient sends the requests. Default: a client without an overall
	// timeout, since a long answer may stream for minutes; IdleTimeout
	// bounds silence instead.
	HTTPClient *http.Client
	// Headers are added to every request, and may replace the defaults
	// (Azure wants "api-key" instead of Authorization, for example).
	Headers http.Header
	// MaxTokens caps answers when the request sets no cap (0: the server's
	// default).
	MaxTokens int
	// MaxTokensField names the cap's JSON field: "max_tokens" (default,
	// understood by every compatible server) or "max_completion_tokens"
	// (required by OpenAI's reasoning models).
	MaxTokensField string
	// IdleTimeout fails a request with code timeout when the server sends
	// nothing (not even a keep-alive comment) for this long, waiting for
	// the headers included. 0 means 5 minutes; negative disables it.
	IdleTimeout time.Duration
	// TopOfMindRole is the role of the message that carries
	// Request.TopOfMind: "user" (default), "system" or "developer". See
	// Client.Complete for why user is the default.
	TopOfMindRole string
	// OmitStreamOptions leaves out stream_options.include_usage, for old
	// servers that refuse unknown fields. Usage is then usually zero.
	OmitStreamOptions bool
}

// ConfigFromEnv returns a Config read from OPENAI_BASE_URL and
// OPENAI_API_KEY; unset variables leave the defaults.
func ConfigFromEnv() Config { return configFromEnv(os.Getenv) }

func configFromEnv(getenv func(string) string) Config {
	return Config{BaseURL: getenv("OPENAI_BASE_URL"), APIKey: getenv("OPENAI_API_KEY")}
}

// Client is an OpenAI-compatible Chat Completions provider. It is safe for
// concurrent use and keeps no state between requests.
type Client struct {
	url        string
	apiKey     string
	model      string
	http       *http.Client
	headers    http.Header
	maxTokens  int
	maxField   string
	idle       time.Duration
	tomRole    string
	noStreamOp bool
	now        func() time.Time
}

var _ provider.Provider = (*Client)(nil)

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL; use one like https://api.openai.com/v1", cfg.BaseURL)
	}
	c := &Client{
		url:        base + "/chat/completions",
		apiKey:     cfg.APIKey,
		model:      cfg.Model,
		http:       cfg.HTTPClient,
		headers:    cfg.Headers.Clone(),
		maxTokens:  cfg.MaxTokens,
		maxField:   cfg.MaxTokensField,
		idle:       cfg.IdleTimeout,
		tomRole:    cfg.TopOfMindRole,
		noStreamOp: cfg.OmitStreamOptions,
		now:        time.Now,
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.idle == 0 {
		c.idle = 5 * time.Minute
	}
	switch c.maxField {
	case "":
		c.maxField = "max_tokens"
	case "max_tokens", "max_completion_tokens":
	default:
		return nil, fmt.Errorf("openai: MaxTokensField %q is unknown; use max_tokens or max_completion_tokens", cfg.MaxTokensField)
	}
	switch c.tomRole {
	case "":
		c.tomRole = "user"
	case "user", "system", "developer":
	default:
		return nil, fmt.Errorf("openai: TopOfMindRole %q is unknown; use user, system or developer", cfg.TopOfMindRole)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: MaxTokens is %d; use 0 for the server's default or a positive cap", cfg.MaxTokens)
	}
	return c, nil
}

// maxJSONBody bounds a non-streamed answer.
const maxJSONBody = 64 << 20

// Complete sends req and streams the answer. See provider.Provider.
//
// The request carries Request.System as the first message, then the
// conversation, then Request.TopOfMind (lines joined by newlines) as one
// last message, by default with role user. The last message is what a
// model weighs most, and a user message there is accepted by every
// compatible server and chat template, while a system message after the
// first is refused by several templates (Qwen, Mistral, Gemma). Top-of-mind
// lines are not part of the durable conversation, so they are never merged
// into a real message.
//
// Tool calls that the server sent without an id get "call_M_I", where M is
// the number of messages in the request and I the call's position, so ids
// stay unique within a session.
func (c *Client) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	if ctx.Err() != nil {
		return wire.CtxFailure(ctx, &provider.Response{})
	}
	body, err := c.encode(req)
	if err != nil {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Message: err.Error()}, Err: err}
	}

	h := http.Header{}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	for k, vs := range c.headers {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	out, err := wire.Do(ctx, wire.Post{
		URL: c.url, Body: body, Header: h, Client: c.http, Idle: c.idle, Now: c.now,
		HTTPFailure: httpFailure,
		// Not the API's error object (a model it does not have) but a web
		// server's page: the URL is wrong.
		NotFound: notFoundHint(c.url),
		NoEvents: "; check the base URL, which should end in /v1",
		Read: func(resp *http.Response, r io.Reader) (*provider.Response, error) {
			if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
				b, err := io.ReadAll(io.LimitReader(r, maxJSONBody))
				if err != nil {
					return nil, wire.ReadFailure(err)
				}
				return parseJSON(b, onDelta)
			}
			return Parse(r, onDelta)
		},
	})
	if err != nil {
		return out, err
	}
	for i := range out.ToolCalls {
		if out.ToolCalls[i].ID == "" {
			out.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", len(req.Messages), i)
		}
	}
	return out, nil
}

// notFoundHint says, after a 404 from a web server rather than the API,
// what is most likely wrong when the URL's path has no /v1 (a base URL
// given without it). The message already names the URL.
func notFoundHint(u string) string {
	if strings.Contains(u, "/v1/") {
		return "; check the base URL"
	}
	return "; check the base URL: OpenAI-compatible servers serve the API under /v1, e.g. http://localhost:11434/v1"
}

// Package anthropic is a provider.Provider for the Anthropic Messages API
// (POST /v1/messages), and for proxies that speak the same wire format.
//
// The client always streams (server-sent events) so text reaches watchers
// as it arrives. Parse, the stream parser, is exported so it can be used
// on its own.
//
// The conversation is mapped to Messages turns: user messages become user
// text, assistant messages text and tool_use blocks, and consecutive tool
// results one user turn of tool_result blocks. Consecutive turns of the
// same role are merged, as the API wants roles to alternate, and
// Request.TopOfMind goes last as a user text block.
//
// Every failure is a *provider.Error with a normalised code: HTTP 429 is
// rate_limit (quota_exhausted when the message says the spend or usage
// limit is reached or the credit balance is spent, which is not worth
// retrying), 529 and 503 overloaded, other 5xx server, 401/403 auth, a 400
// that says the prompt is too long context_length, other 4xx bad_request,
// timeouts timeout, connection failures transport, and a stream that
// breaks or ends before message_stop stream. An error event in the stream
// is classified by its type. Retry-After (in seconds or as an HTTP date)
// and retry-after-ms become RetryAfter in milliseconds.
package anthropic

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/internal/wire"
	"github.com/wagent/wagent/hostabi"
)

const (
	// DefaultBaseURL is used when Config.BaseURL is empty.
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultVersion is the anthropic-version header sent when
	// Config.Version is empty.
	DefaultVersion = "2023-06-01"
	// DefaultMaxTokens caps answers when neither the request nor the
	// Config sets a cap; the API requires one.
	DefaultMaxTokens = 4096
)

// Config configures a Client. ConfigFromEnv fills it from the usual
// variables.
type Config struct {
	// BaseURL is the API root, without /v1 (a trailing /v1 is tolerated).
	// Default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as the x-api-key header. Empty sends none, for
	// proxies that add it themselves.
	APIKey string
	// Model is used when the request names none.
	Model string
	// MaxTokens caps answers when the request sets no cap. 0 means
	// DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests. Default: a client without an overall
	// timeout, since a long answer may stream for minutes; IdleTimeout
	// bounds silence instead.
	HTTPClient *http.Client
	// Version is the anthropic-version header. Default DefaultVersion.
	Version string
	// IdleTimeout fails a request with code timeout when the server sends
	// nothing (not even a ping) for this long, waiting for the headers
	// included. 0 means 5 minutes; negative disables it.
	IdleTimeout time.Duration
}

// ConfigFromEnv returns a Config read from ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL; unset variables leave the defaults.
func ConfigFromEnv() Config { return configFromEnv(os.Getenv) }

func configFromEnv(getenv func(string) string) Config {
	return Config{BaseURL: getenv("ANTHROPIC_BASE_URL"), APIKey: getenv("ANTHROPIC_API_KEY")}
}

// Client is an Anthropic Messages provider. It is safe for concurrent use
// and keeps no state between requests.
type Client struct {
	url       string
	apiKey    string
	model     string
	maxTokens int
	http      *http.Client
	version   string
	idle      time.Duration
	now       func() time.Time
}

var _ provider.Provider = (*Client)(nil)

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultBaseURL
	}
	base = strings.TrimSuffix(base, "/v1")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base URL %q is not an http(s) URL; use one like %s", cfg.BaseURL, DefaultBaseURL)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: MaxTokens is %d; use 0 for the default (%d) or a positive cap", cfg.MaxTokens, DefaultMaxTokens)
	}
	c := &Client{
		url:       base + "/v1/messages",
		apiKey:    cfg.APIKey,
		model:     cfg.Model,
		maxTokens: cfg.MaxTokens,
		http:      cfg.HTTPClient,
		version:   strings.TrimSpace(cfg.Version),
		idle:      cfg.IdleTimeout,
		now:       time.Now,
	}
	if c.maxTokens == 0 {
		c.maxTokens = DefaultMaxTokens
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.version == "" {
		c.version = DefaultVersion
	}
	if c.idle == 0 {
		c.idle = 5 * time.Minute
	}
	return c, nil
}

// Complete sends req and streams the answer. See provider.Provider.
//
// Request.System is the system prompt; Request.MaxTokens, when set,
// replaces Config.MaxTokens. Tool calls that the server sent without an id
// get "toolu_M_I", where M is the number of messages in the request and I
// the call's position, so ids stay unique within a session.
func (c *Client) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	if ctx.Err() != nil {
		return wire.CtxFailure(ctx, &provider.Response{})
	}
	body, err := c.encode(req)
	if err != nil {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Message: err.Error()}, Err: err}
	}

	h := http.Header{"Anthropic-Version": {c.version}}
	if c.apiKey != "" {
		h.Set("x-api-key", c.apiKey)
	}
	out, err := wire.Do(ctx, wire.Post{
		URL: c.url, Body: body, Header: h, Client: c.http, Idle: c.idle, Now: c.now,
		HTTPFailure: httpFailure,
		NotFound:    "; check the base URL",
		NoEvents:    "; check the base URL",
		Read: func(_ *http.Response, r io.Reader) (*provider.Response, error) {
			return Parse(r, onDelta)
		},
	})
	if err != nil {
		return out, err
	}
	for i := range out.ToolCalls {
		if out.ToolCalls[i].ID == "" {
			out.ToolCalls[i].ID = fmt.Sprintf("toolu_%d_%d", len(req.Messages), i)
		}
	}
	return out, nil
}

package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// MaxErrorBody bounds how much of an error response is read.
const MaxErrorBody = 1 << 20

// ErrNoEvents marks a stream that ended without a single event, which
// usually means the URL does not point at the API.
var ErrNoEvents = errors.New("no events")

// Post is one streamed request to a model's HTTP API.
type Post struct {
	URL    string
	Body   []byte
	Header http.Header // added to the request, replacing the defaults
	Client *http.Client
	// Idle fails the request with code timeout when the server sends
	// nothing for this long, waiting for the headers included (≤ 0: never).
	Idle time.Duration
	Now  func() time.Time
	// HTTPFailure normalises a response with a status other than 2xx.
	HTTPFailure func(resp *http.Response, body []byte, now time.Time) *provider.Error
	// NotFound is added to the message of a 404 whose body is not JSON:
	// a web server's page, not the API's error, so the URL is wrong. (The
	// message already names the URL.)
	NotFound string
	// NoEvents is added to the message of a 2xx answer without a single
	// event and not labelled text/event-stream.
	NoEvents string
	// Read reads a 2xx answer from body (the response's, watched by the
	// idle timer). On failure it returns the text read so far, if any.
	Read func(resp *http.Response, body io.Reader) (*provider.Response, error)
}

// Do sends p and reads the answer. A failure is a *provider.Error whose
// message starts with the method and URL ("POST https://…: "), so a wrong
// base URL shows in what the user reads; the caller's cancellation returns
// the text read so far with it, as provider.Provider asks.
func Do(ctx context.Context, p Post) (*provider.Response, error) {
	out, err := do(ctx, p)
	var pe *provider.Error
	if errors.As(err, &pe) && pe.Code != hostabi.FailCanceled && !strings.HasPrefix(pe.Message, "POST ") {
		pe.Message = "POST " + p.URL + ": " + pe.Message
	}
	return out, err
}

func do(ctx context.Context, p Post) (*provider.Response, error) {
	if ctx.Err() != nil {
		return CtxFailure(ctx, &provider.Response{})
	}
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idle *time.Timer
	if p.Idle > 0 {
		idle = time.AfterFunc(p.Idle, func() { cancel(ErrIdle) })
		defer idle.Stop()
	}

	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, p.URL, bytes.NewReader(p.Body))
	if err != nil {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Message: err.Error()}, Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("User-Agent", "wagent")
	for k, vs := range p.Header {
		hreq.Header[http.CanonicalHeaderKey(k)] = vs
	}

	resp, err := p.Client.Do(hreq)
	if err != nil {
		// Named once, by Do, not again as Go's `Post "URL": …`.
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		return Settle(ctx, reqCtx, p.Idle, &provider.Response{},
			TransportFailure(err, hostabi.FailTransport, "cannot reach the server"))
	}
	defer resp.Body.Close()
	// Stop reading at once on cancellation, whatever the transport does.
	stop := context.AfterFunc(reqCtx, func() { resp.Body.Close() })
	defer stop()

	var r io.Reader = resp.Body
	if idle != nil {
		idle.Reset(p.Idle)
		r = &IdleReader{R: r, T: idle, D: p.Idle}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, err := io.ReadAll(io.LimitReader(r, MaxErrorBody))
		if err != nil && ctx.Err() != nil {
			return CtxFailure(ctx, &provider.Response{})
		}
		f := p.HTTPFailure(resp, b, p.Now())
		if resp.StatusCode == http.StatusNotFound && !json.Valid(bytes.TrimSpace(b)) {
			f.Failure.Message += p.NotFound
		}
		return nil, f
	}

	out, err := p.Read(resp, r)
	if err != nil {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); errors.Is(err, ErrNoEvents) && mt != "text/event-stream" {
			err = &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream, Status: resp.StatusCode, Message: fmt.Sprintf(
				"the server answered %d with Content-Type %q and no events%s", resp.StatusCode, mt, p.NoEvents)}, Err: err}
		}
		if out == nil {
			out = &provider.Response{}
		}
		return Settle(ctx, reqCtx, p.Idle, out, err)
	}
	return out, nil
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/internal/sse"
)

// Client speaks the API to a store's owner: over its Unix socket, or over
// TCP with the bearer token.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// APIError is an error the owner answered with.
type APIError struct {
	Status int
	ErrorBody
}

func (e *APIError) Error() string { return e.Message }

// IsCode reports whether err is an APIError with the code.
func IsCode(err error, code string) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == code
}

// NewUnixClient returns a client of the owner listening on the socket.
func NewUnixClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 4,
	}
	return &Client{base: "http://wagent", hc: &http.Client{Transport: tr}}
}

// NewClient returns a client of the owner at base ("http://host:port"),
// presenting token.
func NewClient(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, hc: hc}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(req, out)
}

// send makes a request and decodes its answer into out.
func (c *Client) send(req *http.Request, out any) error {
	method, path := req.Method, req.URL.Path
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e Error
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
			return &APIError{Status: resp.StatusCode, ErrorBody: ErrorBody{Code: CodeInternal, Message: fmt.Sprintf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))}}
		}
		return &APIError{Status: resp.StatusCode, ErrorBody: e.Error}
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func sessionPath(id, verb string) string {
	p := "/v1/sessions/" + url.PathEscape(id)
	if verb != "" {
		p += "/" + verb
	}
	return p
}

// Health asks whether the owner is alive.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Sessions lists the store's sessions, newest activity first.
func (c *Client) Sessions(ctx context.Context) (*Sessions, error) {
	var s Sessions
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Create makes a session.
func (c *Client) Create(ctx context.Context, req *CreateRequest) (*Session, error) {
	var s Session
	if err := c.do(ctx, http.MethodPost, "/v1/sessions", req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Session returns one session.
func (c *Client) Session(ctx context.Context, id string) (*Session, error) {
	var s Session
	if err := c.do(ctx, http.MethodGet, sessionPath(id, ""), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Input queues text with a verb: send, followup, steer or inject.
func (c *Client) Input(ctx context.Context, id, verb, text string) (*Queued, error) {
	return c.Enqueue(ctx, id, verb, Input{Text: text})
}

// Enqueue is Input with the whole body: a client that names its message
// (in.ID) knows it before the answer, to find it in a stream it follows.
func (c *Client) Enqueue(ctx context.Context, id, verb string, in Input) (*Queued, error) {
	var q Queued
	if err := c.do(ctx, http.MethodPost, sessionPath(id, verb), in, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// Cancel ends the session's running or parked turn.
func (c *Client) Cancel(ctx context.Context, id string, req CancelRequest) (*Canceled, error) {
	var out Canceled
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "cancel"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Resume wakes the session's driver.
func (c *Client) Resume(ctx context.Context, id string) (*Woken, error) {
	var out Woken
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "resume"), struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Retry wakes the session's driver, first opening a turn that makes the
// last turn's request again when that turn ended in error (and nothing is
// queued); otherwise it is Resume.
func (c *Client) Retry(ctx context.Context, id string) (*Woken, error) {
	var out Woken
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "resume"), ResumeRequest{Retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Rename names the session ("" takes its name away), recorded in its log.
func (c *Client) Rename(ctx context.Context, id string, req RenameRequest) (*Session, error) {
	var out Session
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "rename"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Delete deletes a session nothing runs (see DELETE /v1/sessions/{id}).
func (c *Client) Delete(ctx context.Context, id string) (*Deleted, error) {
	var out Deleted
	if err := c.do(ctx, http.MethodDelete, sessionPath(id, ""), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Step makes one transition of an idle session.
func (c *Client) Step(ctx context.Context, id string) (*Stepped, error) {
	var out Stepped
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "step"), struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ChangeSettings records new settings the session runs with from its
// next turn.
func (c *Client) ChangeSettings(ctx context.Context, id string, req SettingsRequest) (*Session, error) {
	var out Session
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "settings"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Decide records decisions for waiting calls.
func (c *Client) Decide(ctx context.Context, id string, req DecideRequest) (*Decided, error) {
	var out Decided
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "decisions"), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Events reads a session's log from a seq (limit 0: to the head).
func (c *Client) Events(ctx context.Context, id string, from uint64, limit int) (*Events, error) {
	var out Events
	q := url.Values{"from": {strconv.FormatUint(from, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return &out, c.do(ctx, http.MethodGet, sessionPath(id, "events")+"?"+q.Encode(), nil, &out)
}

// Approvals lists the calls waiting for a person in every session.
func (c *Client) Approvals(ctx context.Context) (*Approvals, error) {
	var out Approvals
	if err := c.do(ctx, http.MethodGet, "/v1/approvals", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ErrStop, returned by a Stream callback, ends the stream without error.
var ErrStop = errors.New("server: stop streaming")

// Stream follows a session from seq from, calling fn for each event, until
// fn returns an error (ErrStop ends it cleanly) or ctx is done. When the
// connection drops (or the owner drops a slow client) it reconnects from
// the last seq it saw, so fn sees every durable event exactly once.
func (c *Client) Stream(ctx context.Context, id string, from uint64, fn func(StreamEvent) error) error {
	return c.StreamFrom(ctx, id, from, nil, fn)
}

// StreamFrom is Stream with connected called once, when the owner first
// accepts the stream and before any event is read: from then on the
// stream misses no live event (a text delta, an op's log line), so input
// sent from connected is seen from its first transition. An error from
// connected ends the stream with that error.
func (c *Client) StreamFrom(ctx context.Context, id string, from uint64, connected func() error, fn func(StreamEvent) error) error {
	last := uint64(0)
	if from > 1 {
		last = from - 1
	}
	for attempt := 0; ; attempt++ {
		err := c.streamOnce(ctx, id, last, &connected, func(ev StreamEvent) error {
			if ev.Event != nil {
				if ev.Event.Seq <= last {
					return nil // seen before a reconnect
				}
				last = ev.Event.Seq
			}
			return fn(ev)
		})
		var ce connectedError
		switch {
		case errors.As(err, &ce):
			return ce.err
		case errors.Is(err, ErrStop):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case IsCode(err, CodeNotFound), IsCode(err, CodeBadRequest), IsCode(err, CodeUnauthorized):
			return err
		case err != nil && attempt >= 20:
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)):
		}
	}
}

// maxStreamEvent bounds one event of a session's stream, well above a
// store's largest event (store.MaxEventBytes) in its JSON envelope.
const maxStreamEvent = 8 << 20

// errDropped: the owner dropped this client for falling behind.
var errDropped = errors.New("server: dropped for falling behind")

// connectedError carries the error of a StreamFrom connected callback.
type connectedError struct{ err error }

func (e connectedError) Error() string { return e.err.Error() }

func (c *Client) streamOnce(ctx context.Context, id string, last uint64, connected *func() error, fn func(StreamEvent) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+sessionPath(id, "stream"), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(last, 10))
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e Error
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		return &APIError{Status: resp.StatusCode, ErrorBody: e.Error}
	}
	if f := *connected; f != nil {
		*connected = nil
		if err := f(); err != nil {
			return connectedError{err}
		}
	}
	// Events are read as the server-sent events standard says, so that a
	// proxy that reframes the stream does not change what is read.
	rd := sse.NewReader(resp.Body, maxStreamEvent)
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(e.Data)) == 0 {
			continue // a keep-alive
		}
		var ev StreamEvent
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			return fmt.Errorf("server: bad stream event: %v", err)
		}
		if ev.Kind == "dropped" {
			return errDropped
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return io.ErrUnexpectedEOF
}

package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/sse"
)

// RetryAfter reads how long the server asks to wait, in milliseconds:
// retry-after-ms (milliseconds) first, then Retry-After as seconds or as an
// HTTP date. A date is measured from the response's Date header when it has
// one, so a skewed local clock does not distort it. 0 means no advice.
func RetryAfter(h http.Header, now time.Time) int64 {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return clampMS(math.Ceil(ms))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
			return 0
		}
		return clampMS(math.Ceil(s * 1000))
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		now = d
	}
	if wait := t.Sub(now); wait > 0 {
		return clampMS(math.Ceil(float64(wait) / float64(time.Millisecond)))
	}
	return 0
}

// clampMS keeps absurd advice (a date in the year 9999) representable.
func clampMS(ms float64) int64 {
	const max = float64(30 * 24 * time.Hour / time.Millisecond)
	if ms > max || math.IsNaN(ms) {
		return int64(max)
	}
	return int64(ms)
}

// ErrIdle is the cancel cause when the server sends nothing for IdleTimeout.
var ErrIdle = errors.New("idle timeout")

// TransportFailure normalises an error from sending the request or reading
// the body: a context deadline or network timeout is a timeout, anything
// else a transport (before the response) or stream (while reading) failure.
func TransportFailure(err error, code hostabi.FailureCode, what string) *provider.Error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		code = hostabi.FailTimeout
	}
	return &provider.Error{Failure: hostabi.Failure{Code: code, Message: fmt.Sprintf("%s: %v", what, err)}, Err: err}
}

// Settle settles a streamed request's error: the caller's cancellation wins
// (with the text so far), then its deadline, then the idle timeout (reqCtx
// cancelled with ErrIdle after idle without a byte), then err itself.
func Settle(ctx, reqCtx context.Context, idle time.Duration, partial *provider.Response, err error) (*provider.Response, error) {
	if ctx.Err() != nil {
		return CtxFailure(ctx, partial)
	}
	if errors.Is(context.Cause(reqCtx), ErrIdle) {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailTimeout, Message: fmt.Sprintf(
			"the server sent nothing for %s; raise the idle timeout if the model thinks that long", idle)}, Err: err}
	}
	return nil, err
}

// ReadFailure normalises an error from reading a response's body: a line
// or event over the limit, or a broken read, is a stream failure; a
// timeout is a timeout.
func ReadFailure(err error) *provider.Error {
	if errors.Is(err, sse.ErrTooLong) {
		return &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailStream, Message: err.Error()}, Err: err}
	}
	return TransportFailure(err, hostabi.FailStream, "reading the stream")
}

// CtxFailure reports the caller's context ending. Cancellation returns the
// partial answer, as provider.Provider asks; a deadline is a timeout.
func CtxFailure(ctx context.Context, partial *provider.Response) (*provider.Response, error) {
	cause := context.Cause(ctx)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailTimeout, Message: "the request's deadline passed: " + cause.Error()}, Err: cause}
	}
	return partial, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled, Message: cause.Error()}, Err: cause}
}

// IdleReader re-arms the idle timer T (to D) whenever bytes arrive from R.
type IdleReader struct {
	R io.Reader
	T *time.Timer
	D time.Duration
}

// Read reads from R and re-arms the timer.
func (r *IdleReader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	if n > 0 {
		r.T.Reset(r.D)
	}
	return n, err
}

package ops

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Retry answers request-error: it retries a failed model request in the
// same step after a delay, or lets the turn end in error.
//
// Config (defaults in brackets):
//
//	attempts:           retries per step [3]
//	initial_ms:         the first delay [1000]
//	max_ms:             the longest computed delay [30000]
//	jitter:             ± fraction of the delay [0.2]
//	max_retry_after_ms: the longest Retry-After honoured; a server asking
//	                    for longer is not retried [60000]
//
// Every delay is at most a day (hostabi.MaxRetryDelayMS), and so are the
// config's delays (the host checks the config at load).
//
// Not retried: auth, bad_request, quota_exhausted and context_length
// failures (another attempt would fail the same way) and cancellations.
// The budget is the host's count of retry/scheduled events in this step,
// so it survives restarts. Jitter is derived from the session, turn, step
// and attempt, not from a random source, so a replay waits the same.
func Retry() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:    "retry",
			Version: "1.0.0",
			ConfigSchema: strictSchema(`"attempts":{"type":"integer","minimum":0,"maximum":100},` +
				`"initial_ms":{"type":"integer","minimum":0,"maximum":86400000},"max_ms":{"type":"integer","minimum":0,"maximum":86400000},` +
				`"jitter":{"type":"number","minimum":0,"maximum":1},"max_retry_after_ms":{"type":"integer","minimum":0,"maximum":86400000}`),
		},
		RequestError: retry,
	}
}

type retryConfig struct {
	Attempts        *int     `json:"attempts"`
	InitialMS       *int64   `json:"initial_ms"`
	MaxMS           *int64   `json:"max_ms"`
	Jitter          *float64 `json:"jitter"`
	MaxRetryAfterMS *int64   `json:"max_retry_after_ms"`
}

type retryPolicy struct {
	attempts                    int
	initial, max, maxRetryAfter int64
	jitter                      float64
}

var retryCache configCache[retryPolicy]

func parseRetry(raw []byte) (retryPolicy, error) {
	var c retryConfig
	if err := decodeConfig(raw, &c); err != nil {
		return retryPolicy{}, fmt.Errorf("retry: %v", err)
	}
	p := retryPolicy{attempts: 3, initial: 1000, max: 30000, jitter: 0.2, maxRetryAfter: 60000}
	if c.Attempts != nil {
		p.attempts = *c.Attempts
	}
	if c.InitialMS != nil {
		p.initial = *c.InitialMS
	}
	if c.MaxMS != nil {
		p.max = *c.MaxMS
	}
	if c.Jitter != nil {
		p.jitter = *c.Jitter
	}
	if c.MaxRetryAfterMS != nil {
		p.maxRetryAfter = *c.MaxRetryAfterMS
	}
	if p.attempts < 0 || p.initial < 0 || p.max < 0 || p.jitter < 0 || p.jitter > 1 || p.maxRetryAfter < 0 {
		return p, fmt.Errorf("retry: attempts, initial_ms, max_ms and max_retry_after_ms must not be negative, jitter must be within 0..1")
	}
	return p, nil
}

func retry(c *pdk.Call) error {
	p, err := retryCache.get(c.RawConfig(), parseRetry)
	if err != nil {
		return err
	}
	fv := c.View.Failure
	switch fv.Failure.Code {
	case hostabi.FailAuth, hostabi.FailBadRequest, hostabi.FailQuota, hostabi.FailContextLength, hostabi.FailCanceled:
		return nil
	}
	if fv.Retries >= p.attempts {
		return nil
	}
	delay := backoff(p, fv.Retries, jitterSeed(&c.View))
	if ra := fv.Failure.RetryAfter; ra > 0 {
		if ra > p.maxRetryAfter {
			c.Log(1, "retry: the server asks to wait "+strconv.FormatInt(ra, 10)+" ms, over max_retry_after_ms; not retrying")
			return nil
		}
		delay = ra
	}
	// Jitter can take a delay past max_ms; the host takes none over a day.
	delay = min(delay, hostabi.MaxRetryDelayMS)
	c.Retry(time.Duration(delay) * time.Millisecond)
	return nil
}

// backoff is initial·2^n capped at max, moved by up to ±jitter, where u in
// [0,1) picks the point in the jitter range.
func backoff(p *retryPolicy, n int, u float64) int64 {
	d := float64(p.initial) * math.Pow(2, float64(n))
	if d > float64(p.max) {
		d = float64(p.max)
	}
	d *= 1 + p.jitter*(2*u-1)
	if d < 0 {
		d = 0
	}
	return int64(d)
}

// jitterSeed is a number in [0,1) fixed by where the retry happens.
func jitterSeed(v *hostabi.View) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d/%d", v.Session, v.Turn, v.Step, v.Failure.Retries)
	return float64(h.Sum64()>>11) / float64(1<<53)
}

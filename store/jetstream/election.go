package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Waits between the tries of a read that found no stream leader: the first,
// doubling, at most the last.
const (
	electionBackoff    = 100 * time.Millisecond
	electionBackoffMax = time.Second
)

// JetStream API error codes (nats-server's jetstream_errors_generated.go)
// that mean the stream or the cluster has no leader to answer right now.
const (
	codeClusterNotAvail  = 10008 // JSClusterNotAvailErr: "JetStream system temporarily unavailable"
	codeClusterNotLeader = 10009 // JSClusterNotLeaderErr
	codeStreamOffline    = 10118 // JSStreamOfflineErr
)

// leaderless reports whether err, from a request made under ctx, says that
// nobody leads the stream right now, as during an election: the request's
// own timeout ran out while ctx did not, nobody listened, a pull went
// unanswered, or the server said the cluster is not available. Once ctx is
// done, nothing is.
func leaderless(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, natsjs.ErrNoStreamResponse) ||
		errors.Is(err, natsjs.ErrNoHeartbeat) {
		return true
	}
	var lost errLost
	if errors.As(err, &lost) {
		return true
	}
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case codeClusterNotAvail, codeClusterNotLeader, codeStreamOffline:
			return true
		}
	}
	return false
}

// reading runs read, which must change nothing on the server, again while
// its error says the stream has no leader (see leaderless), waiting
// electionBackoff, doubling up to electionBackoffMax, between tries. It
// stops trying once Options.ElectionWait has passed since the first, so a
// read fails at most about ElectionWait plus one request's Timeout after it
// started; and at once when ctx is done.
//
// Only reads come here. An append whose reply was lost may have committed,
// so publishing it again could write it twice or be refused as a conflict
// with itself; telling which needs the session read back, and Append
// leaves that to its caller (its error says the outcome is unknown).
func (l *Log) reading(ctx context.Context, read func() error) error {
	deadline := time.Now().Add(l.opts.ElectionWait)
	wait := electionBackoff
	for {
		err := read()
		if !leaderless(ctx, err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w (no stream leader answered for %v, Options.ElectionWait)", err, l.opts.ElectionWait)
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (while waiting for a stream leader: %w)", err, ctx.Err())
		}
		wait = min(2*wait, electionBackoffMax)
	}
}

// request bounds one request to the server by Options.Timeout (and by ctx),
// so that a request nobody answers fails in time for reading to try again.
func (l *Log) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.opts.Timeout)
}

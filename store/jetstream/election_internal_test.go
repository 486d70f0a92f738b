package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store"
)

// TestLeaderless checks which errors a read tries again across an election:
// those that say nobody answers for the stream right now, never once the
// caller's context is done, and never an answer about the session itself.
func TestLeaderless(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(live)
	cancel()
	api := func(code natsjs.ErrorCode) error {
		return fmt.Errorf("head of s: %w", &natsjs.APIError{Code: 503, ErrorCode: code, Description: "x"})
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"request timed out", live, fmt.Errorf("head of s: %w", context.DeadlineExceeded), true},
		{"nats timeout", live, nats.ErrTimeout, true},
		{"no responders", live, fmt.Errorf("read s: %w", nats.ErrNoResponders), true},
		{"no stream response", live, natsjs.ErrNoStreamResponse, true},
		{"pull lost", live, fmt.Errorf("read s: records from stream message 3: %w", errLost{natsjs.ErrNoHeartbeat}), true},
		{"cluster not available", live, api(10008), true},
		{"not the leader", live, api(10009), true},
		{"stream offline", live, api(10118), true},
		{"caller's context done", done, fmt.Errorf("head of s: %w", context.DeadlineExceeded), false},
		{"caller's context done, no responders", done, nats.ErrNoResponders, false},
		{"caller cancelled", live, context.Canceled, false},
		{"no such message", live, api(natsjs.JSErrCodeMessageNotFound), false},
		{"stream not found", live, api(natsjs.JSErrCodeStreamNotFound), false},
		{"wrong last sequence", live, api(natsjs.JSErrCodeStreamWrongLastSequence), false},
		{"not found", live, fmt.Errorf("%w: head of s", store.ErrNotFound), false},
		{"corrupt", live, fmt.Errorf("%w: s", store.ErrCorrupt), false},
		{"nil", live, nil, false},
		{"other", live, errors.New("boom"), false},
	} {
		if got := leaderless(c.ctx, c.err); got != c.want {
			t.Errorf("%s: leaderless(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

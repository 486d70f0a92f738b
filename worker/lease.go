package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A lease is one worker's claim on one session: a key in the bus's bucket,
// created only if absent, rewritten (compare-and-set on its revision)
// every third of the TTL while the worker drives, deleted when it is done.
// The bucket's TTL removes a key nobody rewrites, so a dead worker's
// leases end on their own, timed by the server's clock alone.
//
// The revision of the create is the lease's epoch. Revisions are the
// bucket's stream sequences, so a later lease on a session always has a
// higher epoch than any earlier one: the writer ids in a session's log,
// which carry the epoch, show the order in which leases were held.

// lease is a held lease.
type lease struct {
	b       *Bus
	session string
	key     string
	epoch   uint64
	value   []byte

	mu sync.Mutex
	// rev is the revision of the last write; until is when the lease is
	// no longer ours by this process's clock: TTL after the last write
	// was sent, less a margin.
	rev   uint64
	until time.Time
	lost  bool
}

// leaseValue is what a lease key holds, for people reading the bucket.
type leaseValue struct {
	Worker  string    `json:"worker"`
	Session string    `json:"session"`
	Since   time.Time `json:"since"`
}

// heldError: another worker holds the lease; it ends by Until at the
// latest unless renewed.
type heldError struct {
	Holder string
	Until  time.Time
}

func (e *heldError) Error() string {
	return fmt.Sprintf("the lease is held by %s until %s", e.Holder, e.Until.Format(time.RFC3339Nano))
}

// leaseKey is the session id with the two characters a key cannot carry
// (or carry safely: a leading, trailing or doubled '.') written =2E and
// =3A. Ids never contain '=', so no two ids share a key.
func leaseKey(session string) string {
	return strings.NewReplacer(".", "=2E", ":", "=3A").Replace(session)
}

// margin is how much sooner than the server a holder counts its lease as
// gone, so that it stops appending before another can have taken over.
func (b *Bus) margin() time.Duration { return b.ttl / 5 }

// acquire takes the session's lease for holder, or fails with *heldError.
func (b *Bus) acquire(ctx context.Context, session, holder string) (*lease, error) {
	ctx, cancel := withTimeout(ctx, b.o.Timeout)
	defer cancel()
	key := leaseKey(session)
	v, _ := json.Marshal(leaseValue{Worker: holder, Session: session, Since: time.Now().UTC()})
	sent := time.Now()
	rev, err := b.kv.Create(ctx, key, v)
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := b.kv.Get(ctx, key)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
			return nil, &heldError{Holder: "nobody (it just ended)", Until: time.Now()}
		case gerr != nil:
			return nil, fmt.Errorf("lease of %s: %w", session, gerr)
		}
		var lv leaseValue
		json.Unmarshal(e.Value(), &lv)
		return nil, &heldError{Holder: lv.Worker, Until: e.Created().Add(b.ttl)}
	}
	if err != nil {
		return nil, fmt.Errorf("lease of %s: %w", session, err)
	}
	return &lease{b: b, session: session, key: key, epoch: rev, value: v, rev: rev, until: sent.Add(b.ttl - b.margin())}, nil
}

// valid reports whether the lease is still this process's to use.
func (l *lease) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && time.Now().Before(l.until)
}

// renewedUntil returns when the lease lapses by this process's clock.
func (l *lease) renewedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// errLeaseLost: the lease is no longer this worker's (another holds it,
// or it could not be renewed in time).
var errLeaseLost = errors.New("worker: the session's lease was lost")

// renew rewrites the lease, extending it by a TTL. It returns errLeaseLost
// once the lease is not ours any more; other errors are transient (a
// server away) and the next renew tries again while the lease lasts.
func (l *lease) renew(ctx context.Context) error {
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.mu.Unlock()
	if lost {
		return errLeaseLost
	}
	ctx, cancel := withTimeout(ctx, l.b.o.Timeout)
	defer cancel()
	sent := time.Now()
	next, err := l.b.kv.Update(ctx, l.key, l.value, rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// A wrong revision; on a replicated bucket the server may also say
		// so while our previous write is still settling. Look.
		e, gerr := l.b.kv.Get(ctx, l.key)
		if gerr == nil && e.Revision() == rev {
			return fmt.Errorf("renew lease of %s: %w (it is still ours; trying again)", l.session, err)
		}
		if gerr == nil || errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted) {
			l.lose()
			return errLeaseLost
		}
		err = gerr
	}
	if err != nil {
		if !l.valid() {
			l.lose()
			return errLeaseLost
		}
		return fmt.Errorf("renew lease of %s: %w", l.session, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return errLeaseLost
	}
	l.rev, l.until = next, sent.Add(l.b.ttl-l.b.margin())
	return nil
}

func (l *lease) lose() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
}

// release deletes the lease if it is still the revision we wrote, so the
// next wake-up need not wait for it to expire. It fails harmlessly when
// the lease was lost.
func (l *lease) release(ctx context.Context) error {
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.lost = true
	l.mu.Unlock()
	if lost {
		return nil
	}
	ctx, cancel := withTimeout(ctx, l.b.o.Timeout)
	defer cancel()
	return l.b.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
}

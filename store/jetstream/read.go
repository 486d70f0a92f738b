package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store"
)

// tailWalk is how many records Read fetches one by one, following
// Wagent-Prev back from the last record, before it switches to a search and
// a consumer. An exact get is one round trip (about 0.1 ms to a server on
// the same machine); creating a consumer, pulling from it and deleting it
// costs about 3 ms however few records it brings, so a tail of up to a few
// dozen records is cheaper by hand.
const tailWalk = 24

// readPullBytes bounds what one pull of a Read brings at once: a few of
// the largest records, well inside the client's 64 MiB pending limit.
const readPullBytes = 16 << 20

// Read returns events with seq >= from, at most limit of them. See
// store.Log and, for what it costs, the package documentation.
//
// It reads the session's last record first and never returns an event past
// the head that record gives, so a Read sees a prefix of the log as it was
// at one moment. Records are checked against each other on the way (each
// starts where the one before it ended and names it as its previous), so
// records that do not link up are reported as store.ErrCorrupt. A record
// that is gone when Read comes to fetch it means the session was deleted
// while the Read ran (the stream denies deleting single messages), which
// is store.ErrNotFound.
//
// A Read that finds no stream leader starts again, from the last record,
// until one answers (see Options.ElectionWait).
func (l *Log) Read(ctx context.Context, session string, from uint64, limit int) ([]store.Event, error) {
	op := "read " + session
	if err := l.enter(ctx, op, session); err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	var out []store.Event
	err := l.reading(ctx, func() (err error) {
		out, err = l.read(ctx, op, session, from, limit)
		return err
	})
	return out, err
}

// read is one try of Read.
func (l *Log) read(ctx context.Context, op, session string, from uint64, limit int) ([]store.Event, error) {
	last, err := l.lastRecord(ctx, op, session)
	if err != nil {
		return nil, err
	}
	first, end, ok := readRange(from, limit, last.head)
	if !ok {
		return nil, nil
	}

	// The records holding [first, end], newest first, walking back, unless
	// the last record's size says the walk would be long: a session's
	// records are mostly alike (one transition each).
	recs := []record{last}
	budget := tailWalk
	if (last.head-first)/max(last.count, 1) >= tailWalk {
		budget = 0
	}
	for cur := last; cur.first() > first && len(recs) <= budget; {
		prev, err := l.recordAt(ctx, op, session, cur.prev, cur.first()-1)
		if err != nil {
			return nil, err
		}
		if err := follows(session, prev, cur); err != nil {
			return nil, err
		}
		recs = append(recs, prev)
		cur = prev
	}
	slices.Reverse(recs)
	if oldest := recs[0]; oldest.first() > first {
		older, err := l.readForward(ctx, op, session, first, end, oldest, len(recs))
		if err != nil {
			return nil, err
		}
		recs = append(older, recs...)
	}

	out := make([]store.Event, 0, min(end-first+1, 1<<14))
	for _, r := range recs {
		if r.head < first || r.first() > end {
			continue
		}
		if out, err = r.events(session, first, end, out); err != nil {
			return nil, err
		}
	}
	if got := uint64(len(out)); got != end-first+1 {
		return nil, fmt.Errorf("%w: session %s seq %d: missing below head %d", store.ErrCorrupt, session, first+got, last.head)
	}
	return out, nil
}

// readRange turns Read's from and limit into the inclusive seq range to
// return from a session whose head is head; ok is false when it is empty.
func readRange(from uint64, limit int, head uint64) (first, last uint64, ok bool) {
	first = max(from, 1)
	if first > head {
		return 0, 0, false
	}
	last = head
	if limit > 0 && uint64(limit) <= last-first {
		last = first + uint64(limit) - 1
	}
	return first, last, true
}

// follows checks that record next comes right after record prev.
func follows(session string, prev, next record) error {
	switch {
	case next.prev != prev.seq:
		return corrupt(session, next.first(), next.seq, "previous record is stream message %d, found %d", next.prev, prev.seq)
	case prev.head+1 != next.first():
		return corrupt(session, prev.head+1, next.seq, "record starts at seq %d", next.first())
	case prev.base != next.base:
		return corrupt(session, next.first(), next.seq, "creation marker at stream message %d, the previous record says %d", next.base, prev.base)
	}
	return nil
}

// recordAt gets the record at stream sequence seq, which must be one of
// session's, ending at head.
func (l *Log) recordAt(ctx context.Context, op, session string, seq, head uint64) (record, error) {
	rctx, cancel := l.request(ctx)
	m, err := l.stream.GetMsg(rctx, seq)
	cancel()
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		// Deleted under us (the session was deleted since we read its
		// last record), or a hole in the log.
		return record{}, fmt.Errorf("%w: %s: stream message %d (the record ending at seq %d) is gone", store.ErrNotFound, op, seq, head)
	}
	if err != nil {
		return record{}, fmt.Errorf("%s: %w", op, err)
	}
	if m.Subject != l.subject(session) {
		return record{}, corrupt(session, 0, seq, "the previous record is on subject %q", m.Subject)
	}
	return parseRecord(session, 0, m.Sequence, m.Header, m.Data)
}

// readForward returns, oldest first, the records holding the events from
// seq first up to end or up to the record before stop, whichever comes
// first. walked is how many records Read already holds from stop on. It
// finds where to start with locate and streams from there with an
// ephemeral consumer filtered to the session's subject.
func (l *Log) readForward(ctx context.Context, op, session string, first, end uint64, stop record, walked int) ([]record, error) {
	start := stop.base
	if first > 1 {
		var err error
		if start, err = l.locate(ctx, op, session, first, stop.base, stop); err != nil {
			return nil, err
		}
	}
	var out []record
	var prev *record // the record before the next one, the marker included
	// take checks the record at stream sequence seq and keeps it; done
	// reports that Read has what it needs.
	take := func(seq uint64, m natsjs.Msg) (done bool, err error) {
		if seq >= stop.seq {
			if seq > stop.seq {
				return false, fmt.Errorf("%w: %s: stream message %d (the record ending at seq %d) is gone", store.ErrNotFound, op, stop.seq, stop.head)
			}
			if prev != nil {
				return true, follows(session, *prev, stop)
			}
			return true, nil
		}
		want := uint64(0)
		if prev != nil {
			want = prev.head + 1
		}
		r, err := parseRecord(session, want, seq, m.Headers(), m.Data())
		if err != nil {
			return false, err
		}
		switch {
		case prev != nil:
			if err := follows(session, *prev, r); err != nil {
				return false, err
			}
		case r.marker() && seq != start:
			return false, corrupt(session, 0, seq, "a creation marker after the first record")
		case !r.marker() && r.first() > first:
			return false, corrupt(session, first, seq, "the search for seq %d landed on a record starting at seq %d", first, r.first())
		}
		prev = &r
		if r.marker() {
			return false, nil
		}
		out = append(out, r)
		return r.head >= end, nil
	}
	// With a limit, the first pull asks for about as many records as the
	// limit needs, guessed from the size of stop, rather than all of them
	// up to stop.
	guess := 0
	if end < stop.first()-1 {
		guess = int((end-first)/max(stop.count, 1)) + 2
	}
	next := start // the stream sequence to go on from
	for attempt := 0; ; attempt++ {
		done, err := l.consume(ctx, op, session, next, walked, guess, func(seq uint64, m natsjs.Msg) (bool, error) {
			next = seq + 1
			return take(seq, m)
		})
		if err == nil && done {
			return out, nil
		}
		// A pull can go unanswered (sent to a consumer that a cluster has
		// announced but not yet set up): start a new consumer where the
		// records stopped.
		var lost errLost
		if errors.As(err, &lost) && attempt < readRetries && ctx.Err() == nil {
			continue
		}
		if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: records from stream message %d: %w", op, next, err)
	}
}

// readRetries bounds how often readForward starts a new consumer after a
// pull request went unanswered.
const readRetries = 3

// errLost reports a pull request that went unanswered: no heartbeat, no
// responders.
type errLost struct{ err error }

func (e errLost) Error() string { return e.err.Error() }
func (e errLost) Unwrap() error { return e.err }

// consume creates an ephemeral consumer of the session's records from
// stream sequence start and hands each record to take until take reports
// it is done. Each pull asks for at most as many records as the consumer
// counted when it was created, less the walked ones Read holds already
// (and the first for about guess, if guess > 0), with a byte budget, so a
// pull completes as soon as they are delivered instead of waiting for its
// expiry. The consumer is deleted before consume returns.
func (l *Log) consume(ctx context.Context, op, session string, start uint64, walked, guess int, take func(seq uint64, m natsjs.Msg) (bool, error)) (bool, error) {
	cctx, ccancel := l.request(ctx)
	cons, err := l.stream.CreateConsumer(cctx, natsjs.ConsumerConfig{
		FilterSubject:     l.subject(session),
		DeliverPolicy:     natsjs.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		AckPolicy:         natsjs.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 30 * time.Second, // a crashed reader's consumer goes soon
	})
	ccancel()
	if err != nil {
		return false, err
	}
	defer func() {
		// The server would drop the consumer after InactiveThreshold; a
		// stream allows only so many, so do not leave it to that.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.Timeout)
		defer cancel()
		_ = l.stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	pending := int(cons.CachedInfo().NumPending) - walked
	for {
		batch := min(max(pending, 1), readBatch)
		if guess > 0 {
			batch, guess = min(batch, guess), 0
		}
		fctx, cancel := withTimeout(ctx, l.opts.Timeout)
		msgs, err := cons.Fetch(batch,
			natsjs.FetchMaxBytes(readPullBytes),
			natsjs.FetchHeartbeat(readHeartbeat),
			natsjs.FetchContext(fctx))
		if err != nil {
			cancel()
			return false, err
		}
		got := 0
		for m := range msgs.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				cancel()
				return false, err
			}
			if done, err := take(md.Sequence.Stream, m); done || err != nil {
				cancel()
				return done, err
			}
		}
		pending -= got
		err = msgs.Error()
		cancel()
		if err != nil {
			if errors.Is(err, natsjs.ErrNoHeartbeat) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) {
				return false, errLost{err}
			}
			return false, err
		}
		if got == 0 {
			return false, errLost{errors.New("a pull returned no records")}
		}
	}
}

// Pulls of a Read: at most readBatch records or readPullBytes, whichever
// comes first, and a heartbeat so that a pull the server never took is
// noticed in two heartbeats rather than at its expiry.
const (
	readBatch     = 1024
	readHeartbeat = 250 * time.Millisecond
)

// locate finds the stream sequence of the session's record that holds seq
// target. The record at stream sequence lo (the creation marker, whose
// first seq counts as 1) starts at or before target; stop, further on,
// starts after it. Each probe is one get of the subject's first record at
// or after a stream sequence, so the search costs one round trip per step.
//
// It guesses by interpolation (records are mostly alike and sessions
// interleave evenly, so event seqs grow about linearly with stream
// sequences) and bisects every other step, which bounds the worst case at
// twice a binary search: a few probes in a typical session, about
// 2·log2(stop.seq-lo) at worst, whatever the session's length in events.
func (l *Log) locate(ctx context.Context, op, session string, target, lo uint64, stop record) (uint64, error) {
	subj := l.subject(session)
	loFirst := uint64(1)
	hi, hiFirst := stop.seq, stop.first() // exclusive: the record at hi starts after target
	for step := 0; hi-lo > 1; step++ {
		mid := lo + (hi-lo)/2
		if step%2 == 0 {
			// Where target would be if event seqs grew evenly from lo to hi.
			mid = lo + 1 + uint64(float64(hi-lo-1)*float64(target-loFirst)/float64(hiFirst-loFirst))
		}
		mid = min(max(mid, lo+1), hi-1)
		rctx, cancel := l.request(ctx)
		m, err := l.stream.GetMsg(rctx, mid, natsjs.WithGetMsgSubject(subj))
		cancel()
		if err != nil && !errors.Is(err, natsjs.ErrMsgNotFound) {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
		if err != nil || m.Sequence >= hi {
			hi = mid // nothing of the session's in [mid, hi)
			continue
		}
		r, err := parseRecord(session, 0, m.Sequence, m.Header, m.Data)
		if err != nil {
			return 0, err
		}
		switch {
		case r.marker() || r.first() > target:
			hi, hiFirst = r.seq, max(r.first(), loFirst+1)
		case r.head >= target:
			return r.seq, nil // it holds target
		default:
			lo, loFirst = r.seq, r.first()
		}
	}
	return lo, nil
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store"
	natsstore "github.com/wagent/wagent/store/jetstream"
)

// Defaults for BusOptions left zero.
const (
	// DefaultStream is the work-queue stream of wake-ups.
	DefaultStream = "WAGENT_WAKE"
	// DefaultSubject prefixes the wake-up subjects.
	DefaultSubject = "wagent.wake"
	// DefaultBucket is the key-value bucket of leases.
	DefaultBucket = "WAGENT_LEASE"
	// DefaultConsumer is the durable consumer every worker pulls from.
	DefaultConsumer = "WAGENT_WORKERS"
	// DefaultLeaseTTL is how long a lease lasts unrenewed.
	DefaultLeaseTTL = 10 * time.Second
)

// BusOptions configure OpenBus. The zero value uses the defaults above
// with one replica. Every process of a fleet must open the same names.
type BusOptions struct {
	// Stream names the wake-up stream, Subject the prefix of its subjects
	// (Subject.now.TOKEN and Subject.at.TOKEN, TOKEN being the session's
	// subject token as the JetStream store writes it), Bucket the lease
	// bucket and Consumer the workers' durable consumer.
	Stream, Subject, Bucket, Consumer string

	// Replicas is how many servers keep the stream and the bucket when
	// OpenBus creates them (1 to 5; 0 means 1). Existing ones keep theirs.
	Replicas int

	// LeaseTTL is how long a lease lasts without renewal: the bucket's TTL
	// when OpenBus creates it (zero means DefaultLeaseTTL). An existing
	// bucket keeps its own TTL, and every worker uses that one, so a fleet
	// cannot disagree on it.
	LeaseTTL time.Duration

	// Timeout bounds each request when the caller's context has none
	// (default 5s).
	Timeout time.Duration
}

// Bus is what a fleet of workers coordinates through on NATS: a
// work-queue stream of wake-ups (one pending wake-up per session at most,
// a new one replacing the old) with delayed wake-ups as message schedules,
// and a key-value bucket of leases, one key per session. It is safe for
// concurrent use; clients that only wake sessions (a server, wagent run
// --detach) need nothing else of it.
type Bus struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	o      BusOptions
	ttl    time.Duration
}

// OpenBus opens the wake-up stream and the lease bucket on nc, creating
// them if they are missing. The connection stays the caller's.
func OpenBus(ctx context.Context, nc *nats.Conn, o BusOptions) (*Bus, error) {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	if o.Bucket == "" {
		o.Bucket = DefaultBucket
	}
	if o.Consumer == "" {
		o.Consumer = DefaultConsumer
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	switch {
	case o.Replicas < 1 || o.Replicas > 5:
		return nil, fmt.Errorf("%w: worker bus: replicas %d, want 1 to 5", store.ErrInvalid, o.Replicas)
	case o.LeaseTTL < time.Second:
		// The server expires keys on a 250 ms tick; a shorter lease would
		// be mostly tick.
		return nil, fmt.Errorf("%w: worker bus: lease TTL %v, want at least 1s", store.ErrInvalid, o.LeaseTTL)
	case strings.ContainsAny(o.Subject, " \t*>") || strings.HasSuffix(o.Subject, "."):
		return nil, fmt.Errorf("%w: worker bus: subject prefix %q", store.ErrInvalid, o.Subject)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(o.Timeout))
	if err != nil {
		return nil, fmt.Errorf("worker bus: %w", err)
	}
	// A cluster that is still electing its leaders answers with timeouts
	// for a while; so does one where several workers start at once.
	ctx, cancel := withTimeout(ctx, 6*o.Timeout)
	defer cancel()
	b := &Bus{nc: nc, js: js, o: o}
	if err := settle(ctx, o.Timeout, b.ensure); err != nil {
		return nil, err
	}
	if b.ttl < time.Second {
		return nil, fmt.Errorf("%w: worker bus: the lease bucket %s has TTL %v; leases need one of at least 1s (delete the bucket, or name another)", store.ErrInvalid, o.Bucket, b.ttl)
	}
	return b, nil
}

// ensure finds the wake-up stream and the lease bucket, creating what is
// missing. An existing stream or bucket is used as it is: workers starting
// together must not keep rewriting each other's configuration.
func (b *Bus) ensure(ctx context.Context) error {
	o := b.o
	st, err := b.js.Stream(ctx, o.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = b.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        o.Stream,
			Description: "wagent wake-ups: a worker takes one, advances the session until it yields, and acknowledges",
			Subjects:    []string{o.Subject + ".now.*", o.Subject + ".at.*"},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    o.Replicas,
			// One pending wake-up per session is enough: a new one replaces
			// it, and a schedule replaces an older schedule.
			MaxMsgsPerSubject: 1,
			Discard:           jetstream.DiscardOld,
			AllowMsgSchedules: true,
			AllowRollup:       true,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = b.js.Stream(ctx, o.Stream)
		}
	}
	if err != nil {
		return fmt.Errorf("worker bus: wake-up stream %s: %w", o.Stream, err)
	}
	if cfg := st.CachedInfo().Config; cfg.Retention != jetstream.WorkQueuePolicy || !cfg.AllowMsgSchedules {
		return fmt.Errorf("%w: worker bus: stream %s is not a work queue that allows message schedules", store.ErrInvalid, o.Stream)
	}
	b.stream = st
	kv, err := b.js.KeyValue(ctx, o.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      o.Bucket,
			Description: "wagent leases: the worker driving each session",
			TTL:         o.LeaseTTL,
			Replicas:    o.Replicas,
			Storage:     jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = b.js.KeyValue(ctx, o.Bucket)
		}
	}
	if err != nil {
		return fmt.Errorf("worker bus: lease bucket %s: %w", o.Bucket, err)
	}
	kst, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("worker bus: lease bucket %s: %w", o.Bucket, err)
	}
	b.kv, b.ttl = kv, kst.TTL()
	return nil
}

// settle runs op, each try bounded by per, until it succeeds, fails for a
// reason a retry will not change, or ctx ends.
func settle(ctx context.Context, per time.Duration, op func(context.Context) error) error {
	pause := 100 * time.Millisecond
	for {
		tctx, cancel := context.WithTimeout(ctx, per)
		err := op(tctx)
		cancel()
		if err == nil || errors.Is(err, store.ErrInvalid) || ctx.Err() != nil {
			return err
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.Code == 400 {
			return err // a configuration the server refuses
		}
		if sleepCtx(ctx, pause) != nil {
			return err
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// LeaseTTL returns how long a lease lasts unrenewed: the bucket's TTL.
func (b *Bus) LeaseTTL() time.Duration { return b.ttl }

func (b *Bus) nowSubject(session string) string {
	return b.o.Subject + ".now." + natsstore.SessionToken(session)
}

func (b *Bus) atSubject(session string) string {
	return b.o.Subject + ".at." + natsstore.SessionToken(session)
}

// Wake publishes a wake-up for the session: some worker will open it and
// advance it until it yields. Call it after the input or decision that
// needs a drive is durable in the log. A wake-up while one is pending
// replaces it, so wakes coalesce; a wake-up for a session with nothing to
// do costs a worker one open.
func (b *Bus) Wake(ctx context.Context, session string) error {
	if err := store.ValidSessionID(session); err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, b.o.Timeout)
	defer cancel()
	if _, err := b.js.Publish(ctx, b.nowSubject(session), []byte(session)); err != nil {
		return fmt.Errorf("wake session %s: %w", session, err)
	}
	return nil
}

// WakeAt publishes a wake-up that arrives at t: a message schedule
// (nats-server 2.12+) that the server turns into a wake-up when t comes,
// and which survives every worker being gone meanwhile. A later WakeAt for
// the session replaces an earlier one; a Wake in between does not cancel
// it. A t in the past wakes at once.
func (b *Bus) WakeAt(ctx context.Context, session string, t time.Time) error {
	if !time.Now().Before(t) {
		return b.Wake(ctx, session)
	}
	if err := store.ValidSessionID(session); err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, b.o.Timeout)
	defer cancel()
	m := nats.NewMsg(b.atSubject(session))
	m.Header.Set("Nats-Schedule", "@at "+t.UTC().Format(time.RFC3339Nano))
	m.Header.Set("Nats-Schedule-Target", b.nowSubject(session))
	m.Data = []byte(session)
	if _, err := b.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("wake session %s at %s: %w", session, t.Format(time.RFC3339), err)
	}
	return nil
}

// sessionOf returns the session a wake-up is for. Its subject and its
// body both name it, and must agree: the queue keeps one pending wake-up
// per subject, so a body that named another session would drive that one
// while its own wake-ups went on coalescing under a subject that is not
// its own. Anything else on the queue (an empty or oversized body, a
// token no session id encodes to, a body that is not a valid id) names
// no session.
func (b *Bus) sessionOf(msg jetstream.Msg) (string, error) {
	tok, ok := strings.CutPrefix(msg.Subject(), b.o.Subject+".now.")
	if !ok {
		return "", fmt.Errorf("%w: wake-up on subject %q, want %s.now.TOKEN", store.ErrInvalid, msg.Subject(), b.o.Subject)
	}
	id, ok := natsstore.SessionOfToken(tok)
	if !ok {
		return "", fmt.Errorf("%w: wake-up subject token %q encodes no session id", store.ErrInvalid, tok)
	}
	if body := msg.Data(); string(body) != id {
		return "", fmt.Errorf("%w: wake-up for %s carries %.64q", store.ErrInvalid, id, body)
	}
	return id, nil
}

func (b *Bus) interruptSubject(session string) string {
	return b.o.Subject + ".interrupt." + natsstore.SessionToken(session)
}

// Interrupt tells the worker driving the session, if one is, to stop its
// drive at once: how a cancellation recorded elsewhere (wagent cancel, a
// server) reaches a model request or retry wait in progress. It is best
// effort, a plain NATS message that nothing stores: a worker that misses
// it finds the cancellation in the log at its next append. The worker lets
// the session go and wakes it again, so input the cancellation kept runs.
func (b *Bus) Interrupt(ctx context.Context, session string) error {
	if err := store.ValidSessionID(session); err != nil {
		return err
	}
	if err := b.nc.Publish(b.interruptSubject(session), nil); err != nil {
		return fmt.Errorf("interrupt session %s: %w", session, err)
	}
	ctx, cancel := withTimeout(ctx, b.o.Timeout)
	defer cancel()
	return b.nc.FlushWithContext(ctx)
}

// consumer returns the workers' durable consumer: explicit acks, an ack
// wait of one lease (a worker that dies is redelivered about when its
// lease expires; a live one says it is in progress as it renews), no
// delivery limit.
func (b *Bus) consumer(ctx context.Context) (jetstream.Consumer, error) {
	ctx, cancel := withTimeout(ctx, 6*b.o.Timeout)
	defer cancel()
	var c jetstream.Consumer
	err := settle(ctx, b.o.Timeout, func(ctx context.Context) error {
		var err error
		c, err = b.stream.Consumer(ctx, b.o.Consumer)
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		c, err = b.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       b.o.Consumer,
			Description:   "wagent workers",
			FilterSubject: b.o.Subject + ".now.*",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       b.ttl,
			MaxDeliver:    -1,
			// Wake-ups waiting for a lease sit here with a delay; they are
			// not work in progress and must not stall the queue.
			MaxAckPending: 1 << 20,
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			c, err = b.stream.Consumer(ctx, b.o.Consumer)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("worker bus: consumer %s: %w", b.o.Consumer, err)
	}
	return c, nil
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

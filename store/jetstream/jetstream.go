// Package jetstream is a store.Log backend on NATS JetStream: session logs
// that many workers on many machines can append to, each append checked
// against the head its writer last saw, so a second writer of a session
// fails instead of overwriting (see RATIONALE.md in this package).
//
// # Layout
//
// One stream (Options.Stream, "WAGENT_LOG" by default) holds every session,
// one subject per session: Options.Subject, a dot, and the session id with
// '.' written %2E and ':' written %3A (ids never hold '%', so the mapping is
// reversible and no two ids share a subject). With the defaults, session
// "a.b:c" lives on subject "wagent.log.a%2Eb%3Ac".
//
// Each Append is one stream message, a record, holding all its events, one
// encoded event per line. Headers say the session's head after the record
// (Wagent-Head), how many events it holds (Wagent-Count), and the stream
// sequences of the session's previous record (Wagent-Prev) and of its
// creation marker (Wagent-Base). Create writes the marker: a record with no
// events and head 0, so an empty session exists and lists. Delete purges the
// subject. Event seqs stay dense from 1 whatever the stream sequences are.
//
// # Writers
//
// Append publishes its record with Nats-Expected-Last-Subject-Sequence set
// to the stream sequence of the record it builds on, so the server refuses
// it if any other record reached the subject first: of two writers at the
// same head exactly one wins and the other gets store.ErrConflict. The Log
// remembers the last record it saw of each session, so an Append usually
// costs one round trip. After a refusal it looks at the session before it
// reports a conflict, and publishes again (a bounded number of times) if
// the head still matches: the memory was stale, or a replicated stream was
// still finishing the previous record (see RATIONALE.md).
//
// An Append that fails on a timeout or a lost connection may or may not have
// been stored: the server may have taken the message and lost only the
// acknowledgement. It is never half stored. Read the head to find out; an
// Append retried at the old head fails with ErrConflict if the first landed.
//
// Reads (Head, Read, Sessions, Watch's start, the look before an Append)
// are tried again while the stream has no leader, as while a cluster
// elects a new one after losing the old, for up to Options.ElectionWait.
// An Append is not: see above.
//
// # Costs
//
// In round trips to the server (about 0.1 ms each on one machine):
//
//   - Append: one, when this Log saw the session's last record (it
//     remembers the last record of each session it touched); two when it
//     has to look first.
//   - Head: one get of the last record, which transfers that record (at
//     most one append). On a replicated stream the stream leader answers,
//     so Head sees every acknowledged append.
//   - Read from inside the last record: that one get. Within about 24
//     records of the end: one exact get per record, following Wagent-Prev.
//     Further back: a search for the record holding the first wanted seq
//     (interpolating, with every other step a bisection: a probe or two in
//     a typical session, at most about 2·log2 of the stream sequences the
//     session spans), then one ephemeral pull consumer that streams the
//     records from there and is deleted after (about 1–3 ms to set up).
//     No Read scans the session from its start unless it reads from there.
//   - Sessions: the stream's subject list, paged by the server.
//   - Create and Delete: one each, plus one get for Delete.
//
// # Durability
//
// Append returns when the stream has acknowledged the record. What that
// means depends on the stream and the servers, not on this package:
//
//   - File storage, one replica: the record is written to the server's
//     files (the operating system's page cache) before the acknowledgement,
//     so it survives the nats-server process crashing. It survives a power
//     cut or kernel crash only once fsynced: every sync_interval (two
//     minutes by default), or before the acknowledgement when the server
//     runs with sync_interval: always.
//   - File storage, three replicas: the acknowledgement waits for a quorum
//     (two of three) to hold the record in their raft logs. It survives any
//     one server failing, power included; only losing power on a quorum
//     within a sync_interval can lose it, and sync_interval: always closes
//     that too.
//   - Memory storage: nothing reaches a disk. One replica loses everything
//     with its server; three replicas survive one server failing at a time.
//
// Sync cannot make a server fsync (NATS has no such request); it is a round
// trip that returns once the connection has delivered everything sent
// before it, and reports a broken connection. Appends here are synchronous,
// so each is already as durable as the server makes it when Append returns.
// Run with sync_interval: always, three replicas, or both, where Sync must
// mean what store.Log says it means.
//
// # Limits
//
// store.CheckAppend admits up to store.MaxAppendBytes (4 MiB) of events in
// one Append, and the record carries them in one message, so the NATS
// server's max_payload must be at least RequiredMaxPayload: the default of
// 1 MiB is too small. Open refuses a server whose max_payload cannot carry
// the largest append it would accept, rather than fail appends later, and
// creates the stream with a max_msg_size to match. To run on a smaller
// max_payload anyway, lower Options.MaxAppendBytes: appends over it are
// refused with store.ErrInvalid before anything is written.
//
// # Servers
//
// The store, with the workers' bus (package worker) beside it, needs
// nats-server MinServerVersion (2.12.0) or later: the wake-up stream uses
// message schedules, which came with 2.12, and the log stream direct gets
// (2.9). Open reads the version the server sent on connecting (the
// JetStream API level, one request, only when that version does not
// parse) and refuses an older server with one line naming the feature
// missing, the release that has it and how to run one, before it creates
// anything. See requirements in version.go.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store"
)

// Defaults for Options left zero.
const (
	// DefaultStream is the stream that holds the session logs.
	DefaultStream = "WAGENT_LOG"
	// DefaultSubject is the prefix of the session subjects.
	DefaultSubject = "wagent.log"
	// DefaultTimeout bounds each request to the server when the caller's
	// context has no deadline.
	DefaultTimeout = 5 * time.Second
	// DefaultElectionWait bounds how long a read keeps trying while the
	// stream has no leader: longer than a cluster takes to elect one.
	DefaultElectionWait = 30 * time.Second
)

// RequiredMaxPayload is the smallest NATS max_payload that carries the
// largest append store.CheckAppend admits: store.MaxAppendBytes of events,
// a newline between each two, and the record's headers.
const RequiredMaxPayload = store.MaxAppendBytes + store.MaxAppendEvents + headerBudget

// Storage is where the stream keeps its messages.
type Storage string

// Storages. The zero value means FileStorage when Open creates the stream,
// and whatever an existing stream has.
const (
	FileStorage   Storage = "file"
	MemoryStorage Storage = "memory"
)

// Options configures Open. The zero value opens (or creates) the default
// stream with one replica on file storage. Options are plain values, checked
// once by Open.
type Options struct {
	// Stream names the JetStream stream. Empty means DefaultStream.
	Stream string

	// Subject is the subject prefix of the sessions: a session lives on
	// Subject + "." + its token, and the stream captures Subject + ".*".
	// Empty means DefaultSubject. Two stores in one account need two
	// prefixes: streams cannot share subjects.
	Subject string

	// Replicas is how many servers keep the stream when Open creates it
	// (1 to 5). Zero means 1 for a new stream and accepts whatever an
	// existing one has; any other value must match an existing stream.
	Replicas int

	// Storage is the stream's storage when Open creates it. Empty means
	// FileStorage for a new stream and accepts what an existing one has;
	// any other value must match an existing stream.
	Storage Storage

	// MaxAppendBytes caps the encoded events of one Append, counted as
	// store.CheckAppend counts them. Zero means store.MaxAppendBytes, which
	// needs a server max_payload of at least RequiredMaxPayload. A smaller
	// value lets the store run on a server with a smaller max_payload;
	// appends over it fail with store.ErrInvalid and write nothing.
	MaxAppendBytes int

	// Timeout bounds each request to the server when the caller's context
	// has no deadline, and each request of a read whatever the deadline.
	// Zero means DefaultTimeout.
	Timeout time.Duration

	// ElectionWait bounds how long a read (Head, Read, Sessions, Watch's
	// start, the look at the head before an Append) keeps trying while no
	// server leads the stream, as while a cluster elects a new leader
	// after losing one: the read fails at most about ElectionWait plus one
	// Timeout after it started, or when its context is done. Appends are
	// not tried again (see Append). Zero means DefaultElectionWait.
	ElectionWait time.Duration

	// Logger receives what the Log cannot report to a caller: a watch
	// that could not follow other writers' appends. Nil means slog.Default.
	Logger *slog.Logger
}

// Log is the JetStream store.Log. Open it with Open or OpenURL; it is safe
// for concurrent use, and several Logs, in one process or many, may share
// one stream.
type Log struct {
	nc      *nats.Conn
	ownConn bool // opened by OpenURL: Close closes it
	js      natsjs.JetStream
	stream  natsjs.Stream
	opts    Options // normalised by Open
	prefix  string  // opts.Subject + "."
	log     *slog.Logger

	// mu is held shared by every operation and exclusively by Close, so
	// Close waits for operations in flight and none starts after it.
	mu     sync.RWMutex
	closed bool

	tips   tipCache
	hub    hub
	follow follower
}

var _ store.Log = (*Log)(nil)

// Open returns a Log on the stream opts names, creating the stream if it
// does not exist. The connection stays the caller's: Close leaves it open.
//
// An existing stream must be one a log can live in: limits retention with
// no limit that would drop messages (age, count, bytes, per subject),
// capturing the Log's subjects, with a max_msg_size that carries its largest
// append, and without direct gets if it is replicated (a follower would
// answer reads with a head it has not caught up to). Open says which setting
// is wrong rather than change a stream someone else configured.
//
// A stream Open creates with one replica allows direct gets. Whoever scales
// it to three replicas must turn allow_direct off in the same edit, and
// restart the processes that had it open: they keep using direct gets.
// Likewise, whoever deletes the stream and creates it again must restart
// them: stream sequences start again, and a Log's memory of each session's
// last record would point at other records.
//
// A server older than MinServerVersion is refused first, with
// store.ErrInvalid (see "Servers" in the package documentation).
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Log, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: open jetstream store: nil connection", store.ErrInvalid)
	}
	opts, err := opts.normalise()
	if err != nil {
		return nil, err
	}
	js, err := natsjs.New(nc, natsjs.WithDefaultTimeout(opts.Timeout))
	if err != nil {
		return nil, fmt.Errorf("open jetstream store: %w", err)
	}
	if err := checkServer(ctx, nc, js); err != nil {
		return nil, err
	}
	need := int64(opts.MaxAppendBytes + store.MaxAppendEvents + headerBudget)
	if mp := nc.MaxPayload(); mp < need {
		return nil, fmt.Errorf("%w: open jetstream store: the server's max_payload is %d bytes, appends of up to %d bytes need %d: set max_payload to at least %d in the server's configuration, or lower Options.MaxAppendBytes to %d",
			store.ErrInvalid, mp, opts.MaxAppendBytes, need, need, max(0, mp-store.MaxAppendEvents-headerBudget))
	}
	st, err := settleStream(ctx, js, opts, int32(need))
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	l := &Log{nc: nc, js: js, stream: st, opts: opts, prefix: opts.Subject + ".", log: logger}
	l.follow.l = l
	return l, nil
}

// normalise fills in defaults and checks every option.
func (o Options) normalise() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w: open jetstream store: %s", store.ErrInvalid, fmt.Sprintf(format, args...))
	}
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if strings.ContainsAny(o.Stream, " \t\r\n.*>/\\") || len(o.Stream) > 255 {
		return bad("stream name %q: no spaces, '.', '*', '>', '/' or '\\', at most 255 bytes", o.Stream)
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	for _, tok := range strings.Split(o.Subject, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return bad("subject prefix %q: want dot-separated tokens without spaces or wildcards", o.Subject)
		}
	}
	if len(o.Subject)+1+3*store.MaxSessionIDLen > 4096 {
		return bad("subject prefix %q is too long", o.Subject)
	}
	if o.Replicas < 0 || o.Replicas > 5 {
		return bad("replicas %d: want 1 to 5 (0 for the default)", o.Replicas)
	}
	switch o.Storage {
	case "", FileStorage, MemoryStorage:
	default:
		return bad("storage %q: want %q or %q", o.Storage, FileStorage, MemoryStorage)
	}
	if o.MaxAppendBytes == 0 {
		o.MaxAppendBytes = store.MaxAppendBytes
	}
	if o.MaxAppendBytes < 0 || o.MaxAppendBytes > store.MaxAppendBytes {
		return bad("max append bytes %d: want 1 to %d (0 for the default)", o.MaxAppendBytes, store.MaxAppendBytes)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return bad("timeout %v: want a positive duration (0 for the default)", o.Timeout)
	}
	if o.ElectionWait == 0 {
		o.ElectionWait = DefaultElectionWait
	}
	if o.ElectionWait < 0 {
		return bad("election wait %v: want a positive duration (0 for the default)", o.ElectionWait)
	}
	return o, nil
}

// settleStream is ensureStream, tried again while the answer is a
// timeout: a cluster still electing the new stream's leader, or several
// processes (a fleet of workers starting together) creating it at once,
// can keep the first tries waiting. Each try is bounded by opts.Timeout,
// all of them by six times that unless ctx says otherwise.
func settleStream(ctx context.Context, js natsjs.JetStream, opts Options, maxMsgSize int32) (natsjs.Stream, error) {
	ctx, cancel := withTimeout(ctx, 6*opts.Timeout)
	defer cancel()
	for {
		tctx, tcancel := context.WithTimeout(ctx, opts.Timeout)
		st, err := ensureStream(tctx, js, opts, maxMsgSize)
		tcancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, natsjs.ErrNoStreamResponse)) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureStream creates the stream, or checks that the existing one can hold
// logs as this package writes them.
func ensureStream(ctx context.Context, js natsjs.JetStream, opts Options, maxMsgSize int32) (natsjs.Stream, error) {
	op := "open jetstream store: stream " + opts.Stream
	st, err := js.Stream(ctx, opts.Stream)
	if errors.Is(err, natsjs.ErrStreamNotFound) {
		replicas := max(opts.Replicas, 1)
		storage := natsjs.FileStorage
		if opts.Storage == MemoryStorage {
			storage = natsjs.MemoryStorage
		}
		st, err = js.CreateStream(ctx, natsjs.StreamConfig{
			Name:              opts.Stream,
			Description:       "wagent session logs (store/jetstream): one subject per session",
			Subjects:          []string{opts.Subject + ".*"},
			Retention:         natsjs.LimitsPolicy,
			MaxMsgs:           -1,
			MaxBytes:          -1,
			MaxMsgsPerSubject: -1,
			MaxMsgSize:        maxMsgSize,
			// Nothing here is ever discarded; should someone add a limit
			// later, refusing new appends is better than dropping old events.
			Discard:  natsjs.DiscardNew,
			Storage:  storage,
			Replicas: replicas,
			// On one replica the only server answers, so direct gets see
			// every acknowledged append and skip the API's JSON; followers of
			// a replicated stream would answer with what they have so far.
			AllowDirect: replicas == 1,
			// Records are removed a whole session at a time, by purge; a
			// single deleted message would be a hole in a log.
			DenyDelete: true,
		})
		if errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, opts.Stream) // another process created it first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := checkStream(st.CachedInfo().Config, opts, maxMsgSize); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", store.ErrInvalid, op, err)
	}
	return st, nil
}

// checkStream reports why cfg cannot hold logs as opts would write them.
func checkStream(cfg natsjs.StreamConfig, opts Options, maxMsgSize int32) error {
	want := opts.Subject + ".*"
	captured := false
	for _, s := range cfg.Subjects {
		if s == want || s == opts.Subject+".>" {
			captured = true
		}
	}
	switch {
	case !captured:
		return fmt.Errorf("its subjects %q do not include %q", cfg.Subjects, want)
	case cfg.Retention != natsjs.LimitsPolicy:
		return fmt.Errorf("retention is %s: a log needs limits retention, which never removes what was read", cfg.Retention)
	case cfg.MaxAge > 0 || cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 || cfg.MaxMsgsPerSubject > 0:
		return fmt.Errorf("it has limits (max age %v, max msgs %d, max bytes %d, max msgs per subject %d) that would drop events", cfg.MaxAge, cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxMsgsPerSubject)
	case cfg.MaxMsgSize > 0 && cfg.MaxMsgSize < maxMsgSize:
		return fmt.Errorf("max_msg_size is %d bytes, appends need %d (or lower Options.MaxAppendBytes)", cfg.MaxMsgSize, maxMsgSize)
	case cfg.Sealed || cfg.Mirror != nil:
		return errors.New("it is sealed or a mirror: it cannot take appends")
	case cfg.DenyPurge:
		return errors.New("it denies purges, which Delete needs")
	case cfg.PersistMode == natsjs.AsyncPersistMode:
		return errors.New("its persist mode is async: appends would be acknowledged before they are stored")
	case cfg.AllowDirect && cfg.Replicas > 1:
		return fmt.Errorf("it allows direct gets on %d replicas: followers would answer reads with stale heads", cfg.Replicas)
	case opts.Replicas != 0 && cfg.Replicas != opts.Replicas:
		return fmt.Errorf("it has %d replicas, the options ask for %d", cfg.Replicas, opts.Replicas)
	case opts.Storage == FileStorage && cfg.Storage != natsjs.FileStorage,
		opts.Storage == MemoryStorage && cfg.Storage != natsjs.MemoryStorage:
		return fmt.Errorf("its storage is %s, the options ask for %s", strings.ToLower(cfg.Storage.String()), opts.Storage)
	}
	return nil
}

// withTimeout bounds ctx by d unless it has a deadline already.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// begin enters an operation: it fails with ErrClosed after Close. The caller
// must call l.mu.RUnlock when it returns nil.
func (l *Log) begin(op string) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return fmt.Errorf("%w: %s", store.ErrClosed, op)
	}
	return nil
}

// enter runs the checks every session operation starts with: the context,
// the id, and Close.
func (l *Log) enter(ctx context.Context, op, session string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := store.ValidSessionID(session); err != nil {
		return err
	}
	return l.begin(op)
}

// subject returns the subject of a valid session id.
func (l *Log) subject(session string) string { return l.prefix + sessionToken(session) }

// Create makes an empty session: it writes the session's creation marker,
// on condition that the subject holds nothing, so of two Creates one wins
// and the other gets store.ErrExists. See store.Log.
func (l *Log) Create(ctx context.Context, session string) error {
	op := "create " + session
	if err := l.enter(ctx, op, session); err != nil {
		return err
	}
	defer l.mu.RUnlock()
	subj := l.subject(session)
	for attempt := 0; ; attempt++ {
		m := &nats.Msg{Subject: subj, Header: markerHeader()}
		ack, err := l.js.PublishMsg(ctx, m, l.unheard(natsjs.WithExpectLastSequencePerSubject(0), natsjs.WithExpectStream(l.opts.Stream))...)
		if err == nil {
			l.tips.put(session, tip{seq: ack.Sequence, head: 0, base: ack.Sequence})
			return nil
		}
		if !isWrongLastSequence(err) {
			return fmt.Errorf("%s: %w", op, err)
		}
		// Refused: something is on the subject, or (replicated streams)
		// a conditional publish to it is in process. Look.
		_, gerr := l.stream.GetLastMsgForSubject(ctx, subj)
		if !errors.Is(gerr, natsjs.ErrMsgNotFound) {
			return fmt.Errorf("%w: %s", store.ErrExists, op)
		}
		// Still empty. Another Create's record may be on its way; but the
		// stream leader also refuses while it counts an earlier conditional
		// publish to the subject as in process, and one whose proposal was
		// lost (a server killed under it) stays counted until the leader
		// changes. An empty subject is never reported as existing.
		if attempt >= createRetries {
			return fmt.Errorf("%s: the server refuses to write to the empty subject %s (%v); a conditional publish to it is still in process at the stream leader, which a leader change clears", op, subj, err)
		}
		if err := pause(ctx, attempt+1); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
}

// Delete removes a session by purging its subject, in one request. See
// store.Log. Two Deletes racing for one session may both succeed: a purge
// is unconditional, so the second purges nothing and cannot tell.
func (l *Log) Delete(ctx context.Context, session string) error {
	op := "delete " + session
	if err := l.enter(ctx, op, session); err != nil {
		return err
	}
	defer l.mu.RUnlock()
	subj := l.subject(session)
	// Any message on the subject, even one that does not decode, means the
	// session is there to delete.
	if _, err := l.stream.GetLastMsgForSubject(ctx, subj); err != nil {
		if errors.Is(err, natsjs.ErrMsgNotFound) {
			return fmt.Errorf("%w: %s", store.ErrNotFound, op)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	l.tips.drop(session)
	if err := l.stream.Purge(ctx, natsjs.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Append adds events after expectedHead, atomically: they travel in one
// record, published on condition that the session's last record is the one
// at expectedHead. See store.Log and the package documentation.
func (l *Log) Append(ctx context.Context, session string, expectedHead uint64, events ...store.Event) (uint64, error) {
	op := "append to " + session
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	enc, err := store.CheckAppend(session, expectedHead, events)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, b := range enc {
		total += len(b)
	}
	if total > l.opts.MaxAppendBytes {
		return 0, fmt.Errorf("%w: %s is %d bytes encoded, this store takes at most %d in one append (Options.MaxAppendBytes; the server's max_payload is %d)",
			store.ErrInvalid, op, total, l.opts.MaxAppendBytes, l.nc.MaxPayload())
	}
	payload, err := joinEvents(session, enc)
	if err != nil {
		return 0, err
	}
	if err := l.begin(op); err != nil {
		return 0, err
	}
	defer l.mu.RUnlock()
	count := uint64(len(enc))
	newHead := expectedHead + count

	t, remembered := l.tips.get(session)
	for attempt := 0; ; attempt++ {
		if !remembered || t.head != expectedHead {
			used := t.seq
			if t, err = l.freshTip(ctx, op, session, expectedHead); err != nil {
				return 0, err
			}
			if t.seq == used && attempt > 0 {
				// Refused although the record we built on is still the
				// last: the server has not finished with the record before
				// it (see isWrongLastSequence). Give it a moment.
				if err := pause(ctx, attempt); err != nil {
					return 0, fmt.Errorf("%s: %w", op, err)
				}
			}
		}
		ack, err := l.publish(ctx, session, t, newHead, count, payload)
		if err == nil {
			l.tips.put(session, tip{seq: ack.Sequence, head: newHead, base: t.base})
			l.hub.notify(session, ack.Sequence, newHead)
			return newHead, nil
		}
		if !isWrongLastSequence(err) {
			l.tips.drop(session)
			if isTooLarge(err) {
				return 0, fmt.Errorf("%w: %s: the server refused %d bytes: %v", store.ErrInvalid, op, len(payload), err)
			}
			// The server may have stored the record and lost only the
			// acknowledgement (a leader killed after it replicated the
			// record, before it replied): the caller must read the head
			// to know. That is also why an append is not tried again
			// across an election as reads are: a second publish of a
			// record that committed would be refused as a conflict with
			// itself.
			return 0, fmt.Errorf("%s at head %d may or may not have committed (read the head to know): %w", op, expectedHead, err)
		}
		// Refused: what this Log remembered was stale, another writer got
		// there first (the next look says so), or the server was not done
		// with the previous record yet.
		if attempt == casRetries {
			return 0, fmt.Errorf("%w: %s at head %d: the server refused %d times in a row: %v", store.ErrConflict, op, expectedHead, casRetries+1, err)
		}
		remembered = false
	}
}

// createRetries bounds how often Create publishes again while the subject
// stays empty: about two seconds of pauses (see pause).
const createRetries = 200

// casRetries bounds how often Append publishes again after a refusal that
// the session's head does not explain.
const casRetries = 8

// pause waits a little longer on each attempt: 100 µs, doubling, at most
// 10 ms.
func pause(ctx context.Context, attempt int) error {
	d := min(100*time.Microsecond<<min(attempt-1, 7), 10*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// publish writes the record of count events ending at head after tip t.
func (l *Log) publish(ctx context.Context, session string, t tip, head, count uint64, payload []byte) (*natsjs.PubAck, error) {
	m := &nats.Msg{Subject: l.subject(session), Header: appendHeader(head, count, t.seq, t.base), Data: payload}
	return l.js.PublishMsg(ctx, m, l.unheard(natsjs.WithExpectLastSequencePerSubject(t.seq), natsjs.WithExpectStream(l.opts.Stream))...)
}

// unheard adds to a publish's options that it is sent again, every
// unheardWait, while nobody listens on its subject: until the request's
// context ends (after Options.Timeout when the caller gives no deadline),
// and for no longer than Options.ElectionWait. A "no responders" answer
// means no stream received the message, so sending it again cannot store
// it twice; the client library does so twice, half a second in all, which
// a cluster still telling its servers about a new stream's subjects can
// outlast. A publish that went unanswered is never sent again (see
// Append).
func (l *Log) unheard(opts ...natsjs.PublishOpt) []natsjs.PublishOpt {
	return append(opts, natsjs.WithRetryWait(unheardWait), natsjs.WithRetryAttempts(int(l.opts.ElectionWait/unheardWait)))
}

// unheardWait is the pause before a publish nobody heard is sent again.
const unheardWait = 250 * time.Millisecond

// freshTip reads the session's last record from the server and checks that
// the session is at expectedHead.
func (l *Log) freshTip(ctx context.Context, op, session string, expectedHead uint64) (tip, error) {
	var t tip
	err := l.reading(ctx, func() (err error) {
		t, err = l.lastTip(ctx, op, session)
		return err
	})
	if err != nil {
		return tip{}, err
	}
	if t.head != expectedHead {
		return tip{}, fmt.Errorf("%w: %s: head is %d, expected %d", store.ErrConflict, op, t.head, expectedHead)
	}
	return t, nil
}

// lastTip reads the session's last record and remembers it.
func (l *Log) lastTip(ctx context.Context, op, session string) (tip, error) {
	r, err := l.lastRecord(ctx, op, session)
	if err != nil {
		return tip{}, err
	}
	return tip{seq: r.seq, head: r.head, base: r.base}, nil
}

// lastRecord gets the session's last record: ErrNotFound if the subject is
// empty, ErrCorrupt if what is there is not a record of it.
func (l *Log) lastRecord(ctx context.Context, op, session string) (record, error) {
	rctx, cancel := l.request(ctx)
	m, err := l.stream.GetLastMsgForSubject(rctx, l.subject(session))
	cancel()
	if err != nil {
		if errors.Is(err, natsjs.ErrMsgNotFound) {
			l.tips.drop(session)
			return record{}, fmt.Errorf("%w: %s", store.ErrNotFound, op)
		}
		return record{}, fmt.Errorf("%s: %w", op, err)
	}
	r, err := parseRecord(session, 0, m.Sequence, m.Header, m.Data)
	if err != nil {
		l.tips.drop(session)
		return record{}, err
	}
	l.tips.put(session, tip{seq: r.seq, head: r.head, base: r.base})
	return r, nil
}

// isWrongLastSequence reports whether the server refused a publish on its
// Nats-Expected-Last-Subject-Sequence: the subject's last record is another
// one (10071), or, on a replicated stream, the leader is still processing a
// conditional publish to the subject (10164). The second is not always a
// conflict: nats-server 2.15.2 acknowledges a record before it forgets that
// the record was in process (jetstream_cluster.go, "Clear expected per
// subject state after processing"), so a writer that appends again at once
// can be refused although its expected sequence is right. Callers look at
// the session again before they call a refusal a conflict.
func isWrongLastSequence(err error) bool {
	var apiErr *natsjs.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant
}

// isTooLarge reports whether a publish was refused for its size, by the
// client (the server's max_payload) or by the stream (its max_msg_size).
func isTooLarge(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var apiErr *natsjs.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == natsjs.JSErrCodeStreamMessageExceedsMaximum
}

// Head returns the session's head: one get of its last record. See
// store.Log.
func (l *Log) Head(ctx context.Context, session string) (uint64, error) {
	op := "head of " + session
	if err := l.enter(ctx, op, session); err != nil {
		return 0, err
	}
	defer l.mu.RUnlock()
	var r record
	err := l.reading(ctx, func() (err error) {
		r, err = l.lastRecord(ctx, op, session)
		return err
	})
	if err != nil {
		return 0, err
	}
	return r.head, nil
}

// Sessions lists every session id, sorted: the stream's subjects under the
// prefix, decoded. See store.Log. A subject under the prefix that no
// session id encodes to is reported as store.ErrCorrupt.
func (l *Log) Sessions(ctx context.Context) ([]string, error) {
	op := "list sessions"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := l.begin(op); err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	var info *natsjs.StreamInfo
	err := l.reading(ctx, func() (err error) {
		rctx, cancel := l.request(ctx)
		defer cancel()
		info, err = l.stream.Info(rctx, natsjs.WithSubjectFilter(l.prefix+"*"))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	ids := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		id, ok := sessionOfToken(strings.TrimPrefix(subj, l.prefix))
		if !ok || !strings.HasPrefix(subj, l.prefix) {
			return nil, fmt.Errorf("%w: %s: subject %q of stream %s names no session", store.ErrCorrupt, op, subj, l.opts.Stream)
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// Watch returns a channel of the session's heads after each append that
// commits, by this Log or any other on the stream. See store.Log.
//
// Appends made through this Log are announced as soon as they return.
// Appends by other Logs arrive through one ordered consumer per Log, which
// receives only the headers of every record in the stream while at least
// one watch is open, and is removed when the last one stops. Watch waits
// until that consumer is in place, so every append that commits after
// Watch returns is announced; if the consumer cannot be created, the watch
// still sees this Log's own appends, the failure goes to Options.Logger,
// and the next Watch tries again.
func (l *Log) Watch(session string) (<-chan uint64, func()) {
	ch, stop, live := l.hub.watch(session)
	if !live {
		return ch, stop
	}
	l.follow.acquire()
	var once sync.Once
	return ch, func() {
		stop()
		once.Do(l.follow.release)
	}
}

// Sync is a round trip to the server: it returns when the connection has
// delivered everything sent before it. Appends are acknowledged one by one,
// so each is already as durable as the stream and servers make it (see the
// package documentation); Sync adds no fsync, which NATS cannot request.
func (l *Log) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := l.begin("sync"); err != nil {
		return err
	}
	defer l.mu.RUnlock()
	ctx, cancel := withTimeout(ctx, l.opts.Timeout)
	defer cancel()
	if err := l.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("sync stream %s: %w", l.opts.Stream, err)
	}
	return nil
}

// Close waits for operations in flight, stops following other writers,
// closes every watch channel and, for a Log from OpenURL, the connection.
// The stream and everything in it stay. A second Close fails with
// ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("%w: close stream %s", store.ErrClosed, l.opts.Stream)
	}
	l.closed = true
	l.follow.close()
	l.hub.close()
	if l.ownConn {
		l.nc.Close()
	}
	return nil
}

// tip is what an Append builds on: the stream sequence of a session's last
// record, the session's head there, and the sequence of its creation
// marker.
type tip struct{ seq, head, base uint64 }

// tipCache remembers the last record this Log saw of each session. It only
// spares a round trip: the server checks every append against the real last
// record, so a stale entry costs a retry, never a wrong write.
type tipCache struct {
	mu sync.Mutex
	m  map[string]tip
}

// maxTips bounds the cache. Past it the cache starts again empty, which is
// cheaper than ordering entries and costs one extra get per session.
const maxTips = 1 << 14

func (c *tipCache) get(session string) (tip, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[session]
	return t, ok
}

func (c *tipCache) put(session string, t tip) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxTips {
		c.m = make(map[string]tip)
	}
	// Never replace a later record with an earlier one: two operations of
	// this Log may finish out of order.
	if old, ok := c.m[session]; ok && old.seq > t.seq {
		return
	}
	c.m[session] = t
}

func (c *tipCache) drop(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, session)
}

package session

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// DriverPhase is what a session's driver is doing. Public status is only
// idle or running: maintenance shows as idle.
type DriverPhase string

// Driver phases.
const (
	DriverIdle        DriverPhase = "idle"
	DriverRunning     DriverPhase = "running"
	DriverMaintenance DriverPhase = "maintenance"
)

// Notification kinds a session sends to its watchers.
const (
	NoteCreated  = "created"
	NoteDisposed = "disposed"
	NoteStatus   = "status"
	NoteEnqueue  = "inbox/enqueue"
	NoteDequeue  = "inbox/dequeue"
	NoteDiscard  = "inbox/discard"
	NoteError    = "error"
	NoteLive     = "live"
)

// Notification is sent to a session's watchers as things happen. It is not
// durable: the log is the record.
type Notification struct {
	Kind    string `json:"kind"`
	Session string `json:"session"`
	// Status is "idle" or "running" (kind status).
	Status string `json:"status,omitempty"`
	// List and IDs name inbox messages (kinds inbox/…).
	List string   `json:"list,omitempty"`
	IDs  []string `json:"ids,omitempty"`
	// Error describes a failure (kind error).
	Error string `json:"error,omitempty"`
	// Live is a machine event (kind live): log events, deltas, op logs.
	Live *engine.Live `json:"live,omitempty"`
}

// ErrBusy: maintenance was asked for while the session was not idle.
var ErrBusy = errors.New("session: busy")

// ErrClosed: the session was closed (disposed).
var ErrClosed = errors.New("session: closed")

// Session drives one session's machine: input arrives through its verbs
// while the agent works, queued prompts drain in one running period,
// cancellation is recorded, and chores run while it is idle. All methods
// are safe for concurrent use.
type Session struct {
	id string
	m  *engine.Machine
	lg *engine.Inbox
	// passive and warn are the config's Passive and Warn.
	passive bool
	warn    func(msg string)

	mu     sync.Mutex
	phase  DriverPhase
	wake   bool // input arrived while running: the drain goes on
	cancel context.CancelFunc
	cause  *event.Cause
	// discardTurn and discardStep are the inbox lengths when the recorded
	// cancellation arrived: only that input is discarded.
	discardTurn, discardStep int
	closed                   bool
	idle                     chan struct{} // closed while the driver is idle
	lastErr                  error
	waiting                  []event.WaitingCall // calls parked for a person, as of the last drain
	summary                  event.Summary       // as of the last time the driver was idle

	// dropInput is the input a CancelInput withdraws with its turn: the
	// abort does not put it back in the inbox.
	dropInput string

	// statusMu orders status changes with their notifications, so
	// watchers see running and idle strictly alternate.
	statusMu sync.Mutex

	watchMu   sync.Mutex
	watchers  map[int]func(Notification)
	nextWatch int
}

// OpenSession opens a session's machine and returns its driver, idle. The
// machine's appends and input from the verbs go through its engine.Inbox,
// which serialises them; the config's Observer, if any, still receives
// live events.
// A turn a process that died left open goes on at the next drain (see
// engine.Machine.Advance); nothing is repaired here.
func OpenSession(ctx context.Context, cfg engine.Config) (*Session, error) {
	return openSession(ctx, cfg, nil)
}

// openSession is OpenSession; with resolve, the session's pipeline,
// provider and model come from its settings once the log is folded
// (engine.OpenWith).
func openSession(ctx context.Context, cfg engine.Config, resolve engine.Resolver) (*Session, error) {
	s := &Session{id: cfg.Session, passive: cfg.Passive, warn: cfg.Warn, phase: DriverIdle, idle: make(chan struct{}), watchers: map[int]func(Notification){}}
	close(s.idle)
	observer := cfg.Observer
	cfg.Observer = func(l engine.Live) {
		if observer != nil {
			observer(l)
		}
		s.notify(Notification{Kind: NoteLive, Live: &l})
	}
	m, err := engine.OpenWith(ctx, cfg, resolve)
	if err != nil {
		return nil, err
	}
	s.m, s.lg = m, m.Inbox()
	s.lg.OnSplice(s.inboxNote)
	s.observe()
	return s, nil
}

// observe takes what the session shows while idle from the machine, which
// it must have to itself (a drain ending, or in exclusive).
func (s *Session) observe() {
	sum := s.m.Summary()
	s.mu.Lock()
	s.waiting, s.summary = sum.Waiting, sum
	s.mu.Unlock()
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// Watch registers fn for notifications. It is called synchronously from
// the goroutine that caused the notification; it must not block, and must
// not call the session's verbs (hand work to another goroutine instead).
// The returned func removes it.
func (s *Session) Watch(fn func(Notification)) (stop func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	id := s.nextWatch
	s.nextWatch++
	s.watchers[id] = fn
	return func() {
		s.watchMu.Lock()
		delete(s.watchers, id)
		s.watchMu.Unlock()
	}
}

// notify calls the watchers. It must be called with s.mu not held.
func (s *Session) notify(n Notification) {
	n.Session = s.id
	s.watchMu.Lock()
	ws := make([]func(Notification), 0, len(s.watchers))
	for _, w := range s.watchers {
		ws = append(ws, w)
	}
	s.watchMu.Unlock()
	for _, w := range ws {
		w(n)
	}
}

// inboxNote turns an appended inbox splice into notifications.
func (s *Session) inboxNote(d *event.InboxSpliced, removed []string) {
	if len(d.Inserted) > 0 {
		ids := make([]string, len(d.Inserted))
		for i, m := range d.Inserted {
			ids[i] = m.ID
		}
		s.notify(Notification{Kind: NoteEnqueue, List: d.List, IDs: ids})
	}
	if d.Removed > 0 {
		kind := NoteDequeue
		if d.Outcome == event.OutcomeCanceled {
			kind = NoteDiscard
		}
		s.notify(Notification{Kind: kind, List: d.List, IDs: removed})
	}
}

// Status returns the public status: "idle" or "running".
func (s *Session) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase == DriverRunning {
		return string(DriverRunning)
	}
	return string(DriverIdle)
}

// Phase returns the driver's phase.
func (s *Session) Phase() DriverPhase {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase
}

// Send queues a prompt for its own turn and wakes the driver.
func (s *Session) Send(ctx context.Context, text string) (string, error) {
	return s.input(ctx, event.ListNextTurn, true, hostabi.InputMessage{Content: text})
}

// Followup is Send: a prompt for a later turn.
func (s *Session) Followup(ctx context.Context, text string) (string, error) {
	return s.Send(ctx, text)
}

// Steer queues input for the next step of the running turn (or a new turn
// if none runs) and wakes the driver.
func (s *Session) Steer(ctx context.Context, text string) (string, error) {
	return s.input(ctx, event.ListNextStep, true, hostabi.InputMessage{Content: text})
}

// Inject queues input for the next step without waking the driver: it is
// seen when something else makes the session run.
func (s *Session) Inject(ctx context.Context, text string) (string, error) {
	return s.input(ctx, event.ListNextStep, false, hostabi.InputMessage{Content: text})
}

// Enqueue queues messages (ids optional) on a list, waking the driver if
// wake.
func (s *Session) Enqueue(ctx context.Context, list string, wake bool, msgs ...hostabi.InputMessage) ([]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	ids, err := s.lg.Enqueue(ctx, list, msgs...)
	if err != nil {
		return nil, err
	}
	if wake {
		s.Wake()
	}
	return ids, nil
}

func (s *Session) input(ctx context.Context, list string, wake bool, msg hostabi.InputMessage) (string, error) {
	ids, err := s.Enqueue(ctx, list, wake, msg)
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Wake makes the driver run: from idle it starts a drain; while running it
// latches, so the running drain picks the new input up before it stops;
// during maintenance the drain starts when maintenance ends.
func (s *Session) Wake() {
	if s.passive {
		return
	}
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.phase != DriverIdle {
		s.wake = true
		s.mu.Unlock()
		return
	}
	s.phase = DriverRunning
	s.wake = false
	s.cause, s.dropInput = nil, ""
	s.idle = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.mu.Unlock()
	// Running is announced before the drain can announce idle.
	s.notify(Notification{Kind: NoteStatus, Status: string(DriverRunning)})
	go s.drain(ctx)
}

// drain runs consecutive turns until nothing applies or the session waits
// for a person, then goes idle. Public status flips to running once when it
// starts and to idle once when it ends.
func (s *Session) drain(ctx context.Context) {
	s.mu.Lock()
	s.lastErr = nil
	s.mu.Unlock()
	turnsBefore := s.m.Turn()
	for {
		_, err := s.m.Run(ctx)
		s.mu.Lock()
		cause, nTurn, nStep, drop := s.cause, s.discardTurn, s.discardStep, s.dropInput
		s.mu.Unlock()
		if cause != nil {
			// Cancelled: record the abort (with a fresh context: the
			// cancellation is what we record).
			if _, aerr := s.m.AbortN(context.Background(), *cause, nTurn, nStep, drop); aerr != nil {
				s.fail(aerr)
			}
			err = nil
		}
		if err != nil {
			s.fail(err)
		}
		s.statusMu.Lock()
		s.mu.Lock()
		if cause == nil && s.cause != nil {
			// A cancellation arrived after Run returned, while the driver
			// still ran: its caller was told it is recorded. Go round once
			// more (ctx is cancelled: Run returns at once) to record it.
			s.mu.Unlock()
			s.statusMu.Unlock()
			continue
		}
		if s.wake && !s.closed && err == nil {
			// Input arrived meanwhile: the drain goes on (after a
			// cancellation, with a fresh context), so the session is never
			// idle with input waiting, not even for an instant a WhenIdle
			// could see.
			s.wake = false
			if cause != nil {
				s.cancel()
				ctx, s.cancel = context.WithCancel(context.Background())
				s.cause, s.dropInput = nil, ""
			}
			s.mu.Unlock()
			s.statusMu.Unlock()
			continue
		}
		// Decided while this drain still owns the machine.
		due := s.m.SnapshotDue()
		sum, le := s.m.Summary(), s.m.LastEnd()
		s.phase = DriverIdle
		s.cancel()
		s.waiting, s.summary = sum.Waiting, sum
		if s.lastErr == nil && le != nil && le.Reason == event.ReasonError && sum.Turns > turnsBefore && !sum.TurnOpen {
			s.lastErr = &TurnError{Turn: le.Turn, Message: le.Error}
		}
		wake := s.wake && !s.closed
		s.wake = false
		s.cause, s.dropInput = nil, ""
		idle := s.idle
		s.mu.Unlock()
		s.notify(Notification{Kind: NoteStatus, Status: string(DriverIdle)})
		close(idle)
		s.statusMu.Unlock()
		if !wake && due {
			// A chore for the maintenance phase, off the hot path; input
			// that arrives meanwhile starts a drain when it ends.
			s.exclusive(func() error {
				if err := s.m.Snapshot(context.Background()); err != nil {
					if s.warn != nil {
						s.warn(fmt.Sprintf("session %s: snapshot: %v", s.id, err))
					}
				}
				return nil
			})
		}
		if wake {
			// Input that arrived with a cancellation starts a new drain.
			s.Wake()
		}
		return
	}
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
	s.notify(Notification{Kind: NoteError, Error: err.Error()})
}

// TurnError is the error of a turn that ended in error (reason "error"):
// the model's requests failed and no op retried, or the attempts ran out.
type TurnError struct {
	Turn    int
	Message string
}

func (e *TurnError) Error() string {
	return fmt.Sprintf("turn %d ended in error: %s", e.Turn, e.Message)
}

// Err returns the error the last drain stopped on: an engine or store
// failure, or a *TurnError when its last turn ended in error.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Cancel stops the running turn: the first cause wins, later ones are
// ignored until the session is idle again. The turn ends "aborted" with the
// cause as data; unless keepInbox the queued input is discarded. On an idle
// session it ends a turn parked for a person and (unless keepInbox)
// discards the inbox. It reports whether this call's cause was the one
// recorded.
func (s *Session) Cancel(ctx context.Context, cause event.Cause, keepInbox bool) (bool, error) {
	s.mu.Lock()
	if s.closed && cause.Kind != event.CauseDisposed {
		s.mu.Unlock()
		return false, ErrClosed
	}
	switch s.phase {
	case DriverRunning:
		if s.cause != nil {
			s.mu.Unlock()
			return false, nil
		}
		c := cause
		s.cause, s.discardTurn, s.discardStep, s.dropInput = &c, 0, 0, ""
		if !keepInbox {
			nt, ns := s.lg.Lists()
			s.discardTurn, s.discardStep = len(nt), len(ns)
		}
		s.cancel()
		s.mu.Unlock()
		return true, nil
	case DriverMaintenance:
		s.mu.Unlock()
		return false, fmt.Errorf("%w: maintenance is running; cancel it through its context", ErrBusy)
	}
	s.mu.Unlock()
	// Idle: end a parked turn and discard input, with the machine to
	// ourselves. With nothing to end or discard (the turn another cause
	// stopped has already ended) this cause is not recorded.
	did := false
	err := s.exclusive(func() error {
		var err error
		discard := -1
		if keepInbox {
			discard = 0
		}
		did, err = s.m.AbortN(ctx, cause, discard, discard, "")
		s.observe()
		return err
	})
	return did && err == nil, err
}

// CancelInput cancels what one input started, and nothing else: a client
// that sent input may stop its own turn, never one another client's input
// opened. While the input is queued it is withdrawn (removed with a
// canceled splice; no turn will claim it). While the turn that claimed it
// is open, that turn ends "aborted" with the cause (the first cause wins,
// as with Cancel); the rest of the inbox is kept, and claimed input other
// than this one goes back to it. Otherwise (the input's turn has ended)
// nothing is done. An id no input of the session has is refused.
//
// The check and the cancellation are one step: no append of the session
// comes between seeing which turn is open and cancelling it, so the turn
// cancelled is the input's even when it was about to end and the next
// one to start.
func (s *Session) CancelInput(ctx context.Context, id string, cause event.Cause) (engine.InputCanceled, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return engine.InputCanceled{}, ErrClosed
		}
		if s.phase == DriverRunning {
			// Lock order: s.mu, then the inbox's (as Cancel's Lists).
			var place engine.InputPlace
			out := engine.InputCanceled{}
			s.lg.Locate(id, func(p engine.InputPlace) {
				place = p
				if !p.Known || p.Queued || p.Turn == 0 {
					return
				}
				out.Turn = p.Turn
				if s.cause == nil {
					c := cause
					s.cause, s.discardTurn, s.discardStep, s.dropInput = &c, 0, 0, id
					s.cancel()
					out.Recorded = true
				}
			})
			s.mu.Unlock()
			if !place.Known {
				return engine.InputCanceled{}, &engine.Refused{Kind: engine.ErrRefused, Reason: fmt.Sprintf("no input %q was sent to session %s", id, s.id)}
			}
			if place.Queued {
				ok, err := s.lg.Withdraw(ctx, id, cause)
				if err != nil || ok {
					return engine.InputCanceled{Withdrawn: ok}, err
				}
				continue // a turn claimed it meanwhile: look again
			}
			return out, nil
		}
		s.mu.Unlock()
		known := false
		s.lg.Locate(id, func(p engine.InputPlace) { known = p.Known })
		if !known {
			return engine.InputCanceled{}, &engine.Refused{Kind: engine.ErrRefused, Reason: fmt.Sprintf("no input %q was sent to session %s", id, s.id)}
		}
		// Idle (a turn may be parked for a person): with the machine to
		// ourselves (after a chore that has it now).
		var out engine.InputCanceled
		err := s.exclusive(func() error {
			var err error
			out, err = s.m.CancelInput(ctx, id, cause)
			s.observe()
			return err
		})
		if errors.Is(err, ErrBusy) {
			continue // a drain started meanwhile: look again
		}
		return out, err
	}
}

// RunMaintenance runs job while the session is idle (compaction and similar
// chores). It refuses with ErrBusy unless the session is idle. Public
// status stays idle; input that arrives meanwhile is queued and starts a
// drain when the job ends.
func (s *Session) RunMaintenance(ctx context.Context, job func(ctx context.Context, log store.Log) error) error {
	return s.exclusive(func() error { return job(ctx, s.lg) })
}

// WhenIdle waits until the driver is idle (after any drain it has started)
// or ctx is done. It returns ctx's error, or the drain's (see Err): an
// engine or store failure, or a *TurnError when the last turn ended in
// error.
func (s *Session) WhenIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		ch := s.idle
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
			same := ch == s.idle
			err := s.lastErr
			s.mu.Unlock()
			if same {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close disposes of the session: a running turn is cancelled with cause
// "disposed" (keeping the inbox), and the driver stops once idle. A turn
// parked for a person is left parked.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.phase == DriverRunning && s.cause == nil {
		// A parked or idle session is left as it is: closing a process is
		// not cancelling its sessions' turns.
		s.cause, s.discardTurn, s.discardStep, s.dropInput = &event.Cause{Kind: event.CauseDisposed}, 0, 0, ""
		s.cancel()
	}
	s.mu.Unlock()
	if err := s.WhenIdle(ctx); err != nil {
		return err
	}
	s.notify(Notification{Kind: NoteDisposed})
	return nil
}

// Inbox returns copies of the two inbox lists as the log has them now.
func (s *Session) Inbox() (nextTurn, nextStep []hostabi.InputMessage) {
	return s.lg.Lists()
}

// Summary returns the session's summary as of the last time its driver
// was idle, with its status now (and, while it runs, the turn it runs).
func (s *Session) Summary() event.Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := s.summary
	if s.phase == DriverRunning {
		sum.Status, sum.Waiting, sum.Error = string(DriverRunning), nil, ""
		// A driver that started with no turn open runs the next one: the
		// turn the log is writing, not the last that ended.
		if !sum.TurnOpen {
			sum.Turns, sum.TurnOpen = sum.Turns+1, true
		}
	}
	return sum
}

// Waiting returns the calls waiting for a person's decision as of the last
// time the driver went idle (empty while it runs).
func (s *Session) Waiting() []event.WaitingCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase == DriverRunning {
		return nil
	}
	return append([]event.WaitingCall(nil), s.waiting...)
}

// Decide records decisions for waiting calls (see engine.Machine.Decide) and, if
// none is left waiting, wakes the driver so the turn goes on. It refuses
// with ErrBusy unless the session is idle.
func (s *Session) Decide(ctx context.Context, ds ...engine.Decision) error {
	if err := s.exclusive(func() error {
		err := s.m.Decide(ctx, ds...)
		s.observe()
		return err
	}); err != nil {
		return err
	}
	if len(s.Waiting()) == 0 {
		s.Wake()
	}
	return nil
}

// ChangePipeline records new settings while the session is idle (see
// engine.Machine.ChangePipeline); the session runs with them once reopened (see
// Host.Reopen).
func (s *Session) ChangePipeline(ctx context.Context, d event.PipelineChanged) error {
	return s.exclusive(func() error { return s.m.ChangePipeline(ctx, d) })
}

// Step makes one transition while the session is idle (its public status
// stays idle) and reports what it left the session in; wagent step is
// this. It refuses with ErrBusy unless the session is idle.
func (s *Session) Step(ctx context.Context) (engine.Outcome, error) {
	var o engine.Outcome
	err := s.exclusive(func() error {
		var err error
		o, err = s.m.Advance(ctx)
		s.observe()
		return err
	})
	return o, err
}

// exclusive runs fn with the machine to itself while the session is idle;
// the public status stays idle. Input that arrives meanwhile starts a drain
// afterwards.
func (s *Session) exclusive(fn func() error) error {
	s.mu.Lock()
	for s.phase == DriverMaintenance && !s.closed {
		// Another chore or decision has the machine: wait for it, rather
		// than refuse a caller that could not know.
		ch := s.idle
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.phase != DriverIdle {
		p := s.phase
		s.mu.Unlock()
		return fmt.Errorf("%w: the session is %s", ErrBusy, p)
	}
	s.phase = DriverMaintenance
	s.idle = make(chan struct{})
	s.mu.Unlock()
	err := fn()
	s.mu.Lock()
	s.phase = DriverIdle
	close(s.idle)
	wake := s.wake
	s.wake = false
	s.mu.Unlock()
	if wake {
		s.Wake()
	}
	return err
}

// Rename records the session's name (session/renamed; see
// engine.Machine.Rename). While a drain runs it is recorded beside it, as
// input is, and the summary shows it once the drain ends.
func (s *Session) Rename(ctx context.Context, name, by string) error {
	err := s.exclusive(func() error {
		err := s.m.Rename(ctx, name, by)
		s.observe()
		return err
	})
	if errors.Is(err, ErrBusy) {
		return s.lg.Rename(ctx, name, by)
	}
	return err
}

// Retry makes the last turn again when it ended in error (see
// engine.Machine.Retry) and wakes the driver to run it. It refuses with
// ErrBusy unless the session is idle.
func (s *Session) Retry(ctx context.Context) (int, error) {
	var turn int
	err := s.exclusive(func() error {
		var err error
		turn, err = s.m.Retry(ctx)
		s.observe()
		return err
	})
	if err != nil {
		return 0, err
	}
	s.Wake()
	return turn, nil
}

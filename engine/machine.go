package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Durability says when the machine makes its appends durable (store.Log.Sync).
type Durability int

const (
	// SyncAtBoundaries syncs before anything leaves the process: before a
	// tool runs (tool/call), before yielding to a person, when a turn ends
	// and when input is acknowledged. The default.
	SyncAtBoundaries Durability = iota
	// SyncEveryAppend syncs after every transition.
	SyncEveryAppend
	// SyncNever leaves durability to the store (tests, benchmarks, stores
	// opened with synchronous writes).
	SyncNever
)

// Config configures a Machine. Log and Session are required. Without a
// Pipeline no op is asked; without a Provider a step that needs the model
// fails with a bad_request attempt saying so (enough for a machine that
// only records input or decisions).
type Config struct {
	Log      store.Log
	Session  string
	Pipeline *Pipeline
	Provider provider.Provider

	// Model and MaxTokens go into each step's request header.
	Model     string
	MaxTokens int
	// PromptParts are the host's own prompt parts (a system prompt the
	// person set), put before the ops' in each step's request header,
	// where their Source records where each came from. Op is set to
	// event.HostOp.
	PromptParts []event.Contribution

	Durability Durability
	// Clock stamps events (default time.Now).
	Clock func() time.Time
	// Sleep waits before a scheduled retry (default: a timer that stops
	// when ctx is done).
	Sleep func(ctx context.Context, d time.Duration) error
	// Observer receives live events. It is called synchronously from the
	// goroutine driving the machine, and from the goroutine that appends
	// input (Enqueue, a Session's verbs) for that input's event: it must be
	// safe for concurrent use and must not block for long.
	Observer func(Live)
	// MaxFaultsPerTurn: an op that faulted this often in a turn is not asked
	// again until the next turn (a guard op's calls are denied). Default 3.
	MaxFaultsPerTurn int
	// MaxAttempts bounds the model requests of one step, whatever the ops
	// say: after that many failed attempts the step and turn end in error.
	// Default 10.
	MaxAttempts int

	// SnapshotEvery: after a drain, the driver snapshots the fold (in its
	// maintenance phase) once this many events were appended since the
	// last snapshot, if the store keeps snapshots. Default 1000; negative
	// never.
	SnapshotEvery int
	// Warn receives what the machine notices and goes on from (a snapshot
	// it did not trust). Default: nowhere.
	Warn func(msg string)

	// Passive sessions record input, decisions and cancellations but never
	// drive (Wake does nothing): a short command that only records, while
	// another process or a later one drives.
	Passive bool

	// Writer names this incarnation: the first transition it appends
	// opens with a session/writer event, and every tool call it starts
	// names it. A call started by another writer and never answered is
	// answered TOOL_OUTCOME_UNKNOWN (or run again when idempotent). Default
	// a fresh id per Open (host, process id and random bits); machines
	// rebuilt within one process for one run may share one.
	Writer string
}

// NewWriterID returns a fresh incarnation id: the host name, the process
// id and random bits.
func NewWriterID() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Live is something streamed to watchers as it happens. Kind "event"
// carries a log event after it was appended; "delta" a piece of streamed
// text; "log" a line an op logged; "error" a fault or refused effect;
// "progress" how far a running call has got (Call, Tool, and Text such as
// "3/10 processing"), which is transient and never logged (see Progress).
// Everything but deltas and progress is published only after the append
// it belongs to.
type Live struct {
	Kind    string       `json:"kind"`
	Session string       `json:"session"`
	Event   *store.Event `json:"event,omitempty"`
	Op      string       `json:"op,omitempty"`
	Text    string       `json:"text,omitempty"`
	Call    string       `json:"call,omitempty"`
	Tool    string       `json:"tool,omitempty"`
}

// Outcome says what Advance or Run left the session in.
type Outcome int

const (
	// Progressed: a transition was appended; call again.
	Progressed Outcome = iota
	// Waiting: the session waits for a person (an approval decision).
	Waiting
	// Idle: nothing applies; the inbox is empty and no turn is open.
	Idle
)

func (o Outcome) String() string {
	switch o {
	case Progressed:
		return "progressed"
	case Waiting:
		return "waiting"
	case Idle:
		return "idle"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Machine runs one session's state machine. It is not safe for concurrent
// use; one goroutine drives it (the driver serialises callers).
type Machine struct {
	cfg Config
	lg  *Inbox
	st  *event.State
	// partial is text a cancelled stream had shown, kept for Abort.
	partial *event.AssistantMessage
	// who is this incarnation's session/writer (its Start set on use).
	who event.SessionWriter
	// snapSeq is the seq of the last snapshot taken or opened from.
	snapSeq uint64
	// stubSeqs holds the seqs of the summarised messages' events, found in
	// the log the first time an op reads one (see loadMessage).
	stubSeqs []uint64
	// cuts finds where a summary may end without rescanning the
	// conversation (compact.go).
	cuts cutCache
}

// Create makes a new session whose log starts with session/created.
func Create(ctx context.Context, log store.Log, session string, info event.SessionCreated, now time.Time) error {
	if err := log.Create(ctx, session); err != nil {
		return err
	}
	data, _ := encode(info)
	_, err := log.Append(ctx, session, 0, store.Event{Type: event.EvSessionCreated, Time: now, Data: data})
	return err
}

// Open folds the session's log and returns a machine ready to advance it.
// A log that breaks an invariant is refused with an error naming the seq.
// A turn a crash interrupted is not repaired here: the next transition
// goes on with it (see Advance).
func Open(ctx context.Context, cfg Config) (*Machine, error) {
	if cfg.Log == nil {
		return nil, errors.New("engine: config needs a Log")
	}
	if cfg.Pipeline == nil {
		cfg.Pipeline, _ = NewPipeline()
	}
	if cfg.Provider == nil {
		cfg.Provider = noProvider{}
	}
	if err := store.ValidSessionID(cfg.Session); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.MaxFaultsPerTurn <= 0 {
		cfg.MaxFaultsPerTurn = 3
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = 1000
	}
	var who event.SessionWriter
	if cfg.Writer == "" {
		cfg.Writer = NewWriterID()
		// Generated ids say where they run; a caller's own id says what it
		// wants to.
		who.Host, _ = os.Hostname()
		who.PID = os.Getpid()
	}
	who.ID = cfg.Writer
	lg, ok := cfg.Log.(*Inbox)
	if !ok {
		lg = newInbox(cfg.Log, cfg.Session, cfg.Clock, cfg.Durability != SyncNever)
		cfg.Log = lg
	}
	m := &Machine{cfg: cfg, lg: lg, st: event.NewState(cfg.Session), who: who}
	if sn, ok := lg.Log.(store.Snapshots); ok {
		st, err := event.OpenSnapshot(ctx, lg.Log, sn, cfg.Session)
		switch {
		case st != nil:
			m.st, m.snapSeq = st, st.Head
		case errors.Is(err, event.ErrSnapshot):
			m.warn("session %s: %v; folding the whole log (a new snapshot follows)", cfg.Session, err)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
	}
	if _, err := m.catchUp(ctx); err != nil {
		return nil, err
	}
	if m.st.Created == nil {
		return nil, fmt.Errorf("engine: session %s has no %s event: %w", cfg.Session, event.EvSessionCreated, store.ErrNotFound)
	}
	lg.init(m.st)
	if lg.live == nil {
		lg.live = m.publish
	}
	return m, nil
}

// reconfigure sets the pipeline, provider and model a machine runs with
// (a host resolving them from the session's settings, after the fold).
func (m *Machine) reconfigure(rc Config) {
	if rc.Pipeline != nil {
		m.cfg.Pipeline = rc.Pipeline
	}
	if rc.Provider != nil {
		m.cfg.Provider = rc.Provider
	}
	if rc.Model != "" {
		m.cfg.Model = rc.Model
	}
	if rc.MaxTokens != 0 {
		m.cfg.MaxTokens = rc.MaxTokens
	}
	if rc.PromptParts != nil {
		m.cfg.PromptParts = rc.PromptParts
	}
}

// State returns a copy of the folded state, safe to keep and read while
// the machine goes on.
func (m *Machine) State() *event.State { return m.st.Clone() }

// Inbox returns the inbox the machine's appends go through: input sent
// through it while the machine runs is folded at its next transition.
func (m *Machine) Inbox() *Inbox { return m.lg }

// Summary is event.Summarize of the machine's state (without copying it),
// with what the pipeline knows: the permission mode of the op that owns
// /mode (its note "mode", else its config's mode, else ask) and, for each
// waiting call whose owner's host can show it (Previewer), what the call
// would change.
func (m *Machine) Summary() event.Summary {
	sum := event.Summarize(m.st)
	sum.Mode = m.mode()
	for i := range sum.Waiting {
		w := &sum.Waiting[i]
		if op, _, ok := m.cfg.Pipeline.Lookup(w.Owner); ok {
			if p, ok := op.(Previewer); ok {
				w.Preview = p.Preview(w.Name, w.Arguments)
			}
		}
	}
	return sum
}

// mode is the permission mode of the op that owns /mode ("" when none
// does).
func (m *Machine) mode() string {
	i, ok := m.cfg.Pipeline.commandOwner("mode")
	if !ok {
		return ""
	}
	op, man := m.cfg.Pipeline.Op(i)
	if v := m.st.Notes[man.Name]["mode"]; v != "" {
		return v
	}
	if c, ok := op.(Configured); ok {
		if raw, ok := hostabi.Field(c.Config(), "mode"); ok {
			if v, err := hostabi.String(raw); err == nil && v != "" {
				return v
			}
		}
	}
	return "ask"
}

// Turn is the number of the last turn started (0 before the first).
func (m *Machine) Turn() int { return m.st.Turn }

// LastEnd returns how the latest closed turn ended (nil before the first).
func (m *Machine) LastEnd() *event.TurnEnd {
	if m.st.LastEnd == nil {
		return nil
	}
	te := *m.st.LastEnd
	return &te
}

// Writer returns this incarnation's id.
func (m *Machine) Writer() string { return m.cfg.Writer }

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// catchUp folds events appended since the machine's head (by itself in
// another incarnation, or by other writers such as Send or a decision). It
// reports whether every event it folded only added input to the inbox.
func (m *Machine) catchUp(ctx context.Context) (onlyInput bool, err error) {
	onlyInput = true
	for {
		evs, err := m.cfg.Log.Read(ctx, m.st.Session, m.st.Head+1, 4096)
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			if err := m.st.Apply(e); err != nil {
				return false, err
			}
			if !isInsertion(e) {
				onlyInput = false
			}
		}
		if len(evs) < 4096 {
			return onlyInput, nil
		}
	}
}

// isInsertion reports whether e only adds input to an inbox list, or
// changes nothing a transition decides on (a session's name): a move
// decided before it still stands after it.
func isInsertion(e store.Event) bool {
	return e.Type == event.EvInboxSpliced && !bytes.Contains(e.Data, []byte(`"removed"`)) || e.Type == event.EvSessionRenamed
}

// Run advances until the session waits for a person or nothing applies.
func (m *Machine) Run(ctx context.Context) (Outcome, error) {
	for {
		o, err := m.Advance(ctx)
		if err != nil || o != Progressed {
			return o, err
		}
	}
}

// Advance makes one transition: a host move, or the hook's ops in pipeline
// order with the first that does not skip winning; its events are appended
// in one atomic append, then published.
//
// Starting a tool call is one transition in two appends: the intent
// (tool/call) is made durable, the owning op runs the call, and its result
// is appended, even if ctx is cancelled meanwhile. A call found started and
// unanswered is one whose run was interrupted (a crash, a lost writer): it
// is answered TOOL_OUTCOME_UNKNOWN, or run again when its tool is
// idempotent. So a crash never reruns a tool that is not idempotent, and
// every entry point (run, resume, step, a server, a worker) behaves the
// same with no separate recovery step.
func (m *Machine) Advance(ctx context.Context) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Progressed, err
	}
	head, err := m.cfg.Log.Head(ctx, m.st.Session)
	if err != nil {
		return Progressed, err
	}
	if head != m.st.Head {
		if _, err := m.catchUp(ctx); err != nil {
			return Progressed, err
		}
	}
	for tries := 0; ; tries++ {
		mv, err := m.decide(ctx)
		if errors.Is(err, ErrStale) && tries < 8 {
			continue // a part it appended early met another writer
		}
		if err != nil {
			return Progressed, err
		}
		if mv.outcome != Progressed {
			m.flushLive(mv)
			return mv.outcome, nil
		}
		err = m.commit(ctx, mv)
		if errors.Is(err, ErrStale) && tries < 8 {
			continue
		}
		if err != nil {
			return Progressed, err
		}
		if mv.start != "" {
			return Progressed, m.runStarted(ctx, mv.start)
		}
		if mv.yield {
			return Waiting, nil
		}
		return Progressed, nil
	}
}

// ErrStale is returned by Advance when other writers changed the state
// each time a move was decided on it (eight times over): without a lease
// several drivers of one session race, and this one lost. Nothing was
// appended for the lost moves; advancing again is safe.
var ErrStale = errors.New("engine: state moved under the transition")

// The size gate. Every move is kept within what every store accepts
// (store.MaxAppendEvents, MaxAppendBytes, MaxEventBytes), measured on the
// encoded events, so an op's answer that would not fit becomes a fault
// instead of an append the store refuses (which would leave the session
// stuck, asking the op again and again).
const (
	// envelopeBytes bounds what the store adds around an event's data.
	envelopeBytes = 256
	// reserveEvents and reserveBytes are kept free of op effects for the
	// host's own events in the same move (a step or turn end, a result).
	reserveEvents = 16
	reserveBytes  = 64 << 10
	// maxDataBytes is the most data one event can carry.
	maxDataBytes = store.MaxEventBytes - envelopeBytes
)

// MaxCallsPerAnswer bounds the tool calls of one assistant answer: an
// answer with more is recorded as a failed attempt, so that a step's
// decisions and results always fit in one append.
const MaxCallsPerAnswer = 64

// move is a decided transition: the events to append and what to do
// after.
type move struct {
	outcome Outcome
	events  []store.Event
	bytes   int
	yield   bool
	// inbox: the move depends on the inbox (a claim, a steer), so input
	// arriving meanwhile means deciding again.
	inbox bool
	// start is the call whose tool/call the move records: it runs right
	// after the append.
	start string
	// run is the call whose result the move records: on a conflict the
	// result is appended again while the call is still unanswered, and the
	// tool is never run twice.
	run string
	// detached moves are appended even if the transition's context was
	// cancelled meanwhile: a tool that started finishes and its result is
	// recorded.
	detached bool
	// live is published after the append: op log lines, fault notices.
	live []Live
	// cursor for stamping turn and step on events
	turn, step int
	now        time.Time
	sync       bool
}

func (m *Machine) newMove() *move {
	s := m.st
	step := 0
	if s.StepOpen {
		step = s.Step
	}
	turn := 0
	if s.TurnOpen {
		turn = s.Turn
	}
	return &move{turn: turn, step: step, now: m.cfg.Clock()}
}

// encode marshals event data. It does not escape <, > and & as HTML (the
// log is not HTML), so a tool result of such characters costs what it
// weighs.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// event builds an event of the move without adding it.
func (mv *move) event(typ string, data any) store.Event {
	b, err := encode(data)
	if err != nil {
		// Every data type here is a plain struct; this is a programming error.
		panic(fmt.Sprintf("engine: encode %s: %v", typ, err))
	}
	return store.Event{Type: typ, Turn: mv.turn, Step: mv.step, Time: mv.now, Data: b}
}

func (mv *move) add(typ string, data any) {
	switch typ {
	case event.EvTurnStart:
		mv.turn = data.(event.TurnStart).Turn
		mv.step = 0
	case event.EvStepStart:
		mv.step = data.(event.StepStart).Step
	case event.EvToolCall, event.EvApprovalRequest, event.EvTurnEnd, event.EvCommandReply:
		mv.sync = true
	}
	mv.push(mv.event(typ, data))
	switch typ {
	case event.EvTurnEnd:
		mv.turn, mv.step = 0, 0
	case event.EvStepEnd:
		mv.step = 0
	}
}

func (mv *move) push(evs ...store.Event) {
	for _, e := range evs {
		mv.events = append(mv.events, e)
		mv.bytes += len(e.Data) + envelopeBytes
	}
}

// room reports whether evs fit in the move, leaving the host's reserve.
func (mv *move) room(evs []store.Event) error {
	n, size := len(mv.events)+len(evs), mv.bytes
	for _, e := range evs {
		if len(e.Data) > maxDataBytes {
			return fmt.Errorf("a %s event of %d bytes is over the store's limit of %d bytes per event", e.Type, len(e.Data)+envelopeBytes, store.MaxEventBytes)
		}
		size += len(e.Data) + envelopeBytes
	}
	if n > store.MaxAppendEvents-reserveEvents {
		return fmt.Errorf("%d events in one append are over the limit of %d", n, store.MaxAppendEvents-reserveEvents)
	}
	if size > store.MaxAppendBytes-reserveBytes {
		return fmt.Errorf("%d bytes in one append are over the limit of %d", size, store.MaxAppendBytes-reserveBytes)
	}
	return nil
}

// commit appends a move. On a conflict it catches up; if only new input
// arrived and the move does not depend on the inbox, it appends the move
// again; a tool's result is appended again while its call is unanswered;
// otherwise it returns ErrStale and the transition is decided again.
// Once the append succeeded, the move is synced and published even if ctx
// is cancelled meanwhile: a committed move is never left half-told.
func (m *Machine) commit(ctx context.Context, mv *move) error {
	if mv.detached {
		ctx = context.WithoutCancel(ctx)
	}
	if m.st.Writer != m.cfg.Writer {
		// This incarnation's first transition: everything after is its own.
		w := store.Event{Type: event.EvSessionWriter, Time: mv.now}
		who := m.who
		who.Start = mv.now
		w.Data, _ = encode(who)
		mv.events = append([]store.Event{w}, mv.events...)
	}
	for {
		// Nothing is appended after a cancelled async phase.
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := m.cfg.Log.Append(ctx, m.st.Session, m.st.Head, mv.events...)
		if errors.Is(err, store.ErrConflict) {
			onlyInput, err := m.catchUp(ctx)
			if err != nil {
				return err
			}
			switch {
			case mv.run != "":
				c := m.st.Call(mv.run)
				if c == nil || c.Done || !c.Started {
					return nil // another writer answered it; the tool ran once
				}
			case !onlyInput || mv.inbox:
				return ErrStale
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("engine: append to session %s: %w", m.st.Session, err)
		}
		for _, e := range mv.events {
			if err := m.st.Apply(e); err != nil {
				return fmt.Errorf("engine: own append refused by the fold (a bug): %w", err)
			}
		}
		ctx = context.WithoutCancel(ctx)
		if m.cfg.Durability == SyncEveryAppend || (m.cfg.Durability == SyncAtBoundaries && mv.sync) {
			if err := m.cfg.Log.Sync(ctx); err != nil {
				return fmt.Errorf("engine: sync session %s: %w", m.st.Session, err)
			}
		}
		for i := range mv.events {
			m.publish(Live{Kind: "event", Event: &mv.events[i]})
		}
		m.flushLive(mv)
		return nil
	}
}

// commitSoFar appends what a move holds so far, for a transition that
// must record something before it acts outside the process (a summary
// request's header before the request is sent). The move goes on, empty,
// at the same place in the turn; a conflict it cannot resolve is
// ErrStale, and the transition is decided again.
func (m *Machine) commitSoFar(ctx context.Context, mv *move) error {
	if err := m.commit(ctx, mv); err != nil {
		return err
	}
	mv.events, mv.bytes, mv.sync = nil, 0, false
	return nil
}

func (m *Machine) flushLive(mv *move) {
	for _, l := range mv.live {
		m.publish(l)
	}
	mv.live = nil
}

func (m *Machine) publish(l Live) {
	if m.cfg.Observer != nil {
		l.Session = m.st.Session
		m.cfg.Observer(l)
	}
}

// decide computes the next transition from the state: the host's own move
// if it has one, otherwise the hook's.
func (m *Machine) decide(ctx context.Context) (*move, error) {
	s := m.st
	mv := m.newMove()
	if !s.TurnOpen {
		if len(s.NextTurn) == 0 && len(s.NextStep) == 0 {
			mv.outcome = Idle
			return mv, nil
		}
		mv.add(event.EvTurnStart, event.TurnStart{Turn: s.Turn + 1})
		m.claim(mv, true)
		return mv, nil
	}
	if len(s.Claimed) > 0 {
		return mv, m.admit(ctx, mv)
	}
	if !s.StepOpen {
		// Before the first step the turn may still take its next-turn
		// item (when a long next-step was claimed in parts).
		boundary := s.Step == 0 && !s.TurnPrompted
		if len(s.NextStep) > 0 || boundary && len(s.NextTurn) > 0 {
			m.claim(mv, boundary)
			return mv, nil
		}
		mv.add(event.EvStepStart, event.StepStart{Turn: s.Turn, Step: s.Step + 1})
		return mv, nil
	}
	switch s.Phase {
	case event.PhaseNeedHeader:
		return mv, m.contribute(ctx, mv)
	case event.PhaseNeedInference:
		return mv, m.infer(ctx, mv)
	case event.PhaseNeedRetry:
		return mv, m.requestError(ctx, mv)
	}
	// PhaseAnswered.
	if len(s.Pending()) > 0 {
		return mv, m.tools(ctx, mv)
	}
	if len(s.Calls) > 0 {
		if s.Concluded {
			m.endTurn(mv, "concluded", m.normalEnd(), nil)
			return mv, nil
		}
		mv.add(event.EvStepEnd, event.StepEnd{Turn: s.Turn, Step: s.Step, Outcome: "tools"})
		return mv, nil
	}
	if len(s.NextStep) > 0 {
		mv.add(event.EvStepEnd, event.StepEnd{Turn: s.Turn, Step: s.Step, Outcome: "steered"})
		return mv, nil
	}
	return mv, m.turnStopping(ctx, mv)
}

func (m *Machine) normalEnd() string {
	if m.st.MaxTokens {
		return event.ReasonMaxTokens
	}
	return event.ReasonCompleted
}

// endTurn closes the open step (if any) and the turn.
func (m *Machine) endTurn(mv *move, stepOutcome, reason string, extra func(*event.TurnEnd)) {
	s := m.st
	if s.StepOpen {
		mv.add(event.EvStepEnd, event.StepEnd{Turn: s.Turn, Step: s.Step, Outcome: stepOutcome})
	}
	te := event.TurnEnd{Turn: s.Turn, Reason: reason}
	if extra != nil {
		extra(&te)
	}
	mv.add(event.EvTurnEnd, te)
}

// claim takes input from the inbox into the turn: next-step, and at a turn
// boundary one next-turn item as well. A claim takes no more than its
// admission can append at once; the rest is claimed next, before the first
// step starts (the turn's next-turn item with the last part), so no inbox
// is too long to admit.
func (m *Machine) claim(mv *move, turnBoundary bool) {
	s := m.st
	mv.inbox = true
	budget := store.MaxAppendBytes - 2*reserveBytes
	fits := func(msg hostabi.InputMessage) bool {
		budget -= len(msg.Content) + len(msg.ID) + envelopeBytes + 64
		return budget >= 0
	}
	n := 0
	for n < len(s.NextStep) && n < MaxCallsPerAnswer {
		// The first always goes: it was appended as one event, so its
		// admission fits on its own.
		if !fits(s.NextStep[n]) && n > 0 {
			break
		}
		n++
	}
	if n > 0 {
		mv.add(event.EvInboxSpliced, event.InboxSpliced{List: event.ListNextStep, Start: 0, Removed: n, Outcome: event.OutcomeClaimed})
	}
	if turnBoundary && len(s.NextTurn) > 0 && (n == 0 || n == len(s.NextStep) && n < MaxCallsPerAnswer && fits(s.NextTurn[0])) {
		mv.add(event.EvInboxSpliced, event.InboxSpliced{List: event.ListNextTurn, Start: 0, Removed: 1, Outcome: event.OutcomeClaimed})
	}
}

// view builds the small view an op is given.
func (m *Machine) view(hook hostabi.Hook, man *hostabi.Manifest) *hostabi.View {
	s := m.st
	v := &hostabi.View{Hook: hook, Session: s.Session, Op: man.Name, Messages: s.MessageCount()}
	if s.TurnOpen {
		v.Turn = s.Turn
		if s.StepOpen {
			v.Step = s.Step
		}
	}
	return v
}

type reader struct {
	m  *Machine
	st *event.State
	op string
}

func (r reader) Message(i int) (hostabi.Message, bool) {
	if i < 0 || i >= r.st.MessageCount() {
		return hostabi.Message{}, false
	}
	if i < r.st.Stubbed {
		return r.m.loadMessage(i)
	}
	return r.st.Messages[i-r.st.Stubbed], true
}

func (r reader) Note(key string) (string, bool) {
	v, ok := r.st.Notes[r.op][key]
	return v, ok
}

// answer is one op's answer at a hook, checked on its own: its notes and
// log lines, and its decisive effects.
type answer struct {
	man      *hostabi.Manifest
	hook     hostabi.Hook
	notes    []hostabi.Effect
	decisive []hostabi.Effect
}

// ask calls one op at a hook. A fault (an error, a trap, an effect that
// fails its own checks) is recorded in the move and reported as faulted;
// nothing of the answer is kept. Otherwise the answer is returned for the
// hook to check against the state and accept (or refuse) as a whole.
func (m *Machine) ask(ctx context.Context, mv *move, i int, view *hostabi.View) (a answer, faulted bool) {
	op, man := m.cfg.Pipeline.Op(i)
	a = answer{man: man, hook: view.Hook}
	effects, err := op.Handle(ctx, view, reader{m: m, st: m.st, op: man.Name})
	if err != nil {
		if ctx.Err() != nil {
			return a, false
		}
		kind, msg := hostabi.FaultError, err.Error()
		var f *hostabi.Fault
		if errors.As(err, &f) {
			kind, msg = f.Kind, f.Message
		}
		m.fault(mv, man.Name, view.Hook, kind, msg)
		return a, true
	}
	for j := range effects {
		e := &effects[j]
		if err := e.Check(view.Hook); err != nil {
			m.fault(mv, man.Name, view.Hook, hostabi.FaultInvalidEffect, fmt.Sprintf("effect %d: %v", j, err))
			return answer{man: man, hook: view.Hook}, true
		}
		switch e.Kind {
		case hostabi.KindNote, hostabi.KindLog:
			a.notes = append(a.notes, *e)
		default:
			a.decisive = append(a.decisive, *e)
		}
	}
	return a, false
}

// accept adds an answer's events to the move, all or nothing: its notes
// and the events the hook made of its decisive effects (evs). Its log
// lines are published after the append. If they would not fit in one
// append, nothing of the answer is added and the op faults (kind limit);
// accept reports whether it added the answer.
func (m *Machine) accept(mv *move, a answer, evs ...store.Event) bool {
	var all []store.Event
	for _, e := range a.notes {
		if e.Kind == hostabi.KindNote {
			all = append(all, mv.event(event.EvOpNote, event.OpNote{Op: a.man.Name, Key: e.Key, Value: e.Value}))
		}
	}
	all = append(all, evs...)
	if err := mv.room(all); err != nil {
		m.fault(mv, a.man.Name, a.hook, hostabi.FaultLimit, "its answer does not fit in the log: "+err.Error())
		return false
	}
	mv.push(all...)
	for _, e := range a.notes {
		if e.Kind == hostabi.KindLog {
			mv.live = append(mv.live, Live{Kind: "log", Op: a.man.Name, Text: e.Text})
		}
	}
	return true
}

// fault records an op/fault in the move; watchers hear of it after the
// append.
func (m *Machine) fault(mv *move, op string, hook hostabi.Hook, kind, msg string) {
	const maxMsg = 4 << 10
	if len(msg) > maxMsg {
		msg = msg[:maxMsg] + "…"
	}
	mv.add(event.EvOpFault, event.OpFault{Op: op, Hook: string(hook), Kind: kind, Message: msg})
	mv.live = append(mv.live, Live{Kind: "error", Op: op, Text: fmt.Sprintf("op %s faulted at %s (%s): %s", op, hook, kind, msg)})
}

// refuse records a decisive effect list the engine will not apply: none of
// it is appended, the fault is.
func (m *Machine) refuse(mv *move, op string, hook hostabi.Hook, format string, args ...any) {
	m.fault(mv, op, hook, hostabi.FaultInvalidEffect, fmt.Sprintf(format, args...))
}

// quarantined reports whether op i faulted too often this turn to be asked.
func (m *Machine) quarantined(name string) bool {
	return m.st.TurnFaults[name] >= m.cfg.MaxFaultsPerTurn
}

// each calls fn for every op declaring hook, in pipeline order, until fn
// returns true.
func (m *Machine) each(hook hostabi.Hook, fn func(i int, man *hostabi.Manifest) bool) {
	p := m.cfg.Pipeline
	for i := 0; i < p.Len(); i++ {
		_, man := p.Op(i)
		if !man.Handles(hook) {
			continue
		}
		if fn(i, man) {
			return
		}
	}
}

type noProvider struct{}

func (noProvider) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Message: "no model provider is configured for this session"}}
}

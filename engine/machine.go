package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wagent/wagent/engine/provider"
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

	Durability Durability
	// Clock stamps events (default time.Now).
	Clock func() time.Time
	// Sleep waits before a scheduled retry (default: a timer that stops
	// when ctx is done).
	Sleep func(ctx context.Context, d time.Duration) error
	// Observer receives live events. It is called synchronously from the
	// goroutine driving the machine and must not block for long.
	Observer func(Live)
	// MaxFaultsPerTurn: an op that faulted this often in a turn is not asked
	// again until the next turn (a guard op's calls are denied). Default 3.
	MaxFaultsPerTurn int
}

// Live is something streamed to watchers as it happens. Kind "event"
// carries a log event after it was appended; "delta" a piece of streamed
// text; "log" a line an op logged; "error" a fault or refused effect.
type Live struct {
	Kind    string       `json:"kind"`
	Session string       `json:"session"`
	Event   *store.Event `json:"event,omitempty"`
	Op      string       `json:"op,omitempty"`
	Text    string       `json:"text,omitempty"`
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
	st  *State
	// partial is text a cancelled stream had shown, kept for Abort.
	partial *AssistantMessage
}

// Create makes a new session whose log starts with session/created.
func Create(ctx context.Context, log store.Log, session string, info SessionCreated, now time.Time) error {
	if err := log.Create(ctx, session); err != nil {
		return err
	}
	data, _ := json.Marshal(info)
	_, err := log.Append(ctx, session, 0, store.Event{Type: EvSessionCreated, Time: now, Data: data})
	return err
}

// Open folds the session's log and returns a machine ready to advance it.
// A log that breaks an invariant is refused with an error naming the seq.
// Open does not repair a turn left open by a process that died; call
// Recover for that.
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
	m := &Machine{cfg: cfg, st: NewState(cfg.Session)}
	if err := m.catchUp(ctx); err != nil {
		return nil, err
	}
	if m.st.Created == nil {
		return nil, fmt.Errorf("engine: session %s has no %s event: %w", cfg.Session, EvSessionCreated, store.ErrNotFound)
	}
	return m, nil
}

// State returns the folded state. It is owned by the machine: read it only
// from the goroutine driving the machine.
func (m *Machine) State() *State { return m.st }

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
// another incarnation, or by other writers such as Send or a decision).
func (m *Machine) catchUp(ctx context.Context) error {
	for {
		evs, err := m.cfg.Log.Read(ctx, m.st.Session, m.st.Head+1, 4096)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := m.st.Apply(e); err != nil {
				return err
			}
		}
		if len(evs) < 4096 {
			return nil
		}
	}
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
// order with the first that does not skip winning; its effects are appended
// in one atomic append, then published.
func (m *Machine) Advance(ctx context.Context) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Progressed, err
	}
	head, err := m.cfg.Log.Head(ctx, m.st.Session)
	if err != nil {
		return Progressed, err
	}
	if head != m.st.Head {
		if err := m.catchUp(ctx); err != nil {
			return Progressed, err
		}
	}
	for tries := 0; ; tries++ {
		mv, err := m.decide(ctx)
		if err != nil {
			return Progressed, err
		}
		if mv.outcome != Progressed {
			return mv.outcome, nil
		}
		err = m.commit(ctx, mv)
		if errors.Is(err, errStale) && tries < 8 {
			continue
		}
		if err != nil {
			return Progressed, err
		}
		if mv.yield {
			return Waiting, nil
		}
		return Progressed, nil
	}
}

// errStale: another writer changed the part of the state a move was
// decided on; decide again.
var errStale = errors.New("engine: state moved under the transition")

// move is a decided transition: the events to append, with the state it
// was decided on.
type move struct {
	outcome Outcome
	events  []store.Event
	yield   bool
	// fp is the state fingerprint the move was decided on; inbox says the
	// move depends on the inbox too (a claim).
	fp    fingerprint
	inbox bool
	// cursor for stamping turn and step on events
	turn, step int
	now        time.Time
	sync       bool
	// detached moves are appended even if the transition's context was
	// cancelled meanwhile: a tool that started finishes and its result is
	// recorded.
	detached bool
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
	return &move{fp: m.fingerprint(), turn: turn, step: step, now: m.cfg.Clock()}
}

func (mv *move) add(typ string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		// Every data type here is a plain struct; this is a programming error.
		panic(fmt.Sprintf("engine: encode %s: %v", typ, err))
	}
	switch typ {
	case EvTurnStart:
		mv.turn = data.(TurnStart).Turn
		mv.step = 0
	case EvStepStart:
		mv.step = data.(StepStart).Step
	case EvToolCall, EvApprovalRequest, EvTurnEnd, EvCommandReply:
		mv.sync = true
	}
	mv.events = append(mv.events, store.Event{Type: typ, Turn: mv.turn, Step: mv.step, Time: mv.now, Data: b})
	switch typ {
	case EvTurnEnd:
		mv.turn, mv.step = 0, 0
	case EvStepEnd:
		mv.step = 0
	}
}

type fingerprint struct {
	turn, step         int
	turnOpen, stepOpen bool
	phase              Phase
	claimed            int
	calls              int
	done, started, dec int
	nextTurn, nextStep int
}

func (m *Machine) fingerprint() fingerprint {
	s := m.st
	f := fingerprint{turn: s.Turn, step: s.Step, turnOpen: s.TurnOpen, stepOpen: s.StepOpen,
		phase: s.Phase, claimed: len(s.Claimed), calls: len(s.Calls),
		nextTurn: len(s.NextTurn), nextStep: len(s.NextStep)}
	for _, c := range s.Calls {
		if c.Done {
			f.done++
		}
		if c.Started {
			f.started++
		}
		if c.Decision != "" || c.Requested {
			f.dec++
		}
	}
	return f
}

func (f fingerprint) sameStep(g fingerprint) bool {
	f.nextTurn, f.nextStep, g.nextTurn, g.nextStep = 0, 0, 0, 0
	return f == g
}

// commit appends a move. On a conflict it catches up and, if the state the
// move was decided on is unchanged (other writers only added input or
// notes), appends it again; otherwise it returns errStale.
func (m *Machine) commit(ctx context.Context, mv *move) error {
	if mv.detached {
		ctx = context.WithoutCancel(ctx)
	}
	for {
		// Nothing is appended after a cancelled async phase.
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := m.cfg.Log.Append(ctx, m.st.Session, m.st.Head, mv.events...)
		if errors.Is(err, store.ErrConflict) {
			if err := m.catchUp(ctx); err != nil {
				return err
			}
			now := m.fingerprint()
			if (mv.inbox && now != mv.fp) || !now.sameStep(mv.fp) {
				return errStale
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
		if m.cfg.Durability == SyncEveryAppend || (m.cfg.Durability == SyncAtBoundaries && mv.sync) {
			if err := m.cfg.Log.Sync(ctx); err != nil {
				return fmt.Errorf("engine: sync session %s: %w", m.st.Session, err)
			}
		}
		for i := range mv.events {
			m.publish(Live{Kind: "event", Event: &mv.events[i]})
		}
		return nil
	}
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
		mv.add(EvTurnStart, TurnStart{Turn: s.Turn + 1})
		m.claim(mv, true)
		return mv, nil
	}
	if len(s.Claimed) > 0 {
		return mv, m.admit(ctx, mv)
	}
	if !s.StepOpen {
		if len(s.NextStep) > 0 {
			m.claim(mv, false)
			return mv, nil
		}
		mv.add(EvStepStart, StepStart{Turn: s.Turn, Step: s.Step + 1})
		return mv, nil
	}
	switch s.Phase {
	case PhaseNeedHeader:
		return mv, m.contribute(ctx, mv)
	case PhaseNeedInference:
		return mv, m.infer(ctx, mv)
	case PhaseNeedRetry:
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
		mv.add(EvStepEnd, StepEnd{Turn: s.Turn, Step: s.Step, Outcome: "tools"})
		return mv, nil
	}
	if len(s.NextStep) > 0 {
		mv.add(EvStepEnd, StepEnd{Turn: s.Turn, Step: s.Step, Outcome: "steered"})
		return mv, nil
	}
	return mv, m.turnStopping(ctx, mv)
}

func (m *Machine) normalEnd() string {
	if m.st.MaxTokens {
		return ReasonMaxTokens
	}
	return ReasonCompleted
}

// endTurn closes the open step (if any) and the turn.
func (m *Machine) endTurn(mv *move, stepOutcome, reason string, extra func(*TurnEnd)) {
	s := m.st
	if s.StepOpen {
		mv.add(EvStepEnd, StepEnd{Turn: s.Turn, Step: s.Step, Outcome: stepOutcome})
	}
	te := TurnEnd{Turn: s.Turn, Reason: reason}
	if extra != nil {
		extra(&te)
	}
	mv.add(EvTurnEnd, te)
}

// claim takes input from the inbox into the turn: all of next-step, and at
// a turn boundary one next-turn item as well.
func (m *Machine) claim(mv *move, turnBoundary bool) {
	s := m.st
	mv.inbox = true
	if n := len(s.NextStep); n > 0 {
		mv.add(EvInboxSpliced, InboxSpliced{List: ListNextStep, Start: 0, Removed: n, Outcome: OutcomeClaimed})
	}
	if turnBoundary && len(s.NextTurn) > 0 {
		mv.add(EvInboxSpliced, InboxSpliced{List: ListNextTurn, Start: 0, Removed: 1, Outcome: OutcomeClaimed})
	}
}

// view builds the small view an op is given.
func (m *Machine) view(hook hostabi.Hook, man *hostabi.Manifest) *hostabi.View {
	s := m.st
	v := &hostabi.View{Hook: hook, Session: s.Session, Op: man.Name, Messages: len(s.Messages)}
	if s.TurnOpen {
		v.Turn = s.Turn
		if s.StepOpen {
			v.Step = s.Step
		}
	}
	return v
}

type reader struct {
	st *State
	op string
}

func (r reader) Message(i int) (hostabi.Message, bool) {
	if i < 0 || i >= len(r.st.Messages) {
		return hostabi.Message{}, false
	}
	return r.st.Messages[i], true
}

func (r reader) Note(key string) (string, bool) {
	v, ok := r.st.Notes[r.op][key]
	return v, ok
}

// ask calls one op at a hook and sorts its answer: notes and logs (kept
// whatever happens), decisive effects, or a fault. A list of only notes and
// logs counts as a skip: deciding a hook takes a decisive effect.
func (m *Machine) ask(ctx context.Context, mv *move, i int, view *hostabi.View) (decisive []hostabi.Effect, faulted bool) {
	op, man := m.cfg.Pipeline.Op(i)
	effects, err := op.Handle(ctx, view, reader{st: m.st, op: man.Name})
	if err != nil {
		if ctx.Err() != nil {
			return nil, false
		}
		kind, msg := hostabi.FaultError, err.Error()
		var f *hostabi.Fault
		if errors.As(err, &f) {
			kind, msg = f.Kind, f.Message
		}
		m.fault(mv, man.Name, view.Hook, kind, msg)
		return nil, true
	}
	var notes []hostabi.Effect
	for j := range effects {
		e := &effects[j]
		if err := e.Check(view.Hook); err != nil {
			m.fault(mv, man.Name, view.Hook, hostabi.FaultInvalidEffect, fmt.Sprintf("effect %d: %v", j, err))
			return nil, true
		}
		switch e.Kind {
		case hostabi.KindNote, hostabi.KindLog:
			notes = append(notes, *e)
		default:
			decisive = append(decisive, *e)
		}
	}
	for _, e := range notes {
		if e.Kind == hostabi.KindNote {
			mv.add(EvOpNote, OpNote{Op: man.Name, Key: e.Key, Value: e.Value})
		} else {
			m.publish(Live{Kind: "log", Op: man.Name, Text: e.Text})
		}
	}
	return decisive, false
}

// fault records an op/fault in the move and tells watchers.
func (m *Machine) fault(mv *move, op string, hook hostabi.Hook, kind, msg string) {
	mv.add(EvOpFault, OpFault{Op: op, Hook: string(hook), Kind: kind, Message: msg})
	m.publish(Live{Kind: "error", Op: op, Text: fmt.Sprintf("op %s faulted at %s (%s): %s", op, hook, kind, msg)})
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

// admit runs the command hook (a lone slash command an op owns) or the
// prompt hook for the claimed batch.
func (m *Machine) admit(ctx context.Context, mv *move) error {
	s := m.st
	batch := make([]hostabi.InputMessage, len(s.Claimed))
	for i, c := range s.Claimed {
		batch[i] = c.InputMessage
	}
	if len(batch) == 1 {
		if name, args, ok := parseCommand(batch[0].Content); ok {
			if i, ok := m.cfg.Pipeline.commandOwner(name); ok {
				_, man := m.cfg.Pipeline.Op(i)
				v := m.view(hostabi.HookCommand, man)
				v.Command = &hostabi.CommandView{Name: name, Args: args}
				if !m.quarantined(man.Name) {
					eff, _ := m.ask(ctx, mv, i, v)
					if len(eff) > 0 {
						var text string
						for _, e := range eff {
							text += e.Text
						}
						mv.add(EvUserMessage, UserMessage{ID: batch[0].ID, Content: batch[0].Content, Command: name})
						mv.add(EvCommandReply, CommandReply{Op: man.Name, Command: name, Text: text})
						m.endTurn(mv, "", ReasonCompleted, nil)
						return ctx.Err()
					}
				}
			}
		}
	}
	decided := false
	m.each(hostabi.HookPrompt, func(i int, man *hostabi.Manifest) bool {
		if m.quarantined(man.Name) {
			return false
		}
		v := m.view(hostabi.HookPrompt, man)
		v.Prompt = &hostabi.PromptView{Batch: batch}
		eff, _ := m.ask(ctx, mv, i, v)
		if len(eff) == 0 {
			return false
		}
		if len(eff) != 1 {
			m.refuse(mv, man.Name, hostabi.HookPrompt, "prompt takes one of admit, rewrite or reject, got %d effects", len(eff))
			return false
		}
		switch e := eff[0]; e.Kind {
		case hostabi.KindAdmit:
			admitAll(mv, batch)
		case hostabi.KindReject:
			m.endTurn(mv, "", ReasonBlocked, func(te *TurnEnd) {
				te.Cause = &Cause{Kind: "hook", Hook: string(hostabi.HookPrompt), Reason: e.Text}
				te.Message = fmt.Sprintf("input rejected by %s: %s", man.Name, e.Text)
			})
		case hostabi.KindRewrite:
			if err := sameIDs(batch, e.Messages); err != nil {
				m.refuse(mv, man.Name, hostabi.HookPrompt, "rewrite: %v", err)
				return false
			}
			admitAll(mv, e.Messages)
		}
		decided = true
		return true
	})
	if !decided {
		admitAll(mv, batch)
	}
	return ctx.Err()
}

func admitAll(mv *move, batch []hostabi.InputMessage) {
	for _, b := range batch {
		mv.add(EvUserMessage, UserMessage{ID: b.ID, Content: b.Content})
	}
}

func sameIDs(batch, rewritten []hostabi.InputMessage) error {
	if len(batch) != len(rewritten) {
		return fmt.Errorf("the batch has %d messages, the rewrite %d", len(batch), len(rewritten))
	}
	for i := range batch {
		if batch[i].ID != rewritten[i].ID {
			return fmt.Errorf("message %d has id %q, the batch %q", i, rewritten[i].ID, batch[i].ID)
		}
	}
	return nil
}

// parseCommand splits "/name args" into its parts.
func parseCommand(s string) (name, args string, ok bool) {
	if len(s) < 2 || s[0] != '/' {
		return "", "", false
	}
	s = s[1:]
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\n' || s[i] == '\t' {
			return s[:i], trimSpace(s[i+1:]), i > 0
		}
	}
	return s, "", true
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\n' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\n' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// contribute asks every op declaring the hook for tools, prompt parts and
// top-of-mind lines, and freezes them into the step's request header.
func (m *Machine) contribute(ctx context.Context, mv *move) error {
	h := RequestHeader{Model: m.cfg.Model, MaxTokens: m.cfg.MaxTokens}
	owners := map[string]string{}
	var endTurn *Contribution
	m.each(hostabi.HookContribute, func(i int, man *hostabi.Manifest) bool {
		if m.quarantined(man.Name) {
			return false
		}
		eff, _ := m.ask(ctx, mv, i, m.view(hostabi.HookContribute, man))
		// Validate the whole list before taking any of it.
		for _, e := range eff {
			if e.Kind != hostabi.KindTool {
				continue
			}
			if !man.OwnsTool(e.Tool.Name) {
				m.refuse(mv, man.Name, hostabi.HookContribute, "tool %q is not in the op's manifest", e.Tool.Name)
				return false
			}
			if other, dup := owners[e.Tool.Name]; dup {
				m.refuse(mv, man.Name, hostabi.HookContribute, "tool %q is already contributed by %q", e.Tool.Name, other)
				return false
			}
		}
		for _, e := range eff {
			switch e.Kind {
			case hostabi.KindTool:
				owners[e.Tool.Name] = man.Name
				h.Tools = append(h.Tools, HeaderTool{ToolSpec: *e.Tool, Owner: man.Name, Idempotent: man.IsIdempotent(e.Tool.Name)})
			case hostabi.KindPromptPart:
				h.PromptParts = append(h.PromptParts, Contribution{Op: man.Name, Text: e.Text})
			case hostabi.KindTopOfMind:
				h.TopOfMind = append(h.TopOfMind, Contribution{Op: man.Name, Text: e.Text})
			case hostabi.KindEndTurn:
				if endTurn == nil {
					endTurn = &Contribution{Op: man.Name, Text: e.Text}
				}
			}
		}
		return false
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if endTurn != nil {
		m.endTurn(mv, ReasonLimit, ReasonLimit, func(te *TurnEnd) {
			te.Cause = &Cause{Kind: "hook", Hook: string(hostabi.HookContribute), Reason: endTurn.Op}
			te.Message = endTurn.Text
		})
		return nil
	}
	mv.add(EvRequestHeader, h)
	return nil
}

// Request builds the provider request for the open step from the state and
// the step's header.
func (m *Machine) Request() *provider.Request {
	s := m.st
	req := &provider.Request{Messages: s.Messages, Attempt: s.Attempts + 1}
	if h := s.Header; h != nil {
		req.Model, req.MaxTokens = h.Model, h.MaxTokens
		for i, p := range h.PromptParts {
			if i > 0 {
				req.System += "\n\n"
			}
			req.System += p.Text
		}
		for _, t := range h.TopOfMind {
			req.TopOfMind = append(req.TopOfMind, t.Text)
		}
		for _, t := range h.Tools {
			req.Tools = append(req.Tools, t.ToolSpec)
		}
	}
	return req
}

// infer is the native inference op: it waits out a scheduled retry, asks
// the provider, streams deltas to watchers and settles the answer as
// assistant/message or the failure as assistant/attempt.
func (m *Machine) infer(ctx context.Context, mv *move) error {
	s := m.st
	if !s.RetryAt.IsZero() {
		if d := s.RetryAt.Sub(m.cfg.Clock()); d > 0 {
			if err := m.cfg.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
	m.partial = nil
	var shown string
	resp, err := m.cfg.Provider.Complete(ctx, m.Request(), func(d provider.Delta) {
		shown += d.Text
		m.publish(Live{Kind: "delta", Text: d.Text})
	})
	if cerr := ctx.Err(); cerr != nil {
		// Cancelled: append nothing; keep what was shown for Abort.
		text := shown
		if resp != nil && resp.Content != "" {
			text = resp.Content
		}
		if text != "" {
			m.partial = &AssistantMessage{Content: text, Interrupted: true}
		}
		return cerr
	}
	mv.now = m.cfg.Clock()
	if err != nil {
		mv.add(EvAssistantAttempt, AssistantAttempt{Attempt: s.Attempts + 1, Failure: provider.AsFailure(err)})
		return nil
	}
	am := AssistantMessage{Content: resp.Content, FinishReason: resp.FinishReason}
	if resp.Usage != (provider.Usage{}) {
		am.Usage = &Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	}
	seen := map[string]bool{}
	for i, c := range resp.ToolCalls {
		if c.ID == "" || seen[c.ID] {
			// The conversation needs unique ids to pair results; make one
			// that is stable for this answer.
			c.ID = fmt.Sprintf("call_%d_%d", s.Head+1, i)
		}
		seen[c.ID] = true
		if len(c.Arguments) == 0 {
			c.Arguments = json.RawMessage(`{}`)
		} else if !json.Valid(c.Arguments) {
			q, _ := json.Marshal(string(c.Arguments))
			c.Arguments = q
		}
		am.ToolCalls = append(am.ToolCalls, c)
	}
	mv.add(EvAssistantMessage, am)
	return nil
}

// requestError lets ops decide on a failed attempt: the first retry effect
// schedules another request in the same step; without one, the step and
// turn end in error.
func (m *Machine) requestError(ctx context.Context, mv *move) error {
	s := m.st
	decided := false
	m.each(hostabi.HookRequestError, func(i int, man *hostabi.Manifest) bool {
		if m.quarantined(man.Name) {
			return false
		}
		v := m.view(hostabi.HookRequestError, man)
		v.Failure = &hostabi.FailureView{Failure: *s.LastFailure, Attempt: s.Attempts, Retries: s.Retries}
		eff, _ := m.ask(ctx, mv, i, v)
		if len(eff) == 0 {
			return false
		}
		if len(eff) != 1 {
			m.refuse(mv, man.Name, hostabi.HookRequestError, "request-error takes one retry effect, got %d", len(eff))
			return false
		}
		mv.add(EvRetryScheduled, RetryScheduled{Op: man.Name, Attempt: s.Retries + 1, DelayMS: eff[0].DelayMS, Failure: *s.LastFailure})
		decided = true
		return true
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !decided {
		f := *s.LastFailure
		m.endTurn(mv, ReasonError, ReasonError, func(te *TurnEnd) {
			te.Error = fmt.Sprintf("%s: %s", f.Code, f.Message)
			if f.Status != 0 {
				te.Error = fmt.Sprintf("%s (HTTP %d): %s", f.Code, f.Status, f.Message)
			}
		})
	}
	return nil
}

// turnStopping asks ops whether the turn may end; the first steer continues
// it, otherwise the step and turn end.
func (m *Machine) turnStopping(ctx context.Context, mv *move) error {
	s := m.st
	decided := false
	m.each(hostabi.HookTurnStopping, func(i int, man *hostabi.Manifest) bool {
		if m.quarantined(man.Name) {
			return false
		}
		v := m.view(hostabi.HookTurnStopping, man)
		v.Stop = &hostabi.StopView{Content: s.Answer.Content, FinishReason: s.Answer.FinishReason}
		eff, _ := m.ask(ctx, mv, i, v)
		if len(eff) == 0 {
			return false
		}
		var ins []hostabi.InputMessage
		for j, e := range eff {
			id := fmt.Sprintf("steer-%d-%d", s.Head+1, j)
			for s.HasID(id) { // a caller chose this id for its own input
				id += "'"
			}
			ins = append(ins, hostabi.InputMessage{ID: id, Content: e.Text})
		}
		mv.add(EvInboxSpliced, InboxSpliced{List: ListNextStep, Start: len(s.NextStep), Inserted: ins})
		mv.inbox = true
		decided = true
		return true
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !decided {
		m.endTurn(mv, ReasonCompleted, m.normalEnd(), nil)
	}
	return nil
}

type noProvider struct{}

func (noProvider) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailBadRequest, Message: "no model provider is configured for this session"}}
}

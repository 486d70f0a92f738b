package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Guards decide, owners run, in that order: only an op whose manifest says
// guard may decide calls, and an owner runs a call only after its tool/call
// is durable and every guard has allowed it (engine/doc.go).
//
// The tool hook handles the step's unanswered calls in this order, one
// transition at a time:
//
//  1. A call whose tool/call is in the log but has no result was being run
//     by a writer that is gone (a crash, a lost lease): it is answered
//     TOOL_OUTCOME_UNKNOWN, or, for an idempotent tool, run again.
//  2. A call no guard has seen whose arguments do not fit its tool's
//     parameters (argcheck.go) is answered by the host with
//     TOOL_BAD_ARGUMENTS, and one its owner's grants would refuse (as the
//     owner's host tells: GrantChecker) with TOOL_NOT_GRANTED: nobody is
//     asked to approve a call that cannot run.
//  3. Guards (ops whose manifest says guard) are asked in pipeline order
//     about the calls each has not decided yet. Each guard decides for
//     itself: allow, deny, or ask a person (the session then yields). A
//     deny answers the call; a guard that skips has no objection. A guard
//     that faults, answers invalidly or stops answering denies the calls
//     it was asked about (fails closed). Only guards may decide: a
//     decision or approval request from any other op is refused.
//  4. Calls no op owns go to the other tool-hook ops (the last,
//     unknown-tool, answers them); results are the only answer they may
//     give, and only for such calls. The host answers those nobody does.
//  5. Once every guard has passed every call, the host records tool/call
//     for the first owned call (durable before anything runs), asks its
//     owner to run it (View.Tool.Run set) and records the result, in the
//     same transition. An owner's result at any other time is refused.
func (m *Machine) tools(ctx context.Context, mv *move) error {
	s := m.st
	if w := s.Waiting(); len(w) > 0 {
		mv.outcome = Waiting
		return nil
	}
	pending := s.Pending()
	for _, c := range pending {
		if c.Started {
			m.interrupted(mv, c)
			return nil
		}
	}
	if m.cannotRun(mv, pending) {
		return nil
	}
	guards := m.guardOrder()
	for _, g := range guards {
		decided, err := m.askGuard(ctx, mv, g, pending)
		if err != nil || decided {
			return err
		}
	}
	var unowned []*event.CallState
	for _, c := range pending {
		if c.Owner == "" {
			unowned = append(unowned, c)
		}
	}
	if len(unowned) > 0 {
		return m.fallback(ctx, mv, unowned)
	}
	c := pending[0]
	if _, man, ok := m.cfg.Pipeline.Lookup(c.Owner); !ok || !man.Handles(hostabi.HookTool) {
		mv.add(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Code: hostabi.CodeUnavailable, Op: "host",
			Content: fmt.Sprintf("tool %q is unavailable: its op %q is not in the pipeline", c.Name, c.Owner)})
		return nil
	}
	names := make([]string, len(guards))
	for i, g := range guards {
		names[i] = g.name
	}
	mv.add(event.EvToolCall, event.ToolCallEvent{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Op: c.Owner, Idempotent: c.Idempotent, Writer: m.cfg.Writer, Guards: names})
	mv.start = c.ID
	return nil
}

// interrupted answers a call an earlier writer started and never finished.
func (m *Machine) interrupted(mv *move, c *event.CallState) {
	if c.Idempotent {
		var names []string
		for _, g := range m.guardOrder() {
			names = append(names, g.name)
		}
		mv.add(event.EvToolCall, event.ToolCallEvent{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Op: c.Owner, Idempotent: true, Writer: m.cfg.Writer, Guards: names, Rerun: true})
		mv.start = c.ID
		return
	}
	mv.add(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Code: hostabi.CodeOutcomeUnknown, Op: "host",
		Content: fmt.Sprintf("the tool %s started but its result was never recorded (the process running it stopped); it may or may not have taken effect: check before calling it again", c.Name)})
}

// guard is a guard the step's calls must pass: in the pipeline (i >= 0),
// or named by the step's header but missing from the pipeline now.
type guard struct {
	name string
	i    int
}

// guardOrder lists the pipeline's tool-hook guards in order, then the
// step's header guards the pipeline no longer has (their calls cannot pass).
func (m *Machine) guardOrder() []guard {
	var gs []guard
	m.each(hostabi.HookTool, func(i int, man *hostabi.Manifest) bool {
		if man.Guard {
			gs = append(gs, guard{man.Name, i})
		}
		return false
	})
	if h := m.st.Header; h != nil {
		for _, name := range h.Guards {
			if !slices.ContainsFunc(gs, func(g guard) bool { return g.name == name }) {
				gs = append(gs, guard{name, -1})
			}
		}
	}
	return gs
}

// askGuard asks one guard about the pending calls it has not decided and
// reports whether that made the transition.
func (m *Machine) askGuard(ctx context.Context, mv *move, g guard, pending []*event.CallState) (bool, error) {
	var calls []*event.CallState
	for _, c := range pending {
		if c.Verdict(g.name) == "" && !c.Asked[g.name] {
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return false, nil
	}
	if g.i < 0 {
		m.denyAll(mv, g.name, calls, fmt.Sprintf("guard %s of this step is not in the pipeline any more", g.name))
		return true, nil
	}
	_, man := m.cfg.Pipeline.Op(g.i)
	if m.quarantined(man.Name) {
		m.denyAll(mv, g.name, calls, fmt.Sprintf("guard op %s is not answering (it faulted %d times this turn)", man.Name, m.st.TurnFaults[man.Name]))
		return true, nil
	}
	v := m.view(hostabi.HookTool, man)
	v.Tool = m.toolView(calls, "")
	a, faulted := m.ask(ctx, mv, g.i, v)
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if faulted {
		m.denyAll(mv, g.name, calls, fmt.Sprintf("guard op %s faulted; failing closed", man.Name))
		return true, nil
	}
	if len(a.decisive) == 0 {
		m.accept(mv, a) // no objection
		return false, nil
	}
	evs, yield, err := m.guardEvents(mv, man, calls, a.decisive)
	if err == nil && !m.accept(mv, a, evs...) {
		err = fmt.Errorf("its answer does not fit in the log")
	} else if err != nil {
		m.refuse(mv, man.Name, hostabi.HookTool, "%v", err)
	}
	if err != nil {
		m.denyAll(mv, g.name, calls, fmt.Sprintf("guard op %s answered invalidly; failing closed", man.Name))
		return true, nil
	}
	mv.yield = yield
	if yield {
		mv.sync = true
	}
	return true, nil
}

// guardEvents checks a guard's decisive effects (decisions and approval
// requests for the calls it was asked about, each named once) and returns
// the events they make.
func (m *Machine) guardEvents(mv *move, man *hostabi.Manifest, calls []*event.CallState, eff []hostabi.Effect) ([]store.Event, bool, error) {
	asked := map[string]*event.CallState{}
	for _, c := range calls {
		asked[c.ID] = c
	}
	touched := map[string]bool{}
	var evs []store.Event
	yield := false
	for j, e := range eff {
		ids := e.CallIDs
		if e.CallID != "" {
			ids = []string{e.CallID}
		}
		switch e.Kind {
		case hostabi.KindDecision, hostabi.KindApprovalRequest:
		default:
			return nil, false, fmt.Errorf("effect %d (%s): a guard decides calls (decision, approval_request); it does not answer them", j, e.Kind)
		}
		for _, id := range ids {
			if asked[id] == nil {
				return nil, false, fmt.Errorf("effect %d (%s): call %q is not one this guard was asked about", j, e.Kind, id)
			}
			if touched[id] {
				return nil, false, fmt.Errorf("effect %d (%s): call %q is named twice", j, e.Kind, id)
			}
			touched[id] = true
		}
		if e.Kind == hostabi.KindApprovalRequest {
			evs = append(evs, mv.event(event.EvApprovalRequest, event.ApprovalRequest{Op: man.Name, CallIDs: e.CallIDs, Reason: e.Text}))
			yield = true
			continue
		}
		c := asked[e.CallID]
		evs = append(evs, m.decisionEvents(mv, c, event.ApprovalDecision{CallID: c.ID, Allow: e.Allow, Scope: e.Scope, Guard: man.Name, Who: "op:" + man.Name, Note: e.Text})...)
	}
	return evs, yield, nil
}

// fallback asks the tool-hook ops that are not guards to answer calls no
// op owns; the host answers those nobody does.
func (m *Machine) fallback(ctx context.Context, mv *move, unowned []*event.CallState) error {
	done := false
	m.each(hostabi.HookTool, func(i int, man *hostabi.Manifest) bool {
		if man.Guard || m.quarantined(man.Name) {
			return false
		}
		v := m.view(hostabi.HookTool, man)
		v.Tool = m.toolView(unowned, "")
		a, faulted := m.ask(ctx, mv, i, v)
		if faulted {
			return false
		}
		if len(a.decisive) == 0 {
			m.accept(mv, a)
			return false
		}
		var evs []store.Event
		touched := map[string]bool{}
		for j, e := range a.decisive {
			c := callIn(unowned, e.CallID)
			switch {
			case e.Kind != hostabi.KindResult:
				m.refuse(mv, man.Name, hostabi.HookTool, "effect %d (%s): only guards decide calls; an op that is not a guard answers only calls no op owns, with results", j, e.Kind)
				return false
			case c == nil:
				m.refuse(mv, man.Name, hostabi.HookTool, "effect %d (result): call %q is not a call no op owns; its owner answers it when the host asks", j, e.CallID)
				return false
			case touched[c.ID]:
				m.refuse(mv, man.Name, hostabi.HookTool, "effect %d (result): call %q is answered twice", j, c.ID)
				return false
			}
			touched[c.ID] = true
			evs = append(evs, mv.event(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, Content: e.Content, IsError: e.IsError, Code: e.Code, ConcludesTurn: e.ConcludesTurn, Op: man.Name}))
		}
		done = m.accept(mv, a, evs...)
		return done
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !done {
		for _, c := range unowned {
			mv.add(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Code: hostabi.CodeUnknownTool, Op: "host",
				Content: fmt.Sprintf("no tool named %q is offered; the tools offered are: %s", c.Name, m.offered())})
		}
	}
	return nil
}

func callIn(calls []*event.CallState, id string) *event.CallState {
	for _, c := range calls {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func (m *Machine) offered() string {
	var names []string
	if h := m.st.Header; h != nil {
		for _, t := range h.Tools {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return "(none)"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (m *Machine) toolView(calls []*event.CallState, run string) *hostabi.ToolView {
	tv := &hostabi.ToolView{Run: run}
	for _, c := range calls {
		d := ""
		if run != "" {
			d = "allow"
		}
		tv.Calls = append(tv.Calls, hostabi.PendingCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments,
			Owner: c.Owner, Server: c.Server, Annotations: c.Annotations, Decision: d, Started: c.Started})
	}
	if h := m.st.Header; h != nil {
		for _, t := range h.Tools {
			tv.Offered = append(tv.Offered, t.Name)
		}
	}
	return tv
}

// decision records a decision; a denial also answers the call.
func (m *Machine) decision(mv *move, c *event.CallState, d event.ApprovalDecision) {
	mv.push(m.decisionEvents(mv, c, d)...)
}

func (m *Machine) decisionEvents(mv *move, c *event.CallState, d event.ApprovalDecision) []store.Event {
	evs := []store.Event{mv.event(event.EvApprovalDecision, d)}
	if !d.Allow {
		msg := "the call was denied"
		if d.Note != "" {
			msg += ": " + d.Note
		}
		evs = append(evs, mv.event(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, Content: msg, IsError: true, Code: hostabi.CodeDenied, Op: "host"}))
	}
	return evs
}

// denyAll fails closed: the guard denies every call it was asked about.
func (m *Machine) denyAll(mv *move, guard string, calls []*event.CallState, why string) {
	for _, c := range calls {
		m.decision(mv, c, event.ApprovalDecision{CallID: c.ID, Allow: false, Guard: guard, Who: "host", Note: why})
	}
}

// runStarted runs a call whose tool/call was just made durable: its owner
// is asked with View.Tool.Run set and its result is appended. A started
// tool runs to the end and its result is recorded even if ctx is cancelled
// meanwhile; the op's own limits bound it. The owner can still hear of the
// cancellation through TurnDone and end the call early with a result that
// says so.
func (m *Machine) runStarted(ctx context.Context, id string) error {
	ctx = context.WithValue(context.WithoutCancel(ctx), turnDoneKey{}, ctx)
	mv := m.newMove()
	mv.run, mv.detached = id, true
	c := m.st.Call(id)
	fail := func(code, msg string) {
		mv.add(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, Content: msg, IsError: true, Code: code, Op: "host"})
	}
	_, man, _ := m.cfg.Pipeline.Lookup(c.Owner)
	v := m.view(hostabi.HookTool, man)
	v.Tool = m.toolView([]*event.CallState{c}, c.ID)
	var running atomic.Bool
	running.Store(true)
	ctx = context.WithValue(ctx, progressKey{}, func(text string) {
		if running.Load() { // not after the result: a late note would outlive the call
			m.publish(Live{Kind: "progress", Op: man.Name, Call: c.ID, Tool: c.Name, Text: text})
		}
	})
	a, faulted := m.ask(ctx, mv, m.cfg.Pipeline.byName[man.Name], v)
	running.Store(false)
	// The result is stamped when it came, not when the run started.
	mv.now = m.cfg.Clock()
	switch {
	case faulted:
		fail(hostabi.CodeUnavailable, fmt.Sprintf("tool %q failed: op %q faulted while running it", c.Name, c.Owner))
	case len(a.decisive) != 1 || a.decisive[0].Kind != hostabi.KindResult || a.decisive[0].CallID != c.ID:
		if len(a.decisive) > 0 {
			m.refuse(mv, man.Name, hostabi.HookTool, "running call %q takes exactly one result for it, got %d effects", c.ID, len(a.decisive))
		}
		fail(hostabi.CodeUnavailable, fmt.Sprintf("tool %q failed: op %q did not return a result", c.Name, c.Owner))
	default:
		e := a.decisive[0]
		ev := mv.event(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, Content: e.Content, IsError: e.IsError, Code: e.Code, ConcludesTurn: e.ConcludesTurn, Op: man.Name})
		if !m.accept(mv, a, ev) {
			fail(hostabi.CodeUnavailable, fmt.Sprintf("tool %q failed: its result was %d bytes, over the log's limit of %d; ask for less (a smaller range, a narrower query)", c.Name, len(e.Content), maxDataBytes-1024))
		}
	}
	return m.commit(ctx, mv)
}

type turnDoneKey struct{}

type progressKey struct{}

// Progress returns, for the context an owner is given to run a started
// call, a function that shows watchers how far the call has got (a
// transient Live of kind "progress": never logged, since it changes
// nothing a replay needs). It may be called from any goroutine until the
// owner answers; after that, and outside such a run, it does nothing.
func Progress(ctx context.Context) func(text string) {
	if f, ok := ctx.Value(progressKey{}).(func(string)); ok {
		return f
	}
	return func(string) {}
}

// TurnDone returns, for the context an owner is given to run a started
// call, a channel closed when the turn that started the call is cancelled
// (Ctrl-C, session.Session.Cancel), and the cancellation's cause. The context
// itself is not cancelled with the turn: a started call's result is
// always recorded (exactly once), so the owner decides how to stop. An
// owner that can stop a call cleanly (an MCP server told
// notifications/cancelled) watches the channel and answers with a result
// saying the call was cancelled; one that cannot ignores it and runs to
// the end within its own limits. Outside such a run TurnDone returns nil
// (a nil channel never closes).
func TurnDone(ctx context.Context) (done <-chan struct{}, cause func() error) {
	turn, ok := ctx.Value(turnDoneKey{}).(context.Context)
	if !ok {
		return nil, func() error { return nil }
	}
	return turn.Done(), func() error { return context.Cause(turn) }
}

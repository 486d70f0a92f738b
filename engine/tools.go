package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/wagent/wagent/hostabi"
)

// tools runs the tool hook for the step's unanswered calls.
//
// A call goes through: decisions (an approval op allows, denies or asks a
// person), then, once every op declaring the hook has been asked and none
// acted, the host records tool/call for it, then its owning op runs it
// with View.Tool.Run set and returns the result. One call runs at a time,
// so a crash leaves at most one call whose outcome is unknown.
func (m *Machine) tools(ctx context.Context, mv *move) error {
	s := m.st
	if w := s.Waiting(); len(w) > 0 {
		mv.outcome = Waiting
		return nil
	}
	for _, c := range s.Pending() {
		if c.Started {
			return m.runCall(ctx, mv, c)
		}
	}
	pending := s.Pending()
	decided := false
	m.each(hostabi.HookTool, func(i int, man *hostabi.Manifest) bool {
		if m.quarantined(man.Name) {
			if man.Guard {
				m.denyUndecided(mv, pending, "host", fmt.Sprintf("guard op %s is not answering (it faulted %d times this turn)", man.Name, s.TurnFaults[man.Name]))
				decided = true
				return true
			}
			return false
		}
		v := m.view(hostabi.HookTool, man)
		v.Tool = m.toolView(pending, "")
		eff, faulted := m.ask(ctx, mv, i, v)
		if faulted && man.Guard {
			m.denyUndecided(mv, pending, "host", fmt.Sprintf("guard op %s faulted; failing closed", man.Name))
			decided = true
			return true
		}
		if len(eff) > 0 {
			if err := m.checkToolEffects(man, pending, eff); err != nil {
				m.refuse(mv, man.Name, hostabi.HookTool, "%v", err)
				if man.Guard {
					m.denyUndecided(mv, pending, "host", fmt.Sprintf("guard op %s answered invalidly; failing closed", man.Name))
					decided = true
					return true
				}
				return false
			}
			m.applyToolEffects(mv, man, eff)
			decided = true
			return true
		}
		return false
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if decided {
		return nil
	}
	// Every op was asked and none acted: start the first call an op owns.
	// Starting only after all of them skipped means a guard anywhere in the
	// pipeline sees every call before it runs.
	for _, c := range pending {
		if c.Owner == "" || c.Started {
			continue
		}
		if _, man, ok := m.cfg.Pipeline.Lookup(c.Owner); ok && man.Handles(hostabi.HookTool) {
			mv.add(EvToolCall, ToolCallEvent{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Op: c.Owner, Idempotent: c.Idempotent})
			return nil
		}
	}
	// No op acted: answer what nobody can run, so the model can read why.
	for _, c := range pending {
		code, msg := hostabi.CodeUnknownTool, fmt.Sprintf("no tool named %q is offered; the tools offered are: %s", c.Name, m.offered())
		if c.Owner != "" {
			code, msg = hostabi.CodeUnavailable, fmt.Sprintf("tool %q is unavailable: its op %q did not run it", c.Name, c.Owner)
		}
		mv.add(EvToolResult, ToolResult{CallID: c.ID, Name: c.Name, Content: msg, IsError: true, Code: code, Op: "host"})
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

func (m *Machine) toolView(pending []*CallState, run string) *hostabi.ToolView {
	tv := &hostabi.ToolView{Run: run}
	for _, c := range pending {
		d := ""
		if c.Decision == "allow" {
			d = "allow"
		}
		tv.Calls = append(tv.Calls, hostabi.PendingCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments,
			Owner: c.Owner, Decision: d, Requested: c.Requested, Started: c.Started})
	}
	if h := m.st.Header; h != nil {
		for _, t := range h.Tools {
			tv.Offered = append(tv.Offered, t.Name)
		}
	}
	return tv
}

// checkToolEffects refuses a list that names calls that are not pending,
// decides a call twice, or answers a call the op does not own.
func (m *Machine) checkToolEffects(man *hostabi.Manifest, pending []*CallState, eff []hostabi.Effect) error {
	find := func(id string) *CallState {
		for _, c := range pending {
			if c.ID == id {
				return c
			}
		}
		return nil
	}
	ids := func(e hostabi.Effect) []string {
		if e.CallID != "" {
			return []string{e.CallID}
		}
		return e.CallIDs
	}
	touched := map[string]bool{}
	for j, e := range eff {
		for _, id := range ids(e) {
			if find(id) == nil {
				return fmt.Errorf("effect %d (%s): call %q is not pending in this step", j, e.Kind, id)
			}
			if touched[id] {
				return fmt.Errorf("effect %d (%s): call %q is named twice", j, e.Kind, id)
			}
			touched[id] = true
		}
	}
	for j, e := range eff {
		for _, id := range ids(e) {
			c := find(id)
			switch e.Kind {
			case hostabi.KindApprovalRequest, hostabi.KindDecision:
				if c.Decision != "" || c.Started {
					return fmt.Errorf("effect %d (%s): call %q is already decided", j, e.Kind, id)
				}
				if e.Kind == hostabi.KindApprovalRequest && c.Requested {
					return fmt.Errorf("effect %d (%s): approval for call %q was already requested", j, e.Kind, id)
				}
			case hostabi.KindResult:
				if c.Owner != "" && c.Owner != man.Name {
					return fmt.Errorf("effect %d (result): call %q belongs to op %q", j, id, c.Owner)
				}
				if c.Started {
					return fmt.Errorf("effect %d (result): call %q is running; only its run answers it", j, id)
				}
			}
		}
	}
	return nil
}

func (m *Machine) applyToolEffects(mv *move, man *hostabi.Manifest, eff []hostabi.Effect) {
	for _, e := range eff {
		switch e.Kind {
		case hostabi.KindApprovalRequest:
			mv.add(EvApprovalRequest, ApprovalRequest{Op: man.Name, CallIDs: e.CallIDs, Reason: e.Text})
			mv.yield = true
		case hostabi.KindDecision:
			c := m.st.Call(e.CallID)
			m.decision(mv, c, ApprovalDecision{CallID: e.CallID, Allow: e.Allow, Scope: e.Scope, Who: "op:" + man.Name, Note: e.Text})
		case hostabi.KindResult:
			c := m.st.Call(e.CallID)
			mv.add(EvToolResult, ToolResult{CallID: e.CallID, Name: c.Name, Content: e.Content, IsError: e.IsError, Code: e.Code, ConcludesTurn: e.ConcludesTurn, Op: man.Name})
		}
	}
}

// decision records a decision; a denial also answers the call.
func (m *Machine) decision(mv *move, c *CallState, d ApprovalDecision) {
	mv.add(EvApprovalDecision, d)
	if !d.Allow {
		msg := "the call was denied"
		if d.Note != "" {
			msg += ": " + d.Note
		}
		mv.add(EvToolResult, ToolResult{CallID: c.ID, Name: c.Name, Content: msg, IsError: true, Code: hostabi.CodeDenied, Op: d.Who})
	}
}

// denyUndecided fails closed: every pending call without a decision is
// denied.
func (m *Machine) denyUndecided(mv *move, pending []*CallState, who, why string) {
	for _, c := range pending {
		if c.Decision == "" && !c.Started {
			m.decision(mv, c, ApprovalDecision{CallID: c.ID, Allow: false, Who: who, Note: why})
		}
	}
}

// runCall asks the owning op to run a started call and records its result.
func (m *Machine) runCall(ctx context.Context, mv *move, c *CallState) error {
	fail := func(code, msg string) {
		mv.add(EvToolResult, ToolResult{CallID: c.ID, Name: c.Name, Content: msg, IsError: true, Code: code, Op: "host"})
	}
	_, man, ok := m.cfg.Pipeline.Lookup(c.Owner)
	if !ok || !man.Handles(hostabi.HookTool) {
		fail(hostabi.CodeUnavailable, fmt.Sprintf("tool %q is unavailable: op %q is not in the pipeline", c.Name, c.Owner))
		return nil
	}
	i := m.cfg.Pipeline.byName[man.Name]
	v := m.view(hostabi.HookTool, man)
	v.Tool = m.toolView([]*CallState{c}, c.ID)
	// A started tool runs to the end and its result is recorded, even if
	// the turn is cancelled meanwhile; the op's own limits bound it.
	mv.detached = true
	eff, faulted := m.ask(context.WithoutCancel(ctx), mv, i, v)
	if faulted {
		fail(hostabi.CodeUnavailable, fmt.Sprintf("tool %q failed: op %q faulted while running it", c.Name, c.Owner))
		return nil
	}
	if len(eff) != 1 || eff[0].Kind != hostabi.KindResult || eff[0].CallID != c.ID {
		if len(eff) > 0 {
			m.refuse(mv, man.Name, hostabi.HookTool, "running call %q takes exactly one result for it, got %d effects", c.ID, len(eff))
		}
		fail(hostabi.CodeUnavailable, fmt.Sprintf("tool %q failed: op %q did not return a result", c.Name, c.Owner))
		return nil
	}
	e := eff[0]
	mv.add(EvToolResult, ToolResult{CallID: c.ID, Name: c.Name, Content: e.Content, IsError: e.IsError, Code: e.Code, ConcludesTurn: e.ConcludesTurn, Op: man.Name})
	return nil
}

package hostabi

import "fmt"

// CheckFor validates an effect an op returned for view: Check at the
// view's hook, then what the view and the op's manifest alone can tell.
//
//   - a tool contribution names a tool the manifest declares;
//   - call ids of decision, approval_request and result effects are among
//     the view's pending calls;
//   - a result answers a call the op owns (PendingCall.Owner is View.Op,
//     or the manifest's name when View.Op is empty) or
//     one no op owns (Owner ""), never another op's call.
//
// Whether an unowned call may be answered by this op (only the last op
// answers unclaimed calls), and anything else that needs the session's
// state, is the engine's to check.
func (e *Effect) CheckFor(m *Manifest, v *View) error {
	if err := e.Check(v.Hook); err != nil {
		return err
	}
	switch e.Kind {
	case KindTool:
		if !m.OwnsTool(e.Tool.Name) {
			return fmt.Errorf("%w: tool %q is not declared in the manifest of %s", ErrEffect, e.Tool.Name, m.Name)
		}
	case KindDecision:
		if pendingCall(v, e.CallID) == nil {
			return fmt.Errorf("%w: decision for call %q, which is not pending", ErrEffect, e.CallID)
		}
	case KindApprovalRequest:
		for _, id := range e.CallIDs {
			if pendingCall(v, id) == nil {
				return fmt.Errorf("%w: approval_request for call %q, which is not pending", ErrEffect, id)
			}
		}
	case KindResult:
		c := pendingCall(v, e.CallID)
		if c == nil {
			return fmt.Errorf("%w: result for call %q, which is not pending", ErrEffect, e.CallID)
		}
		me := v.Op
		if me == "" {
			me = m.Name
		}
		if c.Owner != "" && c.Owner != me {
			return fmt.Errorf("%w: result for call %q, which belongs to op %q", ErrEffect, e.CallID, c.Owner)
		}
	}
	return nil
}

func pendingCall(v *View, id string) *PendingCall {
	if v.Tool == nil {
		return nil
	}
	for i := range v.Tool.Calls {
		if v.Tool.Calls[i].ID == id {
			return &v.Tool.Calls[i]
		}
	}
	return nil
}

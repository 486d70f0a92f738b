package abitest

import (
	"fmt"
	"slices"

	"github.com/wagent/wagent/hostabi"
)

// The engine's checks on an answer that need no session, per hook (the
// host has already checked each effect with hostabi.Effect.CheckFor). An
// effect is decisive unless it is a note or a log line.

func decisive(eff []hostabi.Effect) []hostabi.Effect {
	var out []hostabi.Effect
	for _, e := range eff {
		if e.Kind != hostabi.KindNote && e.Kind != hostabi.KindLog {
			out = append(out, e)
		}
	}
	return out
}

// onlyGuards: decisions and approval requests come from guards alone.
func onlyGuards(man *hostabi.Manifest, eff []hostabi.Effect) error {
	for i, e := range eff {
		if !man.Guard && (e.Kind == hostabi.KindDecision || e.Kind == hostabi.KindApprovalRequest) {
			return fmt.Errorf("effect %d (%s): only an op whose manifest says guard decides calls", i, e.Kind)
		}
	}
	return nil
}

func ruleAny(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error {
	return onlyGuards(man, eff)
}

// ruleOneDecisive: compact and request-error take one decisive effect.
func ruleOneDecisive(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error {
	if d := decisive(eff); len(d) > 1 {
		return fmt.Errorf("%s takes one %s effect, got %d decisive effects", v.Hook, d[0].Kind, len(d))
	}
	return nil
}

// rulePrompt: one of admit, rewrite (with the batch's ids) or reject.
func rulePrompt(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error {
	d := decisive(eff)
	if len(d) > 1 {
		return fmt.Errorf("prompt takes one of admit, rewrite or reject, got %d decisive effects", len(d))
	}
	if len(d) == 1 && d[0].Kind == hostabi.KindRewrite {
		batch := v.Prompt.Batch
		if len(d[0].Messages) != len(batch) {
			return fmt.Errorf("rewrite: the batch has %d messages, the rewrite %d", len(batch), len(d[0].Messages))
		}
		for i := range batch {
			if d[0].Messages[i].ID != batch[i].ID {
				return fmt.Errorf("rewrite: message %d has id %q, the batch %q", i, d[0].Messages[i].ID, batch[i].ID)
			}
		}
	}
	return nil
}

// ruleContribute: tools by their names (not a namespace), each once.
func ruleContribute(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error {
	seen := map[string]bool{}
	for i, e := range eff {
		if e.Kind != hostabi.KindTool {
			continue
		}
		if hostabi.IsNamespace(e.Tool.Name) {
			return fmt.Errorf("effect %d (tool): %q is a namespace; a contribution names one tool", i, e.Tool.Name)
		}
		if seen[e.Tool.Name] {
			return fmt.Errorf("effect %d (tool): %q contributed twice", i, e.Tool.Name)
		}
		seen[e.Tool.Name] = true
	}
	return nil
}

// ruleGuard: a guard decides (decision, approval_request) the calls it was
// asked about, each once; it never answers one.
func ruleGuard(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error {
	touched := map[string]bool{}
	for i, e := range decisive(eff) {
		ids := e.CallIDs
		switch e.Kind {
		case hostabi.KindDecision:
			ids = []string{e.CallID}
		case hostabi.KindApprovalRequest:
		case hostabi.KindResult:
			if e.CallID == idOwn {
				return fmt.Errorf("effect %d (result): answered call %q of its own tool before the host asked it to run it (view.tool.run is empty)", i, e.CallID)
			}
			return fmt.Errorf("effect %d (result): a guard decides calls (decision, approval_request); it does not answer them", i)
		default:
			return fmt.Errorf("effect %d (%s): a guard decides calls (decision, approval_request)", i, e.Kind)
		}
		for _, id := range ids {
			if !slices.ContainsFunc(v.Tool.Calls, func(c hostabi.PendingCall) bool { return c.ID == id }) {
				return fmt.Errorf("effect %d (%s): call %q is not one it was asked about", i, e.Kind, id)
			}
			if touched[id] {
				return fmt.Errorf("effect %d (%s): call %q is named twice", i, e.Kind, id)
			}
			touched[id] = true
		}
	}
	return nil
}

// ruleUnowned: an op that is not a guard answers only calls no op owns,
// with results, each once; a call of its own tool runs only when the host
// asks (view.tool.run).
func ruleUnowned(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error {
	if err := onlyGuards(man, eff); err != nil {
		return err
	}
	touched := map[string]bool{}
	for i, e := range decisive(eff) {
		if e.Kind != hostabi.KindResult {
			return fmt.Errorf("effect %d (%s): an op that is not a guard answers calls no op owns, with results", i, e.Kind)
		}
		var c *hostabi.PendingCall
		for j := range v.Tool.Calls {
			if v.Tool.Calls[j].ID == e.CallID {
				c = &v.Tool.Calls[j]
			}
		}
		switch {
		case c == nil:
			return fmt.Errorf("effect %d (result): call %q is not pending", i, e.CallID)
		case c.Owner == man.Name:
			return fmt.Errorf("effect %d (result): answered call %q of its own tool %s although the host did not ask it to run it (view.tool.run is empty); a tool runs only when view.tool.run names its call", i, c.ID, c.Name)
		case c.Owner != "":
			return fmt.Errorf("effect %d (result): call %q belongs to op %q", i, c.ID, c.Owner)
		case touched[c.ID]:
			return fmt.Errorf("effect %d (result): call %q is answered twice", i, c.ID)
		}
		touched[c.ID] = true
	}
	return nil
}

// ruleRun: asked to run a call, the owner answers exactly one result, for
// that call.
func ruleRun(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error {
	if err := onlyGuards(man, eff); err != nil {
		return err
	}
	d := decisive(eff)
	if len(d) != 1 || d[0].Kind != hostabi.KindResult || d[0].CallID != v.Tool.Run {
		return fmt.Errorf("asked to run call %q (view.tool.run), the owner must answer exactly one result for it; it answered %s", v.Tool.Run, summary(d))
	}
	return nil
}

func summary(eff []hostabi.Effect) string {
	if len(eff) == 0 {
		return "nothing"
	}
	s := ""
	for i, e := range eff {
		if i > 0 {
			s += ", "
		}
		s += string(e.Kind)
		if e.CallID != "" {
			s += " for " + e.CallID
		}
	}
	return s
}

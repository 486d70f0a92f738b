// Package enginetest holds native test operations, a replaying provider and
// runners that drive an engine.Machine continuously or by rebuilding it
// from the store after every transition.
package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
)

// OpFunc is engine.OpFunc, kept here so tests read the same.
type OpFunc = engine.OpFunc

var calcTools = []string{"calc_add", "calc_subtract", "calc_multiply", "calc_divide", "calc_total"}

var calcDescriptions = map[string]string{
	"calc_add":      "Add value to the running total; returns the new total.",
	"calc_subtract": "Subtract value from the running total; returns the new total.",
	"calc_multiply": "Multiply the running total by value; returns the new total.",
	"calc_divide":   "Divide the running total by value; returns the new total.",
	"calc_total":    "Return the running total.",
}

// Calculator is a stateful calculator op: tools calc_add, calc_subtract,
// calc_multiply, calc_divide (each {"value": number}, applied to a running
// total that starts at 0) and calc_total ({}), each answering the new total.
// The total lives in the op's note "total", so it survives restarts.
func Calculator() engine.Operation {
	m := &hostabi.Manifest{Name: "calc", Version: "1", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: calcTools, Idempotent: []string{"calc_total"}}
	return &OpFunc{M: m, F: calculate}
}

func calculate(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
	switch v.Hook {
	case hostabi.HookContribute:
		var out []hostabi.Effect
		for _, name := range calcTools {
			params := `{"type":"object","properties":{"value":{"type":"number"}},"required":["value"]}`
			if name == "calc_total" {
				params = `{"type":"object","properties":{}}`
			}
			out = append(out, hostabi.Effect{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: name, Description: calcDescriptions[name], Parameters: json.RawMessage(params)}})
		}
		return out, nil
	case hostabi.HookTool:
		if v.Tool.Run == "" {
			return nil, nil
		}
		c := v.Tool.Calls[0]
		total := 0.0
		if s, ok := r.Note("total"); ok {
			total, _ = strconv.ParseFloat(s, 64)
		}
		var args struct {
			Value *float64 `json:"value"`
		}
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: c.ID, Content: "arguments are not a JSON object: " + err.Error(), IsError: true}}, nil
		}
		if c.Name != "calc_total" && args.Value == nil {
			return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: c.ID, Content: `missing "value": pass {"value": number}`, IsError: true}}, nil
		}
		switch c.Name {
		case "calc_add":
			total += *args.Value
		case "calc_subtract":
			total -= *args.Value
		case "calc_multiply":
			total *= *args.Value
		case "calc_divide":
			if *args.Value == 0 {
				return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: c.ID, Content: "division by zero; the total is unchanged", IsError: true}}, nil
			}
			total /= *args.Value
		}
		s := strconv.FormatFloat(total, 'f', -1, 64)
		return []hostabi.Effect{
			{Kind: hostabi.KindNote, Key: "total", Value: s},
			{Kind: hostabi.KindResult, CallID: c.ID, Content: s},
		}, nil
	}
	return nil, nil
}

// Finisher owns a "finish" tool whose result concludes the turn.
func Finisher() engine.Operation {
	m := &hostabi.Manifest{Name: "finisher", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"finish"}}
	return &OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		switch v.Hook {
		case hostabi.HookContribute:
			return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "finish", Description: "report the final answer"}}}, nil
		case hostabi.HookTool:
			if v.Tool.Run == "" {
				return nil, nil
			}
			c := v.Tool.Calls[0]
			return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: c.ID, Content: "recorded", ConcludesTurn: true}}, nil
		}
		return nil, nil
	}}
}

// Stopper steers the turn on, at most max times per turn, while the answer
// lacks phrase. It counts continuations in a note keyed by turn.
func Stopper(phrase string, max int) engine.Operation {
	m := &hostabi.Manifest{Name: "stopper", Hooks: []hostabi.Hook{hostabi.HookTurnStopping}}
	return &OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		if strings.Contains(v.Stop.Content, phrase) {
			return nil, nil
		}
		key := fmt.Sprintf("continued/%d", v.Turn)
		n := 0
		if s, ok := r.Note(key); ok {
			n, _ = strconv.Atoi(s)
		}
		if n >= max {
			return nil, nil
		}
		return []hostabi.Effect{
			{Kind: hostabi.KindNote, Key: key, Value: strconv.Itoa(n + 1)},
			{Kind: hostabi.KindSteer, Text: fmt.Sprintf("You have not said %q yet. Continue until you can.", phrase)},
		}, nil
	}}
}

// Retrier retries failed requests whose code is retryable, up to attempts
// retries per step, after delay (or the failure's Retry-After), e.g.
// Retrier(3, 200*time.Millisecond).
func Retrier(attempts int, delay time.Duration) engine.Operation {
	m := &hostabi.Manifest{Name: "retrier", Hooks: []hostabi.Hook{hostabi.HookRequestError}}
	return &OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		f := v.Failure
		switch f.Failure.Code {
		case hostabi.FailAuth, hostabi.FailBadRequest, hostabi.FailQuota, hostabi.FailContextLength:
			return nil, nil
		}
		if f.Retries >= attempts {
			return nil, nil
		}
		d := delay.Milliseconds()
		if f.Failure.RetryAfter > 0 {
			d = f.Failure.RetryAfter
		}
		return []hostabi.Effect{{Kind: hostabi.KindRetry, DelayMS: d}}, nil
	}}
}

// Approver is a guard op: it allows calls whose name is in allow, denies
// those in deny, and asks a person about the rest. It skips calls already
// decided.
func Approver(allow, deny []string) engine.Operation {
	m := &hostabi.Manifest{Name: "approval", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true}
	return &OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		if v.Tool.Run != "" {
			return nil, nil
		}
		var out []hostabi.Effect
		var ask []string
		for _, c := range v.Tool.Calls {
			if c.Decision != "" || c.Requested || c.Started {
				continue
			}
			switch {
			case contains(allow, c.Name):
				out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true, Text: "allowed by rule"})
			case contains(deny, c.Name):
				out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Text: "denied by rule"})
			default:
				ask = append(ask, c.ID)
			}
		}
		if len(ask) > 0 {
			out = append(out, hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: ask, Text: "needs a person"})
		}
		return out, nil
	}}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Static returns an op that answers every hook it declares with the same
// effects; for tests of validation.
func Static(name string, hooks []hostabi.Hook, tools []string, effects ...hostabi.Effect) engine.Operation {
	m := &hostabi.Manifest{Name: name, Hooks: hooks, Tools: tools}
	return &OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		return effects, nil
	}}
}

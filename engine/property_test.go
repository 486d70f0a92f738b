package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// TestPropertyGuardsDecideOwnersRun drives random pipelines of cooperative
// and hostile ops (owners that answer early, ops that allow everything,
// guards that fault, deny or ask) over random tool calls, rebuilding the
// machine after every transition, and checks after each one:
//
//   - the log is one the fold accepts;
//   - no tool ran without its durable intent (tool/call in the log when
//     its owner was asked to run it), passed by every guard of the
//     pipeline, with no guard's denial and every approval it needed;
//   - a tool that is not idempotent ran at most once per call;
//
// and at the end that every call the model made has exactly one result.
func TestPropertyGuardsDecideOwnersRun(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { propertyRun(t, uint64(seed)) })
	}
}

func propertyRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	log := store.NewMemory()
	var guards []string
	var runs runs
	var violations []string
	// verdicts records, per guard and call, what the guard last answered
	// when asked: allow, deny, ask, skip (no objection) or fault.
	verdicts := map[string]map[string]string{}
	// checkRun is called by owners when asked to run a call: the log must
	// already say everything that allows it.
	checkRun := func(id string) {
		evs, _ := log.Read(context.Background(), "s", 1, 0)
		var call *event.ToolCallEvent
		asked, allowedByPerson, denied := map[string]bool{}, map[string]bool{}, false
		for _, e := range evs {
			switch e.Type {
			case event.EvToolCall:
				var c event.ToolCallEvent
				json.Unmarshal(e.Data, &c)
				if c.CallID == id {
					call = &c
				}
			case event.EvApprovalRequest:
				var r event.ApprovalRequest
				json.Unmarshal(e.Data, &r)
				if slices.Contains(r.CallIDs, id) {
					asked[r.Op] = true
				}
			case event.EvApprovalDecision:
				var d event.ApprovalDecision
				json.Unmarshal(e.Data, &d)
				if d.CallID == id {
					if !d.Allow {
						denied = true
					} else if asked[d.Guard] {
						allowedByPerson[d.Guard] = true
					}
				}
			}
		}
		switch {
		case call == nil:
			violations = append(violations, fmt.Sprintf("call %s ran with no tool/call in the log", id))
		case denied:
			violations = append(violations, fmt.Sprintf("call %s ran although a guard denied it", id))
		}
		if call != nil {
			for _, g := range guards {
				if !slices.Contains(call.Guards, g) {
					violations = append(violations, fmt.Sprintf("call %s ran without guard %s passing it", id, g))
				}
				switch v := verdicts[g][id]; {
				case v == "allow" || v == "skip":
				case v == "ask" && allowedByPerson[g]:
				default:
					violations = append(violations, fmt.Sprintf("call %s ran although guard %s answered %q when asked", id, g, v))
				}
			}
		}
		for g := range asked {
			if !allowedByPerson[g] {
				violations = append(violations, fmt.Sprintf("call %s ran while guard %s's question was unanswered", id, g))
			}
		}
	}

	// The pipeline: a random selection, in random order.
	pool := []func() engine.Operation{
		func() engine.Operation {
			return et.Approver([]string{"calc_add", "calc_total"}, []string{"calc_divide"})
		},
		func() engine.Operation { return permissive("yes-man") },
		func() engine.Operation { return faultyGuard(rng.Uint64()) },
		func() engine.Operation { return nonGuardAllower() },
		func() engine.Operation { return resultSpammer() },
		func() engine.Operation { return unknownAnswerer() },
	}
	var chosen []func() engine.Operation
	for _, f := range pool {
		if rng.IntN(2) == 0 {
			chosen = append(chosen, f)
		}
	}
	rng.Shuffle(len(chosen), func(i, j int) { chosen[i], chosen[j] = chosen[j], chosen[i] })
	owners := []func() engine.Operation{
		func() engine.Operation { return checked(et.Calculator(), &runs, checkRun) },
		func() engine.Operation { return checked(eager(&runs, "eager_tool"), &runs, checkRun) },
	}
	ops := func() []engine.Operation {
		var out []engine.Operation
		for _, f := range chosen {
			out = append(out, watchGuard(f(), verdicts))
		}
		// Owners anywhere: before or after the guards.
		for i, f := range owners {
			at := int(seed+uint64(i)) % (len(out) + 1)
			out = slices.Insert(out, at, f())
		}
		return out
	}
	for _, op := range ops() {
		if m := op.Manifest(); m.Guard && m.Handles(hostabi.HookTool) {
			guards = append(guards, m.Name)
		}
	}
	names := []string{"calc_add", "calc_total", "calc_divide", "calc_multiply", "nosuch"}
	step := 0
	prov := &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		step++
		if step > 3 || rng.IntN(4) == 0 {
			return et.Reply{Text: "done"}
		}
		var calls []hostabi.ToolCall
		for i := range 1 + rng.IntN(4) {
			name := names[rng.IntN(len(names))]
			if rng.IntN(5) == 0 {
				name = "eager_tool"
			}
			calls = append(calls, et.Call(fmt.Sprintf("s%dc%d", step, i), name, `{"value":2}`))
		}
		return et.Reply{Calls: calls}
	}}
	env := &et.Env{Log: log, Session: "s", Provider: prov, Ops: ops}
	env.Create(t)
	env.Send(t, "go")
	for i := 0; i < 500; i++ {
		o, err := env.Open(t).Advance(context.Background())
		if err != nil {
			t.Fatalf("advance %d: %v", i, err)
		}
		evs := env.Events(t)
		if _, err := event.Fold("s", evs); err != nil {
			t.Fatalf("after advance %d the log breaks the fold: %v\n%s", i, err, et.Lines(evs))
		}
		if len(violations) > 0 {
			t.Fatalf("pipeline %v: %v\n%s", opNames(ops()), violations, et.Lines(evs))
		}
		if o == engine.Waiting {
			m := env.Open(t)
			for _, id := range m.State().Waiting() {
				if err := m.Decide(context.Background(), engine.Decision{CallID: id, Allow: rng.IntN(2) == 0}); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if o == engine.Idle {
			break
		}
	}
	evs := env.Events(t)
	st, _ := event.Fold("s", evs)
	if st.TurnOpen {
		t.Fatalf("pipeline %v: the turn never ended\n%s", opNames(ops()), et.Lines(evs))
	}
	made, answered := map[string]bool{}, map[string]int{}
	for _, e := range evs {
		switch e.Type {
		case event.EvAssistantMessage:
			var m event.AssistantMessage
			json.Unmarshal(e.Data, &m)
			for _, c := range m.ToolCalls {
				made[c.ID] = true
			}
		case event.EvToolResult:
			var r event.ToolResult
			json.Unmarshal(e.Data, &r)
			answered[r.CallID]++
		}
	}
	for id := range made {
		if answered[id] != 1 {
			t.Errorf("pipeline %v: call %s has %d results, want exactly 1", opNames(ops()), id, answered[id])
		}
		if runs.get(id) > 1 {
			t.Errorf("pipeline %v: call %s ran %d times", opNames(ops()), id, runs.get(id))
		}
	}
}

func opNames(ops []engine.Operation) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.Manifest().Name)
	}
	return out
}

// checked wraps an owner so that each run is counted and checked against
// the log at the moment it happens.
func checked(op engine.Operation, r *runs, check func(id string)) engine.Operation {
	return &engine.OpFunc{M: op.Manifest(), F: func(ctx context.Context, v *hostabi.View, rd engine.Reader) ([]hostabi.Effect, error) {
		if v.Hook == hostabi.HookTool && v.Tool.Run != "" {
			check(v.Tool.Run)
			if op.Manifest().Name != "eager" {
				r.add(v.Tool.Run)
			}
		}
		return op.Handle(ctx, v, rd)
	}}
}

// watchGuard records what a guard answers about each call it is asked
// about, seen from outside the engine.
func watchGuard(op engine.Operation, verdicts map[string]map[string]string) engine.Operation {
	m := op.Manifest()
	if !m.Guard {
		return op
	}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		eff, err := op.Handle(ctx, v, r)
		if v.Hook != hostabi.HookTool || v.Tool.Run != "" {
			return eff, err
		}
		rec := verdicts[m.Name]
		if rec == nil {
			rec = map[string]string{}
			verdicts[m.Name] = rec
		}
		for _, c := range v.Tool.Calls {
			rec[c.ID] = "skip"
			if err != nil {
				rec[c.ID] = "fault"
			}
		}
		for _, e := range eff {
			switch e.Kind {
			case hostabi.KindDecision:
				rec[e.CallID] = map[bool]string{true: "allow", false: "deny"}[e.Allow]
			case hostabi.KindApprovalRequest:
				for _, id := range e.CallIDs {
					rec[id] = "ask"
				}
			}
		}
		return eff, err
	}}
}

// faultyGuard is a guard that faults on some calls and denies or allows
// the others at random.
func faultyGuard(seed uint64) engine.Operation {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := &hostabi.Manifest{Name: "faulty", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		switch rng.IntN(4) {
		case 0:
			return nil, &hostabi.Fault{Kind: hostabi.FaultTimeout, Message: "spun past its deadline"}
		case 1:
			return nil, nil
		}
		var out []hostabi.Effect
		for _, c := range v.Tool.Calls {
			out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: rng.IntN(3) > 0})
		}
		return out, nil
	}}
}

// nonGuardAllower is not a guard but tries to allow every call.
func nonGuardAllower() engine.Operation {
	m := &hostabi.Manifest{Name: "allower", Hooks: []hostabi.Hook{hostabi.HookTool}}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		var out []hostabi.Effect
		for _, c := range v.Tool.Calls {
			out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true})
		}
		return out, nil
	}}
}

// resultSpammer answers every call it sees, owned or not.
func resultSpammer() engine.Operation {
	m := &hostabi.Manifest{Name: "spammer", Hooks: []hostabi.Hook{hostabi.HookTool}}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		var out []hostabi.Effect
		for _, c := range v.Tool.Calls {
			out = append(out, hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, Content: "spam"})
		}
		return out, nil
	}}
}

// unknownAnswerer answers calls no op owns, like the unknown-tool op.
func unknownAnswerer() engine.Operation {
	m := &hostabi.Manifest{Name: "unknown", Hooks: []hostabi.Hook{hostabi.HookTool}}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		var out []hostabi.Effect
		for _, c := range v.Tool.Calls {
			if c.Owner == "" {
				out = append(out, hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, Content: "no such tool", IsError: true})
			}
		}
		return out, nil
	}}
}

package replay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
)

// The replay never calls a model or runs a tool: its provider answers
// each request with the recorded answer of the same step and attempt, and
// every op stands behind a stand-in that answers a call the host asks it
// to run with the recorded result (and the notes its owner wrote with
// it), and a command of an op that can act on the world with the
// recorded reply (and notes). Tool sources whose list comes from outside
// (an MCP server) offer the tools the recorded request header says they
// offered.

// Complete answers a request from the recording: the step's answer at
// the request's attempt, or, for a summary (attempt 0), the summary the
// recording made at the same point. When the recording has none, the
// replay stops there: the request is cancelled, so nothing of it is
// appended.
func (r *run) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	key := r.at()
	if req.Attempt == 0 {
		n := r.compactions[key]
		list := r.rec.summaries[key]
		if n >= len(list) {
			return r.refuse(ctx, r.rec.segmentSeq(r.bc), fmt.Sprintf("the new pipeline compacts the conversation at turn %d step %d, where the recording did not: there is no recorded summary to feed", key.turn, key.step))
		}
		r.compactions[key]++
		c := list[n]
		resp := &provider.Response{Content: c.Summary, FinishReason: "stop"}
		if c.Usage != nil {
			resp.Usage = provider.Usage{InputTokens: c.Usage.InputTokens, OutputTokens: c.Usage.OutputTokens}
		}
		return resp, nil
	}
	list := r.rec.answers[key]
	if req.Attempt > len(list) {
		why := fmt.Sprintf("the new pipeline asks the model in turn %d step %d, which the recording does not have", key.turn, key.step)
		if len(list) > 0 {
			why = fmt.Sprintf("the new pipeline asks the model again (attempt %d of turn %d step %d); the recording made %d request(s) there", req.Attempt, key.turn, key.step, len(list))
		}
		return r.refuse(ctx, r.rec.segmentSeq(r.bc), why)
	}
	a := list[req.Attempt-1]
	if a.fail != nil {
		return nil, &provider.Error{Failure: *a.fail}
	}
	m := a.msg
	if m.Content != "" && onDelta != nil {
		onDelta(provider.Delta{Text: m.Content})
	}
	resp := &provider.Response{Content: m.Content, ToolCalls: m.ToolCalls, FinishReason: m.FinishReason}
	if m.Usage != nil {
		resp.Usage = provider.Usage{InputTokens: m.Usage.InputTokens, OutputTokens: m.Usage.OutputTokens}
	}
	return resp, nil
}

// refuse stops the replay at a request the recording cannot answer (or
// ends it, past the end of a recording that stopped mid-turn) and cancels
// the transition, so that nothing of it is appended.
func (r *run) refuse(ctx context.Context, seq uint64, why string) (*provider.Response, error) {
	r.halt(seq, why)
	r.cancel()
	return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled, Message: "replay: " + why}, Err: ctx.Err()}
}

// at is the step the replay is in (step 0 between steps).
func (r *run) at() stepKey {
	if r.stepOpen {
		return stepKey{r.turn, r.step}
	}
	return stepKey{r.turn, 0}
}

// standIn is an op of the new pipeline with its tools' runs answered from
// the recording; every other hook is the op's own.
type standIn struct {
	engine.Operation
	man    *hostabi.Manifest
	r      *run
	source bool // a tool source (a namespace in its manifest): its list is recorded
	acts   bool // it can act on the world (actsOnWorld): its commands are recorded
}

func (s *standIn) Handle(ctx context.Context, v *hostabi.View, rd engine.Reader) ([]hostabi.Effect, error) {
	switch {
	case v.Hook == hostabi.HookTool && v.Tool != nil && v.Tool.Run != "":
		return s.r.recordedRun(s.man.Name, callKey{v.Turn, v.Step, v.Tool.Run})
	case s.acts && v.Hook == hostabi.HookCommand && v.Command != nil:
		return s.r.recordedCommand(s.man.Name, v.Turn, v.Command.Name)
	case s.source && v.Hook == hostabi.HookContribute:
		return s.r.recordedOffer(s.man.Name), nil
	case s.source && v.Hook == hostabi.HookTool:
		return nil, nil
	}
	return s.Operation.Handle(ctx, v, rd)
}

// CheckGrants is the op's host's grant check, when it has one: the check
// is the host's own and runs nothing, so the replay asks it as the
// recording did.
func (s *standIn) CheckGrants(tool string, args json.RawMessage) error {
	if g, ok := s.Operation.(engine.GrantChecker); ok {
		return g.CheckGrants(tool, args)
	}
	return nil
}

// recordedRun answers the run of a call from the recording: the result
// its owner recorded, with the notes it wrote. A call the recording never
// ran (or ran and lost to a crash) stops the replay there.
func (r *run) recordedRun(op string, k callKey) ([]hostabi.Effect, error) {
	id := k.id
	rn := r.rec.runs[k]
	switch {
	case rn == nil || !rn.started:
		why := fmt.Sprintf("the new pipeline runs call %s, which the recording never ran", id)
		seq := r.rec.segmentSeq(r.bc)
		if rn != nil {
			why += fmt.Sprintf(" (it answered it: %s)", summarize(rn.result))
			seq = rn.seq
		}
		r.haltRun(seq, why)
		return nil, &hostabi.Fault{Kind: hostabi.FaultError, Message: "replay: " + why}
	case rn.result.Op == op:
		out := make([]hostabi.Effect, 0, len(rn.notes)+1)
		for _, n := range rn.notes {
			out = append(out, hostabi.Effect{Kind: hostabi.KindNote, Key: n.Key, Value: n.Value})
		}
		d := rn.result
		return append(out, hostabi.Effect{Kind: hostabi.KindResult, CallID: id, Content: d.Content, IsError: d.IsError, Code: d.Code, ConcludesTurn: d.ConcludesTurn}), nil
	case rn.fault != nil:
		return nil, &hostabi.Fault{Kind: rn.fault.Kind, Message: rn.fault.Message}
	case rn.result.Code == hostabi.CodeUnavailable:
		return nil, nil // the owner gave no result
	}
	why := fmt.Sprintf("the recording's run of call %s was cut off (%s: %s), which a replay cannot reproduce", id, rn.result.Code, rn.result.Content)
	r.haltRun(rn.seq, why)
	return nil, &hostabi.Fault{Kind: hostabi.FaultError, Message: "replay: " + why}
}

// actsOnWorld reports whether an op's manifest asks for a way to change
// the world: a read-write mount, commands or HTTP. Its manifest, not
// what it was granted: an op is given only what it requests (wasmhost
// refuses one whose request is not granted), and the replay's own
// pipeline may grant less (read-only mounts) than the recording's did.
func actsOnWorld(man *hostabi.Manifest) bool {
	c := man.Capabilities
	if len(c.HTTP) > 0 || len(c.Exec) > 0 {
		return true
	}
	for _, m := range c.Mounts {
		if m.Write {
			return true
		}
	}
	return false
}

// recordedCommand answers a command of an op that can act on the world
// from the recording of the turn: the reply it recorded, with the notes
// it wrote, or its fault. When the recording has no answer of a command
// in the turn (it took the input as a prompt), the op answers nothing
// here either; when another op or command answered there, the replay
// stops: running the command could change the world.
func (r *run) recordedCommand(op string, turn int, name string) ([]hostabi.Effect, error) {
	c := r.rec.commands[turn]
	switch {
	case c == nil:
		return nil, nil
	case c.op != op || c.reply != nil && c.reply.Command != name:
		what := "op " + c.op + "'s fault"
		if c.reply != nil {
			what = fmt.Sprintf("/%s by op %s", c.reply.Command, c.op)
		}
		why := fmt.Sprintf("the new pipeline's op %s answers /%s in turn %d, and it can act on the world; the recording has %s there, and a replay does not run a command that can change the world", op, name, turn, what)
		r.haltRun(c.seq, why)
		return nil, &hostabi.Fault{Kind: hostabi.FaultError, Message: "replay: " + why}
	case c.fault != nil:
		return nil, &hostabi.Fault{Kind: c.fault.Kind, Message: c.fault.Message}
	}
	out := make([]hostabi.Effect, 0, len(c.notes)+1)
	for _, n := range c.notes {
		out = append(out, hostabi.Effect{Kind: hostabi.KindNote, Key: n.Key, Value: n.Value})
	}
	return append(out, hostabi.Effect{Kind: hostabi.KindReply, Text: c.reply.Text}), nil
}

// haltRun stops at a run the recording cannot feed: the tool/call just
// appended is the last event compared.
func (r *run) haltRun(seq uint64, why string) {
	r.halt(seq, why)
	r.stopAt = r.head
}

// recordedOffer is what a tool source contributed to the recorded request
// header of this step.
func (r *run) recordedOffer(op string) []hostabi.Effect {
	h := r.rec.header(r.at())
	if h == nil {
		return nil
	}
	var out []hostabi.Effect
	for i := range h.Tools {
		if h.Tools[i].Owner == op {
			spec := h.Tools[i].ToolSpec
			out = append(out, hostabi.Effect{Kind: hostabi.KindTool, Tool: &spec})
		}
	}
	for _, c := range h.PromptParts {
		if c.Op == op {
			out = append(out, hostabi.Effect{Kind: hostabi.KindPromptPart, Text: c.Text})
		}
	}
	for _, c := range h.TopOfMind {
		if c.Op == op {
			out = append(out, hostabi.Effect{Kind: hostabi.KindTopOfMind, Text: c.Text})
		}
	}
	return out
}

func summarize(d event.ToolResult) string {
	s := d.Content
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	if d.Code != "" {
		return d.Code + ": " + s
	}
	return s
}

// wrap puts every op of p behind a stand-in.
func (r *run) wrap(p *engine.Pipeline) (*engine.Pipeline, error) {
	ops := make([]engine.Operation, p.Len())
	for i := range ops {
		op, man := p.Op(i)
		s := &standIn{Operation: op, man: man, r: r, acts: actsOnWorld(man)}
		for _, t := range man.Tools {
			if hostabi.IsNamespace(t) {
				s.source = true
			}
		}
		ops[i] = s
	}
	return engine.NewPipeline(ops...)
}

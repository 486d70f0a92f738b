package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// The hooks other than tool (tools.go): each asks its ops in pipeline
// order, checks the winning answer as a whole against the state, and
// accepts it (notes included) or refuses it (nothing of it appended).

// admit runs the command hook (a lone slash command an op owns) or the
// prompt hook for the claimed batch.
func (m *Machine) admit(ctx context.Context, mv *move) error {
	s := m.st
	batch := make([]hostabi.InputMessage, len(s.Claimed))
	for i, c := range s.Claimed {
		batch[i] = c.InputMessage
	}
	if len(batch) == 1 && m.command(ctx, mv, batch[0]) {
		return ctx.Err()
	}
	if len(batch) == 1 {
		if name, args, ok := parseCommand(batch[0].Content); ok && (name == "compact" || name == CompactClear) {
			if _, owned := m.cfg.Pipeline.commandOwner(name); !owned {
				if name == CompactClear {
					m.clearCommand(mv, batch[0])
					return nil
				}
				return m.compactCommand(ctx, mv, batch[0], args)
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
		a, faulted := m.ask(ctx, mv, i, v)
		if faulted {
			return false
		}
		if len(a.decisive) == 0 {
			m.accept(mv, a)
			return false
		}
		if len(a.decisive) != 1 {
			m.refuse(mv, man.Name, hostabi.HookPrompt, "prompt takes one of admit, rewrite or reject, got %d effects", len(a.decisive))
			return false
		}
		var evs []store.Event
		var end *event.TurnEnd
		switch e := a.decisive[0]; e.Kind {
		case hostabi.KindAdmit:
			evs = admitted(mv, batch)
		case hostabi.KindReject:
			end = &event.TurnEnd{Turn: s.Turn, Reason: event.ReasonBlocked, Cause: &event.Cause{Kind: "hook", Hook: string(hostabi.HookPrompt), Reason: e.Text},
				Message: fmt.Sprintf("input rejected by %s: %s", man.Name, e.Text)}
		case hostabi.KindRewrite:
			if err := sameIDs(batch, e.Messages); err != nil {
				m.refuse(mv, man.Name, hostabi.HookPrompt, "rewrite: %v", err)
				return false
			}
			evs = admitted(mv, e.Messages)
		}
		if !m.accept(mv, a, evs...) {
			return false
		}
		if end != nil {
			m.endTurn(mv, "", event.ReasonBlocked, func(te *event.TurnEnd) { *te = *end })
		}
		decided = true
		return true
	})
	if !decided {
		mv.push(admitted(mv, batch)...)
	}
	return ctx.Err()
}

// command answers a lone slash command an op owns, and reports whether it
// did.
func (m *Machine) command(ctx context.Context, mv *move, in hostabi.InputMessage) bool {
	name, args, ok := parseCommand(in.Content)
	if !ok {
		return false
	}
	i, ok := m.cfg.Pipeline.commandOwner(name)
	if !ok {
		return false
	}
	_, man := m.cfg.Pipeline.Op(i)
	if m.quarantined(man.Name) {
		return false
	}
	v := m.view(hostabi.HookCommand, man)
	v.Command = &hostabi.CommandView{Name: name, Args: args}
	a, faulted := m.ask(ctx, mv, i, v)
	if faulted || len(a.decisive) == 0 {
		if !faulted {
			m.accept(mv, a)
		}
		return false
	}
	var text string
	for _, e := range a.decisive {
		text += e.Text
	}
	if !m.accept(mv, a,
		mv.event(event.EvUserMessage, event.UserMessage{ID: in.ID, Content: in.Content, Command: name}),
		mv.event(event.EvCommandReply, event.CommandReply{Op: man.Name, Command: name, Text: text})) {
		return false
	}
	mv.sync = true
	m.endTurn(mv, "", event.ReasonCompleted, nil)
	return true
}

func admitted(mv *move, batch []hostabi.InputMessage) []store.Event {
	evs := make([]store.Event, len(batch))
	for i, b := range batch {
		evs[i] = mv.event(event.EvUserMessage, event.UserMessage{ID: b.ID, Content: b.Content})
	}
	return evs
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
// top-of-mind lines, and freezes them into the step's request header. An
// op whose contributions would take the header past what one log event
// holds faults (kind limit) and none of them are taken.
func (m *Machine) contribute(ctx context.Context, mv *move) error {
	h := event.RequestHeader{Model: m.cfg.Model, MaxTokens: m.cfg.MaxTokens, Guards: m.guards()}
	size := 512 // the header's own fields
	for _, p := range m.cfg.PromptParts {
		p.Op = event.HostOp
		h.PromptParts = append(h.PromptParts, p)
		size += sizeOf(p)
	}
	owners := map[string]string{}
	var endTurn *event.Contribution
	m.each(hostabi.HookContribute, func(i int, man *hostabi.Manifest) bool {
		if m.quarantined(man.Name) {
			return false
		}
		a, faulted := m.ask(ctx, mv, i, m.view(hostabi.HookContribute, man))
		if faulted {
			return false
		}
		// Check the whole list before taking any of it.
		var tools []event.HeaderTool
		var parts, lines []event.Contribution
		var end *event.Contribution
		add := 0
		for _, e := range a.decisive {
			switch e.Kind {
			case hostabi.KindTool:
				if hostabi.IsNamespace(e.Tool.Name) || !man.OwnsTool(e.Tool.Name) {
					m.refuse(mv, man.Name, hostabi.HookContribute, "tool %q is not in the op's manifest", e.Tool.Name)
					return false
				}
				if other, dup := owners[e.Tool.Name]; dup {
					m.refuse(mv, man.Name, hostabi.HookContribute, "tool %q is already contributed by %q", e.Tool.Name, other)
					return false
				}
				// Idempotent as the manifest says, or as the source says
				// of this tool now (a read-only or idempotent hint).
				t := event.HeaderTool{ToolSpec: *e.Tool, Owner: man.Name, Idempotent: man.IsIdempotent(e.Tool.Name) || e.Tool.Annotations.Rerunnable()}
				add += sizeOf(t)
				tools = append(tools, t)
			case hostabi.KindPromptPart:
				c := event.Contribution{Op: man.Name, Text: e.Text}
				add += sizeOf(c)
				parts = append(parts, c)
			case hostabi.KindTopOfMind:
				c := event.Contribution{Op: man.Name, Text: e.Text}
				add += sizeOf(c)
				lines = append(lines, c)
			case hostabi.KindEndTurn:
				if end == nil {
					end = &event.Contribution{Op: man.Name, Text: e.Text}
				}
			}
		}
		if size+add > maxDataBytes {
			m.fault(mv, man.Name, hostabi.HookContribute, hostabi.FaultLimit,
				fmt.Sprintf("its contributions are %d bytes; with the others' the step's request header would be %d bytes, over the limit of %d", add, size+add, maxDataBytes))
			return false
		}
		if !m.accept(mv, a) {
			return false
		}
		size += add
		for _, t := range tools {
			owners[t.Name] = man.Name
		}
		h.Tools = append(h.Tools, tools...)
		h.PromptParts = append(h.PromptParts, parts...)
		h.TopOfMind = append(h.TopOfMind, lines...)
		if endTurn == nil {
			endTurn = end
		}
		return false
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if endTurn != nil {
		m.endTurn(mv, event.ReasonLimit, event.ReasonLimit, func(te *event.TurnEnd) {
			te.Cause = &event.Cause{Kind: "hook", Hook: string(hostabi.HookContribute), Reason: endTurn.Op}
			te.Message = endTurn.Text
		})
		return nil
	}
	mv.add(event.EvRequestHeader, h)
	return nil
}

// sizeOf is the encoded size of v inside a list.
func sizeOf(v any) int {
	b, _ := encode(v)
	return len(b) + 1
}

// guards names the pipeline's guards at the tool hook, in order.
func (m *Machine) guards() []string {
	gs := []string{}
	m.each(hostabi.HookTool, func(i int, man *hostabi.Manifest) bool {
		if man.Guard {
			gs = append(gs, man.Name)
		}
		return false
	})
	return gs
}

// Request builds the provider request for the open step from the state and
// the step's header.
func (m *Machine) Request() *provider.Request {
	s := m.st
	req := &provider.Request{Messages: wireMessages(conversation(s)), Attempt: s.Attempts + 1}
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

// maxPartial bounds the text of a cancelled stream kept as an interrupted
// answer.
const maxPartial = 256 << 10

// infer is the native inference op: it waits out a scheduled retry, asks
// the provider, streams deltas to watchers and settles the answer as
// assistant/message or the failure as assistant/attempt. An answer the log
// cannot hold (over one event's size, or with more than MaxCallsPerAnswer
// tool calls) is settled as a failed attempt saying so.
func (m *Machine) infer(ctx context.Context, mv *move) error {
	s := m.st
	// Before the request: would an op shorten the conversation, now that
	// the last answer's size is known?
	if s.LastTokens > 0 && m.compactable() {
		done, err := m.compact(ctx, mv, CompactUsage, "")
		if err != nil || done {
			return err
		}
	}
	if !s.RetryAt.IsZero() {
		if d := s.RetryAt.Sub(m.cfg.Clock()); d > 0 {
			if err := m.cfg.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
	m.partial = nil
	var shown []byte
	resp, err := m.cfg.Provider.Complete(ctx, m.Request(), func(d provider.Delta) {
		if len(shown) < maxPartial {
			shown = append(shown, d.Text...)
		}
		m.publish(Live{Kind: "delta", Text: d.Text})
	})
	if cerr := ctx.Err(); cerr != nil {
		// Cancelled: append nothing; keep what was shown for Abort.
		text := string(shown)
		if resp != nil && resp.Content != "" {
			text = resp.Content
		}
		if len(text) > maxPartial {
			text = text[:maxPartial] + "…"
		}
		if text != "" {
			m.partial = &event.AssistantMessage{Content: text, Interrupted: true}
		}
		return cerr
	}
	mv.now = m.cfg.Clock()
	attempt := func(f hostabi.Failure) {
		mv.add(event.EvAssistantAttempt, event.AssistantAttempt{Attempt: s.Attempts + 1, Failure: f})
	}
	if err != nil {
		f := provider.AsFailure(err)
		if len(f.Message) > 8<<10 {
			f.Message = f.Message[:8<<10] + "…"
		}
		attempt(f)
		return nil
	}
	if len(resp.ToolCalls) > MaxCallsPerAnswer {
		attempt(hostabi.Failure{Code: hostabi.FailBadRequest, Message: fmt.Sprintf("the model asked for %d tool calls in one answer; the limit is %d", len(resp.ToolCalls), MaxCallsPerAnswer)})
		return nil
	}
	am := event.AssistantMessage{Content: resp.Content, FinishReason: resp.FinishReason}
	if resp.Usage != (provider.Usage{}) {
		am.Usage = &event.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	}
	seen := map[string]bool{}
	for _, c := range resp.ToolCalls {
		seen[c.ID] = true
	}
	kept := map[string]bool{}
	for i, c := range resp.ToolCalls {
		if c.ID == "" || kept[c.ID] || len(c.ID) > 256 {
			// The conversation needs unique ids to pair results; make one
			// that is stable for this answer and that no call of it has
			// (the model may have sent call_<seq>_<i> itself).
			c.ID = fmt.Sprintf("call_%d_%d", s.Head+1, i)
			for n := 1; seen[c.ID]; n++ {
				c.ID = fmt.Sprintf("call_%d_%d_%d", s.Head+1, i, n)
			}
			seen[c.ID] = true
		}
		kept[c.ID] = true
		c.ID, c.ModelID = event.CallKey(s.Turn, s.Step, i+1), c.ID
		if len(c.Arguments) == 0 {
			c.Arguments = json.RawMessage(`{}`)
		} else if !json.Valid(c.Arguments) {
			q, _ := encode(string(c.Arguments))
			c.Arguments = q
		}
		am.ToolCalls = append(am.ToolCalls, c)
	}
	ev := mv.event(event.EvAssistantMessage, am)
	if err := mv.room([]store.Event{ev}); err != nil {
		attempt(hostabi.Failure{Code: hostabi.FailBadRequest, Message: "the model's answer does not fit in the log: " + err.Error()})
		return nil
	}
	mv.push(ev)
	return nil
}

// requestError lets ops decide on a failed attempt: the first retry effect
// schedules another request in the same step; without one, or once the
// step has made MaxAttempts requests, the step and turn end in error.
func (m *Machine) requestError(ctx context.Context, mv *move) error {
	s := m.st
	// Too long for the model: a compaction, then the same step once more.
	if s.LastFailure.Code == hostabi.FailContextLength && !s.CompactedInStep && m.compactable() {
		done, err := m.compact(ctx, mv, CompactContextLength, "")
		if err != nil || done {
			return err
		}
	}
	decided := false
	if s.Attempts < m.cfg.MaxAttempts {
		m.each(hostabi.HookRequestError, func(i int, man *hostabi.Manifest) bool {
			if m.quarantined(man.Name) {
				return false
			}
			v := m.view(hostabi.HookRequestError, man)
			v.Failure = &hostabi.FailureView{Failure: *s.LastFailure, Attempt: s.Attempts, Retries: s.Retries}
			a, faulted := m.ask(ctx, mv, i, v)
			if faulted {
				return false
			}
			if len(a.decisive) == 0 {
				m.accept(mv, a)
				return false
			}
			if len(a.decisive) != 1 {
				m.refuse(mv, man.Name, hostabi.HookRequestError, "request-error takes one retry effect, got %d", len(a.decisive))
				return false
			}
			delay := min(max(a.decisive[0].DelayMS, 0), event.MaxRetryDelay.Milliseconds())
			if !m.accept(mv, a, mv.event(event.EvRetryScheduled, event.RetryScheduled{Op: man.Name, Attempt: s.Retries + 1, DelayMS: delay, Failure: *s.LastFailure})) {
				return false
			}
			decided = true
			return true
		})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !decided {
		f := *s.LastFailure
		m.endTurn(mv, event.ReasonError, event.ReasonError, func(te *event.TurnEnd) {
			te.Error = fmt.Sprintf("%s: %s", f.Code, f.Message)
			if f.Status != 0 {
				te.Error = fmt.Sprintf("%s (HTTP %d): %s", f.Code, f.Status, f.Message)
			}
			if s.Attempts >= m.cfg.MaxAttempts {
				te.Error = fmt.Sprintf("gave up after %d attempts in this step; the last failed with %s", s.Attempts, te.Error)
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
		a, faulted := m.ask(ctx, mv, i, v)
		if faulted {
			return false
		}
		if len(a.decisive) == 0 {
			m.accept(mv, a)
			return false
		}
		var ins []hostabi.InputMessage
		for j, e := range a.decisive {
			id := fmt.Sprintf("steer-%d-%d", s.Head+1, j)
			for s.HasID(id) { // a caller chose this id for its own input
				id += "'"
			}
			ins = append(ins, hostabi.InputMessage{ID: id, Content: e.Text})
		}
		if !m.accept(mv, a, mv.event(event.EvInboxSpliced, event.InboxSpliced{List: event.ListNextStep, Start: len(s.NextStep), Inserted: ins})) {
			return false
		}
		mv.inbox = true
		decided = true
		return true
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !decided {
		m.endTurn(mv, event.ReasonCompleted, m.normalEnd(), nil)
	}
	return nil
}

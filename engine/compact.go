package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Compaction (the context/compacted event: a summary and the range of
// messages it stands for in requests from now on; nothing is deleted). Deciding when to shorten the
// conversation is an operation's: the host asks ops at the compact hook
// before a request once the last answer's size is known, after a
// context_length failure (the step is then retried once), and for a
// /compact command. The op that answers gives the summary's instructions;
// the host chooses what to summarise (a call and its result never apart;
// the open turn kept unless it alone overflows, then its oldest completed
// steps), makes one extra model request for the summary, whose
// request/header (event.RequestHeader.Compaction) is appended before it is
// sent, and appends context/compacted with the answer and its usage.
// Nothing is deleted: requests from then on send the latest summary and
// the messages after its range, and the log keeps every message.

// Compaction reasons, as the compact view and context/compacted give them.
const (
	CompactUsage         = "usage"
	CompactContextLength = "context_length"
	CompactCommand       = "command"
	// CompactClear: /clear, a summary of nothing that stands for every
	// message so far, so that requests start afresh.
	CompactClear = "clear"
)

// SummaryPrefix starts the message that stands, in requests, for the
// messages a compaction summarised.
const SummaryPrefix = "[A summary of the earlier conversation, whose messages are not repeated here]\n"

// maxTranscriptMessage bounds one message's text in a summary request.
const maxTranscriptMessage = 4000

// compact asks the compact ops and, if one answers, summarises and adds
// context/compacted to the move. It reports whether it did.
func (m *Machine) compact(ctx context.Context, mv *move, reason, instruction string) (bool, error) {
	s := m.st
	cut := m.cut()
	if cut == 0 {
		return false, nil
	}
	prev := 0
	if s.Compaction != nil {
		prev = s.Compaction.Through
	}
	var winner *answer
	m.each(hostabi.HookCompact, func(i int, man *hostabi.Manifest) bool {
		if m.quarantined(man.Name) {
			return false
		}
		v := m.view(hostabi.HookCompact, man)
		v.Compact = &hostabi.CompactView{Reason: reason, Instruction: instruction, Model: m.model(), Tokens: s.LastTokens, Summarized: prev}
		a, faulted := m.ask(ctx, mv, i, v)
		if faulted {
			return false
		}
		if len(a.decisive) == 0 {
			m.accept(mv, a)
			return false
		}
		if len(a.decisive) != 1 {
			m.refuse(mv, man.Name, hostabi.HookCompact, "compact takes one compact effect, got %d", len(a.decisive))
			return false
		}
		winner = &a
		return true
	})
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if winner == nil {
		return false, nil
	}
	instructions := winner.decisive[0].Text
	req := &provider.Request{Model: m.model(), System: instructions,
		Messages: []hostabi.Message{{Role: "user", Content: m.transcript(prev, cut)}}}
	// The summary request is a model request like a step's: its header is
	// appended before it is sent, so the log shows what was asked and
	// when even if no answer is ever recorded (a crash, a cancel), and
	// the answer after it says how long it took.
	mv.now = m.cfg.Clock()
	h := mv.event(event.EvRequestHeader, event.RequestHeader{
		Compaction:  &event.CompactionRequest{Op: winner.man.Name, Reason: reason, From: prev, Through: cut},
		Model:       req.Model,
		Guards:      []string{}, // it offers no tool
		PromptParts: []event.Contribution{{Op: winner.man.Name, Text: instructions}},
	})
	if err := mv.room([]store.Event{h}); err != nil {
		m.fault(mv, winner.man.Name, hostabi.HookCompact, hostabi.FaultLimit, "its instructions do not fit in the log: "+err.Error())
		return false, nil
	}
	mv.push(h)
	if err := m.commitSoFar(ctx, mv); err != nil {
		return false, err
	}
	resp, err := m.cfg.Provider.Complete(ctx, req, func(provider.Delta) {})
	if cerr := ctx.Err(); cerr != nil {
		return false, cerr
	}
	mv.now = m.cfg.Clock()
	if err == nil && strings.TrimSpace(resp.Content) == "" {
		err = fmt.Errorf("the model answered with no summary")
	}
	if err != nil {
		f := provider.AsFailure(err)
		m.fault(mv, winner.man.Name, hostabi.HookCompact, hostabi.FaultError, fmt.Sprintf("the summary request failed (%s): %s", f.Code, f.Message))
		return false, nil
	}
	d := event.ContextCompacted{Op: winner.man.Name, Reason: reason, Instructions: instructions, Through: cut,
		ThroughSeq: s.MessageSeqs[cut-1-s.Stubbed], Summary: resp.Content, Model: req.Model}
	if resp.Usage != (provider.Usage{}) {
		d.Usage = &event.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	}
	if !m.accept(mv, *winner, mv.event(event.EvContextCompacted, d)) {
		return false, nil
	}
	return true, nil
}

// model is the model of the open step's header, or the machine's.
func (m *Machine) model() string {
	if h := m.st.Header; h != nil && h.Model != "" {
		return h.Model
	}
	return m.cfg.Model
}

// cut chooses where a new summary ends: the latest cut point before the
// open turn (whole turns are summarised), or, when everything before the
// turn is summarised already (the turn alone overflows), the latest cut
// point inside the turn that keeps its latest completed step. 0 means
// there is nothing to summarise.
func (m *Machine) cut() int {
	s := m.st
	prev := 0
	if s.Compaction != nil {
		prev = s.Compaction.Through
	}
	limit := s.MessageCount()
	if s.TurnOpen {
		limit = s.TurnFirstMessage
	}
	best := m.cuts.latest(s, limit)
	if best <= prev {
		best = 0
	}
	if best > 0 || !s.TurnOpen {
		return best
	}
	last := -1
	for i := s.MessageCount() - 1; i > s.TurnFirstMessage && i >= s.Stubbed; i-- {
		if s.Messages[i-s.Stubbed].Role == "assistant" {
			last = i
			break
		}
	}
	if best := m.cuts.latest(s, last); best > prev && best > s.TurnFirstMessage {
		return best
	}
	return 0
}

// cutCache holds the cut points (event.CutPoints) of the live messages, found
// as messages are added: before each request the compaction check asks
// for the latest one, and scanning the whole conversation for it every
// time would make a request's cost grow with the session's length.
type cutCache struct {
	stubbed int             // the State.Stubbed they were found for
	n       int             // messages scanned
	open    map[string]bool // calls without a result in those
	points  []int           // cut points among them, as indices of the whole conversation
}

// latest returns the latest cut point at most at (as an index of the
// whole conversation), or 0.
func (c *cutCache) latest(s *event.State, at int) int {
	if c.open == nil || c.stubbed != s.Stubbed || c.n > len(s.Messages) {
		*c = cutCache{stubbed: s.Stubbed, open: map[string]bool{}}
	}
	for ; c.n < len(s.Messages); c.n++ {
		msg := s.Messages[c.n]
		if c.n > 0 && len(c.open) == 0 && msg.Role != "tool" {
			c.points = append(c.points, s.Stubbed+c.n)
		}
		for _, tc := range msg.ToolCalls {
			c.open[tc.ID] = true
		}
		if msg.Role == "tool" {
			delete(c.open, msg.CallID)
		}
	}
	if end := s.MessageCount(); len(s.Messages) > 0 && len(c.open) == 0 && end <= at {
		return end
	}
	i := sort.SearchInts(c.points, at+1)
	if i == 0 {
		return 0
	}
	return c.points[i-1]
}

// transcript renders what a summary stands for: the previous summary and
// the messages [from, to) as text, each cut to a bound.
func (m *Machine) transcript(from, to int) string {
	s := m.st
	var b strings.Builder
	if c := s.Compaction; c != nil {
		b.WriteString("Summary of what came before:\n")
		b.WriteString(c.Summary)
		b.WriteString("\n\n")
	}
	b.WriteString("The conversation to summarise:\n")
	cutText := func(t string) string {
		if len(t) > maxTranscriptMessage {
			return t[:maxTranscriptMessage] + fmt.Sprintf(" … (%d more bytes)", len(t)-maxTranscriptMessage)
		}
		return t
	}
	for _, msg := range s.Messages[from-s.Stubbed : to-s.Stubbed] {
		switch msg.Role {
		case "user":
			fmt.Fprintf(&b, "\nUser: %s\n", cutText(msg.Content))
		case "assistant":
			if msg.Content != "" {
				fmt.Fprintf(&b, "\nAssistant: %s\n", cutText(msg.Content))
			}
			for _, c := range msg.ToolCalls {
				fmt.Fprintf(&b, "\nAssistant called %s %s (call %s)\n", c.Name, cutText(string(c.Arguments)), c.ID)
			}
		case "tool":
			kind := "Result"
			if msg.IsError {
				kind = "Error result"
			}
			fmt.Fprintf(&b, "\n%s of call %s: %s\n", kind, msg.CallID, cutText(msg.Content))
		}
	}
	b.WriteString("\nWrite the summary now.")
	return b.String()
}

// compactable reports whether some op declares the compact hook.
func (m *Machine) compactable() bool {
	found := false
	m.each(hostabi.HookCompact, func(int, *hostabi.Manifest) bool { found = true; return true })
	return found
}

// conversation is what a request sends: the whole conversation, or the
// latest summary (merged into the first kept message when that is the
// user's, so roles still alternate) and the messages after its range.
func conversation(s *event.State) []hostabi.Message {
	c := s.Compaction
	if c == nil || c.Summary == "" && c.Reason == CompactClear {
		// Cleared: the earlier messages are not sent, nor a summary.
		return s.Messages
	}
	head := hostabi.Message{Role: "user", Content: SummaryPrefix + c.Summary}
	rest := s.Messages // the fold keeps only what follows the summary
	out := make([]hostabi.Message, 0, len(rest)+1)
	if len(rest) > 0 && rest[0].Role == "user" {
		head.Content += "\n\n" + rest[0].Content
		head.ID = rest[0].ID
		rest = rest[1:]
	}
	return append(append(out, head), rest...)
}

// compactCommand answers a lone /compact (when no op owns the command): a
// compaction with the person's instruction, then the turn ends.
func (m *Machine) compactCommand(ctx context.Context, mv *move, in hostabi.InputMessage, args string) error {
	before := 0
	if c := m.st.Compaction; c != nil {
		before = c.Through
	}
	done, err := m.compact(ctx, mv, CompactCommand, args)
	if err != nil {
		return err
	}
	// The command is admitted with its answer, after the summary request's
	// header (appended before the request was sent): a crash in between
	// leaves it claimed and the next transition answers it again, where an
	// admitted command without its reply would leave a turn that goes on
	// to ask the model.
	admit := mv.event(event.EvUserMessage, event.UserMessage{ID: in.ID, Content: in.Content, Command: "compact"})
	rest := mv.events
	mv.events, mv.bytes = nil, 0
	mv.push(admit)
	mv.push(rest...)
	text := "nothing to compact: no op answers the compact hook, or there is nothing older to summarise"
	if done {
		last := mv.events[len(mv.events)-1]
		var d event.ContextCompacted
		json.Unmarshal(last.Data, &d)
		text = fmt.Sprintf("compacted: messages %d to %d are summarised in requests from now on (the log keeps them)", before+1, d.Through)
	}
	mv.add(event.EvCommandReply, event.CommandReply{Op: "host", Command: "compact", Text: text})
	m.endTurn(mv, "", event.ReasonCompleted, nil)
	return nil
}

// clearCommand answers a lone /clear (when no op owns the command): a
// context/compacted with an empty summary through every message so far,
// so that later requests carry none of them (the log keeps them all, and
// a summary of nothing costs no model request), then the turn ends. A
// compaction rather than an event of its own: requests, the fold's
// stubs, snapshots, replay and every reader of the log already know what
// it means, and it is what it is, a summary that keeps nothing.
func (m *Machine) clearCommand(mv *move, in hostabi.InputMessage) {
	s := m.st
	mv.push(mv.event(event.EvUserMessage, event.UserMessage{ID: in.ID, Content: in.Content, Command: CompactClear}))
	prev := 0
	if s.Compaction != nil {
		prev = s.Compaction.Through
	}
	through := s.MessageCount()
	text := "nothing to clear: no message was sent since the last /clear"
	if through > prev && slices.Contains(event.CutPoints(s.Messages), through-s.Stubbed) {
		mv.add(event.EvContextCompacted, event.ContextCompacted{Op: event.HostOp, Reason: CompactClear, Through: through,
			ThroughSeq: s.MessageSeqs[len(s.MessageSeqs)-1]})
		text = fmt.Sprintf("cleared: requests from now on start afresh (messages %d to %d are kept in the log, not sent)", prev+1, through)
	} else if through > prev {
		text = "nothing cleared: a tool call still waits for its result"
	}
	mv.add(event.EvCommandReply, event.CommandReply{Op: event.HostOp, Command: CompactClear, Text: text})
	m.endTurn(mv, "", event.ReasonCompleted, nil)
}

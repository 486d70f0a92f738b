package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// ErrCorruptLog is wrapped by every error the fold returns for a log that
// breaks an invariant.
var ErrCorruptLog = errors.New("engine: log breaks an invariant")

// State is what the engine folds from a session's log. It is built one
// event at a time (Apply) and never re-reads the log.
type State struct {
	Session string
	Head    uint64
	Created *SessionCreated

	// Turn is the number of the last turn opened; TurnOpen says whether it
	// is still open. Step likewise, within the turn.
	Turn     int
	TurnOpen bool
	Step     int
	StepOpen bool

	// Messages is the conversation as the model sees it.
	Messages []hostabi.Message

	// The inbox.
	NextTurn []hostabi.InputMessage
	NextStep []hostabi.InputMessage
	// Claimed is the batch claimed into the turn and not yet admitted.
	Claimed []ClaimedMessage

	// Notes is each op's durable memory: Notes[op][key].
	Notes map[string]map[string]string

	// Turn-scoped.
	MaxTokens  bool           // some answer of this turn hit the token limit
	Concluded  bool           // a tool result concluded the turn
	TurnFaults map[string]int // faults per op in this turn

	// Step-scoped.
	Phase       Phase
	Header      *RequestHeader
	Calls       []*CallState // calls of the step's answer
	Attempts    int          // failed attempts in this step
	Retries     int          // retries scheduled in this step
	LastFailure *hostabi.Failure
	RetryAt     time.Time // when the scheduled retry may be sent
	Answer      *AssistantMessage

	ids map[string]struct{} // every inbox message id ever inserted
}

// ClaimedMessage is a message claimed from the inbox, with the list it came
// from (so recovery can put it back).
type ClaimedMessage struct {
	hostabi.InputMessage
	List string
}

// Phase is where an open step is.
type Phase int

// Step phases.
const (
	PhaseNone          Phase = iota // no step open
	PhaseNeedHeader                 // step opened; contributions not gathered
	PhaseNeedInference              // header (or retry) recorded; ask the model
	PhaseNeedRetry                  // the last attempt failed; request-error decides
	PhaseAnswered                   // the model answered
)

// CallState is one tool call of the step's answer.
type CallState struct {
	hostabi.ToolCall
	Owner      string
	Idempotent bool
	Requested  bool   // an approval request names it
	AskedBy    string // the op that asked for approval
	Decision   string // "", "allow" or "deny"
	Started    bool   // tool/call recorded
	Done       bool   // tool/result recorded
	Concludes  bool
}

// NewState returns the state of an empty log.
func NewState(session string) *State {
	return &State{
		Session:    session,
		Notes:      map[string]map[string]string{},
		TurnFaults: map[string]int{},
		ids:        map[string]struct{}{},
	}
}

// Pending returns the calls without results, in the model's order.
func (s *State) Pending() []*CallState {
	var out []*CallState
	for _, c := range s.Calls {
		if !c.Done {
			out = append(out, c)
		}
	}
	return out
}

// Call returns the step's call with the given id.
func (s *State) Call(id string) *CallState {
	for _, c := range s.Calls {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Waiting reports whether the session is parked for a person: an approval
// request names a call that has neither a decision nor a result.
func (s *State) Waiting() []string {
	var ids []string
	for _, c := range s.Calls {
		if c.Requested && c.Decision == "" && !c.Done {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// HasID reports whether an inbox message id was ever used in the session.
func (s *State) HasID(id string) bool {
	_, ok := s.ids[id]
	return ok
}

func (s *State) corrupt(seq uint64, format string, args ...any) error {
	return fmt.Errorf("%w: session %s seq %d: %s", ErrCorruptLog, s.Session, seq, fmt.Sprintf(format, args...))
}

// Apply folds one event into the state, checking the log's invariants.
// On error the error wraps ErrCorruptLog naming the seq, and the state
// must be discarded.
func (s *State) Apply(e store.Event) error {
	if e.Seq != s.Head+1 {
		return s.corrupt(e.Seq, "expected seq %d: seqs must be dense from 1", s.Head+1)
	}
	if err := s.apply(e); err != nil {
		return err
	}
	s.Head = e.Seq
	return nil
}

func (s *State) decode(e store.Event, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return s.corrupt(e.Seq, "%s data: %v", e.Type, err)
	}
	return nil
}

func (s *State) apply(e store.Event) error {
	if e.Seq == 1 && e.Type != EvSessionCreated {
		return s.corrupt(e.Seq, "the first event is %s, not %s", e.Type, EvSessionCreated)
	}
	switch e.Type {
	case EvSessionCreated:
		if s.Created != nil || e.Seq != 1 {
			return s.corrupt(e.Seq, "%s may only be the first event", e.Type)
		}
		var d SessionCreated
		if err := s.decode(e, &d); err != nil {
			return err
		}
		s.Created = &d

	case EvInboxSpliced:
		var d InboxSpliced
		if err := s.decode(e, &d); err != nil {
			return err
		}
		return s.splice(e.Seq, &d)

	case EvTurnStart:
		var d TurnStart
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if s.TurnOpen {
			return s.corrupt(e.Seq, "turn %d starts while turn %d is open", d.Turn, s.Turn)
		}
		if d.Turn != s.Turn+1 {
			return s.corrupt(e.Seq, "turn %d starts after turn %d", d.Turn, s.Turn)
		}
		s.Turn, s.TurnOpen, s.Step = d.Turn, true, 0
		s.MaxTokens, s.Concluded = false, false
		clear(s.TurnFaults)

	case EvTurnEnd:
		var d TurnEnd
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if !s.TurnOpen || d.Turn != s.Turn {
			return s.corrupt(e.Seq, "turn %d ends but it is not open", d.Turn)
		}
		if s.StepOpen {
			return s.corrupt(e.Seq, "turn %d ends with step %d open", d.Turn, s.Step)
		}
		s.TurnOpen = false
		s.Claimed = nil

	case EvStepStart:
		var d StepStart
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if !s.TurnOpen || d.Turn != s.Turn {
			return s.corrupt(e.Seq, "step %d starts outside an open turn", d.Step)
		}
		if s.StepOpen || d.Step != s.Step+1 {
			return s.corrupt(e.Seq, "step %d starts after step %d (open: %v)", d.Step, s.Step, s.StepOpen)
		}
		if len(s.Claimed) > 0 {
			return s.corrupt(e.Seq, "step %d starts while claimed input waits for admission", d.Step)
		}
		s.Step, s.StepOpen = d.Step, true
		s.Phase = PhaseNeedHeader
		s.Header, s.Calls, s.Answer, s.LastFailure = nil, nil, nil, nil
		s.Attempts, s.Retries = 0, 0
		s.RetryAt = time.Time{}

	case EvStepEnd:
		var d StepEnd
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if !s.StepOpen || d.Step != s.Step || d.Turn != s.Turn {
			return s.corrupt(e.Seq, "step %d of turn %d ends but it is not open", d.Step, d.Turn)
		}
		if p := s.Pending(); len(p) > 0 {
			return s.corrupt(e.Seq, "step %d ends with call %s unanswered", d.Step, p[0].ID)
		}
		s.StepOpen = false
		s.Phase = PhaseNone

	case EvUserMessage:
		var d UserMessage
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if !s.TurnOpen {
			return s.corrupt(e.Seq, "user message %s outside a turn", d.ID)
		}
		i := s.claimedIndex(d.ID)
		if i < 0 {
			return s.corrupt(e.Seq, "user message %s was not claimed from the inbox", d.ID)
		}
		s.Claimed = append(s.Claimed[:i:i], s.Claimed[i+1:]...)
		if d.Command == "" {
			s.Messages = append(s.Messages, hostabi.Message{Role: "user", ID: d.ID, Content: d.Content})
		}

	case EvRequestHeader:
		if s.Phase != PhaseNeedHeader {
			return s.corrupt(e.Seq, "request header outside the start of a step")
		}
		var d RequestHeader
		if err := s.decode(e, &d); err != nil {
			return err
		}
		s.Header = &d
		s.Phase = PhaseNeedInference

	case EvAssistantMessage:
		if s.Phase != PhaseNeedInference {
			return s.corrupt(e.Seq, "assistant message without a pending request")
		}
		var d AssistantMessage
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if d.Interrupted && len(d.ToolCalls) > 0 {
			return s.corrupt(e.Seq, "an interrupted assistant message carries tool calls")
		}
		seen := map[string]bool{}
		for _, c := range d.ToolCalls {
			if c.ID == "" || seen[c.ID] {
				return s.corrupt(e.Seq, "tool call id %q is empty or repeated", c.ID)
			}
			seen[c.ID] = true
			cs := &CallState{ToolCall: c}
			if t := s.Header.tool(c.Name); t != nil {
				cs.Owner, cs.Idempotent = t.Owner, t.Idempotent
			}
			s.Calls = append(s.Calls, cs)
		}
		s.Answer = &d
		s.Phase = PhaseAnswered
		if d.FinishReason == "length" {
			s.MaxTokens = true
		}
		s.Messages = append(s.Messages, hostabi.Message{Role: "assistant", Content: d.Content, ToolCalls: d.ToolCalls})

	case EvAssistantAttempt:
		if s.Phase != PhaseNeedInference {
			return s.corrupt(e.Seq, "failed attempt without a pending request")
		}
		var d AssistantAttempt
		if err := s.decode(e, &d); err != nil {
			return err
		}
		s.Attempts++
		f := d.Failure
		s.LastFailure = &f
		s.Phase = PhaseNeedRetry

	case EvRetryScheduled:
		if s.Phase != PhaseNeedRetry {
			return s.corrupt(e.Seq, "retry scheduled without a failed attempt")
		}
		var d RetryScheduled
		if err := s.decode(e, &d); err != nil {
			return err
		}
		s.Retries++
		s.RetryAt = e.Time.Add(time.Duration(d.DelayMS) * time.Millisecond)
		s.Phase = PhaseNeedInference

	case EvApprovalRequest:
		var d ApprovalRequest
		if err := s.decode(e, &d); err != nil {
			return err
		}
		for _, id := range d.CallIDs {
			c := s.Call(id)
			if c == nil || c.Done {
				return s.corrupt(e.Seq, "approval requested for call %s, which is not pending", id)
			}
			c.Requested = true
			c.AskedBy = d.Op
		}

	case EvApprovalDecision:
		var d ApprovalDecision
		if err := s.decode(e, &d); err != nil {
			return err
		}
		c := s.Call(d.CallID)
		if c == nil || c.Done || c.Decision != "" {
			return s.corrupt(e.Seq, "decision for call %s, which is not pending a decision", d.CallID)
		}
		if d.Allow {
			c.Decision = "allow"
		} else {
			c.Decision = "deny"
		}

	case EvToolCall:
		var d ToolCallEvent
		if err := s.decode(e, &d); err != nil {
			return err
		}
		c := s.Call(d.CallID)
		if c == nil || c.Done || c.Started {
			return s.corrupt(e.Seq, "tool/call for call %s, which is not pending", d.CallID)
		}
		c.Started = true

	case EvToolResult:
		var d ToolResult
		if err := s.decode(e, &d); err != nil {
			return err
		}
		c := s.Call(d.CallID)
		if c == nil || c.Done || !s.StepOpen {
			return s.corrupt(e.Seq, "tool/result for call %s, which is not a pending call of step %d", d.CallID, s.Step)
		}
		c.Done = true
		if d.ConcludesTurn {
			c.Concludes = true
			s.Concluded = true
		}
		s.Messages = append(s.Messages, hostabi.Message{Role: "tool", CallID: d.CallID, Content: d.Content, IsError: d.IsError})

	case EvOpNote:
		var d OpNote
		if err := s.decode(e, &d); err != nil {
			return err
		}
		m := s.Notes[d.Op]
		if m == nil {
			m = map[string]string{}
			s.Notes[d.Op] = m
		}
		m[d.Key] = d.Value

	case EvOpFault:
		var d OpFault
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if s.TurnOpen {
			s.TurnFaults[d.Op]++
		}

	case EvCommandReply, EvSessionRecovered:
		// Records only.

	default:
		// Unknown types from a newer wagent are kept but not understood; a
		// fold must not invent meaning for them.
	}
	return nil
}

func (s *State) claimedIndex(id string) int {
	for i, c := range s.Claimed {
		if c.ID == id {
			return i
		}
	}
	return -1
}

func (s *State) splice(seq uint64, d *InboxSpliced) error {
	var list *[]hostabi.InputMessage
	switch d.List {
	case ListNextTurn:
		list = &s.NextTurn
	case ListNextStep:
		list = &s.NextStep
	default:
		return s.corrupt(seq, "inbox list %q is neither %s nor %s", d.List, ListNextTurn, ListNextStep)
	}
	next, removed, err := spliceList(*list, d)
	if err != nil {
		return s.corrupt(seq, "%v", err)
	}
	var requeued []int
	for _, m := range d.Inserted {
		if m.ID == "" {
			return s.corrupt(seq, "inbox message without an id")
		}
		if s.HasID(m.ID) {
			// Only claimed input that was never admitted may come back.
			i := s.claimedIndex(m.ID)
			if i < 0 {
				return s.corrupt(seq, "inbox message id %s used twice", m.ID)
			}
			requeued = append(requeued, i)
		}
	}
	if d.Removed > 0 && d.Outcome == OutcomeClaimed {
		if !s.TurnOpen {
			return s.corrupt(seq, "input claimed outside a turn")
		}
		for _, m := range removed {
			s.Claimed = append(s.Claimed, ClaimedMessage{InputMessage: m, List: d.List})
		}
	}
	*list = next
	if len(requeued) > 0 {
		keep := s.Claimed[:0:0]
		for i, c := range s.Claimed {
			if !slices.Contains(requeued, i) {
				keep = append(keep, c)
			}
		}
		s.Claimed = keep
	}
	for _, m := range d.Inserted {
		s.ids[m.ID] = struct{}{}
	}
	return nil
}

// spliceList applies a splice to one list and returns the new list and the
// removed items.
func spliceList(l []hostabi.InputMessage, d *InboxSpliced) (next, removed []hostabi.InputMessage, err error) {
	if d.Start < 0 || d.Removed < 0 || d.Start > len(l) || d.Start+d.Removed > len(l) {
		return nil, nil, fmt.Errorf("splice of %s at %d removing %d is out of range (length %d)", d.List, d.Start, d.Removed, len(l))
	}
	removed = l[d.Start : d.Start+d.Removed]
	next = make([]hostabi.InputMessage, 0, len(l)-d.Removed+len(d.Inserted))
	next = append(next, l[:d.Start]...)
	next = append(next, d.Inserted...)
	next = append(next, l[d.Start+d.Removed:]...)
	return next, removed, nil
}

func (h *RequestHeader) tool(name string) *HeaderTool {
	if h == nil {
		return nil
	}
	for i := range h.Tools {
		if h.Tools[i].Name == name {
			return &h.Tools[i]
		}
	}
	return nil
}

// Fold builds the state of a whole log.
func Fold(session string, events []store.Event) (*State, error) {
	s := NewState(session)
	for _, e := range events {
		if err := s.Apply(e); err != nil {
			return nil, err
		}
	}
	return s, nil
}

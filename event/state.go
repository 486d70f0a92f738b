package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// ErrCorruptLog is wrapped by every error the fold returns for a log that
// breaks an invariant.
var ErrCorruptLog = errors.New("event: log breaks an invariant")

// CorruptLog is the error of a log that breaks an invariant.
// errors.Is(err, ErrCorruptLog) holds for it; callers that show what is
// broken take its Detail with errors.As.
type CorruptLog struct {
	// Detail names the session, the seq when there is one, and what is
	// broken.
	Detail string
}

func (e *CorruptLog) Error() string { return ErrCorruptLog.Error() + ": " + e.Detail }

// Is makes a CorruptLog match ErrCorruptLog.
func (e *CorruptLog) Is(target error) bool { return target == ErrCorruptLog }

func corruptLog(format string, args ...any) error {
	return &CorruptLog{Detail: fmt.Sprintf(format, args...)}
}

// State is what the fold makes of a session's log. It is built one
// event at a time (Apply) and never re-reads the log.
type State struct {
	Session string
	Head    uint64
	Created *SessionCreated
	// Settings are the session's settings now: session/created's, with
	// the latest pipeline/changed applied.
	Settings SessionCreated
	// Writer is the id of the incarnation whose session/writer event is
	// the latest: the events since are its own.
	Writer string
	// LastEnd is how the latest closed turn ended (nil before the first).
	LastEnd *TurnEnd
	// Title is the session's first prompt, cut to a line (for lists).
	Title string
	// Name is the name a person gave the session (session/renamed).
	Name string
	// LastActivity is the time of the latest event.
	LastActivity time.Time
	// Usage adds up the token usage of every answer.
	Usage Usage
	// Forked is the latest session/forked: where this log was copied
	// from (nil for a session that was not forked).
	Forked *SessionForked
	// KeyedSince is the seq of the first answer whose calls have the
	// host's keys (0: none yet). Calls without keys are those of logs
	// written before keys; once a session has keys, every later answer
	// has them, so that no unkeyed id can repeat a key.
	KeyedSince uint64

	// Turn is the number of the last turn opened; TurnOpen says whether it
	// is still open. Step likewise, within the turn.
	Turn     int
	TurnOpen bool
	Step     int
	StepOpen bool

	// Messages is the live part of the conversation: the messages after
	// the latest compaction's range (all of them before the first), so a
	// long session keeps in memory only what requests send. Message i of
	// the whole conversation is Messages[i-Stubbed]; MessageSeqs holds the
	// seq of each one's event. See MessageCount.
	Messages    []hostabi.Message
	MessageSeqs []uint64
	// Compaction is the latest context/compacted (nil before the first).
	Compaction *ContextCompacted
	// Stubbed counts the oldest messages, those a compaction summarised:
	// they are not kept in memory; their text stays in the log and is read
	// back on demand (an op reading an old message).
	Stubbed int
	// TurnFirstMessage is the index of the open turn's first message.
	TurnFirstMessage int
	// LastTokens is the input and output tokens of the latest answer.
	LastTokens int

	// The inbox.
	NextTurn []hostabi.InputMessage
	NextStep []hostabi.InputMessage
	// Claimed is the batch claimed into the turn and not yet admitted.
	Claimed []ClaimedMessage
	// TurnPrompted: the open turn claimed its next-turn item.
	TurnPrompted bool

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
	// CompactedInStep: a compaction answered this step's context_length
	// failure (the step is retried once for it).
	CompactedInStep bool

	ids map[string]struct{} // every inbox message id ever inserted
}

// MaxRetryDelay is the longest wait a retry/scheduled event can ask for;
// a longer delay is read as this one (no delay can overflow into an
// immediate retry).
const MaxRetryDelay = 24 * time.Hour

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
	// Server and Annotations are what the owner said of the tool in the
	// step's header (hostabi.ToolSpec).
	Server      string
	Annotations *hostabi.ToolAnnotations
	// Verdicts holds each guard's decision on the call: "allow" or "deny".
	// A guard decides for itself, directly or through a person answering
	// its approval request.
	Verdicts map[string]string
	// Asked names the guards whose approval request for the call waits
	// for a person.
	Asked map[string]bool
	// Requested: some approval request for the call waits for a person.
	Requested bool
	// AskedBy is the guard that asked last, and AskReason why.
	AskedBy   string
	AskReason string
	// Decision is the overall decision: "deny" once any guard denied,
	// "allow" once some guard allowed and none denied, else "".
	Decision string
	// DecidedBy is who recorded the latest decision that was not an op's
	// (a person, the host, a client): "" if none.
	DecidedBy string
	Started   bool   // tool/call recorded
	Writer    string // the incarnation that started it
	Done      bool   // tool/result recorded
	Concludes bool
}

// Verdict returns the named guard's decision on the call ("" if none).
func (c *CallState) Verdict(guard string) string { return c.Verdicts[guard] }

// NewState returns the state of an empty log.
func NewState(session string) *State {
	return &State{
		Session:    session,
		Notes:      map[string]map[string]string{},
		TurnFaults: map[string]int{},
		ids:        map[string]struct{}{},
	}
}

// Clone returns a copy of the state that shares nothing mutable with it.
func (s *State) Clone() *State {
	c := *s
	c.Messages = slices.Clone(s.Messages)
	c.MessageSeqs = slices.Clone(s.MessageSeqs)
	c.NextTurn = slices.Clone(s.NextTurn)
	c.NextStep = slices.Clone(s.NextStep)
	c.Claimed = slices.Clone(s.Claimed)
	c.Notes = make(map[string]map[string]string, len(s.Notes))
	for op, m := range s.Notes {
		c.Notes[op] = maps.Clone(m)
	}
	c.TurnFaults = maps.Clone(s.TurnFaults)
	c.ids = maps.Clone(s.ids)
	c.Calls = make([]*CallState, len(s.Calls))
	for i, cs := range s.Calls {
		cp := *cs
		cp.Verdicts = maps.Clone(cs.Verdicts)
		cp.Asked = maps.Clone(cs.Asked)
		c.Calls[i] = &cp
	}
	if s.LastFailure != nil {
		f := *s.LastFailure
		c.LastFailure = &f
	}
	return &c
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
// request names a call that has neither that guard's decision nor a result.
func (s *State) Waiting() []string {
	var ids []string
	for _, c := range s.Calls {
		if c.Requested && !c.Done {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// HasID reports whether an inbox message id chosen by a caller was ever
// used in the session. Ids the engine generates (see GeneratedID) are
// unique by construction and are not kept.
func (s *State) HasID(id string) bool {
	_, ok := s.ids[id]
	return ok
}

// UsedIDs returns the inbox message ids callers chose in the session (see
// HasID), sorted.
func (s *State) UsedIDs() []string {
	return slices.Sorted(maps.Keys(s.ids))
}

func (s *State) corrupt(seq uint64, format string, args ...any) error {
	return corruptLog("session %s seq %d: %s", s.Session, seq, fmt.Sprintf(format, args...))
}

// Apply folds one event into the state, checking the log's invariants.
// On error the error wraps ErrCorruptLog naming the seq, and the state
// must be discarded.
func (s *State) Apply(e store.Event) error {
	if e.Seq != s.Head+1 {
		return s.corrupt(e.Seq, "expected seq %d: seqs must be dense from 1", s.Head+1)
	}
	if err := s.placed(e); err != nil {
		return err
	}
	if err := s.apply(e); err != nil {
		return err
	}
	s.Head = e.Seq
	if e.Time.After(s.LastActivity) {
		s.LastActivity = e.Time
	}
	return nil
}

// placed checks the envelope (turn, step) of an event other than the turn
// and step boundaries (apply checks those against their data): inside an
// open step it carries that turn and step, inside a turn that turn, and
// outside any turn neither. Events appended from outside the machine
// (input, decisions) may leave both zero.
func (s *State) placed(e store.Event) error {
	switch e.Type {
	case EvTurnStart, EvTurnEnd, EvStepStart, EvStepEnd:
		return nil
	}
	turn, step := 0, 0
	if s.TurnOpen {
		turn = s.Turn
		if s.StepOpen {
			step = s.Step
		}
	}
	if e.Turn == turn && e.Step == step || e.Turn == 0 && e.Step == 0 {
		return nil
	}
	return s.corrupt(e.Seq, "%s is placed at turn %d step %d, but the log is at turn %d step %d", e.Type, e.Turn, e.Step, turn, step)
}

// boundary checks that a turn or step boundary's envelope says what its
// data says.
func (s *State) boundary(e store.Event, turn, step int) error {
	if e.Turn != turn || e.Step != step {
		return s.corrupt(e.Seq, "%s is placed at turn %d step %d, but its data says turn %d step %d", e.Type, e.Turn, e.Step, turn, step)
	}
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
		s.Settings = d

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
		if err := s.boundary(e, d.Turn, 0); err != nil {
			return err
		}
		s.Turn, s.TurnOpen, s.Step = d.Turn, true, 0
		s.TurnPrompted = false
		s.TurnFirstMessage = s.MessageCount()
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
		if err := s.boundary(e, d.Turn, 0); err != nil {
			return err
		}
		s.TurnOpen = false
		s.Claimed = nil
		s.LastEnd = &d

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
		if err := s.boundary(e, d.Turn, d.Step); err != nil {
			return err
		}
		s.Step, s.StepOpen = d.Step, true
		s.Phase = PhaseNeedHeader
		s.Header, s.Calls, s.Answer, s.LastFailure = nil, nil, nil, nil
		s.Attempts, s.Retries = 0, 0
		s.RetryAt = time.Time{}
		s.CompactedInStep = false

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
		if err := s.boundary(e, d.Turn, d.Step); err != nil {
			return err
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
			s.addMessage(e.Seq, hostabi.Message{Role: "user", ID: d.ID, Content: d.Content})
			if s.Title == "" {
				s.Title = titleOf(d.Content)
			}
		}

	case EvRequestHeader:
		var d RequestHeader
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if d.Compaction != nil {
			// A summary request's: a record beside the step, whose header
			// and phase stay. Logs from before it was written have none,
			// and nothing in the fold depends on it.
			if !s.mayCompact() {
				return s.corrupt(e.Seq, "a summary request outside a turn, or in a step that is not before a request")
			}
			break
		}
		if s.Phase != PhaseNeedHeader {
			return s.corrupt(e.Seq, "request header outside the start of a step")
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
		keyed := len(d.ToolCalls) > 0 && d.ToolCalls[0].ModelID != ""
		for i, c := range d.ToolCalls {
			if c.ID == "" || seen[c.ID] {
				return s.corrupt(e.Seq, "tool call id %q is empty or repeated", c.ID)
			}
			seen[c.ID] = true
			if keyed {
				// Calls named by the host's keys (the model's ids are wire
				// data): each key is the one its place gives it, so no two
				// calls of the session share one.
				if want := CallKey(s.Turn, s.Step, i+1); c.ID != want {
					return s.corrupt(e.Seq, "tool call %d of the answer is keyed %q, not %q", i+1, c.ID, want)
				}
				if c.ModelID == "" || seen["\x00"+c.ModelID] {
					return s.corrupt(e.Seq, "tool call %s has an empty or repeated model id %q", c.ID, c.ModelID)
				}
				seen["\x00"+c.ModelID] = true
			} else if c.ModelID != "" {
				return s.corrupt(e.Seq, "tool call %q has a model id, but the answer's first call has none", c.ID)
			} else if s.KeyedSince != 0 {
				return s.corrupt(e.Seq, "tool call %q has no key, but the session's calls have keys since seq %d", c.ID, s.KeyedSince)
			}
			cs := &CallState{ToolCall: c}
			if t := s.Header.Tool(c.Name); t != nil {
				cs.Owner, cs.Idempotent = t.Owner, t.Idempotent
				cs.Server, cs.Annotations = t.Server, t.Annotations
			}
			s.Calls = append(s.Calls, cs)
		}
		if keyed && s.KeyedSince == 0 {
			s.KeyedSince = e.Seq
		}
		s.Answer = &d
		s.Phase = PhaseAnswered
		s.LastTokens = 0
		if d.Usage != nil {
			s.Usage = s.Usage.Add(*d.Usage)
			s.LastTokens = d.Usage.Total()
		}
		if d.FinishReason == "length" {
			s.MaxTokens = true
		}
		s.addMessage(e.Seq, hostabi.Message{Role: "assistant", Content: d.Content, ToolCalls: d.ToolCalls})

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
		s.RetryAt = e.Time.Add(time.Duration(min(max(d.DelayMS, 0), MaxRetryDelay.Milliseconds())) * time.Millisecond)
		s.Phase = PhaseNeedInference

	case EvApprovalRequest:
		var d ApprovalRequest
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if !s.StepOpen {
			return s.corrupt(e.Seq, "approval requested outside a step")
		}
		if s.Header.strict() && !s.Header.isGuard(d.Op) {
			return s.corrupt(e.Seq, "approval requested by %s, which is not a guard of this step", d.Op)
		}
		for _, id := range d.CallIDs {
			c := s.Call(id)
			if c == nil || c.Done || c.Started || c.Verdicts[d.Op] != "" || c.Asked[d.Op] {
				return s.corrupt(e.Seq, "approval requested for call %s, which is not waiting for a decision of %s", id, d.Op)
			}
			if c.Asked == nil {
				c.Asked = map[string]bool{}
			}
			c.Asked[d.Op] = true
			c.Requested = true
			c.AskedBy, c.AskReason = d.Op, d.Reason
		}

	case EvApprovalDecision:
		var d ApprovalDecision
		if err := s.decode(e, &d); err != nil {
			return err
		}
		c := s.Call(d.CallID)
		if c == nil || c.Done || c.Started || !s.StepOpen {
			return s.corrupt(e.Seq, "decision for call %s, which is not pending a decision", d.CallID)
		}
		guard := d.Guard
		if guard == "" {
			guard = c.AskedBy // a log written before decisions named their guard
		}
		if s.Header.strict() {
			if !s.Header.isGuard(guard) {
				return s.corrupt(e.Seq, "decision for call %s counts for %q, which is not a guard of this step", d.CallID, guard)
			}
			if !strings.HasPrefix(d.Who, "op:") && d.Who != "host" && !c.Asked[guard] {
				return s.corrupt(e.Seq, "%s decided call %s for %s, which asked no person", d.Who, d.CallID, guard)
			}
		}
		if c.Verdicts[guard] != "" {
			return s.corrupt(e.Seq, "call %s was already decided by %q", d.CallID, guard)
		}
		if c.Verdicts == nil {
			c.Verdicts = map[string]string{}
		}
		v := "deny"
		if d.Allow {
			v = "allow"
		}
		c.Verdicts[guard] = v
		if !strings.HasPrefix(d.Who, "op:") {
			c.DecidedBy = d.Who
		}
		delete(c.Asked, guard)
		c.Requested = len(c.Asked) > 0
		if v == "deny" || c.Decision == "" {
			c.Decision = v
		}

	case EvToolCall:
		var d ToolCallEvent
		if err := s.decode(e, &d); err != nil {
			return err
		}
		c := s.Call(d.CallID)
		if c == nil || c.Done || !s.StepOpen {
			return s.corrupt(e.Seq, "tool/call for call %s, which is not pending", d.CallID)
		}
		if c.Started && !(d.Rerun && c.Idempotent && c.Writer != s.Writer) {
			return s.corrupt(e.Seq, "tool/call for call %s, which already started", d.CallID)
		}
		if c.Owner == "" || d.Op != c.Owner {
			return s.corrupt(e.Seq, "tool/call for call %s names op %q, but the tool belongs to %q", d.CallID, d.Op, c.Owner)
		}
		if c.Decision == "deny" || c.Requested {
			return s.corrupt(e.Seq, "tool/call for call %s, which a guard denied or still asks about", d.CallID)
		}
		for _, g := range s.Header.guards() {
			if !slices.Contains(d.Guards, g) {
				return s.corrupt(e.Seq, "tool/call for call %s was not passed by guard %s", d.CallID, g)
			}
		}
		c.Started = true
		c.Writer = d.Writer

	case EvToolResult:
		var d ToolResult
		if err := s.decode(e, &d); err != nil {
			return err
		}
		c := s.Call(d.CallID)
		if c == nil || c.Done || !s.StepOpen {
			return s.corrupt(e.Seq, "tool/result for call %s, which is not a pending call of step %d", d.CallID, s.Step)
		}
		// Owners run, after the intent is durable: an owned call is
		// answered by its owner only once started, and otherwise only by
		// the host (a denial, an interruption, an unavailable op).
		if c.Owner != "" && d.Op != "host" && s.Header.strict() {
			if d.Op != c.Owner {
				return s.corrupt(e.Seq, "tool/result for call %s from %q, but the tool belongs to %q", d.CallID, d.Op, c.Owner)
			}
			if !c.Started {
				return s.corrupt(e.Seq, "tool/result for call %s from its owner %s before its tool/call", d.CallID, d.Op)
			}
		}
		c.Done = true
		if d.ConcludesTurn {
			c.Concludes = true
			s.Concluded = true
		}
		s.addMessage(e.Seq, hostabi.Message{Role: "tool", CallID: d.CallID, Content: d.Content, IsError: d.IsError})

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

	case EvContextCompacted:
		var d ContextCompacted
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if !s.mayCompact() {
			return s.corrupt(e.Seq, "a compaction outside a turn, or in a step that is not before a request")
		}
		prev := 0
		if s.Compaction != nil {
			prev = s.Compaction.Through
		}
		if d.Through <= prev || !slices.Contains(s.cutPoints(), d.Through) {
			return s.corrupt(e.Seq, "a compaction through message %d, which is not a boundary after %d (a call and its result are never split)", d.Through, prev)
		}
		s.Compaction = &d
		// The summary request is a model request: its tokens count.
		if d.Usage != nil {
			s.Usage = s.Usage.Add(*d.Usage)
		}
		// What the summary stands for is kept in the log, not in memory.
		drop := d.Through - s.Stubbed
		s.Messages = slices.Clone(s.Messages[drop:])
		s.MessageSeqs = slices.Clone(s.MessageSeqs[drop:])
		s.Stubbed = d.Through
		if s.StepOpen && s.Phase == PhaseNeedRetry {
			s.Phase = PhaseNeedInference
			s.CompactedInStep = true
		}

	case EvPipelineChanged:
		var d PipelineChanged
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if s.TurnOpen {
			return s.corrupt(e.Seq, "the pipeline changes inside turn %d; it may change only between turns", s.Turn)
		}
		s.Settings.Pipeline, s.Settings.Model, s.Settings.Settings = d.Pipeline, d.Model, d.Settings

	case EvSessionWriter:
		var d SessionWriter
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if d.ID == "" {
			return s.corrupt(e.Seq, "session/writer without an id")
		}
		s.Writer = d.ID

	case EvSessionForked:
		var d SessionForked
		if err := s.decode(e, &d); err != nil {
			return err
		}
		// The fork point is the event before it, a turn boundary.
		if d.Origin == "" || d.Seq+1 != e.Seq || s.TurnOpen {
			return s.corrupt(e.Seq, "session/forked must follow the events it copied (seq %d of %q), at a turn boundary", d.Seq, d.Origin)
		}
		s.Forked = &d

	case EvSessionRenamed:
		var d SessionRenamed
		if err := s.decode(e, &d); err != nil {
			return err
		}
		if len(d.Name) > MaxNameLen || strings.ContainsAny(d.Name, "\n\r") {
			return s.corrupt(e.Seq, "a session name must be one line of at most %d bytes", MaxNameLen)
		}
		s.Name = d.Name

	case EvCommandReply, EvSessionRecovered:
		// Records only.

	default:
		// Unknown types from a newer wagent are kept but not understood; a
		// fold must not invent meaning for them.
	}
	return nil
}

// mayCompact reports whether a compaction may happen here: in a turn,
// between steps or in a step before a request.
func (s *State) mayCompact() bool {
	return s.TurnOpen && (!s.StepOpen || s.Phase == PhaseNeedInference || s.Phase == PhaseNeedRetry)
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
	next, removed, err := d.Splice(*list)
	if err != nil {
		return s.corrupt(seq, "%v", err)
	}
	var requeued []int
	for _, m := range d.Inserted {
		if m.ID == "" {
			return s.corrupt(seq, "inbox message without an id")
		}
		n, generated := GeneratedID(m.ID)
		if generated && n > seq {
			return s.corrupt(seq, "inbox message id %s names a seq after its own", m.ID)
		}
		if i := s.claimedIndex(m.ID); i >= 0 {
			// Claimed input that was never admitted comes back.
			requeued = append(requeued, i)
		} else if !generated && s.HasID(m.ID) {
			return s.corrupt(seq, "inbox message id %s used twice", m.ID)
		}
	}
	if d.Removed > 0 && d.Outcome == OutcomeClaimed {
		if !s.TurnOpen {
			return s.corrupt(seq, "input claimed outside a turn")
		}
		for _, m := range removed {
			s.Claimed = append(s.Claimed, ClaimedMessage{InputMessage: m, List: d.List})
		}
		if d.List == ListNextTurn {
			s.TurnPrompted = true
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
		if _, generated := GeneratedID(m.ID); !generated {
			s.ids[m.ID] = struct{}{}
		}
	}
	return nil
}

// GeneratedID reports whether id has the shape of the ids the engine
// gives input ("m<seq>-<n>", and "steer-<seq>-<n>" for steering from
// turn-stopping ops, where seq is the head when it was made, plus any
// trailing "'" an older version added) and returns its seq. Such ids are
// unique by construction, so the fold keeps no record of them, and a
// caller may not choose one (the engine refuses it: engine.CheckInputID).
func GeneratedID(id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, "m")
	if !ok {
		if rest, ok = strings.CutPrefix(id, "steer-"); !ok {
			return 0, false
		}
	}
	rest = strings.TrimRight(rest, "'")
	a, b, ok := strings.Cut(rest, "-")
	if !ok || !digits(a) || !digits(b) || len(a) > 19 {
		return 0, false
	}
	n, err := strconv.ParseUint(a, 10, 64)
	return n, err == nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Splice applies the splice to l, the list it names, and returns the new
// list and the removed items; l itself is not changed.
func (d *InboxSpliced) Splice(l []hostabi.InputMessage) (next, removed []hostabi.InputMessage, err error) {
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

// guards returns the step's guards (none for a nil header).
func (h *RequestHeader) guards() []string {
	if h == nil {
		return nil
	}
	return h.Guards
}

func (h *RequestHeader) isGuard(name string) bool { return slices.Contains(h.guards(), name) }

// strict reports whether the header records the step's guards, so the
// fold can hold decisions and results to the guard and owner rules. Logs
// from versions that did not record them are read without those checks.
func (h *RequestHeader) strict() bool { return h != nil && h.Guards != nil }

// Tool returns the header's tool of that name (nil for none, or a nil
// header).
func (h *RequestHeader) Tool(name string) *HeaderTool {
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

// MessageCount is how many messages the conversation has, summarised ones
// included.
func (s *State) MessageCount() int { return s.Stubbed + len(s.Messages) }

// cutPoints lists the cut points after the latest summary, as indices of
// the whole conversation.
func (s *State) cutPoints() []int {
	out := CutPoints(s.Messages)
	for i := range out {
		out[i] += s.Stubbed
	}
	return out
}

func (s *State) addMessage(seq uint64, m hostabi.Message) {
	s.Messages = append(s.Messages, m)
	s.MessageSeqs = append(s.MessageSeqs, seq)
}

// CutPoints lists where a conversation may be cut for a summary: the
// indices i (1 ≤ i ≤ len) such that every tool call in msgs[:i] has its
// result there too and msgs[i] is not a tool result, so a call and its
// result always fall on the same side.
func CutPoints(msgs []hostabi.Message) []int {
	var out []int
	open := map[string]bool{}
	for i, m := range msgs {
		if i > 0 && len(open) == 0 && m.Role != "tool" {
			out = append(out, i)
		}
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.Role == "tool" {
			delete(open, m.CallID)
		}
	}
	if len(msgs) > 0 && len(open) == 0 {
		out = append(out, len(msgs))
	}
	return out
}

// titleOf cuts a prompt to one short line.
func titleOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > 72 {
		s = string(r[:71]) + "…"
	}
	return s
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

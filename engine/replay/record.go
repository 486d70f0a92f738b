package replay

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// What the recorded log holds, read once before the replay: each event's
// origin, the answers and results to feed, and where input arrived.

// origin says who appended a recorded event.
type origin int

const (
	// byMachine: a transition (a host move, a hook's winner, inference).
	byMachine origin = iota
	// byInput: from outside, between transitions: input, a cancellation
	// of queued input, changed settings, a fork point. Fed as recorded.
	byInput
	// byAbort: a cancellation that closed the open turn (turn/end
	// aborted, with what closed it). Fed as recorded.
	byAbort
	// byPerson: a person's decision and what it appended (the denial's
	// result, the "always" note). Fed through Decide when the replay
	// waits for it.
	byPerson
	// skipped: incarnations, recovery records, idempotent reruns; neither
	// fed nor compared.
	skipped
)

// moveKey names a move of the machine by its place in either log.
type moveKey struct {
	bc  int
	typ string
	nth int
}

// stepKey names a step (step 0: in the turn, outside any step).
type stepKey struct{ turn, step int }

// answer is one recorded inference outcome of a step: a message or a
// failed attempt.
type answer struct {
	msg  *event.AssistantMessage
	fail *hostabi.Failure
}

// run is what the recording says of one call's run by its owner.
type ran struct {
	result  event.ToolResult
	seq     uint64
	started bool           // a tool/call came before the result
	notes   []event.OpNote // the owner's notes with the result
	fault   *event.OpFault // the owner's fault while running it
}

// commanded is what the recording says of the command hook in one turn:
// the op that answered, its reply and the notes it wrote with it, or its
// fault there.
type commanded struct {
	op    string
	reply *event.CommandReply
	notes []event.OpNote
	fault *event.OpFault
	seq   uint64
}

// group is a run of events appended from outside (input or an abort),
// fed into the replay when it reaches the same point: once it has made as
// many boundary moves as the recording had before the group, and, for a
// group that came while a step was open, the move just before it.
type group struct {
	origin   origin
	from, to int // indices in the log
	need     int // boundary count before it
	prev     int // index of the machine event before it, -1 if none
	midStep  bool
}

type recording struct {
	session string
	evs     []store.Event
	start   int // index of the first replayed event
	origin  []origin
	// bc[i] is how many boundary moves the machine made from start to
	// event i; off[i] is i's place among the machine's events since the
	// last of them.
	bc, off []int
	// move[i] names a machine event by its place: the boundary moves
	// before it, its type, and how many of that type came since.
	move   []moveKey
	groups []group

	answers   map[stepKey][]answer
	summaries map[stepKey][]event.ContextCompacted
	headers   map[stepKey]int // index of each step's request header
	steers    map[stepKey][]hostabi.InputMessage
	// Runs, results and persons' decisions are found by the call's step
	// and id: a model's call ids are its own and may repeat from one
	// step or turn to the next.
	runs     map[callKey]*ran
	commands map[int]*commanded // by turn
	results  map[callKey]store.Event
	persons  map[callKey]event.ApprovalDecision
	users    map[string]store.Event
	turnMsgs map[int]int
	turnEnds map[int]uint64
	final    *event.State
}

// isBoundary reports whether a machine event is one of the moves input
// is claimed around: a turn or step boundary, a claim, an admission, a
// steer.
func isBoundary(typ string) bool {
	switch typ {
	case event.EvTurnStart, event.EvTurnEnd, event.EvStepStart, event.EvStepEnd, event.EvUserMessage, event.EvInboxSpliced:
		return true
	}
	return false
}

// isMessage reports whether an event adds to the conversation.
func isMessage(e store.Event) bool {
	switch e.Type {
	case event.EvAssistantMessage, event.EvToolResult:
		return true
	case event.EvUserMessage:
		if !bytes.Contains(e.Data, []byte(`"command"`)) {
			return true // the common case, without decoding
		}
		var d event.UserMessage
		json.Unmarshal(e.Data, &d)
		return d.Command == ""
	}
	return false
}

// read indexes the recorded log; start is the index of the first event
// the replay makes again (the events before it are copied as they are).
// callKey names a call in a recording: its turn, step and the model's id.
type callKey struct {
	turn, step int
	id         string
}

func read(session string, evs []store.Event, start int) (*recording, error) {
	r := &recording{session: session, evs: evs, start: start,
		origin: make([]origin, len(evs)), bc: make([]int, len(evs)), off: make([]int, len(evs)), move: make([]moveKey, len(evs)),
		answers: map[stepKey][]answer{}, summaries: map[stepKey][]event.ContextCompacted{},
		headers: map[stepKey]int{}, steers: map[stepKey][]hostabi.InputMessage{},
		runs: map[callKey]*ran{}, commands: map[int]*commanded{}, results: map[callKey]store.Event{}, persons: map[callKey]event.ApprovalDecision{},
		users: map[string]store.Event{}, turnMsgs: map[int]int{}, turnEnds: map[int]uint64{}}
	r.classify()

	st := event.NewState(session)
	var running *ran
	var runningID callKey
	bc, off := 0, 0
	nth := map[string]int{}
	var g *group
	lastMachine := -1
	for i, e := range evs {
		stepOpen := st.StepOpen
		if err := st.Apply(e); err != nil {
			return nil, err
		}
		if i < start {
			continue
		}
		o := r.origin[i]
		r.bc[i], r.off[i] = bc, off
		if o == byInput || o == byAbort {
			if g == nil || g.origin != o {
				r.groups = append(r.groups, group{origin: o, from: i, need: bc, prev: lastMachine, midStep: stepOpen})
				g = &r.groups[len(r.groups)-1]
			}
			g.to = i + 1
		} else {
			g = nil
		}
		if isMessage(e) {
			r.turnMsgs[e.Turn]++
		}
		key := stepKey{e.Turn, e.Step}
		switch e.Type {
		case event.EvUserMessage:
			var d event.UserMessage
			json.Unmarshal(e.Data, &d)
			r.users[d.ID] = e
		case event.EvToolResult:
			var d event.ToolResult
			json.Unmarshal(e.Data, &d)
			k := callKey{e.Turn, e.Step, d.CallID}
			r.results[k] = e
			if running != nil && runningID == k {
				running.result, running.seq = d, e.Seq
				r.runs[k] = running
				running, runningID = nil, callKey{}
			} else if r.runs[k] == nil {
				r.runs[k] = &ran{result: d, seq: e.Seq}
			}
		case event.EvTurnEnd:
			var d event.TurnEnd
			json.Unmarshal(e.Data, &d)
			r.turnEnds[d.Turn] = e.Seq
		}
		if o == byPerson {
			var d event.ApprovalDecision
			if e.Type == event.EvApprovalDecision && json.Unmarshal(e.Data, &d) == nil {
				k := callKey{e.Turn, e.Step, d.CallID}
				if _, ok := r.persons[k]; !ok {
					r.persons[k] = d
				}
			}
			continue
		}
		if o == skipped && e.Type != event.EvToolCall {
			continue
		}
		switch e.Type {
		case event.EvToolCall:
			var d event.ToolCallEvent
			json.Unmarshal(e.Data, &d)
			running, runningID = &ran{started: true, result: event.ToolResult{Op: d.Op}}, callKey{e.Turn, e.Step, d.CallID}
		case event.EvOpNote:
			var d event.OpNote
			json.Unmarshal(e.Data, &d)
			if running != nil && d.Op == running.result.Op {
				running.notes = append(running.notes, d)
			}
		case event.EvOpFault:
			var d event.OpFault
			json.Unmarshal(e.Data, &d)
			if running != nil && d.Op == running.result.Op {
				running.fault = &d
			}
		}
		if o != byMachine {
			continue
		}
		r.command(e, i)
		switch e.Type {
		case event.EvAssistantMessage:
			var d event.AssistantMessage
			json.Unmarshal(e.Data, &d)
			r.answers[key] = append(r.answers[key], answer{msg: &d})
		case event.EvAssistantAttempt:
			var d event.AssistantAttempt
			json.Unmarshal(e.Data, &d)
			r.answers[key] = append(r.answers[key], answer{fail: &d.Failure})
		case event.EvContextCompacted:
			var d event.ContextCompacted
			json.Unmarshal(e.Data, &d)
			r.summaries[key] = append(r.summaries[key], d)
		case event.EvRequestHeader:
			if !event.IsSummaryHeader(e) {
				r.headers[key] = i // decoded when a tool source asks (header)
			}
		case event.EvInboxSpliced:
			var d event.InboxSpliced
			json.Unmarshal(e.Data, &d)
			if len(d.Inserted) > 0 {
				r.steers[key] = append(r.steers[key], d.Inserted...)
			}
		}
		lastMachine = i
		r.move[i] = moveKey{bc, e.Type, nth[e.Type]}
		nth[e.Type]++
		off++
		if isBoundary(e.Type) {
			bc++
			off = 0
			clear(nth)
		}
	}
	r.final = st
	return r, nil
}

// command notes what the command hook answered, from a machine event:
// a command/reply with the notes of its op just before it (accept appends
// an answer's notes first, in the same move), or an op/fault at the hook.
func (r *recording) command(e store.Event, i int) {
	switch e.Type {
	case event.EvCommandReply:
		var d event.CommandReply
		json.Unmarshal(e.Data, &d)
		c := &commanded{op: d.Op, reply: &d, seq: e.Seq}
		// The user/message of the command sits between the notes and
		// the reply.
		j := i - 1
		for j >= r.start && r.evs[j].Type == event.EvUserMessage && r.evs[j].Turn == e.Turn {
			j--
		}
		var notes []event.OpNote
		for ; j >= r.start && r.evs[j].Type == event.EvOpNote && r.evs[j].Turn == e.Turn; j-- {
			var n event.OpNote
			json.Unmarshal(r.evs[j].Data, &n)
			if n.Op != d.Op {
				break
			}
			notes = append(notes, n)
		}
		slices.Reverse(notes)
		c.notes = notes
		r.commands[e.Turn] = c
	case event.EvOpFault:
		var d event.OpFault
		json.Unmarshal(e.Data, &d)
		if d.Hook == string(hostabi.HookCommand) {
			r.commands[e.Turn] = &commanded{op: d.Op, fault: &d, seq: e.Seq}
		}
	}
}

// classify says who appended each event. The machine's own events are
// told from outside appends by their shape: a splice that only inserts
// input (a claim removes, a steer inserts ids made for it), a decision a
// person made (and the result and note it appended), a cancellation (the
// turn/end "aborted", with the step/end, results, requeued input and
// interrupted answer appended with it, and the discarded input after).
func (r *recording) classify() {
	evs := r.evs
	for i, e := range evs {
		switch e.Type {
		case event.EvSessionCreated, event.EvSessionWriter, event.EvSessionRecovered:
			r.origin[i] = skipped
		case event.EvPipelineChanged, event.EvSessionForked, event.EvSessionRenamed:
			r.origin[i] = byInput
		case event.EvTurnStart:
			// A retry a person asked for (wagent resume after a turn that
			// ended in error) opens its turn from outside, as input does.
			var d event.TurnStart
			if json.Unmarshal(e.Data, &d) == nil && d.Retry > 0 {
				r.origin[i] = byInput
			}
		case event.EvToolCall:
			var d event.ToolCallEvent
			if json.Unmarshal(e.Data, &d) == nil && d.Rerun {
				r.origin[i] = skipped
			}
		case event.EvInboxSpliced:
			var d event.InboxSpliced
			json.Unmarshal(e.Data, &d)
			if !(d.Removed > 0 && d.Outcome == event.OutcomeClaimed) && !steering(d.Inserted) {
				r.origin[i] = byInput
			}
		case event.EvApprovalDecision:
			var d event.ApprovalDecision
			json.Unmarshal(e.Data, &d)
			if strings.HasPrefix(d.Who, "op:") || d.Who == "host" {
				continue
			}
			r.origin[i] = byPerson
			for j := i + 1; j < len(evs); j++ {
				if !personsToo(evs[j], d) {
					break
				}
				r.origin[j] = byPerson
			}
		case event.EvTurnEnd:
			var d event.TurnEnd
			json.Unmarshal(e.Data, &d)
			if d.Reason != event.ReasonAborted {
				continue
			}
			r.origin[i] = byAbort
			for j := i - 1; j >= 0 && evs[j].Time.Equal(e.Time) && (r.origin[j] == byMachine || r.origin[j] == byInput) && closing(evs[j]); j-- {
				r.origin[j] = byAbort
			}
			for j := i + 1; j < len(evs) && evs[j].Type == event.EvInboxSpliced && evs[j].Time.Equal(e.Time); j++ {
				var s event.InboxSpliced
				json.Unmarshal(evs[j].Data, &s)
				if s.Outcome != event.OutcomeCanceled {
					break
				}
				r.origin[j] = byAbort
			}
		}
	}
}

// steering reports whether inserted input is a turn-stopping op's
// steering (ids "steer-SEQ-N").
func steering(in []hostabi.InputMessage) bool {
	if len(in) == 0 {
		return false
	}
	for _, m := range in {
		if !strings.HasPrefix(m.ID, "steer-") {
			return false
		}
	}
	return true
}

// personsToo reports whether e is appended with a person's decision d:
// the same call's decision for another guard, its denial's result, the
// "always" note.
func personsToo(e store.Event, d event.ApprovalDecision) bool {
	switch e.Type {
	case event.EvApprovalDecision:
		var x event.ApprovalDecision
		json.Unmarshal(e.Data, &x)
		return x.CallID == d.CallID && x.Who == d.Who
	case event.EvToolResult:
		var x event.ToolResult
		json.Unmarshal(e.Data, &x)
		return !d.Allow && x.CallID == d.CallID && x.Op == "host" && x.Code == hostabi.CodeDenied
	case event.EvOpNote:
		var x event.OpNote
		json.Unmarshal(e.Data, &x)
		return d.Scope == hostabi.ScopeAlways && strings.HasPrefix(x.Key, hostabi.AlwaysNotePrefix)
	}
	return false
}

// closing reports whether e can be part of what a cancellation appends
// before its turn/end.
func closing(e store.Event) bool {
	switch e.Type {
	case event.EvStepEnd:
		var d event.StepEnd
		json.Unmarshal(e.Data, &d)
		return d.Outcome == event.ReasonAborted
	case event.EvToolResult:
		// What Abort answers an open call with.
		var d event.ToolResult
		json.Unmarshal(e.Data, &d)
		switch d.Code {
		case hostabi.CodeNotStarted, hostabi.CodeInterrupted:
			return d.Op == "host"
		case hostabi.CodeOutcomeUnknown:
			return d.Op == "host" && strings.HasPrefix(d.Content, "the tool started")
		case hostabi.CodeDenied:
			return d.Op == "host" && d.Content == "the call was denied"
		}
		return false
	case event.EvInboxSpliced:
		var d event.InboxSpliced
		json.Unmarshal(e.Data, &d)
		return d.Removed == 0 && len(d.Inserted) > 0
	case event.EvAssistantMessage:
		var d event.AssistantMessage
		json.Unmarshal(e.Data, &d)
		return d.Interrupted
	}
	return false
}

// nextHeader is the first request header the machine recorded from index
// i on, for the model and token limit the replay asks with.
func (r *recording) nextHeader(i int) *event.RequestHeader {
	for ; i < len(r.evs); i++ {
		if r.evs[i].Type == event.EvRequestHeader && r.origin[i] == byMachine {
			var d event.RequestHeader
			if json.Unmarshal(r.evs[i].Data, &d) == nil && d.Compaction == nil {
				return &d
			}
		}
	}
	return nil
}

// segmentSeq is the recorded seq where the machine's moves after bc
// boundary moves begin (the head when the recording has none).
func (r *recording) segmentSeq(bc int) uint64 {
	for i := r.start; i < len(r.evs); i++ {
		if r.origin[i] == byMachine && r.bc[i] >= bc {
			return r.evs[i].Seq
		}
	}
	if len(r.evs) == 0 {
		return 0
	}
	return r.evs[len(r.evs)-1].Seq
}

// bcEnd is how many boundary moves the machine made in the whole
// recording (from start).
func (r *recording) bcEnd() int {
	for i := len(r.evs) - 1; i >= r.start; i-- {
		if r.origin[i] == byMachine {
			if isBoundary(r.evs[i].Type) {
				return r.bc[i] + 1
			}
			return r.bc[i]
		}
	}
	return 0
}

// header is the recorded request header of a step, or nil.
func (r *recording) header(key stepKey) *event.RequestHeader {
	i, ok := r.headers[key]
	if !ok {
		return nil
	}
	var d event.RequestHeader
	if json.Unmarshal(r.evs[i].Data, &d) != nil {
		return nil
	}
	return &d
}

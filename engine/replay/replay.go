// Package replay re-drives a recorded session through the state machine
// with another pipeline, and says where the new pipeline's decisions
// differ from the recorded ones.
//
// The log is the only state and every decision an op makes is in it, so a
// session can be run again exactly, without a model or a tool: the replay
// opens a machine on a scratch log (in memory) holding the recorded
// session's first event (or, with From, every event before From), with the
// new pipeline, and
//
//   - answers each model request with the recorded answer at that point
//     (the assistant/message or assistant/attempt of the same turn, step
//     and attempt), and each summary request with the recorded summary;
//   - answers each call the host asks an owner to run with the recorded
//     result and the notes the owner wrote with it: no tool runs (a tool
//     source such as an MCP server is not even started: the tools it
//     offered are read from the recorded request header);
//   - answers the slash command of an op that can act on the world (its
//     manifest asks for a read-write mount, commands to run or HTTP: the
//     files op's /undo) with the recorded reply and the notes the op
//     wrote with it, or its recorded fault: the op is not asked, so the
//     replay writes no file, runs no program and reaches no host through
//     it (where the recording answered no command in that turn, the op
//     answers nothing; where another op answered, the replay stops);
//   - feeds what came from outside at the point where it came: input, a
//     person's decision (when the replay waits for it), a cancellation,
//     changed settings.
//
// Every other hook is the new pipeline's own: guards decide, prompts are
// admitted, retries scheduled, turns steered or ended, contributions
// made, compactions asked for, other ops' commands answered (/mode,
// /skills), faults recorded. Those decisions are then compared, as data,
// with the recorded ones: approval requests and decisions, tool calls the
// host starts and results that are not an owner's (denials, the
// unknown-tool answer), retries, steering, admitted or rewritten prompts,
// turn ends, request headers (tools, prompt parts, top-of-mind),
// compactions, command replies, op notes and faults. Each
// is the same, changed, new or missing; Report.Divergences lists those
// that differ in the order the session met them, with the recorded and
// replayed events and a cmp-style diff (-recorded +replayed).
//
// A different tool result is not a divergence: recorded results are fed
// back, so a new version of a tool-owning op is replayed for its other
// hooks, never for what its tools answer; nor, for an op that can act on
// the world, for what its commands reply.
//
// When a divergence means the recorded future no longer applies, the
// replay stops there (Report.Stopped) and says why: the conversation the
// model would see next is no longer the recorded one (a call the new guard
// denies was recorded as run; a prompt is rewritten or rejected; the turn
// ends earlier or goes on), or the new pipeline needs what the recording
// does not have (a model answer, a summary, a result of a call it never
// ran, a person's decision). Recorded decisions after that point are
// counted as not replayed.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Options configure Run. Events and Pipeline are required.
type Options struct {
	// Session is the recorded session's id (the scratch log has it too:
	// ops see the same view).
	Session string
	// Events is the recorded log, from seq 1.
	Events []store.Event
	// Pipeline returns the pipeline to replay with for the session's
	// settings (session/created's, and again at each recorded
	// pipeline/changed with the new ones). Its ops' tool runs, and the
	// commands of its ops that can act on the world, are answered from
	// the recording. Build it so that it cannot change the world even so
	// (wasmhost.WithReadOnlyMounts).
	Pipeline func(settings event.SessionCreated) (*engine.Pipeline, error)
	// From, if above 1, replays from that seq: the events before it are
	// taken as recorded. The event before it must be a turn boundary
	// (event.ForkPoint).
	From uint64
	// MaxAttempts and MaxFaultsPerTurn are the engine's (defaults as there).
	MaxAttempts, MaxFaultsPerTurn int
}

// Report is what a replay found.
type Report struct {
	Session string `json:"session"`
	// From is the seq the replay began at (1: the whole session; its
	// session/created is always taken as recorded); Head is the recorded
	// log's head.
	From uint64 `json:"from"`
	Head uint64 `json:"head"`
	// Transitions counts the machine's transitions in the replay, and
	// Appended the events it appended.
	Transitions int     `json:"transitions"`
	Appended    int     `json:"appended"`
	Decisions   Summary `json:"decisions"`
	// Divergences are the decisions that differ, in the order the session
	// met them: the first is Divergences[0].
	Divergences []Divergence `json:"divergences"`
	// Stopped, when set, says where and why the recorded future stopped
	// applying.
	Stopped *Stop `json:"stopped,omitempty"`
	// Ended, when set, says that the replay went as far as the recording
	// does (which stopped mid-turn or waiting for a person).
	Ended string `json:"ended,omitempty"`
}

// Summary counts the decisions of the whole session.
type Summary struct {
	Same    int `json:"same"`
	Changed int `json:"changed"`
	New     int `json:"new"`
	Missing int `json:"missing"`
	// NotReplayed counts recorded decisions after the point where the
	// replay stopped.
	NotReplayed int `json:"not_replayed,omitempty"`
}

// Divergence is one decision that differs.
type Divergence struct {
	// Kind is "changed", "new" (only the replay made it) or "missing"
	// (only the recording has it).
	Kind string `json:"kind"`
	// Seq is the recorded event's seq (for a new decision, the recorded
	// seq of the point where it appears); ReplayedSeq the replayed one's
	// in the scratch log.
	Seq         uint64 `json:"seq"`
	ReplayedSeq uint64 `json:"replayed_seq,omitempty"`
	Turn        int    `json:"turn,omitempty"`
	Step        int    `json:"step,omitempty"`
	Hook        string `json:"hook,omitempty"`
	Op          string `json:"op,omitempty"`
	// What names the decision ("approval/decision of call mul-1 by
	// approval").
	What     string       `json:"what"`
	Recorded *store.Event `json:"recorded,omitempty"`
	Replayed *store.Event `json:"replayed,omitempty"`
	// Diff is the decision's data, -recorded +replayed.
	Diff string `json:"diff"`
}

// Stop is where the recorded future stopped applying.
type Stop struct {
	Seq         uint64 `json:"seq"`
	ReplayedSeq uint64 `json:"replayed_seq,omitempty"`
	Reason      string `json:"reason"`
}

// Diverged reports whether any decision differs.
func (r *Report) Diverged() bool { return len(r.Divergences) > 0 || r.Stopped != nil }

// ErrRecording is wrapped by errors about the recorded log itself.
var ErrRecording = errors.New("replay: the recording cannot be replayed")

// RecordingError is an error about the recorded log itself, or about
// Options.From in it. errors.Is(err, ErrRecording) holds for it.
type RecordingError struct {
	// From is set when Options.From is what is wrong (a command line's
	// --from): the caller's mistake, not the recording's.
	From bool
	// Reason says what, as a person reads it.
	Reason string
}

func (e *RecordingError) Error() string { return ErrRecording.Error() + ": " + e.Reason }

// Is makes a RecordingError match ErrRecording.
func (e *RecordingError) Is(target error) bool { return target == ErrRecording }

// writer is the replay's incarnation in the scratch log.
const writer = "replay"

type run struct {
	opts    Options
	rec     *recording
	scratch store.Log
	m       *engine.Machine
	pipe    *engine.Pipeline
	// settings the session runs with in the replay.
	settings event.SessionCreated

	// The replay's progress, from the events appended to the scratch log.
	head             uint64
	bc, off          int
	turn, step       int
	stepOpen         bool
	turnMsgs         map[int]int
	compactions      map[stepKey]int
	steered          map[stepKey]int
	seen             map[moveKey]bool // the machine's moves
	nth              map[string]int   // moves of each type since the last boundary
	machine          map[uint64]bool  // seqs the machine appended
	pos              map[uint64][2]int
	injecting        bool
	rep2rec, rec2rep map[string]string

	next    int // next group to feed
	decided map[callKey]bool

	cancel func()
	stop   *Stop
	stopAt uint64
	ended  string
	report Report
}

// Run replays the recorded session with the new pipeline and reports
// what differs. A recorded log the fold refuses, a From inside a turn or
// a pipeline that does not build is an error.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Pipeline == nil {
		return nil, errors.New("replay: Options need a Pipeline")
	}
	evs := opts.Events
	if len(evs) == 0 {
		return nil, &RecordingError{Reason: "the log is empty"}
	}
	start := 1
	if opts.From > 1 {
		if err := event.ForkPoint(opts.Session, evs, opts.From-1); err != nil {
			var be *event.BoundaryError
			if errors.As(err, &be) {
				after := "none yet: the turn is still open at the head"
				if be.After > 0 {
					after = fmt.Sprint(be.After + 1)
				}
				return nil, &RecordingError{From: true, Reason: fmt.Sprintf("--from %d replays from inside turn %d; it takes the seq after a turn boundary: %d (its turn/start) or %s (after its turn/end)", opts.From, be.Turn, be.Before+1, after)}
			}
			return nil, &RecordingError{From: true, Reason: fmt.Sprintf("--from %d: %v", opts.From, err)}
		}
		start = int(opts.From - 1)
	}
	rec, err := read(opts.Session, evs, start)
	if err != nil {
		return nil, &RecordingError{Reason: err.Error()}
	}
	r := &run{opts: opts, rec: rec, scratch: store.NewMemory(),
		turnMsgs: map[int]int{}, compactions: map[stepKey]int{}, steered: map[stepKey]int{}, seen: map[moveKey]bool{}, nth: map[string]int{},
		machine: map[uint64]bool{}, pos: map[uint64][2]int{}, rep2rec: map[string]string{}, rec2rep: map[string]string{},
		decided: map[callKey]bool{}, cancel: func() {}}
	r.report = Report{Session: opts.Session, From: max(opts.From, 1), Head: evs[len(evs)-1].Seq}
	if err := r.scratch.Create(ctx, opts.Session); err != nil {
		return nil, err
	}
	prefix := make([]store.Event, start)
	copy(prefix, evs[:start])
	if _, err := r.scratch.Append(ctx, opts.Session, 0, prefix...); err != nil {
		return nil, fmt.Errorf("replay: copy the recorded events before seq %d: %w", start+1, err)
	}
	r.head = uint64(start)
	st, err := event.Fold(opts.Session, evs[:start])
	if err != nil {
		return nil, &RecordingError{Reason: err.Error()}
	}
	for _, e := range prefix {
		r.see(e)
	}
	r.report.Appended = 0
	r.settings = st.Settings
	if err := r.open(ctx, start); err != nil {
		return nil, err
	}
	if err := r.drive(ctx); err != nil {
		return nil, err
	}
	r.compare(ctx)
	return &r.report, nil
}

// open (re)builds the machine over the scratch log with the pipeline for
// the current settings, asking with the model and token limit of the
// next recorded request header from index i.
func (r *run) open(ctx context.Context, i int) error {
	p, err := r.opts.Pipeline(r.settings)
	if err != nil {
		return err
	}
	if r.pipe, err = r.wrap(p); err != nil {
		return err
	}
	cfg := engine.Config{Log: tap{r.scratch, r}, Session: r.opts.Session, Pipeline: r.pipe, Provider: r,
		Model: r.settings.Model, Durability: engine.SyncNever, SnapshotEvery: -1, Writer: writer,
		MaxAttempts: r.opts.MaxAttempts, MaxFaultsPerTurn: r.opts.MaxFaultsPerTurn,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }}
	if h := r.rec.nextHeader(i); h != nil {
		cfg.Model, cfg.MaxTokens = h.Model, h.MaxTokens
	}
	r.m, err = engine.Open(ctx, cfg)
	return err
}

// maxTransitions bounds a replay that would not come to rest.
func (r *run) maxTransitions() int { return 16*len(r.rec.evs) + 1024 }

// drive makes transitions until the replay has done all the recording
// has, or stops.
func (r *run) drive(ctx context.Context) error {
	for r.report.Transitions < r.maxTransitions() {
		if err := r.feedReady(ctx, false); err != nil || r.halted() {
			return err
		}
		actx, cancel := context.WithCancel(ctx)
		r.cancel = cancel
		o, err := r.m.Advance(actx)
		cancel()
		if r.halted() {
			if r.stopAt == 0 {
				r.stopAt = r.head
			}
			return nil
		}
		if err != nil {
			if c := (*event.CorruptLog)(nil); errors.As(err, &c) {
				r.halt(r.rec.segmentSeq(r.bc), "what the recording fed here does not fit the replayed session: "+c.Detail)
				r.stopAt = r.head
				return nil
			}
			return fmt.Errorf("replay: %w", err)
		}
		if o == engine.Progressed {
			r.report.Transitions++
			continue
		}
		if o == engine.Waiting {
			done, err := r.decide(ctx)
			if err != nil || done {
				return err
			}
			continue
		}
		// Idle: what came from outside next, if anything.
		if r.next >= len(r.rec.groups) {
			return nil
		}
		if err := r.feedReady(ctx, true); err != nil {
			return err
		}
	}
	return fmt.Errorf("replay: no rest after %d transitions", r.report.Transitions)
}

func (r *run) halted() bool { return r.stop != nil || r.ended != "" }

// halt stops the replay where the recorded future stops applying, or
// ends it where the recording ends mid-turn.
func (r *run) halt(seq uint64, why string) {
	if r.halted() {
		return
	}
	if f := r.rec.final; f.TurnOpen && r.turn == f.Turn && r.bc >= r.rec.bcEnd() {
		r.ended = fmt.Sprintf("the recording ends here, in turn %d, which it left open", f.Turn)
		r.report.Ended = r.ended
		return
	}
	r.stop = &Stop{Seq: seq, Reason: why}
	r.report.Stopped = r.stop
}

// decide feeds the recorded person's decisions of the calls the replay
// waits for; it reports whether the replay is done (the recording ends
// waiting there too) or stopped.
func (r *run) decide(ctx context.Context) (bool, error) {
	st := r.m.State()
	waiting := st.Waiting()
	var ds []engine.Decision
	for _, id := range waiting {
		k := callKey{st.Turn, st.Step, id}
		if d, ok := r.rec.persons[k]; ok && !r.decided[k] {
			r.decided[k] = true
			ds = append(ds, engine.Decision{CallID: id, Allow: d.Allow, Scope: d.Scope, Who: d.Who, Note: d.Note})
		}
	}
	if len(ds) > 0 {
		r.injecting = true
		err := r.m.Decide(ctx, ds...)
		r.injecting = false
		return false, err
	}
	if r.next < len(r.rec.groups) {
		// A cancellation, or input, came while the recording waited.
		return false, r.feedReady(ctx, true)
	}
	if f := r.rec.final; sameSet(f.Waiting(), waiting) {
		r.ended = "the recording ends here too, waiting for a person to decide " + strings.Join(waiting, ", ")
		r.report.Ended = r.ended
		return true, nil
	}
	r.halt(r.rec.segmentSeq(r.bc), fmt.Sprintf("the new pipeline asks a person about %s at turn %d step %d; the recording has no person's decision for it", strings.Join(waiting, ", "), r.turn, r.step))
	r.stopAt = r.head
	return true, nil
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

// feedReady appends the recorded groups from outside that the replay has
// reached, in order; with force, the next one at least.
func (r *run) feedReady(ctx context.Context, force bool) error {
	for r.next < len(r.rec.groups) && !r.halted() {
		g := r.rec.groups[r.next]
		ready := r.bc >= g.need && (!g.midStep || g.prev < 0 || r.seen[r.rec.move[g.prev]])
		if !ready && !force {
			return nil
		}
		force = false
		r.next++
		if err := r.feed(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

// feed appends one group, as recorded but for the ids of input, which
// are made again from the scratch log's seqs (and mapped back when
// decisions are compared).
func (r *run) feed(ctx context.Context, g group) error {
	evs := make([]store.Event, 0, g.to-g.from)
	changed := false
	for _, e := range r.rec.evs[g.from:g.to] {
		e.Seq = r.head + uint64(len(evs)) + 1
		switch e.Type {
		case event.EvInboxSpliced:
			var d event.InboxSpliced
			json.Unmarshal(e.Data, &d)
			for i, m := range d.Inserted {
				id := r.rec2rep[m.ID]
				if id == "" {
					id = m.ID
					if _, generated := event.GeneratedID(m.ID); generated {
						id = fmt.Sprintf("m%d-%d", e.Seq, i)
					}
					r.rec2rep[m.ID], r.rep2rec[id] = id, m.ID
				}
				d.Inserted[i].ID = id
			}
			e.Data, _ = json.Marshal(d)
		case event.EvPipelineChanged:
			var d event.PipelineChanged
			json.Unmarshal(e.Data, &d)
			r.settings.Pipeline, r.settings.Model, r.settings.Settings = d.Pipeline, d.Model, d.Settings
			changed = true
		case event.EvSessionForked:
			// The fork point is the event before it, in the scratch log too.
			var d event.SessionForked
			json.Unmarshal(e.Data, &d)
			d.Seq = e.Seq - 1
			e.Data, _ = json.Marshal(d)
		}
		evs = append(evs, e)
	}
	if _, err := r.scratch.Append(ctx, r.opts.Session, r.head, evs...); err != nil {
		return fmt.Errorf("replay: feed seq %d: %w", r.rec.evs[g.from].Seq, err)
	}
	for _, e := range evs {
		r.see(e)
	}
	if changed {
		return r.open(ctx, g.to)
	}
	return nil
}

// tap is the scratch log as the machine sees it: each append is seen as
// it commits.
type tap struct {
	store.Log
	r *run
}

func (t tap) Append(ctx context.Context, session string, expectedHead uint64, events ...store.Event) (uint64, error) {
	head, err := t.Log.Append(ctx, session, expectedHead, events...)
	if err != nil {
		return head, err
	}
	for _, e := range events {
		if !t.r.injecting && e.Type != event.EvSessionWriter {
			t.r.made(e)
		}
		t.r.see(e)
	}
	return head, nil
}

// see follows the replay's place in the session through any appended
// event.
func (r *run) see(e store.Event) {
	r.head = e.Seq
	r.report.Appended++
	if isMessage(e) {
		r.turnMsgs[e.Turn]++
	}
	switch e.Type {
	case event.EvTurnStart:
		r.turn, r.step, r.stepOpen = e.Turn, 0, false
	case event.EvStepStart:
		r.step, r.stepOpen = e.Step, true
	case event.EvStepEnd, event.EvTurnEnd:
		r.stepOpen = false
	}
}

// made follows an event the machine appended: its place for the
// comparison, and whether the conversation is still the recorded one.
func (r *run) made(e store.Event) {
	r.machine[e.Seq] = true
	r.pos[e.Seq] = [2]int{r.bc, r.off}
	r.seen[moveKey{r.bc, e.Type, r.nth[e.Type]}] = true
	r.nth[e.Type]++
	r.off++
	if isBoundary(e.Type) {
		r.bc++
		r.off = 0
		clear(r.nth)
	}
	switch e.Type {
	case event.EvInboxSpliced:
		if !bytes.Contains(e.Data, []byte(`"inserted"`)) {
			break // a claim
		}
		var d event.InboxSpliced
		json.Unmarshal(e.Data, &d)
		if len(d.Inserted) > 0 {
			r.steer(e, d.Inserted)
		}
	case event.EvUserMessage:
		var d event.UserMessage
		json.Unmarshal(e.Data, &d)
		rid := r.recID(d.ID)
		re, ok := r.rec.users[rid]
		var rd event.UserMessage
		json.Unmarshal(re.Data, &rd)
		switch {
		case !ok:
			r.halt(r.rec.segmentSeq(r.bc-1), fmt.Sprintf("the new pipeline admits message %s, which the recording does not have", d.ID))
		case rd.Content != d.Content || rd.Command != d.Command:
			r.halt(re.Seq, fmt.Sprintf("the new pipeline admits message %s as %q; the recording admitted %q, and the model's answers followed that", rid, clip(d.Content), clip(rd.Content)))
		}
	case event.EvToolResult:
		var d event.ToolResult
		json.Unmarshal(e.Data, &d)
		k := callKey{e.Turn, e.Step, d.CallID}
		re, ok := r.rec.results[k]
		var rd event.ToolResult
		json.Unmarshal(re.Data, &rd)
		switch {
		case !ok:
			r.halt(r.rec.segmentSeq(r.bc), fmt.Sprintf("the new pipeline answers call %s (%s), which the recording never answered", d.CallID, summarize(d)))
		case rd.Content != d.Content || rd.IsError != d.IsError:
			why := fmt.Sprintf("call %s (%s) was answered %q in the recording; in the replay %q", d.CallID, d.Name, clip(rd.Content), clip(d.Content))
			if r.rec.runs[k] != nil && r.rec.runs[k].started && d.Code == "TOOL_DENIED" {
				why = fmt.Sprintf("call %s (%s) ran in the recording (its result: %q); the new pipeline denies it (%q)", d.CallID, d.Name, clip(rd.Content), clip(d.Content))
			}
			r.halt(re.Seq, why+": the model's later answers followed the recorded result, so the recorded future no longer applies")
		}
	case event.EvTurnEnd:
		var d event.TurnEnd
		json.Unmarshal(e.Data, &d)
		if seq, ok := r.rec.turnEnds[d.Turn]; ok && r.rec.turnMsgs[d.Turn] > r.turnMsgs[d.Turn] {
			r.halt(seq, fmt.Sprintf("the new pipeline ends turn %d (%s) with %d message(s); in the recording it went on to %d", d.Turn, d.Reason, r.turnMsgs[d.Turn], r.rec.turnMsgs[d.Turn]))
		}
	}
}

// steer pairs the replay's steering with the recording's at the same
// step; steering the recording does not have stops the replay.
func (r *run) steer(e store.Event, in []hostabi.InputMessage) {
	key := stepKey{e.Turn, e.Step}
	rec := r.rec.steers[key]
	n := r.steered[key]
	r.steered[key] += len(in)
	for i, m := range in {
		if n+i >= len(rec) {
			r.halt(r.rec.segmentSeq(r.bc-1), fmt.Sprintf("the new pipeline steers turn %d on at step %d (%q), where the recording did not", e.Turn, e.Step, clip(m.Content)))
			return
		}
		rm := rec[n+i]
		r.rep2rec[m.ID], r.rec2rep[rm.ID] = rm.ID, m.ID
		if rm.Content != m.Content {
			r.halt(r.rec.segmentSeq(r.bc-1), fmt.Sprintf("the new pipeline steers turn %d at step %d with %q; the recording steered with %q", e.Turn, e.Step, clip(m.Content), clip(rm.Content)))
			return
		}
	}
}

// recID is the recorded id of a replayed message id.
func (r *run) recID(id string) string {
	if rid, ok := r.rep2rec[id]; ok {
		return rid
	}
	return id
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

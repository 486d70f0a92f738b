package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// decision is one decision event: what identifies it in either log (its
// key), and the data compared.
type decision struct {
	key, what, hook, op string
	data                any
	e                   store.Event
	pos                 [2]int // boundary moves before it, and its place after the last
	// light: only the key is known (describe did not decode the data);
	// the stored bytes are compared first.
	light bool
}

// lightly are the decisions whose key is in their envelope, so listing
// them needs no decoding: a request header (often the largest event of a
// step) and a turn's end.
func lightly(e store.Event) (decision, bool) {
	switch e.Type {
	case event.EvRequestHeader:
		if event.IsSummaryHeader(e) {
			return decision{}, false
		}
		return decision{key: fmt.Sprintf("header %d.%d", e.Turn, e.Step), hook: string(hostabi.HookContribute), e: e, light: true}, true
	case event.EvTurnEnd:
		return decision{key: fmt.Sprintf("end %d", e.Turn), e: e, light: true}, true
	}
	return decision{}, false
}

// full returns d with its data decoded.
func (d decision) full(id func(string) string) decision {
	if !d.light {
		return d
	}
	f, _ := describe(d.e, id)
	f.key, f.pos = d.key, d.pos
	return f
}

// same reports whether two decisions of one key agree.
func same(a, b decision, id func(string) string) bool {
	if a.light && b.light && bytes.Equal(a.e.Data, b.e.Data) {
		return true
	}
	return reflect.DeepEqual(a.full(nil).data, b.full(id).data)
}

// describe says whether e is a decision and, if so, what identifies it;
// id maps a message id to the recorded one. Moves that follow from the
// decisions (turn and step boundaries, claims, a summary request's header:
// its op, reason, instructions and model are context/compacted's) and
// what the replay feeds (answers) are not decisions.
func describe(e store.Event, id func(string) string) (d decision, ok bool) {
	d.e = e
	at := fmt.Sprintf("%d.%d", e.Turn, e.Step)
	switch e.Type {
	case event.EvRequestHeader:
		var x event.RequestHeader
		json.Unmarshal(e.Data, &x)
		if x.Compaction != nil {
			return d, false
		}
		d.key, d.what, d.hook, d.data = "header "+at, fmt.Sprintf("request/header of turn %d step %d", e.Turn, e.Step), string(hostabi.HookContribute), x
	case event.EvApprovalRequest:
		var x event.ApprovalRequest
		json.Unmarshal(e.Data, &x)
		ids := slices.Clone(x.CallIDs)
		sort.Strings(ids)
		d.key, d.what, d.hook, d.op, d.data = "ask "+at+" "+x.Op+" "+strings.Join(ids, ","), fmt.Sprintf("approval/request by %s for %s", x.Op, strings.Join(ids, ", ")), string(hostabi.HookTool), x.Op, x
	case event.EvApprovalDecision:
		var x event.ApprovalDecision
		json.Unmarshal(e.Data, &x)
		d.key, d.what, d.hook, d.op, d.data = "decide "+x.CallID+" "+x.Guard, fmt.Sprintf("approval/decision of call %s for %s", x.CallID, x.Guard), string(hostabi.HookTool), x.Guard, x
	case event.EvToolCall:
		var x event.ToolCallEvent
		json.Unmarshal(e.Data, &x)
		x.Writer = "" // the incarnation is not a decision
		d.key, d.what, d.hook, d.op, d.data = "call "+x.CallID, fmt.Sprintf("tool/call of call %s (%s)", x.CallID, x.Name), string(hostabi.HookTool), x.Op, x
	case event.EvToolResult:
		var x event.ToolResult
		json.Unmarshal(e.Data, &x)
		d.key, d.what, d.hook, d.op, d.data = "result "+x.CallID, fmt.Sprintf("tool/result of call %s (%s)", x.CallID, x.Name), string(hostabi.HookTool), x.Op, x
	case event.EvRetryScheduled:
		var x event.RetryScheduled
		json.Unmarshal(e.Data, &x)
		d.key, d.what, d.hook, d.op, d.data = fmt.Sprintf("retry %s %d", at, x.Attempt), fmt.Sprintf("retry/scheduled %d of turn %d step %d", x.Attempt, e.Turn, e.Step), string(hostabi.HookRequestError), x.Op, x
	case event.EvInboxSpliced:
		var x event.InboxSpliced
		json.Unmarshal(e.Data, &x)
		if len(x.Inserted) == 0 {
			return d, false // a claim
		}
		var steer []string
		for _, m := range x.Inserted {
			steer = append(steer, m.Content)
		}
		d.key, d.what, d.hook, d.data = "steer "+at, fmt.Sprintf("steering of turn %d at step %d", e.Turn, e.Step), string(hostabi.HookTurnStopping), steer
	case event.EvUserMessage:
		var x event.UserMessage
		json.Unmarshal(e.Data, &x)
		x.ID = id(x.ID)
		d.key, d.what, d.hook, d.data = "user "+x.ID, "user/message "+x.ID, string(hostabi.HookPrompt), x
		if x.Command != "" {
			d.hook = string(hostabi.HookCommand)
		}
	case event.EvTurnEnd:
		var x event.TurnEnd
		json.Unmarshal(e.Data, &x)
		d.key, d.what, d.data = fmt.Sprintf("end %d", x.Turn), fmt.Sprintf("turn/end of turn %d", x.Turn), x
		switch {
		case x.Cause != nil && x.Cause.Hook != "":
			d.hook = x.Cause.Hook
			if x.Cause.Hook == string(hostabi.HookContribute) {
				d.op = x.Cause.Reason
			}
		case x.Reason == event.ReasonError:
			d.hook = string(hostabi.HookRequestError)
		default:
			d.hook = string(hostabi.HookTurnStopping)
		}
	case event.EvOpFault:
		var x event.OpFault
		json.Unmarshal(e.Data, &x)
		d.key, d.what, d.hook, d.op, d.data = "fault "+at+" "+x.Op+" "+x.Hook, fmt.Sprintf("op/fault of %s at %s", x.Op, x.Hook), x.Hook, x.Op, x
	case event.EvOpNote:
		var x event.OpNote
		json.Unmarshal(e.Data, &x)
		d.key, d.what, d.op, d.data = "note "+at+" "+x.Op+" "+x.Key, fmt.Sprintf("op/note %s of %s", x.Key, x.Op), x.Op, x
	case event.EvContextCompacted:
		var x event.ContextCompacted
		json.Unmarshal(e.Data, &x)
		x.ThroughSeq = 0 // a seq of the log it is in
		d.key, d.what, d.hook, d.op, d.data = "compact "+at, fmt.Sprintf("context/compacted in turn %d", e.Turn), string(hostabi.HookCompact), x.Op, x
	case event.EvCommandReply:
		var x event.CommandReply
		json.Unmarshal(e.Data, &x)
		d.key, d.what, d.hook, d.op, d.data = fmt.Sprintf("reply %d %s", e.Turn, x.Command), "command/reply to /"+x.Command, string(hostabi.HookCommand), x.Op, x
	default:
		return d, false
	}
	return d, true
}

// list makes the decisions of one log, each key made unique by its
// occurrence (a note written twice in a step).
func list(evs []store.Event, keep func(e store.Event) ([2]int, bool), id func(string) string) (map[string]decision, []string) {
	out := map[string]decision{}
	var order []string
	n := map[string]int{}
	// Notes take the hook of the decision they were written with (the
	// event after them, from the same op).
	var notes []string
	for _, e := range evs {
		pos, ok := keep(e)
		if !ok {
			notes = nil
			continue
		}
		d, ok := lightly(e)
		if !ok {
			d, ok = describe(e, id)
		}
		if !ok {
			notes = nil
			continue
		}
		if e.Type == event.EvOpNote {
			notes = append(notes, "")
		} else {
			for i := len(order) - len(notes); i < len(order); i++ {
				if x := out[order[i]]; x.e.Turn == e.Turn && x.e.Step == e.Step && (d.op == "" || d.op == x.op) {
					x.hook = d.hook
					out[order[i]] = x
				}
			}
			notes = nil
		}
		d.pos = pos
		n[d.key]++
		if n[d.key] > 1 {
			d.key += fmt.Sprintf(" #%d", n[d.key])
		}
		out[d.key] = d
		order = append(order, d.key)
	}
	return out, order
}

// compare fills the report's decisions and divergences.
func (r *run) compare(ctx context.Context) {
	rec := r.rec
	recPos := map[uint64][2]int{}
	recd, recOrder := list(rec.evs[rec.start:], func(e store.Event) ([2]int, bool) {
		i := int(e.Seq - 1)
		recPos[e.Seq] = [2]int{rec.bc[i], rec.off[i]}
		return recPos[e.Seq], rec.origin[i] == byMachine
	}, func(s string) string { return s })
	scratch, _ := r.scratch.Read(ctx, r.opts.Session, uint64(rec.start)+1, 0)
	repd, repOrder := list(scratch, func(e store.Event) ([2]int, bool) {
		return r.pos[e.Seq], r.machine[e.Seq] && (r.stopAt == 0 || e.Seq <= r.stopAt)
	}, r.recID)

	type sorted struct {
		pos [2]int
		seq uint64
		d   Divergence
	}
	var all []sorted
	for _, k := range recOrder {
		a := recd[k]
		b, ok := repd[k]
		switch {
		case ok && same(a, b, r.recID):
			r.report.Decisions.Same++
		case ok:
			a, b = a.full(nil), b.full(r.recID)
			all = append(all, sorted{a.pos, a.e.Seq, r.divergence("changed", &a, &b)})
		default:
			a = a.full(nil)
			all = append(all, sorted{a.pos, a.e.Seq, r.divergence("missing", &a, nil)})
		}
	}
	for _, k := range repOrder {
		if _, ok := recd[k]; !ok {
			b := repd[k].full(r.recID)
			all = append(all, sorted{b.pos, r.recSeqAt(b.pos), r.divergence("new", nil, &b)})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.pos != b.pos {
			return a.pos[0] < b.pos[0] || a.pos[0] == b.pos[0] && a.pos[1] < b.pos[1]
		}
		return a.seq < b.seq
	})
	// When the replay stopped, the recorded future after the first
	// divergence does not apply: what the replay has no counterpart for
	// there was not replayed, not missed.
	r.report.Divergences = []Divergence{}
	for i, s := range all {
		switch {
		case s.d.Kind == "missing" && r.stop != nil && i > 0:
			r.report.Decisions.NotReplayed++
			continue
		case s.d.Kind == "missing":
			r.report.Decisions.Missing++
		case s.d.Kind == "changed":
			r.report.Decisions.Changed++
		default:
			r.report.Decisions.New++
		}
		r.report.Divergences = append(r.report.Divergences, s.d)
	}
	if r.stop != nil {
		r.stop.ReplayedSeq = r.stopAt
	}
}

// divergence describes a decision that differs.
func (r *run) divergence(kind string, a, b *decision) Divergence {
	var d Divergence
	var x, y any
	one := a
	if a != nil {
		e := a.e
		d.Recorded, d.Seq, x = &e, e.Seq, a.data
	}
	if b != nil {
		e := b.e
		d.Replayed, d.ReplayedSeq, y = &e, e.Seq, b.data
		if a == nil {
			one = b
			d.Seq = r.recSeqAt(b.pos)
		}
	}
	// The replayed decision's hook and op, when it has them: a divergence
	// is about what the new pipeline does.
	d.Kind, d.What, d.Hook, d.Op = kind, one.what, one.hook, one.op
	if b != nil && b.hook != "" {
		d.Hook = b.hook
	}
	if b != nil && b.op != "" {
		d.Op = b.op
	}
	d.Turn, d.Step = one.e.Turn, one.e.Step
	d.Diff = cmp.Diff(x, y)
	return d
}

// recSeqAt is the recorded seq at a replayed position: the first machine
// event at or after it.
func (r *run) recSeqAt(pos [2]int) uint64 {
	rec := r.rec
	for i := rec.start; i < len(rec.evs); i++ {
		if rec.origin[i] == byMachine && (rec.bc[i] > pos[0] || rec.bc[i] == pos[0] && rec.off[i] >= pos[1]) {
			return rec.evs[i].Seq
		}
	}
	return rec.evs[len(rec.evs)-1].Seq
}

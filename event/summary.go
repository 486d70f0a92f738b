package event

import (
	"encoding/json"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// Cause kinds (Cause.Kind): who or what cancelled a turn or input.
const (
	CauseUser     = "user"
	CauseParent   = "parent"
	CauseHook     = "hook"
	CauseDisposed = "disposed"
)

// Summary is what a list of sessions shows of one.
type Summary struct {
	ID string `json:"id"`
	// Status is "running", "waiting" (for a person's decision), "idle",
	// or "error" (idle after a turn that ended in error; see Error).
	Status       string        `json:"status"`
	Waiting      []WaitingCall `json:"waiting,omitempty"`
	Turns        int           `json:"turns"`
	TurnOpen     bool          `json:"turn_open,omitempty"`
	Queued       int           `json:"queued,omitempty"`
	Title        string        `json:"title,omitempty"`
	Usage        Usage         `json:"usage"`
	LastActivity time.Time     `json:"last_activity"`
	Head         uint64        `json:"head"`
	// Mode is the permission mode the approval op holds (ask, edits, plan,
	// auto), from its latest note; empty when the pipeline has none.
	Mode string `json:"mode,omitempty"`
	// Name is the name a person gave the session (wagent rename).
	Name string `json:"name,omitempty"`
	// Error is the last turn's error when it ended in one (Status says
	// "error" then, not "idle").
	Error string `json:"error,omitempty"`
}

// Summarize makes the summary of a folded state: status idle or waiting
// (a driver knows whether it runs, see session.Session.Summary).
func Summarize(st *State) Summary {
	sum := Summary{ID: st.Session, Status: "idle", Waiting: WaitingCalls(st), Turns: st.Turn, TurnOpen: st.TurnOpen,
		Queued: len(st.NextTurn) + len(st.NextStep), Title: st.Title, Usage: st.Usage, LastActivity: st.LastActivity, Head: st.Head}
	switch {
	case len(sum.Waiting) > 0:
		sum.Status = "waiting"
	case !st.TurnOpen && st.LastEnd != nil && st.LastEnd.Reason == ReasonError:
		// The last turn failed and nothing has run since: say so, and
		// why (wagent resume retries it).
		sum.Status, sum.Error = StatusError, st.LastEnd.Error
	}
	sum.Name = st.Name
	// The built-in approval op's mode set at run time; the engine, which
	// knows the pipeline, says the configured one too.
	sum.Mode = st.Notes["approval"]["mode"]
	return sum
}

// StatusError is the Status of a session whose last turn ended in error
// and that is idle: nothing runs, and wagent resume retries the turn.
const StatusError = "error"

// WaitingCall is a tool call parked for a person's decision.
type WaitingCall struct {
	// ID is the call's key (CallKey); ModelID the id the model gave it
	// (not unique: models reuse ids). Digest is CallDigest of Name and
	// Arguments: a surface that shows the call sends it back with the
	// decision.
	ID        string          `json:"id"`
	ModelID   string          `json:"model_id,omitempty"`
	Digest    string          `json:"digest"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Owner is the op that offered the tool; Server and Annotations are
	// what it said of the tool (the MCP server it comes from, its hints),
	// so a prompt can name them. AskedBy is the guard that asks, and
	// Reason why.
	Owner       string                   `json:"owner,omitempty"`
	Server      string                   `json:"server,omitempty"`
	Annotations *hostabi.ToolAnnotations `json:"annotations,omitempty"`
	AskedBy     string                   `json:"asked_by,omitempty"`
	Reason      string                   `json:"reason,omitempty"`
	// Preview is what the call would change, shown before a person
	// decides: a unified diff of the file a write_file or edit_file of the
	// files op would write (filled by the owner, which knows the op's
	// mounts; empty when it cannot tell). Not part of Digest.
	Preview string `json:"preview,omitempty"`
}

// WaitingCalls lists the calls of st waiting for a person's decision.
func WaitingCalls(st *State) []WaitingCall {
	var out []WaitingCall
	for _, id := range st.Waiting() {
		c := st.Call(id)
		out = append(out, WaitingCall{ID: c.ID, ModelID: c.ModelID, Digest: CallDigest(c.Name, c.Arguments), Name: c.Name, Arguments: c.Arguments, Owner: c.Owner, Server: c.Server, Annotations: c.Annotations,
			AskedBy: c.AskedBy, Reason: c.AskReason})
	}
	return out
}

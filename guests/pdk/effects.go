package pdk

import (
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// One method per effect kind of hostabi/effects.go. Each adds the effect
// to the answer; the host checks it at the hook it was given for (a kind
// the hook does not take faults the call, see ABI.md §4).

// Emit adds an effect to the answer.
func (c *Call) Emit(e hostabi.Effect) {
	if e.Kind == hostabi.KindResult && len(e.Content) > hostabi.MaxTextBytes {
		e.Content = cutResult(e.Content)
	}
	c.effects = append(c.effects, e)
}

// cutResult shortens a tool result over the host's limit (an error that
// quotes a megabyte argument, a file read whole) to fit, saying so: the
// model gets an answer, where a result over the limit would fault the op.
func cutResult(s string) string {
	note := "\n[cut: the result was " + strconv.Itoa(len(s)) + " bytes; a result holds at most " + strconv.Itoa(hostabi.MaxTextBytes) + "]"
	return strings.ToValidUTF8(s[:hostabi.MaxTextBytes-len(note)], "") + note
}

// Effects returns the effects emitted so far.
func (c *Call) Effects() []hostabi.Effect { return c.effects }

// SetNote emits a note: the op's durable memory under key, read back with
// Note at later calls (any hook).
func (c *Call) SetNote(key, value string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindNote, Key: key, Value: value})
}

// LiveLog emits a log line that watchers of the session see as it happens
// (wagent run prints it); it is not durable. level is free-form ("info").
// Log, by contrast, writes to the host's diagnostic log.
func (c *Call) LiveLog(level, text string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindLog, Level: level, Text: text})
}

// Admit lets the prompt hook's batch into the turn unchanged.
func (c *Call) Admit() { c.Emit(hostabi.Effect{Kind: hostabi.KindAdmit}) }

// Rewrite lets the prompt hook's batch in with new content: the messages
// keep the ids of View.Prompt.Batch.
func (c *Call) Rewrite(batch ...hostabi.InputMessage) {
	if batch == nil {
		batch = []hostabi.InputMessage{}
	}
	c.Emit(hostabi.Effect{Kind: hostabi.KindRewrite, Messages: batch})
}

// Reject refuses the prompt hook's batch; the turn ends "blocked".
func (c *Call) Reject(why string) { c.Emit(hostabi.Effect{Kind: hostabi.KindReject, Text: why}) }

// OfferTool offers a tool the op owns (declared in its manifest) to the
// model at the contribute hook. Tools in Op.Tools are offered by the kit.
func (c *Call) OfferTool(spec hostabi.ToolSpec) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindTool, Tool: &spec})
}

// PromptPart adds text to the system prompt (contribute hook).
func (c *Call) PromptPart(text string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindPromptPart, Text: text})
}

// TopOfMind adds a line where the model sees it last (contribute hook).
func (c *Call) TopOfMind(text string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindTopOfMind, Text: text})
}

// EndTurn ends the turn before the model is asked (contribute hook); the
// turn ends "limit".
func (c *Call) EndTurn(why string) { c.Emit(hostabi.Effect{Kind: hostabi.KindEndTurn, Text: why}) }

// AskApproval asks a person to decide calls (tool hook, guards only); the
// session yields until someone does.
func (c *Call) AskApproval(why string, callIDs ...string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: callIDs, Text: why})
}

// Decide allows or denies a call, this once (tool hook, guards only).
func (c *Call) Decide(callID string, allow bool, why string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindDecision, CallID: callID, Allow: allow, Scope: hostabi.ScopeOnce, Text: why})
}

// DecideAlways allows or denies a call with scope "always", recorded as
// such in the log (tool hook, guards only).
func (c *Call) DecideAlways(callID string, allow bool, why string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindDecision, CallID: callID, Allow: allow, Scope: hostabi.ScopeAlways, Text: why})
}

// Result answers a call (tool hook): the owner of the tool when the host
// asks it to run the call, or an op answering a call no op owns. Tools in
// Op.Tools are answered by the kit.
func (c *Call) Result(callID, content string, isError bool) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindResult, CallID: callID, Content: content, IsError: isError})
}

// ErrorResult answers a call with an error and a machine-readable code
// (hostabi.CodeUnknownTool, or the op's own; "" for none).
func (c *Call) ErrorResult(callID, content, code string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindResult, CallID: callID, Content: content, IsError: true, Code: code})
}

// FinalResult answers a call and ends the turn with it (concludes_turn).
func (c *Call) FinalResult(callID, content string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindResult, CallID: callID, Content: content, ConcludesTurn: true})
}

// Retry asks for the failed model request again after delay, in the same
// step (request-error hook). The delay is sent in whole milliseconds,
// rounded up; a negative one is zero.
func (c *Call) Retry(after time.Duration) {
	ms := int64(0)
	if after > 0 {
		ms = int64((after + time.Millisecond - 1) / time.Millisecond)
	}
	c.Emit(hostabi.Effect{Kind: hostabi.KindRetry, DelayMS: ms})
}

// Steer keeps the turn going with a next-step message (turn-stopping
// hook).
func (c *Call) Steer(text string) { c.Emit(hostabi.Effect{Kind: hostabi.KindSteer, Text: text}) }

// Reply answers the slash command (command hook).
func (c *Call) Reply(text string) { c.Emit(hostabi.Effect{Kind: hostabi.KindReply, Text: text}) }

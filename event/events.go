package event

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Log event types (README.md, "The log"). Extend, never repurpose: a log
// written by an older wagent must keep its meaning.
const (
	EvSessionCreated   = "session/created"
	EvInboxSpliced     = "inbox/spliced"
	EvTurnStart        = "turn/start"
	EvTurnEnd          = "turn/end"
	EvStepStart        = "step/start"
	EvStepEnd          = "step/end"
	EvUserMessage      = "user/message"
	EvRequestHeader    = "request/header"
	EvAssistantMessage = "assistant/message"
	EvAssistantAttempt = "assistant/attempt"
	EvApprovalRequest  = "approval/request"
	EvApprovalDecision = "approval/decision"
	EvToolCall         = "tool/call"
	EvToolResult       = "tool/result"
	EvOpNote           = "op/note"
	EvOpFault          = "op/fault"
	EvRetryScheduled   = "retry/scheduled"
	EvCommandReply     = "command/reply"
	EvSessionRecovered = "session/recovered" // written by earlier versions; read, never written
	EvSessionWriter    = "session/writer"
	EvContextCompacted = "context/compacted"
	EvPipelineChanged  = "pipeline/changed"
	EvSessionForked    = "session/forked"
	EvSessionRenamed   = "session/renamed"
)

// Inbox list names.
const (
	ListNextTurn = "next-turn"
	ListNextStep = "next-step"
)

// Splice outcomes for removals.
const (
	OutcomeClaimed  = "claimed"
	OutcomeCanceled = "canceled"
)

// Turn end reasons.
const (
	ReasonCompleted   = "completed"
	ReasonMaxTokens   = "max-tokens"
	ReasonAborted     = "aborted"
	ReasonBlocked     = "blocked"
	ReasonError       = "error"
	ReasonInterrupted = "interrupted"
	ReasonLimit       = "limit"
)

// SessionCreated is the data of session/created.
type SessionCreated struct {
	Pipeline  string `json:"pipeline,omitempty"` // digest of the pipeline
	Model     string `json:"model,omitempty"`
	CreatedBy string `json:"created_by,omitempty"`
	// Settings are the creating host's own settings for the session (the
	// CLI records its pipeline file and provider, so that a later resume
	// needs no flags). Never secrets.
	Settings json.RawMessage `json:"settings,omitempty"`
}

// PipelineChanged is the data of pipeline/changed: from here on the
// session runs with these settings (a new pipeline, model or provider);
// its fields replace session/created's.
type PipelineChanged struct {
	Pipeline string          `json:"pipeline,omitempty"`
	Model    string          `json:"model,omitempty"`
	Settings json.RawMessage `json:"settings,omitempty"`
	// By says who changed them.
	By string `json:"by,omitempty"`
}

// InboxSpliced is the data of inbox/spliced: like a splice on one list,
// remove Removed items at Start and insert Inserted there.
type InboxSpliced struct {
	List     string                 `json:"list"`
	Start    int                    `json:"start"`
	Removed  int                    `json:"removed,omitempty"`
	Inserted []hostabi.InputMessage `json:"inserted,omitempty"`
	// Outcome says what became of removed items: claimed into the turn, or
	// canceled.
	Outcome string `json:"outcome,omitempty"`
	// Cause, on a canceled removal of one client's own input (withdrawn
	// before a turn took it), says who withdrew it.
	Cause *Cause `json:"cause,omitempty"`
}

// TurnStart is the data of turn/start.
type TurnStart struct {
	Turn int `json:"turn"`
	// Retry, when set, is the turn that ended in error and that this one
	// makes again at a person's request (wagent resume): it claims no
	// input and goes on with the conversation as it stands.
	Retry int `json:"retry,omitempty"`
}

// Cause says who or what ended a turn early.
type Cause struct {
	Kind   string `json:"kind"` // user, parent, hook, disposed
	Hook   string `json:"hook,omitempty"`
	Reason string `json:"reason,omitempty"`
	// By names who cancelled, as they said (a command and its process,
	// the console): of two clients on one session, the log tells which.
	By string `json:"by,omitempty"`
}

// TurnEnd is the data of turn/end.
type TurnEnd struct {
	Turn    int    `json:"turn"`
	Reason  string `json:"reason"`
	Cause   *Cause `json:"cause,omitempty"`
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// StepStart is the data of step/start.
type StepStart struct {
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// StepEnd is the data of step/end.
type StepEnd struct {
	Turn    int    `json:"turn"`
	Step    int    `json:"step"`
	Outcome string `json:"outcome"`
}

// UserMessage is the data of user/message.
type UserMessage struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	// Command names the slash command this message invoked; such messages
	// are not sent to the model.
	Command string `json:"command,omitempty"`
}

// HeaderTool is a tool offered in a step, with the op that owns it.
type HeaderTool struct {
	hostabi.ToolSpec
	Owner      string `json:"owner"`
	Idempotent bool   `json:"idempotent,omitempty"`
}

// Contribution is a prompt part or top-of-mind line, with its op. A part
// the host contributes itself (Config.PromptParts: a system prompt the
// person set) has Op "host" and a Source saying where it came from.
type Contribution struct {
	Op     string `json:"op"`
	Source string `json:"source,omitempty"`
	Text   string `json:"text"`
}

// HostOp is the Op of the host's own contributions and results.
const HostOp = "host"

// RequestHeader is the data of request/header: what a model request
// asks, recorded before it is sent. Most are a step's: the frozen request
// config every attempt of the step uses. One with Compaction set is a
// compaction's summary request instead, recorded beside the step (or
// between steps) without being one: it does not change the step's header
// or phase, and its answer is the context/compacted after it.
type RequestHeader struct {
	// Compaction, when set, makes this the header of a summary request:
	// every reader that takes a header for its step's checks it first.
	Compaction *CompactionRequest `json:"compaction,omitempty"`
	Model      string             `json:"model,omitempty"`
	MaxTokens  int                `json:"max_tokens,omitempty"`
	Tools      []HeaderTool       `json:"tools,omitempty"`
	// Guards names the pipeline's guard ops at the tool hook: every one of
	// them must pass a call before it runs, and only they decide calls
	// (the fold checks both). Always written, empty or not: a header
	// without the key comes from a version that did not record guards.
	Guards      []string       `json:"guards"`
	PromptParts []Contribution `json:"prompt_parts,omitempty"`
	TopOfMind   []Contribution `json:"top_of_mind,omitempty"`
}

// CompactionRequest says what a summary request is for: the op whose
// compact effect asked for it and why (a Compact reason), and what it
// summarises: the previous summary (of the messages before From) and the
// messages [From, Through), which it sends as one transcript. Its prompt
// part is the op's instructions.
type CompactionRequest struct {
	Op      string `json:"op"`
	Reason  string `json:"reason"`
	From    int    `json:"from"`
	Through int    `json:"through"`
}

// IsSummaryHeader reports whether e is the request/header of a summary
// request (RequestHeader.Compaction) rather than of a step. A step's
// header, often its step's largest event, is decoded only when it might
// be one.
func IsSummaryHeader(e store.Event) bool {
	if e.Type != EvRequestHeader || !bytes.Contains(e.Data, []byte(`"compaction"`)) {
		return false
	}
	var h struct {
		Compaction *CompactionRequest `json:"compaction"`
	}
	return json.Unmarshal(e.Data, &h) == nil && h.Compaction != nil
}

// AssistantMessage is the data of assistant/message.
type AssistantMessage struct {
	Content      string             `json:"content"`
	ToolCalls    []hostabi.ToolCall `json:"tool_calls,omitempty"`
	FinishReason string             `json:"finish_reason,omitempty"`
	Usage        *Usage             `json:"usage,omitempty"`
	Interrupted  bool               `json:"interrupted,omitempty"`
}

// Usage counts tokens of one answer.
type Usage struct {
	InputTokens  int `json:"input_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
}

// Add returns u and v added up. It is the one place token usage is
// tallied: the fold's session total, and a turn's in the printers.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Total is the input and output tokens together.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// IsZero reports whether u counts no token.
func (u Usage) IsZero() bool { return u.InputTokens == 0 && u.OutputTokens == 0 }

// AssistantAttempt is the data of assistant/attempt: a failed request.
type AssistantAttempt struct {
	Attempt int             `json:"attempt"`
	Failure hostabi.Failure `json:"failure"`
}

// ApprovalRequest is the data of approval/request.
type ApprovalRequest struct {
	Op      string   `json:"op"`
	CallIDs []string `json:"call_ids"`
	Reason  string   `json:"reason,omitempty"`
}

// ApprovalDecision is the data of approval/decision.
type ApprovalDecision struct {
	CallID string `json:"call_id"`
	Allow  bool   `json:"allow"`
	Scope  string `json:"scope,omitempty"`
	// Guard is the guard op the decision counts for: the guard itself, or
	// the guard whose approval request a person answered. Every guard
	// decides for itself; a call runs only when none denied it.
	Guard string `json:"guard,omitempty"`
	// Who decided: "op:NAME" for an op, or whoever the caller names.
	Who  string `json:"who"`
	Note string `json:"note,omitempty"`
}

// ToolCallEvent is the data of tool/call: the intent to run a call,
// written before it runs.
type ToolCallEvent struct {
	CallID     string          `json:"call_id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Op         string          `json:"op"`
	Idempotent bool            `json:"idempotent,omitempty"`
	// Writer is the incarnation (session/writer) that started the call. A
	// call started by an earlier writer and never answered is answered
	// TOOL_OUTCOME_UNKNOWN by the next one, or run again when idempotent.
	Writer string `json:"writer,omitempty"`
	// Guards are the guard ops that were asked about the call and let it
	// pass (allowed it, or had no objection), in pipeline order.
	Guards []string `json:"guards,omitempty"`
	// Rerun marks an idempotent call started again by a later writer after
	// the earlier one died before its result was recorded.
	Rerun bool `json:"rerun,omitempty"`
}

// ToolResult is the data of tool/result.
type ToolResult struct {
	CallID        string `json:"call_id"`
	Name          string `json:"name,omitempty"`
	Content       string `json:"content"`
	IsError       bool   `json:"is_error,omitempty"`
	Code          string `json:"code,omitempty"`
	ConcludesTurn bool   `json:"concludes_turn,omitempty"`
	Op            string `json:"op,omitempty"`
}

// OpNote is the data of op/note.
type OpNote struct {
	Op    string `json:"op"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// OpFault is the data of op/fault.
type OpFault struct {
	Op      string `json:"op"`
	Hook    string `json:"hook"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// RetryScheduled is the data of retry/scheduled.
type RetryScheduled struct {
	Op      string          `json:"op"`
	Attempt int             `json:"attempt"`
	DelayMS int64           `json:"delay_ms"`
	Failure hostabi.Failure `json:"failure"`
}

// CommandReply is the data of command/reply.
type CommandReply struct {
	Op      string `json:"op"`
	Command string `json:"command"`
	Text    string `json:"text"`
}

// ContextCompacted is the data of context/compacted: from here on the
// messages [0, Through) are stood for, in requests to the model, by
// Summary. Nothing is deleted: the log keeps every message, and the
// summary request is recorded here (who asked and why, the instructions,
// the model, its usage).
type ContextCompacted struct {
	Op           string `json:"op"`
	Reason       string `json:"reason"`
	Instructions string `json:"instructions,omitempty"`
	// Through counts the messages the summary stands for (the oldest);
	// ThroughSeq is the seq of the last of them.
	Through    int    `json:"through"`
	ThroughSeq uint64 `json:"through_seq"`
	Summary    string `json:"summary"`
	Model      string `json:"model,omitempty"`
	Usage      *Usage `json:"usage,omitempty"`
}

// SessionWriter is the data of session/writer: an incarnation (a process,
// or a worker) began writing the session. The events after it, up to the
// next session/writer, are its own; each tool/call names it too.
type SessionWriter struct {
	ID string `json:"id"`
	// Host and PID say where it ran; Start when it began.
	Host  string    `json:"host,omitempty"`
	PID   int       `json:"pid,omitempty"`
	Start time.Time `json:"start"`
}

// SessionRecovered is the data of session/recovered, which earlier
// versions wrote when they closed a turn a dead process had left open.
// Today a turn a crash interrupted goes on instead.
type SessionRecovered struct {
	Turn int `json:"turn"`
	// Requeued counts claimed input put back in the inbox.
	Requeued int `json:"requeued,omitempty"`
}

// SessionRenamed is the data of session/renamed: a person named the
// session (wagent rename). Names are for people; ids stay the key.
type SessionRenamed struct {
	// Name is the session's name from here on ("" takes it away).
	Name string `json:"name"`
	// By says who renamed it.
	By string `json:"by,omitempty"`
}

// MaxNameLen is the longest name a session may be given, in bytes.
const MaxNameLen = 200

// SessionForked is the data of session/forked: the events before it were
// copied from the origin session's log, up to and including its event Seq
// (a turn boundary). It is appended right after the copy, so its own seq
// is Seq+1, and the forked session goes on from there on its own.
type SessionForked struct {
	Origin string `json:"origin"`
	Seq    uint64 `json:"seq"`
}

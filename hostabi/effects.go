package hostabi

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Kind names an effect. Unknown kinds are refused, never dropped.
type Kind string

// Effect kinds of ABI v1.
const (
	// Any hook.
	KindNote Kind = "note" // Key, Value: the op's durable memory
	KindLog  Kind = "log"  // Level, Text: a live log line, not durable

	// prompt
	KindAdmit   Kind = "admit"   // let the batch in unchanged
	KindRewrite Kind = "rewrite" // Messages: the batch with new content (same ids)
	KindReject  Kind = "reject"  // Text: why; the turn ends "blocked"

	// contribute
	KindTool       Kind = "tool"        // Tool: a tool the op owns, offered to the model
	KindPromptPart Kind = "prompt_part" // Text: a part of the system prompt
	KindTopOfMind  Kind = "top_of_mind" // Text: a line placed where the model sees it last
	KindEndTurn    Kind = "end_turn"    // Text: why; the turn ends "limit" before the request

	// compact (1.2)
	KindCompact Kind = "compact" // Text: instructions for the summary; the host summarises

	// tool
	KindApprovalRequest Kind = "approval_request" // CallIDs, Text: ask a person; the session yields
	KindDecision        Kind = "decision"         // CallID, Allow, Scope, Text: decide a call
	KindResult          Kind = "result"           // CallID, Content, IsError, Code, ConcludesTurn

	// request-error
	KindRetry Kind = "retry" // DelayMS: request again after the delay, same step

	// turn-stopping
	KindSteer Kind = "steer" // Text: a next-step message; the turn goes on

	// command
	KindReply Kind = "reply" // Text: the command's answer
)

// Effect is one thing an op asks for. Which fields apply depends on Kind;
// the others must be empty.
type Effect struct {
	Kind Kind `json:"kind"`

	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
	Level string `json:"level,omitempty"`
	Text  string `json:"text,omitempty"`

	Messages []InputMessage `json:"messages,omitempty"`
	Tool     *ToolSpec      `json:"tool,omitempty"`

	CallID        string   `json:"call_id,omitempty"`
	CallIDs       []string `json:"call_ids,omitempty"`
	Allow         bool     `json:"allow,omitempty"`
	Scope         string   `json:"scope,omitempty"`
	Content       string   `json:"content,omitempty"`
	IsError       bool     `json:"is_error,omitempty"`
	Code          string   `json:"code,omitempty"`
	ConcludesTurn bool     `json:"concludes_turn,omitempty"`

	DelayMS int64 `json:"delay_ms,omitempty"`
}

// Decision scopes.
const (
	ScopeOnce   = "once"
	ScopeAlways = "always"
)

// Tool result codes the host writes.
const (
	// CodeOutcomeUnknown answers a call that started (its tool/call is in
	// the log) under an earlier writer and never recorded a result: it may
	// or may not have taken effect.
	CodeOutcomeUnknown = "TOOL_OUTCOME_UNKNOWN"
	// CodeInterrupted answers a started call of an idempotent tool whose
	// run was interrupted: it is safe to call again.
	CodeInterrupted = "TOOL_INTERRUPTED"
	CodeNotStarted  = "TOOL_NOT_STARTED"
	CodeDenied      = "TOOL_DENIED"
	CodeUnavailable = "TOOL_UNAVAILABLE"
	CodeUnknownTool = "TOOL_UNKNOWN"
	// CodeBadArguments answers a call whose arguments do not fit its
	// tool's parameters, before any guard or person sees it.
	CodeBadArguments = "TOOL_BAD_ARGUMENTS"
	// CodeNotGranted answers a call its owner's grants would refuse (a
	// command no exec grant allows, a URL to a host not granted), before
	// any guard or person sees it.
	CodeNotGranted = "TOOL_NOT_GRANTED"
)

// AlwaysNotePrefix starts the note the host writes for the guard that
// asked, when a person decides a call with scope "always":
// "always/TOOL" = "allow" or "deny". The guard reads it when it meets the
// tool again in the session.
const AlwaysNotePrefix = "always/"

// Fault kinds, as recorded in op/fault events (ABI.md §5).
const (
	FaultTrap          = "trap"
	FaultTimeout       = "timeout"
	FaultMemory        = "memory"
	FaultABI           = "abi"
	FaultLimit         = "limit"
	FaultInvalidEffect = "invalid-effect"
	FaultError         = "error"
)

// Fault is an op failure with a kind, as recorded in op/fault. Operations
// return it (wrapped or not) to name the kind of a failure.
type Fault struct {
	Kind    string
	Message string
}

func (f *Fault) Error() string { return fmt.Sprintf("%s: %s", f.Kind, f.Message) }

// Limits on effects that hold for every op, whatever its pipeline limits
// (ABI.md §5).
const (
	MaxKeyLen    = 256
	MaxTextBytes = 1 << 20
	// MaxNameLen bounds the short strings of an effect: a log level, a
	// result code, a call id.
	MaxNameLen = 256
	// MaxRetryDelayMS is the longest delay a retry effect may ask for (one
	// day). Bounding it keeps the engine's retry time (the event's time
	// plus the delay) far from overflowing.
	MaxRetryDelayMS = 24 * 60 * 60 * 1000
)

// Bounds on a module's manifest section (ABI.md §5): its size, and how
// deeply its JSON (config schemas included) may nest.
const (
	MaxManifestBytes = 64 << 10
	MaxManifestDepth = 64
)

var allowed = map[Kind][]Hook{
	KindNote:            Hooks,
	KindLog:             Hooks,
	KindAdmit:           {HookPrompt},
	KindRewrite:         {HookPrompt},
	KindReject:          {HookPrompt},
	KindTool:            {HookContribute},
	KindPromptPart:      {HookContribute},
	KindTopOfMind:       {HookContribute},
	KindEndTurn:         {HookContribute},
	KindCompact:         {HookCompact},
	KindApprovalRequest: {HookTool},
	KindDecision:        {HookTool},
	KindResult:          {HookTool},
	KindRetry:           {HookRequestError},
	KindSteer:           {HookTurnStopping},
	KindReply:           {HookCommand},
}

// ErrEffect is wrapped by every error Check returns.
var ErrEffect = errors.New("invalid effect")

// Check validates an effect on its own (its kind is known and allowed at
// hook, its required fields are set, no field of another kind is set).
// Checks that need the session's state (does this call exist, does the op
// own it) are the engine's.
func (e *Effect) Check(hook Hook) error {
	hooks, ok := allowed[e.Kind]
	if !ok {
		return fmt.Errorf("%w: unknown kind %q", ErrEffect, e.Kind)
	}
	ok = false
	for _, h := range hooks {
		if h == hook {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("%w: kind %q is not allowed at hook %q", ErrEffect, e.Kind, hook)
	}
	if len(e.Text) > MaxTextBytes || len(e.Content) > MaxTextBytes || len(e.Value) > MaxTextBytes {
		return fmt.Errorf("%w: %s: text over %d bytes", ErrEffect, e.Kind, MaxTextBytes)
	}
	if len(e.Level) > MaxNameLen || len(e.Code) > MaxNameLen || len(e.CallID) > MaxNameLen || len(e.Scope) > MaxNameLen {
		return fmt.Errorf("%w: %s: a level, code, call id or scope over %d bytes", ErrEffect, e.Kind, MaxNameLen)
	}
	var set fields
	if e.Key != "" {
		set |= fKey
	}
	if e.Value != "" {
		set |= fValue
	}
	if e.Level != "" {
		set |= fLevel
	}
	if e.Text != "" {
		set |= fText
	}
	if e.Messages != nil {
		set |= fMessages
	}
	if e.Tool != nil {
		set |= fTool
	}
	if e.CallID != "" {
		set |= fCallID
	}
	if e.CallIDs != nil {
		set |= fCallIDs
	}
	if e.Allow {
		set |= fAllow
	}
	if e.Scope != "" {
		set |= fScope
	}
	if e.Content != "" {
		set |= fContent
	}
	if e.IsError {
		set |= fIsError
	}
	if e.Code != "" {
		set |= fCode
	}
	if e.ConcludesTurn {
		set |= fConcludes
	}
	if e.DelayMS != 0 {
		set |= fDelay
	}
	var may, must fields
	switch e.Kind {
	case KindNote:
		may, must = fKey|fValue, fKey
		if len(e.Key) > MaxKeyLen {
			return fmt.Errorf("%w: note key over %d bytes", ErrEffect, MaxKeyLen)
		}
	case KindLog:
		may, must = fLevel|fText, fText
	case KindAdmit:
	case KindRewrite:
		may, must = fMessages, fMessages
		for _, m := range e.Messages {
			if len(m.Content) > MaxTextBytes || len(m.ID) > MaxNameLen {
				return fmt.Errorf("%w: rewrite: a message over %d bytes, or an id over %d", ErrEffect, MaxTextBytes, MaxNameLen)
			}
		}
	case KindReject, KindEndTurn, KindCompact:
		may = fText
	case KindTool:
		may, must = fTool, fTool
		if e.Tool != nil && e.Tool.Name == "" {
			return fmt.Errorf("%w: tool without a name", ErrEffect)
		}
		if e.Tool != nil && (len(e.Tool.Name) > MaxNameLen || len(e.Tool.Description) > MaxTextBytes || len(e.Tool.Parameters) > MaxTextBytes) {
			return fmt.Errorf("%w: tool %.64q: name over %d bytes, or description or parameters over %d", ErrEffect, e.Tool.Name, MaxNameLen, MaxTextBytes)
		}
		if e.Tool != nil && len(e.Tool.Parameters) > 0 && !json.Valid(e.Tool.Parameters) {
			return fmt.Errorf("%w: tool %q parameters are not JSON", ErrEffect, e.Tool.Name)
		}
	case KindPromptPart, KindTopOfMind, KindSteer:
		may, must = fText, fText
	case KindApprovalRequest:
		may, must = fCallIDs|fText, fCallIDs
		if len(e.CallIDs) == 0 {
			return fmt.Errorf("%w: approval_request without call ids", ErrEffect)
		}
		seen := make(map[string]bool, len(e.CallIDs))
		for _, id := range e.CallIDs {
			if seen[id] {
				return fmt.Errorf("%w: approval_request names call %.64q twice", ErrEffect, id)
			}
			seen[id] = true
		}
	case KindDecision:
		may, must = fCallID|fAllow|fScope|fText, fCallID
		if e.Scope != "" && e.Scope != ScopeOnce && e.Scope != ScopeAlways {
			return fmt.Errorf("%w: decision scope %q is neither %q nor %q", ErrEffect, e.Scope, ScopeOnce, ScopeAlways)
		}
	case KindResult:
		may, must = fCallID|fContent|fIsError|fCode|fConcludes, fCallID
	case KindRetry:
		may = fDelay
		if e.DelayMS < 0 || e.DelayMS > MaxRetryDelayMS {
			return fmt.Errorf("%w: retry delay %d ms is outside 0 to %d ms (one day)", ErrEffect, e.DelayMS, MaxRetryDelayMS)
		}
	case KindReply:
		may = fText
	}
	if extra := set &^ may; extra != 0 {
		return fmt.Errorf("%w: %s does not take field %s", ErrEffect, e.Kind, extra.first())
	}
	if missing := must &^ set; missing != 0 {
		return fmt.Errorf("%w: %s needs field %s", ErrEffect, e.Kind, missing.first())
	}
	return nil
}

type fields uint32

const (
	fKey fields = 1 << iota
	fValue
	fLevel
	fText
	fMessages
	fTool
	fCallID
	fCallIDs
	fAllow
	fScope
	fContent
	fIsError
	fCode
	fConcludes
	fDelay
)

var fieldNames = []string{"key", "value", "level", "text", "messages", "tool", "call_id", "call_ids", "allow", "scope", "content", "is_error", "code", "concludes_turn", "delay_ms"}

func (f fields) first() string {
	for i, n := range fieldNames {
		if f&(1<<i) != 0 {
			return n
		}
	}
	return "?"
}

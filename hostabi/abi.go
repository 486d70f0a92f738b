// Package hostabi is the single definition of wagent's operation contract:
// the hooks an operation may declare, the view it is given at each hook, the
// effects it may answer with, and the manifest that describes it. The engine,
// the wasm host and the guest kit all use these types; nothing else defines
// them.
//
// The package imports only the standard library and compiles for
// GOOS=wasip1 GOARCH=wasm, so a guest shares this definition with the host.
// The binary ABI (exports, imports, memory rules, status codes) is specified
// in ABI.md beside this file.
package hostabi

import (
	"encoding/json"
)

// ABI version. A module built for major M runs on a host of major M whose
// minor is at least the module's. A minor version may add hooks, effect
// kinds, view fields, host imports and manifest fields; anything that
// changes or removes one needs a new major.
const (
	Major = 1
	Minor = 2
)

// Hook names the situation the session is in when an operation is asked.
type Hook string

// The hooks of ABI v1, in the order a turn meets them.
const (
	// HookPrompt: a claimed batch of input waits to enter the turn.
	HookPrompt Hook = "prompt"
	// HookContribute: before each model request; every op that declares it
	// is asked, and all their contributions are combined.
	HookContribute Hook = "contribute"
	// HookCompact (1.2): before a model request, when the conversation
	// may need shortening (the last answer's usage, a context_length
	// failure, a /compact command); an op answers with a compact effect
	// and the host summarises the older messages.
	HookCompact Hook = "compact"
	// HookTool: the last assistant message has calls without results.
	HookTool Hook = "tool"
	// HookRequestError: the last model request failed.
	HookRequestError Hook = "request-error"
	// HookTurnStopping: the model answered without calls and no steering
	// waits; an op may steer the turn on.
	HookTurnStopping Hook = "turn-stopping"
	// HookCommand: a slash command the op owns arrived.
	HookCommand Hook = "command"
)

// Hooks lists every hook of this ABI version.
var Hooks = []Hook{HookPrompt, HookContribute, HookCompact, HookTool, HookRequestError, HookTurnStopping, HookCommand}

// Known reports whether h is a hook of this ABI version.
func (h Hook) Known() bool {
	for _, k := range Hooks {
		if h == k {
			return true
		}
	}
	return false
}

// Manifest describes an operation. A wasm module carries it as JSON in a
// custom section (see ABI.md); a native operation returns it from a method.
type Manifest struct {
	// Name identifies the op in logs, faults and tool ownership.
	Name string `json:"name"`
	// Version is the op's own version, free-form.
	Version string `json:"version,omitempty"`
	// ABI is "MAJOR.MINOR", the ABI the op was built for.
	ABI string `json:"abi,omitempty"`
	// Hooks the op handles. It is asked at no other.
	Hooks []Hook `json:"hooks"`
	// Tools the op may contribute and run. A contribution naming another
	// tool is refused. A name ending in "*" is a namespace (ABI 1.2): the
	// op owns every tool whose name starts with what comes before the
	// star, so a source whose tools change while it runs (an MCP server,
	// "files__*") keeps one manifest. No two ops of a pipeline may own
	// overlapping names.
	Tools []string `json:"tools,omitempty"`
	// Commands the op answers, without the leading slash.
	Commands []string `json:"commands,omitempty"`
	// CommandArgs (ABI 1.2, later) says, for a command that takes
	// arguments, what they are, as a person would type them after the
	// command's name ("[check]"): /help shows them.
	CommandArgs map[string]string `json:"command_args,omitempty"`
	// Guard marks a policy op (approval): if it faults, the calls it was
	// deciding are denied rather than let through.
	Guard bool `json:"guard,omitempty"`
	// Idempotent lists owned tools that may safely run again after a crash
	// between tool/call and tool/result (namespaces as in Tools). A source
	// that learns this per tool says it in its contribution instead
	// (ToolSpec.Annotations).
	Idempotent []string `json:"idempotent,omitempty"`
	// Capabilities the op requests. It gets requested ∩ granted.
	Capabilities Capabilities `json:"capabilities,omitempty"`
	// ConfigSchema is an optional JSON Schema for the op's config.
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
}

// Handles reports whether the manifest declares hook h.
func (m *Manifest) Handles(h Hook) bool {
	for _, k := range m.Hooks {
		if k == h {
			return true
		}
	}
	return false
}

// OwnsTool reports whether the manifest declares tool name, by its exact
// name or by a namespace ("files__*").
func (m *Manifest) OwnsTool(name string) bool { return matchesAny(m.Tools, name) }

// OwnsCommand reports whether the manifest declares command name.
func (m *Manifest) OwnsCommand(name string) bool { return contains(m.Commands, name) }

// IsIdempotent reports whether the manifest declares tool name idempotent.
func (m *Manifest) IsIdempotent(name string) bool { return matchesAny(m.Idempotent, name) }

// IsNamespace reports whether a manifest tool entry is a namespace
// ("files__*") rather than one tool's name.
func IsNamespace(entry string) bool { return len(entry) > 0 && entry[len(entry)-1] == '*' }

// ToolsOverlap reports whether two manifest tool entries can name the same
// tool: equal names, a name inside a namespace, or nested namespaces.
func ToolsOverlap(a, b string) bool {
	switch {
	case IsNamespace(a) && IsNamespace(b):
		pa, pb := a[:len(a)-1], b[:len(b)-1]
		return hasPrefix(pa, pb) || hasPrefix(pb, pa)
	case IsNamespace(a):
		return hasPrefix(b, a[:len(a)-1])
	case IsNamespace(b):
		return hasPrefix(a, b[:len(b)-1])
	}
	return a == b
}

func matchesAny(list []string, name string) bool {
	for _, x := range list {
		if x == name || IsNamespace(x) && hasPrefix(name, x[:len(x)-1]) && len(name) >= len(x) {
			return true
		}
	}
	return false
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Capabilities an op requests in its manifest (ABI.md §6). It gets what
// it requests and the pipeline grants; a request the pipeline does not
// grant is refused when the pipeline loads.
type Capabilities struct {
	// Mounts are directories inside the guest: read-only ("/skills"), or
	// read-write (ABI 1.2: {"path": "/work", "write": true}).
	Mounts []GuestMount `json:"mounts,omitempty"`
	// HTTP (1.2) names the hosts the op calls through http_request
	// (HostPattern syntax), or "*" (AnyHost) for whichever the pipeline
	// grants.
	HTTP []string `json:"http,omitempty"`
	// Exec (1.2) lists the argv patterns the op runs through exec
	// (CommandPattern syntax), or "**" (AnyCommand) for whichever the
	// pipeline grants.
	Exec []string `json:"exec,omitempty"`
}

// MountPaths returns the guest paths of the requested mounts.
func (c *Capabilities) MountPaths() []string {
	out := make([]string, len(c.Mounts))
	for i, m := range c.Mounts {
		out[i] = m.Path
	}
	return out
}

// View is what an op is given when it is asked at a hook. It is small and
// does not grow with the conversation: messages and notes are read on demand
// (Reader on the host, host imports in a guest).
type View struct {
	Hook    Hook   `json:"hook"`
	Session string `json:"session"`
	Op      string `json:"op"`
	// Turn and Step are the open turn and step (0 when none is open).
	Turn int `json:"turn"`
	Step int `json:"step"`
	// Messages is how many conversation messages exist; read them by index.
	Messages int `json:"messages"`
	// Config is the op's config from the pipeline, as JSON.
	Config json.RawMessage `json:"config,omitempty"`

	Prompt  *PromptView  `json:"prompt,omitempty"`
	Tool    *ToolView    `json:"tool,omitempty"`
	Failure *FailureView `json:"failure,omitempty"`
	Stop    *StopView    `json:"stop,omitempty"`
	Command *CommandView `json:"command,omitempty"`
	Compact *CompactView `json:"compact,omitempty"`
}

// CompactView (1.2) is what a compact op decides on.
type CompactView struct {
	// Reason is "usage" (before a request, with the last answer's tokens),
	// "context_length" (the last request was refused as too long) or
	// "command" (a person asked, with /compact).
	Reason string `json:"reason"`
	// Instruction is what the person added to /compact ("keep the paths").
	Instruction string `json:"instruction,omitempty"`
	// Model is the step's model; Tokens the input and output tokens of the
	// latest answer (0 when unknown), a measure of the context's size.
	Model  string `json:"model,omitempty"`
	Tokens int    `json:"tokens"`
	// Summarized is how many of the oldest messages the latest summary
	// already stands for; Messages (in the view) counts them all.
	Summarized int `json:"summarized"`
}

// PromptView is the claimed batch waiting to enter the turn.
type PromptView struct {
	Batch []InputMessage `json:"batch"`
}

// InputMessage is one message from the inbox.
type InputMessage struct {
	ID      string `json:"id"`
	Content string `json:"content"`
}

// ToolView lists the calls of the step's assistant message that have no
// result yet, in the order the model made them.
type ToolView struct {
	Calls []PendingCall `json:"calls"`
	// Offered names every tool offered to the model in this step.
	Offered []string `json:"offered,omitempty"`
	// Run is set when the host asks the owning op to run a started call;
	// the op must answer with a result for it.
	Run string `json:"run,omitempty"`
}

// PendingCall is a tool call without a result.
type PendingCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Owner is the op that contributed the tool this step ("" if none did).
	Owner string `json:"owner,omitempty"`
	// Server and Annotations are what the owner said of the tool when it
	// contributed it this step (ABI 1.2; see ToolSpec): the tool server it
	// fronts and the tool's hints, so that a guard's rules can use them.
	Server      string           `json:"server,omitempty"`
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
	// Decision is "allow" once an approval decision allowed the call.
	Decision string `json:"decision,omitempty"`
	// Requested is true while an approval request for the call is open.
	Requested bool `json:"requested,omitempty"`
	// Started is true once tool/call was recorded for it.
	Started bool `json:"started,omitempty"`
}

// FailureView is the failed attempt a request-error op decides on.
type FailureView struct {
	Failure Failure `json:"failure"`
	// Attempt is this step's failed attempts so far, this one included.
	Attempt int `json:"attempt"`
	// Retries is how many retries were already scheduled in this step.
	Retries int `json:"retries"`
}

// Failure is a normalised provider failure.
type Failure struct {
	Code       FailureCode `json:"code"`
	Status     int         `json:"status,omitempty"`
	RetryAfter int64       `json:"retry_after_ms,omitempty"`
	Message    string      `json:"message,omitempty"`
}

// FailureCode classifies a failed model request.
type FailureCode string

// Failure codes.
const (
	FailRateLimit     FailureCode = "rate_limit"
	FailQuota         FailureCode = "quota_exhausted"
	FailOverloaded    FailureCode = "overloaded"
	FailServer        FailureCode = "server"
	FailTimeout       FailureCode = "timeout"
	FailTransport     FailureCode = "transport"
	FailContextLength FailureCode = "context_length"
	FailAuth          FailureCode = "auth"
	FailBadRequest    FailureCode = "bad_request"
	FailStream        FailureCode = "stream"
	FailCanceled      FailureCode = "canceled"
)

// StopView is the answer that would end the turn.
type StopView struct {
	// Content is the last assistant message's text.
	Content string `json:"content"`
	// FinishReason is the model's finish reason ("stop", "length", …).
	FinishReason string `json:"finish_reason,omitempty"`
}

// CommandView is a slash command addressed to the op.
type CommandView struct {
	Name string `json:"name"`
	Args string `json:"args,omitempty"`
}

// Message is one conversation message as an op reads it.
type Message struct {
	Role      string     `json:"role"` // user, assistant, tool
	ID        string     `json:"id,omitempty"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// For role "tool": the call answered and whether it failed.
	CallID  string `json:"call_id,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// ToolCall is a call the model made.
type ToolCall struct {
	// ID names the call. In a session's log and in every view an op gets
	// it is the host's call key, unique in the session (see event.CallKey).
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// ModelID is the id the model gave the call: wire data, sent back to
	// the provider only (models repeat ids across turns, leave them empty
	// or collide). Empty in logs written before call keys, whose IDs are
	// the model's. Never part of an op's view.
	ModelID string `json:"model_id,omitempty"`
}

// ToolSpec is a tool an op offers to the model. The model sees the name,
// description and parameters; Server and Annotations (ABI 1.2) are for
// the host, guards and people, never sent to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// Server names the tool server the tool comes from when the op is a
	// front for one (an MCP entry's name).
	Server string `json:"server,omitempty"`
	// Annotations are the source's hints about the tool; nil when it
	// states none.
	Annotations *ToolAnnotations `json:"annotations,omitempty"`
}

// ToolAnnotations are what a tool's source says about the tool's effects
// (MCP's tool annotations, with MCP's defaults filled in). They are hints
// from the source, not guarantees: a guard relies on them as far as it
// trusts the source. A tool with no annotations is read at those same
// defaults: not read-only, destructive, not idempotent, open world.
//
// ReadOnly or Idempotent make the tool idempotent for the host: a call
// a crash interrupted may run again instead of being answered
// TOOL_OUTCOME_UNKNOWN.
type ToolAnnotations struct {
	ReadOnly    bool `json:"read_only,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
	Idempotent  bool `json:"idempotent,omitempty"`
	OpenWorld   bool `json:"open_world,omitempty"`
}

// Hints returns the annotations a guard should judge a call by: a's, or
// the defaults when a is nil.
func (a *ToolAnnotations) Hints() ToolAnnotations {
	if a == nil {
		return ToolAnnotations{Destructive: true, OpenWorld: true}
	}
	return *a
}

// Rerunnable reports whether the annotations make the tool safe to run
// again after an interruption (read-only or idempotent).
func (a *ToolAnnotations) Rerunnable() bool { return a != nil && (a.ReadOnly || a.Idempotent) }

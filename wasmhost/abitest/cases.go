package abitest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// Conversation sizes of the variants.
const (
	manyMessages = 10000
	someMessages = 20
	// longMessage is the size of the latest user message of a
	// conversation of manyMessages: a guest's read buffer must grow.
	longMessage = 256 << 10
)

// variant is one edge case every scenario is called with.
type variant struct {
	name        string
	messages    int
	unknownKeys bool
	longConfig  bool
}

var variants = []variant{
	{name: "no-messages", messages: 0},
	{name: "many-messages", messages: manyMessages},
	{name: "unknown-keys", messages: someMessages, unknownKeys: true},
	{name: "long-config", messages: someMessages, longConfig: true},
}

// scenario is one situation at one hook: the view the engine would give
// the op, and what the engine would accept as an answer.
type scenario struct {
	name string // HOOK or HOOK/ROLE
	view func(man *hostabi.Manifest, messages int) *hostabi.View
	rule func(man *hostabi.Manifest, v *hostabi.View, eff []hostabi.Effect) error
}

// Call ids and tool names of the tool-hook views.
const (
	idOwn       = "abitest-call-own"
	idOther     = "abitest-call-other"
	idUnowned   = "abitest-call-unowned"
	idUnowned2  = "abitest-call-unowned-2"
	otherTool   = "abitest_other_tool"
	otherOp     = "abitest-other-op"
	unknownTool = "abitest_unknown_tool"
)

func baseView(man *hostabi.Manifest, h hostabi.Hook, messages int) *hostabi.View {
	return &hostabi.View{Hook: h, Session: "abitest-session", Op: man.Name, Turn: 3, Step: 2, Messages: messages}
}

// ownTool is a tool the op owns: its first tools entry (inside it, for a
// namespace), or "" for an op that owns none.
func ownTool(man *hostabi.Manifest) string {
	if len(man.Tools) == 0 {
		return ""
	}
	t := man.Tools[0]
	if hostabi.IsNamespace(t) {
		return strings.TrimSuffix(t, "*") + "abitest"
	}
	return t
}

var args = json.RawMessage(`{"path":"/tmp/abitest.txt","n":1,"text":"naïve \"quoted\" \\ 日本"}`)

func scenarios(man *hostabi.Manifest) []scenario {
	var out []scenario
	for _, h := range man.Hooks {
		switch h {
		case hostabi.HookPrompt:
			out = append(out, scenario{name: "prompt", rule: rulePrompt, view: func(man *hostabi.Manifest, n int) *hostabi.View {
				v := baseView(man, h, n)
				v.Step = 0
				v.Prompt = &hostabi.PromptView{Batch: []hostabi.InputMessage{{ID: "abitest-in-1", Content: "Hello, can you help? naïve \"quoted\" 🎉"}}}
				return v
			}})
		case hostabi.HookContribute:
			out = append(out, scenario{name: "contribute", rule: ruleContribute, view: func(man *hostabi.Manifest, n int) *hostabi.View {
				return baseView(man, h, n)
			}})
		case hostabi.HookCompact:
			out = append(out, scenario{name: "compact", rule: ruleOneDecisive, view: func(man *hostabi.Manifest, n int) *hostabi.View {
				v := baseView(man, h, n)
				v.Compact = &hostabi.CompactView{Reason: "usage", Model: "abitest-model", Tokens: 120000}
				return v
			}})
		case hostabi.HookRequestError:
			out = append(out, scenario{name: "request-error", rule: ruleOneDecisive, view: func(man *hostabi.Manifest, n int) *hostabi.View {
				v := baseView(man, h, n)
				v.Failure = &hostabi.FailureView{Failure: hostabi.Failure{Code: hostabi.FailOverloaded, Status: 529, RetryAfter: 1500, Message: "overloaded"}, Attempt: 1}
				return v
			}})
		case hostabi.HookTurnStopping:
			out = append(out, scenario{name: "turn-stopping", rule: ruleAny, view: func(man *hostabi.Manifest, n int) *hostabi.View {
				v := baseView(man, h, n)
				v.Stop = &hostabi.StopView{Content: "", FinishReason: "stop"}
				return v
			}})
		case hostabi.HookCommand:
			out = append(out, scenario{name: "command", rule: ruleAny, view: func(man *hostabi.Manifest, n int) *hostabi.View {
				v := baseView(man, h, n)
				name := "abitest"
				if len(man.Commands) > 0 {
					name = man.Commands[0]
				}
				v.Command = &hostabi.CommandView{Name: name, Args: "some args"}
				return v
			}})
		case hostabi.HookTool:
			out = append(out, toolScenarios(man)...)
		}
	}
	return out
}

// toolScenarios are the tool hook's situations for this op, by the table
// of ABI.md §4: a guard is asked about undecided calls; any other op about
// calls no op owns; an owner to run one of its calls. An owner that is not
// a guard is also shown its own call, not asked to run it, beside a call
// no op owns: it must not answer its own.
func toolScenarios(man *hostabi.Manifest) []scenario {
	own := ownTool(man)
	offered := []string{otherTool}
	if own != "" {
		offered = append([]string{own}, offered...)
	}
	tv := func(man *hostabi.Manifest, n int, calls []hostabi.PendingCall, run string) *hostabi.View {
		v := baseView(man, hostabi.HookTool, n)
		v.Tool = &hostabi.ToolView{Calls: calls, Offered: offered, Run: run}
		return v
	}
	unowned := hostabi.PendingCall{ID: idUnowned, Name: unknownTool, Arguments: args}
	var out []scenario
	if man.Guard {
		out = append(out, scenario{name: "tool/guard", rule: ruleGuard, view: func(man *hostabi.Manifest, n int) *hostabi.View {
			calls := []hostabi.PendingCall{
				{ID: idOther, Name: otherTool, Arguments: args, Owner: otherOp, Server: "abitest-server", Annotations: &hostabi.ToolAnnotations{ReadOnly: true}},
				unowned,
			}
			if own != "" {
				calls = append([]hostabi.PendingCall{{ID: idOwn, Name: own, Arguments: args, Owner: man.Name}}, calls...)
			}
			return tv(man, n, calls, "")
		}})
	} else {
		out = append(out, scenario{name: "tool/unowned", rule: ruleUnowned, view: func(man *hostabi.Manifest, n int) *hostabi.View {
			u2 := unowned
			u2.ID, u2.Arguments = idUnowned2, json.RawMessage(`{}`)
			return tv(man, n, []hostabi.PendingCall{unowned, u2}, "")
		}})
		if own != "" {
			out = append(out, scenario{name: "tool/not-asked", rule: ruleUnowned, view: func(man *hostabi.Manifest, n int) *hostabi.View {
				return tv(man, n, []hostabi.PendingCall{{ID: idOwn, Name: own, Arguments: args, Owner: man.Name}, unowned}, "")
			}})
		}
	}
	if own != "" {
		out = append(out, scenario{name: "tool/run", rule: ruleRun, view: func(man *hostabi.Manifest, n int) *hostabi.View {
			return tv(man, n, []hostabi.PendingCall{{ID: idOwn, Name: own, Arguments: json.RawMessage(`{}`), Owner: man.Name, Decision: "allow", Started: true}}, idOwn)
		}})
	}
	return out
}

// deterministic: the same view (many messages, no notes) answered in two
// fresh instances and in the pooled one, which has served every other
// check of the op, gives the same effects.
func (k *opCheck) deterministic(pooled *wasmhost.Op, s scenario) {
	name := s.name + "/deterministic"
	fresh, err := k.newOp(k.fresh, k.mf, k.oo.Config)
	if err != nil {
		k.add(Result{Check: name, Err: err})
		return
	}
	var runs [3][]hostabi.Effect
	var slowest time.Duration
	for i, o := range []*wasmhost.Op{fresh, fresh, pooled} {
		eff, took, err := call(k.ctx, o, s.view(k.man, manyMessages), newReader(manyMessages, nil))
		if err != nil {
			k.add(Result{Check: name, Err: fmt.Errorf("run %d: %w", i+1, err)})
			return
		}
		runs[i] = eff
		slowest = max(slowest, took)
	}
	var err2 error
	if d := cmp.Diff(runs[0], runs[1]); d != "" {
		err2 = fmt.Errorf("two fresh instances answered differently (-first +second):\n%s", d)
	} else if d := cmp.Diff(runs[0], runs[2]); d != "" {
		err2 = fmt.Errorf("an instance that served other calls answered differently from a fresh one (-fresh +reused): it remembers something between calls:\n%s", d)
	}
	k.add(Result{Check: name, Err: err2, Effects: runs[0], Took: slowest})
}

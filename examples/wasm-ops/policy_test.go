package wasmops

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
	"github.com/wagent/wagent/wasmhost/abitest"
)

// The policy op in each guest language, the Go one first: the reference.
var policies = []struct{ lang, path string }{
	{"go", "../../guests/examples/policy/policy.wasm"},
	{"assemblyscript", "policy-as/policy.wasm"},
	{"c", "policy-c/policy.wasm"},
}

func cacheOpts() []wasmhost.Option {
	return []wasmhost.Option{wasmhost.WithCacheDir(filepath.Join(os.TempDir(), "wagent-wasmops-test-cache"))}
}

var (
	rtOnce sync.Once
	rt     *wasmhost.Runtime
	rtErr  error
)

func runtime(t testing.TB) *wasmhost.Runtime {
	rtOnce.Do(func() { rt, rtErr = wasmhost.NewRuntime(context.Background(), cacheOpts()...) })
	if rtErr != nil {
		t.Fatal(rtErr)
	}
	return rt
}

func read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each example passes the conformance kit.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		path, config string
	}{
		{"policy-as/policy.wasm", `{"allow":["calc_total"],"deny":["rm"]}`},
		{"policy-c/policy.wasm", `{"allow":["calc_total"],"deny":["rm"]}`},
		{"deny-word/deny-word.wasm", `{"word":"rm"}`},
		{"calculator/calculator.wasm", ``},
	} {
		t.Run(filepath.Dir(tc.path), func(t *testing.T) {
			o := abitest.Options{Runtime: cacheOpts()}
			if tc.config != "" {
				o.Default.Config = json.RawMessage(tc.config)
			}
			abitest.Run(t, read(t, tc.path), o)
		})
	}
}

// conversation serves messages and notes for one case.
type conversation struct {
	msgs  []hostabi.Message
	notes map[string]string
	// missing makes message i unreadable, as if the host had lost it.
	missing int
}

func (c *conversation) Message(i int) (hostabi.Message, bool) {
	if i < 0 || i >= len(c.msgs) || (c.missing > 0 && i == c.missing) {
		return hostabi.Message{}, false
	}
	return c.msgs[i], true
}

func (c *conversation) Note(key string) (string, bool) {
	v, ok := c.notes[key]
	return v, ok
}

type policyCase struct {
	name   string
	config string
	view   *hostabi.View
	conv   *conversation
	// want is the Go op's answer, written out so that the reference is
	// checked too; wantFault the kind of fault instead.
	want      []hostabi.Effect
	wantFault string
}

func calls(names ...string) []hostabi.PendingCall {
	var out []hostabi.PendingCall
	for i, n := range names {
		out = append(out, hostabi.PendingCall{ID: "c" + strconv.Itoa(i+1), Name: n, Arguments: json.RawMessage(`{}`)})
	}
	return out
}

func toolView(cs []hostabi.PendingCall) *hostabi.View {
	return &hostabi.View{Hook: hostabi.HookTool, Session: "s", Op: "policy", Turn: 1, Step: 1, Tool: &hostabi.ToolView{Calls: cs}}
}

func stopView(turn int, content string, msgs []hostabi.Message) *hostabi.View {
	return &hostabi.View{Hook: hostabi.HookTurnStopping, Session: "s", Op: "policy", Turn: turn, Step: 1, Messages: len(msgs),
		Stop: &hostabi.StopView{Content: content, FinishReason: "stop"}}
}

func decision(id string, allow bool, text string) hostabi.Effect {
	return hostabi.Effect{Kind: hostabi.KindDecision, CallID: id, Allow: allow, Scope: hostabi.ScopeOnce, Text: text}
}

func ask(ids ...string) hostabi.Effect {
	return hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: ids, Text: "not on the allow list"}
}

var steered = []hostabi.Effect{
	{Kind: hostabi.KindNote, Key: "steered", Value: "2"},
	{Kind: hostabi.KindSteer, Text: "The user asked a question; answer it."},
}

func user(s string) hostabi.Message      { return hostabi.Message{Role: "user", Content: s} }
func assistant(s string) hostabi.Message { return hostabi.Message{Role: "assistant", Content: s} }

func policyCases() []policyCase {
	cfg := `{"allow":["calc_total","caf\u00e9"],"deny":["rm"]}`
	escaped := calls("calc_total", "other")
	escaped[0].ID, escaped[1].ID = `c"1\`, "c\u00e9\n2"
	decided := calls("calc_total", "foo", "bar")
	decided[0].Decision, decided[1].Requested = "allow", true
	var many []string
	for i := 0; i < 300; i++ {
		many = append(many, "calc_total")
	}
	q := []hostabi.Message{user("is it done?"), assistant("")}
	far := []hostabi.Message{user("a question?")}
	for i := 0; i < 8; i++ {
		far = append(far, assistant("working"))
	}
	near := far[:8] // the user message is the eighth from the end: found
	return []policyCase{
		{name: "tool/mixed", config: cfg, view: toolView(calls("calc_total", "rm", "fetch", "curl")),
			conv: &conversation{notes: map[string]string{"always:fetch": "allow", "always:curl": "deny"}},
			want: []hostabi.Effect{decision("c1", true, "on the allow list"), decision("c2", false, "on the deny list"), decision("c3", true, "allowed always"), ask("c4")}},
		{name: "tool/decided-and-requested-skipped", config: cfg, view: toolView(decided), conv: &conversation{}, want: []hostabi.Effect{ask("c3")}},
		{name: "tool/no-config", view: toolView(calls("calc_total", "rm")), conv: &conversation{}, want: []hostabi.Effect{ask("c1", "c2")}},
		{name: "tool/unicode-name", config: cfg, view: toolView(calls("café", "cafe")), conv: &conversation{},
			want: []hostabi.Effect{decision("c1", true, "on the allow list"), ask("c2")}},
		{name: "tool/escaped-ids", config: cfg, view: toolView(escaped), conv: &conversation{},
			want: []hostabi.Effect{decision(`c"1\`, true, "on the allow list"), ask("c\u00e9\n2")}},
		{name: "tool/no-calls", config: cfg, view: toolView(nil), conv: &conversation{}},
		{name: "tool/over-the-effect-limit", config: cfg, view: toolView(calls(many...)), conv: &conversation{}, wantFault: hostabi.FaultLimit},
		{name: "stop/question", view: stopView(2, "", q), conv: &conversation{msgs: q}, want: steered},
		{name: "stop/steered-this-turn", view: stopView(2, "", q), conv: &conversation{msgs: q, notes: map[string]string{"steered": "2"}}},
		{name: "stop/steered-last-turn", view: stopView(2, "", q), conv: &conversation{msgs: q, notes: map[string]string{"steered": "1"}}, want: steered},
		{name: "stop/answered", view: stopView(2, "Done.", q), conv: &conversation{msgs: q}},
		{name: "stop/unicode-blank-answer", view: stopView(2, " \u00a0\t\u3000\u2003\n", q), conv: &conversation{msgs: q}, want: steered},
		{name: "stop/zero-width-space-is-an-answer", view: stopView(2, "\u200b", q), conv: &conversation{msgs: q}},
		{name: "stop/user-9-back", view: stopView(2, "", far), conv: &conversation{msgs: far}},
		{name: "stop/user-8-back", view: stopView(2, "", near), conv: &conversation{msgs: near}, want: steered},
		{name: "stop/last-user-no-question", view: stopView(2, "", []hostabi.Message{user("why?"), assistant("x"), user("thanks"), assistant("")}),
			conv: &conversation{msgs: []hostabi.Message{user("why?"), assistant("x"), user("thanks"), assistant("")}}},
		{name: "stop/no-stop-view", view: &hostabi.View{Hook: hostabi.HookTurnStopping, Op: "policy", Turn: 2, Messages: 2}, conv: &conversation{msgs: q}},
		{name: "stop/no-messages", view: stopView(2, "", nil), conv: &conversation{}},
		{name: "stop/long-question", view: stopView(2, "", []hostabi.Message{user(strings.Repeat("é", 150000) + "?"), assistant("")}),
			conv: &conversation{msgs: []hostabi.Message{user(strings.Repeat("é", 150000) + "?"), assistant("")}}, want: steered},
		{name: "stop/message-missing", view: stopView(2, "", []hostabi.Message{user("q?"), assistant("a"), assistant("")}),
			conv: &conversation{msgs: []hostabi.Message{user("q?"), assistant("a"), assistant("")}, missing: 1}},
		{name: "stop/turn-zero", view: stopView(0, "", q), conv: &conversation{msgs: q},
			want: []hostabi.Effect{{Kind: hostabi.KindNote, Key: "steered", Value: "0"}, steered[1]}},
	}
}

// The policy op in AssemblyScript and in C answers every case as the Go op
// does: the same effects, or the same kind of fault.
func TestPolicyEqualInBehaviour(t *testing.T) {
	ctx := context.Background()
	r := runtime(t)
	for _, p := range policies {
		m, err := r.Load(ctx, read(t, p.path))
		if err != nil {
			t.Fatalf("%s: %v", p.lang, err)
		}
		for _, tc := range policyCases() {
			t.Run(p.lang+"/"+tc.name, func(t *testing.T) {
				op, err := r.NewOp(m, wasmhost.Config{Config: json.RawMessage(tc.config)})
				if err != nil {
					t.Fatal(err)
				}
				got, err := op.Handle(ctx, tc.view, tc.conv)
				if tc.wantFault != "" {
					var f *hostabi.Fault
					if !errors.As(err, &f) || f.Kind != tc.wantFault {
						t.Fatalf("err = %v, want a fault of kind %s", err, tc.wantFault)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("effects mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

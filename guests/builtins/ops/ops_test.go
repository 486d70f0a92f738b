package ops

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// The ops run natively through the guest kit, registered as the bundle
// module registers them; pdk.Test dispatches on View.Op as a guest would.
func TestMain(m *testing.M) {
	for _, op := range All() {
		pdk.Register(op())
	}
	os.Exit(m.Run())
}

func TestManifestIsABundle(t *testing.T) {
	b, err := pdk.ManifestJSON()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := hostabi.DecodeManifests(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, " "); got != "approval skills retry turn-stopping max-turns unknown-tool final-output compaction agents-md prompt files shell fetch" {
		t.Errorf("bundle ops %q", got)
	}
	if _, err := pdk.Test(&hostabi.View{Hook: hostabi.HookTool, Op: "nope", Tool: &hostabi.ToolView{}}, nil); err == nil || !strings.Contains(err.Error(), "no op named nope") {
		t.Errorf("unknown op: %v", err)
	}
}

func toolCalls(calls ...hostabi.PendingCall) *hostabi.View {
	return &hostabi.View{Hook: hostabi.HookTool, Op: "approval", Tool: &hostabi.ToolView{Calls: calls}}
}

func call(id, name, args string) hostabi.PendingCall {
	return hostabi.PendingCall{ID: id, Name: name, Arguments: json.RawMessage(args), Owner: "calculator"}
}

func TestApprovalPrecedence(t *testing.T) {
	cfg := `{"mode":"auto","allow":["calc_*"],"deny":["calc_divide"],"ask":[{"tool":"calc_*","arg":"value","match":"^13$"}]}`
	cases := []struct {
		name  string
		call  hostabi.PendingCall
		notes map[string]string
		want  string // allow, deny, ask, skip
	}{
		{"deny beats allow", call("c", "calc_divide", `{"value":"1"}`), nil, "deny"},
		{"ask rule beats allow", call("c", "calc_add", `{"value":"13"}`), nil, "ask"},
		{"allow by glob", call("c", "calc_add", `{"value":"2"}`), nil, "allow"},
		{"always remembered", call("c", "shell", `{}`), map[string]string{"always/shell": "deny"}, "deny"},
		{"mode auto", call("c", "shell", `{}`), nil, "allow"},
		{"no owner: left alone", hostabi.PendingCall{ID: "c", Name: "ghost", Arguments: json.RawMessage(`{}`)}, nil, "skip"},
		{"already decided: left alone", hostabi.PendingCall{ID: "c", Name: "shell", Decision: "allow", Owner: "x"}, nil, "skip"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := toolCalls(tc.call)
			v.Config = json.RawMessage(cfg)
			eff, err := pdk.Test(v, &pdk.Fake{Notes: tc.notes})
			if err != nil {
				t.Fatal(err)
			}
			got := "skip"
			if len(eff) == 1 {
				switch {
				case eff[0].Kind == hostabi.KindApprovalRequest:
					got = "ask"
				case eff[0].Allow:
					got = "allow"
				default:
					got = "deny"
				}
			}
			if got != tc.want {
				t.Errorf("got %s (%+v), want %s", got, eff, tc.want)
			}
		})
	}
	// A bad config is an error (the host records a fault, and approval,
	// a guard, fails closed).
	v := toolCalls(call("c", "calc_add", `{}`))
	v.Config = json.RawMessage(`{"mode":"sometimes"}`)
	if _, err := pdk.Test(v, nil); err == nil || !strings.Contains(err.Error(), `mode "sometimes"`) {
		t.Errorf("bad mode: %v", err)
	}
	v.Config = json.RawMessage(`{"alow":["x"]}`)
	if _, err := pdk.Test(v, nil); err == nil || !strings.Contains(err.Error(), "alow") {
		t.Errorf("typo in config: %v", err)
	}
}

// Approval's rules fail closed: arguments of a shape a rule does not
// expect are treated as matching it, so a deny rule denies and an ask rule
// asks. (Before, a missing argument, a non-string value or "Command" where
// the rule names "command" let the call through.)
func TestApprovalFailsClosed(t *testing.T) {
	cfg := `{"mode":"auto",` +
		`"deny":["drop_*",{"tool":"shell","arg":"command","match":"rm -rf"}],` +
		`"ask":[{"tool":"fetch","arg":"url","match":"internal"},{"tool":"wipe"}]}`
	for _, tc := range []struct {
		name, tool, args, want string
	}{
		{"a harmless command", "shell", `{"command":"ls -l"}`, "allow"},
		{"the pattern", "shell", `{"command":"rm -rf /"}`, "deny"},
		{"the pattern, escaped", "shell", `{"command":"r\u006d -rf /"}`, "deny"},
		{"the argument missing", "shell", `{"cmd":"rm -rf /"}`, "deny"},
		{"no arguments", "shell", `{}`, "deny"},
		{"an array", "shell", `{"command":["rm","-rf","/"]}`, "deny"},
		{"a number", "shell", `{"command":42}`, "deny"},
		{"null", "shell", `{"command":null}`, "deny"},
		{"another case", "shell", `{"Command":"rm -rf /"}`, "deny"},
		{"both cases", "shell", `{"command":"ls","Command":"rm -rf /"}`, "deny"},
		{"twice", "shell", `{"command":"ls","command":"rm -rf /"}`, "deny"},
		{"not an object", "shell", `"rm -rf /"`, "deny"},
		{"another tool", "editor", `{"command":"rm -rf /"}`, "allow"},
		{"a name glob", "drop_table", `{}`, "deny"},
		{"a harmless url", "fetch", `{"url":"https://example.com"}`, "allow"},
		{"an internal url", "fetch", `{"url":"http://internal/admin"}`, "ask"},
		{"no url", "fetch", `{"uri":"http://internal/admin"}`, "ask"},
		{"URL", "fetch", `{"URL":"http://internal/admin"}`, "ask"},
		{"a rule without arg", "wipe", `{"anything":1}`, "ask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := toolCalls(call("c", tc.tool, tc.args))
			v.Config = json.RawMessage(cfg)
			eff, err := pdk.Test(v, nil)
			if err != nil || len(eff) != 1 {
				t.Fatalf("effects %+v, err %v", eff, err)
			}
			got := "deny"
			switch {
			case eff[0].Kind == hostabi.KindApprovalRequest:
				got = "ask"
			case eff[0].Allow:
				got = "allow"
			}
			if got != tc.want {
				t.Errorf("%s %s: %s (%q), want %s", tc.tool, tc.args, got, eff[0].Text, tc.want)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pat, name string
		want      bool
	}{
		{"calc_*", "calc_add", true}, {"calc_*", "calc", false}, {"*", "x", true},
		{"a*b*c", "aXbYc", true}, {"a*b*c", "aXc", false}, {"exact", "exact", true}, {"*_total", "calc_total", true},
	} {
		if got := glob(tc.pat, tc.name); got != tc.want {
			t.Errorf("glob(%q, %q) = %v", tc.pat, tc.name, got)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := &retryPolicy{initial: 100, max: 1000, jitter: 0.2}
	for n, want := range []int64{100, 200, 400, 800, 1000, 1000} {
		if got := backoff(p, n, 0.5); got != want {
			t.Errorf("backoff %d = %d, want %d", n, got, want)
		}
	}
	if lo, hi := backoff(p, 0, 0), backoff(p, 0, 0.999999); lo != 80 || hi != 119 {
		t.Errorf("jitter range [%d, %d], want [80, 119]", lo, hi)
	}
	v := &hostabi.View{Session: "s", Turn: 1, Step: 2, Failure: &hostabi.FailureView{Retries: 1}}
	if a, b := jitterSeed(v), jitterSeed(v); a != b || a < 0 || a >= 1 {
		t.Errorf("jitter seed %v %v: must be fixed by the view and in [0,1)", a, b)
	}
}

func TestFinalOutputCheck(t *testing.T) {
	var s schema
	json.Unmarshal([]byte(`{"type":"object","required":["answer"],"properties":{"answer":{"type":"string"},"n":{"type":"integer"}}}`), &s)
	for args, want := range map[string]string{
		`{"answer":"42"}`:        "",
		`{"answer":"42","n":3}`:  "",
		`{}`:                     "missing required answer",
		`{"answer":42}`:          "answer must be string, not number",
		`{"answer":"x","n":1.5}`: "n must be integer, not number",
		`[1]`:                    "the arguments are not a JSON object",
	} {
		if got := check(s, []byte(args)); got != want {
			t.Errorf("check(%s) = %q, want %q", args, got, want)
		}
	}
}

func TestMaxTurnsBudget(t *testing.T) {
	for step, want := range map[int]string{1: "", 2: string(hostabi.KindTopOfMind), 4: string(hostabi.KindTopOfMind), 5: string(hostabi.KindEndTurn)} {
		v := &hostabi.View{Hook: hostabi.HookContribute, Op: "max-turns", Step: step, Config: json.RawMessage(`{"max_steps":4}`)}
		eff, err := pdk.Test(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(eff) == 1 {
			got = string(eff[0].Kind)
		}
		if got != want {
			t.Errorf("step %d: %q, want %q", step, got, want)
		}
	}
}

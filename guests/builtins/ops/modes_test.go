package ops

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// decide runs the approval op on one call and says allow, deny or ask,
// with the reason.
func decide(t *testing.T, cfg string, notes map[string]string, c hostabi.PendingCall) (string, string) {
	t.Helper()
	v := toolCalls(c)
	v.Config = json.RawMessage(cfg)
	eff, err := pdk.Test(v, &pdk.Fake{Notes: notes})
	if err != nil || len(eff) != 1 {
		t.Fatalf("%+v: %+v %v", c, eff, err)
	}
	switch {
	case eff[0].Kind == hostabi.KindApprovalRequest:
		return "ask", ""
	case eff[0].Allow:
		return "allow", eff[0].Text
	}
	return "deny", eff[0].Text
}

func TestApprovalModes(t *testing.T) {
	pc := func(owner, name string, ann *hostabi.ToolAnnotations) hostabi.PendingCall {
		return hostabi.PendingCall{ID: "c", Name: name, Arguments: json.RawMessage(`{}`), Owner: owner, Annotations: ann}
	}
	ro := &hostabi.ToolAnnotations{ReadOnly: true}
	for _, tc := range []struct {
		name, cfg, note string
		call            hostabi.PendingCall
		want            string
	}{
		{"edits: write_file runs", `{}`, "edits", pc("files", "write_file", nil), "allow"},
		{"edits: edit_file runs", `{}`, "edits", pc("files", "edit_file", nil), "allow"},
		{"edits: shell still asks", `{}`, "edits", pc("shell", "shell", nil), "ask"},
		{"edits: another op's write_file asks", `{}`, "edits", pc("evil", "write_file", nil), "ask"},
		{"edits: an ask rule still asks", `{"ask":[{"tool":"write_file"}]}`, "edits", pc("files", "write_file", nil), "ask"},
		{"plan: write_file refused", `{}`, "plan", pc("files", "write_file", nil), "deny"},
		{"plan: shell refused", `{}`, "plan", pc("shell", "shell", nil), "deny"},
		{"plan: refused over the allow list", `{"allow":["shell"]}`, "plan", pc("shell", "shell", nil), "deny"},
		{"plan: refused over an always", `{}`, "plan", pc("shell", "shell", nil), "deny"},
		{"plan: an MCP tool without readOnlyHint refused", `{}`, "plan", pc("mcp", "create_issue", nil), "deny"},
		{"plan: read_file runs", `{}`, "plan", pc("files", "read_file", nil), "allow"},
		{"plan: a read-only MCP tool asks as in ask", `{}`, "plan", pc("mcp", "list_issues", ro), "ask"},
		{"auto: shell runs", `{}`, "auto", pc("shell", "shell", nil), "allow"},
		{"the note wins over the config", `{"mode":"auto"}`, "ask", pc("shell", "shell", nil), "ask"},
		{"no note: the config's mode", `{"mode":"auto"}`, "", pc("shell", "shell", nil), "allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := map[string]string{}
			if tc.note != "" {
				notes["mode"] = tc.note
			}
			if strings.Contains(tc.name, "always") {
				notes["always/shell"] = "allow"
			}
			got, why := decide(t, tc.cfg, notes, tc.call)
			if got != tc.want {
				t.Errorf("got %s (%s), want %s", got, why, tc.want)
			}
			if got == "deny" && tc.note == "plan" && !strings.HasPrefix(why, "plan mode: read-only; "+tc.call.Name) {
				t.Errorf("plan's reason %q", why)
			}
		})
	}
}

func TestModeCommand(t *testing.T) {
	run := func(cfg, args string, notes map[string]string) (string, map[string]string) {
		t.Helper()
		v := &hostabi.View{Hook: hostabi.HookCommand, Op: "approval", Config: json.RawMessage(cfg), Command: &hostabi.CommandView{Name: "mode", Args: args}}
		eff, err := pdk.Test(v, &pdk.Fake{Notes: notes})
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]string{}
		var reply string
		for _, e := range eff {
			switch e.Kind {
			case hostabi.KindNote:
				set[e.Key] = e.Value
			case hostabi.KindReply:
				reply += e.Text
			}
		}
		return reply, set
	}
	if r, set := run(`{}`, "", nil); !strings.HasPrefix(r, "mode ask: a person decides") || len(set) != 0 {
		t.Errorf("/mode: %q %v", r, set)
	}
	if r, _ := run(`{"mode":"auto"}`, "", nil); !strings.HasPrefix(r, "mode auto:") {
		t.Errorf("/mode with config auto: %q", r)
	}
	if r, set := run(`{}`, "plan", nil); !strings.HasPrefix(r, "mode plan: read-only") || set["mode"] != "plan" {
		t.Errorf("/mode plan: %q %v", r, set)
	}
	if r, _ := run(`{}`, "", map[string]string{"mode": "edits"}); !strings.HasPrefix(r, "mode edits:") {
		t.Errorf("/mode after edits: %q", r)
	}
	if r, set := run(`{}`, "yolo", nil); r != `/mode: no mode yolo; the modes are ask, edits, plan and auto (now: ask)` || len(set) != 0 {
		t.Errorf("/mode yolo: %q %v", r, set)
	}
}

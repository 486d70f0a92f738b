package ops

import (
	"encoding/json"
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Ask rules can match what a tool's source says of it: its server and
// annotations; a tool with none is judged destructive and open-world.
func TestApprovalHintRules(t *testing.T) {
	mcpCall := func(name, server string, a *hostabi.ToolAnnotations) hostabi.PendingCall {
		return hostabi.PendingCall{ID: "c", Name: name, Arguments: json.RawMessage(`{}`), Owner: "mcp." + server, Server: server, Annotations: a}
	}
	readOnly := &hostabi.ToolAnnotations{ReadOnly: true}
	destructive := &hostabi.ToolAnnotations{Destructive: true}
	for _, tc := range []struct {
		name, cfg string
		call      hostabi.PendingCall
		want      string
	}{
		{"destructive asks over allow", `{"mode":"auto","allow":["files__*"],"ask":[{"destructive":true}]}`, mcpCall("files__rm", "files", destructive), "ask"},
		{"read-only passes", `{"mode":"auto","ask":[{"destructive":true}]}`, mcpCall("files__read", "files", readOnly), "allow"},
		{"no annotations: destructive", `{"mode":"auto","ask":[{"destructive":true}]}`, mcpCall("files__x", "files", nil), "ask"},
		{"not read-only asks", `{"mode":"auto","ask":[{"read_only":false}]}`, mcpCall("files__mv", "files", &hostabi.ToolAnnotations{}), "ask"},
		{"open world by server", `{"mode":"auto","ask":[{"server":"web*","open_world":true}]}`, mcpCall("webby__fetch", "webby", &hostabi.ToolAnnotations{OpenWorld: true}), "ask"},
		{"other server passes", `{"mode":"auto","ask":[{"server":"web*"}]}`, mcpCall("files__fetch", "files", &hostabi.ToolAnnotations{OpenWorld: true}), "allow"},
		{"tool and hint both", `{"mode":"auto","ask":[{"tool":"files__w*","destructive":true}]}`, mcpCall("files__rm", "files", destructive), "allow"},
		{"a plain op's tool has no server", `{"mode":"auto","ask":[{"server":"*x"}]}`, call("c", "calc_add", `{}`), "allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := toolCalls(tc.call)
			v.Config = json.RawMessage(tc.cfg)
			eff, err := pdk.Test(v, nil)
			if err != nil || len(eff) != 1 {
				t.Fatalf("%v %+v", err, eff)
			}
			got := "deny"
			switch {
			case eff[0].Kind == hostabi.KindApprovalRequest:
				got = "ask"
			case eff[0].Allow:
				got = "allow"
			}
			if got != tc.want {
				t.Errorf("got %s (%+v), want %s", got, eff, tc.want)
			}
		})
	}
}

package pdk

import (
	"strings"
	"testing"

	"github.com/wagent/wagent/hostabi"
)

// The capabilities go through the wire codec both ways in a native test,
// as in a guest; OfferWith shapes (or withholds) a tool at contribute.
func TestCapabilitiesThroughTheKit(t *testing.T) {
	var seen []string
	only(t, Op{
		Manifest: hostabi.Manifest{Name: "capper", Capabilities: hostabi.Capabilities{HTTP: []string{"*"}, Exec: []string{"**"}, Mounts: []hostabi.GuestMount{{Path: "/work", Write: true}}}},
		Tools: []OwnedTool{Tool(hostabi.ToolSpec{Name: "go", Description: "Runs."}, func(c *Call, _ NoArgs) (string, error) {
			h := c.HTTP(hostabi.HTTPRequest{URL: "http://h/x", Headers: map[string]string{"A": "b"}})
			e := c.Exec(hostabi.ExecRequest{Argv: []string{"go", "vet"}, Dir: "/work"})
			return h.Body + "|" + e.Stdout + "|" + e.Error, nil
		}, OfferWith(func(c *Call, spec *hostabi.ToolSpec) bool {
			g := c.Granted()
			if len(g.Exec) == 0 {
				return false
			}
			spec.Description += " Allowed: " + g.Exec[0].Cmd
			return true
		}))},
	})
	f := &Fake{
		Granted: hostabi.Granted{Exec: []hostabi.GrantedCommand{{Cmd: "go vet **"}}},
		HTTP: func(r *hostabi.HTTPRequest) hostabi.HTTPResponse {
			seen = append(seen, r.URL+" "+r.Headers["A"])
			return hostabi.HTTPResponse{Status: 200, Body: "page"}
		},
		Exec: func(r *hostabi.ExecRequest) hostabi.ExecResponse {
			seen = append(seen, strings.Join(r.Argv, " ")+" in "+r.Dir)
			return hostabi.ExecResponse{Stdout: "vetted"}
		},
	}
	eff, err := Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "capper"}, f)
	if err != nil || len(eff) != 1 || eff[0].Tool.Description != "Runs. Allowed: go vet **" {
		t.Fatalf("contribute: %+v %v", eff, err)
	}
	if eff, err := Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "capper"}, &Fake{}); err != nil || len(eff) != 0 {
		t.Errorf("contribute with nothing granted: %+v %v", eff, err)
	}
	v := &hostabi.View{Hook: hostabi.HookTool, Op: "capper", Tool: &hostabi.ToolView{Run: "c1", Calls: []hostabi.PendingCall{{ID: "c1", Name: "go", Arguments: []byte(`{}`), Owner: "capper", Started: true}}}}
	eff, err = Test(v, f)
	if err != nil || len(eff) != 1 || eff[0].Content != "page|vetted|" {
		t.Fatalf("run: %+v %v", eff, err)
	}
	if strings.Join(seen, "; ") != "http://h/x b; go vet in /work" {
		t.Errorf("the host saw %q", seen)
	}
	// Without HTTP or Exec the fake says the op has no such capability.
	eff, _ = Test(v, &Fake{Granted: f.Granted})
	if !strings.Contains(eff[0].Content, "pdk.Fake: no exec") {
		t.Errorf("no capability: %q", eff[0].Content)
	}
}

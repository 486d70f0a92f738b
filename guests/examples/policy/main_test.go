package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// The op runs natively under go test, through the kit's fake host: the
// same handler code the .wasm runs, without building it.
func TestDecide(t *testing.T) {
	v := &hostabi.View{
		Hook:   hostabi.HookTool,
		Op:     "policy",
		Config: json.RawMessage(`{"allow":["calc_total"],"deny":["rm"]}`),
		Tool: &hostabi.ToolView{Calls: []hostabi.PendingCall{
			{ID: "c1", Name: "calc_total"}, {ID: "c2", Name: "rm"}, {ID: "c3", Name: "fetch"}, {ID: "c4", Name: "curl"},
		}},
	}
	got, err := pdk.Test(v, &pdk.Fake{Notes: map[string]string{"always:fetch": "allow"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []hostabi.Effect{
		{Kind: hostabi.KindDecision, CallID: "c1", Allow: true, Scope: "once", Text: "on the allow list"},
		{Kind: hostabi.KindDecision, CallID: "c2", Scope: "once", Text: "on the deny list"},
		{Kind: hostabi.KindDecision, CallID: "c3", Allow: true, Scope: "once", Text: "allowed always"},
		{Kind: hostabi.KindApprovalRequest, CallIDs: []string{"c4"}, Text: "not on the allow list"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("effects:\n got %+v\nwant %+v", got, want)
	}
}

func TestStopCheck(t *testing.T) {
	f := &pdk.Fake{Messages: []hostabi.Message{{Role: "user", Content: "is it done?"}, {Role: "assistant", Content: ""}}}
	v := &hostabi.View{Hook: hostabi.HookTurnStopping, Op: "policy", Turn: 2, Stop: &hostabi.StopView{}}
	got, err := pdk.Test(v, f)
	if err != nil || len(got) != 2 || got[1].Kind != hostabi.KindSteer {
		t.Fatalf("got %+v, %v", got, err)
	}
	f.Notes = map[string]string{"steered": "2"}
	if got, err := pdk.Test(v, f); err != nil || len(got) != 0 {
		t.Fatalf("steered twice: %+v, %v", got, err)
	}
}

func TestManifest(t *testing.T) {
	b, err := pdk.ManifestJSON()
	if err != nil {
		t.Fatal(err)
	}
	m, err := hostabi.DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Hooks, []hostabi.Hook{hostabi.HookTool, hostabi.HookTurnStopping}) || m.ABI != hostabi.ABIVersion() {
		t.Fatalf("manifest = %+v", m)
	}
}

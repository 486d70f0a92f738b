package hostabi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeManifest(t *testing.T) {
	good := `{"name":"policy","version":"1","abi":"1.0","hooks":["tool","turn-stopping"],"tools":["calc"],"idempotent":["calc"],"commands":["ping"],"guard":true,"capabilities":{"mounts":["/skills"]},"config_schema":{"type":"object"}}`
	m, err := DecodeManifest([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "policy" || !m.Guard || !m.Handles(HookTurnStopping) || !m.IsIdempotent("calc") {
		t.Fatalf("got %+v", m)
	}
	opt := `{"name":"s","abi":"1.2","hooks":["command"],"commands":["skills"],"command_args":{"skills":"[check]"},"capabilities":{"mounts":[{"path":"/skills","optional":true}]}}`
	if m, err := DecodeManifest([]byte(opt)); err != nil || m.CommandArgs["skills"] != "[check]" || len(m.Capabilities.Mounts) != 1 || !m.Capabilities.Mounts[0].Optional {
		t.Errorf("command_args and an optional mount: %+v, %v", m, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"name":"x","hooks":["tool"]}`, `no abi version (want "1.2")`},
		{`{"name":"x","abi":"2.0","hooks":["tool"]}`, "built for ABI 2.0, this host speaks ABI 1.2: rebuild the op for v1"},
		{`{"name":"x","abi":"1.9","hooks":["tool"]}`, "newer than this host's 1.2: upgrade wagent"},
		{`{"name":"x","abi":"one","hooks":["tool"]}`, `abi version "one" is not MAJOR.MINOR`},
		{`{"name":"x","abi":"1.0","hooks":["tool"],"surprise":1}`, `unknown field "surprise"`},
		{`{"name":"x","abi":"1.0","hooks":[]}`, "x declares no hooks"},
		{`{"name":"x","abi":"1.0","hooks":["teleport"]}`, `unknown hook "teleport"`},
		{`{"name":"x","abi":"1.0","hooks":["tool","tool"]}`, `hook "tool" listed twice`},
		{`{"name":"a b","abi":"1.0","hooks":["tool"]}`, `name "a b" must be`},
		{`{"name":"x","abi":"1.0","hooks":["tool"],"idempotent":["calc"]}`, `idempotent tool "calc" is not among the op's tools`},
		{`{"name":"x","abi":"1.0","hooks":["command"],"commands":["/ping"]}`, `command "/ping" must be`},
		{`{"name":"x","abi":"1.2","hooks":["command"],"commands":["ping"],"command_args":{"pong":"[N]"}}`, `command_args names "pong", which is not among the op's commands`},
		{`{"name":"x","abi":"1.2","hooks":["command"],"commands":["ping"],"command_args":{"ping":"a\nb"}}`, `command_args of "ping" must be one line`},
		{`{"name":"x","abi":"1.2","hooks":["tool"],"capabilities":{"mounts":[{"path":"/s","later":true}]}}`, `unknown mount key "later" (the keys are path, write, optional)`},
		{`{"name":"x","abi":"1.0","hooks":["tool"],"capabilities":{"mounts":["skills"]}}`, `mount path "skills" must be an absolute, clean path`},
		{`{"name":"x","abi":"1.0","hooks":["tool"]} {}`, "after top-level value"},
		{`[1]`, "not a JSON object"},
	} {
		_, err := DecodeManifest([]byte(tc.in))
		if err == nil || !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeManifest(%s) = %v, want an ErrManifest containing %q", tc.in, err, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	if got := HookExport(HookRequestError); got != "wagent_on_request_error" {
		t.Errorf("HookExport = %q", got)
	}
	if got := Marker(1); got != "wagent_abi_v1" {
		t.Errorf("Marker = %q", got)
	}
	if got := ABIVersion(); got != "1.2" {
		t.Errorf("ABIVersion = %q", got)
	}
}

func TestCheckFor(t *testing.T) {
	m := &Manifest{Name: "me", Hooks: []Hook{HookTool, HookContribute}, Tools: []string{"calc"}}
	v := &View{Hook: HookTool, Op: "me", Tool: &ToolView{Calls: []PendingCall{{ID: "c1", Owner: "me"}, {ID: "c2", Owner: "other"}, {ID: "c3"}}}}
	for _, tc := range []struct {
		e    Effect
		want string
	}{
		{Effect{Kind: KindResult, CallID: "c1", Content: "ok"}, ""},
		{Effect{Kind: KindResult, CallID: "c3", Content: "unclaimed"}, ""},
		{Effect{Kind: KindResult, CallID: "c2"}, `result for call "c2", which belongs to op "other"`},
		{Effect{Kind: KindResult, CallID: "c9"}, `result for call "c9", which is not pending`},
		{Effect{Kind: KindDecision, CallID: "c2", Allow: true}, ""},
		{Effect{Kind: KindDecision, CallID: "zz"}, "decision for call \"zz\", which is not pending"},
		{Effect{Kind: KindApprovalRequest, CallIDs: []string{"c1", "zz"}}, "approval_request for call \"zz\""},
		{Effect{Kind: KindSteer, Text: "x"}, `kind "steer" is not allowed at hook "tool"`},
	} {
		err := tc.e.CheckFor(m, v)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckFor(%+v) = %v, want %q", tc.e, err, tc.want)
		}
	}
	cv := &View{Hook: HookContribute, Op: "me"}
	if err := (&Effect{Kind: KindTool, Tool: &ToolSpec{Name: "rm"}}).CheckFor(m, cv); err == nil || !strings.Contains(err.Error(), `tool "rm" is not declared in the manifest of me`) {
		t.Errorf("contributing an undeclared tool: %v", err)
	}
}

// FuzzDecodeManifest: a manifest section never panics the host; what it
// accepts is valid and survives a write and a read.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"name":"policy","abi":"1.0","hooks":["tool"],"tools":["calc"],"idempotent":["calc"],"capabilities":{"mounts":["/skills"]},"config_schema":{"type":"object"}}`))
	f.Add([]byte(`{"name":"x","abi":"1.0","hooks":["command"],"commands":["ping"],"guard":true}`))
	f.Add([]byte(`{"abi":"1.0"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			if !errors.Is(err, ErrManifest) {
				t.Fatalf("error does not wrap ErrManifest: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted an invalid manifest: %v", err)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeManifest(again)
		if err != nil {
			t.Fatalf("cannot read back %s: %v", again, err)
		}
		if again2, _ := json.Marshal(m2); string(again2) != string(again) {
			t.Fatalf("write/read changed %q:\n%s\n%s", b, again, again2)
		}
	})
}

func TestDecodeManifests(t *testing.T) {
	one, err := DecodeManifests([]byte(`{"name":"x","abi":"1.0","hooks":["tool"]}`))
	if err != nil || len(one) != 1 || one[0].Name != "x" {
		t.Fatalf("single: %v %v", one, err)
	}
	two, err := DecodeManifests([]byte(`{"abi":"1.1","bundle":[{"name":"a","abi":"1.1","hooks":["tool"]},{"name":"b","abi":"1.1","hooks":["contribute"]}]}`))
	if err != nil || len(two) != 2 || two[1].Name != "b" {
		t.Fatalf("bundle: %v %v", two, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"abi":"1.0","bundle":[{"name":"a","abi":"1.0","hooks":["tool"]}]}`, "bundles need abi 1.1"},
		{`{"abi":"1.1","bundle":[]}`, "the bundle lists no ops"},
		{`{"abi":"1.1","bundle":[{"name":"a","abi":"1.1","hooks":["tool"]},{"name":"a","abi":"1.1","hooks":["tool"]}]}`, `two ops named "a"`},
		{`{"abi":"1.1","bundle":[{"name":"a","abi":"1.1","hooks":[]}]}`, "bundle op 1"},
		{`{"abi":"1.1","bundle":[],"extra":1}`, `unknown field "extra"`},
	} {
		_, err := DecodeManifests([]byte(tc.in))
		if err == nil || !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeManifests(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestToolNamespaces defends the namespace promise (ABI 1.2): a manifest
// entry ending in * owns every tool under it and nothing else, and two
// entries overlap exactly when some tool name matches both.
func TestToolNamespaces(t *testing.T) {
	m := &Manifest{Name: "files", ABI: "1.2", Hooks: []Hook{HookTool}, Tools: []string{"files__*", "ping"}, Idempotent: []string{"files__*"}}
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for name, want := range map[string]bool{"files__read": true, "files__": false, "files_read": false, "ping": true, "pong": false, "xfiles__read": false} {
		if got := m.OwnsTool(name); got != want {
			t.Errorf("OwnsTool(%q) = %v, want %v", name, got, want)
		}
		if got := m.IsIdempotent(name); got != (want && name != "ping") {
			t.Errorf("IsIdempotent(%q) = %v", name, got)
		}
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"a__*", "a__*", true}, {"a__*", "a__b__*", true}, {"a__b__*", "a__*", true}, {"a__*", "b__*", false},
		{"a__*", "a__x", true}, {"a__x", "a__*", true}, {"a__x", "a__y", false}, {"a__x", "a__x", true}, {"a_*", "a__*", true},
	} {
		if got := ToolsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("ToolsOverlap(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	bad := &Manifest{Name: "x", ABI: "1.2", Hooks: []Hook{HookTool}, Tools: []string{"a*b"}}
	if err := bad.Validate(); err == nil {
		t.Errorf("Validate accepted a star inside a tool name")
	}
}

// TestAnnotationsRoundTrip: the 1.2 view and effect fields survive the
// reference codec, an effect refuses an unknown annotation key, and a
// view skips one (a later minor may add hints).
func TestAnnotationsRoundTrip(t *testing.T) {
	v := &View{Hook: HookTool, Tool: &ToolView{Calls: []PendingCall{{ID: "c1", Name: "fs__rm", Arguments: []byte(`{}`), Owner: "mcp.fs", Server: "fs",
		Annotations: &ToolAnnotations{Destructive: true, OpenWorld: true}}}}}
	var got View
	if err := ParseView(AppendView(nil, v), &got); err != nil {
		t.Fatal(err)
	}
	if c := got.Tool.Calls[0]; c.Server != "fs" || c.Annotations == nil || *c.Annotations != (ToolAnnotations{Destructive: true, OpenWorld: true}) {
		t.Errorf("view round trip: %+v", c)
	}
	var skip View
	if err := ParseView([]byte(`{"hook":"tool","tool":{"calls":[{"id":"c","name":"n","arguments":{},"annotations":{"future":1,"read_only":true}}]}}`), &skip); err != nil || !skip.Tool.Calls[0].Annotations.ReadOnly {
		t.Errorf("view with an unknown annotation: %v %+v", err, skip.Tool)
	}
	e := []Effect{{Kind: KindTool, Tool: &ToolSpec{Name: "fs__ls", Server: "fs", Annotations: &ToolAnnotations{ReadOnly: true}}}}
	back, err := ParseEffects(nil, AppendEffects(nil, e))
	if err != nil || back[0].Tool.Server != "fs" || !back[0].Tool.Annotations.ReadOnly {
		t.Errorf("effect round trip: %v %+v", err, back)
	}
	if _, err := ParseEffects(nil, []byte(`[{"kind":"tool","tool":{"name":"x","annotations":{"surprise":true}}}]`)); err == nil {
		t.Errorf("an effect with an unknown annotation key was accepted")
	}
	if !(*ToolAnnotations)(nil).Hints().Destructive || (*ToolAnnotations)(nil).Rerunnable() {
		t.Errorf("nil annotations must read as the defaults: destructive, not rerunnable")
	}
}

func TestManifestBounds(t *testing.T) {
	deep := `{"name":"x","abi":"1.0","hooks":["tool"],"config_schema":` + strings.Repeat(`{"items":`, 70) + `{}` + strings.Repeat("}", 70) + `}`
	if _, err := DecodeManifests([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Errorf("deep manifest: %v", err)
	}
	big := `{"name":"x","abi":"1.0","hooks":["tool"],"version":"` + strings.Repeat("v", 70<<10) + `"}`
	if _, err := DecodeManifests([]byte(big)); err == nil || !strings.Contains(err.Error(), "over the limit of 64 KiB") {
		t.Errorf("big manifest: %v", err)
	}
}

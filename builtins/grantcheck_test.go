package builtins_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/wasmhost"
)

// capsSpec is shell and fetch with grants the tables below probe.
func capsSpec(t *testing.T, approval ...pipeline.OpSpec) *pipeline.Spec {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "src"), 0o755)
	return spec(t, append(approval,
		pipeline.OpSpec{Use: "builtin:shell", Mounts: []string{dir + ":/work:rw"}, Exec: []wasmhost.ExecGrant{
			{Cmd: "echo **", Unconfined: true}, {Cmd: "ls *", Unconfined: true}, {Cmd: "echo start && echo *", Shell: true, Unconfined: true}}},
		pipeline.OpSpec{Use: "builtin:fetch", HTTP: []string{"127.0.0.1:1"}})...)
}

// The host's check of a call against its owner's grants, made before
// anyone is asked about it, says what running the call would: for shell
// and fetch, the check refuses a call exactly when the op, asked to run
// it, gets no command run and no connection made. The table of the
// built-ins' checks (builtins.go) is held to the guest code here.
func TestGrantChecksAgreeWithTheOps(t *testing.T) {
	l, err := capsSpec(t).Build(context.Background(), pipeline.Options{Runtime: pooled, Builtins: builtins.Bundle()})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]*wasmhost.Op{}
	for _, o := range l.Ops {
		ops[o.Manifest().Name] = o
	}
	for _, c := range []struct {
		op, arg, value string
		refused        bool
	}{
		{"shell", "command", "echo hello world", false},
		{"shell", "command", "ls src", false},
		{"shell", "command", `"ls" 'src'`, false},
		{"shell", "command", "echo start && echo done", false}, // the shell grant
		{"shell", "command", "echo start; rm -rf /", false},    // echo's arguments
		{"shell", "command", "ls src; rm -rf /", true},
		{"shell", "command", "ls", true},
		{"shell", "command", "ls a b", true},
		{"shell", "command", "rm -rf /", true},
		{"shell", "command", "sh -c 'echo hi'", true},
		{"shell", "command", "echo begin && rm -rf /", false}, // echo's arguments too
		{"shell", "command", "ls start && echo done", true},
		{"shell", "command", "ls 'src", true},
		{"shell", "command", "", true},
		{"shell", "command", "  ", true},
		{"fetch", "url", "http://127.0.0.1:1/x", false},
		{"fetch", "url", "https://127.0.0.1:1/", false},
		{"fetch", "url", "http://127.0.0.1/", true},
		{"fetch", "url", "http://example.com:1/", true},
		{"fetch", "url", "http://localhost:1/", true},
		{"fetch", "url", "ftp://127.0.0.1:1/", true},
		{"fetch", "url", "127.0.0.1:1/x", true},
		{"fetch", "url", "http://127.0.0.1:1/%zz", true},
	} {
		t.Run(c.op+" "+c.value, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{c.arg: c.value})
			op := ops[c.op]
			checkErr := op.CheckGrants(c.op, args)
			if refused := checkErr != nil; refused != c.refused {
				t.Fatalf("CheckGrants: %v; want refused %v", checkErr, c.refused)
			}
			v := &hostabi.View{Hook: hostabi.HookTool, Session: "g", Op: c.op, Turn: 1, Step: 1, Tool: &hostabi.ToolView{Run: "c1",
				Calls: []hostabi.PendingCall{{ID: "c1", Name: c.op, Arguments: args, Owner: c.op, Decision: "allow", Started: true}}}}
			eff, err := op.Handle(context.Background(), v, nil)
			if err != nil {
				t.Fatal(err)
			}
			var result *hostabi.Effect
			reached := false
			for i, e := range eff {
				switch e.Kind {
				case hostabi.KindResult:
					result = &eff[i]
				case hostabi.KindLog:
					reached = reached || !strings.Contains(e.Text, " refused: ")
				}
			}
			if result == nil {
				t.Fatalf("no result: %+v", eff)
			}
			if ranNothing := result.IsError && !reached; ranNothing != c.refused {
				t.Errorf("the host's check says refused=%v (%v), the op's run %+v", c.refused, checkErr, eff)
			}
		})
	}
	// Nothing else is checked: other tools, other arguments, other types.
	for _, c := range []struct{ op, tool, args string }{
		{"shell", "other", `{"command":"rm -rf /"}`},
		{"shell", "shell", `{"cmd":"rm -rf /"}`},
		{"shell", "shell", `{"command":["rm"]}`},
		{"shell", "shell", `not json`},
		{"fetch", "fetch", `{"url":null}`},
	} {
		if err := ops[c.op].CheckGrants(c.tool, json.RawMessage(c.args)); err != nil {
			t.Errorf("%s %s: %v; want no opinion", c.tool, c.args, err)
		}
	}
	// The key given twice: the guest decodes the last, and so does the check.
	if err := ops["shell"].CheckGrants("shell", json.RawMessage(`{"command":"echo hi","command":"rm -rf /"}`)); err == nil {
		t.Error("the last of two commands, not granted, passed")
	}
	if err := ops["shell"].CheckGrants("shell", json.RawMessage(`{"command":"rm -rf /","command":"echo hi"}`)); err != nil {
		t.Errorf("the last of two commands is granted: %v", err)
	}
}

// Issue 28, item 5, with the real ops: approval asks a person about every
// call, and shell may run echo. The model's rm is answered by the host at
// once with TOOL_NOT_GRANTED, naming what is granted, and nobody is asked
// about it; its fetch of a host not granted likewise; its echo is put to
// the person, and runs once allowed.
func TestApprovalIsNotAskedAboutCallsTheGrantsRefuse(t *testing.T) {
	s := capsSpec(t, builtin("approval", `{"mode":"ask"}`))
	for _, rebuild := range []bool{false, true} {
		t.Run(fmt.Sprintf("rebuild=%v", rebuild), func(t *testing.T) {
			r := start(t, s, []et.Reply{
				{Calls: []hostabi.ToolCall{
					et.Call("rm", "shell", `{"command":"rm -rf /"}`),
					et.Call("get", "fetch", `{"url":"https://example.com/"}`),
					et.Call("echo", "shell", `{"command":"echo hi"}`),
				}},
				{Text: "done"},
			}, rebuild)
			r.env.Send(t, "clean up")
			if o := r.go_(t, rebuild); o != engine.Waiting {
				t.Fatalf("outcome %v, want waiting for echo", o)
			}
			evs := r.env.Events(t)
			for _, a := range data[event.ApprovalRequest](t, evs, event.EvApprovalRequest) {
				if len(a.CallIDs) != 1 || a.CallIDs[0] != "1.1.3" {
					t.Errorf("a person was asked about %v; want only echo", a.CallIDs)
				}
			}
			res := map[string]event.ToolResult{}
			for _, x := range data[event.ToolResult](t, evs, event.EvToolResult) {
				res[x.CallID] = x
			}
			for id, want := range map[string]string{
				"1.1.1": "rm -rf / matches no exec grant of op shell (granted: echo **; ls *; sh -c 'echo start && echo *')",
				"1.1.2": "example.com:443 is not granted (granted: 127.0.0.1:1)",
			} {
				if x := res[id]; !x.IsError || x.Code != hostabi.CodeNotGranted || x.Op != event.HostOp || !strings.Contains(x.Content, want) {
					t.Errorf("%s answered %+v; want the host's TOOL_NOT_GRANTED saying %q", id, x, want)
				}
			}
			if err := r.env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.3", Allow: true, Who: "alice"}); err != nil {
				t.Fatal(err)
			}
			if o := r.go_(t, rebuild); o != engine.Idle {
				t.Fatalf("outcome %v after the decision", o)
			}
			evs = r.env.Events(t)
			var ran []string
			for _, c := range data[event.ToolCallEvent](t, evs, event.EvToolCall) {
				ran = append(ran, c.CallID)
			}
			if len(ran) != 1 || ran[0] != "1.1.3" {
				t.Errorf("calls run %v; want only echo", ran)
			}
			for _, x := range data[event.ToolResult](t, evs, event.EvToolResult) {
				if x.CallID == "1.1.3" && (x.IsError || !strings.Contains(x.Content, "--- stdout ---\nhi\n")) {
					t.Errorf("echo answered %+v", x)
				}
			}
			if _, err := event.Fold("b", evs); err != nil {
				t.Fatalf("fold refuses the log: %v", err)
			}
		})
	}
}

package wasmhost

import (
	"encoding/json"
	"strings"
	"testing"
)

// The grant checks a pipeline gives an op are checked when the op is
// made, each refused with one line; an op given none (a module the host
// knows nothing about) has no opinion on any call, whatever it requests;
// and a refusal quotes what the model sent only in part.
func TestGrantCheckConfig(t *testing.T) {
	m := load(t, "builtins/builtins.wasm")
	grants := Grants{HTTP: []string{"127.0.0.1:1"}}
	for _, c := range []struct {
		name   string
		checks []ArgCheck
		want   string
	}{
		{"a tool the op does not own", []ArgCheck{{Tool: "shell", Arg: "command", As: CommandLine}}, `op fetch: a grant check names tool "shell", which the op does not own`},
		{"no argument", []ArgCheck{{Tool: "fetch", As: URL}}, "op fetch: the grant check of tool fetch names no argument"},
		{"an unknown kind", []ArgCheck{{Tool: "fetch", Arg: "url", As: 9}}, "op fetch: the grant check of fetch.url has an unknown kind ArgKind(9)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rt(t).NewOp(m, Config{Op: "fetch", Grants: grants, Checks: c.checks})
			if err == nil || err.Error() != c.want || strings.Contains(err.Error(), "\n") {
				t.Errorf("NewOp: %v\nwant %s", err, c.want)
			}
		})
	}

	unchecked := newOp(t, m, Config{Op: "fetch", Grants: grants})
	if err := unchecked.CheckGrants("fetch", json.RawMessage(`{"url":"http://example.com/"}`)); err != nil {
		t.Errorf("an op given no checks refused a call: %v", err)
	}

	long := strings.Repeat("a", 2<<20)
	fetch := newOp(t, m, Config{Op: "fetch", Grants: grants, Checks: []ArgCheck{{Tool: "fetch", Arg: "url", As: URL}}})
	shell := builtin(t, "shell", Config{Grants: Grants{Mounts: []Mount{{HostDir: t.TempDir(), GuestPath: "/work", Write: true}}, Exec: []ExecGrant{{Cmd: "echo **", Unconfined: true}}},
		Checks: []ArgCheck{{Tool: "shell", Arg: "command", As: CommandLine}}})
	for _, c := range []struct {
		op         *Op
		tool, args string
		want       string
	}{
		{fetch, "fetch", `{"url":"http://127.0.0.1:1/%zz` + long + `"}`, "is not an absolute URL"},
		{fetch, "fetch", `{"url":"http://` + long + `.example/"}`, "is not granted (granted: 127.0.0.1:1)"},
		{shell, "shell", `{"command":"ls ` + long + `"}`, "matches no exec grant of op shell (granted: echo **)"},
		{shell, "shell", `{"command":"ls '` + long + `"}`, "has an unclosed ', and no exec grant of op shell allows it"},
	} {
		err := c.op.CheckGrants(c.tool, json.RawMessage(c.args))
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 1<<10 {
			msg := "<nil>"
			if err != nil {
				msg = err.Error()
			}
			t.Errorf("%s: %d bytes: %.300s; want under 1 KiB with %q", c.tool, len(msg), msg, c.want)
		}
	}
}

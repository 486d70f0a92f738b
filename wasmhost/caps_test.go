package wasmhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/confine"
)

// Capabilities (ABI 1.2): what an op requests and is not granted is
// refused at load, in one line; what it is granted works; what it tries
// beyond the grant at call time is an error it reports, never silent.
// The hostile matrix is in hostile_caps_test.go.

// builtin returns an op of the built-in bundle.
func builtin(t testing.TB, op string, cfg Config) *Op {
	t.Helper()
	cfg.Op = op
	return newOp(t, load(t, "builtins/builtins.wasm"), cfg)
}

// runCall runs a started call of an op's tool and returns its result and
// the host's lines for watchers, less the one-time notice of a grant that
// is not fully enforced (which, run as root, every unconfined grant gets;
// runCallAll keeps it).
func runCall(t testing.TB, o *Op, tool, args string) (hostabi.Effect, []string) {
	t.Helper()
	r, all := runCallAll(t, o, tool, args)
	var logs []string
	for _, l := range all {
		if !strings.Contains(l, " is not fully enforced on this system: ") {
			logs = append(logs, l)
		}
	}
	return r, logs
}

// runCallAll is runCall with every line the host told watchers.
func runCallAll(t testing.TB, o *Op, tool, args string) (hostabi.Effect, []string) {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookTool, Session: "s1", Op: o.Manifest().Name, Turn: 1, Step: 1, Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: o.Manifest().Name, Decision: "allow", Started: true}},
	}}
	eff, err := o.Handle(context.Background(), v, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	var res []hostabi.Effect
	var logs []string
	for _, e := range eff {
		switch e.Kind {
		case hostabi.KindResult:
			res = append(res, e)
		case hostabi.KindLog:
			logs = append(logs, e.Text)
		case hostabi.KindNote:
			// files records the change a write made, for /undo.
		default:
			t.Fatalf("unexpected effect %+v", e)
		}
	}
	if len(res) != 1 {
		t.Fatalf("%s %s: %d results (%+v)", tool, args, len(res), eff)
	}
	return res[0], logs
}

// command runs a command of the caps guest and returns its reply.
func command(t *testing.T, o *Op, name, args string) string {
	t.Helper()
	v := commandView(name)
	v.Op = o.Manifest().Name
	v.Command.Args = args
	eff, err := o.Handle(context.Background(), v, nil)
	if err != nil {
		t.Fatalf("/%s %s: %v", name, args, err)
	}
	for _, e := range eff {
		if e.Kind == hostabi.KindReply {
			return e.Text
		}
	}
	t.Fatalf("/%s %s: no reply in %+v", name, args, eff)
	return ""
}

func capsModule(t *testing.T) *Module { return load(t, "testdata/hostile/go_caps.wasm") }

func needLandlock(t *testing.T) {
	t.Helper()
	if confine.Level() < confine.MinLevel {
		t.Skipf("this kernel cannot confine commands (Landlock ABI %d); the refusal is tested by TestGrantsAtLoad", confine.Level())
	}
}

// A capability the manifest requests and the pipeline does not grant is
// refused when the op is made, in one line that says how to grant it;
// one granted and not requested is not given.
func TestGrantsAtLoad(t *testing.T) {
	dir := t.TempDir()
	rw := []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}
	for _, tc := range []struct {
		name, op string
		g        Grants
		want     string
	}{
		{"files without its mount", "files", Grants{},
			`op files requests the read-write mount /work, which is not granted: grant it (grants: {mounts: ["DIR:/work:rw"]}) or leave the op out`},
		{"files on a read-only mount", "files", Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work"}}},
			fmt.Sprintf(`op files requests /work read-write, but the pipeline grants it read-only: end the mount with :rw (grants: {mounts: ["%s:/work:rw"]}) or leave the op out`, dir)},
		{"a mount that is no directory", "files", Grants{Mounts: []Mount{{HostDir: filepath.Join(dir, "nope"), GuestPath: "/work", Write: true}}},
			"op files: mount /work: " + filepath.Join(dir, "nope") + " is not a directory"},
		{"fetch without a host", "fetch", Grants{},
			`op fetch makes HTTP requests, but the pipeline grants it no host: grant the hosts it may reach (grants: {http: ["api.example.com"]}) or leave the op out`},
		{"an http grant that is a URL", "fetch", Grants{HTTP: []string{"https://api.github.com/"}},
			`grants: http host "https://api.github.com/" must be a host name, not a URL (write api.github.com, not https://api.github.com/)`},
		{"shell without commands", "shell", Grants{Mounts: rw},
			`op shell runs commands, but the pipeline grants it none: grant the commands it may run (grants: {exec: ["go test ./..."]}) or leave the op out`},
		{"a grant of any program", "shell", Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "* **"}}},
			`exec grant "* **": the first word must name the command (a grant of * or ** would allow any program)`},
		{"a grant that is no pattern", "shell", Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "go ** x"}}},
			`grants: exec "go ** x": ** must be the last word`},
		{"a read path that does not exist", "shell", Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "go vet", Read: []string{"/no/such/dir"}, Unconfined: true}}},
			`exec grant "go vet": read path /no/such/dir does not exist: create it, or drop it from the grant`},
		{"a relative write path", "shell", Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "go vet", Write: []string{"cache"}, Unconfined: true}}},
			`exec grant "go vet": write path cache must be absolute (or start with ~/)`},
		{"a bad env entry", "shell", Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "go vet", Env: []string{"A B=1"}, Unconfined: true}}},
			`exec grant "go vet": env "A B=1" is not NAME or NAME=VALUE`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt(t).NewOp(load(t, "builtins/builtins.wasm"), Config{Op: tc.op, Grants: tc.g})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("NewOp error:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
	// The caps guest asks for any command: a command its grants do not
	// cover would be refused, a specific request too.
	if _, err := rt(t).NewOp(capsModule(t), Config{Op: "caps-exec", Grants: Grants{Mounts: rw}}); err == nil || !strings.Contains(err.Error(), "op caps-exec runs commands, but the pipeline grants it none") {
		t.Errorf("caps-exec without commands: %v", err)
	}

	// Granted but not requested: not given. Requested read-only, granted
	// read-write: read-only.
	skills := builtin(t, "skills", Config{Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/skills", Write: true}}, HTTP: []string{"example.com"}, Exec: []ExecGrant{{Cmd: "true", Unconfined: true}}}})
	if m := skills.Mounts(); len(m) != 1 || m[0].Write || len(skills.HTTP()) != 0 || len(skills.Exec()) != 0 {
		t.Errorf("skills got mounts %+v, http %v, exec %+v; want /skills read-only and nothing else", m, skills.HTTP(), skills.Exec())
	}
	// An optional mount (the skills op's) may be left out: the op loads,
	// gets no mount, and finds nothing at the path.
	bare := builtin(t, "skills", Config{Config: []byte(`{"host_dir":"/srv/skills"}`)})
	if m := bare.Mounts(); len(m) != 0 {
		t.Errorf("skills without a grant got mounts %+v", m)
	}
	if got := command(t, bare, "skills", ""); !strings.HasPrefix(got, "No skills: there is no skills folder. Create /srv/skills") {
		t.Errorf("/skills without its mount: %q", got)
	}
	// Defaults: a command's timeout and output, the op's deadline.
	sh := builtin(t, "shell", Config{Grants: Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "go test **", Env: []string{"HOME", "GOFLAGS=-mod=mod"}, Unconfined: true}}}})
	x := sh.Exec()
	if len(x) != 1 || x[0].Timeout != DefaultExecTimeout || x[0].OutputBytes != DefaultExecOutputBytes || x[0].Confinement != "none" || sh.Limits().Timeout != DefaultExecTimeout+2*time.Second {
		t.Errorf("shell grants %+v, timeout %v", x, sh.Limits().Timeout)
	}
	if home, ok := os.LookupEnv("HOME"); ok && (len(x[0].Env) != 2 || x[0].Env[0] != "HOME="+home) {
		t.Errorf("env %q: HOME is resolved when the op is made", x[0].Env)
	}
	if f := builtin(t, "fetch", Config{Grants: Grants{HTTP: []string{"127.0.0.1:1"}}}); f.Limits().Timeout != 30*time.Second || f.Limits().HTTPBytes != 2<<20 {
		t.Errorf("fetch limits %+v", f.Limits())
	}
}

// Without Landlock, a command that would be confined is refused at load;
// unconfined: true runs it with the user's rights, and says so.
func TestConfinementUnavailable(t *testing.T) {
	dir := t.TempDir()
	rw := []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}
	for _, tc := range []struct {
		level int
		want  string
	}{
		{0, `exec grant "echo **": commands run confined with Landlock, and this system has no Landlock: add unconfined: true to the grant to run it with your own rights, or leave it out`},
		{2, `exec grant "echo **": commands run confined with Landlock, and this kernel's Landlock is ABI v2 and confinement needs v3 (Linux 6.2 or later): add unconfined: true to the grant to run it with your own rights, or leave it out`},
	} {
		restore := confine.Pretend(tc.level)
		_, err := rt(t).NewOp(load(t, "builtins/builtins.wasm"), Config{Op: "shell", Grants: Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "echo **"}}}})
		op, err2 := rt(t).NewOp(load(t, "builtins/builtins.wasm"), Config{Op: "shell", Grants: Grants{Mounts: rw, Exec: []ExecGrant{{Cmd: "echo **", Unconfined: true}}}})
		restore()
		if err == nil || err.Error() != tc.want {
			t.Errorf("Landlock v%d:\n got %v\nwant %s", tc.level, err, tc.want)
		}
		if err2 != nil {
			t.Fatalf("unconfined: %v", err2)
		}
		r, logs := runCall(t, op, "shell", `{"command":"echo unconfined"}`)
		if r.IsError || !strings.Contains(r.Content, "unconfined") || len(logs) != 1 || !strings.Contains(logs[0], "confinement: none") {
			t.Errorf("unconfined run: %+v %q", r, logs)
		}
	}
}

// The files built-in, as wasm through the host: every tool works on a
// read-write mount, and a path outside the project is an error result.
func TestFilesThroughTheHost(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "a.go"), []byte("package src\n\nfunc A() int { return 1 }\n"), 0o644)
	op := builtin(t, "files", Config{Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}}})
	for _, tc := range []struct{ tool, args, want string }{
		{"read_file", `{"path":"src/a.go"}`, "     1\tpackage src\n     2\t\n     3\tfunc A() int { return 1 }\n"},
		{"write_file", `{"path":"docs/new.md","content":"# New\n"}`, "wrote 6 bytes to docs/new.md (a new file)"},
		{"edit_file", `{"path":"src/a.go","old_string":"return 1","new_string":"return 2"}`, "edited src/a.go: replaced 1 occurrence (the first at line 3)"},
		{"list_dir", `{}`, "docs/\nsrc/\n"},
		{"glob", `{"pattern":"**/*.md"}`, "docs/new.md\n"},
		{"grep", `{"pattern":"return \\d"}`, "src/a.go:3: func A() int { return 2 }\n"},
	} {
		r, _ := runCall(t, op, tc.tool, tc.args)
		if r.IsError || !strings.HasPrefix(r.Content, tc.want) {
			t.Errorf("%s %s = %q, want %q", tc.tool, tc.args, r.Content, tc.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "docs", "new.md")); string(b) != "# New\n" {
		t.Errorf("docs/new.md holds %q", b)
	}
	for _, args := range []string{`{"path":"../outside.txt","content":"x"}`, `{"path":"/etc/x","content":"x"}`} {
		if r, _ := runCall(t, op, "write_file", args); !r.IsError || !strings.Contains(r.Content, "is outside the project") {
			t.Errorf("write_file %s = %+v", args, r)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "outside.txt")); err == nil {
		t.Errorf("a file was written outside the mount")
	}
}

// The capability built-ins declare which tools may run again after a
// crash: the reads (and fetch's GET) are idempotent; write_file, edit_file
// and shell are not, so a call interrupted mid-way is answered
// TOOL_OUTCOME_UNKNOWN instead of repeated (the engine's rule, tested in
// engine/exactlyonce_test.go).
func TestCapabilityToolsIdempotent(t *testing.T) {
	m := load(t, "builtins/builtins.wasm")
	want := map[string]struct{ tools, idempotent string }{
		"files": {"read_file write_file edit_file list_dir glob grep", "read_file list_dir glob grep"},
		"fetch": {"fetch", "fetch"},
		"shell": {"shell", ""},
	}
	seen := 0
	for _, man := range m.Manifests() {
		w, ok := want[man.Name]
		if !ok {
			continue
		}
		seen++
		if got := strings.Join(man.Tools, " "); got != w.tools {
			t.Errorf("%s tools %q, want %q", man.Name, got, w.tools)
		}
		if got := strings.Join(man.Idempotent, " "); got != w.idempotent {
			t.Errorf("%s idempotent %q, want %q", man.Name, got, w.idempotent)
		}
	}
	if seen != len(want) {
		t.Errorf("the bundle has %d of the %d capability ops", seen, len(want))
	}
}

// A request the op may not make gets an error it can hand on as a result,
// however long what it sent: a URL or a command line of megabytes is
// quoted in the error (and the line for watchers) only in part, so the
// result stays under the effect size limit instead of faulting the op.
func TestLongRequestsGetShortErrors(t *testing.T) {
	long := strings.Repeat("a", 2<<20)
	fetch := builtin(t, "fetch", Config{Grants: Grants{HTTP: []string{"127.0.0.1:1"}}})
	shell := builtin(t, "shell", Config{Grants: Grants{Mounts: []Mount{{HostDir: t.TempDir(), GuestPath: "/work", Write: true}}, Exec: []ExecGrant{{Cmd: "echo **", Unconfined: true}}}})
	for _, c := range []struct {
		op         *Op
		tool, args string
		want       string
	}{
		{fetch, "fetch", `{"url":"http://127.0.0.1:1/%zz` + long + `"}`, "is not an absolute URL"},
		{fetch, "fetch", `{"url":"http://` + long + `.example/"}`, "not granted"},
		{shell, "shell", `{"command":"ls ` + long + `"}`, "matches no exec grant"},
	} {
		r, logs := runCall(t, c.op, c.tool, c.args)
		if !r.IsError || !strings.Contains(r.Content, c.want) || len(r.Content) > 4<<10 {
			t.Errorf("%s: result is_error=%v, %d bytes: %.200s", c.tool, r.IsError, len(r.Content), r.Content)
		}
		for _, l := range logs {
			if len(l) > 4<<10 {
				t.Errorf("%s: a line for watchers of %d bytes", c.tool, len(l))
			}
		}
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/render"
)

func TestSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, é and 漢字\n\tindented", "plain text, é and 漢字\n\tindented"},
		{"\x1b[2J\x1b]0;title\a", `\x1b[2J\x1b]0;title\a`},
		{"over\rwrite", `over\rwrite`},
		{"nul\x00 del\x7f", `nul\x00 del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bidi \u202eevil\u202c", `bidi \u202eevil\u202c`},
		{"bad \xff utf-8", `bad \xff utf-8`},
	} {
		if got := render.Safe(tc.in); got != tc.want {
			t.Errorf("render.Safe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var b strings.Builder
	render.Fprintf(&b, "%s[%s] %-6s|%q%s\n", render.ANSI("\x1b[2m"), "op\x1b", "a\ab", "q\x1b", render.ANSI("\x1b[0m"))
	if want := "\x1b[2m[op\\x1b] a\\ab  |\"q\\x1b\"\x1b[0m\n"; b.String() != want {
		t.Errorf("tprintf wrote %q, want %q", b.String(), want)
	}
}

// Terminal escapes from an op's log line, an op's fault message and the
// model's answer never reach the terminal raw: wagent run and wagent log
// show them escaped, --json keeps them exact (encoded by encoding/json),
// and so do errors and ops inspect.
func TestTerminalInjection(t *testing.T) {
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "esc", "--script", testdata("ansi-replies.yaml"), "--pipeline", testdata("ansi.yaml"), "hi")
	if r.code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	raw := func(what, s string) {
		t.Helper()
		if strings.ContainsAny(s, "\x1b\a\r") {
			t.Errorf("%s wrote a raw escape, bell or carriage return:\n%q", what, s)
		}
	}
	raw("run", r.stdout+r.stderr)
	if want := `[ansi] \x1b[2J\x1b]0;pwned\a\x1b[32m approved`; !strings.Contains(r.stderr, want) {
		t.Errorf("run's notes lack %q:\n%s", want, r.stderr)
	}
	if want := `Done.\x1b]0;pwned\a\x1b[32m all calls approved\r`; !strings.Contains(r.stdout, want) {
		t.Errorf("run's answer lacks %q:\n%s", want, r.stdout)
	}
	l := wag(t, home, "log", "esc")
	raw("log", l.stdout+l.stderr)
	if want := `op ansi faulted at turn-stopping (error): \x1b]0;owned\a\x1b[2Jbroken`; !strings.Contains(l.stdout, want) {
		t.Errorf("log lacks %q:\n%s", want, l.stdout)
	}
	j := wag(t, home, "log", "esc", "--json")
	found := false
	for _, line := range strings.Split(strings.TrimSpace(j.stdout), "\n") {
		var e struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log --json line %q: %v", line, err)
		}
		var d struct{ Message string }
		if e.Type == "op/fault" && json.Unmarshal(e.Data, &d) == nil && d.Message == "\x1b]0;owned\a\x1b[2Jbroken" {
			found = true
		}
	}
	if !found {
		t.Errorf("log --json does not keep the fault message exactly:\n%s", j.stdout)
	}
	// An error naming what a module imports, and ops inspect of a manifest.
	dir := t.TempDir()
	mod, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hostile", "bad_import.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	evil := strings.Replace(string(mod), "abort", "\x1b[2J\a", 1) // same length: the name stays valid
	os.WriteFile(filepath.Join(dir, "evil.wasm"), []byte(evil), 0o644)
	e := wag(t, home, "ops", "inspect", filepath.Join(dir, "evil.wasm"))
	raw("ops inspect error", e.stdout+e.stderr)
	if e.code != exitFailure || !strings.Contains(e.stderr, `module imports env.\x1b[2J\a;`) {
		t.Errorf("ops inspect of a module importing env.ESC: exit %d\n%s", e.code, e.stderr)
	}
}

// wagent ops check starts each op under its limits and calls every hook it
// declares, reporting what a session would record.
func TestOpsCheckCallsHandlers(t *testing.T) {
	hostile := func(f string) string { return filepath.Join("..", "..", "testdata", "hostile", f+".wasm") }
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"a good op", []string{filepath.Join("..", "..", "testdata", "wat", "ping.wasm")}, exitOK,
			[]string{"ok: ping 1.0.0 (abi 1.0, hooks command)", "  command: 1 effect (reply)"}},
		{"a guard", []string{filepath.Join("..", "..", "guests", "examples", "policy", "policy.wasm")}, exitOK,
			[]string{"  tool: 1 effect (approval_request)", "  turn-stopping: skips (no effects)"}},
		{"a loop", []string{hostile("loop"), "--timeout-ms", "100"}, exitFailure,
			[]string{"ok: loop (abi 1.0, hooks tool)", "  tool: fault: timeout: call exceeded its deadline of 100ms"}},
		{"a trap", []string{hostile("trap")}, exitFailure, []string{"  tool: fault: trap: unreachable"}},
		{"an unknown effect", []string{hostile("unknown_kind")}, exitFailure,
			[]string{`  tool: fault: invalid-effect: effect 0 (launch_missiles): invalid effect: unknown kind "launch_missiles"`}},
		{"a loop in _initialize", []string{hostile("init_loop"), "--timeout-ms", "100"}, exitFailure,
			[]string{"fail: init_loop: timeout: starting the module: call exceeded its deadline of 100ms"}},
		{"one op of a bundle, with config", []string{filepath.Join("..", "..", "builtins", "builtins.wasm"), "--op", "max-turns", "--config", `{"max_steps":1}`}, exitOK,
			[]string{"ok: max-turns 1.0.0 (abi " + hostabi.ABIVersion() + ", hooks contribute)", "  contribute: 1 effect (top_of_mind)"}},
		{"a config the schema refuses", []string{filepath.Join("..", "..", "builtins", "builtins.wasm"), "--op", "max-turns", "--config", `{"max_step":1}`}, exitFailure,
			[]string{`fail: max-turns: op max-turns: config: unknown key "max_step" (known keys: max_steps)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wag(t, t.TempDir(), append([]string{"ops", "check"}, tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w+"\n") {
					t.Errorf("output lacks the line %q:\n%s", w, r.stdout)
				}
			}
		})
	}
	// A module the rewriter refuses never starts: one line, at load.
	r := wag(t, t.TempDir(), "ops", "check", hostile("escape_init"))
	if r.code != exitFailure || r.stdout != "" {
		t.Errorf("escape_init: exit %d, stdout %q", r.code, r.stdout)
	}
	mustOneLine(t, r, "not a valid wasm module: function 0 (code byte 5): uses global 0 but the module has 0 globals")
}

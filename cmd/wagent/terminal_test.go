package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		if got := safe(tc.in); got != tc.want {
			t.Errorf("safe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var b strings.Builder
	tprintf(&b, "%s[%s] %-6s|%q%s\n", ansi("\x1b[2m"), "op\x1b", "a\ab", "q\x1b", ansi("\x1b[0m"))
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
	for _, want := range []string{`[ansi] \x1b[2J\x1b]0;pwned\a\x1b[32m approved`, `Done.\x1b]0;pwned\a\x1b[32m all calls approved\r`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run output lacks %q:\n%s", want, r.stdout)
		}
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

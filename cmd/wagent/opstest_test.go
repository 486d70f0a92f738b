package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func repoFile(p string) string { return filepath.Join("..", "..", filepath.FromSlash(p)) }

// wagent ops test passes a module that keeps the ABI (exit 0, a line per
// check), fails one that does not (exit 1, the check and the rule named),
// takes a config per op of a bundle, and prints JSON for programs.
func TestOpsTest(t *testing.T) {
	home := t.TempDir()
	r := wag(t, home, "ops", "test", repoFile("guests/examples/policy/policy.wasm"), "--config", `{"allow":["calc_total"]}`)
	if r.code != exitOK || !strings.Contains(r.stdout, "  ok    tool/guard/unknown-keys") || !strings.Contains(r.stdout, "0 failed") {
		t.Errorf("policy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = wag(t, home, "ops", "test", repoFile("wasmhost/abitest/testdata/eager.wasm"))
	if r.code != exitFailure || !strings.Contains(r.stdout, "FAIL  tool/not-asked/no-messages") ||
		!strings.Contains(r.stdout, "although the host did not ask it to run it") || !strings.Contains(r.stderr, "4 of 19 checks failed") {
		t.Errorf("eager: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = wag(t, home, "ops", "test", repoFile("builtins/builtins.wasm"), "--op", "turn-stopping", "--config", `turn-stopping={"require_phrase":"DONE"}`, "--json")
	if r.code != exitOK {
		t.Fatalf("builtins turn-stopping: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, l := range lines {
		var res struct{ Op, Check, Status string }
		if err := json.Unmarshal([]byte(l), &res); err != nil || res.Op != "turn-stopping" || (res.Status != "ok" && res.Status != "skip") {
			t.Errorf("--json line %q: %+v, %v", l, res, err)
		}
	}
	if len(lines) < 7 {
		t.Errorf("--json printed %d checks:\n%s", len(lines), r.stdout)
	}
	// Without the config its schema requires, the op does not start.
	r = wag(t, home, "ops", "test", repoFile("builtins/builtins.wasm"), "--op", "turn-stopping")
	if r.code != exitFailure || !strings.Contains(r.stdout, "FAIL  start") {
		t.Errorf("turn-stopping without config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, home, "ops", "test", "--help"); r.code != exitOK || !strings.Contains(r.stdout, "Example") {
		t.Errorf("ops test --help: exit %d, no example:\n%s", r.code, r.stdout)
	}
	if r := wag(t, home, "ops", "test", repoFile("builtins/builtins.wasm"), "--config", "{"); r.code != exitUsage {
		t.Errorf("bad --config: exit %d\n%s", r.code, r.stderr)
	}
}

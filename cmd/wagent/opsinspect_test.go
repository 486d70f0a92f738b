package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wagent ops inspect shows a person the toolchain, the manifest, the
// tools with their schemas, what the module requests and the limits it
// would run under: the defaults, or those of each entry of a pipeline that
// runs it (or another build of an op of the same name).
func TestOpsInspect(t *testing.T) {
	home := t.TempDir()
	policyC, _ := filepath.Abs(repoFile("examples/wasm-ops/policy-c/policy.wasm"))
	dir := t.TempDir()
	skills, _ := filepath.Abs(repoFile("testdata/skills"))
	pl := filepath.Join(dir, "pipeline.yaml")
	os.WriteFile(pl, []byte(`ops:
  - use: builtin:approval
    config: {mode: ask, allow: [calc_total]}
  - use: `+policyC+`
    config: {allow: [calc_total]}
    limits: {memory_mb: 16, timeout_ms: 200}
  - use: builtin:skills
    grants: {mounts: ["`+skills+`:/skills:ro"]}
`), 0o644)

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"c toolchain and defaults", []string{repoFile("examples/wasm-ops/policy-c/policy.wasm")}, []string{
			"built with: language C99; processed by Debian clang 14.0.6", "memory:     starts at 2 pages",
			"imports:    wagent: view effects log message note", "abi:        1.0 (this host speaks 1.2)",
			"hooks:      tool (wagent_on_tool), turn-stopping (wagent_on_turn_stopping)", "guard:      yes",
			"requests:   nothing", `"items": {`, "limits:     memory 32 MiB (512 pages), 1s per call (5s to start), 256 effects", "the defaults"}},
		{"tools with schemas", []string{repoFile("examples/wasm-ops/calculator/calculator.wasm")}, []string{
			"built with: language Go go1.", "tools:      calc_add, calc_subtract", "calc_divide: Divide", `"required": [`, "idempotent: calc_total"}},
		{"a pipeline's limits", []string{repoFile("examples/wasm-ops/policy-c/policy.wasm"), "--pipeline", pl}, []string{
			"pipeline.yaml:4 (entry 2, use: " + policyC + ", this module)", "limits:   memory 16 MiB (256 pages), 200ms per call (5s to start)",
			`config:   {"allow":["calc_total"]} (passes the config_schema)`}},
		{"another build of the op", []string{repoFile("examples/wasm-ops/policy-as/policy.wasm"), "--pipeline", pl, "--op", "policy"}, []string{
			"another build of policy; this module would run in its place", "built with: not recorded"}},
		{"a built-in in a pipeline", []string{"builtin:skills", "--pipeline", pl}, []string{
			"op skills", "load_skill: ", "mount:    /skills <- " + skills, "requests:   read-only mount /skills (optional)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wag(t, home, append([]string{"ops", "inspect"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}

	r := wag(t, home, "ops", "inspect", repoFile("examples/wasm-ops/policy-c/policy.wasm"), "--pipeline", pl, "--json")
	var got struct {
		SHA256    string `json:"sha256"`
		Bytes     int    `json:"bytes"`
		Producers []struct {
			Field  string `json:"field"`
			Values []struct{ Name, Version string }
		} `json:"producers"`
		Details map[string]struct {
			Pipeline []struct {
				Line   int `json:"line"`
				Limits struct {
					TimeoutMS   int `json:"timeout_ms"`
					MemoryPages int `json:"memory_pages"`
				} `json:"limits"`
			} `json:"pipeline"`
		} `json:"details"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != exitOK {
		t.Fatalf("--json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	p := got.Details["policy"].Pipeline
	if len(got.SHA256) != 64 || got.Bytes == 0 || len(got.Producers) == 0 || len(p) != 1 || p[0].Line != 4 || p[0].Limits.TimeoutMS != 200 || p[0].Limits.MemoryPages != 256 {
		t.Errorf("--json: %+v", got)
	}

	if r := wag(t, home, "ops", "inspect", repoFile("examples/wasm-ops/deny-word/deny-word.wasm"), "--pipeline", pl); r.code != exitFailure || !strings.Contains(r.stderr, "runs no op named deny-word") {
		t.Errorf("a pipeline without the op: exit %d\n%s", r.code, r.stderr)
	}
	if r := wag(t, home, "ops", "inspect", "builtin:nope"); r.code != exitFailure || !strings.Contains(r.stderr, "no op named nope") {
		t.Errorf("builtin:nope: exit %d\n%s", r.code, r.stderr)
	}
}

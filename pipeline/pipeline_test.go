package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/wasmhost"
)

var calculator = filepath.Join("..", "examples", "wasm-ops", "calculator", "calculator.wasm")

func runtime(t *testing.T) *wasmhost.Runtime {
	t.Helper()
	rt, err := wasmhost.NewRuntime(context.Background(), wasmhost.WithCacheDir(cacheDir(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func cacheDir(t *testing.T) string {
	d := filepath.Join(os.TempDir(), "wagent-pipeline-test-cache")
	os.MkdirAll(d, 0o755)
	return d
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top-level key", "opz: []\n", `p.yaml:1: unknown key "opz"; known keys here: ops`},
		{"unknown op key", "ops:\n  - use: a.wasm\n    confg: {}\n", `p.yaml:3: unknown key "confg"; known keys here: use, op, config, limits, grants, sha256`},
		{"unknown limit", "ops:\n  - use: a.wasm\n    limits: {memory: 3}\n", `p.yaml:3: unknown key "memory"; known keys here: memory_mb`},
		{"no ops", "ops: []\n", "no ops"},
		{"missing use", "ops:\n  - config: {}\n", "p.yaml:2: op 1: missing use:"},
		{"bad pin", "ops:\n  - use: a.wasm\n    sha256: xyz\n", `sha256 "xyz" is not 64 hex digits`},
		{"not yaml", "ops: [\n", "p.yaml"},
		{"wrong type", "ops:\n  - use: a.wasm\n    limits: {memory_mb: lots}\n", "p.yaml:3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.Parse([]byte(tc.yaml), "p.yaml", ".")
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

func TestParseConfigLimitsGrants(t *testing.T) {
	s, err := pipeline.Parse([]byte(`
ops:
  - use: ./ops/calc.wasm
    config: {mode: ask, allow: ["calc_*"], n: 3}
    limits: {memory_mb: 16, timeout_ms: 200, max_effects: 10}
    grants: {mounts: ["./skills:/skills:ro"]}
`), "p.yaml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	op := s.Ops[0]
	if string(op.Config) != `{"allow":["calc_*"],"mode":"ask","n":3}` {
		t.Errorf("config %s", op.Config)
	}
	if op.Limits.MemoryPages != 256 || op.Limits.Timeout.Milliseconds() != 200 || op.Limits.MaxEffects != 10 {
		t.Errorf("limits %+v", op.Limits)
	}
	if len(op.Mounts) != 1 || op.Line != 3 {
		t.Errorf("mounts %v line %d", op.Mounts, op.Line)
	}
}

func TestBuildChecksModules(t *testing.T) {
	rt := runtime(t)
	ctx := context.Background()
	wasm, err := os.ReadFile(calculator)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	dir := filepath.Dir(calculator)
	good := &pipeline.Spec{Path: "p.yaml", Dir: dir, Ops: []pipeline.OpSpec{{Use: "./calculator.wasm", SHA256: hex.EncodeToString(sum[:])}}}
	l, err := good.Build(ctx, pipeline.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if l.Pipeline.Len() != 1 {
		t.Errorf("pipeline has %d ops", l.Pipeline.Len())
	}
	bad := []struct {
		name string
		op   pipeline.OpSpec
		opts pipeline.Options
		want string
	}{
		{"pin mismatch", pipeline.OpSpec{Use: "./calculator.wasm", SHA256: strings.Repeat("0", 64)}, pipeline.Options{Runtime: rt}, "the pipeline pins 0000"},
		{"missing file", pipeline.OpSpec{Use: "./nope.wasm"}, pipeline.Options{Runtime: rt}, "nope.wasm does not exist"},
		{"not wasm", pipeline.OpSpec{Use: "x", Module: []byte("hello")}, pipeline.Options{Runtime: rt}, "not a valid wasm module"},
		{"unknown builtin", pipeline.OpSpec{Use: "builtin:nope"}, pipeline.Options{Runtime: rt, Builtins: pipeline.MapBuiltins{"calc": wasm}}, `unknown built-in "nope"; the built-ins are: calc`},
		{"memory below need", pipeline.OpSpec{Use: "./calculator.wasm", Limits: wasmhost.Limits{MemoryPages: 16}}, pipeline.Options{Runtime: rt}, "raise limits.memory_mb"},
		{"mount not a dir", pipeline.OpSpec{Use: "./calculator.wasm", Mounts: []string{"./nowhere:/skills:rw"}}, pipeline.Options{Runtime: rt}, "read-only"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			s := &pipeline.Spec{Path: "p.yaml", Dir: dir, Ops: []pipeline.OpSpec{tc.op}}
			_, err := s.Build(ctx, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFallbackAdded(t *testing.T) {
	rt := runtime(t)
	wasm, _ := os.ReadFile(calculator)
	s := &pipeline.Spec{Dir: filepath.Dir(calculator), Ops: []pipeline.OpSpec{{Use: "./calculator.wasm"}}}
	// The fallback is the built-in "unknown-tool"; stand the calculator in
	// for it under another name to see it appended.
	_, err := s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: pipeline.MapBuiltins{pipeline.Fallback: wasm}})
	// Two calculators in one pipeline: proof the fallback was appended.
	if err == nil || !strings.Contains(err.Error(), `two ops are named "calculator"`) {
		t.Fatalf("err %v, want the appended fallback to collide", err)
	}
	if _, err := s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: pipeline.MapBuiltins{pipeline.Fallback: wasm}, NoFallback: true}); err != nil {
		t.Fatalf("NoFallback: %v", err)
	}
}

// The attack of issue 11: in a shared cache directory, the cached rewrite
// of a sha256-pinned guard is replaced with another module's. The pin is
// checked against the bytes the pipeline names, and the cache against the
// digest of those bytes, so the guard still loads as the guard.
func TestPinnedGuardSurvivesSwappedCache(t *testing.T) {
	ctx := context.Background()
	cache, key := t.TempDir(), filepath.Join(t.TempDir(), "key")
	policy := filepath.Join("..", "guests", "examples", "policy", "policy.wasm")
	wasm, err := os.ReadFile(policy)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	spec := &pipeline.Spec{Path: "p.yaml", Dir: filepath.Dir(policy), Ops: []pipeline.OpSpec{
		{Use: "./policy.wasm", SHA256: hex.EncodeToString(sum[:])},
		{Use: "../../../examples/wasm-ops/calculator/calculator.wasm"},
	}}
	build := func() *pipeline.Loaded {
		t.Helper()
		rt, err := wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(cache), wasmhost.WithCacheKeyFile(key))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close(ctx) })
		l, err := spec.Build(ctx, pipeline.Options{Runtime: rt, NoFallback: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	build()
	rewrites, _ := filepath.Glob(filepath.Join(cache, "wagent-instrumented", "*.wasm"))
	if len(rewrites) != 2 {
		t.Fatalf("cached rewrites: %v", rewrites)
	}
	// Put the calculator's rewrite under the guard's name, and the other
	// way round.
	a, _ := os.ReadFile(rewrites[0])
	b, _ := os.ReadFile(rewrites[1])
	os.WriteFile(rewrites[0], b, 0o600)
	os.WriteFile(rewrites[1], a, 0o600)
	l := build()
	if man := l.Ops[0].Manifest(); man.Name != "policy" || !man.Guard {
		t.Fatalf("the pinned guard loaded as %s (guard %v)", man.Name, man.Guard)
	}
	if man := l.Ops[1].Manifest(); man.Name != "calculator" {
		t.Fatalf("the calculator loaded as %s", man.Name)
	}
}

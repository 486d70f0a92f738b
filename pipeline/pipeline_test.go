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
		{"mount not a mount", pipeline.OpSpec{Use: "./calculator.wasm", Mounts: []string{"./nowhere:/skills:wr"}}, pipeline.Options{Runtime: rt}, "end it with :ro (read-only, the default) or :rw (read-write)"},
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

// An op's config is checked against its manifest's config_schema when the
// pipeline loads, before any session is touched: a typo is one line naming
// the file, the line, the op and what is wrong. (Before, max-turns with
// {max_step: 3} made the session and faulted at every step, and approval
// with {mode: askk} denied everything at run time.)
func TestConfigCheckedAtLoad(t *testing.T) {
	bundle, err := os.ReadFile(filepath.Join("..", "builtins", "builtins.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	builtins := pipeline.BundleBuiltins{Wasm: bundle, Ops: []string{"approval", "skills", "retry", "turn-stopping", "max-turns", "unknown-tool", "final-output"}}
	rt := runtime(t)
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "ops:\n  - use: builtin:retry\n  - use: builtin:max-turns\n    config: {max_step: 3}\n",
			`pipeline p.yaml:3: op 2 (builtin:max-turns): op max-turns: config: unknown key "max_step" (known keys: max_steps)`},
		{"not a mode", "ops:\n  - use: builtin:approval\n    config: {mode: askk}\n",
			`pipeline p.yaml:2: op 1 (builtin:approval): op approval: config: at /mode: value must be one of 'ask', 'edits', 'plan', 'auto', 'deny'`},
		{"unknown key in a rule", "ops:\n  - use: builtin:approval\n    config: {ask: [{tool: shell, argument: command, match: rm}]}\n",
			`op approval: config: at /ask/0: unknown key "argument" (known keys: arg, destructive, match, open_world, read_only, server, tool)`},
		{"out of range", "ops:\n  - use: builtin:retry\n    config: {attempts: 3, max_ms: 100000000000}\n",
			`op retry: config: at /max_ms: 100000000000 is more than the maximum of 86400000`},
		{"wrong type", "ops:\n  - use: builtin:max-turns\n    config: {max_steps: lots}\n",
			`op max-turns: config: at /max_steps: got string, want integer`},
		{"required", "ops:\n  - use: builtin:turn-stopping\n",
			`op turn-stopping: config: needs "require_phrase" or "require_tool"`},
		{"no config taken", "ops:\n  - use: builtin:unknown-tool\n    config: {verbose: true}\n",
			`op unknown-tool: config: unknown key "verbose"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := pipeline.Parse([]byte(tc.yaml), "p.yaml", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: builtins, NoFallback: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v\nwant one line containing %s", err, tc.want)
			}
		})
	}
	ok := "ops:\n  - use: builtin:approval\n    config: {mode: auto, deny: [shell, {tool: fetch, arg: url, match: internal}]}\n  - use: builtin:max-turns\n    config: {max_steps: 3}\n"
	s, _ := pipeline.Parse([]byte(ok), "p.yaml", t.TempDir())
	if _, err := s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: builtins}); err != nil {
		t.Fatalf("a good config: %v", err)
	}
}

// Options.Loaded answers for the very slice a module was loaded from:
// Build uses that module (here one from another Runtime, which NewOp
// refuses, to show it was used) and loads any other slice itself.
func TestBuildUsesLoadedModules(t *testing.T) {
	rt, other := runtime(t), runtime(t)
	wasm, _ := os.ReadFile(calculator)
	ctx := context.Background()
	mod, err := rt.Load(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	s := &pipeline.Spec{Ops: []pipeline.OpSpec{{Use: "builtin:calc"}}}
	o := pipeline.Options{Runtime: rt, Builtins: pipeline.MapBuiltins{"calc": wasm}, NoFallback: true, Loaded: map[*byte]*wasmhost.Module{&wasm[0]: mod}}
	if _, err := s.Build(ctx, o); err != nil {
		t.Fatalf("with the module loaded: %v", err)
	}
	foreign, err := other.Load(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	o.Loaded = map[*byte]*wasmhost.Module{&wasm[0]: foreign}
	if _, err := s.Build(ctx, o); err == nil || !strings.Contains(err.Error(), "loaded by another runtime") {
		t.Fatalf("err %v, want the given module used (and refused)", err)
	}
	copied := append([]byte(nil), wasm...)
	o.Builtins = pipeline.MapBuiltins{"calc": copied}
	if _, err := s.Build(ctx, o); err != nil {
		t.Fatalf("another slice of the same bytes is loaded, not looked up: %v", err)
	}
}

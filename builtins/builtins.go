// Package builtins embeds wagent's built-in operations (the guest module
// built from ./module) so that the CLI and programs that `go install`
// wagent need nothing else. The host loads them exactly as it loads a
// third-party module: through the ABI, checked, sandboxed and limited.
package builtins

import (
	_ "embed"
	"os"

	"github.com/wagent/wagent/pipeline"
)

//go:embed builtins.wasm
var module []byte

// Module returns the bundle's wasm bytes. Callers must not modify them.
func Module() []byte { return module }

// Names lists the built-in ops, in the order DefaultPipeline uses them
// where it does.
var Names = []string{"approval", "skills", "retry", "turn-stopping", "max-turns", "unknown-tool", "final-output", "compaction", "files", "fetch", "shell"}

// Bundle returns the built-ins for pipeline.Options.Builtins.
func Bundle() pipeline.Builtins {
	return pipeline.BundleBuiltins{Wasm: module, Ops: Names}
}

// DefaultPipeline is the pipeline a session runs with when it names none.
// Its order, and why:
//
//  1. approval {mode: ask, allow: [load_skill]}: first, because at the
//     tool hook the first op that acts wins. A guard must decide every call
//     before any op can run it; it fails closed if it faults. Loading a
//     skill only reads the mounted folder, so it is allowed.
//  2. skills: offers load_skill and a prompt part naming the skills in
//     skillsDir (mounted read-only at /skills), when that folder exists;
//     without it the op is left out (it requests the mount, and an op
//     whose requested mount is not granted does not load).
//  3. max-turns {max_steps: 20}: at the contribute hook every op is asked,
//     so its place there does not matter; it ends a runaway turn before its
//     next model request.
//  4. retry {attempts: 3}: the only op at request-error, so the first to
//     decide a failed request.
//  5. compaction: the only op at compact; it asks for a summary when the
//     last answer's size nears the model's context window (defaults for
//     common models), after a context_length failure and on /compact.
//  6. unknown-tool: last, so every op that owns a tool is asked first; it
//     answers only calls no op owns, telling the model what it can call.
func DefaultPipeline(skillsDir string) *pipeline.Spec {
	ops := []pipeline.OpSpec{{Use: "builtin:approval", Config: []byte(`{"mode":"ask","allow":["load_skill"]}`)}}
	if st, err := os.Stat(skillsDir); skillsDir != "" && err == nil && st.IsDir() {
		ops = append(ops, pipeline.OpSpec{Use: "builtin:skills", Mounts: []string{skillsDir + ":/skills:ro"}})
	}
	ops = append(ops,
		pipeline.OpSpec{Use: "builtin:max-turns", Config: []byte(`{"max_steps":20}`)},
		pipeline.OpSpec{Use: "builtin:retry", Config: []byte(`{"attempts":3}`)},
		pipeline.OpSpec{Use: "builtin:compaction"},
		pipeline.OpSpec{Use: "builtin:unknown-tool"},
	)
	return &pipeline.Spec{Ops: ops}
}

// Package builtins embeds wagent's built-in operations (the guest modules
// built from guests/builtins) so that the CLI and programs that `go
// install` wagent need nothing else. The host loads them exactly as it
// loads a third-party module: through the ABI, checked, sandboxed and
// limited.
package builtins

import (
	_ "embed"
	"encoding/json"
	"os"
	"slices"
	"strings"

	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/wasmhost"
)

// module is every built-in op; core is the same ops but files, fetch and
// shell, built from the same code. A pipeline that names only core ops
// loads core: the Go runtime is the same, but without the HTML parser
// and the file tools there is less code for wazero to check on every
// start (about 0.85x) and an instance starts in about 0.7x the time
// (x/net/html builds its 2,231-entry entity table in every instance).
var (
	//go:embed builtins.wasm
	module []byte
	//go:embed core.wasm
	core []byte
)

// Module returns the bundle of every built-in op. Callers must not modify
// it.
func Module() []byte { return module }

// CoreModule returns the bundle of the CoreNames ops. Callers must not
// modify it.
func CoreModule() []byte { return core }

// Names lists the built-in ops, in the order DefaultPipeline uses them
// where it does.
var Names = []string{"approval", "agents-md", "skills", "retry", "turn-stopping", "max-turns", "unknown-tool", "final-output", "compaction", "files", "fetch", "shell"}

// CoreNames lists the ops CoreModule carries: all but the ones that act
// through capabilities (files, fetch, shell).
var CoreNames = []string{"approval", "agents-md", "skills", "retry", "turn-stopping", "max-turns", "unknown-tool", "final-output", "compaction"}

// checks are the arguments of the capability built-ins' tools that the
// host checks against the op's grants before a call is put to a guard or
// a person (wasmhost.ArgCheck): shell's command line (a command no exec
// grant allows is answered TOOL_NOT_GRANTED at once, not approved and
// then refused) and fetch's URL (a host not granted). They say what the
// guest code does with the argument (guests/builtins/ops: shell.go,
// fetch.go), and TestGrantChecksAgreeWithTheOps holds them to it. files
// has none: where a path leads is known only by opening it (a link inside
// the mount may lead out), and the op refuses a path outside the project
// itself before it reaches the host.
var checks = map[string][]wasmhost.ArgCheck{
	"shell": {{Tool: "shell", Arg: "command", As: wasmhost.CommandLine}},
	"fetch": {{Tool: "fetch", Arg: "url", As: wasmhost.URL}},
}

// Bundle returns the built-ins for pipeline.Options.Builtins: each
// pipeline gets the smaller bundle when all the built-ins it names are in
// it (see ModuleFor).
func Bundle() pipeline.Builtins { return bundles{} }

// ModuleFor returns the bundle a pipeline naming these built-ins loads:
// CoreModule when all of them are core ops, Module otherwise.
func ModuleFor(names []string) []byte {
	for _, n := range names {
		if !slices.Contains(CoreNames, n) {
			return module
		}
	}
	return core
}

// bundles resolves built-ins from the whole bundle, and narrows to the
// core one for a pipeline that needs no more (pipeline.Narrower).
type bundles struct{}

func (bundles) Lookup(name string) ([]byte, string, bool) {
	return pipeline.BundleBuiltins{Wasm: module, Ops: Names}.Lookup(name)
}

func (bundles) Names() []string { return pipeline.BundleBuiltins{Wasm: module, Ops: Names}.Names() }

func (bundles) ArgChecks(op string) []wasmhost.ArgCheck { return checks[op] }

func (bundles) PreviewFor(op string, config json.RawMessage) wasmhost.PreviewFunc {
	return preview(op, config)
}

func (bundles) Narrow(names []string) pipeline.Builtins {
	if w := ModuleFor(names); &w[0] == &core[0] {
		return pipeline.BundleBuiltins{Wasm: core, Ops: CoreNames, Checks: checks, Preview: preview}
	}
	return pipeline.BundleBuiltins{Wasm: module, Ops: Names, Checks: checks, Preview: preview}
}

// DefaultPipeline is the pipeline a session runs with when it names none.
// Its order, and why:
//
//  1. approval {mode: ask, allow: [load_skill, read_skill_file]}: first,
//     because at the tool hook the first op that acts wins. A guard must
//     decide every call before any op can run it; it fails closed if it
//     faults. Loading a skill and reading its files only read the mounted
//     folder, so they are allowed.
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
	return DefaultPipelineIn(skillsDir, "")
}

// DefaultPipelineIn is DefaultPipeline for a session run in projectDir
// (the directory a person started it in; "" for none): after approval
// comes agents-md, which contributes the AGENTS.md and CLAUDE.md found
// there (mounted read-only at /project) as prompt parts.
func DefaultPipelineIn(skillsDir, projectDir string) *pipeline.Spec {
	ops := []pipeline.OpSpec{{Use: "builtin:approval", Config: []byte(`{"mode":"ask","allow":["load_skill","read_skill_file"]}`)}}
	// A folder whose name has a colon cannot be written as a mount
	// (HOST:GUEST:MODE): the session runs without agents-md rather than
	// not at all.
	if st, err := os.Stat(projectDir); projectDir != "" && !strings.Contains(projectDir, ":") && err == nil && st.IsDir() {
		ops = append(ops, pipeline.OpSpec{Use: "builtin:agents-md", Mounts: []string{projectDir + ":/project:ro"}})
	}
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

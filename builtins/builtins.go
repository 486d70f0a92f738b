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
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/wasmhost"
)

// module is every built-in op; core is the same ops but fetch, built from
// the same code. A pipeline that names only core ops (the default
// pipeline does) loads core: the Go runtime is the same, but without the
// HTML parser there is less code for wazero to check on every start, and
// an instance starts faster (x/net/html builds its 2,231-entry entity
// table in every instance).
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
var Names = []string{"approval", "agents-md", "skills", "retry", "turn-stopping", "max-turns", "unknown-tool", "final-output", "compaction", "prompt", "files", "fetch", "shell"}

// CoreNames lists the ops CoreModule carries: all but fetch.
var CoreNames = []string{"approval", "agents-md", "skills", "retry", "turn-stopping", "max-turns", "unknown-tool", "final-output", "compaction", "prompt", "files", "shell"}

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

// Parts are the parts of the default pipeline a person can turn off (the
// config file's defaults key). The zero value is every part, with fetch
// off: fetch is offered only for the hosts Fetch names.
type Parts struct {
	NoFiles        bool     `json:"no_files,omitempty"`
	NoShell        bool     `json:"no_shell,omitempty"`
	NoAgentsMD     bool     `json:"no_agents_md,omitempty"`
	NoSkills       bool     `json:"no_skills,omitempty"`
	NoSystemPrompt bool     `json:"no_system_prompt,omitempty"`
	Fetch          []string `json:"fetch,omitempty"`
}

// ShellCommands are the commands the default pipeline's shell may run:
// ones that only read the project and that a coding agent needs to see
// what changed. Each still waits for a person under approval's ask mode,
// and runs confined to the project (where it could still write).
//
// The git commands are exact: a free argument ("*" or "**") could be
// --output=FILE (which writes any file in the project, .git/config
// included, and git then runs the programs that config names:
// core.fsmonitor, diff.external, a pager), --ext-diff or -c NAME=VALUE.
// After "--" every argument is a path, so git diff -- ** can name files.
// ls writes nothing whatever its arguments.
var ShellCommands = []string{
	"git status", "git status --short",
	"git diff", "git diff --staged", "git diff --stat", "git diff --staged --stat", "git diff -- **",
	"git log --oneline -n 30", "git log -n 5",
	"git show", "git show --stat",
	"ls **",
}

// shellEnv is the environment of the default shell's commands besides
// PATH: git reads no system-wide config (its global one is in the fresh
// HOME the host gives each command, so there is none).
var shellEnv = []string{"PATH", "GIT_CONFIG_NOSYSTEM=1"}

// DefaultPipeline is the pipeline a session runs with when it names none,
// in no project directory.
func DefaultPipeline(skillsDir string) *pipeline.Spec {
	return DefaultPipelineWith(skillsDir, "", Parts{})
}

// DefaultPipelineIn is DefaultPipelineWith every part.
func DefaultPipelineIn(skillsDir, projectDir string) *pipeline.Spec {
	return DefaultPipelineWith(skillsDir, projectDir, Parts{})
}

// DefaultPipelineWith is the pipeline a session runs with when it names
// none: a coding agent on projectDir (the directory a person started it
// in; "" for none), without the parts p turns off. Its order, and why:
//
//  1. approval {mode: ask, allow: [load_skill, read_skill_file]}: first,
//     because at the tool hook the first op that acts wins. A guard must
//     decide every call before any op can run it; it fails closed if it
//     faults. It lets the files op's reads through (and loading a skill,
//     which only reads its folder); every write and command asks a person.
//  2. prompt: the system prompt, saying which tools the model has on which
//     folder and how to work (systemPrompt).
//  3. agents-md: the AGENTS.md and CLAUDE.md of projectDir (mounted
//     read-only at /project) as prompt parts.
//  4. skills: the skills in skillsDir (mounted read-only at /skills) when
//     that folder exists; without it the op is there all the same (its
//     mount is optional), so /skills says where to make the folder.
//  5. files and shell: projectDir read-write at /work, and ShellCommands,
//     when projectDir may be opened so (WritableProject) and, for shell,
//     when this system can confine commands.
//  6. fetch: the hosts p.Fetch names, if any.
//  7. max-turns {max_steps: 20}: at the contribute hook every op is asked,
//     so its place there does not matter; it ends a runaway turn before its
//     next model request.
//  8. retry {attempts: 3}: the only op at request-error, so the first to
//     decide a failed request.
//  9. compaction: the only op at compact; it asks for a summary when the
//     last answer's size nears the model's context window (defaults for
//     common models), after a context_length failure and on /compact.
//  10. unknown-tool: last, so every op that owns a tool is asked first; it
//     answers only calls no op owns, telling the model what it can call.
func DefaultPipelineWith(skillsDir, projectDir string, p Parts) *pipeline.Spec {
	ops := []pipeline.OpSpec{{Use: "builtin:approval", Config: []byte(`{"mode":"ask","allow":["load_skill","read_skill_file"]}`)}}
	open, _ := WritableProject(projectDir)
	files := !p.NoFiles && open
	shell := !p.NoShell && open && wasmhost.CanConfine()
	if !p.NoSystemPrompt {
		text, _ := json.Marshal(map[string]string{"text": systemPrompt(projectDir, files, shell, p.Fetch)})
		ops = append(ops, pipeline.OpSpec{Use: "builtin:prompt", Config: text})
	}
	// A folder whose name has a colon cannot be written as a mount
	// (HOST:GUEST:MODE): the session runs without agents-md rather than
	// not at all.
	if st, err := os.Stat(projectDir); !p.NoAgentsMD && projectDir != "" && !strings.Contains(projectDir, ":") && err == nil && st.IsDir() {
		ops = append(ops, pipeline.OpSpec{Use: "builtin:agents-md", Mounts: []string{projectDir + ":/project:ro"}})
	}
	if !p.NoSkills {
		op := pipeline.OpSpec{Use: "builtin:skills"}
		if skillsDir != "" {
			op.Config, _ = json.Marshal(map[string]string{"host_dir": skillsDir})
		}
		if st, err := os.Stat(skillsDir); skillsDir != "" && !strings.Contains(skillsDir, ":") && err == nil && st.IsDir() {
			op.Mounts = []string{skillsDir + ":/skills:ro"}
		}
		ops = append(ops, op)
	}
	if files {
		ops = append(ops, pipeline.OpSpec{Use: "builtin:files", Mounts: []string{projectDir + ":/work:rw"}})
	}
	if shell {
		op := pipeline.OpSpec{Use: "builtin:shell", Mounts: []string{projectDir + ":/work:rw"}}
		for _, c := range ShellCommands {
			op.Exec = append(op.Exec, wasmhost.ExecGrant{Cmd: c, Env: slices.Clone(shellEnv)})
		}
		ops = append(ops, op)
	}
	if len(p.Fetch) > 0 {
		ops = append(ops, pipeline.OpSpec{Use: "builtin:fetch", HTTP: slices.Clone(p.Fetch)})
	}
	ops = append(ops,
		pipeline.OpSpec{Use: "builtin:max-turns", Config: []byte(`{"max_steps":20}`)},
		pipeline.OpSpec{Use: "builtin:retry", Config: []byte(`{"attempts":3}`)},
		pipeline.OpSpec{Use: "builtin:compaction"},
		pipeline.OpSpec{Use: "builtin:unknown-tool"},
	)
	return &pipeline.Spec{Ops: ops}
}

// WritableProject says whether the default pipeline mounts dir read-write
// for its files and shell tools, and if not, why (in words that follow
// the folder's name; "" when dir is ""). The home directory and / are
// never mounted so: a session started there by accident would have the
// whole of a person's files, or the machine's, to change.
func WritableProject(dir string) (ok bool, why string) {
	if dir == "" {
		return false, ""
	}
	if strings.Contains(dir, ":") {
		return false, "has a colon in its name, which a mount (HOST:GUEST:MODE) cannot name"
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return false, "is not a directory"
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, "cannot be resolved"
	}
	if real == filepath.Dir(real) {
		return false, "is the root of the file system"
	}
	for _, home := range homeDirs() {
		h, err := filepath.EvalSymlinks(home)
		if err != nil {
			continue
		}
		if h == real {
			return false, "is your home directory"
		}
		// A folder holding the home (/home, /Users) would give the tools
		// its files one folder down.
		if rel, err := filepath.Rel(real, h); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return false, "holds your home directory"
		}
	}
	return true, ""
}

// homeDirs are the home directories to keep the tools out of: $HOME and
// the user database's, which a process started without HOME (a service,
// a cron job) still has.
func homeDirs() []string {
	var out []string
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		out = append(out, home)
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		out = append(out, u.HomeDir)
	}
	return out
}

// DefaultNotes are what a person is told, once, about a session that runs
// the default pipeline in projectDir with p: the tools it leaves out that
// the person did not turn off, and why.
func DefaultNotes(projectDir string, p Parts) []string {
	var out []string
	if p.NoFiles && p.NoShell {
		return nil
	}
	ok, why := WritableProject(projectDir)
	switch {
	case !ok && why != "":
		out = append(out, projectDir+" "+why+": the default pipeline does not open it read-write, so the model has no file or shell tools; run wagent in a project's folder (or turn them off with defaults: {files: false, shell: false} in the config)")
	case ok && !p.NoShell && !wasmhost.CanConfine():
		out = append(out, "this system cannot confine commands ("+wasmhost.Confinement()+"): the default pipeline offers no shell tool")
	}
	return out
}

// systemPrompt is the default pipeline's system prompt: what the model can
// do with the tools the pipeline gives it, and how to work.
func systemPrompt(dir string, files, shell bool, fetch []string) string {
	var b strings.Builder
	b.WriteString("You are a coding agent run by wagent in a person's project")
	if dir != "" {
		b.WriteString(" (" + dir + " on their machine)")
	}
	b.WriteString(".\n\nWhat you can do:\n")
	switch {
	case files:
		b.WriteString("- The project is at /work. read_file, list_dir, glob and grep read it and run at once; write_file and edit_file change it (never inside .git), and each change waits for the person to approve it.\n")
	default:
		b.WriteString("- No folder is open to you: you cannot read or change files here. Say what you would change, and where.\n")
	}
	if shell {
		cmds := make([]string, len(ShellCommands))
		for i, c := range ShellCommands {
			cmds[i] = strings.Replace(c, " **", " …", 1)
		}
		b.WriteString("- shell runs, in /work, only these commands, exactly as written: " + strings.Join(cmds, ", ") + " (… is any arguments). Each command waits for the person to approve it; any other command or argument is refused. Pass the command line as it would be typed; no pipes, redirections or shell syntax.\n")
	}
	if len(fetch) > 0 {
		b.WriteString("- fetch reads web pages from " + strings.Join(fetch, ", ") + ".\n")
	}
	b.WriteString("- A call the person refuses comes back with their reason: do not repeat it unchanged.\n")
	b.WriteString("\nHow to work:\n" +
		"- Read the code before you change it (grep and read_file), and follow the project's conventions and its AGENTS.md, when given.\n" +
		"- Make small, focused edits with edit_file; use write_file for new files.\n" +
		"- Check your work with the commands you may run (git diff to review it); name the tests the person should run when you cannot run them.\n" +
		"- Be brief: say what you changed, and what you did not check.")
	return b.String()
}

package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/pipeline"
)

// builtinModules are the built-in operations embedded in the binary.
func builtinModules() pipeline.Builtins { return builtins.Bundle() }

// defaultPipeline is used when a session names no pipeline file: its
// skills come from skillsDir(env) when that folder exists, and agents-md
// reads the session's working directory.
func defaultPipeline(env *cliEnv, s settings) *pipeline.Spec {
	return builtins.DefaultPipelineIn(skillsDir(env), s.Dir)
}

// skillsDir is the default pipeline's skills folder: $WAGENT_SKILLS, else
// "skills" in wagent's data directory (beside the store).
func skillsDir(env *cliEnv) string {
	if d := env.getenv("WAGENT_SKILLS"); d != "" {
		return d
	}
	if d := dataDir(env); d != "" {
		return filepath.Join(d, "skills")
	}
	return ""
}

// dataDir is wagent's data directory: $WAGENT_HOME, else
// $XDG_DATA_HOME/wagent, else ~/.local/share/wagent (on macOS
// ~/Library/Application Support/wagent); "" when there is no home.
func dataDir(env *cliEnv) string {
	if h := env.getenv("WAGENT_HOME"); h != "" {
		return h
	}
	if x := env.getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "wagent")
	}
	home := env.getenv("HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	if home == "" {
		return ""
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "wagent")
	}
	return filepath.Join(home, ".local", "share", "wagent")
}

// grantProject gives a pipeline file's builtin:agents-md entry that
// names no mount the session's working directory, read-only, which is
// what the op is for.
func grantProject(spec *pipeline.Spec, dir string) {
	if dir == "" || strings.Contains(dir, ":") { // no mount can name it (HOST:GUEST:MODE)
		return
	}
	for i := range spec.Ops {
		if o := &spec.Ops[i]; o.Use == pipeline.BuiltinPrefix+"agents-md" && len(o.Mounts) == 0 {
			o.Mounts = []string{dir + ":/project:ro"}
		}
	}
}

package main

import (
	"path/filepath"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/pipeline"
)

// builtinModules are the built-in operations embedded in the binary.
func builtinModules() pipeline.Builtins { return builtins.Bundle() }

// defaultPipeline is used when a session names no pipeline file; its
// skills come from $WAGENT_HOME/skills (or WAGENT_SKILLS) when present.
func defaultPipeline(env *cliEnv) *pipeline.Spec {
	dir := env.getenv("WAGENT_SKILLS")
	if dir == "" {
		if h := env.getenv("WAGENT_HOME"); h != "" {
			dir = filepath.Join(h, "skills")
		}
	}
	return builtins.DefaultPipeline(dir)
}

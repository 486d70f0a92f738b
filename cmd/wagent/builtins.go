package main

import (
	"github.com/wagent/wagent/pipeline"
)

// builtinModules are the built-in operation modules embedded in the binary.
func builtinModules() pipeline.Builtins { return pipeline.MapBuiltins{} }

// defaultPipeline is used when a session names no pipeline file.
func defaultPipeline() *pipeline.Spec { return &pipeline.Spec{} }

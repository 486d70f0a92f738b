// Command core is the built-in operations but fetch, as one guest module:
// approval, skills, retry, turn-stopping, max-turns, unknown-tool,
// final-output, compaction, agents-md, prompt, files and shell. It is
// guests/builtins/module without fetch, and so without its HTML parser
// (whose tables every instance would build as it starts): a pipeline that
// names only these ops (the default pipeline does) loads it instead of
// the whole bundle.
//
// Build (from the repository root; make guests does it):
//
//	go run ./guests/cmd/wagent-build -o builtins/core.wasm ./guests/builtins/core
package main

import (
	"github.com/wagent/wagent/guests/builtins/ops"
	"github.com/wagent/wagent/guests/pdk"
)

func init() {
	for _, op := range ops.Core() {
		pdk.Register(op())
	}
}

func main() { pdk.Main() }

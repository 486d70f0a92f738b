// Command core is the built-in operations that need no capability beyond
// a read-only mount, as one guest module: approval, skills, retry,
// turn-stopping, max-turns, unknown-tool, final-output, compaction,
// agents-md and prompt. It is guests/builtins/module without files, fetch and shell,
// and so without their HTML parser (whose tables every instance would
// build as it starts) and file tools: a pipeline that names only these
// ops (the default pipeline does) loads it instead of the whole bundle.
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

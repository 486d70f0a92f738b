// Command module is wagent's built-in operations as one guest module: a
// bundle (ABI 1.1) of approval, skills, retry, turn-stopping, max-turns,
// unknown-tool, final-output, compaction, files, fetch and shell. One
// module compiles and loads once; each
// op still runs in its own instances, sandboxed and limited like any
// third-party op.
//
// Build (from the repository root; make guests does it):
//
//	go run ./guests/cmd/wagent-build -o builtins/builtins.wasm ./guests/builtins/module
package main

import (
	"github.com/wagent/wagent/guests/builtins/ops"
	"github.com/wagent/wagent/guests/pdk"
)

func init() {
	for _, op := range ops.All() {
		pdk.Register(op())
	}
}

func main() { pdk.Main() }

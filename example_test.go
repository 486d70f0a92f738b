package wagent_test

import (
	"context"
	"fmt"
	"os"

	"github.com/wagent/wagent"
	"github.com/wagent/wagent/engine/provider/script"
)

// A Go program embedding wagent: a store in a directory, a pipeline with
// an untrusted plugin given as bytes behind the approval guard, a scripted
// model, one session and its log.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "wagent-example-")
	defer os.RemoveAll(dir)
	plugin, _ := os.ReadFile("examples/wasm-ops/calculator/calculator.wasm")
	model, _ := script.Parse([]byte(`replies: [{tool_calls: [{name: calc_add, arguments: {value: 42}}]}, {content: "The total is 42."}]`))

	agent, err := wagent.New(ctx, wagent.Options{
		Dir:      dir,
		Pipeline: "ops:\n- use: builtin:approval\n  config: {mode: auto}\n- use: calc.wasm\n  limits: {memory_mb: 64, timeout_ms: 500}",
		Modules:  map[string][]byte{"calc.wasm": plugin},
		Provider: model,
	})
	if err != nil {
		panic(err)
	}
	defer agent.Close()
	s, _ := agent.Session(ctx, "example")
	s.Send(ctx, "add 42")
	if err := s.WhenIdle(ctx); err != nil {
		panic(err)
	}
	events, _ := agent.Log().Read(ctx, "example", 1, 0)
	for _, e := range events {
		fmt.Println(e.Seq, e.Type)
	}
	// Output:
	// 1 session/created
	// 2 inbox/spliced
	// 3 turn/start
	// 4 inbox/spliced
	// 5 user/message
	// 6 step/start
	// 7 request/header
	// 8 assistant/message
	// 9 approval/decision
	// 10 tool/call
	// 11 op/note
	// 12 tool/result
	// 13 step/end
	// 14 step/start
	// 15 request/header
	// 16 assistant/message
	// 17 step/end
	// 18 turn/end
}

package wagent_test

import (
	"context"
	"fmt"
	"os"

	"github.com/wagent/wagent"
	"github.com/wagent/wagent/app"
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
	node, err := wagent.Open(ctx, wagent.Options{Dir: dir, Provider: model, Pipelines: map[string]app.PipelineSource{"calc": {
		YAML:    []byte("ops:\n- use: builtin:approval\n  config: {mode: auto}\n- use: calc.wasm\n  limits: {memory_mb: 64, timeout_ms: 500}"),
		Modules: map[string][]byte{"calc.wasm": plugin}}}})
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)
	s, _ := node.Create(ctx, app.Local, "example", app.Request{Settings: app.Settings{Provider: "embedded", Pipeline: "calc"}.JSON()})
	s.Send(ctx, "add 42")
	s.WhenIdle(ctx)
	events, _ := node.Log().Read(ctx, "example", 1, 0)
	for _, e := range events {
		fmt.Println(e.Seq, e.Type)
	}
	// Output:
	// 1 session/created
	// 2 inbox/spliced
	// 3 session/writer
	// 4 turn/start
	// 5 inbox/spliced
	// 6 user/message
	// 7 step/start
	// 8 request/header
	// 9 assistant/message
	// 10 approval/decision
	// 11 tool/call
	// 12 op/note
	// 13 tool/result
	// 14 step/end
	// 15 step/start
	// 16 request/header
	// 17 assistant/message
	// 18 step/end
	// 19 turn/end
}

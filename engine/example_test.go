package engine_test

import (
	"context"
	"fmt"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A session with the calculator op: the model calls calc_add, the op runs
// it and remembers the total in a note, the model answers.
func Example() {
	ctx := context.Background()
	log := store.NewMemory()
	if err := engine.Create(ctx, log, "demo", event.SessionCreated{CreatedBy: "example"}, enginetest.Epoch); err != nil {
		panic(err)
	}
	model := provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			return &provider.Response{Content: "The total is " + last.Content + ".", FinishReason: "stop"}, nil
		}
		return &provider.Response{ToolCalls: []hostabi.ToolCall{enginetest.Call("c1", "calc_add", `{"value": 40}`)}}, nil
	})
	pipeline, err := engine.NewPipeline(enginetest.Calculator())
	if err != nil {
		panic(err)
	}
	m, err := engine.Open(ctx, engine.Config{
		Log: log, Session: "demo", Pipeline: pipeline, Provider: model,
		Observer: func(l engine.Live) {
			if l.Kind == "event" {
				fmt.Println(l.Event.Seq, l.Event.Type)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "add 40"}); err != nil {
		panic(err)
	}
	outcome, err := m.Run(ctx)
	fmt.Println(outcome, err, m.State().Notes["calc"]["total"])
	// Output:
	// 2 inbox/spliced
	// 3 session/writer
	// 4 turn/start
	// 5 inbox/spliced
	// 6 user/message
	// 7 step/start
	// 8 request/header
	// 9 assistant/message
	// 10 tool/call
	// 11 op/note
	// 12 tool/result
	// 13 step/end
	// 14 step/start
	// 15 request/header
	// 16 assistant/message
	// 17 step/end
	// 18 turn/end
	// idle <nil> 40
}

package builtins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider/script"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/wasmhost"
)

// A Go program embedding wagent: it opens a store, loads a pipeline that
// runs an untrusted module given as bytes (with its own limits) behind the
// built-in approval op, runs a session, watches its events and answers the
// approval the session waits for.
func Example_embedding() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "wagent-example-")
	defer os.RemoveAll(dir)

	// 1. The store: one directory, no server.
	log, err := badger.Open(filepath.Join(dir, "store"), badger.Options{})
	if err != nil {
		panic(err)
	}
	defer log.Close()

	// 2. The wasm runtime, and a pipeline: approval first, then a plugin
	// we do not trust, loaded from bytes with tight limits.
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(filepath.Join(os.TempDir(), "wagent-example-cache")))
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	plugin, err := os.ReadFile("../examples/wasm-ops/calculator/calculator.wasm")
	if err != nil {
		panic(err)
	}
	spec := &pipeline.Spec{Ops: []pipeline.OpSpec{
		{Use: "builtin:approval", Config: []byte(`{"mode": "ask"}`)},
		{Use: "calculator (untrusted)", Module: plugin, Limits: wasmhost.Limits{MemoryPages: 1024, Timeout: 200 * time.Millisecond}},
	}}
	loaded, err := spec.Build(ctx, pipeline.Options{Runtime: rt, Builtins: builtins.Bundle()})
	if err != nil {
		panic(err)
	}

	// 3. A model: here a script, in production openai.New(...).
	model, err := script.Parse([]byte(`
replies:
  - tool_calls: [{id: add-1, name: calc_add, arguments: {value: 42}}]
  - content: "The total is 42."
`))
	if err != nil {
		panic(err)
	}

	// 4. A host runs sessions; watch what they do.
	host := session.NewHost(engine.Config{Log: log, Pipeline: loaded.Pipeline, Provider: model})
	defer host.Close(ctx)
	host.Watch(func(n session.Notification) {
		if n.Kind == session.NoteLive && n.Live.Kind == "event" {
			switch n.Live.Event.Type {
			case event.EvApprovalRequest, event.EvToolCall, event.EvToolResult, event.EvTurnEnd:
				fmt.Println("event:", n.Live.Event.Type)
			}
		}
	})
	sess, err := host.Create(ctx, "example", event.SessionCreated{CreatedBy: "example"})
	if err != nil {
		panic(err)
	}
	sess.Send(ctx, "add 42")
	sess.WhenIdle(ctx)

	// 5. The session waits for a person: nothing runs meanwhile.
	for _, c := range sess.Waiting() {
		fmt.Println("waiting:", c.Name, string(c.Arguments))
		if err := sess.Decide(ctx, engine.Decision{CallID: c.ID, Allow: true, Who: "example"}); err != nil {
			panic(err)
		}
	}
	sess.WhenIdle(ctx)

	evs, _ := log.Read(ctx, "example", 1, 0)
	for _, e := range evs {
		if e.Type == event.EvAssistantMessage && strings.Contains(string(e.Data), "The total is") {
			fmt.Println("answer:", string(e.Data))
		}
	}
	// Output:
	// event: approval/request
	// waiting: calc_add {"value":42}
	// event: tool/call
	// event: tool/result
	// event: turn/end
	// answer: {"content":"The total is 42.","finish_reason":"stop","usage":{"input_tokens":7,"output_tokens":4}}
}

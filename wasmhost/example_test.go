package wasmhost_test

import (
	"context"
	"fmt"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// Load a module (here the hand-written WAT op in testdata/wat/ping.wat),
// make an op of it and call it at its hook.
func Example() {
	ctx := context.Background()
	rt, err := wasmhost.NewRuntime(ctx)
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	mod, err := rt.LoadFile(ctx, "../testdata/wat/ping.wasm")
	if err != nil {
		panic(err)
	}
	op, err := rt.NewOp(mod, wasmhost.Config{})
	if err != nil {
		panic(err)
	}
	fmt.Println(mod.Manifest().Name, mod.Manifest().Hooks, mod.Manifest().Commands)

	view := &hostabi.View{Hook: hostabi.HookCommand, Session: "s1", Command: &hostabi.CommandView{Name: "ping"}}
	effects, err := op.Handle(ctx, view, nil)
	if err != nil {
		panic(err)
	}
	for _, e := range effects {
		fmt.Println(e.Kind, e.Text)
	}
	// Output:
	// ping [command] [ping]
	// reply pong
}

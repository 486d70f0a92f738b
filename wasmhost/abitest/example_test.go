package abitest_test

import (
	"context"
	"fmt"
	"os"

	"github.com/wagent/wagent/wasmhost/abitest"
)

// Check a module from a program, as wagent ops test does: every check of
// every op, with the failures.
func ExampleCheck() {
	wasm, err := os.ReadFile("../../testdata/wat/ping.wasm")
	if err != nil {
		panic(err)
	}
	rep, err := abitest.Check(context.Background(), wasm, abitest.Options{})
	if err != nil {
		panic(err)
	}
	for _, r := range rep.Results[:3] {
		fmt.Println(r.Op, r.Check, r.Passed())
	}
	fmt.Println("failed:", len(rep.Failed()))
	// Output:
	// ping start true
	// ping command/no-messages true
	// ping command/many-messages true
	// failed: 0
}

package wasmhost

import (
	"context"
	"sync"
	"testing"
)

// Many short calls from several goroutines must never see a timeout they
// did not earn (the deadline timer is re-armed for every call).
func TestNoSpuriousTimeout(t *testing.T) {
	op := newOp(t, load(t, "guests/examples/policy/policy.wasm"), Config{})
	v, r := policyView(), history(10)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if _, err := op.Handle(context.Background(), v, r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

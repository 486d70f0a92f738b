package wasmhost

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// The host stays responsive while a guest spins until its deadline, in a
// hook call and in _initialize: a ticker in the test keeps firing on time,
// and the garbage collections it forces (each must stop every goroutine,
// the spinning one included) complete. A goroutine inside wazero's machine
// code cannot be preempted, so this holds only because the rewriter makes
// the guest return to Go regularly and nothing the guest can name turns
// that off (see escape_*.wat in TestHostileLoad).
func TestHostStaysResponsive(t *testing.T) {
	const deadline = time.Second
	for _, tc := range []struct {
		name string
		file string
		lim  Limits
		view *hostabi.View
		want string
	}{
		{"call (WAT loop)", "testdata/hostile/loop.wasm", Limits{Timeout: deadline}, toolView("x"), "call exceeded its deadline of 1s"},
		{"call (SIMD loop)", "testdata/hostile/simd_loop.wasm", Limits{Timeout: deadline}, toolView("x"), "call exceeded its deadline of 1s"},
		{"call (Go loop)", "testdata/hostile/go_hostile.wasm", Limits{Timeout: deadline}, commandView("spin"), "call exceeded its deadline of 1s"},
		{"_initialize", "testdata/hostile/init_loop.wasm", Limits{InitTimeout: deadline}, toolView("x"), "starting the module: call exceeded its deadline of 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Limits: tc.lim}
			if strings.Contains(tc.file, "go_hostile") {
				cfg.Grants = hostileGrants(t)
			}
			op := newOp(t, load(t, tc.file), cfg)
			stop := make(chan struct{})
			gaps := make(chan time.Duration, 1)
			go func() {
				const every = 10 * time.Millisecond
				tick := time.NewTicker(every)
				defer tick.Stop()
				last, worst := time.Now(), time.Duration(0)
				for {
					select {
					case <-stop:
						gaps <- worst
						return
					case now := <-tick.C:
						worst = max(worst, now.Sub(last))
						runtime.GC()
						last = time.Now()
					}
				}
			}()
			start := time.Now()
			_, err := op.Handle(context.Background(), tc.view, history(1))
			took := time.Since(start)
			close(stop)
			worst := <-gaps
			wantFault(t, err, hostabi.FaultTimeout, tc.want)
			if took < deadline || took > deadline+time.Second {
				t.Errorf("the call took %v, want a little over its deadline of %v", took, deadline)
			}
			// Generous for a shared 2-core machine; a stalled process shows
			// gaps of the whole deadline.
			if worst > 300*time.Millisecond {
				t.Errorf("the ticker went %v without firing while the guest spun", worst)
			}
			t.Logf("call took %v; longest gap between ticks (each with a forced GC) %v", took, worst)
		})
	}
}

// slowReader takes its time over every message.
type slowReader struct {
	*fakeReader
	delay time.Duration
}

func (s slowReader) Message(i int) (hostabi.Message, bool) {
	time.Sleep(s.delay)
	return s.fakeReader.Message(i)
}

// A call that returns after its deadline answers nothing, however it
// returned: here the guest waits in a host call (the engine reading a
// message) past its deadline and then finishes normally.
func TestLateReturnIsTimeout(t *testing.T) {
	op := newOp(t, load(t, "guests/examples/policy/policy.wasm"), Config{Limits: Limits{Timeout: 30 * time.Millisecond}})
	r := history(10)
	r.messages[8].Content = "what is 6*7?"
	v := &hostabi.View{Hook: hostabi.HookTurnStopping, Session: "s1", Op: "policy", Turn: 3, Step: 2, Messages: 10,
		Config: policyConfig, Stop: &hostabi.StopView{FinishReason: "stop"}}
	if eff, err := op.Handle(context.Background(), v, r); err != nil || len(eff) == 0 {
		t.Fatalf("in time: effects %v, err %v", eff, err)
	}
	eff, err := op.Handle(context.Background(), v, slowReader{r, 50 * time.Millisecond})
	if eff != nil {
		t.Errorf("a late call's effects came back: %v", eff)
	}
	wantFault(t, err, hostabi.FaultTimeout, "call exceeded its deadline of 30ms")
	if n := idle(op); n != 0 {
		t.Errorf("%d idle instances: the late call's instance was pooled", n)
	}
}

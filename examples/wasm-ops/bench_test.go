package wasmops

// Benchmarks of the policy op in each guest language, in one run against
// the same logic as a native Go op:
//
//	go test ./examples/wasm-ops -run '^$' -bench . -benchtime 2s
//
// BenchmarkPolicyCall is one tool-hook call deciding two calls (both on
// the allow list) on a pooled instance, as in a session; x_native is its
// time over the native op's, measured in the same benchmark.
// BenchmarkColdCompile loads the module into a new runtime with no
// compile cache: validate, instrument and compile, what the first session
// after an install pays (later starts read the disk cache).

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// nativePolicy is the policy example's tool hook as a native op: the
// baseline.
type nativePolicy struct {
	man         hostabi.Manifest
	lastConfig  string
	allow, deny []string
}

func (n *nativePolicy) Manifest() *hostabi.Manifest { return &n.man }

func (n *nativePolicy) Handle(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
	if string(v.Config) != n.lastConfig {
		raw, _ := hostabi.Field(v.Config, "allow")
		n.allow, _ = hostabi.Strings(raw)
		raw, _ = hostabi.Field(v.Config, "deny")
		n.deny, _ = hostabi.Strings(raw)
		n.lastConfig = string(v.Config)
	}
	var out []hostabi.Effect
	var ask []string
	for _, c := range v.Tool.Calls {
		if c.Decision != "" || c.Requested {
			continue
		}
		switch {
		case contains(n.allow, c.Name):
			out = append(out, decision(c.ID, true, "on the allow list"))
		case contains(n.deny, c.Name):
			out = append(out, decision(c.ID, false, "on the deny list"))
		default:
			if val, ok := r.Note("always:" + c.Name); ok && val == "allow" {
				out = append(out, decision(c.ID, true, "allowed always"))
				continue
			}
			ask = append(ask, c.ID)
		}
	}
	if len(ask) > 0 {
		out = append(out, hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: ask, Text: "not on the allow list"})
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var benchConfig = json.RawMessage(`{"allow":["calc_total","read_file"],"deny":["rm"]}`)

// benchView is the call the engine would make: two pending calls, both
// on the allow list, and the config.
func benchView() *hostabi.View {
	v := toolView([]hostabi.PendingCall{
		{ID: "call-1", Name: "calc_total", Arguments: json.RawMessage(`{}`)},
		{ID: "call-2", Name: "read_file", Arguments: json.RawMessage(`{"path":"README.md"}`)},
	})
	v.Config = benchConfig
	return v
}

// ratio is the CPU time of a call of op over one of the native op,
// measured in alternating rounds so that both see the same load on a
// shared machine.
func ratio(native, op engine.Operation, r engine.Reader) float64 {
	v := benchView()
	var tn, tw time.Duration
	for round := 0; round < 40; round++ {
		for _, x := range []struct {
			op engine.Operation
			t  *time.Duration
			n  int
		}{{native, &tn, 2000}, {op, &tw, 100}} {
			cpu0 := cpuTime()
			for i := 0; i < x.n; i++ {
				if _, err := x.op.Handle(context.Background(), v, r); err != nil {
					panic(err)
				}
			}
			*x.t += cpuTime() - cpu0
		}
	}
	return (float64(tw) / 100) / (float64(tn) / 2000)
}

func BenchmarkPolicyCall(b *testing.B) {
	native := &nativePolicy{man: hostabi.Manifest{Name: "policy", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true}}
	r := &conversation{}
	b.Run("native", func(b *testing.B) { benchCalls(b, native, r) })
	ctx := context.Background()
	for _, p := range policies {
		wasm := read(b, p.path)
		m, err := runtime(b).Load(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		op, err := runtime(b).NewOp(m, wasmhost.Config{Config: benchConfig})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p.lang, func(b *testing.B) {
			benchCalls(b, op, r)
			b.StopTimer()
			b.ReportMetric(ratio(native, op, r), "x_native")
			b.ReportMetric(float64(len(wasm)), "module-bytes")
		})
	}
}

// benchCalls runs b.N calls and reports, beside the wall time, the CPU
// time per call of all the process's threads (GC included), which moves
// far less than wall time on a shared machine; it returns that.
func benchCalls(b *testing.B, op engine.Operation, r engine.Reader) float64 {
	v := benchView()
	if eff, err := op.Handle(context.Background(), v, r); err != nil || len(eff) != 2 { // warm the pool
		b.Fatalf("effects %v, err %v", eff, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		eff, err := op.Handle(context.Background(), v, r)
		if err != nil || len(eff) != 2 {
			b.Fatalf("effects %v, err %v", eff, err)
		}
	}
	per := float64(cpuTime()-cpu0) / float64(b.N)
	b.ReportMetric(per, "cpu-ns/op")
	return per
}

// cpuTime is the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkColdCompile(b *testing.B) {
	ctx := context.Background()
	for _, p := range policies {
		wasm := read(b, p.path)
		b.Run(p.lang, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r, err := wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(""))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Load(ctx, wasm); err != nil {
					b.Fatal(err)
				}
				r.Close(ctx)
			}
			b.ReportMetric(float64(len(wasm)), "module-bytes")
		})
	}
}

package wasmhost

// Benchmarks of the wasm runtime, in one run against their baselines:
//
//	go test ./wasmhost -run '^$' -bench . -benchtime 2s
//
// x_native is a wasm call's time over the native op's; x_10msgs is a call
// at 1000 prior messages over one at 10.

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
)

// nativePolicy is the policy example's tool hook as a native op: the
// baseline a wasm op is measured against.
type nativePolicy struct {
	man        hostabi.Manifest
	lastConfig string
	allow      []string
	deny       []string
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
		switch {
		case contains(n.allow, c.Name):
			out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true, Scope: hostabi.ScopeOnce, Text: "on the allow list"})
		case contains(n.deny, c.Name):
			out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Scope: hostabi.ScopeOnce, Text: "on the deny list"})
		default:
			if val, ok := r.Note("always:" + c.Name); ok && val == "allow" {
				out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true, Scope: hostabi.ScopeOnce, Text: "allowed always"})
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

var policyConfig = []byte(`{"allow":["calc_total","read_file"],"deny":["rm"]}`)

// policyView is the benchmark's view: two tool calls, both on the allow
// list, with the config set as the engine would set it.
func policyView() *hostabi.View {
	v := toolView("calc_total", "read_file")
	v.Config = policyConfig
	return v
}

func timePerCall(op engine.Operation, v *hostabi.View, r engine.Reader, n int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := op.Handle(ctx, v, r); err != nil {
			panic(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

func benchCalls(b *testing.B, op engine.Operation, v *hostabi.View, r engine.Reader) {
	ctx := context.Background()
	if _, err := op.Handle(ctx, v, r); err != nil { // warm the pool
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		eff, err := op.Handle(ctx, v, r)
		if err != nil || len(eff) != 2 {
			b.Fatalf("effects %v, err %v", eff, err)
		}
	}
	// CPU time per call, all of the process's threads (GC included): on a
	// shared machine it moves far less than wall time, which includes
	// waiting for a core.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPolicyCall: the same allow-list approval over two tool calls,
// native and as a wasm op under each deadline strategy: instrumented (the
// default), wazero's close-on-context-done checks, and none (Trusted).
func BenchmarkPolicyCall(b *testing.B) {
	v, r := policyView(), history(10)
	native := &nativePolicy{man: hostabi.Manifest{Name: "policy", Hooks: []hostabi.Hook{hostabi.HookTool}}}
	b.Run("native", func(b *testing.B) { benchCalls(b, native, v, r) })
	for _, c := range []struct {
		name string
		opts []LoadOption
	}{{"wasm", nil}, {"wasm-wazero-checks", []LoadOption{checked()}}, {"wasm-trusted", []LoadOption{trusted()}}} {
		b.Run(c.name, func(b *testing.B) {
			op := newOp(b, load(b, "guests/examples/policy/policy.wasm", c.opts...), Config{})
			benchCalls(b, op, v, r)
			b.StopTimer()
			wasmNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			nativeNs := float64(timePerCall(native, v, r, 200000).Nanoseconds())
			b.ReportMetric(wasmNs/nativeNs, "x_native")
		})
	}
}

// BenchmarkEmptyCall is the host's own cost per call: a WAT handler that
// returns at once, under each deadline strategy.
func BenchmarkEmptyCall(b *testing.B) {
	v, r := toolView(), history(0)
	for _, c := range []struct {
		name string
		opts []LoadOption
	}{{"instrumented", nil}, {"wazero-checks", []LoadOption{checked()}}, {"trusted", []LoadOption{trusted()}}} {
		b.Run(c.name, func(b *testing.B) {
			op := newOp(b, load(b, "testdata/wat/noop.wasm", c.opts...), Config{})
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := op.Handle(ctx, v, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHistory: the policy op's stop check, which reads the messages
// it needs through the host, at 10 and at 1000 prior messages.
func BenchmarkHistory(b *testing.B) {
	stopView := func(n int) *hostabi.View {
		return &hostabi.View{Hook: hostabi.HookTurnStopping, Session: "s1", Op: "policy", Turn: 3, Step: 2, Messages: n,
			Config: policyConfig, Stop: &hostabi.StopView{Content: "", FinishReason: "stop"}}
	}
	op := newOp(b, load(b, "guests/examples/policy/policy.wasm"), Config{})
	mk := func(n int) *fakeReader {
		r := history(n)
		r.messages[n-2].Content = "what is 6*7?"
		return r
	}
	for _, n := range []int{10, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			v, r := stopView(n), mk(n)
			ctx := context.Background()
			if eff, err := op.Handle(ctx, v, r); err != nil || len(eff) != 2 {
				b.Fatalf("effects %v, err %v", eff, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := op.Handle(ctx, v, r); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if n == 1000 {
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				base := float64(timePerCall(op, stopView(10), mk(10), 20000).Nanoseconds())
				b.ReportMetric(ns/base, "x_10msgs")
			}
		})
	}
}

// BenchmarkLoad: compiling a Go guest with an empty cache, loading it again
// from the disk cache in a new Runtime (a new process, in effect), and
// making a fresh instance (instantiate plus _initialize).
func BenchmarkLoad(b *testing.B) {
	wasm := readRepo(b, "guests/examples/policy/policy.wasm")
	ctx := context.Background()
	b.Run("cold-compile", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, err := NewRuntime(ctx, WithCacheDir(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.Load(ctx, wasm); err != nil {
				b.Fatal(err)
			}
			r.Close(ctx)
		}
	})
	b.Run("warm-load", func(b *testing.B) {
		dir := b.TempDir()
		r, _ := NewRuntime(ctx, WithCacheDir(dir))
		if _, err := r.Load(ctx, wasm); err != nil {
			b.Fatal(err)
		}
		r.Close(ctx)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r, _ := NewRuntime(ctx, WithCacheDir(dir))
			if _, err := r.Load(ctx, wasm); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			r.Close(ctx)
			b.StartTimer()
		}
	})
	b.Run("instantiate", func(b *testing.B) {
		op := newOp(b, load(b, "guests/examples/policy/policy.wasm"), Config{})
		for i := 0; i < b.N; i++ {
			inst, err := op.pool.instantiate(ctx, op.limits)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			inst.discard()
			b.StartTimer()
		}
	})
	b.Run("pooled", func(b *testing.B) {
		op := newOp(b, load(b, "guests/examples/policy/policy.wasm"), Config{})
		if err := op.Warm(ctx); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			inst, err := op.pool.get(ctx, op.limits)
			if err != nil {
				b.Fatal(err)
			}
			op.pool.put(inst)
		}
	})
}

func checked() LoadOption { return func(o *loadOptions) { o.checked = true } }

func trusted() LoadOption { return func(o *loadOptions) { o.trusted = true } }

// BenchmarkGuestPolicyCall is issue 21's P4: the policy op in each guest
// language through the host, deadlines on (the default instrumented
// build), and with no deadline checks (trusted) to show what they cost.
// x_native is the wall time of a call over the native op's, measured in
// the same benchmark.
func BenchmarkGuestPolicyCall(b *testing.B) {
	v, r := policyView(), history(10)
	native := &nativePolicy{man: hostabi.Manifest{Name: "policy", Hooks: []hostabi.Hook{hostabi.HookTool}}}
	for _, g := range []struct{ lang, path string }{
		{"go", "guests/examples/policy/policy.wasm"},
		{"assemblyscript", "examples/wasm-ops/policy-as/policy.wasm"},
		{"c", "examples/wasm-ops/policy-c/policy.wasm"},
	} {
		for _, c := range []struct {
			name string
			opts []LoadOption
		}{{"deadlines", nil}, {"trusted", []LoadOption{trusted()}}} {
			b.Run(g.lang+"/"+c.name, func(b *testing.B) {
				op := newOp(b, load(b, g.path, c.opts...), Config{})
				benchCalls(b, op, v, r)
				b.StopTimer()
				wasmNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				nativeNs := float64(timePerCall(native, v, r, 100000).Nanoseconds())
				b.ReportMetric(wasmNs/nativeNs, "x_native")
			})
		}
	}
}

// BenchmarkBundleStart is the part of issue 21's P5 the host controls: the
// built-ins bundle loaded from a warm cache by a new Runtime (a new
// process, in effect) and one op's instance started, with its data
// segments packed (the default) and as the Go linker wrote them,
// alternating in one loop so that both see the same machine.
func BenchmarkBundleStart(b *testing.B) {
	wasm := readRepo(b, "builtins/builtins.wasm")
	ctx := context.Background()
	defer func(was bool) { packSegments = was }(packSegments)
	type side struct {
		dir             string
		load, inst, cpu time.Duration
	}
	start := func(s *side, packed bool) {
		packSegments = packed
		r, err := NewRuntime(ctx, WithCacheDir(s.dir))
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close(ctx)
		cpu0, t0 := cpuTime(), time.Now()
		m, err := r.Load(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		op, err := r.NewOp(m, Config{Op: m.Manifests()[0].Name})
		if err != nil {
			b.Fatal(err)
		}
		if err := op.Warm(ctx); err != nil {
			b.Fatal(err)
		}
		s.load, s.inst, s.cpu = s.load+t1.Sub(t0), s.inst+time.Since(t1), s.cpu+cpuTime()-cpu0
	}
	packed, linked := &side{dir: b.TempDir()}, &side{dir: b.TempDir()}
	start(packed, true) // fill the caches
	start(linked, false)
	*packed, *linked = side{dir: packed.dir}, side{dir: linked.dir}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start(packed, true)
		start(linked, false)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(packed.load), "packed-load-ms")
	b.ReportMetric(ms(packed.inst), "packed-instance-ms")
	b.ReportMetric(ms(packed.cpu), "packed-cpu-ms")
	b.ReportMetric(ms(linked.load), "linked-load-ms")
	b.ReportMetric(ms(linked.inst), "linked-instance-ms")
	b.ReportMetric(ms(linked.cpu), "linked-cpu-ms")
}

// BenchmarkBundleCompile is P5's cold start as the host sees it: the
// built-ins bundle compiled with an empty cache, its functions compiled on
// every CPU (the default) and on one, alternating. cpu-ms is the process's
// CPU time: more workers spend a little more of it to finish sooner.
func BenchmarkBundleCompile(b *testing.B) {
	wasm := readRepo(b, "builtins/builtins.wasm")
	ctx := context.Background()
	defer func(was func() int) { compileWorkers = was }(compileWorkers)
	all := compileWorkers()
	var wall, cpu [2]time.Duration
	for i := 0; i < b.N; i++ {
		for k, n := range []int{all, 1} {
			compileWorkers = func() int { return n }
			r, err := NewRuntime(ctx, WithCacheDir(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			cpu0, t0 := cpuTime(), time.Now()
			if _, err := r.Load(ctx, wasm); err != nil {
				b.Fatal(err)
			}
			wall[k], cpu[k] = wall[k]+time.Since(t0), cpu[k]+cpuTime()-cpu0
			r.Close(ctx)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(float64(all), "workers")
	b.ReportMetric(ms(wall[0]), "all-cpus-ms")
	b.ReportMetric(ms(cpu[0]), "all-cpus-cpu-ms")
	b.ReportMetric(ms(wall[1]), "one-cpu-ms")
	b.ReportMetric(ms(cpu[1]), "one-cpu-cpu-ms")
	b.ReportMetric(float64(wall[0])/float64(wall[1]), "x_one_cpu")
}

// BenchmarkScanRewrite is the host's own reading of the built-ins bundle
// (4.5 MB) at load: the shape checks every Load runs, and with the
// deadline rewrite a load that misses the cache of instrumented modules
// runs.
func BenchmarkScanRewrite(b *testing.B) {
	wasm := readRepo(b, "builtins/builtins.wasm")
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(wasm)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := scanModule(wasm); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan+rewrite", func(b *testing.B) {
		b.SetBytes(int64(len(wasm)))
		b.ReportAllocs()
		for b.Loop() {
			s, err := scanModule(wasm)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rewrite(s, wasm, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}

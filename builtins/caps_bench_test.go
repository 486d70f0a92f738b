//go:build unix

package builtins_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wagent/wagent/builtins"
	builtinops "github.com/wagent/wagent/guests/builtins/ops"
	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// The files built-in through the wasm host against the same op's code run
// natively (pdk.Test: the same functions, the views and effects through
// the same codec, the files read by the host's os package instead of
// WASI), in one run (BENCHMARKS.md, "Capabilities"):
//
//	go test ./builtins -run '^$' -bench 'Files' -benchtime 20x

var registerOnce sync.Once

// fileTrees makes, once per process, a 1 MB text file and a tree of
// 10,000 files (100 folders of 100 files of 1 KB; every 100th file holds
// the word the grep looks for).
var fileTrees = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "wagent-files-bench-")
	if err != nil {
		return "", err
	}
	line := strings.Repeat("the quick brown fox jumps over the lazy dog ", 3)[:99] + "\n"
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat(line, 10_000)), 0o644); err != nil {
		return "", err
	}
	for d := 0; d < 100; d++ {
		sub := filepath.Join(dir, "tree", fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return "", err
		}
		for f := 0; f < 100; f++ {
			body := strings.Repeat(line, 10)
			if f == 42 {
				body += "func needleInTheHaystack() {}\n"
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d.go", f)), []byte(body), 0o644); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
})

// cpuPerOp reports the process's CPU time (user and system) per
// operation as cpu-ms/op: on a shared machine, wall time measures the
// neighbours as much as the code.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/1e6/float64(b.N), "cpu-ms/op") }
}

func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func filesCall(tool, args string) *hostabi.View {
	return &hostabi.View{Hook: hostabi.HookTool, Session: "bench", Op: "files", Turn: 1, Step: 1, Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: "files", Decision: "allow", Started: true}},
	}}
}

func benchFiles(b *testing.B, tool, args, config string, check func(string) bool) {
	dir, err := fileTrees()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("wasm", func(b *testing.B) {
		m, err := pooled.Load(context.Background(), builtins.Module())
		if err != nil {
			b.Fatal(err)
		}
		op, err := pooled.NewOp(m, wasmhost.Config{Op: "files", Config: json.RawMessage(config), Limits: wasmhost.Limits{MemoryPages: 2048, Timeout: 60e9},
			Grants: wasmhost.Grants{Mounts: []wasmhost.Mount{{HostDir: dir, GuestPath: "/work", Write: true}}}})
		if err != nil {
			b.Fatal(err)
		}
		v := filesCall(tool, args)
		if err := op.Warm(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		defer cpuPerOp(b)()
		for i := 0; i < b.N; i++ {
			eff, err := op.Handle(context.Background(), v, nil)
			if err != nil || len(eff) != 1 || eff[0].IsError || !check(eff[0].Content) {
				b.Fatalf("%v %.300v", err, eff)
			}
		}
	})
	b.Run("native", func(b *testing.B) {
		registerOnce.Do(func() {
			for _, op := range builtinops.All() {
				pdk.Register(op())
			}
		})
		v := filesCall(tool, args)
		v.Config = json.RawMessage(strings.Replace(config, `"/work"`, fmt.Sprintf("%q", dir), 1))
		defer cpuPerOp(b)()
		for i := 0; i < b.N; i++ {
			eff, err := pdk.Test(v, nil)
			if err != nil || len(eff) != 1 || eff[0].IsError || !check(eff[0].Content) {
				b.Fatalf("%v %.300v", err, eff)
			}
		}
	})
}

// read_file of the whole 1 MB file: every line numbered, up to the op's
// largest result (1 MiB).
func BenchmarkFilesReadFile1MB(b *testing.B) {
	benchFiles(b, "read_file", `{"path":"big.txt"}`, `{"dir":"/work","max_read_bytes":1048576}`,
		func(s string) bool { return strings.HasPrefix(s, "     1\tthe quick") })
}

// read_file of the last lines of the 1 MB file: the whole file is read
// to count its lines, little is returned.
func BenchmarkFilesReadFileTail(b *testing.B) {
	benchFiles(b, "read_file", `{"path":"big.txt","offset":9990}`, `{"dir":"/work"}`,
		func(s string) bool { return strings.HasPrefix(s, "  9990\t") })
}

// grep over the tree of 10,000 files (10 MB).
func BenchmarkFilesGrep10000(b *testing.B) {
	benchFiles(b, "grep", `{"pattern":"func needle\\w+","path":"tree"}`, `{"dir":"/work"}`,
		func(s string) bool { return strings.Count(s, "needleInTheHaystack") == 100 })
}

//go:build linux

package wasmhost

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/internal/confine"
	"github.com/wagent/wagent/internal/procbox"
)

// What running a command costs per call (BENCHMARKS.md, "Capabilities"
// and "Process boxes"), in one run: os/exec directly, the host's run
// (pipes, scratch directory, output capture) unconfined and confined with
// Landlock, and a whole shell tool call through the wasm op; each in a
// process box (box) and, as before the box, in a process group only
// (group, procbox.Pretend).
//
//	go test ./wasmhost -run '^$' -bench 'Exec' -benchtime 200x
func BenchmarkExec(b *testing.B) {
	dir := b.TempDir()
	b.Run("os-exec", func(b *testing.B) {
		defer cpuPerOp(b)()
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("/bin/true")
			cmd.Dir = dir
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	policy := &confine.Policy{Read: append(append([]string(nil), systemRead...), dir), Write: systemWrite}
	for _, tc := range []struct {
		name   string
		policy *confine.Policy
	}{{"host-unconfined", nil}, {"host-confined", policy}} {
		boxes(b, tc.name, func(b *testing.B) {
			if tc.policy != nil && confine.Level() < confine.MinLevel {
				b.Skip("no Landlock")
			}
			defer cpuPerOp(b)()
			for i := 0; i < b.N; i++ {
				scratch, _ := os.MkdirTemp("", "wagent-exec-")
				res := run(context.Background(), runSpec{bin: "/bin/true", argv: []string{"true"}, dir: dir, env: []string{"PATH=" + defaultPath, "HOME=" + scratch}, timeout: time.Minute, keep: DefaultExecOutputBytes, policy: tc.policy})
				os.RemoveAll(scratch)
				if res.ExitCode != 0 || res.Code != "" {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
	for _, unconfined := range []bool{true, false} {
		name := "shell-op-confined"
		if unconfined {
			name = "shell-op-unconfined"
		}
		boxes(b, name, func(b *testing.B) {
			if !unconfined && confine.Level() < confine.MinLevel {
				b.Skip("no Landlock")
			}
			op, _ := shellOp(b, Limits{Timeout: 10 * time.Second}, ExecGrant{Cmd: "true", Unconfined: unconfined})
			runCall(b, op, "shell", `{"command":"true"}`)
			b.ResetTimer()
			defer cpuPerOp(b)()
			for i := 0; i < b.N; i++ {
				if r, _ := runCall(b, op, "shell", `{"command":"true"}`); !strings.HasPrefix(r.Content, "exit code 0") {
					b.Fatal(r.Content)
				}
			}
		})
	}
}

// boxes runs fn as name/box, in a process box, and name/group, in a
// process group only, as commands ran before the box.
func boxes(b *testing.B, name string, fn func(b *testing.B)) {
	b.Run(name+"/box", func(b *testing.B) {
		if e := procbox.Probe(); !e.Full() {
			b.Skipf("no process box here: %s", e)
		}
		fn(b)
	})
	b.Run(name+"/group", func(b *testing.B) {
		defer procbox.Pretend("benchmark: a process group only")()
		fn(b)
	})
}

// cpuPerOp reports the process's CPU time per operation (a child's is
// not counted: the command's own work is the same in every case).
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op") }
}

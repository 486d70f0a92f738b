package wasmhost

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// What each hostile module costs the host's resident memory, at most the
// op's memory limit plus 64 MiB (issue 11). Each module is loaded (its
// machine code from a compile cache the test fills first), started and
// called twice in a child process (this test binary), which reports the
// growth of its peak resident set over its resident set before loading.
// The figures are in BENCHMARKS.md, "Containment (issue 11)":
//
//	go test ./wasmhost -run TestHostileMemory -v
var memoryCases = []struct {
	file  string
	view  string // tool (default), contribute or a command name
	pages uint32 // memory limit; 0 is the default (512 pages, 32 MiB)
}{
	{file: "loop"}, {file: "init_loop"}, {file: "grow"}, {file: "huge_output", pages: 200},
	{file: "many_effects"}, {file: "flood", pages: 65}, {file: "deep", view: "contribute"},
	{file: "malformed"}, {file: "unknown_kind"}, {file: "trap"}, {file: "recurse"}, {file: "frames"}, {file: "simd_loop"}, {file: "simd_recurse"},
	{file: "tables"}, {file: "oob_read"}, {file: "overflow"}, {file: "init_calls_host"}, {file: "bad_status"},
	{file: "go_hostile", view: "hog", pages: 256}, {file: "go_hostile", view: "spin"}, {file: "go_hostile", view: "panic"},
}

const rssChildEnv = "WAGENT_TEST_RSS_CHILD"

func TestHostileMemory(t *testing.T) {
	if os.Getenv(rssChildEnv) != "" {
		t.Skip("in a child")
	}
	if raceEnabled || testing.Short() || runtime.GOOS != "linux" {
		t.Skip("needs Linux's /proc and no race detector (its shadow memory dwarfs the figures); skipped with -short")
	}
	cache := t.TempDir()
	warm, err := NewRuntime(context.Background(), WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range memoryCases {
		if _, err := warm.LoadFile(context.Background(), repo("testdata/hostile/"+c.file+".wasm")); err != nil {
			t.Fatal(err)
		}
	}
	warm.Close(context.Background())
	for _, c := range memoryCases {
		name := c.file
		if c.view != "" {
			name += "/" + c.view
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHostileMemoryChild$", "-test.v")
			cmd.Env = append(os.Environ(), rssChildEnv+"="+strings.Join([]string{cache, c.file, c.view, strconv.Itoa(int(c.pages))}, ","))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var growth int64
			var outcome string
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "rss-growth "); ok {
					n, o, _ := strings.Cut(rest, " ")
					growth, _ = strconv.ParseInt(n, 10, 64)
					outcome = o
				}
			}
			if outcome == "" {
				t.Fatalf("the child reported nothing:\n%s", out)
			}
			pages := c.pages
			if pages == 0 {
				pages = DefaultLimits.MemoryPages
			}
			limit := int64(pages)*65536 + 64<<20
			t.Logf("| %s | %d MiB | %.1f MiB | %s |", name, pages/16, float64(growth)/(1<<20), outcome)
			if growth > limit {
				t.Errorf("resident memory grew by %.1f MiB, over the op's limit plus 64 MiB (%d MiB)", float64(growth)/(1<<20), limit>>20)
			}
		})
	}
}

// TestHostileMemoryChild is the child of TestHostileMemory.
func TestHostileMemoryChild(t *testing.T) {
	args := strings.Split(os.Getenv(rssChildEnv), ",")
	if len(args) != 4 {
		t.Skip("run by TestHostileMemory")
	}
	cache, file, view := args[0], args[1], args[2]
	pages, _ := strconv.Atoi(args[3])
	ctx := context.Background()
	r, err := NewRuntime(ctx, WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	v := toolView("x")
	switch view {
	case "", "tool":
	case "contribute":
		v = &hostabi.View{Hook: hostabi.HookContribute, Session: "s1", Turn: 1, Step: 1}
	default:
		v = commandView(view)
	}
	runtime.GC()
	debug.FreeOSMemory()
	// Reset the peak to the current resident set (Linux 4.0 and later).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	base := procStatus(t, "VmRSS")
	m, err := r.LoadFile(ctx, repo("testdata/hostile/"+file+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Limits: Limits{MemoryPages: uint32(pages), Timeout: 200 * time.Millisecond, InitTimeout: 200 * time.Millisecond}}
	if file == "go_hostile" {
		cfg.Grants = hostileGrants(t)
	}
	op, err := r.NewOp(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var outcome string
	for i := 0; i < 2; i++ {
		_, err = op.Handle(ctx, v, history(3))
		outcome = "ok"
		if f, ok := err.(*hostabi.Fault); ok {
			outcome = f.Kind
		} else if err != nil {
			outcome = err.Error()
		}
	}
	fmt.Printf("rss-growth %d %s\n", procStatus(t, "VmHWM")-base, outcome)
}

// procStatus returns a field of /proc/self/status in bytes.
func procStatus(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

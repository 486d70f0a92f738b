package wasmhost

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tetratelabs/wazero"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost/wasmbin"
)

func TestPolicyTool(t *testing.T) {
	op := newOp(t, load(t, "guests/examples/policy/policy.wasm"), Config{Config: policyConfig})
	if !op.Manifest().Guard || op.Manifest().Name != "policy" {
		t.Fatalf("manifest = %+v", op.Manifest())
	}
	r := history(4)
	r.notes["always:fetch"] = "allow"
	v := toolView("calc_total", "rm", "fetch", "other")
	v.Tool.Calls = append(v.Tool.Calls, hostabi.PendingCall{ID: "c9", Name: "other", Decision: "allow"})
	got, err := op.Handle(context.Background(), v, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []hostabi.Effect{
		{Kind: hostabi.KindDecision, CallID: "c1", Allow: true, Scope: "once", Text: "on the allow list"},
		{Kind: hostabi.KindDecision, CallID: "c2", Scope: "once", Text: "on the deny list"},
		{Kind: hostabi.KindDecision, CallID: "c3", Allow: true, Scope: "once", Text: "allowed always"},
		{Kind: hostabi.KindApprovalRequest, CallIDs: []string{"c4"}, Text: "not on the allow list"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("effects:\n got %+v\nwant %+v", got, want)
	}
	// A config in the view (set by the engine) wins over the op's.
	v = toolView("rm")
	v.Config = json.RawMessage(`{"allow":["rm"]}`)
	got, err = op.Handle(context.Background(), v, r)
	if err != nil || len(got) != 1 || !got[0].Allow {
		t.Fatalf("with the view's config: %+v, %v", got, err)
	}
	// A hook the manifest does not declare is a skip, without a call.
	if got, err := op.Handle(context.Background(), &hostabi.View{Hook: hostabi.HookPrompt}, r); got != nil || err != nil {
		t.Fatalf("undeclared hook: %v, %v", got, err)
	}
}

// The stop check reads the messages it needs through the host, at any
// history length, and remembers in a note that it steered.
func TestPolicyStopCheckReadsMessages(t *testing.T) {
	op := newOp(t, load(t, "guests/examples/policy/policy.wasm"), Config{})
	for _, n := range []int{2, 1000} {
		r := history(n)
		r.messages[n-2].Content = "what is 6*7?"
		v := &hostabi.View{Hook: hostabi.HookTurnStopping, Turn: 7, Messages: n, Stop: &hostabi.StopView{}}
		got, err := op.Handle(context.Background(), v, r)
		want := []hostabi.Effect{
			{Kind: hostabi.KindNote, Key: "steered", Value: "7"},
			{Kind: hostabi.KindSteer, Text: "The user asked a question; answer it."},
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%d messages: %+v, %v", n, got, err)
		}
		r.notes["steered"] = "7"
		if got, err := op.Handle(context.Background(), v, r); got != nil || err != nil {
			t.Fatalf("after the note: %+v, %v", got, err)
		}
	}
	// No reader: messages and notes are simply not found.
	v := &hostabi.View{Hook: hostabi.HookTurnStopping, Turn: 1, Messages: 5, Stop: &hostabi.StopView{}}
	if got, err := op.Handle(context.Background(), v, nil); got != nil || err != nil {
		t.Fatalf("nil reader: %+v, %v", got, err)
	}
}

func TestPingWAT(t *testing.T) {
	op := newOp(t, load(t, "testdata/wat/ping.wasm"), Config{})
	got, err := op.Handle(context.Background(), commandView("ping"), history(2))
	if err != nil || len(got) != 1 || got[0].Kind != hostabi.KindReply || got[0].Text != "pong" {
		t.Fatalf("ping: %+v, %v", got, err)
	}
	// A view larger than its buffer: it logs why and returns status 1.
	v := commandView("ping")
	v.Command.Args = strings.Repeat("x", 70000)
	_, err = op.Handle(context.Background(), v, nil)
	wantFault(t, err, hostabi.FaultError, "ping: view does not fit")
	if _, err := op.Handle(context.Background(), commandView("ping"), nil); err != nil {
		t.Fatalf("after the error: %v", err)
	}
}

// Guests see a fake clock, no arguments or environment, and deterministic
// randomness: two fresh instances (two pools) answer the same.
func TestGuestWorldIsFake(t *testing.T) {
	m := load(t, "testdata/hostile/go_hostile.wasm")
	var answers []string
	for _, pages := range []uint32{300, 301} {
		op := newOp(t, m, Config{Limits: Limits{MemoryPages: pages}, Grants: hostileGrants(t)})
		got, err := op.Handle(context.Background(), commandView("env"), nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("env: %+v, %v", got, err)
		}
		answers = append(answers, got[0].Text)
	}
	if !strings.HasPrefix(answers[0], "year=2022 args=0 env=0 rand=") || answers[0] != answers[1] {
		t.Fatalf("answers = %q", answers)
	}
}

func TestNewOpRefuses(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	for _, tc := range []struct {
		file string
		cfg  Config
		want string
	}{
		{"testdata/hostile/huge_output.wasm", Config{Limits: Limits{MemoryPages: 100}}, "op huge_output needs 129 pages (8256 KiB) of memory to start, over its limit of 100 pages: raise limits.memory_mb"},
		{"testdata/hostile/go_hostile.wasm", Config{Grants: Grants{Mounts: []Mount{{HostDir: notDir, GuestPath: "/skills"}, {HostDir: t.TempDir(), GuestPath: "/secrets"}}}}, "is not a directory"},
		{"testdata/wat/ping.wasm", Config{Config: json.RawMessage(`{"a":`)}, "op ping: config is not JSON"},
		{"testdata/wat/ping.wasm", Config{Limits: Limits{MemoryPages: 70000}}, "over the 4 GiB of a wasm32 memory"},
		{"testdata/wat/ping.wasm", Config{Limits: Limits{Timeout: -time.Second}}, "limits must not be negative"},
	} {
		_, err := rt(t).NewOp(load(t, tc.file), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewOp error = %v, want %q", tc.file, err, tc.want)
		}
	}
}

func TestParseMount(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Mount
		err  string
	}{
		{spec: "./skills:/skills:ro", want: Mount{HostDir: filepath.Join("/base", "skills"), GuestPath: "/skills"}},
		{spec: "/abs/dir:/data", want: Mount{HostDir: "/abs/dir", GuestPath: "/data"}},
		{spec: "./work:/work:rw", want: Mount{HostDir: filepath.Join("/base", "work"), GuestPath: "/work", Write: true}},
		{spec: "./skills:/skills:wr", err: "end it with :ro (read-only, the default) or :rw (read-write)"},
		{spec: "./skills", err: "want HOST_DIR:GUEST_PATH[:ro|:rw]"},
		{spec: "./skills:skills", err: "must be an absolute, clean path"},
		{spec: "./skills:/", err: "must be an absolute, clean path other than /"},
	} {
		got, err := ParseMount("/base", tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseMount(%q) = %v, want error %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseMount(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv(CacheDirEnv, "/tmp/somewhere")
	if got := DefaultCacheDir(); got != "/tmp/somewhere" {
		t.Fatalf("DefaultCacheDir = %q", got)
	}
	t.Setenv(CacheDirEnv, "")
	if got := DefaultCacheDir(); !strings.HasSuffix(got, filepath.Join("wagent", "wazero")) {
		t.Fatalf("DefaultCacheDir = %q", got)
	}
}

// A module compiled once loads from the disk cache in a fresh Runtime, as
// in a new process.
func TestDiskCache(t *testing.T) {
	dir := t.TempDir()
	wasm := readRepo(t, "testdata/wat/ping.wasm")
	for i := 0; i < 2; i++ {
		r, err := NewRuntime(context.Background(), WithCacheDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		if r.CacheDir() != dir {
			t.Fatalf("CacheDir = %q", r.CacheDir())
		}
		m, err := r.Load(context.Background(), wasm)
		if err != nil {
			t.Fatal(err)
		}
		op, _ := r.NewOp(m, Config{})
		if got, err := op.Handle(context.Background(), commandView("ping"), nil); err != nil || len(got) != 1 {
			t.Fatalf("run %d: %v, %v", i, got, err)
		}
		r.Close(context.Background())
		if _, err := op.Handle(context.Background(), commandView("ping"), nil); err == nil {
			t.Fatal("an op of a closed runtime still ran")
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) == 0 {
		t.Fatal("nothing was cached on disk")
	}
}

// Ops of one module with different configs share a pool; each call sees
// its own op's config.
func TestOpsSharePool(t *testing.T) {
	m := load(t, "guests/examples/policy/policy.wasm")
	a := newOp(t, m, Config{Config: json.RawMessage(`{"allow":["x"]}`)})
	b := newOp(t, m, Config{Config: json.RawMessage(`{"deny":["x"]}`)})
	if a.pool != b.pool {
		t.Fatal("ops of one module and grant set have separate pools")
	}
	for i := 0; i < 3; i++ {
		ga, _ := a.Handle(context.Background(), toolView("x"), nil)
		gb, _ := b.Handle(context.Background(), toolView("x"), nil)
		if len(ga) != 1 || !ga[0].Allow || len(gb) != 1 || gb[0].Allow {
			t.Fatalf("a: %+v b: %+v", ga, gb)
		}
	}
}

func TestInstrumentRefusesUnknownInstructions(t *testing.T) {
	// (module (memory (export "memory") 1) (func (atomic.fence)))
	head := "\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type () -> ()
		"\x03\x02\x01\x00" + // one function of type 0
		"\x05\x03\x01\x00\x01" + // memory 1
		"\x07\x0a\x01\x06memory\x02\x00" // export memory
	mod := []byte(head + "\x0a\x07\x01\x05\x00\xfe\x03\x00\x0b") // atomic.fence, end
	if _, err := instrument(mod); err != errUninstrumentable {
		t.Fatalf("instrument = %v, want errUninstrumentable", err)
	}
	// Fixed-width SIMD is instrumented: (drop (v128.const i64x2 0 0)).
	simd := []byte(head + "\x0a\x17\x01\x15\x00\xfd\x0c" + strings.Repeat("\x00", 16) + "\x1a\x0b")
	if _, err := instrument(simd); err != nil {
		t.Fatalf("instrument (SIMD) = %v", err)
	}
	mod = append([]byte(head), "\x0a\x04\x01\x02\x00\x0b"...) // an empty body instead
	out, err := instrument(mod)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), stopGlobal) || !strings.Contains(string(out), budgetGlobal) {
		t.Fatal("instrumented module does not export its globals")
	}
	r := wazero.NewRuntime(context.Background())
	defer r.Close(context.Background())
	if _, err := r.CompileModule(context.Background(), out); err != nil {
		t.Fatalf("instrumented module does not compile: %v", err)
	}
}

// Every module the tests run, Go guests and WAT alike, is instrumented
// rather than left to wazero's slower checks.
func TestModulesAreInstrumented(t *testing.T) {
	for _, f := range []string{"guests/examples/policy/policy.wasm", "testdata/hostile/go_hostile.wasm", "testdata/wat/ping.wasm", "testdata/hostile/loop.wasm", "testdata/hostile/simd_loop.wasm", "testdata/hostile/simd_recurse.wasm"} {
		if m := load(t, f); m.cm.mode != modeInstrumented {
			t.Errorf("%s runs in mode %v", f, m.cm.mode)
		}
	}
}

func TestPoolRecyclesAndLogs(t *testing.T) {
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, err := NewRuntime(context.Background(), WithCacheDir(""), WithPool(2, 3), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	m, err := r.Load(context.Background(), readRepo(t, "testdata/wat/ping.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	op, _ := r.NewOp(m, Config{})
	var seen []*instance
	for i := 0; i < 4; i++ {
		if _, err := op.Handle(context.Background(), commandView("ping"), nil); err != nil {
			t.Fatal(err)
		}
		op.pool.mu.Lock()
		var idle *instance
		if len(op.pool.idle) > 0 {
			idle = op.pool.idle[0]
		}
		op.pool.mu.Unlock()
		seen = append(seen, idle)
	}
	// Calls 1 and 2 leave the same instance idle; call 3 is its third, which
	// retires it; call 4 runs on a new one.
	if seen[0] == nil || seen[0] != seen[1] || seen[2] != nil || seen[3] == nil || seen[3] == seen[0] {
		t.Fatalf("idle instances after each call: %p %p %p %p", seen[0], seen[1], seen[2], seen[3])
	}
	v := commandView("ping")
	v.Command.Args = strings.Repeat("x", 70000)
	op.Handle(context.Background(), v, nil)
	if !strings.Contains(logs.String(), "ping: view does not fit") {
		t.Fatalf("the guest's log line did not reach the logger:\n%s", logs.String())
	}
	if _, err := NewRuntime(context.Background(), WithPool(1, 0)); err == nil {
		t.Fatal("a pool that retires instances after 0 calls was accepted")
	}
}

// Every table gets a maximum: its share of the host's bound, or its own
// if that is smaller. Go declares its table without one.
func TestTablesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []tableShape
	}{
		{"testdata/hostile/tables.wasm", []tableShape{{min: 1, max: maxTableEntries, hasMax: true}}},
		{"testdata/hostile/escape_type.wasm", nil}, // invalid: refused before the tables matter
		// Go declares its table with no maximum: the rewrite adds one and
		// keeps the minimum the module declared (want's min is taken from
		// the module, as the Go toolchain decides it).
		{"guests/examples/policy/policy.wasm", []tableShape{{min: 0, max: maxTableEntries, hasMax: true}}},
	} {
		s, err := scanModule(readRepo(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		out, err := rewrite(s, readRepo(t, tc.file), true)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: rewritten", tc.file)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if tc.want != nil && tc.want[0].min == 0 {
			orig := tablesOf(readRepo(t, tc.file))
			if len(orig) != 1 || orig[0].hasMax {
				t.Fatalf("%s: tables as written %+v, want one without a maximum", tc.file, orig)
			}
			tc.want[0].min = orig[0].min
		}
		got := tablesOf(out)
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(tableShape{})); diff != "" {
			t.Errorf("%s: tables after the rewrite (-want +got):\n%s", tc.file, diff)
		}
	}
}

// tablesOf reads the table section of a module.
func tablesOf(out []byte) []tableShape {
	var got []tableShape
	for sec := range wasmbin.Sections(out) {
		if sec.ID == wasmbin.IDTable {
			r := wasmbin.NewReader(sec.Body)
			for j := r.U32(); j > 0; j-- {
				r.Byte()
				ts, _ := tableLimits(r, 0)
				got = append(got, ts)
			}
		}
	}
	return got
}

package wasmhost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost/wasmbin"
)

// Every module in testdata/hostile is refused at load or faults at its
// first call with exactly the failure below; after a fault the op keeps
// working (the faulted instance is discarded and a fresh one is made, which
// faults the same way rather than failing for being broken).

func TestHostileLoad(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"bad_import", "module imports env.abort; operations may import only from \"wagent\" and the allowed part of \"wasi_snapshot_preview1\""},
		{"wasi_socket", "module imports wasi_snapshot_preview1.sock_accept, which is not in the allowed WASI subset"},
		{"bad_signature", "import wagent.view has signature (i32) -> (i32); ABI v1 defines (i32, i32) -> (i32)"},
		{"no_marker", "not a wagent operation: no wagent_abi_vN export marks its ABI version"},
		{"v2", "module speaks wagent ABI v2 but this host speaks v1"},
		{"lying", "manifest declares hook \"prompt\" but the module exports no wagent_on_prompt"},
		{"no_manifest", "module has no wagent.manifest custom section"},
		{"bad_manifest", "wagent.manifest section: invalid manifest: not a JSON object"},
		{"start", "module has a start function, which would run before the host can bound it; export _initialize instead"},
		// Invalid as written, in ways a rewrite that appends globals (or
		// functions, or types) would make valid: validated before rewriting.
		{"escape_global", "not a valid wasm module: function 1 (code byte 5): uses global 0 but the module has 0 globals"},
		{"escape_init", "not a valid wasm module: function 0 (code byte 5): uses global 0 but the module has 0 globals"},
		{"escape_export", `not a valid wasm module: export "flag" names global 0 but the module has 0 globals`},
		{"escape_func", "not a valid wasm module: function 1 (code byte 1): uses function 9 but the module has 3 functions"},
		{"escape_type", "not a valid wasm module: function 1 (code byte 3): uses type 7 but the module has 2 types"},
		// Resources past the host's bounds (ABI.md §5), and imports of
		// anything but functions.
		{"table_huge", "table 0 declares 100000000 entries, over the limit of 1048576"},
		{"table_many", "module has 5 tables, over the limit of 4"},
		// A config_schema that would have the host read a file, or that is
		// no schema at all.
		{"schema_ref", "manifest of op schema_ref: config_schema uses $ref; the host checks configs only against self-contained schemas"},
		{"schema_bad", "manifest of op schema_bad: config_schema is not a valid JSON Schema: at /type: "},
		{"import_global", `module imports a global env.g; operations may import only functions, from "wagent" and the allowed part of "wasi_snapshot_preview1"`},
		{"import_table", `module imports a table wagent.table; operations may import only functions`},
		{"import_memory", `module imports its memory (wasi_snapshot_preview1.memory); it must define and export it as "memory"`},
		// A capability's import without the capability in the manifest.
		{"http_unrequested", `module imports wagent.http_request, but its manifest requests no http capability: request it (capabilities: {"http": [...]}) or drop the import`},
		{"exec_unrequested", `module imports wagent.exec, but its manifest requests no exec capability: request it (capabilities: {"exec": [...]}) or drop the import`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := rt(t).LoadFile(context.Background(), repo("testdata/hostile/"+tc.file+".wasm"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load error = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("load error is not one line: %q", err)
			}
		})
	}
}

func TestHostileCall(t *testing.T) {
	ownedView := toolView("calc_total", "other")
	ownedView.Op = "not_owned"
	ownedView.Tool.Calls[1].Owner = "someone-else"
	for _, tc := range []struct {
		file     string
		limits   Limits
		view     *hostabi.View
		kind     string
		want     string
		maxDelay time.Duration
	}{
		{file: "loop", limits: Limits{Timeout: 50 * time.Millisecond}, kind: hostabi.FaultTimeout, want: "call exceeded its deadline of 50ms", maxDelay: 2 * time.Second},
		{file: "grow", limits: Limits{MemoryPages: 4}, kind: hostabi.FaultMemory, want: "memory limit of 4 pages (0 MiB) reached: the guest asked to grow to 5 pages"},
		{file: "huge_output", limits: Limits{MemoryPages: 200}, kind: hostabi.FaultLimit, want: "output of 8388608 bytes is over the limit of 4194304 bytes per call"},
		{file: "many_effects", kind: hostabi.FaultLimit, want: "257 effects are over the limit of 256 per call"},
		{file: "flood", limits: Limits{MemoryPages: 65}, kind: hostabi.FaultLimit, want: "257 effects are over the limit of 256 per call"},
		{file: "retry_overflow", view: &hostabi.View{Hook: hostabi.HookRequestError, Session: "s1", Turn: 1, Step: 1, Failure: &hostabi.FailureView{Failure: hostabi.Failure{Code: hostabi.FailServer}, Attempt: 1}},
			kind: hostabi.FaultInvalidEffect, want: "effect 0 (retry): invalid effect: retry delay 9223372036854775807 ms is outside 0 to 86400000 ms (one day)"},
		{file: "deep", view: &hostabi.View{Hook: hostabi.HookContribute, Session: "s1", Turn: 1, Step: 1}, kind: hostabi.FaultABI, want: "nested deeper than 64"},
		{file: "malformed", kind: hostabi.FaultABI, want: "effects are not a JSON array of effects"},
		{file: "unknown_kind", kind: hostabi.FaultInvalidEffect, want: `effect 0 (launch_missiles): invalid effect: unknown kind "launch_missiles"`},
		{file: "wrong_hook", kind: hostabi.FaultInvalidEffect, want: `kind "steer" is not allowed at hook "tool"`},
		{file: "not_owned", view: ownedView, kind: hostabi.FaultInvalidEffect, want: `result for call "c2", which belongs to op "someone-else"`},
		{file: "trap", kind: hostabi.FaultTrap, want: "unreachable"},
		{file: "recurse", kind: hostabi.FaultTrap, want: "stack overflow (recursion too deep: over the 16 MiB of stack a call may use)"},
		{file: "frames", kind: hostabi.FaultTrap, want: "stack overflow (recursion too deep"},
		// SIMD is instrumented like the rest: the rewriter's deadline and
		// stack bound, not wazero's ceiling.
		{file: "simd_loop", limits: Limits{Timeout: 50 * time.Millisecond}, kind: hostabi.FaultTimeout, want: "call exceeded its deadline of 50ms", maxDelay: 2 * time.Second},
		{file: "simd_recurse", kind: hostabi.FaultTrap, want: "stack overflow (recursion too deep: over the 16 MiB of stack a call may use)"},
		{file: "tables", kind: hostabi.FaultTrap, want: "invalid table access"},
		{file: "oob_read", kind: hostabi.FaultABI, want: "view: buffer at 0xfde8 of 4096 bytes is outside the guest's 65536 bytes of memory"},
		{file: "overflow", kind: hostabi.FaultABI, want: "view: buffer at 0xfffffff0 of 32 bytes wraps past 4 GiB"},
		{file: "init_calls_host", kind: hostabi.FaultABI, want: "starting the module: wagent.view called outside a hook call"},
		{file: "bad_status", kind: hostabi.FaultABI, want: "handler returned status 7"},
		{file: "init_loop", limits: Limits{InitTimeout: 50 * time.Millisecond}, kind: hostabi.FaultTimeout, want: "starting the module: call exceeded its deadline of 50ms", maxDelay: 2 * time.Second},
	} {
		t.Run(tc.file, func(t *testing.T) {
			op := newOp(t, load(t, "testdata/hostile/"+tc.file+".wasm"), Config{Limits: tc.limits})
			view := tc.view
			if view == nil {
				view = toolView("calc_total")
			}
			for i := 0; i < 2; i++ { // the second call runs on a fresh instance
				start := time.Now()
				eff, err := op.Handle(context.Background(), view, history(3))
				if eff != nil {
					t.Errorf("call %d: effects %v came back with a fault", i, eff)
				}
				wantFault(t, err, tc.kind, tc.want)
				if tc.maxDelay > 0 && time.Since(start) > tc.maxDelay {
					t.Errorf("call %d took %v", i, time.Since(start))
				}
			}
			if n := idle(op); n != 0 {
				t.Errorf("%d faulted instances were pooled", n)
			}
		})
	}
}

func idle(o *Op) int {
	o.pool.mu.Lock()
	defer o.pool.mu.Unlock()
	return len(o.pool.idle)
}

// The Go guest misbehaves on command; after each fault the same op answers
// a well-behaved command from a fresh instance.
func TestHostileGoGuest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secrets := t.TempDir()
	os.WriteFile(filepath.Join(secrets, "key.txt"), []byte("SECRET"), 0o644)
	m := load(t, "testdata/hostile/go_hostile.wasm")
	// The op requests /skills and /secrets: both must be granted.
	lim := Limits{MemoryPages: 256, Timeout: 200 * time.Millisecond}
	_, err := rt(t).NewOp(m, Config{Limits: lim, Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/skills"}}}})
	if err == nil || err.Error() != `op hostile requests the read-only mount /secrets, which is not granted: grant it (grants: {mounts: ["DIR:/secrets:ro"]}) or leave the op out` {
		t.Fatalf("an ungranted mount: %v", err)
	}
	op := newOp(t, m, Config{
		Limits: lim,
		// /secrets is granted an empty folder; /extra is granted but not
		// requested, so not given.
		Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/skills"}, {HostDir: t.TempDir(), GuestPath: "/secrets"}, {HostDir: secrets, GuestPath: "/extra"}}},
	})
	if got := op.Mounts(); len(got) != 2 || got[0].GuestPath != "/secrets" || got[1].GuestPath != "/skills" {
		t.Fatalf("effective mounts = %v, want /secrets and /skills", got)
	}
	peek := func() {
		t.Helper()
		eff, err := op.Handle(context.Background(), commandView("peek"), nil)
		if err != nil {
			t.Fatalf("peek: %v", err)
		}
		want := strings.Join([]string{
			"/skills/hello.txt: hello from the mount",
			"/secrets/key.txt: error",
			"/extra/key.txt: error",
			"/etc/passwd: error",
			"/skills/../../etc/passwd: error",
			"../etc/passwd: error",
		}, "\n")
		if len(eff) != 1 || eff[0].Text != want {
			t.Fatalf("peek = %+v, want one reply:\n%s", eff, want)
		}
	}
	peek()
	for _, tc := range []struct{ cmd, kind, want string }{
		{"panic", hostabi.FaultTrap, "the guest wrote: panic: boom"},
		{"hog", hostabi.FaultMemory, "memory limit of 256 pages (16 MiB) reached"},
		{"spin", hostabi.FaultTimeout, "call exceeded its deadline of 200ms"},
	} {
		_, err := op.Handle(context.Background(), commandView(tc.cmd), nil)
		wantFault(t, err, tc.kind, tc.want)
		peek()
	}
}

func TestCancelStopsCall(t *testing.T) {
	op := newOp(t, load(t, "testdata/hostile/loop.wasm"), Config{Limits: Limits{Timeout: time.Minute}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := op.Handle(ctx, toolView("x"), nil)
	if err != context.DeadlineExceeded {
		t.Fatalf("err = %v, want the context's own error", err)
	}
}

// Modules whose few bytes a decoder expands: a 30 MB element segment of
// 30,000,000 entries took the host 84 s and 2 GB to load; 120,000 bodies
// declaring 65,000 locals each (a 1 MB module) took more than 5 minutes
// and many GB; an 8 MB name section, 64 MiB. Too big or too many to keep
// as files, they are made here.
func TestHostileLoadDecoderBombs(t *testing.T) {
	u := func(v uint64) []byte { return wasmbin.AppendU32(nil, uint32(v)) }
	sec := func(id byte, body []byte) []byte { return append(append([]byte{id}, u(uint64(len(body)))...), body...) }
	module := func(funcs int, elem, code []byte) []byte {
		m := []byte("\x00asm\x01\x00\x00\x00")
		m = append(m, sec(1, []byte("\x01\x60\x00\x00"))...) // type () -> ()
		m = append(m, sec(3, append(u(uint64(funcs)), make([]byte, funcs)...))...)
		m = append(m, sec(5, []byte("\x01\x00\x01"))...)
		m = append(m, sec(7, []byte("\x01\x06memory\x02\x00"))...)
		if elem != nil {
			m = append(m, sec(9, elem)...)
		}
		return append(m, sec(10, code)...)
	}
	empty := []byte("\x02\x00\x0b")
	n := maxElemEntries + 1
	elem := append(append([]byte("\x01\x01\x00"), u(uint64(n))...), make([]byte, n)...)                // one passive segment of function 0s
	body := append(append([]byte("\x01"), u(60000)...), 0x7f, 0x0b)                                    // 60,000 i32 locals
	wide := append(append(append(append([]byte("\x02"), u(40000)...), 0x7f), u(40000)...), 0x7f, 0x0b) // 2 x 40,000 locals
	many := u(18)
	for range 18 {
		many = append(append(many, u(uint64(len(body)))...), body...)
	}
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"elements", module(1, elem, append(u(1), empty...)), "module's element segments hold 1048577 entries or more, over the limit of 1048576"},
		{"locals", module(18, nil, many), "module's functions have 1080000 locals or more in all, over the limit of 1048576"},
		{"names", append(module(1, nil, append(u(1), empty...)), sec(0, append([]byte("\x04name\x01"), make([]byte, maxNameBytes)...))...),
			"the name section is 1048577 bytes, over the limit of 1024 KiB (strip it, or build without so many names)"},
		{"locals in one function", module(1, nil, append(append(u(1), u(uint64(len(wide)))...), wide...)),
			"function 0 has 80000 locals or more, over the limit of 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := rt(t).Load(context.Background(), tc.wasm)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("load error = %v, want %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refusing it took %v", d)
			}
		})
	}
}

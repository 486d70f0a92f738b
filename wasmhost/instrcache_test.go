package wasmhost

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// cacheRuntime is a Runtime on the cache directory dir, with its own key,
// whose warnings go to the returned buffer.
func cacheRuntime(t *testing.T, dir, key string) (*Runtime, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	r, err := NewRuntime(context.Background(), WithCacheDir(dir), WithCacheKeyFile(key),
		WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r, logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The rewrite for deadline checks is kept in the cache directory and read
// back by a later runtime; a damaged file there is ignored, not trusted.
func TestInstrumentedModuleCache(t *testing.T) {
	ctx := context.Background()
	dir, key := t.TempDir(), filepath.Join(t.TempDir(), "key")
	wasm := readRepo(t, "testdata/wat/ping.wasm")
	load := func() string {
		t.Helper()
		r, logs := cacheRuntime(t, dir, key)
		m, err := r.Load(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		op, err := r.NewOp(m, Config{})
		if err != nil {
			t.Fatal(err)
		}
		effects, err := op.Handle(ctx, commandView("ping"), history(0))
		if err != nil || len(effects) != 1 || effects[0].Text != "pong" {
			t.Fatalf("ping: %v %+v", err, effects)
		}
		return logs.String()
	}
	load()
	files, _ := filepath.Glob(filepath.Join(dir, "wagent-instrumented", instrumentVersion+"-*.wasm"))
	if len(files) != 1 {
		t.Fatalf("cached rewrites %v, want one", files)
	}
	first, _ := os.ReadFile(files[0])
	if logs := load(); logs != "" { // from the cache
		t.Fatalf("warnings on a clean cache:\n%s", logs)
	}
	// Damage it: the next runtime rewrites again and repairs the file.
	if err := os.WriteFile(files[0], []byte("not a module, and no valid tag either"), 0o644); err != nil {
		t.Fatal(err)
	}
	if logs := load(); !strings.Contains(logs, "a rewritten module failed its check") {
		t.Errorf("no warning for a damaged rewrite:\n%s", logs)
	}
	again, _ := os.ReadFile(files[0])
	if string(again) != string(first) {
		t.Fatalf("the damaged cache file was not rewritten")
	}
}

// The cache cannot change what runs. A guard (the policy example) and
// another module (ping) are cached; then their cached files are swapped,
// edited or forged, as a shared or restored cache directory could have
// them. Every time, a new runtime loads the guard as the guard, says so in
// a warning, and repairs the cache. (Before the check, a swapped rewrite
// loaded the guard as ping, and a swapped machine-code file panicked inside
// wazero.)
func TestCacheCannotSwapModules(t *testing.T) {
	ctx := context.Background()
	guard, other := readRepo(t, "guests/examples/policy/policy.wasm"), readRepo(t, "testdata/wat/ping.wasm")
	// One cache, filled once and copied for each attack: a copy is also a
	// restored cache (every file has a new inode), which the key still
	// vouches for.
	template, key := t.TempDir(), filepath.Join(t.TempDir(), "key")
	r, _ := cacheRuntime(t, template, key)
	gt, ot := loadCached(t, r, template, guard), loadCached(t, r, template, other)
	r.Close(ctx)
	for _, tc := range []struct {
		name   string
		attack func(t *testing.T, dir string, guardFiles, otherFiles cacheFiles)
		warn   string
	}{
		{"rewrite swapped", func(t *testing.T, dir string, g, o cacheFiles) {
			copyFile(t, o.instrumented, g.instrumented)
		}, "a rewritten module failed its check"},
		{"rewrite from another rewriter version", func(t *testing.T, dir string, g, o cacheFiles) {
			b, _ := os.ReadFile(g.instrumented)
			b[len(b)-1] ^= 1 // as good as a tag made for another version
			os.WriteFile(g.instrumented, b, 0o600)
		}, "a rewritten module failed its check"},
		{"machine code swapped", func(t *testing.T, dir string, g, o cacheFiles) {
			copyFile(t, o.compiled, g.compiled)
		}, "removed an entry that failed its check"},
		{"machine code edited in place", func(t *testing.T, dir string, g, o cacheFiles) {
			f, err := os.OpenFile(g.compiled, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{0xcc, 0xcc, 0xcc, 0xcc}, 64)
			f.Close()
		}, "removed an entry that failed its check"},
		{"machine code replaced by a link", func(t *testing.T, dir string, g, o cacheFiles) {
			os.Remove(g.compiled)
			if err := os.Symlink(o.compiled, g.compiled); err != nil {
				t.Fatal(err)
			}
		}, "removed an entry that failed its check"},
		{"manifest forged", func(t *testing.T, dir string, g, o cacheFiles) {
			copyFile(t, o.compiled, g.compiled)
			b, _ := os.ReadFile(filepath.Join(dir, manifestName))
			// Point the guard's record at the swapped file's identity: the
			// manifest's own tag no longer holds.
			os.WriteFile(filepath.Join(dir, manifestName), bytes.Replace(b, []byte(" "), []byte("  "), 1), 0o600)
		}, "the manifest failed its check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
				t.Fatal(err)
			}
			moved := func(p string) string { rel, _ := filepath.Rel(template, p); return filepath.Join(dir, rel) }
			tc.attack(t, dir, cacheFiles{moved(gt.instrumented), moved(gt.compiled)}, cacheFiles{moved(ot.instrumented), moved(ot.compiled)})

			r2, logs := cacheRuntime(t, dir, key)
			m, err := r2.Load(ctx, guard)
			if err != nil {
				t.Fatalf("load after the attack: %v", err)
			}
			if man := m.Manifest(); man.Name != "policy" || !man.Guard {
				t.Fatalf("the guard loaded as %s (guard %v)", man.Name, man.Guard)
			}
			op := newOpOn(t, r2, m, Config{Config: policyConfig})
			if eff, err := op.Handle(ctx, policyView(), history(2)); err != nil || len(eff) != 2 || !eff[0].Allow {
				t.Fatalf("the guard's answer after the attack: %+v, %v", eff, err)
			}
			if !strings.Contains(logs.String(), tc.warn) {
				t.Errorf("warnings %q, want one containing %q", logs.String(), tc.warn)
			}
			r2.Close(ctx)
			// Repaired: a third runtime finds nothing to warn about.
			r3, logs3 := cacheRuntime(t, dir, key)
			if _, err := r3.Load(ctx, guard); err != nil {
				t.Fatal(err)
			}
			if logs3.String() != "" {
				t.Errorf("the cache was not repaired: %s", logs3.String())
			}
		})
	}
}

// The cache is only as good as its key: a key others may read, or one
// inside the cache directory (which may be shared), disables the disk
// cache with a warning rather than trusting it.
func TestCacheKeyMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(t.TempDir(), "key")
	os.WriteFile(loose, bytes.Repeat([]byte{1}, cacheKeyBytes), 0o644)
	for _, tc := range []struct{ name, key, warn string }{
		{"readable by others", loose, "must be a regular file of yours that only you may read"},
		{"inside the cache directory", filepath.Join(dir, "key"), "is inside the cache directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, logs := cacheRuntime(t, dir, tc.key)
			if r.CacheDir() != "" || !strings.Contains(logs.String(), tc.warn) {
				t.Fatalf("cache dir %q, warnings %q", r.CacheDir(), logs.String())
			}
		})
	}
	good := filepath.Join(t.TempDir(), "sub", "key")
	if r, logs := cacheRuntime(t, dir, good); r.CacheDir() != dir || logs.String() != "" {
		t.Fatalf("a new key: cache dir %q, warnings %q", r.CacheDir(), logs.String())
	}
	if st, err := os.Stat(good); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key was made with %v (%v)", st.Mode(), err)
	}
}

type cacheFiles struct{ instrumented, compiled string }

// loadCached loads wasm into r and returns its files in the cache.
func loadCached(t *testing.T, r *Runtime, dir string, wasm []byte) cacheFiles {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if _, err := r.Load(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	var f cacheFiles
	for _, p := range after {
		if !contains(before, p) {
			f.compiled = p
		}
	}
	d := digestOf(wasm)
	f.instrumented = filepath.Join(dir, instrumentedPath(d))
	if f.compiled == "" {
		t.Fatal("nothing compiled into the cache")
	}
	if _, err := os.Stat(f.instrumented); err != nil {
		t.Fatal(err)
	}
	return f
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func newOpOn(t *testing.T, r *Runtime, m *Module, cfg Config) *Op {
	t.Helper()
	o, err := r.NewOp(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

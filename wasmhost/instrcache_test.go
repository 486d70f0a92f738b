package wasmhost

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The rewrite for deadline checks is kept in the cache directory and read
// back by a later runtime; a damaged file there is ignored, not trusted.
func TestInstrumentedModuleCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := readRepo(t, "testdata/wat/ping.wasm")
	load := func() {
		t.Helper()
		r, err := NewRuntime(ctx, WithCacheDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
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
	}
	load()
	files, _ := filepath.Glob(filepath.Join(dir, "wagent-instrumented", instrumentVersion+"-*.wasm"))
	if len(files) != 1 {
		t.Fatalf("cached rewrites %v, want one", files)
	}
	first, _ := os.ReadFile(files[0])
	load() // from the cache
	// Damage it: the next runtime rewrites again and repairs the file.
	if err := os.WriteFile(files[0], []byte("not a module, and no valid digest either"), 0o644); err != nil {
		t.Fatal(err)
	}
	load()
	again, _ := os.ReadFile(files[0])
	if string(again) != string(first) {
		t.Fatalf("the damaged cache file was not rewritten")
	}
}

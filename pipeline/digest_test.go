package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/pipeline"
)

// Digests names each op as Build loads it, the fallback included, with
// the digest the wasm host gives the same bytes.
func TestDigestsAreTheHostsDigests(t *testing.T) {
	wasm, err := os.ReadFile(calculator)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := runtime(t).Load(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	s := &pipeline.Spec{Dir: filepath.Dir(calculator), Ops: []pipeline.OpSpec{{Use: "./calculator.wasm"}}}
	got, err := s.Digests(pipeline.Options{Builtins: pipeline.BundleBuiltins{Wasm: wasm, Ops: []string{pipeline.Fallback}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []pipeline.ModuleDigest{
		{Use: "./calculator.wasm", SHA256: mod.Digest()},
		{Use: "builtin:" + pipeline.Fallback, Op: pipeline.Fallback, SHA256: mod.Digest()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("digests mismatch (-want +got):\n%s", diff)
	}
	s.Ops[0].Use = "./missing.wasm"
	if _, err := s.Digests(pipeline.Options{}); err == nil {
		t.Error("a missing module has a digest")
	}
}

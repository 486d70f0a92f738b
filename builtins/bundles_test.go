package builtins_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/pipeline"
)

// The two bundles carry what their name lists say, and the core one is
// the whole one without fetch.
func TestBundlesCarryTheirOps(t *testing.T) {
	for _, c := range []struct {
		name  string
		wasm  []byte
		names []string
	}{{"all", builtins.Module(), builtins.Names}, {"core", builtins.CoreModule(), builtins.CoreNames}} {
		m, err := pooled.Load(context.Background(), c.wasm)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, man := range m.Manifests() {
			got = append(got, man.Name)
		}
		if want := slices.Sorted(slices.Values(c.names)); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Errorf("%s bundle carries %v, its list says %v", c.name, got, want)
		}
	}
	var rest []string
	for _, n := range builtins.Names {
		if !slices.Contains(builtins.CoreNames, n) {
			rest = append(rest, n)
		}
	}
	if !slices.Equal(rest, []string{"fetch"}) {
		t.Errorf("the whole bundle has %v beyond the core one, want fetch", rest)
	}
}

// A pipeline loads the core bundle when it names only core ops (the
// default pipeline does) and the whole one when it names any other, for
// all its built-ins alike: one Go runtime per pipeline, never two.
func TestPipelinesLoadTheSmallerBundle(t *testing.T) {
	digest := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	core, all := digest(builtins.CoreModule()), digest(builtins.Module())
	check := func(name string, s *pipeline.Spec, want string) {
		t.Helper()
		ds, err := s.Digests(pipeline.Options{Builtins: builtins.Bundle()})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range ds {
			if d.Use[:8] == "builtin:" {
				n++
				if d.SHA256 != want {
					t.Errorf("%s: %s loads from %s, want %s", name, d.Use, d.SHA256[:12], want[:12])
				}
			}
		}
		if n == 0 {
			t.Fatalf("%s: no built-ins in %v", name, ds)
		}
	}
	check("default", builtins.DefaultPipeline(t.TempDir()), core)
	check("in a project", builtins.DefaultPipelineIn(t.TempDir(), t.TempDir()), core)
	check("with fetch", builtins.DefaultPipelineWith("", t.TempDir(), builtins.Parts{Fetch: []string{"go.dev"}}), all)
	fetch := builtin("fetch", "")
	fetch.HTTP = []string{"example.com"}
	if _, err := spec(t, builtin("approval", ""), fetch, builtin("max-turns", `{"max_steps":3}`)).Build(context.Background(), pipeline.Options{Runtime: pooled, Builtins: builtins.Bundle()}); err != nil {
		t.Fatalf("a pipeline of both kinds: %v", err)
	}

	// A copy of the core bundle in a file, naming a built-in's op, is the
	// built-in: accepted whichever bundle the pipeline's built-ins use.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "core.wasm"), builtins.CoreModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &pipeline.Spec{Path: "p.yaml", Dir: dir, Ops: []pipeline.OpSpec{{Use: "./core.wasm", Op: "approval"}, fetch}}
	if _, err := s.Build(context.Background(), pipeline.Options{Runtime: pooled, Builtins: builtins.Bundle()}); err != nil {
		t.Fatalf("a copy of the core bundle beside the whole one: %v", err)
	}
	if w := builtins.ModuleFor(nil); &w[0] != &builtins.CoreModule()[0] {
		t.Error("ModuleFor(nil) is not the core bundle")
	}
}

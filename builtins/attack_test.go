package builtins_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/wasmhost"
)

func attackRuntime(t *testing.T) *wasmhost.Runtime {
	rt, err := wasmhost.NewRuntime(context.Background(), wasmhost.WithCacheDir(filepath.Join(os.TempDir(), "wagent-attack-cache")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// Digests and Build agree on the bundle each built-in comes from, so a
// digest recorded for a session (export) is the one the session ran.
func TestAttackDigestsMatchBuild(t *testing.T) {
	for _, uses := range [][]string{{"approval"}, {"approval", "files"}, {"fetch"}, {"unknown-tool"}} {
		var ops []pipeline.OpSpec
		for _, u := range uses {
			ops = append(ops, pipeline.OpSpec{Use: "builtin:" + u})
		}
		s := &pipeline.Spec{Ops: ops}
		ds, err := s.Digests(pipeline.Options{Builtins: builtins.Bundle()})
		if err != nil {
			t.Fatal(err)
		}
		want := hexSum(builtins.ModuleFor(append(uses, pipeline.Fallback)))
		for _, d := range ds {
			if d.SHA256 != want {
				t.Errorf("%v: %s digest %s, want the bundle Build loads %s", uses, d.Use, d.SHA256, want)
			}
		}
	}
}

// A module that is not a built-in but names its op like one is refused,
// unless it is a byte copy of a bundle carrying that op: a copy of core
// may be named approval, but not files (core has none), and a core copy
// with one byte changed is refused.
func TestAttackReservedNameAcrossBundles(t *testing.T) {
	ctx := context.Background()
	rt := attackRuntime(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	core := write("core.wasm", builtins.CoreModule())
	// A custom section appended: the same code, other bytes.
	tampered := write("tampered.wasm", append(append([]byte(nil), builtins.CoreModule()...), 0, 4, 1, 'x', 1, 2))
	for _, tc := range []struct {
		use, op string
		ok      bool
	}{
		{core, "approval", true},
		{core, "files", false},
		{tampered, "approval", false},
	} {
		s := &pipeline.Spec{Ops: []pipeline.OpSpec{{Use: tc.use, Op: tc.op}}}
		_, err := s.Build(ctx, pipeline.Options{Runtime: rt, Builtins: builtins.Bundle(), NoFallback: true})
		if (err == nil) != tc.ok {
			t.Errorf("%s as %s: err %v, want ok %v", filepath.Base(tc.use), tc.op, err, tc.ok)
		}
	}
}

// Options.Loaded answers only for its own slice: a pipeline narrowed to
// the whole bundle, handed the core module as loaded (as the CLI does
// when it preloaded the wrong bundle), still runs the whole bundle's
// ops (fetch is there).
func TestAttackLoadedWrongBundle(t *testing.T) {
	ctx := context.Background()
	rt := attackRuntime(t)
	core := builtins.CoreModule()
	mod, err := rt.Load(ctx, core)
	if err != nil {
		t.Fatal(err)
	}
	s := &pipeline.Spec{Ops: []pipeline.OpSpec{{Use: "builtin:approval"}, {Use: "builtin:fetch", HTTP: []string{"example.com"}}}}
	l, err := s.Build(ctx, pipeline.Options{Runtime: rt, Builtins: builtins.Bundle(), Loaded: map[*byte]*wasmhost.Module{&core[0]: mod}})
	if err != nil {
		t.Fatal(err)
	}
	// fetch is only in the whole bundle: NewOp on core would have failed.
	if len(l.Ops) < 2 || l.Ops[1].Manifest().Name != "fetch" {
		t.Fatalf("ops %v", l.Uses)
	}
}

// A sha256 pin on a built-in: its bytes depend on the other built-ins the
// pipeline names (the bundle narrows), so a pin taken from a core-only
// pipeline fails once the pipeline names fetch. Fails closed, and says
// which bundle the pin names and what to pin instead.
func TestAttackPinOnBuiltinDependsOnOthers(t *testing.T) {
	ctx := context.Background()
	rt := attackRuntime(t)
	pin := hexSum(builtins.CoreModule())
	s := &pipeline.Spec{Ops: []pipeline.OpSpec{{Use: "builtin:approval", SHA256: pin}}}
	if _, err := s.Build(ctx, pipeline.Options{Runtime: rt, Builtins: builtins.Bundle()}); err != nil {
		t.Fatalf("core-only: %v", err)
	}
	s.Ops = append(s.Ops, pipeline.OpSpec{Use: "builtin:fetch", HTTP: []string{"example.com"}})
	_, err := s.Build(ctx, pipeline.Options{Runtime: rt, Builtins: builtins.Bundle()})
	if err == nil || !strings.Contains(err.Error(), "the pipeline names only built-ins of the smaller bundle; with the built-ins this pipeline names it comes from the other bundle: pin "+hexSum(builtins.Module())) {
		t.Fatalf("err %v, want it to say which bundle the pin names and what to pin", err)
	}
	t.Logf("pin taken with core-only pipeline refused once fetch is named: %v", err)
}

package wasmhost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Runtime made WithReadOnlyMounts writes nothing through a mount: the
// files op granted /work read-write loads (its grant is checked as
// usual: granted read-only, it is still refused), is given the mount
// read-only, and its writes fail as on a read-only file system.
func TestReadOnlyMountsWriteNothing(t *testing.T) {
	ctx := context.Background()
	r, err := NewRuntime(ctx, WithReadOnlyMounts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	m, err := r.LoadFile(ctx, repo("builtins/builtins.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	os.WriteFile(file, []byte("as it was\n"), 0o644)
	o, err := r.NewOp(m, Config{Op: "files", Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}}})
	if err != nil {
		t.Fatalf("the files op granted /work read-write: %v", err)
	}
	if ms := o.Mounts(); len(ms) != 1 || ms[0].Write {
		t.Errorf("mounts %+v, want /work read-only", ms)
	}
	for _, args := range []string{`{"path":"a.txt","content":"written\n"}`, `{"path":"new.txt","content":"new\n"}`} {
		res, _ := runCall(t, o, "write_file", args)
		if !res.IsError || !strings.Contains(res.Content, "Read-only file system") {
			t.Errorf("write_file %s: %q, want a read-only file system's error", args, res.Content)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "as it was\n" {
		t.Errorf("a.txt: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt was made: %v", err)
	}
	_, err = r.NewOp(m, Config{Op: "files", Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work"}}}})
	if err == nil || !strings.Contains(err.Error(), "grants it read-only") {
		t.Errorf("the files op granted /work read-only: %v, want it refused as without the option", err)
	}
}

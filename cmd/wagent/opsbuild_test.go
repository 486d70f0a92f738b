package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// TestE2EOpFromAnEmptyFolder defends what the README promises an op
// author: from an empty folder outside this repository, with no module
// proxy, the real binary writes an op (ops new), its unit test passes, it
// builds (ops build) and the host accepts it (ops check). It needs the Go
// toolchain, as building an op does; without one it fails rather than
// skips, so CI cannot lose it.
func TestE2EOpFromAnEmptyFolder(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test needs the Go toolchain on PATH, as wagent ops build does: %v", err)
	}
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	work := t.TempDir()
	if rel, err := filepath.Rel(repo, work); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary folder %s is inside the repository %s", work, repo)
	}
	// Offline: nothing may come from a module proxy or a checksum server,
	// and no go.work may reach into the repository.
	env := map[string]string{"GOPROXY": "off", "GONOSUMDB": "*", "GOFLAGS": "-mod=readonly", "GOWORK": "off"}

	r := exeIn(t, work, 60*time.Second, env, "ops", "new", "myop")
	if r.code != 0 || !strings.Contains(r.stdout, "wagent ops build") {
		t.Fatalf("ops new: code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	mod := filepath.Join(work, "myop")
	for _, f := range []string{"go.mod", "main.go", "main_test.go", ".wagent/kit/go.mod", ".wagent/kit/guests/pdk/pdk.go", ".wagent/kit/hostabi/abi.go"} {
		if _, err := os.Stat(filepath.Join(mod, filepath.FromSlash(f))); err != nil {
			t.Errorf("ops new wrote no %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(mod, ".wagent/kit/guests/pdk/tool_test.go")); err == nil {
		t.Error("the kit's copy holds a test file of the repository")
	}

	// The module's own test runs natively, against the copied kit.
	cmd := exec.Command(goTool, "test", "./...")
	cmd.Dir = mod
	cmd.Env = procEnv(env)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test in the new module: %v\n%s", err, out)
	}

	// A stale kit is refreshed from the binary before building.
	stale := filepath.Join(mod, ".wagent", "kit", "guests", "pdk", "pdk.go")
	want, _ := os.ReadFile(stale)
	os.WriteFile(stale, append(bytes.Clone(want), "\n// edited\n"...), 0o644)
	os.WriteFile(filepath.Join(mod, ".wagent", "kit", "guests", "pdk", "gone.go"), []byte("package pdk\n"), 0o644)

	r = exeIn(t, mod, 5*time.Minute, env, "ops", "build")
	if r.code != 0 {
		t.Fatalf("ops build: code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"refreshed .wagent/kit", "reading the manifest", "compiling for wasip1"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("ops build did not say %q; stderr:\n%s", s, r.stderr)
		}
	}
	if !strings.HasPrefix(r.stdout, "wrote myop.wasm (") || !strings.Contains(r.stdout, "myop 0.1.0 (tools shout)") {
		t.Errorf("ops build stdout = %q", r.stdout)
	}
	if got, _ := os.ReadFile(stale); !bytes.Equal(got, want) {
		t.Error("ops build left the edited kit file as it was")
	}
	if _, err := os.Stat(filepath.Join(mod, ".wagent", "kit", "guests", "pdk", "gone.go")); err == nil {
		t.Error("ops build left a file the kit does not have")
	}

	r = exeIn(t, mod, 60*time.Second, env, "ops", "check", "myop.wasm")
	if r.code != 0 || !strings.Contains(r.stdout, "ok: myop 0.1.0 (abi "+hostabi.ABIVersion()+", hooks contribute, tool)") {
		t.Fatalf("ops check: code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// A second build changes nothing in the kit and writes the same bytes.
	first, _ := os.ReadFile(filepath.Join(mod, "myop.wasm"))
	r = exeIn(t, work, 5*time.Minute, env, "ops", "build", "myop", "-o", "again.wasm")
	if r.code != 0 || strings.Contains(r.stderr, "refreshed") {
		t.Fatalf("second ops build: code %d\nstderr: %s", r.code, r.stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(work, "again.wasm")); !bytes.Equal(first, again) {
		t.Error("building the same source twice gave different modules")
	}
}

// TestE2EReadmeToolOp: the tool op the README shows is a whole op of at
// most 30 lines, and it builds in a module ops new wrote.
func TestE2EReadmeToolOp(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "This whole file is one:")
	_, after, ok2 := strings.Cut(after, "```go\n")
	src, _, ok3 := strings.Cut(after, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no tool op after \"This whole file is one:\"")
	}
	if n := strings.Count(src, "\n"); n > 30 {
		t.Errorf("the README's tool op has %d lines, more than 30", n)
	}
	work := t.TempDir()
	env := map[string]string{"GOPROXY": "off", "GOFLAGS": "-mod=readonly", "GOWORK": "off"}
	if r := exeIn(t, work, 60*time.Second, env, "ops", "new", "words"); r.code != 0 {
		t.Fatalf("ops new: %s", r.stderr)
	}
	mod := filepath.Join(work, "words")
	os.Remove(filepath.Join(mod, "main_test.go"))
	if err := os.WriteFile(filepath.Join(mod, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := exeIn(t, mod, 5*time.Minute, env, "ops", "build")
	if r.code != 0 || !strings.Contains(r.stdout, "words 1.0.0 (tools count_words)") {
		t.Fatalf("ops build of the README's op: code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestOpsNewAndBuildRefuse: the mistakes a new author makes get one line
// saying what to do.
func TestOpsNewAndBuildRefuse(t *testing.T) {
	home := t.TempDir()
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	noMod := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ops", "new"}, exitUsage, "NAME"},
		{[]string{"ops", "new", "../evil"}, exitFailure, `"../evil" cannot name an op`},
		{[]string{"ops", "new", "-x"}, exitUsage, "flag provided but not defined"},
		{[]string{"ops", "new", "myop", full}, exitFailure, "exists and is not empty"},
		{[]string{"ops", "build", noMod}, exitFailure, "is not inside a Go module (no go.mod): create one with wagent ops new NAME"},
	}
	for _, tc := range tests {
		r := wag(t, home, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("wagent %v: code %d, stderr %q; want code %d and one line containing %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

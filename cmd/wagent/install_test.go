//go:build e2e

package main

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's install line, go install
// github.com/wagent/wagent/cmd/wagent@VERSION, works from the module as
// the Go proxy would serve it: only the files git tracks (so nothing the
// build embeds may be ignored or generated), no replace directives, and
// wagent version then prints the module's version from the build info.
// The module is served from a file proxy built here; its dependencies
// come from the local module cache, so nothing is downloaded.
func TestGoInstallFromTheModule(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mod), "\nreplace ") || strings.Contains(string(mod), "\nreplace(") {
		t.Fatal("go.mod has a replace directive: go install …@latest refuses a module with one")
	}
	ls := exec.Command("git", "ls-files", "-z")
	ls.Dir = root
	files, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files (the test needs git and the repository): %v", err)
	}

	const version = "v0.0.0-20261206000000-000000000000"
	prefix := "github.com/wagent/wagent@" + version + "/"
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(prefix + f)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	dir := filepath.Join(proxy, "github.com", "wagent", "wagent", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-12-06T00:00:00Z"}`),
		version + ".mod":  mod,
		version + ".zip":  zb.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	gobin := t.TempDir()
	install := exec.Command("go", "install", "github.com/wagent/wagent/cmd/wagent@latest")
	install.Dir = t.TempDir() // outside the module, as a user runs it
	install.Env = append(os.Environ(), "GOBIN="+gobin, "GOPROXY=file://"+filepath.ToSlash(proxy), "GOSUMDB=off",
		"GOTOOLCHAIN=local", "GONOSUMDB=", "GOPRIVATE=")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install …@latest: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "wagent"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "wagent "+version+" (") {
		t.Errorf("wagent version = %q, %v; want the module's version %s", out, err, version)
	}
}

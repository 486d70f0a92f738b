package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/tools/mcp"
)

// A process that runs sessions others create reads a session's project
// folder (agents-md mounts it and hands AGENTS.md to the model, whose
// answer the creator reads) only under WAGENT_PROJECT_ROOTS: a creator
// cannot name any folder of the worker's machine. A process of one user
// mounts the folder it was started in, as before.
func TestSharedProcessReadsOnlyItsProjectRoots(t *testing.T) {
	base := t.TempDir()
	projects := filepath.Join(base, "projects")
	inside := filepath.Join(projects, "app")
	outside := filepath.Join(base, "secret")
	for _, d := range []string{inside, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "AGENTS.md"), []byte("notes"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(projects, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"WAGENT_HOME": base, "WAGENT_CACHE_DIR": filepath.Join(os.TempDir(), "wagent-cmd-test-cache")}
	env := &cliEnv{getenv: func(k string) string { return vars[k] }, stderr: os.Stderr}
	w, err := startRuntime(context.Background(), env, builtins.CoreModule())
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	mountsAgentsMD := func(shared bool, dir string) bool {
		t.Helper()
		o := &owner{env: env, mode: modeDrive, w: w, pipes: map[string]*loadedPipeline{}, mcp: mcp.NewHub(), shared: shared}
		l, err := o.pipeline(context.Background(), settings{Provider: "openai", Model: "m", Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range l.Ops {
			if op.Manifest().Name == "agents-md" {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name   string
		shared bool
		roots  string
		dir    string
		want   bool
	}{
		{"one user's own process", false, "", outside, true},
		{"shared, no roots", true, "", inside, false},
		{"shared, under a root", true, projects, inside, true},
		{"shared, the root itself", true, projects, projects, true},
		{"shared, outside the roots", true, projects, outside, false},
		{"shared, a link under a root to outside", true, projects, link, false},
		{"shared, .. out of a root", true, projects, filepath.Join(inside, "..", "..", "secret"), false},
		{"shared, a root's prefix is not a root", true, projects, projects + "-other", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars["WAGENT_PROJECT_ROOTS"] = c.roots
			if got := mountsAgentsMD(c.shared, c.dir); got != c.want {
				t.Errorf("agents-md in the pipeline: %v, want %v", got, c.want)
			}
		})
	}
}

// The files a session names (its pipeline, its script) are read by a
// shared process only under WAGENT_PROJECT_ROOTS, or from a worker's
// --pipelines folder: a creator could otherwise run a pipeline file of the
// worker's machine with the mounts it grants, or have an error quote the
// first line of any file.
func TestSharedProcessReadsSessionFilesOnlyUnderRoots(t *testing.T) {
	base := t.TempDir()
	projects := filepath.Join(base, "projects")
	if err := os.MkdirAll(projects, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(base, "credentials")
	os.WriteFile(secret, []byte("aws_secret_access_key=TOPSECRET\n"), 0o600)
	inside := filepath.Join(projects, "p.yaml")
	os.WriteFile(inside, []byte("ops:\n  - use: builtin:max-turns\n"), 0o644)
	vars := map[string]string{"WAGENT_HOME": base, "WAGENT_PROJECT_ROOTS": projects}
	env := &cliEnv{getenv: func(k string) string { return vars[k] }, stderr: os.Stderr}
	for _, c := range []struct {
		name      string
		shared    bool
		pipelines string
		s         settings
		refuse    bool
	}{
		{"a script outside the roots", true, "", settings{Provider: "script", Script: secret}, true},
		{"a pipeline outside the roots", true, "", settings{Provider: "openai", Model: "m", Pipeline: secret}, true},
		{"a pipeline under a root", true, "", settings{Provider: "openai", Model: "m", Pipeline: inside}, false},
		{"a worker with --pipelines", true, projects, settings{Provider: "script", Script: secret}, false},
		{"one user's own process", false, "", settings{Provider: "script", Script: secret}, false},
	} {
		o := &owner{env: env, shared: c.shared, pipelinesDir: c.pipelines}
		err := o.sessionFiles(c.s)
		if (err != nil) != c.refuse || err != nil && (strings.Contains(err.Error(), "TOPSECRET") || !strings.Contains(err.Error(), "WAGENT_PROJECT_ROOTS")) {
			t.Errorf("%s: err = %v, want refused %v", c.name, err, c.refuse)
		}
	}
}

// A project folder whose name has a colon cannot be written as a mount:
// the session runs without agents-md instead of not loading at all.
func TestProjectDirWithAColon(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a:b")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, op := range builtins.DefaultPipelineIn("", dir).Ops {
		if op.Use == "builtin:agents-md" {
			t.Fatalf("agents-md mounts %v", op.Mounts)
		}
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/tools/mcp"
)

// attackEnv builds a shared owner's environment for the attacks below.
func attackEnv(t *testing.T) (base, projects, outside string, vars map[string]string, env *cliEnv, w *warmRuntime) {
	t.Helper()
	base = t.TempDir()
	projects = filepath.Join(base, "projects")
	outside = filepath.Join(base, "secret")
	for _, d := range []string{filepath.Join(projects, "app"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "AGENTS.md"), []byte("TOP SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(projects, "app", "AGENTS.md"), []byte("harmless notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	vars = map[string]string{"WAGENT_HOME": base, "WAGENT_CACHE_DIR": filepath.Join(os.TempDir(), "wagent-cmd-test-cache"), "WAGENT_PROJECT_ROOTS": projects}
	env = &cliEnv{getenv: func(k string) string { return vars[k] }, stderr: os.Stderr}
	var err error
	if w, err = startRuntime(context.Background(), env, builtins.CoreModule()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return
}

// agentsMDText runs the loaded pipeline's agents-md op's contribute hook
// and returns the prompt parts it hands the model ("" when there is no
// agents-md).
func agentsMDText(t *testing.T, l *pipeline.Loaded) string {
	t.Helper()
	for _, op := range l.Ops {
		if op.Manifest().Name != "agents-md" {
			continue
		}
		eff, err := op.Handle(context.Background(), &hostabi.View{Hook: hostabi.HookContribute, Session: "s1", Op: "agents-md", Turn: 1, Step: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, e := range eff {
			if e.Kind == hostabi.KindPromptPart {
				b.WriteString(e.Text)
			}
		}
		return b.String()
	}
	return ""
}

// ATTACK: a shared process without --pipelines (serve --listen, a worker
// started without it) loads whatever pipeline file the session's creator
// recorded, and honours that file's own mounts: a pipeline file anywhere
// on the machine (one the creator could write in /tmp, or another user's
// with a relative mount of its project) has agents-md read a folder
// outside WAGENT_PROJECT_ROOTS, with the session's Dir empty or refused.
func TestSharedProcessPipelineFileMountsOutsideProjectRoots(t *testing.T) {
	base, _, outside, _, env, w := attackEnv(t)
	// A pipeline file the worker's admin did not write, e.g. in /tmp.
	pipe := filepath.Join(base, "tmp", "evil.yaml")
	os.MkdirAll(filepath.Dir(pipe), 0o755)
	if err := os.WriteFile(pipe, []byte("ops:\n  - use: builtin:agents-md\n    grants:\n      mounts: [\""+outside+":/project:ro\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &owner{env: env, mode: modeDrive, w: w, pipes: map[string]*loadedPipeline{}, mcp: mcp.NewHub(), shared: true}
	l, err := o.pipeline(context.Background(), settings{Provider: "openai", Model: "m", Pipeline: pipe, Dir: outside})
	if err != nil {
		if !strings.Contains(err.Error(), "WAGENT_PROJECT_ROOTS") {
			t.Fatal(err)
		}
		return // refused: the file is not under the roots
	}
	if got := agentsMDText(t, l); strings.Contains(got, "TOP SECRET") {
		t.Errorf("a shared process mounted %s (outside WAGENT_PROJECT_ROOTS) through the creator's pipeline file: the model is handed %q", outside, got)
	}
}

// What held: odd roots and dirs. A relative Dir (resolved against the
// worker's own working directory) is not under an absolute root; "." and
// empty entries among the roots; a root that does not exist; a Dir with a
// colon (the mount string would not parse: the session must not fail to
// load, it should just go without agents-md or mount it).
func TestSharedProcessProjectDirOddPaths(t *testing.T) {
	base, projects, outside, vars, env, _ := attackEnv(t)
	t.Chdir(base)
	colon := filepath.Join(projects, "a:b")
	os.MkdirAll(colon, 0o755)
	sep := string(filepath.ListSeparator)
	for _, c := range []struct {
		name, roots, dir, want string
	}{
		{"relative dir, absolute root", projects, "secret", ""},
		{"relative dir escaping a relative root", "projects", "projects/../secret", ""},
		{"empty entries", sep + sep + projects + sep, outside, ""},
		{"a root that is missing", filepath.Join(base, "nope"), outside, ""},
		{"dot-dot in the root", filepath.Join(projects, "..", "projects"), filepath.Join(projects, "app"), filepath.Join(projects, "app")},
		{"nul in dir", projects, projects + "/app\x00/../../secret", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars["WAGENT_PROJECT_ROOTS"] = c.roots
			if got := projectDir(env, c.dir); got != c.want {
				t.Errorf("projectDir(%q) with roots %q = %q, want %q", c.dir, c.roots, got, c.want)
			}
		})
	}
	vars["WAGENT_PROJECT_ROOTS"] = projects
	// A folder with a colon under a root: the mount "DIR:/project:ro" does
	// not parse, and the session's pipeline fails to load at all.
	_, _, _, _, _, w := attackEnv(t)
	o := &owner{env: env, mode: modeDrive, w: w, pipes: map[string]*loadedPipeline{}, mcp: mcp.NewHub(), shared: true}
	if _, err := o.pipeline(context.Background(), settings{Provider: "openai", Model: "m", Dir: colon}); err != nil {
		t.Errorf("a project folder with a colon in its name fails the session's pipeline: %v", err)
	}
}

// ATTACK: a shared process (serve --listen; a worker without --pipelines)
// reads the script and pipeline files the creator's settings name, any
// file of its machine, and its error on one that does not parse quotes
// the file's first line back to the creator: the first line of a file
// only the serving user can read (a credentials file, /etc/shadow when
// root) goes to whoever holds the token.
func TestSharedProcessErrorsQuoteFilesItReadForTheCreator(t *testing.T) {
	base, _, _, _, env, w := attackEnv(t)
	secret := filepath.Join(base, "credentials")
	if err := os.WriteFile(secret, []byte("aws_secret_access_key=TOPSECRET123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &owner{env: env, mode: modeDrive, w: w, pipes: map[string]*loadedPipeline{}, mcp: mcp.NewHub(), shared: true}
	for _, set := range []string{
		`{"provider":"script","script":"` + secret + `"}`,
		`{"provider":"openai","model":"m","pipeline":"` + secret + `"}`,
	} {
		_, err := o.prepare(context.Background(), &server.CreateRequest{Settings: []byte(set)})
		if err != nil && strings.Contains(err.Error(), "TOPSECRET123") {
			t.Errorf("settings %s: the creator is told the file's contents: %v", set, err)
		}
	}
}

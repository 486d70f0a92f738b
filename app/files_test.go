package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/wasmhost"
)

// testCacheDir is one compile cache for the whole test binary: modules
// compile once.
var testCacheDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "wagent-app-cache-")
	if err != nil {
		panic(err)
	}
	testCacheDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// driveNode opens a node that runs sessions (it loads their pipelines)
// over an in-memory log, closed when the test ends.
func driveNode(t *testing.T, o Options) *Node {
	t.Helper()
	o.Log, o.Drive = store.NewMemory(), true
	o.RuntimeOptions = append(o.RuntimeOptions, wasmhost.WithCacheDir(testCacheDir))
	if o.Warn == nil {
		o.Warn = func(msg string) { t.Log(msg) }
	}
	n, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// A restricted principal's session (a remote client's, a worker's of a
// shared store) reads its project folder (agents-md mounts it and hands
// AGENTS.md to the model, whose answer the creator reads) only under the
// node's project roots: a creator cannot name any folder of the node's
// machine. The local user's session mounts the folder it was started in.
func TestRestrictedPrincipalReadsOnlyProjectRoots(t *testing.T) {
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
	mountsAgentsMD := func(pol Policy, roots, dir string) bool {
		t.Helper()
		vars := map[string]string{"WAGENT_HOME": base, "WAGENT_PROJECT_ROOTS": roots}
		n := driveNode(t, Options{Getenv: func(k string) string { return vars[k] }})
		l, err := n.pipeline(context.Background(), Settings{Provider: "openai", Model: "m", Dir: dir}, pol)
		if err != nil {
			t.Fatal(err)
		}
		// The default's files and shell mount the same folder read-write:
		// where agents-md may not read, they may not write.
		ops := map[string]bool{}
		for _, op := range l.Ops {
			ops[op.Manifest().Name] = true
		}
		if ops["files"] != ops["agents-md"] || ops["shell"] && !ops["files"] {
			t.Errorf("agents-md %v, files %v, shell %v: the folder is opened read-write where it may not be read", ops["agents-md"], ops["files"], ops["shell"])
		}
		return ops["agents-md"]
	}
	restricted := Policy{}
	for _, c := range []struct {
		name  string
		pol   Policy
		roots string
		dir   string
		want  bool
	}{
		{"the local user", DefaultPolicy(Local), "", outside, true},
		{"restricted, no roots", restricted, "", inside, false},
		{"restricted, under a root", restricted, projects, inside, true},
		{"restricted, the root itself", restricted, projects, projects, true},
		{"restricted, outside the roots", restricted, projects, outside, false},
		{"restricted, a link under a root to outside", restricted, projects, link, false},
		{"restricted, .. out of a root", restricted, projects, filepath.Join(inside, "..", "..", "secret"), false},
		{"restricted, a root's prefix is not a root", restricted, projects, projects + "-other", false},
		{"a remote client's default policy", DefaultPolicy(Remote), projects, outside, false},
		{"a worker's default policy", DefaultPolicy(Worker), projects, outside, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mountsAgentsMD(c.pol, c.roots, c.dir); got != c.want {
				t.Errorf("agents-md in the pipeline: %v, want %v", got, c.want)
			}
		})
	}
}

// A restricted principal gets the default pipeline's parts, never fetch
// hosts of its choosing: fetch's reads run unasked, from this machine.
func TestRestrictedPrincipalGrantsNoFetchHosts(t *testing.T) {
	vars := map[string]string{"WAGENT_HOME": t.TempDir()}
	n := driveNode(t, Options{Getenv: func(k string) string { return vars[k] }})
	s := Settings{Provider: "openai", Model: "m", Defaults: &builtins.Parts{Fetch: []string{"*"}}}
	if err := n.sessionFiles(s, Policy{}); ReasonOf(err) != Forbidden || !strings.Contains(err.Error(), "defaults.fetch") {
		t.Errorf("create: %v, want forbidden naming defaults.fetch", err)
	}
	if _, err := n.pipeline(context.Background(), s, Policy{}); ReasonOf(err) != Forbidden {
		t.Errorf("load: %v, want forbidden", err)
	}
	l, err := n.pipeline(context.Background(), s, DefaultPolicy(Local))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(l.Ops, func(o *wasmhost.Op) bool { return o.Manifest().Name == "fetch" }) {
		t.Error("the local user's fetch hosts gave no fetch op")
	}
}

// The files a session names (its pipeline, its script) are read for a
// restricted principal only under the project roots, or from a worker's
// --pipelines folder: a creator could otherwise run a pipeline file of the
// node's machine with the mounts it grants, or have an error quote the
// first line of any file.
func TestRestrictedPrincipalReadsSessionFilesOnlyUnderRoots(t *testing.T) {
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
	restricted := Policy{}
	for _, c := range []struct {
		name      string
		pol       Policy
		pipelines string
		s         Settings
		refuse    bool
	}{
		{"a script outside the roots", restricted, "", Settings{Provider: "script", Script: secret}, true},
		{"a pipeline outside the roots", restricted, "", Settings{Provider: "openai", Model: "m", Pipeline: secret}, true},
		{"a pipeline under a root", restricted, "", Settings{Provider: "openai", Model: "m", Pipeline: inside}, false},
		{"a pipeline registered with the node", restricted, "", Settings{Provider: "openai", Model: "m", Pipeline: "named"}, false},
		{"a worker with --pipelines", restricted, projects, Settings{Provider: "script", Script: secret}, false},
		{"the local user", DefaultPolicy(Local), "", Settings{Provider: "script", Script: secret}, false},
	} {
		n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(k string) string { return vars[k] }, PipelinesDir: c.pipelines,
			Pipelines: map[string]PipelineSource{"named": {YAML: []byte("ops:\n  - use: builtin:max-turns\n")}}})
		if err != nil {
			t.Fatal(err)
		}
		err = n.sessionFiles(c.s, c.pol)
		if (err != nil) != c.refuse || err != nil && (strings.Contains(err.Error(), "TOPSECRET") || !strings.Contains(err.Error(), "WAGENT_PROJECT_ROOTS") || ReasonOf(err) != Forbidden) {
			t.Errorf("%s: err = %v, want refused %v", c.name, err, c.refuse)
		}
		n.Close(context.Background())
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
		if len(op.Mounts) > 0 {
			t.Errorf("%s mounts %v", op.Use, op.Mounts)
		}
	}
}

// A session's creator records the pipeline and script paths; a worker with
// --pipelines DIR looks them up by name in DIR. A recorded name that is
// "..", "." or "/" must not lead to DIR's parent or to DIR itself: it is
// refused with one line naming it.
func TestInDirStaysInFolder(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"..", "/x/..", "x/../..", ".", "/", "/x/."} {
		for _, in := range []Settings{{Pipeline: p}, {Script: p}} {
			_, err := in.inDir(dir)
			want := fmt.Sprintf("the session's pipeline %q names no file to look up in --pipelines %s", p, dir)
			if in.Script != "" {
				want = fmt.Sprintf("the session's script %q names no file to look up in --pipelines %s", p, dir)
			}
			if err == nil || err.Error() != want {
				t.Errorf("inDir(%+v): %v, want %s", in, err, want)
			}
		}
	}
	s, err := Settings{Pipeline: "/elsewhere/agent.yaml", Script: "../s.json"}.inDir(dir)
	if err != nil || s.Pipeline != filepath.Join(dir, "agent.yaml") || s.Script != filepath.Join(dir, "s.json") {
		t.Errorf("inDir: %+v, %v", s, err)
	}
}

// attackDirs makes the folders of the attacks below: a project root
// holding a harmless AGENTS.md and, outside it, a secret one. getenv is
// the node's environment, with the roots set.
func attackDirs(t *testing.T) (base, projects, outside string, getenv func(string) string) {
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
	vars := map[string]string{"WAGENT_HOME": base, "WAGENT_PROJECT_ROOTS": projects}
	return base, projects, outside, func(k string) string { return vars[k] }
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

// ATTACK: a node that runs sessions others create (serve --listen, a
// worker started without --pipelines) loads whatever pipeline file the
// session's creator recorded, and honours that file's own mounts: a
// pipeline file anywhere on the machine (one the creator could write in
// /tmp, or another user's with a relative mount of its project) has
// agents-md read a folder outside the project roots, with the session's
// Dir empty or refused. Neither opening such a session nor creating one
// may load it.
func TestRestrictedPipelineFileMountsOutsideProjectRoots(t *testing.T) {
	base, _, outside, getenv := attackDirs(t)
	// A pipeline file the node's admin did not write, e.g. in /tmp.
	pipe := filepath.Join(base, "tmp", "evil.yaml")
	os.MkdirAll(filepath.Dir(pipe), 0o755)
	if err := os.WriteFile(pipe, []byte("ops:\n  - use: builtin:agents-md\n    grants:\n      mounts: [\""+outside+":/project:ro\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(what string, n *Node, s Settings, err error) {
		t.Helper()
		if err != nil {
			if !strings.Contains(err.Error(), "WAGENT_PROJECT_ROOTS") || ReasonOf(err) != Forbidden {
				t.Errorf("%s: %v", what, err)
			}
			return // refused: the file is not under the roots
		}
		l, err := n.pipeline(context.Background(), s, n.policyOf(s))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := agentsMDText(t, l); strings.Contains(got, "TOP SECRET") {
			t.Errorf("%s: a restricted session mounted %s (outside the project roots) through the creator's pipeline file: the model is handed %q", what, outside, got)
		}
	}
	s := Settings{Version: SettingsVersion, Provider: "openai", Model: "m", Pipeline: pipe, Dir: outside}
	for _, c := range []struct {
		name string
		o    Options
		by   string
	}{
		{"a remote client's session", Options{Exposed: true}, "remote"},
		{"an old session (no principal) on an exposed node", Options{Exposed: true}, ""},
		{"a shared store's session claiming the local user", Options{SharedLog: true}, "local"},
	} {
		c.o.Getenv = getenv
		n := driveNode(t, c.o)
		s.By = c.by
		raw, _ := json.Marshal(s)
		_, err := n.Resolve(context.Background(), "s1", &event.SessionCreated{Settings: raw})
		check("open: "+c.name, n, s, err)
	}
	n := driveNode(t, Options{Getenv: getenv, Exposed: true})
	raw, _ := json.Marshal(Settings{Provider: "openai", Model: "m", Pipeline: pipe, Dir: outside})
	_, err := n.Prepare(context.Background(), Remote, Request{Settings: raw})
	check("create by a remote client", n, Settings{Provider: "openai", Model: "m", Pipeline: pipe, Dir: outside, By: "remote"}, err)
}

// What held: odd roots and dirs. A relative Dir (resolved against the
// node's own working directory) is not under an absolute root; "." and
// empty entries among the roots; a root that does not exist; a Dir with a
// colon (the mount string would not parse: the session must not fail to
// load, it should just go without agents-md or mount it).
func TestRestrictedProjectDirOddPaths(t *testing.T) {
	base, projects, outside, getenv := attackDirs(t)
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
			// The roots as a node reads them from WAGENT_PROJECT_ROOTS.
			if got := underRoots(filepath.SplitList(c.roots), c.dir); got != c.want {
				t.Errorf("underRoots(%q, %q) = %q, want %q", c.roots, c.dir, got, c.want)
			}
		})
	}
	// A folder with a colon under a root: the mount "DIR:/project:ro"
	// does not parse, and the session's pipeline must still load.
	n := driveNode(t, Options{Getenv: getenv})
	if _, err := n.pipeline(context.Background(), Settings{Provider: "openai", Model: "m", Dir: colon}, Policy{}); err != nil {
		t.Errorf("a project folder with a colon in its name fails the session's pipeline: %v", err)
	}
}

// ATTACK: a node that runs sessions others create (serve --listen; a
// worker without --pipelines) reads the script and pipeline files the
// creator's settings name, any file of its machine, and its error on one
// that does not parse quotes the file's first line back to the creator:
// the first line of a file only the serving user can read (a credentials
// file, /etc/shadow when root) goes to whoever holds the token.
func TestRestrictedErrorsDoNotQuoteFilesForTheCreator(t *testing.T) {
	base, _, _, getenv := attackDirs(t)
	secret := filepath.Join(base, "credentials")
	if err := os.WriteFile(secret, []byte("aws_secret_access_key=TOPSECRET123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exposed := driveNode(t, Options{Getenv: getenv, Exposed: true})
	shared := driveNode(t, Options{Getenv: getenv, SharedLog: true})
	for _, set := range []string{
		`{"provider":"script","script":"` + secret + `"}`,
		`{"provider":"openai","model":"m","pipeline":"` + secret + `"}`,
	} {
		if _, err := exposed.Prepare(context.Background(), Remote, Request{Settings: []byte(set)}); err != nil && strings.Contains(err.Error(), "TOPSECRET123") {
			t.Errorf("create %s by a remote client: the creator is told the file's contents: %v", set, err)
		}
		if _, err := shared.Prepare(context.Background(), Local, Request{Settings: []byte(set)}); err != nil && strings.Contains(err.Error(), "TOPSECRET123") {
			t.Errorf("create %s on a shared store: the creator is told the file's contents: %v", set, err)
		}
		// The same settings, recorded by a remote client (an import) and
		// opened.
		recorded := strings.TrimSuffix(set, "}") + `,"v":1,"by":"remote"}`
		if _, err := exposed.Resolve(context.Background(), "s1", &event.SessionCreated{Settings: []byte(recorded)}); err != nil && strings.Contains(err.Error(), "TOPSECRET123") {
			t.Errorf("open %s: the creator is told the file's contents: %v", recorded, err)
		}
	}
}

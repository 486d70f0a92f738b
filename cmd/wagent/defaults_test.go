package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// firstHeader is a session's first request header.
func firstHeader(t *testing.T, evs []store.Event) event.RequestHeader {
	t.Helper()
	for _, e := range evs {
		if e.Type == event.EvRequestHeader {
			var h event.RequestHeader
			if err := json.Unmarshal(e.Data, &h); err != nil {
				t.Fatal(err)
			}
			return h
		}
	}
	t.Fatal("no request header")
	return event.RequestHeader{}
}

// lastHeader is a session's last request header.
func lastHeader(t *testing.T, evs []store.Event) event.RequestHeader {
	t.Helper()
	slices.Reverse(evs)
	return firstHeader(t, evs)
}

func toolNames(h event.RequestHeader) []string {
	var out []string
	for _, tl := range h.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func partOf(h event.RequestHeader, op string) (event.Contribution, bool) {
	for _, p := range h.PromptParts {
		if p.Op == op {
			return p, true
		}
	}
	return event.Contribution{}, false
}

var codingTools = []string{"read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "shell"}

// Run in a project's folder with no pipeline, wagent is a coding agent on
// it: the file tools and a shell of a few commands, a system prompt that
// says so, the project's AGENTS.md; no fetch until the config grants a
// host. The shell's commands and writes are asked, reads are not.
func TestDefaultPipelineIsACodingAgentOnTheFolder(t *testing.T) {
	project := t.TempDir()
	writeFile(t, project, "AGENTS.md", "Always run the linter.\n")
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	t.Chdir(project)
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "XDG_CONFIG_HOME": keyedConfigHome(t)}
	r := wagIn(t, env, "", "run", "--session", "d", "--script", script, "hi")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "read-write") {
		t.Errorf("a project folder got a notice: %s", r.stderr)
	}
	h := firstHeader(t, events(t, home, "d"))
	if d := cmp.Diff(codingTools, toolNames(h)); d != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", d)
	}
	sys, ok := partOf(h, "prompt")
	if !ok {
		t.Fatalf("no system prompt part in %+v", h.PromptParts)
	}
	for _, want := range []string{project, "/work", "read_file", "write_file and edit_file", "waits for the person", "git diff", "Read the code before you change it"} {
		if !strings.Contains(sys.Text, want) {
			t.Errorf("the system prompt does not say %q:\n%s", want, sys.Text)
		}
	}
	if strings.Contains(sys.Text, "fetch") {
		t.Errorf("the system prompt offers fetch, which no host was granted for:\n%s", sys.Text)
	}
	if a, ok := partOf(h, "agents-md"); !ok || !strings.Contains(a.Text, "Always run the linter") {
		t.Errorf("AGENTS.md did not reach the request: %+v", h.PromptParts)
	}
	for _, tl := range h.Tools {
		if tl.Name == "shell" && !strings.Contains(tl.Description, "git status") {
			t.Errorf("the shell tool does not name its commands: %s", tl.Description)
		}
	}
}

// Each part of the built-in pipeline turns off with the config's defaults
// key, and fetch turns on with hosts; the session records what it got, so
// a later run of it builds the same pipeline whatever the config says by
// then.
func TestDefaultsConfigTurnsEachPartOff(t *testing.T) {
	project := t.TempDir()
	writeFile(t, project, "AGENTS.md", "Always run the linter.\n")
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	changelog, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "skills", "changelog"))
	t.Chdir(project)
	for _, tc := range []struct {
		name, yaml string
		tools      []string
		noPart     string
	}{
		{"files", "files: false", []string{"shell"}, ""},
		{"shell", "shell: false", codingTools[:6], ""},
		{"fetch on", "fetch: [pkg.go.dev]", append(slices.Clone(codingTools), "fetch"), ""},
		{"agents_md", "agents_md: false", codingTools, "agents-md"},
		{"system_prompt", "system_prompt: false", codingTools, "prompt"},
		{"skills", "skills: false", codingTools, "skills"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			cfg := writeFile(t, t.TempDir(), "config.yaml", "defaults: {"+tc.yaml+"}\n")
			env := map[string]string{"WAGENT_HOME": home, "WAGENT_CONFIG": cfg}
			if tc.name == "skills" { // a skill that would be offered
				env["WAGENT_SKILLS"] = t.TempDir()
				if err := os.CopyFS(filepath.Join(env["WAGENT_SKILLS"], "changelog"), os.DirFS(changelog)); err != nil {
					t.Fatal(err)
				}
			}
			r := wagIn(t, env, "", "run", "--session", "d", "--script", script, "hi")
			if r.code != exitOK {
				t.Fatalf("run: %d %s", r.code, r.stderr)
			}
			h := firstHeader(t, events(t, home, "d"))
			if d := cmp.Diff(tc.tools, toolNames(h)); d != "" {
				t.Errorf("tools mismatch (-want +got):\n%s", d)
			}
			if tc.noPart != "" {
				if p, ok := partOf(h, tc.noPart); ok {
					t.Errorf("the %s part is there: %+v", tc.noPart, p)
				}
			} else if _, ok := partOf(h, "prompt"); !ok && tc.name != "system_prompt" {
				t.Errorf("no system prompt part: %+v", h.PromptParts)
			}
			// The next run of the session, under a config without the key,
			// runs what the session recorded.
			os.WriteFile(cfg, []byte("{}\n"), 0o644)
			if r := wagIn(t, env, "", "run", "--session", "d", "--script", script, "again"); r.code != exitOK {
				t.Fatalf("run again: %d %s", r.code, r.stderr)
			}
			if d := cmp.Diff(tc.tools, toolNames(lastHeader(t, events(t, home, "d")))); d != "" {
				t.Errorf("the second run's tools mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// A key that is not a part, or a host fetch cannot be granted, is refused
// with the file and what to write.
func TestDefaultsConfigRefusesWhatIsNoPart(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"defaults: {shel: false}\n", `unknown key "shel"; known keys here: files, shell, fetch, agents_md, skills, system_prompt`},
		{"defaults: {fetch: [\"http://x\"]}\n", "defaults.fetch"},
	} {
		cfg := writeFile(t, t.TempDir(), "config.yaml", tc.yaml)
		r := wagIn(t, map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CONFIG": cfg}, "", "config", "show")
		if r.code == exitOK || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, cfg) {
			t.Errorf("%s: exit %d, stderr %q; want it to say %q", tc.yaml, r.code, r.stderr, tc.want)
		}
	}
}

// Started in the home directory, wagent does not hand the model the whole
// of it read-write: no file or shell tools, a notice saying why, the rest
// of the default as usual.
func TestDefaultPipelineDoesNotOpenTheHomeDirectory(t *testing.T) {
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(home)
	store := t.TempDir()
	env := map[string]string{"WAGENT_HOME": store, "XDG_CONFIG_HOME": keyedConfigHome(t)}
	r := wagIn(t, env, "", "run", "--session", "h", "--script", script, "hi")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "is your home directory"); n != 1 {
		t.Errorf("the notice is said %d times, want once:\n%s", n, r.stderr)
	}
	if strings.Contains(r.stdout, "home directory") {
		t.Errorf("the notice went to stdout: %s", r.stdout)
	}
	h := firstHeader(t, events(t, store, "h"))
	if got := toolNames(h); len(got) != 0 {
		t.Errorf("tools %v in the home directory, want none", got)
	}
	if sys, ok := partOf(h, "prompt"); !ok || !strings.Contains(sys.Text, "No folder is open to you") {
		t.Errorf("the system prompt does not say no folder is open: %+v", h.PromptParts)
	}
	var c event.SessionCreated
	json.Unmarshal(events(t, store, "h")[0].Data, &c)
	s, _ := app.ReadSettings(c.Settings)
	for _, op := range s.DefaultPipeline(os.Getenv).Ops {
		for _, m := range op.Mounts {
			if strings.HasSuffix(m, ":rw") {
				t.Errorf("%s mounts %s", op.Use, m)
			}
		}
	}
}

// The coding-agent example reads the project's AGENTS.md into the request.
func TestCodingAgentExampleReadsAgentsMD(t *testing.T) {
	project := t.TempDir()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "coding-agent", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, project, "agent.yaml", string(b))
	writeFile(t, project, "AGENTS.md", "Tabs, not spaces.\n")
	os.MkdirAll(filepath.Join(os.Getenv("HOME"), "go"), 0o755) // the example grants the module cache
	os.MkdirAll(filepath.Join(os.Getenv("HOME"), ".cache", "go-build"), 0o755)
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	t.Chdir(project)
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "XDG_CONFIG_HOME": keyedConfigHome(t)}
	r := wagIn(t, env, "", "run", "--session", "ex", "--pipeline", "agent.yaml", "--script", script, "hi")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	h := firstHeader(t, events(t, home, "ex"))
	if a, ok := partOf(h, "agents-md"); !ok || !strings.Contains(a.Text, "Tabs, not spaces.") {
		t.Errorf("AGENTS.md did not reach the request: %+v", h.PromptParts)
	}
}

// /skills answers with no skills folder, saying where to make one, and
// /help lists the op's commands with their arguments.
func TestSkillsCommandWithoutASkillsFolder(t *testing.T) {
	project := t.TempDir()
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	wagentBin(t) // built here, in the module
	t.Chdir(project)
	skills := filepath.Join(t.TempDir(), "no-such-skills")
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "XDG_CONFIG_HOME": keyedConfigHome(t), "WAGENT_SKILLS": skills, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	s := startScreen(t, env, "chat", "--session", "sk", "--script", script)
	s.waitFor(0, "session sk")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("/skills\r")
	s.waitFor(m, "No skills: there is no skills folder. Create "+skills)
	m = s.mark()
	s.typeKeys("/help\r")
	s.waitFor(m, "/skills [check]")
	s.waitFor(m, "/compact [TEXT]")
	if strings.Contains(s.text(), "no command /skills") {
		t.Errorf("/skills is no command:\n%s", s.text())
	}
}

// config show says which parts of the built-in pipeline a new session
// gets, and from where.
func TestConfigShowsTheDefaults(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "config.yaml", "defaults: {shell: false, fetch: [go.dev]}\n")
	got := configShow(t, map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CONFIG": cfg})["defaults"]
	if got.Value != "files, agents_md, skills, system_prompt; fetch: go.dev" || !strings.Contains(got.Source, cfg) {
		t.Errorf("defaults %+v", got)
	}
	got = configShow(t, map[string]string{"WAGENT_HOME": t.TempDir(), "XDG_CONFIG_HOME": keyedConfigHome(t)})["defaults"]
	if got.Value != "files, shell, agents_md, skills, system_prompt; fetch: off" {
		t.Errorf("defaults with no config %+v", got)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/event"
)

// wagIn runs the CLI in-process with the given environment (WAGENT_HOME
// and the compile cache added) and standard input.
func wagIn(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := map[string]string{"WAGENT_CACHE_DIR": cacheDir}
	for k, v := range env {
		e[k] = v
	}
	code := runWith(append([]string{"wagent"}, args...), strings.NewReader(stdin), &out, &errb, func(k string) string { return e[k] })
	return result{code, out.String(), errb.String()}
}

type shown map[string]struct{ Value, Source string }

func configShow(t *testing.T, env map[string]string, args ...string) shown {
	t.Helper()
	r := wagIn(t, env, "", append([]string{"config", "show", "--json"}, args...)...)
	if r.code != exitOK {
		t.Fatalf("config show %v: exit %d\n%s", args, r.code, r.stderr)
	}
	var s shown
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("config show --json: %v\n%s", err, r.stdout)
	}
	return s
}

const testConfig = `# a person's defaults
model: file-model
base_url: http://file.example/v1
api_key_env: FILE_KEY
pipeline: file.yaml
system: from the file
profiles:
  local:
    model: profile-model
    base_url: http://profile.example/v1
    api_key_env: PROFILE_KEY
    pipeline: profile.yaml
    system: from the profile
  bare: {}
prices:
  file-model: {input: 1, output: 2}
  "gpt-4o*": {input: 0.5, output: 1.5}
`

// Each setting comes from its flag, else its environment variable, else
// the chosen profile, else the file's top level.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgFile := writeFile(t, dir, "config.yaml", testConfig)
	keys := []struct {
		key, flag, env       string
		file, profile, flagV string
	}{
		{"model", "--model", "WAGENT_MODEL", "file-model", "profile-model", "flag-model"},
		{"base_url", "--base-url", "WAGENT_BASE_URL", "http://file.example/v1", "http://profile.example/v1", "http://flag.example/v1"},
		{"api_key_env", "--api-key-env", "WAGENT_API_KEY_ENV", "FILE_KEY", "PROFILE_KEY", "FLAG_KEY"},
		{"pipeline", "--pipeline", "WAGENT_PIPELINE", filepath.Join(dir, "file.yaml"), filepath.Join(dir, "profile.yaml"), "/flag.yaml"},
	}
	levels := []struct {
		name    string
		flag    bool
		env     bool
		profile string // --profile, or "" for none
		source  string
	}{
		{"file", false, false, "", "config " + cfgFile},
		{"profile beats file", false, false, "local", "profile local (" + cfgFile + ")"},
		{"env beats profile", false, true, "local", "$"},
		{"flag beats env", true, true, "local", "--"},
		{"a profile without the key falls back to the file", false, false, "bare", "config " + cfgFile},
	}
	for _, k := range keys {
		for _, l := range levels {
			t.Run(k.key+"/"+l.name, func(t *testing.T) {
				env := map[string]string{"WAGENT_CONFIG": cfgFile, "WAGENT_HOME": t.TempDir()}
				var args []string
				want := k.file
				switch {
				case l.flag:
					args, want = append(args, k.flag, k.flagV), k.flagV
				case l.env:
					want = "env-" + k.key
				case l.profile == "local":
					want = k.profile
				}
				if l.env {
					env[k.env] = "env-" + k.key
					if k.key == "pipeline" && !l.flag {
						env[k.env] = "/env.yaml"
						want = "/env.yaml"
					}
				}
				if l.profile != "" {
					args = append(args, "--profile", l.profile)
				}
				got := configShow(t, env, args...)[k.key]
				source := l.source
				switch source {
				case "$":
					source = "$" + k.env
				case "--":
					source = k.flag
				}
				if got.Value != want || got.Source != source {
					t.Errorf("%s = %q from %q, want %q from %q", k.key, got.Value, got.Source, want, source)
				}
			})
		}
	}
	// The profile itself: --profile, then $WAGENT_PROFILE, then profile:.
	withDefault := writeFile(t, dir, "default.yaml", testConfig+"profile: local\n")
	for _, tc := range []struct {
		env    map[string]string
		args   []string
		want   string
		source string
	}{
		{map[string]string{"WAGENT_CONFIG": withDefault}, nil, "local", "config " + withDefault},
		{map[string]string{"WAGENT_CONFIG": withDefault, "WAGENT_PROFILE": "bare"}, nil, "bare", "$WAGENT_PROFILE"},
		{map[string]string{"WAGENT_CONFIG": withDefault, "WAGENT_PROFILE": "bare"}, []string{"--profile", "local"}, "local", "--profile"},
	} {
		got := configShow(t, tc.env, tc.args...)["profile"]
		if got.Value != tc.want || got.Source != tc.source {
			t.Errorf("%v %v: profile %q from %q, want %q from %q", tc.env, tc.args, got.Value, got.Source, tc.want, tc.source)
		}
	}
}

// With no file, the defaults; the API key is masked, and named by the
// variable it came from.
func TestConfigShowDefaultsAndMasks(t *testing.T) {
	env := map[string]string{"XDG_CONFIG_HOME": keyedConfigHome(t), "OPENAI_API_KEY": "sk-test-0123456789abcdef"}
	r := wagIn(t, env, "", "config", "show")
	if r.code != exitOK {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"does not exist", "provider     openai", "https://api.openai.com/v1", "built-in", "set (24 characters, ends in …cdef)", "$OPENAI_API_KEY"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config show lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "0123456789") {
		t.Errorf("the key is shown:\n%s", r.stdout)
	}
	s := configShow(t, map[string]string{"XDG_CONFIG_HOME": keyedConfigHome(t)}, "--base-url", "http://me:hunter2@proxy.example/v1")
	if v := s["base_url"].Value; strings.Contains(v, "hunter2") || !strings.Contains(v, "me:xxxxx@proxy.example") {
		t.Errorf("base_url shown as %q", v)
	}
}

// A key the file does not know is refused with the file and line, and so
// is a value of the wrong kind, an unknown profile or a named file that is
// not there; nothing is created.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		args       []string
		code       int
		want       string
	}{
		{"unknown top key", "model: m\nmodle: x\n", nil, exitFailure, `config.yaml:2: unknown key "modle"; known keys here: provider, model`},
		{"unknown profile key", "profiles:\n  local:\n    modle: x\n", nil, exitFailure, `config.yaml:3: unknown key "modle"; known keys here: provider, model, base_url`},
		{"unknown price key", "prices:\n  m: {in: 1}\n", nil, exitFailure, `config.yaml:2: unknown key "in"; known keys here: input, output`},
		{"wrong kind", "profiles: [a, b]\n", nil, exitFailure, "config.yaml:1: cannot unmarshal !!seq into map"},
		{"price without output", "prices:\n  m: {input: 1}\n", nil, exitFailure, "prices: m needs input and output"},
		{"default profile missing", "profile: nope\n", nil, exitFailure, `profile: "nope" is not under profiles: there are none`},
		{"unknown provider in the file", "provider: opneai\n", nil, exitFailure, `unknown provider "opneai" from config `},
		{"unknown provider in a profile", "profiles:\n  local: {provider: olama}\n", []string{"--profile", "local"}, exitFailure, `unknown provider "olama" from profile local (`},
		{"unknown --provider", "model: m\n", []string{"--provider", "frob"}, exitUsage, `unknown provider "frob" from --provider: use openai, anthropic or script`},
		{"unknown --profile", "profiles:\n  local: {}\n", []string{"--profile", "prod"}, exitUsage, `no profile "prod" in`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, "config.yaml", tc.text)
			home := t.TempDir()
			for _, args := range [][]string{append([]string{"config", "show"}, tc.args...), append([]string{"run", "--script", testdata("plain-replies.yaml"), "hi"}, tc.args...)} {
				r := wagIn(t, map[string]string{"WAGENT_CONFIG": p, "WAGENT_HOME": home}, "", args...)
				if r.code != tc.code {
					t.Errorf("%v: exit %d, want %d\n%s", args, r.code, tc.code, r.stderr)
				}
				mustOneLine(t, r, tc.want)
			}
			if ids := sessions(t, home); len(ids) != 0 {
				t.Errorf("sessions written: %v", ids)
			}
		})
	}
	r := wagIn(t, map[string]string{"WAGENT_CONFIG": filepath.Join(dir, "missing.yaml")}, "", "config", "show")
	if r.code != exitFailure || !strings.Contains(r.stderr, "missing.yaml: no such file") {
		t.Errorf("a missing WAGENT_CONFIG: %d %s", r.code, r.stderr)
	}
}

// A new session records what the config says (never the key); resume
// needs no config; an explicit --profile on an existing session switches
// it, recorded as pipeline/changed.
func TestConfigReachesTheSession(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", "provider: script\nsystem: \"@sys.md\"\nprofiles:\n  other: {system: Be other.}\n")
	writeFile(t, dir, "sys.md", "You answer in haiku.\n")
	home := t.TempDir()
	env := map[string]string{"WAGENT_CONFIG": cfg, "WAGENT_HOME": home, "MY_KEY": "sk-secret"}
	r := wagIn(t, env, "", "run", "--session", "c", "--script", testdata("plain-replies.yaml"), "--api-key-env", "MY_KEY", "hi")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	evs := events(t, home, "c")
	if strings.Contains(string(evs[0].Data), "sk-secret") {
		t.Fatalf("the key was recorded: %s", evs[0].Data)
	}
	var created event.SessionCreated
	json.Unmarshal(evs[0].Data, &created)
	var s app.Settings
	json.Unmarshal(created.Settings, &s)
	wd, _ := os.Getwd()
	want := app.Settings{Version: app.SettingsVersion, By: "local", Provider: "script", Script: s.Script, APIKeyEnv: "MY_KEY", System: "You answer in haiku.", SystemSource: "config " + cfg + " @" + filepath.Join(dir, "sys.md"), Dir: wd}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("recorded settings mismatch (-want +got):\n%s", d)
	}
	// Later runs need no config.
	if r := wagIn(t, map[string]string{"WAGENT_HOME": home}, "", "run", "--session", "c", "again"); r.code != exitOK {
		t.Fatalf("run again without the config: %d %s", r.code, r.stderr)
	}
	if r := wagIn(t, env, "", "run", "--session", "c", "--profile", "other", "third"); r.code != exitOK {
		t.Fatalf("run --profile: %d %s", r.code, r.stderr)
	}
	var systems []string
	for _, e := range events(t, home, "c") {
		if e.Type == event.EvRequestHeader {
			var h event.RequestHeader
			json.Unmarshal(e.Data, &h)
			if len(h.PromptParts) == 0 {
				systems = append(systems, "none")
				continue
			}
			systems = append(systems, h.PromptParts[0].Text+" | "+h.PromptParts[0].Source)
		}
	}
	wantSys := []string{
		"You answer in haiku. | " + want.SystemSource,
		"You answer in haiku. | " + want.SystemSource,
		"Be other. | profile other (" + cfg + ")",
	}
	if d := cmp.Diff(wantSys, systems); d != "" {
		t.Errorf("system prompt per step mismatch (-want +got):\n%s", d)
	}
}

// echo hi | wagent run, wagent run - < file; no prompt and no terminal is
// a usage error that writes nothing.
func TestPromptFromStandardInput(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "XDG_CONFIG_HOME": keyedConfigHome(t)}
	script := testdata("plain-replies.yaml")
	if r := wagIn(t, env, "what is in the pipe?\n", "run", "--session", "p1", "--script", script); r.code != exitOK || !strings.Contains(r.stdout, "Hello from the script.") {
		t.Fatalf("piped: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := wagIn(t, env, "line one\nline two\n", "run", "--session", "p2", "--script", script, "-"); r.code != exitOK {
		t.Fatalf("run -: %d %s", r.code, r.stderr)
	}
	for id, want := range map[string]string{"p1": "what is in the pipe?", "p2": "line one\nline two"} {
		var got string
		for _, e := range events(t, home, id) {
			if e.Type == event.EvUserMessage {
				var m event.UserMessage
				json.Unmarshal(e.Data, &m)
				got = m.Content
			}
		}
		if got != want {
			t.Errorf("%s: user message %q, want %q", id, got, want)
		}
	}
	for _, args := range [][]string{{"run", "--script", script}, {"run", "--session", "p3", "--script", script}, {"run", "--script", script, "-"}} {
		r := wagIn(t, env, "", args...)
		if r.code != exitUsage {
			t.Errorf("%v with nothing on stdin: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
		mustOneLine(t, r, "prompt")
	}
	if ids := sessions(t, home); len(ids) != 2 {
		t.Errorf("sessions %v, want only p1 and p2", ids)
	}
	// An existing session goes on without a prompt (as resume does).
	if r := wagIn(t, env, "", "run", "--session", "p1"); r.code != exitOK {
		t.Errorf("run --session p1 with no prompt: %d %s", r.code, r.stderr)
	}
}

// --system TEXT|@FILE and the working directory's AGENTS.md and CLAUDE.md
// reach the request, and the header records each with its source.
func TestSystemPromptAndAgentsMD(t *testing.T) {
	project := t.TempDir()
	writeFile(t, project, "AGENTS.md", "Run make check before you commit.\n")
	writeFile(t, project, "CLAUDE.md", "Use British spelling.\n")
	sys := writeFile(t, t.TempDir(), "sys.md", "You are a careful reviewer.")
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	t.Chdir(project)
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "XDG_CONFIG_HOME": keyedConfigHome(t)}
	pipe := writeFile(t, t.TempDir(), "p.yaml", "ops:\n  - use: builtin:agents-md\n")
	for id, args := range map[string][]string{
		"default": {"--system", "@" + sys},
		"file":    {"--system", "Be brief.", "--pipeline", pipe},
	} {
		r := wagIn(t, env, "", append([]string{"run", "--session", id, "--script", script, "hi"}, args...)...)
		if r.code != exitOK {
			t.Fatalf("%s: %d %s", id, r.code, r.stderr)
		}
	}
	header := func(id string) event.RequestHeader {
		for _, e := range events(t, home, id) {
			if e.Type == event.EvRequestHeader {
				var h event.RequestHeader
				json.Unmarshal(e.Data, &h)
				return h
			}
		}
		t.Fatalf("%s: no request header", id)
		return event.RequestHeader{}
	}
	for id, wantSys := range map[string]event.Contribution{
		"default": {Op: "host", Source: "--system @" + sys, Text: "You are a careful reviewer."},
		"file":    {Op: "host", Source: "--system", Text: "Be brief."},
	} {
		h := header(id)
		// The default pipeline's own system prompt (the prompt op) is not
		// what this test is about.
		h.PromptParts = slices.DeleteFunc(h.PromptParts, func(p event.Contribution) bool { return p.Op == "prompt" })
		if len(h.PromptParts) < 3 {
			t.Fatalf("%s: prompt parts %+v", id, h.PromptParts)
		}
		if d := cmp.Diff(wantSys, h.PromptParts[0]); d != "" {
			t.Errorf("%s: system part mismatch (-want +got):\n%s", id, d)
		}
		a, c := h.PromptParts[1], h.PromptParts[2]
		if a.Op != "agents-md" || !strings.Contains(a.Text, "from AGENTS.md") || !strings.Contains(a.Text, "Run make check") ||
			c.Op != "agents-md" || !strings.Contains(c.Text, "from CLAUDE.md") || !strings.Contains(c.Text, "British spelling") {
			t.Errorf("%s: project parts %+v", id, h.PromptParts[1:])
		}
	}
}

func TestNewCommandsHaveExamples(t *testing.T) {
	for _, cmd := range [][]string{{"chat"}, {"config", "show"}} {
		r := wag(t, t.TempDir(), append(cmd, "--help")...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Example") {
			t.Errorf("%v --help: exit %d, no example:\n%s", cmd, r.code, r.stdout)
		}
	}
}

// The config file's store: is where every command goes when neither
// --store nor $WAGENT_STORE names one; a relative directory is the file's.
func TestConfigStore(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", "provider: script\nstore: team/store\n")
	home := t.TempDir()
	env := map[string]string{"WAGENT_CONFIG": cfg, "WAGENT_HOME": home}
	if r := wagIn(t, env, "", "run", "--session", "c", "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	if len(events(t, filepath.Join(dir, "team"), "c")) == 0 {
		t.Fatal("the session is not in the config's store")
	}
	if _, err := os.Stat(filepath.Join(home, "store")); err == nil {
		t.Error("the default store was created too")
	}
	// --store and $WAGENT_STORE come first.
	other := t.TempDir()
	for _, r := range []result{
		wagIn(t, env, "", "--store", other, "sessions"),
		wagIn(t, map[string]string{"WAGENT_CONFIG": cfg, "WAGENT_HOME": home, "WAGENT_STORE": other}, "", "sessions"),
	} {
		if r.code != exitOK || strings.Contains(r.stdout, "c ") || !strings.Contains(r.stdout, "no sessions yet") {
			t.Errorf("sessions in another store: %d %q %s", r.code, r.stdout, r.stderr)
		}
	}
	// ~/ is the home directory.
	userHome := t.TempDir()
	tilde := writeFile(t, dir, "tilde.yaml", "provider: script\nstore: ~/teamstore/store\n")
	if r := wagIn(t, map[string]string{"WAGENT_CONFIG": tilde, "WAGENT_HOME": home, "HOME": userHome}, "", "run", "--session", "h", "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
		t.Fatalf("run with store: ~/…: %d %s", r.code, r.stderr)
	}
	if len(events(t, filepath.Join(userHome, "teamstore"), "h")) == 0 {
		t.Fatal("the session is not in the store under the home directory")
	}
	// A bad store: in the file is the file's error, in one line.
	bad := writeFile(t, dir, "bad.yaml", "store: ftp://x\n")
	r := wagIn(t, map[string]string{"WAGENT_CONFIG": bad, "WAGENT_HOME": home}, "", "sessions")
	if r.code == exitOK || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("bad store in the config: %d %q", r.code, r.stderr)
	}
}

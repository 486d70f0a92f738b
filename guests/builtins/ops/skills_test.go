package ops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// testSkills is testdata/skills (see its README.md).
var testSkills, _ = filepath.Abs(filepath.Join("..", "..", "..", "testdata", "skills"))

func skillsView(hook hostabi.Hook, cfg map[string]any) *hostabi.View {
	if cfg == nil {
		cfg = map[string]any{}
	}
	if _, ok := cfg["dir"]; !ok {
		cfg["dir"] = testSkills
	}
	raw, _ := json.Marshal(cfg)
	return &hostabi.View{Hook: hook, Op: "skills", Config: raw, Session: "s", Turn: 1, Step: 1}
}

func skillsPrompt(t *testing.T, cfg map[string]any) (string, []string) {
	t.Helper()
	eff, err := pdk.Test(skillsView(hostabi.HookContribute, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	var prompt string
	var tools []string
	for _, e := range eff {
		switch e.Kind {
		case hostabi.KindPromptPart:
			prompt += e.Text
		case hostabi.KindTool:
			tools = append(tools, e.Tool.Name)
		}
	}
	return prompt, tools
}

func runSkillTool(t *testing.T, name, args string, cfg map[string]any) (string, bool) {
	t.Helper()
	v := skillsView(hostabi.HookTool, cfg)
	v.Tool = &hostabi.ToolView{Run: "c1", Calls: []hostabi.PendingCall{{ID: "c1", Name: name, Arguments: json.RawMessage(args), Owner: "skills", Decision: "allow"}}}
	eff, err := pdk.Test(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(eff) != 1 || eff[0].Kind != hostabi.KindResult {
		t.Fatalf("%s %s: effects %+v, want one result", name, args, eff)
	}
	return eff[0].Content, eff[0].IsError
}

// The front matter is YAML: block scalars (|- and >) are their text, not
// the indicator; optional fields are read; each folder is checked.
func TestSkillFrontMatterIsYAML(t *testing.T) {
	list := scan(testSkills)
	got := map[string]skill{}
	for _, s := range list {
		got[s.folder] = s
	}
	pdf := got["pdf-forms"]
	if want := "Fill in, check and flatten PDF forms.\nUse when the user hands over a PDF with form fields,\nor asks to extract the values already filled in."; pdf.description != want {
		t.Errorf("|- description %q", pdf.description)
	}
	if pdf.license != "Apache-2.0 (see LICENSE.txt)" || pdf.compatibility == "" || pdf.metadata["version"] != "1.2" || pdf.metadata["author"] != "forms-team" ||
		strings.Join(pdf.allowedTools, " ") != "Bash(python3:*) Read" || len(pdf.problems) != 0 {
		t.Errorf("pdf-forms %+v", pdf)
	}
	if want := "Write a changelog entry for a change in this repository, in the Keep a Changelog style. Use after a feature or fix is done and before it is merged.\n"; got["changelog"].description != want {
		t.Errorf("> description %q", got["changelog"].description)
	}
	for folder, want := range map[string]struct {
		unusable bool
		problem  string
	}{
		"brand-voice":    {false, "description is 1319 characters; the limit is 1024 (it is cut in the list)"},
		"web-research":   {false, `name "Web_Research" should be lowercase letters, digits and single hyphens, not at either end`},
		"broken-yaml":    {true, "not offered: the front matter is not YAML: line 2: found unexpected end of stream"},
		"no-description": {true, "not offered: description is missing or empty"},
	} {
		s := got[folder]
		if s.unusable != want.unusable || len(s.problems) != 1 || !strings.HasPrefix(s.problems[0], want.problem) {
			t.Errorf("%s: unusable %v, problems %q; want %v and %q", folder, s.unusable, s.problems, want.unusable, want.problem)
		}
	}
	for _, folder := range []string{"code-review", "release-notes", "changelog"} {
		if s := got[folder]; s.unusable || len(s.problems) != 0 {
			t.Errorf("%s: %+v", folder, s)
		}
	}
}

// Every rule of the specification, one case each.
func TestSkillChecks(t *testing.T) {
	for _, tc := range []struct {
		name, folder, front string
		want                []string
	}{
		{"valid", "ok", "name: ok\ndescription: d\n", nil},
		{"name missing", "fold", "description: d\n", []string{`name is missing; the folder's name "fold" is used`}},
		{"name too long", strings.Repeat("a", 65), "name: " + strings.Repeat("a", 65) + "\ndescription: d\n", []string{"name is 65 characters; the limit is 64"}},
		{"leading hyphen", "-a", "name: -a\ndescription: d\n", []string{`name "-a" should be`}},
		{"double hyphen", "a--b", "name: a--b\ndescription: d\n", []string{`name "a--b" should be`}},
		{"upper case", "ab", "name: Ab\ndescription: d\n", []string{`name "Ab" should be`}},
		{"not the folder", "other", "name: ok\ndescription: d\n", []string{`name "ok" is not the folder's name "other"`}},
		{"empty description", "ok", "name: ok\ndescription: \"  \"\n", []string{"not offered: description is missing or empty"}},
		{"compatibility too long", "ok", "name: ok\ndescription: d\ncompatibility: " + strings.Repeat("c", 501) + "\n", []string{"compatibility is 501 characters; the limit is 500"}},
		{"metadata not strings", "ok", "name: ok\ndescription: d\nmetadata:\n  tags: [a, b]\n", []string{"line 4: metadata.tags should be a string"}},
		{"allowed-tools as a list", "ok", "name: ok\ndescription: d\nallowed-tools: [Read, Grep]\n", []string{"line 3: allowed-tools should be one space-separated string, not a list"}},
		{"unknown field", "ok", "name: ok\ndescription: d\nversion: 2\n", []string{`line 3: unknown field "version"`}},
		{"description a list", "ok", "name: ok\ndescription: [a]\n", []string{"line 2: description should be a string", "not offered: description is missing or empty"}},
		{"not a mapping", "ok", "- a\n", []string{"not offered: the front matter is not a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := skill{folder: tc.folder}
			s.check([]byte("---\n" + tc.front + "---\nbody\n"))
			if len(s.problems) != len(tc.want) {
				t.Fatalf("problems %q, want %q", s.problems, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(s.problems[i], w) {
					t.Errorf("problem %d %q, want %q", i, s.problems[i], w)
				}
			}
		})
	}
	s := skill{folder: "x"}
	s.check([]byte("no front matter here"))
	if !s.unusable || len(s.problems) != 1 || !strings.Contains(s.problems[0], "no YAML front matter") {
		t.Errorf("no front matter: %+v", s)
	}
	s = skill{folder: "x"}
	s.check([]byte("\uFEFF---\r\nname: x\r\ndescription: \"a: b\"\r\n---\r\nBody\r\n"))
	if s.unusable || s.description != "a: b" || len(s.problems) != 0 {
		t.Errorf("BOM and CRLF: %+v", s)
	}
}

// The prompt lists every offered skill; a long description is cut, not
// the list; skills that cannot be offered are left out of it.
func TestSkillsPromptList(t *testing.T) {
	prompt, tools := skillsPrompt(t, nil)
	if d := cmp.Diff([]string{"load_skill", "read_skill_file"}, tools); d != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", d)
	}
	for _, want := range []string{
		"- pdf-forms: Fill in, check and flatten PDF forms. Use when the user hands over a PDF with form fields, or asks to extract the values already filled in.\n",
		"- changelog: Write a changelog entry",
		"- Web_Research: Search the web",
		"- code-review:", "- release-notes:", "- brand-voice: Write and review copy",
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "broken-yaml") || strings.Contains(prompt, "no-description") || strings.Contains(prompt, "|-") {
		t.Errorf("prompt shows what it should not:\n%s", prompt)
	}
	for _, l := range strings.Split(prompt, "\n") {
		if len(l) > 1024+len("- brand-voice: ") {
			t.Errorf("a line of %d bytes: the description is not cut", len(l))
		}
	}
	// A budget too small for the descriptions as they are: all of them get
	// shorter and every skill is still named.
	prompt, _ = skillsPrompt(t, map[string]any{"max_prompt_bytes": 700})
	if len(prompt) > 700+200 {
		t.Errorf("prompt of %d bytes with a budget of 700", len(prompt))
	}
	for _, name := range []string{"brand-voice", "changelog", "code-review", "pdf-forms", "release-notes", "Web_Research"} {
		if !strings.Contains(prompt, "- "+name+": ") {
			t.Errorf("with a small budget the list lost %s:\n%s", name, prompt)
		}
	}
	// Nothing mounted: nothing offered.
	if prompt, tools := skillsPrompt(t, map[string]any{"dir": filepath.Join(t.TempDir(), "none")}); prompt != "" || len(tools) != 0 {
		t.Errorf("no mount: %q %v", prompt, tools)
	}
}

// load_skill gives the body with the folder's path and its files;
// read_skill_file reads a file inside that folder and nothing outside it.
func TestSkillFiles(t *testing.T) {
	out, isErr := runSkillTool(t, "load_skill", `{"name":"pdf-forms"}`, nil)
	if isErr || !strings.HasPrefix(out, "Skill pdf-forms, in the folder "+filepath.Join(testSkills, "pdf-forms")+".") ||
		!strings.Contains(out, "  LICENSE.txt\n  reference.md\n  scripts/fill_form.py\n") || !strings.Contains(out, "# PDF forms\n\n1. List the form's fields") || strings.Contains(out, "allowed-tools") {
		t.Errorf("load_skill: %v\n%s", isErr, out)
	}
	for _, tc := range []struct {
		args  string
		isErr bool
		want  string
	}{
		{`{"skill":"pdf-forms","path":"reference.md"}`, false, "# Field types"},
		{`{"skill":"pdf-forms","path":"./scripts/fill_form.py"}`, false, `"""Fill a PDF form`},
		{`{"skill":"changelog","path":"templates/entry.md"}`, false, "### Fixed"},
		{`{"skill":"pdf-forms","path":"scripts/../reference.md"}`, false, "# Field types"},
		{`{"skill":"pdf-forms","path":"../changelog/SKILL.md"}`, true, "is not inside the skill's folder"},
		{`{"skill":"pdf-forms","path":"scripts/../../changelog/SKILL.md"}`, true, "is not inside the skill's folder"},
		{`{"skill":"pdf-forms","path":"/etc/passwd"}`, true, "is not inside the skill's folder"},
		{`{"skill":"pdf-forms","path":"scripts"}`, true, "is a folder"},
		{`{"skill":"pdf-forms","path":"nope.md"}`, true, "no file \"nope.md\" in skill pdf-forms"},
		{`{"skill":"broken-yaml","path":"SKILL.md"}`, true, `no skill named "broken-yaml"`},
		{`{"skill":"pdf-forms"}`, true, "read_skill_file needs"},
	} {
		out, isErr := runSkillTool(t, "read_skill_file", tc.args, nil)
		if isErr != tc.isErr || !strings.Contains(out, tc.want) {
			t.Errorf("read_skill_file %s: error %v, %q; want %v and %q", tc.args, isErr, out, tc.isErr, tc.want)
		}
	}
	if out, _ := runSkillTool(t, "read_skill_file", `{"skill":"pdf-forms","path":"reference.md"}`, map[string]any{"max_file_bytes": 20}); !strings.HasSuffix(out, "… (cut at 20 bytes)") {
		t.Errorf("a file over max_file_bytes: %q", out)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "SKILL.md"), []byte("---\nname: bin\ndescription: d\n---\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bin", "logo.png"), []byte("\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\xfd"), 0o644)
	if out, isErr := runSkillTool(t, "read_skill_file", `{"skill":"bin","path":"logo.png"}`, map[string]any{"dir": dir}); !isErr || !strings.Contains(out, "is not text") {
		t.Errorf("a binary file: %v %q", isErr, out)
	}
}

// /skills lists the skills and every problem; /skills check only the
// problems.
func TestSkillsCommand(t *testing.T) {
	reply := func(args string) string {
		v := skillsView(hostabi.HookCommand, nil)
		v.Command = &hostabi.CommandView{Name: "skills", Args: args}
		eff, err := pdk.Test(v, nil)
		if err != nil || len(eff) != 1 {
			t.Fatalf("/skills %s: %v %+v", args, err, eff)
		}
		return eff[0].Text
	}
	all := reply("")
	for _, want := range []string{"Skills:\n- Web_Research:", "- pdf-forms: Fill in", "Problems (4):",
		"- broken-yaml/SKILL.md: not offered: the front matter is not YAML",
		"- no-description/SKILL.md: not offered: description is missing",
		"- web-research/SKILL.md: name \"Web_Research\" should be",
		"- brand-voice/SKILL.md: description is 1319 characters"} {
		if !strings.Contains(all, want) {
			t.Errorf("/skills lacks %q:\n%s", want, all)
		}
	}
	check := reply("check")
	if strings.Contains(check, "Skills:") || !strings.HasPrefix(check, "Problems (4):") {
		t.Errorf("/skills check:\n%s", check)
	}
}

// With no skills, /skills says where to put them: the host folder the
// default pipeline names (host_dir) when nothing is mounted, or the
// mounted folder when it holds none.
func TestSkillsCommandWithNoSkills(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"no folder, host_dir named", map[string]any{"dir": filepath.Join(empty, "missing"), "host_dir": "/home/u/.local/share/wagent/skills"},
			"No skills: there is no skills folder. Create /home/u/.local/share/wagent/skills with a folder per skill holding a SKILL.md"},
		{"no folder, no host_dir", map[string]any{"dir": filepath.Join(empty, "missing")},
			"No skills: nothing is mounted at " + filepath.Join(empty, "missing") + "; grant a folder there"},
		{"an empty folder", map[string]any{"dir": empty, "host_dir": "/srv/skills"}, "No skills in /srv/skills: add a folder there"},
	} {
		v := skillsView(hostabi.HookCommand, c.cfg)
		v.Command = &hostabi.CommandView{Name: "skills"}
		eff, err := pdk.Test(v, nil)
		if err != nil || len(eff) != 1 || !strings.HasPrefix(eff[0].Text, c.want) {
			t.Errorf("%s: %v %+v, want a reply starting %q", c.name, err, eff, c.want)
		}
	}
}

// The prompt op contributes its text on every step, and refuses a config
// without it.
func TestPromptOp(t *testing.T) {
	v := &hostabi.View{Hook: hostabi.HookContribute, Op: "prompt", Config: json.RawMessage(`{"text":"Be brief."}`), Session: "s", Turn: 1, Step: 3}
	eff, err := pdk.Test(v, nil)
	if err != nil || len(eff) != 1 || eff[0].Text != "Be brief." {
		t.Errorf("prompt: %v %+v", err, eff)
	}
	v.Config = json.RawMessage(`{}`)
	if _, err := pdk.Test(v, nil); err == nil || !strings.Contains(err.Error(), "text is required") {
		t.Errorf("prompt without text: %v", err)
	}
}

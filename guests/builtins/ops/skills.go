package ops

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Skills offers the Agent Skills found in a read-only mounted directory:
// each folder holding a SKILL.md whose YAML front matter names it and says
// what it is for, followed by the instructions, with any files beside it
// (scripts, references, templates).
//
//	---
//	name: release-notes
//	description: >
//	  How we write release notes. Use when preparing a release.
//	license: Apache-2.0
//	metadata: {author: docs-team}
//	---
//	Body: the instructions the model loads when it needs them.
//
// The front matter is read as YAML and checked against the Agent Skills
// specification: name (at most 64 characters: lowercase letters, digits
// and single hyphens, not at either end; the folder's name), description
// (1 to 1024 characters), license, compatibility (at most 500
// characters), metadata (a map of strings), allowed-tools (a
// space-separated string). A skill whose front matter cannot be read, or
// that has no description, is not offered; other problems are only
// reported. The /skills command lists the skills and every problem
// found; /skills check lists only the problems.
//
// The op contributes a prompt part listing the skills (name and
// description; each description is cut to max_description_bytes, and all
// of them shorter when the list would pass max_prompt_bytes, so every
// skill is named), and owns two tools: load_skill returns a skill's
// instructions with its folder's path and files, and read_skill_file
// reads a file inside a skill's folder. The pipeline grants the mount,
// e.g. grants: {mounts: ["./skills:/skills:ro"]}; without it (the mount is
// optional) the op offers nothing, and /skills says where to make the
// folder: host_dir names it (the default pipeline sets it to the skills
// folder, $WAGENT_SKILLS or ~/.config/wagent/skills).
//
// Config: dir [/skills], host_dir [none], max_prompt_bytes [8192],
// max_description_bytes [1024], max_body_bytes [65536], max_file_bytes
// [262144].
func Skills() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "skills",
			Version:      "1.2.0",
			Tools:        []string{"load_skill", "read_skill_file"},
			Commands:     []string{"skills"},
			CommandArgs:  map[string]string{"skills": "[check]"},
			Idempotent:   []string{"load_skill", "read_skill_file"},
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/skills", Optional: true}}},
			ConfigSchema: strictSchema(`"dir":{"type":"string","pattern":"^/"},"host_dir":{"type":"string"},` +
				`"max_prompt_bytes":{"type":"integer","minimum":1,"maximum":1048576},` +
				`"max_description_bytes":{"type":"integer","minimum":16,"maximum":1048576},` +
				`"max_body_bytes":{"type":"integer","minimum":1,"maximum":1048576},` +
				`"max_file_bytes":{"type":"integer","minimum":1,"maximum":1048576}`),
		},
		Contribute: offerSkills,
		Tool:       skillTools,
		Command:    listSkills,
	}
}

type skillsConfig struct {
	Dir                 string `json:"dir"`
	HostDir             string `json:"host_dir"`
	MaxPromptBytes      int    `json:"max_prompt_bytes"`
	MaxDescriptionBytes int    `json:"max_description_bytes"`
	MaxBodyBytes        int    `json:"max_body_bytes"`
	MaxFileBytes        int    `json:"max_file_bytes"`
}

var skillsCache configCache[skillsConfig]

func parseSkills(raw []byte) (skillsConfig, error) {
	c := skillsConfig{Dir: "/skills", MaxPromptBytes: 8 << 10, MaxDescriptionBytes: 1024, MaxBodyBytes: 64 << 10, MaxFileBytes: 256 << 10}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("skills: %v", err)
	}
	if c.MaxPromptBytes <= 0 || c.MaxBodyBytes <= 0 || c.MaxFileBytes <= 0 || c.MaxDescriptionBytes < 16 {
		return c, fmt.Errorf("skills: max_prompt_bytes, max_body_bytes and max_file_bytes must be positive, max_description_bytes at least 16")
	}
	return c, nil
}

// Limits of the Agent Skills specification, in characters.
const (
	maxSkillName          = 64
	maxSkillDescription   = 1024
	maxSkillCompatibility = 500
	// maxFrontMatter bounds how much of a SKILL.md is read for its front
	// matter when listing.
	maxFrontMatter = 16 << 10
)

// skill is one folder under the mount, as its SKILL.md describes it.
type skill struct {
	folder string // the folder's name
	dir    string // its path in the mount
	name   string
	// description is the front matter's, as given (cut in the list).
	description   string
	license       string
	compatibility string
	metadata      map[string]string
	allowedTools  []string
	// problems are what the check found; unusable ones keep the skill
	// from being offered.
	problems []string
	unusable bool
}

func (s *skill) problem(unusable bool, format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.unusable = s.unusable || unusable
}

// parsedSkills keeps what was read of each SKILL.md while it does not
// change (same size and modification time), so a step does not parse
// every skill's YAML again. An instance may be thrown away at any time;
// this only saves work.
var parsedSkills = map[string]cachedSkill{}

type cachedSkill struct {
	size int64
	mod  time.Time
	s    skill
}

// scan lists the skill folders under dir, sorted by name, with their
// problems. A directory that cannot be read is no skills: not mounted (the
// pipeline granted none there) reads as not found, or as a bad descriptor
// under WASI.
func scan(dir string) []skill {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []skill
	seen := map[string]string{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		s := readSkill(dir, e.Name())
		if s == nil {
			continue // a folder without SKILL.md is not a skill
		}
		if other, dup := seen[s.name]; dup && !s.unusable {
			s.problem(true, "not offered: the name %q is also the name of %s", s.name, other)
		} else if !s.unusable {
			seen[s.name] = s.folder + "/"
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].folder < out[j].folder
	})
	return out
}

// readSkill reads and checks one folder's SKILL.md (nil when it has none).
func readSkill(dir, folder string) *skill {
	p := path.Join(dir, folder, "SKILL.md")
	st, err := os.Stat(p)
	if err != nil {
		// A link out of the mount, or a SKILL.md that is not there.
		if os.IsNotExist(err) {
			if _, lerr := os.Lstat(p); lerr != nil {
				return nil
			}
		}
		s := &skill{folder: folder, dir: path.Join(dir, folder), name: folder}
		s.problem(true, "not offered: SKILL.md cannot be read: %v", shortErr(err))
		return s
	}
	if c, ok := parsedSkills[p]; ok && c.size == st.Size() && c.mod.Equal(st.ModTime()) {
		s := c.s
		return &s
	}
	s := &skill{folder: folder, dir: path.Join(dir, folder)}
	b, err := readLimited(p, maxFrontMatter)
	if err != nil {
		s.name = folder
		s.problem(true, "not offered: SKILL.md cannot be read: %v", shortErr(err))
	} else {
		s.check(b)
	}
	parsedSkills[p] = cachedSkill{size: st.Size(), mod: st.ModTime(), s: *s}
	return s
}

func shortErr(err error) string {
	var pe *fs.PathError
	if e, ok := err.(*fs.PathError); ok {
		pe = e
		return pe.Err.Error()
	}
	return err.Error()
}

// splitFrontMatter returns the YAML between the opening and closing ---
// lines and the body after them; ok is false without front matter.
func splitFrontMatter(b []byte) (front, body string, ok bool) {
	s := strings.TrimPrefix(string(b), "\uFEFF")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if !strings.HasPrefix(s, "---\n") {
		return "", s, false
	}
	rest := s[4:]
	if strings.HasPrefix(rest, "---\n") || rest == "---" {
		return "", strings.TrimPrefix(rest[3:], "\n"), true
	}
	end := strings.Index(rest, "\n---\n")
	if end < 0 {
		if strings.HasSuffix(rest, "\n---") {
			return rest[:len(rest)-4], "", true
		}
		return "", s, false
	}
	return rest[:end+1], rest[end+5:], true
}

// check reads a SKILL.md's front matter into s, recording every way it
// departs from the specification.
func (s *skill) check(b []byte) {
	front, _, ok := splitFrontMatter(b)
	if !ok {
		s.name = s.folder
		s.problem(true, "not offered: SKILL.md has no YAML front matter (a --- line, name: and description:, a --- line)")
		return
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(front), &doc); err != nil {
		s.name = s.folder
		s.problem(true, "not offered: the front matter is not YAML: %s (line 1 is the one after the first ---)", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		s.name = s.folder
		s.problem(true, "not offered: the front matter is not a mapping of keys to values")
		return
	}
	m := doc.Content[0]
	str := func(key string, v *yaml.Node) (string, bool) {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			s.problem(false, "line %d: %s should be a string", v.Line, key)
			return "", false
		}
		return v.Value, true
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "name":
			s.name, _ = str("name", v)
		case "description":
			s.description, _ = str("description", v)
		case "license":
			s.license, _ = str("license", v)
		case "compatibility":
			s.compatibility, _ = str("compatibility", v)
		case "metadata":
			if v.Kind != yaml.MappingNode {
				s.problem(false, "line %d: metadata should be a map of strings to strings", v.Line)
				continue
			}
			s.metadata = map[string]string{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				mk, mv := v.Content[j], v.Content[j+1]
				if mv.Kind != yaml.ScalarNode {
					s.problem(false, "line %d: metadata.%s should be a string", mv.Line, mk.Value)
					continue
				}
				s.metadata[mk.Value] = mv.Value
			}
		case "allowed-tools":
			switch v.Kind {
			case yaml.ScalarNode:
				s.allowedTools = strings.Fields(v.Value)
			case yaml.SequenceNode:
				// Seen in the wild; the specification says a string.
				for _, t := range v.Content {
					s.allowedTools = append(s.allowedTools, t.Value)
				}
				s.problem(false, "line %d: allowed-tools should be one space-separated string, not a list", v.Line)
			default:
				s.problem(false, "line %d: allowed-tools should be a space-separated string", v.Line)
			}
		default:
			s.problem(false, "line %d: unknown field %q (the specification has name, description, license, compatibility, metadata, allowed-tools; put others under metadata)", k.Line, k.Value)
		}
	}
	switch n := utf8.RuneCountInString(s.name); {
	case s.name == "":
		s.name = s.folder
		s.problem(false, "name is missing; the folder's name %q is used", s.folder)
	case n > maxSkillName:
		s.problem(false, "name is %d characters; the limit is %d", n, maxSkillName)
	case !validSkillName(s.name):
		s.problem(false, "name %q should be lowercase letters, digits and single hyphens, not at either end", s.name)
	case s.name != s.folder:
		s.problem(false, "name %q is not the folder's name %q", s.name, s.folder)
	}
	switch n := utf8.RuneCountInString(s.description); {
	case strings.TrimSpace(s.description) == "":
		s.problem(true, "not offered: description is missing or empty; it says what the skill does and when to use it")
	case n > maxSkillDescription:
		s.problem(false, "description is %d characters; the limit is %d (it is cut in the list)", n, maxSkillDescription)
	}
	if n := utf8.RuneCountInString(s.compatibility); n > maxSkillCompatibility {
		s.problem(false, "compatibility is %d characters; the limit is %d", n, maxSkillCompatibility)
	}
}

func validSkillName(n string) bool {
	if n == "" || n[0] == '-' || n[len(n)-1] == '-' || strings.Contains(n, "--") {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// current reads the op's config and the skills it finds now.
func current(c *pdk.Call) (*skillsConfig, []skill, error) {
	cfg, err := skillsCache.get(c.RawConfig(), parseSkills)
	if err != nil {
		return nil, nil, err
	}
	return cfg, scan(cfg.Dir), nil
}

func offered(list []skill) []skill {
	var out []skill
	for _, s := range list {
		if !s.unusable {
			out = append(out, s)
		}
	}
	return out
}

func readLimited(p string, max int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, max+1)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return nil, err
	}
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	return buf[:n], nil
}

// cut returns s on one line, at most n bytes, ending in … when cut.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.TrimRight(s, " ") + "…"
}

// skillList lists the skills in at most max bytes: each description cut
// to perDesc, then every description shorter (an equal share, at least
// 40 bytes) when the list would not fit, so that one long description
// never hides the others; only when even the names do not fit are the
// last ones left out, with a line saying how many.
func skillList(list []skill, max, perDesc int) string {
	render := func(desc int) string {
		var b strings.Builder
		for _, s := range list {
			b.WriteString("- " + s.name)
			if d := cut(s.description, desc); d != "" {
				b.WriteString(": " + d)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	out := render(perDesc)
	if len(out) <= max {
		return out
	}
	names := 0
	for _, s := range list {
		names += len("- ") + len(s.name) + len(": \n")
	}
	if share := (max - names) / max1(len(list)); share >= 40 {
		if out = render(min(share, perDesc)); len(out) <= max {
			return out
		}
	}
	var b strings.Builder
	lines := strings.SplitAfter(render(40), "\n")
	for i, l := range lines {
		if l == "" {
			continue
		}
		if b.Len()+len(l)+64 > max {
			fmt.Fprintf(&b, "… and %d more (the /skills command lists them all)\n", len(list)-i)
			break
		}
		b.WriteString(l)
	}
	return b.String()
}

func max1(n int) int { return max(n, 1) }

var loadSkillSpec = hostabi.ToolSpec{
	Name:        "load_skill",
	Description: "Load a skill's full instructions by its name. The answer also gives the skill's folder and the files in it, which read_skill_file reads.",
	Parameters:  []byte(`{"type":"object","properties":{"name":{"type":"string","description":"the skill's name"}},"required":["name"],"additionalProperties":false}`),
}

var readSkillFileSpec = hostabi.ToolSpec{
	Name:        "read_skill_file",
	Description: "Read a file inside a skill's folder (a script, a reference, a template that its instructions mention).",
	Parameters: []byte(`{"type":"object","properties":{"skill":{"type":"string","description":"the skill's name"},` +
		`"path":{"type":"string","description":"the file's path inside the skill's folder, e.g. scripts/fill.py"}},"required":["skill","path"],"additionalProperties":false}`),
}

func offerSkills(c *pdk.Call) error {
	cfg, list, err := current(c)
	if err != nil {
		return err
	}
	list = offered(list)
	if len(list) == 0 {
		return nil
	}
	c.PromptPart("Skills you can load with the load_skill tool when a task needs one (read_skill_file reads the files in a skill's folder):\n" +
		skillList(list, cfg.MaxPromptBytes, cfg.MaxDescriptionBytes))
	c.OfferTool(loadSkillSpec)
	c.OfferTool(readSkillFileSpec)
	return nil
}

func skillTools(c *pdk.Call) error {
	call := c.Running()
	if call == nil {
		return nil
	}
	cfg, err := skillsCache.get(c.RawConfig(), parseSkills)
	if err != nil {
		return err
	}
	switch call.Name {
	case "load_skill":
		loadSkill(c, cfg, call)
	case "read_skill_file":
		readSkillFile(c, cfg, call)
	}
	return nil
}

func argString(call *hostabi.PendingCall, key string) string {
	raw, ok := hostabi.Field(call.Arguments, key)
	if !ok {
		return ""
	}
	s, err := hostabi.String(raw)
	if err != nil {
		return ""
	}
	return s
}

// find returns the offered skill called name, or an error result's text.
func find(cfg *skillsConfig, name string) (*skill, string) {
	list := offered(scan(cfg.Dir))
	for i := range list {
		if list[i].name == name {
			return &list[i], ""
		}
	}
	names := make([]string, len(list))
	for i, s := range list {
		names[i] = s.name
	}
	return nil, "no skill named " + strconv.Quote(name) + "; the skills are: " + strings.Join(names, ", ")
}

func loadSkill(c *pdk.Call, cfg *skillsConfig, call *hostabi.PendingCall) {
	name := argString(call, "name")
	if name == "" {
		c.Result(call.ID, `load_skill needs {"name": "<skill name>"}`, true)
		return
	}
	s, miss := find(cfg, name)
	if s == nil {
		c.Result(call.ID, miss, true)
		return
	}
	b, err := readLimited(path.Join(s.dir, "SKILL.md"), cfg.MaxBodyBytes+maxFrontMatter)
	if err != nil {
		c.Result(call.ID, "skill "+name+" could not be read: "+shortErr(err), true)
		return
	}
	_, body, _ := splitFrontMatter(b)
	body = strings.TrimLeft(body, "\n")
	if len(body) > cfg.MaxBodyBytes {
		body = strings.ToValidUTF8(body[:cfg.MaxBodyBytes], "") + "\n… (cut at " + strconv.Itoa(cfg.MaxBodyBytes) + " bytes)"
	}
	var head strings.Builder
	fmt.Fprintf(&head, "Skill %s, in the folder %s.", s.name, s.dir)
	if files := skillFiles(s.dir); len(files) > 0 {
		head.WriteString(" Its files (read one with read_skill_file, skill " + strconv.Quote(s.name) + ", path as listed):\n")
		for _, f := range files {
			head.WriteString("  " + f + "\n")
		}
	} else {
		head.WriteString("\n")
	}
	c.Result(call.ID, head.String()+"\n"+body, false)
}

// skillFiles lists the files in a skill's folder (SKILL.md and hidden
// files left out), depth-first, at most 200 of them four folders deep.
func skillFiles(dir string) []string {
	var out []string
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		entries, err := os.ReadDir(path.Join(dir, rel))
		if err != nil {
			return
		}
		for _, e := range entries {
			if len(out) >= 200 {
				return
			}
			n := e.Name()
			if strings.HasPrefix(n, ".") || (rel == "" && n == "SKILL.md") {
				continue
			}
			p := path.Join(rel, n)
			if e.IsDir() {
				if depth < 4 {
					walk(p, depth+1)
				}
				continue
			}
			out = append(out, p)
		}
	}
	walk("", 1)
	return out
}

func readSkillFile(c *pdk.Call, cfg *skillsConfig, call *hostabi.PendingCall) {
	name, rel := argString(call, "skill"), argString(call, "path")
	if name == "" || rel == "" {
		c.Result(call.ID, `read_skill_file needs {"skill": "<skill name>", "path": "<file in its folder>"}`, true)
		return
	}
	s, miss := find(cfg, name)
	if s == nil {
		c.Result(call.ID, miss, true)
		return
	}
	clean := path.Clean(strings.TrimPrefix(rel, "./"))
	if path.IsAbs(rel) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(rel, 0) || clean == "." {
		c.Result(call.ID, "path "+strconv.Quote(rel)+" is not inside the skill's folder: give a path relative to it, such as "+firstFile(s.dir), true)
		return
	}
	p := path.Join(s.dir, clean)
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		c.Result(call.ID, strconv.Quote(rel)+" is a folder; its files are listed by load_skill", true)
		return
	}
	b, err := readLimited(p, cfg.MaxFileBytes)
	if err != nil {
		c.Result(call.ID, "no file "+strconv.Quote(rel)+" in skill "+s.name+" ("+shortErr(err)+"); its files: "+strings.Join(skillFiles(s.dir), ", "), true)
		return
	}
	more := ""
	if len(b) > cfg.MaxFileBytes {
		b, more = b[:cfg.MaxFileBytes], "\n… (cut at "+strconv.Itoa(cfg.MaxFileBytes)+" bytes)"
	}
	if !utf8.Valid(b) && !utf8.Valid(b[:max(0, len(b)-3)]) {
		c.Result(call.ID, strconv.Quote(rel)+" is not text ("+strconv.Itoa(len(b))+" bytes read); only text files can be read", true)
		return
	}
	c.Result(call.ID, strings.ToValidUTF8(string(b), "")+more, false)
}

// noSkills is /skills's answer when there are none: where to put them.
func noSkills(cfg *skillsConfig) string {
	how := " with a folder per skill holding a SKILL.md (YAML front matter with name and description, then the instructions)."
	_, err := os.Stat(cfg.Dir)
	switch {
	case err != nil && cfg.HostDir != "":
		return "No skills: there is no skills folder. Create " + cfg.HostDir + how
	case err != nil:
		return "No skills: nothing is mounted at " + cfg.Dir + "; grant a folder there (grants: {mounts: [\"./skills:" + cfg.Dir + ":ro\"]})" + how
	case cfg.HostDir != "":
		return "No skills in " + cfg.HostDir + ": add a folder there" + how
	}
	return "No skills: " + cfg.Dir + " holds no folder with a SKILL.md; add one" + how
}

func firstFile(dir string) string {
	if f := skillFiles(dir); len(f) > 0 {
		return strconv.Quote(f[0])
	}
	return `"reference.md"`
}

func listSkills(c *pdk.Call) error {
	cfg, list, err := current(c)
	if err != nil {
		return err
	}
	checkOnly := strings.TrimSpace(c.View.Command.Args) == "check"
	var b strings.Builder
	ok := offered(list)
	switch {
	case len(list) == 0:
		c.Reply(noSkills(cfg))
		return nil
	case !checkOnly && len(ok) > 0:
		b.WriteString("Skills:\n" + skillList(ok, 1<<20, cfg.MaxDescriptionBytes))
	case !checkOnly:
		b.WriteString("No skill can be offered.\n")
	}
	n := 0
	for _, s := range list {
		n += len(s.problems)
	}
	if n == 0 {
		fmt.Fprintf(&b, "All %d skills follow the Agent Skills specification.", len(list))
		c.Reply(strings.TrimSpace(b.String()))
		return nil
	}
	fmt.Fprintf(&b, "Problems (%d):\n", n)
	for _, s := range list {
		for _, p := range s.problems {
			fmt.Fprintf(&b, "- %s/SKILL.md: %s\n", s.folder, p)
		}
	}
	c.Reply(strings.TrimSpace(b.String()))
	return nil
}

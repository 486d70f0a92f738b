package ops

import (
	"fmt"

	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Skills offers the skills found in a read-only mounted directory: each
// folder holding a SKILL.md whose front matter names it and says what it
// is for, followed by the body.
//
//	---
//	name: release-notes
//	description: How we write release notes.
//	---
//	Body: the instructions the model loads when it needs them.
//
// The op contributes a prompt part listing the skills (name and
// description only, at most max_prompt_bytes), owns a load_skill tool that
// returns one skill's body, and answers the /skills command with the list.
// The pipeline must grant the mount, e.g. grants: {mounts:
// ["./skills:/skills:ro"]}; without it the op offers nothing.
//
// Config: dir [/skills], max_prompt_bytes [4096], max_body_bytes [65536].
func Skills() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "skills",
			Version:      "1.0.0",
			Tools:        []string{"load_skill"},
			Commands:     []string{"skills"},
			Idempotent:   []string{"load_skill"},
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/skills"}}},
			ConfigSchema: strictSchema(`"dir":{"type":"string","pattern":"^/"},"max_prompt_bytes":{"type":"integer","minimum":1,"maximum":1048576},"max_body_bytes":{"type":"integer","minimum":1,"maximum":1048576}`),
		},
		Contribute: offerSkills,
		Tool:       loadSkill,
		Command:    listSkills,
	}
}

type skillsConfig struct {
	Dir            string `json:"dir"`
	MaxPromptBytes int    `json:"max_prompt_bytes"`
	MaxBodyBytes   int    `json:"max_body_bytes"`
}

var skillsCache configCache[skillsConfig]

func parseSkills(raw []byte) (skillsConfig, error) {
	c := skillsConfig{Dir: "/skills", MaxPromptBytes: 4096, MaxBodyBytes: 64 << 10}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("skills: %v", err)
	}
	if c.MaxPromptBytes <= 0 || c.MaxBodyBytes <= 0 {
		return c, fmt.Errorf("skills: max_prompt_bytes and max_body_bytes must be positive")
	}
	return c, nil
}

type skill struct {
	name, description, dir string
}

// scan lists the skills under dir, sorted by name. A directory that cannot
// be read is no skills: not mounted (the pipeline granted none there) reads
// as not found, or as a bad descriptor under WASI.
func scan(dir string) []skill {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []skill
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := path.Join(dir, e.Name(), "SKILL.md")
		b, err := readLimited(p, 16<<10)
		if err != nil {
			continue
		}
		meta, _ := frontMatter(b)
		s := skill{name: meta["name"], description: meta["description"], dir: path.Join(dir, e.Name())}
		if s.name == "" {
			s.name = e.Name()
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// current reads the op's config and the skills it finds now.
func current(c *pdk.Call) (*skillsConfig, []skill, error) {
	cfg, err := skillsCache.get(c.RawConfig(), parseSkills)
	if err != nil {
		return nil, nil, err
	}
	return cfg, scan(cfg.Dir), nil
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

// frontMatter splits "---\nkey: value\n---\nbody" into its keys and body.
func frontMatter(b []byte) (map[string]string, string) {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	meta := map[string]string{}
	if !strings.HasPrefix(s, "---\n") {
		return meta, s
	}
	end := strings.Index(s[4:], "\n---")
	if end < 0 {
		return meta, s
	}
	for _, line := range strings.Split(s[4:4+end], "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, `'`)
		}
		meta[strings.TrimSpace(k)] = v
	}
	body := s[4+end+4:]
	return meta, strings.TrimPrefix(body, "\n")
}

func skillList(list []skill, max int) string {
	var b strings.Builder
	for i, s := range list {
		line := "- " + s.name
		if s.description != "" {
			line += ": " + s.description
		}
		line += "\n"
		if b.Len()+len(line) > max {
			fmt.Fprintf(&b, "… and %d more (the /skills command lists them all)\n", len(list)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func offerSkills(c *pdk.Call) error {
	cfg, list, err := current(c)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return nil
	}
	c.PromptPart("Skills you can load with the load_skill tool when a task needs one:\n" + skillList(list, cfg.MaxPromptBytes))
	c.Emit(hostabi.Effect{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{
		Name:        "load_skill",
		Description: "Load the full instructions of a skill by its name.",
		Parameters:  []byte(`{"type":"object","properties":{"name":{"type":"string","description":"the skill's name"}},"required":["name"]}`),
	}})
	return nil
}

func loadSkill(c *pdk.Call) error {
	t := c.View.Tool
	if t.Run == "" {
		return nil
	}
	cfg, err := skillsCache.get(c.RawConfig(), parseSkills)
	if err != nil {
		return err
	}
	for _, call := range t.Calls {
		if call.ID != t.Run {
			continue
		}
		raw, _ := hostabi.Field(call.Arguments, "name")
		name, err := hostabi.String(raw)
		if err != nil || name == "" {
			c.Result(call.ID, `load_skill needs {"name": "<skill name>"}`, true)
			return nil
		}
		list := scan(cfg.Dir)
		for _, s := range list {
			if s.name != name {
				continue
			}
			b, err := readLimited(path.Join(s.dir, "SKILL.md"), cfg.MaxBodyBytes+16<<10)
			if err != nil {
				c.Result(call.ID, "skill "+name+" could not be read: "+err.Error(), true)
				return nil
			}
			_, body := frontMatter(b)
			if len(body) > cfg.MaxBodyBytes {
				body = body[:cfg.MaxBodyBytes] + "\n… (cut at " + strconv.Itoa(cfg.MaxBodyBytes) + " bytes)"
			}
			c.Result(call.ID, body, false)
			return nil
		}
		names := make([]string, len(list))
		for i, s := range list {
			names[i] = s.name
		}
		c.Result(call.ID, "no skill named "+strconv.Quote(name)+"; the skills are: "+strings.Join(names, ", "), true)
	}
	return nil
}

func listSkills(c *pdk.Call) error {
	cfg, list, err := current(c)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		c.Reply("No skills: nothing is mounted at " + cfg.Dir + ", or it holds no folder with a SKILL.md.")
		return nil
	}
	c.Reply("Skills:\n" + skillList(list, 1<<20))
	return nil
}

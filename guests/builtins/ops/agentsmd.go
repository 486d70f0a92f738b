package ops

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// AgentsMD contributes a project's instructions for agents: AGENTS.md
// (the convention Codex and others read) and CLAUDE.md (Claude Code's)
// from a read-only mount of the directory wagent runs in, each as a
// prompt part that names its file, so the request header records which
// were used. A file that is missing is skipped; one over max_bytes is cut
// and says so. The CLI grants the mount (the session's working directory
// at /project); in a pipeline file, name it as any mount:
// grants: {mounts: ["./:/project:ro"]}.
//
// Config: dir [/project], files [AGENTS.md, CLAUDE.md], max_bytes [65536]
// per file.
func AgentsMD() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "agents-md",
			Version:      "1.0.0",
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/project"}}},
			ConfigSchema: strictSchema(`"dir":{"type":"string","pattern":"^/"},` +
				`"files":{"type":"array","maxItems":8,"items":{"type":"string","pattern":"^[^/]+$"}},` +
				`"max_bytes":{"type":"integer","minimum":1,"maximum":262144}`),
		},
		Contribute: projectInstructions,
	}
}

type agentsConfig struct {
	Dir      string   `json:"dir"`
	Files    []string `json:"files"`
	MaxBytes int      `json:"max_bytes"`
}

var agentsCache configCache[agentsConfig]

func parseAgents(raw []byte) (agentsConfig, error) {
	c := agentsConfig{Dir: "/project", Files: []string{"AGENTS.md", "CLAUDE.md"}, MaxBytes: 64 << 10}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("agents-md: %v", err)
	}
	return c, nil
}

func projectInstructions(c *pdk.Call) error {
	cfg, err := agentsCache.get(c.RawConfig(), parseAgents)
	if err != nil {
		return err
	}
	for _, name := range cfg.Files {
		b, err := readLimited(path.Join(cfg.Dir, name), cfg.MaxBytes)
		if err != nil {
			continue // not there (or not mounted): nothing to say
		}
		text := strings.ToValidUTF8(string(b), "\uFFFD")
		cut := ""
		if len(b) > cfg.MaxBytes {
			text = strings.ToValidUTF8(text[:cfg.MaxBytes], "")
			cut = "\n… (" + name + " is cut here, at " + strconv.Itoa(cfg.MaxBytes) + " bytes)"
		}
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		c.PromptPart("Instructions for this project, from " + name + " in the working directory:\n\n" + text + cut)
	}
	return nil
}

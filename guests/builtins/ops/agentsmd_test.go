package ops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

func TestAgentsMD(t *testing.T) {
	dir := t.TempDir()
	run := func(cfg map[string]any) []string {
		t.Helper()
		cfg["dir"] = dir
		raw, _ := json.Marshal(cfg)
		eff, err := pdk.Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "agents-md", Config: raw}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, e := range eff {
			if e.Kind == hostabi.KindPromptPart {
				parts = append(parts, e.Text)
			}
		}
		return parts
	}
	if p := run(map[string]any{}); len(p) != 0 {
		t.Fatalf("no files: parts %q", p)
	}
	os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("# Project\nRun make check before committing.\n"), 0o644)
	p := run(map[string]any{})
	if len(p) != 1 || !strings.HasPrefix(p[0], "Instructions for this project, from AGENTS.md in the working directory:\n\n# Project\nRun make check") {
		t.Fatalf("AGENTS.md: %q", p)
	}
	os.WriteFile(filepath.Join(dir, "CLAUDE.md"), []byte("Prefer small commits. "+strings.Repeat("x", 100)), 0o644)
	p = run(map[string]any{"max_bytes": 40})
	if len(p) != 2 || !strings.Contains(p[1], "from CLAUDE.md") || !strings.HasSuffix(p[1], "(CLAUDE.md is cut here, at 40 bytes)") || strings.Contains(p[1], strings.Repeat("x", 30)) {
		t.Fatalf("both, cut: %q", p)
	}
	if p := run(map[string]any{"files": []string{"CLAUDE.md"}}); len(p) != 1 || !strings.Contains(p[0], "CLAUDE.md") {
		t.Fatalf("files: [CLAUDE.md]: %q", p)
	}
}

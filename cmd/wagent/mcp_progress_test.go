package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/internal/npmtest"
)

// An MCP server's progress while a tool runs reaches wagent run's live
// stream (with --json, a "progress" line naming the call's tool), through
// the real everything server's long-running operation; none of it is
// logged.
func TestMCPProgressIsStreamed(t *testing.T) {
	everything := npmtest.Bin(t, "mcp-server-everything")
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_long", Name: "everything__trigger-long-running-operation", Arguments: `{"duration":2,"steps":4}`},
		}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "The long operation is over."}},
	)
	pipe := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(pipe, []byte(fmt.Sprintf("ops:\n  - mcp: everything\n    command: [%s, stdio]\n    env: {LOG_LEVEL: warn}\n", everything)), 0o644)
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home}
	r := wagIn(t, env, "", "run", "--session", "p", "--json", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m", "go")
	if r.code != exitOK {
		t.Fatalf("run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var texts []string
	for _, line := range strings.Split(r.stdout, "\n") {
		var l struct{ Kind, Tool, Call, Text string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Kind == "progress" {
			if l.Tool != "everything__trigger-long-running-operation" || l.Call == "" {
				t.Errorf("progress line %s: want the call and its tool", line)
			}
			texts = append(texts, l.Text)
		}
	}
	if len(texts) == 0 || !strings.HasPrefix(texts[0], "1/4") || !strings.HasPrefix(texts[len(texts)-1], "4/4") {
		t.Errorf("progress %q, want 1/4 … 4/4\n%s", texts, r.stdout)
	}
	for _, e := range events(t, home, "p") {
		if strings.Contains(string(e.Data), `"progress"`) {
			t.Errorf("progress was logged: %s %s", e.Type, e.Data)
		}
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/wagent/wagent/internal/fakeopenai"
)

// The answer alone goes to standard output, as the model wrote it:
// wagent run … > out.md keeps the Markdown, and the call lines, a turn
// that ends in error and the usage line go to standard error (issue 30:
// "(turn 1 ended: error: …)" went into out.md).
func TestRunAnswerAloneOnStdout(t *testing.T) {
	const answer = "The answer is **126**.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: answer, Chunks: 7, ToolCalls: []fakeopenai.ToolCall{{ID: "c1", Name: "nope", Arguments: `{"x":1}`}}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Status: 400, ErrorMessage: "the gateway broke"}},
	)
	home := t.TempDir()
	pipe := writeFile(t, t.TempDir(), "p.yaml", "ops:\n  - use: builtin:unknown-tool\n")
	r := wag(t, home, "run", "--session", "o", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m", "--api-key", "k", "hi")
	if r.code != exitFailure {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r.stdout != answer {
		t.Errorf("standard output is not the answer alone:\n%q\nwant\n%q\nstderr:\n%s", r.stdout, answer, r.stderr)
	}
	for _, want := range []string{"session o\n", "  ← error: TOOL_UNKNOWN", "(turn 1 ended: error", "the gateway broke", "tokens"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("standard error lacks %q:\n%s", want, r.stderr)
		}
	}
}

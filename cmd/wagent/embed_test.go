package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent"
	"github.com/wagent/wagent/event"
)

// A Go program continues a session the CLI created, in the same store,
// with what the session recorded: the script provider and its file, the
// default pipeline. Nothing about the session is given to wagent.Open.
func TestEmbedderContinuesACLISession(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	script := filepath.Join(dir, "replies.yaml")
	os.WriteFile(script, []byte("rules:\n- when: {last_user_contains: hello}\n  content: hi from the CLI's turn\n- when: {last_user_contains: again}\n  content: continued from Go\n"), 0o600)
	env := map[string]string{"WAGENT_HOME": dir, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	if r := exe(t, env, "run", "--store", store, "--session", "cli", "--script", script, "hello"); r.code != exitOK {
		t.Fatalf("wagent run: exit %d\n%s", r.code, r.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := wagent.Open(ctx, wagent.Options{Dir: store, CacheDir: env["WAGENT_CACHE_DIR"]})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(context.Background())
	s, err := node.Session(ctx, "cli")
	if err != nil {
		t.Fatalf("open the CLI's session: %v", err)
	}
	if _, err := s.Send(ctx, "and again"); err != nil {
		t.Fatal(err)
	}
	if err := s.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := node.Log().Read(ctx, "cli", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	turns := 0
	for _, e := range evs {
		switch e.Type {
		case event.EvAssistantMessage:
			var m event.AssistantMessage
			json.Unmarshal(e.Data, &m)
			answers = append(answers, m.Content)
		case event.EvTurnEnd:
			var te event.TurnEnd
			json.Unmarshal(e.Data, &te)
			if te.Reason != event.ReasonCompleted {
				t.Errorf("turn %d ended %s: %s", te.Turn, te.Reason, te.Error)
			}
			turns++
		}
	}
	if turns != 2 || len(answers) != 2 || answers[1] != "continued from Go" {
		t.Fatalf("the log has %d turns and answers %q; want the CLI's turn, then Go's answered by the session's own script", turns, answers)
	}
	// And the CLI reads what Go added.
	node.Close(context.Background())
	if r := exe(t, env, "log", "--store", store, "cli"); r.code != exitOK || !strings.Contains(r.stdout, "continued from Go") {
		t.Errorf("wagent log after Go's turn: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

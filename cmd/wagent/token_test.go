package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Two wagent serve started at the same instant (on two stores) share the
// token file: both must end up with the token the file holds, or one
// serves with a token that wagent serve --print-token never shows.
func TestTokenMadeOnceByConcurrentServes(t *testing.T) {
	home := t.TempDir()
	env := &cliEnv{Getenv: func(k string) string {
		if k == "WAGENT_HOME" {
			return home
		}
		return ""
	}}
	for round := range 200 {
		os.Remove(filepath.Join(home, "token"))
		tokens := make([]string, 8)
		var wg sync.WaitGroup
		for i := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok, err := loadToken(env)
				if err != nil {
					t.Error(err)
				}
				tokens[i] = tok
			}()
		}
		wg.Wait()
		b, _ := os.ReadFile(filepath.Join(home, "token"))
		for i, tok := range tokens {
			if tok != strings.TrimSpace(string(b)) {
				t.Fatalf("round %d: serve %d has token %q, the file holds %q", round, i, tok, b)
			}
		}
	}
}

// A token file others can read is no secret: it is refused, saying so,
// rather than trusted.
func TestTokenReadableByOthersIsRefused(t *testing.T) {
	home := t.TempDir()
	env := &cliEnv{Getenv: func(k string) string {
		if k == "WAGENT_HOME" {
			return home
		}
		return ""
	}}
	path := filepath.Join(home, "token")
	if err := os.WriteFile(path, []byte(strings.Repeat("a", 48)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	_, err := loadToken(env)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "0644") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a token file readable by others: %v, want a one-line refusal naming it and its mode", err)
	}
}

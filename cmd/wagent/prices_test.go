package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// Cost shows without configuration for a common model, its date suffix
// taken off (gpt-4o-2024-08-06 is priced as gpt-4o: $2.50 in, $10 out per
// million tokens), in run's usage line, wagent log and chat's /usage; a
// config file's prices: entry overrides the built-in one.
func TestBuiltinPricesShowCost(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "priced",
		Usage: &fakeopenai.Usage{PromptTokens: 1_000_000, CompletionTokens: 100_000, TotalTokens: 1_100_000}}})
	env := map[string]string{"WAGENT_HOME": t.TempDir()}
	flags := []string{"--base-url", srv.URL, "--model", "gpt-4o-2024-08-06"}
	// 1e6·2.50/1e6 + 1e5·10/1e6 = $3.50
	r := wagIn(t, env, "", append(append([]string{"run", "--session", "p"}, flags...), "hi")...)
	if r.code != exitOK || !strings.Contains(r.stderr, "1,000,000 in + 100,000 out tokens, ≈ $3.50") {
		t.Fatalf("run: %d, stderr %q; want the cost at gpt-4o's built-in price", r.code, r.stderr)
	}
	if lg := wagIn(t, env, "", "log", "p"); !strings.Contains(lg.stdout, "≈ $3.50") {
		t.Errorf("wagent log shows no cost:\n%s", lg.stdout)
	}
	// chat's /usage, with a config file that prices nothing.
	var usage bytes.Buffer
	session.PrintUsage(&usage, events(t, env["WAGENT_HOME"], "p"), &app.Config{})
	if !strings.Contains(usage.String(), "session  1,000,000 in + 100,000 out tokens in 1 turn, ≈ $3.50") {
		t.Errorf("/usage shows no cost:\n%s", usage.String())
	}

	env["WAGENT_CONFIG"] = writeFile(t, t.TempDir(), "config.yaml", "prices:\n  gpt-4o*: {input: 1, output: 1}\n")
	// 1.1e6·1/1e6 = $1.10
	if r := wagIn(t, env, "", append(append([]string{"run", "--session", "q"}, flags...), "hi")...); !strings.Contains(r.stderr, "≈ $1.10") {
		t.Errorf("the config's price did not override the built-in one: %q", r.stderr)
	}
}

func TestBuiltinPrice(t *testing.T) {
	for model, want := range map[string]app.Price{
		"gpt-4o":                     {Input: 2.50, Output: 10},
		"gpt-4o-2024-08-06":          {Input: 2.50, Output: 10},
		"gpt-4o-mini-2024-07-18":     {Input: 0.15, Output: 0.60},
		"gpt-4.1-nano":               {Input: 0.10, Output: 0.40},
		"gpt-5-mini-2025-08-07":      {Input: 0.25, Output: 2},
		"o4-mini":                    {Input: 1.10, Output: 4.40},
		"claude-sonnet-4-5-20250929": {Input: 3, Output: 15},
		"claude-3-5-haiku-latest":    {Input: 0.80, Output: 4},
		"claude-opus-4-1-20250805":   {Input: 15, Output: 75},
	} {
		if got, ok := app.BuiltinPrice(model); !ok || got != want {
			t.Errorf("BuiltinPrice(%q) = %v, %v; want %v", model, got, ok, want)
		}
	}
	for _, model := range []string{"llama3", "gpt-4o-mini-tts", "qwen3:8b", ""} {
		if p, ok := app.BuiltinPrice(model); ok {
			t.Errorf("BuiltinPrice(%q) = %v, want no price", model, p)
		}
	}
}

// wagent config show says what the model costs and that the price is the
// built-in table's.
func TestConfigShowsTheBuiltinPrice(t *testing.T) {
	r := wagIn(t, map[string]string{"WAGENT_HOME": t.TempDir()}, "", "config", "show", "--model", "gpt-4.1-mini")
	if r.code != exitOK || !strings.Contains(r.stdout, "price gpt-4.1-mini") || !strings.Contains(r.stdout, "$0.4 in, $1.6 out per million tokens") ||
		!strings.Contains(r.stdout, "built in (taken 2026-12") {
		t.Errorf("config show: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

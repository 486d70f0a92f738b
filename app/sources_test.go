package app

import (
	"testing"
)

// A flag beats the config: --script with a config that says provider:
// openai runs the script (before, the script was silently ignored and
// the run went to the network). An explicit --provider still wins.
func TestScriptFlagBeatsTheConfigsProvider(t *testing.T) {
	cfg := &Config{Path: "/c/config.yaml", Top: Profile{Provider: "openai", Model: "gpt-4o-mini"}}
	getenv := func(string) string { return "" }
	flags := func(set map[string]string) Flags {
		return func(name string) (string, bool) { v, ok := set[name]; return v, ok }
	}
	r, err := NewSources(cfg, getenv, flags(map[string]string{"script": "/s/replies.yaml"}), "", "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.NewSettings()
	if err != nil {
		t.Fatal(err)
	}
	if s.Provider != "script" || s.Script != "/s/replies.yaml" {
		t.Errorf("settings %+v, want the script provider with the script", s)
	}
	if src := r.All()["provider"].Source; src != "--script (over openai from config /c/config.yaml)" {
		t.Errorf("the provider's source is %q", src)
	}
	// --provider named too: it wins (and asks for what it needs).
	r, _ = NewSources(cfg, getenv, flags(map[string]string{"script": "/s/replies.yaml", "provider": "openai"}), "", "")
	if s, _ := r.NewSettings(); s.Provider != "openai" {
		t.Errorf("with --provider openai: provider %q", s.Provider)
	}
	// An existing session recorded with openai: --script switches it.
	r, _ = NewSources(cfg, getenv, flags(map[string]string{"script": "/s/replies.yaml"}), "", "")
	s, err = r.Override(Settings{Provider: "openai", Model: "gpt-4o-mini"})
	if err != nil || s.Provider != "script" || s.Script != "/s/replies.yaml" {
		t.Errorf("override: %+v %v, want the script provider", s, err)
	}
}

package app

import (
	"context"
	"strings"
	"testing"

	"github.com/wagent/wagent/store"
)

// A node sends a key from its own environment, for a principal whose
// policy does not allow any base URL (a remote client, a worker of a
// shared store), only to a base URL it trusts: a session's creator cannot
// name an URL of theirs and a variable of the node's (its provider key,
// NATS_PASSWORD) and receive it as a bearer token.
func TestRestrictedPrincipalGetsNoNodeKeys(t *testing.T) {
	vars := map[string]string{"OPENAI_API_KEY": "sk-worker", "NATS_PASSWORD": "pw", "OPENAI_BASE_URL": "http://own.example/v1"}
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(k string) string { return vars[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	restricted, local := Policy{}, DefaultPolicy(Local)
	evil := Settings{Provider: "openai", Model: "m", BaseURL: "http://evil.example/v1", APIKeyEnv: "NATS_PASSWORD"}
	for _, tc := range []struct {
		name   string
		s      Settings
		key    string
		pol    Policy
		refuse bool
	}{
		{"the creator's URL and the node's variable", evil, "", restricted, true},
		{"the creator's URL and the default variable", Settings{Provider: "openai", Model: "m", BaseURL: "http://evil.example/v1"}, "", restricted, true},
		{"anthropic too", Settings{Provider: "anthropic", Model: "m", BaseURL: "http://evil.example"}, "", restricted, vars["ANTHROPIC_API_KEY"] != ""},
		{"the client passed its own key", evil, "sk-client", restricted, false},
		{"the local user (the creator is this user)", evil, "", local, false},
		{"a policy allowing any base URL", evil, "", Policy{AnyBaseURL: true}, false},
		{"the node's own base URL", Settings{Provider: "openai", Model: "m", BaseURL: "http://own.example/v1/", APIKeyEnv: "OPENAI_API_KEY"}, "", restricted, false},
		{"the provider's default", Settings{Provider: "openai", Model: "m", BaseURL: "https://api.openai.com/v1"}, "", restricted, false},
		{"no base URL", Settings{Provider: "openai", Model: "m"}, "", restricted, false},
		{"no key in the environment to leak", Settings{Provider: "openai", Model: "m", BaseURL: "http://evil.example/v1", APIKeyEnv: "UNSET"}, "", restricted, false},
	} {
		_, err := n.buildProvider(tc.s, tc.key, tc.pol)
		if refused := err != nil && strings.Contains(err.Error(), "WAGENT_TRUSTED_BASE_URLS"); refused != tc.refuse {
			t.Errorf("%s: err = %v, want refused %v", tc.name, err, tc.refuse)
		}
		if err != nil && (ReasonOf(err) != Forbidden || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "pw")) {
			t.Errorf("%s: err = %v (%v), want one Forbidden line without the key", tc.name, err, ReasonOf(err))
		}
	}
	// A URL the node lists is trusted.
	vars["WAGENT_TRUSTED_BASE_URLS"] = "http://a.example/v1, http://evil.example/v1"
	if _, err := n.buildProvider(evil, "", restricted); err != nil {
		t.Errorf("a listed URL: %v", err)
	}
}

// A base URL the node's config names is one it trusts with its keys.
func TestConfigBaseURLIsTrusted(t *testing.T) {
	vars := map[string]string{"OPENAI_API_KEY": "sk-node"}
	cfg := &Config{}
	cfg.Top.BaseURL = "http://top.example/v1"
	cfg.Profiles = map[string]Profile{"p": {BaseURL: "http://profile.example/v1"}}
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(k string) string { return vars[k] }, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	for u, want := range map[string]bool{"http://top.example/v1": true, "http://profile.example/v1/": true, "http://other.example/v1": false} {
		_, err := n.buildProvider(Settings{Provider: "openai", Model: "m", BaseURL: u}, "", Policy{})
		if refused := err != nil; refused == want {
			t.Errorf("base URL %s: err = %v, want trusted %v", u, err, want)
		}
	}
}

package main

import (
	"strings"
	"testing"
)

// A process that runs sessions others create (a worker, an owner serving
// TCP or a NATS store) sends a key from its own environment only to a base
// URL it trusts: a session's creator cannot name an URL of theirs and a
// variable of the worker's (its provider key, NATS_PASSWORD) and receive
// it as a bearer token.
func TestSharedProcessKeepsItsKeys(t *testing.T) {
	vars := map[string]string{"OPENAI_API_KEY": "sk-worker", "NATS_PASSWORD": "pw", "OPENAI_BASE_URL": "http://own.example/v1"}
	env := &cliEnv{getenv: func(k string) string { return vars[k] }}
	evil := settings{Provider: "openai", Model: "m", BaseURL: "http://evil.example/v1", APIKeyEnv: "NATS_PASSWORD"}
	for _, tc := range []struct {
		name   string
		s      settings
		key    string
		shared bool
		refuse bool
	}{
		{"the creator's URL and the worker's variable", evil, "", true, true},
		{"the creator's URL and the default variable", settings{Provider: "openai", Model: "m", BaseURL: "http://evil.example/v1"}, "", true, true},
		{"anthropic too", settings{Provider: "anthropic", Model: "m", BaseURL: "http://evil.example"}, "", true, vars["ANTHROPIC_API_KEY"] != ""},
		{"the client passed its own key", evil, "sk-client", true, false},
		{"not a shared process (the creator is this user)", evil, "", false, false},
		{"the process's own base URL", settings{Provider: "openai", Model: "m", BaseURL: "http://own.example/v1/", APIKeyEnv: "OPENAI_API_KEY"}, "", true, false},
		{"the provider's default", settings{Provider: "openai", Model: "m", BaseURL: "https://api.openai.com/v1"}, "", true, false},
		{"no base URL", settings{Provider: "openai", Model: "m"}, "", true, false},
		{"no key in the environment to leak", settings{Provider: "openai", Model: "m", BaseURL: "http://evil.example/v1", APIKeyEnv: "UNSET"}, "", true, false},
	} {
		_, err := buildProvider(env, tc.s, tc.key, tc.shared)
		if refused := err != nil && strings.Contains(err.Error(), "WAGENT_TRUSTED_BASE_URLS"); refused != tc.refuse {
			t.Errorf("%s: err = %v, want refused %v", tc.name, err, tc.refuse)
		}
	}
	// A URL the process lists is trusted.
	vars["WAGENT_TRUSTED_BASE_URLS"] = "http://a.example/v1, http://evil.example/v1"
	if _, err := buildProvider(env, evil, "", true); err != nil {
		t.Errorf("a listed URL: %v", err)
	}
}

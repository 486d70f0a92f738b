package app

import (
	"context"
	"strings"
	"testing"

	"github.com/wagent/wagent/store"
)

// Attack: a remote client asks for the choices and reads the credentials
// a profile's base URL carries (user:password@, ?key=).
func TestAttackChoicesShowBaseURLCredentials(t *testing.T) {
	cfg := &Config{Path: "/nonexistent/config.yaml", Profiles: map[string]Profile{
		"proxy": {Provider: "openai", Model: "m", BaseURL: "https://user:hunter2@proxy.example/v1?api-key=sekrit#frag"},
	}}
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(string) string { return "" }, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	for _, p := range []Principal{Remote, Local} {
		c := n.Choices(p)
		if len(c.Profiles) != 1 {
			t.Fatalf("%s: profiles %+v", p, c.Profiles)
		}
		got := c.Profiles[0].BaseURL
		if strings.Contains(got, "hunter2") || strings.Contains(got, "sekrit") || strings.Contains(got, "user") {
			t.Errorf("%s: the choices show the profile's base URL with its credentials: %s", p, got)
		}
		if !strings.Contains(got, "proxy.example/v1") {
			t.Errorf("%s: the choices lost where the profile's base URL points: %s", p, got)
		}
	}
}

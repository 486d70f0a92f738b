package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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

// Attack: the choices' walk of a project root meets a FIFO named like a
// pipeline (reading it would block the request for ever), a symbolic
// link to a pipeline outside the roots, and a linked folder outside them.
func TestAttackChoicesWalkFIFOAndLinks(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	pipe := "ops:\n- use: builtin:approval\n  config: {mode: auto}\n"
	os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte(pipe), 0o600)
	os.WriteFile(filepath.Join(root, "ok.yaml"), []byte(pipe), 0o600)
	if err := syscall.Mkfifo(filepath.Join(root, "fifo.yaml"), 0o600); err != nil {
		t.Skip(err)
	}
	os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(root, "link.yaml"))
	os.Symlink(outside, filepath.Join(root, "linkdir"))
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(string) string { return "" }, ProjectRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	done := make(chan Choices, 1)
	go func() { done <- n.Choices(Remote) }()
	select {
	case c := <-done:
		var names []string
		for _, p := range c.Pipelines {
			names = append(names, p.Pipeline)
		}
		if len(names) != 1 || names[0] != filepath.Join(root, "ok.yaml") {
			t.Errorf("the choices list %v, want only %s", names, filepath.Join(root, "ok.yaml"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the choices' walk hangs on a FIFO named fifo.yaml")
	}
}

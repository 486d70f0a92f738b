package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
		t.Fatalf("make a FIFO (the attack needs one): %v", err)
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

// Attack: a remote client creates a session whose settings send its own
// key to a base URL of its choosing (allowed: the key is its own). The
// local user then changes one setting of it (wagent run --session S
// --model M sends the recorded settings with the change): the node
// records the whole as the local user's choice, and from then on sends
// the node's key (or the one the CLI hands over) to the remote's URL, and
// agents-md reads the folder the remote named.
func TestAttackLocalChangeLaundersRemoteSettings(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "node-key"}
	getenv := func(k string) string { return env[k] }
	root := t.TempDir()
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: getenv, Exposed: true, ProjectRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	ctx := context.Background()
	info, err := n.Prepare(ctx, Remote, Request{Settings: []byte(`{"provider":"openai","model":"m","base_url":"https://evil.example/v1","dir":"/home"}`), Secrets: map[string]string{SecretAPIKey: "remote-own-key"}})
	if err != nil {
		t.Fatalf("the remote's create with its own key: %v", err)
	}
	recorded, _ := ReadSettings(info.Settings)
	// The CLI: the recorded settings, with --model changed.
	changed := recorded
	changed.Model = "m2"
	info2, err := n.Prepare(ctx, Local, Request{Settings: changed.JSON(), Change: true, Recorded: info.Settings})
	if err == nil {
		s, _ := ReadSettings(info2.Settings)
		pol := n.policyOf(s)
		if _, perr := n.buildProvider(s, "", pol); perr == nil && s.BaseURL == "https://evil.example/v1" {
			t.Errorf("after the local user changed the model, the remote's base URL gets the node's key (by %q)", s.By)
		}
		if s.Dir == "/home" && pol.AnyFiles {
			t.Errorf("after the local user changed the model, the remote's folder %s is mounted as the local user's", s.Dir)
		}
	}
	// The local user naming their own base URL and folder is theirs.
	mine := changed
	mine.BaseURL, mine.Dir = "https://api.openai.com/v1", root
	if _, err := n.Prepare(ctx, Local, Request{Settings: mine.JSON(), Change: true, Recorded: info.Settings}); err != nil {
		t.Errorf("the local user replacing the remote's choices: %v", err)
	}
	// A change of the local user's own session is not affected.
	own, err := n.Prepare(ctx, Local, Request{Settings: []byte(`{"provider":"openai","model":"m","base_url":"https://mine.example/v1","dir":"/home"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Prepare(ctx, Local, Request{Settings: []byte(`{"provider":"openai","model":"m3","base_url":"https://mine.example/v1","dir":"/home"}`), Change: true, Recorded: own.Settings}); err != nil {
		t.Errorf("the local user changing their own session: %v", err)
	}
}

// Attack: a project root full of YAML that is not a pipeline (a session's
// agent can write there) makes every listing parse all of it. The walk
// reads a bounded number of files: a valid pipeline behind
// maxChoiceParses invalid ones is not listed, and the listing returns.
func TestAttackChoicesWalkIsBounded(t *testing.T) {
	root := t.TempDir()
	for i := range maxChoiceParses + 10 {
		os.WriteFile(filepath.Join(root, fmt.Sprintf("a%04d.yaml", i)), []byte("not: [a pipeline"), 0o600)
	}
	os.WriteFile(filepath.Join(root, "zz.yaml"), []byte("ops:\n- use: builtin:approval\n  config: {mode: auto}\n"), 0o600)
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: func(string) string { return "" }, ProjectRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if c := n.Choices(Remote); len(c.Pipelines) != 0 {
		t.Errorf("the walk went past %d files: it listed %v", maxChoiceParses, c.Pipelines)
	}
	os.Remove(filepath.Join(root, "a0000.yaml"))
	for i := 1; i < 20; i++ {
		os.Remove(filepath.Join(root, fmt.Sprintf("a%04d.yaml", i)))
	}
	if c := n.Choices(Remote); len(c.Pipelines) != 1 {
		t.Errorf("with fewer files the valid pipeline is listed: %v", c.Pipelines)
	}
}

// An embedder's principal whose kind holds ":" would be recorded as
// "local:x" and read back as the local user: Valid refuses it.
func TestPrincipalReadsBackAsItself(t *testing.T) {
	for _, p := range []Principal{{Kind: "local:x"}, {Kind: ""}, {Kind: "tenant", Name: "a\nb"}} {
		if p.Valid() == nil {
			t.Errorf("%+v is valid, want refused", p)
		}
	}
	for _, p := range []Principal{Local, Remote, {Kind: "tenant", Name: "alice:with:colons"}} {
		if err := p.Valid(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

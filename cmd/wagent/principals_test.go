package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/server"
)

// servedOverTCP starts wagent serve --listen for env's store and returns
// the address and the token once it answers.
func servedOverTCP(t *testing.T, env map[string]string) (addr, token string, serve *proc) {
	t.Helper()
	tok := exe(t, env, "serve", "--print-token")
	token = strings.TrimSpace(tok.stdout)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	serve = start(t, env, "serve", "--listen", addr)
	waitFor(t, "the owner to listen", func() bool {
		resp, err := http.Get("http://" + addr + "/v1/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	t.Cleanup(func() {
		serve.cmd.Process.Signal(syscall.SIGTERM)
		serve.wait(t)
	})
	return addr, token, serve
}

// api sends a request with the token and returns the status and body.
func api(t *testing.T, addr, token, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+addr+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// principalsEnv is a user with a config file whose profile points at a
// fake model and takes its key from $FAKE_KEY, and a project folder with
// an AGENTS.md.
func principalsEnv(t *testing.T) (env map[string]string, fake *fakeopenai.Server, project string) {
	fake = fakeopenai.New(t, fakeopenai.Rule{Reply: fakeopenai.Reply{Text: "hello from the fake"}})
	home := t.TempDir()
	cfg := filepath.Join(home, "config.yaml")
	os.WriteFile(cfg, []byte("profile: local\nprofiles:\n  local: {base_url: \""+fake.URL+"\", model: fake, api_key_env: FAKE_KEY}\n"), 0o600)
	project = t.TempDir()
	os.WriteFile(filepath.Join(project, "AGENTS.md"), []byte("The secret word is PINEAPPLE."), 0o600)
	env = map[string]string{"WAGENT_HOME": home, "WAGENT_CONFIG": cfg, "FAKE_KEY": "k-local", "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	return env, fake, project
}

// The user at their own terminal is not a remote stranger: with wagent
// serve --listen owning the store, their runs through its socket use their
// config, their key, their files and their project's AGENTS.md, while a
// client with the token still may not.
func TestLocalUserIsTrustedWhileTheOwnerServesTCP(t *testing.T) {
	env, fake, project := principalsEnv(t)
	addr, token, _ := servedOverTCP(t, env)

	r := exeIn(t, project, 60*time.Second, env, "run", "--session", "mine", "hello")
	if r.code != exitOK {
		t.Fatalf("wagent run through the owner serving TCP: exit %d\n%s", r.code, r.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the fake model got no request")
	}
	last := reqs[len(reqs)-1]
	if got := last.Header.Get("Authorization"); got != "Bearer k-local" {
		t.Errorf("the request's Authorization is %q, want the user's key", got)
	}
	if body, _ := json.Marshal(last.Body.Messages); !strings.Contains(string(body), "PINEAPPLE") {
		t.Errorf("the project's AGENTS.md did not reach the model: %s", body)
	}
	// A second run of the session, and a pipeline file of the user's
	// outside any project root.
	if r := exeIn(t, project, 60*time.Second, env, "run", "--session", "mine", "hi again"); r.code != exitOK {
		t.Fatalf("run --session mine again: exit %d\n%s", r.code, r.stderr)
	}
	pipe := filepath.Join(t.TempDir(), "mine.yaml")
	os.WriteFile(pipe, []byte("ops:\n- use: builtin:approval\n  config: {mode: auto}\n"), 0o600)
	if r := exeIn(t, project, 60*time.Second, env, "run", "--pipeline", pipe, "with my pipeline"); r.code != exitOK {
		t.Fatalf("run --pipeline outside the project roots: exit %d\n%s", r.code, r.stderr)
	}

	// A remote client with the token is still restricted.
	for _, c := range []struct {
		name     string
		settings map[string]any
	}{
		{"a base URL the owner does not trust, with the owner's key", map[string]any{"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "FAKE_KEY"}},
		{"a pipeline outside the project roots", map[string]any{"provider": "openai", "model": "fake", "base_url": fake.URL, "api_key_env": "FAKE_KEY", "pipeline": pipe}},
		{"settings claiming the local user chose them", map[string]any{"provider": "openai", "model": "fake", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "FAKE_KEY", "by": "local"}},
	} {
		code, body := api(t, addr, token, "POST", "/v1/sessions", map[string]any{"settings": c.settings})
		if code != http.StatusForbidden || !strings.Contains(body, `"forbidden"`) {
			t.Errorf("%s: a remote create answered %d %s, want 403 forbidden", c.name, code, body)
		}
	}
}

// The console's Start a session: a remote client lists the owner's
// profiles and starts a session from one, which runs on the config's
// model with the owner's key (the profile's base URL is the owner's).
func TestRemoteClientStartsASessionFromAProfile(t *testing.T) {
	env, fake, _ := principalsEnv(t)
	addr, token, _ := servedOverTCP(t, env)

	code, body := api(t, addr, token, "GET", "/v1/choices", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/choices: %d %s", code, body)
	}
	var ch struct {
		Profiles []struct{ Name, Model string }
		Default  string `json:"default_profile"`
		Model    string
	}
	json.Unmarshal([]byte(body), &ch)
	if len(ch.Profiles) != 1 || ch.Profiles[0].Name != "local" || ch.Profiles[0].Model != "fake" || ch.Default != "local" {
		t.Fatalf("choices: %s", body)
	}
	code, body = api(t, addr, token, "POST", "/v1/sessions", map[string]any{"id": "from-console", "profile": "local", "prompt": "hi"})
	if code != http.StatusCreated {
		t.Fatalf("create from profile local: %d %s", code, body)
	}
	// Follow the session on its stream until the model's answer is in it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var answered bool
	err := server.NewClient("http://"+addr, token, nil).Stream(ctx, "from-console", 1, func(ev server.StreamEvent) error {
		if ev.Kind == "event" && ev.Event.Type == event.EvAssistantMessage && strings.Contains(string(ev.Event.Data), "hello from the fake") {
			answered = true
			return server.ErrStop
		}
		return nil
	})
	if err != nil || !answered {
		t.Fatalf("following the session for the model's answer: %v", err)
	}
	reqs := fake.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer k-local" {
		t.Errorf("Authorization %q, want the owner's key for its own profile's base URL", got)
	}
	// With no profile named, the config's default profile fills in: no
	// "--provider openai needs a model".
	code, body = api(t, addr, token, "POST", "/v1/sessions", map[string]any{"id": "defaults"})
	if code != http.StatusCreated || !strings.Contains(body, `"model":"fake"`) {
		t.Errorf("create with no settings: %d %s", code, body)
	}
}

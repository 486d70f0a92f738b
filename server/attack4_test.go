package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// Attack: a handler that panics (an embedder's code run inside a request)
// served in-process must not take the whole process down, as net/http's
// server would not; the client gets an error, not a 200 with no body.
func TestAttackInProcessHandlerPanics(t *testing.T) {
	for _, after := range []bool{false, true} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if after {
				w.WriteHeader(http.StatusOK)
				w.Write([]byte("partial"))
			}
			panic("boom")
		})
		cl := &http.Client{Transport: server.InProcess(h)}
		resp, err := cl.Get("http://wagent/v1/health")
		if err != nil {
			continue // refused: fine
		}
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !after && resp.StatusCode == http.StatusOK {
			t.Errorf("a handler that panicked before answering: %d %q, want an error", resp.StatusCode, b)
		}
		if after && rerr == nil {
			t.Errorf("a handler that panicked mid-body: the body read to its end without an error (%q)", b)
		}
	}
}

// The transport closes the request's body, as a RoundTripper must.
func TestInProcessClosesTheRequestBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	body := &closeRecorder{Reader: strings.NewReader("{}")}
	req, _ := http.NewRequest("POST", "http://wagent/x", body)
	resp, err := server.InProcess(h).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if !body.closed {
		t.Error("the request body was never closed")
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// Attack, through the API: a remote client makes a session sending its
// own key to its own base URL; the local user changes its model (the CLI
// sends the recorded settings with the change). The change must not make
// the remote's base URL one the owner sends its keys to.
func TestAttackLocalSettingsChangeLaundersRemoteChoice(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "owner-key"}
	node, err := app.Open(context.Background(), app.Options{Log: store.NewMemory(), Getenv: func(k string) string { return env[k] }, Exposed: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(node, server.Options{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(context.Background())
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx := context.Background()
	remote := server.NewClient(hs.URL, "tok", nil)
	local := server.NewClient("http://owner", "", &http.Client{Transport: server.InProcess(srv)})
	created, err := remote.Create(ctx, &server.CreateRequest{ID: "r1", Settings: json.RawMessage(`{"provider":"openai","model":"m","base_url":"https://evil.example/v1"}`), Secrets: map[string]string{app.SecretAPIKey: "remote-own"}})
	if err != nil {
		t.Fatalf("the remote's create with its own key: %v", err)
	}
	s, _ := app.ReadSettings(created.Settings)
	s.Model = "m2"
	_, err = local.ChangeSettings(ctx, "r1", server.SettingsRequest{Settings: s.JSON()})
	if !server.IsCode(err, server.CodeForbidden) {
		t.Errorf("the local user's model change keeping the remote's base URL: %v, want 403", err)
	}
	// Naming a base URL of their own, it is theirs.
	s.BaseURL = "https://api.openai.com/v1"
	if _, err := local.ChangeSettings(ctx, "r1", server.SettingsRequest{Settings: s.JSON()}); err != nil {
		t.Errorf("the local user replacing the remote's base URL: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/server"
)

// Two tenants on one node: each uploads its op and runs a session with
// it; neither sees, drives or borrows the other's.
func TestTenantsAreIsolated(t *testing.T) {
	h, closeFn, err := New(context.Background(), t.TempDir(), map[string]string{"ta": "alice", "tb": "bob"}, standIn{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(token, method, path string, body []byte) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	calc, err := os.ReadFile("../wasm-ops/calculator/calculator.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do("ta", "POST", "/op", calc); code != 200 {
		t.Fatalf("alice uploads her op: %d %s", code, body)
	}
	create := func(token, pipeline, id string) (int, string) {
		b, _ := json.Marshal(map[string]any{"id": id, "settings": map[string]any{"provider": "embedded", "pipeline": pipeline}, "prompt": "add 42"})
		return do(token, "POST", "/api/v1/sessions", b)
	}
	if code, body := create("ta", "tenant-alice", "a1"); code != http.StatusCreated {
		t.Fatalf("alice creates a session with her pipeline: %d %s", code, body)
	}
	// Follow alice's session on its stream until its turn ends.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var types []string
	err = server.NewClient(srv.URL+"/api", "ta", nil).Stream(ctx, "a1", 1, func(ev server.StreamEvent) error {
		if ev.Kind == "event" {
			types = append(types, ev.Event.Type)
			if ev.Event.Type == "turn/end" {
				return server.ErrStop
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("follow alice's session: %v", err)
	}
	if _, evs := do("ta", "GET", "/api/v1/sessions/a1/events", nil); !strings.Contains(evs, "tool/result") || !strings.Contains(evs, "calc_add") {
		t.Fatalf("alice's turn ended without her op's result: %v", types)
	}

	// Bob borrows alice's pipeline: refused, nothing created.
	if code, body := create("tb", "tenant-alice", "b1"); code != http.StatusForbidden {
		t.Errorf("bob naming alice's pipeline: %d %s, want 403", code, body)
	}
	// Bob reads, drives or lists alice's session: there is none for him.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/sessions/a1", ""},
		{"GET", "/api/v1/sessions/a1/events", ""},
		{"POST", "/api/v1/sessions/a1/send", `{"message":"hi"}`},
		{"POST", "/api/v1/sessions/a1/cancel", `{}`},
		{"POST", "/api/v1/sessions/a1/fork", `{"at":1}`},
	} {
		if code, body := do("tb", c.method, c.path, []byte(c.body)); code != http.StatusNotFound {
			t.Errorf("bob %s %s: %d %s, want 404", c.method, c.path, code, body)
		}
	}
	if _, body := do("tb", "GET", "/api/v1/sessions", nil); strings.Contains(body, "a1") {
		t.Errorf("bob's list shows alice's session: %s", body)
	}
	// A session file of this machine, or a base URL for its keys: refused.
	b, _ := json.Marshal(map[string]any{"settings": map[string]any{"provider": "script", "script": "/etc/passwd"}})
	if code, body := do("tb", "POST", "/api/v1/sessions", b); code != http.StatusForbidden {
		t.Errorf("bob naming a file of the server: %d %s, want 403", code, body)
	}
	// No token, or a wrong one: 401.
	if code, _ := do("nope", "GET", "/api/v1/sessions", nil); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", code)
	}
}

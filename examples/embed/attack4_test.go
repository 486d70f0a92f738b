package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store/jsonl"
)

// tenantsAPI serves the example for alice (token ta) and bob (tb) with a
// quota of max sessions each, and returns a request helper.
func tenantsAPI(t *testing.T, max int) func(token, method, path string, body []byte) (int, string) {
	t.Helper()
	_, do := tenantsServer(t, max)
	return do
}

// tenantsServer is tenantsAPI with the server's address, for a client
// that follows streams.
func tenantsServer(t *testing.T, max int) (string, func(token, method, path string, body []byte) (int, string)) {
	t.Helper()
	old := maxSessions
	maxSessions = max
	t.Cleanup(func() { maxSessions = old })
	h, closeFn, err := New(context.Background(), t.TempDir(), map[string]string{"ta": "alice", "tb": "bob"}, standIn{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); closeFn() })
	return srv.URL, func(token, method, path string, body []byte) (int, string) {
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
}

func createBody(id string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "settings": map[string]any{"provider": "embedded"}})
	return b
}

// Attack: a tenant at its session quota makes more sessions by forking
// its own session, or by importing its own export, neither of which goes
// through a create.
func TestAttackQuotaBypassByForkAndImport(t *testing.T) {
	do := tenantsAPI(t, 2)
	if code, body := do("ta", "POST", "/api/v1/sessions", createBody("a1")); code != http.StatusCreated {
		t.Fatalf("create a1: %d %s", code, body)
	}
	// Forks at seq 1 (session/created is a boundary).
	created := 1
	for i := 0; i < 4; i++ {
		code, body := do("ta", "POST", "/api/v1/sessions/a1/fork", []byte(fmt.Sprintf(`{"at":1,"as":"f%d"}`, i)))
		if code == http.StatusCreated {
			created++
		} else if code != http.StatusForbidden {
			t.Fatalf("fork %d: %d %s", i, code, body)
		}
	}
	// Imports of alice's own log.
	_, evBody := do("ta", "GET", "/api/v1/sessions/a1/events", nil)
	var evs server.Events
	if err := json.Unmarshal([]byte(evBody), &evs); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	jsonl.Write(&buf, jsonl.Header{Session: "a1"}, evs.Events[:1])
	for i := 0; i < 4; i++ {
		code, body := do("ta", "POST", fmt.Sprintf("/api/v1/sessions/i%d/import", i), buf.Bytes())
		if code == http.StatusCreated {
			created++
		} else if code != http.StatusForbidden {
			t.Fatalf("import %d: %d %s", i, code, body)
		}
	}
	if created > 2 {
		t.Errorf("alice, with a quota of 2 sessions, has %d (forks and imports count too)", created)
	}
	// The quota is alice's, not bob's.
	if code, body := do("tb", "POST", "/api/v1/sessions", createBody("b1")); code != http.StatusCreated {
		t.Errorf("bob's first create: %d %s", code, body)
	}
}

// Attack: many creates at once all pass the quota check before any of
// them is counted.
func TestAttackQuotaBypassByConcurrentCreates(t *testing.T) {
	do := tenantsAPI(t, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := do("ta", "POST", "/api/v1/sessions", createBody(fmt.Sprintf("c%d", i)))
			if code == http.StatusCreated {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok > 2 {
		t.Errorf("%d concurrent creates succeeded for a tenant with a quota of 2", ok)
	}
}

// A settings change is not a new session: it must not use up the quota,
// nor be refused because the quota is used up.
func TestSettingsChangeIsNotACreate(t *testing.T) {
	do := tenantsAPI(t, 1)
	if code, body := do("ta", "POST", "/api/v1/sessions", createBody("a1")); code != http.StatusCreated {
		t.Fatalf("create a1: %d %s", code, body)
	}
	if code, body := do("ta", "POST", "/api/v1/sessions/a1/settings", []byte(`{"settings":{"provider":"embedded","model":"x"}}`)); code != http.StatusOK {
		t.Errorf("alice changes her only session's settings: %d %s", code, body)
	}
}

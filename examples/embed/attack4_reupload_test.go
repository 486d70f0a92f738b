package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/server"
)

// A tenant that uploads a new op gets it: the node must not keep running
// the module it cached for the tenant's pipeline before (the pipeline's
// YAML is the same for every upload; only the module differs).
func TestReuploadedOpIsTheOneThatRuns(t *testing.T) {
	url, do := tenantsServer(t, 100)
	run := func(id string) string {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"id": id, "settings": map[string]any{"provider": "embedded", "pipeline": "tenant-alice"}, "prompt": "add 42"})
		if code, body := do("ta", "POST", "/api/v1/sessions", b); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, code, body)
		}
		// Follow the session on its stream until its turn ends.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := server.NewClient(url+"/api", "ta", nil).Stream(ctx, id, 1, func(ev server.StreamEvent) error {
			if ev.Kind == "event" && ev.Event.Type == "turn/end" {
				return server.ErrStop
			}
			return nil
		})
		if err != nil {
			t.Fatalf("session %s: no turn/end: %v", id, err)
		}
		_, evs := do("ta", "GET", "/api/v1/sessions/"+id+"/events", nil)
		return evs
	}
	for _, c := range []struct {
		file, id string
		calc     bool
	}{
		{"../wasm-ops/calculator/calculator.wasm", "s1", true},
		{"../wasm-ops/policy-as/policy.wasm", "s2", false},
	} {
		wasm, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := do("ta", "POST", "/op", wasm); code != 200 {
			t.Fatalf("upload %s: %d %s", c.file, code, body)
		}
		if got := strings.Contains(run(c.id), "calc_add"); got != c.calc {
			t.Errorf("after uploading %s, session %s ran calc_add: %v, want %v", c.file, c.id, got, c.calc)
		}
	}
}

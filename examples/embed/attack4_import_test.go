package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jsonl"
)

// Attack: a tenant imports a log whose settings are empty (naming no
// principal): the node, reached by no "remote" client, would open it as
// the local user's and no tenant's quota counts it.
func TestAttackImportWithoutSettings(t *testing.T) {
	do := tenantsAPI(t, 100)
	data, _ := json.Marshal(map[string]any{"created_by": "x"})
	var buf bytes.Buffer
	jsonl.Write(&buf, jsonl.Header{Session: "x"}, []store.Event{{Seq: 1, Type: "session/created", Time: time.Now(), Data: data}})
	code, body := do("ta", "POST", "/api/v1/sessions/e1/import", buf.Bytes())
	if code == http.StatusCreated {
		t.Errorf("a tenant imported a log with no settings (opened as the local user's): %d %s", code, body)
	}
}

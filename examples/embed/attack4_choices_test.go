package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// Attack: bob asks what he may pick from and learns the other tenants'
// pipelines (their names, so who the tenants are).
func TestAttackChoicesListOtherTenantsPipelines(t *testing.T) {
	do := tenantsAPI(t, 100)
	calc, err := os.ReadFile("../wasm-ops/calculator/calculator.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do("ta", "POST", "/op", calc); code != 200 {
		t.Fatalf("alice uploads her op: %d %s", code, body)
	}
	if code, body := do("tb", "POST", "/op", calc); code != 200 {
		t.Fatalf("bob uploads his op: %d %s", code, body)
	}
	_, body := do("tb", "GET", "/api/v1/choices", nil)
	if strings.Contains(body, "tenant-alice") {
		t.Errorf("bob's choices list alice's pipeline: %s", body)
	}
	if !strings.Contains(body, "tenant-bob") {
		t.Errorf("bob's choices lack his own pipeline: %s", body)
	}
	// Bob switching his session onto alice's pipeline: refused.
	if code, body := do("tb", "POST", "/api/v1/sessions", createBody("b1")); code != http.StatusCreated {
		t.Fatalf("create b1: %d %s", code, body)
	}
	if code, body := do("tb", "POST", "/api/v1/sessions/b1/settings", []byte(`{"settings":{"provider":"embedded","pipeline":"tenant-alice"}}`)); code != http.StatusForbidden {
		t.Errorf("bob switches to alice's pipeline: %d %s, want 403", code, body)
	}
}

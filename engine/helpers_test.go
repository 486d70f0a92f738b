package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/wagent/wagent/store"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func mustDecode(t *testing.T, e store.Event, v any) {
	t.Helper()
	if err := jsonUnmarshal(e.Data, v); err != nil {
		t.Fatalf("seq %d: %v", e.Seq, err)
	}
}

package abitest

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// The filter's output is JSON that the reference codec reads as the same
// view and message: only unknown keys were added, and the config and the
// arguments are untouched, byte for byte.
func TestAddUnknownKeys(t *testing.T) {
	man := &hostabi.Manifest{Name: "x", Guard: true, Tools: []string{"t"}, Hooks: hostabi.Hooks, Commands: []string{"c"}}
	for _, s := range scenarios(man) {
		v := s.view(man, 3)
		v.Config = json.RawMessage(`{"allow": ["a"], "nested": {"k": 1}}`)
		doc := addUnknownKeys(wasmhost.DocView, hostabi.AppendView(nil, v))
		if !json.Valid(doc) {
			t.Fatalf("%s: not JSON: %s", s.name, doc)
		}
		var got hostabi.View
		if err := hostabi.ParseView(doc, &got); err != nil {
			t.Fatalf("%s: %v\n%s", s.name, err, doc)
		}
		if diff := cmp.Diff(v, &got); diff != "" {
			t.Errorf("%s: view mismatch (-want +got):\n%s", s.name, diff)
		}
	}
	r := newReader(8, nil)
	for i := 0; i < 8; i++ {
		m, _ := r.Message(i)
		doc := addUnknownKeys(wasmhost.DocMessage, hostabi.AppendMessage(nil, &m))
		var got hostabi.Message
		if err := hostabi.ParseMessage(doc, &got); err != nil {
			t.Fatalf("message %d: %v\n%s", i, err, doc)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("message %d mismatch (-want +got):\n%s", i, diff)
		}
	}
}

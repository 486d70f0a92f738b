package builtins_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/wasmhost"
	"github.com/wagent/wagent/wasmhost/abitest"
)

// Every built-in passes the conformance kit, each op of the bundle with a
// config it would run with (turn-stopping needs one) and the skills op
// with the repository's skills folder mounted.
func TestConformance(t *testing.T) {
	skills, err := filepath.Abs(filepath.Join(root, "testdata", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	for name, wasm := range map[string][]byte{"all": builtins.Module(), "core": builtins.CoreModule()} {
		t.Run(name, func(t *testing.T) {
			abitest.Run(t, wasm, abitest.Options{
				Ops: map[string]abitest.OpOptions{
					"approval":      {Config: json.RawMessage(`{"mode":"ask","allow":["load_skill"],"deny":["rm"]}`)},
					"skills":        {Mounts: []wasmhost.Mount{{HostDir: skills, GuestPath: "/skills"}}},
					"retry":         {Config: json.RawMessage(`{"attempts":3}`)},
					"turn-stopping": {Config: json.RawMessage(`{"require_phrase":"DONE"}`)},
					"max-turns":     {Config: json.RawMessage(`{"max_steps":20}`)},
					"prompt":        {Config: json.RawMessage(`{"text":"Be brief."}`)},
				},
				Runtime: []wasmhost.Option{wasmhost.WithCacheDir(filepath.Join(os.TempDir(), "wagent-builtins-test-cache"))},
			})
		})
	}
}

package abitest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/wasmhost"
	"github.com/wagent/wagent/wasmhost/abitest"
)

func cache() []wasmhost.Option {
	return []wasmhost.Option{wasmhost.WithCacheDir(filepath.Join(os.TempDir(), "wagent-abitest-cache"))}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every op module of the repository passes the kit: the hand-written WAT
// ops and the Go guests. (The built-ins run it in package builtins, the
// AssemblyScript and C examples in examples/wasm-ops.)
func TestRepositoryModules(t *testing.T) {
	for _, tc := range []struct {
		path string
		o    abitest.Options
	}{
		{"testdata/wat/ping.wasm", abitest.Options{}},
		{"testdata/wat/noop.wasm", abitest.Options{}},
		{"examples/wasm-ops/deny-word/deny-word.wasm", abitest.Options{Default: abitest.OpOptions{Config: json.RawMessage(`{"word":"rm"}`)}}},
		{"examples/wasm-ops/calculator/calculator.wasm", abitest.Options{}},
		{"guests/examples/policy/policy.wasm", abitest.Options{Default: abitest.OpOptions{Config: json.RawMessage(`{"allow":["calc_total"],"deny":["rm"]}`)}}},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			tc.o.Runtime = cache()
			abitest.Run(t, read(t, tc.path), tc.o)
		})
	}
}

// Each module of testdata breaks one rule; the kit fails it at that check,
// with a message naming the rule, and passes every other check.
func TestCatches(t *testing.T) {
	for _, tc := range []struct {
		module, check, msg string
	}{
		{"eager", "tool/not-asked/", "although the host did not ask it to run it"},
		{"remembers", "command/deterministic", "remembers something between calls"},
		{"strict", "command/unknown-keys", "the view does not start with its hook"},
	} {
		t.Run(tc.module, func(t *testing.T) {
			rep, err := abitest.Check(context.Background(), read(t, "wasmhost/abitest/testdata/"+tc.module+".wasm"), abitest.Options{Runtime: cache()})
			if err != nil {
				t.Fatal(err)
			}
			failed := rep.Failed()
			if len(failed) == 0 {
				t.Fatalf("no check failed; want %s", tc.check)
			}
			for _, r := range failed {
				if !strings.HasPrefix(r.Check, tc.check) || !strings.Contains(r.Err.Error(), tc.msg) {
					t.Errorf("%s failed: %v; want only %s to fail, saying %q", r.Check, r.Err, tc.check, tc.msg)
				}
			}
		})
	}
}

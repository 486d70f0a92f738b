package ops

import (
	"os"
	"path/filepath"
	"testing"
)

func repoFile(p string) string { return filepath.Join("..", "..", "..", "..", filepath.FromSlash(p)) }

// The section reader reads any bytes without panicking.
func FuzzReadWasmInfo(f *testing.F) {
	for _, p := range []string{"examples/wasm-ops/policy-c/policy.wasm", "examples/wasm-ops/policy-as/policy.wasm", "testdata/wat/ping.wasm"} {
		b, err := os.ReadFile(repoFile(p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		readWasmInfo(b)
	})
}

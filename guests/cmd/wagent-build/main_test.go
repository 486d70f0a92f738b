package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/guests/opbuild"
)

func TestEmbedValidates(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "m.json")
	os.WriteFile(bad, []byte(`{"name":"x","abi":"1.0","hooks":["nope"]}`), 0o644)
	var stderr bytes.Buffer
	code := run([]string{"-manifest", bad, "-o", filepath.Join(dir, "out.wasm"), "../../../testdata/wat/noop.wasm"}, &stderr, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `unknown hook "nope"`) {
		t.Fatalf("code %d, stderr %q", code, stderr.String())
	}
	good := filepath.Join(dir, "g.json")
	os.WriteFile(good, []byte(`{ "name": "x", "abi": "1.0", "hooks": ["tool"] }`), 0o644)
	out := filepath.Join(dir, "out.wasm")
	if code := run([]string{"-manifest", good, "-o", out, "../../../testdata/wat/noop.wasm"}, &stderr, &stderr); code != 0 {
		t.Fatalf("code %d: %s", code, stderr.String())
	}
	b, _ := os.ReadFile(out)
	got, err := opbuild.CustomSections(b, "wagent.manifest")
	if err != nil || len(got) != 1 || string(got[0]) != `{"name":"x","abi":"1.0","hooks":["tool"],"capabilities":{}}` {
		t.Fatalf("embedded %q, %v", got, err)
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sections(t *testing.T, mod []byte, name string) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 8; i < len(mod); {
		id := mod[i]
		size, n := uleb(mod[i+1:])
		body := mod[i+1+n : i+1+n+int(size)]
		i += 1 + n + int(size)
		if id == 0 {
			l, m := uleb(body)
			if string(body[m:m+int(l)]) == name {
				out = append(out, body[m+int(l):])
			}
		}
	}
	return out
}

func TestSetCustomSectionReplaces(t *testing.T) {
	mod, err := os.ReadFile("../../../testdata/wat/noop.wasm")
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 300) // a two-byte LEB size
	out, err := SetCustomSection(mod, "wagent.manifest", big)
	if err != nil {
		t.Fatal(err)
	}
	out, err = SetCustomSection(out, "wagent.manifest", []byte(`{"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	got := sections(t, out, "wagent.manifest")
	if len(got) != 1 || string(got[0]) != `{"b":2}` {
		t.Fatalf("sections = %q", got)
	}
	if _, err := SetCustomSection([]byte("not wasm"), "x", nil); err == nil {
		t.Fatal("accepted a non-module")
	}
	if _, err := SetCustomSection(mod[:len(mod)-3], "x", nil); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated module: %v", err)
	}
}

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
	if got := sections(t, b, "wagent.manifest"); len(got) != 1 || string(got[0]) != `{"name":"x","abi":"1.0","hooks":["tool"],"capabilities":{}}` {
		t.Fatalf("embedded %q", got)
	}
}

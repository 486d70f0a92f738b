package opbuild

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/wagent/wagent/wasmhost/wasmbin"
)

func TestSetCustomSectionReplaces(t *testing.T) {
	mod, err := os.ReadFile("../../testdata/wat/noop.wasm")
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
	got, err := CustomSections(out, "wagent.manifest")
	if err != nil || len(got) != 1 || string(got[0]) != `{"b":2}` {
		t.Fatalf("sections = %q, %v", got, err)
	}
	if len(out) != len(mod)-sectionLen(t, mod)+3+len("wagent.manifest")+len(`{"b":2}`) {
		t.Errorf("module grew from %d to %d bytes; only the manifest section should differ", len(mod), len(out))
	}
	if _, err := SetCustomSection([]byte("not wasm"), "x", nil); err == nil {
		t.Fatal("accepted a non-module")
	}
	if _, err := SetCustomSection(mod[:len(mod)-3], "x", nil); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated module: %v", err)
	}
}

// sectionLen is the size of mod's manifest sections, headers included.
func sectionLen(t *testing.T, mod []byte) int {
	n := 0
	for sec, err := range wasmbin.Sections(mod) {
		if err != nil {
			t.Fatal(err)
		}
		if name, _, _ := sec.Custom(); name == "wagent.manifest" {
			n += len(sec.AppendTo(nil))
		}
	}
	return n
}

func TestAtLeast(t *testing.T) {
	for v, want := range map[string]bool{
		"go1.24": true, "go1.24.0": true, "go1.26.8": true, "go1.23.9": false, "go1.9": false,
		"go1.100": true, "go2.0": true, "go1.25rc1": true, "go1.24rc1": true, "devel go1.27-abc": true,
	} {
		if got := atLeast(v, "1.24"); got != want {
			t.Errorf("atLeast(%q, 1.24) = %v, want %v", v, got, want)
		}
	}
}

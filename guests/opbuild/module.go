package opbuild

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wagent/wagent/hostabi"
)

// An op's own module builds without the wagent repository and without a
// module proxy: the kit's source (hostabi and guests/pdk, which import
// only the standard library) is copied into the module at KitDir, as a
// module of its own named github.com/wagent/wagent, and the op's go.mod
// points there with a replace directive. wagent ops build refreshes the
// copy from the kit the wagent binary carries, so an op is built against
// the ABI of the wagent that runs it.

// KitDir is where a module written by New keeps its copy of the kit,
// relative to the module's root.
const KitDir = ".wagent/kit"

// kitModule is the module path the kit's packages are imported by.
const kitModule = "github.com/wagent/wagent"

// kitGoMod is the go.mod of the kit's copy.
const kitGoMod = "module " + kitModule + "\n\ngo " + MinGo + "\n"

const kitReadme = `This folder is the wagent guest kit (hostabi and guests/pdk) that
wagent ops new wrote and wagent ops build refreshes from the wagent
binary, so that the op builds without a module proxy and against the ABI
of the wagent that runs it. Do not edit it: a build overwrites it. Commit
it with the op, so that go test works in a fresh clone.
`

// UsesKit reports whether the module rooted at dir builds against a copy
// of the kit (its go.mod replaces the kit's module with KitDir).
func UsesKit(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.Contains(b, []byte("=> ./"+KitDir))
}

// ModuleRoot returns the directory of the go.mod that governs dir.
func ModuleRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside a Go module (no go.mod): create one with wagent ops new NAME", dir)
		}
	}
}

// SyncKit makes the kit's copy in the module rooted at dir the same as
// kit (an fs.FS holding hostabi/*.go and guests/pdk/*.go, as
// wagent.GuestKit returns): it writes the files that differ, removes those
// kit no longer has, and reports whether it changed anything.
func SyncKit(dir string, kit fs.FS) (changed bool, err error) {
	want := map[string][]byte{"go.mod": []byte(kitGoMod), "README": []byte(kitReadme)}
	err = fs.WalkDir(kit, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(kit, p)
		want[p] = b
		return err
	})
	if err != nil {
		return false, fmt.Errorf("reading the guest kit: %w", err)
	}
	if _, ok := want["guests/pdk/pdk.go"]; !ok {
		return false, errors.New("the guest kit holds no guests/pdk/pdk.go: this wagent was built without its kit")
	}
	root := filepath.Join(dir, filepath.FromSlash(KitDir))
	// What is there now, so that files the kit dropped are removed.
	have := map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			have[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	names := make([]string, 0, len(want))
	for p := range want {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		delete(have, p)
		file := filepath.Join(root, filepath.FromSlash(p))
		if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, want[p]) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return changed, err
		}
		if err := os.WriteFile(file, want[p], 0o644); err != nil {
			return changed, err
		}
		changed = true
	}
	for p := range have {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// New writes a new op module called name into dir (created if missing;
// it must be empty if it exists): go.mod, main.go (an op that owns one
// tool, written with the kit), main_test.go (its unit test, run natively
// with go test) and the kit's copy. wagent ops build builds it.
func New(dir, name string, kit fs.FS) error {
	probe := hostabi.Manifest{Name: name, ABI: hostabi.ABIVersion(), Hooks: []hostabi.Hook{hostabi.HookTool}}
	if err := probe.Validate(); err != nil || !isAlnum(name[0]) {
		return fmt.Errorf("%q cannot name an op: use 1-64 characters of a-z, A-Z, 0-9, '.', '_', '-', starting with a letter or digit", name)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty: name a new folder, or an empty one", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"go.mod":       goMod(name),
		"main.go":      mainGo(name),
		"main_test.go": mainTest(name),
		".gitignore":   "/*.wasm\n",
	}
	for p, text := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(text), 0o644); err != nil {
			return err
		}
	}
	_, err := SyncKit(dir, kit)
	return err
}

func goMod(name string) string {
	return "module " + name + "\n\ngo " + MinGo + "\n\n" +
		"require " + kitModule + " v0.0.0\n\n" +
		"// The guest kit, copied here by wagent ops new and refreshed by wagent ops build.\n" +
		"replace " + kitModule + " => ./" + KitDir + "\n"
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func mainGo(name string) string {
	return strings.ReplaceAll(`// Command NAME is a wagent operation. It owns one tool, shout, which
// answers its text in capitals. Build it with wagent ops build; add it to
// a pipeline with "- use: ./NAME.wasm".
package main

import (
	"errors"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// shoutArgs are the tool's arguments; Fields names them (the model is
// offered the JSON Schema derived from it).
type shoutArgs struct{ Text string }

func (a *shoutArgs) Fields(f *pdk.Fields) {
	f.String("text", &a.Text).Required().Describe("what to shout")
}

// shout runs only when the host asks: after every guard allowed the call.
// An error becomes an error result the model reads.
func shout(c *pdk.Call, a shoutArgs) (string, error) {
	if strings.TrimSpace(a.Text) == "" {
		return "", errors.New("there is nothing to shout: text is empty")
	}
	return strings.ToUpper(a.Text) + "!", nil
}

func init() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{Name: "NAME", Version: "0.1.0"},
		Tools: []pdk.OwnedTool{
			pdk.Tool(hostabi.ToolSpec{Name: "shout", Description: "Say the text back in capitals."}, shout),
		},
	})
}

func main() { pdk.Main() }
`, "NAME", name)
}

func mainTest(name string) string {
	return strings.ReplaceAll(`package main

import (
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// run asks the op to run one shout call, as the host does once every
// guard allowed it, and returns the result.
func run(t *testing.T, args string) hostabi.Effect {
	t.Helper()
	effects, err := pdk.Test(&hostabi.View{Hook: hostabi.HookTool, Tool: &hostabi.ToolView{
		Run:   "call-1",
		Calls: []hostabi.PendingCall{{ID: "call-1", Name: "shout", Arguments: []byte(args), Owner: "NAME"}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(effects) != 1 {
		t.Fatalf("effects = %+v, want one result", effects)
	}
	return effects[0]
}

func TestShout(t *testing.T) {
	if r := run(t, `+"`"+`{"text": "hello"}`+"`"+`); r.IsError || r.Content != "HELLO!" {
		t.Errorf("result = %q (error %v), want HELLO!", r.Content, r.IsError)
	}
	if r := run(t, `+"`"+`{"txt": "hello"}`+"`"+`); !r.IsError {
		t.Errorf("a misspelt argument gave %q, want an error result", r.Content)
	}
}
`, "NAME", name)
}

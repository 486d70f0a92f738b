package wasmhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
)

// One Runtime for the package's tests, so each module is compiled once.
var (
	testRT     *Runtime
	testRTOnce sync.Once
	modMu      sync.Mutex
	modCache   = map[string]*Module{}
)

func TestMain(m *testing.M) {
	// The test binary doubles as a command the exec tests run, confined
	// or not (see testHelper).
	if h := os.Getenv("WAGENT_TEST_HELPER"); h != "" {
		os.Exit(testHelper(h))
	}
	code := m.Run()
	if testRT != nil {
		testRT.Close(context.Background())
	}
	os.Exit(code)
}

func rt(t testing.TB) *Runtime {
	testRTOnce.Do(func() {
		r, err := NewRuntime(context.Background())
		if err != nil {
			panic(err)
		}
		testRT = r
	})
	return testRT
}

// repo returns a path from the repository root.
func repo(p string) string { return filepath.Join("..", filepath.FromSlash(p)) }

// load loads (once) a module from a path relative to the repository root.
func load(t testing.TB, path string, opts ...LoadOption) *Module {
	t.Helper()
	key := path
	if len(opts) > 0 {
		var lo loadOptions
		for _, f := range opts {
			f(&lo)
		}
		key += fmt.Sprintf("#%+v", lo)
	}
	modMu.Lock()
	defer modMu.Unlock()
	if m, ok := modCache[key]; ok {
		return m
	}
	m, err := rt(t).LoadFile(context.Background(), repo(path), opts...)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	modCache[key] = m
	return m
}

func newOp(t testing.TB, m *Module, cfg Config) *Op {
	t.Helper()
	o, err := rt(t).NewOp(m, cfg)
	if err != nil {
		t.Fatalf("NewOp: %v", err)
	}
	return o
}

// fakeReader serves n generated messages and a map of notes.
type fakeReader struct {
	messages []hostabi.Message
	notes    map[string]string
}

func (f *fakeReader) Message(i int) (hostabi.Message, bool) {
	if i < 0 || i >= len(f.messages) {
		return hostabi.Message{}, false
	}
	return f.messages[i], true
}

func (f *fakeReader) Note(key string) (string, bool) {
	v, ok := f.notes[key]
	return v, ok
}

var _ engine.Reader = (*fakeReader)(nil)

func history(n int) *fakeReader {
	f := &fakeReader{notes: map[string]string{}}
	for i := 0; i < n; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		f.messages = append(f.messages, hostabi.Message{Role: role, ID: "m" + strings.Repeat("x", i%7), Content: strings.Repeat("lorem ipsum ", 40)})
	}
	return f
}

// toolView is a tool hook view with two pending calls.
func toolView(calls ...string) *hostabi.View {
	v := &hostabi.View{Hook: hostabi.HookTool, Session: "s1", Op: "allowlist", Turn: 1, Step: 1, Tool: &hostabi.ToolView{}}
	for i, name := range calls {
		v.Tool.Calls = append(v.Tool.Calls, hostabi.PendingCall{ID: "c" + string(rune('1'+i)), Name: name, Arguments: json.RawMessage(`{"x":1}`)})
	}
	return v
}

func commandView(name string) *hostabi.View {
	return &hostabi.View{Hook: hostabi.HookCommand, Session: "s1", Turn: 1, Command: &hostabi.CommandView{Name: name}}
}

// wantFault checks err is a *hostabi.Fault of kind whose message contains sub.
func wantFault(t *testing.T, err error, kind, sub string) {
	t.Helper()
	f, ok := err.(*hostabi.Fault)
	if !ok {
		t.Fatalf("err = %v (%T), want a *hostabi.Fault of kind %s", err, err, kind)
	}
	if f.Kind != kind || !strings.Contains(f.Message, sub) {
		t.Fatalf("fault = %s: %q, want %s containing %q", f.Kind, f.Message, kind, sub)
	}
}

func readRepo(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(repo(p))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileGrants grants the hostile Go guest the mounts it requests, each
// an empty folder.
func hostileGrants(t testing.TB) Grants {
	return Grants{Mounts: []Mount{{HostDir: t.TempDir(), GuestPath: "/skills"}, {HostDir: t.TempDir(), GuestPath: "/secrets"}}}
}

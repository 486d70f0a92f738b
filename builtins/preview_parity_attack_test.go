package builtins_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/textedit"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/wasmhost"
)

// The diff a person approves is the change the files op then makes, for
// arguments a hostile model shapes to read one way to the preview and
// another to the op: a key given twice, a key spelled with escapes,
// strings that are not clean UTF-8.
func TestPreviewIsWhatTheOpDoes(t *testing.T) {
	for _, c := range []struct{ name, tool, args string }{
		{"content twice", "write_file", `{"path":"a.txt","content":"harmless\n","content":"evil\n"}`},
		{"path twice", "write_file", `{"path":"a.txt","content":"x\n","path":"b.txt"}`},
		{"escaped key last", "write_file", `{"path":"a.txt","content":"x\n","pa\u0074h":"b.txt"}`},
		{"escaped key first", "write_file", `{"pa\u0074h":"b.txt","path":"a.txt","content":"x\n"}`},
		{"escaped content key", "write_file", `{"path":"a.txt","content":"shown\n","c\u006fntent":"written\n"}`},
		{"escaped replace_all", "edit_file", `{"path":"a.txt","old_string":"o","new_string":"0","replace_\u0061ll":true}`},
		{"replace_all spaced", "edit_file", `{"path":"a.txt","old_string":"o","new_string":"0","replace_all": true }`},
		{"lone surrogate", "write_file", `{"path":"a.txt","content":"a\ud800b\n"}`},
		{"escaped slash path", "write_file", `{"path":"sub\/c.txt","content":"x\n"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"a.txt": "one\ntwo\nthree\n", "b.txt": "bee\n"}
			for n, b := range files {
				os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644)
			}
			l, err := spec(t, pipeline.OpSpec{Use: "builtin:files", Mounts: []string{dir + ":/work:rw"}}).Build(context.Background(), pipeline.Options{Runtime: pooled, Builtins: builtins.Bundle()})
			if err != nil {
				t.Fatal(err)
			}
			var op *wasmhost.Op
			for _, o := range l.Ops {
				if o.Manifest().Name == "files" {
					op = o
				}
			}
			preview := op.Preview(c.tool, json.RawMessage(c.args))
			v := &hostabi.View{Hook: hostabi.HookTool, Session: "p", Op: "files", Turn: 1, Step: 1, Tool: &hostabi.ToolView{Run: "c1",
				Calls: []hostabi.PendingCall{{ID: "c1", Name: c.tool, Arguments: json.RawMessage(c.args), Owner: "files", Decision: "allow", Started: true}}}}
			eff, err := op.Handle(context.Background(), v, nil)
			if err != nil {
				t.Fatal(err)
			}
			var result string
			for _, e := range eff {
				if e.Kind == hostabi.KindResult {
					result = e.Content
				}
			}
			// What changed on disk, as the preview would have drawn it.
			var did []string
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil
				}
				rel, _ := filepath.Rel(dir, p)
				b, _ := os.ReadFile(p)
				before, existed := files[rel]
				if string(b) != before || !existed {
					did = append(did, textedit.Unified(rel, before, string(b), existed))
				}
				return nil
			})
			t.Logf("preview:\n%s\nresult: %s", preview, result)
			switch {
			case len(did) == 0 && strings.Contains(preview, "@@"):
				t.Errorf("the preview showed a change; the op made none (%s)", result)
			case len(did) > 1:
				t.Errorf("the op changed %d files", len(did))
			case len(did) == 1 && did[0] != preview:
				t.Errorf("the person approved\n%s\nthe op did\n%s", preview, did[0])
			}
		})
	}
}

package hostabi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The reader's fast paths (plain, which looks at eight bytes at a time,
// and the keys and skipped values read without the general code) must
// read every string and value as the byte-at-a-time code did, wherever in
// a word the byte that ends the fast path falls.
func TestFastPathsMatchEncodingJSON(t *testing.T) {
	specials := []string{`\"`, `\\`, `\n`, `\u0001`, "é", "\u2028", "😀", "\xff", `\ud800`, `\/`}
	for n := 0; n <= 20; n++ {
		for _, sp := range specials {
			for _, tail := range []string{"", "abcdefghij"} {
				body := strings.Repeat("k", n) + sp + tail
				doc := []byte(`"` + body + `"`)
				var want string
				if err := json.Unmarshal(doc, &want); err != nil {
					t.Fatalf("encoding/json refuses %s: %v", doc, err)
				}
				if got, err := String(doc); err != nil || got != want {
					t.Fatalf("String(%s) = %q, %v; want %q", doc, got, err, want)
				}
				// The same string as a key, a skipped value and a value in
				// a skipped object.
				obj := []byte(`{` + string(doc) + `:1,"v":` + string(doc) + `,"o":{` + string(doc) + `:[` + string(doc) + `]}}`)
				var std map[string]any
				if err := json.Unmarshal(obj, &std); err != nil {
					t.Fatal(err)
				}
				got := map[string]any{}
				if err := Members(obj, func(k, v []byte) error {
					var x any
					if err := json.Unmarshal(v, &x); err != nil {
						return err
					}
					got[string(k)] = x
					return nil
				}); err != nil {
					t.Fatalf("Members(%s): %v", obj, err)
				}
				if !reflect.DeepEqual(got, std) {
					t.Fatalf("Members(%s) = %v, encoding/json %v", obj, got, std)
				}
				// And what the writer makes of it reads back the same.
				if back, err := String(AppendString(nil, want)); err != nil || back != strings.ToValidUTF8(want, "\uFFFD") {
					t.Fatalf("AppendString(%q) reads back as %q, %v", want, back, err)
				}
			}
			// Unterminated and control characters are refused however long
			// the plain run before them.
			for _, bad := range []string{`"` + strings.Repeat("k", n), `"` + strings.Repeat("k", n) + "\x01\"", `{"` + strings.Repeat("k", n) + `"` + strings.Repeat(" ", n%3) + `1}`} {
				if json.Valid([]byte(bad)) {
					t.Fatalf("%q is valid", bad)
				}
				d := &reader{b: []byte(bad)}
				if _, err := d.skip(0); err == nil && d.end() == nil {
					t.Fatalf("skip accepted %q", bad)
				}
			}
		}
	}
}

// Skipped values are walked without recursion; the depth limit must fall
// exactly where it did: a guest's tool parameters may nest 64 levels.
func TestSkipDepthLimit(t *testing.T) {
	for _, tc := range []struct {
		levels int
		open   string
		inner  string
		close  string
		ok     bool
	}{
		{63, "[", "1", "]", true},
		{64, "[", "", "]", true},
		{64, "[", "1", "]", false},
		{65, "[", "", "]", false},
		{64, `{"a":`, "{}", "}", false},
		{63, `{"a":`, "{}", "}", true},
		{31, `[{"a":`, "[1]", "}]", true},
		{32, `[{"a":`, "1", "}]", false},
	} {
		params := strings.Repeat(tc.open, tc.levels) + tc.inner + strings.Repeat(tc.close, tc.levels)
		doc := `[{"kind":"tool","tool":{"name":"t","parameters":` + params + `}}]`
		_, err := ParseEffectsLimit(nil, []byte(doc), 10)
		if (err == nil) != tc.ok {
			t.Errorf("parameters %d levels of %s: %v, want ok %v", tc.levels, tc.open, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "nested deeper than 64") {
			t.Errorf("parameters %d levels of %s: %v", tc.levels, tc.open, err)
		}
	}
}

// A tool view's calls share an allocation with the view; a view with more
// calls than that room, and one that names its calls twice, still read as
// encoding/json reads them.
func TestToolViewCalls(t *testing.T) {
	for _, n := range []int{0, 1, 4, 5, 9} {
		v := &View{Hook: HookTool, Tool: &ToolView{Calls: []PendingCall{}}}
		for i := 0; i < n; i++ {
			v.Tool.Calls = append(v.Tool.Calls, PendingCall{ID: "c" + strings.Repeat("x", i), Name: "n", Arguments: json.RawMessage(`{"i":[1,{"j":2}]}`)})
		}
		b := AppendView(nil, v)
		var got View
		if err := ParseView(b, &got); err != nil {
			t.Fatal(err)
		}
		var std View
		if err := json.Unmarshal(b, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normView(&got), normView(&std)) {
			t.Fatalf("%d calls: %+v, encoding/json %+v", n, got.Tool, std.Tool)
		}
	}
	twice := []byte(`{"tool":{"calls":[{"id":"a"},{"id":"b"}],"calls":[{"id":"c"}]}}`)
	var got, std View
	if err := ParseView(twice, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(twice, &std); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Tool.Calls, std.Tool.Calls) {
		t.Fatalf("calls named twice: %+v, encoding/json %+v", got.Tool.Calls, std.Tool.Calls)
	}
}

// The host decodes every effect of every call: the kinds and scopes
// effects repeat are not copied, and any other string still reads as it
// is written, escapes included.
func TestParseEffectsKnownStrings(t *testing.T) {
	doc := []byte(`[{"kind":"decision","call_id":"c1","allow":true,"scope":"once"}]`)
	dst := make([]Effect, 0, 1)
	if n := testing.AllocsPerRun(100, func() { ParseEffects(dst[:0], doc) }); n != 1 {
		t.Errorf("decoding a decision allocates %v times, want 1 (its call id)", n)
	}
	for _, tc := range []struct{ doc, kind, scope string }{
		{`[{"kind":"decision","scope":"always"}]`, "decision", "always"},
		{`[{"kind":"decisio\u006e","scope":"onc\u0065"}]`, "decision", "once"},
		{`[{"kind":"bogus","scope":"sometimes"}]`, "bogus", "sometimes"},
		{`[{"kind":"","scope":null}]`, "", ""},
		{`[{"kind" : "steer" , "scope" : "once"}]`, "steer", "once"},
	} {
		got, err := ParseEffects(nil, []byte(tc.doc))
		if err != nil || len(got) != 1 || string(got[0].Kind) != tc.kind || got[0].Scope != tc.scope {
			t.Errorf("ParseEffects(%s) = %+v, %v; want kind %q scope %q", tc.doc, got, err, tc.kind, tc.scope)
		}
	}
	if _, err := ParseEffects(nil, []byte(`[{"kind":decision}]`)); err == nil {
		t.Error("an unquoted kind was accepted")
	}
}

package hostabi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMembers(t *testing.T) {
	var got []string
	err := Members([]byte(` {"a": 1, "b\u0065": [true, {"x": null}], "a": "two"} `), func(k, v []byte) error {
		got = append(got, string(k)+"="+string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a=1", `be=[true, {"x": null}]`, `a="two"`}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if err := Members([]byte(`null`), func(k, v []byte) error { t.Fatal("a member of null"); return nil }); err != nil {
		t.Fatalf("null: %v", err)
	}
	stop := errors.New("stop")
	if err := Members([]byte(`{"a":1,"b":2}`), func(k, v []byte) error { return stop }); err != stop {
		t.Fatalf("the callback's error was not returned: %v", err)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":1,}`, `{"a" 1}`, `{"a":1} {}`, `{"a":tru}`} {
		if err := Members([]byte(bad), func(k, v []byte) error { return nil }); !errors.Is(err, ErrSyntax) {
			t.Errorf("Members(%q) = %v, want ErrSyntax", bad, err)
		}
	}
}

// TestValuesMatchEncodingJSON: Int, Float and Bool accept and decode what
// encoding/json does for an int64, a float64 and a bool.
func TestValuesMatchEncodingJSON(t *testing.T) {
	for _, in := range []string{`0`, `-7`, `9007199254740993`, `1.5`, `-2.5e3`, `1e400`, `1E2`, `01`, `1.`, `"3"`, `true`, `false`, `null`, ` 4 `, `4 5`, `-`, `[]`} {
		var wi int64
		gi, err := Int([]byte(in))
		if werr := json.Unmarshal([]byte(in), &wi); (err == nil) != (werr == nil) || gi != wi {
			t.Errorf("Int(%s) = %d, %v; encoding/json: %d, %v", in, gi, err, wi, werr)
		}
		var wf float64
		gf, err := Float([]byte(in))
		if werr := json.Unmarshal([]byte(in), &wf); (err == nil) != (werr == nil) || gf != wf {
			t.Errorf("Float(%s) = %g, %v; encoding/json: %g, %v", in, gf, err, wf, werr)
		}
		var wb bool
		gb, err := Bool([]byte(in))
		if werr := json.Unmarshal([]byte(in), &wb); (err == nil) != (werr == nil) || gb != wb {
			t.Errorf("Bool(%s) = %v, %v; encoding/json: %v, %v", in, gb, err, wb, werr)
		}
	}
	if _, err := Float([]byte(`1e400`)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("Float(1e400) err = %v", err)
	}
}

package wasmops

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// kitOps loads the policy op in each language with config.
func kitOps(t testing.TB, config string) []*wasmhost.Op {
	ctx := context.Background()
	r := runtime(t)
	var ops []*wasmhost.Op
	for _, p := range policies {
		m, err := r.Load(ctx, read(t, p.path))
		if err != nil {
			t.Fatal(err)
		}
		op, err := r.NewOp(m, wasmhost.Config{Config: json.RawMessage(config)})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	return ops
}

// FuzzKitsAgreeOnHostileCalls: the parts of a tool view the model writes
// (call ids, names, arguments) are hostile. Whatever they are, the C and
// AssemblyScript kits' ops decide exactly the calls the Go op decides,
// the same way (a call decided for the wrong id, or a call missed, is a
// guard misread).
func FuzzKitsAgreeOnHostileCalls(f *testing.F) {
	f.Add("c1", "x", `{"a":1}`, "c2", "y", `{"b":"x"}`, "x")
	f.Add("c\"1", "x\u00e9", `{"a":"\"}"}`, "c2\\", "x\u00e9", `[1,2,{"c":[]}]`, "x\u00e9")
	f.Add("c1", "calc_total_with_a_rather_long_name_of_over_thirty_two_bytes", `{"id":"c2","name":"x"}`, "c2", "x", `{"calls":[{"id":"c9"}]}`, "calc_total_with_a_rather_long_name_of_over_thirty_two_bytes")
	f.Add("c1", "x", `"{\"a\":1]"`, "c2", "x\x00y", `{"a":1}`, "x")
	f.Add("\xff\xfe", "x", `{}`, "\u2028", "\xed\xa0\x80", `{}`, "x")
	ops := kitOps(f, `{"allow":["x","calc_total"],"deny":["rm"]}`)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, id1, name1, args1, id2, name2, args2, extra string) {
		if !json.Valid([]byte(args1)) {
			args1 = string(hostabi.AppendString(nil, args1))
		}
		if !json.Valid([]byte(args2)) {
			args2 = string(hostabi.AppendString(nil, args2))
		}
		if id1 == id2 || id1 == "" || id2 == "" {
			return
		}
		view := toolView([]hostabi.PendingCall{
			{ID: id1, Name: name1, Arguments: json.RawMessage(args1)},
			{ID: id2, Name: name2, Arguments: json.RawMessage(args2)},
			{ID: id1 + extra + "z", Name: extra, Arguments: json.RawMessage(`{}`)},
		})
		// The host's own round trip: what the guest reads is what the
		// host writes (invalid UTF-8 becomes U+FFFD).
		var rt hostabi.View
		if err := hostabi.ParseView(hostabi.AppendView(nil, view), &rt); err != nil {
			return // no view the host would hand over: nothing to compare
		}
		view = &rt
		ids := map[string]bool{}
		for _, c := range view.Tool.Calls {
			if ids[c.ID] {
				return // two calls of one id after the round trip: not a view the engine makes
			}
			ids[c.ID] = true
		}
		var want []hostabi.Effect
		var wantErr error
		for i, op := range ops {
			got, err := op.Handle(ctx, view, &conversation{})
			if i == 0 {
				want, wantErr = got, err
				continue
			}
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%s: err %v, go %v", policies[i].lang, err, wantErr)
			}
			var f *hostabi.Fault
			if errors.As(err, &f) && f.Kind == hostabi.FaultTimeout {
				t.Fatalf("%s timed out on %q", policies[i].lang, hostabi.AppendView(nil, view))
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%s answers differently from go on %q:\n%s", policies[i].lang, hostabi.AppendView(nil, view), d)
			}
		}
	})
}

// Each kit's reader on malformed documents (`{"a":1]`, which the host never
// writes but a document filter can hand it, as an op may read a tool
// call's arguments with it): the call ends promptly, without running to
// its deadline or to the memory limit (the AssemblyScript kit did both).
func TestASKitUnbalancedBracketTerminates(t *testing.T) {
	ctx := context.Background()
	ops := kitOps(t, `{"allow":["x"]}`)
	view := toolView(calls("x", "y"))
	for _, doc := range []string{
		`{"hook":"tool","config":{"allow":["x"]},"z":{"a":1],"tool":{"calls":[{"id":"c1","name":"x"}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":{"a":1]}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":[1}]}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":{"a":}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":{:1}}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":{"a"}}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":{"a":1 "b":2}}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":{,}}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x","arguments":[,]}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1" "name":"x"}]}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x"}}}`,
		`{"hook":"tool","config":{"allow":["x"]},"tool":{"calls":[{"id":"c1","name":"x"]]}}`,
		`{"hook":"tool","config":{"allow":["x"},"tool":{"calls":[{"id":"c1","name":"x"}]}}`,
		`{"hook":"tool" "config":{"allow":["x"]}}`,
		`{"hook":"tool",]`,
		`{"hook":}`,
		`{"hook"`,
		`{"hook":"tool","tool":{"calls":[{"id":"c1","name":"x","arguments":` + strings.Repeat("[", 100000) + `}]}}`,
	} {
		for i, op := range ops {
			d := []byte(doc)
			fctx := wasmhost.WithDocumentFilter(ctx, func(kind wasmhost.Document, b []byte) []byte {
				if kind == wasmhost.DocView {
					return d
				}
				return b
			})
			got, err := op.Handle(fctx, view, &conversation{})
			var f *hostabi.Fault
			if errors.As(err, &f) && (f.Kind == hostabi.FaultTimeout || f.Kind == hostabi.FaultMemory) {
				t.Errorf("%s: %q: %s fault (the kit's reader loops): %v", policies[i].lang, doc[:min(len(doc), 120)], f.Kind, f)
				continue
			}
			t.Logf("%s: %q: %v %v", policies[i].lang, doc[:min(len(doc), 120)], got, err)
		}
	}
}

package wasmops

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// The C kit's reader (guests/c/wagent.h) on view documents the host would
// never write: the policy op in C is handed each document instead of the
// host's view (a document filter), and must answer as the kit always did.
// A document that is not an object, or whose known members have the
// wrong type, fails the call; a member that does not parse (a tool view
// nested too deep, a call cut short, a trailing comma) ends the document,
// so the op sees no calls and answers nothing; keys are matched after
// their escapes are undone, and the last of a repeated key counts.
func TestCKitMalformedViews(t *testing.T) {
	ctx := context.Background()
	r := runtime(t)
	m, err := r.Load(ctx, read(t, "policy-c/policy.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	op, err := r.NewOp(m, wasmhost.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// The host's view: the calls the answers may name.
	view := toolView(calls("x", "y"))
	const (
		cfg   = `"config":{"allow":["x"]}`
		c1    = `{"id":"c1","name":"x"}`
		c2    = `{"id":"c2","name":"y"}`
		valid = `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + `,` + c2 + `]}}`
	)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	withArgs := func(args string) string {
		return `{"hook":"tool",` + cfg + `,"tool":{"calls":[{"id":"c1","name":"x","arguments":` + args + `},` + c2 + `]}}`
	}
	both := []hostabi.Effect{decision("c1", true, "on the allow list"), ask("c2")}
	const refused = "wagent.h: the view is not a JSON object of the ABI"
	for _, tc := range []struct {
		name, doc string
		want      []hostabi.Effect
		wantError string // the error fault's message
		wantFault string // another fault: "kind: part of its message"
	}{
		{name: "valid", doc: valid, want: both},
		{name: "white-space", doc: "{ \"hook\" : \"tool\" ,\n\t\"config\" : { \"allow\" : [ \"x\" ] } , \"tool\" : { \"calls\" : [ { \"id\" : \"c1\" , \"name\" : \"x\" } , " + c2 + " ] } }\r\n", want: both},
		{name: "members-in-any-order", doc: `{"tool":{"calls":[` + c1 + `,` + c2 + `]},"hook":"tool",` + cfg + `}`, want: both},
		{name: "unknown-members-skipped", doc: `{"later":{"a":[1,{"b":"}"}]},"hook":"tool",` + cfg + `,"tool":{"more":[[]],"calls":[{"id":"c1","x":{},"name":"x"},` + c2 + `],"run":""}}`, want: both},
		{name: "escaped-keys", doc: `{"hook":"tool","config":{"\u0061llow":["\u0078"]},"\u0074ool":{"c\u0061lls":[{"\u0069d":"c1","name":"x"},` + c2 + `]}}`, want: both},
		{name: "last-tool-counts", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c2 + `]},"tool":{"calls":[` + c1 + `,` + c2 + `]}}`, want: both},
		{name: "last-calls-count", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c2 + `],"calls":[` + c1 + `,` + c2 + `]}}`, want: both},
		{name: "last-allow-counts", doc: `{"hook":"tool","config":{"allow":["y"],"allow":["x"]},"tool":{"calls":[` + c1 + `,` + c2 + `]}}`, want: both},
		{name: "calls-an-object", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":{"a":` + c1 + `,"b":` + c2 + `}}}`, want: both},
		// An item that is not an object is a call without an id, which
		// the op puts to a person: the host refuses to ask about it.
		{name: "items-not-objects", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + `,"s",` + c2 + `]}}`,
			wantFault: hostabi.FaultInvalidEffect + `: approval_request for call "", which is not pending`},
		{name: "arguments-nested-deep", doc: withArgs(deep(500)), want: both},
		{name: "arguments-nested-too-deep", doc: withArgs(deep(600))},
		{name: "call-cut-short", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + `,{"id":"c2","name":"y"]}}`},
		{name: "unterminated-string", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + `,{"id":"c2","name":"y\"}]}}`},
		{name: "trailing-comma-in-calls", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + `,` + c2 + `,]}}`},
		{name: "trailing-comma-in-a-call", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + `,{"id":"c2","name":"y",}]}}`},
		{name: "missing-comma-between-calls", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + ` ` + c2 + `]}}`},
		{name: "missing-colon", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c1 + `,{"id" "c2","name":"y"}]}}`},
		{name: "truncated", doc: valid[:len(valid)-3]},
		{name: "allow-not-strings", doc: `{"hook":"tool","config":{"allow":["x",1]},"tool":{"calls":[` + c1 + `]}}`, wantError: "config: allow is not a list of strings"},
		// The config does not parse: the document ends before the tool.
		{name: "allow-trailing-comma", doc: `{"hook":"tool","config":{"allow":["x",]},"tool":{"calls":[` + c1 + `]}}`},
		{name: "not-an-object", doc: `[` + valid + `]`, wantError: refused},
		{name: "empty", doc: ``, wantError: refused},
		{name: "key-not-a-string", doc: `{"hook":"tool",[1]:2,` + cfg + `}`, wantError: refused},
		// 1:2 is one token to the reader (it ends at , } ] or white
		// space), a key without its colon: the document ends there.
		{name: "key-a-bare-token", doc: `{"hook":"tool",1:2,` + cfg + `,"tool":{"calls":[` + c1 + `]}}`},
		{name: "turn-not-an-integer", doc: `{"hook":"tool","turn":"1",` + cfg + `}`, wantError: refused},
		{name: "hook-not-a-string", doc: `{"hook":["tool"],` + cfg + `}`, wantError: refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(tc.doc)
			fctx := wasmhost.WithDocumentFilter(ctx, func(kind wasmhost.Document, d []byte) []byte {
				if kind == wasmhost.DocView {
					return doc
				}
				return d
			})
			got, err := op.Handle(fctx, view, &conversation{})
			if tc.wantFault != "" {
				kind, msg, _ := strings.Cut(tc.wantFault, ": ")
				var f *hostabi.Fault
				if !errors.As(err, &f) || f.Kind != kind || !strings.Contains(f.Message, msg) {
					t.Fatalf("err = %v, want a fault %q", err, tc.wantFault)
				}
				return
			}
			if tc.wantError != "" {
				var f *hostabi.Fault
				if !errors.As(err, &f) || f.Kind != hostabi.FaultError || f.Message != tc.wantError {
					t.Fatalf("err = %v, want an error fault %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("effects mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The AssemblyScript kit's reader (guests/assemblyscript/wagent.ts) on
// view documents the host would never write. It trusts the host, so it is
// laxer than the C kit's; what it must keep is its answers: keys matched
// after their escapes are undone (compared as bytes when they need no
// decoding), strings of any length (scanned 16 bytes at a time) with
// escapes anywhere, and a document cut short answered as far as it goes
// (the call cut short is a call, whose id was read).
func TestASKitViews(t *testing.T) {
	ctx := context.Background()
	r := runtime(t)
	m, err := r.Load(ctx, read(t, "policy-as/policy.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	op, err := r.NewOp(m, wasmhost.Config{})
	if err != nil {
		t.Fatal(err)
	}
	long := "calc_total_with_a_rather_long_name_of_over_thirty_two_bytes"
	view := toolView(calls("x", "y", long, "é\"q"))
	const cfg = `"config":{"allow":["x","calc_total_with_a_rather_long_name_of_over_thirty_two_bytes","\u00e9\"q"]}`
	c := func(i int, name string) string { return `{"id":"c` + strconv.Itoa(i) + `","name":"` + name + `"}` }
	calls := c(1, "x") + `,` + c(2, "y") + `,` + c(3, long) + `,` + c(4, `\u00e9\"q`)
	all := []hostabi.Effect{decision("c1", true, "on the allow list"), decision("c3", true, "on the allow list"), decision("c4", true, "on the allow list"), ask("c2")}
	for _, tc := range []struct {
		name, doc string
		want      []hostabi.Effect
	}{
		{name: "valid", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + calls + `]}}`, want: all},
		{name: "white-space", doc: "{ \"hook\" : \"tool\" ,\n" + cfg + " , \"tool\" : { \"calls\" : [ " + calls + " ] } }", want: all},
		{name: "escaped-keys", doc: `{"hook":"tool","\u0063onfig":{"\u0061llow":["x","` + long + `","\u00e9\"q"]},"t\u006fol":{"c\u0061lls":[` + calls + `]}}`, want: all},
		{name: "key-not-ascii", doc: `{"hook":"tool",` + cfg + `,"toolé":{"calls":[` + c(1, "x") + `]},"tool":{"calls":[` + calls + `]}}`, want: all},
		{name: "long-unknown-members", doc: `{"a_key_of_a_later_minor_longer_than_sixteen":"a value \\\" with an escape after sixteen bytes","hook":"tool",` + cfg + `,"tool":{"calls":[` + calls + `]}}`, want: all},
		{name: "last-key-counts", doc: `{"hook":"tool","config":{"allow":["y"],"allow":["x","` + long + `","\u00e9\"q"]},"tool":{"calls":[` + calls + `]}}`, want: all},
		{name: "mismatched-bracket-after", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + calls + `]},"later":{"a":1]}`, want: all},
		{name: "mismatched-bracket-in-calls", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c(1, "x") + `}}`, want: []hostabi.Effect{decision("c1", true, "on the allow list")}},
		{name: "mismatched-bracket-in-a-call", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[{"id":"c1","name":"x"],` + c(2, "y") + `]}}`, want: []hostabi.Effect{decision("c1", true, "on the allow list"), ask("c2")}},
		{name: "cut-in-a-call", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c(1, "x") + `,{"id":"c2","na`, want: []hostabi.Effect{decision("c1", true, "on the allow list"), ask("c2")}},
		{name: "cut-in-a-string", doc: `{"hook":"tool",` + cfg + `,"tool":{"calls":[` + c(1, "x") + `,{"id":"c2","name":"a string cut short, and long\`, want: []hostabi.Effect{decision("c1", true, "on the allow list"), ask("c2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(tc.doc)
			fctx := wasmhost.WithDocumentFilter(ctx, func(kind wasmhost.Document, d []byte) []byte {
				if kind == wasmhost.DocView {
					return doc
				}
				return d
			})
			got, err := op.Handle(fctx, view, &conversation{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("effects mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

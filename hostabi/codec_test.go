package hostabi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleView() *View {
	return &View{
		Hook: HookTool, Session: "s-1", Op: "policy", Turn: 3, Step: 2, Messages: 41,
		Config: json.RawMessage(`{"allow":["a","b"],"n":1.5}`),
		Prompt: &PromptView{Batch: []InputMessage{{ID: "m1", Content: "hi \"there\"\n\t<&> é \u2028"}}},
		Tool: &ToolView{
			Calls:   []PendingCall{{ID: "c1", Name: "calc", Arguments: json.RawMessage(`{"x":[1,2,{"y":null}]}`), Owner: "calc-op", Decision: "allow", Requested: true, Started: true}, {ID: "c2", Name: "rm"}},
			Offered: []string{"calc", "rm"},
			Run:     "c1",
		},
		Failure: &FailureView{Failure: Failure{Code: FailRateLimit, Status: 429, RetryAfter: 1500, Message: "slow down"}, Attempt: 2, Retries: 1},
		Stop:    &StopView{Content: "done", FinishReason: "stop"},
		Command: &CommandView{Name: "ping", Args: "a b"},
	}
}

// What AppendView writes, encoding/json reads back as the same view, and
// what json.Marshal writes, ParseView reads back as the same view.
func TestViewRoundTrip(t *testing.T) {
	for _, v := range []*View{sampleView(), {Hook: HookPrompt}, {Hook: HookTool, Tool: &ToolView{}}} {
		var got View
		if err := json.Unmarshal(AppendView(nil, v), &got); err != nil {
			t.Fatalf("encoding/json cannot read AppendView: %v\n%s", err, AppendView(nil, v))
		}
		if !reflect.DeepEqual(normView(&got), normView(v)) {
			t.Errorf("AppendView round trip:\n got %+v\nwant %+v", got, *v)
		}
		std, _ := json.Marshal(v)
		for _, parse := range []func([]byte, *View) error{ParseView, ParseViewShared} {
			var back View
			if err := parse(std, &back); err != nil {
				t.Fatalf("ParseView(json.Marshal): %v", err)
			}
			if !reflect.DeepEqual(normView(&back), normView(v)) {
				t.Errorf("ParseView round trip:\n got %+v\nwant %+v", back, *v)
			}
		}
	}
}

// normView compacts raw JSON, so views compare by meaning.
func normView(v *View) View {
	out := *v
	out.Config = compact(v.Config)
	if v.Tool != nil {
		t := *v.Tool
		t.Calls = append([]PendingCall(nil), t.Calls...)
		for i := range t.Calls {
			t.Calls[i].Arguments = compact(t.Calls[i].Arguments)
		}
		out.Tool = &t
	}
	return out
}

func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	out, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		return raw
	}
	return out
}

func TestParseViewSkipsUnknownKeys(t *testing.T) {
	var v View
	err := ParseView([]byte(`{"hook":"tool","future":{"a":[1,{"b":"c"}]},"tool":{"calls":[{"id":"c1","name":"x","new":true}],"later":1}}`), &v)
	if err != nil {
		t.Fatal(err)
	}
	if v.Hook != HookTool || len(v.Tool.Calls) != 1 || v.Tool.Calls[0].ID != "c1" {
		t.Fatalf("got %+v", v)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	m := &Message{Role: "assistant", ID: "m9", Content: "calling", ToolCalls: []ToolCall{{ID: "c1", Name: "calc", Arguments: json.RawMessage(`{"a":1}`)}}, CallID: "x", IsError: true}
	for _, parse := range []func([]byte, *Message) error{ParseMessage, ParseMessageShared} {
		var got Message
		if err := parse(AppendMessage(nil, m), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, m) {
			t.Fatalf("got %+v, want %+v", got, *m)
		}
	}
}

func TestEffectsRoundTrip(t *testing.T) {
	list := []Effect{
		{Kind: KindDecision, CallID: "c1", Allow: true, Scope: ScopeOnce, Text: "ok"},
		{Kind: KindApprovalRequest, CallIDs: []string{"c2", "c3"}},
		{Kind: KindTool, Tool: &ToolSpec{Name: "calc", Description: "adds", Parameters: json.RawMessage(`{"type":"object"}`)}},
		{Kind: KindRewrite, Messages: []InputMessage{{ID: "m1", Content: "x"}}},
		{Kind: KindResult, CallID: "c1", Content: "42", IsError: true, Code: "E", ConcludesTurn: true},
		{Kind: KindRetry, DelayMS: 1500},
		{Kind: KindNote, Key: "k", Value: "v"},
	}
	b := AppendEffects(nil, list)
	got, err := ParseEffects(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, list) {
		t.Fatalf("ParseEffects(AppendEffects):\n got %+v\nwant %+v", got, list)
	}
	std, err := stdEffects(b)
	if err != nil || !reflect.DeepEqual(std, list) {
		t.Fatalf("stdEffects(AppendEffects) = %+v, %v", std, err)
	}
}

func TestParseEffectsRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`[{"kind":"note","key":"k","extra":1}]`, `unknown field "extra"`},
		{`[{"Kind":"note"}]`, `unknown field "Kind"`},
		{`[{"kind":"note"},]`, "trailing comma"},
		{`[{"kind":"note"}] []`, "data after the value"},
		{`{"kind":"note"}`, "want an array"},
		{`[{"kind":"retry","delay_ms":1.5}]`, "is not a 64-bit integer"},
		{"[{\"kind\":\"note\",\"key\":\"\x01\"}]", "control character"},
		{`[{"kind":"note","key":"a\qb"}]`, `bad escape`},
		{`[{"kind":"decision","allow":"yes"}]`, "want true or false"},
	} {
		_, err := ParseEffects(nil, []byte(tc.in))
		if err == nil || !errors.Is(err, ErrEffect) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseEffects(%s) = %v, want an ErrEffect containing %q", tc.in, err, tc.want)
		}
	}
	for _, in := range []string{"", "  ", "null", "[]"} {
		if got, err := ParseEffects(nil, []byte(in)); err != nil || len(got) != 0 {
			t.Errorf("ParseEffects(%q) = %v, %v; want no effects", in, got, err)
		}
	}
}

func TestFieldHelpers(t *testing.T) {
	cfg := []byte(`{"mode":"ask","allow":["a","b\u0041"],"nested":{"allow":["no"]}}`)
	raw, ok := Field(cfg, "allow")
	if !ok {
		t.Fatal("allow not found")
	}
	list, err := Strings(raw)
	if err != nil || !reflect.DeepEqual(list, []string{"a", "bA"}) {
		t.Fatalf("Strings = %v, %v", list, err)
	}
	raw, _ = Field(cfg, "mode")
	if s, err := String(raw); err != nil || s != "ask" {
		t.Fatalf("String = %q, %v", s, err)
	}
	if _, ok := Field(cfg, "missing"); ok {
		t.Error("found a missing key")
	}
	if _, ok := Field([]byte(`[1]`), "a"); ok {
		t.Error("found a key in an array")
	}
}

// FuzzParseEffects: whatever the guest hands over, the lean decoder never
// panics; what it accepts, encoding/json (stdEffects) accepts as the
// same effects; and what it accepts survives a write and a read.
func FuzzParseEffects(f *testing.F) {
	f.Add([]byte(`[{"kind":"decision","call_id":"c1","allow":true,"scope":"once"}]`))
	f.Add([]byte(`[{"kind":"tool","tool":{"name":"x","parameters":{"a":[1,2]}}},{"kind":"tool","tool":{"name":"y"}}]`))
	f.Add([]byte(`[{"kind":"rewrite","messages":[{"id":"m","content":"\ud83d\ude00 \u00e9"}]}]`))
	f.Add([]byte(`[{"kind":"retry","delay_ms":-0},{"kind":"note","key":"k","value":null}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[{"kind":"log","text":"\ud800x"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseEffects(nil, b)
		if err != nil {
			if !errors.Is(err, ErrEffect) {
				t.Fatalf("error does not wrap ErrEffect: %v", err)
			}
			return
		}
		std, err := stdEffects(b)
		if err != nil {
			t.Fatalf("ParseEffects accepted what encoding/json refuses (%v): %q", err, b)
		}
		if !reflect.DeepEqual(normEffects(got), normEffects(std)) {
			t.Fatalf("ParseEffects and encoding/json disagree on %q:\n lean %+v\n std  %+v", b, got, std)
		}
		again, err := ParseEffects(nil, AppendEffects(nil, got))
		if err != nil || !reflect.DeepEqual(normEffects(again), normEffects(got)) {
			t.Fatalf("write/read changed %q: %+v, %v", b, again, err)
		}
		for i := range got {
			_ = got[i].Check(HookTool) // must not panic
		}
	})
}

// normEffects makes effects comparable across the two decoders: empty and
// null raw values and empty lists are the same.
func normEffects(list []Effect) []Effect {
	out := make([]Effect, len(list))
	for i, e := range list {
		if e.Tool != nil {
			t := *e.Tool
			t.Parameters = compact(t.Parameters)
			e.Tool = &t
		}
		if len(e.Messages) == 0 {
			e.Messages = nil
		}
		if len(e.CallIDs) == 0 {
			e.CallIDs = nil
		}
		out[i] = e
	}
	return out
}

// FuzzParseView: a view never panics the decoder, and what it reads
// survives a write and a read.
func FuzzParseView(f *testing.F) {
	f.Add(AppendView(nil, sampleView()))
	f.Add([]byte(`{"hook":"tool","tool":{"calls":[{"id":"c","arguments":{"deep":[[[[]]]]}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v View
		if err := ParseView(b, &v); err != nil {
			return
		}
		var again View
		if err := ParseView(AppendView(nil, &v), &again); err != nil || !reflect.DeepEqual(normView(&again), normView(&v)) {
			t.Fatalf("write/read changed %q:\n%+v\n%+v (%v)", b, again, v, err)
		}
	})
}

// FuzzSkip: the reader accepts as one value exactly what encoding/json
// calls valid (raw values, unknown keys and Field go through it).
func FuzzSkip(f *testing.F) {
	f.Add([]byte(`{"a":[1,-0.5e+3,"x\u00e9\n",true,false,null,{}],"b":{"c":[]}}`))
	f.Add([]byte(`[1,]`))
	f.Add([]byte(`{"a" 1}`))
	f.Add([]byte("\"\xff\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := &reader{b: b}
		_, err := d.skip(0)
		if err == nil {
			err = d.end()
		}
		if (err == nil) != json.Valid(b) {
			t.Fatalf("skip(%q) = %v, json.Valid = %v", b, err, json.Valid(b))
		}
	})
}

// The effect limit stops the decoder: it never builds more than the limit
// allows, however many effects the input holds.
func TestParseEffectsLimit(t *testing.T) {
	flood := "[" + strings.Repeat(`{"kind":"admit"},`, 100000) + `{"kind":"admit"}]`
	got, err := ParseEffectsLimit(nil, []byte(flood), 3)
	if !errors.Is(err, ErrTooManyEffects) || len(got) != 3 || cap(got) > 8 {
		t.Fatalf("ParseEffectsLimit = %d effects (cap %d), %v; want 3 and ErrTooManyEffects", len(got), cap(got), err)
	}
	if got, err := ParseEffectsLimit(nil, []byte(`[{"kind":"admit"},{"kind":"admit"}]`), 2); err != nil || len(got) != 2 {
		t.Fatalf("two effects at a limit of two: %d, %v", len(got), err)
	}
	deep := `[{"kind":"tool","tool":{"name":"t","parameters":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}]`
	if _, err := ParseEffectsLimit(nil, []byte(deep), 10); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Fatalf("deep effects: %v", err)
	}
	ok := `[{"kind":"tool","tool":{"name":"t","parameters":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}}]`
	if _, err := ParseEffectsLimit(nil, []byte(ok), 10); err != nil {
		t.Fatalf("parameters nested 60 deep: %v", err)
	}
}

func TestCheckDepth(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		max  int
		fail bool
	}{
		{`{}`, 1, false},
		{`{"a":[1]}`, 1, true},
		{`{"a":[1]}`, 2, false},
		{`"[[[[[["`, 1, false},      // brackets in a string
		{`["\"[[[["]`, 1, false},    // an escaped quote does not end the string
		{`["\\\\", [[]]]`, 2, true}, // an escaped backslash does
		{strings.Repeat("[", 65), 64, true},
	} {
		if err := CheckDepth([]byte(tc.doc), tc.max); (err != nil) != tc.fail {
			t.Errorf("CheckDepth(%s, %d) = %v", tc.doc, tc.max, err)
		}
	}
}

// stdEffects decodes an effect list with encoding/json: the oracle the
// lean decoder is checked against. It is looser than ParseEffects (keys
// fold case), which is why it is not the host's decoder: one dialect on
// the untrusted boundary.
func stdEffects(b []byte) ([]Effect, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out []Effect
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the effect list")
	}
	return out, nil
}

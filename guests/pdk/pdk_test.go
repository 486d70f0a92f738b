package pdk

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/hostabi"
)

// TestEffectMethods: every effect kind of hostabi has a method, and what
// each emits is what the host accepts at its hook.
func TestEffectMethods(t *testing.T) {
	pending := hostabi.PendingCall{ID: "c1", Name: "t", Arguments: json.RawMessage(`{}`)}
	tests := []struct {
		hook hostabi.Hook
		emit func(c *Call)
		want hostabi.Effect
	}{
		{hostabi.HookPrompt, func(c *Call) { c.Admit() }, hostabi.Effect{Kind: hostabi.KindAdmit}},
		{hostabi.HookPrompt, func(c *Call) { c.Rewrite(hostabi.InputMessage{ID: "m1", Content: "hi"}) }, hostabi.Effect{Kind: hostabi.KindRewrite, Messages: []hostabi.InputMessage{{ID: "m1", Content: "hi"}}}},
		{hostabi.HookPrompt, func(c *Call) { c.Reject("no") }, hostabi.Effect{Kind: hostabi.KindReject, Text: "no"}},
		{hostabi.HookContribute, func(c *Call) { c.OfferTool(hostabi.ToolSpec{Name: "t"}) }, hostabi.Effect{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "t"}}},
		{hostabi.HookContribute, func(c *Call) { c.PromptPart("be brief") }, hostabi.Effect{Kind: hostabi.KindPromptPart, Text: "be brief"}},
		{hostabi.HookContribute, func(c *Call) { c.TopOfMind("3 steps left") }, hostabi.Effect{Kind: hostabi.KindTopOfMind, Text: "3 steps left"}},
		{hostabi.HookContribute, func(c *Call) { c.EndTurn("budget spent") }, hostabi.Effect{Kind: hostabi.KindEndTurn, Text: "budget spent"}},
		{hostabi.HookTool, func(c *Call) { c.AskApproval("why", "c1") }, hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: []string{"c1"}, Text: "why"}},
		{hostabi.HookTool, func(c *Call) { c.Decide("c1", true, "ok") }, hostabi.Effect{Kind: hostabi.KindDecision, CallID: "c1", Allow: true, Scope: hostabi.ScopeOnce, Text: "ok"}},
		{hostabi.HookTool, func(c *Call) { c.Decide("c1", false, "no") }, hostabi.Effect{Kind: hostabi.KindDecision, CallID: "c1", Scope: hostabi.ScopeOnce, Text: "no"}},
		{hostabi.HookTool, func(c *Call) { c.DecideAlways("c1", true, "") }, hostabi.Effect{Kind: hostabi.KindDecision, CallID: "c1", Allow: true, Scope: hostabi.ScopeAlways}},
		{hostabi.HookTool, func(c *Call) { c.Result("c1", "4", false) }, hostabi.Effect{Kind: hostabi.KindResult, CallID: "c1", Content: "4"}},
		{hostabi.HookTool, func(c *Call) { c.ErrorResult("c1", "gone", hostabi.CodeUnavailable) }, hostabi.Effect{Kind: hostabi.KindResult, CallID: "c1", Content: "gone", IsError: true, Code: hostabi.CodeUnavailable}},
		{hostabi.HookTool, func(c *Call) { c.FinalResult("c1", "{}") }, hostabi.Effect{Kind: hostabi.KindResult, CallID: "c1", Content: "{}", ConcludesTurn: true}},
		{hostabi.HookRequestError, func(c *Call) { c.Retry(1500*time.Microsecond + time.Second) }, hostabi.Effect{Kind: hostabi.KindRetry, DelayMS: 1002}},
		{hostabi.HookRequestError, func(c *Call) { c.Retry(-time.Second) }, hostabi.Effect{Kind: hostabi.KindRetry}},
		{hostabi.HookTurnStopping, func(c *Call) { c.Steer("go on") }, hostabi.Effect{Kind: hostabi.KindSteer, Text: "go on"}},
		{hostabi.HookCommand, func(c *Call) { c.Reply("done") }, hostabi.Effect{Kind: hostabi.KindReply, Text: "done"}},
		{hostabi.HookCommand, func(c *Call) { c.SetNote("k", "v") }, hostabi.Effect{Kind: hostabi.KindNote, Key: "k", Value: "v"}},
		{hostabi.HookTool, func(c *Call) { c.LiveLog("info", "hello") }, hostabi.Effect{Kind: hostabi.KindLog, Level: "info", Text: "hello"}},
	}
	kinds := map[hostabi.Kind]bool{}
	for _, tc := range tests {
		t.Run(string(tc.want.Kind), func(t *testing.T) {
			kinds[tc.want.Kind] = true
			h := func(c *Call) error { tc.emit(c); return nil }
			only(t, Op{
				Manifest: hostabi.Manifest{Name: "all", Guard: true, Tools: []string{"t"}},
				Prompt:   h, Contribute: h, Tool: h, RequestError: h, TurnStopping: h, Command: h,
			})
			v := &hostabi.View{Hook: tc.hook}
			if tc.hook == hostabi.HookTool {
				v.Tool = &hostabi.ToolView{Calls: []hostabi.PendingCall{pending}}
			}
			out, err := Test(v, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]hostabi.Effect{tc.want}, out); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, k := range []hostabi.Kind{hostabi.KindNote, hostabi.KindLog, hostabi.KindAdmit, hostabi.KindRewrite, hostabi.KindReject,
		hostabi.KindTool, hostabi.KindPromptPart, hostabi.KindTopOfMind, hostabi.KindEndTurn, hostabi.KindApprovalRequest,
		hostabi.KindDecision, hostabi.KindResult, hostabi.KindRetry, hostabi.KindSteer, hostabi.KindReply} {
		if !kinds[k] {
			t.Errorf("no method emits kind %q", k)
		}
	}
}

type retryConfig struct {
	Attempts int
	Codes    []string
	Backoff  backoff
	Extra    []byte
}

type backoff struct {
	Initial float64
	Mode    string
}

func (b *backoff) Fields(f *Fields) {
	f.Float("initial", &b.Initial).Describe("seconds")
	f.String("mode", &b.Mode).OneOf("linear", "exponential")
}

func (c *retryConfig) Fields(f *Fields) {
	f.Int("attempts", &c.Attempts)
	f.Strings("codes", &c.Codes)
	f.Object("backoff", &c.Backoff).Describe("how long to wait")
	f.Raw("extra", &c.Extra)
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, config string
		want         retryConfig
		err          string
	}{
		{name: "none keeps the defaults", want: retryConfig{Attempts: 3}},
		{name: "null keeps the defaults", config: `null`, want: retryConfig{Attempts: 3}},
		{name: "every kind", config: `{"attempts":5,"codes":["rate_limit"],"backoff":{"initial":0.5,"mode":"linear"},"extra":{"x":[1]}}`,
			want: retryConfig{Attempts: 5, Codes: []string{"rate_limit"}, Backoff: backoff{Initial: 0.5, Mode: "linear"}, Extra: []byte(`{"x":[1]}`)}},
		{name: "typo", config: `{"atempts":5}`, err: `config: unknown config key "atempts" (the keys are attempts, codes, backoff, extra)`},
		{name: "nested problem", config: `{"backoff":{"mode":"random"}}`, err: `config: config key "backoff" is wrong: key "mode" must be one of linear, exponential, not "random"`},
		{name: "nested not an object", config: `{"backoff":3}`, err: `config key "backoff" must be an object, not a number`},
		{name: "not an object", config: `"fast"`, err: `config: want a JSON object, not a string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := retryConfig{Attempts: 3}
			var err error
			only(t, Op{Manifest: hostabi.Manifest{Name: "cfg"}, RequestError: func(c *Call) error {
				err = c.Config(&got)
				return nil
			}})
			if _, terr := Test(&hostabi.View{Hook: hostabi.HookRequestError, Config: json.RawMessage(tc.config)}, nil); terr != nil {
				t.Fatal(terr)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeObjectRefusesMalformedJSON(t *testing.T) {
	var a moveArgs
	for _, doc := range []string{`{"to":`, `{"to":"north",}`, `{"to":"north"} x`, `{to:1}`} {
		if err := decodeObject([]byte(doc), &a, "argument"); err == nil || !strings.HasPrefix(err.Error(), "not valid JSON") {
			t.Errorf("decode %q: err %v, want not valid JSON", doc, err)
		}
	}
}

func TestNestedSchema(t *testing.T) {
	got := string(schema(&retryConfig{}))
	want := `{"type":"object","properties":{"attempts":{"type":"integer"},"codes":{"type":"array","items":{"type":"string"}},` +
		`"backoff":{"type":"object","properties":{"initial":{"type":"number","description":"seconds"},"mode":{"type":"string","enum":["linear","exponential"]}},"additionalProperties":false,"description":"how long to wait"},` +
		`"extra":{}},"additionalProperties":false}`
	if got != want {
		t.Errorf("schema\n got %s\nwant %s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Error("the schema is not JSON")
	}
}

// A view's strings alias the memory it is read into, so fresh never hands
// out the same bytes twice: a string an op keeps from one call must not
// change at the next.
func TestFreshNeverReusesMemory(t *testing.T) {
	type span struct{ lo, hi uintptr }
	var seen []span
	kept := map[int]string{}
	for i, n := range []int{0, 1, 7, 230, arenaSize / 4, arenaSize/4 + 1, 3000, arenaSize / 4, 5, arenaSize} {
		for k := 0; k < 6; k++ {
			b := fresh(n)
			if len(b) != n || cap(b) != n {
				t.Fatalf("fresh(%d): len %d cap %d", n, len(b), cap(b))
			}
			for j := range b {
				b[j] = byte('a' + (i+k)%26)
			}
			if n == 0 {
				continue
			}
			lo := uintptr(unsafe.Pointer(&b[0]))
			s := span{lo, lo + uintptr(n)}
			for _, o := range seen {
				if s.lo < o.hi && o.lo < s.hi {
					t.Fatalf("fresh(%d) overlaps bytes handed out before", n)
				}
			}
			seen = append(seen, s)
			kept[len(kept)] = unsafe.String(&b[0], n)
		}
	}
	for i, s := range kept {
		if strings.Trim(s, s[:1]) != "" {
			t.Fatalf("string %d changed after later calls: %q", i, s)
		}
	}
}

// A result over the host's limit is cut to fit, saying so, instead of
// faulting the op: an error that quotes a megabyte argument still answers.
func TestResultOverTheLimitIsCut(t *testing.T) {
	c := &Call{}
	long := strings.Repeat("é", hostabi.MaxTextBytes) // 2 bytes a rune: the cut falls inside one
	c.Result("c1", long, true)
	c.ErrorResult("c2", "short", "")
	e := c.Effects()
	if err := e[0].Check(hostabi.HookTool); err != nil {
		t.Fatalf("the cut result does not pass the host's check: %v", err)
	}
	if len(e[0].Content) > hostabi.MaxTextBytes || !utf8.ValidString(e[0].Content) || !strings.HasSuffix(e[0].Content, "a result holds at most 1048576]") || !e[0].IsError {
		t.Errorf("cut result: %d bytes, valid UTF-8 %v, ends %q", len(e[0].Content), utf8.ValidString(e[0].Content), e[0].Content[len(e[0].Content)-60:])
	}
	if e[1].Content != "short" {
		t.Errorf("a short result changed: %q", e[1].Content)
	}
}

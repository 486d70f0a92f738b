package pdk

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/hostabi"
)

// only makes ops the only registered ones for the test.
func only(t *testing.T, ops ...Op) {
	t.Helper()
	saved := registry
	registry = nil
	t.Cleanup(func() { registry = saved })
	for _, op := range ops {
		Register(op)
	}
}

type moveArgs struct {
	To    string
	Steps int
	Fast  bool
	Tags  []string
	Pace  float64
}

func (a *moveArgs) Fields(f *Fields) {
	f.String("to", &a.To).Required().OneOf("north", "south").Describe("where to")
	f.Int("steps", &a.Steps)
	f.Bool("fast", &a.Fast)
	f.Strings("tags", &a.Tags)
	f.Float("pace", &a.Pace)
}

// walker owns two tools; ran records the arguments move was run with.
func walker(ran *[]moveArgs) Op {
	return Op{
		Manifest: hostabi.Manifest{Name: "walker"},
		Tools: []OwnedTool{
			Tool(hostabi.ToolSpec{Name: "move", Description: "Move."}, func(c *Call, a moveArgs) (string, error) {
				*ran = append(*ran, a)
				if a.Steps < 0 {
					return "", errors.New("cannot walk backwards")
				}
				return "moved " + a.To, nil
			}),
			Tool(hostabi.ToolSpec{Name: "look"}, func(c *Call, _ NoArgs) (string, error) { return "a field", nil }, Idempotent()),
		},
	}
}

func toolView(run string, calls ...hostabi.PendingCall) *hostabi.View {
	return &hostabi.View{Hook: hostabi.HookTool, Op: "walker", Tool: &hostabi.ToolView{Calls: calls, Run: run}}
}

func call(id, name, args string) hostabi.PendingCall {
	return hostabi.PendingCall{ID: id, Name: name, Arguments: json.RawMessage(args), Owner: "walker", Decision: "allow", Started: true}
}

// TestToolRunsOnlyWhenAsked defends "guards decide, owners run": a tool
// in Op.Tools is run only at the call where View.Tool.Run names it, and
// only that call is answered.
func TestToolRunsOnlyWhenAsked(t *testing.T) {
	var ran []moveArgs
	only(t, walker(&ran))
	a, b := call("c1", "move", `{"to":"north"}`), call("c2", "look", `{}`)

	for _, run := range []string{"", "c9"} {
		out, err := Test(toolView(run, a, b), nil)
		if err != nil || len(out) != 0 || len(ran) != 0 {
			t.Fatalf("Run %q: effects %v, err %v, ran %v; want the op to skip", run, out, err, ran)
		}
	}
	out, err := Test(toolView("c1", a, b), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []hostabi.Effect{{Kind: hostabi.KindResult, CallID: "c1", Content: "moved north"}}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	out, err = Test(toolView("c2", a, b), nil)
	if err != nil || len(out) != 1 || out[0].CallID != "c2" || out[0].Content != "a field" {
		t.Fatalf("run c2: %v, %v", out, err)
	}
}

func TestToolArguments(t *testing.T) {
	tests := []struct {
		name, args string
		want       moveArgs // when the call runs
		err        string   // substring of the error result, when it does not
	}{
		{name: "all kinds", args: `{"to":"south","steps":3,"fast":true,"tags":["a","b"],"pace":1.5e0}`, want: moveArgs{To: "south", Steps: 3, Fast: true, Tags: []string{"a", "b"}, Pace: 1.5}},
		{name: "null is absent", args: `{"to":"north","steps":null}`, want: moveArgs{To: "north"}},
		{name: "missing required", args: `{}`, err: `missing required argument "to"`},
		{name: "required null", args: `{"to":null}`, err: `missing required argument "to"`},
		{name: "no arguments at all", args: ``, err: `missing required argument "to"`},
		{name: "wrong type", args: `{"to":5}`, err: `argument "to" must be a string, not a number`},
		{name: "not in the enum", args: `{"to":"up"}`, err: `argument "to" must be one of north, south, not "up"`},
		{name: "fraction for an int", args: `{"to":"north","steps":1.5}`, err: `argument "steps" must be an integer, not 1.5`},
		{name: "string for an int", args: `{"to":"north","steps":"3"}`, err: `argument "steps" must be an integer, not a string`},
		{name: "string for a bool", args: `{"to":"north","fast":"yes"}`, err: `argument "fast" must be true or false, not a string`},
		{name: "number in the strings", args: `{"to":"north","tags":["a",1]}`, err: `argument "tags" must be an array of strings only`},
		{name: "object for a number", args: `{"to":"north","pace":{}}`, err: `argument "pace" must be a number, not an object`},
		{name: "unknown key", args: `{"to":"north","speed":2}`, err: `unknown argument "speed" (the keys are to, steps, fast, tags, pace)`},
		{name: "every problem at once", args: `{"steps":"x","speed":2}`, err: `argument "steps" must be an integer, not a string; unknown argument "speed" (the keys are to, steps, fast, tags, pace); missing required argument "to"`},
		{name: "not an object", args: `["north"]`, err: `want a JSON object, not an array`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ran []moveArgs
			only(t, walker(&ran))
			out, err := Test(toolView("c1", call("c1", "move", tc.args)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].Kind != hostabi.KindResult || out[0].CallID != "c1" {
				t.Fatalf("effects %+v, want one result for c1", out)
			}
			if tc.err != "" {
				if !out[0].IsError || !strings.Contains(out[0].Content, tc.err) || len(ran) != 0 {
					t.Fatalf("result %q (error %v), ran %v; want an error result containing %q and no run", out[0].Content, out[0].IsError, ran, tc.err)
				}
				if !strings.HasPrefix(out[0].Content, "move was not run, its arguments are wrong: ") {
					t.Errorf("result %q does not say which tool was not run", out[0].Content)
				}
				return
			}
			if out[0].IsError || len(ran) != 1 {
				t.Fatalf("result %+v, ran %v; want a run", out[0], ran)
			}
			if diff := cmp.Diff(tc.want, ran[0]); diff != "" {
				t.Errorf("arguments mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoArgsRefusesArguments(t *testing.T) {
	var ran []moveArgs
	only(t, walker(&ran))
	out, err := Test(toolView("c1", call("c1", "look", `{"where":"up"}`)), nil)
	if err != nil || len(out) != 1 || !out[0].IsError || !strings.Contains(out[0].Content, `unknown argument "where" (there are none)`) {
		t.Fatalf("effects %+v, err %v", out, err)
	}
}

func TestToolErrorIsAnErrorResult(t *testing.T) {
	var ran []moveArgs
	only(t, walker(&ran))
	out, err := Test(toolView("c1", call("c1", "move", `{"to":"north","steps":-1}`)), nil)
	want := []hostabi.Effect{{Kind: hostabi.KindResult, CallID: "c1", Content: "cannot walk backwards", IsError: true}}
	if diff := cmp.Diff(want, out); err != nil || diff != "" {
		t.Fatalf("err %v, mismatch (-want +got):\n%s", err, diff)
	}
}

func TestToolContributesAndDeclares(t *testing.T) {
	var ran []moveArgs
	only(t, walker(&ran))
	out, err := Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "walker"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	moveSchema := `{"type":"object","properties":{"to":{"type":"string","enum":["north","south"],"description":"where to"},` +
		`"steps":{"type":"integer"},"fast":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},"pace":{"type":"number"}},` +
		`"required":["to"],"additionalProperties":false}`
	want := []hostabi.Effect{
		{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "move", Description: "Move.", Parameters: json.RawMessage(moveSchema)}},
		{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "look", Parameters: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if !json.Valid([]byte(moveSchema)) {
		t.Fatal("the expected schema is not JSON")
	}
	b, err := ManifestJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"name":"walker","abi":"`+hostabi.ABIVersion()+`","hooks":["contribute","tool"],"tools":["move","look"],"idempotent":["look"],"capabilities":{}}`; got != want {
		t.Errorf("manifest\n got %s\nwant %s", got, want)
	}
}

func TestToolKeepsAGivenSchemaAndConcludes(t *testing.T) {
	params := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`)
	only(t, Op{
		Manifest: hostabi.Manifest{Name: "walker"},
		Tools: []OwnedTool{Tool(hostabi.ToolSpec{Name: "final", Parameters: params}, func(c *Call, a answerArgs) (string, error) {
			return a.Answer, nil
		}, ConcludesTurn())},
	})
	out, err := Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "walker"}, nil)
	if err != nil || len(out) != 1 || string(out[0].Tool.Parameters) != string(params) {
		t.Fatalf("contribute: %+v, %v; want the given parameters", out, err)
	}
	out, err = Test(toolView("c1", call("c1", "final", `{"answer":"42"}`)), nil)
	want := []hostabi.Effect{{Kind: hostabi.KindResult, CallID: "c1", Content: "42", ConcludesTurn: true}}
	if diff := cmp.Diff(want, out); err != nil || diff != "" {
		t.Fatalf("err %v, mismatch (-want +got):\n%s", err, diff)
	}
}

type answerArgs struct{ Answer string }

func (a *answerArgs) Fields(f *Fields) { f.String("answer", &a.Answer) }

// TestToolsBesideOwnHandlers: an op that owns tools and also has handlers
// of its own keeps them; its Tool handler sees every call the kit does
// not run (a guard deciding, here), never one it runs.
func TestToolsBesideOwnHandlers(t *testing.T) {
	var ran []moveArgs
	op := walker(&ran)
	op.Manifest.Guard = true
	var handled []string
	op.Tool = func(c *Call) error {
		handled = append(handled, c.View.Tool.Run)
		for _, pc := range c.View.Tool.Calls {
			if pc.Decision == "" {
				c.Decide(pc.ID, true, "fine")
			}
		}
		return nil
	}
	op.Contribute = func(c *Call) error { c.PromptPart("walk carefully"); return nil }
	only(t, op)

	pending := call("c1", "move", `{"to":"north"}`)
	pending.Decision, pending.Started = "", false
	out, err := Test(toolView("", pending), nil)
	if err != nil || len(out) != 1 || out[0].Kind != hostabi.KindDecision {
		t.Fatalf("guard call: %+v, %v", out, err)
	}
	out, err = Test(toolView("c1", call("c1", "move", `{"to":"north"}`)), nil)
	if err != nil || len(out) != 1 || out[0].Content != "moved north" {
		t.Fatalf("run call: %+v, %v", out, err)
	}
	if diff := cmp.Diff([]string{""}, handled); diff != "" {
		t.Errorf("own handler saw (-want +got):\n%s", diff)
	}
	out, err = Test(&hostabi.View{Hook: hostabi.HookContribute, Op: "walker"}, nil)
	if err != nil || len(out) != 3 || out[2].Kind != hostabi.KindPromptPart {
		t.Fatalf("contribute: %+v, %v; want both tools, then the op's prompt part", out, err)
	}
}

func TestToolThatAnswersItselfIsNotAnsweredTwice(t *testing.T) {
	only(t, Op{
		Manifest: hostabi.Manifest{Name: "walker"},
		Tools: []OwnedTool{Tool(hostabi.ToolSpec{Name: "move"}, func(c *Call, _ NoArgs) (string, error) {
			c.ErrorResult(c.Running().ID, "the road is closed", "ROAD_CLOSED")
			return "ignored", nil
		})},
	})
	out, err := Test(toolView("c1", call("c1", "move", `{}`)), nil)
	want := []hostabi.Effect{{Kind: hostabi.KindResult, CallID: "c1", Content: "the road is closed", IsError: true, Code: "ROAD_CLOSED"}}
	if diff := cmp.Diff(want, out); err != nil || diff != "" {
		t.Fatalf("err %v, mismatch (-want +got):\n%s", err, diff)
	}
}

func TestRegisterRefusesTwoToolsOfOneName(t *testing.T) {
	only(t)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "two tools named move") {
			t.Fatalf("recovered %v, want a panic naming the tool", r)
		}
	}()
	noop := func(*Call, NoArgs) (string, error) { return "", nil }
	Register(Op{Manifest: hostabi.Manifest{Name: "x"}, Tools: []OwnedTool{
		Tool(hostabi.ToolSpec{Name: "move"}, noop), Tool(hostabi.ToolSpec{Name: "move"}, noop),
	}})
}

// TestTestRefusesWhatTheEngineRefuses: the native test host applies the
// tool hook's rules, so an op that answers its own call before the host
// asks, or decides without being a guard, fails its unit test rather than
// faulting in a session.
func TestTestRefusesWhatTheEngineRefuses(t *testing.T) {
	eager := func(c *Call) error {
		for _, pc := range c.View.Tool.Calls {
			c.Result(pc.ID, "done", false)
		}
		return nil
	}
	only(t, Op{Manifest: hostabi.Manifest{Name: "walker", Tools: []string{"move"}}, Tool: eager})
	pending := call("c1", "move", `{}`)
	pending.Started = false
	if _, err := Test(toolView("", pending), nil); err == nil || !strings.Contains(err.Error(), "before the host asked to run it") {
		t.Fatalf("owner answering before the guards: err %v", err)
	}
	if _, err := Test(toolView("c1", call("c1", "move", `{}`)), nil); err != nil {
		t.Fatalf("owner answering when asked: %v", err)
	}

	only(t, Op{Manifest: hostabi.Manifest{Name: "walker"}, Tool: func(c *Call) error {
		c.Decide(c.View.Tool.Calls[0].ID, true, "")
		return nil
	}})
	if _, err := Test(toolView("", pending), nil); err == nil || !strings.Contains(err.Error(), "not a guard") {
		t.Fatalf("decision from a non-guard: err %v", err)
	}
}

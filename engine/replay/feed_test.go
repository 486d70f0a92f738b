package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/replay"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

func mustRun(t *testing.T, o replay.Options) *replay.Report {
	t.Helper()
	rep, err := replay.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func unchanged(t *testing.T, rep *replay.Report) {
	t.Helper()
	if rep.Diverged() {
		var what []string
		for _, d := range rep.Divergences {
			what = append(what, d.Kind+" "+d.What+"\n"+d.Diff)
		}
		t.Fatalf("diverged: stopped %+v\n%s", rep.Stopped, strings.Join(what, "\n"))
	}
}

// Steering by a turn-stopping op is fed its recorded ids: the same op
// replays the same; one that stops steering diverges where the recording
// was steered on, and the replay stops there (the recording went on).
func TestReplaySteering(t *testing.T) {
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: et.Echo},
		Ops: func() []engine.Operation { return []engine.Operation{et.Stopper("DONE", 2)} }}
	env.Create(t)
	env.Send(t, "go")
	env.RunContinuous(t)
	env.Send(t, "DONE now")
	env.RunContinuous(t)
	evs := env.Events(t)

	unchanged(t, mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(func() engine.Operation { return et.Stopper("DONE", 2) })}))

	rep := mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(func() engine.Operation { return et.Stopper("DONE", 0) })})
	if len(rep.Divergences) == 0 || rep.Divergences[0].Kind != "missing" || rep.Divergences[0].Hook != "turn-stopping" {
		t.Fatalf("divergences %+v", rep.Divergences)
	}
	if rep.Stopped == nil || !strings.Contains(rep.Stopped.Reason, "ends turn 1") {
		t.Errorf("stopped %+v", rep.Stopped)
	}
}

// A cancellation is fed where it came: while the session waited for a
// person, and while a stream was showing text (its interrupted answer is
// kept, as recorded).
func TestReplayCancellations(t *testing.T) {
	ctx := context.Background()
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: model},
		Ops: func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }}
	env.Create(t)
	env.Send(t, "add 40")
	// attempt 1 of a turn fails in model(), and nothing retries here: the
	// turn ends in error. Send again: the same failure.
	env.RunContinuous(t)
	// A stream cancelled with text shown.
	partial := &et.Scripted{PartialThenWait: "I was saying", Answer: et.Echo}
	env.Provider = partial
	env.Send(t, "talk")
	shown := make(chan struct{})
	var once sync.Once
	env.Observer = func(l engine.Live) {
		if l.Kind == "delta" {
			once.Do(func() { close(shown) })
		}
	}
	m := env.Open(t)
	env.Observer = nil
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(cctx)
	}()
	<-shown
	cancel()
	<-done
	if err := m.Abort(ctx, event.Cause{Kind: event.CauseUser, Reason: "stop"}, false); err != nil {
		t.Fatal(err)
	}
	// A wait for a person, cancelled.
	env.Provider = &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("a1", "calc_add", `{"value":1}`)}}
	}}
	env.Send(t, "add 1")
	if o := env.RunContinuous(t); o != engine.Waiting {
		t.Fatalf("%v, want waiting", o)
	}
	if err := env.Open(t).Abort(ctx, event.Cause{Kind: event.CauseUser, Reason: "never mind"}, false); err != nil {
		t.Fatal(err)
	}
	evs := env.Events(t)
	st, _ := event.Fold("s", evs)
	if st.Turn != 3 || st.TurnOpen || st.LastEnd.Reason != event.ReasonAborted {
		t.Fatalf("recorded %d turns, open %v, last end %+v", st.Turn, st.TurnOpen, st.LastEnd)
	}
	kept := false
	for _, m := range st.Messages {
		kept = kept || m.Content == "I was saying"
	}
	if !kept {
		t.Fatal("the recording lacks the interrupted answer")
	}
	rep := mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(approver(nil, nil), et.Calculator)})
	unchanged(t, rep)
	if rep.Ended != "" {
		t.Errorf("ended %q", rep.Ended)
	}
}

// A tool source (a namespace in its manifest, like an MCP server) is not
// asked for its tools: the recorded header's are offered; nor are its
// calls run.
func TestReplayToolSourceIsNotStarted(t *testing.T) {
	source := func(t *testing.T, replaying bool) func() engine.Operation {
		return func() engine.Operation {
			m := &hostabi.Manifest{Name: "mcp.files", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"files__*"}}
			return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
				if replaying {
					t.Errorf("the replay asked the source at %s", v.Hook)
				}
				switch {
				case v.Hook == hostabi.HookContribute:
					return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "files__read", Server: "files", Annotations: &hostabi.ToolAnnotations{ReadOnly: true}}}}, nil
				case v.Tool.Run != "":
					return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: v.Tool.Run, Content: "the file"}}, nil
				}
				return nil, nil
			}}
		}
	}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Ops: func() []engine.Operation { return []engine.Operation{source(t, false)()} },
		Provider: &et.Scripted{Answer: func(req *provider.Request) et.Reply {
			if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
				return et.Reply{Text: "read: " + last.Content}
			}
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("r1", "files__read", `{}`)}}
		}}}
	env.Create(t)
	env.Send(t, "read it")
	env.RunContinuous(t)
	unchanged(t, mustRun(t, replay.Options{Session: "s", Events: env.Events(t), Pipeline: pipeline(source(t, true))}))
}

// Compaction: the recorded summary is fed to the same compaction op; a
// pipeline without it diverges (no compaction), one that compacts where
// the recording did not stops (there is no summary to feed).
func TestReplayCompaction(t *testing.T) {
	sized := provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
		if req.Attempt == 0 {
			return &provider.Response{Content: "a summary", Usage: provider.Usage{InputTokens: 5, OutputTokens: 2}}, nil
		}
		return &provider.Response{Content: "answer " + req.Messages[len(req.Messages)-1].Content, FinishReason: "stop",
			Usage: provider.Usage{InputTokens: 100 * len(req.Messages), OutputTokens: 10}}, nil
	})
	compactor := func(over int) func() engine.Operation {
		return func() engine.Operation {
			m := &hostabi.Manifest{Name: "compactor", Hooks: []hostabi.Hook{hostabi.HookCompact}}
			return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
				if v.Compact.Tokens < over {
					return nil, nil
				}
				return []hostabi.Effect{{Kind: hostabi.KindCompact, Text: "summarise"}}, nil
			}}
		}
	}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: sized, Ops: func() []engine.Operation { return []engine.Operation{compactor(350)()} }}
	env.Create(t)
	for _, p := range []string{"one", "two", "three", "four"} {
		env.Send(t, p)
		env.RunContinuous(t)
	}
	evs := env.Events(t)
	if n := countType(evs, event.EvContextCompacted); n == 0 {
		t.Fatal("the recording has no compaction")
	}
	unchanged(t, mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(compactor(350))}))

	rep := mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(compactor(100))})
	if rep.Stopped == nil || !strings.Contains(rep.Stopped.Reason, "compacts the conversation") {
		t.Errorf("an earlier compaction: stopped %+v, divergences %+v", rep.Stopped, rep.Divergences)
	}
}

// A summary request's header (issue 28) is not a decision of its own
// (its op, reason, instructions and model are the compaction's) and not a
// step's header: a tool source in a step that compacts is offered the
// step's recorded tools, and a log written before summary headers were
// recorded replays the same as one with them.
func TestReplaySummaryHeaders(t *testing.T) {
	files := func() engine.Operation {
		m := &hostabi.Manifest{Name: "mcp.files", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"files__*"}}
		return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Hook == hostabi.HookContribute {
				return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "files__read", Server: "files"}}}, nil
			}
			return nil, nil
		}}
	}
	compactor := func() engine.Operation {
		m := &hostabi.Manifest{Name: "compactor", Hooks: []hostabi.Hook{hostabi.HookCompact}}
		return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Compact.Tokens < 350 {
				return nil, nil
			}
			return []hostabi.Effect{{Kind: hostabi.KindCompact, Text: "summarise"}}, nil
		}}
	}
	sized := provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
		if req.Attempt == 0 {
			return &provider.Response{Content: "a summary", Usage: provider.Usage{InputTokens: 5, OutputTokens: 2}}, nil
		}
		return &provider.Response{Content: "answer " + req.Messages[len(req.Messages)-1].Content, FinishReason: "stop",
			Usage: provider.Usage{InputTokens: 100 * len(req.Messages), OutputTokens: 10}}, nil
	})
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: sized, Ops: func() []engine.Operation { return []engine.Operation{files(), compactor()} }}
	env.Create(t)
	for i, p := range []string{"one", "two", "three", "four"} {
		// Ids of the sender's, not made from seqs: the log without the
		// headers below is renumbered.
		if _, err := env.Open(t).Enqueue(context.Background(), event.ListNextTurn, hostabi.InputMessage{ID: fmt.Sprintf("p%d", i), Content: p}); err != nil {
			t.Fatal(err)
		}
		env.RunContinuous(t)
	}
	evs := env.Events(t)
	var old []store.Event
	renumbered := map[uint64]uint64{}
	inStep := 0
	for _, e := range evs {
		if event.IsSummaryHeader(e) {
			if e.Step > 0 {
				inStep++
			}
			continue
		}
		renumbered[e.Seq] = uint64(len(old) + 1)
		e.Seq = uint64(len(old) + 1)
		if e.Type == event.EvContextCompacted {
			var d event.ContextCompacted
			json.Unmarshal(e.Data, &d)
			d.ThroughSeq = renumbered[d.ThroughSeq]
			e.Data, _ = json.Marshal(d)
		}
		old = append(old, e)
	}
	if inStep == 0 || countType(evs, event.EvContextCompacted) == 0 {
		t.Fatalf("the recording has %d compactions, %d of them with a summary header inside a step", countType(evs, event.EvContextCompacted), inStep)
	}
	unchanged(t, mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(files, compactor)}))
	if _, err := event.Fold("s", old); err != nil {
		t.Fatalf("a log without summary headers: %v", err)
	}
	unchanged(t, mustRun(t, replay.Options{Session: "s", Events: old, Pipeline: pipeline(files, compactor)}))
}

func countType(evs []store.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// A prompt op that rewrites the input changes the conversation: the
// replay stops at the admission.
func TestReplayRewrittenPrompt(t *testing.T) {
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: et.Echo}, Ops: func() []engine.Operation { return nil }}
	env.Create(t)
	env.Send(t, "hello")
	env.RunContinuous(t)
	env.Send(t, "again")
	env.RunContinuous(t)
	shout := func() engine.Operation {
		m := &hostabi.Manifest{Name: "shout", Hooks: []hostabi.Hook{hostabi.HookPrompt}}
		return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			b := v.Prompt.Batch
			for i := range b {
				b[i].Content = strings.ToUpper(b[i].Content)
			}
			return []hostabi.Effect{{Kind: hostabi.KindRewrite, Messages: b}}, nil
		}}
	}
	rep := mustRun(t, replay.Options{Session: "s", Events: env.Events(t), Pipeline: pipeline(shout)})
	if len(rep.Divergences) != 1 || rep.Divergences[0].Kind != "changed" || rep.Divergences[0].Hook != "prompt" || !strings.Contains(rep.Divergences[0].Diff, `"HELLO"`) {
		t.Fatalf("divergences %+v", rep.Divergences)
	}
	if rep.Stopped == nil || !strings.Contains(rep.Stopped.Reason, `admits message m2-0 as "HELLO"`) {
		t.Errorf("stopped %+v", rep.Stopped)
	}
}

// A session whose settings changed between turns is replayed with the
// pipeline for each part's settings; a forked session replays through its
// fork point.
func TestReplaySettingsAndForks(t *testing.T) {
	ctx := context.Background()
	ops := func(set event.SessionCreated) []engine.Operation {
		if set.Pipeline == "strict" {
			return []engine.Operation{et.Approver([]string{"calc_add", "calc_multiply", "calc_total"}, nil), et.Calculator()}
		}
		return []engine.Operation{et.Calculator()}
	}
	log := store.NewMemory()
	var set event.SessionCreated
	env := &et.Env{Log: log, Session: "s", Provider: &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		if req.Attempt == 1 && req.Messages[len(req.Messages)-1].Role == "user" {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call(callID(len(req.Messages)), "calc_add", `{"value":1}`)}}
		}
		return et.Echo(req)
	}}, Ops: func() []engine.Operation { return ops(set) }}
	env.Create(t)
	env.Send(t, "one")
	env.RunContinuous(t)
	set.Pipeline = "strict"
	if err := env.Open(t).ChangePipeline(ctx, event.PipelineChanged{Pipeline: "strict", Model: "test-model"}); err != nil {
		t.Fatal(err)
	}
	env.Writer = "another process" // so the replay's log (one writer) is shorter
	env.Send(t, "two")
	env.RunContinuous(t)
	evs := env.Events(t)
	var asked []string
	p := func(s event.SessionCreated) (*engine.Pipeline, error) {
		asked = append(asked, s.Pipeline)
		return engine.NewPipeline(ops(s)...)
	}
	unchanged(t, mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: p}))
	if strings.Join(asked, ",") != ",strict" {
		t.Errorf("pipelines built for settings %q, want the session's and then the changed ones", asked)
	}

	// The fork's copy holds two writers' events; the replay's log has one
	// writer, so its fork point is at another seq.
	end2 := evs[len(evs)-1].Seq
	if err := engine.Fork(ctx, log, "s", end2, "f", et.Epoch); err != nil {
		t.Fatal(err)
	}
	fork := &et.Env{Log: log, Session: "f", Provider: env.Provider, Ops: env.Ops}
	fork.Send(t, "three")
	fork.RunContinuous(t)
	unchanged(t, mustRun(t, replay.Options{Session: "f", Events: fork.Events(t), Pipeline: p}))
}

func callID(n int) string { return "add-" + strings.Repeat("i", n) }

// A recording that ends waiting for a person replays to the same wait;
// a guard that allows the call instead diverges, and the replay ends
// where the recording does (the call never ran there).
func TestReplayOfASessionThatWaits(t *testing.T) {
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("a1", "calc_add", `{"value":1}`)}}
	}}, Ops: func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }}
	env.Create(t)
	env.Send(t, "add one")
	if o := env.RunContinuous(t); o != engine.Waiting {
		t.Fatalf("%v, want waiting", o)
	}
	evs := env.Events(t)
	rep := mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(approver(nil, nil), et.Calculator)})
	unchanged(t, rep)
	if !strings.Contains(rep.Ended, "waiting for a person to decide 1.1.1") {
		t.Errorf("ended %q", rep.Ended)
	}
	rep = mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(approver([]string{"calc_add"}, nil), et.Calculator)})
	if !rep.Diverged() || len(rep.Divergences) < 2 || rep.Ended == "" {
		t.Errorf("a laxer guard: ended %q, stopped %+v, divergences %+v", rep.Ended, rep.Stopped, rep.Divergences)
	}
}

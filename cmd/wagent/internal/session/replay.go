package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/replay"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/tools/mcp"
	"github.com/wagent/wagent/wasmhost"
)

// ReplayOptions are what wagent replay SESSION is given.
type ReplayOptions struct {
	Env *term.Env
	ID  string
	// Pipeline is the pipeline file to replay with ("": the session's own).
	Pipeline string
	// Swaps are the --op swaps: an op's name, the absolute path of its new
	// module.
	Swaps map[string]string
	// From is the seq to replay from (0: the start).
	From uint64
	JSON bool
	// Connect connects to the store's owner (Connect, with the command's
	// store).
	Connect func(context.Context, Mode) (*Conn, error)
}

// DivergedError says a replay's decisions differ from the recorded ones:
// the command exits with the code that says so (4).
type DivergedError struct{}

func (*DivergedError) Error() string { return "diverged" }

// Replay runs a recorded session again with a new pipeline or op into a
// scratch log and reports where its decisions differ.
func Replay(o ReplayOptions) error {
	env, id := o.Env, o.ID
	ctx, _, stop := SignalContext()
	defer stop()
	cn, err := o.Connect(ctx, ModeRead)
	if err != nil {
		return err
	}
	evs, err := cn.Client.Events(ctx, id, 1, 0)
	cn.Close()
	if err != nil {
		return APIFail(err)
	}
	if evs.Broken != "" {
		return app.Errorf(app.Failed, "session %s cannot be replayed: %s", id, evs.Broken)
	}
	pl, err := newReplayPipelines(ctx, env, o.Pipeline, o.Swaps)
	if err != nil {
		return err
	}
	defer pl.close()
	rep, err := replay.Run(ctx, replay.Options{Session: id, Events: evs.Events, From: o.From, Pipeline: pl.build})
	if err != nil {
		if re := (*replay.RecordingError)(nil); errors.As(err, &re) && re.From {
			return app.Errorf(app.Invalid, "%s", re.Reason)
		}
		if errors.As(err, new(*app.Error)) { // the pipeline's, said as it is
			return err
		}
		return app.Errorf(app.Failed, "%v", err)
	}
	if o.JSON {
		term.PrintJSON(env.Stdout, rep)
	} else {
		printReport(env, rep, pl.label())
	}
	if rep.Diverged() {
		return &DivergedError{}
	}
	return nil
}

// replayPipelines builds the pipeline a replay runs with for a session's
// settings: --pipeline, or the session's own file (or the default), with
// the --op swaps made.
type replayPipelines struct {
	env   *term.Env
	rt    *wasmhost.Runtime
	hub   *mcp.Hub
	file  string
	swaps map[string]string
	used  string
}

// newReplayPipelines starts what a replay's pipelines run on: a wasm
// runtime of its own, whose mounts are all read-only (the replay answers
// what could change the world from the recording; should an op run even
// so, it writes nothing), and a hub of MCP servers that is never started
// (a replay answers tool sources from the recording).
func newReplayPipelines(ctx context.Context, env *term.Env, file string, swaps map[string]string) (*replayPipelines, error) {
	rt, err := wasmhost.NewRuntime(ctx, append(NodeOptions(env).RuntimeOptions, wasmhost.WithReadOnlyMounts())...)
	if err != nil {
		return nil, app.Errorf(app.Failed, "start the wasm runtime: %v", err)
	}
	return &replayPipelines{env: env, rt: rt, hub: mcp.NewHub(), file: file, swaps: swaps}, nil
}

func (p *replayPipelines) close() {
	p.hub.Close()
	p.rt.Close(context.Background())
}

func (p *replayPipelines) label() string {
	if len(p.swaps) > 0 {
		var names []string
		for n, f := range p.swaps {
			names = append(names, n+"="+f)
		}
		sort.Strings(names)
		return p.used + " with " + strings.Join(names, ", ")
	}
	return p.used
}

func (p *replayPipelines) build(set event.SessionCreated) (*engine.Pipeline, error) {
	ctx := context.Background()
	var s app.Settings
	if len(set.Settings) > 0 {
		json.Unmarshal(set.Settings, &s)
	}
	// The built-in pipeline reads the session's working directory and the
	// skills folder, as the session did.
	spec := s.DefaultPipeline(p.env.Getenv)
	p.used = "the built-in pipeline"
	file := p.file
	if file == "" {
		file = s.Pipeline
		if file != "" {
			p.used = "the session's pipeline " + file
		}
	} else {
		p.used = file
	}
	if file != "" {
		var err error
		if spec, err = pipeline.ParseFile(file); err != nil {
			return nil, app.Errorf(app.Failed, "%v", err)
		}
	}
	spec, err := swapOps(ctx, p.rt, spec, p.swaps)
	if err != nil {
		return nil, err
	}
	l, err := spec.Build(ctx, pipeline.Options{Runtime: p.rt, Builtins: builtins.Bundle(), MCP: p.hub})
	if err != nil {
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	return l.Pipeline, nil
}

// swapOps returns spec with the ops named in swaps (by their manifest
// name) loaded from other modules, each keeping its entry's config,
// limits and grants.
func swapOps(ctx context.Context, rt *wasmhost.Runtime, spec *pipeline.Spec, swaps map[string]string) (*pipeline.Spec, error) {
	if len(swaps) == 0 {
		return spec, nil
	}
	out := *spec
	out.Ops = append([]pipeline.OpSpec(nil), spec.Ops...)
	named := false
	for _, o := range out.Ops {
		named = named || o.Use == pipeline.BuiltinPrefix+pipeline.Fallback
	}
	if !named {
		// Build would add the fallback; add it here, so it can be swapped too.
		out.Ops = append(out.Ops, pipeline.OpSpec{Use: pipeline.BuiltinPrefix + pipeline.Fallback})
	}
	digests, err := out.Digests(pipeline.Options{Builtins: builtins.Bundle(), NoFallback: true})
	if err != nil {
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	var names []string
	done := map[string]bool{}
	for i := range out.Ops {
		o := &out.Ops[i]
		name := digests[i].Op
		if o.MCP != nil {
			name = mcp.OpName(o.MCP.Name)
		} else if name == "" {
			m, err := moduleOf(ctx, rt, &out, *o)
			if err != nil {
				return nil, err
			}
			name = m.Manifests()[0].Name
		}
		names = append(names, name)
		file, ok := swaps[name]
		if !ok {
			continue
		}
		if o.MCP != nil {
			return nil, app.Errorf(app.Invalid, "--op %s: %s is an MCP server, not a module; replay answers its calls from the recording already", name, name)
		}
		m, err := rt.LoadFile(ctx, file)
		if err != nil {
			return nil, app.Errorf(app.Failed, "--op %s=%s: %v", name, file, err)
		}
		o.Use, o.Module, o.SHA256, o.Op = file, nil, "", ""
		if len(m.Manifests()) > 1 {
			o.Op = name
		}
		done[name] = true
	}
	for name, file := range swaps {
		if !done[name] {
			return nil, app.Errorf(app.Invalid, "--op %s=%s: the pipeline has no op %s; its ops are: %s", name, file, name, strings.Join(names, ", "))
		}
	}
	return &out, nil
}

// moduleOf loads the module of a spec entry that names a file.
func moduleOf(ctx context.Context, rt *wasmhost.Runtime, spec *pipeline.Spec, o pipeline.OpSpec) (*wasmhost.Module, error) {
	if o.Module != nil {
		return rt.Load(ctx, o.Module)
	}
	path := o.Use
	if !filepath.IsAbs(path) {
		path = filepath.Join(spec.Dir, path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, app.Errorf(app.Failed, "pipeline %s: %v", spec.Path, err)
	}
	m, err := rt.LoadFile(ctx, path)
	if err != nil {
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	return m, nil
}

// printReport writes the report for a person: the first divergence in
// detail, where the replay stopped, the others a line each, the summary.
func printReport(env *term.Env, rep *replay.Report, with string) {
	w := env.Stdout
	from := ""
	if rep.From > 1 {
		from = fmt.Sprintf(" from seq %d", rep.From)
	}
	render.Fprintf(w, "replayed session %s%s (head %d) with %s: %d transitions\n", rep.Session, from, rep.Head, with, rep.Transitions)
	if len(rep.Divergences) == 0 && rep.Stopped == nil {
		render.Fprintln(w, "no decision diverged")
	}
	for i, d := range rep.Divergences {
		if i == 0 {
			where := fmt.Sprintf("seq %d", d.Seq)
			if d.Kind == "new" {
				where = fmt.Sprintf("seq %d (new in the replay, at its seq %d)", d.Seq, d.ReplayedSeq)
			}
			render.Fprintf(w, "first divergence at %s, turn %d step %d, hook %s, op %s: %s %s\n", where, d.Turn, d.Step, orDash(d.Hook), orDash(d.Op), d.What, d.Kind)
			render.Fprintln(w, "  -recorded +replayed:")
			for _, line := range strings.Split(strings.TrimRight(d.Diff, "\n"), "\n") {
				render.Fprintf(w, "    %s\n", line)
			}
			if rep.Stopped != nil {
				render.Fprintf(w, "stopped at seq %d: %s; the recorded events after it were not replayed\n", rep.Stopped.Seq, rep.Stopped.Reason)
			}
			if len(rep.Divergences) > 1 {
				render.Fprintln(w, "other divergences:")
			}
			continue
		}
		if i > 20 {
			render.Fprintf(w, "  … and %d more (--json lists them all)\n", len(rep.Divergences)-i)
			break
		}
		render.Fprintf(w, "  %-8s seq %-5d %s\n", d.Kind, d.Seq, d.What)
	}
	if len(rep.Divergences) == 0 && rep.Stopped != nil {
		render.Fprintf(w, "stopped at seq %d: %s\n", rep.Stopped.Seq, rep.Stopped.Reason)
	}
	if rep.Ended != "" {
		render.Fprintf(w, "%s\n", rep.Ended)
	}
	s := rep.Decisions
	line := fmt.Sprintf("decisions: %d same, %d changed, %d new, %d missing", s.Same, s.Changed, s.New, s.Missing)
	if s.NotReplayed > 0 {
		line += fmt.Sprintf("; %d not replayed after the stop", s.NotReplayed)
	}
	render.Fprintln(w, line)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

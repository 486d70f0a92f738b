// Package abitest is the conformance kit for wagent operation modules: it
// checks any module, whatever language it was written in, against the ABI
// (hostabi/ABI.md) by running it in the real wasm host under the limits a
// pipeline would give it, the way testing/slogtest checks a slog.Handler.
//
//	func TestConformance(t *testing.T) {
//		wasm, _ := os.ReadFile("policy.wasm")
//		abitest.Run(t, wasm, abitest.Options{})
//	}
//
// For every op of the module (each op of a bundle) it checks that:
//
//   - the op starts within its limits;
//   - every hook it declares is answered or skipped, without a fault and
//     within the deadline, for edge-case views: no messages, many messages
//     (10,000, the last question 256 KiB long, so read buffers must grow),
//     view and message keys it does not know, in every object and with
//     values that take a real parser to skip (a later minor may add
//     them), a long config (32 KiB more of it, in whatever form its
//     config_schema admits), and no notes (so every note it reads is
//     missing);
//   - its effects are valid for the hook, as the host and the engine check
//     them: the kinds the hook takes, at most one decisive answer where the
//     hook takes one, decisions only from a guard and only for the calls
//     it was asked about, a tool's result only when the host asks its
//     owner to run the call (View.Tool.Run) and then exactly one, results
//     from other ops only for calls no op owns (ABI.md §4);
//   - the notes it writes, handed back to it, are read and answered
//     without a fault (notes round-trip);
//   - it answers the same view the same way in two fresh instances and in
//     one that served every other check first (instances never remember).
//
// Check returns the same results for programs (wagent ops test prints
// them).
//
// The kit runs modules in wasmhost, the host sessions use, not in a model
// of it: what passes here met the same limits, memory rules and effect
// checks a session applies. The engine's rules that need no session (the
// tool hook's roles, one decisive answer per hook) are restated in
// rules.go, since the engine applies them to its state, not to a view.
// Unknown keys reach the guest through wasmhost.WithDocumentFilter, which
// rewrites only what the guest reads: the host still checks the answer
// against the view it was given.
package abitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// Options say how the module's ops run. The zero value runs every op with
// config {}, the default limits, and an empty folder for each mount an op
// requests.
type Options struct {
	// Ops sets how each op runs, by op name; ops not listed run with
	// Default.
	Ops map[string]OpOptions
	// Default is how ops not listed in Ops run.
	Default OpOptions
	// Only, if set, checks only the op of this name (one op of a bundle).
	Only string
	// Runtime are options for the two runtimes the kit makes (one that
	// pools instances as production does, one that starts every call in
	// a fresh instance), such as wasmhost.WithCacheDir.
	Runtime []wasmhost.Option
}

// OpOptions are one op's config, limits and grants, as a pipeline entry
// would give them.
type OpOptions struct {
	// Config is the op's config (nil: {}). It must pass the op's
	// config_schema, as at load.
	Config json.RawMessage
	// Limits bound every call (zero fields: wasmhost.DefaultLimits).
	Limits wasmhost.Limits
	// Mounts are the read-only folders granted; a mount the op requests
	// and Mounts does not grant gets an empty folder.
	Mounts []wasmhost.Mount
}

// Result is the outcome of one check of one op.
type Result struct {
	// Op is the op's name.
	Op string
	// Check names the check: "start", HOOK/CASE/VARIANT for one call
	// ("tool/guard/many-messages"), HOOK/CASE/notes for the notes
	// round-trip, HOOK/CASE/deterministic.
	Check string
	// Err is why the check failed; nil when it passed or was skipped.
	Err error
	// Skipped says why the check was not run ("" when it was).
	Skipped string
	// Effects is what the op answered (the first call, for checks that
	// make several).
	Effects []hostabi.Effect
	// Took is how long the op's call took (the slowest, for checks that
	// make several).
	Took time.Duration
}

// Passed reports whether the check ran and passed.
func (r *Result) Passed() bool { return r.Err == nil && r.Skipped == "" }

// Report is every result of a run of the kit, in the order the checks ran.
type Report struct {
	Results []Result
}

// Failed returns the results that failed.
func (r *Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Err != nil {
			out = append(out, res)
		}
	}
	return out
}

// Err joins the failures, one line each; nil when every check passed.
func (r *Report) Err() error {
	var errs []error
	for _, res := range r.Failed() {
		errs = append(errs, fmt.Errorf("%s: %s: %w", res.Op, res.Check, res.Err))
	}
	return errors.Join(errs...)
}

// Run checks a module with Check, one subtest per op and check
// (OP/HOOK/CASE/VARIANT). A module the host refuses fails t.
func Run(t *testing.T, wasm []byte, o Options) {
	t.Helper()
	rep, err := Check(context.Background(), wasm, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rep.Results {
		t.Run(res.Op+"/"+res.Check, func(t *testing.T) {
			switch {
			case res.Skipped != "":
				t.Skip(res.Skipped)
			case res.Err != nil:
				t.Error(res.Err)
				if len(res.Effects) > 0 {
					t.Logf("effects: %s", hostabi.AppendEffects(nil, res.Effects))
				}
			}
		})
	}
}

// Check runs every check on every op of a module (or on o.Only) and
// returns the results. The error is for a module the host refuses, or a
// runtime that cannot start; a failed check is a Result.
func Check(ctx context.Context, wasm []byte, o Options) (*Report, error) {
	pooled, err := wasmhost.NewRuntime(ctx, o.Runtime...)
	if err != nil {
		return nil, err
	}
	defer pooled.Close(ctx)
	fresh, err := wasmhost.NewRuntime(ctx, append(slices.Clone(o.Runtime), wasmhost.WithPool(0, 1))...)
	if err != nil {
		return nil, err
	}
	defer fresh.Close(ctx)
	mp, err := pooled.Load(ctx, wasm)
	if err != nil {
		return nil, err
	}
	mf, err := fresh.Load(ctx, wasm)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	found := false
	for _, man := range mp.Manifests() {
		if o.Only != "" && man.Name != o.Only {
			continue
		}
		found = true
		oo, ok := o.Ops[man.Name]
		if !ok {
			oo = o.Default
		}
		k := &opCheck{ctx: ctx, rep: rep, man: man, oo: oo, pooled: pooled, fresh: fresh, mp: mp, mf: mf}
		err := k.run()
		k.cleanup()
		if err != nil {
			return nil, err
		}
	}
	if !found {
		var names []string
		for _, man := range mp.Manifests() {
			names = append(names, man.Name)
		}
		return nil, fmt.Errorf("module has no op named %q; it has: %s", o.Only, strings.Join(names, ", "))
	}
	return rep, nil
}

// opCheck runs the checks of one op.
type opCheck struct {
	ctx           context.Context
	rep           *Report
	man           *hostabi.Manifest
	oo            OpOptions
	pooled, fresh *wasmhost.Runtime
	mp, mf        *wasmhost.Module
	grants        wasmhost.Grants
	temp          []string
}

func (k *opCheck) add(r Result) {
	r.Op = k.man.Name
	k.rep.Results = append(k.rep.Results, r)
}

func (k *opCheck) cleanup() {
	for _, d := range k.temp {
		os.RemoveAll(d)
	}
}

func (k *opCheck) newOp(rt *wasmhost.Runtime, m *wasmhost.Module, config json.RawMessage) (*wasmhost.Op, error) {
	return rt.NewOp(m, wasmhost.Config{Op: k.man.Name, Config: config, Limits: k.oo.Limits, Grants: k.grants})
}

func (k *opCheck) run() error {
	k.grants = wasmhost.Grants{Mounts: slices.Clone(k.oo.Mounts)}
	for _, want := range k.man.Capabilities.Mounts {
		if !slices.ContainsFunc(k.grants.Mounts, func(m wasmhost.Mount) bool { return m.GuestPath == want.Path }) {
			dir, err := os.MkdirTemp("", "wagent-abitest-")
			if err != nil {
				return err
			}
			k.temp = append(k.temp, dir)
			k.grants.Mounts = append(k.grants.Mounts, wasmhost.Mount{HostDir: dir, GuestPath: want.Path, Write: want.Write})
		}
	}
	// HTTP and commands (ABI 1.2): grants that let the op start and reach
	// nothing: a host that never resolves, /bin/true.
	for _, h := range k.man.Capabilities.HTTP {
		if h == hostabi.AnyHost {
			h = "check.invalid"
		}
		k.grants.HTTP = append(k.grants.HTTP, h)
	}
	for _, e := range k.man.Capabilities.Exec {
		if e == hostabi.AnyCommand {
			e = "true"
		}
		k.grants.Exec = append(k.grants.Exec, wasmhost.ExecGrant{Cmd: e, Unconfined: !wasmhost.CanConfine()})
	}
	op, err := k.newOp(k.pooled, k.mp, k.oo.Config)
	if err == nil {
		start := time.Now()
		err = op.Warm(k.ctx)
		if err == nil {
			k.add(Result{Check: "start", Took: time.Since(start)})
		}
	}
	if err != nil {
		k.add(Result{Check: "start", Err: err})
		return nil
	}
	long, longWhy := k.longConfig()
	for _, s := range scenarios(k.man) {
		for _, v := range variants {
			name := s.name + "/" + v.name
			o := op
			if v.longConfig {
				if long == nil {
					k.add(Result{Check: name, Skipped: longWhy})
					continue
				}
				o = long
			}
			view, r := s.view(k.man, v.messages), newReader(v.messages, nil)
			if v.longConfig {
				view.Config = nil // the op's own (long) config
			}
			ctx := k.ctx
			if v.unknownKeys {
				ctx = wasmhost.WithDocumentFilter(ctx, addUnknownKeys)
			}
			eff, took, err := call(ctx, o, view, r)
			if err == nil {
				err = s.rule(k.man, view, eff)
			}
			k.add(Result{Check: name, Err: err, Effects: eff, Took: took})
		}
		k.notes(op, s)
		k.deterministic(op, s)
	}
	return nil
}

func call(ctx context.Context, o *wasmhost.Op, v *hostabi.View, r *reader) ([]hostabi.Effect, time.Duration, error) {
	start := time.Now()
	eff, err := o.Handle(ctx, v, r)
	return eff, time.Since(start), err
}

// notes: the notes the op wrote, handed back at the same view, are read
// without a fault, and the answer is still valid.
func (k *opCheck) notes(op *wasmhost.Op, s scenario) {
	name := s.name + "/notes"
	view := s.view(k.man, someMessages)
	eff, _, err := call(k.ctx, op, view, newReader(someMessages, nil))
	if err != nil {
		k.add(Result{Check: name, Err: fmt.Errorf("the first call: %w", err)})
		return
	}
	written := map[string]string{}
	for _, e := range eff {
		if e.Kind == hostabi.KindNote {
			written[e.Key] = e.Value
		}
	}
	if len(written) == 0 {
		k.add(Result{Check: name, Skipped: "the op wrote no notes at this view", Effects: eff})
		return
	}
	r := newReader(someMessages, written)
	eff2, took, err := call(k.ctx, op, view, r)
	if err == nil {
		err = s.rule(k.man, view, eff2)
	}
	if err != nil {
		err = fmt.Errorf("given back the notes it wrote (%s): %w", noteKeys(written), err)
	}
	k.add(Result{Check: name, Err: err, Effects: eff2, Took: took})
}

func noteKeys(m map[string]string) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

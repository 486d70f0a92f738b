package ops

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/wasmhost"
	"github.com/wagent/wagent/wasmhost/abitest"
)

// wagent ops test: the conformance kit (wasmhost/abitest) on a module,
// one line per check, exit 1 when one fails.

var opConfig = regexp.MustCompile(`^([A-Za-z0-9._-]{1,64})=`)

// TestOptions are what wagent ops test FILE.wasm is given.
type TestOptions struct {
	Env
	Path      string
	Op        string   // test only this op of a bundle
	Configs   []string // JSON, or NAME=JSON for one op of a bundle, each whole
	Mounts    []string // read-only mounts HOST_DIR:GUEST_PATH
	TimeoutMS int64    // 0: the defaults
	MemoryMB  uint     // 0: the default
	JSON      bool     // one JSON object per check
}

// Test runs the conformance kit on a module, a line per check; a check
// that fails fails it.
func Test(ctx context.Context, o TestOptions) error {
	path := o.Path
	wasm, err := os.ReadFile(path)
	if err != nil {
		return app.Errorf(app.Failed, "%v", err)
	}
	var def abitest.OpOptions
	if ms := o.TimeoutMS; ms > 0 {
		def.Limits.Timeout, def.Limits.InitTimeout = time.Duration(ms)*time.Millisecond, time.Duration(ms)*time.Millisecond
	}
	def.Limits.MemoryPages = uint32(o.MemoryMB) * 16
	for _, spec := range o.Mounts {
		mt, err := wasmhost.ParseMount(".", spec)
		if err != nil {
			return app.Errorf(app.Invalid, "--mount: %v", err)
		}
		def.Mounts = append(def.Mounts, mt)
	}
	ao := abitest.Options{Only: o.Op, Ops: map[string]abitest.OpOptions{}}
	for _, s := range o.Configs {
		name := ""
		if m := opConfig.FindStringSubmatch(s); m != nil {
			name, s = m[1], s[len(m[0]):]
		}
		if !json.Valid([]byte(s)) {
			return app.Errorf(app.Invalid, "--config %s is not JSON", s)
		}
		if name == "" {
			def.Config = json.RawMessage(s)
			continue
		}
		oo := def
		oo.Config = json.RawMessage(s)
		ao.Ops[name] = oo
	}
	for name, oo := range ao.Ops { // limits and mounts given after a NAME=JSON config apply too
		oo.Limits, oo.Mounts = def.Limits, def.Mounts
		ao.Ops[name] = oo
	}
	ao.Default = def
	ao.Runtime = o.runtimeOptions()
	rep, err := abitest.Check(ctx, wasm, ao)
	if err != nil {
		return app.Errorf(app.Failed, "%s: %v", path, err)
	}
	var passed, failed, skipped int
	last := ""
	for _, r := range rep.Results {
		status := "ok"
		switch {
		case r.Err != nil:
			status, failed = "FAIL", failed+1
		case r.Skipped != "":
			status, skipped = "skip", skipped+1
		default:
			passed++
		}
		if o.JSON {
			line := map[string]any{"op": r.Op, "check": r.Check, "status": strings.ToLower(status), "took_us": r.Took.Microseconds(), "effects": r.Effects}
			if r.Err != nil {
				line["error"] = r.Err.Error()
			}
			if r.Skipped != "" {
				line["skipped"] = r.Skipped
			}
			printJSON(o.Stdout, line)
			continue
		}
		if r.Op != last {
			render.Fprintf(o.Stdout, "%s\n", r.Op)
			last = r.Op
		}
		detail := effectSummary(r.Effects)
		switch {
		case r.Check == "start" && r.Err == nil:
			detail = "started within its limits"
		case r.Err != nil:
			detail = r.Err.Error()
		case r.Skipped != "":
			detail = r.Skipped
		}
		render.Fprintf(o.Stdout, "  %-4s  %-36s %9s  %s\n", status, r.Check, roundTook(r.Took), indentRest(detail))
	}
	if !o.JSON {
		render.Fprintf(o.Stdout, "%s: %d checks passed, %d failed, %d skipped\n", path, passed, failed, skipped)
	}
	if failed > 0 {
		return app.Errorf(app.Failed, "%s: %d of %d checks failed: the module does not keep the ABI", path, failed, len(rep.Results))
	}
	return nil
}

func roundTook(d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}

// indentRest keeps the lines after the first of a multi-line detail (a
// cmp diff) under the check's line.
func indentRest(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n        ")
}

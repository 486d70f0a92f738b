package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/wasmhost"
	"github.com/wagent/wagent/wasmhost/abitest"
)

// wagent ops test: the conformance kit (wasmhost/abitest) on a module,
// one line per check, exit 1 when one fails.

func opsTestCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "test",
		Usage: "check a module against the ABI with the conformance kit",
		UsageText: "wagent ops test FILE.wasm [--op NAME] [--config JSON | --config NAME=JSON ...] [--mount DIR:/PATH] [--timeout-ms N] [--memory-mb N] [--json]\n\n" +
			"Every hook each op declares is called with edge-case views (no messages, 10,000 messages, keys it does not know,\n" +
			"a long config, no notes); its effects must be valid for the hook and for its role at the tool hook (a guard decides,\n" +
			"an owner answers only the call the host asks it to run), the notes it writes must read back, and two fresh\n" +
			"instances and a reused one must answer alike. Exit 1 when a check fails.\n\n" +
			"Examples:\n   wagent ops test examples/wasm-ops/policy-c/policy.wasm --config '{\"allow\":[\"calc_total\"]}'\n" +
			"   wagent ops test builtins.wasm --config turn-stopping='{\"require_phrase\":\"DONE\"}'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "op", Usage: "test only this op of a bundle"},
			&cli.GenericFlag{Name: "config", Value: &repeated{}, Usage: "an op's config as JSON (checked against its config_schema); NAME=JSON for one op of a bundle; repeat it for several"},
			&cli.StringSliceFlag{Name: "mount", Usage: "grant a read-only mount HOST_DIR:GUEST_PATH (default: an empty folder for each mount an op requests)"},
			&cli.Int64Flag{Name: "timeout-ms", Usage: "the deadline of each call and of starting the op (default: 1000 per call, 5000 to start)"},
			&cli.UintFlag{Name: "memory-mb", Usage: "the op's memory limit (default 32)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per check"},
		},
		Action: func(c *cli.Context) error { return testOps(c, env) },
	}
}

// repeated is a flag that may be given several times, each value whole:
// a StringSliceFlag would split JSON at its commas.
type repeated struct{ list []string }

func (r *repeated) Set(v string) error { r.list = append(r.list, v); return nil }
func (r *repeated) String() string     { return strings.Join(r.list, " ") }

var opConfig = regexp.MustCompile(`^([A-Za-z0-9._-]{1,64})=`)

func testOps(c *cli.Context, env *cliEnv) error {
	if err := needArgs(c, 1, 1, "FILE.wasm"); err != nil {
		return err
	}
	path := c.Args().First()
	wasm, err := os.ReadFile(path)
	if err != nil {
		return fail(exitFailure, "%v", err)
	}
	var def abitest.OpOptions
	if ms := c.Int64("timeout-ms"); ms > 0 {
		def.Limits.Timeout, def.Limits.InitTimeout = time.Duration(ms)*time.Millisecond, time.Duration(ms)*time.Millisecond
	}
	def.Limits.MemoryPages = uint32(c.Uint("memory-mb")) * 16
	for _, spec := range c.StringSlice("mount") {
		mt, err := wasmhost.ParseMount(".", spec)
		if err != nil {
			return fail(exitUsage, "--mount: %v", err)
		}
		def.Mounts = append(def.Mounts, mt)
	}
	o := abitest.Options{Only: c.String("op"), Ops: map[string]abitest.OpOptions{}}
	for _, s := range c.Generic("config").(*repeated).list {
		name := ""
		if m := opConfig.FindStringSubmatch(s); m != nil {
			name, s = m[1], s[len(m[0]):]
		}
		if !json.Valid([]byte(s)) {
			return fail(exitUsage, "--config %s is not JSON", s)
		}
		if name == "" {
			def.Config = json.RawMessage(s)
			continue
		}
		oo := def
		oo.Config = json.RawMessage(s)
		o.Ops[name] = oo
	}
	for name, oo := range o.Ops { // limits and mounts given after a NAME=JSON config apply too
		oo.Limits, oo.Mounts = def.Limits, def.Mounts
		o.Ops[name] = oo
	}
	o.Default = def
	o.Runtime = []wasmhost.Option{wasmhost.WithLogger(warnings(env.stderr))}
	if d := env.getenv("WAGENT_CACHE_DIR"); d != "" {
		o.Runtime = append(o.Runtime, wasmhost.WithCacheDir(d))
	}
	rep, err := abitest.Check(context.Background(), wasm, o)
	if err != nil {
		return fail(exitFailure, "%s: %v", path, err)
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
		if c.Bool("json") {
			line := map[string]any{"op": r.Op, "check": r.Check, "status": strings.ToLower(status), "took_us": r.Took.Microseconds(), "effects": r.Effects}
			if r.Err != nil {
				line["error"] = r.Err.Error()
			}
			if r.Skipped != "" {
				line["skipped"] = r.Skipped
			}
			printJSON(env.stdout, line)
			continue
		}
		if r.Op != last {
			tprintf(env.stdout, "%s\n", r.Op)
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
		tprintf(env.stdout, "  %-4s  %-36s %9s  %s\n", status, r.Check, roundTook(r.Took), indentRest(detail))
	}
	if !c.Bool("json") {
		tprintf(env.stdout, "%s: %d checks passed, %d failed, %d skipped\n", path, passed, failed, skipped)
	}
	if failed > 0 {
		return fail(exitFailure, "%s: %d of %d checks failed: the module does not keep the ABI", path, failed, len(rep.Results))
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

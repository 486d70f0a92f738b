// Package ops does the work of the wagent ops commands: writing an op
// module (New), building one (Build), and looking at a module before a
// pipeline runs it (Inspect, Check, Test). Package main defines the
// commands (flags, usage, argument counts) and calls these with plain
// values.
//
// Errors are *app.Error: app.Invalid for what the person must change
// (exit 2), app.Failed for the rest (exit 1). Human output goes through
// render's printers, which show text from modules safely on a terminal.
package ops

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/wasmhost"
)

// Env is what a command talks to.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment (WAGENT_CACHE_DIR).
	Getenv func(string) string
	// Log is the wasm runtime's logger (nil: none).
	Log *slog.Logger
}

// runtimeOptions are the wasm runtime's options in the CLI: its logger,
// and the compile cache $WAGENT_CACHE_DIR names.
func (e Env) runtimeOptions() []wasmhost.Option {
	var opts []wasmhost.Option
	if e.Log != nil {
		opts = append(opts, wasmhost.WithLogger(e.Log))
	}
	if e.Getenv != nil {
		if d := e.Getenv("WAGENT_CACHE_DIR"); d != "" {
			opts = append(opts, wasmhost.WithCacheDir(d))
		}
	}
	return opts
}

// load reads FILE.wasm, or builtin:NAME (the bundle, with NAME the op to
// look at), and loads it in a new runtime, which the caller closes.
func load(ctx context.Context, env Env, path string) (*wasmhost.Module, *wasmhost.Runtime, []byte, string, error) {
	var wasm []byte
	var op string
	if name, ok := strings.CutPrefix(path, pipeline.BuiltinPrefix); ok {
		b := builtins.Bundle()
		var found bool
		if wasm, op, found = b.Lookup(name); !found {
			return nil, nil, nil, "", app.Errorf(app.Invalid, "unknown built-in %q; the built-ins are: %s", name, strings.Join(b.Names(), ", "))
		}
	} else {
		var err error
		if wasm, err = os.ReadFile(path); err != nil {
			return nil, nil, nil, "", app.Errorf(app.Failed, "%v", err)
		}
	}
	rt, err := wasmhost.NewRuntime(ctx, env.runtimeOptions()...)
	if err != nil {
		return nil, nil, nil, "", app.Errorf(app.Failed, "start the wasm runtime: %v", err)
	}
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, nil, nil, "", app.Errorf(app.Failed, "%s: %v", path, err)
	}
	return m, rt, wasm, op, nil
}

func printJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.Write(append(b, '\n'))
}

// oneLine is the first line of s, trimmed.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

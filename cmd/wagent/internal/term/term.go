// Package term is the wagent command's terminal: what a command talks to
// (Env), the colours, the spinner and the progress line, and the wasm
// runtime's warnings as the terminal shows them.
//
// Text from guests and models reaches the terminal through render's
// printers (render.Fprintf, Fprintln, Fprint). An op's log line, a fault
// message, a model's answer or a manifest field may hold escape sequences
// that clear the screen, set the window title or draw a fake "approved"
// line; human output shows every such character escaped. Only the CLI's
// own colours and line clearing (values of type render.ANSI) and its
// format strings are written as they are. --json output is encoded by
// encoding/json, which escapes control characters itself, and stays exact.
package term

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/render"
)

// Env is what a run of the CLI talks to.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Interactive: standard input is a terminal, so approvals are asked.
	Interactive bool
	// Colour: standard output is a terminal and NO_COLOR is not set.
	Colour bool
	// Terminal: standard output is a terminal (with colour or without):
	// answers are drawn from their Markdown.
	Terminal bool
	// Hints: the store the command was given, for the follow-up commands
	// it prints (Hint).
	Hints *Hints
	// config is the config file once read (LoadConfig); copies of an Env
	// share it.
	config *loadedConfig
}

type loadedConfig struct {
	cfg *app.Config
	err error
}

// LoadConfig reads the config file once per command: the store, the
// settings and the prices all come from the same reading.
func (e *Env) LoadConfig() (*app.Config, error) {
	if e.config == nil {
		cfg, err := app.LoadConfig(e.Getenv)
		e.config = &loadedConfig{cfg, err}
	}
	return e.config.cfg, e.config.err
}

// IsTerminal reports whether x is a terminal (not merely a character
// device: /dev/null is one too), or a writer that says it writes to one
// (the chat's line editor's output, which keeps its input line below).
func IsTerminal(x any) bool {
	if t, ok := x.(interface{ Terminal() bool }); ok {
		return t.Terminal()
	}
	f, ok := x.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Width is the terminal's width in columns, 80 when x is no terminal or
// does not say.
func Width(x any) int {
	if f, ok := x.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return 80
}

// PrintJSON writes v as one line of JSON.
func PrintJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.Write(append(b, '\n'))
}

// OneLine is s's first line, trimmed.
func OneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Warnings is the wasm runtime's logger in the CLI: warnings (a cache
// entry that failed its check, say) go to standard error as one safe line
// each, and nothing else is shown.
func Warnings(w io.Writer) *slog.Logger { return slog.New(warnHandler{w: w}) }

type warnHandler struct {
	w     io.Writer
	attrs []slog.Attr
}

func (h warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h warnHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	render.Fprintln(h.w, "wagent: warning: "+b.String())
	return nil
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{w: h.w, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h warnHandler) WithGroup(string) slog.Handler { return h }

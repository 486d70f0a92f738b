package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/wagent/wagent/render"
)

// Text from guests and models reaches the terminal through here. An op's
// log line, a fault message, a model's answer or a manifest field may hold
// escape sequences that clear the screen, set the window title or draw a
// fake "approved" line; human output shows every such character escaped.
// Only the CLI's own colours and line clearing (values of type ansi) and
// its format strings are written as they are. --json output is encoded by
// encoding/json, which escapes control characters itself, and stays exact.

// ansi is a terminal sequence of the CLI's own, written as it is.
type ansi = render.ANSI

// clearLine returns the cursor to the start of the line and clears it.
const clearLine = render.ClearLine

// safe returns s as it may be shown on a terminal (see render.Safe).
func safe(s string) string { return render.Safe(s) }

// tprintf is fmt.Fprintf for human output: the format is the CLI's own;
// every argument but an ansi one is made safe.
func tprintf(w io.Writer, format string, args ...any) { render.Fprintf(w, format, args...) }

// tprintln is fmt.Fprintln for human output.
func tprintln(w io.Writer, args ...any) { render.Fprintln(w, args...) }

// tprint is fmt.Fprint for human output.
func tprint(w io.Writer, args ...any) { render.Fprint(w, args...) }

// warnings is the wasm runtime's logger in the CLI: warnings (a cache
// entry that failed its check, say) go to standard error as one safe line
// each, and nothing else is shown.
func warnings(w io.Writer) *slog.Logger { return slog.New(warnHandler{w: w}) }

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
	tprintln(h.w, "wagent: warning: "+b.String())
	return nil
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{w: h.w, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h warnHandler) WithGroup(string) slog.Handler { return h }

package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
)

// TestTypedErrors: callers branch on the engine's refusals and the fold's
// broken logs with errors.Is and errors.As, never on their text, and the
// text a person reads is unchanged.
func TestTypedErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		is     []error
		isNot  []error
		text   string
		reason string
	}{
		{"refused", &engine.Refused{Kind: engine.ErrRefused, Reason: "no decisions"},
			[]error{engine.ErrRefused}, []error{engine.ErrDecided, engine.ErrChanged},
			"engine: refused: no decisions", "no decisions"},
		{"already decided", &engine.Refused{Kind: engine.ErrDecided, Reason: "call c was already decided: allowed by ann"},
			[]error{engine.ErrDecided}, []error{engine.ErrRefused, engine.ErrChanged},
			"engine: already decided: call c was already decided: allowed by ann", "call c was already decided: allowed by ann"},
		{"input id", engine.CheckInputID("a\x01"),
			[]error{engine.ErrRefused}, []error{engine.ErrDecided, engine.ErrChanged},
			`engine: refused: message id "a\x01" has a control character`, `message id "a\x01" has a control character`},
		{"fork point past the head", event.ForkPoint("s", nil, 3),
			[]error{event.ErrNotBoundary}, []error{engine.ErrRefused, event.ErrCorruptLog},
			"event: not a turn boundary: seq 3 is not in session s (its head is 0)", "seq 3 is not in session s (its head is 0)"},
		{"corrupt log", &event.CorruptLog{Detail: "session s seq 3: a tool result without a call"},
			[]error{event.ErrCorruptLog}, []error{engine.ErrRefused},
			"event: log breaks an invariant: session s seq 3: a tool result without a call", "session s seq 3: a tool result without a call"},
		{"empty import", event.CheckLog("s", nil, nil),
			[]error{event.ErrCorruptLog}, []error{engine.ErrRefused},
			"event: log breaks an invariant: session s: the log to import is empty", "session s: the log to import is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wrapped := fmt.Errorf("context: %w", tc.err)
			for _, target := range tc.is {
				if !errors.Is(wrapped, target) {
					t.Errorf("errors.Is(%v, %v) = false", wrapped, target)
				}
			}
			for _, target := range tc.isNot {
				if errors.Is(wrapped, target) {
					t.Errorf("errors.Is(%v, %v) = true", wrapped, target)
				}
			}
			if got := tc.err.Error(); got != tc.text {
				t.Errorf("Error() = %q, want %q", got, tc.text)
			}
			var reason string
			var r *engine.Refused
			var c *event.CorruptLog
			switch {
			case errors.As(wrapped, &r):
				reason = r.Reason
			case errors.As(wrapped, &c):
				reason = c.Detail
			}
			if reason != tc.reason {
				t.Errorf("reason = %q, want %q", reason, tc.reason)
			}
		})
	}
}

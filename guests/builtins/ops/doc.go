// Package ops holds the logic of wagent's built-in operations, each a
// pdk.Op: approval, skills, retry, turn-stopping, max-turns, unknown-tool,
// final-output, compaction, agents-md and prompt, and the ops that act on the
// world through the capabilities they are granted (ABI 1.2): files, fetch
// and shell. They are compiled into a guest module of all of them
// (guests/builtins/module) and one of all but fetch
// (guests/builtins/core: no HTML parser, so it loads and starts faster),
// both embedded by the host package builtins, and loaded by the host exactly as a third-party module would be: through the
// ABI, sandboxed, with the pipeline's limits and grants. They keep no
// state between calls: what they must remember is in
// notes.
package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// All returns every built-in op, each with the test fault switch (see
// faulty).
func All() []func() Op {
	return withFaults(append(core(), Fetch))
}

// Core returns the built-ins but fetch, which alone needs the HTML parser
// (whose tables every instance builds as it starts): the default
// pipeline's ops, files and shell included.
func Core() []func() Op { return withFaults(core()) }

func core() []func() Op {
	return []func() Op{Approval, Skills, Retry, TurnStopping, MaxTurns, UnknownTool, FinalOutput, Compaction, AgentsMD, Prompt, Files, Shell}
}

func withFaults(list []func() Op) []func() Op {
	out := make([]func() Op, len(list))
	for i, f := range list {
		out[i] = func() Op { return faulty(f()) }
	}
	return out
}

// faulty wraps an op's handlers so that a config with "_fault": "trap"
// panics (a trap, in a guest) and "_fault": "error" fails the call. Tests
// use it to show that a fault in any built-in becomes an op/fault and that
// approval fails closed; a pipeline has no reason to set it.
func faulty(op Op) Op {
	wrap := func(h pdk.Handler) pdk.Handler {
		if h == nil {
			return nil
		}
		return func(c *pdk.Call) error {
			if raw, ok := hostabi.Field(c.RawConfig(), "_fault"); ok {
				switch s, _ := hostabi.String(raw); s {
				case "trap":
					panic("forced fault (config _fault: trap)")
				case "error":
					return fmt.Errorf("forced fault (config _fault: error)")
				}
			}
			return h(c)
		}
	}
	op.Prompt, op.Contribute, op.Tool = wrap(op.Prompt), wrap(op.Contribute), wrap(op.Tool)
	op.RequestError, op.TurnStopping, op.Command = wrap(op.RequestError), wrap(op.TurnStopping), wrap(op.Command)
	op.Compact = wrap(op.Compact)
	return op
}

// strictSchema is a config schema of an object that takes exactly the
// given properties (JSON members, without braces) and the _fault test
// switch, with more keywords of the object schema after them. The host
// checks a pipeline's config against it at load, so a typo or a value out
// of range is one line before any session starts.
func strictSchema(props string, more ...string) []byte {
	if props != "" {
		props += ","
	}
	s := `{"type":"object","additionalProperties":false,"properties":{` + props + `"_fault":{"enum":["trap","error"]}}`
	for _, m := range more {
		s += "," + m
	}
	return []byte(s + "}")
}

// decodeConfig decodes an op's config strictly: unknown keys are errors,
// so a typo in a pipeline file is caught at the first call.
func decodeConfig(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	if bytes.Contains(raw, []byte(`"_fault"`)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			delete(m, "_fault")
			raw, _ = json.Marshal(m)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("config: %v", err)
	}
	return nil
}

// configCache keeps the parsed config while it does not change, so the
// (reflective, slow in a guest) decoding happens once per instance.
type configCache[T any] struct {
	raw    string
	parsed *T
}

func (c *configCache[T]) get(raw []byte, parse func([]byte) (T, error)) (*T, error) {
	if c.parsed != nil && string(raw) == c.raw {
		return c.parsed, nil
	}
	v, err := parse(raw)
	if err != nil {
		return nil, err
	}
	c.raw, c.parsed = string(raw), &v
	return c.parsed, nil
}

// maxPatternBytes bounds a glob or grep pattern: one of megabytes takes
// longer to compile than a call may run, and is no search anyone means.
const maxPatternBytes = 4096

// quoted shortens what a tool's caller sent (a path, a URL) for a message
// that quotes it: an error result must stay a short answer, whatever the
// model passed.
func quoted(s string) string { return hostabi.Clip(s, 256) }

// glob matches name against a pattern where * matches any run of
// characters.
func glob(pattern, name string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == name
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	for i, p := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(name, p)
		}
		j := strings.Index(name, p)
		if j < 0 {
			return false
		}
		name = name[j+len(p):]
	}
	return true
}

func anyGlob(patterns []string, name string) bool {
	for _, p := range patterns {
		if glob(p, name) {
			return true
		}
	}
	return false
}

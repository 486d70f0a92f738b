// Package ops holds the logic of wagent's built-in operations, each a
// pdk.Op: approval, skills, retry, turn-stopping, max-turns, unknown-tool
// and final-output. They are compiled into one guest module (see
// guests/builtins) and loaded by the host exactly as a third-party module
// would be: through the ABI, sandboxed, with the pipeline's limits and
// grants. They keep no state between calls: what they must remember is in
// notes.
package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// All returns every built-in op.
func All() []func() Op {
	return []func() Op{Approval, Skills, Retry, TurnStopping, MaxTurns, UnknownTool, FinalOutput}
}

// decodeConfig decodes an op's config strictly: unknown keys are errors,
// so a typo in a pipeline file is caught at the first call.
func decodeConfig(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
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

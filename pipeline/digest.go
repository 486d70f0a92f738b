package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// ModuleDigest names one op of a pipeline and the SHA-256 (hex) of its
// module's bytes, the digest the wasm host binds compiled code to
// (wasmhost.Module.Digest). An MCP server has none.
type ModuleDigest struct {
	Use    string
	Op     string
	SHA256 string
}

// Digests lists the spec's ops as Build would load them (the unknown-tool
// fallback included, unless o.NoFallback) with their modules' digests,
// without compiling anything: for a record of what a session ran with
// (wagent export). Only o.Builtins and o.NoFallback are used.
func (s *Spec) Digests(o Options) ([]ModuleDigest, error) {
	ops := s.Ops
	if !o.NoFallback && o.Builtins != nil && !s.names(BuiltinPrefix+Fallback) {
		if _, _, ok := o.Builtins.Lookup(Fallback); ok {
			ops = append(append([]OpSpec(nil), ops...), OpSpec{Use: BuiltinPrefix + Fallback})
		}
	}
	if o.Builtins != nil {
		o.Builtins = builtinsFor(o.Builtins, ops)
	}
	var out []ModuleDigest
	for i, spec := range ops {
		if spec.MCP != nil {
			out = append(out, ModuleDigest{Use: spec.Use, Op: strings.TrimPrefix(spec.Use, "mcp:")})
			continue
		}
		wasm, op, err := s.moduleBytes(spec, o.Builtins)
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: op %d (%s): %v", s.label(), i+1, spec.Use, err)
		}
		if spec.Op != "" {
			op = spec.Op
		}
		sum := sha256.Sum256(wasm)
		out = append(out, ModuleDigest{Use: spec.Use, Op: op, SHA256: hex.EncodeToString(sum[:])})
	}
	return out, nil
}

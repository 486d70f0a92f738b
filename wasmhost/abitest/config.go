package abitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/wagent/wagent/wasmhost"
)

// Sizes of a long config.
const (
	longString = 32 << 10
	longList   = 1000
)

// longConfig makes the op with a long config: its config with a long
// unknown key, or with a property of its config_schema filled with a long
// list of strings or a long string, the first of these the schema admits
// (the host checks at NewOp). It returns nil and why when the schema admits
// none of them.
func (k *opCheck) longConfig() (*wasmhost.Op, string) {
	base := k.oo.Config
	if len(bytes.TrimSpace(base)) == 0 {
		base = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(base, &obj); err != nil {
		return nil, "the op's config is not a JSON object"
	}
	var cands []json.RawMessage
	pad := strings.Repeat("abitest padding ", longString/16)
	cands = append(cands, withKey(base, "abitest_padding", mustJSON(pad)))
	var schema struct {
		Properties map[string]struct {
			Type  any `json:"type"`
			Items *struct {
				Type any `json:"type"`
			} `json:"items"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(k.man.ConfigSchema, &schema)
	var names []string
	for name := range schema.Properties {
		if !strings.HasPrefix(name, "_") { // the built-ins' test switches
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		p := schema.Properties[name]
		if isType(p.Type, "array") {
			list := make([]string, longList)
			for i := range list {
				list[i] = fmt.Sprintf("abitest_entry_%04d", i)
			}
			cands = append(cands, withKey(base, name, mustJSON(list)))
		}
	}
	for _, name := range names {
		if isType(schema.Properties[name].Type, "string") {
			cands = append(cands, withKey(base, name, mustJSON(pad)))
		}
	}
	for _, c := range cands {
		if op, err := k.newOp(k.pooled, k.mp, c); err == nil {
			return op, ""
		}
	}
	return nil, "the op's config_schema admits no long config (no unknown keys, no list or free string to fill)"
}

func isType(t any, want string) bool {
	switch t := t.(type) {
	case string:
		return t == want
	case []any:
		return slices.Contains(t, any(want))
	}
	return false
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// withKey returns the object base with key set to value, its other
// members in their order.
func withKey(base json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(base, &obj)
	if _, ok := obj[key]; !ok {
		b := bytes.TrimSpace(base)
		b = bytes.TrimSuffix(b, []byte("}"))
		out := append([]byte(nil), b...)
		if len(obj) > 0 {
			out = append(out, ',')
		}
		out = append(out, mustJSON(key)...)
		out = append(out, ':')
		out = append(out, value...)
		return append(out, '}')
	}
	obj[key] = value
	return mustJSON(obj)
}

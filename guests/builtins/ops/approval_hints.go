package ops

import "github.com/wagent/wagent/hostabi"

// hintRule is the part of an approval ask rule that matches what a tool's
// source says of the tool (ABI 1.2: the server and annotations of a
// pending call). Unset fields match anything. A tool whose source states
// no annotations is judged at MCP's defaults: destructive, open world,
// not read-only, so {destructive: true} asks about it (fails closed).
type hintRule struct {
	Server      string `json:"server"`
	Destructive *bool  `json:"destructive"`
	OpenWorld   *bool  `json:"open_world"`
	ReadOnly    *bool  `json:"read_only"`
}

const hintsSchema = `"server":{"type":"string"},"destructive":{"type":"boolean"},"open_world":{"type":"boolean"},"read_only":{"type":"boolean"}`

func (r *hintRule) matches(call *hostabi.PendingCall) bool {
	if r.Server != "" && !glob(r.Server, call.Server) {
		return false
	}
	h := call.Annotations.Hints()
	for _, f := range [...]struct {
		want *bool
		got  bool
	}{{r.Destructive, h.Destructive}, {r.OpenWorld, h.OpenWorld}, {r.ReadOnly, h.ReadOnly}} {
		if f.want != nil && *f.want != f.got {
			return false
		}
	}
	return true
}

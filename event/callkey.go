package event

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// CallKey is the host's name for the index-th call (from 1) of the answer
// of step step in turn turn: "turn.step.index", unique in the session. It
// names the call everywhere (the log, ops' views, decisions, the API, the
// CLI, live events); the model's own id is kept only for the provider
// wire (hostabi.ToolCall.ModelID), since models repeat ids across turns,
// send none or collide.
func CallKey(turn, step, index int) string {
	return fmt.Sprintf("%d.%d.%d", turn, step, index)
}

// IsCallKey reports whether s has the form of a call key (CallKey):
// three decimal numbers joined by dots.
func IsCallKey(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// CallDigest is a short digest of a call's tool and arguments, as a
// surface displayed them: a decision carries it so that the owner records
// it only for the call the person saw (see Decision.Digest).
func CallDigest(name string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

package script

import (
	"encoding/json"
	"testing"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/providertest"
)

// TestConformance runs the suite on a script written for each scenario.
// A script has no wire: the HTTP statuses, broken streams and the request
// as a server reads it are skipped.
func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T, s *providertest.Scenario) provider.Provider {
		var delay int
		switch s.Fault.Kind {
		case providertest.NoFault:
		case providertest.Hang:
			delay = 60_000 // the first piece, then a wait cancellation cuts
		default:
			return nil
		}
		type call struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}
		r := map[string]any{"deltas": s.Answer.Text, "delta_delay_ms": delay,
			"usage": map[string]int{"input_tokens": s.Answer.Usage.InputTokens, "output_tokens": s.Answer.Usage.OutputTokens}}
		if delay == 0 {
			delete(r, "delta_delay_ms")
		}
		var calls []call
		for _, c := range s.Answer.Calls {
			calls = append(calls, call{c.ID, c.Name, string(c.Arguments)})
		}
		if calls != nil {
			r["tool_calls"] = calls
		}
		src, _ := json.Marshal(map[string]any{"fallback": r}) // whatever the conversation
		p, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return p
	})
}

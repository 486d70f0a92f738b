package ops

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// TurnStopping is a stop check: when the model ends its turn without what
// the config requires, it steers the turn on with a message, at most
// max_continuations times per turn (counted in the note
// "continued/TURN").
//
// Config:
//
//	require_phrase: TEXT        the answer must contain TEXT
//	require_tool: NAME          the turn must end through this tool (for
//	                            example final_output, whose result ends the
//	                            turn before this check is reached)
//	message: TEXT               the steering message (a default names what
//	                            is missing)
//	max_continuations: N        [2]
func TurnStopping() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:    "turn-stopping",
			Version: "1.0.0",
			ConfigSchema: strictSchema(`"require_phrase":{"type":"string","minLength":1},"require_tool":{"type":"string","minLength":1},`+
				`"message":{"type":"string"},"max_continuations":{"type":"integer","minimum":0,"maximum":100}`,
				`"anyOf":[{"required":["require_phrase"]},{"required":["require_tool"]}]`),
		},
		TurnStopping: stopCheck,
	}
}

type stopConfig struct {
	RequirePhrase    string `json:"require_phrase"`
	RequireTool      string `json:"require_tool"`
	Message          string `json:"message"`
	MaxContinuations *int   `json:"max_continuations"`
}

var stopCache configCache[stopConfig]

func parseStop(raw []byte) (stopConfig, error) {
	var c stopConfig
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("turn-stopping: %v", err)
	}
	if c.MaxContinuations == nil {
		n := 2
		c.MaxContinuations = &n
	}
	if c.RequirePhrase == "" && c.RequireTool == "" {
		return c, fmt.Errorf("turn-stopping: config needs require_phrase or require_tool")
	}
	return c, nil
}

func stopCheck(c *pdk.Call) error {
	cfg, err := stopCache.get(c.RawConfig(), parseStop)
	if err != nil {
		return err
	}
	msg := cfg.Message
	switch {
	case cfg.RequireTool != "":
		// Reaching this hook means the turn would end without the tool.
		if msg == "" {
			msg = "You have not called " + cfg.RequireTool + " yet. Finish by calling it with your final answer."
		}
	case strings.Contains(c.View.Stop.Content, cfg.RequirePhrase):
		return nil
	default:
		if msg == "" {
			msg = "Your answer does not include " + strconv.Quote(cfg.RequirePhrase) + " yet. Continue until it does."
		}
	}
	key := "continued/" + strconv.Itoa(c.View.Turn)
	n := 0
	if s, ok := c.Note(key); ok {
		n, _ = strconv.Atoi(s)
	}
	if n >= *cfg.MaxContinuations {
		return nil
	}
	c.SetNote(key, strconv.Itoa(n+1))
	c.Steer(msg)
	return nil
}

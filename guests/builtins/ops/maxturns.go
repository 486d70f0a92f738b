package ops

import (
	"fmt"
	"strconv"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// MaxTurns bounds how many model requests (steps) one turn may make. From
// half the budget on, it puts a line in top-of-mind telling the model how
// many are left; when the budget is used, the turn ends with reason limit
// and a message saying so, before another request is sent.
//
// Config: max_steps: N [20].
func MaxTurns() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "max-turns",
			Version:      "1.0.0",
			ConfigSchema: strictSchema(`"max_steps":{"type":"integer","minimum":1,"maximum":10000}`),
		},
		Contribute: budget,
	}
}

type maxTurnsConfig struct {
	MaxSteps int `json:"max_steps"`
}

var maxTurnsCache configCache[maxTurnsConfig]

func parseMaxTurns(raw []byte) (maxTurnsConfig, error) {
	c := maxTurnsConfig{MaxSteps: 20}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("max-turns: %v", err)
	}
	if c.MaxSteps < 1 {
		return c, fmt.Errorf("max-turns: max_steps must be at least 1")
	}
	return c, nil
}

func budget(c *pdk.Call) error {
	cfg, err := maxTurnsCache.get(c.RawConfig(), parseMaxTurns)
	if err != nil {
		return err
	}
	step, max := c.View.Step, cfg.MaxSteps
	switch {
	case step > max:
		c.EndTurn("max-turns: this turn used its budget of " + strconv.Itoa(max) + " model requests; send a new message to go on")
	case 2*step >= max:
		left := max - step + 1
		c.TopOfMind("Budget: this is request " + strconv.Itoa(step) + " of " + strconv.Itoa(max) + " for this turn (" + strconv.Itoa(left) + " left including this one). Finish soon.")
	}
	return nil
}

package ops

import (
	"fmt"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Prompt contributes its config's text as a prompt part on every step: the
// default pipeline's system prompt (what the model can do and how to
// work), or any fixed instructions a pipeline file wants recorded, like
// every other part, with the op that gave them in the request header.
//
// Config: text (required, at most 64 KiB).
func Prompt() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "prompt",
			Version:      "1.0.0",
			ConfigSchema: strictSchema(`"text":{"type":"string","minLength":1,"maxLength":65536}`, `"required":["text"]`),
		},
		Contribute: promptText,
	}
}

type promptConfig struct {
	Text string `json:"text"`
}

var promptCache configCache[promptConfig]

func parsePrompt(raw []byte) (promptConfig, error) {
	var c promptConfig
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("prompt: %v", err)
	}
	if strings.TrimSpace(c.Text) == "" {
		return c, fmt.Errorf("prompt: text is required: the prompt part this op contributes")
	}
	return c, nil
}

func promptText(c *pdk.Call) error {
	cfg, err := promptCache.get(c.RawConfig(), parsePrompt)
	if err != nil {
		return err
	}
	c.PromptPart(cfg.Text)
	return nil
}

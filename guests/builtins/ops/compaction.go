package ops

import (
	"fmt"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Compaction keeps a long session within its model's context window. The
// host asks it before each model request with the size of the last answer
// (input and output tokens); when that reaches threshold × the model's
// window it asks the host to summarise the older conversation. It always
// does after a request was refused as too long (context_length) and when
// a person types /compact. The host chooses what to summarise and keeps
// every original message in the log.
//
// Config:
//
//	window: N                  the context window in tokens, for every model
//	windows: {MODEL: N, …}     per model (a name, or a prefix ending in *)
//	threshold: 0.8             the share of the window that triggers it
//	instructions: TEXT         what the summary must keep (appended to
//	                           the built-in instructions)
//
// Without a window for the model it uses a table of common models
// (defaultWindows) and, for an unknown model, compacts only after a
// context_length failure or on /compact.
func Compaction() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:    "compaction",
			Version: "1.0.0",
			ConfigSchema: []byte(`{"type":"object","additionalProperties":false,"properties":{` +
				`"window":{"type":"integer","minimum":1},` +
				`"windows":{"type":"object","additionalProperties":{"type":"integer","minimum":1}},` +
				`"threshold":{"type":"number","exclusiveMinimum":0,"maximum":1},` +
				`"instructions":{"type":"string"}}}`),
		},
		Compact: compactDecide,
	}
}

// defaultWindows are the context windows of common models, in tokens,
// matched by prefix in order (the first that matches wins).
var defaultWindows = []struct {
	prefix string
	tokens int
}{
	{"gpt-4.1", 1047576}, {"gpt-5", 400000}, {"gpt-4o", 128000}, {"gpt-4-turbo", 128000}, {"gpt-4", 8192},
	{"gpt-3.5", 16385}, {"o1", 200000}, {"o3", 200000}, {"o4", 200000},
	{"claude", 200000}, {"gemini-1.5", 1000000}, {"gemini", 1000000},
	{"llama3.1", 128000}, {"llama-3.1", 128000}, {"llama3", 8192}, {"qwen2.5", 32768}, {"qwen3", 40960},
	{"mistral", 32768}, {"mixtral", 32768}, {"deepseek", 65536},
}

type compactionConfig struct {
	Window       int            `json:"window"`
	Windows      map[string]int `json:"windows"`
	Threshold    float64        `json:"threshold"`
	Instructions string         `json:"instructions"`
}

var compactionCache configCache[compactionConfig]

func parseCompaction(raw []byte) (compactionConfig, error) {
	c := compactionConfig{Threshold: 0.8}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("compaction: %v", err)
	}
	if c.Threshold <= 0 || c.Threshold > 1 {
		return c, fmt.Errorf("compaction: threshold %v is not in (0, 1]", c.Threshold)
	}
	return c, nil
}

// windowFor returns the model's context window (0: unknown).
func (c *compactionConfig) windowFor(model string) int {
	for pattern, n := range c.Windows {
		if pattern == model || strings.HasSuffix(pattern, "*") && strings.HasPrefix(model, strings.TrimSuffix(pattern, "*")) {
			return n
		}
	}
	if c.Window > 0 {
		return c.Window
	}
	base := model
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:] // "openai/gpt-4o", "library/llama3.1"
	}
	for _, d := range defaultWindows {
		if strings.HasPrefix(base, d.prefix) {
			return d.tokens
		}
	}
	return 0
}

const summaryInstructions = `You are summarising the earlier part of a conversation between a user and an AI assistant that uses tools, so that the assistant can go on without it. Write a summary the assistant will read instead of those messages: what the user wants and asked for, decisions made and why, what was done (tools called, with the facts their results established: names, numbers, file paths, identifiers, errors), what is still open or was promised, and anything the user asked to remember. Be specific and complete; leave out pleasantries. Write it as notes, not as a reply to the user.`

func compactDecide(c *pdk.Call) error {
	cfg, err := compactionCache.get(c.RawConfig(), parseCompaction)
	if err != nil {
		return err
	}
	v := c.View.Compact
	switch v.Reason {
	case "context_length", "command":
	default:
		w := cfg.windowFor(v.Model)
		if w == 0 || float64(v.Tokens) < cfg.Threshold*float64(w) {
			return nil
		}
	}
	text := summaryInstructions
	if cfg.Instructions != "" {
		text += "\n\n" + cfg.Instructions
	}
	if v.Instruction != "" {
		text += "\n\nThe user asks: " + v.Instruction
	}
	c.Emit(hostabi.Effect{Kind: hostabi.KindCompact, Text: text})
	return nil
}

package ops

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// FinalOutput offers a final_output tool whose arguments are the run's
// result: a call that fits the schema is answered with the arguments and
// concludes the turn; one that does not is an error result saying what is
// wrong, so the model can call again.
//
// Config:
//
//	schema: {JSON Schema of an object}   [{"type":"object"}]
//	description: TEXT                   the tool's description
//
// The check covers what scripted runs need: the arguments are an object,
// required properties are present, and properties with a declared type
// (string, number, integer, boolean, array, object) have it.
func FinalOutput() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "final-output",
			Version:      "1.0.0",
			Tools:        []string{"final_output"},
			ConfigSchema: strictSchema(`"schema":{"type":"object"},"description":{"type":"string"}`),
		},
		Contribute: offerFinal,
		Tool:       runFinal,
	}
}

type finalConfig struct {
	Schema      json.RawMessage `json:"schema"`
	Description string          `json:"description"`
	parsed      schema
}

type schema struct {
	Type       string            `json:"type"`
	Required   []string          `json:"required"`
	Properties map[string]schema `json:"properties"`
}

var finalCache configCache[finalConfig]

func parseFinal(raw []byte) (finalConfig, error) {
	var c finalConfig
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("final-output: %v", err)
	}
	if len(c.Schema) == 0 {
		c.Schema = json.RawMessage(`{"type":"object"}`)
	}
	if err := json.Unmarshal(c.Schema, &c.parsed); err != nil {
		return c, fmt.Errorf("final-output: schema: %v", err)
	}
	if c.parsed.Type != "" && c.parsed.Type != "object" {
		return c, fmt.Errorf("final-output: schema type must be object, not %q", c.parsed.Type)
	}
	if c.Description == "" {
		c.Description = "Report your final answer. Call this exactly once, when you are done; its arguments are the result."
	}
	return c, nil
}

func offerFinal(c *pdk.Call) error {
	cfg, err := finalCache.get(c.RawConfig(), parseFinal)
	if err != nil {
		return err
	}
	c.OfferTool(hostabi.ToolSpec{Name: "final_output", Description: cfg.Description, Parameters: cfg.Schema})
	return nil
}

func runFinal(c *pdk.Call) error {
	t := c.View.Tool
	if t.Run == "" {
		return nil
	}
	cfg, err := finalCache.get(c.RawConfig(), parseFinal)
	if err != nil {
		return err
	}
	for _, call := range t.Calls {
		if call.ID != t.Run {
			continue
		}
		if problem := check(cfg.parsed, call.Arguments); problem != "" {
			c.Result(call.ID, "final_output was not accepted: "+problem+". Call it again with arguments that fit its schema.", true)
			return nil
		}
		c.FinalResult(call.ID, string(call.Arguments))
	}
	return nil
}

// check returns what is wrong with args against s, or "".
func check(s schema, args []byte) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return "the arguments are not a JSON object"
	}
	var missing []string
	for _, r := range s.Required {
		if _, ok := obj[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return "missing required " + strings.Join(missing, ", ")
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v, ok := obj[n]
		if !ok || s.Properties[n].Type == "" {
			continue
		}
		if got := jsonType(v); !typeFits(s.Properties[n].Type, got, v) {
			return fmt.Sprintf("%s must be %s, not %s", n, s.Properties[n].Type, got)
		}
	}
	return ""
}

func jsonType(v json.RawMessage) string {
	t := strings.TrimSpace(string(v))
	switch {
	case t == "null":
		return "null"
	case t == "true" || t == "false":
		return "boolean"
	case strings.HasPrefix(t, `"`):
		return "string"
	case strings.HasPrefix(t, "["):
		return "array"
	case strings.HasPrefix(t, "{"):
		return "object"
	}
	return "number"
}

func typeFits(want, got string, v json.RawMessage) bool {
	if want == got {
		return true
	}
	if want == "integer" && got == "number" {
		return !strings.ContainsAny(string(v), ".eE")
	}
	return false
}

// Command policy is an example op built with the guest kit, used by the
// wasm host's tests and benchmarks. It has two hooks:
//
//   - tool: an allow-list approval. Calls to tools on the config's allow
//     list are allowed, calls on its deny list are denied, calls to a tool
//     a person allowed "always" (remembered in a note) are allowed, and
//     anything else is put to a person.
//   - turn-stopping: a stop check. When the last user message asked a
//     question and the model's answer is empty, it steers the turn on once
//     (remembering in a note that it did), reading only the messages it
//     needs however long the conversation is.
//
// Config: {"allow": ["calc_total"], "deny": ["rm"]}.
package main

import (
	"strconv"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

func init() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{
			Name:         "policy",
			Version:      "1.0.0",
			Guard:        true,
			ConfigSchema: []byte(`{"type":"object","properties":{"allow":{"type":"array","items":{"type":"string"}},"deny":{"type":"array","items":{"type":"string"}}}}`),
		},
		Tool:         decide,
		TurnStopping: stopCheck,
	})
}

func main() { pdk.Main() }

// The config is parsed once and kept while it does not change.
var (
	lastConfig  string
	allow, deny []string
)

func decide(c *pdk.Call) error {
	if cfg := c.RawConfig(); string(cfg) != lastConfig {
		a, d, err := parseConfig(cfg)
		if err != nil {
			return err
		}
		lastConfig, allow, deny = string(cfg), a, d
	}
	var ask []string
	for _, call := range c.View.Tool.Calls {
		if call.Decision != "" || call.Requested {
			continue
		}
		switch {
		case has(allow, call.Name):
			c.Decide(call.ID, true, "on the allow list")
		case has(deny, call.Name):
			c.Decide(call.ID, false, "on the deny list")
		default:
			if v, ok := c.Note("always:" + call.Name); ok && v == "allow" {
				c.Decide(call.ID, true, "allowed always")
				continue
			}
			ask = append(ask, call.ID)
		}
	}
	if len(ask) > 0 {
		c.AskApproval("not on the allow list", ask...)
	}
	return nil
}

func parseConfig(cfg []byte) (a, d []string, err error) {
	if raw, ok := hostabi.Field(cfg, "allow"); ok {
		if a, err = hostabi.Strings(raw); err != nil {
			return nil, nil, err
		}
	}
	if raw, ok := hostabi.Field(cfg, "deny"); ok {
		if d, err = hostabi.Strings(raw); err != nil {
			return nil, nil, err
		}
	}
	return a, d, nil
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func stopCheck(c *pdk.Call) error {
	turn := strconv.Itoa(c.View.Turn)
	if v, ok := c.Note("steered"); ok && v == turn {
		return nil // once per turn
	}
	if c.View.Stop == nil || strings.TrimSpace(c.View.Stop.Content) != "" {
		return nil
	}
	// The last user message, looking back a few messages at most.
	for i := c.View.Messages - 1; i >= 0 && i >= c.View.Messages-8; i-- {
		m, ok := c.Message(i)
		if !ok {
			break
		}
		if m.Role == "user" {
			if strings.Contains(m.Content, "?") {
				c.SetNote("steered", turn)
				c.Steer("The user asked a question; answer it.")
			}
			break
		}
	}
	return nil
}

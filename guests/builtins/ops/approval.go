package ops

import (
	"fmt"
	"regexp"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Op is a built-in op.
type Op = pdk.Op

// Approval decides tool calls before they run. It is a guard: if it faults,
// the calls it was deciding are denied.
//
// Config:
//
//	mode:  ask | auto | deny   what happens to a call no rule matches
//	                           (default ask: a person decides)
//	allow: [GLOB, …]           tool names allowed without asking ("calc_*")
//	deny:  [GLOB, …]           tool names always denied
//	ask:   [{tool: GLOB, arg: NAME, match: REGEXP}, …]
//	                           ask a person when the named string argument
//	                           matches (e.g. {tool: shell, arg: command,
//	                           match: "rm |sudo "}); tool defaults to *
//	                           A rule may also match what the tool's source
//	                           says of it (approval_hints.go): server: GLOB,
//	                           destructive, open_world, read_only: true or
//	                           false ({destructive: true} asks before every
//	                           destructive MCP tool)
//
// Calls no op owns are left alone: nothing would run them. Precedence:
// deny, then ask rules, then a remembered "always" decision,
// then allow, then the mode. A person's "always" decision is remembered by
// the host as this op's note "always/TOOL" (allow or deny) and applies to
// later calls of that tool in the session.
func Approval() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:    "approval",
			Version: "1.0.0",
			Guard:   true,
			ConfigSchema: []byte(`{"type":"object","properties":{` +
				`"mode":{"enum":["ask","auto","deny"]},` +
				`"allow":{"type":"array","items":{"type":"string"}},` +
				`"deny":{"type":"array","items":{"type":"string"}},` +
				`"ask":{"type":"array","items":{"type":"object","properties":{"tool":{"type":"string"},"arg":{"type":"string"},"match":{"type":"string"},` + hintsSchema + `}}}}}`),
		},
		Tool: approve,
	}
}

type askRule struct {
	Tool  string `json:"tool"`
	Arg   string `json:"arg"`
	Match string `json:"match"`
	re    *regexp.Regexp
	hintRule
}

type approvalConfig struct {
	Mode  string    `json:"mode"`
	Allow []string  `json:"allow"`
	Deny  []string  `json:"deny"`
	Ask   []askRule `json:"ask"`
}

var approvalCache configCache[approvalConfig]

func parseApproval(raw []byte) (approvalConfig, error) {
	var c approvalConfig
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("approval: %v", err)
	}
	if c.Mode == "" {
		c.Mode = "ask"
	}
	switch c.Mode {
	case "ask", "auto", "deny":
	default:
		return c, fmt.Errorf("approval: mode %q is not ask, auto or deny", c.Mode)
	}
	for i := range c.Ask {
		r := &c.Ask[i]
		if r.Tool == "" {
			r.Tool = "*"
		}
		if r.Match != "" {
			re, err := regexp.Compile(r.Match)
			if err != nil {
				return c, fmt.Errorf("approval: ask rule match %q: %v", r.Match, err)
			}
			r.re = re
		}
	}
	return c, nil
}

func approve(c *pdk.Call) error {
	t := c.View.Tool
	if t.Run != "" {
		return nil
	}
	cfg, err := approvalCache.get(c.RawConfig(), parseApproval)
	if err != nil {
		return err
	}
	var ask []string
	for _, call := range t.Calls {
		if call.Decision != "" || call.Requested || call.Started {
			continue
		}
		if call.Owner == "" {
			// No op runs it: nothing to guard (unknown-tool answers it).
			continue
		}
		verdict, why := judge(c, cfg, &call)
		switch verdict {
		case "allow":
			c.Decide(call.ID, true, why)
		case "deny":
			c.Decide(call.ID, false, why)
		default:
			ask = append(ask, call.ID)
		}
	}
	if len(ask) > 0 {
		c.AskApproval("approval: a person decides these calls", ask...)
	}
	return nil
}

// judge returns allow, deny or ask for one call, and why.
func judge(c *pdk.Call, cfg *approvalConfig, call *hostabi.PendingCall) (string, string) {
	if anyGlob(cfg.Deny, call.Name) {
		return "deny", "on the deny list"
	}
	for _, r := range cfg.Ask {
		if !glob(r.Tool, call.Name) || !r.hintRule.matches(call) {
			continue
		}
		if r.Arg == "" || r.re == nil {
			return "ask", ""
		}
		raw, ok := hostabi.Field(call.Arguments, r.Arg)
		if !ok {
			continue
		}
		s, err := hostabi.String(raw)
		if err != nil {
			s = string(raw)
		}
		if r.re.MatchString(s) {
			return "ask", ""
		}
	}
	if v, ok := c.Note(hostabi.AlwaysNotePrefix + call.Name); ok {
		switch v {
		case "allow":
			return "allow", "allowed always in this session"
		case "deny":
			return "deny", "denied always in this session"
		}
	}
	if anyGlob(cfg.Allow, call.Name) {
		return "allow", "on the allow list"
	}
	switch cfg.Mode {
	case "auto":
		return "allow", "allowed by mode auto"
	case "deny":
		return "deny", "denied by mode deny"
	}
	return "ask", ""
}

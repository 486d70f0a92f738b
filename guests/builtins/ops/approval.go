package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

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
//	mode:  ask | edits | plan | auto | deny
//	                           what happens to a call no rule decides
//	                           (default ask: a person decides; modes.go)
//	allow: [GLOB, …]           tool names allowed without asking ("calc_*")
//	deny:  [GLOB | RULE, …]    calls always denied
//	ask:   [RULE, …]           calls a person decides
//	reads: allow | ask         the built-ins' reads (default allow)
//
// A GLOB's * matches any run of characters. A RULE is {tool: GLOB, arg:
// NAME, match: REGEXP}: tool defaults to * (every tool); with arg and match
// (both or neither) the rule applies to a call of the tool whose argument
// NAME matches REGEXP (Go syntax, unanchored: {tool: shell, arg: command,
// match: "rm |sudo "}), without them to every call of the tool.
//
// Rules fail closed. A rule with arg applies, as if REGEXP had matched,
// to a call of its tool whose arguments do not have the shape it expects:
// arguments that are not a JSON object, NAME missing, NAME given twice,
// NAME given under another case ("Command" for "command": some tools read
// keys without regard to case), or a value of NAME that is not a string
// (a number, a boolean, an array, an object or null). A deny rule then
// denies the call, an ask rule asks. So a rule with arg on tool * asks (or
// denies) every call that lacks the argument: name the tools it is for.
//
// A rule may also match what the tool's source says of it
// (approval_hints.go): server: GLOB, destructive, open_world, read_only:
// true or false ({destructive: true} asks before every destructive MCP
// tool).
//
// The built-ins' read-only tools (files: read_file, list_dir, glob,
// grep; fetch: fetch; skills: load_skill, read_skill_file) are allowed without asking
// unless reads is ask; the pipeline refuses a module that is not a
// built-in but names its op like one, so the owner's name can be trusted
// here. Everything else, writes and commands included, falls to the mode,
// ask by default: reads allowed, writes and commands asked.
//
// Calls no op owns are left alone: nothing would run them. Precedence:
// deny, then plan mode's refusal of what is not read-only, then ask
// rules, then a remembered "always" decision, then allow, then the
// built-ins' reads, then the mode. The mode set at run time (/mode, kept
// as this op's note "mode") wins over the config's. A person's "always" decision is remembered by the host as
// this op's note "always/TOOL" (allow or deny) and applies to later calls
// of that tool in the session. The host checks the config against the
// schema below when the pipeline loads.
func Approval() Op {
	rule := `{"type":"object","additionalProperties":false,` +
		`"properties":{"tool":{"type":"string","minLength":1},"arg":{"type":"string","minLength":1},"match":{"type":"string"},` + hintsSchema + `},` +
		`"dependentRequired":{"arg":["match"],"match":["arg"]}}`
	return Op{
		Manifest: hostabi.Manifest{
			Name:     "approval",
			Version:  "1.2.0",
			Guard:    true,
			Commands: []string{"mode"},
			ConfigSchema: strictSchema(`"mode":{"enum":["ask","edits","plan","auto","deny"]},` +
				`"allow":{"type":"array","items":{"type":"string"}},` +
				`"deny":{"type":"array","items":{"anyOf":[{"type":"string"},` + rule + `]}},` +
				`"ask":{"type":"array","items":` + rule + `},` +
				`"reads":{"enum":["allow","ask"]}`),
		},
		Tool:    approve,
		Command: modeCommand,
	}
}

type rule struct {
	Tool  string `json:"tool"`
	Arg   string `json:"arg"`
	Match string `json:"match"`
	re    *regexp.Regexp
	hintRule
}

// denyEntry is a deny list entry: a tool name glob, or a rule.
type denyEntry struct{ rule }

func (d *denyEntry) UnmarshalJSON(b []byte) error {
	if s, err := hostabi.String(b); err == nil && len(b) > 0 && b[0] == '"' {
		d.Tool = s
		return nil
	}
	type plain rule
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(&d.rule))
}

type approvalConfig struct {
	Mode  string      `json:"mode"`
	Allow []string    `json:"allow"`
	Deny  []denyEntry `json:"deny"`
	Ask   []rule      `json:"ask"`
	Reads string      `json:"reads"`
}

// builtinReads are the built-ins' read-only tools, by the op that owns
// them.
var builtinReads = map[string][]string{
	"files":  {"read_file", "list_dir", "glob", "grep"},
	"fetch":  {"fetch"},
	"skills": {"load_skill", "read_skill_file"},
}

func builtinRead(call *hostabi.PendingCall) bool {
	for _, t := range builtinReads[call.Owner] {
		if t == call.Name {
			return true
		}
	}
	return false
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
	if _, ok := modes[c.Mode]; !ok {
		return c, fmt.Errorf("approval: mode %q is not ask, edits, plan, auto or deny", c.Mode)
	}
	rules := make([]*rule, 0, len(c.Ask)+len(c.Deny))
	for i := range c.Ask {
		rules = append(rules, &c.Ask[i])
	}
	for i := range c.Deny {
		rules = append(rules, &c.Deny[i].rule)
	}
	for _, r := range rules {
		if r.Tool == "" {
			r.Tool = "*"
		}
		if (r.Arg == "") != (r.Match == "") {
			return c, fmt.Errorf("approval: rule for %s: give arg and match together, or neither", r.Tool)
		}
		if r.Match != "" {
			re, err := regexp.Compile(r.Match)
			if err != nil {
				return c, fmt.Errorf("approval: rule match %q: %v", r.Match, err)
			}
			r.re = re
		}
	}
	return c, nil
}

// applies reports whether a rule applies to a call: its tool matches and,
// for a rule on an argument, the argument matches or has a shape the rule
// does not expect (failing closed).
func (r *rule) applies(call *hostabi.PendingCall) bool {
	if !glob(r.Tool, call.Name) || !r.hintRule.matches(call) {
		return false
	}
	if r.re == nil {
		return true
	}
	s, ok := stringArg(call.Arguments, r.Arg)
	return !ok || r.re.MatchString(s)
}

// stringArg returns the string value of key in a call's arguments. It
// reports false for any other shape: arguments that are not one JSON
// object, no such key, the key twice, the key under another case, or a
// value that is not a string.
func stringArg(args []byte, key string) (string, bool) {
	var members []json.RawMessage
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(args))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return "", false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		keys = append(keys, kt.(string))
		members = append(members, v)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false // more after the object
	}
	found := -1
	for i, k := range keys {
		if !strings.EqualFold(k, key) {
			continue
		}
		if k != key || found >= 0 {
			return "", false // another case, or twice
		}
		found = i
	}
	if found < 0 {
		return "", false
	}
	v := bytes.TrimSpace(members[found])
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
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
	for i := range cfg.Deny {
		if r := &cfg.Deny[i].rule; r.applies(call) {
			if r.re != nil {
				return "deny", "a deny rule on argument " + r.Arg + " applies"
			}
			return "deny", "on the deny list"
		}
	}
	mode := currentMode(c, cfg)
	if mode == "plan" && !readOnly(call) {
		return "deny", planRefusal(call)
	}
	for i := range cfg.Ask {
		if cfg.Ask[i].applies(call) {
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
	if cfg.Reads != "ask" && builtinRead(call) {
		return "allow", "a read of the built-in " + call.Owner
	}
	switch mode {
	case "auto":
		return "allow", "allowed by mode auto"
	case "deny":
		return "deny", "denied by mode deny"
	case "edits":
		if isFileEdit(call) {
			return "allow", "allowed by mode edits"
		}
	}
	return "ask", ""
}

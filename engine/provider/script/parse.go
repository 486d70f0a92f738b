package script

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
	"go.yaml.in/yaml/v3"
)

// The script is decoded by walking the YAML node tree by hand rather than
// with yaml struct tags: that is what lets every error name the file, the
// line and the path of the key (replies[2].tool_calls[0].arguments) on one
// line, and refuse unknown and duplicate keys everywhere.

type decoder struct{ name string }

// errAt formats an error at node n.
func (d *decoder) errAt(n *yaml.Node, path, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %s", d.name, n.Line, path, fmt.Sprintf(format, args...))
}

func parse(name string, data []byte) (*Script, error) {
	d := &decoder{name: name}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: the script is empty; write a replies: list (see package script)", name)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s", name, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("%s: the script is empty; write a replies: list (see package script)", name)
	}
	root := doc.Content[0]
	s := &Script{name: name}
	if root.Kind == yaml.SequenceNode {
		replies, err := d.replies(root, "replies", false)
		s.replies = replies
		if err != nil {
			return nil, err
		}
	} else {
		m, err := d.mapping(root, "script", "replies", "rules", "fallback")
		if err != nil {
			return nil, err
		}
		if n := m["replies"]; n != nil {
			if s.replies, err = d.replies(n, "replies", false); err != nil {
				return nil, err
			}
		}
		if n := m["rules"]; n != nil {
			if s.rules, err = d.replies(n, "rules", true); err != nil {
				return nil, err
			}
		}
		if n := m["fallback"]; n != nil {
			if s.fallback, err = d.reply(n, "fallback", false); err != nil {
				return nil, err
			}
		}
	}
	if len(s.replies) == 0 && len(s.rules) == 0 && s.fallback == nil {
		return nil, fmt.Errorf("%s:%d: the script has no replies, rules or fallback; add at least one", name, root.Line)
	}
	return s, nil
}

// mapping checks that n is a mapping with only known, distinct keys and
// returns its values by key.
func (d *decoder) mapping(n *yaml.Node, path string, known ...string) (map[string]*yaml.Node, error) {
	if err := d.noAlias(n, path); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, path, "want a mapping (key: value), got %s", kind(n))
	}
	m := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, d.errAt(k, path, "keys must be plain words")
		}
		if !slices.Contains(known, k.Value) {
			return nil, d.errAt(k, path, "unknown key %q; known keys: %s", k.Value, strings.Join(known, ", "))
		}
		if m[k.Value] != nil {
			return nil, d.errAt(k, path, "key %q given twice", k.Value)
		}
		m[k.Value] = v
	}
	return m, nil
}

func (d *decoder) sequence(n *yaml.Node, path string) ([]*yaml.Node, error) {
	if err := d.noAlias(n, path); err != nil {
		return nil, err
	}
	if n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, path, "want a list, got %s", kind(n))
	}
	return n.Content, nil
}

func (d *decoder) noAlias(n *yaml.Node, path string) error {
	if n.Kind == yaml.AliasNode {
		return d.errAt(n, path, "YAML aliases (*name) are not supported; write the value out")
	}
	return nil
}

func (d *decoder) str(n *yaml.Node, path string) (string, error) {
	if err := d.noAlias(n, path); err != nil {
		return "", err
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", d.errAt(n, path, "want a string, got %s", kind(n))
	}
	return n.Value, nil
}

func (d *decoder) nonEmpty(n *yaml.Node, path string) (string, error) {
	s, err := d.str(n, path)
	if err == nil && s == "" {
		err = d.errAt(n, path, "must not be empty")
	}
	return s, err
}

func (d *decoder) int(n *yaml.Node, path string, lo, hi int) (int, error) {
	if err := d.noAlias(n, path); err != nil {
		return 0, err
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, d.errAt(n, path, "want a whole number, got %s", kind(n))
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil || v < int64(lo) || v > int64(hi) {
		return 0, d.errAt(n, path, "want a number from %d to %d, got %s", lo, hi, n.Value)
	}
	return int(v), nil
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!null":
		return "null"
	case "!!str":
		return strconv.Quote(n.Value)
	}
	return n.Value
}

func (d *decoder) replies(n *yaml.Node, path string, rules bool) ([]*reply, error) {
	items, err := d.sequence(n, path)
	if err != nil {
		return nil, err
	}
	var out []*reply
	for i, it := range items {
		r, err := d.reply(it, fmt.Sprintf("%s[%d]", path, i), rules)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

var replyKeys = []string{"content", "deltas", "delta_delay_ms", "tool_calls", "finish_reason", "usage", "error", "fail_first"}

func (d *decoder) reply(n *yaml.Node, path string, rule bool) (*reply, error) {
	keys := replyKeys
	if rule {
		keys = append([]string{"when"}, replyKeys...)
	}
	m, err := d.mapping(n, path, keys...)
	if err != nil {
		if !rule && n.Kind == yaml.MappingNode && hasKey(n, "when") {
			return nil, d.errAt(n, path, "when is only allowed in rules; replies are used in order, so move this one to rules")
		}
		return nil, err
	}
	r := &reply{line: n.Line}
	if rule {
		if m["when"] == nil {
			return nil, d.errAt(n, path, "a rule needs a when; use replies for answers given in order")
		}
		if r.when, err = d.when(m["when"], path+".when"); err != nil {
			return nil, err
		}
	}
	if v := m["content"]; v != nil {
		c, err := d.str(v, path+".content")
		if err != nil {
			return nil, err
		}
		r.hasContent = true
		if c != "" {
			r.deltas = []string{c}
		}
	}
	if v := m["deltas"]; v != nil {
		if r.hasContent {
			return nil, d.errAt(v, path+".deltas", "give content or deltas, not both")
		}
		items, err := d.sequence(v, path+".deltas")
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			s, err := d.str(it, fmt.Sprintf("%s.deltas[%d]", path, i))
			if err != nil {
				return nil, err
			}
			r.deltas = append(r.deltas, s)
		}
		r.hasContent = true
	}
	if v := m["delta_delay_ms"]; v != nil {
		ms, err := d.int(v, path+".delta_delay_ms", 0, 600_000)
		if err != nil {
			return nil, err
		}
		r.delay = time.Duration(ms) * time.Millisecond
	}
	if v := m["tool_calls"]; v != nil {
		items, err := d.sequence(v, path+".tool_calls")
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			c, err := d.toolCall(it, fmt.Sprintf("%s.tool_calls[%d]", path, i))
			if err != nil {
				return nil, err
			}
			r.toolCalls = append(r.toolCalls, c)
		}
	}
	if v := m["finish_reason"]; v != nil {
		f, err := d.str(v, path+".finish_reason")
		if err != nil {
			return nil, err
		}
		if !slices.Contains([]string{"stop", "length", "tool_calls", "content_filter"}, f) {
			return nil, d.errAt(v, path+".finish_reason", "unknown finish reason %q; use stop, length, tool_calls or content_filter", f)
		}
		r.finish = f
	}
	if v := m["usage"]; v != nil {
		um, err := d.mapping(v, path+".usage", "input_tokens", "output_tokens")
		if err != nil {
			return nil, err
		}
		r.usage = &provider.Usage{}
		if n := um["input_tokens"]; n != nil {
			if r.usage.InputTokens, err = d.int(n, path+".usage.input_tokens", 0, 1<<31-1); err != nil {
				return nil, err
			}
		}
		if n := um["output_tokens"]; n != nil {
			if r.usage.OutputTokens, err = d.int(n, path+".usage.output_tokens", 0, 1<<31-1); err != nil {
				return nil, err
			}
		}
	}
	if v := m["fail_first"]; v != nil {
		items, err := d.sequence(v, path+".fail_first")
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			f, err := d.failure(it, fmt.Sprintf("%s.fail_first[%d]", path, i))
			if err != nil {
				return nil, err
			}
			r.failFirst = append(r.failFirst, f)
		}
	}
	if v := m["error"]; v != nil {
		f, err := d.failure(v, path+".error")
		if err != nil {
			return nil, err
		}
		r.err = &f
		for _, k := range []string{"content", "deltas", "tool_calls", "finish_reason", "usage", "delta_delay_ms", "fail_first"} {
			if m[k] != nil {
				return nil, d.errAt(m[k], path+"."+k, "a reply with error fails every attempt, so %s has no use; drop it (or use fail_first to fail only the first attempts)", k)
			}
		}
	} else if !r.hasContent && len(r.toolCalls) == 0 {
		return nil, d.errAt(n, path, "a reply needs content, deltas, tool_calls or error")
	}
	return r, nil
}

func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func (d *decoder) when(n *yaml.Node, path string) (*when, error) {
	m, err := d.mapping(n, path, "last_user_contains", "last_contains", "after_tool")
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, d.errAt(n, path, "an empty when matches everything; give a condition, or use fallback")
	}
	w := &when{}
	for _, f := range []struct {
		key string
		dst *string
	}{{"last_user_contains", &w.lastUserContains}, {"last_contains", &w.lastContains}, {"after_tool", &w.afterTool}} {
		if v := m[f.key]; v != nil {
			if *f.dst, err = d.nonEmpty(v, path+"."+f.key); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

func (d *decoder) toolCall(n *yaml.Node, path string) (hostabi.ToolCall, error) {
	var c hostabi.ToolCall
	m, err := d.mapping(n, path, "id", "name", "arguments")
	if err != nil {
		return c, err
	}
	if m["name"] == nil {
		return c, d.errAt(n, path, "a tool call needs a name")
	}
	if c.Name, err = d.nonEmpty(m["name"], path+".name"); err != nil {
		return c, err
	}
	if v := m["id"]; v != nil {
		if c.ID, err = d.nonEmpty(v, path+".id"); err != nil {
			return c, err
		}
	}
	c.Arguments = json.RawMessage(`{}`)
	if v := m["arguments"]; v != nil {
		if c.Arguments, err = d.arguments(v, path+".arguments"); err != nil {
			return c, err
		}
	}
	return c, nil
}

// arguments turns a mapping into JSON, or checks a string of JSON text.
func (d *decoder) arguments(n *yaml.Node, path string) (json.RawMessage, error) {
	if err := d.noAlias(n, path); err != nil {
		return nil, err
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		if !json.Valid([]byte(n.Value)) {
			return nil, d.errAt(n, path, "the string is not valid JSON; write a mapping, or JSON text such as '{\"a\": 1}'")
		}
		return json.RawMessage(strings.TrimSpace(n.Value)), nil
	case n.Kind == yaml.MappingNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, d.errAt(n, path, "%v", err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, d.errAt(n, path, "cannot be written as JSON (keys must be strings): %v", err)
		}
		return b, nil
	}
	return nil, d.errAt(n, path, "want a mapping of arguments or a JSON string, got %s", kind(n))
}

func (d *decoder) failure(n *yaml.Node, path string) (hostabi.Failure, error) {
	var f hostabi.Failure
	m, err := d.mapping(n, path, "code", "status", "message", "retry_after_ms")
	if err != nil {
		return f, err
	}
	if m["code"] == nil {
		return f, d.errAt(n, path, "an error needs a code (%s)", strings.Join(codeNames(), ", "))
	}
	code, err := d.str(m["code"], path+".code")
	if err != nil {
		return f, err
	}
	f.Code = hostabi.FailureCode(code)
	if !slices.Contains(failureCodes, f.Code) {
		return f, d.errAt(m["code"], path+".code", "unknown failure code %q; use one of %s", code, strings.Join(codeNames(), ", "))
	}
	if v := m["status"]; v != nil {
		if f.Status, err = d.int(v, path+".status", 100, 599); err != nil {
			return f, err
		}
	}
	if v := m["retry_after_ms"]; v != nil {
		ms, err := d.int(v, path+".retry_after_ms", 0, 1<<31-1)
		if err != nil {
			return f, err
		}
		f.RetryAfter = int64(ms)
	}
	if v := m["message"]; v != nil {
		if f.Message, err = d.str(v, path+".message"); err != nil {
			return f, err
		}
	}
	if f.Message == "" {
		f.Message = fmt.Sprintf("scripted %s failure", f.Code)
	}
	return f, nil
}

// failureCodes are the codes a script may simulate. canceled is not one:
// it comes from the caller's context.
var failureCodes = []hostabi.FailureCode{
	hostabi.FailRateLimit, hostabi.FailQuota, hostabi.FailOverloaded, hostabi.FailServer,
	hostabi.FailTimeout, hostabi.FailTransport, hostabi.FailContextLength, hostabi.FailAuth,
	hostabi.FailBadRequest, hostabi.FailStream,
}

func codeNames() []string {
	var s []string
	for _, c := range failureCodes {
		s = append(s, string(c))
	}
	return s
}

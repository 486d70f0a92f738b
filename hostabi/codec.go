package hostabi

import (
	"errors"
	"fmt"
	"strconv"
)

// The wire codec of ABI v1. Documents are JSON objects whose keys are the
// json tags of the types in this package. Append* writes what
// encoding/json would decode to the same value; Parse* reads views and
// messages (skipping keys it does not know, so a host of a later minor may
// add fields) and effects (refusing keys it does not know, so a guest
// cannot smuggle data the host would drop). See ABI.md, "Encoding".

// AppendView appends v as JSON to dst.
func AppendView(dst []byte, v *View) []byte {
	first := true
	dst = append(dst, '{')
	dst = appendKey(dst, &first, "hook")
	dst = appendString(dst, string(v.Hook))
	dst = appendKey(dst, &first, "session")
	dst = appendString(dst, v.Session)
	dst = appendKey(dst, &first, "op")
	dst = appendString(dst, v.Op)
	dst = appendKey(dst, &first, "turn")
	dst = appendInt(dst, int64(v.Turn))
	dst = appendKey(dst, &first, "step")
	dst = appendInt(dst, int64(v.Step))
	dst = appendKey(dst, &first, "messages")
	dst = appendInt(dst, int64(v.Messages))
	if len(v.Config) > 0 {
		dst = appendKey(dst, &first, "config")
		dst = appendRaw(dst, v.Config)
	}
	if p := v.Prompt; p != nil {
		dst = appendKey(dst, &first, "prompt")
		f := true
		dst = append(dst, '{')
		dst = appendKey(dst, &f, "batch")
		dst = appendInputs(dst, p.Batch)
		dst = append(dst, '}')
	}
	if t := v.Tool; t != nil {
		dst = appendKey(dst, &first, "tool")
		f := true
		dst = append(dst, '{')
		dst = appendKey(dst, &f, "calls")
		if t.Calls == nil {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, '[')
			for i := range t.Calls {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = appendPending(dst, &t.Calls[i])
			}
			dst = append(dst, ']')
		}
		if len(t.Offered) > 0 {
			dst = appendKey(dst, &f, "offered")
			dst = appendStrings(dst, t.Offered)
		}
		if t.Run != "" {
			dst = appendKey(dst, &f, "run")
			dst = appendString(dst, t.Run)
		}
		dst = append(dst, '}')
	}
	if fv := v.Failure; fv != nil {
		dst = appendKey(dst, &first, "failure")
		f := true
		dst = append(dst, '{')
		dst = appendKey(dst, &f, "failure")
		dst = appendFailure(dst, &fv.Failure)
		dst = appendKey(dst, &f, "attempt")
		dst = appendInt(dst, int64(fv.Attempt))
		dst = appendKey(dst, &f, "retries")
		dst = appendInt(dst, int64(fv.Retries))
		dst = append(dst, '}')
	}
	if s := v.Stop; s != nil {
		dst = appendKey(dst, &first, "stop")
		f := true
		dst = append(dst, '{')
		dst = appendKey(dst, &f, "content")
		dst = appendString(dst, s.Content)
		if s.FinishReason != "" {
			dst = appendKey(dst, &f, "finish_reason")
			dst = appendString(dst, s.FinishReason)
		}
		dst = append(dst, '}')
	}
	if c := v.Compact; c != nil {
		dst = appendKey(dst, &first, "compact")
		f := true
		dst = append(dst, '{')
		dst = appendKey(dst, &f, "reason")
		dst = appendString(dst, c.Reason)
		if c.Instruction != "" {
			dst = appendKey(dst, &f, "instruction")
			dst = appendString(dst, c.Instruction)
		}
		if c.Model != "" {
			dst = appendKey(dst, &f, "model")
			dst = appendString(dst, c.Model)
		}
		dst = appendKey(dst, &f, "tokens")
		dst = appendInt(dst, int64(c.Tokens))
		dst = appendKey(dst, &f, "summarized")
		dst = appendInt(dst, int64(c.Summarized))
		dst = append(dst, '}')
	}
	if c := v.Command; c != nil {
		dst = appendKey(dst, &first, "command")
		f := true
		dst = append(dst, '{')
		dst = appendKey(dst, &f, "name")
		dst = appendString(dst, c.Name)
		if c.Args != "" {
			dst = appendKey(dst, &f, "args")
			dst = appendString(dst, c.Args)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendInputs(dst []byte, list []InputMessage) []byte {
	if list == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		f := true
		dst = append(dst, '{')
		dst = appendKey(dst, &f, "id")
		dst = appendString(dst, list[i].ID)
		dst = appendKey(dst, &f, "content")
		dst = appendString(dst, list[i].Content)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendPending(dst []byte, c *PendingCall) []byte {
	f := true
	dst = append(dst, '{')
	dst = appendKey(dst, &f, "id")
	dst = appendString(dst, c.ID)
	dst = appendKey(dst, &f, "name")
	dst = appendString(dst, c.Name)
	dst = appendKey(dst, &f, "arguments")
	dst = appendRaw(dst, c.Arguments)
	if c.Owner != "" {
		dst = appendKey(dst, &f, "owner")
		dst = appendString(dst, c.Owner)
	}
	if c.Server != "" {
		dst = appendKey(dst, &f, "server")
		dst = appendString(dst, c.Server)
	}
	if c.Annotations != nil {
		dst = appendKey(dst, &f, "annotations")
		dst = appendAnnotations(dst, c.Annotations)
	}
	if c.Decision != "" {
		dst = appendKey(dst, &f, "decision")
		dst = appendString(dst, c.Decision)
	}
	if c.Requested {
		dst = appendKey(dst, &f, "requested")
		dst = appendBool(dst, true)
	}
	if c.Started {
		dst = appendKey(dst, &f, "started")
		dst = appendBool(dst, true)
	}
	return append(dst, '}')
}

func appendFailure(dst []byte, fl *Failure) []byte {
	f := true
	dst = append(dst, '{')
	dst = appendKey(dst, &f, "code")
	dst = appendString(dst, string(fl.Code))
	if fl.Status != 0 {
		dst = appendKey(dst, &f, "status")
		dst = appendInt(dst, int64(fl.Status))
	}
	if fl.RetryAfter != 0 {
		dst = appendKey(dst, &f, "retry_after_ms")
		dst = appendInt(dst, fl.RetryAfter)
	}
	if fl.Message != "" {
		dst = appendKey(dst, &f, "message")
		dst = appendString(dst, fl.Message)
	}
	return append(dst, '}')
}

// AppendMessage appends m as JSON to dst.
func AppendMessage(dst []byte, m *Message) []byte {
	f := true
	dst = append(dst, '{')
	dst = appendKey(dst, &f, "role")
	dst = appendString(dst, m.Role)
	if m.ID != "" {
		dst = appendKey(dst, &f, "id")
		dst = appendString(dst, m.ID)
	}
	dst = appendKey(dst, &f, "content")
	dst = appendString(dst, m.Content)
	if len(m.ToolCalls) > 0 {
		dst = appendKey(dst, &f, "tool_calls")
		dst = append(dst, '[')
		for i := range m.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			tc := &m.ToolCalls[i]
			g := true
			dst = append(dst, '{')
			dst = appendKey(dst, &g, "id")
			dst = appendString(dst, tc.ID)
			dst = appendKey(dst, &g, "name")
			dst = appendString(dst, tc.Name)
			dst = appendKey(dst, &g, "arguments")
			dst = appendRaw(dst, tc.Arguments)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if m.CallID != "" {
		dst = appendKey(dst, &f, "call_id")
		dst = appendString(dst, m.CallID)
	}
	if m.IsError {
		dst = appendKey(dst, &f, "is_error")
		dst = appendBool(dst, true)
	}
	return append(dst, '}')
}

// AppendEffect appends e as JSON to dst.
func AppendEffect(dst []byte, e *Effect) []byte {
	// kind comes first, so every other member follows a comma: each key
	// is one append of a constant (in a Go guest an append is a call).
	dst = append(dst, `{"kind":`...)
	dst = appendString(dst, string(e.Kind))
	str := func(member, v string) {
		if v != "" {
			dst = append(dst, member...)
			dst = appendString(dst, v)
		}
	}
	str(`,"key":`, e.Key)
	str(`,"value":`, e.Value)
	str(`,"level":`, e.Level)
	str(`,"text":`, e.Text)
	if len(e.Messages) > 0 {
		dst = append(dst, `,"messages":`...)
		dst = appendInputs(dst, e.Messages)
	}
	if t := e.Tool; t != nil {
		dst = append(dst, `,"tool":`...)
		g := true
		dst = append(dst, '{')
		dst = appendKey(dst, &g, "name")
		dst = appendString(dst, t.Name)
		if t.Description != "" {
			dst = appendKey(dst, &g, "description")
			dst = appendString(dst, t.Description)
		}
		if len(t.Parameters) > 0 {
			dst = appendKey(dst, &g, "parameters")
			dst = appendRaw(dst, t.Parameters)
		}
		if t.Server != "" {
			dst = appendKey(dst, &g, "server")
			dst = appendString(dst, t.Server)
		}
		if t.Annotations != nil {
			dst = appendKey(dst, &g, "annotations")
			dst = appendAnnotations(dst, t.Annotations)
		}
		dst = append(dst, '}')
	}
	str(`,"call_id":`, e.CallID)
	if len(e.CallIDs) > 0 {
		dst = append(dst, `,"call_ids":`...)
		dst = appendStrings(dst, e.CallIDs)
	}
	if e.Allow {
		dst = append(dst, `,"allow":true`...)
	}
	str(`,"scope":`, e.Scope)
	str(`,"content":`, e.Content)
	if e.IsError {
		dst = append(dst, `,"is_error":true`...)
	}
	str(`,"code":`, e.Code)
	if e.ConcludesTurn {
		dst = append(dst, `,"concludes_turn":true`...)
	}
	if e.DelayMS != 0 {
		dst = append(dst, `,"delay_ms":`...)
		dst = appendInt(dst, e.DelayMS)
	}
	return append(dst, '}')
}

// AppendEffects appends list as a JSON array to dst.
func AppendEffects(dst []byte, list []Effect) []byte {
	dst = append(dst, '[')
	for i := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendEffect(dst, &list[i])
	}
	return append(dst, ']')
}

// ParseView decodes a view. Keys it does not know are skipped, so a guest
// keeps working when a later minor adds view fields.
func ParseView(b []byte, v *View) error { return parseViewDoc(&reader{b: b}, v) }

// ParseViewShared is ParseView, except that the view's strings and raw
// values share b's memory instead of being copied: b must not change while
// the view is in use. The guest kit decodes each call's view from a fresh
// buffer this way, which saves an allocation per string.
func ParseViewShared(b []byte, v *View) error { return parseViewDoc(&reader{b: b, alias: true}, v) }

func parseViewDoc(d *reader, v *View) error {
	*v = View{}
	ok, err := d.object()
	if err != nil {
		return err
	}
	if ok {
		if err := parseView(d, v); err != nil {
			return err
		}
	}
	return d.end()
}

func parseView(d *reader, v *View) error {
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil || !more {
			return err
		}
		var n int64
		switch string(key) {
		case "hook":
			var s string
			s, err = d.str()
			v.Hook = Hook(s)
		case "session":
			v.Session, err = d.str()
		case "op":
			v.Op, err = d.str()
		case "turn":
			n, err = d.int(strconv.IntSize)
			v.Turn = toInt(n)
		case "step":
			n, err = d.int(strconv.IntSize)
			v.Step = toInt(n)
		case "messages":
			n, err = d.int(strconv.IntSize)
			v.Messages = toInt(n)
		case "config":
			v.Config, err = d.raw()
		case "prompt":
			v.Prompt, err = parsePrompt(d)
		case "tool":
			v.Tool, err = parseToolView(d)
		case "failure":
			v.Failure, err = parseFailureView(d)
		case "stop":
			v.Stop, err = parseStop(d)
		case "command":
			v.Command, err = parseCommand(d)
		case "compact":
			v.Compact, err = parseCompact(d)
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return err
		}
	}
}

func parseCompact(d *reader) (*CompactView, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	c := &CompactView{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return c, nil
		}
		var n int64
		switch string(key) {
		case "reason":
			c.Reason, err = d.str()
		case "instruction":
			c.Instruction, err = d.str()
		case "model":
			c.Model, err = d.str()
		case "tokens":
			n, err = d.int(strconv.IntSize)
			c.Tokens = toInt(n)
		case "summarized":
			n, err = d.int(strconv.IntSize)
			c.Summarized = toInt(n)
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
}

func parsePrompt(d *reader) (*PromptView, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	p := &PromptView{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return p, nil
		}
		if string(key) == "batch" {
			p.Batch, err = parseInputs(d, false)
		} else {
			_, err = d.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
}

func parseInputs(d *reader, strict bool) ([]InputMessage, error) {
	ok, err := d.array()
	if err != nil || !ok {
		return nil, err
	}
	out := []InputMessage{}
	first := true
	for {
		more, err := d.elem(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		var m InputMessage
		ok, err := d.object()
		if err != nil {
			return nil, err
		}
		f := true
		for ok {
			key, more, err := d.key(&f)
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
			switch string(key) {
			case "id":
				m.ID, err = d.str()
			case "content":
				m.Content, err = d.str()
			default:
				if strict {
					return nil, d.errorf("unknown field %q", key)
				}
				_, err = d.skip(0)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, m)
	}
}

// toolViewCalls is a tool view with room for its first calls, allocated
// at once: in a Go guest every allocation costs (see RATIONALE.md).
type toolViewCalls struct {
	ToolView
	calls [4]PendingCall
}

func parseToolView(d *reader) (*ToolView, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	tc := &toolViewCalls{}
	t := &tc.ToolView
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return t, nil
		}
		switch string(key) {
		case "calls":
			t.Calls, err = parseCalls(d, tc.calls[:0])
		case "offered":
			t.Offered, err = d.strings()
		case "run":
			t.Run, err = d.str()
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
}

// parseCalls appends to out, which is empty.
func parseCalls(d *reader, out []PendingCall) ([]PendingCall, error) {
	ok, err := d.array()
	if err != nil || !ok {
		return nil, err
	}
	first := true
	for {
		more, err := d.elem(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		var c PendingCall
		ok, err := d.object()
		if err != nil {
			return nil, err
		}
		f := true
		for ok {
			key, more, err := d.key(&f)
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
			switch string(key) {
			case "id":
				c.ID, err = d.str()
			case "name":
				c.Name, err = d.str()
			case "arguments":
				c.Arguments, err = d.raw()
			case "owner":
				c.Owner, err = d.str()
			case "server":
				c.Server, err = d.str()
			case "annotations":
				c.Annotations, err = parseAnnotations(d, false)
			case "decision":
				c.Decision, err = d.str()
			case "requested":
				c.Requested, err = d.bool()
			case "started":
				c.Started, err = d.bool()
			default:
				_, err = d.skip(0)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, c)
	}
}

func parseFailureView(d *reader) (*FailureView, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	fv := &FailureView{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return fv, nil
		}
		var n int64
		switch string(key) {
		case "failure":
			err = parseFailure(d, &fv.Failure)
		case "attempt":
			n, err = d.int(strconv.IntSize)
			fv.Attempt = toInt(n)
		case "retries":
			n, err = d.int(strconv.IntSize)
			fv.Retries = toInt(n)
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
}

func parseFailure(d *reader, fl *Failure) error {
	ok, err := d.object()
	if err != nil || !ok {
		return err
	}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil || !more {
			return err
		}
		var n int64
		switch string(key) {
		case "code":
			var s string
			s, err = d.str()
			fl.Code = FailureCode(s)
		case "status":
			n, err = d.int(strconv.IntSize)
			fl.Status = toInt(n)
		case "retry_after_ms":
			fl.RetryAfter, err = d.int(64)
		case "message":
			fl.Message, err = d.str()
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return err
		}
	}
}

func parseStop(d *reader) (*StopView, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	s := &StopView{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return s, nil
		}
		switch string(key) {
		case "content":
			s.Content, err = d.str()
		case "finish_reason":
			s.FinishReason, err = d.str()
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
}

func parseCommand(d *reader) (*CommandView, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	c := &CommandView{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return c, nil
		}
		switch string(key) {
		case "name":
			c.Name, err = d.str()
		case "args":
			c.Args, err = d.str()
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
}

// ParseMessage decodes a message. Keys it does not know are skipped.
func ParseMessage(b []byte, m *Message) error { return parseMessageDoc(&reader{b: b}, m) }

// ParseMessageShared is ParseMessage with the message's strings and raw
// values sharing b's memory (see ParseViewShared).
func ParseMessageShared(b []byte, m *Message) error {
	return parseMessageDoc(&reader{b: b, alias: true}, m)
}

func parseMessageDoc(d *reader, m *Message) error {
	*m = Message{}
	ok, err := d.object()
	if err != nil {
		return err
	}
	first := true
	for ok {
		key, more, err := d.key(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch string(key) {
		case "role":
			m.Role, err = d.str()
		case "id":
			m.ID, err = d.str()
		case "content":
			m.Content, err = d.str()
		case "tool_calls":
			m.ToolCalls, err = parseToolCalls(d)
		case "call_id":
			m.CallID, err = d.str()
		case "is_error":
			m.IsError, err = d.bool()
		default:
			_, err = d.skip(0)
		}
		if err != nil {
			return err
		}
	}
	return d.end()
}

func parseToolCalls(d *reader) ([]ToolCall, error) {
	ok, err := d.array()
	if err != nil || !ok {
		return nil, err
	}
	out := []ToolCall{}
	first := true
	for {
		more, err := d.elem(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		var c ToolCall
		ok, err := d.object()
		if err != nil {
			return nil, err
		}
		f := true
		for ok {
			key, more, err := d.key(&f)
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
			switch string(key) {
			case "id":
				c.ID, err = d.str()
			case "name":
				c.Name, err = d.str()
			case "arguments":
				c.Arguments, err = d.raw()
			default:
				_, err = d.skip(0)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, c)
	}
}

// ParseEffects decodes a guest's output, a JSON array of effects, and
// appends them to dst. It is the host's only effect decoder: keys must
// match exactly (no case folding), unknown keys are refused, and empty
// input and null give no effects. It does not Check the effects.
func ParseEffects(dst []Effect, b []byte) ([]Effect, error) {
	return ParseEffectsLimit(dst, b, -1)
}

// ErrTooManyEffects is returned by ParseEffectsLimit when the list has
// more effects than allowed.
var ErrTooManyEffects = errors.New("too many effects")

// ParseEffectsLimit is ParseEffects for guest output: it stops, with
// ErrTooManyEffects, as soon as dst would hold more than max effects (a
// negative max is no limit), so that a flood of small effects costs no more
// memory than the limit allows, and it refuses nesting deeper than
// MaxEffectDepth. On an error the effects decoded so far are returned with
// it.
func ParseEffectsLimit(dst []Effect, b []byte, max int) ([]Effect, error) {
	d := &reader{b: b, depth: MaxEffectDepth}
	if d.ws(); d.i == len(d.b) {
		return dst, nil
	}
	ok, err := d.array()
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrEffect, err)
	}
	first := true
	for ok {
		more, err := d.elem(&first)
		if err != nil {
			return dst, fmt.Errorf("%w: %v", ErrEffect, err)
		}
		if !more {
			break
		}
		if max >= 0 && len(dst) >= max {
			return dst, fmt.Errorf("%w: more than %d", ErrTooManyEffects, max)
		}
		dst = append(dst, Effect{})
		if err := parseEffect(d, &dst[len(dst)-1]); err != nil {
			return dst, fmt.Errorf("%w: effect %d: %v", ErrEffect, len(dst)-1, err)
		}
	}
	if err := d.end(); err != nil {
		return dst, fmt.Errorf("%w: %v", ErrEffect, err)
	}
	return dst, nil
}

func parseEffect(d *reader, e *Effect) error {
	ok, err := d.object()
	if err != nil {
		return err
	}
	first := true
	for ok {
		key, more, err := d.key(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch string(key) {
		case "kind":
			var s string
			s, err = d.known()
			e.Kind = Kind(s)
		case "key":
			e.Key, err = d.str()
		case "value":
			e.Value, err = d.str()
		case "level":
			e.Level, err = d.str()
		case "text":
			e.Text, err = d.str()
		case "messages":
			e.Messages, err = parseInputs(d, true)
		case "tool":
			e.Tool, err = parseToolSpec(d, e.Tool)
		case "call_id":
			e.CallID, err = d.str()
		case "call_ids":
			e.CallIDs, err = d.strings()
		case "allow":
			e.Allow, err = d.bool()
		case "scope":
			e.Scope, err = d.known()
		case "content":
			e.Content, err = d.str()
		case "is_error":
			e.IsError, err = d.bool()
		case "code":
			e.Code, err = d.str()
		case "concludes_turn":
			e.ConcludesTurn, err = d.bool()
		case "delay_ms":
			e.DelayMS, err = d.int(64)
		default:
			return d.errorf("unknown field %q", key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// known reads a string as str does, without copying it when it is one of
// the values effects repeat (kinds and scopes): the host decodes every
// effect of every call, and these are most of its strings.
func (d *reader) known() (string, error) {
	if d.peek() == '"' {
		if j := plain(d.b, d.i+1); j < len(d.b) && d.b[j] == '"' {
			if s := knownString(d.b[d.i+1 : j]); s != "" {
				d.i = j + 1
				return s, nil
			}
		}
	}
	return d.str()
}

// knownStrings maps each effect kind and scope to itself; looking a
// []byte up in it allocates nothing.
var knownStrings = func() map[string]string {
	m := map[string]string{ScopeOnce: ScopeOnce, ScopeAlways: ScopeAlways}
	for k := range allowed {
		m[string(k)] = string(k)
	}
	return m
}()

func knownString(b []byte) string { return knownStrings[string(b)] }

// parseToolSpec decodes into prev when a duplicate key already set it, as
// encoding/json does.
func parseToolSpec(d *reader, prev *ToolSpec) (*ToolSpec, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	t := prev
	if t == nil {
		t = &ToolSpec{}
	}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return t, nil
		}
		switch string(key) {
		case "name":
			t.Name, err = d.str()
		case "description":
			t.Description, err = d.str()
		case "parameters":
			t.Parameters, err = d.raw()
		case "server":
			t.Server, err = d.str()
		case "annotations":
			t.Annotations, err = parseAnnotations(d, true)
		default:
			return nil, d.errorf("unknown field %q", key)
		}
		if err != nil {
			return nil, err
		}
	}
}

func appendAnnotations(dst []byte, a *ToolAnnotations) []byte {
	f := true
	dst = append(dst, '{')
	for _, kv := range [...]struct {
		k string
		v bool
	}{{"read_only", a.ReadOnly}, {"destructive", a.Destructive}, {"idempotent", a.Idempotent}, {"open_world", a.OpenWorld}} {
		if kv.v {
			dst = appendKey(dst, &f, kv.k)
			dst = appendBool(dst, true)
		}
	}
	return append(dst, '}')
}

// parseAnnotations reads tool annotations; strict (in effects) refuses
// keys it does not know, as every effect field does.
func parseAnnotations(d *reader, strict bool) (*ToolAnnotations, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	a := &ToolAnnotations{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return a, nil
		}
		switch string(key) {
		case "read_only":
			a.ReadOnly, err = d.bool()
		case "destructive":
			a.Destructive, err = d.bool()
		case "idempotent":
			a.Idempotent, err = d.bool()
		case "open_world":
			a.OpenWorld, err = d.bool()
		default:
			if strict {
				return nil, d.errorf("unknown field %q", key)
			}
			_, err = d.skip(0)
		}
		if err != nil {
			return nil, err
		}
	}
}

package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
)

// Calls whose arguments do not fit their tool's parameters, or that the
// owner's grants would refuse, are answered by the host before any guard
// sees them: a person is never asked to approve a call that cannot run,
// and the model reads at once what is wrong (the edit_file with wrong
// argument names, approved, then refused by its op; the shell command no
// grant allows, approved, then refused by the host). A schema the checker
// cannot compile (a draft or reference it does not take) checks nothing:
// the owner still judges the call.

// argSchemas caches compiled parameter schemas by their bytes (nil: not
// checkable), for the whole process: tools repeat from step to step. An op
// may contribute a new schema every step (a list of the files there now),
// so the cache is bounded: past argSchemaBytes of schemas it starts over.
var argSchemas struct {
	sync.Mutex
	m     map[string]*jsonschema.Schema
	bytes int
}

// argSchemaBytes bounds the schemas argSchemas keeps, by their size.
const argSchemaBytes = 8 << 20

type noSchemaLoader struct{}

func (noSchemaLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("tool schemas are checked only when self-contained: %s is not loaded", u)
}

func argSchema(params json.RawMessage) *jsonschema.Schema {
	key := string(params)
	argSchemas.Lock()
	sch, ok := argSchemas.m[key]
	argSchemas.Unlock()
	if ok {
		return sch
	}
	if jsonDepth(params) > maxSchemaDepth {
		// Compiling costs the square of the nesting (minutes at a few
		// thousand levels): a schema that deep is not checked.
	} else if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params)); err == nil {
		c := jsonschema.NewCompiler()
		c.UseLoader(noSchemaLoader{})
		if c.AddResource("tool.json", doc) == nil {
			sch, _ = c.Compile("tool.json")
		}
	}
	argSchemas.Lock()
	defer argSchemas.Unlock()
	if _, ok := argSchemas.m[key]; !ok {
		if argSchemas.m == nil || argSchemas.bytes+len(key) > argSchemaBytes {
			argSchemas.m, argSchemas.bytes = map[string]*jsonschema.Schema{}, 0
		}
		argSchemas.m[key] = sch
		argSchemas.bytes += len(key)
	}
	return sch
}

// maxSchemaDepth is the deepest nesting of a schema that is checked.
const maxSchemaDepth = 64

// jsonDepth is how deeply arrays and objects nest in b.
func jsonDepth(b []byte) int {
	depth, most, str, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case str:
			esc, str = c == '\\', c != '"'
		case c == '"':
			str = true
		case c == '{' || c == '[':
			depth++
			most = max(most, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return most
}

// argumentsError says, in one line, why args do not fit params; nil when
// they do or the schema cannot be checked.
func argumentsError(params, args json.RawMessage) error {
	if len(bytes.TrimSpace(params)) == 0 {
		return nil
	}
	sch := argSchema(params)
	if sch == nil {
		return nil
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("the arguments are not JSON: %v", err)
	}
	err = sch.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	// The library's text: a first line naming the schema, then one
	// "- at 'PATH': WHAT" line per failure.
	var why []string
	for _, l := range strings.Split(ve.Error(), "\n")[1:] {
		if l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-")); l != "" {
			why = append(why, l)
		}
	}
	if len(why) == 0 {
		why = []string{"they do not fit the tool's parameters"}
	}
	return errors.New(strings.Join(why, "; "))
}

// cannotRun answers, as the host, the pending calls no guard has seen that
// cannot run: arguments that do not fit their tool's parameters
// (TOOL_BAD_ARGUMENTS), or that the owner's grants would refuse, as its
// host tells (GrantChecker; TOOL_NOT_GRANTED). It reports whether it
// answered any.
func (m *Machine) cannotRun(mv *move, pending []*event.CallState) bool {
	h := m.st.Header
	if h == nil {
		return false
	}
	answered := false
	for _, c := range pending {
		if c.Owner == "" || c.Started || len(c.Verdicts) > 0 || len(c.Asked) > 0 {
			continue
		}
		t := h.Tool(c.Name)
		if t == nil {
			continue
		}
		if why := twiceSaid(c.Arguments); why != "" {
			mv.add(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Code: hostabi.CodeBadArguments, Op: event.HostOp,
				Content: clipArgs(fmt.Sprintf("the call was not run: its arguments %s, and a tool may read one where a person read the other; call %s again with each argument once", why, c.Name))})
			answered = true
			continue
		}
		if err := argumentsError(t.Parameters, c.Arguments); err != nil {
			mv.add(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Code: hostabi.CodeBadArguments, Op: event.HostOp,
				Content: clipArgs(fmt.Sprintf("the call was not run: its arguments do not fit the parameters of %s: %v; call it again with arguments that do", c.Name, err))})
			answered = true
			continue
		}
		if op, _, ok := m.cfg.Pipeline.Lookup(c.Owner); ok {
			if g, ok := op.(GrantChecker); ok {
				if err := g.CheckGrants(c.Name, c.Arguments); err != nil {
					mv.add(event.EvToolResult, event.ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Code: hostabi.CodeNotGranted, Op: event.HostOp,
						Content: clipArgs(fmt.Sprintf("the call was not run: its op's grants do not allow it: %v", err))})
					answered = true
				}
			}
		}
	}
	return answered
}

// twiceSaid says how args name one thing twice: a key given twice in one
// object (after unescaping), or two top-level keys that differ only in
// case, as Go's encoding/json folds them (a Go tool that decodes into a
// struct reads them as one); "" when they do not. Decoders keep the last
// of two, a person reading the arguments the first: what was approved
// would not be what runs. Nested keys may differ in case (environment
// variables, headers by their spelling). The walk's depth is bounded by
// the JSON's (arguments are valid JSON, which Go's encoding/json takes
// only up to 10000 levels deep).
func twiceSaid(args json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(args))
	var walk func(depth int) string
	walk = func(depth int) string {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			folded := map[string]string{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return ""
				}
				k, _ := kt.(string)
				if seen[k] {
					return fmt.Sprintf("give %q twice", k)
				}
				seen[k] = true
				if depth == 0 {
					f := foldKey(k)
					if other, ok := folded[f]; ok {
						return fmt.Sprintf("give %q and %q, one key twice to a tool that reads keys without regard to case", other, k)
					}
					folded[f] = k
				}
				if why := walk(depth + 1); why != "" {
					return why
				}
			}
			dec.Token() // '}'
		case json.Delim('['):
			for dec.More() {
				if why := walk(depth + 1); why != "" {
					return why
				}
			}
			dec.Token() // ']'
		}
		return ""
	}
	return walk(0)
}

// foldKey folds a key's case as encoding/json matches keys to struct
// fields (so "ſtatus" is "status", the Kelvin sign a K).
func foldKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
	}
	return b.String()
}

// clipArgs bounds the host's message about arguments to 2 KiB.
func clipArgs(s string) string {
	if len(s) <= 2048 {
		return s
	}
	return s[:2048] + " …"
}

package wasmhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Config schemas (hostabi/ABI.md §2). A manifest's config_schema is
// compiled when the module loads, and NewOp checks an op's config against
// it, so that a typo in a pipeline file is one line at load, before any
// session is touched, instead of a fault at every call.
//
// The schema comes from the module, which the host does not trust, so it
// is self-contained: the compiler loads nothing (a $ref to a file or URL
// would have it read one), and references are refused outright, because a
// schema of a few kilobytes whose references fan out can take the host
// exponential time to check (a tree without them is checked in time
// proportional to its size).

// configSchema is a compiled config_schema.
type configSchema struct {
	sch *jsonschema.Schema
	doc any // the schema as decoded, to name the keys it knows
}

// schemaURL names every config schema; nothing is ever loaded from it.
const schemaURL = "urn:wagent:config-schema"

type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("config schemas must be self-contained: %s is not loaded", u)
}

// compileConfigSchema compiles a manifest's config_schema (nil for none).
func compileConfigSchema(raw json.RawMessage) (*configSchema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("config_schema is not JSON: %v", err)
	}
	if kw := findRef(doc); kw != "" {
		return nil, fmt.Errorf("config_schema uses %s; the host checks configs only against self-contained schemas", kw)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("config_schema: %v", firstLine(err.Error()))
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("config_schema is not a valid JSON Schema: %s", schemaError(err))
	}
	return &configSchema{sch: sch, doc: doc}, nil
}

// findRef returns the first reference keyword in a schema document.
func findRef(v any) string {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
			if _, ok := x[k]; ok {
				return k
			}
		}
		for _, e := range x {
			if kw := findRef(e); kw != "" {
				return kw
			}
		}
	case []any:
		for _, e := range x {
			if kw := findRef(e); kw != "" {
				return kw
			}
		}
	}
	return ""
}

// check checks a config (empty: none, checked as {}) and says in one line
// what is wrong with it.
func (c *configSchema) check(config json.RawMessage) error {
	if c == nil {
		return nil
	}
	if len(bytes.TrimSpace(config)) == 0 {
		config = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(config))
	if err != nil {
		return fmt.Errorf("config is not JSON: %v", err)
	}
	err = c.sch.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("config: %s", c.explain(ve))
}

var printer = message.NewPrinter(language.English)

// explain turns a validation error into one line: the first failure, with
// where it is in the config and, for an unknown key, the keys known there.
func (c *configSchema) explain(ve *jsonschema.ValidationError) string {
	leaf := ve
	for len(leaf.Causes) > 0 {
		if _, ok := leaf.ErrorKind.(*kind.AnyOf); ok && allRequired(leaf) {
			var keys []string
			for _, cause := range leaf.Causes {
				keys = append(keys, cause.ErrorKind.(*kind.Required).Missing...)
			}
			return fmt.Sprintf("%sneeds %s", where(leaf), orList(keys))
		}
		leaf = leaf.Causes[0]
	}
	switch k := leaf.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		keys := make([]string, len(k.Properties))
		for i, p := range k.Properties {
			keys[i] = strconv.Quote(p)
		}
		noun := "key"
		if len(keys) > 1 {
			noun = "keys"
		}
		msg := fmt.Sprintf("%sunknown %s %s", where(leaf), noun, strings.Join(keys, ", "))
		if known := c.knownKeys(leaf.SchemaURL); len(known) > 0 {
			msg += " (known keys: " + strings.Join(known, ", ") + ")"
		}
		return msg
	case *kind.Required:
		return fmt.Sprintf("%sneeds %s", where(leaf), orList(k.Missing))
	case *kind.Minimum:
		return fmt.Sprintf("%s%s is less than the minimum of %s", where(leaf), ratText(k.Got), ratText(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("%s%s is more than the maximum of %s", where(leaf), ratText(k.Got), ratText(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s%s must be more than %s", where(leaf), ratText(k.Got), ratText(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s%s must be less than %s", where(leaf), ratText(k.Got), ratText(k.Want))
	}
	return where(leaf) + firstLine(leaf.ErrorKind.LocalizedString(printer))
}

// ratText writes a number as a person would: 86400000, 0.5.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func allRequired(ve *jsonschema.ValidationError) bool {
	for _, c := range ve.Causes {
		if _, ok := c.ErrorKind.(*kind.Required); !ok || len(c.Causes) > 0 {
			return false
		}
	}
	return len(ve.Causes) > 0
}

func orList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// where names a place in the config, "" for the top.
func where(ve *jsonschema.ValidationError) string {
	if len(ve.InstanceLocation) == 0 {
		return ""
	}
	return "at /" + strings.Join(ve.InstanceLocation, "/") + ": "
}

// knownKeys lists the properties of the schema at a schema URL (the
// subschema whose additionalProperties refused a key).
func (c *configSchema) knownKeys(loc string) []string {
	_, frag, _ := strings.Cut(loc, "#")
	node := c.doc
	if frag != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			if t, err := url.PathUnescape(tok); err == nil {
				tok = t
			}
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch x := node.(type) {
			case map[string]any:
				node = x[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return nil
				}
				node = x[i]
			default:
				return nil
			}
		}
	}
	obj, _ := node.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	var keys []string
	for k := range props {
		if !strings.HasPrefix(k, "_") { // test switches (the built-ins' _fault)
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// schemaError is the first line of a schema compilation error.
func schemaError(err error) string {
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			leaf := ve
			for len(leaf.Causes) > 0 {
				leaf = leaf.Causes[0]
			}
			return where(leaf) + firstLine(leaf.ErrorKind.LocalizedString(printer))
		}
	}
	return firstLine(err.Error())
}

package pdk

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/wagent/wagent/hostabi"
)

// Object is implemented by a pointer to a type the kit decodes from a JSON
// object without reflection: a tool's arguments (see Tool) or an op's
// config (see Call.Config). Fields names each key and the field it goes
// to:
//
//	type addArgs struct{ Value float64 }
//
//	func (a *addArgs) Fields(f *pdk.Fields) {
//		f.Float("value", &a.Value).Required().Describe("the number to add")
//	}
//
// Decoding is strict: a key Fields does not name, a value of the wrong
// JSON type or a missing required key is an error naming the key, so a
// model that misspells an argument, or a pipeline with a typo in a config,
// hears about it. A key that is absent or null leaves its field as it was,
// so defaults are set before decoding. The kit also derives a tool's JSON
// Schema from Fields when its ToolSpec has no Parameters.
type Object interface {
	Fields(f *Fields)
}

// Fields is the list of keys an Object declares. Each method adds one key
// and returns it as a Field, to mark it required or describe it.
type Fields struct {
	list []field
}

type kind uint8

const (
	kString kind = iota + 1
	kInt
	kFloat
	kBool
	kStrings
	kRaw
	kObject
)

type field struct {
	name     string
	kind     kind
	ptr      any // *string, *int, *float64, *bool, *[]string, *[]byte or an Object
	required bool
	doc      string
	enum     []string
	seen     bool // decoding: the key was given
}

// Field is one key of an Object, as Fields added it.
type Field struct {
	f *Fields
	i int
}

func (fs *Fields) add(name string, k kind, p any) Field {
	fs.list = append(fs.list, field{name: name, kind: k, ptr: p})
	return Field{fs, len(fs.list) - 1}
}

// String declares a key whose value is a JSON string.
func (fs *Fields) String(name string, p *string) Field { return fs.add(name, kString, p) }

// Int declares a key whose value is a JSON integer (no fraction).
func (fs *Fields) Int(name string, p *int) Field { return fs.add(name, kInt, p) }

// Float declares a key whose value is a JSON number.
func (fs *Fields) Float(name string, p *float64) Field { return fs.add(name, kFloat, p) }

// Bool declares a key whose value is true or false.
func (fs *Fields) Bool(name string, p *bool) Field { return fs.add(name, kBool, p) }

// Strings declares a key whose value is an array of strings.
func (fs *Fields) Strings(name string, p *[]string) Field { return fs.add(name, kStrings, p) }

// Raw declares a key whose value may be any JSON; it is kept as it is
// (a copy), for values the op decodes itself.
func (fs *Fields) Raw(name string, p *[]byte) Field { return fs.add(name, kRaw, p) }

// Object declares a key whose value is a JSON object, decoded into p by
// its own Fields.
func (fs *Fields) Object(name string, p Object) Field { return fs.add(name, kObject, p) }

// Required makes the key required: decoding fails when it is absent or
// null.
func (x Field) Required() Field { x.f.list[x.i].required = true; return x }

// Describe sets the key's description in the derived JSON Schema (the
// model reads it).
func (x Field) Describe(text string) Field { x.f.list[x.i].doc = text; return x }

// OneOf limits a String key to the given values.
func (x Field) OneOf(values ...string) Field { x.f.list[x.i].enum = values; return x }

// scratch recycles the field lists of decodeObject: a tool call costs no
// allocation for them (a guest serves one call at a time; native tests
// may run in parallel, hence a pool).
var scratch = sync.Pool{New: func() any { return new(Fields) }}

// decodeObject decodes doc into v. noun names a key in messages
// ("argument", "config key"); every problem found is listed.
func decodeObject(doc []byte, v Object, noun string) error {
	fs := scratch.Get().(*Fields)
	fs.list = fs.list[:0]
	defer func() {
		clear(fs.list) // drop the pointers into v
		scratch.Put(fs)
	}()
	v.Fields(fs)
	doc = trimSpace(doc)
	if len(doc) == 0 {
		doc = []byte("null")
	}
	if c := doc[0]; c != '{' && c != 'n' {
		return errors.New("want a JSON object, not " + jsonType(doc))
	}
	var problems []string
	err := hostabi.Members(doc, func(key, val []byte) error {
		if p := fs.member(key, val, noun); p != "" {
			problems = append(problems, p)
		}
		return nil
	})
	if err != nil {
		return errors.New("not valid JSON: " + err.Error())
	}
	for i := range fs.list {
		if fs.list[i].required && !fs.list[i].seen {
			problems = fs.missing(problems, i, noun)
		}
	}
	if len(problems) > 0 {
		return joined(problems)
	}
	return nil
}

// The messages are built out of line, in functions of their own: a
// guest's Go stack is grown (copied) at each call that needs more of it,
// so the decoding path keeps its frames small.

//go:noinline
func (fs *Fields) missing(problems []string, i int, noun string) []string {
	return append(problems, "missing required "+noun+" "+strconv.Quote(fs.list[i].name))
}

//go:noinline
func (fs *Fields) unknown(key []byte, noun string) string {
	return "unknown " + noun + " " + strconv.Quote(string(key)) + " (" + fs.names() + ")"
}

//go:noinline
func (f *field) wrong(noun, problem string) string {
	return noun + " " + strconv.Quote(f.name) + " " + problem
}

//go:noinline
func joined(problems []string) error { return errors.New(strings.Join(problems, "; ")) }

// member decodes one member into its field; it returns what is wrong, or
// "".
func (fs *Fields) member(key, val []byte, noun string) string {
	i := fs.index(key)
	if i < 0 {
		return fs.unknown(key, noun)
	}
	if string(val) == "null" {
		return ""
	}
	f := &fs.list[i]
	f.seen = true
	if p := f.set(val); p != "" {
		return f.wrong(noun, p)
	}
	return ""
}

func (fs *Fields) index(key []byte) int {
	for i := range fs.list {
		if fs.list[i].name == string(key) {
			return i
		}
	}
	return -1
}

func (fs *Fields) names() string {
	if len(fs.list) == 0 {
		return "there are none"
	}
	s := make([]string, len(fs.list))
	for i, f := range fs.list {
		s[i] = f.name
	}
	return "the keys are " + strings.Join(s, ", ")
}

// set decodes val into the field; it returns what is wrong, or "".
func (f *field) set(val []byte) string {
	want := func(what string) string { return "must be " + what + ", not " + jsonType(val) }
	switch p := f.ptr.(type) {
	case *string:
		if val[0] != '"' {
			return want("a string")
		}
		s, err := hostabi.String(val)
		if err != nil {
			return "is not a valid string"
		}
		if len(f.enum) > 0 && !has(f.enum, s) {
			return "must be one of " + strings.Join(f.enum, ", ") + ", not " + strconv.Quote(s)
		}
		*p = s
	case *int:
		n, err := hostabi.Int(val)
		if err != nil || n < math.MinInt || n > math.MaxInt {
			if jsonType(val) == "a number" {
				return "must be an integer, not " + string(val)
			}
			return want("an integer")
		}
		*p = int(n)
	case *float64:
		if jsonType(val) != "a number" {
			return want("a number")
		}
		n, err := hostabi.Float(val)
		if err != nil {
			return "is out of range"
		}
		*p = n
	case *bool:
		if jsonType(val) != "a boolean" {
			return want("true or false")
		}
		*p, _ = hostabi.Bool(val)
	case *[]string:
		s, err := hostabi.Strings(val)
		if err != nil {
			if val[0] == '[' {
				return "must be an array of strings only"
			}
			return want("an array of strings")
		}
		*p = s
	case *[]byte:
		*p = append([]byte(nil), val...)
	case Object:
		if val[0] != '{' {
			return want("an object")
		}
		if err := decodeObject(val, p, "key"); err != nil {
			return "is wrong: " + err.Error()
		}
	}
	return ""
}

// trimSpace trims JSON white space (bytes.TrimSpace would bring Unicode
// tables into every guest).
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// jsonType names the type of a JSON value for a message.
func jsonType(v []byte) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch c := v[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	}
	return "not JSON"
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// schema returns the JSON Schema of an Object's keys: the tool parameters
// the kit offers when a ToolSpec has none. Unknown keys are refused when
// decoding, so the schema says additionalProperties: false.
func schema(v Object) []byte {
	var fs Fields
	v.Fields(&fs)
	return fs.appendSchema(nil)
}

func (fs *Fields) appendSchema(b []byte) []byte {
	b = append(b, `{"type":"object","properties":{`...)
	var required []string
	for i, f := range fs.list {
		if i > 0 {
			b = append(b, ',')
		}
		b = hostabi.AppendString(b, f.name)
		b = append(b, ':')
		switch f.kind {
		case kString:
			b = append(b, `{"type":"string"`...)
			if len(f.enum) > 0 {
				b = append(b, `,"enum":[`...)
				for j, e := range f.enum {
					if j > 0 {
						b = append(b, ',')
					}
					b = hostabi.AppendString(b, e)
				}
				b = append(b, ']')
			}
		case kInt:
			b = append(b, `{"type":"integer"`...)
		case kFloat:
			b = append(b, `{"type":"number"`...)
		case kBool:
			b = append(b, `{"type":"boolean"`...)
		case kStrings:
			b = append(b, `{"type":"array","items":{"type":"string"}`...)
		case kRaw:
			b = append(b, '{')
		case kObject:
			var sub Fields
			f.ptr.(Object).Fields(&sub)
			b = sub.appendSchema(b)
			b = b[:len(b)-1] // reopen it for the description
		}
		if f.doc != "" {
			if b[len(b)-1] != '{' {
				b = append(b, ',')
			}
			b = append(b, `"description":`...)
			b = hostabi.AppendString(b, f.doc)
		}
		b = append(b, '}')
		if f.required {
			required = append(required, f.name)
		}
	}
	b = append(b, '}')
	if len(required) > 0 {
		b = append(b, `,"required":[`...)
		for i, r := range required {
			if i > 0 {
				b = append(b, ',')
			}
			b = hostabi.AppendString(b, r)
		}
		b = append(b, ']')
	}
	return append(b, `,"additionalProperties":false}`...)
}

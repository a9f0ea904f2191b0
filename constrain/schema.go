package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SchemaError reports a JSON Schema that cannot be compiled: invalid, or
// using a keyword this package does not enforce (it refuses rather than
// ignore one, so that a client never gets output that its schema forbids).
type SchemaError struct {
	// Path is the JSON pointer of the offending schema inside the root
	// ("" for the root itself).
	Path string
	// Keyword is the keyword at fault, if one is.
	Keyword string
	Msg     string
	// Unsupported reports a valid schema that uses what constrained
	// decoding does not enforce (rather than an invalid one).
	Unsupported bool
}

// Error implements error.
func (e *SchemaError) Error() string {
	where := "the schema"
	if e.Path != "" {
		where = "schema " + e.Path
	}
	if e.Keyword != "" {
		return fmt.Sprintf("%s: keyword %q: %s", where, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("%s: %s", where, e.Msg)
}

// object is a JSON object with its keys in document order.
type object struct {
	keys []string
	vals map[string]any
}

// parseOrdered parses one JSON value, objects as *object (numbers as
// json.Number).
func parseOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := parseValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func parseValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := parseValue(d)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := d.Token()
			return o, err
		case '[':
			a := []any{}
			for d.More() {
				v, err := parseValue(d)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := d.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// encodeJSON writes v compactly, objects' keys in their order, strings
// without HTML escaping: the one spelling a const or enum value is
// generated in.
func encodeJSON(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeJSON(b, k)
			b.WriteByte(':')
			encodeJSON(b, v.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeJSON(b, x)
		}
		b.WriteByte(']')
	case string:
		e := json.NewEncoder(b)
		e.SetEscapeHTML(false)
		_ = e.Encode(v)
		b.Truncate(b.Len() - 1) // Encode's newline
	case json.Number:
		b.WriteString(string(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
}

// Keywords that annotate a schema and never constrain a value: accepted and
// ignored.
var annotations = map[string]bool{"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true, "$anchor": true,
	// OpenAPI's hint beside a oneOf of objects (pydantic writes it for a
	// discriminated union): the oneOf already admits exactly its branches.
	"discriminator": true}

// Keywords this package enforces, and where ($defs and definitions hold
// schemas reached through $ref).
var enforced = map[string]bool{"type": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true, "prefixItems": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true, "anyOf": true, "oneOf": true, "allOf": true, "$ref": true,
	"$defs": true, "definitions": true, "nullable": true}

// MaxSchemaBytes bounds a schema's size.
const MaxSchemaBytes = 256 << 10

// SchemaOptions tune JSONSchema.
type SchemaOptions struct {
	// Strict makes every property of every object required, as OpenAI's
	// strict structured outputs do.
	Strict bool
}

// JSONSchema compiles a JSON Schema (draft 2020-12's keywords that
// describe structure) into the grammar of the documents it admits.
// Enforced: type (a name or an array of
// them: object, array, string, number, integer, boolean, null), nullable,
// enum, const, properties (generated in the schema's order), required,
// additionalProperties (false, true or a schema; when an object schema
// with properties leaves it out it counts as false, as in OpenAI's strict
// mode and xgrammar's; true or a schema beside properties is refused),
// items (a schema or false), prefixItems, minItems, maxItems, minLength,
// maxLength, anyOf and oneOf (both as anyOf), allOf of one schema, $ref to
// the root, $defs or definitions (recursion included). Annotations (title,
// description, default, examples...) are ignored; any other keyword
// (pattern, format, minimum, uniqueItems...) gives a *SchemaError naming
// it.
func JSONSchema(schema []byte, o SchemaOptions) (*Grammar, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, &SchemaError{Msg: fmt.Sprintf("%d bytes, at most %d", len(schema), MaxSchemaBytes)}
	}
	root, err := parseOrdered(schema)
	if err != nil {
		return nil, &SchemaError{Msg: fmt.Sprintf("not valid JSON: %v", err)}
	}
	b := newBuilder()
	c := &schemaCompiler{b: b, j: jsonRules{b}, root: root, opts: o, refs: map[string]int{}}
	s, err := c.compile(root, "")
	if err != nil {
		return nil, err
	}
	r := b.rule("root", one(s))
	g, err := b.compile(r)
	if err != nil {
		return nil, &SchemaError{Msg: strings.TrimPrefix(err.Error(), "constrain: ")}
	}
	return g, nil
}

// schemaCompiler turns schemas into rules.
type schemaCompiler struct {
	b    *builder
	j    jsonRules
	root any
	opts SchemaOptions
	refs map[string]int // rules of $ref targets, by pointer
}

func errAt(path, kw, format string, a ...any) error {
	return &SchemaError{Path: path, Keyword: kw, Msg: fmt.Sprintf(format, a...)}
}

// unsupportedAt is errAt for what is valid JSON Schema but not enforced.
func unsupportedAt(path, kw, format string, a ...any) error {
	return &SchemaError{Path: path, Keyword: kw, Msg: fmt.Sprintf(format, a...), Unsupported: true}
}

// nonNegInt reads a keyword's value as an integer >= 0.
func nonNegInt(o *object, kw, path string) (int, bool, error) {
	v, ok := o.vals[kw]
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, false, errAt(path, kw, "expected a non-negative integer")
	}
	i, err := strconv.Atoi(string(n))
	if err != nil || i < 0 {
		f, ferr := n.Float64()
		if ferr != nil || f < 0 || f != float64(int64(f)) {
			return 0, false, errAt(path, kw, "expected a non-negative integer, got %s", n)
		}
		i = int(f)
	}
	return i, true, nil
}

// compile returns a symbol matching the values schema s admits.
func (c *schemaCompiler) compile(s any, path string) (sym, error) {
	switch s := s.(type) {
	case bool:
		if !s {
			return sym{}, errAt(path, "", "the schema false admits no value")
		}
		return c.j.value(), nil
	case *object:
		return c.compileObject(s, path)
	}
	return sym{}, errAt(path, "", "a schema must be an object or a boolean")
}

func (c *schemaCompiler) compileObject(s *object, path string) (sym, error) {
	var constraining []string
	for _, k := range s.keys {
		switch {
		case annotations[k]:
		case enforced[k]:
			if k != "$defs" && k != "definitions" {
				constraining = append(constraining, k)
			}
		default:
			return sym{}, unsupportedAt(path, k, "not supported in constrained decoding (supported: %s)", supportedList())
		}
	}
	has := func(k string) bool { _, ok := s.vals[k]; return ok }
	alone := func(kw string, allowed ...string) error {
		for _, k := range constraining {
			if k != kw && !contains(allowed, k) {
				return unsupportedAt(path, k, "cannot be combined with %q in constrained decoding", kw)
			}
		}
		return nil
	}
	switch {
	case has("$ref"):
		if err := alone("$ref"); err != nil {
			return sym{}, err
		}
		return c.ref(s.vals["$ref"], path)
	case has("const") || has("enum"):
		return c.enum(s, path, alone)
	case has("anyOf") || has("oneOf"):
		kw := "anyOf"
		if !has("anyOf") {
			kw = "oneOf"
		}
		if err := alone(kw, "nullable"); err != nil {
			return sym{}, err
		}
		subs, ok := s.vals[kw].([]any)
		if !ok || len(subs) == 0 {
			return sym{}, errAt(path, kw, "expected a non-empty array of schemas")
		}
		var alts [][]sym
		for i, sub := range subs {
			r, err := c.compile(sub, fmt.Sprintf("%s/%s/%d", path, kw, i))
			if err != nil {
				return sym{}, err
			}
			alts = append(alts, one(r))
		}
		if n, _ := s.vals["nullable"].(bool); n {
			alts = append(alts, one(c.j.null()))
		}
		return ref(c.b.rule(kw+path, alts...)), nil
	case has("allOf"):
		if err := alone("allOf"); err != nil {
			return sym{}, err
		}
		subs, ok := s.vals["allOf"].([]any)
		if !ok || len(subs) != 1 {
			return sym{}, unsupportedAt(path, "allOf", "only an allOf of exactly one schema is supported in constrained decoding")
		}
		return c.compile(subs[0], path+"/allOf/0")
	}
	types, err := c.types(s, path)
	if err != nil {
		return sym{}, err
	}
	var alts [][]sym
	for _, t := range types {
		var r sym
		var err error
		switch t {
		case "object":
			r, err = c.object(s, path)
		case "array":
			r, err = c.array(s, path)
		case "string":
			r, err = c.str(s, path)
		case "number":
			r = c.j.number()
		case "integer":
			r = c.j.integer()
		case "boolean":
			r = c.j.boolean()
		case "null":
			r = c.j.null()
		case "any":
			r = c.j.value()
		}
		if err != nil {
			return sym{}, err
		}
		alts = append(alts, one(r))
	}
	if len(alts) == 1 {
		return alts[0][0], nil
	}
	return ref(c.b.rule("types"+path, alts...)), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// supportedList names the enforced keywords, for messages.
func supportedList() string {
	var ks []string
	for k := range enforced {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// types returns the JSON types schema s admits: its type keyword (with
// nullable), else what its keywords imply, else "any".
func (c *schemaCompiler) types(s *object, path string) ([]string, error) {
	var types []string
	switch t := s.vals["type"].(type) {
	case nil:
		if _, ok := s.vals["type"]; ok {
			return nil, errAt(path, "type", "expected a type name or an array of them")
		}
		has := func(ks ...string) bool {
			for _, k := range ks {
				if _, ok := s.vals[k]; ok {
					return true
				}
			}
			return false
		}
		switch {
		case has("properties", "required", "additionalProperties"):
			types = []string{"object"}
		case has("items", "prefixItems", "minItems", "maxItems"):
			types = []string{"array"}
		case has("minLength", "maxLength"):
			types = []string{"string"}
		default:
			types = []string{"any"}
		}
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return nil, errAt(path, "type", "expected type names")
			}
			types = append(types, name)
		}
		if len(types) == 0 {
			return nil, errAt(path, "type", "an empty array of types admits no value")
		}
	default:
		return nil, errAt(path, "type", "expected a type name or an array of them")
	}
	for _, t := range types {
		switch t {
		case "object", "array", "string", "number", "integer", "boolean", "null", "any":
		default:
			return nil, errAt(path, "type", "unknown type %q", t)
		}
	}
	if n, _ := s.vals["nullable"].(bool); n && !contains(types, "null") && !contains(types, "any") {
		types = append(types, "null")
	}
	return types, nil
}

// ref resolves a $ref to the root or a JSON pointer inside it.
func (c *schemaCompiler) ref(v any, path string) (sym, error) {
	p, ok := v.(string)
	if !ok || (p != "#" && !strings.HasPrefix(p, "#/")) {
		return sym{}, unsupportedAt(path, "$ref", "only references inside the schema (\"#\", \"#/$defs/Name\") are supported, got %v", v)
	}
	if r, ok := c.refs[p]; ok {
		return ref(r), nil
	}
	target := c.root
	if p != "#" {
		for _, part := range strings.Split(p[2:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			switch t := target.(type) {
			case *object:
				next, ok := t.vals[part]
				if !ok {
					return sym{}, errAt(path, "$ref", "%s does not resolve: no %q", p, part)
				}
				target = next
			case []any:
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(t) {
					return sym{}, errAt(path, "$ref", "%s does not resolve: no index %q", p, part)
				}
				target = t[i]
			default:
				return sym{}, errAt(path, "$ref", "%s does not resolve", p)
			}
		}
	}
	// Declared before compiling the target, so that a recursive schema
	// refers to this rule.
	r := c.b.declare("ref" + p)
	c.refs[p] = r
	body, err := c.compile(target, strings.TrimPrefix(p, "#"))
	if err != nil {
		return sym{}, err
	}
	c.b.define(r, one(body))
	return ref(r), nil
}

// compactJSON is a value spelled as encodeJSON writes it.
func compactJSON(v any) string {
	var b bytes.Buffer
	encodeJSON(&b, v)
	return b.String()
}

// enum builds the alternatives of const or enum: each value spelled
// compactly, as encodeJSON writes it.
func (c *schemaCompiler) enum(s *object, path string, alone func(string, ...string) error) (sym, error) {
	kw := "enum"
	var vals []any
	beside := []string{"type", "nullable"} // the keywords allowed beside kw
	if v, ok := s.vals["const"]; ok {
		kw = "const"
		vals = []any{v}
		if e, both := s.vals["enum"]; both {
			// Both must hold: the const, if enum lists it (pydantic writes
			// both for an Enum of one member).
			if a, ok := e.([]any); !ok || !slices.ContainsFunc(a, func(x any) bool { return compactJSON(x) == compactJSON(v) }) {
				return sym{}, errAt(path, "enum", "does not list const's value %s: no value matches both", compactJSON(v))
			}
			beside = append(beside, "enum")
		}
	} else {
		a, ok := s.vals["enum"].([]any)
		if !ok || len(a) == 0 {
			return sym{}, errAt(path, "enum", "expected a non-empty array")
		}
		vals = a
	}
	if err := alone(kw, beside...); err != nil {
		return sym{}, err
	}
	var types []string
	if _, ok := s.vals["type"]; ok {
		var err error
		if types, err = c.types(s, path); err != nil {
			return sym{}, err
		}
	}
	var alts [][]sym
	seen := map[string]bool{}
	for _, v := range vals {
		if types != nil && !contains(types, jsonType(v)) && !(jsonType(v) == "integer" && contains(types, "number")) &&
			!(jsonType(v) == "number" && contains(types, "integer") && isIntegral(v)) {
			continue // excluded by type
		}
		enc := compactJSON(v)
		if seen[enc] {
			continue
		}
		seen[enc] = true
		alts = append(alts, lit(enc))
	}
	if len(alts) == 0 {
		return sym{}, errAt(path, kw, "no value is of the schema's type")
	}
	return ref(c.b.rule(kw+path, alts...)), nil
}

// jsonType names the JSON type of a parsed value (integers as "integer").
func jsonType(v any) string {
	switch v := v.(type) {
	case *object:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return "integer"
		}
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// isIntegral reports whether a number has no fractional part (1.0).
func isIntegral(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, err := n.Float64()
	return err == nil && f == float64(int64(f))
}

// object builds an object schema: its properties in order, each required
// one present, additional members per additionalProperties.
func (c *schemaCompiler) object(s *object, path string) (sym, error) {
	var props *object
	if p, ok := s.vals["properties"]; ok {
		if props, ok = p.(*object); !ok {
			return sym{}, errAt(path, "properties", "expected an object of schemas")
		}
	}
	required := map[string]bool{}
	if r, ok := s.vals["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return sym{}, errAt(path, "required", "expected an array of property names")
		}
		for _, x := range list {
			name, ok := x.(string)
			if !ok {
				return sym{}, errAt(path, "required", "expected property names")
			}
			if props == nil || props.vals[name] == nil {
				return sym{}, errAt(path, "required", "property %q is required but not in properties (its schema is needed to generate it)", name)
			}
			required[name] = true
		}
	}
	addl, hasAddl := s.vals["additionalProperties"]
	ws := c.j.ws()
	if props == nil || len(props.keys) == 0 {
		// A map: any keys, values per additionalProperties (absent or
		// true: any value; false: the empty object).
		if b, ok := addl.(bool); hasAddl && ok && !b {
			return ref(c.b.rule("empty-object"+path, seq(lit("{"), one(ws), lit("}")))), nil
		}
		v := c.j.value()
		if hasAddl {
			if _, isBool := addl.(bool); !isBool {
				var err error
				if v, err = c.compile(addl, path+"/additionalProperties"); err != nil {
					return sym{}, err
				}
			}
		}
		return c.j.object(v), nil
	}
	if hasAddl {
		if b, ok := addl.(bool); !ok || b {
			return sym{}, unsupportedAt(path, "additionalProperties", "only false is supported beside properties in constrained decoding (leave it out, or set it to false)")
		}
	}
	// rest(k, comma): the members from property k on, comma telling
	// whether one was already written.
	n := len(props.keys)
	kvs := make([][]sym, n)
	for i, name := range props.keys {
		v, err := c.compile(props.vals[name], path+"/properties/"+escapePointer(name))
		if err != nil {
			return sym{}, err
		}
		var key bytes.Buffer
		encodeJSON(&key, name)
		kvs[i] = seq(lit(key.String()), one(ws), lit(":"), one(ws), one(v), one(ws))
	}
	comma := seq(lit(","), one(ws))
	var rest [2]int // rest(k+1, false), rest(k+1, true)
	rest[0] = c.b.rule(fmt.Sprintf("members%s-%d", path, n), nil)
	rest[1] = rest[0]
	for k := n - 1; k >= 0; k-- {
		name := props.keys[k]
		var next [2]int
		for w := 0; w < 2; w++ {
			lead := []sym(nil)
			if w == 1 {
				lead = comma
			}
			take := seq(lead, kvs[k], one(ref(rest[1])))
			if required[name] || c.opts.Strict {
				next[w] = c.b.rule(fmt.Sprintf("members%s-%d-%d", path, k, w), take)
			} else {
				next[w] = c.b.rule(fmt.Sprintf("members%s-%d-%d", path, k, w), take, one(ref(rest[w])))
			}
		}
		rest = next
	}
	return ref(c.b.rule("object"+path, seq(lit("{"), one(ws), one(ref(rest[0])), lit("}")))), nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// array builds an array schema: prefixItems, then items, the count within
// minItems..maxItems.
func (c *schemaCompiler) array(s *object, path string) (sym, error) {
	lo, _, err := nonNegInt(s, "minItems", path)
	if err != nil {
		return sym{}, err
	}
	hi, hasHi, err := nonNegInt(s, "maxItems", path)
	if err != nil {
		return sym{}, err
	}
	if !hasHi {
		hi = -1
	} else if hi < lo {
		return sym{}, errAt(path, "maxItems", "%d is below minItems %d", hi, lo)
	}
	item := c.j.value()
	noMore := false
	if it, ok := s.vals["items"]; ok {
		if b, isBool := it.(bool); isBool && !b {
			noMore = true
		} else if item, err = c.compile(it, path+"/items"); err != nil {
			return sym{}, err
		}
	}
	var prefix []sym
	if p, ok := s.vals["prefixItems"]; ok {
		list, ok := p.([]any)
		if !ok {
			return sym{}, errAt(path, "prefixItems", "expected an array of schemas")
		}
		for i, x := range list {
			r, err := c.compile(x, fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return sym{}, err
			}
			prefix = append(prefix, r)
		}
	}
	ws := c.j.ws()
	if noMore {
		if lo > len(prefix) {
			return sym{}, errAt(path, "minItems", "%d items needed but items is false after %d prefixItems", lo, len(prefix))
		}
		if hi < 0 || hi > len(prefix) {
			hi = len(prefix)
		}
	}
	if len(prefix) == 0 {
		if hi == 0 {
			return ref(c.b.rule("empty-array"+path, seq(lit("["), one(ws), lit("]")))), nil
		}
		return c.j.arrayOf(item, lo, hi), nil
	}
	comma := seq(lit(","), one(ws))
	// after(m): the items after the prefix, each with its comma.
	m := len(prefix)
	var after int
	switch {
	case hi >= 0 && hi <= m:
		after = c.b.rule(fmt.Sprintf("array%s-tail", path), nil)
	default:
		h := -1
		if hi >= 0 {
			h = hi - m
		}
		after = c.b.repeat(fmt.Sprintf("array%s-tail", path), seq(comma, one(item), one(ws)), nil, max(lo-m, 0), h)
	}
	next := after
	kmax := m
	if hi >= 0 && hi < m {
		kmax = hi
	}
	for k := kmax - 1; k >= 0; k-- {
		var lead []sym
		if k > 0 {
			lead = comma
		}
		take := seq(lead, one(prefix[k]), one(ws), one(ref(next)))
		if k >= lo {
			next = c.b.rule(fmt.Sprintf("array%s-%d", path, k), nil, take)
		} else {
			next = c.b.rule(fmt.Sprintf("array%s-%d", path, k), take)
		}
	}
	return ref(c.b.rule("array"+path, seq(lit("["), one(ws), one(ref(next)), lit("]")))), nil
}

// MaxLength bounds minLength and maxLength (each character of a bounded
// string is a rule).
const MaxLength = 8192

// str builds a string schema with minLength and maxLength (in characters,
// an escape counting as one).
func (c *schemaCompiler) str(s *object, path string) (sym, error) {
	lo, _, err := nonNegInt(s, "minLength", path)
	if err != nil {
		return sym{}, err
	}
	hi, hasHi, err := nonNegInt(s, "maxLength", path)
	if err != nil {
		return sym{}, err
	}
	if !hasHi {
		hi = -1
	} else if hi < lo {
		return sym{}, errAt(path, "maxLength", "%d is below minLength %d", hi, lo)
	}
	if lo > MaxLength || hi > MaxLength {
		return sym{}, unsupportedAt(path, "maxLength", "lengths above %d are not supported in constrained decoding", MaxLength)
	}
	return c.j.str(lo, hi), nil
}

package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Value is a template value: nil (None), Undefined, bool, int64, float64,
// string, []any (list), Tuple, *Dict, or one of the package's callables and
// objects (namespaces, macros, loop objects).
type Value = any

// Undefined is a name or attribute that does not exist, as jinja2's default
// Undefined: it prints as "", is false, iterates as empty and has length 0;
// reading an attribute or item of it is an error.
type Undefined struct {
	hint string // what was looked up, for error messages
}

// Tuple is a Python tuple (printed with parentheses).
type Tuple []any

// Dict is a dictionary that keeps its keys in insertion order, as Python's
// dict does (tojson writes keys in that order). Keys are strings, numbers,
// booleans, None or tuples of those; as in Python, 1, 1.0 and True are the
// same key.
type Dict struct {
	keys []Value         // the keys as first set, in insertion order
	m    map[Value]Value // by hashKey
}

// NewDict returns an empty Dict.
func NewDict() *Dict { return &Dict{m: map[Value]Value{}} }

// hashKey is the map key of a dict key, or false for unhashable values.
func hashKey(k Value) (Value, bool) {
	switch k := k.(type) {
	case string, int64, nil:
		return k, true
	case bool:
		if k {
			return int64(1), true
		}
		return int64(0), true
	case float64:
		if k == math.Trunc(k) && math.Abs(k) < 1<<62 {
			return int64(k), true
		}
		return k, true
	case Tuple:
		parts := make([]string, len(k))
		for i, e := range k {
			h, ok := hashKey(e)
			if !ok {
				return nil, false
			}
			parts[i] = fmt.Sprintf("%T:%v", h, h)
		}
		return "\x00tuple(" + strings.Join(parts, ",") + ")", true
	}
	return nil, false
}

// Set sets key to v, appending key if it is new.
func (d *Dict) Set(key string, v any) { d.set(key, v) }

// set sets any hashable key; it reports false for unhashable ones.
func (d *Dict) set(key, v Value) bool {
	h, ok := hashKey(key)
	if !ok {
		return false
	}
	if _, exists := d.m[h]; !exists {
		d.keys = append(d.keys, key)
	}
	d.m[h] = v
	return true
}

// Get returns the value of key.
func (d *Dict) Get(key string) (any, bool) { return d.get(key) }

func (d *Dict) get(key Value) (Value, bool) {
	h, ok := hashKey(key)
	if !ok {
		return nil, false
	}
	v, ok := d.m[h]
	return v, ok
}

// Keys returns the keys in insertion order (non-string keys as Python's
// str() writes them).
func (d *Dict) Keys() []string {
	out := make([]string, len(d.keys))
	for i, k := range d.keys {
		out[i] = toStr(k)
	}
	return out
}

// value returns the value of the i-th key.
func (d *Dict) value(i int) Value {
	v, _ := d.get(d.keys[i])
	return v
}

// Len returns the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// namespace is the object namespace() returns; its attributes can be set.
type namespace struct{ d *Dict }

// FromJSON decodes JSON into template values, keeping the order of object
// keys; integers become int64 and other numbers float64, as Python's
// json.loads.
func FromJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSON(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("jinja: trailing data after JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting of decoded JSON.
const maxJSONDepth = 200

// maxValueBytes bounds the text of one value (repr, tojson, join), and
// maxListLen the length of a list built by + or *, whatever Limits say:
// items can be shared, so a few statements can describe an exponentially
// large value.
const (
	maxValueBytes = 256 << 20
	maxListLen    = 1 << 20
)

// limitError is panicked by deep comparisons that exceed their budget and
// recovered by Render.
type limitError struct{ msg string }

// maxCompare bounds the element comparisons of one == or in.
const maxCompare = 10_000_000

func decodeJSON(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("jinja: JSON nested too deeply")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.Set(k, v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
		return nil, fmt.Errorf("jinja: bad JSON")
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		return f, nil
	default:
		return t, nil // string, bool, nil
	}
}

// FromGo converts Go values to template values: nil, bool, integers,
// floats, strings, []any, []string, map[string]any (keys sorted),
// json.RawMessage (decoded in order) and values of this package.
func FromGo(v any) (Value, error) {
	switch v := v.(type) {
	case nil, bool, int64, float64, string, *Dict, Undefined, Tuple:
		return v, nil
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case float32:
		return float64(v), nil
	case json.RawMessage:
		return FromJSON(v)
	case []string:
		l := make([]any, len(v))
		for i, s := range v {
			l[i] = s
		}
		return l, nil
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			c, err := FromGo(e)
			if err != nil {
				return nil, err
			}
			l[i] = c
		}
		return l, nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := NewDict()
		for _, k := range keys {
			c, err := FromGo(v[k])
			if err != nil {
				return nil, err
			}
			d.Set(k, c)
		}
		return d, nil
	}
	return nil, fmt.Errorf("jinja: cannot use a Go %T as a template value", v)
}

// truthy is Python's bool().
func truthy(v Value) bool {
	switch v := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case Tuple:
		return len(v) > 0
	case *Dict:
		return v.Len() > 0
	}
	return true
}

// toStr is Python's str() as jinja2 prints values.
func toStr(v Value) string { return toStrN(v, maxValueBytes) }

// toStrN is toStr, cut after about limit bytes.
func toStrN(v Value, limit int) string {
	switch v := v.(type) {
	case string:
		return v
	case Undefined:
		return ""
	case int64:
		return strconv.FormatInt(v, 10)
	}
	var b strings.Builder
	writeRepr(&b, v, 0, limit)
	return b.String()
}

// repr is Python's repr().
func repr(v Value) string {
	var b strings.Builder
	writeRepr(&b, v, 0, maxValueBytes)
	return b.String()
}

func writeRepr(b *strings.Builder, v Value, depth, limit int) {
	if depth > maxJSONDepth {
		b.WriteString("...")
		return
	}
	if b.Len() > limit {
		// Lists can share items, so a short template can describe a
		// value whose text is exponentially long; the caller's output
		// limit reports it.
		return
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case Undefined:
		b.WriteString("")
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(pyFloat(v, false))
	case string:
		b.WriteString(pyQuote(v))
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1, limit)
		}
		b.WriteByte(']')
	case Tuple:
		b.WriteByte('(')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1, limit)
		}
		if len(v) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *Dict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, k, depth+1, limit)
			b.WriteString(": ")
			writeRepr(b, v.value(i), depth+1, limit)
		}
		b.WriteByte('}')
	case *namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, v.d, depth+1, limit)
		b.WriteString(">")
	default:
		fmt.Fprintf(b, "<%s>", typeName(v))
	}
}

// pyQuote is Python's repr() of a string.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && !isPrintable(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// pyFloat is Python's repr() of a float (json is true: json.dumps'
// spelling of the non-finite values).
func pyFloat(f float64, json bool) string {
	switch {
	case math.IsNaN(f):
		if json {
			return "NaN"
		}
		return "nan"
	case math.IsInf(f, 1):
		if json {
			return "Infinity"
		}
		return "inf"
	case math.IsInf(f, -1):
		if json {
			return "-Infinity"
		}
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exps, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(exps)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1
	var out string
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			out = "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			out = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			out = digits[:decpt] + "." + digits[decpt:]
		}
	} else {
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		out += fmt.Sprintf("e%s%02d", sign, exp)
	}
	if neg {
		out = "-" + out
	}
	return out
}

// typeName is Python's name of a value's type, for error messages.
func typeName(v Value) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case Tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case *namespace:
		return "Namespace"
	case *macro:
		return "Macro"
	case *loopObj:
		return "LoopContext"
	}
	return "function"
}

// jsonOpts are the arguments of transformers' tojson filter:
// json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False) by default.
type jsonOpts struct {
	indent          string
	hasIndent       bool
	itemSep, keySep string
	sortKeys, ascii bool
	limit           int // bytes of output at most
}

// toJSON is json.dumps with o's arguments.
func toJSON(v Value, o jsonOpts) (string, error) {
	var b strings.Builder
	if err := o.write(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (o jsonOpts) write(b *strings.Builder, v Value, depth int) error {
	indent, hasIndent, itemSep, keySep, sortKeys := o.indent, o.hasIndent, o.itemSep, o.keySep, o.sortKeys
	if depth > maxJSONDepth {
		return fmt.Errorf("tojson: value nested too deeply")
	}
	if b.Len() > o.limit {
		return fmt.Errorf("output exceeds %d bytes", o.limit)
	}
	newline := func(d int) {
		if hasIndent {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(indent, d))
		}
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(pyFloat(v, true))
	case string:
		writeJSONString(b, v, o.ascii)
	case []any, Tuple:
		l := asList(v)
		if len(l) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range l {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			if err := o.write(b, e, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case *Dict:
		if v.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		// json.dumps writes str, int, float, bool and None keys as strings.
		type entry struct {
			key string
			v   Value
		}
		entries := make([]entry, len(v.keys))
		for i, k := range v.keys {
			var ks string
			switch k := k.(type) {
			case string:
				ks = k
			case int64:
				ks = strconv.FormatInt(k, 10)
			case float64:
				ks = pyFloat(k, true)
			case bool:
				ks = map[bool]string{true: "true", false: "false"}[k]
			case nil:
				ks = "null"
			default:
				return fmt.Errorf("keys must be str, int, float, bool or None, not %s", typeName(k))
			}
			if sortKeys {
				if _, isStr := k.(string); !isStr {
					return fmt.Errorf("sort_keys: keys of mixed types cannot be compared")
				}
			}
			entries[i] = entry{ks, v.value(i)}
		}
		if sortKeys {
			sort.SliceStable(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
		}
		b.WriteByte('{')
		for i, e := range entries {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			writeJSONString(b, e.key, o.ascii)
			b.WriteString(keySep)
			if err := o.write(b, e.v, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// writeJSONString writes s as json.dumps does (ascii: ensure_ascii=True,
// non-ASCII characters as \uXXXX escapes, in UTF-16).
func writeJSONString(b *strings.Builder, s string, ascii bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (ascii && r >= 0x7f && r <= 0xffff):
				fmt.Fprintf(b, `\u%04x`, r)
			case ascii && r > 0xffff:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// asList returns the items of a list or tuple.
func asList(v Value) []any {
	switch v := v.(type) {
	case []any:
		return v
	case Tuple:
		return v
	}
	return nil
}

// runeLen is Python's len() of a string.
func runeLen(s string) int { return utf8.RuneCountInString(s) }

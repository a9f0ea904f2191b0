package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// maxRange bounds the list range() builds.
const maxRange = 1 << 20

// globals are the functions templates can call: jinja2's and those
// transformers adds (raise_exception, strftime_now).
var globals map[string]Value

func init() {
	globals = map[string]Value{
		"range": &builtinFunc{name: "range", fn: fnRange},
		"namespace": &builtinFunc{name: "namespace", fn: func(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
			d := NewDict()
			for _, a := range args {
				ad, ok := a.(*Dict)
				if !ok {
					return nil, errorf(line, "namespace() takes a dict, not %s", typeName(a))
				}
				for i, k := range ad.keys {
					d.set(k, ad.value(i))
				}
			}
			if kw != nil {
				for i, k := range kw.keys {
					d.set(k, kw.value(i))
				}
			}
			return &namespace{d: d}, nil
		}},
		"dict": &builtinFunc{name: "dict", fn: func(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
			d := NewDict()
			for _, a := range args {
				if ad, ok := a.(*Dict); ok {
					for i, k := range ad.keys {
						d.set(k, ad.value(i))
					}
				}
			}
			if kw != nil {
				for i, k := range kw.keys {
					d.set(k, kw.value(i))
				}
			}
			return d, nil
		}},
		"raise_exception": &builtinFunc{name: "raise_exception", fn: func(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
			msg := ""
			if len(args) > 0 {
				msg = toStr(args[0])
			}
			return nil, &Error{Line: line, Msg: "template raised: " + msg, Raised: true}
		}},
		"strftime_now": &builtinFunc{name: "strftime_now", fn: func(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
			if len(args) != 1 {
				return nil, errorf(line, "strftime_now takes a format")
			}
			f, ok := args[0].(string)
			if !ok {
				return nil, errorf(line, "strftime_now takes a string format")
			}
			return strftime(r.now(), f), nil
		}},
	}
}

func fnRange(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
	start, step, n, err := rangeArgs(args, line)
	if err != nil {
		return nil, err
	}
	out := make([]any, n)
	for k, i := 0, start; k < n; k, i = k+1, i+step {
		out[k] = boxInt(i)
	}
	return out, nil
}

// rangeArgs returns the start, step and length of range(args...), as
// Python computes them (at most maxRange long).
func rangeArgs(args []Value, line int) (start, step int64, length int, err error) {
	var ints []int64
	for _, a := range args {
		n, ok := isInt(a)
		if !ok {
			return 0, 0, 0, errorf(line, "range() takes integers, not %s", typeName(a))
		}
		ints = append(ints, n)
	}
	stop := int64(0)
	step = 1
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		return 0, 0, 0, errorf(line, "range() takes 1 to 3 arguments")
	}
	if step == 0 {
		return 0, 0, 0, errorf(line, "range() arg 3 must not be zero")
	}
	n := uint64(0) // computed without overflow
	switch {
	case step > 0 && stop > start:
		n = (uint64(stop-start) + uint64(step) - 1) / uint64(step)
	case step < 0 && start > stop:
		n = (uint64(start-stop) + uint64(-step) - 1) / uint64(-step)
	}
	if n > maxRange {
		return 0, 0, 0, errorf(line, "range() longer than %d", maxRange)
	}
	return start, step, int(n), nil
}

// boxedInts are the integers 0..len-1 as Values, so that range() over
// them (a template's loop over its messages' indices) allocates no box
// per item.
var boxedInts = sync.OnceValue(func() []Value {
	b := make([]Value, 1<<14)
	for i := range b {
		b[i] = int64(i)
	}
	return b
})

// boxInt returns i as a Value, boxed once for small non-negative i.
func boxInt(i int64) Value {
	if b := boxedInts(); i >= 0 && i < int64(len(b)) {
		return b[i]
	}
	return i
}

// strftime formats t as Python's time.strftime for the common directives.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		if f[i] == '-' && i+1 < len(f) {
			// glibc's "no padding" flag: %-d, %-m, %-H ...
			i++
			n, ok := map[byte]int{'d': t.Day(), 'm': int(t.Month()), 'H': t.Hour(), 'M': t.Minute(), 'S': t.Second(),
				'j': t.YearDay(), 'y': t.Year() % 100, 'I': (t.Hour()+11)%12 + 1}[f[i]]
			if ok {
				fmt.Fprintf(&b, "%d", n)
				continue
			}
			b.WriteString("%-")
		}
		switch f[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// argOr returns positional argument i, else keyword name, else def.
func argOr(args []Value, kw *Dict, i int, name string, def Value) Value {
	if i < len(args) {
		return args[i]
	}
	if kw != nil {
		if v, ok := kw.get(name); ok {
			return v
		}
	}
	return def
}

func (r *renderer) applyFilter(name string, v Value, args []Value, kw *Dict, line int) (Value, error) {
	if err := r.step(line); err != nil {
		return nil, err
	}
	switch name {
	case "trim":
		chars := argOr(args, kw, 0, "chars", nil)
		return pyStripChars(toStr(v), chars, true, true), nil
	case "tojson":
		ind := argOr(args, kw, 0, "indent", nil)
		indent, hasIndent := "", false
		switch n := ind.(type) {
		case int64:
			indent, hasIndent = strings.Repeat(" ", int(max(n, 0))), true
		case string:
			indent, hasIndent = n, true
		}
		o := jsonOpts{indent: indent, hasIndent: hasIndent, itemSep: ", ", keySep: ": ", limit: r.lim.MaxOutput}
		if hasIndent {
			o.itemSep = ","
		}
		if seps := asList(argOr(nil, kw, 0, "separators", nil)); len(seps) == 2 {
			o.itemSep, o.keySep = toStr(seps[0]), toStr(seps[1])
		}
		o.sortKeys = truthy(argOr(nil, kw, 0, "sort_keys", false))
		o.ascii = truthy(argOr(nil, kw, 0, "ensure_ascii", false))
		s, err := toJSON(v, o)
		if err != nil {
			return nil, errorf(line, "tojson: %v", err)
		}
		return s, nil
	case "length", "count":
		return length(v, line)
	case "upper":
		return strings.ToUpper(toStr(v)), nil
	case "lower":
		return strings.ToLower(toStr(v)), nil
	case "capitalize":
		return capitalize(toStr(v)), nil
	case "title":
		return title(toStr(v)), nil
	case "replace":
		if len(args) < 2 {
			return nil, errorf(line, "replace takes old and new")
		}
		n := -1
		if c, ok := isInt(argOr(args, kw, 2, "count", nil)); ok {
			n = int(c)
		}
		s, old, nw := toStr(v), toStr(args[0]), toStr(args[1])
		if grow := len(nw) - len(old); grow > 0 && len(s)+(len(s)+1)*grow > r.lim.MaxOutput {
			if k := strings.Count(s, old); len(s)+k*grow > r.lim.MaxOutput {
				return nil, errorf(line, "replace: string exceeds %d bytes", r.lim.MaxOutput)
			}
		}
		return strings.Replace(s, old, nw, n), nil
	case "items":
		switch d := v.(type) {
		case *Dict:
			out := make([]any, len(d.keys))
			for i, k := range d.keys {
				out[i] = Tuple{k, d.value(i)}
			}
			return out, nil
		case Undefined:
			return []any{}, nil
		}
		return nil, errorf(line, "items: can only get item pairs from a mapping, not %s", typeName(v))
	case "default", "d":
		def := argOr(args, kw, 0, "default_value", "")
		boolean := truthy(argOr(args, kw, 1, "boolean", false))
		if _, undef := v.(Undefined); undef || (boolean && !truthy(v)) {
			return def, nil
		}
		return v, nil
	case "join":
		sep := toStr(argOr(args, kw, 0, "d", ""))
		attr := argOr(args, kw, 1, "attribute", nil)
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		total := 0
		for i, it := range items {
			if attr != nil {
				if it, err = getAttrPath(it, toStr(attr), line); err != nil {
					return nil, err
				}
			}
			if _, isStr := it.(string); !isStr {
				if err := r.addSteps(line, 1); err != nil { // a conversion costs what a step does
					return nil, err
				}
			}
			parts[i] = toStr(it)
			if total += len(parts[i]) + len(sep); total > r.lim.MaxOutput {
				return nil, errorf(line, "join: string exceeds %d bytes", r.lim.MaxOutput)
			}
		}
		return strings.Join(parts, sep), nil
	case "string":
		return toStr(v), nil
	case "first", "last":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{hint: "no first item, sequence was empty"}, nil
		}
		if name == "first" {
			return items[0], nil
		}
		return items[len(items)-1], nil
	case "list":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		return append([]any{}, items...), nil
	case "reverse":
		if s, ok := v.(string); ok {
			rs := []rune(s)
			for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
				rs[i], rs[j] = rs[j], rs[i]
			}
			return string(rs), nil
		}
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		out := make([]any, len(items))
		for i, it := range items {
			out[len(items)-1-i] = it
		}
		return out, nil
	case "map":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, len(items))
		if attr := argOr(nil, kw, 0, "attribute", nil); attr != nil {
			def := argOr(nil, kw, 0, "default", nil)
			for _, it := range items {
				x, err := getAttrPath(it, toStr(attr), line)
				if err != nil {
					return nil, err
				}
				if _, undef := x.(Undefined); undef && def != nil {
					x = def
				}
				out = append(out, x)
			}
			return out, nil
		}
		if len(args) == 0 {
			return nil, errorf(line, "map needs a filter name or attribute=")
		}
		fname := toStr(args[0])
		for _, it := range items {
			x, err := r.applyFilter(fname, it, args[1:], nil, line)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case "select", "reject", "selectattr", "rejectattr":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		attr := name == "selectattr" || name == "rejectattr"
		want := name == "select" || name == "selectattr"
		rest := args
		var attrName Value
		if attr {
			if len(rest) == 0 {
				return nil, errorf(line, "%s needs an attribute", name)
			}
			attrName, rest = rest[0], rest[1:]
		}
		out := []any{}
		for _, it := range items {
			x := it
			if attr {
				if x, err = getAttrPath(it, toStr(attrName), line); err != nil {
					return nil, err
				}
			}
			var ok bool
			if len(rest) == 0 {
				ok = truthy(x)
			} else if ok, err = r.applyTest(toStr(rest[0]), x, rest[1:], line); err != nil {
				return nil, err
			}
			if ok == want {
				out = append(out, it)
			}
		}
		return out, nil
	case "unique":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		out := []any{}
		for _, it := range items {
			dup := false
			for _, o := range out {
				if equal(o, it) {
					dup = true
					break
				}
			}
			if !dup {
				out = append(out, it)
			}
		}
		return out, nil
	case "sort":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		out := append([]any{}, items...)
		reverse := truthy(argOr(args, kw, 0, "reverse", false))
		attr := argOr(args, kw, 2, "attribute", nil)
		key := func(x Value) Value {
			if attr != nil {
				x, _ = getAttrPath(x, toStr(attr), line)
			}
			if s, ok := x.(string); ok {
				return strings.ToLower(s)
			}
			return x
		}
		return out, sortBy(out, key, reverse, line)
	case "dictsort":
		d, ok := v.(*Dict)
		if !ok {
			return nil, errorf(line, "dictsort takes a dict")
		}
		caseSensitive := truthy(argOr(args, kw, 0, "case_sensitive", false))
		byValue := toStr(argOr(args, kw, 1, "by", "key")) == "value"
		reverse := truthy(argOr(args, kw, 2, "reverse", false))
		out := make([]any, len(d.keys))
		for i, k := range d.keys {
			out[i] = Tuple{k, d.value(i)}
		}
		key := func(t Value) Value {
			x := t.(Tuple)[0]
			if byValue {
				x = t.(Tuple)[1]
			}
			if s, ok := x.(string); ok && !caseSensitive {
				return strings.ToLower(s)
			}
			return x
		}
		return out, sortBy(out, key, reverse, line)
	case "int":
		def := argOr(args, kw, 0, "default", int64(0))
		switch x := v.(type) {
		case int64:
			return x, nil
		case bool:
			n, _ := isInt(x)
			return n, nil
		case float64:
			return int64(x), nil
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return int64(f), nil
			}
		}
		return def, nil
	case "float":
		def := argOr(args, kw, 0, "default", 0.0)
		if f, ok := toFloat(v); ok {
			return f, nil
		}
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return f, nil
			}
		}
		return def, nil
	case "abs":
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return -x, nil
			}
			return x, nil
		case float64:
			return math.Abs(x), nil
		}
		return nil, errorf(line, "bad operand type for abs(): '%s'", typeName(v))
	case "round":
		f, ok := toFloat(v)
		if !ok {
			return nil, errorf(line, "round takes a number")
		}
		p, _ := isInt(argOr(args, kw, 0, "precision", int64(0)))
		method := toStr(argOr(args, kw, 1, "method", "common"))
		m := math.Pow(10, float64(p))
		switch method {
		case "ceil":
			return math.Ceil(f*m) / m, nil
		case "floor":
			return math.Floor(f*m) / m, nil
		}
		return math.RoundToEven(f*m) / m, nil // Python's round()
	case "sum":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		var acc Value = argOr(args, kw, 1, "start", int64(0))
		attr := argOr(args, kw, 0, "attribute", nil)
		for _, it := range items {
			if attr != nil {
				if it, err = getAttrPath(it, toStr(attr), line); err != nil {
					return nil, err
				}
			}
			if acc, err = r.binary("+", acc, it, line); err != nil {
				return nil, err
			}
		}
		return acc, nil
	case "min", "max":
		items, err := r.iterate(v, line)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{hint: "no " + name + " item, sequence was empty"}, nil
		}
		best := items[0]
		for _, it := range items[1:] {
			c, err := order(it, best, line, "<")
			if err != nil {
				return nil, err
			}
			if (name == "min" && c < 0) || (name == "max" && c > 0) {
				best = it
			}
		}
		return best, nil
	case "indent":
		width := argOr(args, kw, 0, "width", int64(4))
		first := truthy(argOr(args, kw, 1, "first", false))
		blank := truthy(argOr(args, kw, 2, "blank", false))
		ind := ""
		if n, ok := isInt(width); ok {
			ind = strings.Repeat(" ", int(max(n, 0)))
		} else {
			ind = toStr(width)
		}
		return indent(toStr(v), ind, first, blank), nil
	case "safe":
		return v, nil
	case "escape", "e", "forceescape":
		return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(toStr(v)), nil
	case "wordcount":
		return int64(len(strings.FieldsFunc(toStr(v), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' }))), nil
	case "format":
		if kw != nil && kw.Len() > 0 {
			return nil, errorf(line, "format with keyword arguments is not supported")
		}
		return percentFormat(toStr(v), Tuple(args), line)
	case "center":
		w, _ := isInt(argOr(args, kw, 0, "width", int64(80)))
		s := toStr(v)
		pad := int(w) - runeLen(s)
		if pad <= 0 {
			return s, nil
		}
		left := pad / 2
		if pad%2 == 1 && int(w)%2 == 1 {
			left++
		}
		return strings.Repeat(" ", left) + s + strings.Repeat(" ", pad-left), nil
	}
	return nil, errorf(line, "no filter named '%s'", name)
}

// getAttrPath resolves "a.b" as jinja2's make_attrgetter (items first).
func getAttrPath(v Value, path string, line int) (Value, error) {
	for _, part := range strings.Split(path, ".") {
		var key Value = part
		if n, err := strconv.ParseInt(part, 10, 64); err == nil {
			key = n
		}
		var err error
		if v, err = getItem(v, key, line); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func length(v Value, line int) (Value, error) {
	switch x := v.(type) {
	case string:
		return int64(runeLen(x)), nil
	case []any:
		return int64(len(x)), nil
	case Tuple:
		return int64(len(x)), nil
	case *Dict:
		return int64(x.Len()), nil
	case Undefined:
		return int64(0), nil
	case *namespace:
		return int64(x.d.Len()), nil
	}
	return nil, errorf(line, "object of type '%s' has no len()", typeName(v))
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

// title is Python's str.title().
func title(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if unicode.IsLetter(r) {
			if prevCased {
				b.WriteRune(unicode.ToLower(r))
			} else {
				b.WriteRune(unicode.ToTitle(r))
			}
			prevCased = true
		} else {
			b.WriteRune(r)
			prevCased = false
		}
	}
	return b.String()
}

// splitLines is Python's str.splitlines().
func splitLines(s string) []string {
	var out []string
	start := 0
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			out = append(out, string(rs[start:i]))
			start = i + 1
		case '\r':
			out = append(out, string(rs[start:i]))
			if i+1 < len(rs) && rs[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(rs) {
		out = append(out, string(rs[start:]))
	}
	return out
}

// indent is jinja2's indent filter.
func indent(s, ind string, first, blank bool) string {
	s += "\n"
	lines := splitLines(s)
	var rv string
	if blank {
		rv = strings.Join(lines, "\n"+ind)
	} else if len(lines) > 0 {
		rv = lines[0]
		if len(lines) > 1 {
			rest := make([]string, len(lines)-1)
			for i, l := range lines[1:] {
				if l != "" {
					l = ind + l
				}
				rest[i] = l
			}
			rv += "\n" + strings.Join(rest, "\n")
		}
	}
	if first {
		rv = ind + rv
	}
	return rv
}

// pyStripChars is Python's strip/lstrip/rstrip with an optional set of
// characters (None: whitespace).
func pyStripChars(s string, chars Value, left, right bool) string {
	f := pyIsSpace
	if cs, ok := chars.(string); ok {
		f = func(r rune) bool { return strings.ContainsRune(cs, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s
}

func (r *renderer) applyTest(name string, v Value, args []Value, line int) (bool, error) {
	arg := func() (Value, error) {
		if len(args) == 0 {
			return nil, errorf(line, "test '%s' needs an argument", name)
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		_, undef := v.(Undefined)
		return !undef, nil
	case "undefined":
		_, undef := v.(Undefined)
		return undef, nil
	case "none":
		return v == nil, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "true":
		b, ok := v.(bool)
		return ok && b, nil
	case "false":
		b, ok := v.(bool)
		return ok && !b, nil
	case "integer":
		_, ok := v.(int64)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "number":
		switch v.(type) {
		case int64, float64, bool:
			return true, nil
		}
		return false, nil
	case "string":
		_, ok := v.(string)
		return ok, nil
	case "mapping":
		_, ok := v.(*Dict)
		return ok, nil
	case "iterable":
		switch v.(type) {
		case string, []any, Tuple, *Dict, Undefined:
			return true, nil
		}
		return false, nil
	case "sequence":
		switch v.(type) {
		case string, []any, Tuple, *Dict, Undefined:
			return true, nil
		}
		return false, nil
	case "callable":
		switch v.(type) {
		case *builtinFunc, *macro:
			return true, nil
		}
		return false, nil
	case "odd", "even":
		n, ok := isInt(v)
		if !ok {
			return false, errorf(line, "test '%s' needs an integer", name)
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		a, err := arg()
		if err != nil {
			return false, err
		}
		n, ok1 := isInt(v)
		d, ok2 := isInt(a)
		if !ok1 || !ok2 || d == 0 {
			return false, errorf(line, "divisibleby needs integers")
		}
		return n%d == 0, nil
	case "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "sameas":
		a, err := arg()
		if err != nil {
			return false, err
		}
		op := map[string]string{"eq": "==", "equalto": "==", "==": "==", "ne": "!=", "!=": "!=", "lt": "<", "lessthan": "<", "<": "<",
			"le": "<=", "<=": "<=", "gt": ">", "greaterthan": ">", ">": ">", "ge": ">=", ">=": ">=", "in": "in", "sameas": "=="}[name]
		if name == "sameas" {
			switch v.(type) {
			case nil, bool, Undefined:
				return v == a, nil
			}
		}
		return compare(op, v, a, line)
	case "lower":
		s := toStr(v)
		return s == strings.ToLower(s), nil
	case "upper":
		s := toStr(v)
		return s == strings.ToUpper(s), nil
	case "escaped":
		return false, nil
	}
	return false, errorf(line, "no test named '%s'", name)
}

// method returns the bound method name of a str, list or dict, or nil.
func method(recv Value, name string) Value {
	switch recv.(type) {
	case string:
		if !strMethods[name] {
			return nil
		}
	case []any, Tuple:
		if !listMethods[name] {
			return nil
		}
	case *Dict:
		if !dictMethods[name] {
			return nil
		}
	default:
		return nil
	}
	return &builtinFunc{name: name, fn: func(r *renderer, args []Value, kw *Dict, line int) (Value, error) {
		return r.callMethod(recv, name, args, kw, line)
	}}
}

var strMethods = map[string]bool{"strip": true, "lstrip": true, "rstrip": true, "split": true, "rsplit": true,
	"startswith": true, "endswith": true, "upper": true, "lower": true, "title": true, "capitalize": true,
	"replace": true, "find": true, "rfind": true, "index": true, "count": true, "join": true, "splitlines": true,
	"isdigit": true, "isalpha": true, "isalnum": true, "isspace": true, "isupper": true, "islower": true,
	"removeprefix": true, "removesuffix": true, "format": true, "partition": true, "rpartition": true}

var listMethods = map[string]bool{"index": true, "count": true, "append": true, "extend": true, "pop": true,
	"insert": true, "remove": true, "sort": true, "reverse": true, "clear": true, "copy": true}

// mutating are the methods jinja2's ImmutableSandboxedEnvironment refuses.
var mutating = map[string]bool{"append": true, "extend": true, "pop": true, "insert": true, "remove": true,
	"sort": true, "reverse": true, "clear": true, "update": true, "popitem": true, "setdefault": true}

func (r *renderer) callMethod(recv Value, name string, args []Value, kw *Dict, line int) (Value, error) {
	if err := r.step(line); err != nil {
		return nil, err
	}
	if _, isDict := recv.(*Dict); !isDict { // a dict's methods look up or return (charged by the call)
		if err := r.charge(line, recv); err != nil {
			return nil, err
		}
	}
	if mutating[name] {
		return nil, errorf(line, "access to attribute '%s' of '%s' object is unsafe", name, typeName(recv))
	}
	switch x := recv.(type) {
	case string:
		return strMethod(x, name, args, kw, line)
	case *Dict:
		switch name {
		case "items":
			out := make([]any, len(x.keys))
			for i, k := range x.keys {
				out[i] = Tuple{k, x.value(i)}
			}
			return out, nil
		case "keys":
			out := append([]any{}, x.keys...)
			return out, nil
		case "values":
			out := make([]any, len(x.keys))
			for i := range x.keys {
				out[i] = x.value(i)
			}
			return out, nil
		case "get":
			if len(args) == 0 {
				return nil, errorf(line, "get expected at least 1 argument")
			}
			if v, ok := x.get(args[0]); ok {
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return nil, nil
		case "copy":
			d := NewDict()
			for i, k := range x.keys {
				d.set(k, x.value(i))
			}
			return d, nil
		}
	case []any, Tuple:
		l := asList(x)
		switch name {
		case "index":
			for i, e := range l {
				if len(args) > 0 && equal(e, args[0]) {
					return int64(i), nil
				}
			}
			return nil, errorf(line, "value is not in list")
		case "count":
			n := int64(0)
			for _, e := range l {
				if len(args) > 0 && equal(e, args[0]) {
					n++
				}
			}
			return n, nil
		case "copy":
			return append([]any{}, l...), nil
		}
	}
	return nil, errorf(line, "'%s' object has no attribute '%s'", typeName(recv), name)
}

func strMethod(s, name string, args []Value, kw *Dict, line int) (Value, error) {
	strArg := func(i int, kwname string) (string, bool) {
		v := argOr(args, kw, i, kwname, nil)
		str, ok := v.(string)
		return str, ok
	}
	switch name {
	case "strip", "lstrip", "rstrip":
		chars := argOr(args, kw, 0, "chars", nil)
		return pyStripChars(s, chars, name != "rstrip", name != "lstrip"), nil
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	case "title":
		return title(s), nil
	case "capitalize":
		return capitalize(s), nil
	case "startswith", "endswith":
		var prefixes []string
		switch p := argOr(args, kw, 0, "prefix", nil).(type) {
		case string:
			prefixes = []string{p}
		case Tuple:
			for _, e := range p {
				prefixes = append(prefixes, toStr(e))
			}
		default:
			return nil, errorf(line, "%s first arg must be str or a tuple of str", name)
		}
		for _, p := range prefixes {
			if (name == "startswith" && strings.HasPrefix(s, p)) || (name == "endswith" && strings.HasSuffix(s, p)) {
				return true, nil
			}
		}
		return false, nil
	case "split", "rsplit":
		sep, hasSep := strArg(0, "sep")
		maxsplit := -1
		if m, ok := isInt(argOr(args, kw, 1, "maxsplit", nil)); ok {
			maxsplit = int(m)
		}
		var parts []string
		if !hasSep {
			parts = splitWhitespace(s, maxsplit, name == "rsplit")
		} else {
			if sep == "" {
				return nil, errorf(line, "empty separator")
			}
			if name == "split" || maxsplit < 0 {
				parts = strings.SplitN(s, sep, maxsplit+boolInt(maxsplit >= 0))
			} else {
				parts = rsplitN(s, sep, maxsplit)
			}
		}
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	case "replace":
		old, ok1 := strArg(0, "old")
		nw, ok2 := strArg(1, "new")
		if !ok1 || !ok2 {
			return nil, errorf(line, "replace takes two strings")
		}
		n := -1
		if c, ok := isInt(argOr(args, kw, 2, "count", nil)); ok {
			n = int(c)
		}
		if grow := len(nw) - len(old); grow > 0 && len(s)+strings.Count(s, old)*grow > maxValueBytes {
			return nil, errorf(line, "replace: string exceeds %d bytes", maxValueBytes)
		}
		return strings.Replace(s, old, nw, n), nil
	case "find", "rfind", "index":
		sub, ok := strArg(0, "sub")
		if !ok {
			return nil, errorf(line, "%s takes a string", name)
		}
		i := strings.Index(s, sub)
		if name == "rfind" {
			i = strings.LastIndex(s, sub)
		}
		if i < 0 {
			if name == "index" {
				return nil, errorf(line, "substring not found")
			}
			return int64(-1), nil
		}
		return int64(utf8.RuneCountInString(s[:i])), nil
	case "count":
		sub, ok := strArg(0, "sub")
		if !ok {
			return nil, errorf(line, "count takes a string")
		}
		if sub == "" {
			return int64(runeLen(s) + 1), nil
		}
		return int64(strings.Count(s, sub)), nil
	case "join":
		if len(args) != 1 {
			return nil, errorf(line, "join takes one argument")
		}
		items := asList(args[0])
		parts := make([]string, len(items))
		for i, it := range items {
			str, ok := it.(string)
			if !ok {
				return nil, errorf(line, "sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			parts[i] = str
		}
		return strings.Join(parts, s), nil
	case "splitlines":
		lines := splitLines(s)
		out := make([]any, len(lines))
		for i, l := range lines {
			out[i] = l
		}
		return out, nil
	case "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower":
		if s == "" {
			return false, nil
		}
		switch name {
		case "isupper":
			return strings.ToUpper(s) == s && strings.ToLower(s) != s, nil
		case "islower":
			return strings.ToLower(s) == s && strings.ToUpper(s) != s, nil
		}
		for _, c := range s {
			ok := false
			switch name {
			case "isdigit":
				ok = unicode.IsDigit(c)
			case "isalpha":
				ok = unicode.IsLetter(c)
			case "isalnum":
				ok = unicode.IsLetter(c) || unicode.IsDigit(c)
			case "isspace":
				ok = pyIsSpace(c)
			}
			if !ok {
				return false, nil
			}
		}
		return true, nil
	case "removeprefix":
		p, _ := strArg(0, "prefix")
		return strings.TrimPrefix(s, p), nil
	case "removesuffix":
		p, _ := strArg(0, "suffix")
		return strings.TrimSuffix(s, p), nil
	case "partition", "rpartition":
		sep, _ := strArg(0, "sep")
		i := strings.Index(s, sep)
		if name == "rpartition" {
			i = strings.LastIndex(s, sep)
		}
		if i < 0 || sep == "" {
			if name == "rpartition" {
				return Tuple{"", "", s}, nil
			}
			return Tuple{s, "", ""}, nil
		}
		return Tuple{s[:i], sep, s[i+len(sep):]}, nil
	case "format":
		return strFormat(s, args, kw, line)
	}
	return nil, errorf(line, "'str' object has no attribute '%s'", name)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func rsplitN(s, sep string, n int) []string {
	var out []string
	for n > 0 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append([]string{s[i+len(sep):]}, out...)
		s = s[:i]
		n--
	}
	return append([]string{s}, out...)
}

// splitWhitespace is Python's str.split() without a separator.
func splitWhitespace(s string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		f := strings.FieldsFunc(s, pyIsSpace)
		if f == nil {
			f = []string{}
		}
		return f
	}
	if fromRight {
		var out []string
		s = strings.TrimRightFunc(s, pyIsSpace)
		for maxsplit > 0 && s != "" {
			i := strings.LastIndexFunc(s, pyIsSpace)
			if i < 0 {
				break
			}
			_, n := utf8.DecodeRuneInString(s[i:])
			out = append([]string{s[i+n:]}, out...)
			s = strings.TrimRightFunc(s[:i], pyIsSpace)
			maxsplit--
		}
		if s != "" {
			out = append([]string{s}, out...)
		}
		return out
	}
	var out []string
	s = strings.TrimLeftFunc(s, pyIsSpace)
	for maxsplit > 0 && s != "" {
		i := strings.IndexFunc(s, pyIsSpace)
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = strings.TrimLeftFunc(s[i:], pyIsSpace)
		maxsplit--
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// strFormat is str.format for "{}", "{0}" and "{name}" fields.
func strFormat(s string, args []Value, kw *Dict, line int) (Value, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '{' && i+1 < len(s) && s[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		if c == '}' && i+1 < len(s) && s[i+1] == '}' {
			b.WriteByte('}')
			i++
			continue
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, errorf(line, "single '{' encountered in format string")
		}
		field := s[i+1 : i+j]
		i += j
		var v Value
		switch {
		case field == "":
			if auto >= len(args) {
				return nil, errorf(line, "format: not enough arguments")
			}
			v = args[auto]
			auto++
		default:
			if n, err := strconv.Atoi(field); err == nil {
				if n >= len(args) {
					return nil, errorf(line, "format: index out of range")
				}
				v = args[n]
			} else if kw != nil {
				v = argOr(nil, kw, 0, field, nil)
			}
		}
		b.WriteString(toStr(v))
	}
	return b.String(), nil
}

// isPrintable is Python's str.isprintable() for one character.
func isPrintable(r rune) bool { return unicode.IsPrint(r) }

// sortBy sorts items stably by key, Jinja's order (reversed with
// reverse), as the sort and dictsort filters do; the first comparison
// error, if any, is returned.
func sortBy(items []any, key func(Value) Value, reverse bool, line int) error {
	var serr error
	sort.SliceStable(items, func(i, j int) bool {
		c, err := order(key(items[i]), key(items[j]), line, "<")
		if err != nil && serr == nil {
			serr = err
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	return serr
}

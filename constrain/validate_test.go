package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// validate checks doc against schema with a small JSON Schema validator of
// its own (the keywords JSONSchema enforces, with their standard meaning;
// strict makes every property required), independent of the grammar.
func validate(doc string, schema any, strict bool) error {
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("does not parse: %v", err)
	}
	if d.More() {
		return fmt.Errorf("data after the value")
	}
	return (&validator{root: schema, strict: strict}).check(v, schema, "")
}

type validator struct {
	root   any
	strict bool
}

func typeOf(v any) string {
	switch v := v.(type) {
	case map[string]any:
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

func (c *validator) check(v, s any, at string) error {
	if b, ok := s.(bool); ok {
		if !b {
			return fmt.Errorf("%s: schema false", at)
		}
		return nil
	}
	o := s.(map[string]any)
	if r, ok := o["$ref"].(string); ok {
		t := c.root
		if r != "#" {
			for _, p := range strings.Split(r[2:], "/") {
				t = t.(map[string]any)[p]
			}
		}
		return c.check(v, t, at)
	}
	if cv, ok := o["const"]; ok && !sameJSON(v, cv) {
		return fmt.Errorf("%s: not the const", at)
	}
	if e, ok := o["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || sameJSON(v, x)
		}
		if !found {
			return fmt.Errorf("%s: not in the enum", at)
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if subs, ok := o[kw].([]any); ok {
			var errs []string
			for _, sub := range subs {
				err := c.check(v, sub, at)
				if err == nil {
					errs = nil
					break
				}
				errs = append(errs, err.Error())
			}
			if errs != nil {
				return fmt.Errorf("%s: no %s branch: %v", at, kw, errs)
			}
		}
	}
	if subs, ok := o["allOf"].([]any); ok {
		for _, sub := range subs {
			if err := c.check(v, sub, at); err != nil {
				return err
			}
		}
	}
	t := typeOf(v)
	if ty, ok := o["type"]; ok {
		var types []string
		switch ty := ty.(type) {
		case string:
			types = []string{ty}
		case []any:
			for _, x := range ty {
				types = append(types, x.(string))
			}
		}
		if n, _ := o["nullable"].(bool); n {
			types = append(types, "null")
		}
		okType := false
		for _, want := range types {
			okType = okType || want == t || (want == "number" && t == "integer")
		}
		if !okType {
			return fmt.Errorf("%s: %s is not of type %v", at, t, types)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := o["properties"].(map[string]any)
		req, _ := o["required"].([]any)
		if c.strict {
			req = nil
			for k := range props {
				req = append(req, k)
			}
		}
		for _, r := range req {
			if _, ok := v[r.(string)]; !ok {
				return fmt.Errorf("%s: %q missing", at, r)
			}
		}
		for k, x := range v {
			if ps, ok := props[k]; ok {
				if err := c.check(x, ps, at+"/"+k); err != nil {
					return err
				}
				continue
			}
			if ap, ok := o["additionalProperties"]; ok {
				if err := c.check(x, ap, at+"/"+k); err != nil {
					return fmt.Errorf("%s: additional property %q: %v", at, k, err)
				}
			}
		}
	case []any:
		prefix, _ := o["prefixItems"].([]any)
		for i, x := range v {
			var s any = true
			if i < len(prefix) {
				s = prefix[i]
			} else if it, ok := o["items"]; ok {
				s = it
			}
			if err := c.check(x, s, fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
		if n, ok := o["minItems"].(float64); ok && float64(len(v)) < n {
			return fmt.Errorf("%s: %d items < minItems", at, len(v))
		}
		if n, ok := o["maxItems"].(float64); ok && float64(len(v)) > n {
			return fmt.Errorf("%s: %d items > maxItems", at, len(v))
		}
	case string:
		n := float64(utf8.RuneCountInString(v))
		if m, ok := o["minLength"].(float64); ok && n < m {
			return fmt.Errorf("%s: %q shorter than minLength", at, v)
		}
		if m, ok := o["maxLength"].(float64); ok && n > m {
			return fmt.Errorf("%s: %q longer than maxLength", at, v)
		}
	}
	return nil
}

// sameJSON compares two JSON values (numbers by value).
func sameJSON(a, b any) bool {
	norm := func(x any) string {
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		_ = e.Encode(renum(x))
		return buf.String()
	}
	return norm(a) == norm(b)
}

// renum turns json.Number into float64 throughout.
func renum(x any) any {
	switch x := x.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		m := map[string]any{}
		for k, v := range x {
			m[k] = renum(v)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, v := range x {
			a[i] = renum(v)
		}
		return a
	}
	return x
}

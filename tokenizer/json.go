package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// jnode is one JSON value of a file being loaded, with its path for errors.
// Every accessor checks the JSON type, so hostile input yields a LoadError
// naming the field instead of a panic.
type jnode struct {
	file string
	path string
	raw  json.RawMessage // nil when the field is absent
	// valid: raw lies in a file json.Valid accepted (rootNode), so its
	// objects, arrays and strings take fastjson.go's one-pass readers.
	valid bool
}

// jobject is a decoded JSON object.
type jobject struct {
	n jnode
	m map[string]json.RawMessage
}

func rootNode(file string, data []byte) jnode {
	return jnode{file: file, raw: data, valid: fastJSON && json.Valid(data)}
}

// fastJSON lets rootNode hand valid files to fastjson.go's readers (tests
// turn it off to compare with encoding/json's path).
var fastJSON = true

func (n jnode) errorf(format string, args ...any) error {
	return &LoadError{File: n.file, Field: n.path, Err: fmt.Errorf(format, args...)}
}

func (n jnode) wrap(err error) error {
	var le *LoadError
	if errors.As(err, &le) {
		return err
	}
	return &LoadError{File: n.file, Field: n.path, Err: err}
}

// isNull reports whether the field is absent or JSON null.
func (n jnode) isNull() bool {
	t := bytes.TrimSpace(n.raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func (n jnode) kind() string {
	t := bytes.TrimSpace(n.raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func (n jnode) child(key string) jnode {
	p := key
	if n.path != "" {
		p = n.path + "." + key
	}
	return jnode{file: n.file, path: p, valid: n.valid}
}

func (n jnode) index(i int) jnode {
	return jnode{file: n.file, path: n.path + "[" + strconv.Itoa(i) + "]", valid: n.valid}
}

func (n jnode) object() (jobject, error) {
	t := bytes.TrimSpace(n.raw)
	if len(t) == 0 || t[0] != '{' {
		return jobject{}, n.errorf("want an object, got %s", n.kind())
	}
	var m map[string]json.RawMessage
	var err error
	if n.valid {
		m, err = splitObject(t)
	} else {
		err = json.Unmarshal(t, &m)
	}
	if err != nil {
		return jobject{}, n.wrap(err)
	}
	return jobject{n: n, m: m}, nil
}

func (o jobject) get(key string) jnode {
	c := o.n.child(key)
	c.raw = o.m[key]
	return c
}

func (o jobject) has(key string) bool {
	_, ok := o.m[key]
	return ok
}

func (n jnode) array() ([]jnode, error) {
	t := bytes.TrimSpace(n.raw)
	if len(t) == 0 || t[0] != '[' {
		return nil, n.errorf("want an array, got %s", n.kind())
	}
	var a []json.RawMessage
	if n.valid {
		a = splitArray(t)
	} else if err := json.Unmarshal(t, &a); err != nil {
		return nil, n.wrap(err)
	}
	out := make([]jnode, len(a))
	for i, r := range a {
		out[i] = n.index(i)
		out[i].raw = r
	}
	return out, nil
}

func (n jnode) str() (string, error) {
	t := bytes.TrimSpace(n.raw)
	if len(t) == 0 || t[0] != '"' {
		return "", n.errorf("want a string, got %s", n.kind())
	}
	var s string
	var err error
	if n.valid {
		s, err = unquote(t)
	} else {
		err = json.Unmarshal(t, &s)
	}
	if err != nil {
		return "", n.wrap(err)
	}
	return s, nil
}

// strOr returns the string, or def when the field is absent or null.
func (n jnode) strOr(def string) (string, error) {
	if n.isNull() {
		return def, nil
	}
	return n.str()
}

// boolOr returns the boolean, or def when the field is absent or null.
func (n jnode) boolOr(def bool) (bool, error) {
	if n.isNull() {
		return def, nil
	}
	t := bytes.TrimSpace(n.raw)
	switch string(t) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, n.errorf("want a boolean, got %s", n.kind())
}

// integer returns a non-negative integer no larger than max.
func (n jnode) integer(max int) (int, error) {
	t := bytes.TrimSpace(n.raw)
	if len(t) == 0 || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		return 0, n.errorf("want an integer, got %s", n.kind())
	}
	v, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(t), 64)
		if ferr != nil || f != math.Trunc(f) || f < math.MinInt64 || f > math.MaxInt64 {
			return 0, n.errorf("want an integer, got %s", t)
		}
		v = int64(f)
	}
	if v < 0 || v > int64(max) {
		return 0, n.errorf("value %d out of range [0, %d]", v, max)
	}
	return int(v), nil
}

// integerOr returns the integer, or def when the field is absent or null.
func (n jnode) integerOr(def, max int) (int, error) {
	if n.isNull() {
		return def, nil
	}
	return n.integer(max)
}

// typeName returns the "type" field of an object.
func (o jobject) typeName() (string, error) {
	return o.get("type").str()
}

// patternNode decodes {"String": s} or {"Regex": r}, the HF pattern enum.
func (n jnode) pattern() (p string, isRegex bool, err error) {
	o, err := n.object()
	if err != nil {
		return "", false, err
	}
	if o.has("String") {
		s, err := o.get("String").str()
		return s, false, err
	}
	if o.has("Regex") {
		s, err := o.get("Regex").str()
		return s, true, err
	}
	return "", false, n.errorf(`want {"String": ...} or {"Regex": ...}`)
}

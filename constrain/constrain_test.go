package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// accepts runs doc through a fresh matcher of g and returns the offset of
// the first byte rejected (-1: none) and whether the whole is complete.
func accepts(g *Grammar, doc string) (int, bool) {
	m := NewMatcher(g, NewVocab(nil), nil)
	for i := 0; i < len(doc); i++ {
		if !m.AcceptBytes([]byte{doc[i]}) {
			return i, false
		}
	}
	return -1, m.Complete()
}

var validObjects = []string{
	`{}`,
	`{ }`,
	`{"a":1}`,
	`{"a": 1, "b": [true, false, null], "c": {"d": "e"}}`,
	"{\n  \"a\": [\n    1,\n    2.5e-3\n  ],\n  \"b\": \"\\u00e9\\n\\\"q\\\"\"\n}",
	`{"k":"héllo wörld 日本 😀"}`,
	`{"neg":-0,"f":-12.75,"e":1E+10,"z":0.0}`,
	`{"nested":[[[]],[{}],{"x":[1,[2,[3]]]}]}`,
	`{"":""}`,
	`{"ctrl":"\b\f\r\t\/"}`,
}

// invalidObjects are invalid documents with the offset of the first byte no
// valid document can continue with.
var invalidObjects = []struct {
	doc string
	at  int
}{
	{`[]`, 0},
	{` {}`, 0},
	{`{"a" 1}`, 5},
	{`{"a":01}`, 6},
	{`{"a":1,}`, 7},
	{`{'a':1}`, 1},
	{`{"a":tru}`, 8},
	{`{"a":"x` + "\n" + `"}`, 7},
	{`{"a":"\x"}`, 7},
	{`{"a":"\u12g4"}`, 10},
	{`{"a":1.}`, 7},
	{`{"a":1e}`, 7},
	{`{"a":[1 2]}`, 8},
	{`{"a":"` + "\xff" + `"}`, 6},
	{`{"a":"` + "\xc3\x28" + `"}`, 7},
	{`{"a":"` + "\xed\xa0\x80" + `"}`, 7}, // a surrogate in UTF-8
	{`{}}`, 2},
	{`{} x`, 2},
	{"{}\n", 2},
	{"{\n" + strings.Repeat(" ", MaxIndent+1) + "}", 2 + MaxIndent},
	{`{"a":` + strings.Repeat("1", MaxIntDigits+1) + `}`, 5 + MaxIntDigits},
	{`{"a":  1}`, 6},
	{"{\"tab\":\t1}", 7}, // whitespace is "", " " or "\n" and indentation
}

func TestJSONObjectCorpus(t *testing.T) {
	g := JSONObject()
	for _, doc := range validObjects {
		if !json.Valid([]byte(doc)) {
			t.Fatalf("corpus bug: %q is not valid JSON", doc)
		}
		at, complete := accepts(g, doc)
		if at >= 0 || !complete {
			t.Errorf("%q: rejected at byte %d (complete %v)", doc, at, complete)
		}
		// Every proper prefix is accepted and incomplete (but where a
		// prefix is itself a document).
		for n := 0; n < len(doc); n++ {
			at, complete := accepts(g, doc[:n])
			if at >= 0 {
				t.Errorf("%q: prefix of %d bytes rejected at %d", doc, n, at)
			}
			if complete && !json.Valid([]byte(doc[:n])) {
				t.Errorf("%q: prefix %q reported complete", doc, doc[:n])
			}
		}
	}
	for _, c := range invalidObjects {
		at, _ := accepts(g, c.doc)
		if at != c.at {
			t.Errorf("%q: rejected at byte %d, want %d", c.doc, at, c.at)
		}
	}
}

// withinBounds reports whether a valid JSON document's numbers fit the
// grammar's digit bounds.
func withinBounds(doc []byte) bool {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return true
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		s := strings.TrimPrefix(string(n), "-")
		mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
		ip, fp, _ := strings.Cut(mant, ".")
		exp = strings.TrimLeft(exp, "+-")
		if len(ip) > MaxIntDigits || len(fp) > MaxFracDigits || (hasExp && len(exp) > MaxExpDigits) {
			return false
		}
	}
}

// checkAgainstEncodingJSON holds the automaton to encoding/json on doc: what
// it accepts whole is valid JSON (an object for json_object), and a valid
// object, compacted, is accepted when its numbers fit the bounds.
func checkAgainstEncodingJSON(t *testing.T, g *Grammar, doc []byte) {
	at, complete := accepts(g, string(doc))
	valid := json.Valid(doc)
	if at < 0 && complete {
		if !valid || bytes.TrimSpace(doc)[0] != '{' {
			t.Fatalf("%q: accepted, but encoding/json says valid=%v", doc, valid)
		}
	}
	if !valid {
		return
	}
	var c bytes.Buffer
	if err := json.Compact(&c, doc); err != nil {
		t.Fatal(err)
	}
	// encoding/json accepts invalid UTF-8 inside strings; the grammar
	// does not (the text must decode).
	if c.Len() == 0 || c.Bytes()[0] != '{' || !withinBounds(c.Bytes()) || !utf8.Valid(doc) {
		return
	}
	if at, complete := accepts(g, c.String()); at >= 0 || !complete {
		t.Fatalf("%q: a valid object rejected at byte %d (complete %v)", c.String(), at, complete)
	}
}

func FuzzJSONObject(f *testing.F) {
	for _, d := range validObjects {
		f.Add([]byte(d))
	}
	for _, c := range invalidObjects {
		f.Add([]byte(c.doc))
	}
	g := JSONObject()
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 4096 {
			return
		}
		checkAgainstEncodingJSON(t, g, doc)
	})
}

// TestJSONObjectRandom runs the fuzz property over random documents that
// encoding/json writes (compact and indented) and over their mutations.
func TestJSONObjectRandom(t *testing.T) {
	g := JSONObject()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		v := map[string]any{}
		for k := 0; k < r.IntN(4); k++ {
			v[randString(r)] = randValue(r, 3)
		}
		doc, _ := json.Marshal(v)
		checkAgainstEncodingJSON(t, g, doc)
		if at, complete := accepts(g, string(doc)); at >= 0 || !complete {
			t.Fatalf("%s rejected at %d", doc, at)
		}
		ind, _ := json.MarshalIndent(v, "", "  ")
		if at, complete := accepts(g, string(ind)); at >= 0 || !complete {
			t.Fatalf("%s rejected at %d", ind, at)
		}
		for m := 0; m < 5; m++ {
			mut := append([]byte(nil), doc...)
			mut[r.IntN(len(mut))] = "{}[]\",:0-.eE \\atn\n"[r.IntN(18)]
			checkAgainstEncodingJSON(t, g, mut)
		}
	}
}

func randString(r *rand.Rand) string {
	const chars = "abcxyz _-\"\\\n\té日😀<>&"
	rs := []rune(chars)
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteRune(rs[r.IntN(len(rs))])
	}
	return b.String()
}

func randValue(r *rand.Rand, depth int) any {
	k := r.IntN(7)
	if depth == 0 {
		k = 2 + r.IntN(5)
	}
	switch k {
	case 0:
		m := map[string]any{}
		for range r.IntN(3) {
			m[randString(r)] = randValue(r, depth-1)
		}
		return m
	case 1:
		a := []any{}
		for range r.IntN(3) {
			a = append(a, randValue(r, depth-1))
		}
		return a
	case 2:
		return randString(r)
	case 3:
		return r.IntN(2000) - 1000
	case 4:
		return float64(r.IntN(1e6)) / 1000
	case 5:
		return r.IntN(2) == 0
	}
	return nil
}

// byteVocab is a vocabulary of the 256 single bytes plus multi-byte
// tokens, for generation in tests.
func byteVocab(extra ...string) *Vocab {
	toks := make([][]byte, 256, 256+len(extra))
	for c := range toks {
		toks[c] = []byte{byte(c)}
	}
	for _, e := range extra {
		toks = append(toks, []byte(e))
	}
	return NewVocab(toks)
}

// generate draws a random document through the matcher over a byte
// vocabulary: a random allowed token each step, closing brackets and quotes
// preferred once the document is long; "" if it does not end.
func generate(r *rand.Rand, g *Grammar, v *Vocab, stop int) (string, error) {
	m := NewMatcher(g, v, []int{stop})
	var out []byte
	for len(out) < 20000 {
		mask := m.Mask()
		var allowed []int
		for id := 0; id < v.Size(); id++ {
			if Has(mask, id) {
				allowed = append(allowed, id)
			}
		}
		if len(allowed) == 0 {
			return "", fmt.Errorf("no token allowed after %q", out)
		}
		for _, id := range allowed {
			if !m.Allowed(id) {
				return "", fmt.Errorf("mask has token %d (%q) that Allowed refuses after %q", id, v.Token(id), out)
			}
		}
		if Has(mask, stop) && (r.IntN(4) == 0 || len(allowed) == 1 || len(out) > 300) {
			return string(out), nil
		}
		id := allowed[r.IntN(len(allowed))]
		if len(out) > 300 {
			for _, pref := range []string{"\"", "}", "]", "0", "n"} {
				if Has(mask, int(pref[0])) {
					id = int(pref[0])
					break
				}
			}
		}
		if id == stop {
			continue
		}
		if err := m.Accept(id); err != nil {
			return "", err
		}
		out = append(out, v.Token(id)...)
	}
	return "", nil
}

// schemaCases are schemas with documents they admit and reject (checked
// with the test's validator too).
var schemaCases = []struct {
	name, schema string
	strict       bool
	good, bad    []string
}{
	{name: "person", schema: `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["name","age"],"additionalProperties":false}`,
		good: []string{`{"name":"Ann","age":3}`, `{"name":"B","age":-1,"tags":["x"]}`, `{"name":"日本","age":0,"tags":[]}`},
		bad:  []string{`{"name":"","age":1}`, `{"name":"Ann","age":1.5}`, `{"name":"Ann"}`, `{"name":"Ann","age":1,"x":1}`, `{"name":"Ann","age":1,"tags":["a","b","c","d"]}`}},
	{name: "strict", schema: `{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":["string","null"]}}}`, strict: true,
		good: []string{`{"a":true,"b":null}`, `{"a":false,"b":"x"}`}, bad: []string{`{"a":true}`, `{"b":null}`, `{}`}},
	{name: "optional", schema: `{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},"required":["b"]}`,
		good: []string{`{"b":null}`, `{"a":true,"b":null}`, `{"b":null,"c":1.5}`, `{"a":false,"b":null,"c":-2e3}`}, bad: []string{`{}`, `{"a":true,"c":1}`, `{"b":1}`}},
	{name: "const with enum (pydantic's one-member Enum)", schema: `{"type":"object","properties":{"k":{"const":"a","enum":["a"],"title":"K","type":"string"}},"required":["k"],"additionalProperties":false}`,
		good: []string{`{"k":"a"}`}, bad: []string{`{"k":"b"}`, `{"k":1}`, `{}`}},
	{name: "discriminated union (pydantic)", schema: `{"$defs":{"Cat":{"type":"object","properties":{"pet_type":{"const":"cat","type":"string"},"meows":{"type":"integer"}},"required":["pet_type","meows"],"additionalProperties":false},` +
		`"Dog":{"type":"object","properties":{"pet_type":{"const":"dog","type":"string"},"barks":{"type":"number"}},"required":["pet_type","barks"],"additionalProperties":false}},` +
		`"type":"object","properties":{"pet":{"oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],"discriminator":{"propertyName":"pet_type","mapping":{"cat":"#/$defs/Cat","dog":"#/$defs/Dog"}}}},"required":["pet"],"additionalProperties":false}`,
		good: []string{`{"pet":{"pet_type":"cat","meows":3}}`, `{"pet":{"pet_type":"dog","barks":1.5}}`}, bad: []string{`{"pet":{"pet_type":"cat","barks":1}}`, `{"pet":{"pet_type":"cow","meows":1}}`}},
	{name: "enum", schema: `{"enum":["red","green",1,null,{"x":[1,2]},"a\"<b"]}`,
		good: []string{`"red"`, `1`, `null`, `{"x":[1,2]}`, `"a\"<b"`}, bad: []string{`"blue"`, `2`, `{"x":[1]}`}},
	{name: "const", schema: `{"type":"object","properties":{"kind":{"const":"point"},"xy":{"type":"array","prefixItems":[{"type":"number"},{"type":"number"}],"items":false,"minItems":2}},"required":["kind","xy"]}`,
		good: []string{`{"kind":"point","xy":[1,2]}`}, bad: []string{`{"kind":"line","xy":[1,2]}`, `{"kind":"point","xy":[1]}`, `{"kind":"point","xy":[1,2,3]}`}},
	{name: "anyOf", schema: `{"anyOf":[{"type":"integer"},{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]},{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4}]}`,
		good: []string{`5`, `{"v":"x"}`, `[1,2]`, `[1,2,3,4]`}, bad: []string{`"s"`, `[1]`, `[1,2,3,4,5]`, `{}`}},
	{name: "defs", schema: `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value","children"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		good: []string{`{"value":1,"children":[]}`, `{"value":1,"children":[{"value":2,"children":[]}]}`}, bad: []string{`{"value":1}`, `{"value":1,"children":[{"value":2}]}`}},
	{name: "definitions", schema: `{"definitions":{"id":{"type":"string","minLength":2,"maxLength":2}},"type":"object","properties":{"ids":{"type":"array","items":{"$ref":"#/definitions/id"},"minItems":1}},"required":["ids"]}`,
		good: []string{`{"ids":["ab"]}`, `{"ids":["ab","\u00e9x"]}`}, bad: []string{`{"ids":[]}`, `{"ids":["abc"]}`}},
	{name: "map", schema: `{"type":"object","additionalProperties":{"type":"integer"}}`,
		good: []string{`{}`, `{"a":1,"b":2}`}, bad: []string{`{"a":"x"}`}},
	{name: "nullable", schema: `{"type":"string","nullable":true,"maxLength":3}`,
		good: []string{`null`, `"abc"`}, bad: []string{`"abcd"`, `1`}},
	{name: "any", schema: `{}`, good: []string{`1`, `[]`, `{"a":null}`}, bad: []string{`tru`}},
}

func TestSchemaDocuments(t *testing.T) {
	for _, c := range schemaCases {
		g, err := JSONSchema([]byte(c.schema), SchemaOptions{Strict: c.strict})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var schema any
		if err := json.Unmarshal([]byte(c.schema), &schema); err != nil {
			t.Fatal(err)
		}
		for _, d := range c.good {
			if err := validate(d, schema, c.strict); err != nil {
				t.Fatalf("%s: test bug: %s: %v", c.name, d, err)
			}
			if at, complete := accepts(g, d); at >= 0 || !complete {
				t.Errorf("%s: %s rejected at byte %d (complete %v)", c.name, d, at, complete)
			}
		}
		for _, d := range c.bad {
			if err := validate(d, schema, c.strict); err == nil {
				t.Fatalf("%s: test bug: %s is valid", c.name, d)
			}
			if at, complete := accepts(g, d); at < 0 && complete {
				t.Errorf("%s: %s accepted", c.name, d)
			}
		}
	}
}

// TestSchemaGeneration draws random documents through each schema's
// automaton: every one parses and satisfies the schema.
func TestSchemaGeneration(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 20
	}
	v := byteVocab(`{"`, `":`, `",`, `"}`, `true`, `null`, ` "`, `123`, "\n  ", `name`, `é`, "\xe6\x97", "\xa5")
	stop := v.Size()
	toks := make([][]byte, stop+1)
	for i := range stop {
		toks[i] = v.Token(i)
	}
	v = NewVocab(toks) // the stop token has no bytes
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range append(schemaCases, struct {
		name, schema string
		strict       bool
		good, bad    []string
	}{name: "json_object"}) {
		g := JSONObject()
		var schema any = map[string]any{"type": "object"}
		if c.schema != "" {
			var err error
			if g, err = JSONSchema([]byte(c.schema), SchemaOptions{Strict: c.strict}); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(c.schema), &schema); err != nil {
				t.Fatal(err)
			}
		}
		ended := 0
		for range n {
			doc, err := generate(r, g, v, stop)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if doc == "" {
				continue
			}
			ended++
			if !json.Valid([]byte(doc)) {
				t.Fatalf("%s: generated %q, not valid JSON", c.name, doc)
			}
			if err := validate(doc, schema, c.strict); err != nil {
				t.Fatalf("%s: generated %q: %v", c.name, doc, err)
			}
		}
		if ended < n/2 {
			t.Errorf("%s: only %d of %d generations ended", c.name, ended, n)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, c := range []struct{ schema, keyword, path string }{
		{`{"type":"string","pattern":"^a"}`, "pattern", ""},
		{`{"type":"string","format":"date"}`, "format", ""},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}`, "minimum", "/properties/n"},
		{`{"type":"array","uniqueItems":true}`, "uniqueItems", ""},
		{`{"type":"object","properties":{"a":{}},"additionalProperties":true}`, "additionalProperties", ""},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, "required", ""},
		{`{"type":"strung"}`, "type", ""},
		{`{"allOf":[{},{}]}`, "allOf", ""},
		{`{"$ref":"https://example.com/s.json"}`, "$ref", ""},
		{`{"$ref":"#/$defs/missing"}`, "$ref", ""},
		{`{"type":"string","minLength":5,"maxLength":2}`, "maxLength", ""},
		{`{"enum":[1],"type":"string"}`, "enum", ""},
		{`{"const":"a","enum":["b"]}`, "enum", ""},
		{`{"not":{}}`, "not", ""},
		{`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "", ""},
		// An object that requires itself: no finite document.
		{`{"$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}},"$ref":"#/$defs/a"}`, "", ""},
		{`{"type":"array","minItems":1000000000}`, "", ""},
		{`{"type":"array","maxItems":1000000000}`, "", ""},
	} {
		_, err := JSONSchema([]byte(c.schema), SchemaOptions{})
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: error %v, want a *SchemaError", c.schema, err)
			continue
		}
		if se.Keyword != c.keyword || se.Path != c.path {
			t.Errorf("%s: keyword %q at %q, want %q at %q (%v)", c.schema, se.Keyword, se.Path, c.keyword, c.path, err)
		}
	}
	if _, err := JSONSchema([]byte(`{`), SchemaOptions{}); err == nil {
		t.Error("invalid JSON compiled")
	}
	if _, err := JSONSchema([]byte(`false`), SchemaOptions{}); err == nil {
		t.Error("the schema false compiled")
	}
}

// TestUnproductivePruned: a branch that can never end (an object that
// requires itself) is dropped, so decoding cannot start it; the other
// branches, and a recursion that can end, are kept.
func TestUnproductivePruned(t *testing.T) {
	endless := `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"],"additionalProperties":false}`
	g, err := JSONSchema([]byte(`{"$defs":{"a":`+endless+`},"anyOf":[{"type":"integer"},{"$ref":"#/$defs/a"}]}`), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		doc      string
		badAt    int // the first byte refused, -1: none
		complete bool
	}{{"12", -1, true}, {`{"x":`, 0, false}} {
		if at, ok := accepts(g, c.doc); at != c.badAt || ok != c.complete {
			t.Errorf("%s: refused at %d, complete %v; want %d, %v", c.doc, at, ok, c.badAt, c.complete)
		}
	}
	// A recursion with a way out stays whole.
	g, err = JSONSchema([]byte(`{"$defs":{"a":{"type":"object","properties":{"x":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/a"}]}},"required":["x"],"additionalProperties":false}},"$ref":"#/$defs/a"}`), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := accepts(g, `{"x":{"x":{"x":null}}}`); at != -1 || !ok {
		t.Errorf("a finite nesting: refused at %d, complete %v", at, ok)
	}
}

// TestMaskMatchesAllowed compares the trie walk with a check of every
// token, along random documents, over a vocabulary of random pieces.
func TestMaskMatchesAllowed(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	toks := synthVocab(r, 3000)
	stop := len(toks)
	toks = append(toks, nil)
	v := NewVocab(toks)
	for _, schema := range []string{"", schemaCases[0].schema, schemaCases[5].schema, schemaCases[6].schema} {
		g := JSONObject()
		if schema != "" {
			var err error
			if g, err = JSONSchema([]byte(schema), SchemaOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		m := NewMatcher(g, v, []int{stop})
		for step := 0; step < 80; step++ {
			mask := m.Mask()
			var allowed []int
			for id := range toks {
				ok := m.Allowed(id)
				if ok != Has(mask, id) {
					t.Fatalf("step %d: token %d (%q): Allowed %v, mask %v", step, id, toks[id], ok, !ok)
				}
				if ok && id != stop {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				break
			}
			if err := m.Accept(allowed[r.IntN(len(allowed))]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// synthVocab returns n random byte strings in the style of a byte-level BPE
// vocabulary: every single byte, then words, punctuation runs and JSON-ish
// pieces of 2-12 bytes, some with a leading space, some UTF-8.
func synthVocab(r *rand.Rand, n int) [][]byte {
	seen := map[string]bool{}
	var toks [][]byte
	addTok := func(s string) {
		if !seen[s] && len(toks) < n {
			seen[s] = true
			toks = append(toks, []byte(s))
		}
	}
	for c := 0; c < 256; c++ {
		addTok(string([]byte{byte(c)}))
	}
	for _, s := range []string{`{"`, `":`, `",`, `"}`, `":"`, `","`, `": "`, `", "`, "\n", "\n  ", "  ", "true", "false", "null", "}\n", "},", "],", "[]", "{}", `\"`, `\n`, "0.", "00", "123"} {
		addTok(s)
	}
	const letters = "etaoinshrdlucmfwypvbgkqjxz"
	const punct = `{}[]":,.-_ 0123456789\/()'!?`
	for len(toks) < n {
		var b []byte
		if r.IntN(3) == 0 {
			b = append(b, ' ')
		}
		switch k := r.IntN(10); {
		case k < 6:
			for range 1 + r.IntN(10) {
				b = append(b, letters[min(r.IntN(len(letters)), r.IntN(len(letters)))])
			}
		case k < 8:
			for range 1 + r.IntN(4) {
				b = append(b, punct[r.IntN(len(punct))])
			}
		case k < 9:
			b = append(b, []string{"é", "日本", "ü", "ñ", "中", "😀", "\xe6\x97", "\x9c"}[r.IntN(8)]...)
		default:
			for range 1 + r.IntN(4) {
				b = append(b, "0123456789"[r.IntN(10)])
			}
		}
		addTok(string(b))
	}
	return toks
}

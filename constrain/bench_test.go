package constrain

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

// vocab128K is a synthetic byte-level vocabulary of 128K tokens (Llama 3's
// size), built once.
var vocab128K = func() func() ([][]byte, *Vocab) {
	var toks [][]byte
	var v *Vocab
	return func() ([][]byte, *Vocab) {
		if v == nil {
			toks = synthVocab(rand.New(rand.NewPCG(5, 6)), 128256)
			toks = append(toks, nil) // the stop token
			v = NewVocab(toks)
		}
		return toks, v
	}
}()

// tokenizeGreedy cuts doc into the longest vocabulary tokens.
func tokenizeGreedy(toks [][]byte, doc string) []int {
	byStr := map[string]int{}
	longest := 0
	for id, t := range toks {
		if len(t) > 0 {
			byStr[string(t)] = id
			longest = max(longest, len(t))
		}
	}
	var ids []int
	for i := 0; i < len(doc); {
		for n := min(longest, len(doc)-i); n >= 1; n-- {
			if id, ok := byStr[doc[i:i+n]]; ok {
				ids = append(ids, id)
				i += n
				break
			}
		}
	}
	return ids
}

const benchDoc = `{"name": "Ada Lovelace", "born": 1815, "fields": ["mathematics", "computing"], "notes": {"engine": "analytical", "year": 1843.5, "published": true}}`

// benchSchema is a schema benchDoc satisfies.
const benchSchema = `{"type":"object","properties":{"name":{"type":"string"},"born":{"type":"integer"},"fields":{"type":"array","items":{"type":"string"}},"notes":{"type":"object","properties":{"engine":{"type":"string"},"year":{"type":"number"},"published":{"type":"boolean"}},"required":["engine","year","published"]}},"required":["name","born","fields","notes"]}`

// maskTimes walks benchDoc's tokens through a fresh matcher of g and
// returns the time of each step's Mask (cold: the grammar's cache empty at
// the start; the document's later steps may hit states seen earlier), then
// the same walk again (warm).
func maskTimes(t testing.TB, g *Grammar, toks [][]byte, v *Vocab) (cold, warm []time.Duration) {
	ids := tokenizeGreedy(toks, benchDoc)
	stop := len(toks) - 1
	for pass := 0; pass < 2; pass++ {
		m := NewMatcher(g, v, []int{stop})
		for _, id := range ids {
			start := time.Now()
			mask := m.Mask()
			d := time.Since(start)
			if !Has(mask, id) {
				t.Fatalf("token %q of the document not in the mask", toks[id])
			}
			if pass == 0 {
				cold = append(cold, d)
			} else {
				warm = append(warm, d)
			}
			if err := m.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
		if !Has(m.Mask(), stop) {
			t.Fatal("the stop token is not allowed after the document")
		}
	}
	return cold, warm
}

func quantiles(d []time.Duration) (p50, p90, maxD time.Duration, sum time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	for _, x := range s {
		sum += x
	}
	return s[len(s)/2], s[len(s)*9/10], s[len(s)-1], sum
}

// TestMaskCost128K logs the per-step cost of masks over a 128K-token
// vocabulary (the numbers docs/serving.md quotes) and checks that a cached
// mask costs well under a millisecond.
func TestMaskCost128K(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 128K-token vocabulary")
	}
	toks, v := vocab128K()
	gs, err := JSONSchema([]byte(benchSchema), SchemaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		g    *Grammar
	}{{"json_object", JSONObject()}, {"json_schema", gs}} {
		cold, warm := maskTimes(t, c.g, toks, v)
		p50, p90, mx, sum := quantiles(cold)
		w50, w90, wmx, _ := quantiles(warm)
		t.Logf("%s, %d steps: cold p50 %v p90 %v max %v (total %v); cached p50 %v p90 %v max %v",
			c.name, len(cold), p50, p90, mx, sum, w50, w90, wmx)
		if w90 > time.Millisecond {
			t.Errorf("%s: cached masks cost %v at p90, want < 1ms", c.name, w90)
		}
	}
}

// BenchmarkMaskCold measures one uncached mask inside a string value over
// the 128K vocabulary (the largest walk: most tokens are allowed).
func BenchmarkMaskCold(b *testing.B) {
	toks, v := vocab128K()
	_ = toks
	for b.Loop() {
		g := JSONObject()
		m := NewMatcher(g, v, nil)
		m.AcceptBytes([]byte(`{"name": "Ada`))
		m.Mask()
	}
}

// BenchmarkAllowed measures checking one token (the greedy path's test of
// its top candidate).
func BenchmarkAllowed(b *testing.B) {
	toks, v := vocab128K()
	g := JSONObject()
	m := NewMatcher(g, v, nil)
	m.AcceptBytes([]byte(`{"name": "Ada`))
	id := tokenizeGreedy(toks, " Lovelace")[0]
	for b.Loop() {
		if !m.Allowed(id) {
			b.Fatal("not allowed")
		}
	}
}

// ambiguousCase is a schema that keeps several parses alive, with a
// document it admits.
type ambiguousCase struct {
	name, schema, doc string
}

// sharedPrefix is an anyOf of n objects that all start with property "a"
// (schema a), then a property of their own, required or not.
func sharedPrefix(n int, a string, required bool) string {
	var bs []string
	for i := range n {
		req := `"a"`
		if required {
			req = fmt.Sprintf(`"a","b%d"`, i)
		}
		bs = append(bs, fmt.Sprintf(`{"type":"object","properties":{"a":%s,"b%d":{"type":"integer"}},"required":[%s]}`, a, i, req))
	}
	return `{"anyOf":[` + strings.Join(bs, ",") + `]}`
}

// levels is levels levels of sharedPrefix(n), each level's "a" the next
// level (through $ref): the parses multiply, n^levels of them without
// sharing.
func levels(n, levels int, required bool) string {
	var defs []string
	for l := range levels {
		inner := `{"type":"string"}`
		if l < levels-1 {
			inner = fmt.Sprintf(`{"$ref":"#/$defs/l%d"}`, l+1)
		}
		defs = append(defs, fmt.Sprintf(`"l%d":%s`, l, sharedPrefix(n, inner, required)))
	}
	return `{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/l0"}`
}

// ambiguousCases are the schemas of BenchmarkMaskAmbiguous: anyOf branches
// sharing a prefix (every parse stays alive while it lasts), up to the
// 256 KB a schema may have; the shapes measured beside them in session 18
// (string branches, nested arrays, a recursive $ref); and the common
// schemas of TestMaskCost128K.
func ambiguousCases() []ambiguousCase {
	var strs []string
	for i := range 300 {
		strs = append(strs, fmt.Sprintf(`{"const":"value number %d"}`, i))
	}
	nested := `{"type":"string"}`
	for range 60 {
		nested = `{"type":"array","items":` + nested + `}`
	}
	// 60 shapes of a node sharing "kids", 25 levels deep.
	var kinds []string
	for i := range 60 {
		kinds = append(kinds, fmt.Sprintf(`{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},"x%d":{"type":"integer"}},"required":["kids"]}`, i))
	}
	deep := `[]`
	for range 25 {
		deep = `[{"kids": ` + deep + `}]`
	}
	// 500 objects sharing ten string properties.
	var props []string
	for k := range 10 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, k))
	}
	var long []string
	for i := range 500 {
		long = append(long, fmt.Sprintf(`{"type":"object","properties":{%s,"z%d":{"type":"integer"}}}`, strings.Join(props, ","), i))
	}
	str := `{"type":"string"}`
	return []ambiguousCase{
		{"object", `{"type":"object"}`, benchDoc},
		{"schema", benchSchema, benchDoc},
		{"objects300", sharedPrefix(300, str, true), `{"a": "the same prefix for every branch", "b217": 42}`},
		{"objects2400", sharedPrefix(2400, str, true), `{"a": "the same prefix for every branch", "b217": 42}`},
		{"levels300x3", levels(300, 3, true), `{"a": {"a": {"a": "the same prefix", "b1": 1}, "b22": 2}, "b217": 3}`},
		{"optional300x3", levels(300, 3, false), `{"a": {"a": {"a": "the same prefix"}}}`},
		{"long500", `{"anyOf":[` + strings.Join(long, ",") + `]}`,
			`{"p0": "a", "p1": "b", "p2": "c", "p3": "d", "p4": "e", "p5": "f", "p6": "g", "p7": "h", "p8": "i", "p9": "j", "z17": 1}`},
		{"strings300", `{"anyOf":[` + strings.Join(strs, ",") + `]}`, `"value number 217"`},
		{"nested60", nested, strings.Repeat("[", 60) + `"deep inside"` + strings.Repeat("]", 60)},
		{"recursive", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name","kids"]}},"$ref":"#/$defs/node"}`,
			`{"name": "root", "kids": [{"name": "a", "kids": [{"name": "b", "kids": []}]}, {"name": "c", "kids": []}]}`},
		{"kinds60x25", `{"$defs":{"n":{"anyOf":[` + strings.Join(kinds, ",") + `]}},"$ref":"#/$defs/n"}`, `{"kids": ` + deep + `}`},
	}
}

// BenchmarkMaskAmbiguous walks each ambiguousCases document through a
// fresh grammar (every mask cold but for states the walk meets twice) over
// the 128K vocabulary; ns/op is one document, and max-ms the slowest
// step's mask.
func BenchmarkMaskAmbiguous(b *testing.B) {
	toks, v := vocab128K()
	stop := len(toks) - 1
	for _, c := range ambiguousCases() {
		ids := tokenizeGreedy(toks, c.doc)
		b.Run(c.name, func(b *testing.B) {
			var slowest time.Duration
			for b.Loop() {
				g, err := JSONSchema([]byte(c.schema), SchemaOptions{})
				if err != nil {
					b.Fatal(err)
				}
				m := NewMatcher(g, v, []int{stop})
				for _, id := range ids {
					start := time.Now()
					mask := m.Mask()
					slowest = max(slowest, time.Since(start))
					if !Has(mask, id) {
						b.Fatalf("token %q of the document not in the mask", toks[id])
					}
					if err := m.Accept(id); err != nil {
						b.Fatal(err)
					}
				}
				if !Has(m.Mask(), stop) {
					b.Fatal("the stop token is not allowed after the document")
				}
			}
			b.ReportMetric(float64(slowest)/1e6, "max-ms")
		})
	}
}

package constrain

import (
	"math/rand/v2"
	"sort"
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
	schema := `{"type":"object","properties":{"name":{"type":"string"},"born":{"type":"integer"},"fields":{"type":"array","items":{"type":"string"}},"notes":{"type":"object","properties":{"engine":{"type":"string"},"year":{"type":"number"},"published":{"type":"boolean"}},"required":["engine","year","published"]}},"required":["name","born","fields","notes"]}`
	gs, err := JSONSchema([]byte(schema), SchemaOptions{})
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

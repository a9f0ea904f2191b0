package constrain

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The matcher's state before session 19, kept as the reference of the
// differential tests: a list of whole stacks, one per live parse (no
// sharing of tops), deduplicated by comparing whole stacks. Slow for
// ambiguous grammars (anyOf branches with a long shared prefix), but
// simple enough to trust.

// refStack is one live parse: a persistent list of grammar positions, the
// top a byte element; nil is a complete parse.
type refStack struct {
	pos  int32
	next *refStack
}

// refCut marks a parse that reached the grammar's elemCut.
var refCut = &refStack{pos: -1}

func refEqual(a, b *refStack) bool {
	for a != b {
		if a == nil || b == nil || a.pos != b.pos {
			return false
		}
		a, b = a.next, b.next
	}
	return true
}

func refAdd(out []*refStack, s *refStack) []*refStack {
	for _, o := range out {
		if refEqual(o, s) {
			return out
		}
	}
	return append(out, s)
}

// refExpand appends the stacks that continue at pos with rest below.
func refExpand(g *Grammar, pos int32, rest *refStack, out []*refStack) []*refStack {
	switch e := g.elems[pos]; e.kind {
	case elemByte:
		return refAdd(out, &refStack{pos: pos, next: rest})
	case elemCut:
		return refAdd(out, refCut)
	case elemEnd:
		if rest == nil {
			return refAdd(out, nil)
		}
		return refExpand(g, rest.pos, rest.next, out)
	default:
		cont := rest
		if g.elems[pos+1].kind != elemEnd {
			cont = &refStack{pos: pos + 1, next: rest}
		}
		for _, a := range g.alts[e.arg] {
			out = refExpand(g, a, cont, out)
		}
		return out
	}
}

// refStart is the reference state at the start of g.
func refStart(g *Grammar) []*refStack {
	var cur []*refStack
	for _, a := range g.alts[g.root] {
		cur = refExpand(g, a, nil, cur)
	}
	return cur
}

// refAdvance is the reference state after bytes b (empty: rejected).
func refAdvance(g *Grammar, cur []*refStack, b []byte) []*refStack {
	for _, c := range b {
		var out []*refStack
		for _, s := range cur {
			if s != nil && s != refCut && g.sets[g.elems[s.pos].arg].has(c) {
				out = refExpand(g, s.pos+1, s.next, out)
			}
		}
		if len(out) == 0 {
			return nil
		}
		cur = out
	}
	return cur
}

func refComplete(cur []*refStack) bool {
	for _, s := range cur {
		if s == nil {
			return true
		}
	}
	return false
}

// refMask is the reference mask of state cur: every token checked byte by
// byte, the stop tokens where the document is complete.
func refMask(g *Grammar, v *Vocab, cur []*refStack, stops []int) []uint64 {
	mask := make([]uint64, (v.Size()+63)/64)
	for id := range v.Size() {
		t := v.Token(id)
		isStop := false
		for _, s := range stops {
			isStop = isStop || s == id
		}
		if !isStop && len(t) > 0 && len(refAdvance(g, cur, t)) > 0 {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
	if refComplete(cur) {
		for _, id := range stops {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
	return mask
}

// randSchema returns a random schema of the enforced keywords, depth
// levels deep at most, with anyOf branches that often share a prefix
// (objects starting with the same property), the shape that keeps several
// parses alive.
func randSchema(r *rand.Rand, depth int) string {
	leaf := []string{`{"type":"string"}`, `{"type":"string","maxLength":3}`, `{"type":"integer"}`, `{"type":"number"}`,
		`{"type":"boolean"}`, `{"type":"null"}`, `{"enum":["a","ab",1,null]}`, `{"const":"ab"}`, `{}`, `{"type":["string","null"]}`}
	if depth <= 0 || r.IntN(3) == 0 {
		return leaf[r.IntN(len(leaf))]
	}
	switch r.IntN(4) {
	case 0: // an object
		n := 1 + r.IntN(3)
		var props, req []string
		for i := range n {
			name := fmt.Sprintf("p%d", i)
			props = append(props, fmt.Sprintf("%q:%s", name, randSchema(r, depth-1)))
			if r.IntN(2) == 0 {
				req = append(req, fmt.Sprintf("%q", name))
			}
		}
		return `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]}`
	case 1: // an array
		s := `{"type":"array","items":` + randSchema(r, depth-1)
		if r.IntN(2) == 0 {
			s += fmt.Sprintf(`,"minItems":%d,"maxItems":%d`, r.IntN(2), 2+r.IntN(2))
		}
		return s + `}`
	default: // anyOf, its objects sharing a first property
		shared := randSchema(r, depth-1)
		n := 2 + r.IntN(4)
		var alts []string
		for i := range n {
			if r.IntN(3) == 0 {
				alts = append(alts, randSchema(r, depth-1))
				continue
			}
			alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"k":%s,"v%d":%s},"required":["k"]}`, shared, i%3, randSchema(r, depth-1)))
		}
		return `{"anyOf":[` + strings.Join(alts, ",") + `]}`
	}
}

// TestMaskMatchesReference compares the matcher's masks (graph-structured
// state, truncated partial masks, caches) with the reference's (whole
// stacks, every token checked) at every step of random walks through
// random and ambiguous schemas.
func TestMaskMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	toks := synthVocab(r, 1500)
	for _, s := range []string{`{"a":`, `{"k":`, `":"`, `"},{"`, `"}]`, `]}`, `,"v1":`, `null}`, `""`} {
		toks = append(toks, []byte(s))
	}
	stop := len(toks)
	toks = append(toks, nil)
	v := NewVocab(toks)
	schemas := []string{"", schemaCases[0].schema, schemaCases[5].schema, schemaCases[6].schema,
		// anyOf of objects sharing their first property, nested through a $ref.
		`{"$defs":{"in":{"anyOf":[{"type":"object","properties":{"a":{"type":"string"},"x":{"type":"integer"}},"required":["a","x"]},{"type":"object","properties":{"a":{"type":"string"},"y":{"type":"null"}},"required":["a","y"]}]}},"anyOf":[{"type":"object","properties":{"a":{"$ref":"#/$defs/in"},"b":{"type":"integer"}},"required":["a","b"]},{"type":"object","properties":{"a":{"$ref":"#/$defs/in"},"c":{"type":"boolean"}},"required":["a","c"]},{"type":"array","items":{"$ref":"#/$defs/in"}}]}`,
		// recursive and ambiguous: a node is either of two shapes sharing "kids".
		`{"$defs":{"n":{"anyOf":[{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},"x":{"type":"integer"}},"required":["kids"]},{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},"y":{"type":"string"}},"required":["kids"]}]}},"$ref":"#/$defs/n"}`,
	}
	// Levels of anyOf branches sharing their first property, each level's
	// value the next level: one rule predicted from many parses at once.
	for _, width := range []int{2, 3} {
		var defs []string
		for l := range 3 {
			inner := `{"type":["string","null"]}`
			if l < 2 {
				inner = fmt.Sprintf(`{"$ref":"#/$defs/l%d"}`, l+1)
			}
			var bs []string
			for i := range width {
				bs = append(bs, fmt.Sprintf(`{"type":"object","properties":{"a":%s,"b%d":{"type":"integer"}},"required":["a"]}`, inner, i))
			}
			bs = append(bs, fmt.Sprintf(`{"type":"array","items":%s}`, inner))
			defs = append(defs, fmt.Sprintf(`"l%d":{"anyOf":[%s]}`, l, strings.Join(bs, ",")))
		}
		schemas = append(schemas, `{"$defs":{`+strings.Join(defs, ",")+`},"$ref":"#/$defs/l0"}`)
	}
	n, walks := 40, 3
	if testing.Short() {
		n, walks = 12, 1
	}
	for range n {
		schemas = append(schemas, randSchema(r, 4))
	}
	for si, schema := range schemas {
		g := JSONObject()
		if schema != "" {
			var err error
			if g, err = JSONSchema([]byte(schema), SchemaOptions{Strict: si%2 == 0}); err != nil {
				t.Fatalf("%s: %v", schema, err)
			}
		}
		for walk := range walks {
			m := NewMatcher(g, v, []int{stop})
			ref := refStart(g)
			var text []byte
			for step := 0; step < 60; step++ {
				mask, want := m.Mask(), refMask(g, v, ref, []int{stop})
				if m.Complete() != refComplete(ref) {
					t.Fatalf("schema %d %s walk %d after %q: Complete %v, reference %v", si, schema, walk, text, m.Complete(), !m.Complete())
				}
				for id := range toks {
					if Has(mask, id) != Has(want, id) {
						t.Fatalf("schema %d %s walk %d after %q: token %d (%q) in mask %v, in reference %v",
							si, schema, walk, text, id, toks[id], Has(mask, id), Has(want, id))
					}
				}
				var allowed []int
				for id := range toks {
					if Has(mask, id) && id != stop {
						allowed = append(allowed, id)
					}
				}
				if len(allowed) == 0 {
					break
				}
				id := allowed[r.IntN(len(allowed))]
				if err := m.Accept(id); err != nil {
					t.Fatal(err)
				}
				ref = refAdvance(g, ref, toks[id])
				text = append(text, toks[id]...)
			}
		}
	}
}

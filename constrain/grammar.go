// Package constrain is constrained decoding: a byte-level pushdown automaton
// that accepts exactly the JSON documents of a grammar, built for "any JSON
// object" (OpenAI's response_format json_object) or compiled from a JSON
// Schema (json_schema), and the token masks it gives over a tokenizer's
// vocabulary.
//
// A Grammar is a set of rules, each a list of alternatives, each a sequence
// of byte classes and references to rules (a context-free grammar without
// left recursion, as llama.cpp's GBNF). A Matcher runs a Grammar over the
// bytes of the generated tokens: its state is a graph-structured stack of
// grammar positions (anyOf keeps several parses alive; those at the same
// byte class share one top node, whatever lies below them), each top the
// byte class the next byte must match. A token is allowed
// if all its bytes advance the state without emptying it. Mask computes the
// set of allowed tokens by walking a trie of the vocabulary's byte strings
// together with the state (a subtree whose prefix fails is pruned whole),
// and caches it per state (the state's exact key), so the steps inside a
// string or a run of digits cost a lookup.
//
// The package knows no model, tokenizer or engine: a vocabulary is handed
// in as the byte strings of its tokens.
package constrain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) has(c byte) bool { return s[c>>6]>>(c&63)&1 != 0 }
func (s *byteSet) add(c byte)      { s[c>>6] |= 1 << (c & 63) }

// addRange adds the bytes lo..hi.
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}

// union adds the bytes of t.
func (s *byteSet) union(t *byteSet) {
	for i := range s {
		s[i] |= t[i]
	}
}

// setOf returns the set of the bytes in chars.
func setOf(chars string) byteSet {
	var s byteSet
	for i := 0; i < len(chars); i++ {
		s.add(chars[i])
	}
	return s
}

// rangeSet returns the set lo..hi.
func rangeSet(lo, hi byte) byteSet {
	var s byteSet
	s.addRange(lo, hi)
	return s
}

// sym is one symbol of a sequence while a grammar is built: a byte class, or
// a reference to a rule (ref >= 0).
type sym struct {
	set byteSet
	ref int
}

// Element kinds of a compiled grammar.
const (
	elemEnd  = iota // the end of an alternative
	elemByte        // a byte class: sets[arg]
	elemRef         // a reference to rule arg
	elemCut         // the bottom of a truncated stack (Grammar.cut)
)

// elem is one element of a compiled grammar.
type elem struct {
	kind uint8
	arg  int32
}

// Grammar is a compiled grammar. It is immutable and safe for concurrent
// use; Matchers share it.
type Grammar struct {
	elems []elem
	sets  []byteSet
	// alts[r] holds the positions in elems where rule r's alternatives start.
	alts [][]int32
	root int32 // the root rule
	cut  int32 // the position of the one elemCut
	end  int32 // the position of an elemEnd (the root's first alternative's)
	// names of the rules, for String.
	names []string

	cache maskCaches
}

// Rules returns the number of rules.
func (g *Grammar) Rules() int { return len(g.alts) }

// String renders the grammar in a GBNF-like notation, for debugging.
func (g *Grammar) String() string {
	var b strings.Builder
	for r, alts := range g.alts {
		fmt.Fprintf(&b, "%s ::=", g.names[r])
		for i, a := range alts {
			if i > 0 {
				b.WriteString(" |")
			}
			for p := a; g.elems[p].kind != elemEnd; p++ {
				e := g.elems[p]
				if e.kind == elemRef {
					fmt.Fprintf(&b, " %s", g.names[e.arg])
				} else {
					fmt.Fprintf(&b, " %s", setString(&g.sets[e.arg]))
				}
			}
			if g.elems[a].kind == elemEnd {
				b.WriteString(` ""`)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// setString renders a byte class as [..] or a quoted byte.
func setString(s *byteSet) string {
	var members []byte
	for c := 0; c < 256; c++ {
		if s.has(byte(c)) {
			members = append(members, byte(c))
		}
	}
	if len(members) == 1 {
		return fmt.Sprintf("%q", string(members))
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(members); {
		j := i
		for j+1 < len(members) && members[j+1] == members[j]+1 {
			j++
		}
		if j-i >= 2 {
			fmt.Fprintf(&b, "%s-%s", quoteByte(members[i]), quoteByte(members[j]))
		} else {
			for k := i; k <= j; k++ {
				b.WriteString(quoteByte(members[k]))
			}
		}
		i = j + 1
	}
	b.WriteByte(']')
	return b.String()
}

func quoteByte(c byte) string {
	if c > 0x20 && c < 0x7f && c != ']' && c != '-' && c != '\\' {
		return string(c)
	}
	return fmt.Sprintf(`\x%02x`, c)
}

// MaxRules bounds the rules of one grammar, so that a schema cannot make
// the server build an unbounded automaton (minLength 10^9, say).
const MaxRules = 1 << 16

// builder builds a grammar rule by rule.
type builder struct {
	rules [][][]sym
	names []string
	err   error
	memo  map[string]int // rules by a key of what they describe
}

func newBuilder() *builder { return &builder{memo: map[string]int{}} }

// declare reserves a rule to be defined later (for recursion).
func (b *builder) declare(name string) int {
	if len(b.rules) >= MaxRules && b.err == nil {
		b.err = fmt.Errorf("the grammar needs more than %d rules", MaxRules)
	}
	b.rules = append(b.rules, nil)
	b.names = append(b.names, name)
	return len(b.rules) - 1
}

// define sets the alternatives of a declared rule.
func (b *builder) define(r int, alts ...[]sym) { b.rules[r] = alts }

// rule adds a rule with the given alternatives and returns its id.
func (b *builder) rule(name string, alts ...[]sym) int {
	r := b.declare(name)
	b.define(r, alts...)
	return r
}

// memoRule returns the rule memoized under key, building it with f the
// first time.
func (b *builder) memoRule(key string, f func() int) int {
	if r, ok := b.memo[key]; ok {
		return r
	}
	r := f()
	b.memo[key] = r
	return r
}

// ref is a reference symbol to rule r.
func ref(r int) sym { return sym{ref: r} }

// cls is a byte-class symbol.
func cls(s byteSet) sym { return sym{set: s, ref: -1} }

// lit is the sequence of symbols matching s exactly.
func lit(s string) []sym {
	out := make([]sym, len(s))
	for i := 0; i < len(s); i++ {
		var set byteSet
		set.add(s[i])
		out[i] = cls(set)
	}
	return out
}

// seq concatenates sequences.
func seq(parts ...[]sym) []sym {
	var out []sym
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// one is a sequence of one symbol.
func one(s sym) []sym { return []sym{s} }

// star returns a rule matching x repeated zero or more times
// (right-recursive: the stack does not grow with the count).
func (b *builder) star(name string, x []sym) int {
	r := b.declare(name)
	b.define(r, nil, seq(x, one(ref(r))))
	return r
}

// repeat returns a rule matching x between lo and hi times (hi < 0: no
// bound), with sep between repetitions.
func (b *builder) repeat(name string, x, sep []sym, lo, hi int) int {
	if hi >= 0 && hi < lo {
		hi = lo
	}
	if lo > MaxRules || hi > MaxRules {
		// Each repetition below the bounds is a rule: refuse before
		// building any.
		if b.err == nil {
			b.err = fmt.Errorf("a repetition of %d to %d needs more than %d rules", lo, hi, MaxRules)
		}
		return b.rule(name, nil)
	}
	if hi == 0 {
		return b.rule(name, nil)
	}
	// tail(k): what may follow after k items, "" allowed once k >= lo.
	// Built from the end so that each rule references the next.
	if hi < 0 {
		// lo items then (sep x)*.
		more := b.star(name+"-more", seq(sep, x))
		next := more
		for k := lo - 1; k >= 1; k-- {
			next = b.rule(fmt.Sprintf("%s-%d", name, k), seq(sep, x, one(ref(next))))
		}
		if lo == 0 {
			return b.rule(name, nil, seq(x, one(ref(more))))
		}
		return b.rule(name, seq(x, one(ref(next))))
	}
	// after[k] matches the rest once k items were matched (k = 1..hi).
	next := b.rule(fmt.Sprintf("%s-%d", name, hi), nil)
	for k := hi - 1; k >= 1; k-- {
		cont := seq(sep, x, one(ref(next)))
		if k >= lo {
			next = b.rule(fmt.Sprintf("%s-%d", name, k), nil, cont)
		} else {
			next = b.rule(fmt.Sprintf("%s-%d", name, k), cont)
		}
		if b.err != nil {
			return next
		}
	}
	first := seq(x, one(ref(next)))
	if lo == 0 {
		return b.rule(name, nil, first)
	}
	return b.rule(name, first)
}

// compile flattens the rules into a Grammar rooted at root.
func (b *builder) compile(root int) (*Grammar, error) {
	if b.err != nil {
		return nil, b.err
	}
	g := &Grammar{root: int32(root), names: b.names, alts: make([][]int32, len(b.rules))}
	setIndex := map[byteSet]int32{}
	for r, alts := range b.rules {
		if alts == nil {
			return nil, fmt.Errorf("constrain: rule %s has no alternatives", b.names[r])
		}
		for _, a := range alts {
			g.alts[r] = append(g.alts[r], int32(len(g.elems)))
			for _, s := range a {
				if s.ref >= 0 {
					g.elems = append(g.elems, elem{kind: elemRef, arg: int32(s.ref)})
					continue
				}
				i, ok := setIndex[s.set]
				if !ok {
					i = int32(len(g.sets))
					g.sets = append(g.sets, s.set)
					setIndex[s.set] = i
				}
				g.elems = append(g.elems, elem{kind: elemByte, arg: i})
			}
			g.elems = append(g.elems, elem{kind: elemEnd})
		}
	}
	if err := g.pruneUnproductive(); err != nil {
		return nil, err
	}
	for g.end = g.alts[g.root][0]; g.elems[g.end].kind != elemEnd; g.end++ {
	}
	g.cut = int32(len(g.elems))
	g.elems = append(g.elems, elem{kind: elemCut})
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

// pruneUnproductive drops the alternatives that can never end: those that
// reach a rule whose every alternative recurses forever (a schema object
// that requires a property of its own type, with no way out). They match
// no finite document, so the language is the same without them, and
// decoding can no longer enter a branch it cannot leave (the answer would
// run to max_tokens and stop mid-document). A grammar whose root can never
// end is an error. Rules left unproductive keep their alternatives but are
// no longer reached from the root.
func (g *Grammar) pruneUnproductive() error {
	productive := make([]bool, len(g.alts))
	ends := func(a int32) bool { // the alternative at a matches some finite string
		for p := a; g.elems[p].kind != elemEnd; p++ {
			if e := g.elems[p]; e.kind == elemRef && !productive[e.arg] {
				return false
			}
		}
		return true
	}
	for changed := true; changed; {
		changed = false
		for r, alts := range g.alts {
			if !productive[r] && slices.ContainsFunc(alts, ends) {
				productive[r], changed = true, true
			}
		}
	}
	if !productive[g.root] {
		return errors.New("constrain: no finite document matches: every branch recurses without end")
	}
	for r, alts := range g.alts {
		if productive[r] {
			g.alts[r] = slices.DeleteFunc(alts, func(a int32) bool { return !ends(a) })
		}
	}
	return nil
}

// checkLeftRecursion returns an error if a rule can reach itself without
// consuming a byte (the matcher's expansion would not end).
func (g *Grammar) checkLeftRecursion() error {
	// nullable[r]: rule r matches "".
	nullable := make([]bool, len(g.alts))
	for changed := true; changed; {
		changed = false
		for r, alts := range g.alts {
			if nullable[r] {
				continue
			}
			for _, a := range alts {
				if g.seqNullable(a, nullable) {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	// first[r]: rules r may start with (reaching them without a byte).
	state := make([]uint8, len(g.alts)) // 0 new, 1 on the path, 2 done
	var visit func(r int32) error
	visit = func(r int32) error {
		switch state[r] {
		case 1:
			return fmt.Errorf("constrain: rule %s is left-recursive", g.names[r])
		case 2:
			return nil
		}
		state[r] = 1
		for _, a := range g.alts[r] {
			for p := a; g.elems[p].kind == elemRef; p++ {
				if err := visit(g.elems[p].arg); err != nil {
					return err
				}
				if !nullable[g.elems[p].arg] {
					break
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range g.alts {
		if err := visit(int32(r)); err != nil {
			return err
		}
	}
	return nil
}

func (g *Grammar) seqNullable(p int32, nullable []bool) bool {
	for ; g.elems[p].kind != elemEnd; p++ {
		e := g.elems[p]
		if e.kind == elemByte || !nullable[e.arg] {
			return false
		}
	}
	return true
}

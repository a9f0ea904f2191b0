package constrain

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
)

// stack is one live parse: a persistent list of grammar positions. The top
// (the first node) is always a byte element, the one the next byte must
// match; the nodes below are where to continue when the rule above ends.
// A nil stack is a complete parse.
type stack struct {
	pos  int32
	next *stack
	hash uint64
}

// stackHash mixes pos into the hash of rest.
func stackHash(pos int32, rest *stack) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	if rest != nil {
		h = rest.hash
	}
	h ^= uint64(uint32(pos)) + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	return h * 0xbf58476d1ce4e5b9
}

// equal reports whether two stacks hold the same positions.
func equal(a, b *stack) bool {
	for a != b {
		if a == nil || b == nil || a.pos != b.pos || a.hash != b.hash {
			return false
		}
		a, b = a.next, b.next
	}
	return true
}

// arena hands out stack nodes in chunks, for the throwaway states of a mask
// walk.
type arena struct {
	chunks [][]stack
	ci, i  int
}

const arenaChunk = 4096

func (a *arena) alloc() *stack {
	if a.ci == len(a.chunks) {
		a.chunks = append(a.chunks, make([]stack, arenaChunk))
	}
	s := &a.chunks[a.ci][a.i]
	a.i++
	if a.i == arenaChunk {
		a.ci, a.i = a.ci+1, 0
	}
	return s
}

// reset makes every node reusable (none may be referenced any more).
func (a *arena) reset() { a.ci, a.i = 0, 0 }

// cutHit marks, in a walk of a truncated state, a parse that ended the
// frames kept and needs the ones cut off below.
var cutHit = &stack{pos: -1}

// expander advances states of a grammar; with an arena its nodes come
// from it.
type expander struct {
	g     *Grammar
	arena *arena
}

func (x *expander) push(pos int32, rest *stack) *stack {
	var s *stack
	if x.arena != nil {
		s = x.arena.alloc()
	} else {
		s = new(stack)
	}
	*s = stack{pos: pos, next: rest, hash: stackHash(pos, rest)}
	return s
}

// add appends s to out unless an equal stack is there.
func add(out []*stack, s *stack) []*stack {
	for _, o := range out {
		if o == s || (o != nil && s != nil && o.hash == s.hash && equal(o, s)) {
			return out
		}
	}
	return append(out, s)
}

// expand appends to out the stacks that continue at position pos with rest
// below, each with a byte element on top (or nil: complete).
func (x *expander) expand(pos int32, rest *stack, out []*stack) []*stack {
	g := x.g
	switch e := g.elems[pos]; e.kind {
	case elemByte:
		return add(out, x.push(pos, rest))
	case elemCut:
		return add(out, cutHit)
	case elemEnd:
		if rest == nil {
			return add(out, nil)
		}
		return x.expand(rest.pos, rest.next, out)
	default: // elemRef
		cont := rest
		if g.elems[pos+1].kind != elemEnd {
			cont = x.push(pos+1, rest)
		}
		for _, a := range g.alts[e.arg] {
			out = x.expand(a, cont, out)
		}
		return out
	}
}

// advance appends to out the stacks that cur's give after byte c.
func (x *expander) advance(cur []*stack, c byte, out []*stack) []*stack {
	g := x.g
	for _, s := range cur {
		if s == nil || s == cutHit {
			continue
		}
		if g.sets[g.elems[s.pos].arg].has(c) {
			out = x.expand(s.pos+1, s.next, out)
		}
	}
	return out
}

// firstBytes returns the union of the bytes cur's stacks accept next.
func (g *Grammar) firstBytes(cur []*stack) byteSet {
	var u byteSet
	for _, s := range cur {
		if s != nil && s != cutHit {
			u.union(&g.sets[g.elems[s.pos].arg])
		}
	}
	return u
}

// Vocab is a tokenizer's vocabulary as byte strings, with a trie over them
// for computing masks. It is immutable and safe for concurrent use.
type Vocab struct {
	tokens [][]byte
	nodes  []trieNode // preorder; node 0 is the root (the empty prefix)
	ids    []int32    // the tokens ending at each node, nodes' ranges
	depth  int        // the longest token
}

// trieNode is one node of the vocabulary's trie in preorder: its subtree is
// nodes [i, end).
type trieNode struct {
	b          byte
	depth      int32
	end        int32
	parent     int32
	tok0, tok1 int32 // ids[tok0:tok1] end here
}

// NewVocab returns the vocabulary whose token id i has the bytes
// tokens[i]; an empty (or nil) entry is a token never allowed by a mask
// (special tokens, ids without a token).
func NewVocab(tokens [][]byte) *Vocab {
	v := &Vocab{tokens: tokens}
	// A map-based trie, flattened in preorder with children by byte.
	type mnode struct {
		kids map[byte]*mnode
		ids  []int32
	}
	root := &mnode{}
	for id, t := range tokens {
		if len(t) == 0 {
			continue
		}
		n := root
		for _, c := range t {
			if n.kids == nil {
				n.kids = map[byte]*mnode{}
			}
			k := n.kids[c]
			if k == nil {
				k = &mnode{}
				n.kids[c] = k
			}
			n = k
		}
		n.ids = append(n.ids, int32(id))
		v.depth = max(v.depth, len(t))
	}
	var walk func(n *mnode, b byte, depth int, parent int32)
	walk = func(n *mnode, b byte, depth int, parent int32) {
		i := len(v.nodes)
		v.nodes = append(v.nodes, trieNode{b: b, depth: int32(depth), parent: parent, tok0: int32(len(v.ids))})
		v.ids = append(v.ids, n.ids...)
		v.nodes[i].tok1 = int32(len(v.ids))
		for c := 0; c < 256; c++ {
			if k := n.kids[byte(c)]; k != nil {
				walk(k, byte(c), depth+1, int32(i))
			}
		}
		v.nodes[i].end = int32(len(v.nodes))
	}
	walk(root, 0, 0, -1)
	return v
}

// Size returns the number of token ids.
func (v *Vocab) Size() int { return len(v.tokens) }

// Token returns token id's bytes.
func (v *Vocab) Token(id int) []byte {
	if id < 0 || id >= len(v.tokens) {
		return nil
	}
	return v.tokens[id]
}

// MaxCacheBytes bounds the masks one grammar caches for one vocabulary;
// when full, the cache starts over.
const MaxCacheBytes = 8 << 20

// KeepFrames is how many frames of each stack a partial mask keeps (see
// Matcher.Mask): enough for the frames of a string's characters and the
// member or item around it.
const KeepFrames = 4

// maskCaches holds a grammar's mask caches, one per vocabulary.
type maskCaches struct {
	mu sync.Mutex
	by map[*Vocab]*maskCache
}

// maskCache maps a state's exact key to its mask (stop tokens excluded),
// and a truncated state's key to its partial mask.
type maskCache struct {
	masks   map[string][]uint64
	partial map[string]*partialMask
	bytes   int
}

// partialMask is what a truncated state gives: the tokens it accepts
// without reaching the frames cut off, and the trie nodes where a parse
// reached them (their subtrees depend on those frames).
type partialMask struct {
	accepted  []uint64
	uncertain []int32
}

// cacheFor returns the cache of v, locked by the caller.
func (g *Grammar) cacheFor(v *Vocab) *maskCache {
	if g.cache.by == nil {
		g.cache.by = map[*Vocab]*maskCache{}
	}
	c := g.cache.by[v]
	if c == nil || c.bytes > MaxCacheBytes {
		c = &maskCache{masks: map[string][]uint64{}, partial: map[string]*partialMask{}}
		g.cache.by[v] = c
	}
	return c
}

func (g *Grammar) lookup(v *Vocab, key []byte) []uint64 {
	g.cache.mu.Lock()
	defer g.cache.mu.Unlock()
	return g.cacheFor(v).masks[string(key)]
}

func (g *Grammar) store(v *Vocab, key []byte, mask []uint64) {
	g.cache.mu.Lock()
	defer g.cache.mu.Unlock()
	c := g.cacheFor(v)
	c.masks[string(key)] = mask
	c.bytes += 8*len(mask) + len(key)
}

func (g *Grammar) lookupPartial(v *Vocab, key []byte) *partialMask {
	g.cache.mu.Lock()
	defer g.cache.mu.Unlock()
	return g.cacheFor(v).partial[string(key)]
}

func (g *Grammar) storePartial(v *Vocab, key []byte, p *partialMask) {
	g.cache.mu.Lock()
	defer g.cache.mu.Unlock()
	c := g.cacheFor(v)
	c.partial[string(key)] = p
	c.bytes += 8*len(p.accepted) + 4*len(p.uncertain) + len(key)
}

// ErrRejected is returned by Accept for a token the grammar does not allow
// in the current state.
var ErrRejected = errors.New("constrain: token not allowed here")

// Matcher runs a grammar over one generated sequence. It is not safe for
// concurrent use (one per sequence); Matchers of one grammar share its
// mask cache.
type Matcher struct {
	g     *Grammar
	v     *Vocab
	stops []int
	cur   []*stack
	x     expander
	// scratch for masks and checks
	walk  arena
	tmp   [2][]*stack
	key   []byte
	stats Stats
}

// Stats counts a matcher's work.
type Stats struct {
	// Masks counts Mask calls, Misses those that walked the trie.
	Masks, Misses int
}

// NewMatcher returns a matcher at the start of g over vocabulary v; the
// tokens stopIDs (the end of generation) are allowed where the document is
// complete.
func NewMatcher(g *Grammar, v *Vocab, stopIDs []int) *Matcher {
	m := &Matcher{g: g, v: v, stops: append([]int(nil), stopIDs...)}
	m.x = expander{g: g}
	m.cur = m.x.expand(g.alts[g.root][0], nil, nil)
	for _, a := range g.alts[g.root][1:] {
		m.cur = m.x.expand(a, nil, m.cur)
	}
	return m
}

// Complete reports whether the bytes so far form a whole document (a stop
// token is allowed).
func (m *Matcher) Complete() bool {
	for _, s := range m.cur {
		if s == nil {
			return true
		}
	}
	return false
}

// Done reports whether the document is complete and nothing may follow it
// (only a stop token).
func (m *Matcher) Done() bool { return len(m.cur) == 1 && m.cur[0] == nil }

// isStop reports whether id is one of the stop tokens.
func (m *Matcher) isStop(id int) bool {
	for _, s := range m.stops {
		if s == id {
			return true
		}
	}
	return false
}

// walkBytes advances cur over b with throwaway nodes and reports whether
// the state is still alive.
func (m *Matcher) walkBytes(b []byte) bool {
	x := expander{g: m.g, arena: &m.walk}
	defer m.walk.reset()
	cur := m.cur
	for i, c := range b {
		out := m.tmp[i&1][:0]
		out = x.advance(cur, c, out)
		m.tmp[i&1] = out
		if len(out) == 0 {
			return false
		}
		cur = out
	}
	return true
}

// Allowed reports whether token id may come next.
func (m *Matcher) Allowed(id int) bool {
	if m.isStop(id) {
		return m.Complete()
	}
	t := m.v.Token(id)
	return len(t) > 0 && m.walkBytes(t)
}

// Accept advances the matcher over token id, or returns ErrRejected (and
// keeps its state) if the grammar does not allow it. A stop token is
// accepted where the document is complete and changes nothing.
func (m *Matcher) Accept(id int) error {
	if m.isStop(id) {
		if m.Complete() {
			return nil
		}
		return fmt.Errorf("%w: stop token %d before the document is complete", ErrRejected, id)
	}
	t := m.v.Token(id)
	if len(t) == 0 || !m.AcceptBytes(t) {
		return fmt.Errorf("%w: token %d (%q)", ErrRejected, id, t)
	}
	return nil
}

// AcceptBytes advances the matcher over b and reports whether the grammar
// allows it; if not, the state is unchanged.
func (m *Matcher) AcceptBytes(b []byte) bool {
	cur := m.cur
	for _, c := range b {
		out := m.x.advance(cur, c, nil)
		if len(out) == 0 {
			return false
		}
		cur = out
	}
	m.cur = cur
	return true
}

// Stats returns the matcher's counters.
func (m *Matcher) Stats() Stats { return m.stats }

// stateKey returns the exact key of the current state.
func (m *Matcher) stateKey() []byte {
	k := m.key[:0]
	for _, s := range m.cur {
		for ; s != nil; s = s.next {
			k = binary.AppendUvarint(k, uint64(s.pos)+1)
		}
		k = append(k, 0)
	}
	m.key = k
	return k
}

// truncated returns the current state with every stack cut to its top
// KeepFrames frames (a cut one ending in the grammar's elemCut), and its
// key.
func (m *Matcher) truncated() ([]*stack, []byte) {
	var out []*stack
	var k []byte
	for _, s := range m.cur {
		if s == nil {
			out = append(out, nil)
			k = append(k, 0)
			continue
		}
		var frames []int32
		t := s
		for ; t != nil && len(frames) < KeepFrames; t = t.next {
			frames = append(frames, t.pos)
		}
		var r *stack
		if t != nil {
			r = &stack{pos: m.g.cut, hash: stackHash(m.g.cut, nil)}
		}
		for i := len(frames) - 1; i >= 0; i-- {
			r = &stack{pos: frames[i], next: r, hash: stackHash(frames[i], r)}
		}
		for _, f := range frames {
			k = binary.AppendUvarint(k, uint64(f)+1)
		}
		if t != nil {
			k = binary.AppendUvarint(k, uint64(m.g.cut)+1)
		}
		k = append(k, 0)
		out = append(out, r)
	}
	return out, k
}

// Mask returns the set of tokens allowed next as a bitset over the
// vocabulary (bit id%64 of word id/64), stop tokens included where the
// document is complete. The caller must not modify it; it stays valid
// after the matcher moves on.
//
// Masks are cached per exact state. A state not seen yet starts from the
// partial mask of its truncated state (each stack's top KeepFrames
// frames), cached too: the tokens that stay inside those frames are
// decided there once for every context (the characters of a string, say,
// wherever the string is), and only the trie subtrees where a parse
// reached the frames cut off are walked again with the whole state.
func (m *Matcher) Mask() []uint64 {
	m.stats.Masks++
	key := m.stateKey()
	mask := m.g.lookup(m.v, key)
	if mask == nil {
		m.stats.Misses++
		mask = m.computeMask()
		m.g.store(m.v, m.stateKey(), mask)
	}
	if len(m.stops) == 0 || !m.Complete() {
		return mask
	}
	out := append([]uint64(nil), mask...)
	for _, id := range m.stops {
		if id >= 0 && id < m.v.Size() {
			out[id>>6] |= 1 << (id & 63)
		}
	}
	return out
}

// computeMask builds the exact mask of the current state from its
// truncated state's partial mask.
func (m *Matcher) computeMask() []uint64 {
	v := m.v
	trunc, tkey := m.truncated()
	p := m.g.lookupPartial(v, tkey)
	if p == nil {
		p = &partialMask{accepted: make([]uint64, (len(v.tokens)+63)/64)}
		m.walkTrie(trunc, 0, p.accepted, &p.uncertain)
		m.walk.reset()
		m.g.storePartial(v, tkey, p)
	}
	mask := append([]uint64(nil), p.accepted...)
	var path []byte
	for _, u := range p.uncertain {
		path = path[:0]
		for n := u; n > 0; n = v.nodes[n].parent {
			path = append(path, v.nodes[n].b)
		}
		for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
			path[i], path[j] = path[j], path[i]
		}
		m.resolve(u, path, mask)
	}
	for _, id := range m.stops { // stops are added by Mask where allowed
		if id >= 0 && id < len(v.tokens) {
			mask[id>>6] &^= 1 << (id & 63)
		}
	}
	return mask
}

// resolve adds to mask the tokens at trie node u (reached by path) and
// below it that the whole state allows.
func (m *Matcher) resolve(u int32, path []byte, mask []uint64) {
	defer m.walk.reset()
	x := expander{g: m.g, arena: &m.walk}
	cur := m.cur
	for _, c := range path {
		cur = x.advance(cur, c, nil)
		if len(cur) == 0 {
			return
		}
	}
	n := &m.v.nodes[u]
	for _, id := range m.v.ids[n.tok0:n.tok1] {
		mask[id>>6] |= 1 << (id & 63)
	}
	m.walkTrie(cur, u, mask, nil)
}

// dfa interns the states one trie walk meets and memoizes their
// transitions, so that a walk costs a table lookup per trie node once its
// few states are known (inside a string, the state after most bytes is
// the state before).
type dfa struct {
	x      expander
	states []dstate
	byKey  map[string]int32
	key    []byte
	buf    []*stack
}

// dstate is one interned state: its stacks (without cutHit) and its
// transitions, each (next id)<<1 | (a parse reached the cut), or
// transUnknown.
type dstate struct {
	stacks []*stack
	next   [256]int32
}

const (
	transUnknown = -1
	deadState    = 0 // the empty state, id 0
)

func newDFA(g *Grammar) *dfa {
	d := &dfa{x: expander{g: g}, byKey: map[string]int32{}}
	d.intern(nil)
	return d
}

// intern returns the id of the state of stacks (a copy is kept).
func (d *dfa) intern(stacks []*stack) int32 {
	k := d.key[:0]
	for _, s := range stacks {
		for ; s != nil; s = s.next {
			k = binary.AppendUvarint(k, uint64(s.pos)+1)
		}
		k = append(k, 0)
	}
	d.key = k
	if id, ok := d.byKey[string(k)]; ok {
		return id
	}
	id := int32(len(d.states))
	d.states = append(d.states, dstate{stacks: append([]*stack(nil), stacks...)})
	for i := range d.states[id].next {
		d.states[id].next[i] = transUnknown
	}
	d.byKey[string(k)] = id
	return id
}

// step returns the transition of state id on byte c.
func (d *dfa) step(id int32, c byte) int32 {
	if t := d.states[id].next[c]; t != transUnknown {
		return t
	}
	out := d.x.advance(d.states[id].stacks, c, d.buf[:0])
	cut := int32(0)
	for k := 0; k < len(out); k++ {
		if out[k] == cutHit {
			cut = 1
			out = append(out[:k], out[k+1:]...)
			break
		}
	}
	d.buf = out
	t := d.intern(out)<<1 | cut
	d.states[id].next[c] = t
	return t
}

// walkTrie walks the subtree of trie node u (whose prefix led to state
// start) and sets in mask the tokens below u that start allows. With
// uncertain, start is a truncated state: a node where a parse reaches the
// frames cut off is appended to it (its tokens and subtree are left to
// resolve) and the walk goes on with the other parses.
func (m *Matcher) walkTrie(start []*stack, u int32, mask []uint64, uncertain *[]int32) {
	v := m.v
	d := newDFA(m.g)
	ids := make([]int32, v.depth+1)
	base := v.nodes[u].depth
	ids[0] = d.intern(start)
	nodes := v.nodes
	for i := u + 1; i < nodes[u].end; {
		n := &nodes[i]
		depth := n.depth - base
		t := d.step(ids[depth-1], n.b)
		if t&1 != 0 && uncertain != nil {
			*uncertain = append(*uncertain, i)
		}
		next := t >> 1
		if next == deadState {
			i = n.end
			continue
		}
		for _, id := range v.ids[n.tok0:n.tok1] {
			mask[id>>6] |= 1 << (id & 63)
		}
		ids[depth] = next
		i++
	}
}

// Count returns the number of tokens in a mask.
func Count(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}

// Has reports whether token id is in a mask.
func Has(mask []uint64, id int) bool {
	return id >= 0 && id>>6 < len(mask) && mask[id>>6]>>(id&63)&1 != 0
}

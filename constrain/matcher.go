package constrain

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// stack is a node of the state's graph-structured stack: a grammar
// position and the set of nodes below it. A top node's position is a byte
// element, the one the next byte must match; the nodes below are where to
// continue when the rule above ends. Parses that reach the same byte
// element in one step share one top node (its set below holds all their
// continuations), so a state has at most one top per byte element of the
// grammar however many parses are alive: anyOf branches sharing a long
// prefix cost one parse while they agree, not one per branch.
type stack struct {
	pos  int32
	next *frames // nil only below the cut node (Grammar.cut)
	hash uint64
}

// frames is a set of stack nodes, where a parse continues when the rule
// of the node above ends. A nil item is the bottom: the document is
// complete there. Items are sorted by hash, without duplicate pointers,
// once the set is closed.
//
// While an advance runs, the set a rule is predicted with is open: every
// parse that reaches the rule in that advance adds its continuations to
// it, and the rule's alternatives are expanded once, above it (as an
// Earley parser predicts a rule once per position). A hash of 0 is one not
// computed yet (a node or set above an open set); the advance's finish
// computes them.
type frames struct {
	items  []*stack
	hash   uint64
	open   bool // items may still be added (this advance)
	popped bool // open, and a parse ended the rule above it (its items were continued)
}

// hashMix is splitmix64's finalizer.
func hashMix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// bottomHash is the hash of the bottom (a nil item of a set).
const bottomHash = 0x9e3779b97f4a7c15

func itemHash(s *stack) uint64 {
	if s == nil {
		return bottomHash
	}
	return s.hash
}

// nodeHash is the hash of a node at pos above set f.
func nodeHash(pos int32, f *frames) uint64 {
	h := uint64(0x5851f42d4c957f2d)
	if f != nil {
		h = f.hash
	}
	return hashMix(h^uint64(uint32(pos))*0xff51afd7ed558ccd) | 1
}

// setHash is the hash of a set's items (in their sorted order).
func setHash(items []*stack) uint64 {
	h := uint64(len(items))
	for _, s := range items {
		h = hashMix(h ^ itemHash(s))
	}
	return h | 1
}

// bottom is the set below the root's parses.
var bottom = &frames{items: []*stack{nil}, hash: setHash([]*stack{nil})}

// cutHit marks, in a walk of a truncated state, a parse that ended the
// frames kept and needs the ones cut off below.
var cutHit = &stack{pos: -1}

// arena hands out nodes, sets and their items in chunks, for the
// throwaway states of a mask walk.
type arena struct {
	nodes    [][]stack
	sets     [][]frames
	items    [][]*stack
	ni, si   int // chunks in use
	nj, sj   int // next free in the current chunk
	ii, ij   int
	overflow [][]*stack // item slices longer than a chunk
}

const arenaChunk = 4096

func (a *arena) node() *stack {
	if a.nj == arenaChunk {
		a.ni, a.nj = a.ni+1, 0
	}
	if a.ni == len(a.nodes) {
		a.nodes = append(a.nodes, make([]stack, arenaChunk))
	}
	s := &a.nodes[a.ni][a.nj]
	a.nj++
	return s
}

func (a *arena) set() *frames {
	if a.sj == arenaChunk {
		a.si, a.sj = a.si+1, 0
	}
	if a.si == len(a.sets) {
		a.sets = append(a.sets, make([]frames, arenaChunk))
	}
	f := &a.sets[a.si][a.sj]
	a.sj++
	return f
}

// itemSlice returns an empty slice with room for n items.
func (a *arena) itemSlice(n int) []*stack {
	if n > arenaChunk {
		s := make([]*stack, 0, n)
		a.overflow = append(a.overflow, s)
		return s
	}
	if a.ij+n > arenaChunk {
		a.ii, a.ij = a.ii+1, 0
	}
	if a.ii == len(a.items) {
		a.items = append(a.items, make([]*stack, arenaChunk))
	}
	s := a.items[a.ii][a.ij : a.ij : a.ij+n]
	a.ij += n
	return s
}

// reset makes everything reusable (nothing may be referenced any more).
func (a *arena) reset() {
	a.ni, a.nj, a.si, a.sj, a.ii, a.ij = 0, 0, 0, 0, 0, 0
	a.overflow = a.overflow[:0]
}

// expander advances states of a grammar; with an arena its nodes come
// from it. One advance (begin, expand..., finish) merges the parses that
// reach the same byte element into one top node, and expands each (grammar
// position, set below) pair once.
type expander struct {
	g     *Grammar
	arena *arena

	// The advance in progress.
	tops     []topBuild
	topIndex map[int32]int32 // tops by position, once there are many
	seen     []expansion     // expansions done, while few
	seenSet  map[expansion]struct{}
	preds    []prediction    // rules predicted
	predAt   map[int32]int32 // preds by rule, once there are many
	opened   []*frames       // the open sets
	complete bool            // a parse reached the bottom
	cut      bool            // a parse reached the cut
}

// topBuild is a top node being built: its position and the sets below
// it that the parses reaching it bring.
type topBuild struct {
	pos  int32
	sets []*frames
}

// prediction is a rule predicted in an advance: with the first set of
// continuations that reached it, then with an open set holding every later
// one's.
type prediction struct {
	rule  int32
	first *frames
	open  *frames
}

// expansion is one (position, set below) pair expanded.
type expansion struct {
	pos  int32
	rest *frames
}

// smallLimit is how many tops or expansions an advance keeps in a slice,
// searched in order, before it indexes them in a map.
const smallLimit = 16

func (x *expander) newNode(pos int32, next *frames) *stack {
	var s *stack
	if x.arena != nil {
		s = x.arena.node()
	} else {
		s = new(stack)
	}
	*s = stack{pos: pos, next: next}
	if next == nil || next.hash != 0 {
		s.hash = nodeHash(pos, next)
	}
	return s
}

// newSet returns a set of the given items (sorted, without duplicates).
func (x *expander) newSet(items []*stack) *frames {
	var f *frames
	if x.arena != nil {
		f = x.arena.set()
	} else {
		f = new(frames)
	}
	*f = frames{items: items}
	for _, s := range items {
		if s != nil && s.hash == 0 {
			return f // computed by finish
		}
	}
	f.hash = setHash(items)
	return f
}

// single returns the set of node s alone.
func (x *expander) single(s *stack) *frames {
	var items []*stack
	if x.arena != nil {
		items = append(x.arena.itemSlice(1), s)
	} else {
		items = []*stack{s}
	}
	return x.newSet(items)
}

// begin starts an advance.
func (x *expander) begin() {
	x.tops = x.tops[:0]
	x.seen = x.seen[:0]
	if x.topIndex != nil {
		clear(x.topIndex)
	}
	if x.seenSet != nil {
		clear(x.seenSet)
	}
	x.preds, x.opened = x.preds[:0], x.opened[:0]
	if x.predAt != nil {
		clear(x.predAt)
	}
	x.complete, x.cut = false, false
}

// firstVisit records the expansion of (pos, rest) and reports whether it
// is new in this advance.
func (x *expander) firstVisit(pos int32, rest *frames) bool {
	e := expansion{pos, rest}
	if len(x.seen) < smallLimit {
		for _, s := range x.seen {
			if s == e {
				return false
			}
		}
		x.seen = append(x.seen, e)
		return true
	}
	if x.seenSet == nil {
		x.seenSet = map[expansion]struct{}{}
	}
	if len(x.seenSet) == 0 {
		for _, s := range x.seen {
			x.seenSet[s] = struct{}{}
		}
	}
	if _, ok := x.seenSet[e]; ok {
		return false
	}
	x.seenSet[e] = struct{}{}
	return true
}

// addTop adds set rest below the top node at byte element pos.
func (x *expander) addTop(pos int32, rest *frames) {
	i := int32(-1)
	if len(x.tops) <= smallLimit {
		for k := range x.tops {
			if x.tops[k].pos == pos {
				i = int32(k)
				break
			}
		}
	} else {
		if x.topIndex == nil {
			x.topIndex = map[int32]int32{}
		}
		if len(x.topIndex) == 0 {
			for k, t := range x.tops {
				x.topIndex[t.pos] = int32(k)
			}
		}
		if k, ok := x.topIndex[pos]; ok {
			i = k
		}
	}
	if i < 0 {
		if n := len(x.tops); n < cap(x.tops) {
			// Reuse the sets slice of an earlier advance's top.
			x.tops = x.tops[:n+1]
			x.tops[n].pos, x.tops[n].sets = pos, x.tops[n].sets[:0]
		} else {
			x.tops = append(x.tops, topBuild{pos: pos})
		}
		i = int32(len(x.tops) - 1)
		if len(x.topIndex) > 0 {
			x.topIndex[pos] = i
		}
	}
	t := &x.tops[i]
	if !slices.Contains(t.sets, rest) {
		t.sets = append(t.sets, rest)
	}
}

// expand continues the parses at position pos with set rest below.
func (x *expander) expand(pos int32, rest *frames) {
	g := x.g
	if g.elems[pos].kind == elemEnd {
		pos = g.end // every end pops rest alike: once an advance
	}
	if !x.firstVisit(pos, rest) {
		return
	}
	switch e := g.elems[pos]; e.kind {
	case elemByte:
		x.addTop(pos, rest)
	case elemCut:
		x.cut = true
	case elemEnd:
		if rest.open {
			rest.popped = true
		}
		for i := 0; i < len(rest.items); i++ { // an open set may grow meanwhile
			x.pop(rest.items[i])
		}
	default: // elemRef
		cont := rest
		if g.elems[pos+1].kind != elemEnd {
			cont = x.single(x.newNode(pos+1, rest))
		}
		if cont = x.predict(e.arg, cont); cont == nil {
			return
		}
		for _, a := range g.alts[e.arg] {
			x.expand(a, cont)
		}
	}
}

// pop continues a parse whose rule ended, at node s below it.
func (x *expander) pop(s *stack) {
	if s == nil {
		x.complete = true
		return
	}
	x.expand(s.pos, s.next)
}

// predict returns the set that rule's alternatives are to be expanded
// above, cont being the continuations of a parse that reached the rule:
// cont itself the first time in the advance, an open set the second time,
// and nil after that, cont's items then added to the open set (and
// continued at once if a parse already ended the rule there).
func (x *expander) predict(rule int32, cont *frames) *frames {
	i := -1
	if len(x.preds) <= smallLimit {
		for k := range x.preds {
			if x.preds[k].rule == rule {
				i = k
				break
			}
		}
	} else {
		if x.predAt == nil {
			x.predAt = map[int32]int32{}
		}
		if len(x.predAt) == 0 {
			for k, p := range x.preds {
				x.predAt[p.rule] = int32(k)
			}
		}
		if k, ok := x.predAt[rule]; ok {
			i = int(k)
		}
	}
	if i < 0 {
		x.preds = append(x.preds, prediction{rule: rule, first: cont})
		if len(x.predAt) > 0 {
			x.predAt[rule] = int32(len(x.preds) - 1)
		}
		return cont
	}
	p := &x.preds[i]
	if cont == p.first || cont == p.open {
		return nil
	}
	// cont's items, or if cont is open (it may still grow) a node that
	// forwards to it: an end element, which continues with all of cont.
	items := cont.items
	if cont.open {
		items = []*stack{x.newNode(x.g.end, cont)}
	}
	if p.open == nil {
		p.open = &frames{items: append([]*stack(nil), items...), open: true}
		x.opened = append(x.opened, p.open)
		return p.open
	}
	z := p.open
	n := len(z.items)
	z.items = append(z.items, items...)
	if z.popped {
		for k := n; k < len(z.items); k++ {
			x.pop(z.items[k])
		}
	}
	return nil
}

// fixSet closes f if it is open (its items sorted, without duplicates)
// and computes the hashes left for later in it and below it.
func fixSet(f *frames) {
	if f == nil || f.hash != 0 {
		return
	}
	for _, s := range f.items {
		fixNode(s)
	}
	if f.open {
		sortItems(f.items)
		f.items = slices.Compact(f.items)
		f.open, f.popped = false, false
	}
	f.hash = setHash(f.items)
}

// fixNode computes the hashes left for later in s and below it.
func fixNode(s *stack) {
	if s == nil || s.hash != 0 {
		return
	}
	fixSet(s.next)
	s.hash = nodeHash(s.pos, s.next)
}

// sortItems sorts a set's items by hash.
func sortItems(items []*stack) {
	slices.SortFunc(items, func(a, b *stack) int {
		ha, hb := itemHash(a), itemHash(b)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return 0
	})
}

// finish appends the advance's state to out: its top nodes in the order
// of their positions, then nil if a parse is complete, then cutHit if one
// reached the cut.
func (x *expander) finish(out []*stack) []*stack {
	for _, f := range x.opened {
		fixSet(f)
	}
	if len(x.tops) > smallLimit {
		slices.SortFunc(x.tops, func(a, b topBuild) int { return int(a.pos - b.pos) })
	} else {
		for i := 1; i < len(x.tops); i++ {
			for j := i; j > 0 && x.tops[j].pos < x.tops[j-1].pos; j-- {
				x.tops[j], x.tops[j-1] = x.tops[j-1], x.tops[j]
			}
		}
	}
	for i := range x.tops {
		t := &x.tops[i]
		for _, f := range t.sets {
			fixSet(f)
		}
		next := t.sets[0]
		if len(t.sets) > 1 {
			next = x.union(t.sets)
		}
		out = append(out, x.newNode(t.pos, next))
		t.sets = t.sets[:0]
	}
	if x.complete {
		out = append(out, nil)
	}
	if x.cut {
		out = append(out, cutHit)
	}
	return out
}

// union returns the set of the items of sets.
func (x *expander) union(sets []*frames) *frames {
	n := 0
	for _, f := range sets {
		n += len(f.items)
	}
	var items []*stack
	if x.arena != nil {
		items = x.arena.itemSlice(n)
	} else {
		items = make([]*stack, 0, n)
	}
	for _, f := range sets {
		items = append(items, f.items...)
	}
	sortItems(items)
	items = slices.Compact(items)
	return x.newSet(items)
}

// start returns the state at the start of the grammar.
func (x *expander) start() []*stack {
	x.begin()
	for _, a := range x.g.alts[x.g.root] {
		x.expand(a, bottom)
	}
	return x.finish(nil)
}

// advance appends to out the state that cur gives after byte c.
func (x *expander) advance(cur []*stack, c byte, out []*stack) []*stack {
	g := x.g
	x.begin()
	for _, s := range cur {
		if s == nil || s == cutHit {
			continue
		}
		if g.sets[g.elems[s.pos].arg].has(c) {
			x.expand(s.pos+1, s.next)
		}
	}
	return x.finish(out)
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

// keyWriter serializes states into keys: each top, and below it each set
// the first time it is met (later: a reference to it), so that a key's
// length is the size of the graph, not of the parses it holds. Equal keys
// are equal states; equal states may have different keys (sets equal
// without being shared), which costs a cache miss, never a wrong mask.
// Sets are remembered only below a fork (several tops, or a set of several
// items): above it, in a chain, none can be met twice.
type keyWriter struct {
	sets    []*frames
	setByID map[*frames]int
	forked  bool
}

// appendState appends the key of state tops to k.
func (w *keyWriter) appendState(k []byte, tops []*stack) []byte {
	w.sets = w.sets[:0]
	if w.setByID != nil {
		clear(w.setByID)
	}
	w.forked = len(tops) > 1
	k = binary.AppendUvarint(k, uint64(len(tops)))
	for _, s := range tops {
		k = w.appendNode(k, s)
	}
	return k
}

// appendNode appends node s: 0 for nil, 1 for cutHit, else its position
// + 2 and its set.
func (w *keyWriter) appendNode(k []byte, s *stack) []byte {
	switch s {
	case nil:
		return append(k, 0)
	case cutHit:
		return append(k, 1)
	}
	k = binary.AppendUvarint(k, uint64(s.pos)+2)
	return w.appendSet(k, s.next)
}

// appendSet appends set f: 2 * (its id) + 1 if it was met before, else 2
// * (its length) and its items.
func (w *keyWriter) appendSet(k []byte, f *frames) []byte {
	if f == nil {
		return append(k, 0)
	}
	if !w.forked && len(f.items) > 1 {
		w.forked = true
	}
	if w.forked {
		if id, ok := w.find(f); ok {
			return binary.AppendUvarint(k, 2*uint64(id)+1)
		}
		w.remember(f)
	}
	k = binary.AppendUvarint(k, 2*uint64(len(f.items)))
	for _, s := range f.items {
		k = w.appendNode(k, s)
	}
	return k
}

func (w *keyWriter) find(f *frames) (int, bool) {
	if w.setByID != nil && len(w.setByID) > 0 {
		id, ok := w.setByID[f]
		return id, ok
	}
	for i, s := range w.sets {
		if s == f {
			return i, true
		}
	}
	return 0, false
}

func (w *keyWriter) remember(f *frames) {
	w.sets = append(w.sets, f)
	if len(w.sets) == smallLimit {
		if w.setByID == nil {
			w.setByID = map[*frames]int{}
		}
		for i, s := range w.sets {
			w.setByID[s] = i
		}
	} else if len(w.sets) > smallLimit {
		w.setByID[f] = len(w.sets) - 1
	}
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
	wx    expander // the walks' expander, its nodes from walk
	tmp   [2][]*stack
	key   []byte
	kw    keyWriter
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
	m.wx = expander{g: g, arena: &m.walk}
	m.cur = m.x.start()
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
	defer m.walk.reset()
	cur := m.cur
	for i, c := range b {
		out := m.tmp[i&1][:0]
		out = m.wx.advance(cur, c, out)
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
	m.key = m.kw.appendState(m.key[:0], m.cur)
	return m.key
}

// truncated returns the current state with every parse cut to its top
// KeepFrames frames (a cut one ending in a node at the grammar's elemCut),
// and its key.
func (m *Matcher) truncated() ([]*stack, []byte) {
	t := truncater{x: expander{g: m.g}, nodes: map[truncNode]*stack{}, sets: map[truncSet]*frames{}}
	t.cut = t.x.newNode(m.g.cut, nil)
	out := make([]*stack, len(m.cur))
	for i, s := range m.cur {
		if s == nil || s == cutHit {
			out[i] = s
			continue
		}
		out[i] = t.node(s, 1)
	}
	return out, m.kw.appendState(nil, out)
}

// truncater copies a state's graph to a depth, each (node or set, depth)
// once.
type truncater struct {
	x     expander
	cut   *stack
	nodes map[truncNode]*stack
	sets  map[truncSet]*frames
}

type truncNode struct {
	s     *stack
	depth int
}

type truncSet struct {
	f     *frames
	depth int
}

// node returns the copy of s as the frame at depth (1: a top).
func (t *truncater) node(s *stack, depth int) *stack {
	if c, ok := t.nodes[truncNode{s, depth}]; ok {
		return c
	}
	c := t.x.newNode(s.pos, t.set(s.next, depth+1))
	t.nodes[truncNode{s, depth}] = c
	return c
}

// set returns the copy of f, its items the frames at depth: past
// KeepFrames, the bottom if f holds it and the cut node for the rest.
func (t *truncater) set(f *frames, depth int) *frames {
	if c, ok := t.sets[truncSet{f, depth}]; ok {
		return c
	}
	var items []*stack
	if depth > KeepFrames {
		cut := false
		for _, s := range f.items {
			if s == nil {
				items = append(items, nil)
			} else if !cut {
				items, cut = append(items, t.cut), true
			}
		}
	} else {
		for _, s := range f.items {
			if s == nil {
				items = append(items, nil)
			} else {
				items = append(items, t.node(s, depth))
			}
		}
	}
	c := t.x.union([]*frames{{items: items}})
	t.sets[truncSet{f, depth}] = c
	return c
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
	if len(p.uncertain) > 0 {
		// One walk's states for every uncertain subtree: their paths share
		// prefixes, and a state of an ambiguous grammar costs as much as
		// the grammar is large to advance.
		d := newDFA(m.g, &m.kw)
		root := d.intern(m.cur)
		var path []byte
		for _, u := range p.uncertain {
			path = path[:0]
			for n := u; n > 0; n = v.nodes[n].parent {
				path = append(path, v.nodes[n].b)
			}
			m.resolve(d, root, u, path, mask)
		}
	}
	for _, id := range m.stops { // stops are added by Mask where allowed
		if id >= 0 && id < len(v.tokens) {
			mask[id>>6] &^= 1 << (id & 63)
		}
	}
	return mask
}

// resolve adds to mask the tokens at trie node u and below it that the
// whole state allows: d's state root, path u's bytes in reverse.
func (m *Matcher) resolve(d *dfa, root, u int32, path []byte, mask []uint64) {
	id := root
	for i := len(path) - 1; i >= 0; i-- {
		if id = d.step(id, path[i]) >> 1; id == deadState {
			return
		}
	}
	n := &m.v.nodes[u]
	for _, id := range m.v.ids[n.tok0:n.tok1] {
		mask[id>>6] |= 1 << (id & 63)
	}
	m.walkDFA(d, id, u, mask, nil)
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
	kw     *keyWriter // the matcher's, reused
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

func newDFA(g *Grammar, kw *keyWriter) *dfa {
	d := &dfa{x: expander{g: g}, byKey: map[string]int32{}, kw: kw}
	d.intern(nil)
	return d
}

// intern returns the id of the state of stacks (a copy is kept).
func (d *dfa) intern(stacks []*stack) int32 {
	k := d.kw.appendState(d.key[:0], stacks)
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
	d := newDFA(m.g, &m.kw)
	m.walkDFA(d, d.intern(start), u, mask, uncertain)
}

// walkDFA is walkTrie from state start of d.
func (m *Matcher) walkDFA(d *dfa, start, u int32, mask []uint64, uncertain *[]int32) {
	v := m.v
	ids := make([]int32, v.depth+1)
	base := v.nodes[u].depth
	ids[0] = start
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

// pool_test.go: the bookkeeping of Paged's prefix sharing (pagedBook),
// without a GPU: which blocks a batch makes shareable, which a prompt
// reuses, reference counts, eviction, Truncate and Remove, and a random
// run checked against a model of what a GPU block's bits depend on.

package gpukv

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

func TestSharedChunk(t *testing.T) {
	for _, c := range []struct{ maxChunk, nr, want int }{
		{256, 128, 256}, {256, 256, 256}, {512, 128, 512}, {64, 32, 64}, {96, 32, 96},
		{100, 128, 0}, {300, 128, 0}, {0, 32, 0}, {64, 0, 0}, {-64, 32, 0},
	} {
		if got := sharedChunk(c.maxChunk, c.nr); got != c.want {
			t.Errorf("sharedChunk(%d, %d) = %d, want %d", c.maxChunk, c.nr, got, c.want)
		}
	}
}

func TestLookupChunks(t *testing.T) {
	for _, c := range []struct{ promptLen, chunk, maxLen, want int }{
		{0, 64, 1024, 0}, {1, 64, 1024, 0},
		{64, 64, 1024, 0}, // the last token's chunk is computed
		{65, 64, 1024, 1}, {128, 64, 1024, 1}, {129, 64, 1024, 2},
		{129, 0, 1024, 0}, // no sharing
		{300, 64, 100, 1}, // within the block table
		{300, 64, 128, 2}, // a chunk may end at maxLen
		{1000, 256, 8192, 3},
	} {
		if got := lookupChunks(c.promptLen, c.chunk, c.maxLen); got != c.want {
			t.Errorf("lookupChunks(%d, %d, %d) = %d, want %d", c.promptLen, c.chunk, c.maxLen, got, c.want)
		}
	}
}

func TestCanonicalSegment(t *testing.T) {
	for _, c := range []struct {
		pos, n, seqs, tokens, chunk int
		want                        bool
	}{
		{0, 64, 1, 64, 64, true},
		{128, 64, 1, 64, 64, true},
		{0, 32, 1, 32, 64, false},  // a partial chunk
		{32, 64, 1, 64, 64, false}, // not at a multiple of the chunk
		{0, 64, 2, 65, 64, false},  // beside a decode token
		{0, 64, 1, 64, 0, false},   // no sharing
	} {
		if got := canonicalSegment(c.pos, c.n, c.seqs, c.tokens, c.chunk); got != c.want {
			t.Errorf("canonicalSegment(pos %d, n %d, %d seqs, %d tokens, chunk %d) = %v, want %v", c.pos, c.n, c.seqs, c.tokens, c.chunk, got, c.want)
		}
	}
}

// TestChunkKeys checks that a block's key names every token of its chunk
// (after the block too) and the chunks before it, and nothing else.
func TestChunkKeys(t *testing.T) {
	const nr = 4
	chunk := []int{1, 2, 3, 4, 5, 6, 7, 8}
	var zero kvcache.PrefixKey
	keys := chunkKeys(zero, chunk, nr)
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("keys of a 2-block chunk: %x", keys)
	}
	if again := chunkKeys(zero, slices.Clone(chunk), nr); !slices.Equal(again, keys) {
		t.Error("the same chunk gave other keys")
	}
	later := slices.Clone(chunk)
	later[7]++
	if k := chunkKeys(zero, later, nr); k[0] == keys[0] || k[1] == keys[1] {
		t.Error("a token after block 0 does not change block 0's key: the key must name the chunk's whole forward pass")
	}
	if k := chunkKeys(keys[1], chunk, nr); k[0] == keys[0] {
		t.Error("the parent chunk does not change the key")
	}
	if k := chunkKeys(zero, chunk[:4], nr); k[0] == keys[0] {
		t.Error("a chunk of one block keys its block as the first block of a longer chunk")
	}
}

// seg is one sequence's part of a test batch.
type seg struct {
	id, pos int
	tokens  []int
}

func batchOf(segs ...seg) *model.Batch {
	var b model.Batch
	for _, s := range segs {
		ids := make([]int32, len(s.tokens))
		for i, v := range s.tokens {
			ids[i] = int32(v)
		}
		b.Add(s.id, s.pos, ids...)
	}
	return &b
}

// step begins batch b on p and, if complete, marks it run through.
func step(t *testing.T, p *pagedBook, complete bool, segs ...seg) {
	t.Helper()
	b := batchOf(segs...)
	if err := p.check(b, "test"); err != nil {
		t.Fatal(err)
	}
	p.begin(b)
	if complete {
		p.complete()
	}
	if err := p.checkRefs(); err != nil {
		t.Fatal(err)
	}
}

// prefill runs prompt[from:] of sequence id alone in chunks that end at
// multiples of chunk, as the scheduler cuts them.
func prefill(t *testing.T, p *pagedBook, id int, prompt []int, from, chunk int) {
	t.Helper()
	for pos := from; pos < len(prompt); {
		end := min(len(prompt), (pos/chunk+1)*chunk)
		step(t, p, true, seg{id, pos, prompt[pos:end]})
		pos = end
	}
}

func seqTokens(n, base int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = base + i
	}
	return out
}

func mustOpen(t *testing.T, p *pagedBook, id int, prompt []int, want int) *pagedSeq {
	t.Helper()
	s, got, err := p.open(id, prompt, 1<<20, "test")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("open %d (%d tokens): %d cached, want %d", id, len(prompt), got, want)
	}
	if s.n != got || len(s.blocks) != got/p.nr || len(s.keys) != len(s.blocks) || !s.canonical(p.nr) {
		t.Fatalf("open %d: %d tokens, %d blocks, %d keys", id, s.n, len(s.blocks), len(s.keys))
	}
	if err := p.checkRefs(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPagedBookSharing runs a prompt alone in canonical chunks and opens
// others against it: whole chunks before the last token are shared, with
// a reference per table; the partial last chunk is not.
func TestPagedBookSharing(t *testing.T) {
	const nr, chunk = 4, 8
	p := newPagedBook(32, 8, nr, chunk)
	a := seqTokens(21, 100)
	mustOpen(t, p, 1, a, 0)
	prefill(t, p, 1, a, 0, chunk)
	if got := len(p.seqs[1].keys); got != 4 {
		t.Fatalf("a holds %d keyed blocks, want 4 (two whole chunks)", got)
	}
	used := p.alloc.Used()
	cases := []struct {
		name   string
		prompt []int
		want   int
	}{
		{"same 16 tokens, then others", append(slices.Clone(a[:16]), 1, 2, 3, 4, 5), 16},
		{"differs in the second chunk", append(slices.Clone(a[:12]), seqTokens(9, 1)...), 8},
		{"a's first 17 tokens", slices.Clone(a[:17]), 16},
		{"a's first 16 tokens: the last token's chunk is computed", slices.Clone(a[:16]), 8},
		{"differs at token 3", append(append(slices.Clone(a[:3]), 9999), a[4:]...), 0},
		{"a itself", slices.Clone(a), 16},
	}
	for i, c := range cases {
		s := mustOpen(t, p, 10+i, c.prompt, c.want)
		if !slices.Equal(s.blocks, p.seqs[1].blocks[:len(s.blocks)]) {
			t.Errorf("%s: blocks %v, a's %v", c.name, s.blocks, p.seqs[1].blocks)
		}
	}
	if p.alloc.Used() != used {
		t.Errorf("sharing took %d new blocks", p.alloc.Used()-used)
	}
	for i, b := range p.seqs[1].blocks[:2] {
		if refs := p.alloc.Refs(int(b)); refs != 1+len(cases)-1 {
			t.Errorf("block %d of chunk 0 has %d references, want %d", i, refs, len(cases))
		}
	}
	for id := range maps.Keys(maps.Clone(p.seqs)) {
		p.remove(id)
	}
	if err := p.checkIdle("test"); err != nil {
		t.Fatal(err)
	}
	if got := p.alloc.Cached(); got != 4 {
		t.Errorf("%d cached blocks after removal, want a's 4 (its partial chunk is not shareable)", got)
	}
	mustOpen(t, p, 2, a, 16) // from the free list
	p.remove(2)
	if err := p.checkIdle("test"); err != nil {
		t.Fatal(err)
	}
}

// TestPagedBookNotShared covers the segments whose blocks are never
// shared: beside another sequence, a partial or unaligned chunk, anything
// after such a segment, a batch that never completed, a cache without a
// canonical chunk. Truncating back to the shared blocks makes a sequence
// canonical again.
func TestPagedBookNotShared(t *testing.T) {
	const nr, chunk = 4, 8
	p := newPagedBook(64, 8, nr, chunk)
	a, o := seqTokens(25, 100), seqTokens(25, 500)
	noShare := func(what string) {
		t.Helper()
		if _, n, err := p.open(99, a, 1<<20, "test"); err != nil || n != 0 {
			t.Errorf("%s: a's prompt found %d cached tokens (%v), want 0", what, n, err)
		}
		p.remove(99)
	}
	// Beside a decode token of another sequence.
	prefill(t, p, 2, o, 0, chunk)
	step(t, p, true, seg{1, 0, a[:8]}, seg{2, 25, []int{7}})
	step(t, p, true, seg{1, 8, a[8:16]})
	noShare("a chunk beside another sequence, and a chunk after it")
	p.remove(1)
	// Unaligned chunks, then an aligned one after them.
	step(t, p, true, seg{1, 0, a[:4]})
	step(t, p, true, seg{1, 4, a[4:12]})
	step(t, p, true, seg{1, 12, a[12:16]})
	step(t, p, true, seg{1, 16, a[16:24]})
	noShare("unaligned chunks")
	p.remove(1)
	// A batch that never completed: its keys are taken back at the next
	// Begin, and the sequence shares nothing from then on.
	step(t, p, false, seg{1, 0, a[:8]})
	step(t, p, true, seg{1, 8, a[8:16]})
	if s := p.seqs[1]; len(s.keys) != 0 || s.canonical(nr) {
		t.Errorf("after an incomplete batch: %d keys, %d tokens", len(s.keys), s.n)
	}
	step(t, p, true, seg{1, 16, a[16:24]})
	noShare("an incomplete batch")
	p.remove(1)
	// One canonical chunk, two decode tokens (not shareable), truncated
	// back to the chunk: the next chunk is shareable again.
	step(t, p, true, seg{1, 0, a[:8]})
	step(t, p, true, seg{1, 8, a[8:9]})
	step(t, p, true, seg{1, 9, a[9:10]})
	if p.seqs[1].canonical(nr) {
		t.Error("decode tokens left the sequence canonical")
	}
	if err := p.truncate(1, 8, "test"); err != nil {
		t.Fatal(err)
	}
	if !p.seqs[1].canonical(nr) {
		t.Error("truncated to its shared blocks, the sequence is not canonical")
	}
	step(t, p, true, seg{1, 8, a[8:16]})
	mustOpen(t, p, 3, a, 16) // Open registers the completed batch's blocks
	for _, id := range []int{1, 2, 3} {
		p.remove(id)
	}
	if err := p.checkIdle("test"); err != nil {
		t.Fatal(err)
	}
	// No canonical chunk: nothing is registered or found.
	q := newPagedBook(16, 2, nr, 0)
	mustOpen(t, q, 1, a, 0)
	prefill(t, q, 1, a, 0, chunk)
	q.remove(1)
	mustOpen(t, q, 1, a, 0)
	if q.alloc.Cached() != 0 || len(q.pending) != 0 {
		t.Errorf("a cache without sharing cached %d blocks", q.alloc.Cached())
	}
}

// TestPagedBookEviction fills the pool after a prefix was cached: cached
// blocks are reclaimed least recently freed first, a prefix losing its
// tail first, and a chunk missing a block is not shared at all.
func TestPagedBookEviction(t *testing.T) {
	const nr, chunk = 4, 8
	p := newPagedBook(8, 3, nr, chunk)
	a := seqTokens(18, 100) // 4 whole blocks in 2 chunks, 2 tokens in the residual
	mustOpen(t, p, 1, a, 0)
	prefill(t, p, 1, a, 0, chunk)
	blocksA := slices.Clone(p.seqs[1].blocks)
	p.remove(1)
	if p.alloc.Cached() != 4 || p.alloc.Free() != 8 {
		t.Fatalf("after a: %d cached, %d free", p.alloc.Cached(), p.alloc.Free())
	}
	// d takes the 4 blocks never used, then a's last block.
	d := seqTokens(20, 900)
	step(t, p, true, seg{2, 0, d[:8]}, seg{3, 0, []int{1}}) // beside another: d's blocks are not cached
	step(t, p, true, seg{2, 8, d[8:16]})
	step(t, p, true, seg{2, 16, d[16:20]})
	if slices.Contains(p.seqs[2].blocks, blocksA[0]) || !slices.Contains(p.seqs[2].blocks, blocksA[3]) {
		t.Fatalf("d holds %v; a held %v: eviction should take a's last block first", p.seqs[2].blocks, blocksA)
	}
	if p.alloc.Cached() != 3 {
		t.Errorf("%d cached blocks, want 3", p.alloc.Cached())
	}
	s := mustOpen(t, p, 4, a, 8) // chunk 1 lost a block: only chunk 0 is shared
	if !slices.Equal(s.blocks, blocksA[:2]) {
		t.Errorf("shared blocks %v, want %v", s.blocks, blocksA[:2])
	}
	p.remove(4)
	// Out of blocks: refused before anything changes.
	free := p.alloc.Free()
	b := batchOf(seg{5, 0, seqTokens(4*(free+1), 1)})
	if err := p.check(b, "test"); !errors.Is(err, kvcache.ErrOutOfBlocks) {
		t.Fatalf("a batch of %d blocks with %d free: %v", free+1, free, err)
	}
	if p.alloc.Free() != free || p.seqs[5] != nil {
		t.Error("a refused batch changed the books")
	}
	// Taking every free block evicts every cached one.
	step(t, p, true, seg{5, 0, seqTokens(4*free, 1)}, seg{3, 1, []int{2}})
	if p.alloc.Cached() != 0 || p.alloc.Free() != 0 {
		t.Errorf("a full pool still caches %d blocks (%d free)", p.alloc.Cached(), p.alloc.Free())
	}
	for _, id := range []int{2, 3, 5} {
		p.remove(id)
	}
	mustOpen(t, p, 6, a, 0)
	p.remove(6)
	if err := p.checkIdle("test"); err != nil {
		t.Fatal(err)
	}
}

// TestPagedBookTruncate: only residual tokens can be dropped, or all; n = 0
// releases the sequence's references (shared blocks stay with the other)
// and keeps its slot.
func TestPagedBookTruncate(t *testing.T) {
	const nr, chunk = 4, 8
	p := newPagedBook(16, 2, nr, chunk)
	a := seqTokens(19, 100)
	mustOpen(t, p, 1, a, 0)
	prefill(t, p, 1, a, 0, chunk)
	mustOpen(t, p, 2, a, 16)
	for _, c := range []struct {
		id, n int
		ok    bool
		len   int
	}{
		{1, 20, false, 19}, {1, -1, false, 19}, {1, 15, false, 19}, {1, 17, true, 17}, {1, 16, true, 16},
		{7, 3, false, 0}, {7, 0, true, 0}, {2, 0, true, 0},
	} {
		err := p.truncate(c.id, c.n, "test")
		if (err == nil) != c.ok || p.length(c.id) != c.len {
			t.Errorf("truncate %d to %d: %v, length %d; want ok %v, length %d", c.id, c.n, err, p.length(c.id), c.ok, c.len)
		}
		if err := p.checkRefs(); err != nil {
			t.Fatal(err)
		}
	}
	if p.alloc.Refs(int(p.seqs[1].blocks[0])) != 1 || len(p.freeSlots) != 0 {
		t.Errorf("after truncating b to 0: %d references to a's block, %d free slots", p.alloc.Refs(int(p.seqs[1].blocks[0])), len(p.freeSlots))
	}
	p.remove(1)
	p.remove(2)
	if err := p.checkIdle("test"); err != nil {
		t.Fatal(err)
	}
}

// bitsModel says what the bytes of a GPU block are a function of: every
// forward segment that computed the tokens before its end, with its
// position, tokens and batch. A segment alone in its batch is described by
// (pos, tokens); one beside others or never completed gets a description
// of its own, equal to no other (its rows depend on the batch: T, the
// other rows).
type bitsModel struct {
	hist   map[int][]string // per sequence id: its segments' descriptions
	bits   map[int32]string // per block: the history that wrote it
	unique int
}

// desc describes a segment computed alone: its position and tokens.
func desc(pos int, tokens []int) string { return fmt.Sprintf("%d %v", pos, tokens) }

func (m *bitsModel) digest(h []string) string {
	sum := sha256.Sum256(fmt.Append(nil, h))
	return string(sum[:])
}

// solo is what block i of prompt holds when computed alone in chunks.
func (m *bitsModel) solo(prompt []int, i, nr, chunk int) string {
	var h []string
	for k := 0; k <= i*nr/chunk; k++ {
		h = append(h, desc(k*chunk, prompt[k*chunk:(k+1)*chunk]))
	}
	return m.digest(h)
}

// TestPagedBookRandom drives the books with random opens (prompts from a
// few shared prefixes), prefill chunks alone or beside decode tokens,
// batches that fail, decode steps, Truncate and Remove. After every
// operation the reference counts agree with the block tables, and every
// block a sequence takes from the cache holds, by bitsModel, exactly what
// computing the prompt alone would have written.
func TestPagedBookRandom(t *testing.T) {
	const nr, chunk, blocks = 4, 8, 40
	r := rand.New(rand.NewPCG(11, 12))
	p := newPagedBook(blocks, 6, nr, chunk)
	bm := &bitsModel{hist: map[int][]string{}, bits: map[int32]string{}}
	prefixes := [][]int{seqTokens(16, 1000), seqTokens(27, 2000), seqTokens(40, 3000)}
	type live struct {
		prompt, tokens []int // tokens: the prompt and the generated ones so far
	}
	seqs := map[int]*live{}
	nextID, shared, sharedTokens, refused, failed := 0, 0, 0, 0, 0
	// run begins a batch; complete says whether it runs through.
	run := func(complete bool, segs ...seg) error {
		b := batchOf(segs...)
		before := p.alloc.Free()
		if err := p.check(b, "test"); err != nil {
			if p.alloc.Free() != before {
				t.Fatal("a refused batch changed the free count")
			}
			return err
		}
		ss, _ := p.begin(b)
		for i, sg := range segs {
			d := desc(sg.pos, sg.tokens)
			if len(segs) > 1 || !complete {
				bm.unique++
				d = fmt.Sprintf("%d batch %d", sg.pos, bm.unique)
			}
			bm.hist[sg.id] = append(bm.hist[sg.id], d)
			d = bm.digest(bm.hist[sg.id])
			for blk := sg.pos / nr; blk < (sg.pos+len(sg.tokens))/nr; blk++ {
				bm.bits[ss[i].blocks[blk]] = d
			}
		}
		if complete {
			p.complete()
		}
		return nil
	}
	remove := func(id int) {
		p.remove(id)
		delete(seqs, id)
		delete(bm.hist, id)
	}
	decoding := func() []int {
		var ids []int
		for _, id := range slices.Sorted(maps.Keys(seqs)) {
			if len(seqs[id].tokens) >= len(seqs[id].prompt) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	for op := range 3000 {
		switch k := r.IntN(10); {
		case k < 3 && len(p.freeSlots) > 0: // open, then prefill alone or beside decode tokens
			pre := prefixes[r.IntN(len(prefixes))]
			prompt := append(slices.Clone(pre[:r.IntN(len(pre)+1)]), seqTokens(1+r.IntN(12), 5000+r.IntN(3))...)
			nextID++
			id := nextID
			s, cached, err := p.open(id, prompt, 1<<20, "test")
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range s.blocks {
				if bm.bits[b] != bm.solo(prompt, i, nr, chunk) {
					t.Fatalf("op %d: sequence %d took block %d (its %d-th) whose bytes are not those of its prompt computed alone", op, id, b, i)
				}
			}
			if cached > 0 {
				shared++
				sharedTokens += cached
			}
			seqs[id] = &live{prompt: prompt, tokens: slices.Clone(prompt[:cached])}
			for k := 0; k < cached/chunk; k++ {
				bm.hist[id] = append(bm.hist[id], desc(k*chunk, prompt[k*chunk:(k+1)*chunk]))
			}
			for pos := cached; pos < len(prompt); {
				end := min(len(prompt), (pos/chunk+1)*chunk)
				segs := []seg{{id, pos, prompt[pos:end]}}
				if r.IntN(3) == 0 {
					for _, o := range decoding() {
						segs = append(segs, seg{o, len(seqs[o].tokens), []int{7}})
					}
				}
				fail := r.IntN(20) == 0
				if err := run(!fail, segs...); err != nil {
					if !errors.Is(err, kvcache.ErrOutOfBlocks) {
						t.Fatal(err)
					}
					refused++
					remove(id)
					break
				}
				if fail && r.IntN(2) == 0 { // the scheduler removes a failed batch's sequences
					failed++
					for _, sg := range segs {
						remove(sg.id)
					}
					break
				}
				if fail { // a caller that carries on with garbage: nothing of it may be shared
					failed++
				}
				for _, sg := range segs[1:] {
					seqs[sg.id].tokens = append(seqs[sg.id].tokens, 7)
				}
				seqs[id].tokens = append(seqs[id].tokens, prompt[pos:end]...)
				pos = end
			}
		case k < 6: // a decode step of every decoding sequence
			var segs []seg
			for _, id := range decoding() {
				segs = append(segs, seg{id, len(seqs[id].tokens), []int{r.IntN(50)}})
			}
			if len(segs) == 0 {
				continue
			}
			if err := run(true, segs...); err != nil {
				if !errors.Is(err, kvcache.ErrOutOfBlocks) {
					t.Fatal(err)
				}
				refused++
				remove(segs[r.IntN(len(segs))].id) // preempt one
				continue
			}
			for _, sg := range segs {
				seqs[sg.id].tokens = append(seqs[sg.id].tokens, sg.tokens...)
			}
		case k < 7 && len(seqs) > 0: // truncate: drop residual tokens, or all
			ids := slices.Sorted(maps.Keys(seqs))
			id := ids[r.IntN(len(ids))]
			s := p.seqs[id]
			n := len(s.blocks)*nr + r.IntN(s.n-len(s.blocks)*nr+1)
			if r.IntN(4) == 0 {
				n = 0
			}
			if err := p.truncate(id, n, "test"); err != nil {
				t.Fatal(err)
			}
			seqs[id].tokens = seqs[id].tokens[:n]
			seqs[id].prompt = seqs[id].tokens // decoding from here on
			// Segments that computed only dropped tokens no longer count.
			keep := bm.hist[id][:0]
			for _, d := range bm.hist[id] {
				var pos int
				if _, err := fmt.Sscan(d, &pos); err != nil {
					t.Fatal(err)
				}
				if pos < n {
					keep = append(keep, d)
				}
			}
			bm.hist[id] = keep
		case len(seqs) > 0: // remove
			ids := slices.Sorted(maps.Keys(seqs))
			remove(ids[r.IntN(len(ids))])
		}
		if err := p.checkRefs(); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
	}
	for id := range maps.Clone(seqs) {
		remove(id)
	}
	if err := p.checkIdle("test"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d opens shared %d tokens; %d batches refused, %d failed; %d blocks cached at the end", shared, sharedTokens, refused, failed, p.alloc.Cached())
	if shared == 0 || refused == 0 || failed == 0 {
		t.Errorf("the run did not exercise sharing (%d), running out of blocks (%d) and failed batches (%d)", shared, refused, failed)
	}
}

// TestPagedBookRemoveAfterLastChunk checks that a sequence removed right
// after the batch of its last prompt chunk (a request that ends with its
// prompt) leaves that chunk findable, and that a batch that never ran
// through every layer leaves nothing findable.
func TestPagedBookRemoveAfterLastChunk(t *testing.T) {
	const nr, chunk = 4, 8
	p := newPagedBook(32, 8, nr, chunk)
	a := seqTokens(16, 100)
	mustOpen(t, p, 1, a, 0)
	prefill(t, p, 1, a, 0, chunk)
	p.remove(1) // no begin or open in between
	mustOpen(t, p, 2, append(slices.Clone(a), 1, 2, 3), 16)
	p.remove(2)

	b := seqTokens(16, 500)
	mustOpen(t, p, 3, b, 0)
	step(t, p, true, seg{3, 0, b[:chunk]})
	step(t, p, false, seg{3, chunk, b[chunk:]}) // fails part way
	p.remove(3)
	mustOpen(t, p, 4, append(slices.Clone(b), 1, 2, 3), chunk)
	p.remove(4)
	if err := p.checkRefs(); err != nil {
		t.Fatal(err)
	}
}

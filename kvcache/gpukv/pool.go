// pool.go: the host-side bookkeeping of the GPU caches' fixed memory.
// blockPool is Planes' plain free list of blocks and slots; pagedBook is
// Paged's: reference-counted blocks (kvcache.BlockAllocator), residual
// slots, each sequence's block table, and prefix sharing by canonical
// chunks (which blocks a prompt may reuse, which blocks a batch makes
// shareable). None of it touches the device, so its tests run without one.

package gpukv

import (
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// seqBlocks is one sequence's share of a GPU cache: its slot (a residual
// block in Paged, a row of the attention mass in Planes), the pool blocks
// holding its tokens in order (the same block ids in every layer), and its
// length.
type seqBlocks struct {
	slot   int
	blocks []int32
	n      int
}

// blockPool is the host-side bookkeeping of Planes' fixed memory: the free
// pool blocks and the free sequence slots (Paged's, with reference counts
// and shared prefixes, is pagedBook).
type blockPool struct {
	freeBlocks    []int32
	freeSlots     []int
	blocks, slots int // totals
}

// newBlockPool returns a pool with every block and slot free; blocks and slots
// are handed out lowest first.
func newBlockPool(blocks, slots int) blockPool {
	p := blockPool{blocks: blocks, slots: slots}
	for i := blocks - 1; i >= 0; i-- {
		p.freeBlocks = append(p.freeBlocks, int32(i))
	}
	for i := slots - 1; i >= 0; i-- {
		p.freeSlots = append(p.freeSlots, i)
	}
	return p
}

// fits returns an error wrapping kvcache.ErrOutOfBlocks unless blocks pool
// blocks and slots sequence slots are free; what names the cache.
func (p *blockPool) fits(what string, blocks, slots int) error {
	if blocks > len(p.freeBlocks) || slots > len(p.freeSlots) {
		return fmt.Errorf("gpukv: %s: the batch needs %d blocks and %d sequence slots, %d and %d are free: %w",
			what, blocks, slots, len(p.freeBlocks), len(p.freeSlots), kvcache.ErrOutOfBlocks)
	}
	return nil
}

// open returns a new sequence with a slot; the caller checked one is free.
func (p *blockPool) open() *seqBlocks {
	s := &seqBlocks{slot: p.freeSlots[len(p.freeSlots)-1]}
	p.freeSlots = p.freeSlots[:len(p.freeSlots)-1]
	return s
}

// grow appends n free blocks to s's block table; the caller checked they
// are free.
func (p *blockPool) grow(s *seqBlocks, n int) {
	for range n {
		s.blocks = append(s.blocks, p.freeBlocks[len(p.freeBlocks)-1])
		p.freeBlocks = p.freeBlocks[:len(p.freeBlocks)-1]
	}
}

// empty frees s's blocks and makes it hold no tokens; it keeps its slot.
func (p *blockPool) empty(s *seqBlocks) {
	p.freeBlocks = append(p.freeBlocks, s.blocks...)
	s.blocks, s.n = nil, 0
}

// release frees s's blocks and its slot.
func (p *blockPool) release(s *seqBlocks) {
	p.empty(s)
	p.freeSlots = append(p.freeSlots, s.slot)
}

// sharedChunk returns the canonical chunk of a Paged cache whose prefill
// chunks hold at most maxChunk tokens in blocks of nr tokens: maxChunk
// itself when it is a whole number of blocks (then a chunk ends with an
// empty residual, and a sequence continuing from cached chunks starts at a
// block boundary), else 0: no prefix sharing.
func sharedChunk(maxChunk, nr int) int {
	if nr <= 0 || maxChunk <= 0 || maxChunk%nr != 0 {
		return 0
	}
	return maxChunk
}

// chunkKeys returns the prefix keys of the blocks of one canonical chunk,
// in order: tokens are the chunk's (a whole number of nr-token blocks) and
// parent the key of the last block before it (the zero key for the first
// chunk). Each block's key is chained over every token of its chunk, not
// only its own: the chunk was one forward pass, so the key names the whole
// input of the computation that wrote the block (see Paged's "Prefix
// sharing").
func chunkKeys(parent kvcache.PrefixKey, tokens []int, nr int) []kvcache.PrefixKey {
	chunk := kvcache.NextPrefixKey(parent, tokens)
	keys := make([]kvcache.PrefixKey, len(tokens)/nr)
	for j := range keys {
		keys[j] = kvcache.NextPrefixKey(chunk, []int{j})
	}
	return keys
}

// lookupChunks returns how many leading chunks of prompt a sequence may
// take from the cache: the whole chunks before the prompt's last token
// (whose logits must be computed) that end within maxLen.
func lookupChunks(promptLen, chunk, maxLen int) int {
	if chunk <= 0 || promptLen <= 1 {
		return 0
	}
	return min(promptLen-1, maxLen) / chunk
}

// canonicalSegment reports whether a batch segment of n new tokens at
// position pos, in a batch of batchSeqs sequences and batchTokens tokens,
// is a canonical chunk: the batch's only sequence, exactly chunk tokens,
// starting at a multiple of chunk.
func canonicalSegment(pos, n, batchSeqs, batchTokens, chunk int) bool {
	return chunk > 0 && batchSeqs == 1 && batchTokens == n && n == chunk && pos%chunk == 0
}

// pagedSeq is one sequence of a Paged cache: its slot, block table and
// length, and what prefix sharing knows of it.
type pagedSeq struct {
	seqBlocks
	// keys holds the prefix keys of the leading blocks written by canonical
	// chunks (or taken from the cache), one per block.
	keys []kvcache.PrefixKey
}

// canonical reports whether every token s holds lies in blocks of
// canonical chunks (keys): then its next segment, if a canonical chunk,
// computes what it computes in any sequence with the same tokens.
func (s *pagedSeq) canonical(nr int) bool { return s.n == len(s.keys)*nr }

// pendingBlock is a block written by the current batch under key, made
// findable when the batch has completed.
type pendingBlock struct {
	seq   *pagedSeq
	block int // index into seq.blocks (and seq.keys)
	key   kvcache.PrefixKey
}

// pagedBook is the host-side bookkeeping of a Paged cache: its pool blocks
// (reference counted, freed blocks findable by prefix key until reused;
// kvcache.BlockAllocator), its residual slots, its sequences, and the
// blocks of the current batch that become shareable once it completes.
type pagedBook struct {
	alloc     *kvcache.BlockAllocator
	freeSlots []int
	slots     int
	nr        int // tokens per block
	chunk     int // the canonical chunk (sharedChunk); 0: no sharing
	seqs      map[int]*pagedSeq
	pending   []pendingBlock
	done      bool // the batch of pending has completed (complete was called)
}

// newPagedBook returns the books of an empty cache of blocks blocks of nr
// tokens, slots sequence slots and canonical chunk chunk (0: no sharing).
// Slots are handed out lowest first.
func newPagedBook(blocks, slots, nr, chunk int) *pagedBook {
	p := &pagedBook{alloc: kvcache.NewBlockAllocator(blocks), slots: slots, nr: nr, chunk: chunk, seqs: map[int]*pagedSeq{}}
	for i := slots - 1; i >= 0; i-- {
		p.freeSlots = append(p.freeSlots, i)
	}
	return p
}

// length returns the tokens held for sequence id (0 if unknown).
func (p *pagedBook) length(id int) int {
	if s := p.seqs[id]; s != nil {
		return s.n
	}
	return 0
}

// newSeq opens sequence id in a free slot; the caller checked one is free
// and id is not open.
func (p *pagedBook) newSeq(id int) *pagedSeq {
	s := &pagedSeq{seqBlocks: seqBlocks{slot: p.freeSlots[len(p.freeSlots)-1]}}
	p.freeSlots = p.freeSlots[:len(p.freeSlots)-1]
	p.seqs[id] = s
	return s
}

// open starts sequence id for prompt with the cached blocks of the
// longest run of leading canonical chunks it shares with earlier
// sequences (lookupChunks; a chunk is taken whole or not at all) and
// returns it with the number of tokens they hold. what names the cache in
// errors.
func (p *pagedBook) open(id int, prompt []int, maxLen int, what string) (*pagedSeq, int, error) {
	p.commit()
	if p.seqs[id] != nil {
		return nil, 0, fmt.Errorf("gpukv: %s: sequence %d is already open", what, id)
	}
	if len(p.freeSlots) == 0 {
		return nil, 0, fmt.Errorf("%w (%d sequences)", kvcache.ErrNoSlot, p.slots)
	}
	s := p.newSeq(id)
	var parent kvcache.PrefixKey
	for k := range lookupChunks(len(prompt), p.chunk, maxLen) {
		keys := chunkKeys(parent, prompt[k*p.chunk:(k+1)*p.chunk], p.nr)
		ids := make([]int32, 0, len(keys))
		for _, key := range keys {
			b, ok := p.alloc.Lookup(key)
			if !ok {
				break
			}
			ids = append(ids, int32(b))
		}
		if len(ids) < len(keys) { // part of the chunk was evicted: give back the rest
			p.release(ids)
			break
		}
		s.blocks = append(s.blocks, ids...)
		s.keys = append(s.keys, keys...)
		parent = keys[len(keys)-1]
	}
	s.n = len(s.blocks) * p.nr
	return s, s.n, nil
}

// release drops one reference to each of blocks, last first: blocks freed
// go to the allocator's free list in that order, so that under memory
// pressure (least recently freed first) a cached prefix loses its tail
// before its head and stays findable as a shorter prefix.
func (p *pagedBook) release(blocks []int32) {
	for _, b := range slices.Backward(blocks) {
		// Each table entry holds one reference; an error here would be a
		// bookkeeping bug, which Check reports in tests.
		_ = p.alloc.Release(int(b))
	}
}

// need returns the blocks and slots batch b takes.
func (p *pagedBook) need(b *model.Batch) (blocks, slots int) {
	for _, s := range b.Seqs {
		if p.seqs[s.ID] == nil {
			slots++
		}
		blocks += (s.Pos+s.Len)/p.nr - s.Pos/p.nr
	}
	return blocks, slots
}

// check returns an error unless every sequence of b continues where its
// cache ends (a new one at position 0) and the free blocks (cached ones
// included) and slots cover the batch; the latter error wraps
// kvcache.ErrOutOfBlocks. what names the cache in errors.
func (p *pagedBook) check(b *model.Batch, what string) error {
	for _, s := range b.Seqs {
		if have := p.length(s.ID); s.Pos != have {
			return fmt.Errorf("gpukv: %s: sequence %d continues at position %d, but the cache holds %d tokens", what, s.ID, s.Pos, have)
		}
	}
	blocks, slots := p.need(b)
	return p.fits(what, blocks, slots)
}

// fits returns an error wrapping kvcache.ErrOutOfBlocks unless blocks
// blocks and slots slots are free; what names the cache.
func (p *pagedBook) fits(what string, blocks, slots int) error {
	if blocks > p.alloc.Free() || slots > len(p.freeSlots) {
		return fmt.Errorf("gpukv: %s: the batch needs %d blocks and %d sequence slots, %d and %d are free: %w",
			what, blocks, slots, p.alloc.Free(), len(p.freeSlots), kvcache.ErrOutOfBlocks)
	}
	return nil
}

// begin takes batch b, which check accepted: it opens the sequences new to
// it, gives each the blocks its new tokens fill (cached blocks are
// reclaimed least recently freed first), sets their lengths and marks the
// blocks of canonical chunks shareable once the batch completes. It
// returns the batch's sequences in order and the slots opened.
func (p *pagedBook) begin(b *model.Batch) (seqs []*pagedSeq, fresh []int) {
	p.commit()
	seqs = make([]*pagedSeq, len(b.Seqs))
	for i, sq := range b.Seqs {
		s := p.seqs[sq.ID]
		if s == nil {
			s = p.newSeq(sq.ID)
			fresh = append(fresh, s.slot)
		}
		ids, err := p.alloc.Alloc((sq.Pos+sq.Len)/p.nr - sq.Pos/p.nr)
		if err != nil {
			panic(fmt.Sprintf("gpukv: blocks checked free are not: %v", err)) // check passed: a bookkeeping bug
		}
		for _, id := range ids {
			s.blocks = append(s.blocks, int32(id))
		}
		tokens := b.Tokens[sq.Start : sq.Start+sq.Len]
		if s.canonical(p.nr) && canonicalSegment(sq.Pos, sq.Len, len(b.Seqs), len(b.Tokens), p.chunk) {
			var parent kvcache.PrefixKey
			if len(s.keys) > 0 {
				parent = s.keys[len(s.keys)-1]
			}
			ids := make([]int, len(tokens))
			for j, t := range tokens {
				ids[j] = int(t)
			}
			for _, key := range chunkKeys(parent, ids, p.nr) {
				p.pending = append(p.pending, pendingBlock{seq: s, block: len(s.keys), key: key})
				s.keys = append(s.keys, key)
			}
		}
		s.n = sq.Pos + sq.Len
		seqs[i] = s
	}
	return seqs, fresh
}

// complete records that the batch of the last begin has run through every
// layer: its pending blocks hold their tokens and may be shared.
func (p *pagedBook) complete() { p.done = true }

// commit makes the pending blocks findable if their batch completed, and
// otherwise takes back their keys (their bytes were never written), so
// the sequence shares nothing from them on. Begin and Open commit first:
// a batch the caller went on from has completed.
func (p *pagedBook) commit() {
	for _, pb := range p.pending {
		switch {
		case !p.done:
			pb.seq.keys = pb.seq.keys[:min(len(pb.seq.keys), pb.block)]
		case pb.block < len(pb.seq.blocks):
			_ = p.alloc.Register(int(pb.seq.blocks[pb.block]), pb.key)
		}
	}
	p.pending, p.done = p.pending[:0], false
}

// dropPending forgets the pending blocks of s, whose blocks are released.
func (p *pagedBook) dropPending(s *pagedSeq) {
	p.pending = slices.DeleteFunc(p.pending, func(pb pendingBlock) bool { return pb.seq == s })
}

// truncate keeps the first n tokens of sequence id: n = 0 releases every
// block (the slot stays), else n must keep every packed block (only fp16
// residual tokens can be dropped). what names the cache in errors.
func (p *pagedBook) truncate(id, n int, what string) error {
	s := p.seqs[id]
	if s == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("gpukv: %s: truncate unknown sequence %d", what, id)
	}
	switch {
	case n < 0 || n > s.n:
		return fmt.Errorf("gpukv: %s: truncate sequence %d of %d tokens to %d", what, id, s.n, n)
	case n == 0:
		p.dropPending(s)
		p.release(s.blocks)
		s.blocks, s.keys, s.n = nil, nil, 0
	case n < len(s.blocks)*p.nr:
		return fmt.Errorf("gpukv: %s: truncate sequence %d to %d tokens: its first %d are packed", what, id, n, len(s.blocks)*p.nr)
	default:
		s.n = n // with only keyed blocks left, the sequence is canonical again
	}
	return nil
}

// remove frees sequence id's blocks (cached ones stay findable) and slot.
func (p *pagedBook) remove(id int) {
	s := p.seqs[id]
	if s == nil {
		return
	}
	if p.done {
		// The last batch ran through every layer: its blocks hold their
		// tokens, this sequence's too (it may end right after its last
		// prompt chunk), so they become findable before it lets them go.
		p.commit()
	}
	p.dropPending(s)
	p.release(s.blocks)
	p.freeSlots = append(p.freeSlots, s.slot)
	delete(p.seqs, id)
}

// openFilled opens sequence id holding n tokens written outside any batch
// (Paged.FillRandom): its blocks are never shared. what names the cache.
func (p *pagedBook) openFilled(id, n int, what string) (*pagedSeq, error) {
	if p.seqs[id] != nil {
		return nil, fmt.Errorf("gpukv: %s: sequence %d exists", what, id)
	}
	if err := p.fits(what, n/p.nr, 1); err != nil {
		return nil, err
	}
	s := p.newSeq(id)
	ids, _ := p.alloc.Alloc(n / p.nr)
	for _, b := range ids {
		s.blocks = append(s.blocks, int32(b))
	}
	s.n = n // no keys: never canonical
	return s, nil
}

// checkIdle returns an error unless no sequence is open, every block is
// free (cached ones count as free), every slot is free and the
// allocator's invariants hold.
func (p *pagedBook) checkIdle(what string) error {
	if len(p.seqs) != 0 || p.alloc.Free() != p.alloc.Total() || len(p.freeSlots) != p.slots {
		return fmt.Errorf("gpukv: %s not idle: %d sequences, %d of %d blocks and %d of %d slots free",
			what, len(p.seqs), p.alloc.Free(), p.alloc.Total(), len(p.freeSlots), p.slots)
	}
	return p.alloc.Check()
}

// checkRefs returns an error unless each block's reference count equals
// the number of block tables holding it and the allocator's invariants
// hold (tests call it after every operation).
func (p *pagedBook) checkRefs() error {
	if err := p.alloc.Check(); err != nil {
		return err
	}
	refs := make([]int, p.alloc.Total())
	for id, s := range p.seqs {
		if len(s.keys) > len(s.blocks) || s.n < len(s.blocks)*p.nr || s.n >= (len(s.blocks)+1)*p.nr {
			return fmt.Errorf("gpukv: sequence %d: %d tokens, %d blocks, %d keys", id, s.n, len(s.blocks), len(s.keys))
		}
		for _, b := range s.blocks {
			refs[b]++
		}
	}
	for b, n := range refs {
		if p.alloc.Refs(b) != n {
			return fmt.Errorf("gpukv: block %d has %d references, %d block tables hold it", b, p.alloc.Refs(b), n)
		}
	}
	return nil
}

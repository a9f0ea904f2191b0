package engine

import (
	"errors"
	"fmt"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// BlockCache is the paged KV cache as the Scheduler sees it: the model's
// Attention (BatchStarter's Begin reserves the blocks a batch needs, or
// fails with ErrOutOfBlocks before changing anything) plus sequence
// management and block accounting. PagedCache implements it on the CPU; a
// GPU cache implements the same methods over device memory.
//
// Block accounting is in the cache's own blocks of BlockTokens() tokens;
// the scheduler only compares counts. Sequence ids are chosen by the
// caller and stay valid until Remove.
type BlockCache interface {
	model.Attention
	model.BatchStarter
	// Open starts sequence id for a prompt and reuses, without copying,
	// the cached blocks of the longest prefix of whole blocks it shares
	// with earlier prompts (never the prompt's last token, whose logits are
	// needed). It returns how many prompt tokens are already cached: the
	// first batch of the sequence starts at that position.
	Open(id int, prompt []int) (cached int, err error)
	// Remove frees sequence id's blocks and its residual slot at once.
	// Removing an unknown id does nothing.
	Remove(id int)
	// Truncate keeps the first n tokens of sequence id.
	Truncate(id, n int) error
	// Len returns the number of tokens cached for sequence id.
	Len(id int) int
	// BlocksNeeded returns how many free blocks Begin would take to add n
	// tokens to sequence id.
	BlocksNeeded(id, n int) int
	// BlockTokens is the number of tokens in one block.
	BlockTokens() int
	// FreeBlocks and TotalBlocks count the block pool.
	FreeBlocks() int
	TotalBlocks() int
	// MaxSeqs is the number of sequences the cache can hold at once.
	MaxSeqs() int
}

// ErrNoSlot is returned (wrapped) by Open when the cache already holds
// MaxSeqs sequences.
var ErrNoSlot = errors.New("engine: no free sequence slot in the KV cache")

// PagedOptions size a PagedCache.
type PagedOptions struct {
	// MaxSeqs is the number of sequences held at once; each holds one fp16
	// residual block per layer (memory reserved up front).
	MaxSeqs int
	// Blocks is the number of packed blocks in the pool. If 0, the pool is
	// what MemoryBytes leaves after the residual blocks.
	Blocks int
	// MemoryBytes is the cache's total memory (residual blocks plus pool)
	// when Blocks is 0.
	MemoryBytes int64
}

// PagedCache is the CPU low-bit KV cache with paged storage: every layer's
// packed blocks live in one pool, addressed by block index (block id b of
// layer l is pool[l][b·Hkv·BlockBytes:]), and a sequence holds a block
// table shared by all layers. Blocks are reference counted so that
// sequences with a common prompt prefix share its packed blocks without a
// copy (see BlockAllocator and PrefixKey). Each sequence also owns one fp16
// residual block per layer, taken from MaxSeqs preallocated slots.
//
// Attention itself is attn.Decode over views of the pool, exactly as
// KVCache computes it, so a sequence gives the same bits in either cache.
//
// A block is offered for sharing only when it was filled by a single
// forward segment of its sequence (a prefill chunk that contains the whole
// block) and all blocks before it were offered too: then each of its
// tokens attended to the block already packed, and the block's bytes are a
// function of the token prefix alone, whatever else ran in the batch.
// Blocks completed token by token during decoding are never shared.
//
// A PagedCache is not safe for concurrent use: one goroutine (the
// scheduler's) drives it.
type PagedCache struct {
	be     backend.Backend
	format kv.Format
	shape  attn.Shape
	layers int
	window int // windowLimit of the model

	alloc    *BlockAllocator
	pool     [][]byte // [layer][blocks·stride]
	stride   int      // bytes of one block of one layer: Hkv·BlockBytes
	resK     [][]uint16
	resV     [][]uint16 // [layer][slots·Hkv·Nr·D]
	resWidth int        // Hkv·Nr·D
	slots    []int      // free residual slots
	maxSeqs  int

	seqs    map[int]*pagedSeq
	pending []pendingKey // blocks filled by the last batch, registered at the next Begin or Open

	q, k, v, out []float32
}

// pagedSeq is one sequence of a PagedCache.
type pagedSeq struct {
	slot   int
	blocks []int         // block table: packed blocks in token order
	layers []*attn.Cache // per layer, Blocks are views into the pool
	tokens []int         // the cached tokens (to key blocks)
	keys   []PrefixKey   // keys of the leading shareable blocks
	open   bool          // false once a block was not shareable: later blocks are not either
}

type pendingKey struct {
	seq   *pagedSeq
	block int
	key   PrefixKey
}

// NewPagedCache returns an empty paged cache of format spec for model
// config cfg, sized by o.
func NewPagedCache(be backend.Backend, cfg *model.Config, spec kv.Spec, o PagedOptions) (*PagedCache, error) {
	if spec.Planes.On {
		return nil, fmt.Errorf("engine: paged cache: the bit-plane format %s has its own paged cache (NewPagedPlaneCache)", spec.String())
	}
	sh := attn.Shape{Hq: cfg.Heads, Hkv: cfg.KVHeads, D: cfg.HeadDim}
	if err := sh.Validate(); err != nil {
		return nil, fmt.Errorf("engine: model %s: %w", cfg.Architecture, err)
	}
	f, err := spec.Resolve(cfg.HeadDim)
	if err != nil {
		return nil, err
	}
	if o.MaxSeqs <= 0 {
		return nil, fmt.Errorf("engine: paged cache: max sequences %d must be positive", o.MaxSeqs)
	}
	c := &PagedCache{be: be, format: f, shape: sh, layers: cfg.Layers, maxSeqs: o.MaxSeqs, seqs: map[int]*pagedSeq{}, window: windowLimit(cfg)}
	c.stride = sh.Hkv * f.BlockBytes()
	blocks := o.Blocks
	if blocks == 0 {
		left := o.MemoryBytes - int64(o.MaxSeqs)*c.ResidualBytes()
		if left < c.BlockBytes() {
			return nil, fmt.Errorf("engine: paged cache: %d bytes hold the residual blocks of %d sequences (%d bytes each, %s) but no packed block of %d bytes; give more memory or fewer sequences",
				o.MemoryBytes, o.MaxSeqs, c.ResidualBytes(), f.Spec.String(), c.BlockBytes())
		}
		blocks = int(left / c.BlockBytes())
	}
	if blocks <= 0 || int64(blocks)*int64(c.stride) > 1<<40 {
		return nil, fmt.Errorf("engine: paged cache: %d blocks", blocks)
	}
	c.alloc = NewBlockAllocator(blocks)
	c.resWidth = sh.Hkv * f.Residual * sh.D
	c.pool = make([][]byte, cfg.Layers)
	c.resK, c.resV = make([][]uint16, cfg.Layers), make([][]uint16, cfg.Layers)
	for l := range c.pool {
		c.pool[l] = make([]byte, blocks*c.stride)
		c.resK[l] = make([]uint16, o.MaxSeqs*c.resWidth)
		c.resV[l] = make([]uint16, o.MaxSeqs*c.resWidth)
	}
	for s := o.MaxSeqs - 1; s >= 0; s-- {
		c.slots = append(c.slots, s)
	}
	return c, nil
}

// Format returns the cache's resolved KV format.
func (c *PagedCache) Format() kv.Format { return c.format }

// BlockBytes is the memory of one block across all layers and KV heads,
// from the format's accounting (kv.Format.BlockBytes).
func (c *PagedCache) BlockBytes() int64 {
	return int64(c.layers) * int64(c.shape.Hkv) * int64(c.format.BlockBytes())
}

// ResidualBytes is the memory of one sequence's fp16 residual blocks across
// all layers and KV heads (kv.Format.ResidualBytes).
func (c *PagedCache) ResidualBytes() int64 {
	return int64(c.layers) * int64(c.shape.Hkv) * int64(c.format.ResidualBytes())
}

// Bytes returns the memory the cache allocated: the block pool and the
// residual slots.
func (c *PagedCache) Bytes() int64 {
	var n int64
	for l := range c.pool {
		n += int64(len(c.pool[l])) + 2*int64(len(c.resK[l])+len(c.resV[l]))
	}
	return n
}

// BlockTokens implements BlockCache: the format's residual size Nr.
func (c *PagedCache) BlockTokens() int { return c.format.Residual }

// FreeBlocks implements BlockCache.
func (c *PagedCache) FreeBlocks() int { return c.alloc.Free() }

// TotalBlocks implements BlockCache.
func (c *PagedCache) TotalBlocks() int { return c.alloc.Total() }

// CachedBlocks returns the free blocks that still hold a findable prefix.
func (c *PagedCache) CachedBlocks() int { return c.alloc.Cached() }

// MaxSeqs implements BlockCache.
func (c *PagedCache) MaxSeqs() int { return c.maxSeqs }

// Seqs returns the number of sequences held.
func (c *PagedCache) Seqs() int { return len(c.seqs) }

// Allocator exposes the block allocator, for tests and metrics.
func (c *PagedCache) Allocator() *BlockAllocator { return c.alloc }

// Len implements BlockCache.
func (c *PagedCache) Len(id int) int {
	if s := c.seqs[id]; s != nil {
		return s.layers[0].Len(c.format.Residual)
	}
	return 0
}

// BlocksNeeded implements BlockCache.
func (c *PagedCache) BlocksNeeded(id, n int) int {
	have := 0
	if s := c.seqs[id]; s != nil {
		have = len(s.blocks)
	}
	return max(0, (c.Len(id)+n)/c.format.Residual-have)
}

// Open implements BlockCache.
func (c *PagedCache) Open(id int, prompt []int) (int, error) {
	c.commit()
	if _, ok := c.seqs[id]; ok {
		return 0, fmt.Errorf("engine: paged cache: sequence %d is already open", id)
	}
	s, err := c.newSeq(id)
	if err != nil {
		return 0, err
	}
	nr := c.format.Residual
	var key PrefixKey
	for i := 0; (i+1)*nr <= len(prompt)-1; i++ {
		key = NextPrefixKey(key, prompt[i*nr:(i+1)*nr])
		b, ok := c.alloc.Lookup(key)
		if !ok {
			break
		}
		s.blocks = append(s.blocks, b)
		s.keys = append(s.keys, key)
		for l, lc := range s.layers {
			lc.Blocks = append(lc.Blocks, c.block(l, b))
		}
	}
	cached := len(s.blocks) * nr
	s.tokens = append(s.tokens, prompt[:cached]...)
	return cached, nil
}

func (c *PagedCache) newSeq(id int) (*pagedSeq, error) {
	if len(c.slots) == 0 {
		return nil, fmt.Errorf("%w (%d sequences)", ErrNoSlot, c.maxSeqs)
	}
	slot := c.slots[len(c.slots)-1]
	c.slots = c.slots[:len(c.slots)-1]
	s := &pagedSeq{slot: slot, layers: make([]*attn.Cache, c.layers), open: true}
	for l := range s.layers {
		lc := &attn.Cache{Format: c.format, Shape: c.shape}
		lc.ResK = c.resK[l][slot*c.resWidth : (slot+1)*c.resWidth]
		lc.ResV = c.resV[l][slot*c.resWidth : (slot+1)*c.resWidth]
		lc.NewBlock = func() ([]byte, error) {
			i := len(lc.Blocks)
			if i >= len(s.blocks) {
				return nil, fmt.Errorf("%w: layer %d needs block %d of a sequence that reserved %d", ErrOutOfBlocks, l, i, len(s.blocks))
			}
			b := c.block(l, s.blocks[i])
			clear(b)
			return b, nil
		}
		s.layers[l] = lc
	}
	c.seqs[id] = s
	return s, nil
}

// block returns layer l's bytes of block id.
func (c *PagedCache) block(l, id int) []byte {
	return c.pool[l][id*c.stride : (id+1)*c.stride : (id+1)*c.stride]
}

// Remove implements BlockCache.
func (c *PagedCache) Remove(id int) {
	s := c.seqs[id]
	if s == nil {
		return
	}
	c.dropPending(s)
	for _, b := range s.blocks {
		// The table holds one reference per entry; an error here would be
		// a bookkeeping bug, which Check reports in tests.
		_ = c.alloc.Release(b)
	}
	c.slots = append(c.slots, s.slot)
	delete(c.seqs, id)
}

func (c *PagedCache) dropPending(s *pagedSeq) {
	keep := c.pending[:0]
	for _, p := range c.pending {
		if p.seq != s {
			keep = append(keep, p)
		}
	}
	c.pending = keep
}

// commit registers the blocks filled by the last batch, which has
// completed (a failed batch's sequences were removed or truncated, which
// dropped their pending keys).
func (c *PagedCache) commit() {
	for _, p := range c.pending {
		if p.block < len(p.seq.blocks) {
			_ = c.alloc.Register(p.seq.blocks[p.block], p.key)
		}
	}
	c.pending = c.pending[:0]
}

// Truncate implements BlockCache. Packed blocks cannot be unpacked, so n
// must keep every packed block whole or drop it: n >= the packed tokens of
// every layer, or a multiple of the block size.
func (c *PagedCache) Truncate(id, n int) error {
	s := c.seqs[id]
	if s == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("engine: paged cache: truncate unknown sequence %d", id)
	}
	nr := c.format.Residual
	for l, lc := range s.layers {
		have := lc.Len(nr)
		if n < 0 || n > have {
			return fmt.Errorf("engine: paged cache: truncate sequence %d to %d tokens, layer %d holds %d", id, n, l, have)
		}
		if n < len(lc.Blocks)*nr && n%nr != 0 {
			return fmt.Errorf("engine: paged cache: truncate sequence %d to %d tokens would cut packed block %d of layer %d", id, n, n/nr, l)
		}
	}
	c.dropPending(s)
	keep := n / nr
	for _, lc := range s.layers {
		if len(lc.Blocks) > keep {
			lc.Blocks = lc.Blocks[:keep]
			lc.ResLen = 0
		} else {
			lc.ResLen = n - len(lc.Blocks)*nr
		}
	}
	for _, b := range s.blocks[min(keep, len(s.blocks)):] {
		_ = c.alloc.Release(b)
	}
	s.blocks = s.blocks[:min(keep, len(s.blocks))]
	s.tokens = s.tokens[:min(n, len(s.tokens))]
	s.keys = s.keys[:min(keep, len(s.keys))]
	s.open = len(s.keys) == len(s.blocks)
	return nil
}

// Begin implements model.BatchStarter: it checks the positions and reserves
// the blocks the batch's new tokens will fill, for all sequences or none.
// batchSeqs are a block cache's per-sequence operations reserveBatch needs.
type batchSeqs struct {
	open         func(id int) error // open sequence id, not open, starting at position 0
	has          func(id int) bool
	length       func(id int) int
	remove       func(id int)
	blocksNeeded func(id, n int) int
}

// reserveBatch is the all-or-nothing check of a block cache's Begin: it
// opens the sequences of b that start at position 0 and are not open, checks
// that every sequence continues where its cache ends, and, with an
// allocator, that the free blocks cover the batch. On error the sequences it
// opened are removed and nothing else has changed; the caller allocates the
// blocks after it returns nil. what names the cache in errors.
func reserveBatch(b *model.Batch, what string, alloc *BlockAllocator, s batchSeqs) error {
	need := 0
	var opened []int
	undo := func() {
		for _, id := range opened {
			s.remove(id)
		}
	}
	for _, sq := range b.Seqs {
		if !s.has(sq.ID) && sq.Pos == 0 {
			if err := s.open(sq.ID); err != nil {
				undo()
				return err
			}
			opened = append(opened, sq.ID)
		}
		if have := s.length(sq.ID); !s.has(sq.ID) || have != sq.Pos {
			undo()
			return fmt.Errorf("engine: %s: sequence %d continues at position %d, but the cache holds %d tokens", what, sq.ID, sq.Pos, have)
		}
		need += s.blocksNeeded(sq.ID, sq.Len)
	}
	if alloc != nil && need > alloc.Free() {
		undo()
		return fmt.Errorf("%w: the batch of %d tokens needs %d blocks, %d of %d free", ErrOutOfBlocks, len(b.Tokens), need, alloc.Free(), alloc.Total())
	}
	return nil
}

// A sequence not yet opened is opened when it starts at position 0.
func (c *PagedCache) Begin(b *model.Batch) error {
	if err := checkWindow(c.window, b); err != nil {
		return err
	}
	c.commit()
	err := reserveBatch(b, "paged cache", c.alloc, batchSeqs{
		open: func(id int) error {
			_, err := c.newSeq(id)
			return err
		},
		has:          func(id int) bool { return c.seqs[id] != nil },
		length:       c.Len,
		remove:       c.Remove,
		blocksNeeded: c.BlocksNeeded,
	})
	if err != nil {
		return err
	}
	nr := c.format.Residual
	for _, sq := range b.Seqs {
		s := c.seqs[sq.ID]
		ids, err := c.alloc.Alloc(c.BlocksNeeded(sq.ID, sq.Len))
		if err != nil { // cannot happen after the check above
			return err
		}
		s.blocks = append(s.blocks, ids...)
		for _, t := range b.Tokens[sq.Start : sq.Start+sq.Len] {
			s.tokens = append(s.tokens, int(t))
		}
		// Blocks filled entirely by this segment are shareable if all
		// before them are.
		for i := len(s.keys); s.open && i < (sq.Pos+sq.Len)/nr; i++ {
			if i*nr < sq.Pos {
				s.open = false
				break
			}
			var parent PrefixKey
			if i > 0 {
				parent = s.keys[i-1]
			}
			k := NextPrefixKey(parent, s.tokens[i*nr:(i+1)*nr])
			s.keys = append(s.keys, k)
			c.pending = append(c.pending, pendingKey{seq: s, block: i, key: k})
		}
	}
	return nil
}

// Attend implements model.Attention.
func (c *PagedCache) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if layer < 0 || layer >= c.layers {
		return fmt.Errorf("engine: layer %d out of range [0, %d)", layer, c.layers)
	}
	T := len(b.Tokens)
	qw, kvw := c.shape.Hq*c.shape.D, c.shape.Hkv*c.shape.D
	c.q, c.k, c.v, c.out = grow(c.q, T*qw), grow(c.k, T*kvw), grow(c.v, T*kvw), grow(c.out, T*qw)
	for _, t := range []struct {
		dst []float32
		src backend.Tensor
	}{{c.q, q}, {c.k, k}, {c.v, v}} {
		if err := c.be.Download(t.dst, t.src); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
	}
	for _, sq := range b.Seqs {
		s := c.seqs[sq.ID]
		if s == nil {
			return fmt.Errorf("engine: layer %d: sequence %d was not begun (call Begin or Open first)", layer, sq.ID)
		}
		lc := s.layers[layer]
		if have := lc.Len(c.format.Residual); have != sq.Pos {
			return fmt.Errorf("engine: layer %d: sequence %d continues at position %d, but its cache holds %d tokens", layer, sq.ID, sq.Pos, have)
		}
		if err := lc.Append(c.k[sq.Start*kvw:(sq.Start+sq.Len)*kvw], c.v[sq.Start*kvw:(sq.Start+sq.Len)*kvw]); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
		p := attn.Params{Format: c.format, Shape: c.shape, Tq: sq.Len}
		if err := attn.Decode(c.out[sq.Start*qw:(sq.Start+sq.Len)*qw], c.q[sq.Start*qw:(sq.Start+sq.Len)*qw], []*attn.Seq{&lc.Seq}, p); err != nil {
			return fmt.Errorf("engine: layer %d: %w", layer, err)
		}
	}
	return c.be.Upload(out, c.out)
}

var _ BlockCache = (*PagedCache)(nil)

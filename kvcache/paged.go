package kvcache

import (
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// Paged is the CPU low-bit KV cache of every format but bw: one attn.Cache
// per (sequence, layer), whose packed blocks are views of a pool and whose
// 16-bit residual block is a slot of the cache's residual memory. New
// tokens are appended (rounded to fp16 into the residual block, packed when
// it fills), then the new queries attend to everything the sequence holds,
// causally (attn.Decode with Tq = the new tokens), and on a layer with a
// sliding window W only to the last W positions (attn.Params.Window: the
// blocks wholly before the window are skipped, the rest masked per query
// row). A window frees nothing: every block stays held until the sequence
// is removed or truncated (memory O(length); blocks may be shared by
// prefixes and are re-read after a preemption's recompute). A prompt therefore
// attends to its own earlier tokens as stored: packed blocks quantized, the
// newest up to Nr-1 in fp16.
//
// Sized (Options.Blocks or MemoryBytes, and MaxSeqs), every layer's packed
// blocks live in one pool addressed by block index (block id b of layer l
// is pool[l][b·Hkv·BlockBytes:]) and a sequence holds a block table shared
// by all layers. Blocks are reference counted so that sequences with a
// common prompt prefix share its packed blocks without a copy (see
// BlockAllocator and PrefixKey), and each sequence takes one of MaxSeqs
// preallocated residual slots. Unbounded (no pool size: run and eval),
// blocks and residual blocks are allocated as sequences grow and no prefix
// is shared. Either way a sequence gives the same bits.
//
// A block is offered for sharing only when it was filled by a single
// forward segment of its sequence (a prefill chunk that contains the whole
// block) and all blocks before it were offered too: then each of its
// tokens attended to the block already packed, and the block's bytes are a
// function of the token prefix alone, whatever else ran in the batch.
// Blocks completed token by token during decoding are never shared.
type Paged struct {
	format  kv.Format   // the spec's (its Spec names the per-layer formats)
	formats []kv.Format // each layer's
	shape   attn.Shape
	layers  int
	windows []int   // per layer: the sliding window (0: full attention)
	softcap float32 // the attention scores' soft-cap (model.Config.AttnSoftcap; 0: none)
	host    hostBuffers

	// The pool of a sized cache; alloc is nil in an unbounded one.
	alloc    *BlockAllocator
	pool     [][]byte // [layer][blocks·stride]
	strides  []int    // per layer: bytes of one block, Hkv·BlockBytes
	resK     [][]uint16
	resV     [][]uint16 // [layer][slots·Hkv·Nr·D]
	resWidth int        // Hkv·Nr·D
	slots    []int      // free residual slots
	maxSeqs  int

	seqs    map[int]*pagedSeq
	pending []pendingKey // blocks filled by the last batch, registered at the next Begin or Open
	done    bool         // the last batch ran through every layer (its pending blocks hold their tokens)
}

// pagedSeq is one sequence of a Paged cache.
type pagedSeq struct {
	slot   int
	blocks []int         // block table: packed blocks in token order (sized cache)
	layers []*attn.Cache // per layer; in a sized cache, Blocks are views into the pool
	tokens []int         // the cached tokens (to key blocks)
	keys   []PrefixKey   // keys of the leading shareable blocks
	open   bool          // false once a block was not shareable: later blocks are not either
}

type pendingKey struct {
	seq   *pagedSeq
	block int
	key   PrefixKey
}

var _ Cache = (*Paged)(nil)

// NewPaged returns an empty CPU cache of format spec (not bw) for model
// config cfg on backend be, sized by o: Blocks blocks, or as many as
// MemoryBytes holds after the residual blocks of MaxSeqs sequences; with
// neither, an unbounded cache.
func NewPaged(be backend.Backend, cfg *model.Config, spec kv.Spec, o Options) (*Paged, error) {
	if spec.Planes.On {
		return nil, fmt.Errorf("kvcache: the bit-plane format %s has its own cache (NewPlanes)", spec.String())
	}
	sh, err := ShapeOf(cfg)
	if err != nil {
		return nil, err
	}
	f, fs, err := LayerFormats(cfg, spec)
	if err != nil {
		return nil, err
	}
	c := &Paged{format: f, formats: fs, shape: sh, layers: cfg.Layers, seqs: map[int]*pagedSeq{}, windows: layerWindows(cfg), softcap: float32(cfg.AttnSoftcap), host: hostBuffers{be: be}}
	if o.Blocks == 0 && o.MemoryBytes == 0 {
		return c, nil
	}
	if o.MaxSeqs <= 0 {
		return nil, fmt.Errorf("kvcache: paged cache: max sequences %d must be positive", o.MaxSeqs)
	}
	c.maxSeqs = o.MaxSeqs
	c.strides = make([]int, cfg.Layers)
	for l, lf := range fs {
		c.strides[l] = sh.Hkv * lf.BlockBytes()
	}
	blocks := o.Blocks
	if blocks == 0 {
		left := o.MemoryBytes - int64(o.MaxSeqs)*c.ResidualBytes()
		if left < c.BlockBytes() {
			return nil, fmt.Errorf("kvcache: paged cache: %d bytes hold the residual blocks of %d sequences (%d bytes each, %s) but no packed block of %d bytes; give more memory or fewer sequences",
				o.MemoryBytes, o.MaxSeqs, c.ResidualBytes(), f.Spec.String(), c.BlockBytes())
		}
		blocks = int(left / c.BlockBytes())
	}
	if blocks <= 0 || int64(blocks)*c.BlockBytes() > 1<<40 {
		return nil, fmt.Errorf("kvcache: paged cache: %d blocks", blocks)
	}
	c.alloc = NewBlockAllocator(blocks)
	c.resWidth = sh.Hkv * f.Residual * sh.D
	c.pool = make([][]byte, cfg.Layers)
	c.resK, c.resV = make([][]uint16, cfg.Layers), make([][]uint16, cfg.Layers)
	for l := range c.pool {
		c.pool[l] = make([]byte, blocks*c.strides[l])
		attn.AdviseHugePages(c.pool[l]) // the pool's blocks in 2 MiB pages as they fill
		c.resK[l] = make([]uint16, o.MaxSeqs*c.resWidth)
		c.resV[l] = make([]uint16, o.MaxSeqs*c.resWidth)
	}
	for s := o.MaxSeqs - 1; s >= 0; s-- {
		c.slots = append(c.slots, s)
	}
	return c, nil
}

// Format returns the cache's resolved KV format.
func (c *Paged) Format() kv.Format { return c.format }

// BlockBytes is the memory of one block across all layers and KV heads,
// from the format's accounting (kv.Format.BlockBytes).
func (c *Paged) BlockBytes() int64 {
	return sumBytes(c.formats, c.shape.Hkv, kv.Format.BlockBytes)
}

// ResidualBytes is the memory of one sequence's fp16 residual blocks across
// all layers and KV heads (kv.Format.ResidualBytes).
func (c *Paged) ResidualBytes() int64 {
	return sumBytes(c.formats, c.shape.Hkv, kv.Format.ResidualBytes)
}

// AllocatedBytes returns the memory a sized cache allocated: the block pool
// and the residual slots (0 for an unbounded cache).
func (c *Paged) AllocatedBytes() int64 {
	var n int64
	for l := range c.pool {
		n += int64(len(c.pool[l])) + 2*int64(len(c.resK[l])+len(c.resV[l]))
	}
	return n
}

// Bytes implements Cache.
func (c *Paged) Bytes(id int) (bytes, fp16Bytes int64) { return c.BytesAt(c.Len(id)) }

// BytesAt implements Cache.
func (c *Paged) BytesAt(l int) (bytes, fp16Bytes int64) {
	return SequenceBytes(c.formats, c.shape, l)
}

// BlockTokens implements Cache: the format's residual size Nr.
func (c *Paged) BlockTokens() int { return c.format.Residual }

// FreeBlocks implements Cache.
func (c *Paged) FreeBlocks() int {
	if c.alloc == nil {
		return 0
	}
	return c.alloc.Free()
}

// TotalBlocks implements Cache.
func (c *Paged) TotalBlocks() int {
	if c.alloc == nil {
		return 0
	}
	return c.alloc.Total()
}

// CachedBlocks returns the free blocks that still hold a findable prefix.
func (c *Paged) CachedBlocks() int {
	if c.alloc == nil {
		return 0
	}
	return c.alloc.Cached()
}

// MaxSeqs implements Cache.
func (c *Paged) MaxSeqs() int { return c.maxSeqs }

// Seqs returns the number of sequences held.
func (c *Paged) Seqs() int { return len(c.seqs) }

// Allocator exposes the block allocator of a sized cache (nil otherwise),
// for tests and metrics.
func (c *Paged) Allocator() *BlockAllocator { return c.alloc }

// SetTierPolicy implements Cache: this cache has no tiers.
func (c *Paged) SetTierPolicy(id int, p kv.PlaneSpec) error {
	return fmt.Errorf("kvcache: %w; this one is %s", ErrNoTiers, c.format.Spec.String())
}

// TierStats implements Cache: this cache has no tiers.
func (c *Paged) TierStats() (TierStats, bool) { return TierStats{}, false }

// Close implements Cache; a CPU cache's memory is the garbage collector's.
func (c *Paged) Close() error { return nil }

// Len implements Cache.
func (c *Paged) Len(id int) int {
	if s := c.seqs[id]; s != nil {
		return s.layers[0].Len(c.format.Residual)
	}
	return 0
}

// BlocksNeeded implements Cache (0 in an unbounded cache).
func (c *Paged) BlocksNeeded(id, n int) int {
	if c.alloc == nil {
		return 0
	}
	have := 0
	if s := c.seqs[id]; s != nil {
		have = len(s.blocks)
	}
	return max(0, (c.Len(id)+n)/c.format.Residual-have)
}

// Open implements Cache.
func (c *Paged) Open(id int, prompt []int) (int, error) {
	c.commit()
	if _, ok := c.seqs[id]; ok {
		return 0, fmt.Errorf("kvcache: paged cache: sequence %d is already open", id)
	}
	s, err := c.newSeq(id)
	if err != nil || c.alloc == nil {
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

// newSeq starts sequence id: in a sized cache with a residual slot and
// blocks from the pool, in an unbounded one with its own memory.
func (c *Paged) newSeq(id int) (*pagedSeq, error) {
	s := &pagedSeq{layers: make([]*attn.Cache, c.layers), open: true}
	if c.alloc == nil {
		for l := range s.layers {
			lc, err := attn.NewCache(c.formats[l], c.shape)
			if err != nil {
				return nil, err
			}
			s.layers[l] = lc
		}
		c.seqs[id] = s
		return s, nil
	}
	if len(c.slots) == 0 {
		return nil, fmt.Errorf("%w (%d sequences)", ErrNoSlot, c.maxSeqs)
	}
	s.slot = c.slots[len(c.slots)-1]
	c.slots = c.slots[:len(c.slots)-1]
	for l := range s.layers {
		lc := &attn.Cache{Format: c.formats[l], Shape: c.shape}
		lc.ResK = c.resK[l][s.slot*c.resWidth : (s.slot+1)*c.resWidth]
		lc.ResV = c.resV[l][s.slot*c.resWidth : (s.slot+1)*c.resWidth]
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
func (c *Paged) block(l, id int) []byte {
	st := c.strides[l]
	return c.pool[l][id*st : (id+1)*st : (id+1)*st]
}

// Remove implements Cache.
func (c *Paged) Remove(id int) {
	s := c.seqs[id]
	if s == nil {
		return
	}
	delete(c.seqs, id)
	if c.alloc == nil {
		return
	}
	if c.done {
		// The last batch ran through every layer: its blocks hold their
		// tokens, this sequence's too (it may end right after its last
		// prompt chunk), so they become findable before it lets them go.
		c.commit()
	}
	c.dropPending(s)
	// Last block first: freed blocks are reused in the order they were
	// freed, so under pressure a cached prefix loses its tail before its
	// head (its head alone can still be found; its tail alone cannot).
	for _, b := range slices.Backward(s.blocks) {
		// The table holds one reference per entry; an error here would be
		// a bookkeeping bug, which Check reports in tests.
		_ = c.alloc.Release(b)
	}
	c.slots = append(c.slots, s.slot)
}

func (c *Paged) dropPending(s *pagedSeq) {
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
func (c *Paged) commit() {
	for _, p := range c.pending {
		if p.block < len(p.seq.blocks) {
			_ = c.alloc.Register(p.seq.blocks[p.block], p.key)
		}
	}
	c.pending, c.done = c.pending[:0], false
}

// Truncate implements Cache. Packed blocks cannot be unpacked, so n must
// keep every packed block whole or drop it: n >= the packed tokens of every
// layer, or a multiple of the block size.
func (c *Paged) Truncate(id, n int) error {
	s := c.seqs[id]
	if s == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("kvcache: paged cache: truncate unknown sequence %d", id)
	}
	nr := c.format.Residual
	for l, lc := range s.layers {
		have := lc.Len(nr)
		if n < 0 || n > have {
			return fmt.Errorf("kvcache: paged cache: truncate sequence %d to %d tokens, layer %d holds %d", id, n, l, have)
		}
		if n < len(lc.Blocks)*nr && n%nr != 0 {
			return fmt.Errorf("kvcache: paged cache: truncate sequence %d to %d tokens would cut packed block %d of layer %d", id, n, n/nr, l)
		}
	}
	keep := n / nr
	for _, lc := range s.layers {
		if len(lc.Blocks) > keep {
			lc.Blocks = lc.Blocks[:keep]
			lc.ResLen = 0
		} else {
			lc.ResLen = n - len(lc.Blocks)*nr
		}
	}
	if c.alloc == nil {
		return nil
	}
	c.dropPending(s)
	for _, b := range s.blocks[min(keep, len(s.blocks)):] {
		_ = c.alloc.Release(b)
	}
	s.blocks = s.blocks[:min(keep, len(s.blocks))]
	s.tokens = s.tokens[:min(n, len(s.tokens))]
	s.keys = s.keys[:min(keep, len(s.keys))]
	s.open = len(s.keys) == len(s.blocks)
	return nil
}

// Begin implements model.BatchStarter: it checks the positions and, in a
// sized cache, reserves the blocks the batch's new tokens will fill, for
// all sequences or none. A sequence not yet opened is opened when it starts
// at position 0.
func (c *Paged) Begin(b *model.Batch) error {
	if c.alloc != nil {
		c.commit()
	}
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
	if err != nil || c.alloc == nil {
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
func (c *Paged) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if err := CheckLayer(layer, c.layers); err != nil {
		return err
	}
	h := &c.host
	if err := h.download(layer, len(b.Tokens), c.shape, q, k, v); err != nil {
		return err
	}
	qw, kvw := c.shape.Hq*c.shape.D, c.shape.Hkv*c.shape.D
	for _, sq := range b.Seqs {
		s := c.seqs[sq.ID]
		if s == nil {
			return fmt.Errorf("kvcache: layer %d: sequence %d was not begun (call Begin or Open first; model.Forward calls Begin)", layer, sq.ID)
		}
		lc := s.layers[layer]
		if have := lc.Len(c.format.Residual); have != sq.Pos {
			return fmt.Errorf("kvcache: layer %d: sequence %d continues at position %d, but its cache holds %d tokens", layer, sq.ID, sq.Pos, have)
		}
		if err := lc.Append(h.k[sq.Start*kvw:(sq.Start+sq.Len)*kvw], h.v[sq.Start*kvw:(sq.Start+sq.Len)*kvw]); err != nil {
			return fmt.Errorf("kvcache: layer %d: %w", layer, err)
		}
		p := attn.Params{Format: c.formats[layer], Shape: c.shape, Tq: sq.Len, Window: c.windows[layer], Softcap: c.softcap}
		if err := attn.Decode(h.out[sq.Start*qw:(sq.Start+sq.Len)*qw], h.q[sq.Start*qw:(sq.Start+sq.Len)*qw], []*attn.Seq{&lc.Seq}, p); err != nil {
			return fmt.Errorf("kvcache: layer %d: %w", layer, err)
		}
	}
	c.done = layer == c.layers-1
	return h.upload(layer, out)
}

// CheckIdle returns an error unless the cache holds no sequence, every
// block is free (cached prefixes count as free) and the books agree. Tests
// call it after the last request.
func (c *Paged) CheckIdle() error {
	if len(c.seqs) != 0 || c.FreeBlocks() != c.TotalBlocks() || len(c.slots) != c.maxSeqs {
		return fmt.Errorf("kvcache: paged cache not idle: %d sequences, %d of %d blocks and %d of %d slots free",
			len(c.seqs), c.FreeBlocks(), c.TotalBlocks(), len(c.slots), c.maxSeqs)
	}
	if c.alloc != nil {
		return c.alloc.Check()
	}
	return nil
}

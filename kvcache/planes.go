package kvcache

import (
	"fmt"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// Planes is the CPU KV cache of the bit-plane format (kv "bw", read-time
// precision tiers): one attn.PlaneCache per (sequence, layer), a tier map
// and an attention-mass vector per (sequence, layer, KV head), and the
// TierPolicy that rewrites the tier maps every Period tokens. It implements
// model.Attention: new tokens are split into the planes (High, or the
// only tier of a uniform spec: TierPolicy.NewTier), the new
// queries attend with attn.DecodePlanes reading each token at its tier and
// adding its attention probability to the mass, and once Period tokens
// have been decoded since the last re-tier the policy re-tiers that layer.
//
// Re-tiering happens between calls only: feeding a sequence R tokens per
// call (a chunk of R) re-tiers at the same points as R single-token steps,
// on masses equal up to float32 rounding, which is how `bitdecode eval ppl
// --chunk R` reproduces token-by-token decoding under the policy.
//
// Unbounded (no pool size: run and eval), blocks are allocated as needed.
// Sized (Options.Blocks or MemoryBytes), the cache keeps a fixed pool of
// blocks for the scheduler: Begin reserves
// the blocks a batch fills (a block of Nr tokens is taken when its first
// token is written: there is no residual block) or fails with
// ErrOutOfBlocks before changing anything, and Remove and Truncate free
// the blocks together with the sequence's tier maps and attention mass.
// Prefixes are not shared (Open reports nothing cached): a block's tier
// map and mass belong to the sequence that filled it.
//
// A sequence's tier policy is the spec's unless SetTierPolicy gives it
// another (a request's own tier mix over the same planes). A Planes is
// not safe for concurrent use.
type Planes struct {
	host   hostBuffers
	format kv.Format
	shape  attn.Shape
	layers int
	seqs   map[int]*planeSeq
	policy TierPolicy // the spec's policy; its order is the re-tier scratch of every sequence
	stats  ReadStats
	mix    [kv.NumTiers]int64 // (token, layer, KV head) entries held in each tier

	// The block pool of a sized cache; alloc is nil in an unbounded
	// cache.
	alloc   *BlockAllocator
	pool    [][]byte // [layer][blocks·stride]
	stride  int      // bytes of one block of one layer: Hkv·BlockBytes
	maxSeqs int
}

// planeSeq is one sequence's state.
type planeSeq struct {
	caches []*attn.PlaneCache
	mass   [][][]float32        // [layer][Hkv][L]
	since  []int                // tokens decoded per layer since its last re-tier
	blocks []int                // pool blocks in token order (paged cache only)
	policy kv.PlaneSpec         // the tier policy
	counts [][][kv.NumTiers]int // [layer][Hkv]: the tokens of each tier, as added to mix
}

// planeSideBytes is what a bw cache keeps per token and KV head besides the
// planes: one tier map entry and the float32 attention mass.
const planeSideBytes = 1 + 4

// ReadStats count what decode calls read from a bw cache, summed over
// calls, layers and KV heads.
type ReadStats struct {
	// PlaneBytes are the plane bytes read; IndexBytes the tier-index entries.
	PlaneBytes, IndexBytes int64
	// FP16Bytes is what an fp16 cache reads for the same calls (L·4·D per
	// layer and KV head).
	FP16Bytes int64
	// Tokens counts the tokens per tier over the same calls.
	Tokens [kv.NumTiers]int64
}

// Traffic returns PlaneBytes/FP16Bytes (0 before any call).
func (r ReadStats) Traffic() float64 {
	if r.FP16Bytes == 0 {
		return 0
	}
	return float64(r.PlaneBytes) / float64(r.FP16Bytes)
}

// Add returns the sum of r and o.
func (r ReadStats) Add(o ReadStats) ReadStats {
	r.PlaneBytes += o.PlaneBytes
	r.IndexBytes += o.IndexBytes
	r.FP16Bytes += o.FP16Bytes
	for i := range r.Tokens {
		r.Tokens[i] += o.Tokens[i]
	}
	return r
}

// TierStats describe a tiered cache for metrics: what its decode calls
// have read and the tier mix it holds now.
type TierStats struct {
	// Read is what decode calls have read so far.
	Read ReadStats
	// Cached counts the (token, layer, KV head) entries held now in each
	// tier (Evicted ones included: they are stored, not read).
	Cached [kv.NumTiers]int64
	// PerToken is the number of entries per cached token (layers·Hkv).
	PerToken int
}

var _ Cache = (*Planes)(nil)

// NewPlanes returns an empty bw cache for model config cfg on backend be,
// sized by o as Paged is: o.Blocks blocks, or as many as o.MemoryBytes holds
// at BlockBytes each (there are no residual blocks), for o.MaxSeqs
// sequences at once; with neither, an unbounded cache. The pool's planes
// are allocated up front; the tier maps and attention mass (5 bytes per
// token and KV head, included in BlockBytes) grow with the sequences and
// are freed with their blocks.
func NewPlanes(be backend.Backend, cfg *model.Config, spec kv.Spec, o Options) (*Planes, error) {
	if !spec.Planes.On {
		return nil, fmt.Errorf("kvcache: format %s is not a bit-plane (bw) format", spec.String())
	}
	if spec.PerLayer() {
		return nil, fmt.Errorf("kvcache: the bit-plane format %s takes no per-layer formats", spec.String())
	}
	sh, err := ShapeOf(cfg)
	if err != nil {
		return nil, err
	}
	for l, w := range cfg.LayerWindows {
		if w > 0 {
			return nil, fmt.Errorf("kvcache: the bw cache does not support sliding-window attention (layer %d has a window of %d tokens)", l, w)
		}
	}
	if err := cfg.RefuseAttnSoftcap("kvcache: the bw cache"); err != nil {
		return nil, err
	}
	f, err := spec.Resolve(cfg.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("kvcache: %w", err)
	}
	c := &Planes{host: hostBuffers{be: be}, format: f, shape: sh, layers: cfg.Layers, seqs: map[int]*planeSeq{},
		policy: TierPolicy{Spec: spec.Planes}}
	if o.Blocks == 0 && o.MemoryBytes == 0 {
		return c, nil
	}
	if o.MaxSeqs <= 0 {
		return nil, fmt.Errorf("kvcache: bw cache: max sequences %d must be positive", o.MaxSeqs)
	}
	blocks := o.Blocks
	if blocks == 0 {
		if o.MemoryBytes < c.BlockBytes() {
			return nil, fmt.Errorf("kvcache: bw cache: %d bytes hold no block of %d bytes (%s, %d tokens of every layer and KV head); give more memory",
				o.MemoryBytes, c.BlockBytes(), c.format.Spec.String(), c.format.Residual)
		}
		blocks = int(o.MemoryBytes / c.BlockBytes())
	}
	c.stride = c.shape.Hkv * c.format.PlaneLayout().BlockBytes
	if blocks <= 0 || int64(blocks)*int64(c.stride) > 1<<40 {
		return nil, fmt.Errorf("kvcache: bw cache: %d blocks", blocks)
	}
	c.alloc, c.maxSeqs = NewBlockAllocator(blocks), o.MaxSeqs
	c.pool = make([][]byte, c.layers)
	for l := range c.pool {
		c.pool[l] = make([]byte, blocks*c.stride)
	}
	return c, nil
}

// Format returns the cache's resolved KV format.
func (c *Planes) Format() kv.Format { return c.format }

// Len returns the number of tokens cached for sequence id.
func (c *Planes) Len(id int) int {
	if s := c.seqs[id]; s != nil {
		return s.caches[0].Len
	}
	return 0
}

// Bytes returns the memory sequence id takes (all layers and KV heads,
// planes only; tier maps, mass and index add 9 bytes per token and head),
// and what the same tokens take in fp16.
func (c *Planes) Bytes(id int) (bytes, fp16Bytes int64) { return c.BytesAt(c.Len(id)) }

// BytesAt returns the memory a sequence of l tokens takes, and in fp16.
func (c *Planes) BytesAt(l int) (bytes, fp16Bytes int64) {
	return SequenceBytes(LayerCopies(c.format, c.layers), c.shape, l)
}

// BlockBytes is the memory one block takes across all layers and KV heads:
// its planes (kv.Format.BlockBytes, the same as fp16) plus the tier map and
// attention mass of its tokens. It is the unit of NewPagedPlanes's
// memory budget.
func (c *Planes) BlockBytes() int64 {
	per := int64(c.format.BlockBytes()) + int64(c.format.Residual)*planeSideBytes
	return int64(c.layers) * int64(c.shape.Hkv) * per
}

// ResidualBytes is 0: a bw cache has no residual block.
func (c *Planes) ResidualBytes() int64 { return 0 }

// PoolBytes returns the bytes of the block pool's planes (0 for an
// unbounded cache).
func (c *Planes) PoolBytes() int64 {
	var n int64
	for _, p := range c.pool {
		n += int64(len(p))
	}
	return n
}

// BlockTokens implements Cache: tokens per block (blkN).
func (c *Planes) BlockTokens() int { return c.format.Residual }

// FreeBlocks implements Cache (0 for an unbounded cache).
func (c *Planes) FreeBlocks() int {
	if c.alloc == nil {
		return 0
	}
	return c.alloc.Free()
}

// TotalBlocks implements Cache (0 for an unbounded cache).
func (c *Planes) TotalBlocks() int {
	if c.alloc == nil {
		return 0
	}
	return c.alloc.Total()
}

// MaxSeqs implements Cache (0 for an unbounded cache, which holds any
// number).
func (c *Planes) MaxSeqs() int { return c.maxSeqs }

// Seqs returns the number of sequences held.
func (c *Planes) Seqs() int { return len(c.seqs) }

// Allocator exposes the block allocator of a paged cache (nil otherwise),
// for tests.
func (c *Planes) Allocator() *BlockAllocator { return c.alloc }

// blocksHeld returns the blocks sequence s holds: reserved from the pool,
// or allocated by its caches in an unbounded cache.
func (c *Planes) blocksHeld(s *planeSeq) int {
	if c.alloc != nil {
		return len(s.blocks)
	}
	return len(s.caches[0].Blocks)
}

// BlocksNeeded implements Cache: the blocks that n more tokens of
// sequence id start (a block is taken when its first token is written).
func (c *Planes) BlocksNeeded(id, n int) int {
	nr := c.format.Residual
	l, have := 0, 0
	if s := c.seqs[id]; s != nil {
		l, have = s.caches[0].Len, c.blocksHeld(s)
	}
	return max(0, (l+n+nr-1)/nr-have)
}

// Open implements Cache: it starts sequence id. Nothing is shared, so
// nothing of the prompt is cached.
func (c *Planes) Open(id int, prompt []int) (int, error) {
	if c.seqs[id] != nil {
		return 0, fmt.Errorf("kvcache: bw cache: sequence %d is already open", id)
	}
	_, err := c.newSeq(id)
	return 0, err
}

// newSeq starts sequence id with the cache's policy.
func (c *Planes) newSeq(id int) (*planeSeq, error) {
	if c.alloc != nil && len(c.seqs) >= c.maxSeqs {
		return nil, fmt.Errorf("%w (%d sequences)", ErrNoSlot, c.maxSeqs)
	}
	s := &planeSeq{caches: make([]*attn.PlaneCache, c.layers), mass: make([][][]float32, c.layers), since: make([]int, c.layers),
		policy: c.policy.Spec, counts: make([][][kv.NumTiers]int, c.layers)}
	for l := range s.caches {
		pc, err := attn.NewPlaneCache(c.format, c.shape)
		if err != nil {
			return nil, err
		}
		if c.alloc != nil {
			pc.NewBlock = func() ([]byte, error) {
				i := len(pc.Blocks)
				if i >= len(s.blocks) {
					return nil, fmt.Errorf("%w: layer %d needs block %d of a sequence that reserved %d", ErrOutOfBlocks, l, i, len(s.blocks))
				}
				b := c.block(l, s.blocks[i])
				clear(b)
				return b, nil
			}
		}
		s.caches[l] = pc
		s.mass[l] = make([][]float32, c.shape.Hkv)
		s.counts[l] = make([][kv.NumTiers]int, c.shape.Hkv)
	}
	c.seqs[id] = s
	return s, nil
}

// block returns layer l's bytes of pool block id.
func (c *Planes) block(l, id int) []byte {
	return c.pool[l][id*c.stride : (id+1)*c.stride : (id+1)*c.stride]
}

// Remove frees sequence id's blocks, tier maps and mass. Removing an
// unknown id does nothing.
func (c *Planes) Remove(id int) {
	s := c.seqs[id]
	if s == nil {
		return
	}
	for l := range s.counts {
		for h := range s.counts[l] {
			c.setCounts(s, l, h, [kv.NumTiers]int{})
		}
	}
	for _, b := range s.blocks {
		// One reference per entry; an error would be a bookkeeping bug,
		// which Check reports in tests.
		_ = c.alloc.Release(b)
	}
	delete(c.seqs, id)
}

// Truncate implements Cache: it keeps the first n tokens of sequence
// id, with their tiers and mass, and frees the blocks after them. The
// planes are written a token at a time, so any n is possible. Truncating
// to 0 also restarts the re-tier period.
func (c *Planes) Truncate(id, n int) error {
	s := c.seqs[id]
	if s == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("kvcache: bw cache: truncate unknown sequence %d", id)
	}
	for l, pc := range s.caches {
		if n < 0 || n > pc.Len {
			return fmt.Errorf("kvcache: bw cache: truncate sequence %d to %d tokens, layer %d holds %d", id, n, l, pc.Len)
		}
	}
	nr := c.format.Residual
	keep := (n + nr - 1) / nr
	for l, pc := range s.caches {
		pc.Len = n
		pc.Blocks = pc.Blocks[:min(keep, len(pc.Blocks))]
		for h := range pc.Tiers {
			pc.Tiers[h] = pc.Tiers[h][:n]
			s.mass[l][h] = s.mass[l][h][:min(n, len(s.mass[l][h]))]
			c.setCounts(s, l, h, tierCounts(pc.Tiers[h]))
		}
		if n == 0 {
			s.since[l] = 0
		}
	}
	if c.alloc != nil && len(s.blocks) > keep {
		for _, b := range s.blocks[keep:] {
			_ = c.alloc.Release(b)
		}
		s.blocks = s.blocks[:keep]
	}
	return nil
}

// Begin implements model.BatchStarter: it checks the positions, opens the
// sequences that start at position 0 and, in a paged cache, reserves the
// blocks the batch's tokens start, for all sequences or none.
func (c *Planes) Begin(b *model.Batch) error {
	err := reserveBatch(b, "bw cache", c.alloc, batchSeqs{
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
	for _, sq := range b.Seqs {
		s := c.seqs[sq.ID]
		ids, err := c.alloc.Alloc(c.BlocksNeeded(sq.ID, sq.Len))
		if err != nil { // cannot happen after the check above
			return err
		}
		s.blocks = append(s.blocks, ids...)
	}
	return nil
}

// TierSpec returns the spec's tier policy (a sequence may have its own:
// SetTierPolicy).
func (c *Planes) TierSpec() kv.PlaneSpec { return c.policy.Spec }

// SetTierPolicy implements Cache.
func (c *Planes) SetTierPolicy(id int, p kv.PlaneSpec) error {
	s := c.seqs[id]
	if s == nil {
		return fmt.Errorf("kvcache: bw cache: set the tier policy of sequence %d, which is not open", id)
	}
	if err := checkPolicy(p); err != nil {
		return fmt.Errorf("kvcache: bw cache: %w", err)
	}
	q := c.policy.Spec
	q.High, q.Medium, q.Low, q.Evicted = p.High, p.Medium, p.Low, p.Evicted
	q.Window, q.Sinks, q.Period, q.MassEvery = p.Window, p.Sinks, p.Period, p.MassEvery
	s.policy = q
	return nil
}

// checkPolicy validates the policy fields of a bw spec made by hand (a
// parsed one is valid).
func checkPolicy(p kv.PlaneSpec) error {
	shares := []int{p.High, p.Medium, p.Low, p.Evicted}
	sum := 0
	for _, v := range shares {
		if v < 0 || v > 100 {
			return fmt.Errorf("tier shares h%d m%d l%d e%d: each must be in [0, 100]", p.High, p.Medium, p.Low, p.Evicted)
		}
		sum += v
	}
	switch {
	case sum != 100:
		return fmt.Errorf("tier shares h%d m%d l%d e%d sum to %d%%, want 100%%", p.High, p.Medium, p.Low, p.Evicted, sum)
	case p.Window < 0 || p.Window > kv.MaxPlaneTokens || p.Sinks < 0 || p.Sinks > kv.MaxPlaneTokens:
		return fmt.Errorf("window %d and sinks %d must be in [0, %d]", p.Window, p.Sinks, kv.MaxPlaneTokens)
	case p.Period < 1 || p.Period > kv.MaxPlaneTokens:
		return fmt.Errorf("re-tier period %d must be in [1, %d]", p.Period, kv.MaxPlaneTokens)
	case p.MassEvery < 0 || p.MassEvery > kv.MaxPlaneTokens:
		return fmt.Errorf("mass sampling every %d tokens must be in [0, %d] (0 and 1: every token)", p.MassEvery, kv.MaxPlaneTokens)
	}
	return nil
}

// TierStats implements Cache.
func (c *Planes) TierStats() (TierStats, bool) {
	return TierStats{Read: c.stats, Cached: c.mix, PerToken: c.layers * c.shape.Hkv}, true
}

// Close implements Cache; a CPU cache's memory is the garbage collector's.
func (c *Planes) Close() error { return nil }

// ReadStats returns what decode calls have read so far.
func (c *Planes) ReadStats() ReadStats { return c.stats }

// Tiers returns sequence id's tier map of one layer and KV head (nil if
// absent); the slice is the cache's own.
func (c *Planes) Tiers(id, layer, h int) []kv.Tier {
	s := c.seqs[id]
	if s == nil || layer < 0 || layer >= c.layers || h < 0 || h >= c.shape.Hkv {
		return nil
	}
	return s.caches[layer].Tiers[h][:s.caches[layer].Len]
}

// Mass returns sequence id's accumulated attention mass of one layer and KV
// head (nil if absent), the ranking the policy re-tiers by; the slice is
// the cache's own (tests compare the GPU cache's tiers against it).
func (c *Planes) Mass(id, layer, h int) []float32 {
	s := c.seqs[id]
	if s == nil || layer < 0 || layer >= c.layers || h < 0 || h >= c.shape.Hkv {
		return nil
	}
	return s.mass[layer][h][:s.caches[layer].Len]
}

// tierCounts counts the tokens of each tier.
func tierCounts(tiers []kv.Tier) [kv.NumTiers]int {
	var n [kv.NumTiers]int
	for _, t := range tiers {
		if t < kv.NumTiers {
			n[t]++
		}
	}
	return n
}

// setCounts records the tier counts of one layer and KV head of s, keeping
// the cache's mix in step.
func (c *Planes) setCounts(s *planeSeq, layer, h int, n [kv.NumTiers]int) {
	old := &s.counts[layer][h]
	for t := range n {
		c.mix[t] += int64(n[t] - old[t])
	}
	*old = n
}

// Attend implements model.Attention.
func (c *Planes) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if err := CheckLayer(layer, c.layers); err != nil {
		return err
	}
	hb := &c.host
	if err := hb.download(layer, len(b.Tokens), c.shape, q, k, v); err != nil {
		return err
	}
	qw, kvw := c.shape.Hq*c.shape.D, c.shape.Hkv*c.shape.D
	lay := c.format.PlaneLayout()
	for _, s := range b.Seqs {
		ps := c.seqs[s.ID]
		if ps == nil {
			if c.alloc != nil {
				return fmt.Errorf("kvcache: layer %d: sequence %d was not begun (call Begin or Open first)", layer, s.ID)
			}
			var err error
			if ps, err = c.newSeq(s.ID); err != nil {
				return err
			}
		}
		cache := ps.caches[layer]
		if cache.Len != s.Pos {
			return fmt.Errorf("kvcache: layer %d: sequence %d continues at position %d, but its cache holds %d tokens", layer, s.ID, s.Pos, cache.Len)
		}
		if err := cache.Append(hb.k[s.Start*kvw:(s.Start+s.Len)*kvw], hb.v[s.Start*kvw:(s.Start+s.Len)*kvw]); err != nil {
			return fmt.Errorf("kvcache: layer %d: %w", layer, err)
		}
		pol := TierPolicy{Spec: ps.policy, order: c.policy.order}
		if nt := pol.NewTier(); nt != kv.High {
			for h := range cache.Tiers {
				for t := s.Pos; t < cache.Len; t++ {
					cache.Tiers[h][t] = nt
				}
			}
		}
		mass := ps.mass[layer]
		for h := range mass {
			for len(mass[h]) < cache.Len {
				mass[h] = append(mass[h], 0)
			}
		}
		p := attn.Params{Format: c.format, Shape: c.shape, Tq: s.Len, MassEvery: pol.Spec.MassEvery}
		masses := [][][]float32{mass}
		if !pol.SamplesMass(s.Pos, s.Len) {
			masses = nil // no query token of the call is sampled
		}
		if err := attn.DecodePlanes(hb.out[s.Start*qw:(s.Start+s.Len)*qw], hb.q[s.Start*qw:(s.Start+s.Len)*qw],
			[]*attn.PlaneSeq{&cache.PlaneSeq}, p, masses); err != nil {
			return fmt.Errorf("kvcache: layer %d: %w", layer, err)
		}
		for h := 0; h < c.shape.Hkv; h++ {
			counts := tierCounts(cache.Tiers[h][:cache.Len])
			c.setCounts(ps, layer, h, counts)
			read := counts[kv.High] + counts[kv.Medium] + counts[kv.Low]
			c.stats.PlaneBytes += lay.PlaneReadBytes(counts) - int64(read*kv.IndexBytes)
			c.stats.IndexBytes += int64(read * kv.IndexBytes)
			c.stats.FP16Bytes += int64(cache.Len) * int64(lay.TierBytes(kv.High))
			for i, n := range counts {
				c.stats.Tokens[i] += int64(n)
			}
		}
		ps.since[layer] += s.Len
		if ps.since[layer] >= pol.Spec.Period {
			ps.since[layer] = 0
			for h := 0; h < c.shape.Hkv; h++ {
				pol.Retier(cache.Tiers[h], mass[h], cache.Len)
				c.setCounts(ps, layer, h, tierCounts(cache.Tiers[h][:cache.Len]))
			}
		}
		c.policy.order = pol.order
	}
	return hb.upload(layer, out)
}

// CheckIdle returns an error unless the cache holds nothing: no sequence,
// every block free, an empty tier mix and consistent books. Tests call it
// after the last request; it is cheap enough for a debugging server too.
func (c *Planes) CheckIdle() error {
	if len(c.seqs) != 0 || c.FreeBlocks() != c.TotalBlocks() {
		return fmt.Errorf("kvcache: bw cache not idle: %d sequences, %d of %d blocks free", len(c.seqs), c.FreeBlocks(), c.TotalBlocks())
	}
	if c.mix != [kv.NumTiers]int64{} {
		return fmt.Errorf("kvcache: bw cache not idle: tier mix %v with nothing cached", c.mix)
	}
	if c.alloc != nil {
		return c.alloc.Check()
	}
	return nil
}

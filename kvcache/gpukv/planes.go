package gpukv

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// Planes is the bit-plane (bw) KV cache on the GPU, as a
// model.Attention for the CUDA backend: what kvcache.New returns for a bw
// spec there. It keeps PlaneCache's semantics (new tokens split into their
// block's planes and tiered by kvcache.TierPolicy.NewTier; decode reads each token
// at its tier and adds its attention probability to the mass; every Period
// tokens the policy re-tiers a layer) with the kernels of
// gpu/kernels/planes.cu.
//
// Storage per layer: a pool of plane blocks [Blocks][Hkv][BlockBytes]; a
// sequence owns a list of pool blocks (the same ids in every layer) and a
// slot of the device arrays (kernels.PlanesRetier): the mass
// [MaxSeqs][layers][Hkv][MaxLen] float32 and the tier index of the same
// shape (int32), with its counts and run offsets [MaxSeqs][layers][Hkv][4].
// The tier maps exist only as that index, on the device; the host keeps the
// tokens per tier (what TierStats and ReadStats need) and the tier
// policies, in a planeBook.
//
// Serving (engine.Scheduler) works as on kvcache.Planes: Open takes a slot
// and shares no prefix (it reports 0 cached tokens; ErrNoSlot when
// MaxSeqs sequences are open), SetTierPolicy gives a sequence its own
// policy (a request's kv_tiers; the others keep the spec's), Begin
// reserves a batch's blocks or fails with ErrOutOfBlocks having changed
// nothing, Remove frees a sequence's blocks and slot (the scheduler
// preempts by Remove and recomputes), and TierStats reports the reads and
// the tier mix held. Truncate takes only 0 and the length.
//
// Per batch, Begin uploads the block tables, the write plan and the jobs of
// two kernels it queues: the re-tier of the layers whose Period has elapsed
// (kernels.PlanesRetier: thresholds of the device mass by a radix select,
// the index rewritten in place; no download, no sync) and the append of the
// new tokens to every layer's index (one entry each, in the run of the tier
// they get). Per layer, Attend converts q to fp16,
// writes the new K and V into the planes (kernels.PlanesWriter), runs the
// tensor-core planes decode once per sequence (so a sequence's result does
// not depend on its batch) with the mass output, and converts the output
// back. Re-tiering at the next Begin uses the mass PlaneCache's re-tier at
// the end of Attend uses and gives the tier maps kvcache.TierPolicy gives
// on that mass (ties included), so both caches tier alike (up to the float
// rounding of the masses, which can swap near-equal tokens).
//
// One difference from kvcache.Planes: a sequence holding tokens whose
// policy (SetTierPolicy) changes the tier new tokens get is re-tiered by
// its new policy at its next batch, early (the device index keeps the run
// new tokens join last; the scheduler sets policies before the first
// batch, where this never happens). The prefill plan's score workspace
// (for the mass) is Hkv·(Hq/Hkv)·MaxChunk·MaxLen floats. A Planes is not
// safe for concurrent use.
type Planes struct {
	gpuBuffers // be, dev, and the per-batch q/out and table buffers
	format     kv.Format
	pl         kv.PlaneLayout
	lay        kernels.PlanesLayout
	shape      attn.Shape
	layers     int
	opts       kvcache.Options
	maxBlk     int
	window     int
	stats      kvcache.ReadStats
	id         uint64

	ops      *kernels.Ops
	writer   *kernels.PlanesWriter
	retierer *kernels.PlanesRetier
	// decode holds the decode plans by length bound (liveBound), made on
	// first use in Begin from decodeShape; prefill is the prefill chunks'.
	decode      map[int]*kernels.PlanesPlan
	decodeShape kernels.PlanesShape
	tuning      kernels.PlanesTuning
	prefill     *kernels.PlanesPlan

	pool    []cuda.DevicePtr // per layer
	mass    cuda.DevicePtr   // [MaxSeqs][layers][Hkv][MaxLen] float32
	index   cuda.DevicePtr   // [MaxSeqs][layers][Hkv][MaxLen] int32: the tier index
	counts  cuda.DevicePtr   // [MaxSeqs][layers][Hkv][4] int32: tokens per tier
	offsets cuda.DevicePtr   // [MaxSeqs][layers][Hkv][4] int32: the index's run offsets

	book planeBook // blocks, slots, tier maps and policies (host side)

	batch *model.Batch
	plan  gpuPlanePlan
}

// gpuPlaneSeq is one sequence's share of a Planes.
type gpuPlaneSeq struct {
	seqBlocks                      // slot: the sequence's row of the device arrays
	since     []int                // per layer: tokens attended since its last re-tier
	policy    kv.PlaneSpec         // the sequence's tier policy (the cache's unless SetTierPolicy)
	counts    [][][kv.NumTiers]int // [layer][Hkv]: the tokens of each tier, as added to the book's mix
	last      kv.Tier              // the tier whose run the device index stores last (new tokens join it)
	fresh     bool                 // its device arrays must be zeroed before its next batch
}

// gpuPlanePlan holds the word offsets of a batch's tables in meta:
// table [B][maxBlk] | lens [B] | block, within [T] | re-tier jobs
// [nRetier][kernels.PlanesRetierJobWords] | append jobs
// [B][kernels.PlanesAppendJobWords].
type gpuPlanePlan struct {
	T, B                       int
	table, lens, block, within int
	retier, nRetier, append    int
	seqs                       []*gpuPlaneSeq
}

var _ kvcache.Cache = (*Planes)(nil)

// beginKeyTag marks the graph key of Begin's re-tier and append launches
// (Attend's keys have a layer number in its place).
const beginKeyTag = 1 << 63

// gpuPlanePrefillSplit is the split length (positions) of prefill chunks.
const gpuPlanePrefillSplit = 8192

// gpuPlaneLiveMin is the smallest length bound of a decode launch
// (liveBound).
const gpuPlaneLiveMin = 512

// liveBound is the length bound a decode step of a sequence of n tokens
// is planned and launched with: the smallest power of two >= n, at least
// gpuPlaneLiveMin and at most maxLen (the context size). The split
// kernel's grid, its splits' length (a plan a bound: Planes.decodePlan)
// and the mass pass's CTAs follow the live tokens instead of maxLen (at
// maxLen 128K and 8K tokens, 16x fewer CTAs that exit at once, and splits
// of the 8K's plan instead of the 128K's, which ran 8K in two splits a KV
// head: the paged cache's lenBucket, decode-attention.md session 28b), and
// the bound changes at powers of two only, so a sequence's decode steps
// replay the same CUDA graph from one doubling to the next.
func liveBound(n, maxLen int) int { return lengthBound(n, gpuPlaneLiveMin, maxLen) }

// decodePlan returns the decode plan for length bound bound (liveBound),
// made on first use: outside any CUDA graph capture (Begin and NewPlanes
// call it), as it allocates its workspace.
func (c *Planes) decodePlan(bound int) (*kernels.PlanesPlan, error) {
	if p := c.decode[bound]; p != nil {
		return p, nil
	}
	sh := c.decodeShape
	sh.MaxL = bound
	p, err := kernels.PlanPlanesWith(c.dev, kernels.PlanesMMA, c.lay, sh, c.tuning)
	if err != nil {
		return nil, err
	}
	c.decode[bound] = p
	return p, nil
}

// NewPlanes returns an empty bit-plane cache of bw spec for model
// config cfg on the CUDA backend be, sized by o (MaxSeqs, MaxLen,
// MaxChunk, Blocks or MemoryBytes; BatchInvariant is implied: every
// sequence runs its own launch). It compiles the kernels and allocates the
// whole pool up front.
func NewPlanes(be *gpu.Backend, cfg *model.Config, spec kv.Spec, o kvcache.Options) (*Planes, error) {
	if !spec.Planes.On {
		return nil, fmt.Errorf("gpukv: format %s is not a bit-plane (bw) format", spec.String())
	}
	sh := attn.Shape{Hq: cfg.Heads, Hkv: cfg.KVHeads, D: cfg.HeadDim}
	if err := sh.Validate(); err != nil {
		return nil, fmt.Errorf("gpukv: model %s: %w", cfg.Architecture, err)
	}
	if err := cfg.RefuseAttnSoftcap("gpukv: the GPU's bit-plane kernels"); err != nil {
		return nil, err
	}
	f, err := spec.Resolve(cfg.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("gpukv: %w", err)
	}
	lay, err := kernels.PlanesLayoutFor(f)
	if err != nil {
		return nil, err
	}
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = gpuDefaultSeqs
	}
	if o.MaxLen <= 0 {
		o.MaxLen = cfg.MaxPositions
	}
	if o.MaxLen <= 0 {
		return nil, errors.New("gpukv: GPU bit-plane cache: the model has no max_position_embeddings; set MaxLen")
	}
	if o.MaxChunk <= 0 {
		o.MaxChunk = gpuDefaultChunk
	}
	o.MaxChunk = min(o.MaxChunk, o.MaxLen)
	pl := f.PlaneLayout()
	nr := pl.Tokens
	c := &Planes{gpuBuffers: gpuBuffers{be: be, dev: be.Device()}, format: f, pl: pl, lay: lay, shape: sh, layers: cfg.Layers, id: gpuCacheIDs.Add(1),
		window: kvcache.WindowLimit(cfg), maxBlk: (o.MaxLen + nr - 1) / nr}
	blockBytes := sh.Hkv * pl.BlockBytes
	// Per slot, layer and KV head: the mass and the index (4 B per token
	// each), the counts and offsets (16 B each).
	massBytes := int64(o.MaxSeqs) * int64(c.layers) * int64(sh.Hkv) * (int64(o.MaxLen)*4*2 + 2*4*int64(kv.NumTiers))
	switch {
	case o.Blocks > 0:
	case o.MemoryBytes > 0:
		o.Blocks = int((o.MemoryBytes - massBytes) / (int64(blockBytes) * int64(c.layers)))
		if o.Blocks < 1 {
			return nil, fmt.Errorf("gpukv: GPU bit-plane cache: %d bytes do not hold the %d sequences' attention mass, tier index and one block", o.MemoryBytes, o.MaxSeqs)
		}
	default:
		o.Blocks = o.MaxSeqs * c.maxBlk
	}
	c.opts = o
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if c.ops, err = kernels.LoadOps(c.dev); err != nil {
		return nil, err
	}
	if c.writer, err = kernels.LoadPlanesWriter(c.dev); err != nil {
		return nil, err
	}
	if c.retierer, err = kernels.LoadPlanesRetier(c.dev); err != nil {
		return nil, err
	}
	base := kernels.PlanesShape{B: 1, Hq: sh.Hq, Hkv: sh.Hkv, Tq: 1, MaxBlocks: c.maxBlk, MaxL: o.MaxLen, Mass: true,
		IndexStride: o.MaxLen, MassStride: o.MaxLen}
	t := be.Options().Tuning.Planes
	c.decode, c.decodeShape, c.tuning = map[int]*kernels.PlanesPlan{}, base, t
	if _, err := c.decodePlan(liveBound(1, o.MaxLen)); err != nil {
		return nil, err
	}
	pre := base
	pre.Tq, pre.SplitLen = o.MaxChunk, gpuPlanePrefillSplit
	if c.prefill, err = kernels.PlanPlanesWith(c.dev, kernels.PlanesMMA, lay, pre, t); err != nil {
		return nil, err
	}
	err = c.be.Do(func(x *cuda.Ctx) error {
		for range c.layers {
			p, err := x.Alloc(o.Blocks * blockBytes)
			if err != nil {
				return fmt.Errorf("gpukv: GPU bit-plane pool of %d blocks x %d layers (%d MiB per layer): %w", o.Blocks, c.layers, o.Blocks*blockBytes>>20, err)
			}
			c.pool = append(c.pool, p)
		}
		rows := o.MaxSeqs * c.layers * sh.Hkv
		for _, a := range []struct {
			p     *cuda.DevicePtr
			bytes int
		}{{&c.mass, rows * o.MaxLen * 4}, {&c.index, rows * o.MaxLen * 4}, {&c.counts, rows * int(kv.NumTiers) * 4}, {&c.offsets, rows * int(kv.NumTiers) * 4}} {
			var err error
			if *a.p, err = x.Alloc(a.bytes); err != nil {
				return fmt.Errorf("gpukv: GPU bit-plane cache: mass and tier index of %d sequences: %w", o.MaxSeqs, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.book = newPlaneBook(spec.Planes, o.Blocks, o.MaxSeqs, c.layers, sh.Hkv, nr)
	ok = true
	return c, nil
}

// Close frees the device memory of the cache.
func (c *Planes) Close() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	keep(c.be.Do(func(x *cuda.Ctx) error { return c.be.SyncStream(x, c.dev.Stream()) }))
	for _, p := range c.decode {
		keep(p.Close())
	}
	if c.prefill != nil {
		keep(c.prefill.Close())
	}
	c.decode, c.prefill = nil, nil
	for _, p := range append(append(c.take(), c.mass, c.index, c.counts, c.offsets), c.pool...) {
		if p != 0 {
			keep(c.dev.Free(p))
		}
	}
	c.pool, c.mass, c.index, c.counts, c.offsets = nil, 0, 0, 0, 0
	return first
}

// Format returns the cache's resolved KV format.
func (c *Planes) Format() kv.Format { return c.format }

// Len returns the number of tokens cached for sequence id.
func (c *Planes) Len(id int) int { return c.book.len(id) }

// Bytes returns the memory sequence id takes (planes only), and in fp16.
func (c *Planes) Bytes(id int) (bytes, fp16Bytes int64) { return c.BytesAt(c.Len(id)) }

// BytesAt returns the memory a sequence of l tokens takes, and in fp16.
func (c *Planes) BytesAt(l int) (bytes, fp16Bytes int64) {
	return kvcache.SequenceBytes(kvcache.LayerCopies(c.format, c.layers), c.shape, l)
}

// ReadStats returns what decode calls have read so far (kvcache.Planes'
// accounting).
func (c *Planes) ReadStats() kvcache.ReadStats { return c.stats }

// Tiers returns sequence id's tier map of one layer and KV head (nil if
// absent), rebuilt from the device's tier index after the queued work:
// a synchronizing download, for tests and tools.
func (c *Planes) Tiers(id, layer, h int) []kv.Tier {
	g := c.book.seqs[id]
	if g == nil || layer < 0 || layer >= c.layers || h < 0 || h >= c.shape.Hkv {
		return nil
	}
	m, err := c.tierMap(g, layer, h)
	if err != nil {
		return nil
	}
	return m
}

// tierMap downloads one (sequence, layer, KV head)'s index and rebuilds its
// tier map.
func (c *Planes) tierMap(g *gpuPlaneSeq, layer, h int) ([]kv.Tier, error) {
	row := (g.slot*c.layers+layer)*c.shape.Hkv + h
	idx := make([]int32, g.n)
	var counts [kv.NumTiers]int32
	offs := make([]int32, kv.NumTiers)
	err := c.be.Do(func(x *cuda.Ctx) error {
		if err := c.be.SyncStream(x, c.dev.Stream()); err != nil {
			return err
		}
		if g.n > 0 {
			if err := x.DtoH(cuda.Bytes(idx), c.index+cuda.DevicePtr(row*c.opts.MaxLen*4)); err != nil {
				return err
			}
		}
		if err := x.DtoH(cuda.Bytes(counts[:]), c.counts+cuda.DevicePtr(row*int(kv.NumTiers)*4)); err != nil {
			return err
		}
		return x.DtoH(cuda.Bytes(offs), c.offsets+cuda.DevicePtr(row*int(kv.NumTiers)*4))
	})
	if err != nil {
		return nil, err
	}
	m, err := kernels.TierMapFromIndex(idx, counts, offs, g.n)
	if err != nil {
		return nil, fmt.Errorf("gpukv: GPU bit-plane cache: slot %d layer %d head %d: %w", g.slot, layer, h, err)
	}
	return m, nil
}

// TierSpec returns the cache's tier policy (a sequence may have its own:
// SetTierPolicy).
func (c *Planes) TierSpec() kv.PlaneSpec { return c.book.spec }

// BlockBytes implements kvcache.Cache: one block's planes across all layers
// and KV heads.
func (c *Planes) BlockBytes() int64 {
	return int64(c.layers) * int64(c.shape.Hkv) * int64(c.pl.BlockBytes)
}

// ResidualBytes implements kvcache.Cache: a bw cache has no residual block.
func (c *Planes) ResidualBytes() int64 { return 0 }

// BlockTokens implements kvcache.Cache: tokens per block (blkN).
func (c *Planes) BlockTokens() int { return c.pl.Tokens }

// FreeBlocks implements kvcache.Cache.
func (c *Planes) FreeBlocks() int { return len(c.book.alloc.freeBlocks) }

// TotalBlocks implements kvcache.Cache.
func (c *Planes) TotalBlocks() int { return c.book.alloc.blocks }

// FreeSlots returns the number of free sequence slots.
func (c *Planes) FreeSlots() int { return len(c.book.alloc.freeSlots) }

// MaxSeqs implements kvcache.Cache.
func (c *Planes) MaxSeqs() int { return c.opts.MaxSeqs }

// BlocksNeeded implements kvcache.Cache: the blocks that n more tokens of
// sequence id start (a block is taken when its first token is written).
func (c *Planes) BlocksNeeded(id, n int) int { return c.book.blocksNeeded(id, n) }

// Open implements kvcache.Cache: it starts sequence id with the cache's
// tier policy and a slot of the mass array. Prefixes are not shared (as in
// kvcache.Planes: a block's tier map and mass belong to the sequence that
// filled it), so nothing of the prompt is cached. With MaxSeqs sequences
// open it fails with kvcache.ErrNoSlot.
func (c *Planes) Open(id int, prompt []int) (int, error) {
	_, err := c.book.open(id)
	return 0, err
}

// Truncate implements kvcache.Cache for n = 0 (the sequence is emptied, its
// re-tier period restarts and its mass is zeroed before its next batch; it
// keeps its slot and tier policy) and n = Len (nothing changes); other
// lengths are refused, as the mass of the dropped tokens is not rolled
// back. The scheduler never truncates (preemption removes the sequence and
// recomputes it); chat falls back to 0.
func (c *Planes) Truncate(id, n int) error { return c.book.truncate(id, n) }

// SetTierPolicy implements kvcache.Cache: open sequence id reads and
// re-tiers with the policy fields of p (tier shares, window, sinks,
// period) from its next batch on; how the planes are stored stays the
// cache's.
func (c *Planes) SetTierPolicy(id int, p kv.PlaneSpec) error { return c.book.setPolicy(id, p) }

// TierStats implements kvcache.Cache: what decode has read, and the tier mix
// of the sequences held now.
func (c *Planes) TierStats() (kvcache.TierStats, bool) { return c.book.tierStats(c.stats), true }

// Remove frees sequence id's blocks and slot. Removing an unknown id does
// nothing.
func (c *Planes) Remove(id int) { c.book.remove(id) }

// CheckIdle returns an error unless the cache holds nothing: no sequence,
// every block and slot free, an empty tier mix. Tests call it after the
// last request.
func (c *Planes) CheckIdle() error { return c.book.checkIdle() }

// massOffset returns the byte offset of (slot, layer)'s mass (and index).
func (c *Planes) massOffset(slot, layer int) cuda.DevicePtr {
	return cuda.DevicePtr(((slot*c.layers + layer) * c.shape.Hkv * c.opts.MaxLen) * 4)
}

// countsOffset returns the byte offset of (slot, layer)'s counts (and
// offsets).
func (c *Planes) countsOffset(slot, layer int) cuda.DevicePtr {
	return cuda.DevicePtr(((slot*c.layers + layer) * c.shape.Hkv * int(kv.NumTiers)) * 4)
}

// Begin implements model.BatchStarter: it checks the batch, queues the
// re-tier of the layers of its sequences whose period has elapsed, reserves
// blocks (and slots for the sequences it starts), queues the append of the
// new tokens to the tier index and uploads the batch's tables. On a check's
// error (kvcache.ErrOutOfBlocks when the free blocks or slots do not cover
// the batch) nothing has changed.
func (c *Planes) Begin(b *model.Batch) error {
	if err := kvcache.CheckWindow(c.window, b); err != nil {
		return err
	}
	if err := c.book.check(b, c.opts.MaxChunk, c.opts.MaxLen); err != nil {
		return err
	}
	T := len(b.Tokens)
	if err := c.reserveScratch(T, c.opts.MaxSeqs, c.shape.Hq*c.shape.D, "GPU bit-plane cache"); err != nil {
		return err
	}
	// Re-tier on the tokens held before the batch (as kvcache.Planes does at
	// the end of the previous Attend), then append the new ones.
	var retier []kernels.PlanesRetierJob
	for _, j := range c.book.retierJobs(b) {
		retier = append(retier, c.book.retierLayer(j.g, j.layer))
	}
	if err := kernels.CheckRetierJobs(retier, c.opts.MaxLen); err != nil {
		return err
	}
	for _, s := range b.Seqs { // planned here: Attend may be captured in a graph
		if s.Len == 1 {
			if _, err := c.decodePlan(liveBound(s.Pos+1, c.opts.MaxLen)); err != nil {
				return err
			}
		}
	}
	seqs, fresh := c.book.reserve(b)
	// Tables.
	B, hkv, nr := len(b.Seqs), c.shape.Hkv, c.pl.Tokens
	var words []int32
	p := gpuPlanePlan{T: T, B: B, seqs: seqs}
	p.table = len(words)
	for _, g := range seqs {
		row := make([]int32, c.maxBlk)
		copy(row, g.blocks)
		words = append(words, row...)
	}
	p.lens = len(words)
	for _, g := range seqs {
		words = append(words, int32(g.n))
	}
	p.block = len(words)
	words = append(words, make([]int32, 2*T)...)
	p.within = p.block + T
	for i, s := range b.Seqs {
		for j := range s.Len {
			pos := s.Pos + j
			words[p.block+s.Start+j] = seqs[i].blocks[pos/nr]
			words[p.within+s.Start+j] = int32(pos % nr)
		}
	}
	p.retier, p.nRetier = len(words), len(retier)
	for _, j := range retier {
		words = j.Words(words)
	}
	p.append = len(words)
	for i, s := range b.Seqs {
		words = kernels.PlanesAppendJob{Slot: seqs[i].slot, Pos: s.Pos, Len: s.Len, Tier: seqs[i].last}.Words(words)
	}
	for _, g := range seqs {
		for l := range c.layers {
			for h := 0; h < hkv; h++ {
				counts := g.counts[l][h]
				read := counts[kv.High] + counts[kv.Medium] + counts[kv.Low]
				c.stats.PlaneBytes += c.pl.PlaneReadBytes(counts) - int64(read*kv.IndexBytes)
				c.stats.IndexBytes += int64(read * kv.IndexBytes)
				c.stats.FP16Bytes += int64(g.n) * int64(c.pl.TierBytes(kv.High))
				for t, n := range counts {
					c.stats.Tokens[t] += int64(n)
				}
			}
		}
	}
	if err := c.upload(words); err != nil {
		return err
	}
	if len(fresh) > 0 {
		c.zeroSlots(fresh)
	}
	st, meta := c.dev.Stream(), c.meta
	c.be.Enqueue("GPU bit-plane cache: re-tier and append", func(x *cuda.Ctx) error {
		if err := c.retierer.LaunchRetier(x, st, meta+cuda.DevicePtr(4*p.retier), p.nRetier, c.mass, c.index, c.counts, c.offsets, hkv, c.opts.MaxLen); err != nil {
			return err
		}
		return c.retierer.LaunchAppend(x, st, meta+cuda.DevicePtr(4*p.append), B, c.index, c.counts, c.offsets, hkv, c.layers, c.opts.MaxLen)
	}, c.id, beginKeyTag, uint64(meta), uint64(p.retier), uint64(p.nRetier), uint64(p.append), uint64(B))
	c.batch, c.plan = b, p
	return nil
}

// zeroSlots queues the zeroing of new sequences' mass, tier counts and run
// offsets (an empty index).
func (c *Planes) zeroSlots(slots []int) {
	massWords := c.layers * c.shape.Hkv * c.opts.MaxLen
	countWords := c.layers * c.shape.Hkv * int(kv.NumTiers)
	st := c.dev.Stream()
	c.be.Enqueue("GPU bit-plane cache: zero slots", func(x *cuda.Ctx) error {
		for _, s := range slots {
			if err := x.Memset32Async(c.mass+c.massOffset(s, 0), 0, massWords, st); err != nil {
				return err
			}
			if err := x.Memset32Async(c.counts+c.countsOffset(s, 0), 0, countWords, st); err != nil {
				return err
			}
			if err := x.Memset32Async(c.offsets+c.countsOffset(s, 0), 0, countWords, st); err != nil {
				return err
			}
		}
		return nil
	})
}

// Attend implements model.Attention.
func (c *Planes) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if layer < 0 || layer >= c.layers {
		return fmt.Errorf("gpukv: GPU bit-plane cache: layer %d out of range [0, %d)", layer, c.layers)
	}
	if b != c.batch {
		return errors.New("gpukv: GPU bit-plane cache: Attend of a batch Begin did not see (call Begin first; model.Forward does)")
	}
	ptr, err := attentionPtrs(c.be, "GPU bit-plane cache", q, k, v, out)
	if err != nil {
		return err
	}
	p, sh := &c.plan, c.shape
	word := func(off int) cuda.DevicePtr { return c.meta + cuda.DevicePtr(4*off) }
	st := c.dev.Stream()
	qw, hkv, maxLen := sh.Hq*sh.D, sh.Hkv, c.opts.MaxLen
	type launch struct {
		plan  *kernels.PlanesPlan
		bufs  kernels.PlanesBuffers
		shape kernels.PlanesShape
	}
	var launches []launch
	key := []uint64{c.id, uint64(layer), uint64(p.T), uint64(ptr[0]), uint64(ptr[1]), uint64(ptr[2]), uint64(ptr[3]),
		uint64(c.pool[layer]), uint64(c.mass), uint64(c.index), uint64(c.counts), uint64(c.offsets), uint64(c.qh), uint64(c.oh),
		uint64(c.meta), uint64(p.B), uint64(p.table), uint64(p.lens), uint64(p.block)}
	for i, s := range b.Seqs {
		g := p.seqs[i]
		// A decode step's launch is sized by liveBound (its grid and the
		// mass pass cover the live tokens, not the context size); a prefill
		// chunk's by its length.
		bound := liveBound(s.Pos+s.Len, maxLen)
		ln := launch{plan: c.decode[bound], shape: kernels.PlanesShape{B: 1, Hq: sh.Hq, Hkv: hkv, Tq: s.Len, MaxBlocks: c.maxBlk,
			MaxL: bound, IndexStride: maxLen, MassStride: maxLen}}
		if s.Len > 1 {
			ln.plan, ln.shape.MaxL = c.prefill, s.Pos+s.Len
		}
		ln.bufs = kernels.PlanesBuffers{Pool: c.pool[layer], BlockTable: word(p.table + i*c.maxBlk), Lens: word(p.lens + i),
			Index: c.index + c.massOffset(g.slot, layer), Counts: c.counts + c.countsOffset(g.slot, layer),
			Offsets: c.offsets + c.countsOffset(g.slot, layer),
			Q:       c.qh + cuda.DevicePtr(s.Start*qw*2), Out: c.oh + cuda.DevicePtr(s.Start*qw*2)}
		// The mass only where the policy samples one of the call's query
		// tokens (kv.MassSampledAny; the pass skips the rows of the others):
		// the other steps store no scores and run no pass.
		if kv.MassSampledAny(s.Pos, s.Len, g.policy.MassEvery) {
			ln.bufs.Mass = c.mass + c.massOffset(g.slot, layer)
			ln.shape.MassEvery = g.policy.MassEvery
		}
		launches = append(launches, ln)
		key = append(key, uint64(g.slot), uint64(s.Len), uint64(s.Start), uint64(ln.shape.MaxL), uint64(ln.bufs.Mass), uint64(ln.shape.MassEvery))
		g.since[layer] += s.Len
	}
	T, bf16, nr := p.T, c.lay.BF16, c.pl.Tokens
	block, within := word(p.block), word(p.within)
	c.be.Enqueue(fmt.Sprintf("GPU bit-plane cache layer %d", layer), func(x *cuda.Ctx) error {
		if err := c.ops.F32ToF16(x, st, c.qh, ptr[0], T*qw); err != nil {
			return err
		}
		if err := c.writer.Launch(x, st, ptr[1], ptr[2], block, within, c.pool[layer], T, hkv, sh.D, nr, bf16); err != nil {
			return err
		}
		for _, ln := range launches {
			if err := ln.plan.LaunchShape(x, st, ln.bufs, ln.shape, 0); err != nil {
				return err
			}
		}
		return c.ops.F16ToF32(x, st, ptr[3], c.oh, T*qw)
	}, key...)
	return nil
}

// planeBook is the host side of a Planes: the free blocks and slots, each
// sequence's blocks, tokens per tier, re-tier counters and tier policy, and
// the tier mix held (kvcache.Planes' books). The tier maps themselves live
// on the device. It touches no device, so its tests run without one.
type planeBook struct {
	alloc           blockPool
	spec            kv.PlaneSpec // the cache's policy: every sequence's unless setPolicy
	layers, hkv, nr int
	seqs            map[int]*gpuPlaneSeq
	mix             [kv.NumTiers]int64 // (token, layer, KV head) entries held in each tier
	what            string             // names the cache in errors
}

// newPlaneBook returns the books of an empty cache of policy spec with
// blocks pool blocks of nr tokens and slots sequence slots, over layers
// layers of hkv KV heads.
func newPlaneBook(spec kv.PlaneSpec, blocks, slots, layers, hkv, nr int) planeBook {
	return planeBook{alloc: newBlockPool(blocks, slots), spec: spec, layers: layers, hkv: hkv, nr: nr,
		seqs: map[int]*gpuPlaneSeq{}, what: "GPU bit-plane cache"}
}

// len returns the tokens held for sequence id (0 if absent).
func (k *planeBook) len(id int) int {
	if s := k.seqs[id]; s != nil {
		return s.n
	}
	return 0
}

// blocksFor is the number of blocks l tokens fill (a block is taken when
// its first token is written).
func (k *planeBook) blocksFor(l int) int { return (l + k.nr - 1) / k.nr }

// blocksNeeded returns the blocks n more tokens of sequence id start.
func (k *planeBook) blocksNeeded(id, n int) int {
	l := k.len(id)
	return k.blocksFor(l+n) - k.blocksFor(l)
}

// open starts sequence id with the cache's policy and a slot, or fails
// with kvcache.ErrNoSlot.
func (k *planeBook) open(id int) (*gpuPlaneSeq, error) {
	if k.seqs[id] != nil {
		return nil, fmt.Errorf("gpukv: %s: sequence %d is already open", k.what, id)
	}
	if len(k.alloc.freeSlots) == 0 {
		return nil, fmt.Errorf("gpukv: %s: %w (%d sequences)", k.what, kvcache.ErrNoSlot, k.alloc.slots)
	}
	g := &gpuPlaneSeq{seqBlocks: *k.alloc.open(), since: make([]int, k.layers),
		policy: k.spec, counts: make([][][kv.NumTiers]int, k.layers), fresh: true}
	for l := range g.counts {
		g.counts[l] = make([][kv.NumTiers]int, k.hkv)
	}
	k.seqs[id] = g
	return g, nil
}

// remove frees sequence id's blocks and slot and takes its tiers out of the
// mix; an unknown id does nothing.
func (k *planeBook) remove(id int) {
	g := k.seqs[id]
	if g == nil {
		return
	}
	k.clearCounts(g)
	k.alloc.release(&g.seqBlocks)
	delete(k.seqs, id)
}

// truncate keeps the first n tokens of sequence id for n = 0 or its
// length (see Planes.Truncate).
func (k *planeBook) truncate(id, n int) error {
	g := k.seqs[id]
	switch {
	case g == nil && n == 0:
		return nil
	case g == nil:
		return fmt.Errorf("gpukv: %s: truncate unknown sequence %d", k.what, id)
	case n == g.n:
		return nil
	case n != 0:
		return fmt.Errorf("gpukv: %s: truncate sequence %d of %d tokens to %d: only 0 and %d are supported", k.what, id, g.n, n, g.n)
	}
	k.clearCounts(g)
	k.alloc.empty(&g.seqBlocks)
	for l := range g.since {
		g.since[l] = 0
	}
	g.fresh = true
	return nil
}

// setPolicy gives open sequence id the policy fields of p (shares, window,
// sinks, period, mass sampling); the storage fields stay the cache's.
func (k *planeBook) setPolicy(id int, p kv.PlaneSpec) error {
	g := k.seqs[id]
	if g == nil {
		return fmt.Errorf("gpukv: %s: set the tier policy of sequence %d, which is not open", k.what, id)
	}
	q := k.spec
	q.High, q.Medium, q.Low, q.Evicted = p.High, p.Medium, p.Low, p.Evicted
	q.Window, q.Sinks, q.Period, q.MassEvery = p.Window, p.Sinks, p.Period, p.MassEvery
	// The policy parser checks the fields (shares in [0, 100] summing to
	// 100, window and sinks in range, a positive period): one grammar, one
	// set of limits for specs, kv_tiers and policies made by hand.
	if _, err := kv.ParsePlanePolicy(q.PolicyString(), k.spec); err != nil {
		return fmt.Errorf("gpukv: %s: tier policy of sequence %d: %w", k.what, id, err)
	}
	g.policy = q
	return nil
}

// check is Begin's all-or-nothing check of batch b: every sequence
// continues where it ends (one not open starts at 0), brings at most
// maxChunk tokens, stays within maxLen, and the free blocks and slots
// cover the batch.
func (k *planeBook) check(b *model.Batch, maxChunk, maxLen int) error {
	needBlocks, needSlots := 0, 0
	for _, s := range b.Seqs {
		have := k.len(s.ID)
		switch {
		case s.Pos != have:
			return fmt.Errorf("gpukv: %s: sequence %d continues at position %d, but the cache holds %d tokens", k.what, s.ID, s.Pos, have)
		case s.Len > maxChunk:
			return fmt.Errorf("gpukv: %s: sequence %d brings %d tokens in one batch, more than the cache's chunk of %d (use a smaller --prefill-chunk)", k.what, s.ID, s.Len, maxChunk)
		case s.Pos+s.Len > maxLen:
			return fmt.Errorf("gpukv: %s: sequence %d would hold %d tokens, more than the cache's %d", k.what, s.ID, s.Pos+s.Len, maxLen)
		}
		if k.seqs[s.ID] == nil {
			needSlots++
		}
		needBlocks += k.blocksNeeded(s.ID, s.Len)
	}
	if len(b.Seqs) > k.alloc.slots {
		return fmt.Errorf("gpukv: %s: a batch of %d sequences exceeds the cache's %d", k.what, len(b.Seqs), k.alloc.slots)
	}
	return k.alloc.fits(k.what, needBlocks, needSlots)
}

// retierJob is one layer of one sequence whose re-tier period has elapsed.
type retierJob struct {
	g     *gpuPlaneSeq
	layer int
}

// retierJobs returns the layers of b's sequences whose period has elapsed,
// and every layer of a sequence holding tokens whose policy's new tier is
// not the one its index stores last (a SetTierPolicy since its last batch).
func (k *planeBook) retierJobs(b *model.Batch) []retierJob {
	var jobs []retierJob
	for _, s := range b.Seqs {
		g := k.seqs[s.ID]
		if g == nil {
			continue
		}
		relayout := g.n > 0 && (&kvcache.TierPolicy{Spec: g.policy}).NewTier() != g.last
		for l, n := range g.since {
			if n >= g.policy.Period || relayout {
				jobs = append(jobs, retierJob{g, l})
			}
		}
	}
	return jobs
}

// retierLayer books the re-tier of one layer of g by its policy (the
// counts of every KV head, the period restarted, the new tier's run last)
// and returns the device job that does it (kernels.PlanesRetier).
func (k *planeBook) retierLayer(g *gpuPlaneSeq, layer int) kernels.PlanesRetierJob {
	j, counts := retierBounds(g.policy, g.n)
	j.SL = g.slot*k.layers + layer
	for h := 0; h < k.hkv; h++ {
		k.setCounts(g, layer, h, counts)
	}
	g.since[layer] = 0
	g.last = j.Last
	return j
}

// PlaneRetierJob returns the device re-tier job of (slot, layer) row sl
// holding n tokens under policy p: kvcache.TierPolicy.Retier's rule
// (benchmarks time kernels.PlanesRetier with it).
func PlaneRetierJob(p kv.PlaneSpec, sl, n int) kernels.PlanesRetierJob {
	j, _ := retierBounds(p, n)
	j.SL = sl
	return j
}

// retierBounds returns kvcache.TierPolicy.Retier's rule for n tokens under
// policy p as a re-tier job (SL left 0): the sinks and the window, the
// cumulative counts the policy fills from the bottom of the ranked
// candidates, and the tier new tokens get; and the tokens per tier that
// result, whatever the masses.
func retierBounds(p kv.PlaneSpec, n int) (kernels.PlanesRetierJob, [kv.NumTiers]int) {
	pol := kvcache.TierPolicy{Spec: p}
	sinks := min(p.Sinks, n)
	win := max(sinks, n-p.Window)
	nc := win - sinks
	want := pol.Counts(n)
	kE := min(want[kv.Evicted], nc)
	kL := min(kE+want[kv.Low], nc)
	kM := min(kL+want[kv.Medium], nc)
	j := kernels.PlanesRetierJob{N: n, Sinks: sinks, Win: win, KE: kE, KL: kL, KM: kM, Last: pol.NewTier()}
	return j, [kv.NumTiers]int{kv.High: n - kM, kv.Medium: kM - kL, kv.Low: kL - kE, kv.Evicted: kE}
}

// reserve does what check allowed for batch b: it opens the sequences that
// start, reserves the blocks the new tokens start and counts their tier
// (each sequence's policy's NewTier, the run its device index stores last).
// It returns b's sequences in batch order and the slots to zero before the
// batch runs (sequences opened or emptied since their last batch).
func (k *planeBook) reserve(b *model.Batch) (seqs []*gpuPlaneSeq, fresh []int) {
	seqs = make([]*gpuPlaneSeq, len(b.Seqs))
	for i, s := range b.Seqs {
		g := k.seqs[s.ID]
		if g == nil {
			g, _ = k.open(s.ID) // check counted a free slot
		}
		if g.fresh {
			fresh = append(fresh, g.slot)
			g.fresh = false
		}
		k.alloc.grow(&g.seqBlocks, k.blocksNeeded(s.ID, s.Len))
		nt := (&kvcache.TierPolicy{Spec: g.policy}).NewTier()
		if g.n == 0 {
			g.last = nt // an empty index: every run is at 0
		}
		for l := range g.counts {
			for h := range g.counts[l] {
				n := g.counts[l][h]
				n[nt] += s.Len
				k.setCounts(g, l, h, n)
			}
		}
		g.n = s.Pos + s.Len
		seqs[i] = g
	}
	return seqs, fresh
}

// setCounts records the tier counts of one layer and KV head of g, keeping
// the mix in step.
func (k *planeBook) setCounts(g *gpuPlaneSeq, layer, h int, n [kv.NumTiers]int) {
	old := &g.counts[layer][h]
	for t := range n {
		k.mix[t] += int64(n[t] - old[t])
	}
	*old = n
}

// clearCounts takes g's tiers out of the mix.
func (k *planeBook) clearCounts(g *gpuPlaneSeq) {
	for l := range g.counts {
		for h := range g.counts[l] {
			k.setCounts(g, l, h, [kv.NumTiers]int{})
		}
	}
}

// tierStats returns read with the mix held now.
func (k *planeBook) tierStats(read kvcache.ReadStats) kvcache.TierStats {
	return kvcache.TierStats{Read: read, Cached: k.mix, PerToken: k.layers * k.hkv}
}

// checkIdle returns an error unless nothing is held: no sequence, every
// block and slot free, an empty mix.
func (k *planeBook) checkIdle() error {
	if len(k.seqs) != 0 || len(k.alloc.freeBlocks) != k.alloc.blocks || len(k.alloc.freeSlots) != k.alloc.slots {
		return fmt.Errorf("gpukv: %s not idle: %d sequences, %d of %d blocks and %d of %d slots free", k.what,
			len(k.seqs), len(k.alloc.freeBlocks), k.alloc.blocks, len(k.alloc.freeSlots), k.alloc.slots)
	}
	if k.mix != [kv.NumTiers]int64{} {
		return fmt.Errorf("gpukv: %s not idle: tier mix %v with nothing cached", k.what, k.mix)
	}
	return nil
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

// planeFillChunk is the tokens FillRandom writes per launch.
const planeFillChunk = 256

// FillRandom opens sequence id (or fails if it is open) holding n tokens of
// pseudo-random K and V (normal, the same for the same seed; every chunk of
// planeFillChunk tokens repeats), split into the planes as Attend writes
// them, with pseudo-random attention masses, and every layer due for a
// re-tier at its next batch, so that decode steps after it read the
// policy's tier mix. For benchmarks (bitdecode bench model).
func (c *Planes) FillRandom(id, n int, seed uint32) error {
	if n <= 0 || n > c.opts.MaxLen {
		return fmt.Errorf("gpukv: GPU bit-plane cache: FillRandom of %d tokens (max %d)", n, c.opts.MaxLen)
	}
	if c.book.seqs[id] != nil {
		return fmt.Errorf("gpukv: GPU bit-plane cache: FillRandom of sequence %d, which is open", id)
	}
	var b model.Batch
	b.Add(id, 0, make([]int32, n)...)
	if err := c.book.check(&b, n, c.opts.MaxLen); err != nil {
		return err
	}
	seqs, fresh := c.book.reserve(&b)
	g := seqs[0]
	sh, nr := c.shape, c.pl.Tokens
	r := rand.New(rand.NewPCG(uint64(seed), 0x62697470))
	chunk := min(planeFillChunk, n)
	kv32 := make([]float32, 2*chunk*sh.Hkv*sh.D)
	for i := range kv32 {
		kv32[i] = float32(r.NormFloat64())
	}
	mass := make([]float32, sh.Hkv*c.opts.MaxLen)
	for i := range mass {
		mass[i] = r.Float32()
	}
	words := kernels.PlanesAppendJob{Slot: g.slot, Pos: 0, Len: n, Tier: g.last}.Words(nil)
	for t := range n {
		words = append(words, g.blocks[t/nr])
	}
	for t := range n {
		words = append(words, int32(t%nr))
	}
	if err := c.upload(words); err != nil {
		return err
	}
	c.zeroSlots(fresh)
	st, meta := c.dev.Stream(), c.meta
	err := c.be.Do(func(x *cuda.Ctx) error {
		if err := c.be.SyncStream(x, st); err != nil { // the slot is zeroed before the masses land
			return err
		}
		stage, err := x.Alloc(4 * len(kv32))
		if err != nil {
			return err
		}
		defer x.Free(stage)
		if err := x.HtoD(stage, cuda.Bytes(kv32)); err != nil {
			return err
		}
		k, v := stage, stage+cuda.DevicePtr(4*chunk*sh.Hkv*sh.D)
		for l := range c.layers {
			if err := x.HtoD(c.mass+c.massOffset(g.slot, l), cuda.Bytes(mass)); err != nil {
				return err
			}
			for t0 := 0; t0 < n; t0 += chunk {
				m := min(chunk, n-t0)
				block, within := meta+cuda.DevicePtr(4*(kernels.PlanesAppendJobWords+t0)), meta+cuda.DevicePtr(4*(kernels.PlanesAppendJobWords+n+t0))
				if err := c.writer.Launch(x, st, k, v, block, within, c.pool[l], m, sh.Hkv, sh.D, nr, c.lay.BF16); err != nil {
					return err
				}
			}
		}
		if err := c.retierer.LaunchAppend(x, st, meta, 1, c.index, c.counts, c.offsets, sh.Hkv, c.layers, c.opts.MaxLen); err != nil {
			return err
		}
		return c.be.SyncStream(x, st) // the staging buffer is freed on return
	})
	if err != nil {
		return err
	}
	for l := range g.since {
		g.since[l] = g.policy.Period
	}
	return nil
}

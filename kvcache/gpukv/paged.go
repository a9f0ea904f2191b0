package gpukv

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// GPU cache defaults.
const (
	// gpuDefaultSeqs is the default number of residual slots (sequences held
	// at once).
	gpuDefaultSeqs = 8
	// gpuDefaultChunk is the default longest run of new tokens of one
	// sequence in a batch (a prefill chunk).
	gpuDefaultChunk = 512
	// gpuDecodeSplit is the shortest split (tokens) of decode steps with
	// kvcache.Options.BatchInvariant, and gpuDecodeSplitCap and
	// gpuDecodeSplitMax how a longer sequence's split grows: it doubles
	// until the sequence needs at most gpuDecodeSplitCap splits, up to
	// gpuDecodeSplitMax tokens (kernels.DecodeShape.SplitCap). A sequence's
	// attention then depends on its own length only, never on the batch it
	// runs in. 512 tokens keep every warp of a split busy (kernels'
	// mmaMinSplitTokens). The cap is 16 whole splits and the partial one
	// of a length a little past a power of two (contexts, caches and
	// benchmarks are sized in powers of two): up to 8.5K a sequence splits
	// at 512 (8K: 16 splits, the fast path's own plan at one sequence, and
	// main's), to 17K at 1024, to 34K at 2048, longer at 4096 (128K: 32
	// splits, again the fast path's at one sequence). Until session 22
	// every sequence split at 512: at 55 sequences of 32K (and a few
	// tokens) that was 65 splits a KV head, 28600 CTAs a layer, 36.6-36.9
	// ms a step of the 8B model where 17 splits of 2048 took 31.8 and the
	// fast path (3 splits) 28.5; at one sequence of 32K 512 gave 6.86 ms,
	// 1024 6.57, 2048 6.66, 4096 6.97; of 128K 512 9.30, 4096 7.70 (int4,
	// H100, docs/perf/decode-step.md v33, which also measured a cap of 16:
	// 31.3 ms at 55 x 32K, its 9 splits of 4096, but 6.96 ms at one).
	gpuDecodeSplit    = 512
	gpuDecodeSplitCap = 17
	gpuDecodeSplitMax = 4096
	// gpuPrefillSplit is the split length of prefill chunks, whose many
	// query rows fill the GPU without splitting the context finely (and
	// keep the split workspace small).
	gpuPrefillSplit = 8192
)

// Paged is the low-bit KV cache on the GPU, as a model.Attention for the
// CUDA backend. Storage per layer: a pool of packed blocks
// [Blocks][Hkv][BlockBytes] in kv.MMA order and 16-bit residual blocks
// [MaxSeqs + stage][Hkv][Nr][D] (kv.MMA order too; the last stage slots
// stage the blocks a batch fills, rounds.go); a sequence owns one residual
// slot and a list of pool blocks (its block table; the same block ids in
// every layer).
//
// Per batch, Begin reserves the blocks the new tokens will fill and uploads
// the block tables, lengths and the write plan once. Per layer, Attend
//
//  1. writes the new k and v into the residual blocks (kernels.KVWriter) in
//     rounds (rounds.go): a round writes its tokens into their sequences'
//     slots, or a block the batch fills into a staging slot, then one pack
//     launch quantizes every slot that holds a whole block into its block
//     (kernels.PackPlan.LaunchPaged); a decode step and an aligned prefill
//     chunk take one round; the
//     first round's launch also converts q to fp16 (and a rotated format's
//     appends rotate q, k and v on the way: KVWriter.AppendRot); a batch of
//     one round may take q, k and v before RoPE from the joined q|k|v GEMM
//     queued before it (backend/gpu's EnqueueAttend, KVWriter.AppendRoPE),
//  2. runs the tensor-core decode attention (kernels.DecodePlan): one launch
//     per run of consecutive sequences with the same number of new tokens;
//     a layer with a sliding window reads the batch's windowed view of the
//     tables (gpuView) and passes its window to the kernels, which mask the
//     keys before each query row's window (kernels.DecodeShape.Window),
//  3. converts the output to float32 (rotating it back for a rotated format:
//     kernels.Ops.F16ToF32Hadamard).
//
// With BatchInvariant, decode steps split each sequence by its own length
// (biSplit), so a sequence's output does not depend on the other sequences
// of its batch.
//
// Sequences with a common prompt prefix share its packed blocks: blocks are
// reference counted (kvcache.BlockAllocator), and a freed block stays
// findable by its prefix key until the pool reuses it. Sharing goes by
// canonical chunks of MaxChunk tokens computed alone in their batch, so
// that a prefix taken from the cache holds the bits a computation of it
// would write (see "Prefix sharing" at Open). A Paged is not safe for
// concurrent use.
type Paged struct {
	gpuBuffers           // be, dev, and the per-batch q/out and table buffers
	format     kv.Format // the spec's, in kv.MMA order (its Spec names the per-layer formats)
	shape      attn.Shape
	layers     int
	opts       kvcache.Options
	maxBlk     int // block-table columns: ceil(MaxLen / Nr)

	ops    *kernels.Ops
	writer *kernels.KVWriter
	tuning kernels.Tuning // the backend's (its Options)
	// kern holds each layer's format and kernels; layers of one format
	// share them.
	kern []*layerKernels

	pool, resK, resV []cuda.DevicePtr // per layer
	// stage is the staging slots of each layer's residual after the
	// sequences' MaxSeqs (rounds.go; stageSlots).
	stage int

	// faScratch is prefill.cu's dequantizing route's fp16 copy of one
	// sequence's blocks and its identity table (kernels.PrefillScratch),
	// shared by the layers (their prefills run in stream order); zero where
	// no layer's plan dequantizes or the copy would not fit (allocPrefillScratch).
	faScratch kernels.PrefillScratch

	// book holds the blocks, slots and sequences, and which blocks are
	// shared (pool.go).
	book *pagedBook

	// windows is each layer's sliding window (0: full attention), and
	// views the distinct nonzero ones: Begin uploads one windowed view of
	// the block tables and lengths per window (gpuView).
	windows []int
	views   []int
	// softcap is the attention scores' soft-cap (model.Config.AttnSoftcap;
	// 0: none), compiled into every decode and prefill plan
	// (kernels.DecodeShape.Softcap).
	softcap float32

	// id tells caches apart in graph keys: a new cache's buffers may reuse
	// a closed one's addresses, but never its captured graphs.
	id uint64

	// The current batch, set by Begin, and the layers Attend has queued it
	// for: when every layer has, its blocks are written (book.complete).
	batch     *model.Batch
	plan      gpuBatchPlan
	attended  []bool
	nAttended int
}

// gpuCacheIDs numbers GPU caches (Paged.id).
var gpuCacheIDs atomic.Uint64

// gpuBatchPlan is what Begin worked out for a batch: the write rounds and
// the attention launches, with offsets into the uploaded int32 tables.
type gpuBatchPlan struct {
	T      int
	rounds []gpuRound
	runs   []gpuRun
	// Word offsets into meta.
	table, lens, slots int
	// views are the windowed views of the tables, one per c.views entry.
	views []gpuView
}

// gpuView is the batch's block tables and lengths as a layer of sliding
// window W sees them: each sequence's table starts at the block holding
// the first key its first new token sees (position Pos-W+1), and its length
// is cut by the blocks skipped, so the decode kernels read no block before
// the window and mask (DecodeShape.Window) only the tokens of that first
// block before it and, in a prefill chunk, those before each later row's
// window. The residual keeps its tokens: the length drops by whole blocks.
type gpuView struct {
	table, lens int // word offsets into meta: [B][maxBlk] and [B]
}

// gpuRound is one write round: an append of the tokens whose slot entry is
// not -1, then a pack of n full residual blocks.
type gpuRound struct {
	slot, row   int // word offsets of the [T] slot and row arrays
	src, dst, n int // word offsets of the [n] pack arrays, and n
}

// gpuRun is one attention launch: sequences [first, first+n) of the batch,
// each with tq new tokens, the longest holding maxL tokens, by plan.
type gpuRun struct {
	first, n, tq, tok0, maxL int
	bucket                   int // decode plan's batch bucket (0: prefill)
	lenBucket                int // decode plan's length bucket (lenBucket; 0: prefill)
}

// decodeKey names a decode plan: its batch bucket and length bucket.
type decodeKey struct{ bucket, maxL int }

// layerKernels are the kernels of one format: its pack plan, its decode
// plans by batch bucket (decodePlan) and its prefill plan. A rotated format
// (:rot) plans the kernels of the same format unrotated: Attend rotates q, k
// and v before them (in the append, KVWriter.AppendRot) and the output after
// (kernels.Ops.F16ToF32Hadamard), with kv.Rotate's bits, so the residual and the packed blocks hold exactly what the CPU
// cache holds.
type layerKernels struct {
	format  kv.Format // in kv.MMA order, without the rotation
	rotate  bool      // the layer's format rotates K, V and Q
	lay     kernels.DecodeLayout
	pack    *kernels.PackPlan
	decode  map[decodeKey]*kernels.DecodePlan // Tq = 1, by batch and length bucket
	prefill *kernels.DecodePlan               // B = 1, Tq = MaxChunk
	// fa is prefill.cu's plan (B = 1, Tq = MaxChunk) where the cache runs
	// it (faPlanned), else nil; runFA says which chunks take it.
	fa *kernels.PrefillPlan
}

// faPlanned reports whether a cache plans prefill.cu (layerKernels.fa) for
// layout l: where a whole chunk of MaxChunk tokens would take it
// (kernels.PrefillRoute), unless the tuning says no (BITDECODE_PREFILL_FA=0).
// A batch-invariant cache takes it too (since session 30; before, its
// prefill stayed on the decode kernel): prefill.cu's bits for a chunk depend
// on its sequence and the chunk alone (no splits across CTAs, each CTA one
// sequence; the dequantizing route gives the same bits), a prefill run is
// one sequence, and a preempted request recomputes its prompt in the same
// chunks (engine.Scheduler), so a request's bits still do not depend on its
// batch (TestGPUBatchInvariantLogits, TestGPUBatchInvariantScheduler).
func (c *Paged) faPlanned(l kernels.DecodeLayout) bool {
	whole := kernels.DecodeShape{B: 1, Hq: c.shape.Hq, Hkv: c.shape.Hkv, Tq: c.opts.MaxChunk}
	return kernels.PrefillRoute(l, whole) && !c.tuning.Decode.NoPrefill
}

// runFA reports whether run r of layer kernels lk launches prefill.cu
// rather than the decode kernel's prefill plan: a prefill chunk (Tq > 1)
// of enough query rows (kernels.PrefillRoute) where the cache planned it.
// The route depends on the chunk's shape alone, so a canonical chunk of
// prefix sharing always takes the same kernel ("Prefix sharing" below).
func (c *Paged) runFA(lk *layerKernels, r gpuRun) bool {
	return r.tq > 1 && lk.fa != nil && kernels.PrefillRoute(lk.lay, kernels.DecodeShape{B: r.n, Hq: c.shape.Hq, Hkv: c.shape.Hkv, Tq: r.tq})
}

// bucket returns the decode plan bucket of a run of n sequences: the
// power of two above n (capped at MaxSeqs), or MaxSeqs with BatchInvariant.
func (c *Paged) bucket(n int) int {
	if c.opts.BatchInvariant {
		return c.opts.MaxSeqs
	}
	b := 1
	for b < n {
		b *= 2
	}
	return min(b, c.opts.MaxSeqs)
}

// lenBucket returns the length a decode run whose longest sequence holds
// maxL tokens is planned and launched for: the power of two at or above
// maxL (at least minLenBucket), at most the cache's MaxLen. With
// BatchInvariant each sequence's splits follow its own length whatever the
// plan's length, so the bucket changes only the grid's width (how many of
// its CTAs exit at once) and the kernels' guess of a CTA's first block (a
// sequence's bits stay its own: TestGPUCacheBatchInvariant runs it alone
// and beside longer ones across buckets and split lengths); MaxLen's grid
// was 256 splits a sequence and KV head at 128K. A plan sized for
// MaxLen splits the cache's longest sequence: a 1K conversation in a cache
// of 128K then ran in one split a KV head, its warps' tiles in series
// (int4 13.3 us at 1K and 58.5 at 8K a layer against 11.8 and 13.4 with
// plans sized to the length, decode-attention.md session 28). A run's
// bucket changes only where its longest sequence crosses a power of two,
// so step after step a decode still launches the same grid (a CUDA graph
// replays it) but for a new capture at each doubling.
func (c *Paged) lenBucket(maxL int) int { return lengthBound(maxL, minLenBucket, c.opts.MaxLen) }

// lengthBound returns the smallest power-of-two multiple of least that is
// at least n, capped at maxLen: the length a decode launch is sized for
// (the paged cache's lenBucket, the bit-plane cache's liveBound).
func lengthBound(n, least, maxLen int) int {
	b := least
	for b < n {
		b *= 2
	}
	return min(b, maxLen)
}

// minLenBucket is the shortest length bucket (lenBucket).
const minLenBucket = 1024

// biSplit is the batch-invariant decode's split rule (decodePlan): the
// shortest split, the most splits a sequence takes while its split can
// still double, and the longest split, in tokens (gpuDecodeSplit,
// gpuDecodeSplitCap, gpuDecodeSplitMax; max over base a power of two). A
// variable so that tests can scale the rule down to short sequences.
var biSplit = struct{ base, cap, max int }{gpuDecodeSplit, gpuDecodeSplitCap, gpuDecodeSplitMax}

// BatchInvariantSplits returns the batch-invariant decode's split rule for
// a format of nr-token blocks as kernels.DecodeShape's SplitLen, SplitCap
// and SplitMax: biSplit's, the shortest split rounded up to whole blocks
// (at least 64 tokens) and the longest as many doublings above it. bench
// attn --batch-invariant plans with it too.
func BatchInvariantSplits(nr int) (splitLen, splitCap, splitMax int) {
	base := (max(biSplit.base, 64) + nr - 1) / nr * nr // whole blocks
	return base, biSplit.cap, base * max(1, biSplit.max/biSplit.base)
}

// decodePlan returns lk's decode plan for a batch bucket and a length
// bucket (lenBucket), made on first use with splits sized for them (with
// BatchInvariant, each sequence's by its own length: biSplit).
func (c *Paged) decodePlan(lk *layerKernels, bucket, maxL int) (*kernels.DecodePlan, error) {
	key := decodeKey{bucket, maxL}
	if p := lk.decode[key]; p != nil {
		return p, nil
	}
	nr := lk.format.Residual
	shape := kernels.DecodeShape{B: bucket, Hq: c.shape.Hq, Hkv: c.shape.Hkv, Tq: 1, MaxBlocks: c.maxBlk, MaxL: maxL, Softcap: c.softcap}
	if c.opts.BatchInvariant {
		shape.SplitLen, shape.SplitCap, shape.SplitMax = BatchInvariantSplits(nr)
	}
	p, err := kernels.PlanDecodeWith(c.dev, kernels.DecodeAuto, lk.lay, shape, c.tuning.Decode)
	if err != nil {
		return nil, err
	}
	lk.decode[key] = p
	return p, nil
}

// plan returns the plan of run r in lk's kernels (made in Begin).
func (lk *layerKernels) plan(r gpuRun) *kernels.DecodePlan {
	if r.tq > 1 {
		return lk.prefill
	}
	return lk.decode[decodeKey{r.bucket, r.lenBucket}]
}

// uniqueKernels returns each distinct layerKernels once.
func (c *Paged) uniqueKernels() []*layerKernels {
	var out []*layerKernels
	for _, lk := range c.kern {
		if lk != nil && !slices.Contains(out, lk) {
			out = append(out, lk)
		}
	}
	return out
}

// NewPaged returns an empty GPU cache of the given format for model
// config cfg on the CUDA backend be. It compiles the kernels the format
// needs (cached on disk) and allocates the whole pool up front, so running
// out of memory is an error here, never in the middle of a request.
func NewPaged(be *gpu.Backend, cfg *model.Config, spec kv.Spec, o kvcache.Options) (*Paged, error) {
	sh := attn.Shape{Hq: cfg.Heads, Hkv: cfg.KVHeads, D: cfg.HeadDim}
	if err := sh.Validate(); err != nil {
		return nil, fmt.Errorf("gpukv: model %s: %w", cfg.Architecture, err)
	}
	if spec.Planes.On {
		return nil, fmt.Errorf("gpukv: format %s: the paged GPU cache does not hold bit planes (bw); Planes does (kvcache.New picks it)", spec.String())
	}
	f, fs, err := kvcache.LayerFormats(cfg, spec)
	if err != nil {
		return nil, err
	}
	f = f.WithOrder(kv.MMA)
	for l := range fs {
		if fs[l].Spec.Reference {
			return nil, fmt.Errorf("gpukv: %s is a CPU accuracy reference (:ref); the GPU cache does not simulate it", fs[l].Spec.String())
		}
		fs[l] = fs[l].WithOrder(kv.MMA)
		if _, err := kernels.LayoutFor(unrotated(fs[l])); err != nil {
			return nil, fmt.Errorf("gpukv: layer %d: %w", l, err)
		}
	}
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = gpuDefaultSeqs
	}
	if o.MaxLen <= 0 {
		o.MaxLen = cfg.MaxPositions
	}
	if o.MaxLen <= 0 {
		return nil, errors.New("gpukv: GPU cache: the model has no max_position_embeddings; set MaxLen")
	}
	if o.MaxChunk <= 0 {
		o.MaxChunk = gpuDefaultChunk
	}
	nr := f.Residual
	// Whole blocks, as engine.Scheduler rounds its PrefillChunk: a chunk it
	// cuts from a --prefill-chunk of 100 holds 128 tokens of int4, which
	// must fit, and is the canonical chunk of prefix sharing.
	o.MaxChunk = min((o.MaxChunk+nr-1)/nr*nr, o.MaxLen)
	c := &Paged{gpuBuffers: gpuBuffers{be: be, dev: be.Device()}, tuning: be.Options().Tuning, format: f, shape: sh, layers: cfg.Layers, opts: o, id: gpuCacheIDs.Add(1),
		maxBlk: (o.MaxLen + nr - 1) / nr, attended: make([]bool, cfg.Layers), windows: make([]int, cfg.Layers),
		softcap: float32(cfg.AttnSoftcap)}
	copy(c.windows, cfg.LayerWindows)
	for _, w := range c.windows {
		if w > 0 && !slices.Contains(c.views, w) {
			c.views = append(c.views, w)
		}
	}
	c.stage = stageSlots(o.MaxChunk, nr)
	resBytes := (o.MaxSeqs + c.stage) * sh.Hkv * nr * sh.D * 2
	switch {
	case o.Blocks > 0:
	case o.MemoryBytes > 0:
		per := kvcache.BlockBytesOf(fs, sh.Hkv)
		c.opts.Blocks = int((o.MemoryBytes - 2*int64(resBytes)*int64(c.layers)) / per)
		if c.opts.Blocks < 1 {
			return nil, fmt.Errorf("gpukv: GPU cache: %d bytes do not hold the %d sequences' residual blocks, %d staging blocks and one block", o.MemoryBytes, o.MaxSeqs, c.stage)
		}
	default:
		c.opts.Blocks = o.MaxSeqs * c.maxBlk
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if c.ops, err = kernels.LoadOps(c.dev); err != nil {
		return nil, err
	}
	if c.writer, err = kernels.LoadKVWriter(c.dev); err != nil {
		return nil, err
	}
	// The kernels of each distinct format (per-layer formats share them).
	byFormat := map[string]*layerKernels{}
	c.kern = make([]*layerKernels, c.layers)
	split := func(n int) int { return (n + nr - 1) / nr * nr } // a whole number of blocks
	for l, lf := range fs {
		if lk := byFormat[lf.Spec.String()]; lk != nil {
			c.kern[l] = lk
			continue
		}
		if lf.Rotate && sh.D&(sh.D-1) != 0 {
			return nil, fmt.Errorf("gpukv: %s: rotation needs a power-of-two head dim, not %d", lf.Spec.String(), sh.D)
		}
		lk := &layerKernels{format: unrotated(lf), rotate: lf.Rotate, decode: map[decodeKey]*kernels.DecodePlan{}}
		lf = lk.format
		c.kern[l], byFormat[lf.Spec.String()] = lk, lk
		if lk.lay, err = kernels.LayoutFor(lf); err != nil {
			return nil, err
		}
		if lk.pack, err = kernels.PlanPackWith(c.dev, lf, c.tuning.Pack); err != nil {
			return nil, err
		}
		if _, err := c.decodePlan(lk, c.bucket(1), c.lenBucket(1)); err != nil {
			return nil, err
		}
		if lk.prefill, err = kernels.PlanDecodeWith(c.dev, kernels.DecodeAuto, lk.lay, kernels.DecodeShape{
			B: 1, Hq: sh.Hq, Hkv: sh.Hkv, Tq: c.opts.MaxChunk, MaxBlocks: c.maxBlk, MaxL: o.MaxLen,
			SplitLen: split(gpuPrefillSplit), Softcap: c.softcap}, c.tuning.Decode); err != nil {
			return nil, err
		}
		if c.faPlanned(lk.lay) {
			if lk.fa, err = kernels.PlanPrefill(c.dev, lk.lay, kernels.DecodeShape{
				B: 1, Hq: sh.Hq, Hkv: sh.Hkv, Tq: c.opts.MaxChunk, MaxBlocks: c.maxBlk, MaxL: o.MaxLen, Softcap: c.softcap}, c.tuning.Decode); err != nil {
				return nil, err
			}
		}
	}
	err = c.be.Do(func(x *cuda.Ctx) error {
		for l := range c.layers {
			blockBytes := fs[l].BlockBytes() * sh.Hkv
			p, err := x.Alloc(c.opts.Blocks * blockBytes)
			if err != nil {
				return fmt.Errorf("gpukv: GPU KV pool of %d blocks x %d layers (%d MiB per layer): %w (give the cache less memory: --kv-memory, --max-seqs)", c.opts.Blocks, c.layers, c.opts.Blocks*blockBytes>>20, err)
			}
			c.pool = append(c.pool, p)
			for _, dst := range []*[]cuda.DevicePtr{&c.resK, &c.resV} {
				r, err := x.Alloc(resBytes)
				if err != nil {
					return err
				}
				*dst = append(*dst, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := c.allocPrefillScratch(); err != nil {
		return nil, err
	}
	c.book = newPagedBook(c.opts.Blocks, o.MaxSeqs, nr, sharedChunk(c.opts.MaxChunk, nr))
	ok = true
	return c, nil
}

// prefillScratchMax is the largest fp16 copy of a sequence's blocks a cache
// allocates for prefill.cu's dequantizing route (PrefillPlan.LaunchDequant):
// MaxLen·Hkv·D·4 bytes, 512 MiB for Llama-3.1-8B's heads at 128K tokens.
// A cache whose copy would be larger, or whose device would keep less than
// prefillScratchHeadroom free beside it, prefills low-bit layers by
// prefill.cu's own per-tile dequantization (the same bits, slower:
// docs/perf/prefill.md v5).
const (
	prefillScratchMax      = 1 << 30
	prefillScratchHeadroom = 1 << 30
)

// allocPrefillScratch allocates c.faScratch where a layer's prefill plan
// dequantizes and the copy fits prefillScratchMax and the device's free
// memory with prefillScratchHeadroom to spare.
func (c *Paged) allocPrefillScratch() error {
	bytes := 0
	for _, lk := range c.uniqueKernels() {
		if lk.fa != nil {
			bytes = max(bytes, lk.fa.ScratchBytes(c.maxBlk, c.shape.Hkv))
		}
	}
	if bytes == 0 || bytes > prefillScratchMax {
		return nil
	}
	var free uint64
	if err := c.dev.Do(func(x *cuda.Ctx) error {
		var err error
		free, _, err = x.MemInfo()
		return err
	}); err != nil {
		return err
	}
	if free < uint64(bytes+prefillScratchHeadroom) {
		return nil // the activations and workspaces after the pool come first
	}
	pool, err := c.dev.Alloc(bytes)
	if err != nil {
		return nil // no room: the per-tile route
	}
	table, err := c.dev.Alloc(4 * c.maxBlk)
	if err != nil {
		return errors.Join(err, c.dev.Free(pool))
	}
	ident := make([]int32, c.maxBlk)
	for i := range ident {
		ident[i] = int32(i)
	}
	if err := c.dev.HtoD(table, cuda.Bytes(ident)); err != nil {
		return errors.Join(err, c.dev.Free(pool), c.dev.Free(table))
	}
	c.faScratch = kernels.PrefillScratch{Pool: pool, Table: table}
	return nil
}

// unrotated returns f without its rotation: the format the kernels of a
// rotated layer are planned for.
func unrotated(f kv.Format) kv.Format {
	f.Rotate = false
	return f
}

// Close frees the device memory of the cache.
func (c *Paged) Close() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	// Queued layers may still read the buffers: run them and wait.
	keep(c.be.Do(func(x *cuda.Ctx) error { return c.be.SyncStream(x, c.dev.Stream()) }))
	for _, lk := range c.uniqueKernels() {
		for _, p := range lk.decode {
			keep(p.Close())
		}
		if lk.prefill != nil {
			keep(lk.prefill.Close())
		}
		if lk.fa != nil {
			keep(lk.fa.Close())
		}
		lk.decode, lk.prefill, lk.fa = nil, nil, nil
	}
	ptrs := append(append(append(c.take(), c.pool...), c.resK...), c.resV...)
	ptrs = append(ptrs, c.faScratch.Pool, c.faScratch.Table)
	c.faScratch = kernels.PrefillScratch{}
	for _, p := range ptrs {
		if p != 0 {
			keep(c.dev.Free(p))
		}
	}
	c.pool, c.resK, c.resV = nil, nil, nil
	return first
}

// formats returns every layer's format.
func (c *Paged) formats() []kv.Format {
	fs := make([]kv.Format, c.layers)
	for l, lk := range c.kern {
		fs[l] = lk.format
	}
	return fs
}

// Format returns the cache's KV format (in kv.MMA order).
func (c *Paged) Format() kv.Format { return c.format }

// Len returns the number of tokens cached for sequence id.
func (c *Paged) Len(id int) int {
	return c.book.length(id)
}

// Bytes returns the memory sequence id's tokens take (all layers and KV
// heads, by the format's accounting) and what they would take in fp16.
func (c *Paged) Bytes(id int) (bytes, fp16Bytes int64) { return c.BytesAt(c.Len(id)) }

// BytesAt returns the memory a sequence of l tokens takes in this cache's
// format (all layers and KV heads), and what the same tokens take in fp16.
func (c *Paged) BytesAt(l int) (bytes, fp16Bytes int64) {
	return kvcache.SequenceBytes(c.formats(), c.shape, l)
}

var _ kvcache.Cache = (*Paged)(nil)

// BlockBytes is the memory of one pool block across all layers and KV heads.
func (c *Paged) BlockBytes() int64 {
	return kvcache.BlockBytesOf(c.formats(), c.shape.Hkv)
}

// ResidualBytes is the memory of one sequence's fp16 residual slots across
// all layers and KV heads (K and V).
func (c *Paged) ResidualBytes() int64 {
	return int64(c.layers) * int64(c.shape.Hkv) * int64(c.format.Residual) * int64(c.shape.D) * 2 * 2
}

// StagingBytes implements kvcache.Stager: the staging slots of every layer
// (rounds.go), K and V.
func (c *Paged) StagingBytes() int64 { return int64(c.stage) * c.ResidualBytes() }

// FreeBlocks implements kvcache.Cache: the pool blocks no sequence holds,
// cached prefixes included (they are reclaimed on demand).
func (c *Paged) FreeBlocks() int { return c.book.alloc.Free() }

// CachedBlocks returns the free blocks that still hold a findable prefix.
func (c *Paged) CachedBlocks() int { return c.book.alloc.Cached() }

// SharedChunk returns the tokens of a canonical chunk, the unit of prefix
// sharing: MaxChunk when it is a whole number of blocks, else 0 (nothing
// is shared).
func (c *Paged) SharedChunk() int { return c.book.chunk }

// SetTierPolicy implements kvcache.Cache: this cache has no tiers.
func (c *Paged) SetTierPolicy(id int, p kv.PlaneSpec) error {
	return fmt.Errorf("gpukv: %w; this one is %s", kvcache.ErrNoTiers, c.format.Spec.String())
}

// TierStats implements kvcache.Cache: this cache has no tiers.
func (c *Paged) TierStats() (kvcache.TierStats, bool) { return kvcache.TierStats{}, false }

// FreeSlots returns the number of unused sequence slots.
func (c *Paged) FreeSlots() int { return len(c.book.freeSlots) }

// TotalBlocks implements kvcache.Cache.
func (c *Paged) TotalBlocks() int { return c.book.alloc.Total() }

// MaxSeqs implements kvcache.Cache.
func (c *Paged) MaxSeqs() int { return c.opts.MaxSeqs }

// BlockTokens implements kvcache.Cache: tokens per block (the residual size).
func (c *Paged) BlockTokens() int { return c.format.Residual }

// BlocksNeeded implements kvcache.Cache: the blocks n more tokens of sequence
// id fill.
func (c *Paged) BlocksNeeded(id, n int) int {
	l, nr := c.Len(id), c.format.Residual
	return (l+n)/nr - l/nr
}

// Prefix sharing
//
// On the CPU a block may be shared once one forward segment packed all of
// it (kvcache.Paged): a row's result there does not depend on the batch.
// On the GPU it does. A token's K and V in every layer after the first are
// functions of its hidden state, which the linear layers compute, and
// backend/gpu's Linear takes gemv.cu for batches of at most
// kernels.GEMVMaxRows rows (x read in float32) and cuBLASLt above (x
// rounded to fp16), whose algorithm (tile shape, split-K) its heuristic
// picks per shape, M = T rows included. So the bits of a prompt token
// depend on the length of the chunk that computed it and on the decode
// tokens of other sequences beside it; and the attention of a chunk of one
// token takes the decode plan, sized per batch bucket. Sharing blocks by
// the token prefix alone would give a request other bits than computing
// its prefix, and may change its greedy tokens.
//
// The cache therefore shares canonical chunks only: C = MaxChunk tokens
// (sharedChunk: a whole number of blocks, else nothing is shared), starting
// at a multiple of C, run as the only sequence of their batch (T = C).
// Begin marks the blocks of such a chunk shareable if every earlier token
// of the sequence is in blocks of canonical chunks too; they become
// findable when the batch has run through every layer (committed at the
// next Begin or Open). A block's key chains the token ids of every whole
// chunk up to the end of its own (chunkKeys). Open takes, of the whole
// chunks before a prompt's last token, the longest leading run whose
// blocks are all cached, so the cached length is a multiple of C.
//
// Why a prefix from the cache then holds the bits its computation writes:
//
//   - A canonical chunk's forward pass has the same input in every
//     sequence with the same tokens up to its end: the same C token ids at
//     the same positions, the earlier context in blocks of the same bytes
//     (by induction over the chunks), an empty residual (C is a whole number
//     of blocks; bytes left in a slot beyond the sequence's length are
//     masked with weight 0, and a slot is zeroed when a sequence opens),
//     and the same launches: T = C rows, hence the same GEMV or GEMM
//     algorithm (cuBLASLt's plan is keyed by shape and operand alignment,
//     and activations are whole allocations), and the prefill plan with
//     Tq = C and MaxL = the chunk's end, hence the same splits. backend/gpu's kernels are deterministic
//     (no atomics, reduction orders fixed by the shapes) and cuBLASLt gives
//     the same bits for the same algorithm and shape on one GPU, so the
//     chunk writes the same bytes. Nothing assumes that a row's result is
//     independent of the batch's other rows: the key covers the whole
//     chunk, tokens after the block included.
//   - A sequence that starts from m cached chunks continues at mC, a chunk
//     boundary. The scheduler starts prefill chunks at multiples of its
//     chunk, so with PrefillChunk = MaxChunk (bitdecode serve sets both from
//     --prefill-chunk) the rest of the prompt runs in the chunks a fresh
//     computation runs. Sharing up to a block boundary inside a chunk would
//     not: the rest of that chunk would run as a batch of other T.
//
// So a request whose batches run alone gives the same greedy tokens and
// logits, bit for bit, whether its prefix came from the cache or was
// computed (TestGPUPrefixSharing, TestGPUPrefixScheduler). A chunk run
// beside other sequences, or after a segment that was not canonical, is
// never shared. A request batched with others has bits that depend on its
// batches with or without sharing (on the GPU a row depends on T, above);
// sharing only gives its cached chunks the bits a run alone computes.
//
// Packing writes only the blocks Begin allocated to the batch, never one
// already in a block table, so a shared block is never written. The block
// tables carry any block ids, so the kernels need nothing for sharing.

// Open implements kvcache.Cache: it takes a residual slot for sequence id
// and the cached blocks of the longest leading run of canonical chunks of
// prompt it shares with earlier sequences (see "Prefix sharing" above),
// and returns the number of tokens they hold: a multiple of SharedChunk,
// below len(prompt). The sequence continues at that position with an
// empty residual.
func (c *Paged) Open(id int, prompt []int) (int, error) {
	s, cached, err := c.book.open(id, prompt, c.opts.MaxLen, "GPU cache")
	if err != nil {
		return 0, err
	}
	c.zeroSlots([]int{s.slot})
	return cached, nil
}

// Truncate implements kvcache.Cache: it keeps the first n tokens of sequence
// id. Tokens can be dropped from the fp16 residual only: n below the
// sequence's packed tokens is an error (a packed block cannot be reopened),
// except n = 0, which empties the sequence and releases its blocks.
func (c *Paged) Truncate(id, n int) error { return c.book.truncate(id, n, "GPU cache") }

// Remove frees sequence id's slot and its references to its blocks; shared
// blocks stay with the other sequences, and blocks of canonical chunks stay
// findable until the pool reuses them.
func (c *Paged) Remove(id int) { c.book.remove(id) }

// CheckIdle returns an error unless the cache holds no sequence, every
// block is free (cached prefixes count as free), every slot is free and
// the books agree. Tests call it after the last request.
func (c *Paged) CheckIdle() error { return c.book.checkIdle("GPU cache") }

// Begin implements model.BatchStarter: it checks the batch against the
// cache, reserves the blocks its tokens fill (reclaiming cached blocks,
// least recently freed first, when no others are free) and uploads the
// batch's block tables, lengths and write plan. The blocks of a canonical
// chunk become shareable once the batch has run through every layer (see
// "Prefix sharing" at Open). It first makes the last batch's shareable
// blocks findable; beyond that, on error nothing has changed.
func (c *Paged) Begin(b *model.Batch) error {
	c.book.commit() // the last batch has completed, or never will
	nr := c.format.Residual
	for _, s := range b.Seqs {
		switch {
		case s.Len > c.opts.MaxChunk:
			return fmt.Errorf("gpukv: GPU cache: sequence %d brings %d tokens in one batch, more than the cache's chunk of %d (use a smaller --prefill-chunk)", s.ID, s.Len, c.opts.MaxChunk)
		case s.Pos+s.Len > c.opts.MaxLen:
			return fmt.Errorf("gpukv: GPU cache: sequence %d would hold %d tokens, more than the cache's %d", s.ID, s.Pos+s.Len, c.opts.MaxLen)
		}
	}
	if len(b.Seqs) > c.opts.MaxSeqs {
		return fmt.Errorf("gpukv: GPU cache: a batch of %d sequences exceeds the cache's %d", len(b.Seqs), c.opts.MaxSeqs)
	}
	if err := c.book.check(b, "GPU cache"); err != nil {
		return err
	}
	T := len(b.Tokens)
	if err := c.reserveScratch(T, c.opts.MaxSeqs, c.shape.Hq*c.shape.D, "GPU cache"); err != nil {
		return err
	}

	// Attention runs: consecutive sequences with the same number of new
	// tokens share a launch (all of a decode step's sequences, typically).
	var runs []gpuRun
	for i, s := range b.Seqs {
		if n := len(runs); n > 0 && runs[n-1].tq == s.Len && s.Len == 1 {
			runs[n-1].n++
			runs[n-1].maxL = max(runs[n-1].maxL, s.Pos+s.Len)
			continue
		}
		runs = append(runs, gpuRun{first: i, n: 1, tq: s.Len, tok0: s.Start, maxL: s.Pos + s.Len})
	}
	for i := range runs {
		r := &runs[i]
		if r.tq > 1 {
			continue
		}
		r.bucket, r.lenBucket = c.bucket(r.n), c.lenBucket(r.maxL)
		for _, lk := range c.uniqueKernels() { // planned here: Attend may be captured in a graph
			if _, err := c.decodePlan(lk, r.bucket, r.lenBucket); err != nil {
				return err
			}
		}
	}
	// Assign slots and blocks; lay out the int32 tables:
	// table [B][maxBlk] | lens [B] | slots [B] | per round: slot [T], row [T], src [n], dst [n].
	var words []int32
	put := func(v ...int32) int { off := len(words); words = append(words, v...); return off }
	p := gpuBatchPlan{T: T, runs: runs}
	seqs, fresh := c.book.begin(b) // fresh: slots new to this batch, zeroed before use
	p.table = len(words)
	for _, g := range seqs {
		row := make([]int32, c.maxBlk)
		copy(row, g.blocks)
		put(row...)
	}
	p.lens = len(words)
	for _, s := range b.Seqs {
		put(int32(s.Pos + s.Len))
	}
	p.slots = len(words)
	for _, g := range seqs {
		put(int32(g.slot))
	}
	for _, w := range c.views {
		v := gpuView{table: len(words)}
		skip := make([]int, len(seqs)) // blocks before the first row's window
		for i, g := range seqs {
			skip[i] = max(0, b.Seqs[i].Pos-w+1) / nr
			row := make([]int32, c.maxBlk)
			copy(row, g.blocks[min(skip[i], len(g.blocks)):])
			put(row...)
		}
		v.lens = len(words)
		for i, s := range b.Seqs {
			put(int32(s.Pos + s.Len - skip[i]*nr))
		}
		p.views = append(p.views, v)
	}
	// Write rounds (rounds.go): the blocks the batch fills pack from the
	// staging slots where they can, in one round.
	rs := make([]roundSeq, len(b.Seqs))
	for i, s := range b.Seqs {
		rs[i] = roundSeq{start: s.Start, pos: s.Pos, n: s.Len, slot: seqs[i].slot, blocks: seqs[i].blocks}
	}
	for _, r := range planRounds(rs, T, nr, c.opts.MaxSeqs, c.stage) {
		rd := gpuRound{slot: put(r.slot...), row: put(r.row...), n: len(r.src)}
		rd.src, rd.dst = put(r.src...), put(r.dst...)
		p.rounds = append(p.rounds, rd)
	}
	if err := c.upload(words); err != nil {
		return err
	}
	if len(fresh) > 0 {
		c.zeroSlots(fresh)
	}
	c.batch, c.plan = b, p
	clear(c.attended)
	c.nAttended = 0
	return nil
}

// zeroSlots queues the zeroing of residual slots in every layer. The decode
// kernel reads whole 16-token groups of the residual and masks the tokens
// beyond a sequence's length by their weight, which leaves 0·NaN = NaN if
// stale bytes there (an earlier cache's packed codes, say) spell a NaN.
func (c *Paged) zeroSlots(slots []int) {
	words := c.shape.Hkv * c.format.Residual * c.shape.D / 2 // fp16 pairs per slot
	st := c.dev.Stream()
	c.be.Enqueue("GPU KV cache: zero residual slots", func(x *cuda.Ctx) error {
		for _, s := range slots {
			off := cuda.DevicePtr(s * words * 4)
			for l := range c.layers {
				if err := x.Memset32Async(c.resK[l]+off, 0, words, st); err != nil {
					return err
				}
				if err := x.Memset32Async(c.resV[l]+off, 0, words, st); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Attend implements model.Attention.
func (c *Paged) Attend(layer int, b *model.Batch, q, k, v, out backend.Tensor) error {
	if layer < 0 || layer >= c.layers {
		return fmt.Errorf("gpukv: GPU cache: layer %d out of range [0, %d)", layer, c.layers)
	}
	if b != c.batch {
		return errors.New("gpukv: GPU cache: Attend of a batch Begin did not see (call Begin first; model.Forward does)")
	}
	ptr, err := attentionPtrs(c.be, "GPU cache", q, k, v, out)
	if err != nil {
		return err
	}
	p, sh, lk := &c.plan, c.shape, c.kern[layer]
	word := func(off int) cuda.DevicePtr { return c.meta + cuda.DevicePtr(4*off) }
	st := c.dev.Stream()
	qw := sh.Hq * sh.D
	rounds, runs, T := p.rounds, p.runs, p.T
	table, lens, slots := p.table, p.lens, p.slots
	// The key of the op: every value its launches depend on (for CUDA graph
	// replay of decode steps; see backend/gpu's graph.go).
	key := []uint64{c.id, uint64(layer), uint64(T), uint64(ptr[0]), uint64(ptr[1]), uint64(ptr[2]), uint64(ptr[3]),
		uint64(c.pool[layer]), uint64(c.resK[layer]), uint64(c.resV[layer]),
		uint64(c.qh), uint64(c.oh), uint64(c.meta), uint64(table), uint64(lens), uint64(slots)}
	for _, r := range rounds {
		key = append(key, uint64(r.slot), uint64(r.row), uint64(r.src), uint64(r.dst), uint64(r.n))
	}
	for _, r := range runs {
		key = append(key, uint64(r.first), uint64(r.n), uint64(r.tq), uint64(r.tok0), uint64(c.runMaxL(r)), uint64(r.bucket))
	}
	window := c.windows[layer]
	if window > 0 { // the layer's view of the tables (gpuView)
		v := p.views[slices.Index(c.views, window)]
		table, lens = v.table, v.lens
		key = append(key, uint64(window), uint64(table), uint64(lens))
	}
	// Unrotated, the output is the widening of the decode kernels' fp16 at
	// c.oh: a cuBLASLt o_proj queued next reads that (backend/gpu's
	// EnqueueOut). Rotated, the output is rotated back in float32, and
	// that launch writes its fp16 copy at xh for such an o_proj
	// (EnqueueOutWith; decode-step.md v22).
	//
	// Where the batch writes in one round, q, k and v may come straight
	// from the joined q|k|v GEMM queued before (src, backend/gpu's
	// EnqueueAttend): the round's append then applies their biases and
	// RoPE itself (KVWriter.AppendRoPE, rope_cols's bits; decode-step.md
	// v24).
	//
	// With sel (not 0) the last launch also writes DEC's list of each
	// token's output for o's q6 GEMV (backend/gpu's AttendOp.RunSel; no
	// fp16 copy then).
	runSel := func(x *cuda.Ctx, xh cuda.DevicePtr, src *kernels.RoPEQKV, sel cuda.DevicePtr, kChunk int) error {
		if src != nil && len(rounds) != 1 { // Fold below says no
			return fmt.Errorf("gpukv: GPU cache layer %d: q, k and v before RoPE for %d write rounds", layer, len(rounds))
		}
		if len(rounds) == 0 { // no new tokens: q alone (rotated in place)
			if lk.rotate {
				if err := c.ops.Hadamard(x, st, ptr[0], T*sh.Hq, sh.D); err != nil {
					return err
				}
			}
			if err := c.ops.F32ToF16(x, st, c.qh, ptr[0], T*qw); err != nil {
				return err
			}
		}
		for ri, r := range rounds {
			// The first round's append also converts q to fp16 for the
			// decode kernels (the bits of F32ToF16, one launch fewer); a
			// rotated format's append rotates q, k and v on the way (the
			// bits of Hadamard first, three launches fewer).
			var err error
			switch {
			case src != nil && ri == 0:
				err = c.writer.AppendRoPE(x, st, *src, c.qh, sh.Hq, word(r.slot), word(r.row), c.resK[layer], c.resV[layer], T, sh.Hkv, sh.D, lk.format.Residual, lk.rotate)
			case lk.rotate:
				hq := 0
				if ri == 0 {
					hq = sh.Hq
				}
				err = c.writer.AppendRot(x, st, ptr[0], c.qh, hq, ptr[1], ptr[2], word(r.slot), word(r.row), c.resK[layer], c.resV[layer], T, sh.Hkv, sh.D, lk.format.Residual)
			default:
				var q, qh cuda.DevicePtr
				var nq int
				if ri == 0 {
					q, qh, nq = ptr[0], c.qh, T*qw
				}
				err = c.writer.AppendQ(x, st, q, qh, nq, ptr[1], ptr[2], word(r.slot), word(r.row), c.resK[layer], c.resV[layer], T, sh.Hkv, sh.D, lk.format.Residual)
			}
			if err != nil {
				return err
			}
			if err := lk.pack.LaunchPaged(x, st, c.resK[layer], c.resV[layer], word(r.src), word(r.dst), c.pool[layer], r.n, sh.Hkv); err != nil {
				return err
			}
		}
		// The split kernels may start under the append or pack just queued
		// (programmatic dependent launch, decode-attention.md session 17):
		// before their dependency wait they read lens, the block table and
		// the blocks before the run's new tokens, so nothing queued between
		// Begin's upload and here may write those; q, the residual and the
		// blocks the rounds above pack are read after the wait.
		//
		// A format that needs no rotation back has its float32 output
		// written by the decode kernels' merges (DecodeBuffers.Out32), with
		// the bits of the conversion it then skips (decode-step.md v39),
		// unless a DEC list is made from it or a plan says it cannot.
		out32 := sel == 0 && !lk.rotate
		for _, r := range runs {
			out32 = out32 && lk.plan(r).Out32() && (!c.runFA(lk, r) || lk.fa.Out32())
		}
		for _, r := range runs {
			bufs := kernels.DecodeBuffers{
				Pool: c.pool[layer], BlockTable: word(table + r.first*c.maxBlk),
				ResK: c.resK[layer], ResV: c.resV[layer], ResSlots: word(slots + r.first), Lens: word(lens + r.first),
				Q: c.qh + cuda.DevicePtr(r.tok0*qw*2), Out: c.oh + cuda.DevicePtr(r.tok0*qw*2),
			}
			if out32 {
				bufs.Out32 = ptr[3] + cuda.DevicePtr(r.tok0*qw*4)
			}
			shape := kernels.DecodeShape{B: r.n, Hq: sh.Hq, Hkv: sh.Hkv, Tq: r.tq, MaxBlocks: c.maxBlk, MaxL: c.runMaxL(r), Window: window, Softcap: c.softcap}
			if c.runFA(lk, r) { // prefill.cu: 64 or 128 query rows a CTA (docs/perf/prefill.md)
				var err error
				if r.n == 1 && lk.fa.DequantPays(shape) && c.faScratch.Pool != 0 {
					err = lk.fa.LaunchDequant(x, st, bufs, shape, 0, c.faScratch) // over an fp16 copy of the blocks (v5)
				} else {
					err = lk.fa.LaunchShape(x, st, bufs, shape, 0)
				}
				if err != nil {
					return err
				}
				continue
			}
			if err := lk.plan(r).LaunchShape(x, st, bufs, shape, 0); err != nil {
				return err
			}
		}
		switch {
		case sel != 0 && lk.rotate:
			return c.ops.F16ToF32HadamardSel(x, st, ptr[3], c.oh, T, qw, sh.D, sel, kChunk)
		case sel != 0:
			return c.ops.F16ToF32Sel(x, st, ptr[3], c.oh, T, qw, sel, kChunk)
		case lk.rotate: // the output rotated back on its way to float32
			return c.ops.F16ToF32HadamardHalf(x, st, ptr[3], xh, c.oh, T*sh.Hq, sh.D)
		case out32:
			return nil
		}
		return c.ops.F16ToF32(x, st, ptr[3], c.oh, T*qw)
	}
	run := func(x *cuda.Ctx, xh cuda.DevicePtr, src *kernels.RoPEQKV) error { return runSel(x, xh, src, 0, 0) }
	a := gpu.AttendOp{Op: fmt.Sprintf("GPU KV cache layer %d", layer), Q: ptr[0], K: ptr[1], V: ptr[2], T: T, Hq: sh.Hq, Hkv: sh.Hkv, D: sh.D,
		Fold: len(rounds) == 1 && kernels.AppendRoPEFits(sh.D), Run: run, Out: ptr[3], N: T * qw, Key: key}
	rotD := 0
	if lk.rotate {
		rotD = sh.D
	}
	if c.ops.OutSelects(T, qw, rotD) {
		a.RunSel = func(x *cuda.Ctx, src *kernels.RoPEQKV, sel cuda.DevicePtr, kChunk int) error {
			return runSel(x, 0, src, sel, kChunk)
		}
	}
	if lk.rotate {
		a.WithHalf = true
	} else {
		a.OutHalf = c.oh
	}
	c.be.EnqueueAttend(a)
	if !c.attended[layer] {
		c.attended[layer] = true
		c.nAttended++
		// Every layer queued without an error pending: the batch's blocks
		// will hold its tokens (a kernel's own failure fails the Forward
		// that waits for it, and the caller removes its sequences).
		if c.nAttended == c.layers && c.be.Err() == nil {
			c.book.complete()
		}
	}
	return nil
}

// runMaxL is the length a run's launch is sized for: its length bucket for
// decode runs (lenBucket: their splits beyond a sequence's length exit at
// once), so that step after step a decode launches the same grid and can be
// replayed as a graph; the run's longest sequence for prefill chunks.
func (c *Paged) runMaxL(r gpuRun) int {
	if r.tq == 1 {
		return r.lenBucket
	}
	return r.maxL
}

// stageSlots is the staging slots of a cache whose chunks hold up to
// maxChunk new tokens a sequence, for a residual of nr tokens: one per
// block of an aligned chunk (every chunk of engine.Scheduler then packs in
// one round), at most gpuStageMax.
func stageSlots(maxChunk, nr int) int { return min(gpuStageMax, (maxChunk+nr-1)/nr) }

// gpuStageMax caps a layer's staging slots: 16 hold a 2048-token chunk of
// a 128-token residual (`run`'s default on the GPU) in 16 residual blocks,
// 8 MiB a layer at Llama-3.1-8B's KV heads (256 MiB for its 32 layers; a
// chunk of more blocks takes another round).
const gpuStageMax = 16

// gpuFillChunk is how many blocks FillRandom packs per launch.
const gpuFillChunk = 64

// FillRandom makes sequence id (which must be new) hold n tokens of
// pseudo-random KV-like data (standard deviation 1, one outlier channel in
// 16; the same for the same seed) in every layer, quantized and packed as
// real tokens are. Benchmarks use it to measure decode steps at long
// contexts without running a prefill over them.
func (c *Paged) FillRandom(id, n int, seed uint32) error {
	if n < 0 || n > c.opts.MaxLen {
		return fmt.Errorf("gpukv: GPU cache: FillRandom of %d tokens (max %d)", n, c.opts.MaxLen)
	}
	nr, sh := c.format.Residual, c.shape
	full := n / nr
	g, err := c.book.openFilled(id, n, "GPU cache: FillRandom")
	if err != nil {
		return err
	}
	half := sh.Hkv * nr * sh.D // elements of one residual block, all heads
	chunk := min(gpuFillChunk, max(full, 1))
	words := make([]int32, 0, 2*full)
	for i := range chunk {
		words = append(words, int32(i))
	}
	words = append(words, g.blocks...)
	if err := c.upload(words); err != nil {
		return err
	}
	st := c.dev.Stream()
	return c.be.Do(func(x *cuda.Ctx) error {
		stK, err := x.Alloc(chunk * half * 2)
		if err != nil {
			return err
		}
		defer x.Free(stK)
		stV, err := x.Alloc(chunk * half * 2)
		if err != nil {
			return err
		}
		defer x.Free(stV)
		for l := range c.layers {
			s := seed + uint32(l)*0x9e3779b9
			for b0 := 0; b0 < full; b0 += chunk {
				m := min(chunk, full-b0)
				if err := c.writer.FillRandom(x, st, stK, m*half, sh.D, s+uint32(b0)*2, 1); err != nil {
					return err
				}
				if err := c.writer.FillRandom(x, st, stV, m*half, sh.D, s+uint32(b0)*2+1, 1); err != nil {
					return err
				}
				dst := c.meta + cuda.DevicePtr(4*(chunk+b0))
				if err := c.kern[l].pack.LaunchPaged(x, st, stK, stV, c.meta, dst, c.pool[l], m, sh.Hkv); err != nil {
					return err
				}
			}
			res := cuda.DevicePtr(g.slot * half * 2)
			if err := c.writer.FillRandom(x, st, c.resK[l]+res, half, sh.D, s^0x5bd1e995, 1); err != nil {
				return err
			}
			if err := c.writer.FillRandom(x, st, c.resV[l]+res, half, sh.D, s^0x1b873593, 1); err != nil {
				return err
			}
		}
		return c.be.SyncStream(x, st) // the staging buffers are freed on return
	})
}

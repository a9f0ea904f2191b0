package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
)

//go:embed decode.cu
var decodeSource string

//go:embed decode_mma.cu
var decodeMMASource string

// mmaStages is the default cp.async ring depth of low-bit formats: 0, v2.7's
// in-place register pipeline. The v2.11 ring (2-4 tiles per warp) measured
// 2-17% slower at 2 CTAs per SM and tied to 23% slower at 3, for int2, k4v2
// and int4 KC (docs/perf/decode-attention.md, session 11); it stays behind
// MMATuning.Stages.
const mmaStages = 0

// mmaRingSlot is decode_mma.cu's Ring<...>::kSlot: the shared memory one
// tile of mt groups takes in a warp's ring (its K and V codes, its KT and
// value pairs, the D key pairs of a key group it opens).
func mmaRingSlot(l DecodeLayout, mt int) int {
	kg, vg := scaleGroups(l)
	tt := mt * 16
	slot := tt * l.D * (l.KBits + l.VBits) / 8
	if l.KBits < 16 && !l.KPerChannel {
		slot += tt * 4 * kg
	}
	if l.VBits < 16 {
		slot += tt * 4 * vg
	}
	if l.KBits < 16 && l.KPerChannel {
		slot += 4 * l.D
	}
	return slot
}

// mmaRingSmem is the dynamic shared memory of decode_mma.cu with a ring of
// stages tiles of mt groups per warp (4 warps), which also holds the warp
// merge's redO (kWarps x kQueryRows x D floats).
func mmaRingSmem(l DecodeLayout, mt, stages int) int {
	return max(4*stages*mmaRingSlot(l, mt), 4*mmaRows*l.D*4)
}

// Shared memory per SM of the H100 (228 KiB, 1 KiB of it reserved per CTA)
// and decode_mma.cu's static shared memory besides redO (NVRTC 11.8, sm_90:
// 2352 bytes with the ring, rounded up): the ring's depth is cut until the
// CTAs per SM the registers are capped for fit.
const (
	smemPerSM       = 228 << 10
	smemPerCTA      = 227 << 10 // the most one CTA may opt in to
	mmaStaticSmem   = 3 << 10
	smemReservedCTA = 1 << 10
)

// DecodeKernel selects a decode-attention implementation (decode.cu's
// version list): both compute the same function within the format's bound.
type DecodeKernel int

const (
	// DecodeMMA is v2: tensor cores over blocks in kv.MMA order (the default).
	DecodeMMA DecodeKernel = iota
	// DecodeV1 is v1: CUDA cores over blocks in kv.Linear order.
	DecodeV1
	// DecodeWGMMA is v3, the Hopper variant of v2: a TMA ring fed by a
	// producer warp and wgmma in one consumer warpgroup (decode_wgmma.cu).
	DecodeWGMMA
	// DecodeAuto plans whichever of DecodeMMA and DecodeWGMMA measured
	// faster for the format and shape (PickDecodeKernel).
	DecodeAuto
)

// String returns "mma", "v1", "wgmma" or "auto".
func (k DecodeKernel) String() string {
	switch k {
	case DecodeV1:
		return "v1"
	case DecodeWGMMA:
		return "wgmma"
	case DecodeAuto:
		return "auto"
	}
	return "mma"
}

// ParseDecodeKernel returns the kernel named s: "mma", "v1", "wgmma" or "auto".
func ParseDecodeKernel(s string) (DecodeKernel, error) {
	for _, k := range []DecodeKernel{DecodeMMA, DecodeV1, DecodeWGMMA, DecodeAuto} {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("kernels: no decode kernel %q (want auto, mma, wgmma or v1)", s)
}

// Order returns the packed order the kernel reads, for blocks and (v2) the
// fp16 residual.
func (k DecodeKernel) Order() kv.Order {
	if k == DecodeV1 {
		return kv.Linear
	}
	return kv.MMA
}

// mmaRows is bitdecode.cuh's kQueryRows: query rows per CTA of the
// tensor-core kernels (the mma N extent).
const mmaRows = 8

// mmaCTAsPerSM is how many CTAs of decode_mma.cu (128 threads) share an
// SM at the low-bit formats' 217-255 registers per thread (v2.7's pipeline:
// 254-255 on NVRTC 11.8, sm_90).
const mmaCTAsPerSM = 2

// mmaSplitRule is decode_mma.cu's split rule for steps of many items:
// splitWavesFill (session 20: int4 55 x 32K 694.9 -> 666.5 us, 93.2 ->
// 97.0% of the read ceiling, with 3 splits instead of 2; splitWavesDown
// before).
const mmaSplitRule = splitWavesFill

// mmaMinSplitTokens is the fewest tokens a split of decode_mma.cu gets,
// so that each CTA has work enough to amortize its setup (v2.1: 512; v3.1:
// 256 measured 0.4-1.6 us faster at 1 x 8K, equal at 1 x 32K; v2.8: with
// v2.7's in-place pipeline, 512 is 1.1-1.2 us faster at 1 x 8K for int2,
// k4v2, int4 KC and KT, and no other row of the benchmark grid changes its
// splits; docs/perf/decode-attention.md, session 8).
const mmaMinSplitTokens = 512

// wgmmaMinSplitTokens is mmaMinSplitTokens for decode_wgmma.cu (v3.1's
// 256: 512 measured 0.3 us slower for int4 KT at 1 x 8K in session 8).
const wgmmaMinSplitTokens = 256

// decodeMaxSplits is bitdecode.cuh's kMaxSplits: splits of one sequence.
const decodeMaxSplits = 1024

// decodeFuseMaxSplits is bitdecode.cuh's kFuseMaxSplits: the most splits
// the tensor-core kernels merge themselves (finishSplits: decode v2.5,
// planes' split_mma v2.4); more run a combine launch.
const decodeFuseMaxSplits = 64

// mmaLaneBudget bounds the K+V bytes one lane loads per tile (registers).
// Measured on the H100 (BITDECODE_DECODE_MT sweep, docs/perf): 256 bytes
// gives int8 MT=2 (80 -> 98% at 128x8K), int4 MT=4 (68 -> 76% KC, KT
// 65 -> 77% at 16x32K), int2 MT=8 (48 -> 52%); fp16 stays at MT=1.
const mmaLaneBudget = 256

// Tile constants of decode.cu (kept equal to its constexprs).
const (
	decodeThreads = 128
	decodeTile    = 64
	// decodeTargetCTAs is how many CTAs a step aims for (about four waves
	// on a 132-SM H100). It is a constant, not read from the device, so the
	// split count, and with it the result's bits, depend on the shape only.
	decodeTargetCTAs = 528
)

// decodeRowChunks are the RMAX instantiations: query rows per CTA.
var decodeRowChunks = []int{1, 2, 4, 8}

// DecodeLayout is the packed-block layout of a KV format as the decode
// kernel reads it (package kv's canonical layout; see decode.cu).
type DecodeLayout struct {
	D            int  // head dim: HeadDimOK (64, 128 or 256)
	KBits, VBits int  // 16 (fp16 or bf16), 8, 4 or 2
	BF16         bool // 16-bit K and V are bf16 (tensor-core kernel only)
	KPerChannel  bool // keys quantized per channel (KC) rather than per token
	GK, GV       int  // group sizes (tokens for KC, channels otherwise)
	Nr           int  // tokens per block (= residual block size)
	BlockBytes   int  // one KV head's block: K half then V half
	KBytes       int  // size of the K half
	KParamsOff   int  // offset of K's (scale, zero) pairs in the K half
	VParamsOff   int  // offset of V's pairs in the V half
}

// DecodeShape is the shape of one decode call.
type DecodeShape struct {
	B, Hq, Hkv, Tq int
	MaxBlocks      int // columns of the block table
	MaxL           int // longest sequence (cached tokens, query tokens included)
	// SplitLen fixes the tokens per split (a multiple of the block size):
	// a sequence's result then depends on its own length only, not on the
	// batch it is decoded in (what an engine wants: batched = solo, bit for
	// bit). 0 lets the planner size splits to fill the GPU for this shape.
	SplitLen int
	// SplitCap and SplitMax (with SplitLen) let each sequence take its own
	// split length from its own length (seqSplitLen, bitdecode.cuh's
	// seqSplitLen): SplitLen·2^k tokens, k the smallest for which the
	// sequence needs at most SplitCap splits, but at most SplitMax tokens
	// (SplitLen times a power of two). A sequence's result still depends on
	// its own length only, never on its batch, while a long one runs in
	// fewer, longer splits than a fixed SplitLen gives it. SplitCap 0 (and
	// SplitMax 0): every sequence splits at SplitLen.
	SplitCap, SplitMax int
	// Window is the layer's sliding window (0: none): a query at position
	// p sees the keys at [max(0, p-Window+1), p] (package attn's
	// Params.Window), the keys before masked in every kernel (bitdecode.cuh's
	// windowSpan). Only the launch reads it (LaunchShape's shape): the
	// plan's split sizing does not depend on it, and a caller that wants the
	// blocks before a window skipped passes a view that starts at the block
	// of the first visible key (block table offset, lengths reduced by whole
	// blocks; kvcache/gpukv's Paged does).
	Window int
	// Softcap is the attention scores' soft-cap c (0: none; Gemma 2's
	// attn_logit_softcapping, package attn's Params.Softcap): each score s
	// (after the scale) becomes c·tanh(s/c) before the mask and the
	// softmax. It is compiled into the plan's kernels (softcapOptions:
	// bitdecode.cuh's BD_SOFTCAP), so a launch's shape must carry the
	// plan's; without a cap the kernels are those of before, byte for byte.
	Softcap float32
}

// DecodeBuffers are the device buffers of one call (see decode.cu for layouts).
type DecodeBuffers struct {
	Pool       cuda.DevicePtr // [nBlocks][Hkv][BlockBytes]
	BlockTable cuda.DevicePtr // [B][MaxBlocks] int32
	ResK, ResV cuda.DevicePtr // [slots][Hkv][Nr][D] fp16
	ResSlots   cuda.DevicePtr // [B] int32 residual slot of each sequence; 0: slot b
	Lens       cuda.DevicePtr // [B] int32
	Q, Out     cuda.DevicePtr // [B][Tq][Hq][D] fp16
	// Out32, where not 0, also receives Out widened to float32 ([B][Tq][Hq][D]
	// float32, Ops.F16ToF32's bits), written by the merges that write Out:
	// a caller that wants float32 needs no conversion launch after the
	// decode (decode-step.md v39).
	Out32 cuda.DevicePtr
}

// DecodePlan is a compiled, sized decode for one (layout, shape): the
// kernels, the split length and the workspace for the split partials.
type DecodePlan struct {
	layout              DecodeLayout
	shape               DecodeShape
	rmax, rowChunks     int
	splitLen, maxSplits int
	// splitBase, splitCap and splitMax are the shape's SplitLen, SplitCap
	// and SplitMax where SplitCap is set (seqSplitLen), else 0; splitLen is
	// then the split of the plan's longest sequence.
	splitBase, splitCap, splitMax int
	split, combine                cuda.Function
	smem                          int // dynamic shared memory of split (the cp.async or TMA ring)
	threads                       int // threads per CTA of split
	kernel                        DecodeKernel
	partO, partML                 cuda.DevicePtr
	// counters, when not 0, fuses the merge of the splits into the split
	// kernel (v2.5): one zeroed int per (sequence, KV head x row chunk)
	// that tells the last split to finish that it merges (finishSplits in
	// decode.cu); decode_combine does not run. A row chunk of a sequence
	// with one split then writes its output directly (decode_mma.cu v2.15,
	// finishOneSplit: no partial, no count).
	counters cuda.DevicePtr
	dev      *cuda.Device
	qk8      bool // decode_mma.cu's scores on int8 tensor cores (v2.8)
	pv8      bool // decode_mma.cu's P·V on int8 tensor cores (v2.9)
	la       bool // decode_mma.cu's look-ahead refold (v2.24)
	noOut32  bool // DecodeTuning.NoOut32 (Out32)
	// slots is how many split CTAs the planner counts on running at once
	// (its CTAs per SM times decodeRefSMs): a launch of more than that
	// many, or of several sequences, starts after the kernel ahead of it
	// (dependentLaunch).
	slots int
	// tl is the launch timeline (DecodeTuning.Timeline, decode_timeline.go);
	// tl.buf is 0 without it.
	tl launchTimeline
}

// dependentLaunch reports whether a split grid of ctas CTAs for items
// (sequence, KV head x row chunk) pairs goes out as a programmatic
// dependent (where its program is GridDependent): only when it runs in one
// wave for fewer than splitFewItems items (one sequence of a few KV heads).
// Its CTAs then start their block table and first tiles under the kernel
// ahead's tail, 0.06-0.08 ms a step at one sequence; a grid of several
// waves gains nothing there, and its early CTAs hold the SMs that kernel's
// tail needs: int4 55 x 32K +0.25 ms a step, int2 100 x 32K +0.4 (H100,
// bench/results/2026-11-26-s12-final/pdl). One wave of many sequences
// (v2.26's plans) lost too: 32 x 8K int4 10.24-10.57 ms a step early
// against 10.03 not, int2 9.08-9.09 against 8.76; 16 x 32K int4 13.30-13.34
// against 13.04, int2 10.85-10.88 against 10.58 (session 25, call 2: 256
// CTAs on 264 slots, so an SM that the kernel ahead still holds in part
// can push one of them into a second wave). The same bits either way.
func (p *DecodePlan) dependentLaunch(ctas, items int) bool {
	return ctas <= p.slots && items < splitFewItems
}

// QK8 reports whether the plan computes the packed keys' scores on int8
// tensor cores (v2.8: the query in 16-bit fixed point per row, two mmas).
func (p *DecodePlan) QK8() bool { return p.qk8 }

// PV8 reports whether the plan computes the packed values' P·V on int8
// tensor cores (v2.9: the weights p·s in 20-bit fixed point per row and
// tile, three mmas).
func (p *DecodePlan) PV8() bool { return p.pv8 }

// LA reports whether the plan runs decode_mma.cu's look-ahead refold (v2.24).
func (p *DecodePlan) LA() bool { return p.la }

// Kernel returns the kernel the plan runs (DecodeAuto's pick).
func (p *DecodePlan) Kernel() DecodeKernel { return p.kernel }

// Out32 reports whether the plan's launches write DecodeBuffers.Out32 (every
// kernel family's merge can, since decode-step.md v39; DecodeTuning.NoOut32
// says no, so that a caller converts as before). Where it is false, a
// launch leaves Out32 alone, whatever it points at.
func (p *DecodePlan) Out32() bool { return !p.noOut32 }

// SplitLen returns the tokens per split and the number of splits of the
// longest sequence (with DecodeShape.SplitCap: the split of a sequence of
// the plan's MaxL tokens, and the most splits any sequence takes).
func (p *DecodePlan) SplitLen() (tokens, splits int) { return p.splitLen, p.maxSplits }

// SeqSplitLen returns the tokens per split of a sequence of n tokens: the
// plan's split length, or with DecodeShape.SplitCap the sequence's own
// (seqSplitLen).
func (p *DecodePlan) SeqSplitLen(n int) int {
	return seqSplitLen(n, p.splitLen, p.splitBase, p.splitCap, p.splitMax)
}

// seqSplitLen is bitdecode.cuh's seqSplitLen, the split length of a
// sequence of n tokens: splitLen where splitCap is 0; else base·2^k, k the
// smallest with n <= splitCap·base·2^k, but at most most.
func seqSplitLen(n, splitLen, base, splitCap, most int) int {
	if splitCap == 0 {
		return splitLen
	}
	s := base
	for s < most && n > splitCap*s {
		s *= 2
	}
	return s
}

// splitsFor returns the split grid's width for sequences of at most maxL
// tokens: the most splits any of them takes. With per-sequence splits a
// sequence of up to SplitCap·base tokens takes ⌈n/base⌉; a longer one at
// most SplitCap while its split can still double, past SplitCap·SplitMax
// ⌈n/SplitMax⌉, which grows with n.
func (p *DecodePlan) splitsFor(maxL int) int {
	if p.splitCap == 0 {
		return (maxL + p.splitLen - 1) / p.splitLen
	}
	if maxL <= p.splitCap*p.splitBase {
		return (maxL + p.splitBase - 1) / p.splitBase
	}
	return max(p.splitCap, (maxL+p.splitMax-1)/p.splitMax)
}

// decodeRefSMs is the SM count the tensor-core kernels' split planner
// sizes waves for (an H100 SXM). A constant, not read from the device, so
// the split count, and with it the result's bits, depend on the shape only.
const decodeRefSMs = 132

// splitWaves is how many waves of CTAs (at most) the split planner aims
// for when a step has several sequences: shorter CTAs balance the SMs'
// uneven shares of the memory bandwidth, but past about four waves the
// extra partials cost more than they balance (H100 sweeps,
// docs/perf/decode-attention.md v3.1: 16 x 32K int4 with 2 or 3 splits
// runs 1.4-1.7x slower than with 9-13; 32 x 8K with 5 splits 10-14% slower
// than with 3).
const splitWaves = 4

// splitFewItems is the CTA count per split below which a step (one
// sequence of a few KV heads) is planned as a single full wave instead:
// there more splits mean more, smaller partials to merge for no balance.
const splitFewItems = 16

// splitRule is how splitBlocks sizes the splits of a step with
// splitFewItems or more CTAs per split.
type splitRule int

const (
	// splitWavesDown aims for splitWaves waves, the split count rounded
	// down (decode_mma.cu; the planes kernel's steps of few items).
	splitWavesDown splitRule = iota
	// splitWavesUp rounds it up (decode_wgmma.cu's low-bit formats: the
	// fp16 128 x 8K step took 1481 us with one split and 1399 us with two,
	// where decode_mma.cu's int2 took 379 and 395).
	splitWavesUp
	// splitOneWave takes, where the items fit in one wave, the most splits
	// that still do, and splitWavesUp's count where they do not
	// (decode_wgmma.cu with 16-bit keys and values: a byte-bound kernel
	// whose CTAs each stream a long run through the TMA ring, so a wave's
	// idle tail costs more than the balance of more, shorter CTAs gains.
	// v16 on the H100, fp16: 15 x 32K 664.8 us with 3 splits, one wave,
	// against 674.3 with splitWaves' 14 and 716.1 with 4, 1.2 waves;
	// 16 x 32K 700.1 against 714.0; 15 x 8K 176.8 against 181.9;
	// docs/perf/decode-step.md v16; bench/results/2026-11-25-h100-split-v16).
	splitOneWave
	// splitWavesFill starts from splitWavesDown's count and takes more
	// splits where that fills the last wave better by more than the extra
	// CTAs cost (fillWaves; decode_mma.cu, session 20: at 55 x 32K the
	// waves-down count, 2, leaves 88 CTAs of 16K tokens alone in a fourth
	// wave; 3 splits fill five whole waves).
	splitWavesFill
)

// sizeMMA checks shape s against layout l and sizes the splits of the
// tensor-core kernels (decode_mma.cu and decode_wgmma.cu), ctasPerSM of
// whose CTAs run at once on an SM. Splits cover whole blocks of at least
// t.MinSplitTokens tokens (default minSplit, the kernel's, to amortize each
// CTA's setup); their count is splitBlocks' by rule, or v2's rule for
// t.TargetCTAs.
func sizeMMA(dev *cuda.Device, l DecodeLayout, s DecodeShape, ctasPerSM int, rule splitRule, minSplit int, t DecodeTuning) (*DecodePlan, error) {
	if s.B < 1 || s.Hkv < 1 || s.Hq%s.Hkv != 0 || s.Tq < 1 || s.MaxL < s.Tq || s.MaxBlocks < s.MaxL/l.Nr || s.Window < 0 {
		return nil, fmt.Errorf("kernels: decode: bad shape %+v", s)
	}
	if l.Nr%16 != 0 {
		return nil, fmt.Errorf("kernels: decode: block of %d tokens is not a multiple of 16", l.Nr)
	}
	p := &DecodePlan{layout: l, shape: s, dev: dev, rmax: mmaRows, threads: decodeThreads, kernel: DecodeMMA}
	rows := s.Hq / s.Hkv * s.Tq
	p.rowChunks = (rows + mmaRows - 1) / mmaRows
	items := s.B * s.Hkv * p.rowChunks
	maxBlocks := (s.MaxL + l.Nr - 1) / l.Nr
	if t.MinSplitTokens != 0 {
		minSplit = t.MinSplitTokens
	}
	minBlocks := (minSplit + l.Nr - 1) / l.Nr
	if target := t.TargetCTAs; target > 0 { // v2's rule, a fixed CTA target
		splits := min(max(1, (target+items-1)/items), maxBlocks, max(1, maxBlocks/minBlocks), decodeMaxSplits)
		p.splitLen = (maxBlocks + splits - 1) / splits * l.Nr
	}
	if p.splitLen == 0 {
		shortest := splitRunShortest(t.SplitRun)
		bps := splitBlocksRun(items, maxBlocks, minBlocks, ctasPerSM*decodeRefSMs, rule, shortest)
		if rule == splitWavesFill && items >= splitFewItems {
			bps = fillWaves(items, maxBlocks, minBlocks, ctasPerSM*decodeRefSMs, bps, l.Nr, mmaCTACostTokens(l))
		}
		p.splitLen = bps * l.Nr
	}
	if err := p.fixSplit(s); err != nil {
		return nil, err
	}
	p.maxSplits = p.splitsFor(s.MaxL)
	p.slots = ctasPerSM * decodeRefSMs
	return p, nil
}

// splitRunShortest reports whether sizeMMA cuts a one-wave plan of few
// items into the shortest longest runs (splitBlocksRun's shortest) under
// mode m: by default (SplitRunAuto) every such plan of both tensor-core
// kernels, never slower on the H100 than the largest runs. Session 26
// (v2.27): int4 1 x 128K, 32 splits of 32 blocks in place of 31 of 33 and
// one of 1, 60.8 -> 59.5 us. Session 27 (docs/perf/decode-attention.md,
// bench/results/2026-11-26-plans-20): int4 1 x 1K 7 + 1 blocks -> 4 + 4,
// 14.9-15.0 -> 11.7-11.8 us; int4 1 x 2K 5, 5, 5, 1 -> 4 x 4, 13.6-13.9 ->
// 12.0-12.1; int2 1 x 1K 3 + 1 -> 2 + 2 (of 256 tokens), 13.6-13.8 ->
// 11.1-11.2; decode_wgmma's fp16 1 x 128K 33 blocks -> 32, 183.9-184.6 ->
// 183.3-184.0; int4 KT and int8 at 1 x 128K 0.1-0.4 us faster than with
// the largest runs (byte-bound rows: the shorter critical CTA barely shows).
func splitRunShortest(m SplitRunMode) bool { return m != SplitRunLargest }

// splitBlocks returns the blocks per split for items CTAs per split of a
// sequence of maxBlocks blocks, at least minBlocks per split (unless the
// sequence is shorter), on slots concurrent CTAs: with splitFewItems or
// more items, the split count of rule; with fewer items, the split count
// that puts the most CTAs in one wave.
func splitBlocks(items, maxBlocks, minBlocks, slots int, rule splitRule) int {
	return splitBlocksRun(items, maxBlocks, minBlocks, slots, rule, false)
}

// splitBlocksRun is splitBlocks; with shortest (sizeMMA's plans,
// splitRunShortest), the few-items rule takes, of the block counts that
// give the most CTAs, the fewest, where splitBlocks takes the most (the
// planes kernel's plans, whose splits planes.cu cuts by cost anyway:
// planesSplitLen).
func splitBlocksRun(items, maxBlocks, minBlocks, slots int, rule splitRule, shortest bool) int {
	most := min(decodeMaxSplits, max(1, maxBlocks/max(1, minBlocks)))
	if items >= splitFewItems {
		var splits int
		switch {
		case rule == splitOneWave && items <= slots:
			splits = slots / items
		case rule == splitWavesDown || rule == splitWavesFill:
			splits = splitWaves * slots / items
		default:
			splits = (splitWaves*slots + items - 1) / items
		}
		splits = min(most, max(1, splits))
		return (maxBlocks + splits - 1) / splits
	}
	// Session 26 (shortest): of the block counts that give the most CTAs,
	// the fewest: the longest split is the launch's critical path, and the
	// largest count left the last split short. At 1 x 128K with blocks of
	// 128 tokens, 33 blocks made 31 splits of 66 tiles and one of 2, so a
	// CTA's warps ran 17, 17, 17 and 15 tiles (the H100 timeline: the last
	// warp of a CTA done 5 us before the others); 32 blocks make 32 equal
	// splits of 16 tiles a warp, the same 256 CTAs.
	bestBps, bestCTAs := maxBlocks, items
	for bps := maxBlocks; bps >= 1; bps-- {
		splits := (maxBlocks + bps - 1) / bps
		if splits > most || items*splits > slots {
			break
		}
		if items*splits > bestCTAs || shortest && items*splits == bestCTAs {
			bestBps, bestCTAs = bps, items*splits
		}
	}
	return bestBps
}

// fillMaxWaves bounds the waves fillWaves considers: past it the CTAs'
// starts and partials cost more than any last wave's idle slots (H100,
// session 20: int4 55 x 32K with 8 splits, 13 waves, 683 us against 667
// at 3 splits, 5 waves).
const fillMaxWaves = 16

// mmaCTACostTokens is what one more wave of decode_mma.cu CTAs costs in
// tokens of one CTA's stream (its start, the first tiles' DRAM trip, its
// partial and the merge's share, not all hidden by the SM's other CTA),
// fitted on the H100 (docs/perf/decode-attention.md, session 20): int4 KC
// ~3 us a wave of starts (128 x 8K with 2 -> 3 splits, 55 x 32K with 3 -> 6)
// at ~84 tokens a us, 256; a 2-bit half, whose CTA costs about twice that
// (int2 128 x 8K 2 -> 3 splits: +5.8 us a wave), 512.
func mmaCTACostTokens(l DecodeLayout) int {
	if l.KBits == 2 || l.VBits == 2 {
		return 512
	}
	return 256
}

// fillWaves returns the blocks per split, bps0 (splitWavesDown's) or another
// count, that minimize a model of the step's time beyond its bytes for
// items CTAs a split of a maxBlocks-block sequence on slots concurrent
// CTAs. Every CTA of such a step streams the same run, so its waves stay
// whole but for the SMs' spread (session 20's timeline: 264 CTAs running
// for 8 tenths of the span, then 163 and 80 at 55 x 32K), and a last wave
// a fraction f full leaves slots idle for about (1-f)^2 / 2 of a CTA's run
// (fitted: 33% full cost ~0.22 of a run, 3% ~0.47), while each wave of
// CTAs costs ctaCost tokens. A plan of less than one wave, w of the slots,
// leaves 1-w of them idle for the whole run. The count stays at most
// fillMaxWaves waves, the fused merge's decodeFuseMaxSplits and the
// minimum split's. Fewer splits than bps0's are taken only as one wave of
// at least oneWaveMinFill of the slots whose CTAs run at most
// oneWaveMaxRun tokens (session 25, v2.26: at 32 x 8K, 8 x 32K and 16 x
// 32K, one wave of 256 CTAs against bps0's four, int2 1.13-1.27x, int4
// 1.03-1.12x, k4v2 1.07-1.16x on the H100; v3.1's finding that one wave
// lost 1.4-1.7x to four was the kernel before v2.7's pipeline, whose CTAs
// did not reach the read ceiling at two an SM). Two or three waves of
// fewer splits were slower than one (target:512 in the same call), and
// longer runs in one wave leave a longer spread of the SMs' uneven
// bandwidth unbalanced (session 19: the loop's max 11-17% over its median
// at one sequence), which the model does not count: not taken.
func fillWaves(items, maxBlocks, minBlocks, slots, bps0, nr, ctaCost int) int {
	most := min(decodeMaxSplits, max(1, maxBlocks/max(1, minBlocks)))
	cost := func(bps int) float64 {
		splits := (maxBlocks + bps - 1) / bps
		w := float64(items*splits) / float64(slots)
		idle := 0.0
		if w < 1 {
			idle = (1 - w) * float64(bps*nr)
		} else if f := w - math.Floor(w); f > 0 {
			idle = (1 - f) * (1 - f) / 2 * float64(bps*nr)
		}
		return idle + w*float64(ctaCost)
	}
	best, bestCost := bps0, cost(bps0)
	s0 := (maxBlocks + bps0 - 1) / bps0
	prev := s0
	for want := prev + 1; want <= min(most, decodeFuseMaxSplits) && items*want <= fillMaxWaves*slots; want++ {
		bps := (maxBlocks + want - 1) / want // the shortest longest run of want splits
		splits := (maxBlocks + bps - 1) / bps
		if splits == prev {
			continue
		}
		prev = splits
		if c := cost(bps); c < bestCost {
			best, bestCost = bps, c
		}
	}
	// v2.26: fewer splits, where they fill one wave with short enough runs.
	prev = s0
	for want := min(s0-1, slots/items); want >= 1; want-- {
		bps := (maxBlocks + want - 1) / want
		splits := (maxBlocks + bps - 1) / bps
		if splits >= prev {
			continue
		}
		prev = splits
		if float64(items*splits) < oneWaveMinFill*float64(slots) || bps*nr > oneWaveMaxRun {
			break // fewer splits only fill less and run longer
		}
		if c := cost(bps); c < bestCost {
			best, bestCost = bps, c
		}
	}
	return best
}

// oneWaveMaxRun is the longest run, in tokens, of a CTA of a one-wave plan
// that fillWaves takes in place of bps0's waves: the longest measured
// (session 25: 16 x 32K at 2 splits of 16K tokens, int4 1.03x, int2 1.13x,
// k4v2 1.07x against 8 splits; 8K-token runs 1.12x, 1.27x, 1.16x), with
// room for a decode run's tokens past a round length (bench model's 32K
// steps plan for 32785 tokens: two splits of 16512 or 16640).
const oneWaveMaxRun = 17 << 10

// oneWaveMinFill is the least fraction of the slots a one-wave plan of
// fillWaves fills: every measured one-wave plan held 256 CTAs on 264
// slots (97%); below about 90% the idle slots cost more than the waves
// saved at 8K-token runs (the model: 1-w of each slot's run).
const oneWaveMinFill = 0.9

// scaleGroups returns the KT key groups and the value groups per token
// (1 where there are no such scales): the KG and VG of decode_mma.cu and
// decode_wgmma.cu.
func scaleGroups(l DecodeLayout) (kg, vg int) {
	kg, vg = 1, 1
	if l.KBits < 16 && !l.KPerChannel {
		kg = l.D / l.GK
	}
	if l.VBits < 16 {
		vg = l.D / l.GV
	}
	return kg, vg
}

// mmaTile returns decode_mma.cu's default fragment groups per tile (MT,
// before the block and key-group caps) and the CTAs per SM its registers
// are capped for (MINB): as many groups as mmaLaneBudget allows, a power of
// two (k4v2's 5 -> 4), registers uncapped. (v2.6 gave int2 half the budget
// and 3 CTAs per SM; with v2.7's in-place pipeline that spills, and the
// full budget at 2 CTAs measured 9% faster at 128 x 8K: H100 sweep,
// docs/perf/decode-attention.md session 7.)
func mmaTile(l DecodeLayout) (mt, minB int) {
	mt = max(1, min(8, mmaLaneBudget/(l.D*(l.KBits+l.VBits)/16)))
	return 1 << (bits.Len(uint(mt)) - 1), 1
}

// qk8Reads reports whether decode_mma.cu's int8 K·q path (v2.8) reads
// layout l: int2 or int4 keys (not bf16), per channel or per token in
// groups of a multiple of 32 channels (one m16n8k32 never straddles two).
func qk8Reads(l DecodeLayout) bool {
	return (l.KBits == 2 || l.KBits == 4) && !l.BF16 && (l.KPerChannel || l.GK%32 == 0)
}

// mmaQK8 is the planner's rule for the int8 K·q path (v2.8): where it reads
// the layout, unless tuning t says otherwise.
func mmaQK8(l DecodeLayout, t MMATuning) bool {
	if !qk8Reads(l) || t.QK8 < 0 {
		return false
	}
	return t.QK8 > 0 || mmaQK8Default
}

// mmaQK8Default is whether the planner runs int2 and int4 keys' scores on
// int8 tensor cores by default. Side by side on the H100 over the 8-row
// grid (docs/perf/decode-attention.md, session 8): k4v2 1.3-2.8% faster,
// int4 KC 0-1.1%, int4 KT 1.4-2.1%, int2 within -0.7..+2.8% (a tie), and
// the error against the float64 reference 2-4x lower for all four.
const mmaQK8Default = true

// pv8Reads reports whether decode_mma.cu's int8 P·V path (v2.9) reads
// layout l with tiles of mt groups: int2 values with one (scale, zero) pair
// per token (not bf16), tiles of an even number of groups (two make one
// m16n8k32), at most 8 (the exact int32 sums' bound).
func pv8Reads(l DecodeLayout, mt int) bool {
	_, vg := scaleGroups(l)
	return l.VBits == 2 && vg == 1 && !l.BF16 && mt%2 == 0 && mt <= 8
}

// mmaPV8 is the planner's rule for the int8 P·V path (v2.9): where it reads
// the layout and tuning t asks for it, or by default where measured faster
// (mmaPV8Default).
func mmaPV8(l DecodeLayout, mt int, t MMATuning) bool {
	if !pv8Reads(l, mt) || t.PV8 < 0 {
		return false
	}
	return t.PV8 > 0 || mmaPV8Default
}

// mmaPV8Default is whether the planner runs int2 values' P·V on int8
// tensor cores by default: no. Side by side on the H100 over the 7-row grid
// (docs/perf/decode-attention.md, session 9) it is 2-8% slower for int2 and
// k4v2 at every row, with the same error; it stays for BITDECODE_DECODE_PV8=1.
const mmaPV8Default = false

// laReads reports whether decode_mma.cu's look-ahead refold (v2.24, the
// kernel's LA) reads layout l with tiles of mt groups and stages cp.async
// stages: int2 keys per channel on the int8 K·q path (qk8), fp16 P·V (not
// pv8), the register pipeline (no ring), D <= 128 (the kernel's widened key
// pairs), and a key group of exactly one tile, so that every tile opens one.
func laReads(l DecodeLayout, mt, stages int, qk8, pv8 bool) bool {
	return l.KBits == 2 && l.KPerChannel && qk8 && !pv8 && stages == 0 && l.D <= 128 && !l.BF16 && l.GK == 16*mt
}

// mmaLA is the planner's rule for the look-ahead refold (v2.24) with
// splits of splitLen tokens: where it reads the layout, on if tuning t says
// so (LA 1); unset (0), by default where a split gives each of the CTA's
// warps at least laMinTiles tiles; LA -1 is off.
func mmaLA(l DecodeLayout, mt, stages int, qk8, pv8 bool, splitLen int, t MMATuning) bool {
	switch {
	case !laReads(l, mt, stages, qk8, pv8) || t.LA < 0:
		return false
	case t.LA > 0:
		return true
	}
	return mmaLADefault && splitLen >= laMinTiles*mmaWarps*16*mt
}

// laMinTiles is the fewest tiles per warp and split for which the planner
// picks the look-ahead by default. It costs a warp a refold that no tile
// uses (after its last tile) and hides none of its first one's: on the H100
// (session 24, call 2) int2 was 0.2-0.3 us slower at 1 x 8K and 1 x 32K (1
// and 2 tiles a warp) and 5-6.5% faster from 32 x 8K and 8 x 32K (4 tiles a
// warp) up, 8-9% at 55 and 100 x 32K and 128 x 8K.
const laMinTiles = 4

// mmaWarps is decode_mma.cu's warps per CTA (kWarps), each with its own run
// of a split's tiles.
const mmaWarps = 4

// mmaLADefault is whether the planner runs the look-ahead refold by default
// (where it reads the layout and the splits are long enough: mmaLA).
const mmaLADefault = true

// mmaConfig is decode_mma.cu's configuration for layout l under tuning t:
// the tile (MT fragment groups of 16 tokens, as many as the lane budget
// allows within a block and, keys per channel, within a key group), the
// cp.async stages, the register cap (MINB) and the CTAs per SM the split
// planner counts.
func mmaConfig(l DecodeLayout, t MMATuning) (mt, stages, minB, ctas int) {
	ctas = mmaCTAsPerSM // ptxas: 217-255 registers for low-bit formats
	if l.KBits == 16 && l.VBits == 16 && l.D <= 128 {
		ctas = 3 // 168 registers
	}
	mt, minB = mmaTile(l)
	if t.MinB != 0 {
		minB = t.MinB
	}
	ctas = max(ctas, minB)
	if t.MT != 0 {
		mt = t.MT
	}
	for mt > 1 && (l.Nr%(16*mt) != 0 || (l.KBits < 16 && l.KPerChannel && l.GK < 16*mt)) {
		mt /= 2
	}
	if l.KBits < 16 || l.VBits < 16 {
		stages = mmaStages
		if t.Stages != 0 {
			stages = t.Stages
		}
		// The ring's depth fits the CTAs per SM the planner counts (and one
		// CTA's opt-in limit), down to 2 stages; then the tile shrinks until
		// one CTA fits (int8 D=256 MT 4 at 2 stages asked for 268 KiB: call 1).
		for stages > 2 && (mmaRingSmem(l, mt, stages) > smemPerCTA-mmaStaticSmem ||
			ctas*(mmaRingSmem(l, mt, stages)+mmaStaticSmem+smemReservedCTA) > smemPerSM) {
			stages--
		}
		for stages > 0 && mt > 1 && mmaRingSmem(l, mt, stages) > smemPerCTA-mmaStaticSmem {
			mt /= 2
		}
	}
	return mt, stages, minB, ctas
}

// mmaProgram returns decode_mma.cu's program for layout l with tiles of mt
// groups, stages cp.async stages and registers capped for minB CTAs per
// SM, and its split and combine kernels' name expressions.
// With la (v2.24's look-ahead refold) the kernel's thirteenth template
// argument is named; without, the expression is the twelve of before.
func mmaProgram(l DecodeLayout, mt, stages, minB int, qk8, pv8, la bool) (prog cuda.Program, splitExpr, combineExpr string) {
	kg, vg := scaleGroups(l)
	splitExpr = fmt.Sprintf("mma::decode_mma<%d, %d, %d, %t, %d, %d, %d, %t, %d, %d, %t, %t>", l.D, l.KBits, l.VBits, l.KPerChannel && l.KBits < 16, kg, vg, mt, l.BF16, stages, minB, qk8, pv8)
	if la {
		splitExpr = strings.TrimSuffix(splitExpr, ">") + ", true>"
	}
	combineExpr = fmt.Sprintf("decode_combine<%d, %d>", l.D, mmaRows)
	return program("decode_mma.cu", decodeMMASource, []string{splitExpr, combineExpr}, nil), splitExpr, combineExpr
}

// mmaFixedSplitDefine is the NVRTC option of a decode_mma.cu plan whose
// sequences all split at one length (splitCap 0): the kernel takes its
// split length from its argument, not from the per-sequence rule
// (decode_mma.cu's kSeqSplits, v2.33).
const mmaFixedSplitDefine = "-DBD_SEQ_SPLITS=0"

// mmaSplitOptions adds mmaFixedSplitDefine to decode_mma.cu's program prog
// where the plan's splitCap is 0. The per-sequence rule's split length is a
// register from the sequence's length to the split count after the tile
// loop; with it CUDA 13's ptxas spilled int2's look-ahead kernel 28 / 32
// bytes (session 30, docs/perf/decode-attention.md: int2 100 x 32K 762 us
// against 735 before the rule, 1 x 128K 42.8 against 41.2-41.7). Only the
// batch-invariant mode's plans (per-sequence splits) keep the rule. The
// same values either way, so the same bits (TestGPUDecodeSeqSplits: each
// sequence of a per-sequence plan bitwise the fixed plan of its split).
//
// lean (mmaSeqLean) adds mmaSeqLeanDefine to a per-sequence plan's program.
func mmaSplitOptions(prog *cuda.Program, splitCap int, lean bool) {
	if splitCap == 0 {
		prog.Options = append(prog.Options, mmaFixedSplitDefine)
	} else if lean {
		prog.Options = append(prog.Options, mmaSeqLeanDefine)
	}
}

// mmaSeqLeanDefine is the NVRTC option of v2.34's leaner per-sequence
// kernel (decode_mma.cu's kSeqLean): the packed tiles' mask without the
// split's end, the tile loop in two copies (one without the mask's values
// for a warp whose tiles are all full: every decode step's) and the values
// the code after the loop needs parked in shared memory, not held through
// it. CUDA 13 spills the look-ahead kernel 28 / 32 bytes without it, none
// with it: int2 batch-invariant rows 2-6% faster on the H100 (session 31,
// docs/perf/decode-attention.md). The same values, so the same bits
// (TestGPUDecodeSeqSplits).
const mmaSeqLeanDefine = "-DBD_SEQ_LEAN=1"

// mmaSeqLean is the planner's rule for v2.34's leaner per-sequence kernel
// (mmaSeqLeanDefine) under tuning t, for a plan whose kernel runs the
// look-ahead refold or not (la): on for the look-ahead kernel, whose
// per-sequence build CUDA 13 spilled (28 / 32 bytes, session 30) and which
// the H100 measured faster with it (session 31), unless t says otherwise
// (SeqLean 1: every per-sequence kernel, whose other builds were not timed
// with it; -1: none, the kernel of before).
func mmaSeqLean(la bool, t MMATuning) bool {
	if t.SeqLean != 0 {
		return t.SeqLean > 0
	}
	return la
}

// mmaV211UnpackDefine is the NVRTC option of MMATuning.V211Unpack:
// decode_mma.cu's kScaledV off, v2.11's value unpack.
const mmaV211UnpackDefine = "-DBD_SCALED_V=0"

// sizeMMATile sizes decode_mma.cu's plan for shape s (sizeMMA, then
// oneSMSplits' re-cut) and picks its tile: mmaConfig's, or mmaOneSMTile's
// where the plan runs one CTA an SM with the default tile and no ring.
func sizeMMATile(dev *cuda.Device, l DecodeLayout, s DecodeShape, t DecodeTuning) (p *DecodePlan, mt, stages, minB int, err error) {
	mt, stages, minB, ctas := mmaConfig(l, t.MMA)
	p, err = sizeMMA(dev, l, s, ctas, mmaSplitRule, mmaMinSplitTokens, t)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	if p.oneSMSplits(s, t) && t.MMA.MT == 0 && stages == 0 {
		mt = mmaOneSMTile(mt, p.splitLen)
	}
	return p, mt, stages, minB, nil
}

// planMMA plans decode_mma.cu (sizeMMATile, mmaProgram).
func planMMA(dev *cuda.Device, l DecodeLayout, s DecodeShape, t DecodeTuning) (*DecodePlan, error) {
	p, mt, stages, minB, err := sizeMMATile(dev, l, s, t)
	if err != nil {
		return nil, err
	}
	if stages > 0 {
		p.smem = mmaRingSmem(l, mt, stages)
	}
	p.qk8 = mmaQK8(l, t.MMA)
	p.pv8 = mmaPV8(l, mt, t.MMA)
	p.la = mmaLA(l, mt, stages, p.qk8, p.pv8, p.splitLen, t.MMA)
	prog, splitExpr, combineExpr := mmaProgram(l, mt, stages, minB, p.qk8, p.pv8, p.la)
	mmaSplitOptions(&prog, p.splitCap, mmaSeqLean(p.la, t.MMA))
	if t.MMA.V211Unpack {
		prog.Options = append(prog.Options, mmaV211UnpackDefine)
	}
	if t.Timeline {
		prog.Options = append(prog.Options, timelineDefine)
		prog.Exprs = append(prog.Exprs, timelineStampExpr)
	}
	sessionOptions(&prog, DecodeMMA, t, false)
	return p, p.load(dev, prog, splitExpr, combineExpr, t)
}

// oneSMSplits re-cuts decode_mma.cu plan p (sizeMMA's, for shape s) by
// mmaOneSMBlocks (session 28), unless the shape fixes the split length or
// t asks for a CTA target or a minimum split (BITDECODE_DECODE_MINSPLIT=512
// gives the plans before it back). It reports whether the plan it leaves is
// one of few items at one CTA an SM (mmaOneSMBlocks' kind, re-cut or not),
// whose tile mmaOneSMTile may shorten.
func (p *DecodePlan) oneSMSplits(s DecodeShape, t DecodeTuning) bool {
	if s.SplitLen != 0 || t.TargetCTAs != 0 || t.MinSplitTokens != 0 {
		return false
	}
	nr := p.layout.Nr
	items := s.B * s.Hkv * p.rowChunks
	bps := mmaOneSMBlocks(items, (s.MaxL+nr-1)/nr, p.splitLen/nr, (mmaOneSMMinTokens+nr-1)/nr)
	p.splitLen = bps * nr
	p.maxSplits = (s.MaxL + p.splitLen - 1) / p.splitLen
	return items < splitFewItems && items*p.maxSplits <= decodeRefSMs
}

// mmaOneSMTile returns the fragment groups per tile of a decode_mma.cu plan
// of one CTA an SM (oneSMSplits) whose layout's tile is mt groups and whose
// splits are splitLen tokens: mmaOneSMShortTile where mt is
// mmaOneSMLongTile and a split has fewer such tiles than the CTA has warps
// (some warp idle), else mt. That is int2 (and any layout of 128-token
// tiles) at one sequence of up to 4K tokens, whose re-cut splits are one
// 256-token block: two tiles of 128 for two warps, where four tiles of 64
// give every warp one, a shorter chain (the H100 timeline, session 28: a
// 128-token int2 tile 2.4 us, a 64-token one 1.6). H100, session 29
// (docs/perf/decode-attention.md): int2 1 x 1K 11.1-11.3 -> 10.6-10.8 us,
// 2K 11.5 -> 10.9-11.0, 3K 11.6 -> 10.9-11.0, 4K 11.9-12.0 -> 11.1; with
// BITDECODE_DECODE_MT=4 everywhere, 1 x 8K (four tiles of 128 a split: one
// a warp) 12.7-13.0 with either tile and 1 x 128K 41.5 -> 44.5, so the
// longer tile stays where every warp has one.
func mmaOneSMTile(mt, splitLen int) int {
	if mt == mmaOneSMLongTile && splitLen < mmaWarps*16*mt {
		return mmaOneSMShortTile
	}
	return mt
}

// mmaOneSMLongTile and mmaOneSMShortTile are the tiles mmaOneSMTile trades,
// in fragment groups of 16 tokens: 128 tokens (int2's, by mmaLaneBudget)
// for 64 (int4's and k4v2's), the only pair measured.
const (
	mmaOneSMLongTile  = 8
	mmaOneSMShortTile = 4
)

// mmaOneSMBlocks returns the blocks per split of a decode_mma.cu plan of
// few items (fewer than splitFewItems CTAs a split: one sequence) whose
// sizeMMA plan of bps blocks a split runs at most one CTA an SM: the fewest
// blocks, at least minBlocks, whose splits still run one CTA an SM
// (decodeRefSMs) and number at most mmaOneSMMaxSplits; else bps. There a
// warp's tiles run one after the other, ~1.6 us each at int4 (the H100
// timeline, session 28: the tile's compute is a latency chain at one warp a
// scheduler), while more splits cost the merge only a few more partials:
// session 28's call 1 measured int4 KC 1 x 1K 11.8 us at 2 splits (4 tiles
// a CTA), 10.6 at 4, 10.2-10.3 at 8; 1 x 2K 12.2 at 4, 10.9 at 8, 10.4-10.6
// at 16; 1 x 4K 12.5 at 8, 11.4-11.5 at 16; k4v2 1 x 1K-4K -0.85 to -1.2
// us; int2 1 x 1K-4K 0 to -0.3 (one 128-token tile a warp already). 1 x 8K
// (16 splits of 4 blocks: one CTA an SM) keeps its plan: 32 splits, two
// CTAs an SM, measured 0.3-0.6 us slower (decode-attention.md session 28).
func mmaOneSMBlocks(items, maxBlocks, bps, minBlocks int) int {
	if items >= splitFewItems || bps <= 1 || items*((maxBlocks+bps-1)/bps) > decodeRefSMs {
		return bps
	}
	for b := max(1, minBlocks); b < bps; b++ {
		splits := (maxBlocks + b - 1) / b
		if splits <= mmaOneSMMaxSplits && items*splits <= decodeRefSMs {
			return b
		}
	}
	return bps
}

// mmaOneSMMinTokens is the fewest tokens a split of mmaOneSMBlocks' plans
// gets: one 128-token block (int4 KC: two tiles of 64, for two of the CTA's
// four warps), measured faster than 256 at 1 x 1K and 1 x 2K (session 28).
const mmaOneSMMinTokens = 128

// mmaOneSMMaxSplits bounds mmaOneSMBlocks' split count: the most splits it
// was measured with (1 x 2K of 128-token blocks, 1 x 4K of 256; session
// 28), so the fused merge takes no more partials than the default plan of
// 1 x 8K does.
const mmaOneSMMaxSplits = 16

// fixSplit applies a fixed split length from the shape, if it asks for one,
// or its per-sequence split rule (DecodeShape.SplitCap).
func (p *DecodePlan) fixSplit(s DecodeShape) error {
	if s.SplitLen == 0 {
		if s.SplitCap != 0 || s.SplitMax != 0 {
			return fmt.Errorf("kernels: decode: SplitCap %d and SplitMax %d need a SplitLen", s.SplitCap, s.SplitMax)
		}
		return nil
	}
	if s.SplitLen < 0 || s.SplitLen%p.layout.Nr != 0 || s.SplitLen%decodeTile != 0 {
		return fmt.Errorf("kernels: decode: split of %d tokens is not a multiple of the block (%d) and tile (%d)", s.SplitLen, p.layout.Nr, decodeTile)
	}
	p.splitLen = s.SplitLen
	if s.SplitCap != 0 || s.SplitMax != 0 {
		r := s.SplitMax / s.SplitLen
		if s.SplitCap < 1 || s.SplitCap > decodeFuseMaxSplits || s.SplitMax < s.SplitLen || s.SplitMax%s.SplitLen != 0 || r&(r-1) != 0 {
			return fmt.Errorf("kernels: decode: per-sequence splits of %d tokens doubling up to %d, at most %d a sequence: want a cap of 1-%d and the longest split the shortest times a power of two",
				s.SplitLen, s.SplitMax, s.SplitCap, decodeFuseMaxSplits)
		}
		p.splitBase, p.splitCap, p.splitMax = s.SplitLen, s.SplitCap, s.SplitMax
		p.splitLen = p.SeqSplitLen(s.MaxL)
	}
	if n := p.splitsFor(s.MaxL); n > decodeMaxSplits {
		return fmt.Errorf("kernels: decode: %d tokens in splits of %d exceed %d splits", s.MaxL, p.splitLen, decodeMaxSplits)
	}
	return nil
}

// load compiles the plan's kernels (prog, whose name expressions are
// splitExpr and combineExpr) and allocates its workspace.
func (p *DecodePlan) load(dev *cuda.Device, prog cuda.Program, splitExpr, combineExpr string, t DecodeTuning) (err error) {
	p.noOut32 = t.NoOut32
	softcapOptions(&prog, p.shape.Softcap)
	mod, err := compileReporting(dev, prog, t.Ptxas, splitExpr+", "+combineExpr)
	if err != nil {
		return err
	}
	if p.split, err = mod.Function(splitExpr); err != nil {
		return err
	}
	if p.combine, err = mod.Function(combineExpr); err != nil {
		return err
	}
	if p.smem > 0 {
		if err := dev.Do(func(c *cuda.Ctx) error { return c.SetMaxDynamicShared(p.split, p.smem) }); err != nil {
			return err
		}
	}
	s := p.shape
	parts := s.B * s.Hkv * p.rowChunks * p.maxSplits * p.rmax
	defer func() {
		if err != nil {
			p.Close() // what was allocated before the error (Free(0) is a no-op)
		}
	}()
	if p.partO, err = dev.Alloc(parts * p.layout.D * 4); err != nil {
		return err
	}
	if p.partML, err = dev.Alloc(parts * 2 * 4); err != nil {
		return err
	}
	if t.Timeline && p.kernel == DecodeMMA {
		grid := cuda.Dim3{X: p.maxSplits, Y: s.Hkv * p.rowChunks, Z: s.B}
		if err := p.tl.load(dev, mod, grid); err != nil {
			return err
		}
	}
	if p.kernel == DecodeV1 || p.maxSplits > decodeFuseMaxSplits || t.NoFuse {
		return nil // v1, or more splits than finishSplits' shared memory holds
	}
	n := s.B * s.Hkv * p.rowChunks
	if p.counters, err = dev.Alloc(n * 4); err != nil {
		return err
	}
	return dev.Do(func(c *cuda.Ctx) error { return c.Memset32(p.counters, 0, n) })
}

// softcapOptions adds to decode program prog the define of the attention
// soft-cap c where c is not 0 (DecodeShape.Softcap): bitdecode.cuh's
// BD_SOFTCAP, the cap in the kernels' log2 units (softcapDefine). Without
// a cap the program is left as it was.
func softcapOptions(prog *cuda.Program, c float32) {
	if c != 0 {
		prog.Options = append(prog.Options, softcapDefine(c))
	}
}

// softcapDefine is the NVRTC option of soft-cap c: -DBD_SOFTCAP=c' with
// c' = c·log2(e) as the shortest float32 literal that reads back as it
// (the kernels' scores are s·log2(e): their query is scaled by
// scale·log2(e), and c'·tanh(s·log2(e)/c') = c·tanh(s/c)·log2(e)).
func softcapDefine(c float32) string {
	const log2e = 1.4426950408889634
	return "-DBD_SOFTCAP=" + strconv.FormatFloat(float64(float32(float64(c)*log2e)), 'e', -1, 32) + "f"
}

// HeadDims are the head dimensions the GPU attention kernels (decode and
// prefill, pack, append, bit planes) are built for. The CPU caches take
// more (kv.HeadDimOK: Phi-3-mini's 96, Phi-2's 80, ...), which the model
// loader pads to the next of these on the GPU (PadHeadDim,
// model.Config.PadHeads); the kernels' layout does not stretch to them
// without a rewrite: the mma order cuts a
// lane's D/2 codes into 16-byte chunks (int4 at D = 96 holds 24 bytes),
// the append kernels put both halves of a RoPE pair in one lane of a warp
// per head, and the warp Hadamard needs a power of two (docs/gpu.md).
var HeadDims = []int{64, 128, 256}

// HeadDimOK reports whether d is one of HeadDims.
func HeadDimOK(d int) bool { return slices.Contains(HeadDims, d) }

// PadHeadDim returns the smallest of HeadDims that is at least d (d itself
// where HeadDimOK), ok false where d exceeds them all. A model of head dim
// d runs on the GPU padded to it (model.Config.PadHeads; docs/gpu.md).
func PadHeadDim(d int) (dp int, ok bool) {
	for _, h := range HeadDims {
		if h >= d {
			return h, true
		}
	}
	return d, false
}

// headDimError is the refusal of head dim d by what (a kernel or a format).
func headDimError(what string, d int) error {
	return fmt.Errorf("kernels: %s: head dim %d has no GPU kernel (the GPU takes head dims %v, to which a model's heads are padded at load; every KV format runs at head dim %d on the CPU, --device cpu)", what, d, HeadDims, d)
}

func (l DecodeLayout) check() error {
	okBits := func(b int) bool { return b == 16 || b == 8 || b == 4 || b == 2 }
	switch {
	case !HeadDimOK(l.D):
		return headDimError("decode", l.D)
	case !okBits(l.KBits) || !okBits(l.VBits):
		return fmt.Errorf("kernels: decode: K/V widths %d/%d bits have no kernel (want 16, 8, 4 or 2)", l.KBits, l.VBits)
	case l.KBits < 16 && (l.GK < 8 || (!l.KPerChannel && l.D%l.GK != 0) || (l.KPerChannel && l.Nr%l.GK != 0)):
		return fmt.Errorf("kernels: decode: key group %d does not fit D=%d, Nr=%d", l.GK, l.D, l.Nr)
	case l.VBits < 16 && (l.GV < 8 || l.D%l.GV != 0):
		return fmt.Errorf("kernels: decode: value group %d does not fit D=%d", l.GV, l.D)
	case l.Nr <= 0 || l.BlockBytes%16 != 0 || l.KBytes%16 != 0:
		return fmt.Errorf("kernels: decode: block of %d tokens, %d/%d bytes is not 16-byte aligned", l.Nr, l.BlockBytes, l.KBytes)
	}
	return nil
}

// PlanDecode is PlanDecodeWith the default tuning (the zero DecodeTuning).
func PlanDecode(dev *cuda.Device, k DecodeKernel, l DecodeLayout, s DecodeShape) (*DecodePlan, error) {
	return PlanDecodeWith(dev, k, l, s, DecodeTuning{})
}

// PlanDecodeWith compiles (on first use) kernel k for layout l, tuned by t,
// and sizes the split-KV workspace for shape s.
func PlanDecodeWith(dev *cuda.Device, k DecodeKernel, l DecodeLayout, s DecodeShape, t DecodeTuning) (*DecodePlan, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	if c := float64(s.Softcap); !(c >= 0) || math.IsInf(c, 0) {
		return nil, fmt.Errorf("kernels: decode: soft-cap %v: want 0 (none) or a finite cap > 0", s.Softcap)
	}
	if k == DecodeAuto {
		k = PickDecodeKernel(dev, l, s)
	}
	switch k {
	case DecodeMMA:
		return planMMA(dev, l, s, t)
	case DecodeWGMMA:
		return planWGMMA(dev, l, s, t)
	}
	if l.BF16 {
		return nil, fmt.Errorf("kernels: decode v1 reads fp16 blocks only; bf16 K/V need the tensor-core kernel (--kernel mma)")
	}
	if s.B < 1 || s.Hkv < 1 || s.Hq%s.Hkv != 0 || s.Tq < 1 || s.MaxL < s.Tq || s.MaxBlocks < s.MaxL/l.Nr || s.Window < 0 {
		return nil, fmt.Errorf("kernels: decode: bad shape %+v", s)
	}
	p := &DecodePlan{layout: l, shape: s, dev: dev, threads: decodeThreads, kernel: DecodeV1}
	rows := s.Hq / s.Hkv * s.Tq
	p.rmax = decodeRowChunks[len(decodeRowChunks)-1]
	for _, r := range decodeRowChunks {
		if r >= rows {
			p.rmax = r
			break
		}
	}
	p.rowChunks = (rows + p.rmax - 1) / p.rmax
	items := s.B * s.Hkv * p.rowChunks
	maxTiles := (s.MaxL + decodeTile - 1) / decodeTile
	splits := min(max(1, (decodeTargetCTAs+items-1)/items), maxTiles)
	p.splitLen = (maxTiles + splits - 1) / splits * decodeTile
	if err := p.fixSplit(s); err != nil {
		return nil, err
	}
	p.maxSplits = p.splitsFor(s.MaxL)

	prog, splitExpr, combineExpr := v1Program(l, p.rmax)
	return p, p.load(dev, prog, splitExpr, combineExpr, t)
}

// v1Program returns decode.cu's program for layout l with rmax query rows
// per CTA, and its split and combine kernels' name expressions.
func v1Program(l DecodeLayout, rmax int) (prog cuda.Program, splitExpr, combineExpr string) {
	splitExpr = fmt.Sprintf("decode_split<%d, %d, %d, %t, %d>", l.D, l.KBits, l.VBits, l.KPerChannel, rmax)
	combineExpr = fmt.Sprintf("decode_combine<%d, %d>", l.D, rmax)
	return program("decode.cu", decodeSource, []string{splitExpr, combineExpr}, nil), splitExpr, combineExpr
}

// Close frees the plan's workspace.
func (p *DecodePlan) Close() error {
	e1 := p.dev.Free(p.partO)
	e2 := p.dev.Free(p.partML)
	if p.counters != 0 {
		if e3 := p.dev.Free(p.counters); e1 == nil {
			e1 = e3
		}
	}
	if p.tl.buf != 0 {
		if e3 := p.dev.Free(p.tl.buf); e1 == nil {
			e1 = e3
		}
	}
	if e1 != nil {
		return e1
	}
	return e2
}

// Launch queues the decode (split kernel, then combine) on stream st for
// the plan's shape. scale is the softmax scale; 0 means 1/sqrt(D).
func (p *DecodePlan) Launch(c *cuda.Ctx, st cuda.Stream, b DecodeBuffers, scale float32) error {
	return p.launch(c, st, b, p.shape, p.rowChunks, p.maxSplits, scale)
}

// LaunchShape queues a decode of shape s, which must fit the plan: the same
// heads, block-table width and soft-cap, at most the plan's sequences,
// query rows and length. The split length stays the plan's (with DecodeShape.SplitCap,
// each sequence's own), so with a DecodeShape.SplitLen a sequence's result
// does not depend on s.
func (p *DecodePlan) LaunchShape(c *cuda.Ctx, st cuda.Stream, b DecodeBuffers, s DecodeShape, scale float32) error {
	ps := p.shape
	if s.Hq != ps.Hq || s.Hkv != ps.Hkv || s.MaxBlocks != ps.MaxBlocks || s.B < 1 || s.B > ps.B ||
		s.Tq < 1 || s.Tq > ps.Tq || s.MaxL < s.Tq || s.MaxL > ps.MaxL || s.Window < 0 || s.Softcap != ps.Softcap {
		return fmt.Errorf("kernels: decode: shape %+v does not fit the plan's %+v", s, ps)
	}
	rows := s.Hq / s.Hkv * s.Tq
	return p.launch(c, st, b, s, (rows+p.rmax-1)/p.rmax, p.splitsFor(s.MaxL), scale)
}

func (p *DecodePlan) launch(c *cuda.Ctx, st cuda.Stream, b DecodeBuffers, s DecodeShape, rowChunks, maxSplits int, scale float32) error {
	l := p.layout
	const log2e = 1.4426950408889634
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(l.D)))
	}
	// The split of the launch's longest sequence: the kernels' guess of a
	// CTA's first block before its length is read (per-sequence splits).
	sl := int32(p.SeqSplitLen(s.MaxL))
	sb, sc, sm := int32(p.splitBase), int32(p.splitCap), int32(p.splitMax)
	out32 := b.Out32
	if p.noOut32 {
		out32 = 0
	}
	args := []any{b.Pool, b.BlockTable, int32(s.MaxBlocks), b.ResK, b.ResV, b.ResSlots, b.Lens, b.Q, p.partO, p.partML,
		int32(s.Hq), int32(s.Hkv), int32(s.Tq), int32(l.Nr), sl, sb, sc, sm, int32(maxSplits), int32(rowChunks),
		int32(l.BlockBytes), int32(l.KBytes), int32(l.KParamsOff), int32(l.VParamsOff), int32(max(l.GK, 1)), int32(max(l.GV, 1)),
		float32(float64(scale) * log2e), int32(s.Window)}
	if p.kernel != DecodeV1 {
		args = append(args, p.counters, b.Out, out32) // counters 0: decode_combine merges
	}
	if !p.dependentLaunch(maxSplits*s.Hkv*rowChunks*s.B, s.Hkv*rowChunks*s.B) && c.GridDependentLaunch() {
		// Off for this launch, the Ctx's setting (true) restored after it.
		defer c.SetGridDependentLaunch(c.SetGridDependentLaunch(false))
	}
	if p.tl.buf != 0 {
		region, err := p.tl.region(c, st)
		if err != nil {
			return err
		}
		args = append(args, region)
	}
	err := c.Launch(p.split, cuda.Dim3{X: maxSplits, Y: s.Hkv * rowChunks, Z: s.B}, cuda.Dim3{X: p.threads}, p.smem, st, args...)
	if err != nil || p.counters != 0 {
		return err
	}
	return c.Launch(p.combine, cuda.Dim3{X: s.Hkv * rowChunks, Y: s.B, Z: p.rmax}, cuda.Dim3{X: decodeThreads}, 0, st,
		p.partO, p.partML, b.Lens, b.Out, out32, int32(s.Hq), int32(s.Hkv), int32(s.Tq), sl, sb, sc, sm, int32(maxSplits), int32(rowChunks))
}

// LayoutFor returns the decode kernel's view of KV format f, or an error
// naming the format when no kernel reads it yet.
func LayoutFor(f kv.Format) (DecodeLayout, error) {
	if !HeadDimOK(f.D) {
		return DecodeLayout{}, headDimError("format "+f.Spec.String(), f.D)
	}
	if f.Planes.On {
		return DecodeLayout{}, fmt.Errorf("kernels: format %s is bit planes: the decode kernel reads packed blocks; use PlanPlanes (planes.go)", f.Spec.String())
	}
	bits := func(e kv.Elem) (int, error) {
		switch e {
		case kv.FP16, kv.BF16:
			return 16, nil
		case kv.Int8, kv.Int4, kv.Int2:
			return e.Bits(), nil
		}
		return 0, fmt.Errorf("kernels: no GPU decode kernel reads %v K/V yet (format %s); use fp16, int8, int4 or int2, or --device cpu", e, f.Spec.String())
	}
	kb, err := bits(f.K.Elem)
	if err != nil {
		return DecodeLayout{}, err
	}
	vb, err := bits(f.V.Elem)
	if err != nil {
		return DecodeLayout{}, err
	}
	if f.Rotate {
		// The kernels never rotate: a rotated format's cache rotates q, k and
		// v in the append before them (KVWriter.AppendRot) and the output in
		// its conversion after (Ops.F16ToF32Hadamard; kvcache/gpukv).
		return DecodeLayout{}, fmt.Errorf("kernels: format %s: plan the decode and pack kernels of the format without :rot (the rotation is the cache's, outside the kernels; the kernel of %s times the same)", f.Spec.String(), strings.TrimSuffix(f.Spec.String(), ":rot"))
	}
	if (f.K.Elem == kv.BF16) != (f.V.Elem == kv.BF16) {
		return DecodeLayout{}, fmt.Errorf("kernels: no GPU decode kernel mixes bf16 with other K/V types (format %s)", f.Spec.String())
	}
	return DecodeLayout{D: f.D, KBits: kb, VBits: vb, BF16: f.K.Elem == kv.BF16, KPerChannel: f.K.Scaling == kv.PerChannel,
		GK: f.K.Group, GV: f.V.Group, Nr: f.Residual, BlockBytes: f.BlockBytes(), KBytes: f.K.Bytes,
		KParamsOff: f.K.ParamsOffset, VParamsOff: f.V.ParamsOffset}, nil
}

// ResidualOrder returns an fp16 residual buffer ([Hkv][Nr][D], token-major as
// package attn keeps it) in the order kernel k reads: unchanged for v1, the
// keys' (values=false) or values' kv.MMA order for v2.
func ResidualOrder(k DecodeKernel, f kv.Format, res []uint16, values bool) []uint16 {
	if k.Order() == kv.Linear {
		return res
	}
	fp := kv.MustResolve(fmt.Sprintf("fp16:res%d", f.Residual), f.D).WithOrder(kv.MMA)
	lay := fp.K
	if values {
		lay = fp.V
	}
	n := f.Residual * f.D
	out := make([]uint16, len(res))
	buf := make([]byte, lay.Bytes)
	for h := 0; h < len(res)/n; h++ {
		lay.Pack(buf, res[h*n:(h+1)*n])
		for i := range n {
			out[h*n+i] = binary.LittleEndian.Uint16(buf[2*i:])
		}
	}
	return out
}

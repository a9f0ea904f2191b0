package kernels

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed prefill.cu
var prefillSource string

// Tile constants of prefill.cu (kept equal to its constexprs).
const (
	// prefillWarps is pf::kWarps: the warps of a CTA.
	prefillWarps   = 4
	prefillThreads = 32 * prefillWarps
)

// prefillRowsOf is pf::rowsOf<MT>: the query rows of a CTA whose warps own
// mt m16 tiles each (64 at mt = 1, 128 at mt = 2).
func prefillRowsOf(mt int) int { return 16 * mt * prefillWarps }

// prefillMinRows is the fewest query rows of a launch (Tq times Hq: every
// query head's rows) that PrefillRoute sends to prefill.cu, and
// prefillMinRowsNarrow the same for layouts whose K and V are both at most 4
// bits, whose decode-plan tiles are cheaper. The two kernels scale apart:
// decode_mma.cu's plan takes 8 query rows a CTA and re-reads the visible K/V
// for each, so its time follows the launch's rows (~0.12 us a row at 32K
// keys, ~0.018 at 4K, for int4 at D 128 on the H100, whatever the group),
// while prefill.cu reads the K/V once a 64-128-row tile and, below a wave of
// CTAs, takes about one CTA's pass over the keys whatever its row count
// (~650-690 us at 32K, ~93 at 4K, by the dequantizing route). So the line is
// drawn in the launch's rows, not a KV head's: session 31's grid of groups 2,
// 3, 4 and 7 (Hq/Hkv 16/8, 24/8, 32/8, 28/4; H100, D 128, one sequence, us at
// 4K / 32K keys, the decode plan against prefill.cu by its copy;
// bench/results/2026-11-27-staging-31, call 7) crosses between 4096 and 6144
// rows for int4, int2 and k4v2 alike: 4096 rows (16/8 Tq 256, 32/8 Tq 128)
// int4 73.2 / 495.4 against 93.9 / 681.8 and 72.7 / 494.8 against 94.1 /
// 685.0, 3584 (28/4 Tq 128) 71.9 / 432.2 against 92.1 / 649.4; 6144 (24/8 Tq
// 256) 107.4 / 725.4 against 94.2 / 681.1, 7168 (28/4 Tq 256) 128.4 / 843.1
// against 92.8 / 650.5, 8192 (16/8 Tq 512, 32/8 Tq 256, and MHA's 32/32 Tq
// 256 in session 30) prefill.cu by 1.1-1.5x. fp16 (prefill.cu direct)
// crosses between 2048 and 3584: 2048 rows (16/8 Tq 128) 67.6 / 528.7
// against 86.5 / 614.5, 3072 (24/8 Tq 128) 78.3 / 736.6 against 86.5 /
// 616.6, 3584 (28/4) 143.2 / 884.1 against 86.8 / 618.9; int8's decode plan
// costs what fp16's does (32/8 Tq 128: 136.7 / 1011.3 against 95.6 / 708.2 by
// the copy). Until session 31 the lines were 256 and 1024 rows a KV head,
// which sent 24/8's Tq 256 (768 rows a head) to the slower decode plan and
// 16/8's fp16 Tq 128 (256 rows a head) to the slower prefill.cu. The
// figures are the H100's 132 SMs'; a GPU of fewer SMs fills a wave sooner.
const (
	prefillMinRows       = 3072
	prefillMinRowsNarrow = 5120
)

// prefillMinRowsOf is the fewest query rows of a launch (Tq·Hq) that
// PrefillRoute sends to prefill.cu for layout l: prefillMinRowsNarrow for K
// and V of at most 4 bits, prefillMinRows otherwise.
func prefillMinRowsOf(l DecodeLayout) int {
	if l.KBits <= 4 && l.VBits <= 4 {
		return prefillMinRowsNarrow
	}
	return prefillMinRows
}

// prefillTile returns prefill.cu's key tile TN for head dim d: 64 tokens,
// 32 at D = 256 (its accumulators take twice the registers).
func prefillTile(d int) int {
	if d >= 256 {
		return 32
	}
	return 64
}

// prefillMaxMT returns the most m16 tiles a warp (prefill.cu's template
// MT) of layout l's kernels under tuning t: 2 (v4: each key and value
// fragment read from shared memory feeds two tiles' mmas) up to D = 128,
// whose 128 output accumulators and 64 scores a lane fit its 255
// registers; 1 at D = 256, where two tiles' accumulators alone would be 256
// registers a lane, or where t.PrefillMT (BITDECODE_PREFILL_MT) asks for 1.
func prefillMaxMT(l DecodeLayout, t DecodeTuning) int {
	if l.D >= 256 || t.PrefillMT == 1 {
		return 1
	}
	return 2
}

// prefillLaunchMT returns the MT of a launch whose KV heads hold rows query
// rows each (Tq times the group), hkv KV heads a sequence, on a GPU of sms
// SMs, from a plan whose kernels go up to maxMT (t.PrefillMT = 2 asks for
// maxMT always): 1 where one sequence's CTAs at MT = 1 (ceil(rows/64)·hkv)
// fit one wave, which at MT = 2 would leave half the SMs idle; else maxMT.
// H100, Llama-3.1-8B's heads, fp16 at 32K keys (BenchmarkPrefillAttention,
// bench/results/2026-11-27-prefill-29/call2): Tq 128 and 256 (64 and 128
// CTAs at MT = 1) 616 and 623 us at MT = 1, 1083 and 1127 at MT = 2; Tq 512
// (256 CTAs at MT = 1, two waves) 1205 at MT = 1, 1095 at MT = 2. The
// choice depends on one sequence's shape, not on the launch's B: a row's
// bits depend on its sequence and chunk alone.
func prefillLaunchMT(maxMT, rows, hkv, sms int, t DecodeTuning) int {
	if maxMT == 1 || t.PrefillMT == 2 {
		return maxMT
	}
	if (rows+prefillRowsOf(1)-1)/prefillRowsOf(1)*hkv <= sms {
		return 1
	}
	return maxMT
}

// prefillKS returns prefill.cu's warp groups a CTA (its template KS) under
// tuning t: 2 (v4), two groups of prefillWarps warps that take every
// other key tile of the CTA's rows, each with its own stages, merged at
// the end, so that a launch of as many CTAs as SMs (Llama-3.1-8B's
// 512-token chunk: 16 row tiles of 128 rows times 8 KV heads) still runs
// 8 warps an SM; t.PrefillKS (BITDECODE_PREFILL_KS) can ask for 1.
func prefillKS(t DecodeTuning) int {
	if t.PrefillKS == 1 {
		return 1
	}
	return 2
}

// prefillSmem is prefill.cu's prefillSmem<D, KBITS, VBITS, TN, BF, MT, KS>
// for layout l: each of the ks warp groups' two stages of a tile's K and V
// in fp16 (64 KiB at D = 128) and the raw stage of a tile's low-bit
// halves' code words, then the Q stage of the CTA's rows in fp16 (and
// again in bf16 for bf16 blocks). At D = 128, mt = 2, ks = 2: fp16 160 KiB,
// int8 192 KiB (one CTA an SM: its 256 threads take the registers).
func prefillSmem(l DecodeLayout, mt, ks int) int {
	tn := prefillTile(l.D)
	group := 2 * 2 * tn * l.D * 2
	for _, bits := range []int{l.KBits, l.VBits} {
		if bits < 16 {
			group += tn * l.D * bits / 8
		}
	}
	q := prefillRowsOf(mt) * l.D * 2
	if l.BF16 {
		q *= 2
	}
	return ks*group + q
}

// PrefillReads reports whether prefill.cu reads layout l: every layout the
// tensor-core decode kernels read (fp16, bf16, int8, int4, int2 halves, keys
// per channel or per token, any value group), at head dims 64, 128 and 256,
// whose blocks are whole fragment groups. The rotation (":rot") is the
// cache's, outside the kernels, as for decode.
func PrefillReads(l DecodeLayout) bool {
	return l.check() == nil && l.Nr%16 == 0 && (!l.BF16 || l.KBits == 16 && l.VBits == 16)
}

// PrefillRoute is the routing of a prefill launch of shape s over layout l:
// true sends it to prefill.cu (PrefillPlan), false to decode_mma.cu's plan
// with Tq > 1 (DecodePlan), as before session 28. prefill.cu takes a launch
// of at least prefillMinRowsOf(l) query rows in all (Tq times Hq: a
// 256-token chunk of Llama-3.1-8B is 8192; 3072 rows, 5120 where K and V are
// both at most 4 bits), of a layout it reads (PrefillReads); the decode
// plan takes the rest: decode steps, short chunks and models of few heads
// (whose few row tiles would leave SMs idle without a split of the keys)
// and anything prefill.cu does not read. (v3's prefillFaster also
// kept 8-bit halves at D = 256 on the decode plan, where v3 spilled 1.2 KB
// a thread and ran 0.85-0.91x its speed; v4 spills none there and runs
// 3.4x: bench/results/2026-11-27-prefill-29/call2.) A caller that needs a
// prefill's bits to equal the decode kernel's (none does; the
// batch-invariant cache took the decode plan until session 30) does not
// call it.
func PrefillRoute(l DecodeLayout, s DecodeShape) bool {
	if !PrefillReads(l) || s.Hkv < 1 || s.Hq%s.Hkv != 0 {
		return false
	}
	return s.Hq*s.Tq >= prefillMinRowsOf(l)
}

// PrefillPlan is prefill.cu compiled for one layout and shape: one launch,
// no workspace; its kernels at MT = 1 up to maxMT, each launch taking one
// (prefillLaunchMT).
type PrefillPlan struct {
	layout  DecodeLayout
	shape   DecodeShape
	tuning  DecodeTuning
	maxMT   int
	fn      [2]cuda.Function // by MT - 1
	smem    [2]int           // dynamic shared memory by MT - 1 (prefillSmem)
	threads int              // prefillThreads times the warp groups (prefillKS)
	sms     int              // the device's SMs (prefillLaunchMT)
	noOut32 bool
	// The dequantizing route of a low-bit layout (prefillDequants): dequant
	// (prefill.cu's dequant_blocks) writes the sequence's packed blocks as
	// fp16 blocks, over which via (the plan of prefillF16Twin's layout)
	// runs; nil where the plan has no such route.
	dequant cuda.Function
	via     *PrefillPlan
}

// prefillDequants reports whether PlanPrefill gives layout l the
// dequantizing route under tuning t: both halves low-bit (a 16-bit half
// would be copied as it is), blocks of whole key tiles (dequant_blocks' CTA
// takes one tile of one block), unless t.NoPrefillDequant.
//
// Why (docs/perf/prefill.md v5): prefill.cu dequantizes each K/V tile of
// a low-bit cache into shared memory before its math, once for the CTA's
// 128 rows but again in every CTA of the chunk, its (scale, zero) pairs read
// from L2 on the tile's critical path; a 512-token chunk at 32K keys of
// int4 took 1304 us where fp16 took 1093 (v4). Dequantizing the visible
// blocks once a chunk into fp16 (~34 MiB read and 128 MiB written at 32K
// keys, tens of us) and running the fp16 kernel over them gives the same
// bits (the same storeQuant, the same tile loop) at fp16's speed.
func prefillDequants(l DecodeLayout, t DecodeTuning) bool {
	return l.KBits < 16 && l.VBits < 16 && l.Nr%prefillTile(l.D) == 0 && !t.NoPrefillDequant
}

// prefillF16Twin is the fp16 layout of l's blocks as dequant_blocks writes
// them: the same head dim and block size, K half then V half of Nr·D fp16.
func prefillF16Twin(l DecodeLayout) DecodeLayout {
	half := l.Nr * l.D * 2
	return DecodeLayout{D: l.D, KBits: 16, VBits: 16, Nr: l.Nr, BlockBytes: 2 * half, KBytes: half}
}

// PlanPrefill compiles (on first use) prefill.cu for layout l and shape s
// (B, Hq, Hkv, the most query tokens Tq, MaxBlocks, MaxL and the soft-cap;
// splits are not read), tuned by t (its Ptxas report, NoOut32, PrefillStep,
// PrefillMT and PrefillKS).
func PlanPrefill(dev *cuda.Device, l DecodeLayout, s DecodeShape, t DecodeTuning) (*PrefillPlan, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if !PrefillReads(l) {
		return nil, fmt.Errorf("kernels: prefill: layout %+v has no prefill kernel", l)
	}
	if s.B < 1 || s.Hkv < 1 || s.Hq%s.Hkv != 0 || s.Tq < 1 || s.MaxL < s.Tq || s.MaxBlocks < s.MaxL/l.Nr || s.Window < 0 {
		return nil, fmt.Errorf("kernels: prefill: bad shape %+v", s)
	}
	if c := float64(s.Softcap); !(c >= 0) || math.IsInf(c, 0) {
		return nil, fmt.Errorf("kernels: prefill: soft-cap %v: want 0 (none) or a finite cap > 0", s.Softcap)
	}
	gk, gv := 1, 1 // the groups of the low-bit halves (prefill.cu's GK, GV)
	if l.KBits < 16 {
		gk = l.GK
	}
	if l.VBits < 16 {
		gv = l.GV
	}
	tn := prefillTile(l.D)
	tc := tn // the math's step (DecodeTuning.PrefillStep)
	if t.PrefillStep > 0 && t.PrefillStep < tn {
		tc = t.PrefillStep
	}
	ks := prefillKS(t)
	p := &PrefillPlan{layout: l, shape: s, tuning: t, maxMT: prefillMaxMT(l, t), threads: prefillThreads * ks, sms: dev.SMs(), noOut32: t.NoOut32}
	exprs := make([]string, p.maxMT)
	for i := range exprs {
		exprs[i] = fmt.Sprintf("pf::prefill_fa<%d, %d, %d, %t, %t, %d, %d, %d, %d, %d, %d>", l.D, l.KBits, l.VBits, l.KPerChannel, l.BF16, gk, gv, tn, tc, i+1, ks)
	}
	names, dequant := exprs, ""
	if prefillDequants(l, t) {
		dequant = fmt.Sprintf("pf::dequant_blocks<%d, %d, %d, %t, %d, %d, %d>", l.D, l.KBits, l.VBits, l.KPerChannel, gk, gv, tn)
		names = append(slices.Clone(exprs), dequant)
		var err error
		if p.via, err = PlanPrefill(dev, prefillF16Twin(l), s, t); err != nil {
			return nil, err
		}
	}
	prog := program("prefill.cu", prefillSource, names, nil)
	softcapOptions(&prog, s.Softcap)
	mod, err := compileReporting(dev, prog, t.Ptxas, strings.Join(names, ", "))
	if err != nil {
		return nil, err
	}
	if dequant != "" {
		if p.dequant, err = mod.Function(dequant); err != nil {
			return nil, err
		}
	}
	for i, expr := range exprs {
		p.smem[i] = prefillSmem(l, i+1, ks)
		if p.fn[i], err = mod.Function(expr); err != nil {
			return nil, err
		}
		if err := dev.Do(func(c *cuda.Ctx) error { return c.SetMaxDynamicShared(p.fn[i], p.smem[i]) }); err != nil {
			return nil, fmt.Errorf("kernels: prefill %s: %w", expr, err)
		}
	}
	return p, nil
}

// Out32 reports whether the plan's launches write DecodeBuffers.Out32
// (DecodePlan.Out32's rule: DecodeTuning.NoOut32 says no).
func (p *PrefillPlan) Out32() bool { return !p.noOut32 }

// Dequantizes reports whether the plan has the dequantizing route
// (LaunchDequant): a low-bit layout's launch over an fp16 copy of its
// blocks.
func (p *PrefillPlan) Dequantizes() bool { return p.via != nil }

// DequantPays reports whether a launch of shape s runs faster by the
// dequantizing route than directly (where the plan has it): in a GQA group
// of two or more, or from 1024 query rows a KV head. The copy costs its
// Hkv·L·D fp16 writes and reads once a chunk, where the direct kernel
// dequantizes each tile once per CTA; at one query head a KV head (MHA) a
// chunk of few rows has few CTAs per head and the copy's bytes weigh more.
// H100, Hq = Hkv = 32, D 128, int4, us at 32K keys (direct / via; call 8 of
// bench/results/2026-11-27-prefill-30): Tq 256 888.9 / 872.6 (at 4K 113.4 /
// 122.2), Tq 512 1294.1 / 1361.4, Tq 1024 2542.7 / 2370.2; at Hkv 8 (group
// 4) the route wins from 512 rows (Tq 128 886.8 / 690.5). Either way the same
// bits.
func (p *PrefillPlan) DequantPays(s DecodeShape) bool {
	if p.via == nil || s.Hkv < 1 {
		return false
	}
	g := s.Hq / s.Hkv
	return g >= 2 || g*s.Tq >= dequantMinRows
}

// dequantMinRows is the query rows a KV head from which DequantPays takes
// the dequantizing route at MHA (its measurements above).
const dequantMinRows = 1024

// ScratchBytes returns the bytes of the fp16 copy LaunchDequant writes for
// a sequence of maxBlocks packed blocks (its block table's width) and hkv KV
// heads: 2·Nr·D fp16 a block and head. 0 where the plan does not dequantize.
func (p *PrefillPlan) ScratchBytes(maxBlocks, hkv int) int {
	if p.via == nil {
		return 0
	}
	return maxBlocks * hkv * p.via.layout.BlockBytes
}

// PrefillScratch is LaunchDequant's device memory: Pool of ScratchBytes
// bytes for the fp16 copy and Table, the identity block table over it
// (int32 0, 1, ..., maxBlocks - 1).
type PrefillScratch struct {
	Pool, Table cuda.DevicePtr
}

// LaunchDequant queues a prefill of shape s (one sequence: s.B = 1) by the
// dequantizing route: dequant_blocks writes the sequence's packed blocks
// (b's pool, block table and length) as fp16 blocks into sc.Pool, then the
// fp16 kernel runs over them (sc.Table) with b's residual, query and
// outputs. The output is LaunchShape's bit for bit
// (TestGPUPrefillDequantSameBits).
func (p *PrefillPlan) LaunchDequant(c *cuda.Ctx, st cuda.Stream, b DecodeBuffers, s DecodeShape, scale float32, sc PrefillScratch) error {
	if p.via == nil {
		return fmt.Errorf("kernels: prefill: layout %+v has no dequantizing route", p.layout)
	}
	if s.B != 1 {
		return fmt.Errorf("kernels: prefill: the dequantizing route takes one sequence, not %d", s.B)
	}
	if err := p.fits(s); err != nil {
		return err
	}
	l := p.layout
	tiles := (s.MaxL + prefillTile(l.D) - 1) / prefillTile(l.D)
	err := c.Launch(p.dequant, cuda.Dim3{X: tiles, Y: s.Hkv, Z: 1}, cuda.Dim3{X: prefillThreads}, 0, st,
		b.Pool, b.BlockTable, b.Lens, sc.Pool, int32(s.Hkv), int32(l.Nr), int32(l.BlockBytes), int32(l.KBytes), int32(l.KParamsOff), int32(l.VParamsOff))
	if err != nil {
		return err
	}
	b.Pool, b.BlockTable = sc.Pool, sc.Table
	return p.via.LaunchShape(c, st, b, s, scale)
}

// fits reports whether shape s fits the plan (LaunchShape's rule).
func (p *PrefillPlan) fits(s DecodeShape) error {
	ps := p.shape
	if s.Hq != ps.Hq || s.Hkv != ps.Hkv || s.MaxBlocks != ps.MaxBlocks || s.B < 1 || s.B > ps.B ||
		s.Tq < 1 || s.Tq > ps.Tq || s.MaxL < s.Tq || s.MaxL > ps.MaxL || s.Window < 0 || s.Softcap != ps.Softcap {
		return fmt.Errorf("kernels: prefill: shape %+v does not fit the plan's %+v", s, ps)
	}
	return nil
}

// Close frees nothing (the plan has no workspace); it is there so that a
// PrefillPlan stands where a DecodePlan does.
func (p *PrefillPlan) Close() error { return nil }

// Launch queues the prefill of the plan's shape. scale is the softmax
// scale; 0 means 1/sqrt(D).
func (p *PrefillPlan) Launch(c *cuda.Ctx, st cuda.Stream, b DecodeBuffers, scale float32) error {
	return p.LaunchShape(c, st, b, p.shape, scale)
}

// LaunchShape queues a prefill of shape s, which must fit the plan as
// DecodePlan.LaunchShape's must: the same heads, block-table width and
// soft-cap, at most the plan's sequences, query tokens and length.
func (p *PrefillPlan) LaunchShape(c *cuda.Ctx, st cuda.Stream, b DecodeBuffers, s DecodeShape, scale float32) error {
	l := p.layout
	if err := p.fits(s); err != nil {
		return err
	}
	const log2e = 1.4426950408889634
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(l.D)))
	}
	out32 := b.Out32
	if p.noOut32 {
		out32 = 0
	}
	rows := s.Hq / s.Hkv * s.Tq
	mt := prefillLaunchMT(p.maxMT, rows, s.Hkv, p.sms, p.tuning)
	grid := cuda.Dim3{X: (rows + prefillRowsOf(mt) - 1) / prefillRowsOf(mt), Y: s.Hkv, Z: s.B}
	return c.Launch(p.fn[mt-1], grid, cuda.Dim3{X: p.threads}, p.smem[mt-1], st,
		b.Pool, b.BlockTable, int32(s.MaxBlocks), b.ResK, b.ResV, b.ResSlots, b.Lens, b.Q, b.Out, out32,
		int32(s.Hq), int32(s.Hkv), int32(s.Tq), int32(l.Nr), int32(l.BlockBytes), int32(l.KBytes), int32(l.KParamsOff), int32(l.VParamsOff),
		int32(max(l.GK, 1)), int32(max(l.GV, 1)), float32(float64(scale)*log2e), int32(s.Window))
}

package kernels

import (
	_ "embed"
	"fmt"
	"math"

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

// prefillMinRows is the fewest query rows a KV head (Tq times the GQA
// group) that PrefillRoute sends to prefill.cu: four of v3's 64-row tiles
// (two of v4's 128), 32 of decode_mma.cu's 8-row chunks, each of which
// re-reads the visible K/V. Below it a launch has too few CTAs to fill the
// GPU without splitting the keys, which prefill.cu does not (decode_mma.cu's
// plan splits them).
const prefillMinRows = 256

// prefillTile returns prefill.cu's key tile TN for head dim d: 64 tokens,
// 32 at D = 256 (its accumulators take twice the registers).
func prefillTile(d int) int {
	if d >= 256 {
		return 32
	}
	return 64
}

// prefillMT returns prefill.cu's m16 tiles a warp (its template MT) for
// layout l under tuning t: 2 (v4: each key and value fragment read from
// shared memory feeds two tiles' mmas) up to D = 128, whose 128 output
// accumulators and 64 scores a lane fit its 255 registers; 1 at D = 256,
// where two tiles' accumulators alone would be 256 registers a lane.
// t.PrefillMT (BITDECODE_PREFILL_MT) can ask for 1 anywhere.
func prefillMT(l DecodeLayout, t DecodeTuning) int {
	if l.D >= 256 || t.PrefillMT == 1 {
		return 1
	}
	return 2
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

// prefillFaster reports whether prefill.cu measured faster than (or was not
// measured against) decode_mma.cu's prefill plan for layout l: every layout
// but 8-bit halves at D = 256, whose prefill.cu kernel spills 1.2 KB a thread
// (255 registers) and took 0.85-0.91x decode_mma.cu's speed (H100, one
// 512-token chunk at 4K and 32K tokens; BenchmarkPrefillAttention,
// bench/results/2026-11-27-prefill-28/call4). Every other measured layout
// was 1.05-2.7x faster there (docs/perf/prefill.md); the unmeasured ones
// (bf16, int2 and the mixes at D = 64 and 256, k8v4) take prefill.cu too.
func prefillFaster(l DecodeLayout) bool {
	return !(l.D == 256 && (l.KBits == 8 || l.VBits == 8))
}

// PrefillRoute is the routing of a prefill launch of shape s over layout l:
// true sends it to prefill.cu (PrefillPlan), false to decode_mma.cu's plan
// with Tq > 1 (DecodePlan), as before session 28. prefill.cu takes a launch
// whose KV heads each hold at least prefillMinRows query rows (Tq times the
// group: a 512-token chunk of Llama-3.1-8B is 2048), of a layout it reads
// (PrefillReads); the decode plan takes the rest: decode steps, short
// chunks (whose few row tiles would leave SMs idle without a split of the
// keys), anything prefill.cu does not read, and the layouts where it
// measured slower (prefillFaster). A caller that needs a
// prefill's bits to equal the decode kernel's (none does: the
// batch-invariant cache keeps the decode plan to stay as it was measured)
// does not call it.
func PrefillRoute(l DecodeLayout, s DecodeShape) bool {
	if !PrefillReads(l) || !prefillFaster(l) || s.Hkv < 1 || s.Hq%s.Hkv != 0 {
		return false
	}
	return s.Hq/s.Hkv*s.Tq >= prefillMinRows
}

// PrefillPlan is prefill.cu compiled for one layout and shape: one launch,
// no workspace.
type PrefillPlan struct {
	layout  DecodeLayout
	shape   DecodeShape
	fn      cuda.Function
	rows    int // query rows a CTA (prefillRowsOf)
	threads int // prefillThreads times the warp groups (prefillKS)
	smem    int // dynamic shared memory (prefillSmem)
	noOut32 bool
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
	mt, ks := prefillMT(l, t), prefillKS(t)
	expr := fmt.Sprintf("pf::prefill_fa<%d, %d, %d, %t, %t, %d, %d, %d, %d, %d, %d>", l.D, l.KBits, l.VBits, l.KPerChannel, l.BF16, gk, gv, tn, tc, mt, ks)
	prog := program("prefill.cu", prefillSource, []string{expr}, nil)
	softcapOptions(&prog, s.Softcap)
	mod, err := compileReporting(dev, prog, t.Ptxas, expr)
	if err != nil {
		return nil, err
	}
	p := &PrefillPlan{layout: l, shape: s, rows: prefillRowsOf(mt), threads: prefillThreads * ks, smem: prefillSmem(l, mt, ks), noOut32: t.NoOut32}
	if p.fn, err = mod.Function(expr); err != nil {
		return nil, err
	}
	if err := dev.Do(func(c *cuda.Ctx) error { return c.SetMaxDynamicShared(p.fn, p.smem) }); err != nil {
		return nil, fmt.Errorf("kernels: prefill %s: %w", expr, err)
	}
	return p, nil
}

// Out32 reports whether the plan's launches write DecodeBuffers.Out32
// (DecodePlan.Out32's rule: DecodeTuning.NoOut32 says no).
func (p *PrefillPlan) Out32() bool { return !p.noOut32 }

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
	ps, l := p.shape, p.layout
	if s.Hq != ps.Hq || s.Hkv != ps.Hkv || s.MaxBlocks != ps.MaxBlocks || s.B < 1 || s.B > ps.B ||
		s.Tq < 1 || s.Tq > ps.Tq || s.MaxL < s.Tq || s.MaxL > ps.MaxL || s.Window < 0 || s.Softcap != ps.Softcap {
		return fmt.Errorf("kernels: prefill: shape %+v does not fit the plan's %+v", s, ps)
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
	grid := cuda.Dim3{X: (rows + p.rows - 1) / p.rows, Y: s.Hkv, Z: s.B}
	return c.Launch(p.fn, grid, cuda.Dim3{X: p.threads}, p.smem, st,
		b.Pool, b.BlockTable, int32(s.MaxBlocks), b.ResK, b.ResV, b.ResSlots, b.Lens, b.Q, b.Out, out32,
		int32(s.Hq), int32(s.Hkv), int32(s.Tq), int32(l.Nr), int32(l.BlockBytes), int32(l.KBytes), int32(l.KParamsOff), int32(l.VParamsOff),
		int32(max(l.GK, 1)), int32(max(l.GV, 1)), float32(float64(scale)*log2e), int32(s.Window))
}

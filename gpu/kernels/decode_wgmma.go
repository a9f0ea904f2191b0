package kernels

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
)

//go:embed decode_wgmma.cu
var decodeWGMMASource string

// Tile constants of decode_wgmma.cu (kept equal to its constexprs).
const (
	wgmmaThreads    = 160 // one consumer warpgroup and a producer warp
	wgmmaTileTokens = 64  // tokens per tile: the wgmma M of the scores
	wgmmaSlice      = 64  // channels per output wgmma: value groups must cover whole slices
	wgmmaStepBytes  = 256 // one k16 step of a B operand (two 128-byte core matrices)
	// wgmmaRingBudget is the shared memory the default ring depth may use
	// per CTA, and wgmmaCTASmem what a CTA may use for three to share an
	// SM (228 KiB, 1 KiB of it reserved per CTA).
	wgmmaRingBudget = 56 << 10
	wgmmaCTASmem    = 72 << 10
	wgmmaMaxStages  = 8
)

// wgmmaStage returns the bytes of one ring stage of layout l with tiles
// of mw M-blocks: the tile's K and V codes, then its K and V (scale, zero)
// pairs.
func wgmmaStage(l DecodeLayout, mw int) int {
	tt := mw * wgmmaTileTokens
	n := tt * l.D * (l.KBits + l.VBits) / 8
	if l.KBits < 16 {
		if l.KPerChannel {
			n += l.D * 4
		} else {
			n += tt * (l.D / l.GK) * 4
		}
	}
	if l.VBits < 16 {
		n += tt * (l.D / l.GV) * 4
	}
	return n
}

// wgmmaSmem returns the dynamic shared memory of a CTA with st stages:
// the ring, decode_wgmma.cu's Shared (query and probability operands, the
// warps' reductions; rounded to its 128-byte alignment) and 2·st mbarriers.
func wgmmaSmem(l DecodeLayout, st, mw int) int {
	vgb := 1
	if l.VBits < 16 {
		vgb = l.D / l.GV
	}
	shared := l.D/16*wgmmaStepBytes + vgb*(mw*wgmmaTileTokens/16)*wgmmaStepBytes + 2*4*mmaRows*4 + 4*mmaRows*4 + 4*mmaRows*vgb*4
	shared = (shared + 127) / 128 * 128
	return st*wgmmaStage(l, mw) + shared + 2*st*8
}

// WGMMASupports says why the Hopper kernel cannot read layout l on dev, or
// nil if it can.
func WGMMASupports(dev *cuda.Device, l DecodeLayout) error {
	major, minor := dev.ComputeCapability()
	return wgmmaSupports(major, minor, l)
}

// wgmmaSupports is WGMMASupports for a GPU of compute capability
// major.minor.
func wgmmaSupports(major, minor int, l DecodeLayout) error {
	if major != 9 || minor != 0 {
		return fmt.Errorf("kernels: the wgmma decode kernel needs compute capability 9.0 (Hopper); this GPU is %d.%d (use --kernel mma)", major, minor)
	}
	switch {
	case l.Nr%wgmmaTileTokens != 0:
		return fmt.Errorf("kernels: the wgmma decode kernel needs blocks of a multiple of %d tokens (this format has %d; use --kernel mma)", wgmmaTileTokens, l.Nr)
	case l.KBits < 16 && l.KPerChannel && l.GK%wgmmaTileTokens != 0:
		return fmt.Errorf("kernels: the wgmma decode kernel needs key groups of a multiple of %d tokens (kc%d; use --kernel mma)", wgmmaTileTokens, l.GK)
	case l.VBits < 16 && l.GV%wgmmaSlice != 0:
		return fmt.Errorf("kernels: the wgmma decode kernel needs value groups of a multiple of %d channels (v%d; use --kernel mma)", wgmmaSlice, l.GV)
	case l.KParamsOff%16 != 0 || l.VParamsOff%16 != 0:
		return fmt.Errorf("kernels: the wgmma decode kernel needs 16-byte aligned scale regions (offsets %d, %d)", l.KParamsOff, l.VParamsOff)
	}
	return nil
}

// wgmmaConfig is decode_wgmma.cu's configuration for layout l under
// tuning t on a GPU that gives a CTA maxShared bytes of shared memory: the
// tile (mw M-blocks), the ring stages st, the register cap minB, and the
// CTAs per SM the split planner counts. Defaults (H100 sweeps,
// docs/perf/decode-attention.md v3): low-bit tiles of two M-blocks (128
// tokens) where two stages fit in a third of an SM's shared memory, and
// registers capped for three CTAs per SM at D <= 128.
func wgmmaConfig(l DecodeLayout, t WGMMATuning, maxShared int) (mw, st, minB, ctas int, err error) {
	// The split planner counts three CTAs per SM at D <= 128, as wgmmaMinB
	// caps the registers for, int8 included: its cap of two was measured
	// with these splits.
	ctas = 3
	if l.D > 128 {
		ctas = 1
	}
	mw = 1
	if (l.KBits < 16 || l.VBits < 16) && 2*wgmmaStage(l, 2) <= wgmmaCTASmem {
		mw = 2
	}
	if t.MW != 0 {
		mw = t.MW
	}
	if l.Nr%(mw*wgmmaTileTokens) != 0 || (l.KBits < 16 && l.KPerChannel && l.GK%(mw*wgmmaTileTokens) != 0) ||
		wgmmaSmem(l, 2, mw) > maxShared {
		mw = 1
	}
	minB = wgmmaMinB(l)
	if t.MinB != 0 {
		minB = t.MinB
	}
	st = max(2, min(wgmmaMaxStages, wgmmaRingBudget/wgmmaStage(l, mw)))
	if t.Stages != 0 {
		st = t.Stages
	}
	for st > 2 && wgmmaSmem(l, st, mw) > maxShared {
		st--
	}
	if wgmmaSmem(l, st, mw) > maxShared {
		return 0, 0, 0, 0, fmt.Errorf("kernels: the wgmma decode kernel needs %d bytes of shared memory for this format; the GPU allows %d per CTA (use --kernel mma)", wgmmaSmem(l, st, mw), maxShared)
	}
	return mw, st, minB, ctas, nil
}

// wgmmaProgram returns decode_wgmma.cu's program for layout l with tiles
// of mw M-blocks, st ring stages and registers capped for minB CTAs per SM,
// and its split and combine kernels' name expressions.
func wgmmaProgram(l DecodeLayout, mw, st, minB int) (prog cuda.Program, splitExpr, combineExpr string) {
	kg, vg := scaleGroups(l)
	splitExpr = fmt.Sprintf("wg::decode_wgmma<%d, %d, %d, %t, %d, %d, %t, %d, %d, %d>", l.D, l.KBits, l.VBits, l.KPerChannel && l.KBits < 16, kg, vg, l.BF16, st, mw, minB)
	combineExpr = fmt.Sprintf("decode_combine<%d, %d>", l.D, mmaRows)
	return program("decode_wgmma.cu", decodeWGMMASource, []string{splitExpr, combineExpr}, nil), splitExpr, combineExpr
}

// planWGMMA plans decode_wgmma.cu: decode_mma.cu's splits and partials
// (the same combine kernel), tiles of 64 tokens through a TMA ring
// (wgmmaConfig, wgmmaProgram).
func planWGMMA(dev *cuda.Device, l DecodeLayout, s DecodeShape, t DecodeTuning) (*DecodePlan, error) {
	if err := WGMMASupports(dev, l); err != nil {
		return nil, err
	}
	mw, st, minB, ctas, err := wgmmaConfig(l, t.WGMMA, dev.MaxSharedPerBlock())
	if err != nil {
		return nil, err
	}
	rule := splitWavesUp
	if l.KBits == 16 && l.VBits == 16 {
		rule = splitOneWave
	}
	p, err := sizeMMA(dev, l, s, wgmmaPlanCTAs(l, s, ctas), rule, wgmmaMinSplitTokens, t)
	if err != nil {
		return nil, err
	}
	p.smem = wgmmaSmem(l, st, mw)
	few := false
	if pc := wgmmaPlanCTAs(l, s, ctas); pc < ctas && !t.WGMMA.NoPad {
		// One sequence: the splits count on pc CTAs an SM, which the
		// registers and shared memory would let exceed. Padded, the plan
		// runs as a programmatic dependent under PDLAuto: fp16's B = 1
		// step -0.05 to -0.075 ms on the H100 (decode-step.md v28).
		if pad := wgmmaFewSmem(dev.MaxSharedPerSM(), pc); pad > p.smem && pad <= dev.MaxSharedPerBlock() {
			p.smem, few = pad, true
		}
	}
	p.threads, p.kernel = wgmmaThreads, DecodeWGMMA
	prog, splitExpr, combineExpr := wgmmaProgram(l, mw, st, minB)
	sessionOptions(&prog, DecodeWGMMA, t, few)
	return p, p.load(dev, prog, splitExpr, combineExpr, t)
}

// wgmmaFewCTAsPerSM is the CTAs per SM the split planner fills for a step
// of one sequence (fewer than splitFewItems CTAs per split) with 16-bit
// K/V: two, where the registers allow three. A wave of such a step is one
// sequence's splits, all streaming at once, and an SM's CTAs share that
// SM's part of the bandwidth, so the wave ends with the fullest SMs: 1 x
// 32K's 43 splits (344 CTAs: 80 SMs hold three, 52 two) took 58.6 us where
// 32 (256 CTAs, at most two an SM) took 53.7, and 1 x 128K's 49 (392)
// 186.4 us where 32 took 182.6 (v3.3, session 16, H100;
// docs/perf/decode-attention.md; bench/results/2026-11-26-h100-b1a).
const wgmmaFewCTAsPerSM = 2

// wgmmaFewSmem returns the dynamic shared memory that lets at most n CTAs
// of decode_wgmma.cu onto an SM of perSM bytes: more than a (n+1)-th of it,
// rounded up to 128 bytes. A plan that counts on n CTAs an SM takes it
// where its own need is smaller, so that the block scheduler cannot put
// n + 1 on one SM when other kernels' CTAs hold part of the GPU (the
// append ahead of a programmatic launch): an SM's CTAs share its part of
// the bandwidth, and the wave ends with its fullest SMs (v3.3).
func wgmmaFewSmem(perSM, n int) int {
	return (perSM/(n+1) + 1 + 127) / 128 * 128
}

// wgmmaPlanCTAs returns the CTAs per SM decode_wgmma.cu's split planner
// counts for layout l and shape s, ctas being what the registers and
// shared memory allow: wgmmaFewCTAsPerSM for one sequence with 16-bit K/V
// (at most ctas), else ctas.
func wgmmaPlanCTAs(l DecodeLayout, s DecodeShape, ctas int) int {
	rows := s.Hq / s.Hkv * s.Tq
	items := s.B * s.Hkv * ((rows + mmaRows - 1) / mmaRows)
	if l.KBits == 16 && l.VBits == 16 && items < splitFewItems {
		return min(ctas, wgmmaFewCTAsPerSM)
	}
	return ctas
}

// wgmmaMinB returns the CTAs per SM decode_wgmma.cu's registers are capped
// for: 3 (128 registers) at D <= 128, but 2 (168) for int8, which measured
// 91-92% of the read ceiling at 16 x 32K and 128 x 8K capped at 128 and
// 94-97% at 168 (and 19.4 -> 16.7 us at 1 x 8K) with the same splits; 1 at
// D = 256.
func wgmmaMinB(l DecodeLayout) int {
	switch {
	case l.D > 128:
		return 1
	case l.KBits == 8 && l.VBits == 8:
		return 2
	}
	return 3
}

// PickDecodeKernel returns the faster of DecodeWGMMA and DecodeMMA for
// layout l and shape s on dev, from the side-by-side H100 grid
// (bench/results/2026-11-23-h100-wgmma, checked again after v2.6 in
// bench/results/2026-11-23-h100-v2.6 and after v2.7 in
// bench/results/2026-11-25-h100-attn-2; docs/perf/decode-attention.md v3,
// session 7):
//   - wgmma for fp16 (faster at every measured shape: the TMA ring keeps
//     more bytes in flight than registers can; bf16, measured with wgmma
//     only, times like fp16 and is taken alike), int8 but for a single
//     long sequence (one wave of CTAs: mma.sync's 8 warps per SM unpack
//     faster than one warpgroup per CTA), and keys per token (KT) for a
//     single sequence of a few heads up to 8K tokens (14.0 against 15.2 us
//     at 1 x 8K; since v2.7's pipeline mma.sync is 1.02-1.18x faster at
//     every other row of the grid);
//   - mma.sync for keys per channel (KC: the query refold costs the
//     warpgroup a barrier per key group, one warp's business in
//     decode_mma.cu), int2 and k4v2 (dequantization-bound, same reason);
//   - mma.sync wherever the wgmma kernel cannot read the format, or the
//     GPU is not a Hopper.
func PickDecodeKernel(dev *cuda.Device, l DecodeLayout, s DecodeShape) DecodeKernel {
	major, minor := dev.ComputeCapability()
	return pickDecode(major, minor, l, s)
}

// pickDecode is PickDecodeKernel on a GPU of compute capability major.minor.
func pickDecode(major, minor int, l DecodeLayout, s DecodeShape) DecodeKernel {
	if wgmmaSupports(major, minor, l) != nil {
		return DecodeMMA
	}
	rows := s.Hq / s.Hkv * s.Tq
	items := s.B * s.Hkv * ((rows + mmaRows - 1) / mmaRows)
	switch {
	case l.KBits == 16 && l.VBits == 16:
		return DecodeWGMMA
	case l.KBits == 8 && l.VBits == 8:
		if items >= splitFewItems || s.MaxL <= 8192 {
			return DecodeWGMMA
		}
	case l.KBits < 16 && !l.KPerChannel && l.KBits == l.VBits && l.KBits >= 4:
		if items < splitFewItems && s.MaxL <= 8192 {
			return DecodeWGMMA
		}
	}
	return DecodeMMA
}

// DescribeDecode says which GPU decode kernel reads format f (package kv's
// canonical layout), for 'bitdecode inspect kv': DecodeAuto's pick on a
// Hopper GPU for one sequence of 8K and for 16 of 32K (Hq=32, Hkv=8), the
// kernel of other GPUs, or why no kernel reads it.
func DescribeDecode(f kv.Format) string {
	if f.Planes.On {
		return "bit planes: planes.cu's tiered kernel"
	}
	l, err := LayoutFor(f.WithOrder(kv.MMA))
	if err == nil {
		err = l.check()
	}
	if err != nil {
		return "no GPU decode kernel: " + strings.TrimPrefix(err.Error(), "kernels: ")
	}
	if err := wgmmaSupports(9, 0, l); err != nil {
		msg, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "kernels: the wgmma decode kernel "), " (")
		return "mma.sync (decode_mma.cu) on every GPU; the Hopper wgmma kernel " + msg
	}
	shape := func(b, n int) DecodeShape {
		return DecodeShape{B: b, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: (n + l.Nr - 1) / l.Nr, MaxL: n}
	}
	name := func(k DecodeKernel) string {
		if k == DecodeWGMMA {
			return "wgmma+TMA (decode_wgmma.cu)"
		}
		return "mma.sync (decode_mma.cu)"
	}
	small, large := pickDecode(9, 0, l, shape(1, 8192)), pickDecode(9, 0, l, shape(16, 32768))
	switch {
	case small == DecodeMMA && large == DecodeMMA:
		return "mma.sync (decode_mma.cu) on every GPU: on Hopper it measured faster than the wgmma kernel for this format"
	case small == large:
		return "on Hopper " + name(small) + ", the faster there (--kernel auto); mma.sync (decode_mma.cu) on other GPUs"
	}
	return fmt.Sprintf("on Hopper %s for one sequence of 8K, %s for 16 of 32K (--kernel auto); mma.sync on other GPUs", name(small), name(large))
}

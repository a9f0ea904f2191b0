package kernels

import (
	_ "embed"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/wq"
)

//go:embed gemvq.cu
var gemvqSource string

//go:embed gemvq3.cu
var gemvq3Source string

//go:embed gemvq4.cu
var gemvq4Source string

// GEMVQMaxRows is the most rows of x gemvq.cu's GEMV takes (two n-tiles of
// the mma's 8 columns); larger batches dequantize and go to cuBLASLt.
const GEMVQMaxRows = 16

// gemvqRows is gemvq.cu's kRows: output channels per CTA; gemvqTile its
// kTile: input channels per warp tile.
const (
	gemvqRows = 16
	gemvqTile = 128
)

// gemvqBits are the code widths gemvq.cu reads (package wq's int3, int4,
// int8).
var gemvqBits = [...]int{3, 4, 8}

// gemvqSplits are the warps per CTA (split-K) gemvq.cu is instantiated with.
var gemvqSplits = [...]int{1, 2, 4, 8, 16}

// gemvqMaxSplit is the most warps per CTA with nt n-tiles: 16 warps' x
// staging buffers for 16 tokens would pass the 48 KB of static shared memory.
func gemvqMaxSplit(nt int) int {
	if nt == 2 {
		return 8
	}
	return 16
}

// gemvqTargetWarps is how many warps a launch aims for: about 16 per SM of
// an H100 (132 SMs), enough 128-byte loads in flight per SM to cover DRAM
// latency.
const gemvqTargetWarps = 2048

// gemvqSplitFor picks the warps per CTA for an [N, K] weight: the fewest
// that give gemvqTargetWarps warps in all, while each warp keeps at least
// two tiles of K.
func gemvqSplitFor(N, K int) int {
	ctas := (N + gemvqRows - 1) / gemvqRows
	tiles := (K + gemvqTile - 1) / gemvqTile
	s := 1
	for s < gemvqSplits[len(gemvqSplits)-1] && ctas*s < gemvqTargetWarps && tiles/(2*s) >= 2 {
		s *= 2
	}
	return s
}

// GEMVQ3MaxRows is the most rows of x gemvq3.cu's GEMV (v3, CUDA cores)
// takes (LaunchV3).
const GEMVQ3MaxRows = 2

// GEMVQ3AutoRows is the most rows of x Launch gives to v3; more go to
// gemvq.cu's v2. One: at two rows v3's splits chosen by gemvq3SplitFor
// read the 8B layer shapes slower than v2 in sum (int4 150 us a layer
// against 138; its gate/up 34 us against 26, with 24-32 bytes of spills
// at split 2 and 4; docs/perf/gemvq.md v3.1).
const GEMVQ3AutoRows = 1

// gemvq3Warps is gemvq3.cu's kWarps: warps per CTA; gemvq3Step its kStep:
// input channels a warp reads in one step.
const (
	gemvq3Warps = 4
	gemvq3Step  = 1024
)

// gemvq3Splits are the warps per row group (split-K) gemvq3.cu is
// instantiated with.
var gemvq3Splits = [...]int{1, 2, 4}

// gemvq3RowsPerWarp is gemvq3.cu's kRowsPerWarp: rows a warp reads in each
// step (48-64 bytes of codes a lane).
func gemvq3RowsPerWarp(bits int) int {
	if bits == 8 {
		return 2
	}
	return 4
}

// gemvq3SplitPastWave is v3's split where even one split takes more than
// a wave of warps: 2 (v3.2 on the 8B gate/up, call 2: int4 19.0 us at 2
// against 20.5 at 1 and 19.2 at 4; int3 18.8 against 19.8 and 19.5; int8
// 28.9 against 28.5 and 29.3).
const gemvq3SplitPastWave = 2

// gemvq3SplitFor picks v3's warps per row group for an [N, K] weight of
// this width, given the warps the GPU holds at once (slots): the most
// splits whose warps fit in one wave, each slice keeping a step of K; where
// even one split takes more than a wave, gemvq3SplitPastWave. On the H100
// (3168 slots at one row of x) this is the best split measured or within
// 0.4 us of it on every 8B shape and width (docs/perf/gemvq.md v3.2).
func gemvq3SplitFor(N, K, bits, slots int) int {
	groups := (N + gemvq3RowsPerWarp(bits) - 1) / gemvq3RowsPerWarp(bits)
	steps := (K + gemvq3Step - 1) / gemvq3Step
	return splitForWave(groups, steps, slots, gemvq3Splits[:])
}

// splitForWave is v3's and v4's split rule over groups row groups of steps
// steps each: of splits (ascending), the most whose groups·split warps fit
// in one wave of slots, each slice keeping a step; where even one split
// takes more than a wave, the most up to gemvq3SplitPastWave.
func splitForWave(groups, steps, slots int, splits []int) int {
	best := 1
	for _, s := range splits {
		if s > steps {
			break
		}
		if groups*s <= slots || groups > slots && s <= gemvq3SplitPastWave {
			best = s
		}
	}
	return best
}

// gemvq4Warps is gemvq4.cu's kWarps: warps per CTA; gemvq4Rows its kRows:
// rows a warp (a row group) reads; gemvq4Tile its kTile: channels of a tile
// (one group's, one accumulator reset).
const (
	gemvq4Warps = 8
	gemvq4Rows  = 16
	gemvq4Tile  = 128
)

// gemvq4Splits are the warps per row group (split-K) gemvq4.cu is
// instantiated with.
var gemvq4Splits = [...]int{1, 2, 4, 8}

// gemvq4TilesPerStep is gemvq4.cu's kTilesPerStep: tiles a warp loads
// ahead in one step (128 bytes of codes a lane for int4 and int8, 96 for
// int3).
func gemvq4TilesPerStep(bits int) int {
	if bits == 8 {
		return 2
	}
	return 4
}

// gemvq4MinGroups is the fewest row groups of 16 (N >= 2048) for which
// Launch takes v4; fewer run v3, whose row groups of 4 give 4x the warps
// (call 1 on the 8B k/v, 64 groups: v4 7.2 us at its best split against
// v3's 6.0; call 2: int8 7.6 against 6.9).
const gemvq4MinGroups = 128

// gemvq4AutoBits is the code width Launch gives to v4: int8 only. v4.1 on
// the H100 (docs/perf/gemvq.md v4, call 2): int8 gate/up 25.2 us against
// v3.2's 28.8, down 25.4 against 26.6, q/o 11.6 both; int4 gate/up 19.9
// against 19.1 and the B = 1 step with int4 weights 3.56 ms against 3.45,
// int3 slower on every shape (gate/up 22.5 against 18.7) and in the step
// (3.76-3.83 ms against 3.40-3.42). Since session 16 the backend stores
// such int8 weights in the tiled layout, which LaunchTiled reads with v6.1
// (UsesV6; the same bits on the 8B shapes), unless V4Int8.
const gemvq4AutoBits = 8

// gemvq5AutoBits are the code widths Launch gives to v5 (UsesV5): int4.
// Session 14 on the H100 (docs/perf/gemvq.md v5): the B = 1 step with int4
// weights 3.33-3.39 ms at 1K and 3.61-3.69 at 32K with v5.1 against v3.2's
// 3.42-3.48 and 3.73-3.74 (standalone gate/up 19.9 us against 19.0, down
// 18.9 against 19.8); int3 (v5.0: gate/up 25.4 us against 18.8, the step
// +0.17 to +0.44 ms) and int8 (v5.1: gate/up 27.6 us against v4.1's 25.1)
// are slower.
var gemvq5AutoBits = map[int]bool{4: true}

// gemvq4SplitFor picks v4's warps per row group for an [N, K] weight of
// this width, given the warps the GPU holds at once (slots): gemvq3SplitFor's
// rule (the most splits whose warps fit in one wave, each slice keeping a
// step of K; where even one split takes more than a wave,
// gemvq3SplitPastWave) over v4's row groups of 16 rows and steps of
// gemvq4TilesPerStep tiles.
func gemvq4SplitFor(N, K, bits, slots int) int {
	groups := (N + gemvq4Rows - 1) / gemvq4Rows
	steps := (K/gemvq4Tile + gemvq4TilesPerStep(bits) - 1) / gemvq4TilesPerStep(bits)
	return splitForWave(groups, steps, slots, gemvq4Splits[:])
}

// gemvq4Shift returns log2(G/128) where v4 reads groups of G (128 times a
// power of two) over K, else -1.
func gemvq4Shift(G, K int) int {
	if G < gemvq4Tile || G%gemvq4Tile != 0 || K%G != 0 {
		return -1
	}
	q := G / gemvq4Tile
	if q&(q-1) != 0 {
		return -1
	}
	return bits.TrailingZeros(uint(q))
}

// gemvq5Ring is gemvq4.cu's kRing: v5's ring depth in steps, unless an
// NVRTC option -DGEMVQ5_STAGES=n (n > 0) sets it.
const gemvq5Ring = 4

// gemvq5StageTiles is gemvq4.cu's kStageTiles: tiles a ring slot holds
// (2 KB of codes a warp).
func gemvq5StageTiles(bits int) int {
	if bits == 8 {
		return 1
	}
	return 2
}

// gemvq5Steps is the number of v5/v6 ring steps (gemvq5StageTiles tiles
// each, the last possibly partial) over K inputs of a code width.
func gemvq5Steps(bits, K int) int {
	u := gemvq5StageTiles(bits)
	return (K/gemvq4Tile + u - 1) / u
}

// gemvq5SlotBytes is the size of gemvq4.cu's Slot<BITS, U>: a lane's span
// of two rows of U tiles (BITS words each), 16 rows' params of U tiles and
// x's 128 floats of U tiles.
func gemvq5SlotBytes(bits int) int {
	u := gemvq5StageTiles(bits)
	return u*2*bits*32*4 + u*gemvq4Rows*4 + u*gemvq4Tile*4
}

// gemvq5RingBytes is the dynamic shared memory of a v5 CTA: kWarps rings
// of gemvq5Ring slots (or the depth a -DGEMVQ5_STAGES= option sets).
func gemvq5RingBytes(bits int, opts []string) int {
	ring := gemvq5Ring
	for _, o := range opts {
		var n int
		if _, err := fmt.Sscanf(o, "-DGEMVQ5_STAGES=%d", &n); err == nil && n > 0 {
			ring = n
		}
	}
	return gemvq4Warps * ring * gemvq5SlotBytes(bits)
}

// gemvq5SplitFor is gemvq4SplitFor for v5: its steps are
// gemvq5StageTiles tiles, its slots those of its ring's occupancy.
func gemvq5SplitFor(N, K, bits, slots int) int {
	groups := (N + gemvq4Rows - 1) / gemvq4Rows
	return splitForWave(groups, gemvq5Steps(bits, K), slots, gemvq4Splits[:])
}

// GEMVQ holds gemvq.cu's, gemvq3.cu's and gemvq4.cu's kernels: the decode
// GEMV over packed low-bit weights for 1..GEMVQMaxRows rows (v5 and v4 at
// one row, v3 up to GEMVQ3MaxRows, v2 above), each code width and split,
// and the dequantization to fp16 for prefill.
type GEMVQ struct {
	gemv [2][len(gemvqBits)][len(gemvqSplits)]cuda.Function // [n-tiles-1][bits][split]
	v3   [GEMVQ3MaxRows][len(gemvqBits)][len(gemvq3Splits)]cuda.Function
	v4   [len(gemvqBits)][len(gemvq4Splits)]cuda.Function
	v5   [len(gemvqBits)][len(gemvq4Splits)]cuda.Function // coalesced copies of the codes
	v5n  [len(gemvqBits)][len(gemvq4Splits)]cuda.Function // v5.2: v5's step with fewer instructions (gemvq5Lean widths; else zero)
	v5l  [len(gemvqBits)][len(gemvq4Splits)]cuda.Function // each lane copying its own spans
	v6   [len(gemvq4Splits)]cuda.Function                 // v5.1 over the tiled layout (int4: gemvq6Bits)
	// v6n is v6.1 (v5.2 over the tiled layout), [gemvqTiledBits index][split].
	v6n [len(gemvqTiledBits)][len(gemvq4Splits)]cuda.Function
	// v7 is v6.2 (gemv_q7: v6.1 with x split once a CTA),
	// [gemvqTiledBits index][gemvq7Rings index][split].
	v7 [len(gemvqTiledBits)][len(gemvq7Rings)][len(gemvq4Splits)]cuda.Function
	// v6c is v6.1c (v6.1 with int3's codes in place, gemv_q5's XC) for
	// int3, [split].
	v6c [len(gemvq4Splits)]cuda.Function
	// gemvT is v2 over the tiled layout, [gemvqTiledBits index][n-tiles-1][split].
	gemvT [len(gemvqTiledBits)][2][len(gemvqSplits)]cuda.Function
	pack  [len(gemvqTiledBits)]cuda.Function // gemvq4::tile_pack<bits>
	// v3Slots is how many warps of v3's kernel for T rows and a code width
	// the GPU holds at once (its CTAs an SM by the occupancy API, times
	// gemvq3Warps, times the SMs): gemvq3SplitFor's wave.
	v3Slots [GEMVQ3MaxRows][len(gemvqBits)]int
	// v4Slots is v3Slots for v4's kernels (one row of x).
	v4Slots [len(gemvqBits)]int
	// v5Slots is v3Slots for v5's kernels (one row of x, their rings of
	// shared memory counted).
	v5Slots [len(gemvqBits)]int
	// v5Ring is v5's dynamic shared memory a CTA for each width.
	v5Ring  [len(gemvqBits)]int
	dequant [len(gemvqBits)]cuda.Function
	// dequantT is the dequantization of the tiled layout, [gemvqTiledBits index].
	dequantT [len(gemvqTiledBits)]cuda.Function
	// dequantS and dequantTS are dequant's and dequantT's forms before
	// session 15e (gemvq.cu dequant_q's SCALAR): DequantScalar's.
	dequantS  [len(gemvqBits)]cuda.Function
	dequantTS [len(gemvqTiledBits)]cuda.Function
	// DequantScalar makes Dequant and DequantTiled run the dequantization's
	// form before session 15e, whose threads write their 32 halves with
	// two-byte stores straight to memory, instead of staging them in shared
	// memory for coalesced 16-byte stores (the same bits): a knob for A/Bs
	// (docs/perf/gemvq.md, session 15e).
	DequantScalar bool
	// V2 makes Launch take v2 (gemvq.cu's tensor-core GEMV) at one row of
	// x too: a knob for A/Bs (backend/gpu's Options.GEMVQV2) and tests.
	V2 bool
	// V3 makes Launch take v3 (gemvq3.cu, CUDA cores) at one row of x
	// where v4 (gemvq4.cu, tensor cores) would run (UsesV4: int8): a knob
	// for A/Bs (backend/gpu's Options.GEMVQV3) and tests.
	V3 bool
	// V4 makes Launch keep session 13's routing (v4 for int8, v3 for int4
	// and int3) where v5 (gemvq4.cu's gemv_q5, the cp.async ring) would run
	// (UsesV5): a knob for A/Bs and tests.
	V4 bool
	// V5Lanes makes v5 copy each lane's own spans of codes (session 14's
	// call 1, 64 bytes a row a warp instruction) instead of the coalesced
	// 128-byte rows (v5.1): a knob for A/Bs and tests.
	V5Lanes bool
	// V51 makes v5 and v6 run session 15's step (v5.1, v6) instead of
	// v5.2's and v6.1's, which issue the same copies and compute the same
	// sums (the same bits) with ~17-20% fewer instructions a step
	// (gemvq4.cu LEAN; docs/perf/gemvq.md, session 15b): a knob for A/Bs
	// and tests.
	V51 bool
	// V61 makes v6 run v6.1 where v6.2 (gemvq4.cu's gemv_q7: v6.1 with x
	// split once a CTA, the same bits; docs/perf/gemvq.md, session 23)
	// or, for int3, v6.1c (its codes in place, session 24) would: a knob for A/Bs (backend/gpu's Options.GEMVQV61) and tests.
	V61 bool
	// V32Int3 keeps int3 weights on v3.2 (gemvq3.cu over wq's layout) at
	// one row of x where v6.1 over the tiled layout would run (UsesV6; the
	// backend then keeps such weights in wq's layout): a knob for A/Bs
	// (backend/gpu's Options.GEMVQInt3V32) and tests.
	V32Int3 bool
	// V4Int8 keeps int8 weights on v4.1 (gemvq4.cu's gemv_q4 over wq's
	// layout) at one row of x where v6.1 over the tiled layout would run
	// (UsesV6; the backend then keeps such weights in wq's layout): a knob
	// for A/Bs (backend/gpu's Options.GEMVQInt8V4) and tests
	// (docs/perf/gemvq.md, session 16).
	V4Int8 bool
	// EarlyWeights makes v3's, v4's and v5's lanes load their first step of codes and
	// params before the kernel waits for the one ahead of it on the stream
	// (gemvq3.cu is GridDependent), as gemv.cu's GEMV.EarlyWeights. Set it
	// only where no launch's weights are written by the kernel right before
	// it. The same bits either way.
	EarlyWeights bool
}

// LoadGEMVQ compiles gemvq.cu (once per device; later from the kernel
// cache).
func LoadGEMVQ(dev *cuda.Device) (*GEMVQ, error) { return LoadGEMVQOptions(dev) }

// LoadGEMVQOptions compiles gemvq.cu with extra NVRTC options: its tuning
// knobs (-DGEMVQ_PIPE=0, -DGEMVQ_UNROLL=8, ...; see the file) for
// experiments such as `bitdecode bench gemvq --variants`.
func LoadGEMVQOptions(dev *cuda.Device, opts ...string) (*GEMVQ, error) {
	gexpr := func(nt, b, s int) string { return fmt.Sprintf("gemvq::gemv_q<%d, %d, %d>", nt, b, s) }
	dexpr := func(b int) string { return fmt.Sprintf("gemvq::dequant_q<%d>", b) }
	dsexpr := func(b int) string { return fmt.Sprintf("gemvq::dequant_q<%d, false, true>", b) }
	var exprs []string
	for nt := 1; nt <= 2; nt++ {
		for _, b := range gemvqBits {
			for _, s := range gemvqSplits {
				if s <= gemvqMaxSplit(nt) {
					exprs = append(exprs, gexpr(nt, b, s))
				}
			}
		}
		for _, b := range gemvqTiledBits {
			for _, s := range gemvqSplits {
				if s <= gemvqMaxSplit(nt) {
					exprs = append(exprs, gemvqTiledExpr(nt, b, s))
				}
			}
		}
	}
	for _, b := range gemvqBits {
		exprs = append(exprs, dexpr(b), dsexpr(b))
	}
	for _, b := range gemvqTiledBits {
		exprs = append(exprs, gemvqTiledDequantExpr(b, false), gemvqTiledDequantExpr(b, true))
	}
	mod, err := dev.Compile(program("gemvq.cu", gemvqSource, exprs, opts))
	if err != nil {
		return nil, err
	}
	g := &GEMVQ{}
	if err := g.loadV3(dev, opts); err != nil {
		return nil, err
	}
	if err := g.loadV4(dev, opts); err != nil {
		return nil, err
	}
	for nt := 1; nt <= 2; nt++ {
		for bi, b := range gemvqBits {
			for si, s := range gemvqSplits {
				if s > gemvqMaxSplit(nt) {
					continue
				}
				if g.gemv[nt-1][bi][si], err = mod.Function(gexpr(nt, b, s)); err != nil {
					return nil, err
				}
			}
		}
	}
	for ti, b := range gemvqTiledBits {
		for nt := 1; nt <= 2; nt++ {
			for si, s := range gemvqSplits {
				if s > gemvqMaxSplit(nt) {
					continue
				}
				if g.gemvT[ti][nt-1][si], err = mod.Function(gemvqTiledExpr(nt, b, s)); err != nil {
					return nil, err
				}
			}
		}
		if g.dequantT[ti], err = mod.Function(gemvqTiledDequantExpr(b, false)); err != nil {
			return nil, err
		}
		if g.dequantTS[ti], err = mod.Function(gemvqTiledDequantExpr(b, true)); err != nil {
			return nil, err
		}
	}
	for bi, b := range gemvqBits {
		if g.dequant[bi], err = mod.Function(dexpr(b)); err != nil {
			return nil, err
		}
		if g.dequantS[bi], err = mod.Function(dsexpr(b)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// loadV3 compiles gemvq3.cu (with gemvq.cu handed to NVRTC as the header
// it includes) and looks up its kernels.
func (g *GEMVQ) loadV3(dev *cuda.Device, opts []string) error {
	expr := func(t, b, s int) string { return fmt.Sprintf("gemvq3::gemv_q3<%d, %d, %d>", t, b, s) }
	var exprs []string
	for t := 1; t <= GEMVQ3MaxRows; t++ {
		for _, b := range gemvqBits {
			for _, s := range gemvq3Splits {
				exprs = append(exprs, expr(t, b, s))
			}
		}
	}
	mod, err := dev.Compile(gemvq3Program(exprs, opts))
	if err != nil {
		return err
	}
	for t := 1; t <= GEMVQ3MaxRows; t++ {
		for bi, b := range gemvqBits {
			for si, s := range gemvq3Splits {
				if g.v3[t-1][bi][si], err = mod.Function(expr(t, b, s)); err != nil {
					return err
				}
			}
		}
	}
	return dev.Do(func(c *cuda.Ctx) error {
		for t := 1; t <= GEMVQ3MaxRows; t++ {
			for bi := range gemvqBits {
				n, err := c.MaxActiveBlocksPerSM(g.v3[t-1][bi][0], 32*gemvq3Warps, 0)
				if err != nil {
					return fmt.Errorf("kernels: gemvq v3: %w", err)
				}
				g.v3Slots[t-1][bi] = max(1, n) * gemvq3Warps * dev.SMs()
			}
		}
		return nil
	})
}

// loadV4 compiles gemvq4.cu (with gemvq.cu as the header it includes) and
// looks up its kernels.
func (g *GEMVQ) loadV4(dev *cuda.Device, opts []string) error {
	expr := func(b, s int) string { return fmt.Sprintf("gemvq4::gemv_q4<%d, %d>", b, s) }
	expr5 := func(b, s int, coal bool) string { return fmt.Sprintf("gemvq4::gemv_q5<%d, %d, %v>", b, s, coal) }
	var exprs []string
	for _, b := range gemvqBits {
		for _, s := range gemvq4Splits {
			exprs = append(exprs, expr(b, s), expr5(b, s, true), expr5(b, s, false))
		}
	}
	for _, b := range gemvqBits {
		if gemvq5Lean(b) {
			for _, s := range gemvq4Splits {
				exprs = append(exprs, gemvq5LeanExpr(b, s, false))
			}
		}
	}
	for _, s := range gemvq4Splits {
		exprs = append(exprs, gemvq6Expr(s, false))
	}
	for _, b := range gemvqTiledBits {
		for _, s := range gemvq4Splits {
			exprs = append(exprs, gemvq5LeanExpr(b, s, true))
			for _, r := range gemvq7Rings {
				exprs = append(exprs, gemvq7Expr(b, s, r))
			}
		}
		exprs = append(exprs, gemvq6PackExpr(b))
	}
	for _, s := range gemvq4Splits {
		exprs = append(exprs, gemvq6cExpr(s))
	}
	mod, err := dev.Compile(program("gemvq4.cu", gemvq4Source, exprs, opts, cuda.Header{Name: "gemvq.cu", Source: gemvqSource}))
	if err != nil {
		return err
	}
	for bi, b := range gemvqBits {
		for si, s := range gemvq4Splits {
			if g.v4[bi][si], err = mod.Function(expr(b, s)); err != nil {
				return err
			}
			if g.v5[bi][si], err = mod.Function(expr5(b, s, true)); err != nil {
				return err
			}
			if g.v5l[bi][si], err = mod.Function(expr5(b, s, false)); err != nil {
				return err
			}
			if gemvq5Lean(b) {
				if g.v5n[bi][si], err = mod.Function(gemvq5LeanExpr(b, s, false)); err != nil {
					return err
				}
			}
		}
	}
	for si, s := range gemvq4Splits {
		if g.v6[si], err = mod.Function(gemvq6Expr(s, false)); err != nil {
			return err
		}
	}
	for ti, b := range gemvqTiledBits {
		for si, s := range gemvq4Splits {
			if g.v6n[ti][si], err = mod.Function(gemvq5LeanExpr(b, s, true)); err != nil {
				return err
			}
			for ri, r := range gemvq7Rings {
				if g.v7[ti][ri][si], err = mod.Function(gemvq7Expr(b, s, r)); err != nil {
					return err
				}
			}
		}
		if g.pack[ti], err = mod.Function(gemvq6PackExpr(b)); err != nil {
			return err
		}
	}
	for si, s := range gemvq4Splits {
		if g.v6c[si], err = mod.Function(gemvq6cExpr(s)); err != nil {
			return err
		}
	}
	return dev.Do(func(c *cuda.Ctx) error {
		for bi, b := range gemvqBits {
			n, err := c.MaxActiveBlocksPerSM(g.v4[bi][0], 32*gemvq4Warps, 0)
			if err != nil {
				return fmt.Errorf("kernels: gemvq v4: %w", err)
			}
			g.v4Slots[bi] = max(1, n) * gemvq4Warps * dev.SMs()
			ring := gemvq5RingBytes(b, opts)
			g.v5Ring[bi] = ring
			for si := range gemvq4Splits {
				fns := []cuda.Function{g.v5[bi][si], g.v5l[bi][si]}
				if gemvq5Lean(b) {
					fns = append(fns, g.v5n[bi][si])
				}
				if b == gemvq6Bits {
					fns = append(fns, g.v6[si])
				}
				if ti := gemvqTiledIndex(b); ti >= 0 {
					fns = append(fns, g.v6n[ti][si])
				}
				if b == gemvq6cBits {
					fns = append(fns, g.v6c[si])
				}
				for _, f := range fns {
					if err := c.SetMaxDynamicShared(f, ring); err != nil {
						return fmt.Errorf("kernels: gemvq v5: %w", err)
					}
				}
			}
			if ti := gemvqTiledIndex(b); ti >= 0 {
				for ri := range gemvq7Rings {
					for si := range gemvq4Splits {
						if err := c.SetMaxDynamicShared(g.v7[ti][ri][si], gemvq7SharedMax); err != nil {
							return fmt.Errorf("kernels: gemvq v6.2: %w", err)
						}
					}
				}
			}
			if n, err = c.MaxActiveBlocksPerSM(g.v5[bi][0], 32*gemvq4Warps, ring); err != nil {
				return fmt.Errorf("kernels: gemvq v5: %w", err)
			}
			g.v5Slots[bi] = max(1, n) * gemvq4Warps * dev.SMs()
		}
		return nil
	})
}

// gemvq3Program is gemvq3.cu's program: GridDependent (header.go), with
// gemvq.cu as a header (its codes unpacking).
func gemvq3Program(exprs, opts []string) cuda.Program {
	return program("gemvq3.cu", gemvq3Source, exprs, opts, cuda.Header{Name: "gemvq.cu", Source: gemvqSource})
}

// gemvqBitsIndex is a code width's index in gemvqBits, -1 if none.
func gemvqBitsIndex(bits int) int { return slices.Index(gemvqBits[:], bits) }

// Reads reports whether the kernels read codes of this width with group G
// (a multiple of 32 dividing K).
func (g *GEMVQ) Reads(bits, G, K int) bool {
	return gemvqBitsIndex(bits) >= 0 && G > 0 && G%32 == 0 && K%G == 0
}

// Launch computes y = x·Ŵᵀ + bias for T <= GEMVQMaxRows rows: x [T][K]
// float32, words and params the packed matrix ([N] rows of wq's layout),
// bias [N] float32 or 0, y [T][N] float32. Where UsesV5 (one row) it runs
// v5 (gemvq4.cu's gemv_q5) at gemvq5SplitFor's split; where UsesV4 it runs
// v4 (gemvq4.cu) at gemvq4SplitFor's split; up to GEMVQ3AutoRows rows
// otherwise (unless V2) v3 (gemvq3.cu) at gemvq3SplitFor's split, above v2
// at gemvqSplitFor's.
func (g *GEMVQ) Launch(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, T, N, K, bits, G int) error {
	if g.UsesV5(T, N, K, bits, G) {
		return g.LaunchV5(c, st, y, x, words, params, bias, N, K, bits, G, g.SplitV5For(N, K, bits))
	}
	if g.UsesV4(T, N, K, bits, G) {
		return g.LaunchV4(c, st, y, x, words, params, bias, N, K, bits, G, g.SplitV4For(N, K, bits))
	}
	if T <= GEMVQ3AutoRows && !g.V2 {
		return g.LaunchV3(c, st, y, x, words, params, bias, T, N, K, bits, G, g.SplitV3For(T, N, K, bits))
	}
	return g.LaunchSplit(c, st, y, x, words, params, bias, T, N, K, bits, G, gemvqSplitFor(N, K))
}

// ReadsV4 reports whether v4 (gemvq4.cu) reads codes of this width with
// group G over K: G 128 times a power of two, K a multiple of G.
func (g *GEMVQ) ReadsV4(bits, G, K int) bool {
	return g.Reads(bits, G, K) && gemvq4Shift(G, K) >= 0
}

// UsesV4 reports whether Launch runs v4 for T rows of x over an [N, K]
// weight of this width and group: one row, neither V2 nor V3, int8
// (gemvq4AutoBits), a group v4 reads, and at least gemvq4MinGroups row
// groups.
func (g *GEMVQ) UsesV4(T, N, K, bits, G int) bool {
	return !g.UsesV5(T, N, K, bits, G) && T == 1 && !g.V2 && !g.V3 && bits == gemvq4AutoBits && g.ReadsV4(bits, G, K) && (N+gemvq4Rows-1)/gemvq4Rows >= gemvq4MinGroups
}

// UsesV5 reports whether Launch runs v5 (gemvq4.cu's gemv_q5) for T rows
// of x over an [N, K] weight of this width and group: one row, none of V2,
// V3, V4, a group v4 reads, and at least gemvq4MinGroups row groups.
func (g *GEMVQ) UsesV5(T, N, K, bits, G int) bool {
	return T == 1 && !g.V2 && !g.V3 && !g.V4 && gemvq5AutoBits[bits] && g.ReadsV4(bits, G, K) && (N+gemvq4Rows-1)/gemvq4Rows >= gemvq4MinGroups
}

// LaunchV5 is v5 (gemvq4.cu's gemv_q5: v4's math fed by a cp.async ring)
// over one row of x with S warps per row group (1, 2, 4 or 8), for tests
// and tuning.
func (g *GEMVQ) LaunchV5(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, N, K, bits, G, S int) error {
	return g.launchQ4(c, st, y, x, words, params, bias, N, K, bits, G, S, true)
}

// SplitV5For returns the warps per row group v5 takes for an [N, K] weight
// of this width (Launch's split at one row). v5.2 keeps v5.1's rule: over
// one CTA an SM (half a wave) its best splits alone moved (int4 gate/up S 1
// 17.6 us against S 2's 18.5-18.9, down S 4 16.8 against S 8's 19.0), but
// back to back under PDL they lost (gate/up 16.1 against 13.9, down 15.5
// against 14.8) and the B = 1 int4 step took 3.81-3.83 ms against 3.26-3.31
// (docs/perf/gemvq.md, session 15b, call 2).
func (g *GEMVQ) SplitV5For(N, K, bits int) int {
	bi := gemvqBitsIndex(bits)
	if bi < 0 {
		return 1
	}
	return gemvq5SplitFor(N, K, bits, g.v5Slots[bi])
}

// InfoV5 returns the resources of v5's kernel for a code width and split S
// (the one V5Lanes and V51 pick).
func (g *GEMVQ) InfoV5(c *cuda.Ctx, bits, S int) (cuda.FuncInfo, error) {
	bi, si := gemvqBitsIndex(bits), slices.Index(gemvq4Splits[:], S)
	if bi < 0 || si < 0 {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq v5: no kernel for bits=%d split %d", bits, S)
	}
	return c.FuncInfo(g.v5Func(bi, si))
}

// v5Func is v5's kernel for code width index bi and split index si: v5.0
// (each lane's own copies) where V5Lanes, v5.2 (LEAN) where the width has
// it and not V51, else v5.1.
func (g *GEMVQ) v5Func(bi, si int) cuda.Function {
	switch {
	case g.V5Lanes:
		return g.v5l[bi][si]
	case !g.V51 && gemvq5Lean(gemvqBits[bi]):
		return g.v5n[bi][si]
	}
	return g.v5[bi][si]
}

// gemvq5Lean reports whether gemvq4.cu's LEAN step (v5.2) is built for a
// code width: the widths of the coalesced copies (int4, int8).
func gemvq5Lean(bits int) bool { return bits%4 == 0 }

// gemvq5LeanExpr is the name expression of gemv_q5's LEAN step at split
// s, over wq's layout (v5.2) or the tiled one (v6.1, int4).
func gemvq5LeanExpr(bits, s int, tiled bool) string {
	return fmt.Sprintf("gemvq4::gemv_q5<%d, %d, true, %v, false, true>", bits, s, tiled)
}

// LaunchV4 is v4 (gemvq4.cu, tensor cores) over one row of x with S warps
// per row group (1, 2, 4 or 8), for tests and tuning.
func (g *GEMVQ) LaunchV4(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, N, K, bits, G, S int) error {
	return g.launchQ4(c, st, y, x, words, params, bias, N, K, bits, G, S, false)
}

// launchQ4 is LaunchV4 and, with v5, LaunchV5: the same checks, grid and
// arguments; v5's kernel (v5Func's pick) takes its ring's bytes of dynamic
// shared memory and their count as one more argument.
func (g *GEMVQ) launchQ4(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, N, K, bits, G, S int, v5 bool) error {
	what := "v4"
	if v5 {
		what = "v5"
	}
	bi := gemvqBitsIndex(bits)
	if N <= 0 || !g.ReadsV4(bits, G, K) {
		return fmt.Errorf("kernels: gemvq %s: N=%d K=%d bits=%d G=%d has no kernel", what, N, K, bits, G)
	}
	si := slices.Index(gemvq4Splits[:], S)
	if si < 0 {
		return fmt.Errorf("kernels: gemvq %s: split %d is not one of %v", what, S, gemvq4Splits)
	}
	rows := gemvq4Rows * gemvq4Warps / S
	early := flagArg(g.EarlyWeights)
	grid, block := cuda.Dim3{X: (N + rows - 1) / rows}, cuda.Dim3{X: 32 * gemvq4Warps}
	args := []any{x, words, params, bias, y, int32(N), int32(K), int32(gemvq4Shift(G, K)), early}
	if !v5 {
		return c.Launch(g.v4[bi][si], grid, block, 0, st, args...)
	}
	ring, fn := g.v5Ring[bi], g.v5Func(bi, si)
	return c.Launch(fn, grid, block, ring, st, append(args, int32(ring))...)
}

// SplitV4For returns the warps per row group v4 takes for an [N, K] weight
// of this width (Launch's split at one row).
func (g *GEMVQ) SplitV4For(N, K, bits int) int {
	bi := gemvqBitsIndex(bits)
	if bi < 0 {
		return 1
	}
	return gemvq4SplitFor(N, K, bits, g.v4Slots[bi])
}

// GEMVQ4Splits returns the splits LaunchV4 takes.
func GEMVQ4Splits() []int { return append([]int(nil), gemvq4Splits[:]...) }

// InfoV4 returns the resources of v4's kernel for a code width and split S.
func (g *GEMVQ) InfoV4(c *cuda.Ctx, bits, S int) (cuda.FuncInfo, error) {
	bi, si := gemvqBitsIndex(bits), slices.Index(gemvq4Splits[:], S)
	if bi < 0 || si < 0 {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq v4: no kernel for bits=%d split %d", bits, S)
	}
	return c.FuncInfo(g.v4[bi][si])
}

// LaunchV3 is v3 (gemvq3.cu) over T <= GEMVQ3MaxRows rows with S warps per
// row group (1, 2 or 4), for tests and tuning.
func (g *GEMVQ) LaunchV3(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, T, N, K, bits, G, S int) error {
	bi := gemvqBitsIndex(bits)
	if T < 1 || T > GEMVQ3MaxRows || N <= 0 || !g.Reads(bits, G, K) {
		return fmt.Errorf("kernels: gemvq v3: T=%d N=%d K=%d bits=%d G=%d has no kernel", T, N, K, bits, G)
	}
	si := slices.Index(gemvq3Splits[:], S)
	if si < 0 {
		return fmt.Errorf("kernels: gemvq v3: split %d is not one of %v", S, gemvq3Splits)
	}
	rows := gemvq3RowsPerWarp(bits) * gemvq3Warps / S
	early := flagArg(g.EarlyWeights)
	return c.Launch(g.v3[T-1][bi][si], cuda.Dim3{X: (N + rows - 1) / rows}, cuda.Dim3{X: 32 * gemvq3Warps}, 0, st,
		x, words, params, bias, y, int32(N), int32(K), int32(G), early)
}

// SplitV3For returns the warps per row group v3 takes for T rows of x and
// an [N, K] weight of this width (Launch's split at T <= GEMVQ3AutoRows).
func (g *GEMVQ) SplitV3For(T, N, K, bits int) int {
	bi := gemvqBitsIndex(bits)
	if bi < 0 || T < 1 || T > GEMVQ3MaxRows {
		return 1
	}
	return gemvq3SplitFor(N, K, bits, g.v3Slots[T-1][bi])
}

// GEMVQ3Splits returns the splits LaunchV3 takes.
func GEMVQ3Splits() []int { return append([]int(nil), gemvq3Splits[:]...) }

// InfoV3 returns the resources of v3's kernel for T rows, a code width and
// split S.
func (g *GEMVQ) InfoV3(c *cuda.Ctx, T, bits, S int) (cuda.FuncInfo, error) {
	bi, si := gemvqBitsIndex(bits), slices.Index(gemvq3Splits[:], S)
	if bi < 0 || si < 0 || T < 1 || T > GEMVQ3MaxRows {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq v3: no kernel for T=%d bits=%d split %d", T, bits, S)
	}
	return c.FuncInfo(g.v3[T-1][bi][si])
}

// LaunchSplit is v2 (gemvq.cu) with S warps per CTA (one of 1, 2, 4, 8,
// 16) at any T, for tests, tuning and DEC's v2 route (LaunchDECBase).
func (g *GEMVQ) LaunchSplit(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, T, N, K, bits, G, S int) error {
	bi := gemvqBitsIndex(bits)
	if T < 1 || T > GEMVQMaxRows || N <= 0 || !g.Reads(bits, G, K) {
		return fmt.Errorf("kernels: gemvq: T=%d N=%d K=%d bits=%d G=%d has no kernel", T, N, K, bits, G)
	}
	nt := (T + 7) / 8
	S, si, err := gemvqSplitFit(S, nt)
	if err != nil {
		return fmt.Errorf("kernels: gemvq: %w", err)
	}
	return c.Launch(g.gemv[nt-1][bi][si], cuda.Dim3{X: (N + gemvqRows - 1) / gemvqRows}, cuda.Dim3{X: 32 * S}, 0, st,
		x, words, params, bias, y, int32(T), int32(N), int32(K), int32(G))
}

// gemvqSplitFit returns split S, lowered one step where nt n-tiles of x
// allow fewer warps a CTA (gemvqMaxSplit), and its index in gemvqSplits: the
// v2 kernel LaunchSplit and LaunchSplitTiled run.
func gemvqSplitFit(S, nt int) (int, int, error) {
	si := slices.Index(gemvqSplits[:], S)
	if si < 0 {
		return 0, 0, fmt.Errorf("split %d is not one of %v", S, gemvqSplits)
	}
	if S > gemvqMaxSplit(nt) {
		S, si = gemvqMaxSplit(nt), si-1
	}
	return S, si, nil
}

// SplitFor returns the warps per CTA Launch uses for an [N, K] weight.
func SplitFor(N, K int) int { return gemvqSplitFor(N, K) }

// Info returns the resources of the GEMV kernel for T rows, a code width and
// split S.
func (g *GEMVQ) Info(c *cuda.Ctx, T, bits, S int) (cuda.FuncInfo, error) {
	bi, si := gemvqBitsIndex(bits), slices.Index(gemvqSplits[:], S)
	if bi < 0 || si < 0 || T < 1 || T > GEMVQMaxRows || S > gemvqMaxSplit((T+7)/8) {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq: no kernel for T=%d bits=%d split %d", T, bits, S)
	}
	return c.FuncInfo(g.gemv[(T+7)/8-1][bi][si])
}

// Dequant writes Ŵ as fp16 [N][K] to out (for prefill through cuBLASLt).
func (g *GEMVQ) Dequant(c *cuda.Ctx, st cuda.Stream, out, words, params cuda.DevicePtr, N, K, bits, G int) error {
	bi := gemvqBitsIndex(bits)
	if N <= 0 || !g.Reads(bits, G, K) {
		return fmt.Errorf("kernels: gemvq dequant: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	fn := g.dequant[bi]
	if g.DequantScalar {
		fn = g.dequantS[bi]
	}
	return c.Launch(fn, gemvqDequantGrid(N, K), cuda.Dim3{X: gemvqDequantThreads}, 0, st, words, params, out, int32(N), int32(K), int32(G))
}

// GEMVQMaxSplit is the most warps per CTA LaunchSplit takes for T rows.
func GEMVQMaxSplit(T int) int { return gemvqMaxSplit((T + 7) / 8) }

// gemvqDECSplits are the warps per CTA of the fused DEC kernels: dec.cu's
// CTAs need at least 128 threads, and 16 warps' shared memory (the GEMV's
// and DEC's) would pass 48 KB.
var gemvqDECSplits = [...]int{4, 8}

// gemvqDECPMax are the fused kernels' bounds on the DEC CTAs' outputs per
// thread (dec::fused_cta_any's PMAX): the kernel's registers are those of
// its largest path, so the common P <= 4 (n_tb >= 8 on the 8B shapes but
// gate/up at n_tb < 28) gets a kernel of its own.
var gemvqDECPMax = [...]int{4, 32}

// GEMVQDEC holds the decode GEMV with DEC's compensation CTAs in the same
// grid (dec.cu's fused mode), int4 residuals: gemvq3.cu's gemv_q3_dec over
// v3's sums at one row of int4/int3 weights (DECBaseV3), gemvq.cu's
// gemv_q_dec over v2's otherwise (T <= 8), and dec.cu's selection kernel
// for selections too large for the DEC CTAs' shared memory. Each code width
// and route is compiled on first use (or by Prepare): a module holds its
// kernels for every split and PMAX.
type GEMVQDEC struct {
	dev  *cuda.Device
	mods perBits[*gemvqDECModule]
	// v3's fused kernels (gemvq3.cu's gemv_q3_dec), compiled per code width
	// on first use like v2's.
	v3mods perBits[*gemvq3DECModule]
	// V2 makes Launch take v2's fused kernel where DECBaseV3 would give v3:
	// a knob for A/Bs (set GEMVQ.V2 alike for the serial reference).
	V2 bool
	// EarlyWeights is GEMVQ.EarlyWeights for v3's fused kernels: the base
	// CTAs load their first step of codes before the dependency wait.
	EarlyWeights bool
}

// gemvq3DECModule is one code width's v3 fused kernels, and the warps of
// gemv_q3<1, bits, 1> the GPU holds at once (GEMVQ.v3Slots' value, from
// the same source): gemvq3SplitFor's wave.
type gemvq3DECModule struct {
	fns   [len(gemvq3Splits)][len(gemvqDECPMax)]cuda.Function
	slots int
}

// perBits holds a module of each code width of gemvqBits, compiled on first
// use (once, its error kept).
type perBits[M any] struct {
	once [len(gemvqBits)]sync.Once
	mods [len(gemvqBits)]M
	errs [len(gemvqBits)]error
}

// get returns the module of a code width, compiling it with compile on
// first use; what names the kernels in the error of a width with none.
func (m *perBits[M]) get(bits int, what string, compile func(bits int) (M, error)) (M, error) {
	bi := gemvqBitsIndex(bits)
	if bi < 0 {
		var none M
		return none, fmt.Errorf("kernels: %s: no kernel for int%d weights", what, bits)
	}
	m.once[bi].Do(func() { m.mods[bi], m.errs[bi] = compile(bits) })
	return m.mods[bi], m.errs[bi]
}

// moduleV3 returns the compiled v3 fused kernels of a code width.
func (g *GEMVQDEC) moduleV3(bits int) (*gemvq3DECModule, error) {
	return g.v3mods.get(bits, "gemvq3+dec", func(bits int) (*gemvq3DECModule, error) { return compileGEMVQ3DEC(g.dev, bits) })
}

// compileGEMVQ3DEC compiles gemvq3.cu with -DGEMVQ_WITH_DEC=1 (gemvq.cu and
// dec.cu as headers; a GridDependent program like gemvq3.cu's own) for one
// code width: gemv_q3_dec at every split and PMAX, and gemv_q3<1, bits, 1>
// for its occupancy.
func compileGEMVQ3DEC(dev *cuda.Device, bits int) (*gemvq3DECModule, error) {
	expr := func(s, p int) string { return fmt.Sprintf("gemvq3::gemv_q3_dec<%d, %d, %d>", bits, s, p) }
	plain := fmt.Sprintf("gemvq3::gemv_q3<1, %d, 1>", bits)
	exprs := []string{plain}
	for _, s := range gemvq3Splits {
		for _, p := range gemvqDECPMax {
			exprs = append(exprs, expr(s, p))
		}
	}
	mod, err := dev.Compile(program("gemvq3.cu", gemvq3Source, exprs, []string{"-DGEMVQ_WITH_DEC=1", "-DDEC_NO_SELFTEST=1"},
		cuda.Header{Name: "gemvq.cu", Source: gemvqSource}, cuda.Header{Name: "dec.cu", Source: decSource}))
	if err != nil {
		return nil, err
	}
	m := &gemvq3DECModule{}
	for si, s := range gemvq3Splits {
		for pi, p := range gemvqDECPMax {
			if m.fns[si][pi], err = mod.Function(expr(s, p)); err != nil {
				return nil, err
			}
		}
	}
	fn, err := mod.Function(plain)
	if err != nil {
		return nil, err
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		n, err := c.MaxActiveBlocksPerSM(fn, 32*gemvq3Warps, 0)
		if err != nil {
			return fmt.Errorf("kernels: gemvq3+dec: %w", err)
		}
		m.slots = max(1, n) * gemvq3Warps * dev.SMs()
		return nil
	})
	return m, err
}

// usesV3 reports whether Launch runs v3's fused kernel for this launch.
func (g *GEMVQDEC) usesV3(T, K, bits int, l *DECLaunch) bool {
	return !g.V2 && DECBaseV3(T, K, bits, l.KChunk)
}

// gemvqDECModule is one code width's fused kernels.
type gemvqDECModule struct {
	fns [len(gemvqDECSplits)][len(gemvqDECPMax)]cuda.Function
	sel cuda.Function // dec::select_topk
}

// LoadGEMVQDEC returns the fused kernels of dev; gemvq.cu with dec.cu in
// front (gemvqDECProgram) is compiled per code width on first use.
func LoadGEMVQDEC(dev *cuda.Device) (*GEMVQDEC, error) { return &GEMVQDEC{dev: dev}, nil }

// Prepare compiles the kernels of one code width now (so a benchmark's
// first timed launch does not compile): v3's (one row of x, int4 and int3, unless V2) or else v2's.
func (g *GEMVQDEC) Prepare(bits int) error {
	if !g.V2 && DECBaseV3(1, 1, bits, 1) {
		_, err := g.moduleV3(bits)
		return err
	}
	_, err := g.module(bits)
	return err
}

// module returns the compiled kernels of a code width.
func (g *GEMVQDEC) module(bits int) (*gemvqDECModule, error) {
	return g.mods.get(bits, "gemvq+dec", func(bits int) (*gemvqDECModule, error) { return compileGEMVQDEC(g.dev, bits) })
}

func compileGEMVQDEC(dev *cuda.Device, bits int) (*gemvqDECModule, error) {
	expr := func(s, p int) string { return fmt.Sprintf("gemvq::gemv_q_dec<%d, %d, %d>", bits, s, p) }
	const selExpr = "dec::select_topk"
	exprs := []string{selExpr}
	for _, s := range gemvqDECSplits {
		for _, p := range gemvqDECPMax {
			exprs = append(exprs, expr(s, p))
		}
	}
	mod, err := dev.Compile(gemvqDECProgram(exprs))
	if err != nil {
		return nil, err
	}
	m := &gemvqDECModule{}
	if m.sel, err = mod.Function(selExpr); err != nil {
		return nil, err
	}
	for si, s := range gemvqDECSplits {
		for pi, p := range gemvqDECPMax {
			if m.fns[si][pi], err = mod.Function(expr(s, p)); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// DECBaseV3 reports whether the GEMV under DEC (every mode) is v3
// (gemvq3.cu's sums, fused: gemv_q3_dec) rather than v2 for T rows of x,
// an int-bits weight with K inputs and k_chunk kChunk: one row, int4 or
// int3 (int8 keeps v2: gemvq4.cu's v4 has no fused kernel), and a
// selection the DEC CTAs make themselves (at most DECFusedSelectMax
// channels a token; more need dec.cu's select_topk launch, which is not a
// programmatic dependent, before the kernel).
func DECBaseV3(T, K, bits, kChunk int) bool {
	return T == 1 && (bits == 4 || bits == 3) && DECSelected(K, kChunk) <= DECFusedSelectMax
}

// LaunchDECBase is the GEMV a weight with DEC at k_chunk kChunk runs under
// its compensation in serial and concurrent modes: the base sums of
// GEMVQDEC's fused kernel, so that every mode adds the compensation to the
// same bits. v3 at SplitV3For's split where DECBaseV3 (and not V2), else
// v2 at the fused v2 kernel's split.
func (g *GEMVQ) LaunchDECBase(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, T, N, K, bits, G, kChunk int) error {
	if DECBaseV3(T, K, bits, kChunk) && !g.V2 {
		return g.LaunchV3(c, st, y, x, words, params, bias, T, N, K, bits, G, g.SplitV3For(T, N, K, bits))
	}
	return g.LaunchSplit(c, st, y, x, words, params, bias, T, N, K, bits, G, gemvqDECSplitFor(N, K))
}

// gemvqDECSplitFor returns the fused kernel's warps per CTA for [N, K]:
// gemvqSplitFor's, clamped to gemvqDECSplits.
func gemvqDECSplitFor(N, K int) int {
	return min(max(gemvqSplitFor(N, K), gemvqDECSplits[0]), gemvqDECSplits[len(gemvqDECSplits)-1])
}

// Launch computes y = x·Ŵᵀ + bias plus DEC's compensation for T <= 8 rows
// in one launch (two when a token selects more than DECFusedSelectMax
// channels: dec.cu's selection into l.Sel first). l carries the residual,
// zeroed flags ([DECFlagWords(N)] uint32, left zeroed for the next launch),
// the part buffer ([T][N] float32, every word DECPartEmpty, left so) and n_tb; l.X and l.Y must be x and y.
// The result equals GEMVQ.LaunchDECBase (v3 at one row of int4/int3, v2
// else: BaseSplit) followed by DEC.Compensate bit for bit.
func (g *GEMVQDEC) Launch(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, T, N, K, bits, G int, l *DECLaunch) error {
	if g.usesV3(T, K, bits, l) {
		return g.launchV3(c, st, y, x, words, params, bias, N, K, bits, G, l)
	}
	m, err := g.module(bits)
	if err != nil {
		return err
	}
	fn, args, grid, threads, sel, err := g.launchArgs(m, y, x, T, N, K, bits, G, l)
	if err != nil {
		return err
	}
	if sel {
		S, _ := l.check(false)
		chunks := (l.R.K + wq.ChunkChannels - 1) / wq.ChunkChannels
		if err := c.Launch(m.sel, cuda.Dim3{X: chunks, Y: l.T}, cuda.Dim3{X: wq.ChunkChannels}, 0, st, l.args(S, 0)); err != nil {
			return err
		}
	}
	return c.Launch(fn, cuda.Dim3{X: grid}, cuda.Dim3{X: threads}, 0, st,
		x, words, params, bias, y, int32(T), int32(N), int32(K), int32(G), args)
}

// launchV3 is Launch through gemv_q3_dec (one row of x, DECBaseV3): the
// DEC CTAs of 128 threads, then v3's CTAs at gemvq3SplitFor's split, each
// one tile of 16/S rows.
func (g *GEMVQDEC) launchV3(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, N, K, bits, G int, l *DECLaunch) error {
	m, err := g.moduleV3(bits)
	if err != nil {
		return err
	}
	if N <= 0 || G <= 0 || G%32 != 0 || K%G != 0 {
		return fmt.Errorf("kernels: gemvq3+dec: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	if l.R == nil || l.R.Elem != wq.Int4 {
		return fmt.Errorf("kernels: gemvq3+dec: fused DEC reads int4 residuals")
	}
	if l.X != x || l.Y != y || l.T != 1 {
		return fmt.Errorf("kernels: gemvq3+dec: the DEC launch's x, y and T must be the GEMV's")
	}
	S := gemvq3SplitFor(N, K, bits, m.slots)
	si := slices.Index(gemvq3Splits[:], S)
	args, p, sel, err := DECFusedArgs(l, 32*gemvq3Warps)
	if err != nil {
		return err
	}
	if sel {
		return fmt.Errorf("kernels: gemvq3+dec: %d selected channels need a selection launch (DECBaseV3)", DECSelected(K, l.KChunk))
	}
	pi := 0
	for gemvqDECPMax[pi] < p {
		pi++
	}
	rows := gemvq3RowsPerWarp(bits) * gemvq3Warps / S
	early := flagArg(g.EarlyWeights)
	return c.Launch(m.fns[si][pi], cuda.Dim3{X: l.Blocks + (N+rows-1)/rows}, cuda.Dim3{X: 32 * gemvq3Warps}, 0, st,
		x, words, params, bias, y, int32(N), int32(K), int32(G), early, args)
}

// BaseSplit returns the GEMV a fused launch of T rows over an [N, K]
// weight of this width at k_chunk kChunk runs under its compensation: v3
// (gemvq3.cu) or v2, and its split (which sets the order of the base sums;
// GEMVQ.LaunchDECBase runs the same).
func (g *GEMVQDEC) BaseSplit(T, N, K, bits, kChunk int) (v3 bool, split int, err error) {
	if !g.V2 && DECBaseV3(T, K, bits, kChunk) {
		m, err := g.moduleV3(bits)
		if err != nil {
			return false, 0, err
		}
		return true, gemvq3SplitFor(N, K, bits, m.slots), nil
	}
	return false, gemvqDECSplitFor(N, K), nil
}

// launchArgs checks a fused launch and returns its kernel, dec::Args,
// grid and block sizes, and whether a selection launch must come first.
func (g *GEMVQDEC) launchArgs(m *gemvqDECModule, y, x cuda.DevicePtr, T, N, K, bits, G int, l *DECLaunch) (fn cuda.Function, args []byte, grid, threads int, sel bool, err error) {
	if T < 1 || T > 8 || N <= 0 || G <= 0 || G%32 != 0 || K%G != 0 {
		return fn, nil, 0, 0, false, fmt.Errorf("kernels: gemvq+dec: T=%d N=%d K=%d bits=%d G=%d has no kernel", T, N, K, bits, G)
	}
	if l.R == nil || l.R.Elem != wq.Int4 {
		return fn, nil, 0, 0, false, fmt.Errorf("kernels: gemvq+dec: fused DEC reads int4 residuals")
	}
	if l.X != x || l.Y != y || l.T != T {
		return fn, nil, 0, 0, false, fmt.Errorf("kernels: gemvq+dec: the DEC launch's x, y and T must be the GEMV's")
	}
	S := gemvqDECSplitFor(N, K)
	si := slices.Index(gemvqDECSplits[:], S) // gemvqDECSplitFor returns one of them
	args, p, sel, err := DECFusedArgs(l, 32*S)
	if err != nil {
		return fn, nil, 0, 0, false, err
	}
	pi := 0
	for gemvqDECPMax[pi] < p {
		pi++
	}
	return m.fns[si][pi], args, l.Blocks + (N+gemvqRows-1)/gemvqRows, 32 * S, sel, nil
}

// Split returns the warps per CTA of v2's fused kernel for [N, K] (its
// base CTAs' split-K, which sets the order of the base sums); BaseSplit
// says which route and split a launch takes.
func (g *GEMVQDEC) Split(N, K int) int { return gemvqDECSplitFor(N, K) }

// Info returns the resources of the fused kernel a launch over [N, K] with
// outputs-per-thread bound pmax (GEMVQDECPMax) uses, for benchmarks: v3's
// (gemv_q3_dec) for int4 and int3 unless V2 (a one-row launch whose DEC
// CTAs select, DECBaseV3), else v2's.
func (g *GEMVQDEC) Info(c *cuda.Ctx, N, K, bits, pmax int) (cuda.FuncInfo, error) {
	if pi := slices.Index(gemvqDECPMax[:], pmax); !g.V2 && DECBaseV3(1, K, bits, 1) && pi >= 0 {
		m, err := g.moduleV3(bits)
		if err != nil {
			return cuda.FuncInfo{}, err
		}
		return c.FuncInfo(m.fns[slices.Index(gemvq3Splits[:], gemvq3SplitFor(N, K, bits, m.slots))][pi])
	}
	m, err := g.module(bits)
	if err != nil {
		return cuda.FuncInfo{}, err
	}
	si, pi := 0, 0
	for si < len(gemvqDECSplits) && gemvqDECSplits[si] != gemvqDECSplitFor(N, K) {
		si++
	}
	for pi < len(gemvqDECPMax) && gemvqDECPMax[pi] != pmax {
		pi++
	}
	if pi == len(gemvqDECPMax) {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq+dec: no kernel for pmax %d", pmax)
	}
	return c.FuncInfo(m.fns[si][pi])
}

// GEMVQDECPMax returns the fused kernels' bounds on the DEC CTAs' outputs
// per thread (one kernel each), for Info.
func GEMVQDECPMax() []int { return append([]int(nil), gemvqDECPMax[:]...) }

// gemvqDECProgram is gemvq.cu compiled with -DGEMVQ_WITH_DEC=1, under which
// it includes dec.cu (handed to NVRTC as a header beside bitdecode.cuh)
// before its own code, and -DDEC_NO_SELFTEST=1: dec.cu's fused self-test,
// never launched from this module, would be most of its compile time.
func gemvqDECProgram(exprs []string) cuda.Program {
	return program("gemvq_dec.cu", gemvqSource, exprs, []string{"-DGEMVQ_WITH_DEC=1", "-DDEC_NO_SELFTEST=1"}, cuda.Header{Name: "dec.cu", Source: decSource})
}

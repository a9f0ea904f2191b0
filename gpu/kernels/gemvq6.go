package kernels

import (
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// v6: gemvq4.cu's gemv_q5 (v5.1: v4's tensor-core math fed by a cp.async
// ring of whole 128-byte lines) reading a GPU-private tiled copy of the
// weight, in which a warp's ring step is one contiguous 2 KB run and its
// slice of K one contiguous stream (gemvq4.cu, "The tiled layout";
// docs/perf/gemvq.md, session 15). The slots hold the same words as
// v5.1's, so v6's sums are v5.1's bit for bit.
//
// Session 15c: the tiled layout can be a weight's only device copy. Every
// kernel that reads an int4 weight without DEC has a tiled form with the
// same operations in the same order over other addresses (the same bits):
// v6 at one row of x, v2 (gemvq.cu's gemv_q<NT, 4, S, true>) at 2-16 rows,
// and the dequantization to fp16 for prefill (dequant_q<4, true>);
// LaunchTiled and DequantTiled route them. v3 (gemvq3.cu: row groups of 4
// rows a warp) and v4 have no tiled form: Launch gives int4 weights of
// 2048+ rows to neither by default (V3, V4 and V2 route one row to v2 over
// the tiled layout). DEC's kernels (fused and base) read wq's layout only:
// a weight with DEC keeps it (backend/gpu).
//
// Session 15d: int3 has a tiled layout too (gemvq4.cu "The tiled layout":
// a block of 16 rows x 2 tiles is 1536 contiguous bytes in the order v6.1's
// lanes read them), read by v6.1 (LEAN only: there is no int3 v6), v2 and
// the dequantization; Launch keeps v3.2 over wq's layout for int3,
// LaunchTiled runs v6.1 where UsesV6.
//
// Session 16: int8 too. Its tiled layout is int4's formula with a ring step
// of one tile (a block is 16 rows x 128 channels, 2 KB), read by v6.1
// (int8's LEAN step, which the template already had over wq's layout as
// v5.2), v2 and the dequantization. Launch keeps v4.1 over wq's layout for
// int8; LaunchTiled runs v6.1 where UsesV6 (where Launch runs v4.1, unless
// V4Int8), at a split whose slices start at v4.1's tiles the same bits.

// gemvq6Bits is the code width v6 (v5.1's step over the tiled layout) and
// the bench's diagnostic forms are instantiated for.
const gemvq6Bits = 4

// gemvqTiledBits are the code widths with a tiled layout (tile_pack, v6.1,
// v2 and the dequantization over it), in the index order of GEMVQ's tiled
// kernels.
var gemvqTiledBits = [...]int{4, 3, 8}

// gemvqTiledIndex is a code width's index in gemvqTiledBits, -1 if none.
func gemvqTiledIndex(bits int) int { return slices.Index(gemvqTiledBits[:], bits) }

// gemvq6Expr is the name expression of gemv_q5 over the tiled layout at
// split s (loads: the bench's loads-only form).
func gemvq6Expr(s int, loads bool) string {
	return fmt.Sprintf("gemvq4::gemv_q5<%d, %d, true, true, %v>", gemvq6Bits, s, loads)
}

// gemvq6PackExpr is tile_pack's name expression for a code width.
func gemvq6PackExpr(bits int) string { return fmt.Sprintf("gemvq4::tile_pack<%d>", bits) }

// gemvqTiledExpr is the name expression of gemvq.cu's v2 over the tiled
// layout with nt n-tiles, a code width and split s.
func gemvqTiledExpr(nt, bits, s int) string {
	return fmt.Sprintf("gemvq::gemv_q<%d, %d, %d, true>", nt, bits, s)
}

// gemvqTiledDequantExpr is the name expression of the dequantization of
// the tiled layout for a code width (scalar: its form before session 15e,
// GEMVQ.DequantScalar).
func gemvqTiledDequantExpr(bits int, scalar bool) string {
	return fmt.Sprintf("gemvq::dequant_q<%d, true, %v>", bits, scalar)
}

// gemvqDequantThreads is dequant_q's CTA (gemvq.cu kDequantThreads): one
// thread per 32-channel span.
const gemvqDequantThreads = 256

// gemvqDequantGrid is dequant_q's grid for an [N, K] weight.
func gemvqDequantGrid(N, K int) cuda.Dim3 {
	spans := N * (K / 32)
	return cuda.Dim3{X: (spans + gemvqDequantThreads - 1) / gemvqDequantThreads}
}

// gemvq6PackThreads is tile_pack's block size; gemvq6PackBlocks its most
// CTAs (a grid-stride loop).
const (
	gemvq6PackThreads = 256
	gemvq6PackBlocks  = 4096
)

// TiledWords returns the uint32 words of the tiled codes of an int-bits
// [N, K] weight: a block of gemvq4Rows rows of a ring step's words
// (gemvq5StageTiles tiles: 32 words of int4 and int8, 24 of int3) for each
// row group of 16 rows and each ring step.
func TiledWords(bits, N, K int) int {
	return (N + gemvq4Rows - 1) / gemvq4Rows * gemvq5Steps(bits, K) * gemvqTiledStepWords(bits)
}

// gemvqTiledStepWords is gemvq4.cu's kTiledStepWords: the words of a block
// (16 rows of a ring step of gemvq5StageTiles tiles).
func gemvqTiledStepWords(bits int) int {
	return gemvq4Rows * gemvq5StageTiles(bits) * gemvq4Tile / 32 * bits
}

// gemvqTiledLine is gemvq.cu's kTiledLine: a row's words in a tiled block
// (int4 and int8 32, int3 24).
func gemvqTiledLine(bits int) int { return gemvqTiledStepWords(bits) / gemvq4Rows }

// tiledIndex returns the index in the tiled codes of word k of row n of a
// weight with steps ring steps a row (gemvq.cu tiledRow + tiledSpan). int4
// and int8: block (n/16, k/32), line n%16, word k%32. int3: block (n/16,
// k/24), lane 4·(n%8) + k%12/3's 12 words at 12·lane, in them tile
// k%24/12 at 6, row half n%16/8 at 3, word k%3.
func tiledIndex(bits, steps, n, k int) int {
	rg, r := n/gemvq4Rows, n%gemvq4Rows
	if bits == 3 {
		line := gemvqTiledLine(3)
		return (rg*steps+k/line)*gemvqTiledStepWords(3) + (4*(r%8)+k%12/3)*12 + k%line/12*6 + r/8*3 + k%3
	}
	return ((rg*steps+k/32)*gemvq4Rows+r)*32 + k%32
}

// TiledParams returns the uint32 (scale, zero) pairs of the tiled params
// of an [N, K] weight with groups of G: [row group][group][16 rows].
func TiledParams(N, K, G int) int { return (N + gemvq4Rows - 1) / gemvq4Rows * (K / G) * gemvq4Rows }

// PackTiles returns the tiled layout of an int-bits [N, K] weight with
// groups of G given in wq's layout (words [N][K/32·bits], params [N][K/G]
// (scale, zero) fp16 pairs): block (rg, st) of the codes holds, in line r,
// words 32·st..32·st+31 of row 16·rg + r (int4, int8; int3: the words
// 24·st..24·st+23 of its 16 rows in v6.1's read order, tiledIndex), zeros
// past the row and for rows past N; the params are [row group][group][16]
// pairs (zeros past N). It is the reference of gemvq4.cu's tile_pack
// (GEMVQ.PackTiles).
func PackTiles(bits, N, K, G int, words []uint32, params []uint16) (tw, tp []uint32, err error) {
	if N <= 0 || K <= 0 || G <= 0 || K%G != 0 || K%gemvq4Tile != 0 || len(words) != N*K/32*bits || len(params) != 2*N*(K/G) {
		return nil, nil, fmt.Errorf("kernels: tiled layout: int%d [%d, %d] G %d with %d words and %d params", bits, N, K, G, len(words), len(params))
	}
	rowWords, groups := K/32*bits, K/G
	steps := gemvq5Steps(bits, K)
	tw = make([]uint32, TiledWords(bits, N, K))
	tp = make([]uint32, TiledParams(N, K, G))
	for n := range N {
		rg, r := n/gemvq4Rows, n%gemvq4Rows
		for k := range rowWords {
			tw[tiledIndex(bits, steps, n, k)] = words[n*rowWords+k]
		}
		for grp := range groups {
			tp[(rg*groups+grp)*gemvq4Rows+r] = uint32(params[2*(n*groups+grp)]) | uint32(params[2*(n*groups+grp)+1])<<16
		}
	}
	return tw, tp, nil
}

// TiledBytes returns the device bytes of an int-bits [N, K] weight with
// groups of G in the tiled layout (codes, then params): wq's bytes
// (N·K/32·bits words, N·K/G pairs) where N is a multiple of 16 and K of
// 256 (int4), more by the padding of the last row group and step.
func TiledBytes(bits, N, K, G int) (words, params int) {
	return 4 * TiledWords(bits, N, K), 4 * TiledParams(N, K, G)
}

// ReadsV6 reports whether v6.1 reads a weight of this width and group over
// K in the tiled layout: int4, int3 and int8 (gemvqTiledBits) where v4
// reads them.
func (g *GEMVQ) ReadsV6(bits, G, K int) bool {
	return gemvqTiledIndex(bits) >= 0 && g.ReadsV4(bits, G, K)
}

// UsesV6 reports whether LaunchTiled runs v6.1 (or v6) for T rows of x over
// a tiled [N, K] weight of this width and group: where Launch runs v5
// (UsesV5: int4), for int3 likewise (one row, none of V2, V3, V4,
// V32Int3, a group v4 reads, at least gemvq4MinGroups row groups), where
// Launch keeps v3.2 over wq's layout (session 15d), and for int8 where
// Launch runs v4.1 (UsesV4), unless V4Int8 (session 16).
func (g *GEMVQ) UsesV6(T, N, K, bits, G int) bool {
	if g.UsesV5(T, N, K, bits, G) {
		return g.ReadsV6(bits, G, K)
	}
	if g.UsesV4(T, N, K, bits, G) {
		return !g.V4Int8 && g.ReadsV6(bits, G, K)
	}
	return bits == 3 && T == 1 && !g.V2 && !g.V3 && !g.V4 && !g.V32Int3 && g.ReadsV6(bits, G, K) &&
		(N+gemvq4Rows-1)/gemvq4Rows >= gemvq4MinGroups
}

// PackTiles writes the tiled layout of an int4, int3 or int8 [N, K] weight in wq's
// layout (words, params) to tw ([TiledWords] uint32) and tp
// ([TiledParams] uint32) on stream st: PackTiles on the device.
func (g *GEMVQ) PackTiles(c *cuda.Ctx, st cuda.Stream, tw, tp, words, params cuda.DevicePtr, N, K, bits, G int) error {
	if N <= 0 || !g.ReadsV6(bits, G, K) {
		return fmt.Errorf("kernels: gemvq tiled layout: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	n := TiledWords(bits, N, K) + TiledParams(N, K, G)
	blocks := min((n+gemvq6PackThreads-1)/gemvq6PackThreads, gemvq6PackBlocks)
	return c.Launch(g.pack[gemvqTiledIndex(bits)], cuda.Dim3{X: blocks}, cuda.Dim3{X: gemvq6PackThreads}, 0, st, words, params, tw, tp, int32(N), int32(K), int32(G))
}

// LaunchV6 is v6 over one row of x with S warps per row group (1, 2, 4
// or 8): tw and tp a weight's tiled layout (PackTiles), the rest as
// LaunchV5; the same sums as LaunchV5 over wq's layout, bit for bit. It
// runs v6.2 (gemv_q7: v6.1 with x split once a CTA, session 23) where x's
// split fits (gemvq7Ring: K up to ~14K), else or with V61 v6.1 (v5.2's
// step), and v6 with V51 (int4; int3 and int8 have v6.1 only: int3's sums
// are v5.0's int3, V5Lanes, bit for bit, int8's v5.1's); v6.2's sums are
// v6.1's, bit for bit.
func (g *GEMVQ) LaunchV6(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias cuda.DevicePtr, N, K, bits, G, S int) error {
	return g.launchV6(c, st, y, x, tw, tp, bias, N, K, bits, G, S, true)
}

// LaunchV61 is LaunchV6 without v6.2: v6.1 (int3: v6.1c, its codes in
// place, where gemvq6cUses, unless V61 or V51), as LaunchTiled runs it at
// the splits that gemvq7Routed leaves to v6.1: for tests.
func (g *GEMVQ) LaunchV61(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias cuda.DevicePtr, N, K, bits, G, S int) error {
	return g.launchV6(c, st, y, x, tw, tp, bias, N, K, bits, G, S, false)
}

// launchV6 is LaunchV6, with v6.2 only where v62 is set.
func (g *GEMVQ) launchV6(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias cuda.DevicePtr, N, K, bits, G, S int, v62 bool) error {
	if N <= 0 || !g.ReadsV6(bits, G, K) {
		return fmt.Errorf("kernels: gemvq v6: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	si := slices.Index(gemvq4Splits[:], S)
	if si < 0 {
		return fmt.Errorf("kernels: gemvq v6: split %d is not one of %v", S, gemvq4Splits)
	}
	rows := gemvq4Rows * gemvq4Warps / S
	grid, block := cuda.Dim3{X: (N + rows - 1) / rows}, cuda.Dim3{X: 32 * gemvq4Warps}
	if ri := g.v7Ring(bits, K); ri >= 0 && v62 {
		smem := gemvq7Shared(bits, K, gemvq7Rings[ri])
		return c.Launch(g.v7[gemvqTiledIndex(bits)][ri][si], grid, block, smem, st,
			x, tw, tp, bias, y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(g.EarlyWeights), int32(smem))
	}
	ring := g.v5Ring[gemvqBitsIndex(bits)]
	return c.Launch(g.v6Func(bits, K, si), grid, block, ring, st,
		x, tw, tp, bias, y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(g.EarlyWeights), int32(ring))
}

// v6.2 (session 23, gemvq4.cu's gemv_q7): v6.1 with x split once a CTA
// into shared memory (hi and lo halves where the mma lanes read them, and
// each tile's Σx), so that a step is the codes' copies, reads, unpack, mma
// and scales; the ring's slots hold no x. The same bits as v6.1.

// gemvq7Rings are the ring depths gemv_q7 is built with, deepest first:
// 5 where two CTAs an SM still fit with x's split (int4 K up to 6784: the
// 8B's gate/up, 4 steps of copies before the dependency wait), else v6.1's
// 4, else 3 (K 14336 of int4 and int8). Session 23's call 2 (H100, gate/up
// S 2 back to back with early loads): int4 12.6 us at 5 against 12.9 at 4,
// int3 11.7 at 5 (alone 16.8 and 16.2 against 15.7 and 15.1).
var gemvq7Rings = [...]int{5, 4, 3}

// gemvq7MinShared is the least dynamic shared memory a gemv_q7 CTA takes:
// more than a third of an SM's 228 KB, so that at most two CTAs share an
// SM. int3's v6.2 at K 4096 with a ring of 4 (70 KB, 80 registers) ran
// three CTAs an SM in call 2: alone faster (15.1 us against 16.2), back to
// back under PDL slower (14.7 against 11.7-12.2 at two), as sessions 15
// and 16 found for v6.1's three-CTA variants.
const gemvq7MinShared = 80 * 1024

// gemvq7SharedMax is the most dynamic shared memory a gemv_q7 CTA takes:
// two CTAs an SM (228 KB, 1 KB reserved a CTA, storeRows' 512 static
// bytes) with room to spare.
const gemvq7SharedMax = 112 * 1024

// gemvq7XChain is gemvq4.cu's kXChain: x's split tiles come in multiples of it.
const gemvq7XChain = 4

// gemvq7Shared is gemv_q7's dynamic shared memory for K with a ring of R
// slots: K/128 tiles of x split (512 bytes and a float each, rounded up to
// gemvq7XChain tiles), then gemvq4Warps rings of R slots without x; at
// least gemvq7MinShared.
func gemvq7Shared(bits, K, R int) int {
	xt := (K/gemvq4Tile + gemvq7XChain - 1) / gemvq7XChain * gemvq7XChain
	u := gemvq5StageTiles(bits)
	slot := u*2*bits*32*4 + u*gemvq4Rows*4
	return max(xt*(512+4)+gemvq4Warps*R*slot, gemvq7MinShared)
}

// gemvq7Ring returns the index in gemvq7Rings of the deepest ring with
// which gemv_q7 fits gemvq7SharedMax for K, -1 if none.
func gemvq7Ring(bits, K int) int { return gemvq7RingOf(gemvq7Rings[:], bits, K) }

// gemvq7RingOf returns the index of the first of rings (deepest first)
// with which gemv_q7 fits gemvq7SharedMax for K, -1 if none.
func gemvq7RingOf(rings []int, bits, K int) int {
	return slices.IndexFunc(rings, func(r int) bool { return gemvq7Shared(bits, K, r) <= gemvq7SharedMax })
}

// v7Ring is the gemvq7Rings index LaunchV6 runs v6.2 with for a tiled
// width over K, -1 where it runs v6.1 or v6: V61, V51 on int4, or a K too
// long for x's split.
func (g *GEMVQ) v7Ring(bits, K int) int {
	if g.V61 || g.V51 && bits == gemvq6Bits || gemvqTiledIndex(bits) < 0 {
		return -1
	}
	return gemvq7Ring(bits, K)
}

// gemvq7Routed reports whether LaunchTiled runs v6.2 (where it fits) for
// a width at split S: int4 and int3 at splits of 1 or 2, where 4-8 row
// groups of a CTA share each slice of x, so that the CTA's one split
// replaces 4-8 warps' (H100, session 23: int4 gate/up S 2 13.3 -> 12.8 us
// back to back, int3 13.3 -> 12.2). At S 4-8 a warp splits as many tiles
// in the prologue as v6.1 does in its steps, and the prologue's barriers and
// K 14336's ring of 3 cost more (int4 down S 8 13.2 -> 15.8 us back to
// back): v6.1 there. int8 (v6.1 already 86-90% back to back) stays on
// v6.1.
func gemvq7Routed(bits, S int) bool { return S <= 2 && (bits == 4 || bits == 3) }

// gemvq7Expr is gemv_q7's name expression for a code width, split s and
// ring depth r.
func gemvq7Expr(bits, s, r int) string { return fmt.Sprintf("gemvq4::gemv_q7<%d, %d, %d>", bits, s, r) }

// v6.1c (session 24, gemv_q5's XC): v6.1 with int3's codes unpacked in
// place (gemvq4.cu codesSpanX, v6.2's: 362 -> 328 SASS instructions an
// int3 step, NVRTC 12.5), the same codes and so v6.1's bits. LaunchV6 runs
// it for int3 where it runs v6.1 and gemvq6cUses, unless V61 or V51.

// gemvq6cMinSteps is the fewest ring steps a warp takes for which v6.1c
// runs in place of v6.1. H100, session 24's two calls, back to back with
// early loads: at 4-14 steps a warp (down at splits 4 and 8, q|k|v and o at
// split 4) v6.1c is 0.1-0.5 us faster (int3 down S 8 12.1 -> 11.9-12.0 us);
// at 2 (o and q|k|v at split 8) 0.1-0.3 us slower (alone 0.2-1.2), though
// it issues fewer instructions: not understood.
const gemvq6cMinSteps = 4

// gemvq6cUses reports whether LaunchV6 runs v6.1c (not v6.1) for an int3
// weight over K at split S: a warp's slice of at least gemvq6cMinSteps
// steps.
func gemvq6cUses(K, S int) bool {
	return (gemvq5Steps(gemvq6cBits, K)+S-1)/S >= gemvq6cMinSteps
}

// gemvq6cBits is the code width v6.1c is built for (its unpack differs
// from v6.1's for int3 only).
const gemvq6cBits = 3

// gemvq6cExpr is v6.1c's name expression at split s.
func gemvq6cExpr(s int) string {
	return fmt.Sprintf("gemvq4::gemv_q5<%d, %d, true, true, false, true, true>", gemvq6cBits, s)
}

// LaunchTiled is Launch over a weight in the tiled layout (tw, tp:
// PackTiles' output) for T <= GEMVQMaxRows rows of x: v6 (v6.1 unless
// V51; v6.2 where gemvq7Routed and it fits, unless V61) at SplitV5For's
// split where UsesV6 (one row), else v2 over the tiled
// layout at Launch's v2 split (gemvqSplitFor). The same bits as Launch
// over wq's layout wherever Launch runs v5 or v2 (T >= 2, or V2 set);
// with V3 or V4 set, one row runs v2 here where Launch runs v3 (int3 at
// one row: v6.1 where Launch runs v3.2, within v4's bound, not its bits).
func (g *GEMVQ) LaunchTiled(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias cuda.DevicePtr, T, N, K, bits, G int) error {
	if g.UsesV6(T, N, K, bits, G) {
		S := g.SplitV5For(N, K, bits)
		return g.launchV6(c, st, y, x, tw, tp, bias, N, K, bits, G, S, gemvq7Routed(bits, S))
	}
	return g.LaunchSplitTiled(c, st, y, x, tw, tp, bias, T, N, K, bits, G, gemvqSplitFor(N, K))
}

// LaunchSplitTiled is LaunchSplit (v2 with S warps per CTA) over a weight
// in the tiled layout: the same sums as LaunchSplit over wq's, bit for
// bit.
func (g *GEMVQ) LaunchSplitTiled(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias cuda.DevicePtr, T, N, K, bits, G, S int) error {
	if T < 1 || T > GEMVQMaxRows || N <= 0 || !g.ReadsV6(bits, G, K) {
		return fmt.Errorf("kernels: gemvq tiled: T=%d N=%d K=%d bits=%d G=%d has no kernel", T, N, K, bits, G)
	}
	nt := (T + 7) / 8
	S, si, err := gemvqSplitFit(S, nt)
	if err != nil {
		return fmt.Errorf("kernels: gemvq tiled: %w", err)
	}
	return c.Launch(g.gemvT[gemvqTiledIndex(bits)][nt-1][si], cuda.Dim3{X: (N + gemvqRows - 1) / gemvqRows}, cuda.Dim3{X: 32 * S}, 0, st,
		x, tw, tp, bias, y, int32(T), int32(N), int32(K), int32(G))
}

// DequantTiled is Dequant over a weight in the tiled layout: the same
// fp16 [N][K].
func (g *GEMVQ) DequantTiled(c *cuda.Ctx, st cuda.Stream, out, tw, tp cuda.DevicePtr, N, K, bits, G int) error {
	if N <= 0 || !g.ReadsV6(bits, G, K) {
		return fmt.Errorf("kernels: gemvq tiled dequant: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	fn := g.dequantT[gemvqTiledIndex(bits)]
	if g.DequantScalar {
		fn = g.dequantTS[gemvqTiledIndex(bits)]
	}
	return c.Launch(fn, gemvqDequantGrid(N, K), cuda.Dim3{X: gemvqDequantThreads}, 0, st, tw, tp, out, int32(N), int32(K), int32(G))
}

// InfoV6 returns the resources of the kernel LaunchV6 runs for a code
// width over K at split S (v6.2 where v7Ring finds a ring, else v6.1
// unless V51 and int4, int3's v6.1c).
func (g *GEMVQ) InfoV6(c *cuda.Ctx, bits, K, S int) (cuda.FuncInfo, error) {
	si := slices.Index(gemvq4Splits[:], S)
	if si < 0 || gemvqTiledIndex(bits) < 0 {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq v6: no kernel for bits=%d split %d", bits, S)
	}
	if ri := g.v7Ring(bits, K); ri >= 0 {
		return c.FuncInfo(g.v7[gemvqTiledIndex(bits)][ri][si])
	}
	return c.FuncInfo(g.v6Func(bits, K, si))
}

// v6Func is v6's kernel for a tiled code width over K at split index si:
// v6.1 unless V51 and int4 (int3 and int8 have no v6.1-less form); int3's
// v6.1c where gemvq6cUses, unless V61 or V51.
func (g *GEMVQ) v6Func(bits, K, si int) cuda.Function {
	if g.V51 && bits == gemvq6Bits {
		return g.v6[si]
	}
	if bits == gemvq6cBits && !g.V61 && !g.V51 && gemvq6cUses(K, gemvq4Splits[si]) {
		return g.v6c[si]
	}
	return g.v6n[gemvqTiledIndex(bits)][si]
}

// GEMVQDiag holds the forms of gemv_q5 for one code width (int4 or int8)
// that `bitdecode bench gemvq --diag` times (docs/perf/gemvq.md, sessions
// 15, 15b and 16): v5.1, its copies alone (no math) over wq's layout and
// over the tiled one, v6, v5.2 and v6.1 (LEAN), and v4.1 (gemv_q4 over
// wq's layout: int8's route at one row before session 16). A bench tool,
// compiled on its own (one small module).
type GEMVQDiag struct {
	fns   [len(GEMVQDiagForms)][len(gemvq4Splits)]cuda.Function
	fns7  [len(gemvq7Rings)][len(gemvq4Splits)]cuda.Function // v6.2 at each ring depth
	rings [len(gemvq7Rings)]int                              // v6.2's ring depths (gemvq7Rings, or -DGEMVQ7_DEEP=n for the deepest)
	ring  int
	bits  int
}

// gemvq7DiagRings returns v6.2's ring depths for the diagnostic: gemvq7Rings,
// with the deepest replaced by n where opts hold -DGEMVQ7_DEEP=n (n > 1; a
// Go-side knob, gemvq4.cu ignores the macro).
func gemvq7DiagRings(opts []string) [len(gemvq7Rings)]int {
	r := gemvq7Rings
	for _, o := range opts {
		var n int
		if _, err := fmt.Sscanf(o, "-DGEMVQ7_DEEP=%d", &n); err == nil && n > 1 {
			r[0] = n
		}
	}
	return r
}

// GEMVQDiagForms name GEMVQDiag's forms, in its index order: "v5.1",
// "loads" (v5.1's copies, no math), "loads-tiled" (the same over the
// tiled layout), "v6", "v5.2" (v5.1's LEAN step), "v6.1" (v6's), "v4.1"
// (gemv_q4, session 16), "v6.2" (gemv_q7, session 23), "v6.1c" (v6.1
// with int3's codes in place, session 24; int3 only).
var GEMVQDiagForms = [...]string{"v5.1", "loads", "loads-tiled", "v6", "v5.2", "v6.1", "v4.1", "v6.2", "v6.1c"}

// gemvqDiagV4, gemvqDiagV62 and gemvqDiagV61c are the indices of the
// v4.1, v6.2 and v6.1c forms in GEMVQDiagForms.
const (
	gemvqDiagV4   = 6
	gemvqDiagV62  = 7
	gemvqDiagV61c = 8
)

// GEMVQDiagTiled reports whether form f reads the tiled layout.
func GEMVQDiagTiled(f int) bool {
	return f == 2 || f == 3 || f == 5 || f == gemvqDiagV62 || f == gemvqDiagV61c
}

// gemvqDiagLoads and gemvqDiagLean report whether form f is a copies-only
// form and a LEAN one.
func gemvqDiagLoads(f int) bool { return f == 1 || f == 2 }
func gemvqDiagLean(f int) bool  { return f == 4 || f == 5 }

// GEMVQDiagBits reports whether the diagnostic forms are built for a code
// width: the coalesced copies' widths (int4, int8) and int3 (v6.1 and v6.2
// only, GEMVQDiagBuilt).
func GEMVQDiagBits(bits int) bool { return bits == 4 || bits == 8 || bits == 3 }

// GEMVQDiagBuilt reports whether form f is built for a code width: every
// form but v6.1c for int4 and int8, v6.1, v6.2 and v6.1c for int3 (its
// other forms need the coalesced copies of 16-byte spans).
func GEMVQDiagBuilt(bits, f int) bool {
	if f == gemvqDiagV61c {
		return bits == gemvq6cBits
	}
	return bits != 3 || f == 5 || f == gemvqDiagV62
}

// LoadGEMVQDiag compiles gemvq4.cu's gemv_q5 for an int4, int8 or int3
// weight in GEMVQDiagForms' forms (GEMVQDiagBuilt) at every split, with
// extra NVRTC options (its knobs: -DGEMVQ5_STAGES=n, -DGEMVQ5_MIN_BLOCKS=n).
func LoadGEMVQDiag(dev *cuda.Device, bits int, opts ...string) (*GEMVQDiag, error) {
	if !GEMVQDiagBits(bits) {
		return nil, fmt.Errorf("kernels: gemvq diag: no forms for int%d", bits)
	}
	expr := func(f, s int) string {
		if f == gemvqDiagV4 {
			return fmt.Sprintf("gemvq4::gemv_q4<%d, %d>", bits, s)
		}
		if f == gemvqDiagV61c {
			return gemvq6cExpr(s) // int3 only (GEMVQDiagBuilt)
		}
		return fmt.Sprintf("gemvq4::gemv_q5<%d, %d, true, %v, %v, %v>", bits, s, GEMVQDiagTiled(f), gemvqDiagLoads(f), gemvqDiagLean(f))
	}
	rings := gemvq7DiagRings(opts)
	var exprs []string
	for f := range GEMVQDiagForms {
		for _, s := range gemvq4Splits {
			if f == gemvqDiagV62 {
				for _, r := range rings {
					exprs = append(exprs, gemvq7Expr(bits, s, r))
				}
			} else if GEMVQDiagBuilt(bits, f) {
				exprs = append(exprs, expr(f, s))
			}
		}
	}
	mod, err := dev.Compile(program("gemvq4.cu", gemvq4Source, exprs, opts, cuda.Header{Name: "gemvq.cu", Source: gemvqSource}))
	if err != nil {
		return nil, err
	}
	d := &GEMVQDiag{ring: gemvq5RingBytes(bits, opts), bits: bits, rings: rings}
	for f := range GEMVQDiagForms {
		for si, s := range gemvq4Splits {
			if f == gemvqDiagV62 {
				for ri, r := range rings {
					if d.fns7[ri][si], err = mod.Function(gemvq7Expr(bits, s, r)); err != nil {
						return nil, err
					}
				}
				d.fns[f][si] = d.fns7[0][si]
			} else if GEMVQDiagBuilt(bits, f) {
				if d.fns[f][si], err = mod.Function(expr(f, s)); err != nil {
					return nil, err
				}
			}
		}
	}
	return d, dev.Do(func(c *cuda.Ctx) error {
		for f := range GEMVQDiagForms {
			if f == gemvqDiagV4 || !GEMVQDiagBuilt(bits, f) {
				continue // static shared memory only, or not built
			}
			for si := range gemvq4Splits {
				fns, most := []cuda.Function{d.fns[f][si]}, d.ring
				if f == gemvqDiagV62 {
					fns, most = nil, gemvq7SharedMax
					for ri := range d.rings {
						fns = append(fns, d.fns7[ri][si])
					}
				}
				for _, fn := range fns {
					if err := c.SetMaxDynamicShared(fn, most); err != nil {
						return fmt.Errorf("kernels: gemvq diag: %w", err)
					}
				}
			}
		}
		return nil
	})
}

// Launch runs form f at split S over the diagnostic's code width's [N, K]
// weight with groups of G (words and params in the form's layout), early
// as GEMVQ.EarlyWeights.
func (d *GEMVQDiag) Launch(c *cuda.Ctx, st cuda.Stream, f int, y, x, words, params cuda.DevicePtr, N, K, G, S int, early bool) error {
	si := slices.Index(gemvq4Splits[:], S)
	if f < 0 || f >= len(GEMVQDiagForms) || !GEMVQDiagBuilt(d.bits, f) || si < 0 || gemvq4Shift(G, K) < 0 {
		return fmt.Errorf("kernels: gemvq diag: form %d split %d G %d K %d has no kernel", f, S, G, K)
	}
	rows := gemvq4Rows * gemvq4Warps / S
	grid, block := cuda.Dim3{X: (N + rows - 1) / rows}, cuda.Dim3{X: 32 * gemvq4Warps}
	if f == gemvqDiagV4 {
		return c.Launch(d.fns[f][si], grid, block, 0, st, x, words, params, cuda.DevicePtr(0), y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(early))
	}
	fn, smem := d.fns[f][si], d.ring
	if f == gemvqDiagV62 {
		ri := gemvq7RingOf(d.rings[:], d.bits, K)
		if ri < 0 {
			return fmt.Errorf("kernels: gemvq diag: v6.2 has no ring for int%d K %d", d.bits, K)
		}
		fn, smem = d.fns7[ri][si], gemvq7Shared(d.bits, K, d.rings[ri])
	}
	return c.Launch(fn, grid, block, smem, st,
		x, words, params, cuda.DevicePtr(0), y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(early), int32(smem))
}

// Info returns the resources of form f at split S (v6.2: its deepest ring).
func (d *GEMVQDiag) Info(c *cuda.Ctx, f, S int) (cuda.FuncInfo, error) {
	si := slices.Index(gemvq4Splits[:], S)
	if f < 0 || f >= len(GEMVQDiagForms) || !GEMVQDiagBuilt(d.bits, f) || si < 0 {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq diag: no form %d split %d", f, S)
	}
	return c.FuncInfo(d.fns[f][si])
}

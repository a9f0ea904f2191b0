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
// v5.1's, so v6's sums are v5.1's bit for bit. wq's layout stays what the
// CPU, DEC, the other GEMVs and the dequantization read: a weight run by
// v6 keeps both copies.

// gemvq6Bits is the code width v6 and tile_pack are instantiated for.
const gemvq6Bits = 4

// gemvq6Expr is the name expression of gemv_q5 over the tiled layout at
// split s (loads: the bench's loads-only form).
func gemvq6Expr(s int, loads bool) string {
	return fmt.Sprintf("gemvq4::gemv_q5<%d, %d, true, true, %v>", gemvq6Bits, s, loads)
}

// gemvq6PackExpr is tile_pack's name expression.
var gemvq6PackExpr = fmt.Sprintf("gemvq4::tile_pack<%d>", gemvq6Bits)

// gemvq6sExpr is gemv_q6s's name expression (v6s: v6 cut evenly over the
// resident warps).
var gemvq6sExpr = fmt.Sprintf("gemvq4::gemv_q6s<%d>", gemvq6Bits)

// gemvq6sMaxGroups is the most row groups of 16 rows v6s takes (its
// counters: 4 bytes each).
const gemvq6sMaxGroups = 1 << 16

// gemvq6sMinBlocks is the fewest 2 KB blocks a warp of v6s gets where
// Launch's routes take it (UsesV6S): the int4 8B gate/up and down (14336
// blocks over the H100's 2112 v5 warps: 6.8 each) but not q/o (4096: 1.9).
const gemvq6sMinBlocks = 2

// streamK is v6s's workspace: part [warps][2][16] float32 partial sums
// and count [gemvq6sMaxGroups] uint32 arrival counters, zero between
// launches (each launch leaves them so).
type streamK struct {
	part, count cuda.DevicePtr
	warps       int
}

// newStreamK allocates a workspace for up to warps warps and zeroes its
// counters on stream st (waited for). It lives as long as the device.
func newStreamK(c *cuda.Ctx, st cuda.Stream, warps int) (streamK, error) {
	sk := streamK{warps: warps}
	var err error
	if sk.part, err = c.Alloc(4 * 2 * gemvq4Rows * warps); err != nil {
		return sk, err
	}
	if sk.count, err = c.Alloc(4 * gemvq6sMaxGroups); err != nil {
		return sk, err
	}
	if err := c.Memset32Async(sk.count, 0, gemvq6sMaxGroups, st); err != nil {
		return sk, err
	}
	return sk, c.SyncStream(st)
}

// tiledBlocks is the 2 KB blocks of the tiled codes of an int-bits [N, K]
// weight (row groups times steps).
func tiledBlocks(bits, N, K int) int {
	u := gemvq5StageTiles(bits)
	return (N + gemvq4Rows - 1) / gemvq4Rows * ((K/gemvq4Tile + u - 1) / u)
}

// launchStreamK launches fn (gemv_q6s) over W warps (clamped to the
// workspace's and to the blocks; <= 0: all of the workspace's).
func launchStreamK(c *cuda.Ctx, st cuda.Stream, fn cuda.Function, sk streamK, ring int, y, x, tw, tp, bias cuda.DevicePtr, N, K, bits, G, W int, early bool) error {
	if (N+gemvq4Rows-1)/gemvq4Rows > gemvq6sMaxGroups {
		return fmt.Errorf("kernels: gemvq v6s: %d rows pass its %d row groups", N, gemvq6sMaxGroups)
	}
	if W <= 0 || W > sk.warps {
		W = sk.warps
	}
	W = min(W, tiledBlocks(bits, N, K))
	return c.Launch(fn, cuda.Dim3{X: (W + gemvq4Warps - 1) / gemvq4Warps}, cuda.Dim3{X: 32 * gemvq4Warps}, ring, st,
		x, tw, tp, bias, y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(early), int32(ring), sk.part, sk.count, int32(W))
}

// UsesV6S reports whether a weight with a tiled copy runs v6s rather than
// v6 at one row of x: where UsesV5 and each of the resident warps gets
// gemvq6sMinBlocks blocks or more.
func (g *GEMVQ) UsesV6S(T, N, K, bits, G int) bool {
	return g.UsesV5(T, N, K, bits, G) && g.ReadsV6(bits, G, K) && tiledBlocks(bits, N, K) >= gemvq6sMinBlocks*g.sk.warps &&
		(N+gemvq4Rows-1)/gemvq4Rows <= gemvq6sMaxGroups
}

// LaunchV6S is v6s over one row of x: tw and tp a weight's tiled layout,
// its blocks cut evenly over W warps (<= 0: the v5 warps the GPU holds at
// once); launches must not overlap (they share the GEMVQ's workspace: one
// stream). Its sums are v6's per tile, a row group's warps' partials
// added in order.
func (g *GEMVQ) LaunchV6S(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias cuda.DevicePtr, N, K, bits, G, W int) error {
	if N <= 0 || !g.ReadsV6(bits, G, K) {
		return fmt.Errorf("kernels: gemvq v6s: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	return launchStreamK(c, st, g.v6s, g.sk, g.v5Ring[gemvqBitsIndex(bits)], y, x, tw, tp, bias, N, K, bits, G, W, g.EarlyWeights)
}

// InfoV6S returns the resources of v6s's kernel.
func (g *GEMVQ) InfoV6S(c *cuda.Ctx) (cuda.FuncInfo, error) { return c.FuncInfo(g.v6s) }

// gemvq6PackThreads is tile_pack's block size; gemvq6PackBlocks its most
// CTAs (a grid-stride loop).
const (
	gemvq6PackThreads = 256
	gemvq6PackBlocks  = 4096
)

// TiledWords returns the uint32 words of the tiled codes of an int-bits
// [N, K] weight: a block of gemvq4Rows lines of 32 words for each row
// group of 16 rows and each ring step of gemvq5StageTiles tiles.
func TiledWords(bits, N, K int) int {
	u := gemvq5StageTiles(bits)
	steps := (K/gemvq4Tile + u - 1) / u
	return (N + gemvq4Rows - 1) / gemvq4Rows * steps * gemvq4Rows * 32
}

// TiledParams returns the uint32 (scale, zero) pairs of the tiled params
// of an [N, K] weight with groups of G: [row group][group][16 rows].
func TiledParams(N, K, G int) int { return (N + gemvq4Rows - 1) / gemvq4Rows * (K / G) * gemvq4Rows }

// PackTiles returns the tiled layout of an int-bits [N, K] weight with
// groups of G given in wq's layout (words [N][K/32·bits], params [N][K/G]
// (scale, zero) fp16 pairs): block (rg, st) of the codes holds, in line r,
// words 32·st..32·st+31 of row 16·rg + r (zeros past the row and for rows
// past N); the params are [row group][group][16] pairs (zeros past N).
// It is the reference of gemvq4.cu's tile_pack (GEMVQ.PackTiles).
func PackTiles(bits, N, K, G int, words []uint32, params []uint16) (tw, tp []uint32, err error) {
	if N <= 0 || K <= 0 || G <= 0 || K%G != 0 || K%gemvq4Tile != 0 || len(words) != N*K/32*bits || len(params) != 2*N*(K/G) {
		return nil, nil, fmt.Errorf("kernels: tiled layout: int%d [%d, %d] G %d with %d words and %d params", bits, N, K, G, len(words), len(params))
	}
	rowWords, groups := K/32*bits, K/G
	u := gemvq5StageTiles(bits)
	steps := (K/gemvq4Tile + u - 1) / u
	tw = make([]uint32, TiledWords(bits, N, K))
	tp = make([]uint32, TiledParams(N, K, G))
	for n := range N {
		rg, r := n/gemvq4Rows, n%gemvq4Rows
		for k := range rowWords {
			st, w := k/32, k%32
			tw[((rg*steps+st)*gemvq4Rows+r)*32+w] = words[n*rowWords+k]
		}
		for grp := range groups {
			tp[(rg*groups+grp)*gemvq4Rows+r] = uint32(params[2*(n*groups+grp)]) | uint32(params[2*(n*groups+grp)+1])<<16
		}
	}
	return tw, tp, nil
}

// ReadsV6 reports whether v6 reads a weight of this width and group over
// K: int4 (gemvq6Bits) where v4 reads it.
func (g *GEMVQ) ReadsV6(bits, G, K int) bool { return bits == gemvq6Bits && g.ReadsV4(bits, G, K) }

// PackTiles writes the tiled layout of an int4 [N, K] weight in wq's
// layout (words, params) to tw ([TiledWords] uint32) and tp
// ([TiledParams] uint32) on stream st: PackTiles on the device.
func (g *GEMVQ) PackTiles(c *cuda.Ctx, st cuda.Stream, tw, tp, words, params cuda.DevicePtr, N, K, bits, G int) error {
	if N <= 0 || !g.ReadsV6(bits, G, K) {
		return fmt.Errorf("kernels: gemvq tiled layout: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	n := TiledWords(bits, N, K) + TiledParams(N, K, G)
	blocks := min((n+gemvq6PackThreads-1)/gemvq6PackThreads, gemvq6PackBlocks)
	return c.Launch(g.pack, cuda.Dim3{X: blocks}, cuda.Dim3{X: gemvq6PackThreads}, 0, st, words, params, tw, tp, int32(N), int32(K), int32(G))
}

// LaunchV6 is v6 over one row of x with S warps per row group (1, 2, 4
// or 8): tw and tp a weight's tiled layout (PackTiles), the rest as
// LaunchV5; the same sums as LaunchV5 over wq's layout, bit for bit.
func (g *GEMVQ) LaunchV6(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias cuda.DevicePtr, N, K, bits, G, S int) error {
	if N <= 0 || !g.ReadsV6(bits, G, K) {
		return fmt.Errorf("kernels: gemvq v6: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	si := slices.Index(gemvq4Splits[:], S)
	if si < 0 {
		return fmt.Errorf("kernels: gemvq v6: split %d is not one of %v", S, gemvq4Splits)
	}
	rows := gemvq4Rows * gemvq4Warps / S
	ring := g.v5Ring[gemvqBitsIndex(bits)]
	return c.Launch(g.v6[si], cuda.Dim3{X: (N + rows - 1) / rows}, cuda.Dim3{X: 32 * gemvq4Warps}, ring, st,
		x, tw, tp, bias, y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(g.EarlyWeights), int32(ring))
}

// InfoV6 returns the resources of v6's kernel at split S.
func (g *GEMVQ) InfoV6(c *cuda.Ctx, S int) (cuda.FuncInfo, error) {
	si := slices.Index(gemvq4Splits[:], S)
	if si < 0 {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq v6: no kernel for split %d", S)
	}
	return c.FuncInfo(g.v6[si])
}

// GEMVQDiag holds the int4 forms of gemv_q5 that `bitdecode bench gemvq
// --diag` times (docs/perf/gemvq.md, session 15): v5.1, its copies alone
// (no math) over wq's layout and over the tiled one, and v6. A bench tool,
// compiled on its own (one small module).
type GEMVQDiag struct {
	fns  [gemvqDiagSplitForms][len(gemvq4Splits)]cuda.Function
	v6s  cuda.Function
	sk   streamK
	ring int
}

// GEMVQDiagForms name GEMVQDiag's forms, in its index order: "v5.1",
// "loads" (v5.1's copies, no math), "loads-tiled" (the same over the
// tiled layout), "v6", "v6s" (v6 cut evenly over the resident warps: no
// split).
var GEMVQDiagForms = [...]string{"v5.1", "loads", "loads-tiled", "v6", "v6s"}

// gemvqDiagSplitForms is the forms with a split (all but v6s).
const gemvqDiagSplitForms = 4

// GEMVQDiagV6S is v6s's index in GEMVQDiagForms.
const GEMVQDiagV6S = gemvqDiagSplitForms

// GEMVQDiagTiled reports whether form f reads the tiled layout.
func GEMVQDiagTiled(f int) bool { return f >= 2 }

// LoadGEMVQDiag compiles gemvq4.cu's int4 gemv_q5 in GEMVQDiagForms' forms
// at every split, with extra NVRTC options (its knobs: -DGEMVQ5_STAGES=n,
// -DGEMVQ5_MIN_BLOCKS=n).
func LoadGEMVQDiag(dev *cuda.Device, opts ...string) (*GEMVQDiag, error) {
	expr := func(f, s int) string {
		return fmt.Sprintf("gemvq4::gemv_q5<%d, %d, true, %v, %v>", gemvq6Bits, s, GEMVQDiagTiled(f), f == 1 || f == 2)
	}
	exprs := []string{gemvq6sExpr}
	for f := range gemvqDiagSplitForms {
		for _, s := range gemvq4Splits {
			exprs = append(exprs, expr(f, s))
		}
	}
	mod, err := dev.Compile(program("gemvq4.cu", gemvq4Source, exprs, opts, cuda.Header{Name: "gemvq.cu", Source: gemvqSource}))
	if err != nil {
		return nil, err
	}
	d := &GEMVQDiag{ring: gemvq5RingBytes(gemvq6Bits, opts)}
	for f := range gemvqDiagSplitForms {
		for si, s := range gemvq4Splits {
			if d.fns[f][si], err = mod.Function(expr(f, s)); err != nil {
				return nil, err
			}
		}
	}
	if d.v6s, err = mod.Function(gemvq6sExpr); err != nil {
		return nil, err
	}
	return d, dev.Do(func(c *cuda.Ctx) error {
		for f := range gemvqDiagSplitForms {
			for si := range gemvq4Splits {
				if err := c.SetMaxDynamicShared(d.fns[f][si], d.ring); err != nil {
					return fmt.Errorf("kernels: gemvq diag: %w", err)
				}
			}
		}
		if err := c.SetMaxDynamicShared(d.v6s, d.ring); err != nil {
			return fmt.Errorf("kernels: gemvq diag: %w", err)
		}
		n, err := c.MaxActiveBlocksPerSM(d.v6s, 32*gemvq4Warps, d.ring)
		if err != nil {
			return err
		}
		d.sk, err = newStreamK(c, dev.Stream(), max(1, n)*gemvq4Warps*dev.SMs())
		return err
	})
}

// Launch runs form f at split S (v6s: over all its resident warps, S
// unused) over an int4 [N, K] weight with groups of G (words and params
// in the form's layout), early as GEMVQ.EarlyWeights.
func (d *GEMVQDiag) Launch(c *cuda.Ctx, st cuda.Stream, f int, y, x, words, params cuda.DevicePtr, N, K, G, S int, early bool) error {
	if f == GEMVQDiagV6S {
		return launchStreamK(c, st, d.v6s, d.sk, d.ring, y, x, words, params, 0, N, K, gemvq6Bits, G, 0, early)
	}
	si := slices.Index(gemvq4Splits[:], S)
	if f < 0 || f >= len(GEMVQDiagForms) || si < 0 || gemvq4Shift(G, K) < 0 {
		return fmt.Errorf("kernels: gemvq diag: form %d split %d G %d K %d has no kernel", f, S, G, K)
	}
	rows := gemvq4Rows * gemvq4Warps / S
	return c.Launch(d.fns[f][si], cuda.Dim3{X: (N + rows - 1) / rows}, cuda.Dim3{X: 32 * gemvq4Warps}, d.ring, st,
		x, words, params, cuda.DevicePtr(0), y, int32(N), int32(K), int32(gemvq4Shift(G, K)), flagArg(early), int32(d.ring))
}

// Info returns the resources of form f at split S.
func (d *GEMVQDiag) Info(c *cuda.Ctx, f, S int) (cuda.FuncInfo, error) {
	if f == GEMVQDiagV6S {
		return c.FuncInfo(d.v6s)
	}
	si := slices.Index(gemvq4Splits[:], S)
	if f < 0 || f >= len(GEMVQDiagForms) || si < 0 {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemvq diag: no form %d split %d", f, S)
	}
	return c.FuncInfo(d.fns[f][si])
}

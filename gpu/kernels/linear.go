package kernels

import (
	_ "embed"
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed linear.cu
var linearSource string

// Tile constants of linear.cu.
const (
	// linearM is linear.cu's kM: output channels per m-tile (one CTA).
	linearM = 16
	// linearN is linear.cu's kN: tokens per n-tile.
	linearN = 8
	// linearSplit is linear.cu's kSplit: warps per CTA, one class of
	// 128-channel k-blocks each.
	linearSplit = 8
	// LinearTunedMaxRows is the most rows for which Linear.EarlyWeights
	// and Linear.Persistent apply, and the backend folds SwiGLU and RoPE
	// into a narrow launch: one n-tile, the instantiation measured at one
	// row (docs/perf/decode-step.md v30); 9-16 rows (two n-tiles, more
	// registers) keep v4's launches until measured.
	LinearTunedMaxRows = linearN
	// LinearMaxGroups is the most weights one Linear launch computes.
	LinearMaxGroups = 3
	// LinearNarrowMaxRows is the most rows linear.cu's narrow kernel
	// takes (NT = 2 n-tiles); more rows go to the wide kernel, which needs
	// an fp16 copy of x (LinearScratchBytes).
	LinearNarrowMaxRows = 16
	// linearWideWarps and linearWideTokens are the wide kernel's CTA
	// tile: kWideWarps m-tiles by kWideTokens tokens.
	linearWideWarps  = 8
	linearWideTokens = 64
	// linearTileM is the tiled wide kernel's kTileM: channels (m-tiles x
	// 16) a CTA.
	linearTileM = 128
	// linearTiledSmallMaxRows is the most rows the tiled wide kernel
	// takes in 64-token CTAs (linearTiledBNs[0]); more take 128.
	linearTiledSmallMaxRows = 64
	// linearStageK is linear.cu's kStageK: k a ring stage.
	linearStageK = 64
)

// linearTiledBNs are the tiled wide kernel's token tiles (BN) and
// linearWideSplits its cluster sizes S (1: no cluster), as instantiated.
var (
	linearTiledBNs   = [...]int{64, 128}
	linearWideSplits = [...]int{1, 2, 4, 8}
)

// The tiled wide kernel's deep-ring variant (v8): BN 64 in clusters of
// linearDeepSplit CTAs with a ring of linearDeepStages (linear.cu's
// kDeepStages) stages, one CTA an SM (linear_f16_tiled_c<64, 2, true>).
const (
	linearDeepSplit  = 2
	linearDeepStages = 8
)

// linearDeepSmem is the deep variant's dynamic shared memory: the ring of
// linearDeepStages BN-64 stages and one accumulator tile (224 KiB).
const linearDeepSmem = linearDeepStages*(linearTileM+64)*linearStageK*2 + linearTileM*64*4

// linearTiledStages is TiledShape<BN, S, KS>::kStages for token tile
// linearTiledBNs[bi] and stage k ks: 3 at BN 64 or in 128-k stages, else 4.
func linearTiledStages(bi, ks int) int {
	if ks == 2*linearStageK || linearTiledBNs[bi] == 64 {
		return 3
	}
	return 4
}

// linearTiledSmem is the dynamic shared memory of linear_f16_tiled at
// token tile linearTiledBNs[bi], cluster size S and stage k ks: the ring,
// and with S > 1 one accumulator tile (TiledShape's kRingBytes, kRedBytes).
func linearTiledSmem(bi, S, ks int) int {
	bn := linearTiledBNs[bi]
	n := linearTiledStages(bi, ks) * (linearTileM + bn) * ks * 2
	if S > 1 {
		n += linearTileM * bn * 4
	}
	return n
}

// linearTiledMaxSmem is the most dynamic shared memory a tiled wide
// kernel takes (BN 128 in a cluster, or in 128-k stages: 192 KiB); a
// device that gives a block less runs v3's wide kernel.
var linearTiledMaxSmem = max(linearTiledSmem(1, 2, linearStageK), linearTiledSmem(1, 1, 2*linearStageK))

// linearNTs are the n-tiles per CTA the narrow kernel is instantiated
// with; a launch of T <= LinearNarrowMaxRows rows takes the first that
// covers T.
var linearNTs = [...]int{1, 2}

// linear.cu's pair kernels' modes (kPairGLU, kPairRoPE).
const (
	linearPairGLU = iota
	linearPairRoPE
	linearPairModes
)

// Linear holds linear.cu's batch-invariant tensor-core kernels: y = x·Wᵀ +
// bias for any number of rows, each row's result bitwise independent of
// the others and of T.
type Linear struct {
	fns         [len(linearNTs)]cuda.Function
	pairs       [len(linearNTs)][linearPairModes]cuda.Function
	wide, toF16 cuda.Function
	// tiled[bi][si] is the tiled wide kernel (v7) at token tile
	// linearTiledBNs[bi] and cluster size linearWideSplits[si]; the
	// clustered ones (si > 0) only where the device has clusters (zero
	// Function otherwise). tiledResident is how many CTAs of each fit on
	// the GPU at once.
	tiled         [len(linearTiledBNs)][len(linearWideSplits)]cuda.Function
	tiledResident [len(linearTiledBNs)][len(linearWideSplits)]int
	// tiledPerSM is how many CTAs of each fit on one SM; clusters
	// whether the clustered ones were loaded; noTiled that the device's
	// shared memory a block is too small for the tiled kernels (v3 runs
	// instead).
	tiledPerSM [len(linearTiledBNs)][len(linearWideSplits)]int
	clusters   bool
	noTiled    bool
	// tiledK is linear_f16_tiled<128, 128>: BN 128 without a cluster in
	// 128-k stages (one barrier a k-block), tiledFor's choice there.
	tiledK cuda.Function
	// deep is the deep-ring variant (loaded with clusters; hasDeep where
	// the device gives a block linearDeepSmem), deepResident how many CTAs
	// of it fit on the GPU at once.
	deep         cuda.Function
	deepResident int
	hasDeep      bool
	// WideV3 makes launches of more than LinearNarrowMaxRows rows run v3's
	// wide kernel (linear_f16_wide: one m-tile a warp, weights straight to
	// registers) instead of the tiled one; the same bits (tests, A/B). v3
	// also runs where the device gives a block less shared memory than
	// the tiled kernels take (noTiled).
	WideV3 bool
	// forceBN, forceSplit and forceStageK, when nonzero, pin the tiled
	// kernel's token tile, cluster size and stage k (ForceWide and
	// ForceWideStage, in tests); forceDeep 1 pins the deep-ring variant
	// (with forceSplit), -1 keeps it off, 0 leaves it to tiledFor
	// (ForceWideDeep).
	forceBN, forceSplit, forceStageK, forceDeep int
	// EarlyWeights makes the narrow kernels (LinearTunedMaxRows rows or
	// fewer, the pair kernels too) load each warp's first k-block of
	// weights before their dependency wait, so that it overlaps the
	// kernel ahead under programmatic dependent launch (the backend's
	// weights are written only at load, which ends in a stream sync); and
	// the tiled wide kernels (more than LinearNarrowMaxRows rows) issue
	// their ring's first stages of weights before theirs (v8: overlapping
	// x's conversion). The same loads and bits either way.
	EarlyWeights bool
	// Persistent makes a narrow (or pair) launch of at most
	// LinearTunedMaxRows rows and more m-tiles than fit on the GPU at once
	// run a grid of as many CTAs as fit, each taking its tiles in turn
	// with the next tile's first weights loaded before the current one's
	// partials are added (linear.cu v5); the same bits.
	Persistent bool
	// resident[i] (pairResident[i][mode]) is how many CTAs of the narrow
	// (pair) kernel at linearNTs[i] fit on the GPU at once.
	resident     [len(linearNTs)]int
	pairResident [len(linearNTs)][linearPairModes]int
	saved        *linearResident // LimitResident's copy (tests)
}

// linearResident is a copy of a Linear's resident counts (LimitResident,
// in tests).
type linearResident struct {
	resident     [len(linearNTs)]int
	pairResident [len(linearNTs)][linearPairModes]int
}

// LinearGroup is one weight of a grouped launch: w [N][K] fp16, bias [N]
// float32 or 0, y [T][N] float32.
type LinearGroup struct {
	Y, W, Bias cuda.DevicePtr
	N          int
}

// LoadLinear compiles linear.cu (once per device).
func LoadLinear(dev *cuda.Device) (*Linear, error) {
	expr := func(nt int) string { return fmt.Sprintf("linear::linear_f16<%d>", nt) }
	pairExpr := func(nt, mode int) string { return fmt.Sprintf("linear::linear_f16_pair<%d, %d>", nt, mode) }
	const wide, toF16 = "linear::linear_f16_wide", "linear::linear_x_f16"
	exprs := []string{wide, toF16}
	tiledExpr := func(bn, S int) string {
		if S == 1 {
			return fmt.Sprintf("linear::linear_f16_tiled<%d, %d>", bn, linearStageK)
		}
		return fmt.Sprintf("linear::linear_f16_tiled_c<%d, %d, false>", bn, S)
	}
	deepExpr := fmt.Sprintf("linear::linear_f16_tiled_c<64, %d, true>", linearDeepSplit)
	// The clustered kernels exist from sm_90 (linear.cu's #if).
	clusters := false
	if major, _ := dev.ComputeCapability(); major >= 9 {
		clusters = true
	}
	for _, bn := range linearTiledBNs {
		for _, S := range linearWideSplits {
			if S == 1 || clusters {
				exprs = append(exprs, tiledExpr(bn, S))
			}
		}
	}
	const tiledKExpr = "linear::linear_f16_tiled<128, 128>"
	exprs = append(exprs, tiledKExpr)
	if clusters {
		exprs = append(exprs, deepExpr)
	}
	for _, nt := range linearNTs {
		exprs = append(exprs, expr(nt))
		for mode := range linearPairModes {
			exprs = append(exprs, pairExpr(nt, mode))
		}
	}
	mod, err := dev.Compile(program("linear.cu", linearSource, exprs, nil))
	if err != nil {
		return nil, err
	}
	l := &Linear{clusters: clusters, noTiled: dev.MaxSharedPerBlock() < linearTiledMaxSmem}
	l.hasDeep = clusters && !l.noTiled && dev.MaxSharedPerBlock() >= linearDeepSmem
	if l.wide, err = mod.Function(wide); err != nil {
		return nil, err
	}
	if l.toF16, err = mod.Function(toF16); err != nil {
		return nil, err
	}
	for i, nt := range linearNTs {
		if l.fns[i], err = mod.Function(expr(nt)); err != nil {
			return nil, err
		}
		for mode := range linearPairModes {
			if l.pairs[i][mode], err = mod.Function(pairExpr(nt, mode)); err != nil {
				return nil, err
			}
		}
	}
	for bi, bn := range linearTiledBNs {
		for si, S := range linearWideSplits {
			if S == 1 || clusters {
				if l.tiled[bi][si], err = mod.Function(tiledExpr(bn, S)); err != nil {
					return nil, err
				}
			}
		}
	}
	if l.tiledK, err = mod.Function(tiledKExpr); err != nil {
		return nil, err
	}
	if clusters {
		if l.deep, err = mod.Function(deepExpr); err != nil {
			return nil, err
		}
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		if l.noTiled {
			return nil
		}
		if err := c.SetMaxDynamicShared(l.tiledK, linearTiledSmem(1, 1, 2*linearStageK)); err != nil {
			return err
		}
		if l.hasDeep {
			if err := c.SetMaxDynamicShared(l.deep, linearDeepSmem); err != nil {
				return err
			}
			n, err := c.MaxActiveBlocksPerSM(l.deep, linearSplit*32, linearDeepSmem)
			if err != nil {
				return err
			}
			l.deepResident = max(1, n) * dev.SMs()
		}
		for bi := range linearTiledBNs {
			for si, S := range linearWideSplits {
				f := l.tiled[bi][si]
				if S > 1 && !clusters {
					continue
				}
				smem := linearTiledSmem(bi, S, linearStageK)
				if err := c.SetMaxDynamicShared(f, smem); err != nil {
					return err
				}
				n, err := c.MaxActiveBlocksPerSM(f, linearSplit*32, smem)
				if err != nil {
					return err
				}
				l.tiledPerSM[bi][si] = max(1, n)
				l.tiledResident[bi][si] = max(1, n) * dev.SMs()
			}
		}
		for i := range linearNTs {
			n, err := c.MaxActiveBlocksPerSM(l.fns[i], linearSplit*32, 0)
			if err != nil {
				return err
			}
			l.resident[i] = max(1, n) * dev.SMs()
			for mode := range linearPairModes {
				if n, err = c.MaxActiveBlocksPerSM(l.pairs[i][mode], 2*linearSplit*32, 0); err != nil {
					return err
				}
				l.pairResident[i][mode] = max(1, n) * dev.SMs()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// CheckLinearShape reports whether linear.cu takes x [T, K]: T >= 1 and K a
// positive multiple of 8 (16-byte weight rows), as an error naming the
// shape.
func CheckLinearShape(T, K int) error {
	if T < 1 || K < 1 || K%8 != 0 {
		return fmt.Errorf("kernels: linear: x [%d, %d]: the batch-invariant linear needs T >= 1 and K a positive multiple of 8", T, K)
	}
	return nil
}

// linearNTFor returns the index in linearNTs of the n-tile count for T rows
// and the number of token blocks.
func linearNTFor(T int) (i, blocks int) {
	for i = range linearNTs {
		if T <= linearNTs[i]*linearN {
			break
		}
	}
	per := linearNTs[i] * linearN
	return i, (T + per - 1) / per
}

// LinearScratchBytes is the size of the fp16 copy of x [T, K] that a
// launch of T rows needs (0 for the narrow kernel's T).
func LinearScratchBytes(T, K int) int {
	if T <= LinearNarrowMaxRows {
		return 0
	}
	return 2 * T * K
}

// Launch computes y = x·Wᵀ + bias (bias may be 0): x [T][K] float32, w
// [N][K] fp16, bias [N] float32, y [T][N] float32; xh is scratch of
// LinearScratchBytes(T, K) bytes (0 when that is 0).
func (l *Linear) Launch(c *cuda.Ctx, st cuda.Stream, y, x, xh, w, bias cuda.DevicePtr, T, N, K int) error {
	return l.LaunchGroups(c, st, x, xh, T, K, LinearGroup{Y: y, W: w, Bias: bias, N: N})
}

// LaunchGroups computes, in one launch, y_i = x·W_iᵀ + bias_i for up to
// LinearMaxGroups weights sharing x [T][K] (xh: scratch as for Launch).
// Each group's result is bitwise that of a Launch of it alone, and each
// row's that of a launch of that row alone.
func (l *Linear) LaunchGroups(c *cuda.Ctx, st cuda.Stream, x, xh cuda.DevicePtr, T, K int, groups ...LinearGroup) error {
	if err := CheckLinearShape(T, K); err != nil {
		return err
	}
	if len(groups) < 1 || len(groups) > LinearMaxGroups {
		return fmt.Errorf("kernels: linear: %d groups, want 1 to %d", len(groups), LinearMaxGroups)
	}
	var g [LinearMaxGroups]LinearGroup
	tiles := 0
	for i, gr := range groups {
		if gr.N < 1 {
			return fmt.Errorf("kernels: linear: group %d has N = %d", i, gr.N)
		}
		g[i] = gr
		tiles += (gr.N + linearM - 1) / linearM
	}
	if T > LinearNarrowMaxRows {
		if xh == 0 {
			return fmt.Errorf("kernels: linear: %d rows need an fp16 scratch of %d bytes", T, LinearScratchBytes(T, K))
		}
		n := T * K
		blocks := min((n/8+255)/256, 4096)
		if err := c.Launch(l.toF16, cuda.Dim3{X: blocks}, cuda.Dim3{X: 256}, 0, st, xh, x, int64(n)); err != nil {
			return err
		}
		if !l.WideV3 && !l.noTiled {
			bi, si, ks, deep := l.tiledFor(T, tiles)
			bn, S := linearTiledBNs[bi], linearWideSplits[si]
			f, smem := l.tiled[bi][si], linearTiledSmem(bi, S, ks)
			if ks != linearStageK {
				f = l.tiledK
			}
			if deep {
				f, smem = l.deep, linearDeepSmem
			}
			return c.Launch(f, cuda.Dim3{X: (T + bn - 1) / bn * S, Y: (tiles*linearM + linearTileM - 1) / linearTileM},
				cuda.Dim3{X: linearSplit * 32}, smem, st,
				xh, int32(T), int32(K), b2i32(l.EarlyWeights),
				g[0].W, g[0].Bias, g[0].Y, int32(g[0].N),
				g[1].W, g[1].Bias, g[1].Y, int32(g[1].N),
				g[2].W, g[2].Bias, g[2].Y, int32(g[2].N))
		}
		return c.Launch(l.wide, cuda.Dim3{X: (T + linearWideTokens - 1) / linearWideTokens, Y: (tiles + linearWideWarps - 1) / linearWideWarps},
			cuda.Dim3{X: linearWideWarps * 32}, 0, st,
			xh, int32(T), int32(K),
			g[0].W, g[0].Bias, g[0].Y, int32(g[0].N),
			g[1].W, g[1].Bias, g[1].Y, int32(g[1].N),
			g[2].W, g[2].Bias, g[2].Y, int32(g[2].N))
	}
	i, blocks := linearNTFor(T)
	return c.Launch(l.fns[i], cuda.Dim3{X: blocks, Y: l.gridY(T, tiles, blocks, l.resident[i])}, cuda.Dim3{X: linearSplit * 32}, 0, st,
		x, int32(T), int32(K), l.early(T),
		g[0].W, g[0].Bias, g[0].Y, int32(g[0].N),
		g[1].W, g[1].Bias, g[1].Y, int32(g[1].N),
		g[2].W, g[2].Bias, g[2].Y, int32(g[2].N))
}

// linearClusterSMs is the most SMs' worth of CTA slots one cluster of the
// tiled wide kernel may span: a cluster's CTAs must be placed at once
// within one GPC, and clusters of 4 CTAs at one CTA an SM (or 8 at two)
// ran slower than clusters of 2 (4) on 13 of 15 of Llama-3.1-8B's
// shape and row counts where both fit (session 22 call 2's sweep,
// docs/perf/decode-step.md v32).
const linearClusterSMs = 2

// tiledFor picks the tiled wide kernel for T rows and `tiles` m-tiles:
// the token tile (64 up to linearTiledSmallMaxRows rows, else 128); the
// largest cluster size that spans at most linearClusterSMs SMs' slots and
// whose grid fits on the GPU at once (the classes spread over more SMs
// where the m-blocks and token blocks alone leave SMs idle: o, down,
// q|k|v); and the stage k (whole k-blocks at BN 128 without a cluster,
// else linearStageK). Above linearTiledSmallMaxRows rows, where the deep
// variant's grid (BN 64, clusters of linearDeepSplit) fits on the GPU at
// once, it takes the place of BN 128: o and down at 100 rows 54 -> 37 and
// 137 -> 91 us (session 22 wide2 call 1's sweep, docs/perf/decode-step.md
// v35; at 55 rows it ran 1-5 us behind BN 64 in clusters of 4 at two CTAs
// an SM, at 256 rows it does not fit). ForceWide's, ForceWideStage's and
// ForceWideDeep's choices where set. Returns indices into linearTiledBNs
// and linearWideSplits, the stage k, and whether the deep variant runs.
func (l *Linear) tiledFor(T, tiles int) (bi, si, ks int, deep bool) {
	if T > linearTiledSmallMaxRows {
		bi = 1
	}
	if l.forceBN != 0 {
		bi = slices.Index(linearTiledBNs[:], l.forceBN)
	}
	mBlocks := (tiles*linearM + linearTileM - 1) / linearTileM
	switch {
	case l.forceDeep > 0:
		deep = true
	case l.forceDeep == 0 && l.forceBN == 0 && l.forceSplit == 0 && l.hasDeep && bi == 1:
		deep = (T+linearTiledBNs[0]-1)/linearTiledBNs[0]*mBlocks*linearDeepSplit <= l.deepResident
	}
	if deep {
		return 0, slices.Index(linearWideSplits[:], linearDeepSplit), linearStageK, true
	}
	bn := linearTiledBNs[bi]
	ctas := (T + bn - 1) / bn * mBlocks
	if l.forceSplit != 0 {
		si = slices.Index(linearWideSplits[:], l.forceSplit)
	} else {
		for l.clusters && si+1 < len(linearWideSplits) {
			S := linearWideSplits[si+1]
			if S > linearClusterSMs*l.tiledPerSM[bi][si+1] || ctas*S > l.tiledResident[bi][si+1] {
				break
			}
			si++
		}
	}
	ks = linearStageK
	if bn == 128 && si == 0 {
		ks = 2 * linearStageK
	}
	if l.forceStageK != 0 && bn == 128 && si == 0 {
		ks = l.forceStageK
	}
	return bi, si, ks, false
}

// gridY is a narrow or pair launch's grid height for T rows, n m-tiles
// (pairs) and `blocks` token blocks: n, or with Persistent (at most
// LinearTunedMaxRows rows) at most as many CTAs as fit on the GPU at once
// (resident) over the token blocks.
func (l *Linear) gridY(T, n, blocks, resident int) int {
	if !l.Persistent || T > LinearTunedMaxRows {
		return n
	}
	return max(1, min(n, resident/blocks))
}

// early is a narrow or pair launch's early flag for T rows: EarlyWeights
// at most LinearTunedMaxRows rows.
func (l *Linear) early(T int) int32 {
	return b2i32(l.EarlyWeights && T <= LinearTunedMaxRows)
}

// b2i32 is 1 for true, 0 for false (a kernel's int flag).
func b2i32(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// PairFits reports whether LaunchGLU and LaunchRoPE take x [T, K]: the
// narrow kernel's rows (1 to LinearNarrowMaxRows) and CheckLinearShape's K.
func (l *Linear) PairFits(T, K int) bool {
	return T <= LinearNarrowMaxRows && CheckLinearShape(T, K) == nil
}

// RoPEPairFits reports whether LaunchRoPE takes q, k and v of nq, nk and nv
// channels in heads of D = 2·half: half a multiple of the m-tile (16
// channels), q and k whole heads.
func RoPEPairFits(nq, nk, nv, half int) bool {
	D := 2 * half
	return half >= linearM && half%linearM == 0 && nq >= D && nq%D == 0 && nk >= D && nk%D == 0 && nv >= 0
}

// LaunchGLU computes gate and up (LaunchGroups' bits, each written where
// its Y is set, 0: not written) and, in the same launch's epilogue, dst =
// act(gate) ⊙ up with Ops.SwiGLU's (ActSiLU) or Ops.GeGLU's (ActGeluTanh)
// float operations: the bits of LaunchGroups then the separate op. x [T,
// K] with T <= LinearNarrowMaxRows (PairFits); dst must not overlap x.
func (l *Linear) LaunchGLU(c *cuda.Ctx, st cuda.Stream, act Act, x cuda.DevicePtr, T, K int, gate, up LinearGroup, dst cuda.DevicePtr) error {
	if err := checkGLU("linear glu", act, gate, up, dst); err != nil {
		return err
	}
	if !l.PairFits(T, K) {
		return fmt.Errorf("kernels: linear glu: x [%d, %d] does not fit the narrow kernel", T, K)
	}
	i, blocks := linearNTFor(T)
	pairs := (gate.N + linearM - 1) / linearM
	return c.Launch(l.pairs[i][linearPairGLU], cuda.Dim3{X: blocks, Y: l.gridY(T, pairs, blocks, l.pairResident[i][linearPairGLU])}, cuda.Dim3{X: 2 * linearSplit * 32}, 0, st,
		x, int32(T), int32(K), l.early(T),
		gate.W, gate.Bias, gate.Y, int32(gate.N),
		up.W, up.Bias, up.Y, int32(up.N),
		cuda.DevicePtr(0), cuda.DevicePtr(0), cuda.DevicePtr(0), int32(0),
		dst, cuda.DevicePtr(0), cuda.DevicePtr(0), int32(0), int32(act))
}

// LaunchRoPE computes q, k and v (v.N may be 0) as LaunchGroups does and,
// in the same launch's epilogue, rotates q and k in place as Ops.RoPEQK
// without norms does (heads of D = 2·half; pos [T] int32, invFreq [half]
// float32): the bits of LaunchGroups then Ops.RoPEQK. x [T, K] with T <=
// LinearNarrowMaxRows (PairFits); the shapes as RoPEPairFits says.
func (l *Linear) LaunchRoPE(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K int, q, k, v LinearGroup, pos, invFreq cuda.DevicePtr, half int) error {
	if !l.PairFits(T, K) {
		return fmt.Errorf("kernels: linear rope: x [%d, %d] does not fit the narrow kernel", T, K)
	}
	if !RoPEPairFits(q.N, k.N, v.N, half) {
		return fmt.Errorf("kernels: linear rope: q N = %d, k N = %d (want multiples of D = %d), v N = %d, half %d (want a multiple of %d)", q.N, k.N, 2*half, v.N, half, linearM)
	}
	if q.Y == 0 || k.Y == 0 || q.W == 0 || k.W == 0 || (v.N > 0 && (v.Y == 0 || v.W == 0)) || pos == 0 || invFreq == 0 {
		return fmt.Errorf("kernels: linear rope: an output, weight, pos or invFreq is not set")
	}
	pairs := q.N/(2*linearM) + k.N/(2*linearM) + ((v.N+linearM-1)/linearM+1)/2
	i, blocks := linearNTFor(T)
	return c.Launch(l.pairs[i][linearPairRoPE], cuda.Dim3{X: blocks, Y: l.gridY(T, pairs, blocks, l.pairResident[i][linearPairRoPE])}, cuda.Dim3{X: 2 * linearSplit * 32}, 0, st,
		x, int32(T), int32(K), l.early(T),
		q.W, q.Bias, q.Y, int32(q.N),
		k.W, k.Bias, k.Y, int32(k.N),
		v.W, v.Bias, v.Y, int32(v.N),
		cuda.DevicePtr(0), pos, invFreq, int32(half), int32(0))
}

package kernels

import (
	_ "embed"
	"fmt"
	"slices"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed gemmq.cu
var gemmqSource string

// GEMMQ holds gemmq.cu's kernels: the fused dequant-GEMM over int4, int3
// and int8 weights in the tiled layout (PackTiles) for batches of
// GEMMQMinRows to GEMMQMaxRows rows of x (batched decode), and its x
// preparation.
type GEMMQ struct {
	prep cuda.Function
	fns  [len(gemmqBits)][]cuda.Function
	// slots is how many CTAs of each kernel the GPU holds at once (its
	// CTAs an SM by the occupancy API, times the SMs): the split rule's wave.
	slots [len(gemmqBits)][]int
	// Config, when non-negative, forces the tiling (an index of the code
	// width's gemmqConfigs; GEMMQConfigs) and Splits, when positive, the
	// split-K: knobs for tests and tuning.
	Config, Splits int
}

// GEMMQMinRows and GEMMQMaxRows bound the rows of x GEMMQ takes: above
// GEMVQMaxRows (the GEMV's), up to the largest decode batch whose Linear
// carries a graph key in backend/gpu.
const (
	GEMMQMinRows = GEMVQMaxRows + 1
	GEMMQMaxRows = 256
)

// gemmqBits are the code widths gemmq.cu multiplies: int4's, int3's and
// (session 16, "int8 in gemmq.cu") int8's tiled layouts.
var gemmqBits = [...]int{4, 3, 8}

// gemmqBitsIndex is a code width's index in gemmqBits, -1 if none.
func gemmqBitsIndex(bits int) int { return slices.Index(gemmqBits[:], bits) }

// gemmqRowsCTA is gemmq.cu's kRowsCTA: output channels a CTA; gemmqXRow
// its kXRow: halves of a token's tile in a slot; gemmqPrepThreads its
// kPrepThreads.
const (
	gemmqRowsCTA     = 128
	gemmqRGs         = gemmqRowsCTA / gemvqRows
	gemmqXRow        = gemvqTile + 8
	gemmqPrepThreads = 256
	gemmqPrepBlocks  = 1024
)

// gemmqConfig is one instantiation of gemm_q: nt n-tiles of 8 tokens a
// warp, wn warps along the tokens (4 along the rows), stages ring slots,
// blocks tiled blocks a ring step (gemm_q's BLOCKS: 1 for int4 and int3),
// ks warp groups splitting a step's tiles (gemm_q's KS; session 17).
type gemmqConfig struct{ nt, wn, stages, blocks, ks int }

// tokens is the tokens a CTA takes.
func (g gemmqConfig) tokens() int { return 8 * g.nt * g.wn }

// threads is the CTA's size.
func (g gemmqConfig) threads() int { return 32 * 4 * g.wn * g.ks }

// gemmqConfigs are gemm_q's instantiations for each code width of
// gemmqBits; the rule (gemmqConfigFor) picks among those gemmqRule names,
// the others are alternatives for tests and tuning.
// int4 and int3: 32 tokens a CTA of 4 warps (two CTAs an SM), 64 and 128
// tokens a CTA of 8 warps (one CTA an SM; 128 with two ring slots, its
// slot being 85 KB). Session 16's sweep of eight tilings (docs/perf/gemvq.md)
// found none more than ~6% faster than these at the rule's split on the 8B
// shapes (64 tokens over 4 warps with two slots at 48-64 rows), so only
// these are compiled. int8 (a block is one 128-channel tile, 2 KB a row
// group): steps of two blocks (256 channels, int4's step count; 32 KB of
// codes a slot) in rings of two slots, 32 tokens x 4 warps, 64 and 128 x 8
// warps; then, for tests and the sweep, steps of one block (a slot's codes
// 16 KB, as int4's) in rings of 4, 3 and 3 slots. Session 16's sweep
// (H100, BenchmarkGEMMQ at the 8B shapes, each tiling at its rule split):
// the two-block steps 3-10% faster on gate/up and down at 24-128 rows
// (gate/up at 64 rows 66.0 against 72.7 us), within 0.5 us either way on
// q/o, so they are the rule's. Session 17 ("gemmq.cu's loads under its
// math") appends each width's three rule tilings again with two warp
// groups splitting a step's two tiles (ks 2: 8 warps at 32 tokens, two
// CTAs an SM; 16 warps at 64 and 128), indices 3-5 for int4 and int3,
// 6-8 for int8, then 64 tokens on one warp along the tokens (4 warps of
// 8 n-tiles, two CTAs an SM: no fragment dequantized twice, as the 8-warp
// tilings' two warps along the tokens do); gemmqRule says which the rule
// takes.
var gemmqConfigs = [len(gemmqBits)][]gemmqConfig{
	{{4, 1, 3, 1, 1}, {4, 2, 3, 1, 1}, {8, 2, 2, 1, 1}, {4, 1, 3, 1, 2}, {4, 2, 3, 1, 2}, {8, 2, 2, 1, 2}, {8, 1, 2, 1, 1}},
	{{4, 1, 3, 1, 1}, {4, 2, 3, 1, 1}, {8, 2, 2, 1, 1}, {4, 1, 3, 1, 2}, {4, 2, 3, 1, 2}, {8, 2, 2, 1, 2}, {8, 1, 2, 1, 1}},
	{{4, 1, 2, 2, 1}, {4, 2, 2, 2, 1}, {8, 2, 2, 2, 1}, {4, 1, 4, 1, 1}, {4, 2, 3, 1, 1}, {8, 2, 3, 1, 1},
		{4, 1, 2, 2, 2}, {4, 2, 2, 2, 2}, {8, 2, 2, 2, 2}, {8, 1, 3, 1, 1}},
}

// gemmqRule is, for each code width, the indices of gemmqConfigs the rule
// (gemmqConfigFor) picks among for weights under gemmqLargeWeight codes
// ([0]: the 8B's q/o) and from it on ([1]: gate/up, down). Session 17's
// sweep (H100, BenchmarkGEMMQ, docs/perf/gemvq.md "gemmq.cu's loads under
// its math"), int4 us at T = 24/32/48/64/128 for gate/up, q/o:
//   - 32 tokens, two warp groups (3): 33.8/35.4 gate/up, 18.2/19.6 q/o at
//     24/32 rows, the best or within 0.4 us of it at both shapes;
//   - 64 tokens on 4 warps (6; no fragment dequantized twice): gate/up
//     45.4/49.0/69.4 at 48/64/128 against 49.3/50.7/72.2 for the 8- and
//     16-warp tilings, but q/o 27.7/31.1/36.9 against 23.6/25.1/34.7 for
//     64 tokens with two warp groups (4): the small weight's 32 CTAs a chunk
//     of tokens need the 16 warps;
//   - int8: 32 and 64 tokens with two warp groups (6, 7), 128 with one (2):
//     within 2-3% of the best at every shape (its q/o is routed only up to
//     64 rows).
var gemmqRule = [len(gemmqBits)][2][]int{{{3, 4}, {3, 6}}, {{3, 4}, {3, 6}}, {{6, 7, 2}, {6, 7, 2}}}

// gemmqLargeWeight is the codes (N·K) from which a weight takes
// gemmqRule's second list: between q/o (16.8 M) and gate/up (58.7 M).
const gemmqLargeWeight = 32 << 20

// stepChannels is the channels of the config's ring step for a code width.
func (g gemmqConfig) stepChannels(bits int) int { return g.blocks * gemvqTiledLine(bits) * 32 / bits }

// gemmqSlotBytes is gemmq.cu's Slot<BITS, TC, BLOCKS>::kBytes.
func gemmqSlotBytes(bits, tokens, blocks int) int {
	tiles := blocks * gemvqTiledLine(bits) * 32 / bits / gemvqTile
	return blocks*gemmqRGs*gemvqRows*gemvqTiledLine(bits)*4 + gemmqRGs*2*gemvqRows*4 + tiles*tokens*gemmqXRow*2
}

// sharedBytes is the config's dynamic shared memory for a code width.
func (g gemmqConfig) sharedBytes(bits int) int {
	return g.stages * gemmqSlotBytes(bits, g.tokens(), g.blocks)
}

func gemmqExpr(bits int, g gemmqConfig) string {
	return fmt.Sprintf("gemmq::gemm_q<%d, %d, %d, %d, %d, %d>", bits, g.nt, g.wn, g.stages, g.blocks, g.ks)
}

// LoadGEMMQ compiles gemmq.cu (with gemvq.cu as the header it includes).
func LoadGEMMQ(dev *cuda.Device) (*GEMMQ, error) { return LoadGEMMQOptions(dev) }

// LoadGEMMQOptions compiles gemmq.cu with extra NVRTC options: its knobs
// and diagnostics (-DGEMMQ_VOLATILE=1, -DGEMMQ_DIAG=1, ...; see the file),
// for tuning.
func LoadGEMMQOptions(dev *cuda.Device, opts ...string) (*GEMMQ, error) {
	const prepExpr = "gemmq::gemm_q_prep"
	exprs := []string{prepExpr}
	for bi, b := range gemmqBits {
		for _, cfg := range gemmqConfigs[bi] {
			exprs = append(exprs, gemmqExpr(b, cfg))
		}
	}
	mod, err := dev.Compile(program("gemmq.cu", gemmqSource, exprs, opts, cuda.Header{Name: "gemvq.cu", Source: gemvqSource}))
	if err != nil {
		return nil, err
	}
	g := &GEMMQ{Config: -1}
	if g.prep, err = mod.Function(prepExpr); err != nil {
		return nil, err
	}
	for bi, b := range gemmqBits {
		g.fns[bi] = make([]cuda.Function, len(gemmqConfigs[bi]))
		g.slots[bi] = make([]int, len(gemmqConfigs[bi]))
		for ci, cfg := range gemmqConfigs[bi] {
			if g.fns[bi][ci], err = mod.Function(gemmqExpr(b, cfg)); err != nil {
				return nil, err
			}
		}
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		for bi, b := range gemmqBits {
			for ci, cfg := range gemmqConfigs[bi] {
				f, smem := g.fns[bi][ci], cfg.sharedBytes(b)
				if err := c.SetMaxDynamicShared(f, smem); err != nil {
					return fmt.Errorf("kernels: gemmq: %w", err)
				}
				n, err := c.MaxActiveBlocksPerSM(f, cfg.threads(), smem)
				if err != nil {
					return fmt.Errorf("kernels: gemmq: %w", err)
				}
				g.slots[bi][ci] = max(1, n) * dev.SMs()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Reads reports whether GEMMQ multiplies T rows of x by a tiled int-bits
// [N, K] weight with groups of G: T in [GEMMQMinRows, GEMMQMaxRows], int4,
// int3 or int8 with G 128 times a power of two dividing K (the tiled
// layout's weights: GEMVQ.ReadsV6).
func (g *GEMMQ) Reads(T, N, K, bits, G int) bool {
	return T >= GEMMQMinRows && T <= GEMMQMaxRows && N > 0 && gemmqBitsIndex(bits) >= 0 && G > 0 && G%gemvqTile == 0 &&
		gemvq4Shift(G, K) >= 0
}

// gemmqConfigFor picks the token tiling for T rows of an [N, K] weight
// among a width's gemmqRule list for the weight's size: the config whose
// chunks waste the fewest token slots, the larger CTA on a tie.
func gemmqConfigFor(T, N, K, bits int) int {
	bi, large := gemmqBitsIndex(bits), 0
	if N*K >= gemmqLargeWeight {
		large = 1
	}
	rule := gemmqRule[bi][large]
	best, waste := rule[0], -1
	for _, ci := range rule {
		tc := gemmqConfigs[bi][ci].tokens()
		w := (T+tc-1)/tc*tc - T
		if waste < 0 || w <= waste {
			best, waste = ci, w
		}
	}
	return best
}

// gemmqMinSteps is the fewest ring steps a split keeps (the ring's fill
// amortized).
const gemmqMinSteps = 2

// gemmqSplitFor returns the split-K for a grid of ctas CTAs over K
// channels in ring steps of step channels: the most splits whose CTAs fit
// in one wave of slots, each keeping gemmqMinSteps steps; at least 1.
func gemmqSplitFor(ctas, K, step, slots int) int {
	steps := (K + step - 1) / step
	return max(1, min(slots/ctas, steps/gemmqMinSteps, gemmqMaxSplits))
}

// gemmqMaxSplits bounds the split-K slices (the partial sums' scratch).
const gemmqMaxSplits = 64

// plan returns the launch's config index, grid and split-K.
func (g *GEMMQ) plan(T, N, K, bits int) (ci int, grid cuda.Dim3, splits int) {
	bi := gemmqBitsIndex(bits)
	ci = gemmqConfigFor(T, N, K, bits)
	if g.Config >= 0 && g.Config < len(gemmqConfigs[bi]) {
		ci = g.Config
	}
	cfg := gemmqConfigs[bi][ci]
	grid = cuda.Dim3{X: (N + gemmqRowsCTA - 1) / gemmqRowsCTA, Y: (T + cfg.tokens() - 1) / cfg.tokens()}
	splits = gemmqSplitFor(grid.X*grid.Y, K, cfg.stepChannels(bits), g.slots[bi][ci])
	if g.Splits > 0 {
		splits = min(g.Splits, gemmqMaxSplits)
	}
	grid.Z = splits
	return ci, grid, splits
}

// gemmqAlign is the alignment of the scratch's parts.
const gemmqAlign = 256

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// ScratchBytes returns the device scratch Launch needs for T rows over an
// [N, K] int-bits weight: x in fp16, the split-K counters, the partial sums.
func (g *GEMMQ) ScratchBytes(T, N, K, bits int) int {
	_, grid, splits := g.plan(T, N, K, bits)
	n := alignUp(2*T*K, gemmqAlign) + alignUp(4*grid.X*grid.Y, gemmqAlign)
	if splits > 1 {
		n += 4 * splits * T * N
	}
	return n
}

// Launch computes y = x·Ŵᵀ + bias for T rows of x (GEMMQMinRows to
// GEMMQMaxRows): x [T][K] float32, tw and tp a weight's tiled layout
// (PackTiles; int4, int3 or int8), bias [N] float32 or 0, y [T][N] float32,
// scratch at least ScratchBytes. Two launches: gemm_q_prep (x to fp16 in
// the mma's k order, the counters zeroed), then gemm_q.
func (g *GEMMQ) Launch(c *cuda.Ctx, st cuda.Stream, y, x, tw, tp, bias, scratch cuda.DevicePtr, T, N, K, bits, G int) error {
	if !g.Reads(T, N, K, bits, G) {
		return fmt.Errorf("kernels: gemmq: T=%d N=%d K=%d bits=%d G=%d has no kernel", T, N, K, bits, G)
	}
	ci, grid, splits := g.plan(T, N, K, bits)
	bi := gemmqBitsIndex(bits)
	cfg := gemmqConfigs[bi][ci]
	xp := scratch
	cnt := xp + cuda.DevicePtr(alignUp(2*T*K, gemmqAlign))
	part := cnt + cuda.DevicePtr(alignUp(4*grid.X*grid.Y, gemmqAlign))
	ncnt := 0
	if splits > 1 {
		ncnt = grid.X * grid.Y
	}
	blocks := min(gemmqPrepBlocks, max(1, (T*K/4+gemmqPrepThreads-1)/gemmqPrepThreads))
	if err := c.Launch(g.prep, cuda.Dim3{X: blocks}, cuda.Dim3{X: gemmqPrepThreads}, 0, st,
		x, xp, int32(T), int32(K), cnt, int32(ncnt)); err != nil {
		return err
	}
	return c.Launch(g.fns[bi][ci], grid, cuda.Dim3{X: cfg.threads()}, cfg.sharedBytes(bits), st,
		xp, tw, tp, bias, y, part, cnt, int32(T), int32(N), int32(K), int32(G))
}

// GEMMQConfigs returns how many token tilings GEMMQ.Config may force for
// int4 and int3 (GEMMQConfigsFor has every width's).
func GEMMQConfigs() int { return len(gemmqConfigs[0]) }

// GEMMQConfigsFor returns how many tilings GEMMQ.Config may force for a
// code width (0 if GEMMQ has no kernel for it).
func GEMMQConfigsFor(bits int) int {
	if bi := gemmqBitsIndex(bits); bi >= 0 {
		return len(gemmqConfigs[bi])
	}
	return 0
}

// GEMMQConfigName names a width's tiling (for benchmarks): tokens a CTA,
// warps, ring slots and, past one, blocks a ring step and warp groups
// splitting it.
func GEMMQConfigName(bits, config int) string {
	cfg := gemmqConfigs[gemmqBitsIndex(bits)][config]
	s := fmt.Sprintf("t%d-w%d-r%d", cfg.tokens(), cfg.threads()/32, cfg.stages)
	if cfg.blocks > 1 {
		s += fmt.Sprintf("-b%d", cfg.blocks)
	}
	if cfg.ks > 1 {
		s += fmt.Sprintf("-k%d", cfg.ks)
	}
	return s
}

// Info returns the resources of the kernel for a code width and config.
func (g *GEMMQ) Info(c *cuda.Ctx, bits, config int) (cuda.FuncInfo, error) {
	bi := gemmqBitsIndex(bits)
	if bi < 0 || config < 0 || config >= len(gemmqConfigs[bi]) {
		return cuda.FuncInfo{}, fmt.Errorf("kernels: gemmq: no kernel for bits=%d config %d", bits, config)
	}
	return c.FuncInfo(g.fns[bi][config])
}

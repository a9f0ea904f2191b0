package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed gemv.cu
var gemvSource string

// GEMVMaxRows is the most rows of x the GEMV kernel takes (gemv.cu's T);
// larger batches go to cuBLASLt.
const GEMVMaxRows = 8

// gemvWarps is gemv.cu's kWarps: output channels per CTA.
const gemvWarps = 4

// gemvSplits are the split-K factors gemv.cu is instantiated with.
var gemvSplits = [...]int{1, 2, 4}

// GEMVSplitTiers is how many output-channel tiers gemv.cu's split-K
// factor is chosen by (gemvSplitBounds, GEMV.Splits).
const GEMVSplitTiers = 4

// gemvSplitBounds are the tiers' upper bounds on a launch's (a group's
// summed) output channels: tier i takes N <= gemvSplitBounds[i], the last
// tier every N above. At Llama-3.1-8B shapes o and down (4096) are tier
// 0, q|k|v (6144) tier 1, gate|up (28672) tier 2, lm_head (128256) tier 3.
var gemvSplitBounds = [GEMVSplitTiers - 1]int{4096, 8192, 32768}

// gemvDefaultSplits are the tiers' split-K factors, at one row of x
// ([0]) and at more ([1]): enough warps to put about 32 on each of an
// H100's 132 SMs (v2; docs/perf), split 4 up to 4096 channels, where
// `bench gemv` read Llama-3.1-8B's o (4096 x 4096) and down (4096 x 14336)
// faster at 4 than at 2: a shorter tail wave (v5; docs/perf/decode-step.md
// v10); at one row split 2 up to 32768, where gate|up (28672) made the B =
// 1 decode step 0.08-0.1 ms faster than at split 1 (v8; decode-step.md
// v21; not measured at two rows, which keep 1).
var gemvDefaultSplits = [2][GEMVSplitTiers]int{{4, 2, 2, 1}, {4, 2, 1, 1}}

// gemvSplitTier returns the tier of a launch over N output channels.
func gemvSplitTier(N int) int {
	for i, b := range gemvSplitBounds {
		if N <= b {
			return i
		}
	}
	return GEMVSplitTiers - 1
}

// gemvSplitFor picks the default split-K factor for T rows of x and N
// output channels.
func gemvSplitFor(T, N int) int { return gemvDefaultSplits[min(max(T, 1), 2)-1][gemvSplitTier(N)] }

// ValidGEMVSplits reports whether s is a GEMV.Splits: each tier 0 (the
// default's) or one of the instantiated factors 1, 2, 4.
func ValidGEMVSplits(s [GEMVSplitTiers]int) bool {
	for _, v := range s {
		if _, err := splitIndex(v); v != 0 && err != nil {
			return false
		}
	}
	return true
}

// splitFor is the split-K factor a launch over T rows and N output
// channels (a group's summed) takes: Splits' for N's tier where set, else
// gemvSplitFor's.
func (g *GEMV) splitFor(T, N int) int {
	if s := g.Splits[gemvSplitTier(N)]; s != 0 {
		return s
	}
	return gemvSplitFor(T, N)
}

// SplitFor is the split-K factor LaunchGroups, LaunchSwiGLU and LaunchRoPE
// take over T rows of x for weights with these output channel counts:
// GroupSplit's unless Splits sets their summed N's tier.
func (g *GEMV) SplitFor(T int, Ns ...int) int { return g.splitFor(T, groupN(Ns)) }

// GEMVBatch is the depth that selects gemv.cu's v6 schedule (kBatch): a
// lane issues 4 weight loads together, does their math, then issues the
// next 4.
const GEMVBatch = 1

// gemvDepths are the depths U gemv.cu is instantiated with: GEMVBatch, and
// rings of 4, 8 and 16 loads in flight a lane (v7); all of them up to
// gemvDepthRows rows of x (the backend's gemv.cu path), GEMVBatch alone
// above.
var gemvDepths = [...]int{GEMVBatch, 4, 8, 16}

// gemvDepthRows is the most rows of x with every depth of gemvDepths.
const gemvDepthRows = 2

// GEMVDepthFor is the depth gemv.cu takes for T rows of x at split-K
// factor s over K: GEMVBatch. v20's first rule, a ring as deep as the
// lane's loads over its slice (4-16: o 4, q|k|v 8, gate|up and down 16),
// read faster alone (`bench gemv --variants`) but made the decode step
// 0.17 ms slower (docs/perf/decode-step.md v20).
func GEMVDepthFor(T, s, K int) int { return GEMVBatch }

// GEMVMaxGroups is the most weights one GEMV.LaunchGroups computes
// (gemv.cu's kMaxGroups).
const GEMVMaxGroups = 3

// GEMV holds gemv.cu's kernels, one per (row count 1..GEMVMaxRows, split,
// ring depth).
type GEMV struct {
	fns [GEMVMaxRows + 1][len(gemvSplits)][len(gemvDepths)]cuda.Function
	// pair holds gemv_f16_pair per (rows, split, depth, pair op).
	pair [GEMVMaxRows + 1][len(gemvSplits)][len(gemvDepths)][gemvPairOps]cuda.Function
	// rings: the rings were compiled (LoadGEMVRings).
	rings bool
	// Depth, when not 0, is the depth every launch takes in place of
	// GEMVDepthFor's: GEMVBatch, or a ring of 4, 8 or 16 weight loads a
	// lane (rings only up to 2 rows of x, and only from LoadGEMVRings). A knob for `bench gemv`, the
	// backend's Options.GEMVDepth and the tests; the bits are the same at
	// every depth.
	Depth int
	// EarlyWeights makes each lane issue its first weight loads before the
	// kernel waits for the one ahead of it on the stream (gemv.cu is
	// GridDependent), so that they overlap that kernel's tail. Set it only
	// where no launch's weights are written by the kernel right before it
	// (a backend's weights are written once, at load, before a stream sync).
	// Measured on the H100: -1.1 us per Llama-3.1-8B layer beyond PDL's
	// -1.6 (docs/perf/decode-step.md v6), so backend/gpu leaves it off.
	EarlyWeights bool
	// EarlyKinds sets EarlyWeights for some kinds of launch only (a mask
	// of GEMVEarlyPlain, GEMVEarlyRoPE, GEMVEarlySwiGLU): a knob for the
	// backend's Options.GEMVEarly (docs/perf/decode-step.md v21). The same
	// bits either way.
	EarlyKinds GEMVEarlyKind
	// Splits, where a tier's entry is not 0, is the split-K factor (1, 2
	// or 4) every launch of that tier takes in place of GroupSplit's: a
	// knob for `bench model` A/Bs (the backend's Options.GEMVSplits); a
	// launch's bits depend on its split.
	Splits [GEMVSplitTiers]int
}

// GEMVEarlyKind is a mask of the launches whose first weight loads are
// issued before the dependency wait (GEMV.EarlyKinds).
type GEMVEarlyKind uint8

// The kinds of gemv.cu launch: LaunchGroups (and Launch), LaunchRoPE,
// LaunchSwiGLU.
const (
	GEMVEarlyPlain GEMVEarlyKind = 1 << iota
	GEMVEarlyRoPE
	GEMVEarlySwiGLU
	// GEMVEarlyNone holds no kind: a mask that is not zero, for options
	// whose zero stands for a default (backend/gpu's Options.GEMVEarly).
	GEMVEarlyNone GEMVEarlyKind = 1 << 7
)

// LoadGEMV compiles gemv.cu (once per device) with GEMVBatch, the depth
// every launch takes by default; LoadGEMVRings adds the rings.
func LoadGEMV(dev *cuda.Device) (*GEMV, error) { return loadGEMV(dev, false) }

// LoadGEMVRings compiles gemv.cu with every depth of gemvDepths: the rings
// of 4, 8 and 16 loads in flight that GEMV.Depth selects at 1-2 rows of x.
// They lost in the decode step (v20), so only the knob, the tests and
// `bench gemv --variants` ask for them: they double gemv.cu's compile.
func LoadGEMVRings(dev *cuda.Device) (*GEMV, error) { return loadGEMV(dev, true) }

func loadGEMV(dev *cuda.Device, rings bool) (*GEMV, error) {
	expr := func(t, s, u int) string { return fmt.Sprintf("gemv::gemv_f16<%d, %d, %d>", t, s, u) }
	pairExpr := func(t, s, u, op int) string {
		return fmt.Sprintf("gemv::gemv_f16_pair<%d, %d, %d, %d>", t, s, u, op)
	}
	depths := func(t int) int { // how many of gemvDepths row count t has
		if !rings || t > gemvDepthRows {
			return 1
		}
		return len(gemvDepths)
	}
	var exprs []string
	for t := 1; t <= GEMVMaxRows; t++ {
		for _, s := range gemvSplits {
			for _, u := range gemvDepths[:depths(t)] {
				exprs = append(exprs, expr(t, s, u))
				for op := range gemvPairOps {
					exprs = append(exprs, pairExpr(t, s, u, op))
				}
			}
		}
	}
	mod, err := dev.Compile(program("gemv.cu", gemvSource, exprs, nil))
	if err != nil {
		return nil, err
	}
	g := &GEMV{rings: rings}
	for t := 1; t <= GEMVMaxRows; t++ {
		for i, s := range gemvSplits {
			for j, u := range gemvDepths[:depths(t)] {
				if g.fns[t][i][j], err = mod.Function(expr(t, s, u)); err != nil {
					return nil, err
				}
				for op := range gemvPairOps {
					if g.pair[t][i][j][op], err = mod.Function(pairExpr(t, s, u, op)); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return g, nil
}

// Fits reports whether the kernel takes a [T, K] x: 1 <= T <= GEMVMaxRows
// and K a multiple of 8 (16-byte weight rows).
func (g *GEMV) Fits(T, K int) bool { return T >= 1 && T <= GEMVMaxRows && K%8 == 0 && K > 0 }

// Launch computes y = x·Wᵀ + bias (bias may be 0): x [T][K] float32, w
// [N][K] fp16, bias [N] float32, y [T][N] float32.
func (g *GEMV) Launch(c *cuda.Ctx, st cuda.Stream, y, x, w, bias cuda.DevicePtr, T, N, K int) error {
	if !g.Fits(T, K) || N <= 0 {
		return fmt.Errorf("kernels: gemv: shape T=%d N=%d K=%d does not fit", T, N, K)
	}
	return g.launchSplit(c, st, y, x, w, bias, T, N, K, g.splitFor(T, N))
}

// splitIndex returns the index of split-K factor s in gemvSplits.
func splitIndex(s int) (int, error) {
	for i, v := range gemvSplits {
		if v == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("kernels: gemv: no split-K factor %d", s)
}

// ValidGEMVDepth reports whether d is a depth GEMV.Depth takes: 0
// (GEMVDepthFor's), GEMVBatch, 4, 8 or 16.
func ValidGEMVDepth(d int) bool {
	for _, v := range gemvDepths {
		if d == v {
			return true
		}
	}
	return d == 0
}

// depthIndex returns the index in gemvDepths of the depth a launch over T
// rows at split s over K takes: Depth where set, else GEMVDepthFor's.
func (g *GEMV) depthIndex(T, s, K int) (int, error) {
	u := g.Depth
	if u == 0 {
		u = GEMVDepthFor(T, s, K)
	}
	for i, v := range gemvDepths {
		if v == u && (i == 0 || T <= gemvDepthRows && g.rings) {
			return i, nil
		}
	}
	if u != GEMVBatch && !g.rings {
		return 0, fmt.Errorf("kernels: gemv: depth %d is a ring: load the kernels with LoadGEMVRings", u)
	}
	return 0, fmt.Errorf("kernels: gemv: no depth %d at %d rows", u, T)
}

// early is the kernels' early argument for a launch of kind k.
func (g *GEMV) early(k GEMVEarlyKind) int32 {
	return flagArg(g.EarlyWeights || g.EarlyKinds&k != 0)
}

// launchSplit launches with split-K factor s (one of gemvSplits).
func (g *GEMV) launchSplit(c *cuda.Ctx, st cuda.Stream, y, x, w, bias cuda.DevicePtr, T, N, K, s int) error {
	return g.LaunchGroupsSplit(c, st, x, T, K, s, LinearGroup{Y: y, W: w, Bias: bias, N: N})
}

// LaunchSplit is Launch with an explicit split-K factor (1, 2 or 4), for
// tests and tuning.
func (g *GEMV) LaunchSplit(c *cuda.Ctx, st cuda.Stream, y, x, w, bias cuda.DevicePtr, T, N, K, split int) error {
	if !g.Fits(T, K) || N <= 0 {
		return fmt.Errorf("kernels: gemv: shape T=%d N=%d K=%d does not fit", T, N, K)
	}
	return g.launchSplit(c, st, y, x, w, bias, T, N, K, split)
}

// GroupSplit is the split-K factor LaunchGroups takes over T rows of x
// for weights with these output channel counts: that of one weight of
// their summed N, so q|k|v at Llama-3.1-8B shapes (6144 channels) all take
// q's split 2.
func GroupSplit(T int, Ns ...int) int { return gemvSplitFor(T, groupN(Ns)) }

// groupN is a group's summed output channels, which pick its split.
func groupN(Ns []int) int {
	sum := 0
	for _, n := range Ns {
		sum += n
	}
	return sum
}

// LaunchGroups computes, in one launch, y_i = x·W_iᵀ + bias_i for up to
// GEMVMaxGroups weights sharing x [T][K] float32 (kernels.LinearGroup as
// for Linear.LaunchGroups: w [N][K] fp16, bias [N] float32 or 0, y [T][N]
// float32), with one split-K factor for all of them, GroupSplit of T and
// their Ns (SplitFor's where Splits is set). Each weight's result is
// bitwise that of LaunchSplit of it alone at
// that split (not always Launch's: a weight's own split may differ).
func (g *GEMV) LaunchGroups(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K int, groups ...LinearGroup) error {
	sum := 0
	for _, gr := range groups {
		sum += gr.N
	}
	return g.LaunchGroupsSplit(c, st, x, T, K, g.splitFor(T, sum), groups...)
}

// LaunchGroupsSplit is LaunchGroups with an explicit split-K factor (1, 2
// or 4), for tests and tuning.
func (g *GEMV) LaunchGroupsSplit(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K, split int, groups ...LinearGroup) error {
	if !g.Fits(T, K) {
		return fmt.Errorf("kernels: gemv: x [%d, %d] does not fit", T, K)
	}
	if len(groups) < 1 || len(groups) > GEMVMaxGroups {
		return fmt.Errorf("kernels: gemv: %d groups, want 1 to %d", len(groups), GEMVMaxGroups)
	}
	i, err := splitIndex(split)
	if err != nil {
		return err
	}
	j, err := g.depthIndex(T, split, K)
	if err != nil {
		return err
	}
	perCTA := gemvWarps / split
	var gs [GEMVMaxGroups]LinearGroup
	ctas := 0
	for j, gr := range groups {
		if gr.N < 1 {
			return fmt.Errorf("kernels: gemv: group %d has N = %d", j, gr.N)
		}
		gs[j] = gr
		ctas += (gr.N + perCTA - 1) / perCTA
	}
	return c.Launch(g.fns[T][i][j], cuda.Dim3{X: ctas}, cuda.Dim3{X: gemvWarps * 32}, 0, st,
		x, int32(K), g.early(GEMVEarlyPlain),
		gs[0].W, gs[0].Bias, gs[0].Y, int32(gs[0].N),
		gs[1].W, gs[1].Bias, gs[1].Y, int32(gs[1].N),
		gs[2].W, gs[2].Bias, gs[2].Y, int32(gs[2].N))
}

// The ops gemv_f16_pair folds into a grouped GEMV's epilogue (gemv.cu's
// kPairSwiGLU, kPairRoPE).
const (
	gemvPairSwiGLU = iota
	gemvPairRoPE
	gemvPairOps
)

// gemvPairTile returns gemv.cu's PairTile<split>: pairs of channels and
// warps a pair CTA.
func gemvPairTile(split int) (pairs, warps int) {
	pairs = 1
	if 2*split < gemvWarps {
		pairs = gemvWarps / (2 * split)
	}
	return pairs, 2 * split * pairs
}

// LaunchSwiGLU computes gate and up as LaunchGroups does (x [T][K]
// float32, gate.W and up.W [N][K] fp16, biases [N] float32 or 0), and
// dst [T][N] = silu(gate) ⊙ up in the same launch, with Ops.SwiGLU's float
// operations: dst, gate.Y and up.Y get the bits of LaunchGroups(gate, up)
// then Ops.SwiGLU(dst, gate.Y, up.Y). gate.Y and up.Y may be 0 (that
// output not written, e.g. where dst takes its place); dst must not overlap
// x. One launch and one write of the outputs less than the two kernels
// (docs/perf/decode-step.md v14).
func (g *GEMV) LaunchSwiGLU(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K int, gate, up LinearGroup, dst cuda.DevicePtr) error {
	return g.LaunchSwiGLUSplit(c, st, x, T, K, g.splitFor(T, gate.N+up.N), gate, up, dst)
}

// LaunchSwiGLUSplit is LaunchSwiGLU at an explicit split-K factor (1, 2 or
// 4): the bits of LaunchGroupsSplit at that split, then Ops.SwiGLU.
func (g *GEMV) LaunchSwiGLUSplit(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K, split int, gate, up LinearGroup, dst cuda.DevicePtr) error {
	return g.LaunchGLUSplit(c, st, ActSiLU, x, T, K, split, gate, up, dst)
}

// LaunchGeGLU is LaunchSwiGLU with GeGLU's activation: dst = gelu_tanh(gate)
// ⊙ up with Ops.GeGLU's float operations.
func (g *GEMV) LaunchGeGLU(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K int, gate, up LinearGroup, dst cuda.DevicePtr) error {
	return g.LaunchGLUSplit(c, st, ActGeluTanh, x, T, K, g.splitFor(T, gate.N+up.N), gate, up, dst)
}

// LaunchGLUSplit is LaunchSwiGLUSplit with the gate's activation act
// (ActSiLU: SwiGLU, ActGeluTanh: GeGLU), which gemv.cu's pair kernel takes
// in its otherwise unused half parameter: one kernel for both.
func (g *GEMV) LaunchGLUSplit(c *cuda.Ctx, st cuda.Stream, act Act, x cuda.DevicePtr, T, K, split int, gate, up LinearGroup, dst cuda.DevicePtr) error {
	if err := checkGLU("gemv swiglu", act, gate, up, dst); err != nil {
		return err
	}
	if !g.Fits(T, K) {
		return fmt.Errorf("kernels: gemv swiglu: x [%d, %d] does not fit", T, K)
	}
	i, err := splitIndex(split)
	if err != nil {
		return err
	}
	j, err := g.depthIndex(T, split, K)
	if err != nil {
		return err
	}
	pairs, warps := gemvPairTile(split)
	ctas := (gate.N + pairs - 1) / pairs
	return c.Launch(g.pair[T][i][j][gemvPairSwiGLU], cuda.Dim3{X: ctas}, cuda.Dim3{X: warps * 32}, 0, st,
		x, int32(K), g.early(GEMVEarlySwiGLU),
		gate.W, gate.Bias, gate.Y, int32(gate.N),
		up.W, up.Bias, up.Y, int32(up.N),
		cuda.DevicePtr(0), cuda.DevicePtr(0), cuda.DevicePtr(0), int32(0),
		dst, cuda.DevicePtr(0), cuda.DevicePtr(0), int32(act))
}

// LaunchRoPE computes q, k and v as LaunchGroups(q, k, v) does (v.N may be
// 0: no v) and rotates q and k by the rotary embedding in the same launch,
// with Ops.RoPE's float operations: the bits of LaunchGroups then
// Ops.RoPEQK without norms (pos [T] int32, invFreq [half] float32). q.N and
// k.N are multiples of D = 2·half, v.N of 2; every Y is set.
func (g *GEMV) LaunchRoPE(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K int, q, k, v LinearGroup, pos, invFreq cuda.DevicePtr, half int) error {
	return g.LaunchRoPESplit(c, st, x, T, K, g.splitFor(T, q.N+k.N+v.N), q, k, v, pos, invFreq, half)
}

// LaunchRoPESplit is LaunchRoPE at an explicit split-K factor (1, 2 or 4):
// the bits of LaunchGroupsSplit at that split, then Ops.RoPEQK.
func (g *GEMV) LaunchRoPESplit(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K, split int, q, k, v LinearGroup, pos, invFreq cuda.DevicePtr, half int) error {
	if !g.Fits(T, K) {
		return fmt.Errorf("kernels: gemv rope: x [%d, %d] does not fit", T, K)
	}
	D := 2 * half
	if half < 1 || q.N < D || q.N%D != 0 || k.N < D || k.N%D != 0 || v.N < 0 || v.N%2 != 0 {
		return fmt.Errorf("kernels: gemv rope: q N = %d, k N = %d (want multiples of D = %d), v N = %d (want even)", q.N, k.N, D, v.N)
	}
	if q.Y == 0 || k.Y == 0 || (v.N > 0 && v.Y == 0) || pos == 0 || invFreq == 0 {
		return fmt.Errorf("kernels: gemv rope: an output, pos or invFreq is not set")
	}
	i, err := splitIndex(split)
	if err != nil {
		return err
	}
	j, err := g.depthIndex(T, split, K)
	if err != nil {
		return err
	}
	pairs, warps := gemvPairTile(split)
	ctas := 0
	for _, n := range []int{q.N, k.N, v.N} {
		ctas += (n/2 + pairs - 1) / pairs
	}
	return c.Launch(g.pair[T][i][j][gemvPairRoPE], cuda.Dim3{X: ctas}, cuda.Dim3{X: warps * 32}, 0, st,
		x, int32(K), g.early(GEMVEarlyRoPE),
		q.W, q.Bias, q.Y, int32(q.N),
		k.W, k.Bias, k.Y, int32(k.N),
		v.W, v.Bias, v.Y, int32(v.N),
		cuda.DevicePtr(0), pos, invFreq, int32(half))
}

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

// gemvSplitFor picks the split-K factor for N output channels: enough
// warps to put about 32 on each of an H100's 132 SMs (v2; docs/perf), and
// split 4 up to 4096 channels, where `bench gemv` read Llama-3.1-8B's o
// (4096 x 4096) and down (4096 x 14336) faster at 4 than at 2: a shorter
// tail wave (v5; docs/perf/decode-step.md v10).
func gemvSplitFor(N int) int {
	switch {
	case N <= 4096:
		return 4
	case N <= 8192:
		return 2
	}
	return 1
}

// GEMVMaxGroups is the most weights one GEMV.LaunchGroups computes
// (gemv.cu's kMaxGroups).
const GEMVMaxGroups = 3

// GEMV holds gemv.cu's kernels, one per (row count 1..GEMVMaxRows, split).
type GEMV struct {
	fns [GEMVMaxRows + 1][len(gemvSplits)]cuda.Function
	// EarlyWeights makes each lane issue its first weight loads before the
	// kernel waits for the one ahead of it on the stream (gemv.cu is
	// GridDependent), so that they overlap that kernel's tail. Set it only
	// where no launch's weights are written by the kernel right before it
	// (a backend's weights are written once, at load, before a stream sync).
	// Measured on the H100: -1.1 us per Llama-3.1-8B layer beyond PDL's
	// -1.6 (docs/perf/decode-step.md v6), so backend/gpu leaves it off.
	EarlyWeights bool
}

// LoadGEMV compiles gemv.cu (once per device).
func LoadGEMV(dev *cuda.Device) (*GEMV, error) {
	expr := func(t, s int) string { return fmt.Sprintf("gemv::gemv_f16<%d, %d>", t, s) }
	var exprs []string
	for t := 1; t <= GEMVMaxRows; t++ {
		for _, s := range gemvSplits {
			exprs = append(exprs, expr(t, s))
		}
	}
	mod, err := dev.Compile(program("gemv.cu", gemvSource, exprs, nil))
	if err != nil {
		return nil, err
	}
	g := &GEMV{}
	for t := 1; t <= GEMVMaxRows; t++ {
		for i, s := range gemvSplits {
			if g.fns[t][i], err = mod.Function(expr(t, s)); err != nil {
				return nil, err
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
	return g.launchSplit(c, st, y, x, w, bias, T, N, K, gemvSplitFor(N))
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

// early is the kernels' early argument.
func (g *GEMV) early() int32 {
	if g.EarlyWeights {
		return 1
	}
	return 0
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

// GroupSplit is the split-K factor LaunchGroups takes for weights with
// these output channel counts: that of one weight of their summed N, so
// q|k|v at Llama-3.1-8B shapes (6144 channels) all take q's split 2.
func GroupSplit(Ns ...int) int {
	sum := 0
	for _, n := range Ns {
		sum += n
	}
	return gemvSplitFor(sum)
}

// LaunchGroups computes, in one launch, y_i = x·W_iᵀ + bias_i for up to
// GEMVMaxGroups weights sharing x [T][K] float32 (kernels.LinearGroup as
// for Linear.LaunchGroups: w [N][K] fp16, bias [N] float32 or 0, y [T][N]
// float32), with one split-K factor for all of them, GroupSplit of their
// Ns. Each weight's result is bitwise that of LaunchSplit of it alone at
// that split (not always Launch's: a weight's own split may differ).
func (g *GEMV) LaunchGroups(c *cuda.Ctx, st cuda.Stream, x cuda.DevicePtr, T, K int, groups ...LinearGroup) error {
	sum := 0
	for _, gr := range groups {
		sum += gr.N
	}
	return g.LaunchGroupsSplit(c, st, x, T, K, gemvSplitFor(sum), groups...)
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
	return c.Launch(g.fns[T][i], cuda.Dim3{X: ctas}, cuda.Dim3{X: gemvWarps * 32}, 0, st,
		x, int32(K), g.early(),
		gs[0].W, gs[0].Bias, gs[0].Y, int32(gs[0].N),
		gs[1].W, gs[1].Bias, gs[1].Y, int32(gs[1].N),
		gs[2].W, gs[2].Bias, gs[2].Y, int32(gs[2].N))
}

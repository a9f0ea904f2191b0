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
// warps to put about 32 on each of an H100's 132 SMs (v2; docs/perf).
func gemvSplitFor(N int) int {
	switch {
	case N <= 2048:
		return 4
	case N <= 8192:
		return 2
	}
	return 1
}

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

// launchSplit launches with split-K factor s (one of gemvSplits).
func (g *GEMV) launchSplit(c *cuda.Ctx, st cuda.Stream, y, x, w, bias cuda.DevicePtr, T, N, K, s int) error {
	i := 0
	for i < len(gemvSplits) && gemvSplits[i] != s {
		i++
	}
	if i == len(gemvSplits) {
		return fmt.Errorf("kernels: gemv: no split-K factor %d", s)
	}
	perCTA := gemvWarps / s
	var early int32
	if g.EarlyWeights {
		early = 1
	}
	return c.Launch(g.fns[T][i], cuda.Dim3{X: (N + perCTA - 1) / perCTA}, cuda.Dim3{X: gemvWarps * 32}, 0, st,
		x, w, bias, y, int32(N), int32(K), early)
}

// LaunchSplit is Launch with an explicit split-K factor (1, 2 or 4), for
// tests and tuning.
func (g *GEMV) LaunchSplit(c *cuda.Ctx, st cuda.Stream, y, x, w, bias cuda.DevicePtr, T, N, K, split int) error {
	if !g.Fits(T, K) || N <= 0 {
		return fmt.Errorf("kernels: gemv: shape T=%d N=%d K=%d does not fit", T, N, K)
	}
	return g.launchSplit(c, st, y, x, w, bias, T, N, K, split)
}

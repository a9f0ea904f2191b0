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

// GEMV holds gemv.cu's kernels, one per row count 1..GEMVMaxRows.
type GEMV struct {
	fns [GEMVMaxRows + 1]cuda.Function
}

// LoadGEMV compiles gemv.cu (once per device).
func LoadGEMV(dev *cuda.Device) (*GEMV, error) {
	var exprs []string
	for t := 1; t <= GEMVMaxRows; t++ {
		exprs = append(exprs, fmt.Sprintf("gemv::gemv_f16<%d>", t))
	}
	mod, err := dev.Compile(cuda.Program{Name: "gemv.cu", Source: gemvSource, Exprs: exprs})
	if err != nil {
		return nil, err
	}
	g := &GEMV{}
	for t := 1; t <= GEMVMaxRows; t++ {
		if g.fns[t], err = mod.Function(exprs[t-1]); err != nil {
			return nil, err
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
	return c.Launch(g.fns[T], cuda.Dim3{X: (N + gemvWarps - 1) / gemvWarps}, cuda.Dim3{X: gemvWarps * 32}, 0, st,
		x, w, bias, y, int32(N), int32(K))
}

package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed gemvq.cu
var gemvqSource string

// gemvqThreads is gemvq.cu's kThreads; gemvqWarps its kWarps.
const (
	gemvqWarps   = 4
	gemvqThreads = gemvqWarps * 32
)

// gemvqBits are the code widths gemvq.cu reads (package wq's int4, int8).
var gemvqBits = [...]int{4, 8}

// GEMVQ holds gemvq.cu's kernels: the decode GEMV over packed low-bit
// weights for 1..GEMVMaxRows rows, each code width and split, and the
// dequantization to fp16 for prefill.
type GEMVQ struct {
	gemv    [GEMVMaxRows + 1][len(gemvqBits)][len(gemvSplits)]cuda.Function
	dequant [len(gemvqBits)]cuda.Function
}

// LoadGEMVQ compiles gemvq.cu (once per device; its 50 instantiations take
// a few seconds the first time, then come from the kernel cache).
func LoadGEMVQ(dev *cuda.Device) (*GEMVQ, error) {
	gexpr := func(t, b, s int) string { return fmt.Sprintf("gemvq::gemv_q<%d, %d, %d>", t, b, s) }
	dexpr := func(b int) string { return fmt.Sprintf("gemvq::dequant_q<%d>", b) }
	var exprs []string
	for t := 1; t <= GEMVMaxRows; t++ {
		for _, b := range gemvqBits {
			for _, s := range gemvSplits {
				exprs = append(exprs, gexpr(t, b, s))
			}
		}
	}
	for _, b := range gemvqBits {
		exprs = append(exprs, dexpr(b))
	}
	mod, err := dev.Compile(cuda.Program{Name: "gemvq.cu", Source: gemvqSource, Exprs: exprs})
	if err != nil {
		return nil, err
	}
	g := &GEMVQ{}
	for t := 1; t <= GEMVMaxRows; t++ {
		for bi, b := range gemvqBits {
			for si, s := range gemvSplits {
				if g.gemv[t][bi][si], err = mod.Function(gexpr(t, b, s)); err != nil {
					return nil, err
				}
			}
		}
	}
	for bi, b := range gemvqBits {
		if g.dequant[bi], err = mod.Function(dexpr(b)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func gemvqBitsIndex(bits int) int {
	for i, b := range gemvqBits {
		if b == bits {
			return i
		}
	}
	return -1
}

// Reads reports whether the kernels read codes of this width with group G
// (a multiple of 32 dividing K).
func (g *GEMVQ) Reads(bits, G, K int) bool {
	return gemvqBitsIndex(bits) >= 0 && G > 0 && G%32 == 0 && K%G == 0
}

// Launch computes y = x·Ŵᵀ + bias for T <= GEMVMaxRows rows: x [T][K]
// float32, words and params the packed matrix ([N] rows of wq's layout),
// bias [N] float32 or 0, y [T][N] float32.
func (g *GEMVQ) Launch(c *cuda.Ctx, st cuda.Stream, y, x, words, params, bias cuda.DevicePtr, T, N, K, bits, G int) error {
	bi := gemvqBitsIndex(bits)
	if T < 1 || T > GEMVMaxRows || N <= 0 || !g.Reads(bits, G, K) {
		return fmt.Errorf("kernels: gemvq: T=%d N=%d K=%d bits=%d G=%d has no kernel", T, N, K, bits, G)
	}
	s := gemvSplitFor(N)
	si := 0
	for gemvSplits[si] != s {
		si++
	}
	perCTA := gemvqWarps / s
	return c.Launch(g.gemv[T][bi][si], cuda.Dim3{X: (N + perCTA - 1) / perCTA}, cuda.Dim3{X: gemvqThreads}, 0, st,
		x, words, params, bias, y, int32(N), int32(K), int32(G))
}

// Dequant writes Ŵ as fp16 [N][K] to out (for prefill through cuBLASLt).
func (g *GEMVQ) Dequant(c *cuda.Ctx, st cuda.Stream, out, words, params cuda.DevicePtr, N, K, bits, G int) error {
	bi := gemvqBitsIndex(bits)
	if N <= 0 || !g.Reads(bits, G, K) {
		return fmt.Errorf("kernels: gemvq dequant: N=%d K=%d bits=%d G=%d has no kernel", N, K, bits, G)
	}
	chunks := N * (K / (128 / bits))
	return c.Launch(g.dequant[bi], cuda.Dim3{X: (chunks + 255) / 256}, cuda.Dim3{X: 256}, 0, st, words, params, out, int32(N), int32(K), int32(G))
}

package cuda_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// TestQuantLinear runs Linear over packed int3, int4 and int8 weights on the
// GPU for decode batches (T = 3 and 12: gemvq.cu, one and two n-tiles) and a
// prefill batch (T = 20: fp16 dequantization and cuBLASLt) against a float64
// reference on ŵ. Both paths multiply fp16 x with float32 sums: the GEMV
// sums s·Σq·x + z·Σx per 128-channel tile of exact codes, the prefill path
// fp16(ŵ)·x, so the bound is 2⁻¹⁰·(1 + 2⁻¹⁰) plus (K/16 + 40)·2⁻²³ of
// Σ(|s|·q + |z|)·|x| (gemvq_test.go has the derivation).
func TestQuantLinear(t *testing.T) {
	b := gpu(t)
	r := rand.New(rand.NewPCG(7, 8))
	const N, K = 300, 1024
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
	}
	bias := make([]float32, N)
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	bw, err := b.LoadWeight("bias", backend.F32, []int{N}, encode(backend.F32, bias))
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeWeight(bw)
	for _, e := range []wq.Elem{wq.Int4, wq.Int8, wq.Int3} {
		m, err := wq.Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		qw, err := b.LoadQuantWeight("w", m, nil)
		if err != nil {
			t.Fatalf("int%d: %v", e.Bits(), err)
		}
		for _, T := range []int{3, 12, 20} {
			x := make([]float32, T*K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			xt, _ := b.Alloc(backend.F32, T, K)
			yt, _ := b.Alloc(backend.F32, T, N)
			if err := b.Upload(xt, x); err != nil {
				t.Fatal(err)
			}
			b.Linear(yt, xt, qw, bw)
			got := make([]float32, T*N)
			if err := b.Download(got, yt); err != nil {
				t.Fatalf("int%d T=%d: %v", e.Bits(), T, err)
			}
			for ti := range T {
				for n := range N {
					want, mag := float64(bias[n]), 0.0
					for k := range K {
						xv := float64(x[ti*K+k])
						want += xv * float64(m.At(n, k))
						sc, z := m.Param(n, k/m.Group)
						mag += (math.Abs(float64(half.ToFloat32(sc)))*float64(m.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))) * math.Abs(xv)
					}
					tol := (0x1p-10*(1+0x1p-10)+float64(K/16+40)*0x1p-23)*mag + 0x1p-24*math.Abs(want)
					if g := float64(got[ti*N+n]); g != g || math.Abs(g-want) > tol {
						t.Fatalf("int%d T=%d: y[%d,%d] = %g, want %g (tol %.3g)", e.Bits(), T, ti, n, g, want, tol)
					}
				}
			}
			b.Free(xt)
			b.Free(yt)
		}
		b.FreeWeight(qw)
	}
	m, _ := wq.Quantize(wq.Int4, 128, N, K, w)
	dec := &wq.DEC{R: m, KChunk: 8}
	if _, err := b.LoadQuantWeight("w", m, dec); err == nil || !strings.Contains(err.Error(), "DEC") {
		t.Fatalf("DEC on CUDA: err = %v, want a clear refusal", err)
	}
}

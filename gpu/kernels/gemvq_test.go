package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// TestGEMVQMatchesReference checks gemvq.cu against a float64 reference on
// wq's dequantized values Ŵ (wq.Matrix.At), for int3, int4 and int8, groups
// of 128, 64 and 32, one and two n-tiles of rows, K not a multiple of the
// 128-channel tile, N not a multiple of 16, and every split; weights
// N(0, 0.02²) with outlier input columns and x with outlier channels.
// x is rounded to fp16 (2⁻¹¹ relatively). With groups of whole tiles the
// kernel sums s·Σq·x + z·Σx per tile (exact codes, float32 sums); otherwise
// it rounds ŵ once to fp16 (within 2⁻¹¹ + 2⁻²⁴ of wq's). Either way each
// term's error is within 2⁻¹⁰·(1 + 2⁻¹⁰) of (|s|·q + |z|)·|x| ≥ |ŵ·x|, and
// the float32 sums of the tensor cores, the tiles and the split reduction add
// (K/16 + 40)·2⁻²³ of Σ(|s|·q + |z|)·|x|. The fp16 dequantization for
// prefill must equal fp16(ŵ) bit for bit.
func TestGEMVQMatchesReference(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		e          wq.Elem
		G, T, N, K int
	}{{wq.Int4, 128, 1, 4096, 4096}, {wq.Int4, 128, 3, 1000, 1024}, {wq.Int4, 32, 8, 257, 2048}, {wq.Int8, 128, 1, 1024, 4096},
		{wq.Int8, 64, 5, 333, 1408}, {wq.Int4, 128, 2, 64, 14336}, {wq.Int4, 64, 16, 100, 1344}, {wq.Int4, 128, 11, 4096, 4096},
		{wq.Int3, 128, 1, 4096, 4096}, {wq.Int3, 32, 9, 77, 1440}, {wq.Int8, 128, 16, 200, 4096}} {
		t.Run(fmt.Sprintf("int%d-g%d-T%d-N%d-K%d", c.e.Bits(), c.G, c.T, c.N, c.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			w := make([]float32, c.N*c.K)
			for i := range w {
				w[i] = float32(0.02 * r.NormFloat64())
				if i%c.K%97 == 11 {
					w[i] *= 20
				}
			}
			qm, err := wq.Quantize(c.e, c.G, c.N, c.K, w)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, c.T*c.K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if i%c.K%37 == 3 {
					x[i] *= 20
				}
			}
			bias := make([]float32, c.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			wp, pp := m.put(cuda.Bytes(qm.Words)), m.put(cuda.Bytes(qm.Params))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			want := make([]float64, c.T*c.N)
			mag := make([]float64, c.T*c.N)
			for n := range c.N {
				for ti := range c.T {
					sum, m := 0.0, 0.0
					for k := range c.K {
						xv := float64(x[ti*c.K+k])
						sum += xv * float64(qm.At(n, k))
						sc, z := qm.Param(n, k/c.G)
						m += (math.Abs(float64(half.ToFloat32(sc)))*float64(qm.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))) * math.Abs(xv)
					}
					want[ti*c.N+n], mag[ti*c.N+n] = sum+float64(bias[n]), m
				}
			}
			prodErr := 0x1p-10 * (1 + 0x1p-10)
			for _, split := range []int{0, 1, 2, 4, 8, 16} {
				yp := m.put(cuda.Bytes(nanF32(c.T * c.N)))
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					if split == 0 {
						return g.Launch(cx, s, yp, xp, wp, pp, bp, c.T, c.N, c.K, c.e.Bits(), c.G)
					}
					return g.LaunchSplit(cx, s, yp, xp, wp, pp, bp, c.T, c.N, c.K, c.e.Bits(), c.G, split)
				})
				got := make([]float32, c.T*c.N)
				m.read(cuda.Bytes(got), yp)
				for i, w := range want {
					tol := (prodErr+float64(c.K/16+40)*0x1p-23)*mag[i] + 0x1p-24*math.Abs(w)
					if gv := float64(got[i]); gv != gv || math.Abs(gv-w) > tol {
						t.Fatalf("split %d: y[%d,%d] = %g, want %g (tol %.3g)", split, i/c.N, i%c.N, gv, w, tol)
					}
				}
			}
			hp := m.put(make([]byte, 2*c.N*c.K))
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
				return g.Dequant(cx, s, hp, wp, pp, c.N, c.K, c.e.Bits(), c.G)
			})
			h := make([]uint16, c.N*c.K)
			m.read(cuda.Bytes(h), hp)
			for n := range c.N {
				for k := range c.K {
					if want := half.FromFloat32(qm.At(n, k)); h[n*c.K+k] != want {
						t.Fatalf("dequant [%d,%d] = %#04x, want %#04x", n, k, h[n*c.K+k], want)
					}
				}
			}
		})
	}
}

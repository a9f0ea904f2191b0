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

// TestGEMVQ6MatchesV5 checks v6 (gemv_q5 over the tiled layout) on the
// GPU: tile_pack (GEMVQ.PackTiles) writes what kernels.PackTiles does,
// word for word (TestPackTilesMatchesWQ ties that to wq's ŵ), and v6 over
// it gives v5.1's y (LaunchV5 over wq's layout) bit for bit at every
// split, with and without early loads, within v4's float64 bound
// ((K/64 + 83)·2⁻²⁴ of Σ(|s|q + |z|)|x|, TestGEMVQMatchesReference); int4,
// groups of 128 and 256, N not a multiple of 16, an odd number of tiles,
// the 8B shapes' K. y starts as NaN.
func TestGEMVQ6MatchesV5(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(15, 7))
	for _, c := range []struct{ G, N, K int }{{128, 2050, 1152}, {256, 77, 1536}, {128, 4096, 4096}, {128, 1000, 14336}, {128, 100, 384}} {
		t.Run(fmt.Sprintf("g%d-N%d-K%d", c.G, c.N, c.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			w := make([]float32, c.N*c.K)
			for i := range w {
				w[i] = float32(0.02 * r.NormFloat64())
				if i%c.K%97 == 11 {
					w[i] *= 20
				}
			}
			qm, err := wq.Quantize(wq.Int4, c.G, c.N, c.K, w)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, c.K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if i%37 == 3 {
					x[i] *= 20
				}
			}
			bias := make([]float32, c.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			twant, tpwant, err := kernels.PackTiles(4, c.N, c.K, c.G, qm.Words, qm.Params)
			if err != nil {
				t.Fatal(err)
			}
			wp, pp := m.put(cuda.Bytes(qm.Words)), m.put(cuda.Bytes(qm.Params))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			poison := make([]uint32, len(twant)+len(tpwant))
			for i := range poison {
				poison[i] = 0xdeadbeef
			}
			twp, tpp := m.put(cuda.Bytes(poison[:len(twant)])), m.put(cuda.Bytes(poison[len(twant):]))
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error { return g.PackTiles(cx, s, twp, tpp, wp, pp, c.N, c.K, 4, c.G) })
			tw, tp := make([]uint32, len(twant)), make([]uint32, len(tpwant))
			m.read(cuda.Bytes(tw), twp)
			m.read(cuda.Bytes(tp), tpp)
			for i := range twant {
				if tw[i] != twant[i] {
					t.Fatalf("tile_pack word %d = %#08x, PackTiles %#08x", i, tw[i], twant[i])
				}
			}
			for i := range tpwant {
				if tp[i] != tpwant[i] {
					t.Fatalf("tile_pack param %d = %#08x, PackTiles %#08x", i, tp[i], tpwant[i])
				}
			}
			want := make([]float64, c.N)
			tol := make([]float64, c.N)
			for n := range c.N {
				sum, mag, wa := 0.0, 0.0, 0.0
				for k := range c.K {
					xv := float64(x[k])
					sum += xv * float64(qm.At(n, k))
					sc, z := qm.Param(n, k/c.G)
					a := math.Abs(float64(half.ToFloat32(sc)))*float64(qm.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))
					mag += a * math.Abs(xv)
					wa += a
				}
				want[n] = sum + float64(bias[n])
				tol[n] = float64(c.K/64+83)*0x1p-24*mag + 0x1p-36*wa + 0x1p-24*math.Abs(want[n])
			}
			for _, split := range kernels.GEMVQ4Splits() {
				for _, early := range []bool{false, true} {
					var ys [2][]float32
					for v := range ys {
						yp := m.put(cuda.Bytes(nanF32(c.N)))
						m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
							g.EarlyWeights = early
							defer func() { g.EarlyWeights = false }()
							if v == 0 {
								return g.LaunchV5(cx, s, yp, xp, wp, pp, bp, c.N, c.K, 4, c.G, split)
							}
							return g.LaunchV6(cx, s, yp, xp, twp, tpp, bp, c.N, c.K, 4, c.G, split)
						})
						ys[v] = make([]float32, c.N)
						m.read(cuda.Bytes(ys[v]), yp)
					}
					for n := range c.N {
						v5, v6 := ys[0][n], ys[1][n]
						if math.Float32bits(v5) != math.Float32bits(v6) {
							t.Fatalf("split %d early %v: y[%d] v6 %g, v5.1 %g", split, early, n, v6, v5)
						}
						if gv := float64(v6); gv != gv || math.Abs(gv-want[n]) > tol[n] {
							t.Fatalf("split %d early %v: y[%d] = %g, want %g (tol %.3g)", split, early, n, gv, want[n], tol[n])
						}
					}
				}
			}
		})
	}
}

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
			qm := gemvqWeight(t, r, wq.Int4, c.G, c.N, c.K)
			x := gemvqX(r, 1, c.K)
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

// TestGEMVQTiledMatchesWQ checks the tiled forms of the kernels an int4
// weight meets when the tiled layout is its only device copy (session
// 15c) on the GPU against their twins over wq's layout: v2 over the tiled
// layout (LaunchSplitTiled) gives LaunchSplit's y bit for bit at every
// split and 1-16 rows of x (one and two n-tiles), within v2's float64
// bound (TestGEMVQMatchesReference: 2⁻¹⁰·(1 + 2⁻¹⁰) + (K/16 + 40)·2⁻²³ of
// Σ(|s|q + |z|)|x|); LaunchTiled gives Launch's y bit for bit wherever
// Launch runs v5 or v2 (T >= 2; one row with V2 set, and with 2048+ rows
// by default: v6 against v5.1); DequantTiled writes Dequant's fp16 Ŵ,
// which is fp16(ŵ), and so do both in their form before session 15e
// (DequantScalar). int4, int3 (session 15d) and int8 (session 16;
// tile_pack also checked word for word against PackTiles over poison;
// int8 at one row: LaunchTiled's v6.1 against Launch's v4.1 where their
// splits agree and the slices start at the same tiles), groups of 128 and 256, N
// not a multiple of 16, an odd number of tiles, the 8B shapes' K; y
// starts as NaN, the dequantized matrix as 0xffff (a NaN). int3 at one
// row by default (v6.1 over the tiled layout where Launch runs v3.2) is
// TestGEMVQ52MatchesV51's.
func TestGEMVQTiledMatchesWQ(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(15, 11))
	for _, c := range []struct {
		e       wq.Elem
		G, N, K int
	}{{wq.Int4, 128, 2050, 1152}, {wq.Int4, 256, 77, 1536}, {wq.Int4, 128, 4096, 4096}, {wq.Int4, 128, 1000, 14336},
		{wq.Int3, 128, 2050, 1152}, {wq.Int3, 256, 77, 1536}, {wq.Int3, 128, 4096, 4096}, {wq.Int3, 128, 1000, 14336},
		{wq.Int8, 128, 2050, 1152}, {wq.Int8, 256, 77, 1536}, {wq.Int8, 128, 4096, 4096}, {wq.Int8, 128, 1000, 14336}} {
		bits := c.e.Bits()
		t.Run(fmt.Sprintf("int%d-g%d-N%d-K%d", bits, c.G, c.N, c.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			qm := gemvqWeight(t, r, c.e, c.G, c.N, c.K)
			const maxT = kernels.GEMVQMaxRows
			x := gemvqX(r, maxT, c.K)
			bias := make([]float32, c.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			// The float64 reference of every row of x (the first T rows are
			// a launch of T).
			want, mag := make([]float64, maxT*c.N), make([]float64, maxT*c.N)
			for n := range c.N {
				for k := range c.K {
					wv := float64(qm.At(n, k))
					sc, z := qm.Param(n, k/c.G)
					a := math.Abs(float64(half.ToFloat32(sc)))*float64(qm.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))
					for ti := range maxT {
						xv := float64(x[ti*c.K+k])
						want[ti*c.N+n] += xv * wv
						mag[ti*c.N+n] += a * math.Abs(xv)
					}
				}
				for ti := range maxT {
					want[ti*c.N+n] += float64(bias[n])
				}
			}
			wp, pp := m.put(cuda.Bytes(qm.Words)), m.put(cuda.Bytes(qm.Params))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			twant, tpwant, err := kernels.PackTiles(bits, c.N, c.K, c.G, qm.Words, qm.Params)
			if err != nil {
				t.Fatal(err)
			}
			poison := make([]uint32, len(twant)+len(tpwant))
			for i := range poison {
				poison[i] = 0xdeadbeef
			}
			twp, tpp := m.put(cuda.Bytes(poison[:len(twant)])), m.put(cuda.Bytes(poison[len(twant):]))
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
				return g.PackTiles(cx, s, twp, tpp, wp, pp, c.N, c.K, bits, c.G)
			})
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
			launch := func(f func(cx *cuda.Ctx, s cuda.Stream, y cuda.DevicePtr) error, T int) []float32 {
				yp := m.put(cuda.Bytes(nanF32(T * c.N)))
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error { return f(cx, s, yp) })
				y := make([]float32, T*c.N)
				m.read(cuda.Bytes(y), yp)
				return y
			}
			same := func(what string, T int, wqY, tiledY []float32, bound bool) {
				t.Helper()
				for i := range wqY {
					if math.Float32bits(wqY[i]) != math.Float32bits(tiledY[i]) {
						t.Fatalf("%s T=%d: y[%d,%d] tiled %g, wq's layout %g", what, T, i/c.N, i%c.N, tiledY[i], wqY[i])
					}
					tol := (0x1p-10*(1+0x1p-10)+float64(c.K/16+40)*0x1p-23)*mag[i] + 0x1p-24*math.Abs(want[i])
					if gv := float64(tiledY[i]); gv != gv || (bound && math.Abs(gv-want[i]) > tol) {
						t.Fatalf("%s T=%d: y[%d,%d] = %g, want %g (tol %.3g)", what, T, i/c.N, i%c.N, gv, want[i], tol)
					}
				}
			}
			for _, T := range []int{1, 2, 3, 8, 9, 16} {
				for _, split := range []int{1, 2, 4, 8, 16} {
					a := launch(func(cx *cuda.Ctx, s cuda.Stream, y cuda.DevicePtr) error {
						return g.LaunchSplit(cx, s, y, xp, wp, pp, bp, T, c.N, c.K, bits, c.G, split)
					}, T)
					b := launch(func(cx *cuda.Ctx, s cuda.Stream, y cuda.DevicePtr) error {
						return g.LaunchSplitTiled(cx, s, y, xp, twp, tpp, bp, T, c.N, c.K, bits, c.G, split)
					}, T)
					same(fmt.Sprintf("v2 split %d", split), T, a, b, true)
				}
				// Launch's routes: T >= 2 v2; one row v5 (v6 tiled) where
				// UsesV5, int8's v4.1 (v6.1 tiled) where UsesV6 at the same
				// split and slices, and v2 with V2 set (elsewhere Launch
				// runs v3 at one row, which has no tiled form: not
				// compared).
				for _, v2 := range []bool{false, true} {
					g.V2 = v2
					v4 := bits == 8 && g.UsesV6(1, c.N, c.K, 8, c.G) && g.SplitV4For(c.N, c.K, 8) == g.SplitV5For(c.N, c.K, 8) &&
						v4Aligned(c.K, g.SplitV5For(c.N, c.K, 8))
					if T == 1 && !v2 && !g.UsesV5(1, c.N, c.K, bits, c.G) && !v4 {
						continue
					}
					for _, early := range []bool{false, true} {
						g.EarlyWeights = early
						a := launch(func(cx *cuda.Ctx, s cuda.Stream, y cuda.DevicePtr) error {
							return g.Launch(cx, s, y, xp, wp, pp, bp, T, c.N, c.K, bits, c.G)
						}, T)
						b := launch(func(cx *cuda.Ctx, s cuda.Stream, y cuda.DevicePtr) error {
							return g.LaunchTiled(cx, s, y, xp, twp, tpp, bp, T, c.N, c.K, bits, c.G)
						}, T)
						same(fmt.Sprintf("Launch (V2 %v, early %v)", v2, early), T, a, b, true)
					}
				}
				g.V2, g.EarlyWeights = false, false
			}
			// Over wq's layout, over the tiled one, and both in the form
			// before session 15e (DequantScalar).
			var hs [4][]uint16
			for v := range hs {
				poison := make([]uint16, c.N*c.K)
				for i := range poison {
					poison[i] = 0xffff
				}
				hp := m.put(cuda.Bytes(poison))
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					g.DequantScalar = v >= 2
					defer func() { g.DequantScalar = false }()
					if v%2 == 0 {
						return g.Dequant(cx, s, hp, wp, pp, c.N, c.K, bits, c.G)
					}
					return g.DequantTiled(cx, s, hp, twp, tpp, c.N, c.K, bits, c.G)
				})
				hs[v] = make([]uint16, c.N*c.K)
				m.read(cuda.Bytes(hs[v]), hp)
			}
			for n := range c.N {
				for k := range c.K {
					i := n*c.K + k
					want := half.FromFloat32(qm.At(n, k))
					for v, h := range hs {
						if h[i] != want {
							t.Fatalf("dequant [%d,%d]: tiled %v, scalar %v: %#04x, want %#04x", n, k, v%2 == 1, v >= 2, h[i], want)
						}
					}
				}
			}
		})
	}
}

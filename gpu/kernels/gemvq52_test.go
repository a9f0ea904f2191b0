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

// TestGEMVQ52MatchesV51 checks gemvq4.cu's LEAN step on the GPU: v5.2
// (LaunchV5) gives v5.1's y (LaunchV5 with V51) bit for bit, for int4 and
// int8, at every split, with and without early loads; v6.1 (LaunchV6 over
// the tiled layout) gives v6's (V51) and so v5.1's. int3 (session 15d):
// LaunchV5 runs v5.0 (each lane's own copies; no LEAN form, V51 the same)
// and LaunchV6 v6.1 over int3's tiled layout with or without V51, which
// gives v5.0's y bit for bit, and LaunchTiled, at 2048+ rows, v6.1 too
// (UsesV6). int8 (session 16): v6.1 over int8's tiled layout gives v5.1's
// y, and v4.1's (LaunchV4, gemv_q4 over wq's layout, two tiles a step) at
// every split whose slices start at the same tiles (v4Aligned: every split
// of the 8B shapes' K), and LaunchTiled, where UsesV6, runs v6.1 (Launch's
// v4.1 route: compared where its split and slices are v6.1's). v6.2
// (session 23: LaunchV6 without V61, gemv_q7 at a ring of 5, 4 or 3 by K) gives
// v6.1's y (V61) for every width. Session 24: LaunchV61 (v6.1; int3's
// v6.1c, its codes in place, where a warp takes 4+ steps: LaunchTiled's
// route at splits 4-8) gives v6.1's y too.
// All within v4's
// float64 bound ((K/64 + 83)·2⁻²⁴ of Σ(|s|q + |z|)|x| + 2⁻³⁶·Σ(|s|q + |z|),
// TestGEMVQMatchesReference). N not a multiple of 16, an odd number of
// tiles (a slice's last step of one tile: the partial step), groups of 128
// and 256, the 8B shapes' K. y starts as NaN.
func TestGEMVQ52MatchesV51(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(15, 52))
	for _, c := range []struct {
		e       wq.Elem
		G, N, K int
	}{{wq.Int4, 128, 2050, 1152}, {wq.Int4, 256, 77, 1536}, {wq.Int4, 128, 4096, 4096}, {wq.Int4, 128, 1000, 14336}, {wq.Int4, 128, 100, 384},
		{wq.Int4, 128, 33, 640}, {wq.Int8, 128, 2048, 1408}, {wq.Int8, 256, 129, 4096}, {wq.Int8, 128, 1000, 14336},
		{wq.Int8, 128, 4096, 4096}, {wq.Int8, 128, 2064, 14336}, {wq.Int8, 256, 2048, 2048},
		{wq.Int3, 128, 2050, 1152}, {wq.Int3, 256, 77, 1536}, {wq.Int3, 128, 4096, 4096}, {wq.Int3, 128, 1000, 14336},
		{wq.Int3, 128, 100, 384}, {wq.Int3, 128, 33, 640}} {
		t.Run(fmt.Sprintf("int%d-g%d-N%d-K%d", c.e.Bits(), c.G, c.N, c.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			qm := gemvqWeight(t, r, c.e, c.G, c.N, c.K)
			x := gemvqX(r, 1, c.K)
			bias := make([]float32, c.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			wp, pp := m.put(cuda.Bytes(qm.Words)), m.put(cuda.Bytes(qm.Params))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			tiled := g.ReadsV6(c.e.Bits(), c.G, c.K)
			var twp, tpp cuda.DevicePtr
			if tiled {
				twp = m.put(make([]byte, 4*kernels.TiledWords(c.e.Bits(), c.N, c.K)))
				tpp = m.put(make([]byte, 4*kernels.TiledParams(c.N, c.K, c.G)))
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					return g.PackTiles(cx, s, twp, tpp, wp, pp, c.N, c.K, c.e.Bits(), c.G)
				})
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
			// forms: v5.1, v5.2, and where tiled v6, v6.1 (int3: v5.0
			// twice, then v6.1 twice, and LaunchTiled's route; int8: v4.1
			// and LaunchTiled's route).
			type form struct {
				name                      string
				v51, tiled, auto, v4, v61 bool
				v61c                      bool // LaunchV61
			}
			forms := []form{{name: "v5.1", v51: true}, {name: "v5.2"}}
			if tiled {
				forms = append(forms, form{name: "v6", v51: true, tiled: true}, form{name: "v6.1", tiled: true, v61: true},
					form{name: "v6.2", tiled: true}, form{name: "v6.1c", tiled: true, v61c: true})
			}
			if c.e == wq.Int8 {
				forms = append(forms, form{name: "v4.1", v4: true})
			}
			autoTiled := (c.e == wq.Int3 || c.e == wq.Int8) && g.UsesV6(1, c.N, c.K, c.e.Bits(), c.G)
			if autoTiled {
				forms = append(forms, form{name: "LaunchTiled", tiled: true, auto: true})
				if c.e == wq.Int8 { // Launch: v4.1 over wq's layout at its split
					forms = append(forms, form{name: "Launch", auto: true, v4: true})
				}
			}
			if c.e == wq.Int8 && !autoTiled && c.N >= 2048 {
				t.Fatalf("int8 [%d, %d] G%d: UsesV6 false where Launch runs v4.1", c.N, c.K, c.G)
			}
			for _, split := range kernels.GEMVQ4Splits() {
				for _, early := range []bool{false, true} {
					ys := make([][]float32, len(forms))
					for fi, f := range forms {
						// LaunchTiled runs its own split: compared there only
						// (int8: where it is Launch's too and v4.1's slices
						// start at v6.1's tiles); v4.1 where its slices start
						// at v6.1's.
						skip := f.auto && split != g.SplitV5For(c.N, c.K, c.e.Bits())
						skip = skip || f.auto && c.e == wq.Int8 && (split != g.SplitV4For(c.N, c.K, 8) || !v4Aligned(c.K, split))
						skip = skip || f.v4 && !f.auto && !v4Aligned(c.K, split)
						if skip {
							ys[fi] = ys[0]
							continue
						}
						yp := m.put(cuda.Bytes(nanF32(c.N)))
						m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
							g.EarlyWeights, g.V51, g.V61 = early, f.v51, f.v61
							defer func() { g.EarlyWeights, g.V51, g.V61 = false, false, false }()
							if f.auto && !f.tiled {
								return g.Launch(cx, s, yp, xp, wp, pp, bp, 1, c.N, c.K, c.e.Bits(), c.G)
							}
							if f.auto {
								return g.LaunchTiled(cx, s, yp, xp, twp, tpp, bp, 1, c.N, c.K, c.e.Bits(), c.G)
							}
							if f.v61c {
								return g.LaunchV61(cx, s, yp, xp, twp, tpp, bp, c.N, c.K, c.e.Bits(), c.G, split)
							}
							if f.v4 {
								return g.LaunchV4(cx, s, yp, xp, wp, pp, bp, c.N, c.K, c.e.Bits(), c.G, split)
							}
							if f.tiled {
								return g.LaunchV6(cx, s, yp, xp, twp, tpp, bp, c.N, c.K, c.e.Bits(), c.G, split)
							}
							return g.LaunchV5(cx, s, yp, xp, wp, pp, bp, c.N, c.K, c.e.Bits(), c.G, split)
						})
						ys[fi] = make([]float32, c.N)
						m.read(cuda.Bytes(ys[fi]), yp)
					}
					for fi, f := range forms {
						for n := range c.N {
							gv := ys[fi][n]
							if math.Float32bits(gv) != math.Float32bits(ys[0][n]) {
								t.Fatalf("split %d early %v: y[%d] %s %g, v5.1 %g", split, early, n, f.name, gv, ys[0][n])
							}
							if v := float64(gv); v != v || math.Abs(v-want[n]) > tol[n] {
								t.Fatalf("split %d early %v: y[%d] %s = %g, want %g (tol %.3g)", split, early, n, f.name, v, want[n], tol[n])
							}
						}
					}
				}
			}
		})
	}
}

// v4Aligned reports whether v4.1 (two int8 tiles a step) and v5/v6.1 (one
// a step) at split S start their slices at the same tiles of K, so that
// they add the same tiles in the same order: the same sums, bit for bit.
func v4Aligned(K, S int) bool {
	tiles := K / 128
	per4, per5 := (tiles+1)/2+S-1, tiles+S-1
	per4, per5 = per4/S*2, per5/S
	for i := range S + 1 {
		if min(tiles, i*per4) != min(tiles, i*per5) {
			return false
		}
	}
	return true
}

package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
)

// linearSetup compiles linear.cu once per test binary, or skips.
func linearSetup(t *testing.T) (*cuda.Device, *kernels.Linear) {
	t.Helper()
	d, _ := opsSetup(t)
	l, err := kernels.LoadLinear(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, l
}

// linearData is a random linear layer: N(0, 0.02²) fp16 weights, x with
// outlier channels (x20) as real activations have, a N(0, 1) bias.
type linearData struct {
	T, N, K int
	w       []uint16
	x, bias []float32
}

func newLinearData(r *rand.Rand, T, N, K int) *linearData {
	d := &linearData{T: T, N: N, K: K, w: make([]uint16, N*K), x: make([]float32, T*K), bias: make([]float32, N)}
	for i := range d.w {
		d.w[i] = half.FromFloat32(float32(0.02 * r.NormFloat64()))
	}
	for i := range d.x {
		d.x[i] = float32(r.NormFloat64())
		if i%K%37 == 3 {
			d.x[i] *= 20
		}
	}
	for i := range d.bias {
		d.bias[i] = float32(r.NormFloat64())
	}
	return d
}

// linearTol is the bound on |y - ref| for one output, where ref is the
// float64 dot product of the fp16-rounded x (the kernel's operand: the
// rounding itself is not an error of the kernel) with the fp16 weights,
// and mag = Σ|x̂·w| + |bias|. The fp16 products are exact in fp32; each
// mma.m16n8k16 adds 16 products and the accumulator with at most one
// truncation (<= 2⁻²³ of the largest term, which is <= mag) per term, 17
// per mma; a warp takes every 8th 128-channel k-block, 8 mmas each; the 7
// adds of the warps' partials and the bias add each round once (2⁻²⁴,
// counted as 2⁻²³).
func linearTol(K int, mag float64) float64 {
	const split, blockK = 8, 128
	blocks := (K + blockK - 1) / blockK
	mmas := (blocks + split - 1) / split * blockK / 16
	return float64(17*mmas+split) * 0x1p-23 * mag
}

// check compares y [T][N] with the reference on rows of d.
func (d *linearData) check(t *testing.T, y []float32, withBias bool) {
	t.Helper()
	xh := make([]float64, len(d.x))
	for i, v := range d.x {
		xh[i] = float64(half.ToFloat32(half.FromFloat32(v)))
	}
	for ti := range d.T {
		for n := range d.N {
			var want, mag float64
			for k := range d.K {
				p := xh[ti*d.K+k] * float64(half.ToFloat32(d.w[n*d.K+k]))
				want += p
				mag += math.Abs(p)
			}
			if withBias {
				want += float64(d.bias[n])
				mag += math.Abs(float64(d.bias[n]))
			}
			tol := linearTol(d.K, mag)
			g := float64(y[ti*d.N+n])
			if g != g || math.Abs(g-want) > tol {
				t.Fatalf("bias %v: y[%d,%d] = %g, want %g (tol %.3g)", withBias, ti, n, g, want, tol)
			}
		}
	}
}

// TestLinearMatchesReference checks linear.cu against the float64
// reference for row counts 1..300 (every n-tile count, several token
// blocks), odd N (partial m-tiles), K a multiple of 8 but not of the
// 128-channel iteration nor of 4 slices, with and without bias; every
// output starts as NaN.
func TestLinearMatchesReference(t *testing.T) {
	d, l := linearSetup(t)
	r := rand.New(rand.NewPCG(5, 6))
	shapes := []struct{ T, N, K int }{
		{1, 4096, 4096}, {1, 1000, 1032}, {2, 130, 8}, {3, 257, 4104}, {5, 64, 14336}, {8, 333, 2048},
		{9, 77, 520}, {16, 48, 136}, {17, 100, 264}, {33, 31, 392}, {64, 129, 1024}, {65, 50, 200}, {300, 70, 520}, {40, 96, 4104},
	}
	if testing.Short() {
		shapes = shapes[1:9]
	}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("T%d-N%d-K%d", sh.T, sh.N, sh.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			ld := newLinearData(r, sh.T, sh.N, sh.K)
			wp, xp, bp := m.put(cuda.Bytes(ld.w)), m.put(cuda.Bytes(ld.x)), m.put(cuda.Bytes(ld.bias))
			xh := m.put(make([]byte, max(16, kernels.LinearScratchBytes(sh.T, sh.K))))
			for _, withBias := range []bool{false, true} {
				yp := m.poisonedF32(sh.T * sh.N)
				b := cuda.DevicePtr(0)
				if withBias {
					b = bp
				}
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					return l.Launch(c, s, yp, xp, xh, wp, b, sh.T, sh.N, sh.K)
				})
				ld.check(t, m.f32s(yp, sh.T*sh.N), withBias)
			}
		})
	}
}

// TestLinearBatchInvariant checks the property linear.cu exists for: row t
// of a batch of T rows is bitwise the row computed alone (T = 1), and the
// row computed in a batch of the same rows in reverse order, for T across
// every n-tile count and token-block boundary.
func TestLinearBatchInvariant(t *testing.T) {
	d, l := linearSetup(t)
	r := rand.New(rand.NewPCG(7, 8))
	const N, K = 1000, 4104
	Ts := []int{1, 2, 3, 7, 8, 9, 16, 33, 64, 257}
	if testing.Short() {
		Ts = []int{1, 3, 9, 33, 64}
	}
	for _, T := range Ts {
		t.Run(fmt.Sprintf("T%d", T), func(t *testing.T) {
			m := newGPUMem(t, d)
			ld := newLinearData(r, T, N, K)
			rev := make([]float32, T*K)
			for ti := range T {
				copy(rev[(T-1-ti)*K:(T-ti)*K], ld.x[ti*K:(ti+1)*K])
			}
			wp, xp, bp, xr := m.put(cuda.Bytes(ld.w)), m.put(cuda.Bytes(ld.x)), m.put(cuda.Bytes(ld.bias)), m.put(cuda.Bytes(rev))
			xh := m.put(make([]byte, max(16, kernels.LinearScratchBytes(T, K))))
			yAll, yRev, yOne := m.poisonedF32(T*N), m.poisonedF32(T*N), m.poisonedF32(T*N)
			m.run(func(c *cuda.Ctx, s cuda.Stream) error {
				if err := l.Launch(c, s, yAll, xp, xh, wp, bp, T, N, K); err != nil {
					return err
				}
				if err := l.Launch(c, s, yRev, xr, xh, wp, bp, T, N, K); err != nil {
					return err
				}
				for ti := range T {
					off := cuda.DevicePtr(ti)
					if err := l.Launch(c, s, yOne+off*4*N, xp+off*4*K, 0, wp, bp, 1, N, K); err != nil {
						return err
					}
				}
				return nil
			})
			all, rv, one := m.f32s(yAll, T*N), m.f32s(yRev, T*N), m.f32s(yOne, T*N)
			for ti := range T {
				for n := range N {
					a := math.Float32bits(all[ti*N+n])
					if o := math.Float32bits(one[ti*N+n]); a != o || all[ti*N+n] != all[ti*N+n] {
						t.Fatalf("y[%d,%d] = %g in a batch of %d, %g alone", ti, n, all[ti*N+n], T, one[ti*N+n])
					}
					if v := math.Float32bits(rv[(T-1-ti)*N+n]); a != v {
						t.Fatalf("y[%d,%d] = %g in a batch of %d, %g with the rows reversed", ti, n, all[ti*N+n], T, rv[(T-1-ti)*N+n])
					}
				}
			}
			if T <= 9 {
				ld.check(t, all, true)
			}
		})
	}
}

// TestLinearWideTiled checks the tiled wide kernel (linear.cu v7) at every
// token tile and cluster size, and in 128-k stages, against v3's wide
// kernel (Linear.WideV3),
// bitwise: row counts on both sides of the token tiles, groups whose
// m-tiles straddle the 128-channel CTA tiles, partial m-tiles, K from one
// k-block (seven empty classes) to 33 k-blocks and not a multiple of the
// 64-k stage; then the default choice against v3 and the float64
// reference. Every output starts as NaN.
func TestLinearWideTiled(t *testing.T) {
	d, l := linearSetup(t)
	defer l.ForceWide(0, 0)
	defer l.ForceWideStage(0)
	defer l.ForceWideDeep(0)
	defer func() { l.EarlyWeights = false }()
	r := rand.New(rand.NewPCG(11, 12))
	shapes := []struct {
		T  int
		Ns []int
		K  int
	}{
		{17, []int{100}, 8}, {33, []int{200, 37, 64}, 1032}, {64, []int{48}, 136}, {65, []int{300}, 520},
		{100, []int{129, 1000}, 4104}, {130, []int{77}, 2048}, {257, []int{260, 20}, 1032},
	}
	if testing.Short() {
		shapes = shapes[:3]
	}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("T%d-N%v-K%d", sh.T, sh.Ns, sh.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			x := newLinearData(r, sh.T, 1, sh.K).x
			xp := m.put(cuda.Bytes(x))
			xh := m.put(make([]byte, kernels.LinearScratchBytes(sh.T, sh.K)))
			var lds []*linearData
			var groups []kernels.LinearGroup
			for i, N := range sh.Ns {
				ld := newLinearData(r, sh.T, N, sh.K)
				ld.x = x
				lds = append(lds, ld)
				g := kernels.LinearGroup{W: m.put(cuda.Bytes(ld.w)), N: N}
				if i != 1 {
					g.Bias = m.put(cuda.Bytes(ld.bias))
				}
				groups = append(groups, g)
			}
			// launch runs the groups into fresh NaN outputs and returns them.
			launch := func() [][]float32 {
				gs := append([]kernels.LinearGroup(nil), groups...)
				for i := range gs {
					gs[i].Y = m.poisonedF32(sh.T * gs[i].N)
				}
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					return l.LaunchGroups(c, s, xp, xh, sh.T, sh.K, gs...)
				})
				var out [][]float32
				for _, g := range gs {
					out = append(out, m.f32s(g.Y, sh.T*g.N))
				}
				return out
			}
			same := func(what string, got, want [][]float32) {
				t.Helper()
				for i := range got {
					for j := range got[i] {
						if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) || got[i][j] != got[i][j] {
							t.Fatalf("%s: group %d y[%d,%d] = %g, v3 %g", what, i, j/sh.Ns[i], j%sh.Ns[i], got[i][j], want[i][j])
						}
					}
				}
			}
			l.WideV3 = true
			v3 := launch()
			l.WideV3 = false
			// Every variant with its weights' first stages loaded after
			// and before the dependency wait (EarlyWeights).
			for _, early := range []bool{false, true} {
				l.EarlyWeights = early
				l.ForceWideStage(64)
				l.ForceWideDeep(-1)
				for _, bn := range []int{64, 128} {
					for _, S := range []int{1, 2, 4, 8} {
						if !l.HasWideSplit(S) {
							continue
						}
						l.ForceWide(bn, S)
						same(fmt.Sprintf("BN %d S %d early %v", bn, S, early), launch(), v3)
					}
				}
				if l.HasWideDeep() {
					l.ForceWideDeep(1)
					same(fmt.Sprintf("BN 64 S 2 deep early %v", early), launch(), v3)
				}
				l.ForceWideDeep(0)
				l.ForceWide(128, 1)
				l.ForceWideStage(128)
				same(fmt.Sprintf("BN 128 S 1 in 128-k stages early %v", early), launch(), v3)
				l.ForceWideStage(0)
				l.ForceWide(0, 0)
			}
			tiles := 0
			for _, N := range sh.Ns {
				tiles += (N + 15) / 16
			}
			bn, S, ks, deep := l.WideChoice(sh.T, tiles)
			t.Logf("default: BN %d, cluster %d, stage k %d, deep %v", bn, S, ks, deep)
			got := launch()
			same("default, early", got, v3)
			for i := range lds {
				lds[i].check(t, got[i], i != 1)
			}
			l.EarlyWeights = false
		})
	}
}

// TestLinearWideRule checks tiledFor's choices on an H100's occupancy (132
// SMs; two CTAs an SM at BN 64, one at BN 128 and in the deep ring) for
// Llama-3.1-8B's layers at 55, 100 and 256 rows (the choices session 22's
// sweep measured best or within 2-5% of best; o and down at 100 rows in
// the deep ring, v8: wide2 call 1's sweep), and without clusters.
func TestLinearWideRule(t *testing.T) {
	h100 := [2][4]int{{2, 2, 2, 2}, {1, 1, 1, 1}}
	l := kernels.NewWideRuleLinear(132, h100, true)
	const o, qkv, gateUp, down, lmHead = 256, 384, 1792, 256, 8016 // m-tiles
	for _, c := range []struct {
		name         string
		T, tiles     int
		bn, split, k int
		deep         bool
	}{
		{"o", 55, o, 64, 4, 64, false}, {"qkv", 55, qkv, 64, 4, 64, false}, {"gate+up", 55, gateUp, 64, 1, 64, false},
		{"down", 55, down, 64, 4, 64, false}, {"lm_head", 55, lmHead, 64, 1, 64, false},
		{"o", 100, o, 64, 2, 64, true}, {"qkv", 100, qkv, 128, 2, 64, false}, {"gate+up", 100, gateUp, 128, 1, 128, false},
		{"down", 100, down, 64, 2, 64, true}, {"lm_head", 100, lmHead, 128, 1, 128, false},
		{"o", 128, o, 64, 2, 64, true}, {"o", 129, o, 128, 2, 64, false},
		{"o", 256, o, 128, 2, 64, false}, {"qkv", 256, qkv, 128, 1, 128, false}, {"gate+up", 256, gateUp, 128, 1, 128, false},
		{"down", 256, down, 128, 2, 64, false}, {"o", 17, o, 64, 4, 64, false},
	} {
		bn, S, k, deep := l.WideChoice(c.T, c.tiles)
		if bn != c.bn || S != c.split || k != c.k || deep != c.deep {
			t.Errorf("%s at %d rows: BN %d, cluster %d, stage k %d, deep %v; want %d, %d, %d, %v", c.name, c.T, bn, S, k, deep, c.bn, c.split, c.k, c.deep)
		}
	}
	none := kernels.NewWideRuleLinear(132, h100, false)
	if bn, S, k, deep := none.WideChoice(55, o); bn != 64 || S != 1 || k != 64 || deep {
		t.Errorf("o at 55 rows without clusters: BN %d, cluster %d, stage k %d, deep %v; want 64, 1, 64, false", bn, S, k, deep)
	}
}

// TestLinearGroups checks a grouped launch (three weights of different N
// sharing x, one with a partial m-tile, biases on two; the narrow and the
// wide kernel) against one launch per weight, bitwise, and each against
// the reference.
func TestLinearGroups(t *testing.T) {
	d, l := linearSetup(t)
	r := rand.New(rand.NewPCG(9, 10))
	const K = 1032
	for _, T := range []int{5, 70} {
		Ns := []int{200, 37, 64}
		m := newGPUMem(t, d)
		var lds []*linearData
		var groups, alone []kernels.LinearGroup
		x := newLinearData(r, T, 1, K).x
		xp := m.put(cuda.Bytes(x))
		xh := m.put(make([]byte, max(16, kernels.LinearScratchBytes(T, K))))
		for i, N := range Ns {
			ld := newLinearData(r, T, N, K)
			ld.x = x
			lds = append(lds, ld)
			g := kernels.LinearGroup{Y: m.poisonedF32(T * N), W: m.put(cuda.Bytes(ld.w)), N: N}
			if i != 1 {
				g.Bias = m.put(cuda.Bytes(ld.bias))
			}
			groups = append(groups, g)
			g.Y = m.poisonedF32(T * N)
			alone = append(alone, g)
		}
		m.run(func(c *cuda.Ctx, s cuda.Stream) error {
			if err := l.LaunchGroups(c, s, xp, xh, T, K, groups...); err != nil {
				return err
			}
			for _, g := range alone {
				if err := l.Launch(c, s, g.Y, xp, xh, g.W, g.Bias, T, g.N, K); err != nil {
					return err
				}
			}
			return nil
		})
		for i, N := range Ns {
			got, want := m.f32s(groups[i].Y, T*N), m.f32s(alone[i].Y, T*N)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("T=%d group %d: y[%d] = %g grouped, %g alone", T, i, j, got[j], want[j])
				}
			}
			lds[i].check(t, got, i != 1)
		}
	}
}

// TestLinearRefusesShapes checks that K not a multiple of 8, T < 1 and a
// bad group count are errors, not launches.
func TestLinearRefusesShapes(t *testing.T) {
	d, l := linearSetup(t)
	for _, sh := range []struct{ T, K int }{{1, 12}, {0, 64}, {4, 0}} {
		err := d.Do(func(c *cuda.Ctx) error { return l.Launch(c, d.Stream(), 0, 0, 0, 0, 0, sh.T, 16, sh.K) })
		if err == nil {
			t.Errorf("T=%d K=%d: no error", sh.T, sh.K)
		}
	}
	err := d.Do(func(c *cuda.Ctx) error {
		return l.LaunchGroups(c, d.Stream(), 0, 0, 1, 64, make([]kernels.LinearGroup, kernels.LinearMaxGroups+1)...)
	})
	if err == nil {
		t.Error("too many groups: no error")
	}
	err = d.Do(func(c *cuda.Ctx) error {
		return l.LaunchGroups(c, d.Stream(), 0, 0, kernels.LinearNarrowMaxRows+1, 64, kernels.LinearGroup{N: 16})
	})
	if err == nil {
		t.Error("a wide launch without scratch: no error")
	}
}

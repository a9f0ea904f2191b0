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

// skinnySetup compiles skinny.cu once per test, or skips.
func skinnySetup(t *testing.T) (*cuda.Device, *kernels.Skinny) {
	t.Helper()
	d, _ := opsSetup(t)
	s, err := kernels.LoadSkinny(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

// skinnyTol bounds |y - ref| for one output of skinny.cu at split S, mag =
// Σ|x̂·w| + |bias|: the fp16 products are exact in fp32; each
// mma.m16n8k16 adds 16 products and the accumulator with at most one
// truncation (<= 2⁻²³ of mag) per term, 17 a mma, over a split's k-blocks
// (at most ceil(nb/S) of 64 channels, 4 mmas each); then S-1 adds of the
// partials and the bias add, one rounding each.
func skinnyTol(K, S int, mag float64) float64 {
	const blockK = 64
	blocks := (K + blockK - 1) / blockK
	mmas := (blocks + S - 1) / S * blockK / 16
	return float64(17*mmas+S) * 0x1p-23 * mag
}

// checkSkinny compares y [T][N] with the float64 reference over the
// fp16-rounded x (the kernel's operand) and the fp16 weights.
func checkSkinny(t *testing.T, d *linearData, y []float32, withBias bool, S, version int) {
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
			tol := skinnyTol(d.K, S, mag)
			g := float64(y[ti*d.N+n])
			if g != g || math.Abs(g-want) > tol {
				t.Fatalf("v%d split %d, bias %v: y[%d,%d] = %g, want %g (tol %.3g)", version, S, withBias, ti, n, g, want, tol)
			}
		}
	}
}

// TestSkinnyMatchesReference checks skinny.cu (v1, v2, and v3 on compute
// capability 9.0) against the
// float64 reference on NaN-poisoned outputs for awkward row counts (17, 55, 100,
// 127, 128: every n-tile count, rows past T in a tile), N with a partial
// m-block, K a multiple of 8 but not of the 64-channel stage, every split
// from 1 to 8 (uneven k-runs), with and without bias and early weights;
// each shape's launches run twice more and must repeat their bits (the
// split's sum order does not depend on which CTA finishes last).
func TestSkinnyMatchesReference(t *testing.T) {
	d, s := skinnySetup(t)
	versions := []int{kernels.SkinnyV1, kernels.SkinnyV2}
	if s.Version == kernels.SkinnyV3 { // compute capability 9.0: wgmma
		versions = append(versions, kernels.SkinnyV3)
	}
	r := rand.New(rand.NewPCG(21, 22))
	shapes := []struct{ T, N, K int }{
		{17, 200, 1032}, {55, 300, 4104}, {100, 129, 2056}, {127, 520, 776}, {128, 64, 8}, {32, 1000, 4096}, {64, 384, 1000},
	}
	splits := []int{1, 2, 3, 5, 8}
	if testing.Short() {
		shapes, splits = shapes[:3], []int{1, 3}
	}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("T%d-N%d-K%d", sh.T, sh.N, sh.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			ld := newLinearData(r, sh.T, sh.N, sh.K)
			xh := make([]uint16, len(ld.x))
			for i, v := range ld.x {
				xh[i] = half.FromFloat32(v)
			}
			wp, xp, bp := m.put(cuda.Bytes(ld.w)), m.put(cuda.Bytes(xh)), m.put(cuda.Bytes(ld.bias))
			ws := m.put(make([]byte, max(16, kernels.SkinnyWorkspaceBytes(sh.T, sh.N, kernels.SkinnyMaxSplit))))
			nb := (sh.K + 63) / 64
			for _, v := range versions {
				s.Version = v
				for _, S := range splits {
					if S > nb {
						continue
					}
					for _, withBias := range []bool{false, true} {
						b := cuda.DevicePtr(0)
						if withBias {
							b = bp
						}
						ys := []cuda.DevicePtr{m.poisonedF32(sh.T * sh.N), m.poisonedF32(sh.T * sh.N), m.poisonedF32(sh.T * sh.N)}
						m.run(func(c *cuda.Ctx, st cuda.Stream) error {
							for i, y := range ys {
								if err := s.Launch(c, st, y, xp, wp, b, ws, sh.T, sh.N, sh.K, S, i == 1); err != nil {
									return err
								}
							}
							return nil
						})
						y0 := m.f32s(ys[0], sh.T*sh.N)
						checkSkinny(t, ld, y0, withBias, S, v)
						for i := 1; i < len(ys); i++ {
							yi := m.f32s(ys[i], sh.T*sh.N)
							for j := range y0 {
								if math.Float32bits(y0[j]) != math.Float32bits(yi[j]) {
									t.Fatalf("v%d split %d: run %d y[%d] = %g, run 0 %g", v, S, i, j, yi[j], y0[j])
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestSkinnySplitAndRefusals checks SkinnySplit's picks stay in range and
// that shapes skinny.cu cannot take are errors, not launches.
func TestSkinnySplitAndRefusals(t *testing.T) {
	d, s := skinnySetup(t)
	for _, sh := range []struct{ T, N, K int }{{55, 4096, 4096}, {55, 6144, 4096}, {55, 28672, 4096}, {55, 4096, 14336}, {100, 128256, 4096}, {17, 64, 64}} {
		S := s.SkinnySplit(sh.T, sh.N, sh.K)
		if err := kernels.CheckSkinnyShape(sh.T, sh.N, sh.K, S); err != nil {
			t.Errorf("T=%d N=%d K=%d: SkinnySplit %d: %v", sh.T, sh.N, sh.K, S, err)
		}
	}
	for _, sh := range []struct{ T, N, K, S int }{{129, 64, 64, 1}, {0, 64, 64, 1}, {16, 64, 12, 1}, {16, 64, 64, 2}, {16, 64, 1024, 9}} {
		err := d.Do(func(c *cuda.Ctx) error {
			return s.Launch(c, d.Stream(), 0, 0, 0, 0, 1, sh.T, sh.N, sh.K, sh.S, false)
		})
		if err == nil {
			t.Errorf("T=%d N=%d K=%d S=%d: no error", sh.T, sh.N, sh.K, sh.S)
		}
	}
	if s.Version == kernels.SkinnyV3 {
		// v3's splits sum their slices together: a grid of more than one
		// wave could wait for CTAs that cannot start.
		if err := s.CheckSplit(100, 28672, 4096, 8); err == nil {
			t.Errorf("v3: 1792 CTAs at split 8: no error")
		}
		for _, sh := range []struct{ T, N, K int }{{55, 4096, 4096}, {100, 4096, 14336}, {100, 28672, 4096}, {17, 1024, 4096}} {
			if S := s.SkinnySplit(sh.T, sh.N, sh.K); s.CheckSplit(sh.T, sh.N, sh.K, S) != nil {
				t.Errorf("v3 T=%d N=%d K=%d: SkinnySplit %d does not fit one wave", sh.T, sh.N, sh.K, S)
			}
		}
	}
}

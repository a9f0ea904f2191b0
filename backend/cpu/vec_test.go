package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/cpufeat"
)

// TestSiLU checks siluF64 against float64 math over float32 inputs up to
// the clamps and beyond: the float64 silu before its final rounding is
// within 2⁻³⁵ relative (so the float32 result is the correctly rounded one
// or its neighbour at a tie), and the tails are exact: g for large g, a
// tiny value or zero for very negative g.
func TestSiLU(t *testing.T) {
	step := 0.001
	if testing.Short() {
		step = 0.01
	}
	for gv := -110.0; gv <= 110; gv += step {
		g := float32(gv)
		want := float64(g) / (1 + math.Exp(-float64(g)))
		got := float64(siluF64(g))
		// One float32 rounding of a value within 2⁻³⁵ of want.
		if d := math.Abs(got - want); !(d <= (0x1p-24+0x1p-35)*math.Abs(want)+0x1p-149) {
			t.Fatalf("siluF64(%v) = %v, want %v (error %.3g ulp)", g, got, want, d/(0x1p-24*math.Abs(want)))
		}
	}
	for _, g := range []float32{1e30, 3e38, 800} {
		if got := siluF64(g); got != g {
			t.Errorf("siluF64(%v) = %v, want %v", g, got, g)
		}
	}
	for _, g := range []float32{-800, -1e30, -3e38} {
		if got := siluF64(g); got > 0 || got < -1e-30 {
			t.Errorf("siluF64(%v) = %v, want a tiny non-positive value", g, got)
		}
	}
}

// TestElementwiseLevels checks that RMSNorm, RoPE, SwiGLU, GeGLU and Add
// give the same bits at every SIMD level, on lengths off the vector width,
// with SwiGLU and GeGLU inputs far into exp's clamped range.
func TestElementwiseLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, C := range []int{1, 7, 8, 30, 96, 257} {
		t.Run(fmt.Sprint("C", C), func(t *testing.T) {
			const T = 5
			xv, uv := randVec(r, T*C), randVec(r, T*C)
			for i := range xv {
				if r.IntN(10) == 0 {
					xv[i] *= 50 // silu far into both tails
				}
			}
			wv := randVec(r, C)
			inv := make([]float32, (C+1)/2)
			for i := range inv {
				inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(2*len(inv))))
			}
			pos := []int32{0, 3, 1000, 8191, 77}
			var ref [][]float32
			for li, lvl := range cpufeat.Levels() {
				_, restore := cpufeat.Force(lvl)
				b := New(2)
				x := mustTensor(t, b, xv, T, C)
				u := mustTensor(t, b, uv, T, C)
				var outs [][]float32
				y := poisoned(t, b, T, C)
				b.RMSNorm(y, x, mustWeight(t, b, "norm", wv, C), 1e-5)
				outs = append(outs, download(t, b, y))
				b.SwiGLU(y, x, u)
				outs = append(outs, download(t, b, y))
				b.GeGLU(y, x, u)
				outs = append(outs, download(t, b, y))
				b.Add(y, x, u)
				outs = append(outs, download(t, b, y))
				if C%2 == 0 {
					b.RoPE(x, mustInt32(t, b, pos), mustWeight(t, b, "inv", inv, C/2))
					outs = append(outs, download(t, b, x))
				}
				restore()
				for k, o := range outs {
					for i, v := range o {
						if v != v {
							t.Fatalf("%v: op %d: NaN at %d", lvl, k, i)
						}
						if li > 0 && math.Float32bits(v) != math.Float32bits(ref[k][i]) {
							t.Fatalf("%v: op %d (RMSNorm, SwiGLU, GeGLU, Add, RoPE): [%d] = %v, generic %v", lvl, k, i, v, ref[k][i])
						}
					}
				}
				if li == 0 {
					ref = outs
				}
			}
		})
	}
	_ = backend.F32
}

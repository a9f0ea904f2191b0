package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/cpufeat"
)

// TestExpNeg checks expNeg against math.Exp over its unclamped range: at
// most 2⁻²³ relative error (Cephes' expf bound; a dense sweep measured
// 1.34·2⁻²⁴), and e^0 = 1 exactly.
func TestExpNeg(t *testing.T) {
	step := float32(0.001)
	if testing.Short() {
		step = 0.01
	}
	for x := float32(expLo); x <= expHi-1; x += step {
		got := float64(expNeg(-x))
		want := math.Exp(float64(x))
		if e := math.Abs(got-want) / want; !(e <= 0x1p-23) {
			t.Fatalf("expNeg(%v) = %v, want %v (relative error %.3g)", -x, got, want, e)
		}
	}
	if expNeg(0) != 1 {
		t.Errorf("expNeg(0) = %v, want 1", expNeg(0))
	}
}

// TestElementwiseLevels checks that RMSNorm, RoPE, SwiGLU and Add give the
// same bits at every SIMD level, on lengths off the vector width, with
// SwiGLU inputs far into exp's clamped range.
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
							t.Fatalf("%v: op %d (RMSNorm, SwiGLU, Add, RoPE): [%d] = %v, generic %v", lvl, k, i, v, ref[k][i])
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

package cpu

// Tests of the fused ops AddRMSNorm and RoPEQK: each must give the bits of
// the sequence of separate ops it replaces (whose float64 references
// TestRMSNorm, TestRoPE and TestElementwise check), on shapes that run on
// one goroutine and on several, in place and not.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
)

// sameBits fails unless got and want hold the same float32 bits.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %v, the separate ops give %v", what, i, got[i], want[i])
		}
	}
}

func TestAddRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const eps = 1e-5
	for _, tc := range []struct{ T, C, G int }{{1, 4096, 4096}, {5, 384, 128}, {3, 6, 3}, {40, 1024, 1024}, {2, 33, 33}} {
		for _, aliased := range []bool{false, true} {
			name := fmt.Sprintf("T%d C%d G%d x=delta %v", tc.T, tc.C, tc.G, aliased)
			b := New(2)
			hv, dv, wv := randVec(r, tc.T*tc.C), randVec(r, tc.T*tc.C), randVec(r, tc.G)
			w := mustWeight(t, b, "norm", wv, tc.G)

			// The separate ops.
			h0, d0 := mustTensor(t, b, hv, tc.T, tc.C), mustTensor(t, b, dv, tc.T, tc.C)
			x0 := poisoned(t, b, tc.T, tc.C)
			b.Add(h0, h0, d0)
			b.RMSNorm(x0, h0, w, eps)
			wantH, wantX := download(t, b, h0), download(t, b, x0)
			for i, v := range wantH {
				if v != hv[i]+dv[i] {
					t.Fatalf("%s: Add: h[%d] = %v, want %v", name, i, v, hv[i]+dv[i])
				}
			}

			h, d := mustTensor(t, b, hv, tc.T, tc.C), mustTensor(t, b, dv, tc.T, tc.C)
			x := d
			if !aliased {
				x = poisoned(t, b, tc.T, tc.C)
			}
			b.AddRMSNorm(h, x, d, w, eps)
			sameBits(t, name+": h", download(t, b, h), wantH)
			sameBits(t, name+": x", download(t, b, x), wantX)
		}
	}
}

func TestRoPEQK(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const eps = 1e-6
	for _, tc := range []struct{ T, Hq, Hk, D int }{{5, 4, 2, 8}, {1, 32, 8, 128}, {33, 6, 3, 64}, {3, 2, 2, 2}, {9, 16, 4, 256}} {
		for _, norm := range []bool{false, true} {
			name := fmt.Sprintf("T%d Hq%d Hk%d D%d norm %v", tc.T, tc.Hq, tc.Hk, tc.D, norm)
			b := New(2)
			half := tc.D / 2
			inv := make([]float32, half)
			for i := range inv {
				inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(tc.D)))
			}
			f := mustWeight(t, b, "inv_freq", inv, half)
			pv := make([]int32, tc.T)
			for i := range pv {
				pv[i] = int32(r.IntN(9000))
			}
			pv[0] = 0
			pos := mustInt32(t, b, pv)
			var qn, kn backend.Weight
			if norm {
				qn = mustWeight(t, b, "q_norm", randVec(r, tc.D), tc.D)
				kn = mustWeight(t, b, "k_norm", randVec(r, tc.D), tc.D)
			}
			qv, kv := randVec(r, tc.T*tc.Hq*tc.D), randVec(r, tc.T*tc.Hk*tc.D)

			q0, k0 := mustTensor(t, b, qv, tc.T, tc.Hq*tc.D), mustTensor(t, b, kv, tc.T, tc.Hk*tc.D)
			if norm {
				b.RMSNorm(q0, q0, qn, eps)
				b.RMSNorm(k0, k0, kn, eps)
			}
			b.RoPE(q0, pos, f)
			b.RoPE(k0, pos, f)
			wantQ, wantK := download(t, b, q0), download(t, b, k0)

			q, k := mustTensor(t, b, qv, tc.T, tc.Hq*tc.D), mustTensor(t, b, kv, tc.T, tc.Hk*tc.D)
			b.RoPEQK(q, k, pos, f, qn, kn, eps)
			sameBits(t, name+": q", download(t, b, q), wantQ)
			sameBits(t, name+": k", download(t, b, k), wantK)
		}
	}
}

// TestFusedErrors: the fused ops refuse what they cannot compute in place
// with a ShapeError, and record nothing else.
func TestFusedErrors(t *testing.T) {
	b := New(1)
	h := mustTensor(t, b, make([]float32, 8), 2, 4)
	d := mustTensor(t, b, make([]float32, 8), 2, 4)
	w := mustWeight(t, b, "norm", make([]float32, 4), 4)
	inv := mustWeight(t, b, "inv_freq", make([]float32, 2), 2)
	pos := mustInt32(t, b, []int32{0, 1})
	for i, call := range []func(){
		func() { b.AddRMSNorm(h, h, d, w, 1e-5) },                                   // x = h
		func() { b.AddRMSNorm(h, d, h, w, 1e-5) },                                   // delta = h
		func() { b.RoPEQK(h, h, pos, inv, nil, nil, 1e-5) },                         // q = k
		func() { b.RoPEQK(h, d, pos, inv, w, nil, 1e-5) },                           // one norm
		func() { b.RoPEQK(h, d, mustInt32(t, b, []int32{0}), inv, nil, nil, 1e-5) }, // positions
	} {
		call()
		var se *backend.ShapeError
		if err := b.Sync(); !errors.As(err, &se) {
			t.Errorf("call %d: %v, want a ShapeError", i, err)
		}
	}
	b.RoPEQK(h, d, mustInt32(t, b, []int32{0, -1}), inv, nil, nil, 1e-5)
	if err := b.Sync(); err == nil {
		t.Error("negative position accepted")
	}
}

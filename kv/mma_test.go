package kv

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestMMAOrderIsAPermutation: every element of a block lands on distinct
// bits inside the data region, which it fills exactly.
func TestMMAOrderIsAPermutation(t *testing.T) {
	for _, spec := range []string{"fp16", "int8", "int4", "int2", "fp8"} {
		for _, d := range mmaHeadDims {
			f := MustResolve(spec, d).WithOrder(MMA)
			for _, l := range []TensorLayout{f.K, f.V} {
				bits := l.Elem.Bits()
				used := make([]bool, l.Tokens*l.RowBytes*8)
				for tk := 0; tk < l.Tokens; tk++ {
					for c := 0; c < d; c++ {
						i, sh := l.elemPos(tk, c)
						for b := 0; b < bits; b++ {
							bit := i*8 + int(sh) + b
							if bit >= len(used) || used[bit] {
								t.Fatalf("%s D=%d role %d: (t=%d, c=%d) bit %d reused or out of range", spec, d, l.role, tk, c, bit)
							}
							used[bit] = true
						}
					}
				}
			}
		}
	}
}

// TestMMAOrderMatchesLinear: packing in mma order and unpacking gives the
// same values as the linear order, and the same params bytes.
func TestMMAOrderMatchesLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, spec := range []string{"fp16", "bf16", "fp8e4m3", "int8", "int4", "int4:kt32:v32", "int2", "k4v2"} {
		for _, d := range mmaHeadDims {
			lin := MustResolve(spec, d)
			mma := lin.WithOrder(MMA)
			for i, l := range []TensorLayout{lin.K, lin.V} {
				m := []TensorLayout{mma.K, mma.V}[i]
				src := realisticBlock(r, l.Tokens, d)
				a, b := make([]byte, l.Bytes), make([]byte, m.Bytes)
				l.Pack(a, src)
				m.Pack(b, src)
				if !bytes.Equal(a[l.ParamsOffset:], b[m.ParamsOffset:]) {
					t.Fatalf("%s D=%d: params differ between orders", spec, d)
				}
				ua, ub := make([]float32, l.Tokens*d), make([]float32, l.Tokens*d)
				l.Unpack(ua, a)
				m.Unpack(ub, b)
				for j := range ua {
					if ua[j] != ub[j] && !(ua[j] != ua[j] && ub[j] != ub[j]) {
						t.Fatalf("%s D=%d element %d: linear %g, mma %g", spec, d, j, ua[j], ub[j])
					}
				}
			}
		}
	}
}

// TestMMAOrderFragments pins the fragment arithmetic on hand-checked cases
// (int4, D=128: a lane holds 32 bytes of a group, two 16-byte chunks).
func TestMMAOrderFragments(t *testing.T) {
	f := MustResolve("int4", 128).WithOrder(MMA)
	tests := []struct {
		role       TensorLayout
		t, c       int
		byteIdx    int
		shift      uint
		whyComment string
	}{
		{f.K, 0, 0, 0, 0, "lane 0, a0.lo of k-block 0: word 0 bit 0"},
		{f.K, 0, 1, 2, 0, "a0.hi: bit 16"},
		{f.K, 8, 0, 0, 4, "row g+8 is a1.lo: pair 1 at bit 4"},
		{f.K, 0, 8, 1, 0, "column 2q+8 is a2.lo: bit 8"},
		{f.K, 0, 2, 16, 0, "column 2 belongs to lane 1 (q=1): chunk 0 of lane 1"},
		{f.K, 1, 0, 64, 0, "token 1 is lane 4 (g=1)"},
		{f.K, 0, 16, 4, 0, "k-block 1: word 1"},
		{f.K, 0, 64, 512, 0, "k-block 4: word 4, the lane's second chunk"},
		{f.K, 16, 0, 1024, 0, "the next 16-token group"},
		{f.V, 0, 0, 0, 0, "values: channel 0, token 0"},
		{f.V, 1, 0, 2, 0, "token 1 is a0.hi"},
		{f.V, 0, 1, 64, 0, "channel 1 is lane 4"},
		{f.V, 2, 0, 16, 0, "token 2 is lane 1"},
	}
	for _, tc := range tests {
		b, s := tc.role.elemPos(tc.t, tc.c)
		if b != tc.byteIdx || s != tc.shift {
			t.Errorf("role %d (t=%d, c=%d): byte %d shift %d; want %d, %d (%s)", tc.role.role, tc.t, tc.c, b, s, tc.byteIdx, tc.shift, tc.whyComment)
		}
	}
}

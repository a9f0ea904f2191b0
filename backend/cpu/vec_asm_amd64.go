//go:build !purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

//go:noescape
func addAVX2(dst, a, b *float32, n int)

//go:noescape
func scaleMulAVX2(dst, x, w *float32, n int, r float32)

//go:noescape
func ropeAVX2(lo, hi, cos, sin *float32, n int)

//go:noescape
func sumSquaresAVX2(x *float32, n int, sc *[32]float32)

//go:noescape
func swigluAVX2(dst, gate, u *float32, n int)

//go:noescape
func gegluAVX2(dst, gate, u *float32, n int)

// vecSIMD reports whether the elementwise kernels of vec_amd64.s run now.
func vecSIMD() bool { lvl := cpufeat.Active(); return lvl == cpufeat.AVX2 || lvl == cpufeat.AVX512 }

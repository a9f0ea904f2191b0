//go:build !purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

//go:noescape
func addSIMD(dst, a, b *float32, n int)

//go:noescape
func scaleMulSIMD(dst, x, w *float32, n int, r float32)

//go:noescape
func ropeSIMD(lo, hi, cos, sin *float32, n int)

//go:noescape
func sumSquaresSIMD(x *float32, n int, sc *[32]float32)

//go:noescape
func swigluSIMD(dst, gate, u *float32, n int)

//go:noescape
func gegluSIMD(dst, gate, u *float32, n int)

// vecSIMD reports whether the elementwise kernels of vec_arm64.s run now.
func vecSIMD() bool { return cpufeat.Active() == cpufeat.NEON }

//go:build (amd64 || arm64) && !purego

package cpu

// The elementwise kernels of vec_amd64.s and vec_arm64.s (one signature set
// for both; vecSIMD, per architecture, says whether they run now).

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

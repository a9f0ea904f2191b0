//go:build !(amd64 || arm64) || purego

package cpu

// Without assembly the elementwise ops run their pure-Go references.

func vecSIMD() bool { return false }

func addSIMD(dst, a, b *float32, n int)                 { panic("cpu: no SIMD kernels in this build") }
func scaleMulSIMD(dst, x, w *float32, n int, r float32) { panic("cpu: no SIMD kernels in this build") }
func ropeSIMD(lo, hi, cos, sin *float32, n int)         { panic("cpu: no SIMD kernels in this build") }
func sumSquaresSIMD(x *float32, n int, sc *[32]float32) { panic("cpu: no SIMD kernels in this build") }
func swigluSIMD(dst, gate, u *float32, n int)           { panic("cpu: no SIMD kernels in this build") }
func gegluSIMD(dst, gate, u *float32, n int)            { panic("cpu: no SIMD kernels in this build") }

// gluWide is amd64's AVX-512 path of the gated activations: none here.
func gluWide(dst, g, u []float32, gelu bool) int { return 0 }

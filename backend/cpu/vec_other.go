//go:build !amd64 || purego

package cpu

// Without assembly the elementwise ops run their pure-Go references.

func vecSIMD() bool { return false }

func addAVX2(dst, a, b *float32, n int)                 { panic("cpu: no SIMD kernels in this build") }
func scaleMulAVX2(dst, x, w *float32, n int, r float32) { panic("cpu: no SIMD kernels in this build") }
func ropeAVX2(lo, hi, cos, sin *float32, n int)         { panic("cpu: no SIMD kernels in this build") }
func sumSquaresAVX2(x *float32, n int, sc *[32]float32) { panic("cpu: no SIMD kernels in this build") }
func swigluAVX2(dst, gate, u *float32, n int)           { panic("cpu: no SIMD kernels in this build") }
func gegluAVX2(dst, gate, u *float32, n int)            { panic("cpu: no SIMD kernels in this build") }

//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
)

//go:noescape
func addSIMD(dst, a, b *float32, n int)

//go:noescape
func scaleMulSIMD(dst, x, w *float32, n int, r float32)

//go:noescape
func ropeSIMD(lo, hi, cos, sin *float32, n int)

//go:noescape
func sumSquaresSIMD(x *float32, n int, sc *[32]float32)

// swigluSIMD and gegluSIMD have no NEON kernel (their exp runs in float64,
// two lanes a register on arm64): they run vec.go's pure-Go loops.

func swigluSIMD(dst, gate, u *float32, n int) {
	d, g, uu := unsafe.Slice(dst, n), unsafe.Slice(gate, n), unsafe.Slice(u, n)
	for i := range d {
		d[i] = siluF64(g[i]) * uu[i]
	}
}

func gegluSIMD(dst, gate, u *float32, n int) {
	d, g, uu := unsafe.Slice(dst, n), unsafe.Slice(gate, n), unsafe.Slice(u, n)
	for i := range d {
		d[i] = geluTanhF64(g[i]) * uu[i]
	}
}

// vecSIMD reports whether the elementwise kernels of vec_arm64.s run now.
func vecSIMD() bool { return cpufeat.Active() == cpufeat.NEON }

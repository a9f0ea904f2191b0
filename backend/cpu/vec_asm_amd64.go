//go:build !purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// vecSIMD reports whether the elementwise kernels of vec_amd64.s run now.
func vecSIMD() bool { lvl := cpufeat.Active(); return lvl == cpufeat.AVX2 || lvl == cpufeat.AVX512 }

// gluAVX512 is vec_amd64.s's AVX-512 kernel of the gated activations: the
// AVX2 kernels' operations per lane over twice the lanes, two streams a
// loop; silu, or gelu_tanh where gelu is set.
//
//go:noescape
func gluAVX512(dst, gate, u *float32, n int, gelu bool)

// gluWide runs the AVX-512 kernel of a gated activation (swiglu when
// gelu is false, else geglu) over the leading multiple of 16 elements of
// dst where the active level is AVX-512, and returns how many it took
// (0 otherwise): the same bits as the AVX2 kernels (TestElementwiseLevels),
// 1.8-2x faster (the float64 exp's dependency chains run side by side).
func gluWide(dst, g, u []float32, gelu bool) int {
	v := len(dst) &^ 15
	if v == 0 || cpufeat.Active() != cpufeat.AVX512 {
		return 0
	}
	gluAVX512(&dst[0], &g[0], &u[0], v, gelu)
	return v
}

//go:build !purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// vecSIMD reports whether the elementwise kernels of vec_arm64.s run now.
func vecSIMD() bool { return cpufeat.Active() == cpufeat.NEON }

// gluWide is amd64's AVX-512 path of the gated activations: none here.
func gluWide(dst, g, u []float32, gelu bool) int { return 0 }

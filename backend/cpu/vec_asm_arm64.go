//go:build !purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// vecSIMD reports whether the elementwise kernels of vec_arm64.s run now.
func vecSIMD() bool { return cpufeat.Active() == cpufeat.NEON }

//go:build !purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// vecSIMD reports whether the elementwise kernels of vec_amd64.s run now.
func vecSIMD() bool { lvl := cpufeat.Active(); return lvl == cpufeat.AVX2 || lvl == cpufeat.AVX512 }

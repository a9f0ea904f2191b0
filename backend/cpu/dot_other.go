//go:build !amd64 || purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// tileTable and widenTable are empty without assembly: every weight runs
// on dotGeneric and widens in Go.
var (
	tileTable  [cpufeat.AVX512 + 1][len(tileFormats)]tiles
	widenTable [cpufeat.AVX512 + 1][len(tileFormats)]widenFunc
)

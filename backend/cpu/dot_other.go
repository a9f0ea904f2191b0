//go:build !amd64 || purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// tileTable is empty without assembly: every weight runs on dotGeneric.
var tileTable [cpufeat.AVX512 + 1][len(tileFormats)]tiles

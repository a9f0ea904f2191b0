//go:build !(amd64 || arm64) || purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// tileTable and widenTable are empty without assembly: every weight runs
// on dotGeneric and widens in Go.
var (
	tileTable  [cpufeat.NumLevels][len(tileFormats)]tiles
	widenTable [cpufeat.NumLevels][len(tileFormats)]widenFunc
)

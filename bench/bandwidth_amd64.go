//go:build !purego

package bench

import "github.com/bitdecode/bitdecode/internal/cpufeat"

//go:noescape
func readAVX512(p *uint64, n int) uint64

//go:noescape
func readAVX2(p *uint64, n int) uint64

// readSum reads every word of s (len(s) a multiple of readStepWords) with
// the widest loads of the active level and returns a value that depends
// on all of them.
func readSum(s []uint64) uint64 {
	if len(s) == 0 {
		return 0
	}
	switch readLevel() {
	case cpufeat.AVX512:
		return readAVX512(&s[0], len(s))
	case cpufeat.AVX2:
		return readAVX2(&s[0], len(s))
	}
	return readSumGo(s)
}

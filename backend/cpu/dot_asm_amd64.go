//go:build !purego

package cpu

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// asmDot is one generated SIMD tile (dot_amd64.go lists them).
type asmDot struct {
	avx512 bool
	format string
	mr, nr int
	cached bool // the 4×4 tile for weight rows in the cache (tiles.k44c)
	fn     dotFunc
}

// tileTable holds the SIMD tiles by level and tileFormats index;
// widenTable the widening kernels.
var (
	tileTable  [cpufeat.NumLevels][len(tileFormats)]tiles
	widenTable [cpufeat.NumLevels][len(tileFormats)]widenFunc
)

func init() {
	for i, f := range tileFormats {
		widenTable[cpufeat.AVX512][i] = asmWidens[f]
	}
	for _, d := range asmDots {
		lvl := cpufeat.AVX2
		if d.avx512 {
			lvl = cpufeat.AVX512
		}
		i := -1
		for j, f := range tileFormats {
			if f == d.format {
				i = j
			}
		}
		if i < 0 {
			panic("cpu: generated tile of unknown format " + d.format)
		}
		t := &tileTable[lvl][i]
		switch [2]int{d.mr, d.nr} {
		case [2]int{1, 1}:
			t.k11 = d.fn
		case [2]int{1, 4}:
			t.k14 = d.fn
		case [2]int{4, 1}:
			t.k41 = d.fn
		case [2]int{4, 4}:
			if d.cached {
				t.k44c = d.fn
			} else {
				t.k44 = d.fn
			}
		}
	}
}

//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
)

// The NEON tiles of dot_arm64.s: 1×1 and 1×4 (one row of x against one or
// four weight rows) for the F32, BF16, F16 and I8 formats and the packed wq
// int8 and int4 formats (WQ8G128, WQ4G128). WQ3G128, the 4×N tiles and the
// widening kernels have none here: those run on the
// pure-Go tile and widenRows' Go loop, and prefill's widened rows on the
// F32 tiles.

//go:noescape
func dotF32_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotF32_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotBF16_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotBF16_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotF16_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotF16_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotI8G32_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotI8G32_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotI8G64_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotI8G64_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotI8G128_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotI8G128_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotWQ8G128_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotWQ8G128_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotWQ4G128_1x1NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

//go:noescape
func dotWQ4G128_1x4NEON(x *float32, xs uintptr, w unsafe.Pointer, ws uintptr, k16 int, dst *float32, ds uintptr, sc *float32, ss uintptr)

// tileTable holds the SIMD tiles by level and tileFormats index;
// widenTable the widening kernels (none on arm64).
var (
	tileTable  [cpufeat.NumLevels][len(tileFormats)]tiles
	widenTable [cpufeat.NumLevels][len(tileFormats)]widenFunc
)

func init() {
	neon := map[string]tiles{
		"F32":    {k11: dotF32_1x1NEON, k14: dotF32_1x4NEON},
		"BF16":   {k11: dotBF16_1x1NEON, k14: dotBF16_1x4NEON},
		"F16":    {k11: dotF16_1x1NEON, k14: dotF16_1x4NEON},
		"I8G32":  {k11: dotI8G32_1x1NEON, k14: dotI8G32_1x4NEON},
		"I8G64":  {k11: dotI8G64_1x1NEON, k14: dotI8G64_1x4NEON},
		"I8G128": {k11: dotI8G128_1x1NEON, k14: dotI8G128_1x4NEON},
		// The packed wq int8 and int4 weights (qdot.go's float order).
		"WQ8G128": {k11: dotWQ8G128_1x1NEON, k14: dotWQ8G128_1x4NEON},
		"WQ4G128": {k11: dotWQ4G128_1x1NEON, k14: dotWQ4G128_1x4NEON},
	}
	for i, f := range tileFormats {
		tileTable[cpufeat.NEON][i] = neon[f]
	}
}

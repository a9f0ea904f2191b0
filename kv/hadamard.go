package kv

import (
	"fmt"
	"math"
)

// Rotate applies the orthonormal Walsh-Hadamard transform H/sqrt(n) to x in
// place (len(x) a power of two). H is symmetric and H·H = n·I, so Rotate is
// its own inverse and preserves dot products: rotating both Q and K leaves
// every score unchanged, and rotating V rotates the output, which a second
// Rotate undoes. Outlier channels are spread over all channels, which keeps
// per-token quantization groups from being dominated by one channel.
//
// The butterflies run in the fixed order h = 1, 2, 4, ... in float32, then
// every element is multiplied by float32(1/sqrt(n)), so a GPU kernel that
// follows the same order gets the same bits.
func Rotate(x []float32) {
	n := len(x)
	if n == 0 || n&(n-1) != 0 {
		panic(fmt.Sprintf("kv: Rotate: length %d is not a power of two", n))
	}
	for h := 1; h < n; h *= 2 {
		for i := 0; i < n; i += 2 * h {
			for j := i; j < i+h; j++ {
				a, b := x[j], x[j+h]
				x[j], x[j+h] = a+b, a-b
			}
		}
	}
	s := float32(1 / math.Sqrt(float64(n)))
	for i := range x {
		x[i] *= s
	}
}

package gpu

import (
	"testing"

	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// TestGEMMQRoutes checks linearFused's routing without a GPU: tiled weights
// under 2048 rows (the 8B's k and v) never take gemmq.cu (session 16: the
// dequantization and cuBLASLt are faster there); larger int4 and int3
// weights take it at kernels.GEMMQMinRows to gemmqMaxRows rows; int8
// (session 16, "int8 in gemmq.cu") up to 64 rows for q/o (4096x4096) and
// up to 128 for gate/up and down.
func TestGEMMQRoutes(t *testing.T) {
	for _, c := range []struct {
		bits, N, K, lo, hi int // gemmq.cu at lo..hi rows, none if hi < lo
	}{
		{4, 1024, 4096, 1, 0}, {3, 1024, 4096, 1, 0}, {4, 4096, 4096, kernels.GEMMQMinRows, 128}, {3, 14336, 4096, kernels.GEMMQMinRows, 128},
		{8, 1024, 4096, 1, 0}, {8, 512, 1152, 1, 0}, {8, 4096, 4096, kernels.GEMMQMinRows, 64},
		{8, 2100, 4096, kernels.GEMMQMinRows, 64}, {8, 14336, 4096, kernels.GEMMQMinRows, 128}, {8, 4096, 14336, kernels.GEMMQMinRows, 128},
	} {
		for T := 1; T <= 300; T++ {
			if got, want := gemmqRoutes(T, c.N, c.K, c.bits), T >= c.lo && T <= c.hi; got != want {
				t.Errorf("int%d [%d, %d] T=%d: gemmqRoutes %v, want %v", c.bits, c.N, c.K, T, got, want)
			}
		}
	}
}

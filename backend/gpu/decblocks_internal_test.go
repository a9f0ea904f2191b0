// decblocks_internal_test.go checks decBlocks, the n_tb a DEC weight gets:
// no GPU needed.
package gpu

import (
	"testing"

	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// TestDECDefaultBlocks checks the default n_tb on the Llama-3.1-8B shapes
// (one CTA per decTermsPerBlock terms, 8 to 64, on the device; 8 for host
// residuals), that an explicit value wins (the backend-wide one over the
// weight's), and that one out of the shape's range is refused.
func TestDECDefaultBlocks(t *testing.T) {
	for _, c := range []struct {
		N, K, kChunk int
		dev, host    int
	}{
		{4096, 4096, 8, 16, 8},   // S 32: 131072 terms
		{4096, 4096, 64, 64, 8},  // S 256: capped at 64
		{1024, 4096, 8, 8, 8},    // S 32: 4 -> at least 8
		{1024, 4096, 64, 32, 8},  // S 256
		{14336, 4096, 8, 56, 8},  // S 32
		{4096, 14336, 64, 64, 8}, // S 896: capped
	} {
		S := kernels.DECSelected(c.K, c.kChunk)
		for _, onDevice := range []bool{true, false} {
			want := c.host
			if onDevice {
				want = c.dev
			}
			got, err := decBlocks(wq.Int4, c.N, S, onDevice, 0, 0)
			if err != nil || got != want {
				t.Errorf("%dx%d k_chunk %d device %v: n_tb %d, %v; want %d", c.N, c.K, c.kChunk, onDevice, got, err, want)
			}
		}
	}
	if got, err := decBlocks(wq.Int4, 4096, 256, true, 12, 20); err != nil || got != 20 {
		t.Errorf("explicit n_tb: %d, %v; want the backend-wide 20", got, err)
	}
	if got, err := decBlocks(wq.Int4, 4096, 256, true, 12, 0); err != nil || got != 12 {
		t.Errorf("the weight's n_tb: %d, %v; want 12", got, err)
	}
	if _, err := decBlocks(wq.Int4, 4096, 256, true, kernels.DECMaxBlocks(4096)+1, 0); err == nil {
		t.Error("n_tb past one per 32 outputs accepted")
	}
}

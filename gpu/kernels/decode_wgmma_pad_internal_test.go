package kernels

import "testing"

// TestWGMMAFewSmem: the padded shared memory lets n CTAs onto an SM of
// the H100's 228 KiB (each with its 1 KiB reserve), and not n + 1, and
// stays within a block's opt-in limit (227 KiB).
func TestWGMMAFewSmem(t *testing.T) {
	const perSM, reserve, perBlock = 228 << 10, 1 << 10, 227 << 10
	for _, n := range []int{1, 2, 3} {
		s := wgmmaFewSmem(perSM, n)
		if s%128 != 0 || n*(s+reserve) > perSM || (n+1)*s <= perSM || s > perBlock {
			t.Errorf("wgmmaFewSmem(%d, %d) = %d: want a multiple of 128 that fits %d CTAs an SM but not %d, at most %d", perSM, n, s, n, n+1, perBlock)
		}
	}
}

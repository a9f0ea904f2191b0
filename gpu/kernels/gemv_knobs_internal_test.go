package kernels

import "testing"

// TestGEMVSplitTiers: the default split-K factors by output channels (o and
// down 4, q|k|v 2, gate|up 2 at one row and 1 at more, lm_head 1 at
// Llama-3.1-8B shapes), and GEMV.Splits overriding exactly its tier at
// every row count.
func TestGEMVSplitTiers(t *testing.T) {
	for _, tt := range []struct{ T, N, tier, split int }{
		{1, 1, 0, 4}, {1, 1024, 0, 4}, {1, 4096, 0, 4}, {1, 4097, 1, 2}, {1, 6144, 1, 2}, {1, 8192, 1, 2},
		{1, 8193, 2, 2}, {1, 14336, 2, 2}, {1, 28672, 2, 2}, {1, 32768, 2, 2}, {1, 32769, 3, 1}, {1, 128256, 3, 1},
		{2, 4096, 0, 4}, {2, 6144, 1, 2}, {2, 28672, 2, 1}, {2, 128256, 3, 1}, {8, 4096, 0, 4}, {8, 28672, 2, 1},
	} {
		if got := gemvSplitTier(tt.N); got != tt.tier {
			t.Errorf("gemvSplitTier(%d) = %d, want %d", tt.N, got, tt.tier)
		}
		g := &GEMV{}
		if got := g.SplitFor(tt.T, tt.N); got != tt.split || got != GroupSplit(tt.T, tt.N) {
			t.Errorf("T=%d: SplitFor(%d) = %d, GroupSplit %d, want %d", tt.T, tt.N, got, GroupSplit(tt.T, tt.N), tt.split)
		}
		g.Splits[tt.tier] = 2
		if tt.split == 2 {
			g.Splits[tt.tier] = 4
		}
		want := g.Splits[tt.tier]
		if got := g.SplitFor(tt.T, tt.N/2, tt.N-tt.N/2); got != want {
			t.Errorf("Splits %v: SplitFor(%d in two) = %d, want %d", g.Splits, tt.N, got, want)
		}
		other := (tt.tier + 1) % GEMVSplitTiers
		g.Splits = [GEMVSplitTiers]int{}
		g.Splits[other] = 2
		if got := g.SplitFor(tt.T, tt.N); got != tt.split {
			t.Errorf("Splits %v (another tier): SplitFor(%d) = %d, want %d", g.Splits, tt.N, got, tt.split)
		}
	}
	if !ValidGEMVSplits([GEMVSplitTiers]int{}) || !ValidGEMVSplits([GEMVSplitTiers]int{4, 2, 2, 1}) {
		t.Error("ValidGEMVSplits refuses the default or 4,2,2,1")
	}
	for _, s := range [][GEMVSplitTiers]int{{3}, {0, 8}, {0, 0, -1}, {0, 0, 0, 16}} {
		if ValidGEMVSplits(s) {
			t.Errorf("ValidGEMVSplits(%v) = true", s)
		}
	}
}

// TestGEMVEarlyKinds: EarlyWeights sets every launch's early argument,
// EarlyKinds those of its kinds.
func TestGEMVEarlyKinds(t *testing.T) {
	kinds := []GEMVEarlyKind{GEMVEarlyPlain, GEMVEarlyRoPE, GEMVEarlySwiGLU}
	for _, mask := range []GEMVEarlyKind{0, 1, 2, 3, 4, 5, 6, 7, GEMVEarlyNone} {
		for _, all := range []bool{false, true} {
			g := &GEMV{EarlyKinds: mask, EarlyWeights: all}
			for _, k := range kinds {
				want := int32(0)
				if all || mask&k != 0 {
					want = 1
				}
				if got := g.early(k); got != want {
					t.Errorf("EarlyKinds %03b, EarlyWeights %v: early(%03b) = %d, want %d", mask, all, k, got, want)
				}
			}
		}
	}
}

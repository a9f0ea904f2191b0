// planes_internal_test.go: split_mma's split planner (planesSplitLen) on the
// benchmark grid's shapes, and its division by the block size
// (planesDivMagic), without a GPU.

package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestPlanesSplitLen checks the splits split_mma gets at Hkv 8 and one row
// chunk (Hq 32, Tq 1): one wave (v2.4, v2.6) by default, v2.3's planner with
// PlanesTuning{TargetCTAs: 528, MinSplitTokens: 512}, and split_v1's
// (always the 528-CTA target, no minimum).
func TestPlanesSplitLen(t *testing.T) {
	for _, tc := range []struct {
		b, l            int
		wave, v23, v1   int // splits: default, v2.3's, split_v1's
		waveLen, v23Len int // positions per split
	}{
		{1, 8192, 26, 15, 65, 320, 576},     // 256 positions at least (v2.3: 512)
		{1, 131072, 33, 65, 65, 4096, 2048}, // one wave (256 CTAs, 8 more over the padding), not two of 520
		{16, 32768, 2, 5, 5, 16448, 6592},   // one wave of 256 CTAs (v2.6; v2.4: 8 splits, 3.9 waves), not 640 (2.4)
		{128, 8192, 1, 1, 1, 8256, 8256},    // 1024 CTAs
		{1, 32768, 33, 57, 65, 1024, 576},   // the engine's B = 1 plan at a 32K context
		{4, 32768, 8, 17, 17, 4160, 1984},   // 4 x 8 items: one wave of 256 CTAs (v2.4: 33 splits)
	} {
		items, maxPos := tc.b*8, planesMaxPositions(tc.l)
		for _, c := range []struct {
			name    string
			k       PlanesKernel
			tn      PlanesTuning
			splits  int
			wantLen int
		}{
			{"wave", PlanesMMA, PlanesTuning{}, tc.wave, tc.waveLen},
			{"v2.3", PlanesMMA, PlanesTuning{TargetCTAs: 528, MinSplitTokens: 512}, tc.v23, tc.v23Len},
			{"v1", PlanesV1, PlanesTuning{}, tc.v1, 0},
		} {
			sl := planesSplitLen(c.k, items, tc.l, maxPos, c.tn)
			splits := (maxPos + sl - 1) / sl
			if sl%planesTile != 0 || splits != c.splits || (c.wantLen != 0 && sl != c.wantLen) {
				t.Errorf("B=%d L=%d %s: %d positions per split, %d splits; want %d splits (of %d)",
					tc.b, tc.l, c.name, sl, splits, c.splits, c.wantLen)
			}
			if c.k == PlanesMMA && splits > 1 && sl < planesMinSplitTokens {
				t.Errorf("B=%d L=%d %s: %d positions per split, below %d", tc.b, tc.l, c.name, sl, planesMinSplitTokens)
			}
			// Every length up to the longest fits the splits (the launch's
			// grid): its positions never need one more.
			for _, l := range []int{tc.l, tc.l - 1, tc.l / 2} {
				if n := (planesMaxPositions(l) + sl - 1) / sl; n > splits {
					t.Errorf("B=%d L=%d %s: %d tokens take %d splits, more than the plan's %d", tc.b, tc.l, c.name, l, n, splits)
				}
			}
		}
	}
}

// TestPlanesDivMagic checks split_mma's division of token positions by the
// block size (planes.cu divNr: umulhi(t, magic) >> shift) against t / nr for
// every block size the layout allows up to 4096 (multiples of 16) and a few
// others, at every multiple of nr and its neighbours near 0, near the int32
// limit and at random positions below 2^31.
func TestPlanesDivMagic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const maxT = 1<<31 - 1
	div := func(x uint32, magic uint32, shift int) uint32 {
		return uint32((uint64(x)*uint64(magic))>>32) >> shift
	}
	nrs := []int{2, 3, 5, 7, 31, 33, 1000, 1 << 20, 1<<20 + 1}
	for nr := PlanesGroup; nr <= 4096; nr += PlanesGroup {
		nrs = append(nrs, nr)
	}
	for _, nr := range nrs {
		magic, shift := planesDivMagic(nr)
		check := func(x int) {
			if x < 0 || x > maxT {
				return
			}
			if got, want := div(uint32(x), magic, shift), uint32(x/nr); got != want {
				t.Fatalf("nr %d (magic %#x, shift %d): %d / nr = %d, want %d", nr, magic, shift, x, got, want)
			}
		}
		for _, base := range []int{0, maxT - maxT%nr, maxT/2 - (maxT/2)%nr} {
			for k := -3 * nr; k <= 3*nr; k += nr {
				for _, d := range []int{-1, 0, 1, nr - 1} {
					check(base + k + d)
				}
			}
		}
		for k := 0; k < 4096; k++ {
			check(rng.IntN(maxT + 1))
		}
	}
}

// TestPlanesDeal checks split_mma's dealing bits: warps always dealt by
// default, splits too up to planesDealSplitsMax splits, and the tuning's
// choice over both.
func TestPlanesDeal(t *testing.T) {
	for _, c := range []struct {
		deal   PlanesDeal
		splits int
		want   int
	}{
		{PlanesDealDefault, 1, planesDealWarps | planesDealSplits},
		{PlanesDealDefault, planesDealSplitsMax, planesDealWarps | planesDealSplits},
		{PlanesDealDefault, planesDealSplitsMax + 1, planesDealWarps},
		{PlanesDealDefault, 33, planesDealWarps},
		{PlanesDealNone, 2, 0},
		{PlanesDealWarps, 2, planesDealWarps},
		{PlanesDealSplits, 33, planesDealWarps | planesDealSplits},
	} {
		if got := planesDeal(PlanesTuning{Deal: c.deal}, c.splits); got != c.want {
			t.Errorf("planesDeal(%d, %d splits) = %d, want %d", c.deal, c.splits, got, c.want)
		}
	}
	if err := (PlanesTuning{Deal: PlanesDealSplits + 1}).check(); err == nil {
		t.Errorf("PlanesTuning.Deal %d passed the check", PlanesDealSplits+1)
	}
}

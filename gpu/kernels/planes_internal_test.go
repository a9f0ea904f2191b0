// planes_internal_test.go: split_mma's split planner (planesSplitLen) on the
// benchmark grid's shapes, without a GPU.

package kernels

import "testing"

// TestPlanesSplitLen checks the splits split_mma gets at Hkv 8 and one row
// chunk (Hq 32, Tq 1): the wave rule (v2.4) by default, v2.3's 528-CTA
// target with PlanesTuning.TargetCTAs, and split_v1's (always the target).
func TestPlanesSplitLen(t *testing.T) {
	for _, tc := range []struct {
		b, l            int
		wave, v23, v1   int // splits: default, TargetCTAs 528, split_v1
		waveLen, v23Len int // positions per split
	}{
		{1, 8192, 15, 15, 65, 576, 576},     // at most 8192/512 splits (v1: no minimum)
		{1, 131072, 33, 65, 65, 4096, 2048}, // one wave (256 CTAs, 8 more over the padding), not two of 520
		{16, 32768, 8, 5, 5, 4160, 6592},    // 1024 CTAs (3.9 waves), not 640 (2.4)
		{128, 8192, 1, 1, 1, 8256, 8256},    // 1024 CTAs
		{1, 32768, 33, 57, 65, 1024, 576},   // the engine's B = 1 plan at a 32K context
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
			{"target 528", PlanesMMA, PlanesTuning{TargetCTAs: 528}, tc.v23, tc.v23Len},
			{"v1", PlanesV1, PlanesTuning{}, tc.v1, 0},
		} {
			sl := planesSplitLen(c.k, items, tc.l, maxPos, c.tn)
			splits := (maxPos + sl - 1) / sl
			if sl%planesTile != 0 || splits != c.splits || (c.wantLen != 0 && sl != c.wantLen) {
				t.Errorf("B=%d L=%d %s: %d positions per split, %d splits; want %d splits (of %d)", tc.b, tc.l, c.name, sl, splits, c.splits, c.wantLen)
			}
			if c.k == PlanesMMA && splits > 1 && sl < planesMinSplitTokens {
				t.Errorf("B=%d L=%d %s: %d positions per split, below %d", tc.b, tc.l, c.name, sl, planesMinSplitTokens)
			}
		}
	}
}

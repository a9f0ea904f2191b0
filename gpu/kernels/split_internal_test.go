package kernels

import "testing"

// TestSplitBlocks checks sizeMMA's split rule on the benchmark grid's
// shapes (Hkv = 8, one row chunk; blocks of 128 tokens, splits of at least
// 4 blocks) for decode_mma.cu's rounding (down) and 3 CTAs per SM.
func TestSplitBlocks(t *testing.T) {
	const slots = 3 * decodeRefSMs
	for _, tc := range []struct {
		b, l       int
		wantSplits int
	}{
		{1, 8192, 16},   // at most 64/4 splits
		{1, 32768, 43},  // 344 CTAs: the fullest single wave of 396 slots
		{1, 131072, 49}, // 392 CTAs, not 1.3 waves of 512
		{8, 32768, 24},  // at most 4 waves: 1536 CTAs
		{16, 32768, 12}, // 1536 CTAs
		{32, 8192, 6},   // 1536 CTAs
		{64, 8192, 3},   // 1536 CTAs
		{128, 8192, 1},  // 1024 CTAs: two splits would be 5 waves
	} {
		items, maxBlocks := tc.b*8, tc.l/128
		bps := splitBlocks(items, maxBlocks, 4, slots, splitWavesDown)
		splits := (maxBlocks + bps - 1) / bps
		if splits != tc.wantSplits {
			t.Errorf("B=%d L=%d: %d splits of %d blocks, want %d splits", tc.b, tc.l, splits, bps, tc.wantSplits)
		}
		if bps < 4 && maxBlocks >= 4 {
			t.Errorf("B=%d L=%d: %d blocks per split, below the minimum 4", tc.b, tc.l, bps)
		}
	}
	if bps := splitBlocks(8, 2, 4, slots, splitWavesDown); bps != 2 {
		t.Errorf("a sequence shorter than the minimum split: %d blocks per split, want 2 (one split)", bps)
	}
	// Rounded up (the wgmma kernel): 128 x 8K takes two splits.
	if bps := splitBlocks(1024, 64, 4, slots, splitWavesUp); bps != 32 {
		t.Errorf("128 x 8K rounded up: %d blocks per split, want 32 (two splits)", bps)
	}
	// One wave (the wgmma kernel with 16-bit KV): the most splits whose
	// CTAs fit in the 396 slots, or the rounded-up waves where the items
	// alone do not; fewer than splitFewItems items as for the other rules.
	for _, tc := range []struct {
		b, l       int
		wantSplits int
	}{
		{1, 32768, 43}, // 8 items: the fullest single wave, as above (decode_wgmma.go plans one 16-bit sequence at 264 slots: TestWGMMAPlanCTAs)
		{2, 32768, 24}, // 16 items: 384 CTAs
		{15, 32768, 3}, // 360 CTAs, not 14 splits (4.2 waves) or 4 (1.2 waves)
		{16, 32768, 3}, // 384 CTAs
		{32, 8192, 1},  // 256 CTAs
		{49, 8192, 1},  // 392 CTAs
		{50, 8192, 4},  // 400 items: four waves rounded up, 1600 CTAs
		{128, 8192, 2}, // 1024 items: two splits, as rounded up
	} {
		items, maxBlocks := tc.b*8, tc.l/128
		bps := splitBlocks(items, maxBlocks, 4, slots, splitOneWave)
		if splits := (maxBlocks + bps - 1) / bps; splits != tc.wantSplits {
			t.Errorf("one wave, B=%d L=%d: %d splits of %d blocks, want %d splits", tc.b, tc.l, splits, bps, tc.wantSplits)
		}
	}
}

// TestPackSlices checks the slicing of pack launches: about two CTAs per SM
// for a few heads, one CTA per half for many, never more slices than words
// allow.
func TestPackSlices(t *testing.T) {
	for _, c := range []struct{ heads, sms, maxSlices, want int }{
		{8, 132, 8, 8},    // one sequence, int4 (2048 words per K half): 16 halves x 8
		{8, 132, 4, 4},    // int2: 1024 words
		{3, 132, 32, 32},  // fp16 in the test: capped by packMaxSlices
		{64, 132, 8, 3},   // 8 sequences: 128 halves x 3 = 384 CTAs
		{1024, 132, 8, 1}, // 128 sequences
		{132, 132, 8, 1},
		{1, 132, 1, 1},
	} {
		if got := packSlices(c.heads, c.sms, c.maxSlices); got != c.want {
			t.Errorf("packSlices(%d heads, %d SMs, max %d) = %d, want %d", c.heads, c.sms, c.maxSlices, got, c.want)
		}
	}
}

// TestWGMMAPlanCTAs checks the splits decode_wgmma.cu plans for one
// sequence with 16-bit K/V (v3.3: at most two CTAs an SM, 264 slots) and
// that other steps keep the three the registers allow.
func TestWGMMAPlanCTAs(t *testing.T) {
	fp16 := DecodeLayout{D: 128, KBits: 16, VBits: 16, Nr: 128}
	int8 := DecodeLayout{D: 128, KBits: 8, VBits: 8, Nr: 128}
	shape := func(b, l int) DecodeShape {
		return DecodeShape{B: b, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: (l + 127) / 128, MaxL: l}
	}
	for _, tc := range []struct {
		l          int
		wantSplits int
	}{
		{1024, 4},    // the 256-token minimum
		{8192, 32},   // 256 CTAs, as before
		{32768, 32},  // 256 CTAs (three an SM: 43, 344)
		{32800, 33},  // 264 CTAs: two on every SM
		{131072, 32}, // 256 CTAs (three an SM: 49, 392)
	} {
		s := shape(1, tc.l)
		ctas := wgmmaPlanCTAs(fp16, s, 3)
		if ctas != wgmmaFewCTAsPerSM {
			t.Fatalf("L=%d: %d CTAs an SM for one fp16 sequence, want %d", tc.l, ctas, wgmmaFewCTAsPerSM)
		}
		maxBlocks := (tc.l + 127) / 128
		bps := splitBlocks(8, maxBlocks, 2, ctas*decodeRefSMs, splitOneWave)
		if splits := (maxBlocks + bps - 1) / bps; splits != tc.wantSplits {
			t.Errorf("one fp16 sequence, L=%d: %d splits of %d blocks, want %d", tc.l, splits, bps, tc.wantSplits)
		}
	}
	if got := wgmmaPlanCTAs(fp16, shape(2, 32768), 3); got != 3 {
		t.Errorf("two fp16 sequences: %d CTAs an SM, want 3", got)
	}
	if got := wgmmaPlanCTAs(int8, shape(1, 8192), 2); got != 2 {
		t.Errorf("one int8 sequence: %d CTAs an SM, want its 2", got)
	}
	if got := wgmmaPlanCTAs(int8, shape(1, 8192), 3); got != 3 {
		t.Errorf("one int8 sequence: %d CTAs an SM, want 3 (the rule is 16-bit K/V's)", got)
	}
	if got := wgmmaPlanCTAs(fp16, DecodeShape{B: 1, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: 1, MaxL: 128}, 1); got != 1 {
		t.Errorf("D > 128 (one CTA an SM): %d, want 1", got)
	}
}

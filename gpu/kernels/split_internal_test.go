package kernels

import (
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

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
		bps := splitBlocksRun(8, maxBlocks, 2, ctas*decodeRefSMs, splitOneWave, true)
		if splits := (maxBlocks + bps - 1) / bps; splits != tc.wantSplits || bps != (maxBlocks+splits-1)/splits {
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

// TestSplitWavesFill checks decode_mma.cu's split rule (splitWavesFill,
// session 20) on the max-batch and benchmark shapes (Hq 32, Hkv 8, D 128,
// 264 slots): more splits than splitWavesDown's only where its last wave
// is poorly filled (55 x 32K: 3.33 waves -> 5 whole; 100 x 32K: 3.03 ->
// 12.1 for int4, 9.1 for the 2-bit formats), the same count wherever its
// last wave is nearly full (128 x 8K) or one sequence is planned as a
// single wave; fewer (v2.26) where one wave of at least 90% of the slots
// runs at most 16K tokens a CTA (32 x 8K, 8 x 32K, 16 x 32K, 2 x 128K),
// not where that wave would run longer (33 x 32K, 8 x 128K) or fill less
// (24 x 4K); near-equal runs.
func TestSplitWavesFill(t *testing.T) {
	for _, tc := range []struct {
		spec       string
		b, l       int
		down, fill int
	}{
		{"int4", 55, 32768, 2, 3},
		{"int4", 55, 32785, 2, 3}, // bench model's MaxL at 32K
		{"int4", 100, 32768, 1, 4},
		{"int4", 128, 8192, 1, 1},
		{"int4", 16, 32768, 8, 2}, // v2.26: one wave of 256 CTAs of 16K tokens
		{"int4", 32, 8192, 4, 1},
		{"int4", 8, 32768, 16, 4},
		{"int4", 2, 131072, 64, 16},
		{"int4", 33, 8192, 4, 1},    // 264 CTAs: the slots exactly
		{"int4", 33, 32768, 4, 4},   // one wave would run 32K tokens a CTA: past oneWaveMaxRun
		{"int4", 24, 4096, 5, 5},    // one wave would fill 73% of the slots
		{"int4", 8, 131072, 16, 16}, // 4 splits would run 32K tokens
		{"int4", 1, 32768, 32, 32},
		{"int4:kt128", 55, 32768, 2, 3},
		{"int2", 55, 32768, 2, 3},
		{"int2", 100, 32768, 1, 3},
		{"int2", 101, 32785, 1, 3},
		{"int2", 128, 8192, 1, 1},
		{"int2", 32, 8192, 4, 1},
		{"int2", 8, 32768, 16, 4},
		{"int2", 16, 32768, 8, 2},
		{"int2", 16, 32785, 8, 2}, // bench model's MaxL: runs of 16640 tokens
		{"int4", 32, 8209, 4, 1},
		{"k4v2", 32, 8192, 4, 1},
		{"k4v2", 16, 32768, 8, 2},
		{"k4v2", 100, 32768, 1, 3},
	} {
		l, err := LayoutFor(kv.MustResolve(tc.spec, 128).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, ctas := mmaConfig(l, MMATuning{})
		s := DecodeShape{B: tc.b, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: (tc.l + l.Nr - 1) / l.Nr, MaxL: tc.l}
		for _, r := range []struct {
			rule splitRule
			want int
		}{{splitWavesDown, tc.down}, {splitWavesFill, tc.fill}} {
			p, err := sizeMMA(nil, l, s, ctas, r.rule, mmaMinSplitTokens, DecodeTuning{})
			if err != nil {
				t.Fatal(err)
			}
			if p.maxSplits != r.want {
				t.Errorf("%s %d x %d, rule %d: %d splits of %d tokens, want %d", tc.spec, tc.b, tc.l, r.rule, p.maxSplits, p.splitLen, r.want)
			}
			// Near-equal runs: ⌈blocks / splits⌉ a split leaves the last one
			// short by less than a block per split.
			if last := tc.l - (p.maxSplits-1)*p.splitLen; p.maxSplits > 1 && p.splitLen-last >= p.maxSplits*l.Nr {
				t.Errorf("%s %d x %d: splits of %d tokens leave a last one of %d", tc.spec, tc.b, tc.l, p.splitLen, last)
			}
		}
	}
	if mmaSplitRule != splitWavesFill {
		t.Errorf("decode_mma.cu's split rule is %d, want splitWavesFill", mmaSplitRule)
	}
}

// TestSplitBlocksShortestRun checks that splitBlocksRun's one-wave rule
// for few items (one sequence; sizeMMA's plans) takes, of the block counts that give its split
// count, the fewest (session 26: the longest split is the launch's
// critical path): every split count's shortest longest run, on every
// length up to 4096 blocks, at 2 and 3 CTAs an SM; and the shapes the
// rule changed (1 x 128K at 128-token blocks: 32 splits of 32 blocks, was
// 33 blocks and a last split of one; 1 x 1K: two of 4, was 7 and 1).
func TestSplitBlocksShortestRun(t *testing.T) {
	for _, slots := range []int{2 * decodeRefSMs, 3 * decodeRefSMs} {
		for maxBlocks := 1; maxBlocks <= 4096; maxBlocks++ {
			bps := splitBlocksRun(8, maxBlocks, 4, slots, splitWavesDown, true)
			splits := (maxBlocks + bps - 1) / bps
			if want := (maxBlocks + splits - 1) / splits; bps != want {
				t.Fatalf("%d slots, %d blocks: %d splits of %d blocks, want %d (the shortest longest run)", slots, maxBlocks, splits, bps, want)
			}
			if 8*splits > slots {
				t.Fatalf("%d slots, %d blocks: %d CTAs, more than one wave", slots, maxBlocks, 8*splits)
			}
		}
	}
	for _, tc := range []struct{ maxBlocks, bps int }{{1024, 32}, {8, 4}, {16, 4}, {512, 16}, {256, 8}, {64, 4}} {
		if bps := splitBlocksRun(8, tc.maxBlocks, 4, 2*decodeRefSMs, splitWavesDown, true); bps != tc.bps {
			t.Errorf("one sequence of %d blocks, 264 slots: %d blocks per split, want %d", tc.maxBlocks, bps, tc.bps)
		}
	}
	// sizeMMA routes it (splitRunShortest): every rule's one-wave plan of
	// one sequence by default and with SplitRunShortest (1 x 128K: 32 splits
	// of 4096 tokens; 1 x 2K: 4 of 512; 1 x 1K: 2 of 512), splitBlocks' with
	// SplitRunLargest (33 blocks, 5 and 7, as before session 26).
	l, err := LayoutFor(kv.MustResolve("int4", 128).WithOrder(kv.MMA))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l        int
		rule     splitRule
		run      SplitRunMode
		splitLen int
	}{
		{131072, splitWavesFill, SplitRunAuto, 4096}, {2048, splitWavesFill, SplitRunAuto, 512}, {1024, splitWavesFill, SplitRunAuto, 512},
		{131072, splitOneWave, SplitRunAuto, 4096}, {131072, splitWavesUp, SplitRunAuto, 4096},
		{131072, splitWavesFill, SplitRunShortest, 4096}, {2048, splitWavesFill, SplitRunShortest, 512},
		{131072, splitWavesFill, SplitRunLargest, 33 * 128}, {2048, splitWavesFill, SplitRunLargest, 640}, {1024, splitWavesFill, SplitRunLargest, 896},
		{131072, splitOneWave, SplitRunLargest, 33 * 128}, {131072, splitWavesUp, SplitRunLargest, 33 * 128},
	} {
		s := DecodeShape{B: 1, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: tc.l / l.Nr, MaxL: tc.l}
		p, err := sizeMMA(nil, l, s, 2, tc.rule, mmaMinSplitTokens, DecodeTuning{SplitRun: tc.run})
		if err != nil {
			t.Fatal(err)
		}
		if p.splitLen != tc.splitLen {
			t.Errorf("1 x %d, rule %d, %v: splits of %d tokens, want %d", tc.l, tc.rule, tc.run, p.splitLen, tc.splitLen)
		}
	}
}

// TestMMAOneSMSplits checks decode_mma.cu's one-CTA-an-SM re-cut (session
// 28, oneSMSplits after sizeMMA, as planMMA does): one sequence of 8 KV
// heads whose default plan runs at most one CTA an SM takes the shortest
// splits that still do (at least one 128-token block, at most 16 splits);
// every other plan, and every plan with a fixed split, a CTA target or a
// minimum split, keeps sizeMMA's.
func TestMMAOneSMSplits(t *testing.T) {
	for _, tc := range []oneSMCase{
		// int4 KC, blocks of 128 tokens: 1K 2 -> 8 splits, 2K 4 -> 16,
		// 3K 6 -> 12, 4K 8 -> 16; 8K (16 splits of 4 blocks) and longer keep theirs.
		{"int4", 1, 1024, -1, DecodeTuning{}, 128},
		{"int4", 1, 2048, -1, DecodeTuning{}, 128},
		{"int4", 1, 3072, -1, DecodeTuning{}, 256},
		{"int4", 1, 4096, -1, DecodeTuning{}, 256},
		{"int4", 1, 8192, -1, DecodeTuning{}, 512},
		{"int4", 1, 32768, -1, DecodeTuning{}, 1024},
		{"int4", 1, 131072, -1, DecodeTuning{}, 4096},
		// int2, blocks of 256 tokens: one block a split up to 4K.
		{"int2", 1, 1024, -1, DecodeTuning{}, 256},
		{"int2", 1, 4096, -1, DecodeTuning{}, 256},
		{"int2", 1, 8192, -1, DecodeTuning{}, 512},
		// Not re-cut: two sequences (16 items), a minimum split, a CTA
		// target, a fixed split.
		{"int4", 2, 1024, -1, DecodeTuning{}, 512},
		{"int4", 1, 1024, -1, DecodeTuning{MinSplitTokens: 512}, 512},
		{"int4", 1, 2048, -1, DecodeTuning{MinSplitTokens: 256}, 256},
		{"int4", 1, 1024, -1, DecodeTuning{TargetCTAs: 8}, 1024},
		{"int4", 1, 1024, 0, DecodeTuning{}, 512},
	} {
		p, _, s := oneSMPlan(t, tc.format, tc.b, tc.l, tc.splitLen == 0, tc.tuning)
		if p.splitLen != tc.want || p.maxSplits != (tc.l+tc.want-1)/tc.want {
			t.Errorf("%s %d x %d %+v: %d splits of %d tokens, want splits of %d", tc.format, tc.b, tc.l, tc.tuning, p.maxSplits, p.splitLen, tc.want)
		}
		if p.maxSplits*s.B*s.Hkv > decodeRefSMs && p.splitLen < 512 {
			t.Errorf("%s %d x %d: %d CTAs of a re-cut plan, more than one an SM", tc.format, tc.b, tc.l, p.maxSplits*s.B*s.Hkv)
		}
	}
	// mmaOneSMBlocks alone: one KV head (1 item) of 64 blocks stays at 16
	// splits (mmaOneSMMaxSplits), 16 items are never re-cut.
	if got := mmaOneSMBlocks(1, 64, 4, 1); got != 4 {
		t.Errorf("1 item, 64 blocks: %d blocks a split, want 4", got)
	}
	if got := mmaOneSMBlocks(1, 16, 16, 1); got != 1 {
		t.Errorf("1 item, 16 blocks: %d blocks a split, want 1", got)
	}
	if got := mmaOneSMBlocks(16, 8, 4, 1); got != 4 {
		t.Errorf("16 items: %d blocks a split, want 4", got)
	}
}

// TestMMAOneSMTile checks planMMA's routing of the shorter tile (session
// 29, mmaOneSMTile): int2 (128-token tiles) at one sequence of 1K-4K, whose
// re-cut splits are one 256-token block, runs 64-token tiles; int2 at 8K
// (four tiles of 128 a split) and 128K, two sequences, a fixed split, a
// minimum split, a CTA target, and the layouts of 64-token tiles keep
// theirs.
func TestMMAOneSMTile(t *testing.T) {
	for _, tc := range []oneSMCase{
		{"int2", 1, 1024, -1, DecodeTuning{}, 4},
		{"int2", 1, 2048, -1, DecodeTuning{}, 4},
		{"int2", 1, 3072, -1, DecodeTuning{}, 4},
		{"int2", 1, 4096, -1, DecodeTuning{}, 4},
		{"int2", 1, 100, -1, DecodeTuning{}, 4}, // residual tokens only: the tile is never run
		{"int2", 1, 8192, -1, DecodeTuning{}, 8},
		{"int2", 1, 32768, -1, DecodeTuning{}, 8},
		{"int2", 1, 131072, -1, DecodeTuning{}, 8},
		{"int2", 2, 1024, -1, DecodeTuning{}, 8},
		{"int2", 1, 1024, 0, DecodeTuning{}, 8},
		{"int2", 1, 1024, -1, DecodeTuning{MinSplitTokens: 256}, 8},
		{"int2", 1, 1024, -1, DecodeTuning{TargetCTAs: 32}, 8},
		{"int4", 1, 1024, -1, DecodeTuning{}, 4},
		{"k4v2", 1, 1024, -1, DecodeTuning{}, 4},
	} {
		p, mt, _ := oneSMPlan(t, tc.format, tc.b, tc.l, tc.splitLen == 0, tc.tuning)
		if mt != tc.want {
			t.Errorf("%s %d x %d %+v (splits of %d): tile of %d groups, want %d", tc.format, tc.b, tc.l, tc.tuning, p.splitLen, mt, tc.want)
		}
	}
}

// oneSMCase is a row of TestMMAOneSMSplits' and TestMMAOneSMTile's tables:
// b sequences of l tokens of format, a split length (0: batch invariance's
// fixed 512 tokens, -1: the plan's), the tuning, and the expected value.
type oneSMCase struct {
	format   string
	b, l     int
	splitLen int
	tuning   DecodeTuning
	want     int
}

// oneSMPlan is planMMA's split plan and tile (sizeMMATile) for b sequences of
// l tokens of format (Hq 32, Hkv 8, D 128; fixed: batch invariance's split
// of 512 tokens), for TestMMAOneSMSplits and TestMMAOneSMTile.
func oneSMPlan(t *testing.T, format string, b, l int, fixed bool, tuning DecodeTuning) (*DecodePlan, int, DecodeShape) {
	t.Helper()
	lay, err := LayoutFor(kv.MustResolve(format, 128).WithOrder(kv.MMA))
	if err != nil {
		t.Fatal(err)
	}
	s := DecodeShape{B: b, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: max(1, l/lay.Nr), MaxL: l}
	if fixed {
		s.SplitLen = 512
	}
	p, mt, _, _, err := sizeMMATile(nil, lay, s, tuning)
	if err != nil {
		t.Fatal(err)
	}
	return p, mt, s
}

// TestSeqSplitLen checks the per-sequence split rule (seqSplitLen, as
// bitdecode.cuh's) at the batch-invariant cache's constants and the grid
// width it plans (splitsFor): for every maxL, the most splits any sequence
// of at most maxL tokens takes, exactly; and that fixSplit refuses rules
// the kernels cannot follow.
func TestSeqSplitLen(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{1, 512}, {8192, 512}, {8213, 512}, {8704, 512}, {8705, 1024}, {17408, 1024}, {17409, 2048}, {32768, 2048}, {32789, 2048},
		{34816, 2048}, {34817, 4096}, {65536, 4096}, {131072, 4096},
	} {
		if got := seqSplitLen(c.n, 0, 512, 17, 4096); got != c.want {
			t.Errorf("seqSplitLen(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if got := seqSplitLen(100000, 768, 0, 0, 0); got != 768 {
		t.Errorf("a fixed split: %d, want 768", got)
	}
	for _, r := range []struct{ base, cap, most int }{{512, 17, 4096}, {512, 16, 4096}, {256, 4, 1024}, {128, 2, 512}, {512, 16, 512}, {64, 1, 256}} {
		p := &DecodePlan{splitBase: r.base, splitCap: r.cap, splitMax: r.most}
		most := 0
		for n := 1; n <= 300000; n++ {
			s := seqSplitLen(n, 0, r.base, r.cap, r.most)
			if s%r.base != 0 || s > r.most || (s > r.base && (n+s/2-1)/(s/2) <= r.cap) {
				t.Fatalf("rule %+v: %d tokens split at %d: not the shortest split of at most %d splits", r, n, s, r.cap)
			}
			most = max(most, (n+s-1)/s)
			if got := p.splitsFor(n); got != most {
				t.Fatalf("rule %+v: splitsFor(%d) = %d, the most splits up to it %d", r, n, got, most)
			}
		}
	}
	for _, s := range []DecodeShape{
		{MaxL: 4096, SplitCap: 4, SplitMax: 1024},                 // no SplitLen
		{MaxL: 4096, SplitLen: 256, SplitCap: 4, SplitMax: 768},   // 3x: not a power of two
		{MaxL: 4096, SplitLen: 256, SplitCap: 0, SplitMax: 1024},  // no cap
		{MaxL: 4096, SplitLen: 256, SplitCap: 65, SplitMax: 1024}, // past the fused merge
		{MaxL: 4096, SplitLen: 256, SplitCap: 4, SplitMax: 128},   // shorter than the base
	} {
		p := &DecodePlan{layout: DecodeLayout{Nr: 128}}
		if err := p.fixSplit(s); err == nil {
			t.Errorf("fixSplit(%+v) took it", s)
		}
	}
	p := &DecodePlan{layout: DecodeLayout{Nr: 128}}
	if err := p.fixSplit(DecodeShape{MaxL: 5000, SplitLen: 256, SplitCap: 4, SplitMax: 1024}); err != nil {
		t.Fatal(err)
	}
	if p.splitLen != 1024 || p.splitsFor(5000) != 5 || p.SeqSplitLen(1500) != 512 {
		t.Errorf("plan of 5000 tokens: split %d, %d splits, 1500 tokens at %d; want 1024, 5, 512", p.splitLen, p.splitsFor(5000), p.SeqSplitLen(1500))
	}
}

// TestMMASplitOptions checks v2.33's program option: decode_mma.cu plans
// with one split length for every sequence (splitCap 0) compile without the
// per-sequence rule, plans with per-sequence splits keep it, and the define
// names the macro the kernel reads.
func TestMMASplitOptions(t *testing.T) {
	for _, tt := range []struct {
		splitCap int
		lean     bool
		opts     string
	}{{0, false, mmaFixedSplitDefine}, {0, true, mmaFixedSplitDefine}, {17, false, ""}, {1, false, ""}, {17, true, mmaSeqLeanDefine}} {
		prog := program("decode_mma.cu", "", nil, nil)
		mmaSplitOptions(&prog, tt.splitCap, tt.lean)
		if got := strings.Join(prog.Options, " "); got != tt.opts {
			t.Errorf("splitCap %d lean %t: options %q, want %q", tt.splitCap, tt.lean, got, tt.opts)
		}
	}
	for _, def := range []string{mmaFixedSplitDefine, mmaSeqLeanDefine} {
		macro, _, _ := strings.Cut(strings.TrimPrefix(def, "-D"), "=")
		if !strings.Contains(decodeMMASource, "#ifndef "+macro+"\n") || !strings.Contains(decodeMMASource, macro+" != 0") {
			t.Errorf("decode_mma.cu does not read %s", macro)
		}
	}
}

// TestMMASeqLean checks the planner's rule for v2.34's leaner per-sequence
// kernel: the look-ahead kernel's by default, the tuning's where it says.
func TestMMASeqLean(t *testing.T) {
	for _, tt := range []struct {
		la   bool
		tune int
		want bool
	}{{true, 0, true}, {false, 0, false}, {false, 1, true}, {true, -1, false}, {true, 1, true}, {false, -1, false}} {
		if got := mmaSeqLean(tt.la, MMATuning{SeqLean: tt.tune}); got != tt.want {
			t.Errorf("mmaSeqLean(la %t, SeqLean %d) = %t, want %t", tt.la, tt.tune, got, tt.want)
		}
	}
}

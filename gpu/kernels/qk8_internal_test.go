package kernels

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// TestMMAQK8Rule checks which layouts the planner gives decode_mma.cu's
// int8 K·q path (v2.8): int2 and int4 keys per channel or per token in
// groups of 32k channels, never 8- or 16-bit keys, and MMATuning.QK8
// forcing either way only where the path reads the layout.
func TestMMAQK8Rule(t *testing.T) {
	for _, tc := range []struct {
		spec string
		d    int
		want bool
	}{
		{"int2", 128, true},
		{"int2:kc32:v32", 64, true},
		{"k4v2", 256, true},
		{"int4", 128, true},
		{"int4:kt128", 128, true},
		{"int4:kt32:v32", 128, true},
		{"int4:ktd", 64, true},
		{"k8v4", 128, false},
		{"int8", 128, false},
		{"fp16", 128, false},
		{"bf16", 128, false},
	} {
		l, err := LayoutFor(kv.MustResolve(tc.spec, tc.d).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		if got := mmaQK8(l, MMATuning{}); got != tc.want {
			t.Errorf("%s D=%d: default int8 K·q %v, want %v", tc.spec, tc.d, got, tc.want)
		}
		if mmaQK8(l, MMATuning{QK8: -1}) {
			t.Errorf("%s D=%d: QK8 -1 left the int8 path on", tc.spec, tc.d)
		}
		if got := mmaQK8(l, MMATuning{QK8: 1}); got != tc.want {
			t.Errorf("%s D=%d: QK8 1 gave %v, want %v (only where the path reads the layout)", tc.spec, tc.d, got, tc.want)
		}
		_, expr, _ := mmaProgram(l, 4, 0, 1, tc.want, false, false)
		if !strings.HasSuffix(expr, fmt.Sprintf(", %t, false>", tc.want)) {
			t.Errorf("%s D=%d: kernel %s does not end with the Q8K flag %v", tc.spec, tc.d, expr, tc.want)
		}
	}
}

// TestMMAPV8Rule checks which layouts decode_mma.cu's int8 P·V path (v2.9)
// reads: int2 values with one pair per token at an even tile of at most 8
// groups, never int4/int8/fp16 values or several value groups per token;
// MMATuning.PV8 forces it either way only there, and the default is off
// (mmaPV8Default) until measured faster.
func TestMMAPV8Rule(t *testing.T) {
	for _, tc := range []struct {
		spec string
		d    int
		mt   int
		want bool
	}{
		{"int2", 128, 8, true},
		{"k4v2", 128, 4, true},
		{"k4v2", 256, 2, false}, // v128: two value groups per token
		{"int2", 128, 1, false},
		{"int2:kc32:v32", 64, 8, false},
		{"int4", 128, 4, false},
		{"k8v4", 128, 2, false},
		{"int8", 128, 2, false},
		{"fp16", 128, 1, false},
	} {
		l, err := LayoutFor(kv.MustResolve(tc.spec, tc.d).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		if got := mmaPV8(l, tc.mt, MMATuning{}); got != (tc.want && mmaPV8Default) {
			t.Errorf("%s D=%d MT %d: default int8 P·V %v", tc.spec, tc.d, tc.mt, got)
		}
		if mmaPV8(l, tc.mt, MMATuning{PV8: -1}) {
			t.Errorf("%s D=%d MT %d: PV8 -1 left the int8 path on", tc.spec, tc.d, tc.mt)
		}
		if got := mmaPV8(l, tc.mt, MMATuning{PV8: 1}); got != tc.want {
			t.Errorf("%s D=%d MT %d: PV8 1 gave %v, want %v", tc.spec, tc.d, tc.mt, got, tc.want)
		}
		_, expr, _ := mmaProgram(l, tc.mt, 0, 1, false, tc.want, false)
		if !strings.HasSuffix(expr, fmt.Sprintf(", %t>", tc.want)) {
			t.Errorf("%s D=%d: kernel %s does not end with the P8V flag %v", tc.spec, tc.d, expr, tc.want)
		}
	}
}

// TestMMAMinSplit checks decode_mma.cu's 512-token minimum split on the
// benchmark grid (Hq 32, Hkv 8, D 128): of its rows only 1 x 8K splits
// differently from v3.1's 256 (16 splits instead of 32), so the session-8
// measurement at 1 x 8K covers every row it changes.
func TestMMAMinSplit(t *testing.T) {
	for _, spec := range []string{"int2", "k4v2", "int4", "int4:kt128"} {
		l, err := LayoutFor(kv.MustResolve(spec, 128).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, ctas := mmaConfig(l, MMATuning{})
		for _, pt := range [][2]int{{1, 8192}, {1, 32768}, {1, 131072}, {8, 32768}, {16, 32768}, {32, 8192}, {64, 8192}, {128, 8192}} {
			s := DecodeShape{B: pt[0], Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: pt[1] / l.Nr, MaxL: pt[1]}
			now, err := sizeMMA(nil, l, s, ctas, mmaSplitRule, mmaMinSplitTokens, DecodeTuning{})
			if err != nil {
				t.Fatal(err)
			}
			was, err := sizeMMA(nil, l, s, ctas, mmaSplitRule, wgmmaMinSplitTokens, DecodeTuning{})
			if err != nil {
				t.Fatal(err)
			}
			changed := pt == [2]int{1, 8192}
			if (now.maxSplits != was.maxSplits) != changed || (changed && (now.maxSplits != 16 || was.maxSplits != 32)) {
				t.Errorf("%s %d x %d: %d splits with 512-token minimum, %d with 256", spec, pt[0], pt[1], now.maxSplits, was.maxSplits)
			}
		}
	}
}

// TestDecodeDependentLaunch checks which grids of the benchmark's and the
// decode step's shapes (Hq 32, Hkv 8, D 128) go out as programmatic
// dependents: the one-sequence steps, whose splits fit in one wave, and
// none of the batches: the large ones' several waves' early CTAs slowed
// the max-batch steps, and so did v2.26's one wave of many sequences (16 x
// 32K, 32 x 8K; dependentLaunch).
func TestDecodeDependentLaunch(t *testing.T) {
	for _, spec := range []string{"int2", "k4v2", "int4", "int4:kt128"} {
		l, err := LayoutFor(kv.MustResolve(spec, 128).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, ctas := mmaConfig(l, MMATuning{})
		for _, pt := range [][2]int{{1, 8192}, {1, 32768}, {1, 131072}, {16, 32768}, {55, 32768}, {100, 32768}, {32, 8192}, {128, 8192}} {
			s := DecodeShape{B: pt[0], Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: pt[1] / l.Nr, MaxL: pt[1]}
			p, err := sizeMMA(nil, l, s, ctas, mmaSplitRule, mmaMinSplitTokens, DecodeTuning{})
			if err != nil {
				t.Fatal(err)
			}
			grid := p.maxSplits * s.Hkv * p.rowChunks * s.B
			if got, want := p.dependentLaunch(grid, s.Hkv*p.rowChunks*s.B), pt[0] == 1; got != want {
				t.Errorf("%s %d x %d: %d CTAs on %d slots: dependent %v, want %v", spec, pt[0], pt[1], grid, p.slots, got, want)
			}
		}
	}
}

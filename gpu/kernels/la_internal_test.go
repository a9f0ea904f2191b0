package kernels

import (
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// TestMMALARule checks which layouts the planner gives decode_mma.cu's
// look-ahead refold (v2.24) at their planned tile: int2 keys per channel whose key
// group is one tile (int2's 128 tokens at MT 8, kc32's 32 at MT 2), on the
// int8 K·q path, fp16 P·V and the register pipeline; never int4 keys, a key
// group over several tiles, the ring or the int8 P·V. MMATuning.LA -1 turns
// it off, 1 on only where it reads the layout, and the kernel's expression
// names the flag only where it is on.
func TestMMALARule(t *testing.T) {
	for _, tc := range []struct {
		spec string
		d    int
		tune MMATuning
		want bool
	}{
		{"int2", 128, MMATuning{}, true},
		{"int2", 64, MMATuning{}, true},
		{"int2", 256, MMATuning{}, false},               // D > 128: the fp16 key pairs, no widening
		{"int2", 128, MMATuning{MT: 4}, false},          // a key group of two tiles
		{"int2", 128, MMATuning{Stages: 3}, false},      // the ring
		{"int2", 128, MMATuning{PV8: 1}, false},         // int8 P·V
		{"int2", 128, MMATuning{QK8: -1}, false},        // fp16 K·q
		{"int2", 128, MMATuning{LA: -1}, false},         // off
		{"int2", 128, MMATuning{LA: 1, MT: 4}, false},   // forced, where it does not read the layout
		{"int2:kc32:v32", 128, MMATuning{}, true},       // groups of 32 tokens: tiles of 2 fragment groups
		{"int2:kc32:v32", 128, MMATuning{MT: 1}, false}, // two tiles a key group
		{"k4v2", 128, MMATuning{}, false},
		{"int4", 128, MMATuning{}, false},
		{"int4:kt128", 128, MMATuning{}, false},
		{"fp16", 128, MMATuning{}, false},
	} {
		l, err := LayoutFor(kv.MustResolve(tc.spec, tc.d).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		mt, stages, minB, _ := mmaConfig(l, tc.tune)
		qk8, pv8 := mmaQK8(l, tc.tune), mmaPV8(l, mt, tc.tune)
		got := mmaLA(l, mt, stages, qk8, pv8, 1<<20, tc.tune)
		if got != tc.want {
			t.Errorf("%s D=%d %+v (MT %d, GK %d): look-ahead %v, want %v", tc.spec, tc.d, tc.tune, mt, l.GK, got, tc.want)
		}
		_, expr, _ := mmaProgram(l, mt, stages, minB, qk8, pv8, got)
		if n := strings.Count(expr, ","); (n == 12) != got || (got && !strings.HasSuffix(expr, ", true>")) {
			t.Errorf("%s D=%d: kernel %s does not match the look-ahead flag %v", tc.spec, tc.d, expr, got)
		}
	}
}

// TestMMALASplits checks the default look-ahead's split rule on the
// benchmark grid (int2, Hq 32, Hkv 8, D 128): off where a split gives a warp
// fewer than laMinTiles tiles (one sequence at 8K and 32K, measured slower
// there), on from 4 tiles a warp (32 x 8K, 8 x 32K) up; a forced mode
// ignores the rule.
func TestMMALASplits(t *testing.T) {
	l, err := LayoutFor(kv.MustResolve("int2", 128).WithOrder(kv.MMA))
	if err != nil {
		t.Fatal(err)
	}
	mt, stages, _, ctas := mmaConfig(l, MMATuning{})
	for _, tc := range []struct {
		b, ctx int
		want   bool
	}{
		{1, 8192, false}, {1, 32768, false}, {1, 131072, true}, {8, 32768, true}, {16, 32768, true}, {32, 8192, true}, {55, 32768, true}, {100, 32768, true}, {128, 8192, true},
	} {
		s := DecodeShape{B: tc.b, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: tc.ctx / l.Nr, MaxL: tc.ctx}
		p, err := sizeMMA(nil, l, s, ctas, mmaSplitRule, mmaMinSplitTokens, DecodeTuning{})
		if err != nil {
			t.Fatal(err)
		}
		if got := mmaLA(l, mt, stages, true, false, p.splitLen, MMATuning{}); got != tc.want {
			t.Errorf("%d x %d (splits of %d tokens): look-ahead %v, want %v", tc.b, tc.ctx, p.splitLen, got, tc.want)
		}
		if !mmaLA(l, mt, stages, true, false, p.splitLen, MMATuning{LA: 1}) {
			t.Errorf("%d x %d: forced look-ahead off", tc.b, tc.ctx)
		}
	}
}

package kernels

import (
	"fmt"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// TestPrefillLaunchMT checks prefill.cu's m16 tiles a warp by launch
// (prefillLaunchMT) on an H100's 132 SMs, and that every layout's shared
// memory fits a CTA's limit (227 KiB) at each MT the planner can take.
func TestPrefillLaunchMT(t *testing.T) {
	const sms = 132
	for _, tt := range []struct {
		maxMT, rows, hkv int
		tune             DecodeTuning
		want             int
	}{
		{2, 2048, 8, DecodeTuning{}, 2},                   // Llama-3.1-8B's 512-token chunk: 256 CTAs at MT = 1, two waves
		{2, 996, 8, DecodeTuning{}, 1},                    // its 32K prompt's last chunk of 249 tokens: 128 CTAs at MT = 1
		{2, 1024, 8, DecodeTuning{PrefillMT: 2}, 2},       // asked for
		{1, 4096, 8, DecodeTuning{}, 1},                   // D = 256
		{2, 3584, 4, DecodeTuning{}, 2},                   // group 7, Hkv 4: 224 CTAs at MT = 1
		{2, 2048, 1, DecodeTuning{}, 1},                   // MQA: 32 CTAs
		{2, 64 * 132, 1, DecodeTuning{}, 1},               // exactly one wave at MT = 1
		{2, 64*132 + 1, 1, DecodeTuning{}, 2},             // one CTA more
		{1, 64*132 + 1, 1, DecodeTuning{PrefillMT: 2}, 1}, // MT = 2 is not compiled
	} {
		if got := prefillLaunchMT(tt.maxMT, tt.rows, tt.hkv, sms, tt.tune); got != tt.want {
			t.Errorf("prefillLaunchMT(%d, %d rows, Hkv %d, %+v) = %d, want %d", tt.maxMT, tt.rows, tt.hkv, tt.tune.PrefillMT, got, tt.want)
		}
	}
	const smemLimit = 227 << 10
	for _, spec := range []string{"fp16", "bf16", "int8", "int4", "int2", "k8v4", "k4v2", "int4:kt32:v32"} {
		for _, d := range []int{64, 128, 256} {
			l, err := LayoutFor(kv.MustResolve(spec, d).WithOrder(kv.MMA))
			if err != nil {
				t.Fatal(err)
			}
			for mt := 1; mt <= prefillMaxMT(l, DecodeTuning{}); mt++ {
				for ks := 1; ks <= 2; ks++ {
					if n := prefillSmem(l, mt, ks); n > smemLimit {
						t.Errorf("%s D=%d MT=%d KS=%d: %d bytes of shared memory, over %d", spec, d, mt, ks, n, smemLimit)
					}
				}
			}
		}
	}
}

// TestPrefillDequantRoute checks which layouts get prefill.cu's
// dequantizing route (prefillDequants) and that the fp16 twin it runs over
// (prefillF16Twin) is the layout of an fp16 format of the same head dim and
// block size: the same K half and block bytes, so dequant_blocks' writes
// are where the fp16 kernel reads.
func TestPrefillDequantRoute(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want bool
	}{
		{"fp16", false}, {"bf16", false}, {"int8", true}, {"int4", true}, {"int2", true}, {"k8v4", true}, {"k4v2", true},
		{"int4:kt32:v32", true}, {"int4:kc64:v64:res64", true}, {"int8:kc256:v128:res256", true}, {"int4:kc32:v32:res32", true}, // D 256 only: tiles of 32 keys
	} {
		for _, d := range []int{64, 128, 256} {
			l, err := LayoutFor(kv.MustResolve(tt.spec, d).WithOrder(kv.MMA))
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want && l.Nr%prefillTile(d) == 0
			if got := prefillDequants(l, DecodeTuning{}); got != want {
				t.Errorf("%s D %d: prefillDequants = %v, want %v", tt.spec, d, got, want)
			}
			if prefillDequants(l, DecodeTuning{NoPrefillDequant: true}) {
				t.Errorf("%s D %d: a route under NoPrefillDequant", tt.spec, d)
			}
			f16, err := LayoutFor(kv.MustResolve(fmt.Sprintf("fp16:res%d", l.Nr), d).WithOrder(kv.MMA))
			if err != nil {
				t.Fatal(err)
			}
			tw := prefillF16Twin(l)
			if err := tw.check(); err != nil || !PrefillReads(tw) {
				t.Errorf("%s D %d: twin %+v: %v", tt.spec, d, tw, err)
			}
			if tw.BlockBytes != f16.BlockBytes || tw.KBytes != f16.KBytes || tw.Nr != f16.Nr || tw.KBits != 16 || tw.VBits != 16 {
				t.Errorf("%s D %d: twin %+v, the fp16 format's layout %+v", tt.spec, d, tw, f16)
			}
		}
	}
}

// TestPrefillDequantPays checks when a plan with the dequantizing route
// takes it (PrefillPlan.DequantPays): in a GQA group at any chunk, at MHA
// from 1024 query rows a KV head; never without the route.
func TestPrefillDequantPays(t *testing.T) {
	with, without := &PrefillPlan{via: &PrefillPlan{}}, &PrefillPlan{}
	for _, tt := range []struct {
		hq, hkv, tq int
		want        bool
	}{
		{32, 8, 128, true},    // group 4, 512 rows (call 8: 690.5 against 886.8 us)
		{14, 2, 37, true},     // group 7
		{32, 32, 256, false},  // MHA, 256 rows (872.6 against 888.9 at 32K, 122.2 against 113.4 at 4K)
		{32, 32, 512, false},  // 1361.4 against 1294.1
		{32, 32, 1024, true},  // 2370.2 against 2542.7
		{32, 32, 1023, false}, // just under
	} {
		s := DecodeShape{B: 1, Hq: tt.hq, Hkv: tt.hkv, Tq: tt.tq}
		if got := with.DequantPays(s); got != tt.want {
			t.Errorf("Hq %d Hkv %d Tq %d: DequantPays = %v, want %v", tt.hq, tt.hkv, tt.tq, got, tt.want)
		}
		if without.DequantPays(s) {
			t.Errorf("Hq %d Hkv %d Tq %d: a plan without the route pays for it", tt.hq, tt.hkv, tt.tq)
		}
	}
}

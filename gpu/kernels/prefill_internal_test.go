package kernels

import (
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

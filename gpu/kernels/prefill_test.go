package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// TestPrefillRoute checks the routing between prefill.cu and the decode
// kernel's plan: by query rows a KV head (Tq times the group; 256, or 1024
// where K and V are both at most 4 bits), and by what prefill.cu reads.
func TestPrefillRoute(t *testing.T) {
	lay := func(spec string, d int) kernels.DecodeLayout {
		l, err := kernels.LayoutFor(kv.MustResolve(spec, d).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, tt := range []struct {
		spec        string
		d           int
		hq, hkv, tq int
		want        bool
	}{
		{"int4", 128, 32, 8, 512, true},  // Llama-3.1-8B's chunk: 16384 rows
		{"int4", 128, 32, 8, 1, false},   // a decode step
		{"fp16", 128, 32, 8, 96, true},   // 3072 rows
		{"fp16", 128, 32, 8, 95, false},  // 3040 rows: the decode plan
		{"fp16", 128, 16, 8, 128, false}, // group 2 (Gemma 2 9B), 2048 rows: measured faster on the decode plan
		{"fp16", 128, 28, 4, 128, true},  // group 7 (Qwen2.5 7B), 3584 rows
		{"bf16", 64, 4, 4, 768, true},    // a model of few heads: 3072 rows
		{"bf16", 64, 4, 4, 767, false},
		{"int4", 128, 32, 8, 160, true},  // 5120 rows: K and V at most 4 bits
		{"int4", 128, 32, 8, 159, false}, // 5088 rows
		{"int4", 128, 32, 8, 128, false}, // 4096 rows (group 4: measured faster on the decode plan)
		{"int4", 128, 16, 8, 256, false}, // group 2, 4096 rows: the same
		{"int4", 128, 24, 8, 256, true},  // group 3 (Llama 3.2 3B), 6144 rows: prefill.cu measured faster
		{"int4", 128, 28, 4, 128, false}, // group 7, 3584 rows
		{"int4", 128, 28, 4, 256, true},  // 7168 rows
		{"int4", 128, 32, 32, 256, true}, // MHA: 8192 rows
		{"int2", 128, 32, 32, 159, false},
		{"k4v2", 256, 7, 1, 732, true}, // MQA, group 7: 5124 rows
		{"k4v2", 256, 7, 1, 731, false},
		{"int8", 128, 32, 8, 96, true}, // 8-bit halves: 3072 rows
		{"int8", 128, 32, 8, 95, false},
		{"k8v4", 128, 32, 8, 96, true}, // 8-bit keys: the wider line
		{"int2:kc32:v32", 128, 14, 2, 366, true},
		{"int2:kc32:v32", 128, 14, 2, 365, false},
		{"int8", 256, 32, 8, 512, true}, // v3 measured slower there (its prefillFaster); v4 3.4x faster
		{"k8v4", 256, 32, 8, 512, true},
		{"int4", 256, 32, 8, 512, true},
	} {
		s := kernels.DecodeShape{B: 1, Hq: tt.hq, Hkv: tt.hkv, Tq: tt.tq, MaxBlocks: 64, MaxL: 4096}
		if got := kernels.PrefillRoute(lay(tt.spec, tt.d), s); got != tt.want {
			t.Errorf("PrefillRoute(%s D=%d, Hq=%d Hkv=%d Tq=%d) = %v, want %v", tt.spec, tt.d, tt.hq, tt.hkv, tt.tq, got, tt.want)
		}
	}
}

// prefillSpecs are the formats the prefill tests run: every family the
// decode kernels read (16-bit, int8, int4 and int2 halves, keys per channel
// and per token, value groups, mixes, a 64-token block).
var prefillSpecs = []string{"fp16", "bf16", "int8", "int4", "int4:kt128", "int4:kt32:v32", "int2", "int2:kc32:v32", "k8v4", "k4v2", "int4:kc64:res64"}

// TestGPUPrefillMatchesReference checks prefill.cu against attn.Reference
// (float64) within the decode kernels' tolerance, for every format, head dims
// 64, 128 and 256, groups 1, 3, 4, 7, 8 and 16 (MQA among them), chunks of
// several row tiles and a partial one, cached lengths that are not whole
// blocks (the chunk's keys partly packed, partly in the residual), a chunk
// after earlier ones, sliding windows and the soft-cap; every output
// written (NaN-poisoned), three runs bitwise equal, and the float32 output
// the fp16 one's widening (runCase). The same inputs through decode_mma.cu
// (the cache's prefill before prefill.cu) pass the same check; the test
// logs how far apart the two are. These launches are short enough for the
// planner to take MT = 1 (prefillLaunchMT), so every other shape runs with
// MT = 2 asked for (DecodeTuning.PrefillMT; 1 at D = 256 all the same).
func TestGPUPrefillMatchesReference(t *testing.T) {
	device(t)
	shapes := []attn.Shape{{Hq: 32, Hkv: 8, D: 128}, {Hq: 4, Hkv: 4, D: 64}, {Hq: 8, Hkv: 1, D: 128}, {Hq: 6, Hkv: 2, D: 256},
		{Hq: 14, Hkv: 2, D: 128}, {Hq: 16, Hkv: 1, D: 64}}
	specs := prefillSpecs
	if testing.Short() {
		specs = []string{"fp16", "bf16", "int4", "k4v2"}
	}
	for i, spec := range specs {
		t.Run(spec, func(t *testing.T) { prefillSpecCases(t, i, spec, shapes) })
	}
}

// prefillSpecCases runs TestGPUPrefillMatchesReference's cases of format
// spec (the i-th).
func prefillSpecCases(t *testing.T, i int, spec string, shapes []attn.Shape) {
	seed := uint64(100 + 10*i)
	{
		nr := kv.MustParseSpec(spec).Residual
		for j, sh := range shapes {
			group := sh.Hq / sh.Hkv
			tq := []int{70, 100, 37, 150}[(i+j)%4] // 70 x 4 = 280 rows: 4 tiles and a partial one
			lens := []int{tq + 5, tq + 3*nr + 7, tq + nr}
			if (i+j)%3 == 0 {
				lens = append(lens, 1000+tq)
			}
			c := gpuCase{kernel: kernels.DecodeMMA, spec: spec, sh: sh, lens: lens, tq: tq}
			if (i+j/2)%2 == 1 { // MT = 2 for every format; at D 64 and 128 with a window, the soft-cap and neither
				tn := tuning.Decode
				tn.PrefillMT = 2
				c.tune = &tn
			}
			switch (i + j) % 4 {
			case 1:
				c.window = []int{9, nr + 37, 700}[(i+j)%3]
			case 2:
				c.softcap = 4
			}
			seed++
			got := runCase(t, rand.New(rand.NewPCG(seed, 7)), withPrefill(c))
			want := runCase(t, rand.New(rand.NewPCG(seed, 7)), c)
			ulps, bigDiff := 0, 0.0
			for k := range got {
				ulps = max(ulps, fp16ULPs(got[k], want[k]))
				bigDiff = max(bigDiff, math.Abs(float64(half.ToFloat32(got[k])-half.ToFloat32(want[k]))))
			}
			t.Logf("%v (group %d): prefill.cu against decode_mma.cu: at most %d fp16 ulps apart, largest difference %.3g", c, group, ulps, bigDiff)
		}
	}
}

// TestGPUPrefillDequantSameBits runs prefill chunks of low-bit formats by
// prefill.cu's dequantizing route (PrefillPlan.LaunchDequant: the
// sequence's blocks written as fp16 by dequant_blocks, the fp16 kernel over
// them) and directly (LaunchShape: each tile dequantized by the kernel),
// one sequence each: both within the reference's bound (runCase), and the
// outputs equal bit for bit. Formats: keys per channel and per token, int8,
// int4 and int2 halves, a mix, residual blocks of 64 to 256 tokens; head dims
// 64, 128 and 256; GQA groups 1, 3, 4 and 8 and MQA; lengths with and
// without a partial residual, chunks after cached tokens, sliding windows,
// the soft-cap and MT = 2.
func TestGPUPrefillDequantSameBits(t *testing.T) {
	device(t)
	specs := []string{"int4", "int8", "int2", "k4v2", "int4:kt32:v32", "int4:kc64:v64:res64", "int8:kc256:v128:res256"}
	shapes := []attn.Shape{{Hq: 32, Hkv: 8, D: 128}, {Hq: 6, Hkv: 2, D: 256}, {Hq: 16, Hkv: 1, D: 64}, {Hq: 4, Hkv: 4, D: 64}, {Hq: 24, Hkv: 8, D: 128}}
	if testing.Short() {
		specs = specs[:4]
	}
	seed := uint64(900)
	for i, spec := range specs {
		nr := kv.MustParseSpec(spec).Residual
		for j, sh := range shapes {
			seed++
			tq := []int{70, 150, 37, 256}[(i+j)%4]
			l := []int{tq + 3*nr + 7, tq + 4*nr, 1500 + tq}[(i+j)%3]
			c := gpuCase{kernel: kernels.DecodeMMA, spec: spec, sh: sh, lens: []int{l}, tq: tq, prefill: true}
			switch (i + j) % 4 {
			case 1:
				c.window = []int{9, nr + 37, 700}[(i+j)%3]
			case 2:
				c.softcap = 4
			case 3:
				tn := tuning.Decode
				tn.PrefillMT = 2
				c.tune = &tn
			}
			direct := runCase(t, rand.New(rand.NewPCG(seed, 7)), c)
			c.dequant = true
			via := runCase(t, rand.New(rand.NewPCG(seed, 7)), c)
			for k := range direct {
				if direct[k] != via[k] {
					t.Fatalf("%v: element %d: %#04x by the fp16 copy, %#04x directly", c, k, via[k], direct[k])
				}
			}
		}
	}
}

// withPrefill returns c run by prefill.cu.
func withPrefill(c gpuCase) gpuCase {
	c.prefill = true
	return c
}

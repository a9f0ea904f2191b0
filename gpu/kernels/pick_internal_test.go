package kernels

import (
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// TestPickDecode checks DecodeAuto's rule against the winners of the H100
// side-by-side grid (bench/results/2026-11-23-h100-wgmma, side_by_side.md;
// int4 KT: bench/results/2026-11-25-h100-attn-2)
// and that it never picks the wgmma kernel where it cannot run.
func TestPickDecode(t *testing.T) {
	shape := func(b, l int) DecodeShape {
		return DecodeShape{B: b, Hq: 32, Hkv: 8, Tq: 1, MaxBlocks: l / 64, MaxL: l}
	}
	for _, tc := range []struct {
		spec string
		b, l int
		want DecodeKernel
	}{
		{"fp16", 1, 8192, DecodeWGMMA},
		{"fp16", 128, 8192, DecodeWGMMA},
		{"bf16", 16, 32768, DecodeWGMMA},
		{"int4:kt128", 1, 8192, DecodeWGMMA},
		{"int4:kt128", 1, 32768, DecodeMMA}, // v2.7: mma.sync past one sequence of 8K
		{"int4:kt128", 128, 8192, DecodeMMA},
		{"int8", 1, 8192, DecodeWGMMA},
		{"int8", 1, 131072, DecodeMMA}, // a single long sequence
		{"int8", 16, 32768, DecodeWGMMA},
		{"int4", 1, 8192, DecodeMMA}, // keys per channel
		{"int4", 128, 8192, DecodeMMA},
		{"int2", 8, 32768, DecodeMMA},
		{"k4v2", 64, 8192, DecodeMMA},
		{"int4:kt32:v32", 1, 8192, DecodeMMA}, // value groups under 64 channels: wgmma cannot read it
		{"int4:kc32:v32", 1, 8192, DecodeMMA}, // key groups under 64 tokens
		{"fp16:res96", 1, 8192, DecodeMMA},    // blocks of 96 tokens: not whole 64-token tiles
	} {
		lay, err := LayoutFor(kv.MustResolve(tc.spec, 128).WithOrder(kv.MMA))
		if err != nil {
			t.Fatal(err)
		}
		if got := pickDecode(9, 0, lay, shape(tc.b, tc.l)); got != tc.want {
			t.Errorf("%s %dx%d on sm_90: picked %v, want %v", tc.spec, tc.b, tc.l, got, tc.want)
		}
		if got := pickDecode(8, 0, lay, shape(tc.b, tc.l)); got != DecodeMMA {
			t.Errorf("%s on sm_80: picked %v, want mma (wgmma is Hopper-only)", tc.spec, got)
		}
	}
	lay, err := LayoutFor(kv.MustResolve("int4:kt32:v32", 128).WithOrder(kv.MMA))
	if err != nil {
		t.Fatal(err)
	}
	if err := wgmmaSupports(9, 0, lay); err == nil || !strings.Contains(err.Error(), "--kernel mma") {
		t.Errorf("wgmmaSupports(v32) = %v, want an error that points to --kernel mma", err)
	}
}

// TestDescribeDecode checks the kernel line of 'bitdecode inspect kv'.
func TestDescribeDecode(t *testing.T) {
	for spec, want := range map[string]string{
		"int4":           "mma.sync (decode_mma.cu) on every GPU: on Hopper it measured faster",
		"int4:kt128":     "on Hopper wgmma+TMA",
		"int4:kt32:v32":  "needs value groups of a multiple of 64 channels",
		"fp8e4m3":        "no GPU decode kernel: no GPU decode kernel reads fp8e4m3",
		"bw:h20:m40:l40": "bit planes",
	} {
		if got := DescribeDecode(kv.MustResolve(spec, 128)); !strings.Contains(got, want) {
			t.Errorf("DescribeDecode(%s) = %q, want it to contain %q", spec, got, want)
		}
	}
}

// TestDecodeTiles checks the per-format tile and register-cap defaults of
// both tensor-core kernels against the H100 sweeps they come from
// (docs/perf/decode-attention.md v2.3, v2.6, v3.0b).
func TestDecodeTiles(t *testing.T) {
	for _, tc := range []struct {
		spec          string
		d             int
		mt, minB, wgB int
	}{
		{"fp16", 128, 1, 1, 3},
		{"int8", 128, 2, 1, 2},
		{"int4", 128, 4, 1, 3},
		{"int4:kt128", 128, 4, 1, 3},
		{"k4v2", 128, 4, 1, 3}, // 5 groups by the budget, rounded down to a power of two
		{"int2", 128, 8, 1, 3}, // v2.7: the full budget, registers uncapped
		{"int2", 64, 8, 1, 3},  // the budget allows 16, the cap is 8
		{"int4", 256, 2, 1, 1}, // D = 256: the wgmma kernel runs one CTA per SM
		{"int8", 64, 4, 1, 2},
	} {
		l, err := LayoutFor(kv.MustResolve(tc.spec, tc.d).WithOrder(kv.MMA))
		if err != nil {
			t.Fatalf("%s D=%d: %v", tc.spec, tc.d, err)
		}
		mt, minB := mmaTile(l)
		if mt != tc.mt || minB != tc.minB {
			t.Errorf("%s D=%d: mmaTile = MT %d, %d CTAs per SM; want MT %d, %d", tc.spec, tc.d, mt, minB, tc.mt, tc.minB)
		}
		if got := wgmmaMinB(l); got != tc.wgB {
			t.Errorf("%s D=%d: wgmmaMinB = %d, want %d", tc.spec, tc.d, got, tc.wgB)
		}
	}
}

// TestPadHeadDim: the head dim a model runs at on the GPU is the smallest
// of HeadDims that holds it (model.Config.PadHeads pads to it).
func TestPadHeadDim(t *testing.T) {
	for _, c := range []struct {
		d, want int
		ok      bool
	}{{32, 64, true}, {64, 64, true}, {80, 128, true}, {96, 128, true}, {112, 128, true}, {128, 128, true},
		{160, 256, true}, {256, 256, true}, {272, 272, false}} {
		if got, ok := PadHeadDim(c.d); got != c.want || ok != c.ok {
			t.Errorf("PadHeadDim(%d) = %d, %v; want %d, %v", c.d, got, ok, c.want, c.ok)
		}
	}
}

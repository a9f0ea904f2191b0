package kernels_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

// softcapTanhULPs bounds the error of a soft-capped score c·tanh(s/c) as the
// kernels compute it (bitdecode.cuh's softcapScore, in log2 units: s·(1/c')
// rounded, CUDA's tanhf within 2 ulp, the product by c' rounded), in units
// of eps32·c: 2 for tanhf, 1 for each rounding, 1 for 1/c' and c' = c·log2(e)
// as float32 literals, doubled for margin.
const softcapTanhULPs = 10

// softcapTol is the output bound a soft-cap c adds to kvtest.DecodeTol's:
// each score moves by at most softcapTanhULPs·eps32·c (its own rounding;
// tanh's slope is at most 1, so the scores' errors before it do not grow),
// counted as DecodeTol counts a score's error (2.5 times, times max |V|).
func softcapTol(c float32, st attn.RefStats) float64 {
	const eps32 = 1.0 / (1 << 23)
	return st.MaxAbsV * 2.5 * softcapTanhULPs * eps32 * float64(c)
}

// softcapMoved returns how far case c's cap moves the float64 reference:
// the largest over rows of max |want - want without the cap| over the
// row's tolerance (DecodeTol plus softcapTol), so that a test can require
// the cap to matter at the inputs it checks.
func softcapMoved(t *testing.T, c gpuCase, f kv.Format, st attn.RefStats, q []float32, seqs []*attn.Seq, want []float32) float64 {
	t.Helper()
	plain := make([]float32, len(want))
	if _, err := attn.Reference(plain, q, seqs, attn.Params{Format: f, Shape: c.sh, Tq: c.tq, Window: c.window}); err != nil {
		t.Fatal(err)
	}
	d, moved := c.sh.D, 0.0
	for row := 0; row < len(want)/d; row++ {
		tol := kvtest.DecodeTol(f, st, d, row, c.kernel != kernels.DecodeV1) + softcapTol(c.softcap, st)
		for ch := 0; ch < d; ch++ {
			moved = max(moved, math.Abs(float64(want[row*d+ch]-plain[row*d+ch]))/tol)
		}
	}
	return moved
}

// TestGPUDecodeSoftcapMatchesReference checks the attention soft-cap
// (DecodeShape.Softcap, session 23: c·tanh(s/c) on each scaled score before
// the mask and the softmax) in every decode kernel (decode_mma.cu,
// decode.cu's v1, decode_wgmma.cu) against attn.Reference with the same
// cap, in float64: fp16, bf16, int8, int4 (KC and KT, value groups), int2
// (KC, value groups) and k4v2; groups 1 and 4, head dims 64, 128, 256; Tq 1
// (decode), 5 and 37 (prefill chunks: the paged caches' prefill runs these
// kernels at Tq = the chunk), with a sliding window in one case; caps 1.5
// and 4 (Gemma 2's 50 barely moves random scores). Each kernel must see
// the cap move the reference by more than 4 tolerances somewhere, so a
// kernel that ignored the cap would fail.
func TestGPUDecodeSoftcapMatchesReference(t *testing.T) {
	for _, k := range []kernels.DecodeKernel{kernels.DecodeMMA, kernels.DecodeV1, kernels.DecodeWGMMA} {
		t.Run(k.String(), func(t *testing.T) {
			device(t)
			r := rand.New(rand.NewPCG(61, 62))
			specs := []string{"fp16", "bf16", "int8", "int4", "int4:kt32:v32", "int2", "int2:kc32:v32", "k4v2"}
			shapes := []attn.Shape{{Hq: 8, Hkv: 8, D: 128}, {Hq: 16, Hkv: 4, D: 128}, {Hq: 8, Hkv: 2, D: 64}, {Hq: 8, Hkv: 2, D: 256}}
			caps := []float32{1.5, 4}
			if testing.Short() {
				specs = []string{"int4", "int2", "fp16"}
			}
			moved := 0.0
			for i, spec := range specs {
				if k == kernels.DecodeV1 && spec == "bf16" {
					continue // v1 reads fp16 blocks only
				}
				for j, sh := range []attn.Shape{shapes[i%2], shapes[2+i%2]} {
					if k == kernels.DecodeWGMMA && !wgmmaReads(t, spec, sh.D) {
						continue
					}
					nr := kv.MustParseSpec(spec).Residual
					lens := []int{3*nr + 7, 42, 1000} // each at least the largest Tq
					c := caps[(i+j)%len(caps)]
					for _, tq := range []int{1, 5, 37} {
						window := 0
						if tq == 5 && j == 1 {
							window = nr + 9
						}
						runCase(t, r, gpuCase{kernel: k, spec: spec, sh: sh, lens: lens, tq: tq, window: window, softcap: c, moved: &moved})
					}
					t.Logf("%v %s %+v cap %g: Tq 1, 5, 37 within the bound (moved so far %.3g tolerances)", k, spec, sh, c, moved)
				}
			}
			if moved < 4 {
				t.Errorf("%v: the caps moved the reference by at most %.3g tolerances: the test does not see the cap", k, moved)
			}
			t.Logf("%v: the caps moved the reference by up to %.3g tolerances", k, moved)
		})
	}
}

// TestGPUDecodeSoftcapShape: a negative, NaN or infinite cap is refused by
// the planner, and a launch whose shape's cap is not the plan's (the cap
// is compiled into the plan's kernels) is refused by LaunchShape.
func TestGPUDecodeSoftcapShape(t *testing.T) {
	d := device(t)
	lay, err := kernels.LayoutFor(kv.MustResolve("int4", 128).WithOrder(kv.MMA))
	if err != nil {
		t.Fatal(err)
	}
	s := kernels.DecodeShape{B: 1, Hq: 8, Hkv: 2, Tq: 1, MaxBlocks: 4, MaxL: 4 * lay.Nr}
	for _, c := range []float32{-1, float32(math.NaN()), float32(math.Inf(1))} {
		bad := s
		bad.Softcap = c
		if p, err := kernels.PlanDecode(d, kernels.DecodeMMA, lay, bad); err == nil || !strings.Contains(err.Error(), "soft-cap") {
			if p != nil {
				p.Close()
			}
			t.Errorf("PlanDecode with soft-cap %v: %v, want a refusal naming the soft-cap", c, err)
		}
	}
	s.Softcap = 2
	p, err := kernels.PlanDecode(d, kernels.DecodeMMA, lay, s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	off := s
	off.Softcap = 0
	err = d.Do(func(c *cuda.Ctx) error { return p.LaunchShape(c, d.Stream(), kernels.DecodeBuffers{}, off, 0) })
	if err == nil || !strings.Contains(err.Error(), "does not fit the plan") {
		t.Errorf("LaunchShape without the plan's cap: %v, want a refusal", err)
	}
}

// TestGPUSoftcapRows checks sample.cu's softcap_rows (the final logit
// soft-cap) against c·tanh(x/c) in float64 within softcapTanhULPs·eps32·c,
// over logits from small to far past the cap, ±0, ±Inf (±c) and NaN (kept),
// at an odd count; and that argmax_rows then picks model.Argmax's token of
// the row capped as the host caps it (c·tanh(x/c) in float64, rounded
// once: model's softcapLogits), also where the cap makes two
// distinct logits equal: the greedy token equals the CPU's.
func TestGPUSoftcapRows(t *testing.T) {
	d := device(t)
	k, err := kernels.LoadSample(d)
	if err != nil {
		t.Fatal(err)
	}
	const c = float32(3)
	const eps32 = 1.0 / (1 << 23)
	r := rand.New(rand.NewPCG(71, 72))
	const V = 1001
	x := make([]float32, 3*V)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(4))-1))
	}
	x[1], x[2], x[3], x[4], x[5] = 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())
	// Rows 1 and 2 are compared with the host's pick: logits of N(0, 1)
	// (no saturation), and in row 1 two logits deep past the cap's float32
	// saturation (c·tanh is c for both), the larger one later: the capped
	// row's first maximum wins. (Row 0's values near the saturation may
	// round to c on one side and not the other: its elements alone are
	// compared.)
	for i := V; i < 3*V; i++ {
		x[i] = float32(r.NormFloat64())
	}
	x[V+10], x[V+500] = 40, 60
	buf, err := d.Alloc(4 * len(x))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(buf)
	tok, err := d.Alloc(4 * 3)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(tok)
	if err := d.HtoD(buf, cuda.Bytes(x)); err != nil {
		t.Fatal(err)
	}
	err = d.Do(func(cx *cuda.Ctx) error {
		if err := k.SoftcapRows(cx, d.Stream(), buf, len(x), c); err != nil {
			return err
		}
		if err := k.ArgmaxRows(cx, d.Stream(), tok, buf, 3, V); err != nil {
			return err
		}
		return cx.SyncStream(d.Stream())
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(x))
	if err := d.DtoH(cuda.Bytes(got), buf); err != nil {
		t.Fatal(err)
	}
	toks := make([]int32, 3)
	if err := d.DtoH(cuda.Bytes(toks), tok); err != nil {
		t.Fatal(err)
	}
	host := make([]float32, len(x))
	for i, v := range x {
		host[i] = float32(float64(c) * math.Tanh(float64(v)/float64(c)))
	}
	for i, v := range x {
		want := float64(c) * math.Tanh(float64(v)/float64(c))
		g := float64(got[i])
		if math.IsNaN(want) {
			if !math.IsNaN(g) {
				t.Fatalf("element %d (%g): got %g, want NaN", i, v, g)
			}
			continue
		}
		if math.Abs(g-want) > softcapTanhULPs*eps32*float64(c) {
			t.Fatalf("element %d (%g): got %g, want %g (tol %.3g)", i, v, g, want, softcapTanhULPs*eps32*float64(c))
		}
	}
	for row := 1; row < 3; row++ { // row 0's saturated values may round to c on one side only
		if want := model.Argmax(host[row*V : (row+1)*V]); toks[row] != int32(want) {
			t.Errorf("row %d: the device's greedy token of the capped logits is %d, the host's %d", row, toks[row], want)
		}
	}
	if toks[1] != 10 {
		t.Errorf("row 1: token %d, want 10 (two saturated logits: the first)", toks[1])
	}
	if err := k.SoftcapRows(nil, d.Stream(), buf, len(x), 0); err == nil {
		t.Error("SoftcapRows with cap 0: no error")
	}
}

package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/wq"
)

// moeqCase is one shape of TestMixQuantExperts.
type moeqCase struct {
	T, H, IE, E, k int
	elem           wq.Elem
	shared         bool
}

// TestMixQuantExperts holds MixExperts over packed low-bit experts
// (the default; moe.go's mixQuantExperts: kernels.GEMVQMoE's indexed
// GEMVs) to the host
// path's arithmetic, bit for bit: for each token and chosen slot, Linear of
// its row over the expert's gate and up (the one-row GEMV the backend runs
// for that weight, itself held to a float64 reference by qlinear_test.go),
// SwiGLU, Linear over down, and the weighted sum from 0 in slot order
// (model.moeHost's). Each expert is quantized from its own random weights
// (its own scales, so a wrong params table shows). Shapes: widths under
// 2048 rows (v3, wq's layout), 2048 rows and more (v6.1, the tiled layout),
// both in one layer (Qwen3-like: gate/up v3, down v6.1), int8, int4 and
// int3; T 1-3; and a backend with GEMVQWQ (int4 of 2048 rows in wq's
// layout: v5.2). Outputs and act are poisoned first.
func TestMixQuantExperts(t *testing.T) {
	g := packedBackend(t, gpu.Options{})
	wqb := packedBackend(t, gpu.Options{GEMVQWQ: true})
	// With Options.NoMoEPacked, LoadExperts refuses packed experts.
	d := packedBackend(t, gpu.Options{NoMoEPacked: true})
	dw, err := d.LoadRandomQuant("expert", []int{128, 256}, wq.Int8, 128, 1, wq.DEC{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.FreeWeight(dw)
	if ex, err := d.LoadExperts([]backend.Weight{dw}, []backend.Weight{dw}, []backend.Weight{dw}, 1); err == nil {
		d.FreeExperts(ex)
		t.Fatal("LoadExperts took packed experts with Options.NoMoEPacked")
	}
	cases := []moeqCase{
		{T: 1, H: 256, IE: 128, E: 8, k: 2, elem: wq.Int8},
		{T: 3, H: 256, IE: 128, E: 8, k: 2, elem: wq.Int4, shared: true},
		{T: 2, H: 256, IE: 384, E: 6, k: 3, elem: wq.Int3},
		{T: 2, H: 2048, IE: 768, E: 16, k: 4, elem: wq.Int4},
		{T: 1, H: 2048, IE: 2048, E: 4, k: 2, elem: wq.Int4},
		{T: 2, H: 2048, IE: 2048, E: 4, k: 2, elem: wq.Int8},
		{T: 1, H: 2048, IE: 2048, E: 4, k: 2, elem: wq.Int3},
	}
	r := rand.New(rand.NewPCG(7, 11))
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v-T%d-H%d-IE%d-E%d-k%d", c.elem, c.T, c.H, c.IE, c.E, c.k), func(t *testing.T) {
			checkMixQuantExperts(t, g, r, c)
		})
	}
	t.Run("wq-layout-v5.2", func(t *testing.T) {
		checkMixQuantExperts(t, wqb, r, moeqCase{T: 2, H: 2048, IE: 2048, E: 4, k: 2, elem: wq.Int4})
	})
}

// packedBackend opens a CUDA backend with o (packed experts routed on the
// device unless o.NoMoEPacked; closed at the test's end), skipping without
// a device.
func packedBackend(t *testing.T, o gpu.Options) *gpu.Backend {
	t.Helper()
	gpuBackend(t) // skips without a device
	g, err := gpu.Open(0, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// checkMixQuantExperts runs one case of TestMixQuantExperts on g.
func checkMixQuantExperts(t *testing.T, g *gpu.Backend, r *rand.Rand, c moeqCase) {
	T, H, IE, E, k := c.T, c.H, c.IE, c.E, c.k
	quant := func(name string, N, K int, std float64) backend.Weight {
		w := make([]float32, N*K)
		for i := range w {
			w[i] = float32(std * r.NormFloat64())
		}
		m, err := wq.Quantize(c.elem, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		qw, err := g.LoadQuantWeight(name, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.FreeWeight(qw) })
		return qw
	}
	gate, up, down := make([]backend.Weight, E), make([]backend.Weight, E), make([]backend.Weight, E)
	for e := range E {
		std := 0.02 * (1 + float64(e)/4)
		gate[e], up[e], down[e] = quant("gate", IE, H, std), quant("up", IE, H, std), quant("down", H, IE, std)
	}
	ex, err := g.LoadExperts(gate, up, down, k)
	if err != nil {
		t.Fatal(err)
	}
	defer g.FreeExperts(ex)
	if mr, ok := ex.(backend.ExpertRows); !ok || mr.MaxRows() < T {
		t.Fatalf("packed experts: MaxRows %v (implemented: %v), want >= %d", mr, ok, T)
	}
	alloc := func(dt backend.DType, shape ...int) backend.Tensor {
		x, err := g.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Free(x) })
		return x
	}
	upload := func(dst backend.Tensor, v []float32) {
		if err := g.Upload(dst, v); err != nil {
			t.Fatal(err)
		}
	}
	download := func(src backend.Tensor, n int) []float32 {
		v := make([]float32, n)
		if err := g.Download(v, src); err != nil {
			t.Fatal(err)
		}
		return v
	}
	randn := func(n int, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(std * r.NormFloat64())
		}
		return v
	}
	xv, lv := randn(T*H, 1), randn(T*E, 2)
	x, lg := alloc(backend.F32, T, H), alloc(backend.F32, T, E)
	idx, w, act, out := alloc(backend.I32, T, k), alloc(backend.F32, T, k), alloc(backend.F32, T*k, IE), alloc(backend.F32, T, H)
	upload(x, xv)
	upload(lg, lv)
	poison := make([]float32, T*k*IE)
	for i := range poison {
		poison[i] = float32(math.NaN())
	}
	upload(act, poison)
	upload(out, poison[:T*H])
	var shared, sg backend.Tensor
	var sv, sgv []float32
	if c.shared {
		sv, sgv = randn(T*H, 0.1), randn(T, 1)
		shared, sg = alloc(backend.F32, T, H), alloc(backend.F32, T, 1)
		upload(shared, sv)
		upload(sg, sgv)
	}
	g.RouteExperts(idx, w, lg, true)
	g.MixExperts(out, x, ex, idx, w, act, shared, sg)
	got := download(out, T*H)
	iv := make([]int32, T*k)
	if err := g.DownloadInt32(iv, idx); err != nil {
		t.Fatal(err)
	}
	wv := download(w, T*k)
	// The host path: each (token, slot) through the one-row Linear.
	x1, g1, u1, a1, y1 := alloc(backend.F32, 1, H), alloc(backend.F32, 1, IE), alloc(backend.F32, 1, IE), alloc(backend.F32, 1, IE), alloc(backend.F32, 1, H)
	want := make([]float32, T*H)
	for tk := range T {
		upload(x1, xv[tk*H:(tk+1)*H])
		acc := want[tk*H : (tk+1)*H]
		prev := int32(-1)
		for j := range k {
			e := iv[tk*k+j]
			if e <= prev || e >= int32(E) {
				t.Fatalf("token %d: experts %v, want increasing indices in [0, %d)", tk, iv[tk*k:(tk+1)*k], E)
			}
			prev = e
			g.Linear(g1, x1, gate[e], nil)
			g.Linear(u1, x1, up[e], nil)
			g.SwiGLU(a1, g1, u1)
			g.Linear(y1, a1, down[e], nil)
			y := download(y1, H)
			for i, v := range y {
				acc[i] += float32(v * wv[tk*k+j])
			}
		}
	}
	if c.shared {
		// sigmoid in float32 as moe_combine (the host path's is float64:
		// the shared term is held to a bound, the experts' sum to the bit).
		for tk := range T {
			gs := float32(1 / (1 + math.Exp(-float64(sgv[tk]))))
			for i := range H {
				d := float64(got[tk*H+i]) - float64(want[tk*H+i]+float32(gs*sv[tk*H+i]))
				if !(math.Abs(d) <= 1e-6*(1+math.Abs(float64(want[tk*H+i])))) {
					t.Fatalf("token %d, out[%d] = %g, want %g + %g·%g (±1e-6)", tk, i, got[tk*H+i], want[tk*H+i], gs, sv[tk*H+i])
				}
			}
		}
	} else {
		sameBits(t, "MixExperts over packed experts against one-row Linear per (token, slot)", got, want)
	}
	var n2 float64
	for _, v := range got {
		n2 += float64(v) * float64(v)
	}
	if !(n2 > 0) {
		t.Fatalf("output norm² %g", n2)
	}
	t.Logf("T %d: experts %v, ‖out‖ %.3g", T, iv, math.Sqrt(n2))
}

package gpu_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

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

// TestMixQuantExpertsTiming times one sparse layer at T = 1 over int4
// experts (BITDECODE_MOE_TIMING=1): the device path (RouteExperts and
// MixExperts: the indexed GEMVs, replayed as a graph) against the host path
// model.moeHost takes without it (the router's logits downloaded, the top-k
// on the host, each chosen expert's row gathered, its gate/up, SwiGLU and
// down, its output downloaded, the sum uploaded), 8 layers of their own
// random experts per flush (Mixtral-8x7B, Qwen3-30B-A3B), the two
// alternated; each path twice gives the same bits, and the two agree
// within the routing weights' rounding.
func TestMixQuantExpertsTiming(t *testing.T) {
	if os.Getenv("BITDECODE_MOE_TIMING") == "" {
		t.Skip("set BITDECODE_MOE_TIMING=1 to time the mixture")
	}
	g := packedBackend(t, gpu.Options{})
	const layers = 8
	ceiling := func(when string) {
		bw, err := g.Device().ProbeBandwidth()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("read ceiling %s: %.0f GB/s (median of %d runs over %d MiB; %.3f-%.3f ms)", when, bw.GBps, bw.Runs, bw.Bytes>>20, bw.MinMS, bw.MaxMS)
	}
	ceiling("before")
	defer ceiling("after")
	alloc := func(dt backend.DType, shape ...int) backend.Tensor {
		x, err := g.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, sh := range []struct {
		name        string
		H, IE, E, k int
	}{{"mixtral-8x7b", 4096, 14336, 8, 2}, {"qwen3-30b-a3b", 2048, 768, 128, 8}} {
		const T = 1
		var exs []backend.Experts
		var ws [][3][]backend.Weight
		for l := range layers {
			var lw [3][]backend.Weight
			for i, shape := range [][]int{{sh.IE, sh.H}, {sh.IE, sh.H}, {sh.H, sh.IE}} {
				lw[i] = make([]backend.Weight, sh.E)
				for e := range sh.E {
					var err error
					if lw[i][e], err = g.LoadRandomQuant("expert", shape, wq.Int4, 128, uint64(1000*l+3*e+i+1), wq.DEC{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			ex, err := g.LoadExperts(lw[0], lw[1], lw[2], sh.k)
			if err != nil {
				t.Fatal(err)
			}
			exs, ws = append(exs, ex), append(ws, lw)
		}
		r := rand.New(rand.NewPCG(1, 2))
		xv, lv := make([]float32, T*sh.H), make([]float32, T*sh.E)
		for i := range xv {
			xv[i] = float32(r.NormFloat64())
		}
		for i := range lv {
			lv[i] = float32(r.NormFloat64())
		}
		x, lg := alloc(backend.F32, T, sh.H), alloc(backend.F32, T, sh.E)
		idx, w, act, out := alloc(backend.I32, T, sh.k), alloc(backend.F32, T, sh.k), alloc(backend.F32, T*sh.k, sh.IE), alloc(backend.F32, T, sh.H)
		ri, gx, g1, u1, y1 := alloc(backend.I32, 1), alloc(backend.F32, 1, sh.H), alloc(backend.F32, 1, sh.IE), alloc(backend.F32, 1, sh.IE), alloc(backend.F32, 1, sh.H)
		if err := g.Upload(x, xv); err != nil {
			t.Fatal(err)
		}
		if err := g.Upload(lg, lv); err != nil {
			t.Fatal(err)
		}
		device := func() {
			for _, ex := range exs {
				g.RouteExperts(idx, w, lg, true)
				g.MixExperts(out, x, ex, idx, w, act, nil, nil)
			}
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		hl, hy, acc := make([]float32, sh.E), make([]float32, sh.H), make([]float32, sh.H)
		host := func() {
			for _, lw := range ws {
				if err := g.Download(hl, lg); err != nil {
					t.Fatal(err)
				}
				chosen, wts := topK(hl, sh.k)
				clear(acc)
				for j, e := range chosen {
					if err := g.UploadInt32(ri, []int32{0}); err != nil {
						t.Fatal(err)
					}
					g.Rows(gx, x, ri)
					g.LinearGroup([]backend.Tensor{g1, u1}, gx, []backend.Weight{lw[0][e], lw[1][e]}, nil)
					g.SwiGLU(g1, g1, u1)
					g.Linear(y1, g1, lw[2][e], nil)
					if err := g.Download(hy, y1); err != nil {
						t.Fatal(err)
					}
					for i, v := range hy {
						acc[i] += float32(v * wts[j])
					}
				}
				if err := g.Upload(out, acc); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		paths := []struct {
			name string
			run  func()
		}{{"device", device}, {"host", host}, {"device", device}, {"host", host}}
		res := make([][]float32, len(paths))
		for pi, p := range paths {
			for range 3 {
				p.run()
			}
			const reps = 50
			start := time.Now()
			for range reps {
				p.run()
			}
			per := time.Since(start) / reps / layers
			res[pi] = make([]float32, T*sh.H)
			if err := g.Download(res[pi], out); err != nil {
				t.Fatal(err)
			}
			bytes := float64(sh.k) * 3 * float64(sh.IE) * float64(sh.H) * (0.5 + 4.0/128)
			t.Logf("%s T %d int4 %s: %v a layer (graphs %+v); the chosen experts' codes and params %.1f MB, %.0f GB/s",
				sh.name, T, p.name, per, g.GraphStats(), bytes/1e6, bytes/per.Seconds()/1e9)
		}
		// The paths' experts give the same bits (TestMixQuantExperts); the
		// routing weights may not (the host's float64 exp, the device's
		// expf: an ulp of w, ~6e-8 of the output).
		sameBits(t, sh.name+": device twice", res[2], res[0])
		sameBits(t, sh.name+": host twice", res[3], res[1])
		var dn, yn float64
		for i := range res[0] {
			d := float64(res[1][i]) - float64(res[0][i])
			dn, yn = dn+d*d, yn+float64(res[0][i])*float64(res[0][i])
		}
		if rel := math.Sqrt(dn / yn); !(rel <= 1e-6) {
			t.Fatalf("%s: ‖host − device‖/‖device‖ = %.3g", sh.name, rel)
		} else {
			t.Logf("%s: ‖host − device‖/‖device‖ = %.2e", sh.name, rel)
		}
		for _, ex := range exs {
			g.FreeExperts(ex)
		}
		for _, lw := range ws {
			for _, ps := range lw {
				for _, w := range ps {
					g.FreeWeight(w)
				}
			}
		}
		for _, tn := range []backend.Tensor{x, lg, idx, w, act, out, ri, gx, g1, u1, y1} {
			g.Free(tn)
		}
	}
}

// topK is model.RouteTokens for one token: the k largest softmax
// probabilities (equal values: the lower index), renormalised, in expert
// order (MixExperts's slot order).
func topK(logits []float32, k int) ([]int, []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	p := make([]float32, len(logits))
	var sum float32
	for i, v := range logits {
		p[i] = float32(math.Exp(float64(v - mx)))
		sum += p[i]
	}
	order := make([]int, len(p))
	for i := range p {
		p[i] /= sum
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p[b], p[a]) })
	var s float32
	for _, e := range order[:k] {
		s += p[e] // in descending order, as RouteTokens
	}
	chosen := slices.Clone(order[:k])
	slices.Sort(chosen)
	w := make([]float32, k)
	for j, e := range chosen {
		w[j] = p[e] / s
	}
	return chosen, w
}

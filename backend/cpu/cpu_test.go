package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/half"
)

// randVec returns n values of about unit size with a few x20 outliers, the
// kind of data activations hold.
func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if r.IntN(50) == 0 {
			v[i] *= 20
		}
	}
	return v
}

// f32Bytes encodes v little-endian.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// mustTensor allocates an F32 tensor holding v.
func mustTensor(t *testing.T, b *Backend, v []float32, shape ...int) backend.Tensor {
	t.Helper()
	x, err := b.Alloc(backend.F32, shape...)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := b.Upload(x, v); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// poisoned allocates an F32 tensor filled with NaN.
func poisoned(t *testing.T, b *Backend, shape ...int) backend.Tensor {
	t.Helper()
	n := backend.NumElements(shape)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return mustTensor(t, b, v, shape...)
}

func mustInt32(t *testing.T, b *Backend, v []int32) backend.Tensor {
	t.Helper()
	x, err := b.Alloc(backend.I32, len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UploadInt32(x, v); err != nil {
		t.Fatal(err)
	}
	return x
}

func mustWeight(t *testing.T, b *Backend, name string, v []float32, shape ...int) backend.Weight {
	t.Helper()
	w, err := b.LoadWeight(name, backend.F32, shape, f32Bytes(v))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func download(t *testing.T, b *Backend, x backend.Tensor) []float32 {
	t.Helper()
	out := make([]float32, backend.NumElements(x.Shape()))
	if err := b.Download(out, x); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	return out
}

// linearRef is the float64 reference of Linear.
func linearRef(x, w, bias []float32, T, K, N int) []float64 {
	y := make([]float64, T*N)
	for t := range T {
		for n := range N {
			var s float64
			for k := range K {
				s += float64(x[t*K+k]) * float64(w[n*K+k])
			}
			if bias != nil {
				s += float64(bias[n])
			}
			y[t*N+n] = s
		}
	}
	return y
}

// linearTol is the error bound of a float32 dot product of K terms summed in
// order: each partial sum rounds with relative error 2⁻²⁴, so the error is at
// most K·2⁻²⁴·Σ|x_k·w_k| (plus one rounding of the bias add).
func linearTol(x, w []float32, t, n, K int) float64 {
	var s float64
	for k := range K {
		s += math.Abs(float64(x[t*K+k]) * float64(w[n*K+k]))
	}
	return float64(K+2)*0x1p-24*s + 1e-30
}

func TestLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ T, K, N int }{
		{1, 1, 1}, {1, 7, 5}, {1, 512, 1536}, {3, 33, 70}, {65, 64, 33}, {130, 17, 129}, {2, 1536, 4},
	} {
		for _, withBias := range []bool{false, true} {
			name := fmt.Sprintf("T%d_K%d_N%d_bias%v", tc.T, tc.K, tc.N, withBias)
			t.Run(name, func(t *testing.T) {
				b := New(3)
				xv := randVec(r, tc.T*tc.K)
				wv := randVec(r, tc.N*tc.K)
				var bv []float32
				var bw backend.Weight
				if withBias {
					bv = randVec(r, tc.N)
					bw = mustWeight(t, b, "bias", bv, tc.N)
				}
				x := mustTensor(t, b, xv, tc.T, tc.K)
				w := mustWeight(t, b, "w", wv, tc.N, tc.K)
				y := poisoned(t, b, tc.T, tc.N)
				b.Linear(y, x, w, bw)
				got := download(t, b, y)
				want := linearRef(xv, wv, bv, tc.T, tc.K, tc.N)
				for i := range got {
					tol := linearTol(xv, wv, i/tc.N, i%tc.N, tc.K)
					if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol) {
						t.Fatalf("y[%d,%d] = %v, want %v (tol %g)", i/tc.N, i%tc.N, got[i], want[i], tol)
					}
				}
			})
		}
	}
}

// TestLinearDeterministic checks that Linear's result is bitwise the same
// for every thread count and repeated runs, and that a token's output does
// not depend on the other tokens of its batch.
func TestLinearDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const T, K, N = 70, 300, 97
	xv := randVec(r, T*K)
	wv := randVec(r, N*K)
	var ref []float32
	for _, threads := range []int{1, 2, 3, 8} {
		for rep := range 2 {
			b := New(threads)
			x := mustTensor(t, b, xv, T, K)
			w := mustWeight(t, b, "w", wv, N, K)
			y := poisoned(t, b, T, N)
			b.Linear(y, x, w, nil)
			got := download(t, b, y)
			if ref == nil {
				ref = got
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("threads %d run %d: y[%d] = %v, want bitwise %v", threads, rep, i, got[i], ref[i])
				}
			}
		}
	}
	// Batch invariance: token 37 alone gives the same bits.
	b := New(2)
	const tok = 37
	x := mustTensor(t, b, xv[tok*K:(tok+1)*K], 1, K)
	w := mustWeight(t, b, "w", wv, N, K)
	y := poisoned(t, b, 1, N)
	b.Linear(y, x, w, nil)
	got := download(t, b, y)
	for n := range N {
		if math.Float32bits(got[n]) != math.Float32bits(ref[tok*N+n]) {
			t.Fatalf("token %d alone: y[%d] = %v, in batch %v", tok, n, got[n], ref[tok*N+n])
		}
	}
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ T, C, G int }{{1, 512, 512}, {5, 384, 128}, {3, 6, 3}, {40, 1024, 1024}} {
		b := New(2)
		xv := randVec(r, tc.T*tc.C)
		wv := randVec(r, tc.G)
		const eps = 1e-5
		x := mustTensor(t, b, xv, tc.T, tc.C)
		w := mustWeight(t, b, "norm", wv, tc.G)
		y := poisoned(t, b, tc.T, tc.C)
		b.RMSNorm(y, x, w, eps)
		got := download(t, b, y)
		for g := range tc.T * tc.C / tc.G {
			var ss float64
			for i := range tc.G {
				v := float64(xv[g*tc.G+i])
				ss += v * v
			}
			rr := 1 / math.Sqrt(ss/float64(tc.G)+eps)
			for i := range tc.G {
				want := float64(wv[i]) * float64(xv[g*tc.G+i]) * rr
				// A few float32 roundings: mean, rsqrt, two products.
				if d := math.Abs(float64(got[g*tc.G+i]) - want); !(d <= 4*0x1p-24*math.Abs(want)+1e-30) {
					t.Fatalf("T%d C%d G%d: y[%d] = %v, want %v", tc.T, tc.C, tc.G, g*tc.G+i, got[g*tc.G+i], want)
				}
			}
		}
		// In place gives the same bits.
		b.RMSNorm(x, x, w, eps)
		inplace := download(t, b, x)
		for i := range got {
			if math.Float32bits(inplace[i]) != math.Float32bits(got[i]) {
				t.Fatalf("in place differs at %d", i)
			}
		}
	}
}

func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const T, H, D = 5, 3, 8
	xv := randVec(r, T*H*D)
	inv := make([]float32, D/2)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(10000, float64(2*i)/D))
	}
	pos := []int32{0, 1, 7, 100, 4096}
	b := New(2)
	x := mustTensor(t, b, xv, T, H*D)
	b.RoPE(x, mustInt32(t, b, pos), mustWeight(t, b, "inv_freq", inv, D/2))
	got := download(t, b, x)
	for tk := range T {
		for h := range H {
			for i := range D / 2 {
				th := float64(float32(pos[tk]) * inv[i])
				c, s := math.Cos(th), math.Sin(th)
				x1 := float64(xv[tk*H*D+h*D+i])
				x2 := float64(xv[tk*H*D+h*D+i+D/2])
				w1 := x1*c - x2*s
				w2 := x2*c + x1*s
				g1 := float64(got[tk*H*D+h*D+i])
				g2 := float64(got[tk*H*D+h*D+i+D/2])
				tol := 4 * 0x1p-24 * (math.Abs(x1) + math.Abs(x2))
				if math.Abs(g1-w1) > tol || math.Abs(g2-w2) > tol {
					t.Fatalf("t%d h%d i%d: got (%v, %v), want (%v, %v)", tk, h, i, g1, g2, w1, w2)
				}
			}
		}
	}
	// Position 0 is the identity.
	for i := range H * D {
		if got[i] != xv[i] {
			t.Fatalf("position 0 changed x[%d]: %v -> %v", i, xv[i], got[i])
		}
	}
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const T, C = 7, 300
	gv, uv := randVec(r, T*C), randVec(r, T*C)
	b := New(2)
	g := mustTensor(t, b, gv, T, C)
	u := mustTensor(t, b, uv, T, C)
	y := poisoned(t, b, T, C)
	b.SwiGLU(y, g, u)
	got := download(t, b, y)
	for i := range got {
		gg := float64(gv[i])
		want := gg / (1 + math.Exp(-gg)) * float64(uv[i])
		// silu in float64 (TestSiLU: far below a float32 ulp), rounded
		// once, then the float32 product with u.
		if d := math.Abs(float64(got[i]) - want); !(d <= 2*0x1p-24*math.Abs(want)+1e-30) {
			t.Fatalf("SwiGLU[%d] = %v, want %v", i, got[i], want)
		}
	}
	b.GeGLU(y, g, u)
	got = download(t, b, y)
	for i := range got {
		gg := float64(gv[i])
		want := geluTanh64(gg) * float64(uv[i])
		// gelu_tanh in float64 (exp within 2⁻³⁷), rounded once, then the
		// float32 product with u, as SwiGLU.
		if d := math.Abs(float64(got[i]) - want); !(d <= 2*0x1p-24*math.Abs(want)+1e-30) {
			t.Fatalf("GeGLU[%d] = %v, want %v", i, got[i], want)
		}
	}
	b.Scale(y, g, 45.25)
	got = download(t, b, y)
	for i := range got {
		if want := gv[i] * 45.25; got[i] != want {
			t.Fatalf("Scale[%d] = %v, want %v (exact)", i, got[i], want)
		}
	}
	b.Add(y, g, u)
	got = download(t, b, y)
	for i := range got {
		if got[i] != gv[i]+uv[i] {
			t.Fatalf("Add[%d] = %v, want %v", i, got[i], gv[i]+uv[i])
		}
	}
}

func TestGather(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const V, K = 10, 6
	tab := randVec(r, V*K)
	b := New(1)
	w := mustWeight(t, b, "embed", tab, V, K)
	ids := []int32{3, 0, 9, 3}
	y := poisoned(t, b, len(ids), K)
	b.Embedding(y, w, mustInt32(t, b, ids))
	got := download(t, b, y)
	for i, id := range ids {
		for k := range K {
			if got[i*K+k] != tab[int(id)*K+k] {
				t.Fatalf("Embedding row %d col %d = %v, want %v", i, k, got[i*K+k], tab[int(id)*K+k])
			}
		}
	}
	z := poisoned(t, b, 2, K)
	b.Rows(z, y, mustInt32(t, b, []int32{3, 1}))
	gotRows := download(t, b, z)
	for k := range K {
		if gotRows[k] != got[3*K+k] || gotRows[K+k] != got[K+k] {
			t.Fatalf("Rows col %d wrong", k)
		}
	}
}

// TestErrors checks that bad calls record a clear, sticky error that Sync
// reports and clears, and that later ops are skipped meanwhile.
func TestErrors(t *testing.T) {
	b := New(2)
	x := mustTensor(t, b, make([]float32, 6), 2, 3)
	w := mustWeight(t, b, "model.w", make([]float32, 8), 2, 4)
	y := mustTensor(t, b, []float32{1, 2, 3, 4}, 2, 2)
	b.Linear(y, x, w, nil)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "model.w") {
		t.Fatalf("Linear with K mismatch: err = %v, want a shape error naming model.w", err)
	}
	// Skipped while the error is pending: y keeps its values.
	b.Add(y, y, y)
	if err := b.Download(make([]float32, 4), y); err == nil {
		t.Fatal("Download with a pending op error returned nil")
	}
	if err := b.Sync(); err == nil {
		t.Fatal("Sync returned nil with a pending error")
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("second Sync = %v, want nil (cleared)", err)
	}
	if got := download(t, b, y); got[0] != 1 {
		t.Fatalf("op ran while an error was pending: y = %v", got)
	}

	tab := mustWeight(t, b, "embed", make([]float32, 12), 4, 3)
	b.Embedding(x, tab, mustInt32(t, b, []int32{1, 4}))
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "token id 4") {
		t.Fatalf("Embedding of id 4 of 4 rows: err = %v", err)
	}

	other := New(1)
	ox := mustTensor(t, other, make([]float32, 6), 2, 3)
	b.Add(x, x, ox)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "not from this backend") {
		t.Fatalf("foreign tensor: err = %v", err)
	}

	b.Free(y)
	b.Add(y, y, y)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "after Free") {
		t.Fatalf("use after free: err = %v", err)
	}

	for _, tc := range []struct {
		dt    backend.DType
		shape []int
		n     int
	}{
		{backend.F32, []int{2, 3}, 5},
		{backend.BF16, []int{2, 3}, 24},
		{backend.I32, []int{2}, 8},
		{backend.F32, []int{0, 3}, 0},
		{backend.F32, []int{-1}, 0},
		{backend.F32, []int{math.MaxInt / 2, 4}, 0},
	} {
		if _, err := b.LoadWeight("w", tc.dt, tc.shape, make([]byte, tc.n)); err == nil {
			t.Errorf("LoadWeight(%v, %v, %d bytes) succeeded", tc.dt, tc.shape, tc.n)
		}
	}
	if _, err := b.Alloc(backend.F32, 0); err == nil {
		t.Error("Alloc of shape [0] succeeded")
	}
}

func TestLoadWeightDTypes(t *testing.T) {
	vals := []float32{0, 1, -2.5, 3.140625, float32(math.Inf(-1)), 65504, 0x1p-24}
	for _, dt := range []backend.DType{backend.F32, backend.F16, backend.BF16} {
		var data []byte
		for _, v := range vals {
			switch dt {
			case backend.F32:
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
			case backend.F16:
				data = binary.LittleEndian.AppendUint16(data, half.FromFloat32(v))
			case backend.BF16:
				data = binary.LittleEndian.AppendUint16(data, half.BF16FromFloat32(v))
			}
		}
		b := New(1)
		w, err := b.LoadWeight("w", dt, []int{len(vals)}, data)
		if err != nil {
			t.Fatal(err)
		}
		got := w.(*weight).f32
		for i, v := range vals {
			want := v
			switch dt {
			case backend.F16:
				want = half.ToFloat32(half.FromFloat32(v))
			case backend.BF16:
				want = half.BF16ToFloat32(half.BF16FromFloat32(v))
			}
			if got[i] != want {
				t.Errorf("%v: value %d = %v, want %v", dt, i, got[i], want)
			}
		}
	}
}

func TestHalfTensors(t *testing.T) {
	b := New(1)
	for _, dt := range []backend.DType{backend.F16, backend.BF16} {
		x, err := b.Alloc(dt, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Upload(x, []float32{1, 0.1, -3}); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 3)
		if err := b.Download(got, x); err != nil {
			t.Fatal(err)
		}
		if got[0] != 1 || got[2] != -3 || math.Abs(float64(got[1])-0.1) > 1e-3 {
			t.Errorf("%v round trip: %v", dt, got)
		}
		y := mustTensor(t, b, nil, 3)
		b.Add(y, x, x)
		if err := b.Sync(); err == nil {
			t.Errorf("Add on a %v tensor succeeded; want an F32-only error", dt)
		}
	}
}

func BenchmarkLinear(b *testing.B) {
	for _, tc := range []struct{ T, K, N int }{{1, 512, 1536}, {1, 1536, 512}, {1, 512, 8192}, {64, 512, 1536}} {
		b.Run(fmt.Sprintf("T%d_K%d_N%d", tc.T, tc.K, tc.N), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			be := New(0)
			x, _ := be.Alloc(backend.F32, tc.T, tc.K)
			_ = be.Upload(x, randVec(r, tc.T*tc.K))
			w, _ := be.LoadWeight("w", backend.F32, []int{tc.N, tc.K}, f32Bytes(randVec(r, tc.N*tc.K)))
			y, _ := be.Alloc(backend.F32, tc.T, tc.N)
			for b.Loop() {
				be.Linear(y, x, w, nil)
			}
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
			flops := 2 * float64(tc.T*tc.K*tc.N) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(float64(4*tc.K*tc.N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "weightGB/s")
		})
	}
}

// geluTanh64 is gelu_pytorch_tanh in float64: g/2·(1 + tanh(u)), u =
// √(2/π)·(g + 0.044715·g³), written for u < 0 as g·e/(1 + e) with e = e^{2u}
// (the same function), where 1 + tanh(u) would cancel to 0.
func geluTanh64(g float64) float64 {
	u := math.Sqrt(2/math.Pi) * (g + 0.044715*g*g*g)
	if u >= 0 {
		return 0.5 * g * (1 + math.Tanh(u))
	}
	e := math.Exp(2 * u)
	return g * e / (1 + e)
}

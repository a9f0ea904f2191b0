package gpu_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
)

// Unit roundoffs: one correctly rounded operation has relative error at
// most u32 in float32 and u16 in fp16 (10 stored significand bits).
const (
	u32 = 0x1p-24
	u16 = 0x1p-11
)

var (
	gpuOnce sync.Once
	gpuBE   *gpu.Backend
	gpuErr  error
)

// gpuBackend returns the shared CUDA backend on GPU 0, skipping the test where
// there is no driver or device and failing it on any other error (a kernel
// that does not compile, a missing cuBLASLt).
func gpuBackend(t *testing.T) *gpu.Backend {
	t.Helper()
	gpuOnce.Do(func() { gpuBE, gpuErr = gpu.Open(0, options) })
	if gpuErr != nil {
		if errors.Is(gpuErr, cuda.ErrNoDriver) || errors.Is(gpuErr, cuda.ErrNoDevice) {
			t.Skipf("no CUDA device: %v", gpuErr)
		}
		t.Fatal(gpuErr)
	}
	_ = gpuBE.Sync() // start clean even if an earlier test failed midway
	return gpuBE
}

func TestNewWithoutDevice(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("a CUDA device is present")
	}
	_, err := gpu.New(0)
	if err == nil || !(errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice)) {
		t.Fatalf("New(0) without a device: err = %v, want one wrapping ErrNoDriver or ErrNoDevice", err)
	}
	t.Logf("New(0): %v", err)
}

// pair runs every op on the CPU reference and on the GPU with the same data.
type pair struct {
	t   *testing.T
	cpu *cpu.Backend
	gpu *gpu.Backend
}

func newPair(t *testing.T) *pair { return &pair{t: t, cpu: cpu.New(0), gpu: gpuBackend(t)} }

// tensors is one tensor on each backend.
type tensors struct{ c, g backend.Tensor }

func (p *pair) tensor(v []float32, shape ...int) tensors {
	p.t.Helper()
	var out tensors
	for i, be := range []backend.Backend{p.cpu, p.gpu} {
		x, err := be.Alloc(backend.F32, shape...)
		if err != nil {
			p.t.Fatal(err)
		}
		if err := be.Upload(x, v); err != nil {
			p.t.Fatal(err)
		}
		if i == 0 {
			out.c = x
		} else {
			out.g = x
		}
	}
	p.t.Cleanup(func() { p.cpu.Free(out.c); p.gpu.Free(out.g) })
	return out
}

// poisoned allocates an output of NaNs on both backends.
func (p *pair) poisoned(shape ...int) tensors {
	nan := make([]float32, backend.NumElements(shape))
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	return p.tensor(nan, shape...)
}

func (p *pair) ints(v []int32) tensors {
	p.t.Helper()
	var out tensors
	for i, be := range []backend.Backend{p.cpu, p.gpu} {
		x, err := be.Alloc(backend.I32, len(v))
		if err != nil {
			p.t.Fatal(err)
		}
		if err := be.UploadInt32(x, v); err != nil {
			p.t.Fatal(err)
		}
		if i == 0 {
			out.c = x
		} else {
			out.g = x
		}
	}
	p.t.Cleanup(func() { p.cpu.Free(out.c); p.gpu.Free(out.g) })
	return out
}

// weights is one weight on each backend, and the float32 values the CPU
// holds (the checkpoint's values, widened exactly).
type weights struct {
	c, g backend.Weight
	v    []float32
}

// weight loads v, encoded as dtype, on both backends.
func (p *pair) weight(name string, dtype backend.DType, v []float32, shape ...int) weights {
	p.t.Helper()
	data := encode(dtype, v)
	wc, err := p.cpu.LoadWeight(name, dtype, shape, data)
	if err != nil {
		p.t.Fatal(err)
	}
	wg, err := p.gpu.LoadWeight(name, dtype, shape, data)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { p.cpu.FreeWeight(wc); p.gpu.FreeWeight(wg) })
	exact := make([]float32, len(v))
	for i, x := range v {
		switch dtype {
		case backend.F16:
			exact[i] = half.ToFloat32(half.FromFloat32(x))
		case backend.BF16:
			exact[i] = half.BF16ToFloat32(half.BF16FromFloat32(x))
		default:
			exact[i] = x
		}
	}
	return weights{c: wc, g: wg, v: exact}
}

func encode(dtype backend.DType, v []float32) []byte {
	data := make([]byte, len(v)*dtype.Size())
	for i, x := range v {
		switch dtype {
		case backend.F32:
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		case backend.F16:
			binary.LittleEndian.PutUint16(data[2*i:], half.FromFloat32(x))
		case backend.BF16:
			binary.LittleEndian.PutUint16(data[2*i:], half.BF16FromFloat32(x))
		}
	}
	return data
}

// results downloads x from both backends, checking neither has an error.
func (p *pair) results(x tensors, n int) (c, g []float32) {
	p.t.Helper()
	c, g = make([]float32, n), make([]float32, n)
	if err := p.cpu.Download(c, x.c); err != nil {
		p.t.Fatalf("cpu: %v", err)
	}
	if err := p.gpu.Download(g, x.g); err != nil {
		p.t.Fatalf("gpu: %v", err)
	}
	if err := p.gpu.Sync(); err != nil {
		p.t.Fatalf("gpu: %v", err)
	}
	return c, g
}

// compare fails on a NaN or |gpu - cpu| > tol(i), reporting the worst
// error relative to the tolerance.
func compare(t *testing.T, what string, c, g []float32, tol func(i int) float64) {
	t.Helper()
	worst := 0.0
	for i := range c {
		d, tl := math.Abs(float64(g[i])-float64(c[i])), tol(i)
		if g[i] != g[i] || !(d <= tl) {
			t.Fatalf("%s: element %d: gpu %g, cpu %g (|diff| %.3g > tol %.3g)", what, i, g[i], c[i], d, tl)
		}
		if tl > 0 {
			worst = max(worst, d/tl)
		}
	}
	t.Logf("%s: worst |gpu-cpu| = %.2f of the tolerance", what, worst)
}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * r.NormFloat64())
	}
	return v
}

func TestLinear(t *testing.T) {
	p := newPair(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		T, K, N int
		dtype   backend.DType
		bias    bool
	}{
		{1, 512, 1536, backend.BF16, false},   // decode GEMV
		{3, 1000, 1001, backend.F32, true},    // odd N
		{7, 1536, 512, backend.F16, true},     // down projection
		{64, 512, 8192, backend.BF16, false},  // lm_head over a prefill
		{5, 100, 37, backend.F32, true},       // small and ragged
		{33, 4096, 1024, backend.BF16, false}, // long K
	} {
		name := fmt.Sprintf("T=%d K=%d N=%d %v bias=%v", tc.T, tc.K, tc.N, tc.dtype, tc.bias)
		x := randVec(r, tc.T*tc.K, 1)
		w := p.weight("w", tc.dtype, randVec(r, tc.N*tc.K, 0.05), tc.N, tc.K)
		xt := p.tensor(x, tc.T, tc.K)
		y := p.poisoned(tc.T, tc.N)
		var bias weights
		var bv []float32
		if tc.bias {
			bias = p.weight("b", tc.dtype, randVec(r, tc.N, 1), tc.N)
			bv = bias.v
		}
		p.cpu.Linear(y.c, xt.c, w.c, bias.c)
		p.gpu.Linear(y.g, xt.g, w.g, bias.g)
		c, g := p.results(y, tc.T*tc.N)
		// The GPU multiplies fp16(x) by fp16(w): x rounds with relative
		// error u16 (absolute 2⁻²⁵ below fp16's normal range), w too unless
		// it came as bf16 or fp16 (exact in fp16). The CPU accumulates in
		// float32 within (K+2)·u32 of Σ|x·w|; the tensor cores' fp32
		// accumulation may truncate rather than round (up to 2·u32 per
		// add), so the GPU gets twice that. Each side rounds the bias add
		// once.
		uw := 0.0
		if tc.dtype == backend.F32 {
			uw = u16
		}
		compare(t, name, c, g, func(i int) float64 {
			tt, n := i/tc.N, i%tc.N
			var sxw, sw, sx float64
			for k := range tc.K {
				xv, wv := math.Abs(float64(x[tt*tc.K+k])), math.Abs(float64(w.v[n*tc.K+k]))
				sxw += xv * wv
				sw += wv
				sx += xv
			}
			tol := (u16+uw+3*float64(tc.K+2)*u32)*sxw + 0x1p-25*(sw+sx) + 2*u32*math.Abs(float64(c[i]))
			if bv != nil {
				tol += 2 * u32 * math.Abs(float64(bv[n]))
			}
			return tol
		})
	}
}

// TestLinearDeterministic runs the same GEMM three times: the bits must not
// change (cuBLASLt's algorithm is cached per shape and uses no atomics).
func TestLinearDeterministic(t *testing.T) {
	p := newPair(t)
	be := p.gpu
	r := rand.New(rand.NewPCG(3, 4))
	const T, K, N = 17, 1536, 512
	w := p.weight("w", backend.BF16, randVec(r, N*K, 0.05), N, K)
	x := p.tensor(randVec(r, T*K, 1), T, K)
	var first []float32
	for run := range 3 {
		y := p.poisoned(T, N)
		be.Linear(y.g, x.g, w.g, nil)
		got := make([]float32, T*N)
		if err := be.Download(got, y.g); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = got
			continue
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
				t.Fatalf("run %d: element %d = %g, first run %g", run, i, got[i], first[i])
			}
		}
	}
}

func TestRMSNorm(t *testing.T) {
	p := newPair(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ T, C, G int }{
		{3, 1000, 1000}, {1, 512, 512}, {9, 4096, 4096}, {5, 512, 128}, {4, 6 * 64, 64}, {2, 33, 33}, {3, 1, 1},
	} {
		name := fmt.Sprintf("T=%d C=%d G=%d", tc.T, tc.C, tc.G)
		x := randVec(r, tc.T*tc.C, 2)
		for i := range x {
			if r.IntN(50) == 0 {
				x[i] *= 30
			}
		}
		w := p.weight("norm", backend.BF16, randVec(r, tc.G, 1), tc.G)
		for _, inPlace := range []bool{false, true} {
			xt := p.tensor(x, tc.T, tc.C)
			y := xt
			if !inPlace {
				y = p.poisoned(tc.T, tc.C)
			}
			p.cpu.RMSNorm(y.c, xt.c, w.c, 1e-5)
			p.gpu.RMSNorm(y.g, xt.g, w.g, 1e-5)
			c, g := p.results(y, tc.T*tc.C)
			// Same formula on both sides, sums of squares in float64: they
			// differ only when the two float64 summation orders round the
			// float32 mean differently. Then r differs by an ulp (at most
			// 2·u32 relative) and each side's two products round on their
			// own (u32 each): at most 6·u32 of the result; 8 for slack.
			compare(t, fmt.Sprintf("%s in place=%v", name, inPlace), c, g, func(i int) float64 { return 8 * u32 * math.Abs(float64(c[i])) })
		}
	}
}

func TestRoPE(t *testing.T) {
	p := newPair(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ T, H, D int }{{3, 4, 128}, {1, 2, 128}, {11, 8, 64}, {2, 3, 256}, {4, 1, 2}} {
		name := fmt.Sprintf("T=%d H=%d D=%d", tc.T, tc.H, tc.D)
		inv := make([]float32, tc.D/2)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(tc.D)))
		}
		f := p.weight("rope.inv_freq", backend.F32, inv, len(inv))
		pos := make([]int32, tc.T)
		for i := range pos {
			pos[i] = int32(r.IntN(8192))
		}
		x := randVec(r, tc.T*tc.H*tc.D, 3)
		xt := p.tensor(x, tc.T, tc.H*tc.D)
		pt := p.ints(pos)
		p.cpu.RoPE(xt.c, pt.c, f.c)
		p.gpu.RoPE(xt.g, pt.g, f.g)
		c, g := p.results(xt, len(x))
		// Both take cos and sin in float64 of the same float32 angle and
		// round them (CUDA's double cos/sin are within 2 ulp of float64,
		// far below a float32 ulp); the products and the sum are float32
		// on both sides. Allow 2 float32 roundings of |x1|+|x2| for a
		// CPU that fuses (arm64) or a cos/sin rounded the other way.
		C := tc.H * tc.D
		half := tc.D / 2
		compare(t, name, c, g, func(i int) float64 {
			row, j := i/C, i%C
			h, k := j/tc.D, j%tc.D%half
			x1, x2 := x[row*C+h*tc.D+k], x[row*C+h*tc.D+k+half]
			return 2 * u32 * (math.Abs(float64(x1)) + math.Abs(float64(x2)))
		})
	}
}

func TestElementwise(t *testing.T) {
	p := newPair(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, sh := range [][2]int{{3, 1000}, {1, 1536}, {17, 1536}, {1, 1}} {
		n := sh[0] * sh[1]
		a, b := randVec(r, n, 3), randVec(r, n, 2)
		at, bt := p.tensor(a, sh[0], sh[1]), p.tensor(b, sh[0], sh[1])

		y := p.poisoned(sh[0], sh[1])
		p.cpu.SwiGLU(y.c, at.c, bt.c)
		p.gpu.SwiGLU(y.g, at.g, bt.g)
		c, g := p.results(y, n)
		// CPU: silu in float64, rounded once, times up (2·u32 of the exact
		// result). GPU: float32 expf (2 ulp = 2⁻²² relative, which moves
		// 1+e⁻ᵍ by at most as much), the add, the division and the product
		// (u32 each): 7·u32. Together at most 9·u32; 10 for slack.
		compare(t, fmt.Sprintf("SwiGLU %v", sh), c, g, func(i int) float64 { return 10 * u32 * math.Abs(float64(c[i])) })

		p.cpu.GeGLU(y.c, at.c, bt.c)
		p.gpu.GeGLU(y.g, at.g, bt.g)
		c, g = p.results(y, n)
		// Both: gelu_tanh in float64 (exp to within 2⁻³⁷ on the CPU, an
		// ulp of double on the GPU), rounded once, times up: the same bits
		// but where the double lands next to a float32 rounding boundary,
		// one ulp of the activation and one of the product apart.
		compare(t, fmt.Sprintf("GeGLU %v", sh), c, g, func(i int) float64 { return 2 * u32 * math.Abs(float64(c[i])) })

		p.cpu.Scale(y.c, at.c, 45.25)
		p.gpu.Scale(y.g, at.g, 45.25)
		c, g = p.results(y, n)
		compare(t, fmt.Sprintf("Scale %v (exact)", sh), c, g, func(int) float64 { return 0 })

		p.cpu.Add(y.c, at.c, bt.c)
		p.gpu.Add(y.g, at.g, bt.g)
		c, g = p.results(y, n)
		compare(t, fmt.Sprintf("Add %v (exact)", sh), c, g, func(int) float64 { return 0 })

		// In place, as the model's h = h + x and gate = silu(gate)·up.
		p.cpu.Add(at.c, at.c, bt.c)
		p.gpu.Add(at.g, at.g, bt.g)
		p.cpu.SwiGLU(bt.c, at.c, bt.c)
		p.gpu.SwiGLU(bt.g, at.g, bt.g)
		c, g = p.results(bt, n)
		compare(t, fmt.Sprintf("in-place Add, SwiGLU %v", sh), c, g, func(i int) float64 { return 10 * u32 * math.Abs(float64(c[i])) })
	}
}

func TestGather(t *testing.T) {
	p := newPair(t)
	r := rand.New(rand.NewPCG(11, 12))
	const V, K = 300, 1000
	for _, dtype := range []backend.DType{backend.BF16, backend.F32} {
		tab := p.weight("embed", dtype, randVec(r, V*K, 1), V, K)
		ids := []int32{5, 0, 299, 5, 17}
		it := p.ints(ids)
		y := p.poisoned(len(ids), K)
		p.cpu.Embedding(y.c, tab.c, it.c)
		p.gpu.Embedding(y.g, tab.g, it.g)
		c, g := p.results(y, len(ids)*K)
		// bf16 tables are exact in fp16; float32 tables are rounded to fp16
		// once (the GPU stores matrices in fp16).
		tol := 0.0
		if dtype == backend.F32 {
			tol = u16
		}
		compare(t, fmt.Sprintf("Embedding %v", dtype), c, g, func(i int) float64 { return tol * math.Abs(float64(c[i])) })

		// Rows picks rows of the embedded tensor.
		idx := p.ints([]int32{4, 4, 0, 2})
		out := p.poisoned(4, K)
		p.cpu.Rows(out.c, y.c, idx.c)
		p.gpu.Rows(out.g, y.g, idx.g)
		c2, g2 := p.results(out, 4*K)
		for i, id := range []int{4, 4, 0, 2} {
			for k := range K {
				if g2[i*K+k] != g[id*K+k] {
					t.Fatalf("Rows: [%d,%d] = %g, want row %d's %g", i, k, g2[i*K+k], id, g[id*K+k])
				}
			}
		}
		compare(t, fmt.Sprintf("Rows %v", dtype), c2, g2, func(i int) float64 { return tol * math.Abs(float64(c2[i])) })
	}
}

// TestHalfTensors: F16 and BF16 tensors round on upload exactly as the CPU
// backend's do.
func TestHalfTensors(t *testing.T) {
	be := gpuBackend(t)
	ref := cpu.New(1)
	v := []float32{0, 1, -2.5, 3.14159, 65504, 1e6, 1e-7, float32(math.Inf(-1))}
	for _, dt := range []backend.DType{backend.F16, backend.BF16} {
		var got [2][]float32
		for i, b := range []backend.Backend{ref, be} {
			x, err := b.Alloc(dt, 2, 4)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Upload(x, v); err != nil {
				t.Fatal(err)
			}
			got[i] = make([]float32, len(v))
			if err := b.Download(got[i], x); err != nil {
				t.Fatal(err)
			}
			b.Free(x)
		}
		for i := range v {
			if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
				t.Errorf("%v: %g -> gpu %g, cpu %g", dt, v[i], got[1][i], got[0][i])
			}
		}
	}
}

func TestPoolReuse(t *testing.T) {
	be := gpuBackend(t)
	x, err := be.Alloc(backend.F32, 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := be.Ptr(x)
	if err != nil {
		t.Fatal(err)
	}
	be.Free(x)
	y, err := be.Alloc(backend.F32, 1000, 3) // the same size
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(y)
	if p2, _ := be.Ptr(y); p2 != p1 {
		t.Errorf("Alloc after Free of the same size got %#x, want the pooled %#x", p2, p1)
	}
	if _, err := be.Ptr(x); err == nil || !strings.Contains(err.Error(), "after Free") {
		t.Errorf("Ptr of a freed tensor: err = %v", err)
	}
}

func TestErrors(t *testing.T) {
	b := gpuBackend(t)
	defer b.Sync()
	mk := func(v []float32, shape ...int) backend.Tensor {
		x, err := b.Alloc(backend.F32, shape...)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Upload(x, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		return x
	}
	wt := func(name string, v []float32, shape ...int) backend.Weight {
		w, err := b.LoadWeight(name, backend.F32, shape, encode(backend.F32, v))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.FreeWeight(w) })
		return w
	}
	x := mk(make([]float32, 6), 2, 3)
	w := wt("model.w", make([]float32, 8), 2, 4)
	y := mk([]float32{1, 2, 3, 4}, 2, 2)
	b.Linear(y, x, w, nil)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "model.w") {
		t.Fatalf("Linear with K mismatch: err = %v, want a shape error naming model.w", err)
	}
	b.Add(y, y, y) // skipped while the error is pending
	if err := b.Download(make([]float32, 4), y); err == nil {
		t.Fatal("Download with a pending op error returned nil")
	}
	if err := b.Sync(); err == nil {
		t.Fatal("Sync returned nil with a pending error")
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("second Sync = %v, want nil (cleared)", err)
	}
	got := make([]float32, 4)
	if err := b.Download(got, y); err != nil || got[0] != 1 {
		t.Fatalf("op ran while an error was pending: y = %v, err %v", got, err)
	}

	tab := wt("embed", make([]float32, 12), 4, 3)
	ids, _ := b.Alloc(backend.I32, 2)
	defer b.Free(ids)
	b.Embedding(x, tab, ids)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "before UploadInt32") {
		t.Fatalf("Embedding with ids never uploaded: err = %v", err)
	}
	if err := b.UploadInt32(ids, []int32{1, 4}); err != nil {
		t.Fatal(err)
	}
	b.Embedding(x, tab, ids)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "token id 4") {
		t.Fatalf("Embedding of id 4 of 4 rows: err = %v", err)
	}
	idx := func(v ...int32) backend.Tensor {
		ix, _ := b.Alloc(backend.I32, len(v))
		t.Cleanup(func() { b.Free(ix) })
		if err := b.UploadInt32(ix, v); err != nil {
			t.Fatal(err)
		}
		return ix
	}
	b.Rows(mk(make([]float32, 3), 1, 3), x, idx(2))
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "row index 2") {
		t.Fatalf("Rows of index 2 of 2 rows: err = %v", err)
	}

	other := cpu.New(1)
	ox, _ := other.Alloc(backend.F32, 2, 3)
	b.Add(x, x, ox)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "not from this backend") {
		t.Fatalf("foreign tensor: err = %v", err)
	}

	h, _ := b.Alloc(backend.F16, 2, 3)
	b.Add(x, x, h)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "F32 tensors only") {
		t.Fatalf("Add of an F16 tensor: err = %v", err)
	}
	b.Free(h)
	b.Add(x, x, h)
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
	// A matrix value beyond fp16's range is refused, naming the weight; in
	// a vector (kept in float32) it is fine.
	for _, dt := range []backend.DType{backend.F32, backend.BF16} {
		big := []float32{1, -70000, 0, 2}
		if _, err := b.LoadWeight("model.big", dt, []int{2, 2}, encode(dt, big)); err == nil || !strings.Contains(err.Error(), "model.big") {
			t.Errorf("%v matrix holding -70000: err = %v, want an fp16 range error naming model.big", dt, err)
		}
		v, err := b.LoadWeight("model.bigvec", dt, []int{4}, encode(dt, big))
		if err != nil {
			t.Errorf("%v vector holding -70000: %v", dt, err)
		}
		b.FreeWeight(v)
	}
	if _, err := b.Alloc(backend.F32, 0); err == nil {
		t.Error("Alloc of shape [0] succeeded")
	}
}

// TestClose uses a backend of its own: after Close, ops record an error
// and Alloc fails.
func TestClose(t *testing.T) {
	gpuBackend(t)
	b, err := gpu.New(0)
	if err != nil {
		t.Fatal(err)
	}
	x, err := b.Alloc(backend.F32, 4)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.LoadWeight("w", backend.BF16, []int{4, 4}, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	y, _ := b.Alloc(backend.F32, 4)
	b.Free(y) // pooled
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := b.Alloc(backend.F32, 4); err == nil {
		t.Error("Alloc after Close succeeded")
	}
	b.Add(x, x, x)
	if err := b.Sync(); err == nil {
		t.Error("Add after Close: no error")
	}
	b.Free(x)
	b.FreeWeight(w)
}

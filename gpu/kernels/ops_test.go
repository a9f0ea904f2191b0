package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// eps32 is float32's unit roundoff, 2⁻²⁴: one correctly rounded float32
// operation has relative error at most eps32.
const eps32 = 0x1p-24

var (
	opsOnce sync.Once
	opsDev  *cuda.Device
	opsK    *kernels.Ops
	opsErr  error
)

// opsSetup opens GPU 0 and compiles ops.cu once, or skips the test.
func opsSetup(t testing.TB) (*cuda.Device, *kernels.Ops) {
	t.Helper()
	opsOnce.Do(func() {
		if opsDev, opsErr = cuda.Open(0); opsErr != nil {
			return
		}
		if opsK, opsErr = kernels.LoadOps(opsDev); opsErr != nil {
			opsErr = fmt.Errorf("compile ops.cu: %w", opsErr)
		}
	})
	if opsDev == nil {
		t.Skipf("no CUDA device: %v", opsErr)
	}
	if opsErr != nil {
		t.Fatal(opsErr)
	}
	return opsDev, opsK
}

// gpuMem allocates device buffers for one test and frees them at its end.
// All copies go through the device's stream, in order with the kernels.
type gpuMem struct {
	t *testing.T
	d *cuda.Device
}

func newGPUMem(t *testing.T, d *cuda.Device) *gpuMem { return &gpuMem{t: t, d: d} }

// put allocates a buffer holding src.
func (g *gpuMem) put(src []byte) cuda.DevicePtr {
	g.t.Helper()
	p, err := g.d.Alloc(max(len(src), 16))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { g.d.Free(p) })
	g.write(p, src)
	return p
}

func (g *gpuMem) write(p cuda.DevicePtr, src []byte) {
	g.t.Helper()
	err := g.d.Do(func(c *cuda.Ctx) error {
		if err := c.HtoDAsync(p, src, g.d.Stream()); err != nil {
			return err
		}
		return c.SyncStream(g.d.Stream())
	})
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g *gpuMem) read(dst []byte, p cuda.DevicePtr) {
	g.t.Helper()
	err := g.d.Do(func(c *cuda.Ctx) error {
		if err := c.DtoHAsync(dst, p, g.d.Stream()); err != nil {
			return err
		}
		return c.SyncStream(g.d.Stream())
	})
	if err != nil {
		g.t.Fatal(err)
	}
}

// run queues launch on the device's stream and waits for it.
func (g *gpuMem) run(launch func(c *cuda.Ctx, s cuda.Stream) error) {
	g.t.Helper()
	err := g.d.Do(func(c *cuda.Ctx) error {
		if err := launch(c, g.d.Stream()); err != nil {
			return err
		}
		return c.SyncStream(g.d.Stream())
	})
	if err != nil {
		g.t.Fatal(err)
	}
}

// halfOf returns F32ToF16 of the n float32 values at p (the conversion
// launch the fp16 outputs of add_rmsnorm and swiglu_cols replace).
func (g *gpuMem) halfOf(o *kernels.Ops, p cuda.DevicePtr, n int) []uint16 {
	g.t.Helper()
	h := g.poisonedF16(n)
	g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.F32ToF16(c, s, h, p, n) })
	return g.u16s(h, n)
}

// poisonedF16 allocates an fp16 output of n NaNs (0x7fff).
func (g *gpuMem) poisonedF16(n int) cuda.DevicePtr {
	v := make([]uint16, n)
	for i := range v {
		v[i] = 0x7fff
	}
	return g.put(cuda.Bytes(v))
}

func (g *gpuMem) u16s(p cuda.DevicePtr, n int) []uint16 {
	v := make([]uint16, n)
	g.read(cuda.Bytes(v), p)
	return v
}

// sameU16 fails unless got and want hold the same fp16 bits.
func sameU16(t *testing.T, what string, got, want []uint16) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: fp16 element %d = %#04x, f32_to_f16 gives %#04x", what, i, got[i], want[i])
		}
	}
}

// nanF32 returns n float32 NaNs, the poison every output starts as.
func nanF32(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

// poisonedF32 allocates an output of n float32 NaNs.
func (g *gpuMem) poisonedF32(n int) cuda.DevicePtr { return g.put(cuda.Bytes(nanF32(n))) }

func (g *gpuMem) f32s(p cuda.DevicePtr, n int) []float32 {
	v := make([]float32, n)
	g.read(cuda.Bytes(v), p)
	return v
}

func randF32(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * r.NormFloat64())
	}
	return v
}

// checkClose fails on NaN or |got-want| > tol(i).
func checkClose(t *testing.T, what string, got []float32, want []float64, tol func(i int) float64) {
	t.Helper()
	for i, w := range want {
		g := float64(got[i])
		if g != g || math.Abs(g-w) > tol(i) {
			t.Fatalf("%s: element %d = %g, want %g (tol %.3g)", what, i, g, w, tol(i))
		}
	}
}

func TestOpsConvert(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(1, 2))

	// float32 -> fp16: every value must round exactly as half.FromFloat32
	// (both round to nearest even), including overflow, subnormals and ±0.
	src := append(randF32(r, 997, 10), 65504, 65519, 65520, -1e6, 0x1p-24, 0x1p-25, 0x1.8p-25, 3e-6, 0,
		float32(math.Copysign(0, -1)), float32(math.Inf(1)), 1.0009765625, 1.00048828125)
	n := len(src)
	dst := g.put(make([]byte, 2*n))
	g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.F32ToF16(c, s, dst, g.put(cuda.Bytes(src)), n) })
	got := make([]uint16, n)
	g.read(cuda.Bytes(got), dst)
	for i, v := range src {
		if want := half.FromFloat32(v); got[i] != want {
			t.Fatalf("f32_to_f16(%g) = %#04x, want %#04x", v, got[i], want)
		}
	}

	// bf16 -> fp16 and the widenings: all 65536 bit patterns, exact (NaN
	// patterns only need to stay NaN).
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	n = len(all)
	in := g.put(cuda.Bytes(all))
	h := g.put(make([]byte, 2*n))
	g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.BF16ToF16(c, s, h, in, n) })
	got = make([]uint16, n)
	g.read(cuda.Bytes(got), h)
	for i, b := range all {
		f := half.BF16ToFloat32(b)
		if f != f {
			if gf := half.ToFloat32(got[i]); gf == gf {
				t.Fatalf("bf16_to_f16(NaN %#04x) = %#04x, not NaN", b, got[i])
			}
			continue
		}
		if want := half.FromFloat32(f); got[i] != want {
			t.Fatalf("bf16_to_f16(%#04x = %g) = %#04x, want %#04x", b, f, got[i], want)
		}
	}
	for _, tc := range []struct {
		name   string
		launch func(c *cuda.Ctx, s cuda.Stream, dst, src cuda.DevicePtr, n int) error
		ref    func(uint16) float32
	}{{"f16_to_f32", o.F16ToF32, half.ToFloat32}, {"bf16_to_f32", o.BF16ToF32, half.BF16ToFloat32}} {
		out := g.poisonedF32(n)
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return tc.launch(c, s, out, in, n) })
		f := g.f32s(out, n)
		for i, b := range all {
			want := tc.ref(b)
			if want != want {
				if f[i] == f[i] {
					t.Fatalf("%s(NaN %#04x) = %g", tc.name, b, f[i])
				}
				continue
			}
			if math.Float32bits(f[i]) != math.Float32bits(want) {
				t.Fatalf("%s(%#04x) = %g, want %g", tc.name, b, f[i], want)
			}
		}
	}
}

func TestOpsGather(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range []struct{ T, K, V int }{{3, 1000, 37}, {1, 1, 1}, {17, 512, 8192}, {5, 33, 5}} {
		table := make([]uint16, sh.V*sh.K)
		for i := range table {
			table[i] = half.FromFloat32(float32(r.NormFloat64()))
		}
		ids := make([]int32, sh.T)
		for i := range ids {
			ids[i] = int32(r.IntN(sh.V))
		}
		ids[sh.T-1] = int32(sh.V - 1)
		out := g.poisonedF32(sh.T * sh.K)
		tab, idp := g.put(cuda.Bytes(table)), g.put(cuda.Bytes(ids))
		g.run(func(c *cuda.Ctx, s cuda.Stream) error {
			return o.EmbeddingF16(c, s, out, tab, idp, sh.T, sh.K, sh.V)
		})
		got := g.f32s(out, sh.T*sh.K)
		for t0, id := range ids {
			for k := range sh.K {
				if want := half.ToFloat32(table[int(id)*sh.K+k]); got[t0*sh.K+k] != want {
					t.Fatalf("embedding %+v: [%d,%d] = %g, want %g", sh, t0, k, got[t0*sh.K+k], want)
				}
			}
		}

		// Rows: gather from a float32 [V, K] source with repeated indices.
		src := randF32(r, sh.V*sh.K, 1)
		out = g.poisonedF32(sh.T * sh.K)
		sp := g.put(cuda.Bytes(src))
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.Rows(c, s, out, sp, idp, sh.T, sh.K, sh.V) })
		got = g.f32s(out, sh.T*sh.K)
		for t0, id := range ids {
			for k := range sh.K {
				if want := src[int(id)*sh.K+k]; got[t0*sh.K+k] != want {
					t.Fatalf("rows %+v: [%d,%d] = %g, want %g", sh, t0, k, got[t0*sh.K+k], want)
				}
			}
		}
	}

	// An id out of range gives a NaN row (the backend checks ids before).
	ids := []int32{0, 5, -1}
	table := make([]uint16, 5*4)
	out := g.poisonedF32(3 * 4)
	g.write(out, cuda.Bytes(make([]float32, 12)))
	tab, idp := g.put(cuda.Bytes(table)), g.put(cuda.Bytes(ids))
	g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.EmbeddingF16(c, s, out, tab, idp, 3, 4, 5) })
	got := g.f32s(out, 12)
	for i, v := range got {
		if isNaN := v != v; isNaN != (i >= 4) {
			t.Fatalf("embedding with ids %v: element %d = %g", ids, i, v)
		}
	}
}

func TestOpsRMSNorm(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(5, 6))
	const eps = 1e-5
	for _, sh := range []struct{ rows, C, G int }{
		{3, 1000, 1000}, {1, 1, 1}, {7, 4096, 4096}, {5, 512, 128}, {2, 33, 33}, {4, 6 * 64, 64}, {1, 300, 300},
		{2, 8192, 8192}, {2, 8200, 8200}, {1, 12288, 12288}, // the registers' last row size, then the strided loop
	} {
		n := sh.rows * sh.C
		x := randF32(r, n, 2)
		for i := range x {
			if r.IntN(50) == 0 {
				x[i] *= 40 // outlier channels, as real hidden states have
			}
		}
		w := randF32(r, sh.G, 1)
		groups := n / sh.G
		want := make([]float64, n)
		for gi := range groups {
			var ss float64
			for i := range sh.G {
				v := float64(x[gi*sh.G+i])
				ss += v * v
			}
			rr := 1 / math.Sqrt(ss/float64(sh.G)+eps)
			for i := range sh.G {
				want[gi*sh.G+i] = float64(w[i]) * float64(x[gi*sh.G+i]) * rr
			}
		}
		xp, wp := g.put(cuda.Bytes(x)), g.put(cuda.Bytes(w))
		var first []float32
		for run := range 3 {
			out := g.poisonedF32(n)
			dst := out
			if run == 2 {
				dst = g.put(cuda.Bytes(x)) // in place
				out = dst
			}
			src := xp
			if run == 2 {
				src = dst
			}
			g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.RMSNorm(c, s, dst, src, wp, groups, sh.G, eps) })
			got := g.f32s(out, n)
			if run == 0 {
				// The GPU rounds the mean (eps32), the sum with eps (eps32,
				// halved by the square root), the reciprocal root (eps32)
				// and the two products (eps32 each): at most 4.5·eps32 of
				// |want|; 6 leaves room for the float64 sum's own error.
				checkClose(t, fmt.Sprintf("rmsnorm %+v", sh), got, want, func(i int) float64 { return 6*eps32*math.Abs(want[i]) + 1e-37 })
				sameF32(t, fmt.Sprintf("rmsnorm %+v against its order emulated", sh), got, rmsnormBits(x, w, sh.G, eps))
				first = got
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
					t.Fatalf("rmsnorm %+v run %d: element %d = %g, first run %g: not deterministic", sh, run, i, got[i], first[i])
				}
			}
		}
	}
}

func TestOpsRoPE(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ T, H, D int }{{3, 4, 128}, {1, 1, 2}, {9, 8, 64}, {2, 3, 256}} {
		half := sh.D / 2
		C := sh.H * sh.D
		inv := make([]float32, half)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(sh.D)))
		}
		pos := make([]int32, sh.T)
		for i := range pos {
			pos[i] = int32(r.IntN(9000))
		}
		pos[0] = 0
		x := randF32(r, sh.T*C, 3)
		want := make([]float64, len(x))
		mag := make([]float64, len(x))
		for t0 := range sh.T {
			for h := range sh.H {
				for i := range half {
					theta := float64(float32(pos[t0]) * inv[i])
					c, s := math.Cos(theta), math.Sin(theta)
					lo, hi := t0*C+h*sh.D+i, t0*C+h*sh.D+i+half
					x1, x2 := float64(x[lo]), float64(x[hi])
					want[lo] = x1*c - x2*s
					want[hi] = x2*c + x1*s
					mag[lo] = math.Abs(x1*c) + math.Abs(x2*s)
					mag[hi] = math.Abs(x2*c) + math.Abs(x1*s) // the terms of x'[i+half], not x'[i]
				}
			}
		}
		xp, pp, ip := g.put(cuda.Bytes(x)), g.put(cuda.Bytes(pos)), g.put(cuda.Bytes(inv))
		var first []float32
		for run := range 2 {
			g.write(xp, cuda.Bytes(x))
			g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.RoPE(c, s, xp, pp, ip, sh.T, C, half) })
			got := g.f32s(xp, len(x))
			if run == 0 {
				// cos and sin are rounded to float32 (eps32 each), then two
				// products and a sum are rounded (eps32 each): at most
				// 3·eps32 of |x1·c| + |x2·s|; 4 for slack in double trig.
				checkClose(t, fmt.Sprintf("rope %+v", sh), got, want, func(i int) float64 { return 4*eps32*mag[i] + 1e-37 })
				first = got
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
					t.Fatalf("rope %+v: element %d not deterministic", sh, i)
				}
			}
		}
	}
}

// TestOpsHadamard: the GPU transform gives kv.Rotate's bits (the same
// butterflies in the same order, float32 rounding, then the same scale) on
// rows with outlier channels, for the head dims a rotated KV cache uses;
// so does f16_to_f32_hadamard on fp16 rows (into a NaN-poisoned output):
// D = 32-256 through f16_to_f32_hadamard_warp (a warp per row, rows not a
// multiple of a block's), 2, 16, 512 and 2048 through the block kernel;
// with its fp16 copy, that copy is f32_to_f16's of the float32 output.
func TestOpsHadamard(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range []struct{ rows, D int }{{7, 128}, {1, 64}, {33, 256}, {3, 2}, {2, 2048}, {5, 32}, {6, 16}, {3, 512}} {
		x := randF32(r, sh.rows*sh.D, 3)
		for i := range x {
			if r.IntN(16) == 0 {
				x[i] *= 40
			}
		}
		want := append([]float32(nil), x...)
		for row := range sh.rows {
			kv.Rotate(want[row*sh.D : (row+1)*sh.D])
		}
		xp := g.put(cuda.Bytes(x))
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.Hadamard(c, s, xp, sh.rows, sh.D) })
		got := g.f32s(xp, len(x))
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("hadamard %+v: element %d: got %g, want kv.Rotate's %g", sh, i, got[i], want[i])
			}
		}

		// f16_to_f32_hadamard: the widening and the rotation in one launch,
		// kv.Rotate of the exact float32 of each fp16 value.
		h := make([]uint16, len(x))
		want = make([]float32, len(x))
		for i := range x {
			h[i] = half.FromFloat32(x[i] / 8) // inside fp16's range
			want[i] = half.ToFloat32(h[i])
		}
		for row := range sh.rows {
			kv.Rotate(want[row*sh.D : (row+1)*sh.D])
		}
		hp, out := g.put(cuda.Bytes(h)), g.poisonedF32(len(x))
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.F16ToF32Hadamard(c, s, out, hp, sh.rows, sh.D) })
		got = g.f32s(out, len(x))
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("f16_to_f32_hadamard %+v: element %d: got %g, want kv.Rotate's %g", sh, i, got[i], want[i])
			}
		}
		// With the fp16 copy (v11): the same float32 bits, and the copy
		// f32_to_f16's of them (both outputs NaN-poisoned).
		out2, outH := g.poisonedF32(len(x)), g.poisonedF16(len(x))
		g.run(func(c *cuda.Ctx, s cuda.Stream) error {
			return o.F16ToF32HadamardHalf(c, s, out2, outH, hp, sh.rows, sh.D)
		})
		got2, gotH, wantH := g.f32s(out2, len(x)), g.u16s(outH, len(x)), g.halfOf(o, out, len(x))
		for i := range got2 {
			if math.Float32bits(got2[i]) != math.Float32bits(want[i]) || gotH[i] != wantH[i] {
				t.Fatalf("f16_to_f32_hadamard with fp16 copy %+v: element %d: got %g / %#04x, want %g / f32_to_f16's %#04x", sh, i, got2[i], gotH[i], want[i], wantH[i])
			}
		}
	}
	g.run(func(c *cuda.Ctx, s cuda.Stream) error {
		if err := o.Hadamard(c, s, 0, 4, 96); err == nil {
			t.Error("hadamard of rows of 96 (not a power of two) was accepted")
		}
		if err := o.F16ToF32Hadamard(c, s, 0, 0, 4, 96); err == nil {
			t.Error("f16_to_f32_hadamard of rows of 96 (not a power of two) was accepted")
		}
		return nil
	})
}

func TestOpsElementwise(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 3 * 1000, 1536, 1 << 21} {
		a, b := randF32(r, n, 3), randF32(r, n, 3)
		ap, bp := g.put(cuda.Bytes(a)), g.put(cuda.Bytes(b))

		out := g.poisonedF32(n)
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.SwiGLU(c, s, out, ap, bp, n) })
		got := g.f32s(out, n)
		want := make([]float64, n)
		for i := range want {
			ga := float64(a[i])
			want[i] = ga / (1 + math.Exp(-ga)) * float64(b[i])
		}
		// expf is within 2 ulp (2⁻²² relative), which perturbs 1+e^-g by at
		// most as much; the add, the division and the product round once
		// each: at most 2⁻²² + 3·eps32 = 7·eps32 of |want|.
		checkClose(t, fmt.Sprintf("swiglu n=%d", n), got, want, func(i int) float64 { return 8*eps32*math.Abs(want[i]) + 1e-37 })

		out = g.poisonedF32(n)
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.GeGLU(c, s, out, ap, bp, n) })
		got = g.f32s(out, n)
		for i := range want {
			ga := float64(a[i])
			want[i] = geluTanh64(ga) * float64(b[i])
		}
		// gelu_tanh in double, rounded once (half an eps32), then the
		// float32 product (another half): 2·eps32 with slack.
		checkClose(t, fmt.Sprintf("geglu n=%d", n), got, want, func(i int) float64 { return 2*eps32*math.Abs(want[i]) + 1e-37 })

		out = g.poisonedF32(n)
		const f = float32(45.25)
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.Scale(c, s, out, ap, f, n) })
		got = g.f32s(out, n)
		for i := range got {
			if want := a[i] * f; math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("scale n=%d: element %d = %g, want %g (exact)", n, i, got[i], want)
			}
		}

		out = g.poisonedF32(n)
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.Add(c, s, out, ap, bp, n) })
		got = g.f32s(out, n)
		for i := range got {
			if want := a[i] + b[i]; math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("add n=%d: element %d = %g, want %g (exact)", n, i, got[i], want)
			}
		}

		// In place: dst = a, as the model's h = h + x.
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.Add(c, s, ap, ap, bp, n) })
		got = g.f32s(ap, n)
		for i := range got {
			if want := a[i] + b[i]; got[i] != want {
				t.Fatalf("add in place n=%d: element %d = %g, want %g", n, i, got[i], want)
			}
		}
	}

	// AddBias on odd shapes: exact float32 sums.
	for _, sh := range []struct{ T, N int }{{3, 1000}, {1, 1}, {5, 37}} {
		y, bias := randF32(r, sh.T*sh.N, 2), randF32(r, sh.N, 1)
		yp, bp := g.put(cuda.Bytes(y)), g.put(cuda.Bytes(bias))
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.AddBias(c, s, yp, bp, sh.T, sh.N) })
		got := g.f32s(yp, len(y))
		for i := range got {
			if want := y[i] + bias[i%sh.N]; got[i] != want {
				t.Fatalf("add_bias %+v: element %d = %g, want %g", sh, i, got[i], want)
			}
		}
	}
}

// sameF32 fails unless got and want hold the same float32 bits.
func sameF32(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %g, the separate kernels give %g", what, i, got[i], want[i])
		}
	}
}

// rmsnormBits emulates ops.cu's rmsnorm to the bit: a block of
// normThreads(G) threads (the next power of two from 32 to 256), thread l
// summing the squares of elements l, l + threads, ... in float64, then
// norm_scale's tree (partial[l] += partial[l + s], s = threads/2, ..., 1),
// the mean rounded to float32, eps added in float32, the reciprocal root
// in float64 rounded once, and y = w·(x·r) with both products rounded. It
// pins the kernel's bits whichever path (registers or strided loop) runs.
func rmsnormBits(x, w []float32, G int, eps float32) []float32 {
	threads := 32
	for threads < G && threads < 256 {
		threads *= 2
	}
	y := make([]float32, len(x))
	partial := make([]float64, threads)
	for g0 := 0; g0 < len(x); g0 += G {
		row := x[g0 : g0+G]
		for l := range partial {
			partial[l] = 0
			for i := l; i < G; i += threads {
				v := float64(row[i])
				partial[l] += v * v
			}
		}
		for s := threads / 2; s > 0; s /= 2 {
			for l := range s {
				partial[l] += partial[l+s]
			}
		}
		mean := float32(partial[0] / float64(G))
		r := float32(1 / math.Sqrt(float64(float32(mean+eps))))
		for i, v := range row {
			y[g0+i] = float32(w[i] * float32(v*r))
		}
	}
	return y
}

// TestOpsAddRMSNorm: add_rmsnorm gives the bits of add then rmsnorm (whose
// float64 reference TestOpsRMSNorm checks; the sum is checked exact here),
// with x a separate buffer and with x = delta, as the model calls it.
// Where the row runs over a cluster (AddRMSNormClusters: rows of 1024 to
// 8192 on Hopper) x must have the bits of that kernel's order emulated
// (addRMSNormClusterBits) and lie within rmsnorm's bound of the float64
// reference.
func TestOpsAddRMSNorm(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(21, 22))
	const eps = 1e-5
	clustered := 0
	for _, sh := range []struct{ rows, C, G int }{
		{1, 4096, 4096}, {3, 1000, 1000}, {1, 1, 1}, {5, 512, 128}, {2, 33, 33}, {4, 6 * 64, 64}, {1, 300, 300}, {2, 8192, 8192},
		{2, 8200, 8200}, {1, 12288, 12288}, // beyond the registers: the strided loop
		{1, 1024, 1024}, {3, 1030, 1030}, {1, 5000, 5000}, {2, 8191, 8191}, {3, 2 * 2048, 2048}, // the cluster's range, ragged slices
		{1, 1023, 1023}, // just below it
	} {
		n := sh.rows * sh.C
		groups := n / sh.G
		hv, dv, wv := randF32(r, n, 2), randF32(r, n, 1), randF32(r, sh.G, 1)
		for i := range hv {
			if r.IntN(50) == 0 {
				hv[i] *= 40
			}
		}
		wp := g.put(cuda.Bytes(wv))
		h0, d0, x0 := g.put(cuda.Bytes(hv)), g.put(cuda.Bytes(dv)), g.poisonedF32(n)
		g.run(func(c *cuda.Ctx, s cuda.Stream) error {
			if err := o.Add(c, s, h0, h0, d0, n); err != nil {
				return err
			}
			return o.RMSNorm(c, s, x0, h0, wp, groups, sh.G, eps)
		})
		wantH, wantX := g.f32s(h0, n), g.f32s(x0, n)
		for i, v := range wantH {
			if v != hv[i]+dv[i] {
				t.Fatalf("add %+v: element %d = %g, want %g", sh, i, v, hv[i]+dv[i])
			}
		}
		if o.AddRMSNormClusters(sh.G) {
			clustered++
			wantX = addRMSNormClusterBits(wantH, wv, sh.G, eps)
			ref := make([]float64, n)
			for g0 := 0; g0 < n; g0 += sh.G {
				var ss float64
				for _, v := range wantH[g0 : g0+sh.G] {
					ss += float64(v) * float64(v)
				}
				rr := 1 / math.Sqrt(ss/float64(sh.G)+eps)
				for i := range sh.G {
					ref[g0+i] = float64(wv[i]) * float64(wantH[g0+i]) * rr
				}
			}
			// TestOpsRMSNorm's bound (the same roundings in another order).
			checkClose(t, fmt.Sprintf("add_rmsnorm %+v cluster order emulated", sh), wantX, ref, func(i int) float64 { return 6*eps32*math.Abs(ref[i]) + 1e-37 })
		}
		for _, mode := range []struct{ aliased, early bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			aliased, early := mode.aliased, mode.early // early (v21): h and w read before the dependency wait, the same bits
			hp, dp := g.put(cuda.Bytes(hv)), g.put(cuda.Bytes(dv))
			xp := dp
			if !aliased {
				xp = g.poisonedF32(n)
			}
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				if early {
					return o.AddRMSNormHalfEarly(c, s, hp, xp, 0, dp, wp, groups, sh.G, eps, true)
				}
				return o.AddRMSNorm(c, s, hp, xp, dp, wp, groups, sh.G, eps)
			})
			what := fmt.Sprintf("add_rmsnorm %+v x=delta %v early %v", sh, aliased, early)
			sameF32(t, what+": h", g.f32s(hp, n), wantH)
			sameF32(t, what+": x", g.f32s(xp, n), wantX)

			// With x's fp16 copy (v19): the same h and x, and xh is
			// f32_to_f16 of x.
			hp, dp = g.put(cuda.Bytes(hv)), g.put(cuda.Bytes(dv))
			xp = dp
			if !aliased {
				xp = g.poisonedF32(n)
			}
			xh := g.poisonedF16(n)
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				return o.AddRMSNormHalfEarly(c, s, hp, xp, xh, dp, wp, groups, sh.G, eps, early)
			})
			sameF32(t, what+" fp16 copy: h", g.f32s(hp, n), wantH)
			sameF32(t, what+" fp16 copy: x", g.f32s(xp, n), wantX)
			sameU16(t, what+" fp16 copy: xh", g.u16s(xh, n), g.halfOf(o, xp, n))
		}
	}
	if strings.HasPrefix(d.Arch(), "sm_9") && clustered == 0 { // Hopper has clusters: the kernel must be there
		t.Fatalf("%s: no shape ran add_rmsnorm_cluster", d.Arch())
	}
}

// addRMSNormClusterBits emulates ops.cu's add_rmsnorm_cluster to the bit
// for rows h [groups, G] (h already the sum): CTA c of 8 takes the slice
// [c·S, min(G, (c+1)·S)), S = ceil(G/8); its thread l of 128 sums the
// squares of the slice's elements l, l + 128, ... in float64; the CTA's
// tree (partial[l] += partial[l + s], s = 64, ..., 1); the row's sum 0 +
// cta0 + cta1 + ... + cta7; then rmsnormBits's mean, r and products.
func addRMSNormClusterBits(h, w []float32, G int, eps float32) []float32 {
	const ctas, threads = 8, 128
	S := (G + ctas - 1) / ctas
	y := make([]float32, len(h))
	partial := make([]float64, threads)
	for g0 := 0; g0 < len(h); g0 += G {
		row := h[g0 : g0+G]
		total := 0.0
		for c := range ctas {
			lo, hi := c*S, min(G, (c+1)*S)
			for l := range partial {
				partial[l] = 0
				for i := lo + l; i < hi; i += threads {
					v := float64(row[i])
					partial[l] += v * v
				}
			}
			for s := threads / 2; s > 0; s /= 2 {
				for l := range s {
					partial[l] += partial[l+s]
				}
			}
			total += partial[0]
		}
		mean := float32(total / float64(G))
		r := float32(1 / math.Sqrt(float64(float32(mean+eps))))
		for i, v := range row {
			y[g0+i] = float32(w[i] * float32(v*r))
		}
	}
	return y
}

// TestOpsRoPEQK: rope_qk gives the bits of rmsnorm of each head (when norm
// weights are given) then rope, on q and on k (whose float64 references
// TestOpsRMSNorm and TestOpsRoPE check), for head dims 2 to 256 and
// grouped-query head counts.
func TestOpsRoPEQK(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(23, 24))
	const eps = 1e-6
	for _, sh := range []struct{ T, Hq, Hk, D int }{{1, 32, 8, 128}, {3, 4, 2, 128}, {9, 8, 8, 64}, {2, 3, 1, 256}, {4, 1, 1, 2}, {5, 16, 8, 128}} {
		half := sh.D / 2
		Cq, Ck := sh.Hq*sh.D, sh.Hk*sh.D
		inv := make([]float32, half)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(sh.D)))
		}
		pos := make([]int32, sh.T)
		for i := range pos {
			pos[i] = int32(r.IntN(9000))
		}
		qv, kv := randF32(r, sh.T*Cq, 3), randF32(r, sh.T*Ck, 3)
		pp, ip := g.put(cuda.Bytes(pos)), g.put(cuda.Bytes(inv))
		qn, kn := g.put(cuda.Bytes(randF32(r, sh.D, 1))), g.put(cuda.Bytes(randF32(r, sh.D, 1)))
		for _, norm := range []bool{false, true} {
			q0, k0 := g.put(cuda.Bytes(qv)), g.put(cuda.Bytes(kv))
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				if norm {
					if err := o.RMSNorm(c, s, q0, q0, qn, sh.T*sh.Hq, sh.D, eps); err != nil {
						return err
					}
					if err := o.RMSNorm(c, s, k0, k0, kn, sh.T*sh.Hk, sh.D, eps); err != nil {
						return err
					}
				}
				if err := o.RoPE(c, s, q0, pp, ip, sh.T, Cq, half); err != nil {
					return err
				}
				return o.RoPE(c, s, k0, pp, ip, sh.T, Ck, half)
			})
			wantQ, wantK := g.f32s(q0, sh.T*Cq), g.f32s(k0, sh.T*Ck)
			qp, kp := g.put(cuda.Bytes(qv)), g.put(cuda.Bytes(kv))
			var qw, kw cuda.DevicePtr
			if norm {
				qw, kw = qn, kn
			}
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				return o.RoPEQK(c, s, qp, kp, pp, ip, qw, kw, sh.T, sh.Hq, sh.Hk, half, eps)
			})
			what := fmt.Sprintf("rope_qk %+v norm %v", sh, norm)
			sameF32(t, what+": q", g.f32s(qp, sh.T*Cq), wantQ)
			sameF32(t, what+": k", g.f32s(kp, sh.T*Ck), wantK)
		}
	}
}

func TestOpsBadShapes(t *testing.T) {
	d, o := opsSetup(t)
	err := d.Do(func(c *cuda.Ctx) error {
		s := d.Stream()
		for _, e := range []error{
			o.RMSNorm(c, s, 0, 0, 0, 0, 4, 1e-5),
			o.RoPE(c, s, 0, 0, 0, 2, 10, 4),
			o.AddRMSNorm(c, s, 0, 0, 0, 0, 0, 4, 1e-5),
			o.RoPEQK(c, s, 0, 0, 0, 0, 0, 0, 1, 0, 2, 4, 1e-5),
			o.RoPEQK(c, s, 0, 0, 0, 0, 1, 0, 1, 2, 2, 4, 1e-5),
			o.RoPEQK(c, s, 0, 0, 0, 0, 0, 0, 1, 1<<16, 2, 4, 1e-5),
			o.Add(c, s, 0, 0, 0, 0),
			o.EmbeddingF16(c, s, 0, 0, 0, 1, 4, 0),
		} {
			if e == nil {
				return fmt.Errorf("a bad shape was launched")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpsSplitCols: split_cols copies each output's columns of y [T, ΣN]
// exactly and adds its bias as add_bias does (exact float32 sums), into
// NaN-poisoned outputs, for three and two outputs, with and without biases,
// and row counts that leave the grid-stride loop a ragged tail; swiglu_cols
// gives the bits of split_cols then swiglu, with gate's output written,
// replaced by dst, or up's replaced.
func TestOpsSplitCols(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(19, 20))
	for _, sh := range []struct {
		T    int
		N    []int
		bias bool
	}{{55, []int{4096, 1024, 1024}, false}, {3, []int{64, 16, 16}, true}, {1, []int{12, 4}, true}, {7, []int{20, 20}, true}, {100, []int{1028, 1028}, false}} {
		total := 0
		for _, n := range sh.N {
			total += n
		}
		y := randF32(r, sh.T*total, 2)
		yp := g.put(cuda.Bytes(y))
		outs := make([]kernels.ColsOut, len(sh.N))
		biases := make([][]float32, len(sh.N))
		for i, n := range sh.N {
			outs[i] = kernels.ColsOut{Y: g.poisonedF32(sh.T * n), N: n}
			if sh.bias {
				biases[i] = randF32(r, n, 1)
				outs[i].Bias = g.put(cuda.Bytes(biases[i]))
			}
		}
		g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.SplitCols(c, s, yp, sh.T, outs...) })
		off := 0
		for i, n := range sh.N {
			got := g.f32s(outs[i].Y, sh.T*n)
			for tt := range sh.T {
				for j := range n {
					want := y[tt*total+off+j]
					if sh.bias {
						want += biases[i][j]
					}
					if e := got[tt*n+j]; math.Float32bits(e) != math.Float32bits(want) {
						t.Fatalf("split_cols T=%d N=%v output %d [%d, %d] = %g, want %g (exact)", sh.T, sh.N, i, tt, j, e, want)
					}
				}
			}
			off += n
		}

		if len(sh.N) != 2 || sh.N[0] != sh.N[1] {
			continue
		}
		// swiglu_cols against split_cols (above) then swiglu, and with
		// GeGLU's activation against split_cols then geglu.
		N := sh.N[0]
		for _, act := range []kernels.Act{kernels.ActSiLU, kernels.ActGeluTanh} {
			sep := g.poisonedF32(sh.T * N)
			g.run(func(c *cuda.Ctx, s cuda.Stream) error {
				if act == kernels.ActGeluTanh {
					return o.GeGLU(c, s, sep, outs[0].Y, outs[1].Y, sh.T*N)
				}
				return o.SwiGLU(c, s, sep, outs[0].Y, outs[1].Y, sh.T*N)
			})
			want, wantGate, wantUp := g.f32s(sep, sh.T*N), g.f32s(outs[0].Y, sh.T*N), g.f32s(outs[1].Y, sh.T*N)
			for _, mode := range []string{"dst apart", "dst = gate", "dst = up"} {
				gate := kernels.ColsOut{Y: g.poisonedF32(sh.T * N), Bias: outs[0].Bias, N: N}
				up := kernels.ColsOut{Y: g.poisonedF32(sh.T * N), Bias: outs[1].Bias, N: N}
				dst := g.poisonedF32(sh.T * N)
				switch mode {
				case "dst = gate":
					dst, gate.Y = gate.Y, 0
				case "dst = up":
					dst, up.Y = up.Y, 0
				}
				g.run(func(c *cuda.Ctx, s cuda.Stream) error { return o.GLUColsHalf(c, s, act, yp, dst, 0, sh.T, gate, up) })
				what := fmt.Sprintf("swiglu_cols %v T=%d N=%d bias=%v %s", act, sh.T, N, sh.bias, mode)
				sameF32(t, what+": dst", g.f32s(dst, sh.T*N), want)
				if gate.Y != 0 {
					sameF32(t, what+": gate", g.f32s(gate.Y, sh.T*N), wantGate)
				}
				if up.Y != 0 {
					sameF32(t, what+": up", g.f32s(up.Y, sh.T*N), wantUp)
				}

				// With dst's fp16 copy (v19): the same dst, and dh is
				// f32_to_f16 of it.
				dst2, dh := g.poisonedF32(sh.T*N), g.poisonedF16(sh.T*N)
				g.run(func(c *cuda.Ctx, s cuda.Stream) error {
					return o.GLUColsHalf(c, s, act, yp, dst2, dh, sh.T, kernels.ColsOut{Bias: gate.Bias, N: N}, kernels.ColsOut{Bias: up.Bias, N: N})
				})
				sameF32(t, what+" fp16 copy: dst", g.f32s(dst2, sh.T*N), want)
				sameU16(t, what+" fp16 copy: dh", g.u16s(dh, sh.T*N), g.halfOf(o, dst2, sh.T*N))
			}
		}
	}

	// Widths that are not a multiple of 4 are refused, not misread.
	yp := g.poisonedF32(64)
	err := d.Do(func(c *cuda.Ctx) error {
		return o.SplitCols(c, d.Stream(), yp, 2, kernels.ColsOut{Y: g.poisonedF32(6), N: 3}, kernels.ColsOut{Y: g.poisonedF32(6), N: 3})
	})
	if err == nil || !strings.Contains(err.Error(), "multiple of 4") {
		t.Fatalf("split_cols of 3-column outputs: err = %v, want a refusal", err)
	}
}

// TestOpsRoPECols: rope_cols gives the bits of split_cols then rope_qk
// without norms (whose references TestOpsSplitCols and TestOpsRoPE check)
// into NaN-poisoned outputs: Llama-3.1-8B's q|k|v at 55 rows, biases on
// some outputs, no v, head dims 2 to 256, ragged v widths.
func TestOpsRoPECols(t *testing.T) {
	d, o := opsSetup(t)
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(25, 26))
	for _, sh := range []struct {
		T, Hq, Hk, D, Nv int
		bias             bool
	}{{55, 32, 8, 128, 1024, false}, {3, 4, 2, 64, 128, true}, {1, 2, 2, 2, 0, true}, {7, 3, 1, 256, 20, true}, {100, 8, 8, 64, 0, false}, {2, 16, 8, 128, 1028, true}} {
		half := sh.D / 2
		Nq, Nk := sh.Hq*sh.D, sh.Hk*sh.D
		total := Nq + Nk + sh.Nv
		inv := make([]float32, half)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(sh.D)))
		}
		pos := make([]int32, sh.T)
		for i := range pos {
			pos[i] = int32(r.IntN(131072))
		}
		pp, ip := g.put(cuda.Bytes(pos)), g.put(cuda.Bytes(inv))
		yp := g.put(cuda.Bytes(randF32(r, sh.T*total, 2)))
		ns := []int{Nq, Nk, sh.Nv}
		if sh.Nv == 0 {
			ns = ns[:2]
		}
		outs := func() []kernels.ColsOut {
			os := make([]kernels.ColsOut, len(ns))
			for i, n := range ns {
				os[i] = kernels.ColsOut{Y: g.poisonedF32(sh.T * n), N: n}
			}
			return os
		}
		want, got := outs(), outs()
		if sh.bias {
			for i, n := range ns {
				if i != 1 { // k without a bias
					b := g.put(cuda.Bytes(randF32(r, n, 1)))
					want[i].Bias, got[i].Bias = b, b
				}
			}
		}
		g.run(func(c *cuda.Ctx, s cuda.Stream) error {
			if err := o.SplitCols(c, s, yp, sh.T, want...); err != nil {
				return err
			}
			return o.RoPEQK(c, s, want[0].Y, want[1].Y, pp, ip, 0, 0, sh.T, sh.Hq, sh.Hk, half, 1e-6)
		})
		var v kernels.ColsOut
		if sh.Nv > 0 {
			v = got[2]
		}
		g.run(func(c *cuda.Ctx, s cuda.Stream) error {
			return o.RoPECols(c, s, yp, pp, ip, sh.T, half, got[0], got[1], v)
		})
		for i, n := range ns {
			what := fmt.Sprintf("rope_cols %+v output %d", sh, i)
			w := g.f32s(want[i].Y, sh.T*n)
			for j, x := range w {
				if x != x {
					t.Fatalf("%s: the separate kernels left element %d NaN", what, j)
				}
			}
			sameF32(t, what, g.f32s(got[i].Y, sh.T*n), w)
		}
	}

	// Heads that are not whole, or a v of 3 columns, are refused.
	yp := g.poisonedF32(256)
	q, k := kernels.ColsOut{Y: g.poisonedF32(64), N: 12}, kernels.ColsOut{Y: g.poisonedF32(64), N: 8}
	err := d.Do(func(c *cuda.Ctx) error {
		if err := o.RoPECols(c, d.Stream(), yp, yp, yp, 2, 4, q, k, kernels.ColsOut{}); err == nil {
			return fmt.Errorf("q of 12 columns in heads of 8 was launched")
		}
		k.N = 16
		return o.RoPECols(c, d.Stream(), yp, yp, yp, 2, 4, kernels.ColsOut{Y: q.Y, N: 16}, k, kernels.ColsOut{Y: g.poisonedF32(8), N: 3})
	})
	if err == nil || !strings.Contains(err.Error(), "rope_cols") {
		t.Fatalf("rope_cols of a bad shape: err = %v, want a refusal", err)
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

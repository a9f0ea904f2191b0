package cuda

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// f32ToF16 rounds f to IEEE half, to nearest even.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b>>23&0xff == 0xff: // inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0: // subnormal half
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		h := mant >> shift
		rem, halfway := mant&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > halfway || rem == halfway && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, rounding up to the next binade or inf
	}
	return sign | uint16(h)
}

// f16ToF32 widens an IEEE half.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		v := float32(mant) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | mant<<13)
}

// f32ToBF16 rounds f to bfloat16, to nearest even (finite inputs).
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func TestHalfConversions(t *testing.T) {
	tests := []struct {
		f float32
		h uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff}, {1e6, 0x7c00},
		{float32(math.Ldexp(1, -24)), 0x0001}, {float32(math.Ldexp(1, -14)), 0x0400},
		{1 + 1.0/2048, 0x3c00}, // halfway, rounds to even
		{1 + 3.0/2048, 0x3c02}, // halfway, rounds to even (up)
		{float32(math.Inf(-1)), 0xfc00},
	}
	for _, tt := range tests {
		if got := f32ToF16(tt.f); got != tt.h {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", tt.f, got, tt.h)
		}
	}
	for h := 0; h < 0x7c00; h++ { // every finite positive half round-trips
		if got := f32ToF16(f16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f16ToF32(uint16(h)), got)
		}
	}
	if f32ToBF16(1) != 0x3f80 || bf16ToF32(0xc000) != -2 {
		t.Error("bf16 conversion")
	}
}

// colMajorGEMM computes D = op(A)·op(B) exactly as cuBLASLt defines it for
// column-major operands: A is aRows×aCols with leading dimension aLD, and
// op(A) is m×k; likewise B (k×n after op); D is m×n with leading dimension
// cLD.
func colMajorGEMM(l ltLayout, a, b []float64) []float64 {
	opA := func(i, p int) float64 { // element (i, p) of op(A), m×k
		if l.transA == cublasOpT {
			return a[p+i*l.aLD]
		}
		return a[i+p*l.aLD]
	}
	opB := func(p, j int) float64 { // element (p, j) of op(B), k×n
		if l.transB == cublasOpT {
			return b[j+p*l.bLD]
		}
		return b[p+j*l.bLD]
	}
	d := make([]float64, l.cLD*l.n)
	for j := 0; j < l.n; j++ {
		for i := 0; i < l.m; i++ {
			var s float64
			for p := 0; p < l.k; p++ {
				s += opA(i, p) * opB(p, j)
			}
			d[i+j*l.cLD] = s
		}
	}
	return d
}

// TestLinearLayoutMapping checks, without a GPU, that handing cuBLASLt the
// row-major buffers with linearLayout's descriptors computes the row-major
// Y = X·Wᵀ.
func TestLinearLayoutMapping(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, g := range []GEMMShape{{M: 3, N: 5, K: 7}, {M: 1, N: 4, K: 2}, {M: 6, N: 1, K: 3}, {M: 4, N: 4, K: 4}} {
		x := make([]float64, g.M*g.K) // row-major [M,K]
		w := make([]float64, g.N*g.K) // row-major [N,K]
		for i := range x {
			x[i] = rng.Float64()*2 - 1
		}
		for i := range w {
			w[i] = rng.Float64()*2 - 1
		}
		l := linearLayout(g)
		if l.aRows*l.aCols != len(w) || l.bRows*l.bCols != len(x) || l.cRows*l.cCols != g.M*g.N {
			t.Fatalf("%+v: layout sizes do not match the buffers: %+v", g, l)
		}
		if l.m != l.cRows || l.n != l.cCols || l.aLD < l.aRows || l.bLD < l.bRows || l.cLD < l.cRows {
			t.Fatalf("%+v: inconsistent layout %+v", g, l)
		}
		y := colMajorGEMM(l, w, x) // A = W, B = X, as GEMM passes them
		for m := 0; m < g.M; m++ {
			for n := 0; n < g.N; n++ {
				var want float64
				for k := 0; k < g.K; k++ {
					want += x[m*g.K+k] * w[n*g.K+k]
				}
				if got := y[m*g.N+n]; math.Abs(got-want) > 1e-12 {
					t.Fatalf("%+v: Y[%d,%d] = %g, want %g", g, m, n, got, want)
				}
			}
		}
	}
}

func TestGEMMShapeValidate(t *testing.T) {
	tests := []struct {
		g    GEMMShape
		want string
	}{
		{GEMMShape{M: 1, N: 1, K: 1, In: F16, Out: F16}, ""},
		{GEMMShape{M: 1, N: 1, K: 1, In: BF16, Out: F32}, ""},
		{GEMMShape{M: 0, N: 1, K: 1, In: F16, Out: F16}, "must be positive"},
		{GEMMShape{M: 1, N: 1, K: 1, In: F32, Out: F32}, "want f16 or bf16"},
		{GEMMShape{M: 1, N: 1, K: 1, In: F16, Out: BF16}, "the output must be the input type or f32"},
	}
	for _, tt := range tests {
		err := tt.g.validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validate(%+v) = %v, want %q", tt.g, err, tt.want)
		}
	}
}

func TestAlignmentOf(t *testing.T) {
	tests := []struct {
		p    DevicePtr
		want uint32
	}{{0x7f0000000000, 256}, {0x7f0000000100, 256}, {0x7f0000000080, 128}, {0x7f0000000002, 2}, {0x7f0000000001, 1}}
	for _, tt := range tests {
		if got := alignmentOf(tt.p); got != tt.want {
			t.Errorf("alignmentOf(%#x) = %d, want %d", tt.p, got, tt.want)
		}
	}
}

func TestFindIncludeDir(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string) string {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, probeHeader), []byte("// fp16"), 0o644)
		return dir
	}
	noGlob := func(string) ([]string, error) { return nil, nil }

	home := mk(filepath.Join(root, "cudahome", "include"))
	if got := findIncludeDir(env(map[string]string{"CUDA_HOME": filepath.Join(root, "cudahome")}).IncludeDirs, "", noGlob); got != home {
		t.Errorf("CUDA_HOME: got %q, want %q", got, home)
	}
	// The NVRTC library's ../include (pip wheels: nvidia/cu13/lib + include).
	wheel := mk(filepath.Join(root, "wheel", "include"))
	lib := filepath.Join(root, "wheel", "lib", "libnvrtc.so.13")
	os.MkdirAll(filepath.Dir(lib), 0o755)
	os.WriteFile(lib, nil, 0o644)
	if got := findIncludeDir(nil, lib, noGlob); got != wheel && !strings.HasPrefix(got, "/usr/local/cuda") {
		t.Errorf("nvrtc dir: got %q, want %q", got, wheel)
	}
	// A directory without cuda_fp16.h does not count.
	empty := filepath.Join(root, "empty", "include")
	os.MkdirAll(empty, 0o755)
	got := findIncludeDir(env(map[string]string{"CUDA_HOME": filepath.Join(root, "empty")}).IncludeDirs, "", noGlob)
	if got == empty {
		t.Errorf("picked %q, which has no %s", got, probeHeader)
	}
}

func TestCompileOptions(t *testing.T) {
	n := &nvrtcLib{}
	opts := n.compileOptions("sm_90a", []string{"-DX=1"})
	if opts[0] != "--gpu-architecture=sm_90a" || opts[len(opts)-1] != "-DX=1" {
		t.Errorf("options %v", opts)
	}
	for _, o := range opts {
		if strings.Contains(o, "fast_math") || strings.HasPrefix(o, "-O") || strings.Contains(o, headerMacro) {
			t.Errorf("unexpected option %q without headers", o)
		}
	}
	dir := t.TempDir()
	n.includeDir = dir
	joined := strings.Join(n.compileOptions("sm_80", nil), " ")
	if !strings.Contains(joined, "-I"+dir) || !strings.Contains(joined, "-D"+headerMacro+"=1") {
		t.Errorf("with headers: %s", joined)
	}
}

// TestGPUGEMMGraphReplay captures GEMMs of decode-batch shapes (55 and 100
// rows: int4's and int2's max batch at 32K) into a CUDA graph after a
// direct call of the same shape (which builds the plan: the heuristic and
// the workspace stay outside the capture) and replays it twice over a
// NaN-poisoned output: every replay must give the direct call's bits.
func TestGPUGEMMGraphReplay(t *testing.T) {
	d := testDevice(t)
	for _, g := range []GEMMShape{
		{M: 55, N: 1024, K: 4096, In: F16, Out: F32},
		{M: 100, N: 4096, K: 1024, In: F16, Out: F32},
	} {
		rng := rand.New(rand.NewPCG(uint64(g.M), uint64(g.N)))
		x := make([]uint16, g.M*g.K)
		w := make([]uint16, g.N*g.K)
		for i := range x {
			x[i] = f32ToF16(float32(rng.NormFloat64()))
		}
		for i := range w {
			w[i] = f32ToF16(float32(0.02 * rng.NormFloat64()))
		}
		n := g.M * g.N
		direct := make([]float32, n)
		replays := [2][]float32{make([]float32, n), make([]float32, n)}
		must(t, d.Do(func(c *Ctx) error {
			px, err := c.Alloc(2 * len(x))
			if err != nil {
				return err
			}
			defer c.Free(px)
			pw, err := c.Alloc(2 * len(w))
			if err != nil {
				return err
			}
			defer c.Free(pw)
			py, err := c.Alloc(4 * n)
			if err != nil {
				return err
			}
			defer c.Free(py)
			if err := c.HtoD(px, Bytes(x)); err != nil {
				return err
			}
			if err := c.HtoD(pw, Bytes(w)); err != nil {
				return err
			}
			s := d.Stream()
			if err := c.Memset8Async(py, 0xff, 4*n, s); err != nil {
				return err
			}
			if err := c.GEMM(s, g, py, px, pw); err != nil {
				return err
			}
			if err := c.SyncStream(s); err != nil {
				return err
			}
			if err := c.DtoH(Bytes(direct), py); err != nil {
				return err
			}
			if err := c.BeginCapture(s); err != nil {
				return err
			}
			if err := c.GEMM(s, g, py, px, pw); err != nil {
				c.EndCapture(s)
				return err
			}
			graph, err := c.EndCapture(s)
			if err != nil {
				return err
			}
			defer c.DestroyGraph(graph)
			for _, out := range replays {
				if err := c.Memset8Async(py, 0xff, 4*n, s); err != nil {
					return err
				}
				if err := c.LaunchGraph(graph, s); err != nil {
					return err
				}
				if err := c.SyncStream(s); err != nil {
					return err
				}
				if err := c.DtoH(Bytes(out), py); err != nil {
					return err
				}
			}
			return nil
		}))
		for r, out := range replays {
			for i := range out {
				if math.Float32bits(out[i]) != math.Float32bits(direct[i]) || out[i] != out[i] {
					t.Fatalf("%+v: replay %d: Y[%d,%d] = %g, direct %g", g, r+1, i/g.N, i%g.N, out[i], direct[i])
				}
			}
		}
		t.Logf("%v M=%d N=%d K=%d: two graph replays bitwise the direct call", g.In, g.M, g.N, g.K)
	}
}

package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// decSetup opens the device and compiles dec.cu (without the fused
// protocol's self-test: kernels.LoadDEC), or skips.
func decSetup(t *testing.T) (*cuda.Device, *kernels.DEC) {
	t.Helper()
	d := device(t)
	k, err := kernels.LoadDEC(d)
	if err != nil {
		t.Fatalf("compile dec.cu: %v", err)
	}
	return d, k
}

// decSelfTestSetup is decSetup with the fused protocol's self-test
// (kernels.LoadDECSelfTest).
func decSelfTestSetup(t *testing.T) (*cuda.Device, *kernels.DEC) {
	t.Helper()
	d := device(t)
	k, err := kernels.LoadDECSelfTest(d)
	if err != nil {
		t.Fatalf("compile dec.cu with its self-test: %v", err)
	}
	return d, k
}

// fixtures memoizes the quantized matrices the DEC tests draw (residuals,
// and TestGEMVQDECMatchesSerial's weights) by recipe: quantizing one of
// the 8B shapes takes seconds of CPU, and the cases of a shape share it.
// Each is drawn from a generator seeded by its recipe alone, so a case sees
// the same values whichever others -test.run selects.
var fixtures struct {
	sync.Mutex
	m map[fixtureKey]*wq.Matrix
}

// fixtureKey is a matrix's recipe: a residual Rᵀ [K][N] (randomResidual)
// or a weight [N][K] (N(0, 0.02²) values, groups of 128) of element type e.
type fixtureKey struct {
	weight bool
	e      wq.Elem
	N, K   int
}

// fixture returns the matrix of recipe k, quantized on its first use.
func fixture(t *testing.T, k fixtureKey) *wq.Matrix {
	t.Helper()
	fixtures.Lock()
	defer fixtures.Unlock()
	if m := fixtures.m[k]; m != nil {
		return m
	}
	seed := uint64(k.e) << 1
	if k.weight {
		seed |= 1
	}
	r := rand.New(rand.NewPCG(uint64(k.N)<<32|uint64(k.K), seed))
	var m *wq.Matrix
	if k.weight {
		w := make([]float32, k.N*k.K)
		for i := range w {
			w[i] = float32(0.02 * r.NormFloat64())
		}
		var err error
		if m, err = wq.Quantize(k.e, 128, k.N, k.K, w); err != nil {
			t.Fatal(err)
		}
	} else {
		m = randomResidual(t, r, k.e, k.N, k.K)
	}
	if fixtures.m == nil {
		fixtures.m = map[fixtureKey]*wq.Matrix{}
	}
	fixtures.m[k] = m
	return m
}

// mappedResidual copies the residual Rᵀ (wq matrix of K rows, N columns)
// into host memory mapped into the device, freed at the test's end.
func mappedResidual(t *testing.T, d *cuda.Device, r *wq.Matrix) *kernels.DECResidual {
	t.Helper()
	words, params := cuda.Bytes(r.Words), cuda.Bytes(r.Params)
	off := (len(words) + 255) / 256 * 256
	var h *cuda.HostBuffer
	err := d.Do(func(c *cuda.Ctx) error {
		var err error
		h, err = c.AllocHost(off+max(len(params), 16), true)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Do(func(c *cuda.Ctx) error { return c.FreeHost(h) }) })
	copy(h.Bytes(), words)
	copy(h.Bytes()[off:], params)
	res := &kernels.DECResidual{Elem: r.Elem, Words: h.DevicePtr(), N: r.K, K: r.N}
	if r.Elem.IsInt() {
		res.Params = h.DevicePtr() + cuda.DevicePtr(off)
	}
	return res
}

// randomResidual returns a residual Rᵀ [K][N] in element type e with
// values like a 4-bit weight's error (N(0, 0.002²), a few x10 outliers).
func randomResidual(t *testing.T, r *rand.Rand, e wq.Elem, N, K int) *wq.Matrix {
	t.Helper()
	rt := make([]float32, K*N)
	for i := range rt {
		rt[i] = float32(0.002 * r.NormFloat64())
		if i%389 == 7 {
			rt[i] *= 10
		}
	}
	m, err := wq.Quantize(e, wq.ResidualGroup, K, N, rt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDECFixtures checks the DEC tests' shared matrices (fixture, no GPU):
// a recipe gives the same matrix every time, a residual and a weight of
// one shape are different matrices of their own layouts, and a recipe's
// values depend on the recipe alone (a fresh draw equals the memoized one).
func TestDECFixtures(t *testing.T) {
	const N, K = 256, 1152
	w := fixture(t, fixtureKey{weight: true, e: wq.Int4, N: N, K: K})
	res := fixture(t, fixtureKey{e: wq.Int4, N: N, K: K})
	if fixture(t, fixtureKey{weight: true, e: wq.Int4, N: N, K: K}) != w || fixture(t, fixtureKey{e: wq.Int4, N: N, K: K}) != res {
		t.Fatal("a recipe's second use quantized again")
	}
	if w.N != N || w.K != K || w.Group != 128 || res.N != K || res.K != N || res.Group != wq.ResidualGroup {
		t.Fatalf("weight [%d, %d] g%d, residual [%d, %d] g%d; want [%d, %d] g128 and [%d, %d] g%d", w.N, w.K, w.Group, res.N, res.K, res.Group,
			N, K, K, N, wq.ResidualGroup)
	}
	if slices.Equal(w.Words, res.Words) {
		t.Fatal("the weight and the residual of one shape have the same codes")
	}
	key := fixtureKey{e: wq.Int8, N: 128, K: 1024}
	first := fixture(t, key)
	fixtures.Lock()
	delete(fixtures.m, key)
	fixtures.Unlock()
	if again := fixture(t, key); again == first || !slices.Equal(again.Words, first.Words) || !slices.Equal(again.Params, first.Params) {
		t.Fatal("a recipe drawn twice gave different values")
	}
}

// TestDECSelectMatchesWQ runs dec.cu's select_topk on T = 3 tokens of
// realistic activations (outlier channels; ties, zeros and subnormals in
// the other modes) and requires each token's list to equal
// wq.SelectApprox's exactly, for K a multiple of 1024 or not and k_chunk
// from 0 to 1024. It logs the recall against the exact top-k.
func TestDECSelectMatchesWQ(t *testing.T) {
	d, k := decSetup(t)
	r := rand.New(rand.NewPCG(91, 92))
	const T = 3
	recall := map[int][]float64{}
	for _, K := range []int{4096, 14336, 1000, 1537, 3001} {
		for _, kChunk := range []int{0, 1, 8, 32, 100, 1024} {
			for mode := range 3 {
				name := fmt.Sprintf("K%d-k%d-mode%d", K, kChunk, mode)
				m := newGPUMem(t, d)
				x := make([]float32, 0, T*K)
				for range T {
					x = append(x, kernels.DECTestActivations(r, K, mode)...)
				}
				S := kernels.DECSelected(K, kChunk)
				if kChunk == 0 && S != 0 {
					t.Fatalf("%s: S = %d, want 0", name, S)
				}
				selp := m.put(make([]byte, 4*max(T*S, 1)))
				xp := m.put(cuda.Bytes(x))
				// A poisoned scratch: every slot must be written.
				poison := make([]int32, T*S)
				for i := range poison {
					poison[i] = -7
				}
				m.write(selp, cuda.Bytes(poison))
				// Select reads x and K only; the residual is a placeholder.
				l := &kernels.DECLaunch{X: xp, Y: xp, Sel: selp, T: T, KChunk: kChunk, Blocks: 1,
					R: &kernels.DECResidual{Elem: wq.FP16, Words: 0x100, N: 32, K: K}}
				m.run(func(c *cuda.Ctx, s cuda.Stream) error { return k.Select(c, s, l) })
				got := make([]int32, T*S)
				m.read(cuda.Bytes(got), selp)
				for ti := range T {
					xt := x[ti*K : (ti+1)*K]
					want := wq.SelectApprox(nil, xt, kChunk)
					if g := got[ti*S : (ti+1)*S]; !slices.Equal(g, want) {
						i := 0
						for i < len(want) && g[i] == want[i] {
							i++
						}
						t.Fatalf("%s token %d: first difference at %d: got %d, want %d (of %d)", name, ti, i, g[i], want[i], S)
					}
					if mode == 0 && kChunk > 0 {
						recall[kChunk] = append(recall[kChunk], wq.Recall(want, wq.SelectExact(nil, xt, kChunk)))
					}
				}
			}
		}
	}
	for _, kChunk := range []int{1, 8, 32, 100, 1024} {
		var sum float64
		for _, v := range recall[kChunk] {
			sum += v
		}
		t.Logf("k_chunk %4d: recall of the approximate top-k vs exact %.4f (mean of %d tokens)", kChunk, sum/float64(len(recall[kChunk])), len(recall[kChunk]))
	}
}

// decCase is one compensation shape.
type decCase struct {
	e            wq.Elem
	N, K, T      int
	kChunk, nTB  int
	tokenPattern int // activation mode of DECTestActivations
}

// runSerial uploads everything, runs Select and Compensate, and returns y.
func runSerial(t *testing.T, d *cuda.Device, k *kernels.DEC, res *kernels.DECResidual, x, yBase []float32, c decCase) []float32 {
	t.Helper()
	m := newGPUMem(t, d)
	S := kernels.DECSelected(c.K, c.kChunk)
	l := &kernels.DECLaunch{X: m.put(cuda.Bytes(x)), Y: m.put(cuda.Bytes(yBase)), Sel: m.put(make([]byte, 4*max(c.T*S, 1))),
		R: res, T: c.T, KChunk: c.kChunk, Blocks: c.nTB}
	m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
		if err := k.Select(cx, s, l); err != nil {
			return err
		}
		return k.Compensate(cx, s, l)
	})
	return m.f32s(l.Y, c.T*c.N)
}

// wantCompensated applies wq.Compensate to each token of yBase.
func wantCompensated(x, yBase []float32, r *wq.Matrix, c decCase) []float32 {
	want := slices.Clone(yBase)
	for ti := range c.T {
		xt := x[ti*c.K : (ti+1)*c.K]
		wq.Compensate(want[ti*c.N:(ti+1)*c.N], xt, wq.SelectApprox(nil, xt, c.kChunk), r, nil)
	}
	return want
}

// emptyPart returns n words of kernels.DECPartEmpty: a fused launch's part
// buffer before its first launch.
func emptyPart(n int) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		v[i] = kernels.DECPartEmpty
	}
	return v
}

// checkPartEmpty fails unless every one of the n words of a fused launch's
// part buffer is kernels.DECPartEmpty again after run's launch (the next
// launch, or graph replay, relies on it).
func checkPartEmpty(t *testing.T, m *gpuMem, run int, part cuda.DevicePtr, n int) {
	t.Helper()
	got := make([]uint32, n)
	m.read(cuda.Bytes(got), part)
	for i, v := range got {
		if v != kernels.DECPartEmpty {
			t.Fatalf("run %d: part word %d = %#08x after the launch, want %#08x", run, i, v, uint32(kernels.DECPartEmpty))
		}
	}
}

// sameBits fails at the first element whose bits differ.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: y[%d] = %g (%#08x), want %g (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestDECCompensateMatchesWQ requires serial-mode DEC (Select, then
// Compensate over a residual in mapped host memory) to leave y exactly as
// wq.Compensate does, bit for bit, for int4, int8 and fp16 residuals, the
// Llama-3.1-8B shapes and odd ones, one and several tokens, k_chunk from 1
// to 1024 and n_tb from the fewest to one per 32 outputs; with k_chunk 0 y
// stays bit-identical to the base.
func TestDECCompensateMatchesWQ(t *testing.T) {
	d, k := decSetup(t)
	r := rand.New(rand.NewPCG(93, 94))
	cases := []decCase{
		{wq.Int4, 4096, 4096, 1, 32, 16, 0},
		{wq.Int4, 1024, 4096, 3, 8, 4, 1},
		{wq.Int4, 14336, 4096, 1, 64, 1, 0},
		{wq.Int4, 4096, 14336, 2, 37, 132 - 4, 2},
		{wq.Int4, 384, 1000, 3, 1, 12, 0},
		{wq.Int4, 256, 1537, 1, 1024, 3, 1},
		{wq.Int8, 4096, 4096, 2, 16, 8, 0},
		{wq.Int8, 1024, 3001, 1, 256, 32, 2},
		{wq.FP16, 4096, 4096, 1, 32, 16, 0},
		{wq.FP16, 14336, 4096, 2, 8, kernels.DECMinBlocks(wq.FP16, 14336), 0},
		{wq.FP16, 96, 1000, 4, 100, 2, 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v-N%d-K%d-T%d-k%d-ntb%d", c.e, c.N, c.K, c.T, c.kChunk, c.nTB), func(t *testing.T) {
			rm, res, x, yBase := decInputs(t, d, r, c)
			got := runSerial(t, d, k, res, x, yBase, c)
			sameBits(t, "serial", got, wantCompensated(x, yBase, rm, c))
			c0 := c
			c0.kChunk = 0
			sameBits(t, "k_chunk 0", runSerial(t, d, k, res, x, yBase, c0), yBase)
		})
	}
}

// TestDECFullMatchesExact compensates every channel (k_chunk 1024) with an
// fp16 residual of a real int4 quantization: y must then equal x·fp16(W)ᵀ
// (float64 reference) within the fp16 rounding of the residual and float32
// sums: |err| <= 2⁻²⁴·|base| + Σ_k |x_k·R_kn|·(2⁻¹¹ + (K+1)·2⁻²⁴), and the
// error must be far below the int4 base's.
func TestDECFullMatchesExact(t *testing.T) {
	d, k := decSetup(t)
	r := rand.New(rand.NewPCG(95, 96))
	const N, K, T = 512, 4096, 2
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
	}
	q, err := wq.Quantize(wq.Int4, 128, N, K, w)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := wq.NewResidual(w, q, wq.FP16)
	if err != nil {
		t.Fatal(err)
	}
	res := mappedResidual(t, d, rm)
	x := make([]float32, 0, T*K)
	for range T {
		x = append(x, kernels.DECTestActivations(r, K, 0)...)
	}
	yBase := make([]float32, T*N)
	exact := make([]float64, T*N)
	row := make([]float32, K)
	for n := range N {
		q.DequantRow(row, n)
		for ti := range T {
			var base, ex float64
			for kk := range K {
				xv := float64(x[ti*K+kk])
				base += xv * float64(row[kk])
				ex += xv * float64(wq.RoundFP16(w[n*K+kk]))
			}
			yBase[ti*N+n], exact[ti*N+n] = float32(base), ex
		}
	}
	c := decCase{wq.FP16, N, K, T, wq.ChunkChannels, 8, 0}
	got := runSerial(t, d, k, res, x, yBase, c)
	var worstBase, worstDEC float64
	for ti := range T {
		for n := range N {
			var mag float64
			for kk := range K {
				mag += math.Abs(float64(x[ti*K+kk]) * float64(rm.At(kk, n)))
			}
			i := ti*N + n
			tol := 0x1p-24*math.Abs(float64(yBase[i])) + mag*(0x1p-11+float64(K+1)*0x1p-24)
			e := math.Abs(float64(got[i]) - exact[i])
			if e > tol || got[i] != got[i] {
				t.Fatalf("y[%d,%d] = %g, want %g (tol %.3g)", ti, n, got[i], exact[i], tol)
			}
			worstDEC = max(worstDEC, e)
			worstBase = max(worstBase, math.Abs(float64(yBase[i])-exact[i]))
		}
	}
	t.Logf("largest |y − x·Wᵀ|: int4 base %.3g, with full DEC %.3g", worstBase, worstDEC)
	if worstDEC > worstBase/20 {
		t.Fatalf("full DEC error %.3g is not far below the base's %.3g", worstDEC, worstBase)
	}
}

// TestDECFusedProtocol runs fused mode's protocol (dec::fused_cta: the DEC
// CTAs select the channels themselves and claim each tile for their sums,
// trivial base CTAs that copy a known base output meet them there) three
// times in a row: y must equal serial mode's bits every time, the flags
// must be back to zero and part empty (kernels.DECPartEmpty). The cases cover in-kernel selection on K a
// multiple of 1024 or not with ties, zeros and subnormals, up to 8 tokens,
// and a selection past kernels.DECFusedSelectMax (a select_topk launch
// first).
func TestDECFusedProtocol(t *testing.T) {
	d, k := decSelfTestSetup(t)
	r := rand.New(rand.NewPCG(97, 98))
	for _, c := range []decCase{
		{wq.Int4, 4096, 4096, 2, 32, 8, 0},
		{wq.FP16, 1024, 4096, 1, 64, 3, 0},
		{wq.Int8, 14336, 4096, 3, 16, 66, 0},
		{wq.Int4, 256, 1537, 4, 100, 3, 1},
		{wq.Int4, 384, 1000, 8, 8, 5, 2},
		{wq.Int4, 1024, 14336, 2, 64, 8, 1},   // S = 896, the most k_chunk 64 selects
		{wq.Int4, 4096, 14336, 1, 128, 16, 0}, // S = 1792: select_topk first
		{wq.Int8, 512, 3001, 2, 1024, 4, 2},   // every channel
		// Many outputs per thread (P 16 and 32: 2, 1 or 4 rows in flight).
		{wq.FP16, 14336, 4096, 1, 8, 2, 0},  // P = 32, 16 words a row
		{wq.Int8, 4096, 4096, 2, 16, 1, 1},  // P = 16, 4 words a row
		{wq.Int4, 4096, 4096, 1, 64, 1, 2},  // P = 16, 2 words a row
		{wq.Int8, 14336, 4096, 1, 16, 2, 0}, // P = 32, 8 words a row
		// P = 1 with slices of 32 to 64 outputs (v8's split path ran there).
		{wq.FP16, 1024, 4096, 2, 64, 16, 1},   // 64 outputs, 2 a word
		{wq.Int4, 4096, 14336, 3, 64, 100, 0}, // 32 and 64 outputs, S = 896
	} {
		t.Run(fmt.Sprintf("%v-N%d-K%d-T%d-k%d-ntb%d-p%d", c.e, c.N, c.K, c.T, c.kChunk, c.nTB, c.tokenPattern), func(t *testing.T) {
			checkFusedProtocol(t, d, k, r, c, 0)
		})
	}
}

// TestDECFusedLateWords forces the protocol's slowest path on every tile of
// the first wave: the base CTA finds its tile claimed by the DEC CTA but
// the words not stored yet, writes the base, finds the claim with its CAS
// and must wait for the words (dec.cu's add_part). v6's first version read
// each word once there (ptxas folded the wait over a weak load into that
// load) and added the empty word, a NaN, into y: on the H100 the failure
// was deterministic here, and showed up in TestGEMVQDECMatchesSerial only
// where the DEC CTAs end with the base (docs/perf/dec.md, v6.1).
func TestDECFusedLateWords(t *testing.T) {
	d, k := decSelfTestSetup(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []decCase{
		{wq.Int4, 4096, 4096, 1, 8, 8, 0}, // the case that failed in gemv_q_dec: P = 2
		{wq.Int4, 1024, 4096, 3, 64, 4, 1},
		{wq.Int8, 512, 1000, 2, 16, 2, 2},
		{wq.FP16, 256, 1536, 8, 32, 1, 0},
		{wq.Int4, 4096, 4096, 1, 8, 64, 0}, // P = 1, 64 outputs
	} {
		t.Run(fmt.Sprintf("%v-N%d-K%d-T%d-k%d-ntb%d-p%d", c.e, c.N, c.K, c.T, c.kChunk, c.nTB, c.tokenPattern), func(t *testing.T) {
			checkFusedProtocol(t, d, k, r, c, 20*time.Microsecond)
		})
	}
}

// decInputs takes case c's residual (the shape's fixture, mapped for the
// device) and draws its activations (T rows of the case's token pattern)
// and the base outputs the compensation adds to, with y[0] = -0 so that the
// add must happen, as in wq.
func decInputs(t *testing.T, d *cuda.Device, r *rand.Rand, c decCase) (rm *wq.Matrix, res *kernels.DECResidual, x, yBase []float32) {
	t.Helper()
	rm = fixture(t, fixtureKey{e: c.e, N: c.N, K: c.K})
	res = mappedResidual(t, d, rm)
	x = make([]float32, 0, c.T*c.K)
	for range c.T {
		x = append(x, kernels.DECTestActivations(r, c.K, c.tokenPattern)...)
	}
	yBase = make([]float32, c.T*c.N)
	for i := range yBase {
		yBase[i] = float32(r.NormFloat64())
	}
	yBase[0] = float32(math.Copysign(0, -1)) // -0 + 0 = +0: the add must happen, as in wq
	return rm, res, x, yBase
}

// checkFusedProtocol runs FusedSelfTest (late: its late wait) three times
// over one case and checks y against wq.Compensate bit for bit, and the
// flags and part left for the next launch.
func checkFusedProtocol(t *testing.T, d *cuda.Device, k *kernels.DEC, r *rand.Rand, c decCase, late time.Duration) {
	t.Helper()
	rm, res, x, yBase := decInputs(t, d, r, c)
	want := wantCompensated(x, yBase, rm, c)
	m := newGPUMem(t, d)
	S := kernels.DECSelected(c.K, c.kChunk)
	l := &kernels.DECLaunch{X: m.put(cuda.Bytes(x)), Y: m.poisonedF32(c.T * c.N), Sel: m.put(make([]byte, 4*c.T*S)),
		Flags: m.put(make([]byte, 4*kernels.DECFlagWords(c.N))), Part: m.put(cuda.Bytes(emptyPart(c.T * c.N))),
		R: res, T: c.T, KChunk: c.kChunk, Blocks: c.nTB}
	yb := m.put(cuda.Bytes(yBase))
	for run := range 3 {
		m.write(l.Y, cuda.Bytes(nanF32(c.T*c.N)))
		m.run(func(cx *cuda.Ctx, s cuda.Stream) error { return k.FusedSelfTest(cx, s, l, yb, late) })
		sameBits(t, fmt.Sprintf("fused run %d", run), m.f32s(l.Y, c.T*c.N), want)
		flags := make([]uint32, kernels.DECFlagWords(c.N))
		m.read(cuda.Bytes(flags), l.Flags)
		for i, f := range flags {
			if f != 0 {
				t.Fatalf("run %d: flag %d = %d after the launch, want 0", run, i, f)
			}
		}
		checkPartEmpty(t, m, run, l.Part, c.T*c.N)
	}
}

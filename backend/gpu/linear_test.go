package gpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// invariantBackend opens a second CUDA backend with BatchInvariant, or
// skips without a GPU.
func invariantBackend(t *testing.T) *gpu.Backend {
	o := options
	o.BatchInvariant = true
	return openWith(t, o)
}

// skinnyBackend opens a second CUDA backend with every GEMM of 17-128 rows
// on skinny.cu (gpu.SkinnyOn), or skips without a GPU.
func skinnyBackend(t *testing.T) *gpu.Backend {
	o := options
	o.Skinny = gpu.SkinnyOn
	return openWith(t, o)
}

// openWith opens a CUDA backend with options o, closed when the test ends,
// or skips without a GPU.
func openWith(t *testing.T, o gpu.Options) *gpu.Backend {
	t.Helper()
	be, err := gpu.Open(0, o)
	if err != nil {
		if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
			t.Skipf("no CUDA device: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// linearLayer is an fp16 weight [N, K] and an optional bias on one backend,
// with the weight's values as the device holds them (fp16-rounded).
type linearLayer struct {
	w, b backend.Weight
	N    int
	wv   []float32
	bv   []float32 // the bias's values (nil without one)
}

func loadLayer(t *testing.T, be backend.Backend, r *rand.Rand, N, K int, bias bool) linearLayer {
	t.Helper()
	v := randVec(r, N*K, 0.05)
	w, err := be.LoadWeight("w", backend.F32, []int{N, K}, encode(backend.F32, v))
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		v[i] = half.ToFloat32(half.FromFloat32(x))
	}
	l := linearLayer{w: w, N: N, wv: v}
	if bias {
		l.bv = randVec(r, N, 1)
		if l.b, err = be.LoadWeight("b", backend.F32, []int{N}, encode(backend.F32, l.bv)); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// run computes the layers on x [T, K] with LinearGroup (group) or one
// Linear each, and returns the outputs.
func run(t *testing.T, be backend.Backend, x []float32, T, K int, ls []linearLayer, group bool) [][]float32 {
	t.Helper()
	xt, err := be.Alloc(backend.F32, T, K)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(xt)
	if err := be.Upload(xt, x); err != nil {
		t.Fatal(err)
	}
	var dsts []backend.Tensor
	var ws, bs []backend.Weight
	for _, l := range ls {
		d, err := be.Alloc(backend.F32, T, l.N)
		if err != nil {
			t.Fatal(err)
		}
		defer be.Free(d)
		nan := make([]float32, T*l.N)
		for i := range nan {
			nan[i] = float32(math.NaN())
		}
		if err := be.Upload(d, nan); err != nil {
			t.Fatal(err)
		}
		dsts, ws, bs = append(dsts, d), append(ws, l.w), append(bs, l.b)
	}
	if group {
		be.LinearGroup(dsts, xt, ws, bs)
	} else {
		for i := range ls {
			be.Linear(dsts[i], xt, ws[i], bs[i])
		}
	}
	out := make([][]float32, len(ls))
	for i, l := range ls {
		out[i] = make([]float32, T*l.N)
		if err := be.Download(out[i], dsts[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameBits fails unless a and b are bitwise equal (and not NaN).
func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) || a[i] != a[i] {
			t.Fatalf("%s: element %d = %g, want %g", what, i, a[i], b[i])
		}
	}
}

// TestLinearGroup checks LinearGroup against one Linear per weight,
// bitwise, on the default backend: four layers (two launches of at most
// three), biases on some, at decode sizes (gemv.cu and linear.cu, grouped;
// at T = 1-2 every layer here takes the group's split alone too) and at a
// prefill size (cuBLASLt, one call each). Then a q|k|v-like group at T = 1
// and 2 whose k and v take q's split in the group (gemv.cu v4) and another
// alone: each output within twice gemv.cu's float32 bound of the Linear's,
// (K/32 + 8)·2⁻²⁴·Σ|x·w| each, plus the bias add's rounding.
func TestLinearGroup(t *testing.T) {
	be := gpuBackend(t)
	r := rand.New(rand.NewPCG(21, 22))
	const K = 520
	ls := []linearLayer{loadLayer(t, be, r, 300, K, true), loadLayer(t, be, r, 72, K, false), loadLayer(t, be, r, 40, K, true), loadLayer(t, be, r, 1000, K, false)}
	for _, T := range []int{1, 2, 5, 16, 40} {
		x := randVec(r, T*K, 1)
		g, s := run(t, be, x, T, K, ls, true), run(t, be, x, T, K, ls, false)
		for i := range ls {
			sameBits(t, fmt.Sprintf("T=%d layer %d", T, i), g[i], s[i])
		}
	}
	// 6912 channels take split 2, q alone (4608) 2, k and v alone (1152) 4.
	qkv := []linearLayer{loadLayer(t, be, r, 4608, K, true), loadLayer(t, be, r, 1152, K, false), loadLayer(t, be, r, 1152, K, true)}
	for _, T := range []int{1, 2} {
		x := randVec(r, T*K, 1)
		g, s := run(t, be, x, T, K, qkv, true), run(t, be, x, T, K, qkv, false)
		for i, l := range qkv {
			for j := range g[i] {
				tt, n := j/l.N, j%l.N
				var mag float64
				for k := range K {
					mag += math.Abs(float64(x[tt*K+k]) * float64(l.wv[n*K+k]))
				}
				tol := 2*float64(K/32+8)*u32*mag + 2*u32*math.Abs(float64(s[i][j]))
				if d := math.Abs(float64(g[i][j]) - float64(s[i][j])); g[i][j] != g[i][j] || !(d <= tol) {
					t.Fatalf("T=%d q|k|v layer %d: y[%d] = %g grouped, %g alone (|diff| %.3g > tol %.3g)", T, i, j, g[i][j], s[i][j], d, tol)
				}
			}
		}
		// q's split is the group's (2 for 6912 channels, as for 4608): its bits too.
		sameBits(t, fmt.Sprintf("T=%d q|k|v layer 0", T), g[0], s[0])
	}
	// A refused form: two outputs the same tensor.
	xt, _ := be.Alloc(backend.F32, 1, K)
	d, _ := be.Alloc(backend.F32, 1, 40)
	defer be.Free(xt)
	defer be.Free(d)
	be.LinearGroup([]backend.Tensor{d, d}, xt, []backend.Weight{ls[2].w, ls[2].w}, nil)
	if err := be.Sync(); err == nil || !strings.Contains(err.Error(), "LinearGroup") {
		t.Errorf("LinearGroup with one output twice: %v, want a LinearGroup shape error", err)
	}
}

// TestBatchInvariantLinear checks the backend's BatchInvariant mode: rows
// of Linear and LinearGroup at T = 300 (cuBLASLt's size otherwise) and at
// T = 7 are bitwise the rows computed one at a time; a packed weight is
// refused with an error that says what to do.
func TestBatchInvariantLinear(t *testing.T) {
	be := invariantBackend(t)
	r := rand.New(rand.NewPCG(23, 24))
	const K = 264
	ls := []linearLayer{loadLayer(t, be, r, 96, K, true), loadLayer(t, be, r, 33, K, false)}
	for _, T := range []int{7, 300} {
		x := randVec(r, T*K, 1)
		for _, group := range []bool{false, true} {
			all := run(t, be, x, T, K, ls, group)
			for _, ti := range []int{0, T / 2, T - 1} {
				one := run(t, be, x[ti*K:(ti+1)*K], 1, K, ls, group)
				for i, l := range ls {
					sameBits(t, fmt.Sprintf("T=%d group=%v layer %d row %d", T, group, i, ti), all[i][ti*l.N:(ti+1)*l.N], one[i])
				}
			}
		}
	}
	const qK = 256
	m, err := wq.Quantize(wq.Int4, 128, 64, qK, randVec(r, 64*qK, 0.05))
	if err != nil {
		t.Fatal(err)
	}
	qw, err := be.LoadQuantWeight("model.q", m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.FreeWeight(qw)
	xt, _ := be.Alloc(backend.F32, 2, qK)
	y, _ := be.Alloc(backend.F32, 2, 64)
	defer be.Free(xt)
	defer be.Free(y)
	be.Linear(y, xt, qw, nil)
	if err := be.Sync(); err == nil || !strings.Contains(err.Error(), "model.q") || !strings.Contains(err.Error(), gpu.EnvBatchInvariant) {
		t.Errorf("a packed weight in the batch-invariant mode: %v, want an error naming the weight and the mode", err)
	}
}

// TestLinearGraphReplay runs a chain of 20 linear ops at 55 rows (int4's
// max batch at 32K: cuBLASLt on the default backend, linear.cu's wide
// kernel in the batch-invariant mode, skinny.cu with gpu.SkinnyOn, split
// 2 on the 1024-wide input), with the group's weights apart and joined
// (one GEMM on the default backend), four times: the first flush runs
// directly, the second is captured into a CUDA graph, the others replay
// it; every output must be bitwise the first run's, over outputs poisoned
// with NaN before each run, and the first layer within fp16 x times fp16 w
// with fp32 accumulation of a float64 reference.
func TestLinearGraphReplay(t *testing.T) {
	if options.NoGraphs {
		t.Skip("BITDECODE_NO_GRAPHS is set")
	}
	for _, mode := range []string{"default", "joined", "batch-invariant", "batch-invariant, joined", "skinny", "skinny, joined"} {
		t.Run(mode, func(t *testing.T) {
			be := gpuBackend(t)
			switch {
			case strings.HasPrefix(mode, "batch-invariant"):
				be = invariantBackend(t)
			case strings.HasPrefix(mode, "skinny"):
				be = skinnyBackend(t)
			}
			linearGraphReplay(t, be, strings.HasSuffix(mode, "joined"))
		})
	}
}

// linearGraphReplay is TestLinearGraphReplay on be; joined places the
// group's two weights in one allocation first (JoinWeights: one GEMM and
// split_cols on the default backend, linear.cu as before in the
// batch-invariant mode).
func linearGraphReplay(t *testing.T, be *gpu.Backend, joined bool) {
	const T, K, H, chain = 55, 512, 1024, 18
	r := rand.New(rand.NewPCG(25, 26))
	up, down := loadLayer(t, be, r, H, K, false), loadLayer(t, be, r, K, H, true)
	side := loadLayer(t, be, r, 200, K, true)
	if joined {
		if err := be.JoinWeights(up.w, side.w); err != nil {
			t.Fatal(err)
		}
	}
	x := randVec(r, T*K, 1)
	alloc := func(n int) backend.Tensor {
		d, err := be.Alloc(backend.F32, T, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Free(d) })
		return d
	}
	xt := alloc(K)
	if err := be.Upload(xt, x); err != nil {
		t.Fatal(err)
	}
	// outs[0], outs[1]: LinearGroup(x; up, side); then h_{i+1} =
	// Linear(h_i) alternating up and down, h_0 = x.
	outs := []backend.Tensor{alloc(H), alloc(side.N)}
	for i := range chain {
		outs = append(outs, alloc([]int{H, K}[i%2]))
	}
	step := func() [][]float32 {
		for _, d := range outs {
			nan := make([]float32, backend.NumElements(d.Shape()))
			for i := range nan {
				nan[i] = float32(math.NaN())
			}
			if err := be.Upload(d, nan); err != nil {
				t.Fatal(err)
			}
		}
		be.LinearGroup(outs[:2], xt, []backend.Weight{up.w, side.w}, []backend.Weight{nil, side.b})
		h := xt
		for i, d := range outs[2:] {
			l := []linearLayer{up, down}[i%2]
			be.Linear(d, h, l.w, l.b)
			h = d
		}
		got := make([][]float32, len(outs))
		for i := len(outs) - 1; i >= 0; i-- { // the last first: its Download runs the queue
			got[i] = make([]float32, backend.NumElements(outs[i].Shape()))
			if err := be.Download(got[i], outs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := be.Sync(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := be.GraphStats()
	first := step()
	// The first layer against float64: fp16(x) (relative error u16, or
	// 2⁻²⁵ absolute below fp16's normal range) times the fp16 weight
	// (exact), fp32 accumulation that may truncate (2·u32 a step).
	worst := 0.0
	for i, y := range first[0] {
		tt, n := i/H, i%H
		var ref, sxw, sw float64
		for k := range K {
			xv, wv := float64(x[tt*K+k]), float64(up.wv[n*K+k])
			ref += xv * wv
			sxw += math.Abs(xv * wv)
			sw += math.Abs(wv)
		}
		tol := (u16+2*float64(K+2)*u32)*sxw + 0x1p-25*sw
		d := math.Abs(float64(y) - ref)
		if y != y || !(d <= tol) {
			t.Fatalf("layer 0: y[%d] = %g, want %g ± %.3g", i, y, ref, tol)
		}
		worst = max(worst, d/tol)
	}
	t.Logf("layer 0: worst |gpu - float64| = %.2f of the tolerance", worst)
	for run := 2; run <= 4; run++ {
		got := step()
		for i := range got {
			sameBits(t, fmt.Sprintf("run %d, output %d", run, i), got[i], first[i])
		}
	}
	st := be.GraphStats()
	captured, replayed := st.Captured-before.Captured, st.Replayed-before.Replayed
	t.Logf("graph stats over four runs: %d captured, %d replayed, %d direct", captured, replayed, st.Direct-before.Direct)
	if captured < 1 || replayed < 2 {
		t.Errorf("%d flushes captured and %d replayed over four runs; want at least 1 and 2: the linears at %d rows do not replay in a CUDA graph", captured, replayed, T)
	}
}

// TestBatchInvariantChunkRows checks the batch-invariant mode's prefill
// chunks (backend.ChunkRows, chunk.go): in a step of decode rows around a
// 200-row chunk, Linear and LinearGroup give the decode rows bitwise the
// rows computed one at a time, and the chunk's rows bitwise the same chunk
// computed as a step of its own (its bits depend on the chunk, not on the
// rows beside it), within fp16 rounding of a float64 product; a layer whose
// outputs are not whole 64-float rows is not split (every row as the mode
// computes it alone).
func TestBatchInvariantChunkRows(t *testing.T) {
	be := invariantBackend(t)
	r := rand.New(rand.NewPCG(25, 26))
	const K = 256
	const before, chunk, after = 3, 200, 2
	T := before + chunk + after
	split := []linearLayer{loadLayer(t, be, r, 128, K, true), loadLayer(t, be, r, 192, K, false)}
	whole := []linearLayer{loadLayer(t, be, r, 96, K, true), loadLayer(t, be, r, 33, K, false)}
	x := randVec(r, T*K, 1)
	withChunks := func(T int, runs []backend.RowRun, f func() [][]float32) [][]float32 {
		be.SetChunkRows(T, runs)
		defer be.SetChunkRows(0, nil)
		return f()
	}
	for _, group := range []bool{false, true} {
		for _, ls := range [][]linearLayer{split, whole} {
			all := withChunks(T, []backend.RowRun{{Start: before, Len: chunk}}, func() [][]float32 { return run(t, be, x, T, K, ls, group) })
			alone := withChunks(chunk, []backend.RowRun{{Start: 0, Len: chunk}}, func() [][]float32 {
				return run(t, be, x[before*K:(before+chunk)*K], chunk, K, ls, group)
			})
			for i, l := range ls {
				what := fmt.Sprintf("group=%v N=%d", group, l.N)
				sameBits(t, what+" chunk rows", all[i][before*l.N:(before+chunk)*l.N], alone[i])
				for _, ti := range []int{0, before - 1, before + chunk, T - 1, before, before + chunk - 1} {
					if ti >= before && ti < before+chunk && l.N%64 == 0 {
						continue // a chunk row: its chunk's bits, checked above
					}
					one := run(t, be, x[ti*K:(ti+1)*K], 1, K, ls, group)
					sameBits(t, fmt.Sprintf("%s row %d", what, ti), all[i][ti*l.N:(ti+1)*l.N], one[i])
				}
				for ti := range T {
					for n := range l.N {
						var ref, mag float64
						for k := range K {
							p := float64(x[ti*K+k]) * float64(l.wv[n*K+k])
							ref, mag = ref+p, mag+math.Abs(p)
						}
						if l.bv != nil {
							ref += float64(l.bv[n])
						}
						// x rounded to fp16 (2^-11 of each product) and
						// float32 sums: within 2^-10 of the magnitudes.
						if got := float64(all[i][ti*l.N+n]); math.Abs(got-ref) > mag/1024+1e-6 {
							t.Fatalf("%s row %d channel %d: %g, float64 %g (within %g)", what, ti, n, got, ref, mag/1024)
						}
					}
				}
			}
		}
	}
}

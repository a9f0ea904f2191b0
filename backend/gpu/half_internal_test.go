package gpu

// half.go and foldRoPEJoined: at cuBLASLt's batch sizes a GEMM's fp16
// input comes from the op before it (AddRMSNorm; SwiGLU folded into a
// joined gate|up) and RoPEQK folds into a joined q|k|v's split. Two
// layers' ops in one step, run three times (direct, captured, replayed
// where graphs are on), leave every tensor with the bits of the same ops
// run one at a time with a flush after each (no fold, no graph); the
// folds happen (the queued ops' names), and are refused where they must
// be (a GEMM over a tensor the op before did not write, q/k norms).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
)

// opBack returns the name of the op i places from the queue's end (0: the
// last), "" for none.
func (b *Backend) opBack(i int) string {
	b.qMu.Lock()
	defer b.qMu.Unlock()
	if i >= len(b.queue) {
		return ""
	}
	return b.queue[len(b.queue)-1-i].op
}

func TestFoldHalfAndRoPEJoined(t *testing.T) {
	b := foldBackend(t)
	if b.opts.BatchInvariant {
		t.Skip("the folds are the default mode's cuBLASLt path")
	}
	r := rand.New(rand.NewPCG(51, 52))
	const T, K, Hq, Hk, D, F = 55, 256, 4, 2, 64, 520
	const half, eps = D / 2, 1e-5
	Nq, Nk := Hq*D, Hk*D
	w := func(name string, n, k int) backend.Weight {
		return foldWeight(t, b, name, foldData(r, n*k, 0.05), n, k)
	}
	vec := func(name string, n int) backend.Weight { return foldWeight(t, b, name, foldData(r, n, 1), n) }
	wq, wk, wv, wo := w("q", Nq, K), w("k", Nk, K), w("v", Nk, K), w("o", K, Nq)
	wg, wu, wd, wy := w("gate", F, K), w("up", F, K), w("down", K, F), w("y", 300, K)
	bq, bv, bd := vec("q.bias", Nq), vec("v.bias", Nk), vec("down.bias", K)
	n1, n2, n3 := vec("n1", K), vec("n2", K), vec("n3", K)
	qn, kn := vec("q_norm", D), vec("k_norm", D)
	for _, g := range [][]backend.Weight{{wq, wk, wv}, {wg, wu}} {
		if err := b.JoinWeights(g...); err != nil {
			t.Fatal(err)
		}
		if g[0].(*weight).block == nil {
			t.Fatalf("%s's group was not joined", g[0].Name())
		}
	}
	inv := make([]float32, half)
	for i := range inv {
		inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(D)))
	}
	f := foldWeight(t, b, "rope.inv_freq", inv, half)
	pv := make([]int32, T)
	for i := range pv {
		pv[i] = int32(r.IntN(131072))
	}
	pos, err := b.Alloc(backend.I32, T)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(pos) })
	if err := b.UploadInt32(pos, pv); err != nil {
		t.Fatal(err)
	}
	hv, xv := foldData(r, T*K, 1), foldData(r, T*K, 1)

	for _, norms := range []bool{false, true} {
		var qw, kw backend.Weight
		if norms {
			qw, kw = qn, kn
		}
		h, x := foldTensor(t, b, nil, T, K), foldTensor(t, b, nil, T, K)
		q, k, v := foldTensor(t, b, nil, T, Nq), foldTensor(t, b, nil, T, Nk), foldTensor(t, b, nil, T, Nk)
		gate, up := foldTensor(t, b, nil, T, F), foldTensor(t, b, nil, T, F)
		y := foldTensor(t, b, nil, T, 300)
		all := []backend.Tensor{h, x, q, k, v, gate, up, y}
		// step runs two layers; sync flushes after every op. check asserts
		// the queue's last ops after the first layer's, where folds happen.
		step := func(sync, check bool) [][]float32 {
			for _, tt := range all {
				n := backend.NumElements(tt.Shape())
				nan := make([]float32, n)
				for i := range nan {
					nan[i] = float32(math.NaN())
				}
				if err := b.Upload(tt, nan); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Upload(h, hv); err != nil {
				t.Fatal(err)
			}
			if err := b.Upload(x, xv); err != nil {
				t.Fatal(err)
			}
			want := func(layer int, names ...string) {
				if sync {
					if err := b.Sync(); err != nil {
						t.Fatal(err)
					}
					return
				}
				if !check || layer > 0 {
					return
				}
				for i, n := range names {
					if got := b.opBack(i); got != n {
						t.Fatalf("norms %v: op %d from the queue's end is %q, want %q", norms, i, got, n)
					}
				}
			}
			for layer := range 2 {
				b.AddRMSNorm(h, x, x, n1, eps)
				want(layer)
				b.LinearGroup([]backend.Tensor{q, k, v}, x, []backend.Weight{wq, wk, wv}, []backend.Weight{bq, nil, bv})
				want(layer, "LinearGroup(joined)", "AddRMSNorm+fp16")
				b.RoPEQK(q, k, pos, f, qw, kw, eps)
				if norms {
					want(layer, "RoPEQK", "LinearGroup(joined)")
				} else {
					want(layer, "LinearGroup(joined)+RoPEQK", "AddRMSNorm+fp16")
				}
				b.Linear(x, q, wo, nil) // q was not written by the op before: converted
				want(layer, "Linear")
				b.AddRMSNorm(h, x, x, n2, eps)
				want(layer)
				b.LinearGroup([]backend.Tensor{gate, up}, x, []backend.Weight{wg, wu}, nil)
				want(layer, "LinearGroup(joined)", "AddRMSNorm+fp16")
				b.SwiGLU(gate, gate, up)
				want(layer, "LinearGroup(joined)+SwiGLU")
				b.Linear(x, gate, wd, bd)
				want(layer, "Linear(fp16 x)", "LinearGroup(joined)+SwiGLU+fp16", "AddRMSNorm+fp16")
				b.AddRMSNorm(h, x, x, n3, eps)
				want(layer)
				b.Linear(y, x, wy, nil)
				want(layer, "Linear(fp16 x)", "AddRMSNorm+fp16")
			}
			got := make([][]float32, len(all))
			for i, tt := range all {
				got[i] = foldDown(t, b, tt)
			}
			return got
		}
		ref := step(true, false)
		before := b.GraphStats()
		for run := range 3 {
			got := step(false, run == 0)
			for i, name := range []string{"h", "x", "q", "k", "v", "gate", "up", "y"} {
				foldSameBits(t, fmt.Sprintf("norms %v run %d: %s", norms, run, name), got[i], ref[i])
			}
		}
		st := b.GraphStats()
		t.Logf("norms %v: graphs captured %d, replayed %d over the three folded steps", norms, st.Captured-before.Captured, st.Replayed-before.Replayed)
		if !b.opts.NoGraphs && st.Replayed == before.Replayed {
			t.Fatalf("norms %v: no flush of the folded steps was replayed from a graph", norms)
		}
	}
}

// TestEnqueueOutHalf: a cuBLASLt Linear right after an op queued with
// EnqueueOut (a KV cache's attention: y widened from the fp16 it leaves)
// reads that fp16 and converts nothing, with the bits of the same Linear
// after a flush; without the fp16 named, or over another tensor (holding
// the same values), it converts as before.
func TestEnqueueOutHalf(t *testing.T) {
	b := foldBackend(t)
	if b.opts.BatchInvariant {
		t.Skip("the fold is the default mode's cuBLASLt path")
	}
	r := rand.New(rand.NewPCG(53, 54))
	const T, K, N = 40, 264, 136
	w := foldWeight(t, b, "o", foldData(r, N*K, 0.05), N, K)
	bias := foldWeight(t, b, "o.bias", foldData(r, N, 1), N)
	yv := foldData(r, T*K, 2)
	widened := make([]float32, len(yv)) // what the op leaves in y
	for i, v := range yv {
		widened[i] = half.ToFloat32(half.FromFloat32(v))
	}
	for _, tc := range []struct {
		name       string
		half, same bool
		want       string
	}{{"fp16 left", true, true, "Linear(fp16 x)"}, {"no fp16", false, true, "Linear"}, {"another input", true, false, "Linear"}} {
		run := func(flush bool) []float32 {
			src, hb := foldTensor(t, b, yv, T, K), foldTensor(t, b, nil, T, K)
			y, other := foldTensor(t, b, nil, T, K), foldTensor(t, b, widened, T, K)
			d := foldTensor(t, b, nil, T, N)
			s, yp, hp := src.(*tensor).ptr, y.(*tensor).ptr, hb.(*tensor).ptr
			outHalf := hp
			if !tc.half {
				outHalf = 0
			}
			b.EnqueueOut("test: widen", func(c *cuda.Ctx) error {
				if err := b.ops.F32ToF16(c, b.stream, hp, s, T*K); err != nil {
					return err
				}
				return b.ops.F16ToF32(c, b.stream, yp, hp, T*K)
			}, yp, T*K, outHalf, u64(s), u64(yp), u64(hp))
			if flush {
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			in := y
			if !tc.same {
				in = other
			}
			b.Linear(d, in, w, bias)
			want := tc.want
			if flush {
				want = "Linear"
			}
			if op := b.lastOp(); op != want {
				t.Fatalf("%s (flush %v): last queued op %q, want %q", tc.name, flush, op, want)
			}
			return foldDown(t, b, d)
		}
		want := run(true) // first: Linear's keyed fp16 buffer is grown (a flush) here, not between the ops
		foldSameBits(t, tc.name, run(false), want)
	}
}

// TestFreeWeightAfterQueuedLinear: FreeWeight of a weight and a bias that a
// queued cuBLASLt Linear reads launches that Linear first. Before, it
// cleared the pointers the Linear's launches read when they run
// (takeWeightMem), so the Linear ran over address 0: an illegal address
// that broke the process's device (session 11, found when a fold test
// failed with the op queued).
func TestFreeWeightAfterQueuedLinear(t *testing.T) {
	b := foldBackend(t)
	r := rand.New(rand.NewPCG(55, 56))
	const T, K, N = 40, 264, 136
	l := loadJoinLayer(t, b, r, "w", N, K, true)
	xv := foldData(r, T*K, 1)
	x, d := foldTensor(t, b, xv, T, K), foldTensor(t, b, nil, T, N)
	b.Linear(d, x, l.w, l.b)
	b.FreeWeight(l.b)
	b.FreeWeight(l.w)
	got := foldDown(t, b, d)
	for j, y := range got {
		ref, tol := joinRef(xv, l, j/N, j%N, K)
		if d := math.Abs(float64(y) - ref); y != y || !(d <= tol) {
			t.Fatalf("y[%d] = %g, want %g ± %.3g", j, y, ref, tol)
		}
	}
}

// TestEnqueueOutWith: a cuBLASLt Linear right after an op queued with
// EnqueueOutWith (a rotated KV cache's attention: y rotated back in
// float32 by f16_to_f32_hadamard, which can write y's fp16 copy) turns
// that op into its variant writing the copy into the GEMM's buffer and
// converts nothing, with the bits of the same op and Linear run apart
// (a flush between them), y's included; over another tensor holding the
// same values it converts as before.
func TestEnqueueOutWith(t *testing.T) {
	b := foldBackend(t)
	if b.opts.BatchInvariant {
		t.Skip("the fold is the default mode's cuBLASLt path")
	}
	r := rand.New(rand.NewPCG(57, 58))
	const T, K, N, D = 40, 256, 136, 128 // K/D rows of D per token
	w := foldWeight(t, b, "o", foldData(r, N*K, 0.05), N, K)
	bias := foldWeight(t, b, "o.bias", foldData(r, N, 1), N)
	hv := foldData(r, T*K, 2)
	src, hb := foldTensor(t, b, hv, T, K), foldTensor(t, b, nil, T, K)
	s, hp := src.(*tensor).ptr, hb.(*tensor).ptr
	rotate := func(yp cuda.DevicePtr) func(c *cuda.Ctx, xh cuda.DevicePtr) error {
		return func(c *cuda.Ctx, xh cuda.DevicePtr) error {
			if err := b.ops.F32ToF16(c, b.stream, hp, s, T*K); err != nil {
				return err
			}
			return b.ops.F16ToF32HadamardHalf(c, b.stream, yp, xh, hp, T*K/D, D)
		}
	}
	// y's values, for the other input.
	y0 := foldTensor(t, b, nil, T, K)
	b.EnqueueOutWith("test: rotate", rotate(y0.(*tensor).ptr), y0.(*tensor).ptr, T*K)
	yRef := foldDown(t, b, y0)
	for _, tc := range []struct {
		name string
		same bool
		want string
	}{{"rotated output", true, "Linear(fp16 x)"}, {"another input", false, "Linear"}} {
		run := func(flush bool) ([]float32, []float32) {
			y, d := foldTensor(t, b, nil, T, K), foldTensor(t, b, nil, T, N)
			other := foldTensor(t, b, yRef, T, K)
			yp := y.(*tensor).ptr
			b.EnqueueOutWith("test: rotate", rotate(yp), yp, T*K, u64(s), u64(yp), u64(hp))
			if flush {
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			in := y
			if !tc.same {
				in = other
			}
			b.Linear(d, in, w, bias)
			want := tc.want
			if flush {
				want = "Linear"
			}
			if op := b.lastOp(); op != want {
				t.Fatalf("%s (flush %v): last queued op %q, want %q", tc.name, flush, op, want)
			}
			return foldDown(t, b, d), foldDown(t, b, y)
		}
		wantD, wantY := run(true) // first: Linear's keyed fp16 buffer is grown (a flush) here
		foldSameBits(t, tc.name+": y alone", wantY, yRef)
		for rep := range 2 {
			gotD, gotY := run(false)
			foldSameBits(t, fmt.Sprintf("%s: y, run %d", tc.name, rep), gotY, wantY)
			foldSameBits(t, fmt.Sprintf("%s: Linear, run %d", tc.name, rep), gotD, wantD)
		}
	}
}

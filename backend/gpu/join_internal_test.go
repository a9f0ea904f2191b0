package gpu

// join.go: JoinWeights keeps every weight's values (the decode paths give
// the bits of the weights apart), a joined group at cuBLASLt's batch sizes
// runs one GEMM (the queue's last op is the joined one) within the bound
// of fp16 x times fp16 w with fp32 accumulation of a float64 reference,
// SwiGLU folds into its split with the bits of the separate ops, forms
// that cannot be joined are left apart, and the shared allocation is freed
// with its last weight.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
)

// joinU16 and joinU32 are fp16's and float32's unit roundoff.
const joinU16, joinU32 = 0x1p-11, 0x1p-24

// joinLayer is a weight [N, K] (F32 data, stored fp16) with its values as
// the device holds them, and an optional bias.
type joinLayer struct {
	w, b   backend.Weight
	N      int
	wv, bv []float32
}

func loadJoinLayer(t *testing.T, b *Backend, r *rand.Rand, name string, N, K int, bias bool) joinLayer {
	t.Helper()
	v := foldData(r, N*K, 0.05)
	l := joinLayer{w: foldWeight(t, b, name, v, N, K), N: N, wv: make([]float32, len(v))}
	for i, x := range v {
		l.wv[i] = half.ToFloat32(half.FromFloat32(x))
	}
	if bias {
		l.bv = foldData(r, N, 1)
		l.b = foldWeight(t, b, name+".bias", l.bv, N)
	}
	return l
}

// groupMember is a layer of a LinearGroup test: its weight, its bias (nil
// for none) and its output width.
type groupMember interface {
	member() (w, b backend.Weight, N int)
}

func (l joinLayer) member() (backend.Weight, backend.Weight, int) { return l.w, l.b, l.N }

// runGroup runs LinearGroup of ls on x [T, K] into NaN-poisoned outputs and
// returns them with the name of the op it queued last.
func runGroup[L groupMember](t *testing.T, b *Backend, xv []float32, T, K int, ls []L) (outs [][]float32, op string) {
	t.Helper()
	x := foldTensor(t, b, xv, T, K)
	var dsts []backend.Tensor
	var ws, bs []backend.Weight
	for _, l := range ls {
		w, bias, N := l.member()
		dsts, ws, bs = append(dsts, foldTensor(t, b, nil, T, N)), append(ws, w), append(bs, bias)
	}
	b.LinearGroup(dsts, x, ws, bs)
	op = b.lastOp()
	for _, d := range dsts {
		outs = append(outs, foldDown(t, b, d))
	}
	return outs, op
}

func TestJoinWeights(t *testing.T) {
	b := foldBackend(t)
	if b.opts.BatchInvariant || b.opts.NoGEMV {
		t.Skip("the joined GEMM is the default mode's cuBLASLt path")
	}
	r := rand.New(rand.NewPCG(41, 42))
	const K = 264
	qkv := []joinLayer{loadJoinLayer(t, b, r, "q", 512, K, true), loadJoinLayer(t, b, r, "k", 128, K, false), loadJoinLayer(t, b, r, "v", 132, K, true)}
	ws := []backend.Weight{qkv[0].w, qkv[1].w, qkv[2].w}
	decodeT := []int{1, 2, 5, 16}
	before := map[int][][]float32{}
	for _, T := range decodeT {
		before[T], _ = runGroup(t, b, foldData(rand.New(rand.NewPCG(uint64(T), 1)), T*K, 1), T, K, qkv)
	}

	// Forms left apart: a weight twice, K differing, one weight.
	other := loadJoinLayer(t, b, r, "other", 64, K+8, false)
	for _, bad := range [][]backend.Weight{{ws[0], ws[0]}, {ws[1], other.w}, {ws[2]}} {
		if err := b.JoinWeights(bad...); err != nil {
			t.Fatal(err)
		}
		for _, w := range bad {
			if w.(*weight).block != nil {
				t.Fatalf("JoinWeights of a form it cannot join moved %s", w.Name())
			}
		}
	}

	if err := b.JoinWeights(ws...); err != nil {
		t.Fatal(err)
	}
	blk := qkv[0].w.(*weight).block
	for i, l := range qkv {
		cw := l.w.(*weight)
		if cw.block != blk || blk == nil || (i > 0 && cw.f16 != qkv[i-1].w.(*weight).f16+cuda.DevicePtr(2*qkv[i-1].N*K)) {
			t.Fatalf("after JoinWeights %s is not at its place in the block", cw.name)
		}
	}
	if got := blk.live.Load(); got != 3 {
		t.Fatalf("block holds %d live weights, want 3", got)
	}
	// The decode paths (gemv.cu, linear.cu) read the same values.
	for _, T := range decodeT {
		after, op := runGroup(t, b, foldData(rand.New(rand.NewPCG(uint64(T), 1)), T*K, 1), T, K, qkv)
		if op != "LinearGroup" {
			t.Fatalf("T=%d: last op %q, want LinearGroup (a decode path)", T, op)
		}
		for i := range qkv {
			foldSameBits(t, fmt.Sprintf("T=%d layer %d joined", T, i), after[i], before[T][i])
		}
	}
	// cuBLASLt's sizes: one GEMM, within fp16(x)·w with fp32
	// accumulation of float64 (as TestLinearGraphReplay), plus the bias
	// add's rounding; a ragged row count among them.
	for _, T := range []int{17, 55, 100} {
		xv := foldData(r, T*K, 1)
		outs, op := runGroup(t, b, xv, T, K, qkv)
		if op != "LinearGroup(joined)" {
			t.Fatalf("T=%d: last op %q, want LinearGroup(joined)", T, op)
		}
		for i, l := range qkv {
			worst := 0.0
			for j, y := range outs[i] {
				tt, n := j/l.N, j%l.N
				ref, tol := joinRef(xv, l, tt, n, K)
				d := math.Abs(float64(y) - ref)
				if y != y || !(d <= tol) {
					t.Fatalf("T=%d layer %d: y[%d] = %g, want %g ± %.3g", T, i, j, y, ref, tol)
				}
				worst = max(worst, d/tol)
			}
			t.Logf("T=%d layer %d: worst |gpu - float64| = %.2f of the tolerance", T, i, worst)
		}
	}

	// Llama-3.1-8B's q|k|v (48 MiB) at 15 rows: one GEMM (fp16Path's
	// joined rule), a sample of its outputs within the bound above.
	if !testing.Short() {
		const T8, K8 = 15, 4096
		big := []joinLayer{loadJoinLayer(t, b, r, "q8", 4096, K8, false), loadJoinLayer(t, b, r, "k8", 1024, K8, false), loadJoinLayer(t, b, r, "v8", 1024, K8, true)}
		if err := b.JoinWeights(big[0].w, big[1].w, big[2].w); err != nil {
			t.Fatal(err)
		}
		xv := foldData(r, T8*K8, 1)
		outs, op := runGroup(t, b, xv, T8, K8, big)
		if op != "LinearGroup(joined)" {
			t.Fatalf("8B q|k|v at T=%d: last op %q, want LinearGroup(joined)", T8, op)
		}
		for i, l := range big {
			for j := i; j < len(outs[i]); j += 61 {
				y, tt, n := outs[i][j], j/l.N, j%l.N
				ref, tol := joinRef(xv, l, tt, n, K8)
				if d := math.Abs(float64(y) - ref); y != y || !(d <= tol) {
					t.Fatalf("8B q|k|v layer %d: y[%d] = %g, want %g ± %.3g", i, j, y, ref, tol)
				}
			}
		}
	}

	// The block is freed with its last weight.
	for i, l := range qkv {
		b.FreeWeight(l.w)
		if got, want := blk.live.Load(), int32(2-i); got != want {
			t.Fatalf("after freeing %d weights the block holds %d, want %d", i+1, got, want)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestFoldSwiGLUJoined: SwiGLU(dst, gate, up) right after a joined gate|up
// group at 55 rows runs in its split (the queue's last op is the folded
// one), every tensor with the bits of the group, a flush, then SwiGLU;
// dst is gate (the model's call), up, or a tensor of its own.
func TestFoldSwiGLUJoined(t *testing.T) {
	b := foldBackend(t)
	if b.opts.BatchInvariant || b.opts.NoGEMV {
		t.Skip("the joined GEMM is the default mode's cuBLASLt path")
	}
	r := rand.New(rand.NewPCG(43, 44))
	const T, K, N = 55, 520, 1028
	gate, up := loadJoinLayer(t, b, r, "gate", N, K, false), loadJoinLayer(t, b, r, "up", N, K, true)
	if err := b.JoinWeights(gate.w, up.w); err != nil {
		t.Fatal(err)
	}
	xv := foldData(r, T*K, 1)
	for _, dstIs := range []string{"gate", "up", "own"} {
		name := fmt.Sprintf("dst=%s", dstIs)
		run := func(flush bool) (dst, g, u []float32) {
			x := foldTensor(t, b, xv, T, K)
			gt, ut := foldTensor(t, b, nil, T, N), foldTensor(t, b, nil, T, N)
			d := map[string]backend.Tensor{"gate": gt, "up": ut}[dstIs]
			if d == nil {
				d = foldTensor(t, b, nil, T, N)
			}
			b.LinearGroup([]backend.Tensor{gt, ut}, x, []backend.Weight{gate.w, up.w}, []backend.Weight{nil, up.b})
			if flush {
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			b.SwiGLU(d, gt, ut)
			op, want := b.lastOp(), "SwiGLU"
			if !flush {
				want = "LinearGroup(joined)+SwiGLU"
			}
			if op != want {
				t.Fatalf("%s (flush %v): last queued op %q, want %q", name, flush, op, want)
			}
			return foldDown(t, b, d), foldDown(t, b, gt), foldDown(t, b, ut)
		}
		wantD, wantG, wantU := run(true)
		gotD, gotG, gotU := run(false)
		foldSameBits(t, name+": dst", gotD, wantD)
		foldSameBits(t, name+": gate", gotG, wantG)
		foldSameBits(t, name+": up", gotU, wantU)
	}
}

// joinRef returns output (tt, n) of layer l over x (rows of K) in float64 and
// its bound (the cuBLASLt sizes' bound above): x's rounding to fp16 (relative,
// and at most 2^-25 absolute among fp16's subnormals), fp32 accumulation over
// K (+2) terms, and the bias's fp32 add.
func joinRef(xv []float32, l joinLayer, tt, n, K int) (ref, tol float64) {
	var sxw, sw float64
	for k := range K {
		xk, wk := float64(xv[tt*K+k]), float64(l.wv[n*K+k])
		ref += xk * wk
		sxw += math.Abs(xk * wk)
		sw += math.Abs(wk)
	}
	tol = (joinU16+2*float64(K+2)*joinU32)*sxw + 0x1p-25*sw
	if l.bv != nil {
		ref += float64(l.bv[n])
		tol += joinU32 * (math.Abs(ref) + tol)
	}
	return ref, tol
}

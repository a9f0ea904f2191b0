package gpu

// The attention op folded onto q|k|v's joined GEMM (ropekv.go): a KV
// cache's append from the GEMM's output, bitwise the ops run apart.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// TestFoldRoPEAppend runs six layers of the model's attention half at 55
// rows (AddRMSNorm, the joined q|k|v LinearGroup with q and v biases,
// RoPEQK, a KV cache's attention op through EnqueueAttend, o's Linear)
// with a stand-in cache whose op appends k and v to a residual and writes
// q's fp16 copy (KVWriter.AppendQ, or AppendRot for a rotated format), then
// widens that copy into its output. Each run is compared with the same ops
// synced one by one (nothing folds): q's copy, the residual, the output and
// o's Linear bitwise, through direct, captured and replayed flushes. The
// fold must happen (the queue's last op and RoPEAppends), and must not with
// q/k norms, with Options.NoRoPEAppend, or where the op says it cannot
// (Fold false).
func TestFoldRoPEAppend(t *testing.T) {
	b := foldBackend(t)
	if b.opts.BatchInvariant {
		t.Skip("the fold is the default mode's cuBLASLt path")
	}
	kw, err := kernels.LoadKVWriter(b.dev)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(61, 62))
	const T, K, Hq, Hk, D, Nr = 55, 256, 6, 2, 64, 16
	// 36 ops or more a step: flushes long enough for graphs (graphMinOps),
	// and one mid-step (segmentOps), where the folds must not move it.
	const foldLayers = 12
	const half, eps = D / 2, 1e-5
	Nq, Nk := Hq*D, Hk*D
	w := func(name string, n, k int) backend.Weight {
		return foldWeight(t, b, name, foldData(r, n*k, 0.05), n, k)
	}
	vec := func(name string, n int) backend.Weight { return foldWeight(t, b, name, foldData(r, n, 1), n) }
	wq, wk, wv, wo := w("q", Nq, K), w("k", Nk, K), w("v", Nk, K), w("o", K, Nq)
	bq, bv := vec("q.bias", Nq), vec("v.bias", Nk)
	n1, qn, kn := vec("n1", K), vec("q_norm", D), vec("k_norm", D)
	if err := b.JoinWeights(wq, wk, wv); err != nil {
		t.Fatal(err)
	}
	inv := make([]float32, half)
	for i := range inv {
		inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(D)))
	}
	f := foldWeight(t, b, "rope.inv_freq", inv, half)
	ints := func(v []int32) backend.Tensor {
		x, err := b.Alloc(backend.I32, len(v))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		if err := b.UploadInt32(x, v); err != nil {
			t.Fatal(err)
		}
		return x
	}
	pv, sv, rv := make([]int32, T), make([]int32, T), make([]int32, T)
	for i := range pv {
		pv[i], sv[i], rv[i] = int32(r.IntN(131072)), int32(i), int32(r.IntN(Nr))
	}
	sv[T/2] = -1 // a token another round writes
	pos, slot, row := ints(pv), ints(sv), ints(rv)
	hv, xv := foldData(r, T*K, 1), foldData(r, T*K, 1)
	h, x := foldTensor(t, b, nil, T, K), foldTensor(t, b, nil, T, K)
	q, k, v, o := foldTensor(t, b, nil, T, Nq), foldTensor(t, b, nil, T, Nk), foldTensor(t, b, nil, T, Nk), foldTensor(t, b, nil, T, Nq)
	// fp16 buffers as float32 tensors of half the elements.
	qh, resK, resV := foldTensor(t, b, nil, T*Nq/2), foldTensor(t, b, nil, T*Hk*Nr*D/2), foldTensor(t, b, nil, T*Hk*Nr*D/2)
	ptr := func(x backend.Tensor) cuda.DevicePtr {
		p, err := b.Ptr(x)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pq, pk, pvv, po, pqh := ptr(q), ptr(k), ptr(v), ptr(o), ptr(qh)
	prk, prv, ps, pr := ptr(resK), ptr(resV), ptr(slot), ptr(row)
	all := []backend.Tensor{h, x, o, qh, resK, resV}
	names := []string{"h", "x", "o", "qh", "resK", "resV"}

	cases := []struct {
		rotate, norms, off, noFold bool
	}{{false, false, false, false}, {true, false, false, false}, {false, true, false, false}, {true, false, true, false}, {false, false, false, true}}
	flushes := make([]int, len(cases)) // a folded step's, the last run's
	for i, c := range cases {
		what := fmt.Sprintf("%+v", c)
		b.opts.NoRoPEAppend = c.off
		var qw, kwt backend.Weight
		if c.norms {
			qw, kwt = qn, kn
		}
		attend := func(layer int) {
			run := func(x *cuda.Ctx, xh cuda.DevicePtr, src *kernels.RoPEQKV) error {
				var err error
				switch {
				case src != nil:
					err = kw.AppendRoPE(x, b.stream, *src, pqh, Hq, ps, pr, prk, prv, T, Hk, D, Nr, c.rotate)
				case c.rotate:
					err = kw.AppendRot(x, b.stream, pq, pqh, Hq, pk, pvv, ps, pr, prk, prv, T, Hk, D, Nr)
				default:
					err = kw.AppendQ(x, b.stream, pq, pqh, T*Nq, pk, pvv, ps, pr, prk, prv, T, Hk, D, Nr)
				}
				if err != nil {
					return err
				}
				return b.ops.F16ToF32(x, b.stream, po, pqh, T*Nq)
			}
			b.EnqueueAttend(AttendOp{Op: "attend", Q: pq, K: pk, V: pvv, T: T, Hq: Hq, Hkv: Hk, D: D, Fold: !c.noFold,
				Run: run, Out: po, N: T * Nq, OutHalf: pqh, Key: []uint64{u64(layer), boolKey(c.rotate), u64(pqh), u64(prk), u64(ps)}})
		}
		step := func(sync bool) [][]float32 {
			for _, tt := range all {
				if err := b.Upload(tt, nanF32(backend.NumElements(tt.Shape()))); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Upload(h, hv); err != nil {
				t.Fatal(err)
			}
			if err := b.Upload(x, xv); err != nil {
				t.Fatal(err)
			}
			syncIf := func() {
				if sync {
					if err := b.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := b.RoPEAppends()
			for layer := range foldLayers {
				b.AddRMSNorm(h, x, x, n1, eps)
				b.LinearGroup([]backend.Tensor{q, k, v}, x, []backend.Weight{wq, wk, wv}, []backend.Weight{bq, nil, bv})
				b.RoPEQK(q, k, pos, f, qw, kwt, eps)
				syncIf()
				attend(layer)
				if !sync {
					fold := !c.norms && !c.off && !c.noFold
					want := "attend"
					if fold {
						want = "LinearGroup(joined)+RoPEQK+attend"
					}
					if got := b.opBack(0); got != want {
						t.Fatalf("%s layer %d: the queue's last op is %q, want %q", what, layer, got, want)
					}
					wantN := int64(0)
					if fold {
						wantN = int64(layer + 1)
					}
					if n := b.RoPEAppends() - before; n != wantN {
						t.Fatalf("%s layer %d: %d folds counted, want %d", what, layer, n, wantN)
					}
				}
				b.Linear(x, o, wo, nil)
				// An empty queue: the Linear ended a segment (layer 7's, 32
				// ops unfolded) and ran.
				if got := b.opBack(0); !sync && got != "" && got != "Linear(fp16 x)" {
					t.Fatalf("%s layer %d: o's Linear is %q, want it on the attention op's fp16 output", what, layer, got)
				}
				syncIf()
			}
			if sync && b.RoPEAppends() != before {
				t.Fatalf("%s: a fold across a sync", what)
			}
			got := make([][]float32, len(all))
			for i, tt := range all {
				got[i] = foldDown(t, b, tt)
			}
			return got
		}
		ref := step(true)
		for i, name := range names {
			for j, x := range ref[i] {
				if x != x && name != "resK" && name != "resV" {
					t.Fatalf("%s: the ops apart left %s[%d] NaN", what, name, j)
				}
			}
		}
		gs := b.GraphStats()
		for run := range 3 {
			rs := b.GraphStats()
			got := step(false)
			st := b.GraphStats()
			flushes[i] = st.Direct + st.Captured + st.Replayed - rs.Direct - rs.Captured - rs.Replayed
			for i, name := range names {
				if name == "resK" || name == "resV" {
					sameWords(t, fmt.Sprintf("%s run %d: %s", what, run, name), got[i], ref[i])
					continue
				}
				foldSameBits(t, fmt.Sprintf("%s run %d: %s", what, run, name), got[i], ref[i])
			}
		}
		if st := b.GraphStats(); !b.opts.NoGraphs && st.Replayed == gs.Replayed {
			t.Fatalf("%s: no flush of the folded steps was replayed from a graph", what)
		}
	}
	b.opts.NoRoPEAppend = false
	// The folded steps flush where the same ops unfolded (Fold false) do.
	for i, c := range cases {
		if !c.norms && flushes[i] != flushes[len(cases)-1] {
			t.Errorf("%+v: %d flushes a step, %d unfolded", c, flushes[i], flushes[len(cases)-1])
		}
	}
	t.Logf("flushes a step: %v", flushes)
}

// sameWords fails unless got and want hold the same 32-bit words (fp16
// pairs and their poison).
func sameWords(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: word %d = %#08x, want %#08x", what, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
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

// boolKey is a graph key's value for a flag.
func boolKey(on bool) uint64 {
	if on {
		return 1
	}
	return 0
}

package gpu

// join.go's joinTiled: JoinWeights over packed weights of one width whose
// joined rows v6.1 reads at one row (q|k|v with k and v under v6.1's 128
// row groups) moves their tiled layouts into one block; at one row
// LinearGroup then runs one v6.1 GEMV over the joined rows, each output
// with the bits of v6.1 over its own weight's rows at the joined launch's
// split (and within the float64 bound of a packed Linear), a bias added;
// at 2-16 rows and for prefill each weight's view keeps the bits of the
// weights apart; RoPEQK and SwiGLU fold into the joined launch's split with
// the bits of the separate ops; groups whose weights each run v6.1 alone,
// mixed widths and DEC weights are left apart; the block is freed with its
// last weight.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// tiledLayer is a packed weight [N, K] with its wq matrix and an optional
// bias.
type tiledLayer struct {
	w, b backend.Weight
	m    *wq.Matrix
	N    int
	bv   []float32
}

// loadTiledLayer quantizes random N(0, 0.02²) weights to e with groups of
// 128 and loads them packed (freed at the end of the test unless the
// test frees them).
func loadTiledLayer(t *testing.T, b *Backend, r *rand.Rand, e wq.Elem, name string, N, K int, bias bool) tiledLayer {
	t.Helper()
	m, err := wq.Quantize(e, 128, N, K, foldData(r, N*K, 0.02))
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.LoadQuantWeight(name, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.FreeWeight(w) })
	l := tiledLayer{w: w, m: m, N: N}
	if bias {
		l.bv = foldData(r, N, 1)
		l.b = foldWeight(t, b, name+".bias", l.bv, N)
	}
	return l
}

func (l tiledLayer) member() (backend.Weight, backend.Weight, int) { return l.w, l.b, l.N }

// tiledRef returns output n of layer l over one row x in float64 and the
// bound of a packed Linear (backend TestQuantLinear's): fp16 products'
// and the fp32 accumulation's rounding over K, scaled by Σ (|s|·q + |z|)·|x|,
// and the bias add's.
func tiledRef(l tiledLayer, x []float32, n int) (ref, tol float64) {
	var mag float64
	for k, v := range x {
		xv := float64(v)
		ref += xv * float64(l.m.At(n, k))
		sc, z := l.m.Param(n, k/l.m.Group)
		mag += (math.Abs(float64(half.ToFloat32(sc)))*float64(l.m.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))) * math.Abs(xv)
	}
	if l.bv != nil {
		ref += float64(l.bv[n])
	}
	K := len(x)
	return ref, (0x1p-10*(1+0x1p-10)+float64(K/16+40)*0x1p-23)*mag + 0x1p-24*math.Abs(ref)
}

// separateV6 runs v6.1 over each layer's own rows (its view in the block)
// at split S, its bias fused, and returns the outputs.
func separateV6(t *testing.T, b *Backend, xv []float32, K, S int, ls []tiledLayer) [][]float32 {
	t.Helper()
	x := foldTensor(t, b, xv, 1, K)
	var outs [][]float32
	for _, l := range ls {
		y := foldTensor(t, b, nil, 1, l.N)
		xt, _ := b.f32("test", x)
		yt, _ := b.f32("test", y)
		wt := l.w.(*weight)
		var bp cuda.DevicePtr
		if l.b != nil {
			bp = l.b.(*weight).f32
		}
		if err := b.Do(func(c *cuda.Ctx) error {
			return b.gemvq.LaunchV6(c, b.stream, yt.ptr, xt.ptr, wt.qt, wt.qtp, bp, l.N, K, wt.qbits, wt.qgroup, S)
		}); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, foldDown(t, b, y))
	}
	return outs
}

func TestJoinTiled(t *testing.T) {
	b := foldBackend(t)
	if _, err := b.quantKernels(); err != nil {
		t.Fatal(err)
	}
	const K, Nq, Nkv, D = 1152, 2048, 512, 128
	if b.opts.BatchInvariant || !tiledLayout(&b.opts, b.gemvq, 4, Nq+2*Nkv, K, 128, true) {
		t.Skip("the options keep packed weights off v6.1's tiled route")
	}
	r := rand.New(rand.NewPCG(61, 62))
	for _, e := range []wq.Elem{wq.Int4, wq.Int3, wq.Int8} {
		bits := e.Bits()
		// q (128 row groups: tiled alone) with a bias, k and v (32 row
		// groups: wq's layout alone), v with a bias (Qwen2's q|k|v).
		qkv := []tiledLayer{loadTiledLayer(t, b, r, e, "q", Nq, K, true), loadTiledLayer(t, b, r, e, "k", Nkv, K, false), loadTiledLayer(t, b, r, e, "v", Nkv, K, true)}
		if q, k := qkv[0].w.(*weight), qkv[1].w.(*weight); q.qt == 0 || k.qt != 0 || k.q == 0 {
			t.Fatalf("int%d: before JoinWeights q tiled %v, k tiled %v: want q tiled only, k in wq's layout", bits, q.qt != 0, k.qt != 0)
		}
		ws := []backend.Weight{qkv[0].w, qkv[1].w, qkv[2].w}
		decodeT := []int{1, 2, 7, 16, 40}
		xs := map[int][]float32{}
		before := map[int][][]float32{}
		for _, T := range decodeT {
			xs[T] = foldData(r, T*K, 1)
			before[T], _ = runGroup(t, b, xs[T], T, K, qkv)
		}

		// Forms left apart: widths mixed, a pair that each runs v6.1
		// alone (gate|up).
		other := loadTiledLayer(t, b, r, map[int]wq.Elem{4: wq.Int8, 3: wq.Int4, 8: wq.Int4}[bits], "other", Nkv, K, false)
		big := loadTiledLayer(t, b, r, e, "big", Nq, K, false)
		for _, bad := range [][]backend.Weight{{ws[1], other.w}, {ws[0], big.w}} {
			if err := b.JoinWeights(bad...); err != nil {
				t.Fatal(err)
			}
			for _, w := range bad {
				if w.(*weight).block != nil {
					t.Fatalf("int%d: JoinWeights of a form it leaves apart moved %s", bits, w.Name())
				}
			}
		}

		if err := b.JoinWeights(ws...); err != nil {
			t.Fatal(err)
		}
		w0 := qkv[0].w.(*weight)
		blk := w0.block
		tw, tp := w0.qt, w0.qtp
		for _, l := range qkv {
			cw := l.w.(*weight)
			if blk == nil || cw.block != blk || cw.qt != tw || cw.qtp != tp || cw.q != 0 || cw.qp != 0 {
				t.Fatalf("int%d: after JoinWeights %s is not at its place in the block", bits, cw.name)
			}
			cb, pb := kernels.TiledBytes(bits, l.N, K, 128)
			tw, tp = tw+cuda.DevicePtr(cb), tp+cuda.DevicePtr(pb)
		}
		if got := blk.live.Load(); got != 3 {
			t.Fatalf("int%d: block holds %d live weights, want 3", bits, got)
		}

		// 2-16 rows (v2 over each view) and more (gemmq.cu or the
		// dequantization over each view): the bits of the weights apart,
		// except k and v where gemmq.cu takes them (int4 and int3 at
		// 17+ rows; not int8, whose weights under 2048 rows keep the
		// dequantization: gemmqRoutes), which apart took wq's
		// dequantization and cuBLASLt (other sums): there the float64
		// bound.
		for _, T := range decodeT[1:] {
			after, op := runGroup(t, b, xs[T], T, K, qkv)
			if op != "LinearGroup" && op != "Linear" {
				t.Fatalf("int%d T=%d: last op %q, want one Linear per weight", bits, T, op)
			}
			fusedKV := gemmqRoutes(T, Nkv, K, bits)
			for i, l := range qkv {
				if !fusedKV || i == 0 {
					foldSameBits(t, fmt.Sprintf("int%d T=%d layer %d joined", bits, T, i), after[i], before[T][i])
					continue
				}
				for ti := range T {
					for n := range l.N {
						ref, tol := tiledRef(l, xs[T][ti*K:(ti+1)*K], n)
						if y := after[i][ti*l.N+n]; y != y || !(math.Abs(float64(y)-ref) <= tol) {
							t.Fatalf("int%d T=%d layer %d: y[%d,%d] = %g, want %g ± %.3g", bits, T, i, ti, n, y, ref, tol)
						}
					}
				}
			}
		}

		// One row: one v6.1 launch over the joined rows, each output
		// v6.1 over its own rows at the joined split bit for bit, within
		// the float64 bound.
		xv := xs[1]
		outs, op := runGroup(t, b, xv, 1, K, qkv)
		if op != "LinearGroup(joined)" {
			t.Fatalf("int%d T=1: last op %q, want LinearGroup(joined)", bits, op)
		}
		S := b.gemvq.SplitV5For(Nq+2*Nkv, K, bits)
		sep := separateV6(t, b, xv, K, S, qkv)
		for i, l := range qkv {
			foldSameBits(t, fmt.Sprintf("int%d T=1 layer %d joined against its own v6.1 at S %d", bits, i, S), outs[i], sep[i])
			worst := 0.0
			for n, y := range outs[i] {
				ref, tol := tiledRef(l, xv, n)
				d := math.Abs(float64(y) - ref)
				if y != y || !(d <= tol) {
					t.Fatalf("int%d T=1 layer %d: y[%d] = %g, want %g ± %.3g", bits, i, n, y, ref, tol)
				}
				worst = max(worst, d/tol)
			}
			t.Logf("int%d T=1 layer %d: worst |gpu - float64| = %.3f of the bound", bits, i, worst)
		}
		if Sq := b.gemvq.SplitV5For(Nq, K, bits); Sq == S {
			foldSameBits(t, fmt.Sprintf("int%d T=1 q joined against q alone", bits), outs[0], before[1][0])
		} else {
			t.Logf("int%d: q alone at S %d, joined at S %d: other sums (the bound holds)", bits, Sq, S)
		}

		// RoPEQK without norms folds into the joined launch's split:
		// the bits of LinearGroup, a flush, then RoPEQK.
		half := D / 2
		inv := make([]float32, half)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -float64(2*i)/D))
		}
		f := foldWeight(t, b, "rope.inv_freq", inv, half)
		pos, err := b.Alloc(backend.I32, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(pos) })
		if err := b.UploadInt32(pos, []int32{int32(r.IntN(131072))}); err != nil {
			t.Fatal(err)
		}
		rope := func(flush bool) [3][]float32 {
			x := foldTensor(t, b, xv, 1, K)
			q, k, v := foldTensor(t, b, nil, 1, Nq), foldTensor(t, b, nil, 1, Nkv), foldTensor(t, b, nil, 1, Nkv)
			b.LinearGroup([]backend.Tensor{q, k, v}, x, ws, []backend.Weight{qkv[0].b, nil, qkv[2].b})
			if flush {
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			b.RoPEQK(q, k, pos, f, nil, nil, 1e-6)
			op, want := b.lastOp(), "RoPEQK"
			if !flush {
				want = "LinearGroup(joined)+RoPEQK"
			}
			if op != want {
				t.Fatalf("int%d (flush %v): last queued op %q, want %q", bits, flush, op, want)
			}
			return [3][]float32{foldDown(t, b, q), foldDown(t, b, k), foldDown(t, b, v)}
		}
		want, got := rope(true), rope(false)
		for i, n := range []string{"q", "k", "v"} {
			foldSameBits(t, fmt.Sprintf("int%d RoPE folded: %s", bits, n), got[i], want[i])
		}

		// The block is freed with its last weight.
		for i, l := range qkv {
			b.FreeWeight(l.w)
			if got, want := blk.live.Load(), int32(2-i); got != want {
				t.Fatalf("int%d: after freeing %d weights the block holds %d, want %d", bits, i+1, got, want)
			}
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJoinTiledSwiGLU: gate|up of 1536 rows each (96 row groups: v3 or v2
// alone; gocoder-23m's MLP), joined tiled, at one row: SwiGLU folds into
// the joined launch's split with the bits of the group, a flush, then
// SwiGLU, dst being gate (the model's call).
func TestJoinTiledSwiGLU(t *testing.T) {
	b := foldBackend(t)
	if _, err := b.quantKernels(); err != nil {
		t.Fatal(err)
	}
	const K, N = 1152, 1536
	if b.opts.BatchInvariant || !tiledLayout(&b.opts, b.gemvq, 4, 2*N, K, 128, true) {
		t.Skip("the options keep packed weights off v6.1's tiled route")
	}
	r := rand.New(rand.NewPCG(63, 64))
	gate, up := loadTiledLayer(t, b, r, wq.Int4, "gate", N, K, false), loadTiledLayer(t, b, r, wq.Int4, "up", N, K, false)
	if err := b.JoinWeights(gate.w, up.w); err != nil {
		t.Fatal(err)
	}
	if gate.w.(*weight).block == nil || up.w.(*weight).block == nil {
		t.Fatal("gate|up of 1536 rows each were not joined")
	}
	xv := foldData(r, K, 1)
	run := func(flush bool) (dst, u []float32) {
		x := foldTensor(t, b, xv, 1, K)
		gt, ut := foldTensor(t, b, nil, 1, N), foldTensor(t, b, nil, 1, N)
		b.LinearGroup([]backend.Tensor{gt, ut}, x, []backend.Weight{gate.w, up.w}, nil)
		if flush {
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		b.SwiGLU(gt, gt, ut)
		op, want := b.lastOp(), "SwiGLU"
		if !flush {
			want = "LinearGroup(joined)+SwiGLU"
		}
		if op != want {
			t.Fatalf("flush %v: last queued op %q, want %q", flush, op, want)
		}
		return foldDown(t, b, gt), foldDown(t, b, ut)
	}
	wantD, wantU := run(true)
	gotD, gotU := run(false)
	foldSameBits(t, "dst", gotD, wantD)
	foldSameBits(t, "up", gotU, wantU)
}

// TestJoinTiledKnobs: Options.GEMVQApart leaves q|k|v apart (JoinWeights
// moves nothing; the group runs one Linear per weight at one row), and
// Options.GEMVQJoinSplit sets the joined launch's split (each output v6.1
// over its own rows at that split, bit for bit).
func TestJoinTiledKnobs(t *testing.T) {
	foldBackend(t) // skips without a device
	const K, Nq, Nkv = 1152, 2048, 512
	for _, o := range []Options{{GEMVQApart: true}, {GEMVQJoinSplit: 2}, {GEMVQJoinSplit: 8}} {
		b, err := Open(0, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		r := rand.New(rand.NewPCG(65, uint64(o.GEMVQJoinSplit)))
		qkv := []tiledLayer{loadTiledLayer(t, b, r, wq.Int4, "q", Nq, K, true), loadTiledLayer(t, b, r, wq.Int4, "k", Nkv, K, false), loadTiledLayer(t, b, r, wq.Int4, "v", Nkv, K, false)}
		if err := b.JoinWeights(qkv[0].w, qkv[1].w, qkv[2].w); err != nil {
			t.Fatal(err)
		}
		xv := foldData(r, K, 1)
		outs, op := runGroup(t, b, xv, 1, K, qkv)
		if o.GEMVQApart {
			for _, l := range qkv {
				if l.w.(*weight).block != nil {
					t.Fatalf("GEMVQApart: JoinWeights moved %s", l.w.Name())
				}
			}
			if op != "Linear" {
				t.Fatalf("GEMVQApart: last op %q, want Linear", op)
			}
			continue
		}
		if op != "LinearGroup(joined)" {
			t.Fatalf("split %d: last op %q, want LinearGroup(joined)", o.GEMVQJoinSplit, op)
		}
		sep := separateV6(t, b, xv, K, o.GEMVQJoinSplit, qkv)
		for i := range qkv {
			foldSameBits(t, fmt.Sprintf("split %d layer %d", o.GEMVQJoinSplit, i), outs[i], sep[i])
		}
	}
}

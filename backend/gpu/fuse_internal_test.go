package gpu

// The folds of fuse.go: SwiGLU and RoPEQK queued right after a decode
// LinearGroup run in its gemv.cu launch, or in the batch-invariant mode in
// its linear.cu narrow launch (the queue's last op is the folded one), leave every tensor with the bits of the separate ops (LinearGroup,
// a flush, then the op), and are refused where they must be (dst over x,
// q/k norms, three rows).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// foldBackend opens a backend on GPU 0 with the environment's options, or
// skips the test.
func foldBackend(t *testing.T) *Backend {
	t.Helper()
	o, err := ParseOptions(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o.CUDA != nil {
		if err := cuda.Configure(*o.CUDA); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Open(0, o)
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// foldBackends returns foldBackend and, unless the environment already
// asks for it, a second backend in the batch-invariant mode (whose folds
// go to linear.cu's pair kernels, decode-step.md v30).
func foldBackends(t *testing.T) []*Backend {
	t.Helper()
	b := foldBackend(t)
	if b.opts.BatchInvariant {
		return []*Backend{b}
	}
	o := b.opts
	o.BatchInvariant = true
	bi, err := Open(0, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bi.Close() })
	return []*Backend{b, bi}
}

// foldsInto returns the name of the op that SwiGLU (RoPEQK), named op,
// queued right after a LinearGroup of T rows, N summed channels and K
// inputs folds into on b, or "" where it does not fold.
func (b *Backend) foldsInto(op string, T, N, K int) string {
	switch path := b.fp16Path(T, N, K, false); {
	case T <= gemvDecodeRows && path == pathGEMV:
		return "LinearGroup+" + op
	case b.opts.BatchInvariant && !b.opts.NoLinearFold && T <= kernels.LinearTunedMaxRows:
		return "LinearGroup+" + op + " (linear.cu)"
	}
	return ""
}

// foldData holds random float32 data: N(0, scale²).
func foldData(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * r.NormFloat64())
	}
	return v
}

// foldWeight loads v as a weight of shape (F32 data: matrices stored fp16).
func foldWeight(t *testing.T, b *Backend, name string, v []float32, shape ...int) backend.Weight {
	t.Helper()
	data := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
	}
	w, err := b.LoadWeight(name, backend.F32, shape, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.FreeWeight(w) })
	return w
}

// foldTensor allocates an F32 tensor holding v (NaNs where v is nil).
func foldTensor(t *testing.T, b *Backend, v []float32, shape ...int) backend.Tensor {
	t.Helper()
	x, err := b.Alloc(backend.F32, shape...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(x) })
	if v == nil {
		v = make([]float32, backend.NumElements(shape))
		for i := range v {
			v[i] = float32(math.NaN())
		}
	}
	if err := b.Upload(x, v); err != nil {
		t.Fatal(err)
	}
	return x
}

// lastOp returns the name of the last queued op ("" for none).
func (b *Backend) lastOp() string {
	b.qMu.Lock()
	defer b.qMu.Unlock()
	if len(b.queue) == 0 {
		return ""
	}
	return b.queue[len(b.queue)-1].op
}

// down returns x's values after the queue has run.
func foldDown(t *testing.T, b *Backend, x backend.Tensor) []float32 {
	t.Helper()
	v := make([]float32, backend.NumElements(x.Shape()))
	if err := b.Download(v, x); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	return v
}

func foldSameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) || got[i] != got[i] {
			t.Fatalf("%s: element %d = %g, want %g", what, i, got[i], want[i])
		}
	}
}

func TestFoldSwiGLU(t *testing.T) {
	for _, b := range foldBackends(t) {
		foldSwiGLU(t, b)
	}
}

func foldSwiGLU(t *testing.T, b *Backend) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, sh := range []struct{ T, K, N int }{{1, 1032, 1001}, {2, 520, 3072}, {3, 264, 130}, {1, 1024, 1024}, {12, 264, 130}} {
		wg := foldWeight(t, b, "gate", foldData(r, sh.N*sh.K, 0.02), sh.N, sh.K)
		wu := foldWeight(t, b, "up", foldData(r, sh.N*sh.K, 0.02), sh.N, sh.K)
		bu := foldWeight(t, b, "up.bias", foldData(r, sh.N, 1), sh.N)
		xv := foldData(r, sh.T*sh.K, 1)
		// dst: gate (the model's SwiGLU(gate, gate, up)), up, a tensor of
		// its own, and x (the GEMV's input: refused).
		for _, glu := range []string{"SwiGLU", "GeGLU"} {
			for _, dstIs := range []string{"gate", "up", "own", "x"} {
				name := fmt.Sprintf("%s T=%d K=%d N=%d dst=%s invariant %v", glu, sh.T, sh.K, sh.N, dstIs, b.opts.BatchInvariant)
				into := b.foldsInto(glu, sh.T, 2*sh.N, sh.K)
				run := func(flush bool) (dst, gate, up []float32) {
					x := foldTensor(t, b, xv, sh.T, sh.K)
					g, u := foldTensor(t, b, nil, sh.T, sh.N), foldTensor(t, b, nil, sh.T, sh.N)
					d := map[string]backend.Tensor{"gate": g, "up": u, "x": x, "own": nil}[dstIs]
					if d == nil {
						d = foldTensor(t, b, nil, sh.T, sh.N)
					}
					if dstIs == "x" && sh.N != sh.K {
						return nil, nil, nil
					}
					b.LinearGroup([]backend.Tensor{g, u}, x, []backend.Weight{wg, wu}, []backend.Weight{nil, bu})
					if flush {
						if err := b.Sync(); err != nil {
							t.Fatal(err)
						}
					}
					if glu == "GeGLU" {
						b.GeGLU(d, g, u)
					} else {
						b.SwiGLU(d, g, u)
					}
					op, want := b.lastOp(), glu
					if !flush && into != "" && dstIs != "x" {
						want = into
					}
					if op != want {
						t.Fatalf("%s (flush %v): last queued op %q, want %q", name, flush, op, want)
					}
					return foldDown(t, b, d), foldDown(t, b, g), foldDown(t, b, u)
				}
				wantD, wantG, wantU := run(true)
				if wantD == nil {
					continue
				}
				gotD, gotG, gotU := run(false)
				foldSameBits(t, name+": dst", gotD, wantD)
				foldSameBits(t, name+": gate", gotG, wantG)
				foldSameBits(t, name+": up", gotU, wantU)
			}
		}
	}
}

func TestFoldRoPE(t *testing.T) {
	for _, b := range foldBackends(t) {
		foldRoPE(t, b)
	}
}

func foldRoPE(t *testing.T, b *Backend) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, sh := range []struct{ T, K, Hq, Hk, D int }{{1, 520, 4, 2, 128}, {2, 1032, 8, 2, 64}, {3, 264, 2, 1, 128}, {16, 264, 2, 1, 64}} {
		half := sh.D / 2
		inv := make([]float32, half)
		for i := range inv {
			inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(sh.D)))
		}
		f := foldWeight(t, b, "rope.inv_freq", inv, half)
		Nq, Nk := sh.Hq*sh.D, sh.Hk*sh.D
		wq := foldWeight(t, b, "q", foldData(r, Nq*sh.K, 0.02), Nq, sh.K)
		wk := foldWeight(t, b, "k", foldData(r, Nk*sh.K, 0.02), Nk, sh.K)
		wv := foldWeight(t, b, "v", foldData(r, Nk*sh.K, 0.02), Nk, sh.K)
		bq := foldWeight(t, b, "q.bias", foldData(r, Nq, 1), Nq)
		qn := foldWeight(t, b, "q_norm", foldData(r, sh.D, 1), sh.D)
		kn := foldWeight(t, b, "k_norm", foldData(r, sh.D, 1), sh.D)
		xv := foldData(r, sh.T*sh.K, 1)
		pv := make([]int32, sh.T)
		for i := range pv {
			pv[i] = int32(r.IntN(131072))
		}
		pos, err := b.Alloc(backend.I32, sh.T)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(pos) })
		if err := b.UploadInt32(pos, pv); err != nil {
			t.Fatal(err)
		}
		into := b.foldsInto("RoPEQK", sh.T, (sh.Hq+2*sh.Hk)*sh.D, sh.K)
		for _, norm := range []bool{false, true} {
			name := fmt.Sprintf("T=%d K=%d Hq=%d Hk=%d D=%d norm %v invariant %v", sh.T, sh.K, sh.Hq, sh.Hk, sh.D, norm, b.opts.BatchInvariant)
			var qw, kw backend.Weight
			if norm {
				qw, kw = qn, kn
			}
			run := func(flush bool) [3][]float32 {
				x := foldTensor(t, b, xv, sh.T, sh.K)
				q, k, v := foldTensor(t, b, nil, sh.T, Nq), foldTensor(t, b, nil, sh.T, Nk), foldTensor(t, b, nil, sh.T, Nk)
				b.LinearGroup([]backend.Tensor{q, k, v}, x, []backend.Weight{wq, wk, wv}, []backend.Weight{bq, nil, nil})
				if flush {
					if err := b.Sync(); err != nil {
						t.Fatal(err)
					}
				}
				b.RoPEQK(q, k, pos, f, qw, kw, 1e-6)
				op, want := b.lastOp(), "RoPEQK"
				if !flush && into != "" && !norm {
					want = into
				}
				if op != want {
					t.Fatalf("%s (flush %v): last queued op %q, want %q", name, flush, op, want)
				}
				return [3][]float32{foldDown(t, b, q), foldDown(t, b, k), foldDown(t, b, v)}
			}
			want, got := run(true), run(false)
			for i, n := range []string{"q", "k", "v"} {
				foldSameBits(t, name+": "+n, got[i], want[i])
			}
		}
	}
}

// TestEarlyNormInputsDecision: AddRMSNorm reads h early only right after a
// queued gemv.cu launch none of whose outputs overlaps h, and never with
// Options.NoEarlyNorm (no GPU needed).
func TestEarlyNormInputsDecision(t *testing.T) {
	const T, N = 2, 64
	y := cuda.DevicePtr(1 << 20)
	gemv := queuedOp{op: "Linear", plain: &gemvLaunch{T: T, K: 8, groups: []kernels.LinearGroup{{Y: y, N: N}}}}
	group := queuedOp{op: "LinearGroup", gemv: &gemvLaunch{T: T, K: 8, groups: []kernels.LinearGroup{{Y: y, N: N}, {Y: y + 4*T*N, N: N}}}}
	lin := queuedOp{op: "LinearGroup", lin: group.gemv}
	for _, tt := range []struct {
		name  string
		queue []queuedOp
		h     cuda.DevicePtr
		no    bool
		want  bool
	}{
		{"after a gemv launch", []queuedOp{gemv}, y + 4*T*N, false, true},
		{"after a group launch", []queuedOp{group}, y + 8*T*N, false, true},
		{"h is a group's second output", []queuedOp{group}, y + 4*T*N, false, false},
		{"after a linear.cu group launch", []queuedOp{lin}, y + 8*T*N, false, true},
		{"h is a linear.cu group's output", []queuedOp{lin}, y, false, false},
		{"h below its output", []queuedOp{gemv}, y - 4*T*N, false, true},
		{"h is its output", []queuedOp{gemv}, y, false, false},
		{"h overlaps its output's end", []queuedOp{gemv}, y + 4*T*N - 4, false, false},
		{"NoEarlyNorm", []queuedOp{gemv}, y + 4*T*N, true, false},
		{"empty queue", nil, y + 4*T*N, false, false},
		{"after another op", []queuedOp{gemv, {op: "Add"}}, y + 4*T*N, false, false},
	} {
		if gemv.foldable() {
			t.Fatal("a plain gemv.cu launch is foldable: it would keep ops past a segment's end")
		}
		b := &Backend{queue: tt.queue}
		b.opts.NoEarlyNorm = tt.no
		if got := b.earlyNormInputs(&tensor{ptr: tt.h, n: T * N}); got != tt.want {
			t.Errorf("%s: earlyNormInputs = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestEarlyNormInputs: a decode Linear then AddRMSNorm over its output (the
// step's o or down, then the residual's norm) queues the norm with early
// loads, and h and x get the bits of the same ops with a flush between
// (no early loads).
func TestEarlyNormInputs(t *testing.T) {
	b := foldBackend(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, sh := range []struct{ T, K, G int }{{1, 1032, 4096}, {2, 520, 1024}, {1, 264, 8192}} {
		w := foldWeight(t, b, "o", foldData(r, sh.G*sh.K, 0.02), sh.G, sh.K)
		nw := foldWeight(t, b, "norm", foldData(r, sh.G, 1), sh.G)
		xv, hv := foldData(r, sh.T*sh.K, 1), foldData(r, sh.T*sh.G, 1)
		gemv := b.fp16Path(sh.T, sh.G, sh.K, false) == pathGEMV
		run := func(flush bool) (h, x []float32) {
			in := foldTensor(t, b, xv, sh.T, sh.K)
			ht := foldTensor(t, b, hv, sh.T, sh.G)
			d, xt := foldTensor(t, b, nil, sh.T, sh.G), foldTensor(t, b, nil, sh.T, sh.G)
			b.Linear(d, in, w, nil)
			if flush {
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			early := b.earlyNormInputs(ht.(*tensor))
			if want := gemv && !flush && !b.opts.NoEarlyNorm; early != want {
				t.Fatalf("T=%d K=%d G=%d flush %v: earlyNormInputs = %v, want %v", sh.T, sh.K, sh.G, flush, early, want)
			}
			b.AddRMSNorm(ht, xt, d, nw, 1e-5)
			return foldDown(t, b, ht), foldDown(t, b, xt)
		}
		h0, x0 := run(true)
		h1, x1 := run(false)
		name := fmt.Sprintf("T=%d K=%d G=%d", sh.T, sh.K, sh.G)
		foldSameBits(t, name+": h", h1, h0)
		foldSameBits(t, name+": x", x1, x0)
	}
}

// TestLinearQueuedOps: in the batch-invariant mode a linear.cu narrow
// launch of a group of two or three weights is queued foldable (lin), one
// of a single weight as plain (its AddRMSNorm may read early), neither
// past kernels.LinearTunedMaxRows rows, with Options.NoLinearFold a group as
// plain, with NoLinearEarly a single weight as neither; the default mode's
// linear.cu launches are neither (no GPU needed: nothing runs).
func TestLinearQueuedOps(t *testing.T) {
	const K = 64
	xt := &tensor{ptr: 1 << 20, n: 16 * K}
	one := []kernels.LinearGroup{{Y: 2 << 20, W: 3 << 20, N: 32}}
	two := append(one, kernels.LinearGroup{Y: 4 << 20, W: 5 << 20, N: 32})
	for _, tt := range []struct {
		name                 string
		inv, noFold, noEarly bool
		T                    int
		groups               []kernels.LinearGroup
		wantLin, wantPlain   bool
	}{
		{"invariant group", true, false, false, 1, two, true, false},
		{"invariant group of 8 rows", true, false, false, 8, two, true, false},
		{"invariant group of 9 rows", true, false, false, 9, two, false, false},
		{"invariant single of 16 rows", true, false, false, 16, one, false, false},
		{"invariant single", true, false, false, 1, one, false, true},
		{"invariant group, no fold", true, true, false, 1, two, false, true},
		{"invariant single, no early", true, false, true, 1, one, false, false},
		{"default group", false, false, false, 4, two, false, false},
		{"default single", false, false, false, 4, one, false, false},
	} {
		b := &Backend{}
		b.opts.BatchInvariant, b.opts.NoLinearFold, b.opts.NoLinearEarly = tt.inv, tt.noFold, tt.noEarly
		b.launchLinear("LinearGroup", xt, tt.T, K, tt.groups...)
		if len(b.queue) != 1 {
			t.Fatalf("%s: %d ops queued, want 1", tt.name, len(b.queue))
		}
		q := b.queue[0]
		if (q.lin != nil) != tt.wantLin || (q.plain != nil) != tt.wantPlain {
			t.Errorf("%s: lin %v plain %v, want %v %v", tt.name, q.lin != nil, q.plain != nil, tt.wantLin, tt.wantPlain)
		}
		if q.foldable() != tt.wantLin {
			t.Errorf("%s: foldable %v, want %v", tt.name, q.foldable(), tt.wantLin)
		}
	}
}

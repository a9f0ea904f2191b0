package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// TestQueueAfterSel: a q6 GEMV's op takes its list from the op queued
// right before it only without Options.NoDECNormSelect, only where that op
// writes the GEMV's x (the same address, row length and one row), and
// then replaces it by its variant; otherwise the queue keeps its ops.
func TestQueueAfterSel(t *testing.T) {
	const x, K, sel, kChunk = cuda.DevicePtr(0x10000), 4096, cuda.DevicePtr(0x90000), 8
	norm := func(y cuda.DevicePtr, n, T int) queuedOp {
		return queuedOp{op: "AddRMSNorm", sel: &selOut{y: y, n: n, T: T, with: func(s cuda.DevicePtr, k int) queuedOp {
			return queuedOp{op: fmt.Sprintf("AddRMSNorm+DEC list %#x %d", s, k)}
		}}}
	}
	for _, tt := range []struct {
		name   string
		queue  []queuedOp
		on     bool
		kChunk int
		want   bool
	}{
		{"after the norm writing x", []queuedOp{norm(x, K, 1)}, true, kChunk, true},
		{"option off", []queuedOp{norm(x, K, 1)}, false, kChunk, false},
		{"k_chunk 0", []queuedOp{norm(x, K, 1)}, true, 0, false},
		{"another x", []queuedOp{norm(x+4*K, K, 1)}, true, kChunk, false},
		{"another row length", []queuedOp{norm(x, 2*K, 1)}, true, kChunk, false},
		{"two rows", []queuedOp{norm(x, K, 2)}, true, kChunk, false},
		{"after another op", []queuedOp{norm(x, K, 1), {op: "Add"}}, true, kChunk, false},
		{"empty queue", nil, true, kChunk, false},
	} {
		b := &Backend{queue: slices.Clone(tt.queue)}
		b.opts.NoDECNormSelect = !tt.on
		got := false
		b.queueAfterSel(x, K, sel, tt.kChunk, func(given bool) queuedOp {
			got = given
			return queuedOp{op: "Linear DEC"}
		})
		if got != tt.want {
			t.Errorf("%s: given = %v, want %v", tt.name, got, tt.want)
		}
		if len(b.queue) != len(tt.queue)+1 || b.queue[len(b.queue)-1].op != "Linear DEC" {
			t.Fatalf("%s: the queue after: %d ops", tt.name, len(b.queue))
		}
		if n := len(tt.queue); n > 0 {
			want := tt.queue[n-1].op
			if tt.want {
				want = fmt.Sprintf("AddRMSNorm+DEC list %#x %d", sel, kChunk)
			}
			if b.queue[n-1].op != want {
				t.Errorf("%s: the op before the GEMV is %q, want %q", tt.name, b.queue[n-1].op, want)
			}
		}
	}
	if q := norm(x, K, 1); !q.foldable() {
		t.Error("an op with a list variant is not foldable: a segment's end could fall between it and the GEMV")
	}
}

// normSelPairs is how many times TestQ6DECNormSelect queues AddRMSNorm
// then the GEMV in one flush: graphMinOps ops, so that the second run is
// captured into a CUDA graph and the third replays it.
const normSelPairs = (graphMinOps + 1) / 2

// queuedOps returns the names of b's queued ops.
func queuedOps(b *Backend) []string {
	b.qMu.Lock()
	defer b.qMu.Unlock()
	var names []string
	for _, q := range b.queue {
		names = append(names, q.op)
	}
	return names
}

// openSelPair opens two backends with DEC's residuals on the device: bSel
// with the lists made where x is produced (the default), bRef with them
// off (Options.NoDECNormSelect: select_q6 then gemv_q6_dec). It skips
// the test without a CUDA device; both close when it ends.
func openSelPair(t *testing.T) (bSel, bRef *Backend) {
	t.Helper()
	open := func(sel bool) *Backend {
		b, err := Open(0, Options{DECResidualOnDevice: true, NoDECNormSelect: !sel})
		if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
			t.Skipf("no CUDA device: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	return open(true), open(false)
}

// TestQ6DECNormSelect (GPU, session 19b): AddRMSNorm then a joined q6
// group (q|k|v of the 8B's shapes, int4 and int3, k_chunk 8 and 64) or a
// q6 Linear alone at one row, with the lists on (no
// Options.NoDECNormSelect): the norm is queued as its list variant, and h,
// x and every output have the bits of the same ops with the lists off (select_q6 then gemv_q6_dec), which are
// the plain weights' outputs then wq.Compensate; after a warm-up run,
// three runs each of normSelPairs pairs in one flush, the last replaying a
// CUDA graph. Session 23: joined groups whose parts have DEC or not (DEC by
// projection: v alone at k 64 and 256, q alone, gate of gate|up alone):
// the parts without DEC keep the plain weights' bits, the others get
// wq.Compensate's, as each part alone.
func TestQ6DECNormSelect(t *testing.T) {
	bSel, bRef := openSelPair(t)
	const K, eps = 4096, 1e-5
	if !bSel.ops.AddRMSNormSelects(K) {
		t.Skipf("%s: AddRMSNorm over rows of %d runs no cluster", bSel.dev.Arch(), K)
	}
	r := rand.New(rand.NewPCG(19, 23))
	hv, dv, nv := foldData(r, K, 1), foldData(r, K, 1), foldData(r, K, 1)
	for i := range hv {
		if i%97 == 13 {
			hv[i] *= 30 // outlier channels
		}
	}
	load := func(b *Backend, name string, m *wq.Matrix, dec *wq.DEC) backend.Weight {
		w, err := b.LoadQuantWeight(name, m, dec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.FreeWeight(w) })
		return w
	}
	// rig is one backend's tensors for a case, allocated once so that the
	// later runs' ops have the same keys (a graph replay).
	type rig struct {
		b          *Backend
		nw         backend.Weight
		ht, dt, xt backend.Tensor
		outs       []backend.Tensor
	}
	newRig := func(b *Backend, Ns []int) *rig {
		g := &rig{b: b, nw: foldWeight(t, b, "norm", nv, K)}
		g.ht, g.dt, g.xt = foldTensor(t, b, hv, 1, K), foldTensor(t, b, dv, 1, K), foldTensor(t, b, nil, 1, K)
		for _, N := range Ns {
			g.outs = append(g.outs, foldTensor(t, b, nil, 1, N))
		}
		return g
	}
	// step runs AddRMSNorm then the weights (a group if several) on g's
	// backend, h fresh and x and the outputs poisoned first, and returns
	// the queued ops' names before the flush, h, x and the outputs.
	step := func(g *rig, ws []backend.Weight) (ops []string, h, x []float32, ys [][]float32) {
		b := g.b
		nan := func(n int) []float32 { return slices.Repeat([]float32{float32(math.NaN())}, n) }
		for _, u := range []struct {
			t backend.Tensor
			v []float32
		}{{g.ht, hv}, {g.xt, nan(K)}} {
			if err := b.Upload(u.t, u.v); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range g.outs {
			if err := b.Upload(o, nan(backend.NumElements(o.Shape()))); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		for range normSelPairs { // h += delta each time
			b.AddRMSNorm(g.ht, g.xt, g.dt, g.nw, eps)
			if len(ws) == 1 {
				b.Linear(g.outs[0], g.xt, ws[0], nil)
			} else {
				b.LinearGroup(g.outs, g.xt, ws, nil)
			}
		}
		ops = queuedOps(b)
		for _, o := range g.outs {
			ys = append(ys, foldDown(t, b, o))
		}
		return ops, foldDown(t, b, g.ht), foldDown(t, b, g.xt), ys
	}
	for _, c := range []struct {
		e      wq.Elem
		kChunk int
		Ns     []int
		off    []bool // parts without DEC (nil: none)
	}{
		{wq.Int4, 8, []int{4096, 1024, 1024}, nil}, {wq.Int4, 64, []int{4096, 1024, 1024}, nil},
		{wq.Int3, 8, []int{4096, 1024, 1024}, nil}, {wq.Int3, 64, []int{4096, 1024, 1024}, nil},
		{wq.Int4, 16, []int{4096}, nil}, {wq.Int3, 64, []int{4096}, nil},
		{wq.Int4, 64, []int{4096, 1024, 1024}, []bool{true, true, false}},
		{wq.Int3, 256, []int{4096, 1024, 1024}, []bool{true, true, false}},
		{wq.Int4, 32, []int{4096, 1024, 1024}, []bool{false, true, true}},
		{wq.Int3, 64, []int{2048, 2048}, []bool{false, true}},
	} {
		var sel, ref, plain []backend.Weight
		var res []*wq.Matrix
		for i, N := range c.Ns {
			w := foldData(r, N*K, 0.02)
			m, err := wq.Quantize(c.e, 128, N, K, w)
			if err != nil {
				t.Fatal(err)
			}
			rm, err := wq.NewResidual(w, m, wq.Int4)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("w%d", i)
			dec := &wq.DEC{R: rm, KChunk: c.kChunk}
			if c.off != nil && c.off[i] {
				dec, rm = nil, nil
			}
			sel = append(sel, load(bSel, name, m, dec))
			ref = append(ref, load(bRef, name, m, dec))
			plain = append(plain, load(bRef, name+".plain", m, nil))
			res = append(res, rm)
		}
		if len(c.Ns) > 1 {
			if err := bSel.JoinWeights(sel...); err != nil {
				t.Fatal(err)
			}
			if err := bRef.JoinWeights(ref...); err != nil {
				t.Fatal(err)
			}
			if err := bRef.JoinWeights(plain...); err != nil {
				t.Fatal(err)
			}
		}
		for i := range sel {
			if res[i] == nil {
				if cw := sel[i].(*weight); cw.dec != nil || (len(c.Ns) > 1) != (cw.block != nil && cw.block.dec != nil) {
					t.Fatalf("int%d k%d weight %d without DEC: not in the joined DEC group", c.e.Bits(), c.kChunk, i)
				}
				continue
			}
			if q6, joint := Q6DEC(sel[i]); !q6 || joint != (len(c.Ns) > 1) {
				t.Fatalf("int%d k%d weight %d: q6 %v, joint %v", c.e.Bits(), c.kChunk, i, q6, joint)
			}
		}
		_, h0, x0, y0 := step(newRig(bRef, c.Ns), plain)
		gSel, gRef := newRig(bSel, c.Ns), newRig(bRef, c.Ns)
		// A warm-up run on each backend, its outputs compared but not its
		// queue: a backend's first joined GEMV grows its output buffer
		// (growKeyed), a flush between the first norm and its GEMV, so
		// that norm runs without its list (the GEMV selects itself).
		_, hS, xS, yS := step(gSel, sel)
		_, hR, xR, yR := step(gRef, ref)
		foldSameBits(t, "warm-up: h", hS, hR)
		foldSameBits(t, "warm-up: x", xS, xR)
		for i := range yS {
			foldSameBits(t, fmt.Sprintf("warm-up: output %d against the option off", i), yS[i], yR[i])
		}
		replayed := bSel.GraphStats().Replayed
		for rep := range 3 {
			name := fmt.Sprintf("int%d k%d %v run %d", c.e.Bits(), c.kChunk, c.Ns, rep)
			opsSel, hS, xS, yS := step(gSel, sel)
			opsRef, hR, xR, yR := step(gRef, ref)
			const variant = "AddRMSNorm+DEC list"
			if n := count(opsSel, variant); n != normSelPairs || count(opsRef, variant) != 0 || len(opsSel) != len(opsRef) {
				t.Fatalf("%s: queued with the option %q, without %q", name, opsSel, opsRef)
			}
			foldSameBits(t, name+": h", hS, hR)
			foldSameBits(t, name+": x", xS, xR)
			foldSameBits(t, name+": x (plain)", xS, x0)
			foldSameBits(t, name+": h (plain)", hS, h0)
			for i := range yS {
				want := slices.Clone(y0[i])
				foldSameBits(t, fmt.Sprintf("%s: output %d against the option off", name, i), yS[i], yR[i])
				if res[i] == nil { // a part without DEC: the plain weight's bits
					foldSameBits(t, fmt.Sprintf("%s: output %d (no DEC) against the plain weight", name, i), yS[i], want)
					continue
				}
				wq.Compensate(want, x0, wq.SelectApprox(nil, x0, c.kChunk), res[i], nil)
				foldSameBits(t, fmt.Sprintf("%s: output %d against wq.Compensate", name, i), yS[i], want)
				if slices.Equal(want, y0[i]) {
					t.Fatalf("%s: output %d: DEC changed nothing", name, i)
				}
			}
		}
		if st := bSel.GraphStats(); st.Replayed == replayed {
			t.Fatalf("int%d k%d %v: no graph replayed with the option (%+v)", c.e.Bits(), c.kChunk, c.Ns, st)
		}
	}
}

// count returns how many of names are name.
func count(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}

// TestQ6DECOutSelect (GPU, session 19b): an attention op (EnqueueAttend,
// here a stand-in whose last launch is the output's conversion, rotated
// or not, as a GPU KV cache's) then o's q6 Linear at one row, with the
// lists on (no Options.NoDECNormSelect): the op is queued as its list
// variant (RunSel), and its output and o's have the bits of the same ops
// with the lists off
// and of the plain weight's output then wq.Compensate; normSelPairs pairs
// a flush, three runs, the third replaying a graph.
func TestQ6DECOutSelect(t *testing.T) {
	bSel, bRef := openSelPair(t)
	const N, K, D = 4096, 4096, 128
	if !bSel.ops.OutSelects(1, K, D) {
		t.Skipf("%s: no o-input kernels with DEC's list", bSel.dev.Arch())
	}
	r := rand.New(rand.NewPCG(19, 24))
	ohv := make([]float32, K/2) // K fp16 values, two a float32
	for i := range ohv {
		lo, hi := half.FromFloat32(float32(r.NormFloat64())), half.FromFloat32(float32(r.NormFloat64()))
		if i%61 == 7 {
			hi = half.FromFloat32(float32(20 * r.NormFloat64()))
		}
		ohv[i] = math.Float32frombits(uint32(lo) | uint32(hi)<<16)
	}
	for _, c := range []struct {
		e      wq.Elem
		kChunk int
		rotate bool
	}{{wq.Int4, 8, true}, {wq.Int3, 64, true}, {wq.Int4, 64, false}} {
		w := foldData(r, N*K, 0.02)
		m, err := wq.Quantize(c.e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		rm, err := wq.NewResidual(w, m, wq.Int4)
		if err != nil {
			t.Fatal(err)
		}
		load := func(b *Backend, dec *wq.DEC) backend.Weight {
			wt, err := b.LoadQuantWeight("o", m, dec)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.FreeWeight(wt) })
			return wt
		}
		type rig struct {
			b          *Backend
			w          backend.Weight
			oh, out, y backend.Tensor
		}
		newRig := func(b *Backend, dec *wq.DEC) *rig {
			return &rig{b: b, w: load(b, dec), oh: foldTensor(t, b, ohv, K/2), out: foldTensor(t, b, nil, 1, K), y: foldTensor(t, b, nil, 1, N)}
		}
		step := func(g *rig) (ops []string, out, y []float32) {
			b := g.b
			for _, tt := range []backend.Tensor{g.out, g.y} {
				if err := b.Upload(tt, slices.Repeat([]float32{float32(math.NaN())}, backend.NumElements(tt.Shape()))); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			po, pout := g.oh.(*tensor).ptr, g.out.(*tensor).ptr
			rotD := 0
			if c.rotate {
				rotD = D
			}
			for range normSelPairs {
				b.EnqueueAttend(AttendOp{Op: "attend", T: 1, Hq: K / D, Hkv: 1, D: D, Out: pout, N: K,
					Key: []uint64{u64(po), u64(pout), b2u(c.rotate)},
					Run: func(x *cuda.Ctx, _ cuda.DevicePtr, _ *kernels.RoPEQKV) error {
						if c.rotate {
							return b.ops.F16ToF32Hadamard(x, b.stream, pout, po, K/D, D)
						}
						return b.ops.F16ToF32(x, b.stream, pout, po, K)
					},
					RunSel: func(x *cuda.Ctx, _ *kernels.RoPEQKV, sel cuda.DevicePtr, kChunk int) error {
						if c.rotate {
							return b.ops.F16ToF32HadamardSel(x, b.stream, pout, po, 1, K, rotD, sel, kChunk)
						}
						return b.ops.F16ToF32Sel(x, b.stream, pout, po, 1, K, sel, kChunk)
					}})
				b.Linear(g.y, g.out, g.w, nil)
			}
			ops = queuedOps(b)
			return ops, foldDown(t, b, g.out), foldDown(t, b, g.y)
		}
		name := fmt.Sprintf("int%d k%d rotated %v", c.e.Bits(), c.kChunk, c.rotate)
		_, out0, y0 := step(newRig(bRef, nil))
		want := slices.Clone(y0)
		wq.Compensate(want, out0, wq.SelectApprox(nil, out0, c.kChunk), rm, nil)
		if slices.Equal(want, y0) {
			t.Fatalf("%s: DEC changed nothing", name)
		}
		dec := &wq.DEC{R: rm, KChunk: c.kChunk}
		gSel, gRef := newRig(bSel, dec), newRig(bRef, dec)
		replayed := bSel.GraphStats().Replayed
		for rep := range 3 {
			what := fmt.Sprintf("%s run %d", name, rep)
			opsSel, outS, yS := step(gSel)
			opsRef, outR, yR := step(gRef)
			if count(opsSel, "attend+DEC list") != normSelPairs || count(opsRef, "attend+DEC list") != 0 || len(opsSel) != len(opsRef) {
				t.Fatalf("%s: queued with the option %q, without %q", what, opsSel, opsRef)
			}
			foldSameBits(t, what+": attention output", outS, outR)
			foldSameBits(t, what+": attention output (plain)", outS, out0)
			foldSameBits(t, what+": o against the option off", yS, yR)
			foldSameBits(t, what+": o against wq.Compensate", yS, want)
		}
		if st := bSel.GraphStats(); st.Replayed == replayed {
			t.Fatalf("%s: no graph replayed with the option (%+v)", name, st)
		}
	}
}

// TestQ6DECDownSelect (GPU, session 19b): gate|up joined with DEC at one
// row, SwiGLU folded into its split, then down's q6 Linear, with the
// lists on (no Options.NoDECNormSelect): the split is queued as its list
// variant (swiglu_cols_sel), and gate|up's outputs, SwiGLU's and down's
// have the bits of the same ops with the lists off; down's output also equals the
// plain down weight's over the same input, then wq.Compensate.
// normSelPairs steps a flush, three runs, the third replaying a graph.
// Session 24: the same with gate and up without DEC (apart: two GEMVs,
// then SwiGLU's own op queued as swiglu_sel's variant), as many steps as
// fill one graph.
func TestQ6DECDownSelect(t *testing.T) {
	bSel, bRef := openSelPair(t)
	const K, F = 4096, 4096 // the model's width and the MLP's (gate, up: [F, K]; down: [K, F])
	if !bSel.ops.GLUSelects(1, F) {
		t.Skipf("%s: no swiglu_cols_sel", bSel.dev.Arch())
	}
	r := rand.New(rand.NewPCG(19, 26))
	xv := foldData(r, K, 1)
	for i := range xv {
		if i%97 == 13 {
			xv[i] *= 30
		}
	}
	quant := func(e wq.Elem, N, K int) (*wq.Matrix, *wq.Matrix) {
		w := foldData(r, N*K, 0.02)
		m, err := wq.Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		rm, err := wq.NewResidual(w, m, wq.Int4)
		if err != nil {
			t.Fatal(err)
		}
		return m, rm
	}
	// apart: gate and up without DEC (not joined: two GEMVs, then
	// SwiGLU's own op, whose swiglu_sel variant writes down's list;
	// session 24).
	for _, c := range []struct {
		e      wq.Elem
		kChunk int
		apart  bool
	}{{wq.Int4, 8, false}, {wq.Int3, 64, false}, {wq.Int4, 16, true}, {wq.Int3, 32, true}} {
		mg, rg := quant(c.e, F, K)
		mu, ru := quant(c.e, F, K)
		md, rd := quant(c.e, K, F)
		type rig struct {
			b              *Backend
			gate, up, down backend.Weight
			x, g, u, y     backend.Tensor
		}
		newRig := func(b *Backend) *rig {
			load := func(name string, m, res *wq.Matrix) backend.Weight {
				var dec *wq.DEC
				if res != nil {
					dec = &wq.DEC{R: res, KChunk: c.kChunk}
				}
				w, err := b.LoadQuantWeight(name, m, dec)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.FreeWeight(w) })
				return w
			}
			rgu, ruu := rg, ru
			if c.apart {
				rgu, ruu = nil, nil
			}
			g := &rig{b: b, gate: load("gate", mg, rgu), up: load("up", mu, ruu), down: load("down", md, rd)}
			if err := b.JoinWeights(g.gate, g.up); err != nil {
				t.Fatal(err)
			}
			q6s := []backend.Weight{g.gate, g.up, g.down}
			if c.apart {
				q6s = q6s[2:]
			}
			for _, w := range q6s {
				if q6, _ := Q6DEC(w); !q6 {
					t.Fatalf("int%d: a weight is not a q6 weight", c.e.Bits())
				}
			}
			g.x, g.g, g.u, g.y = foldTensor(t, b, xv, 1, K), foldTensor(t, b, nil, 1, F), foldTensor(t, b, nil, 1, F), foldTensor(t, b, nil, 1, K)
			return g
		}
		// Apart, a pair is four ops (gate, up, SwiGLU, down): as many pairs
		// as make one graph's worth, under a segment (no flush between).
		pairs := normSelPairs
		if c.apart {
			pairs = (graphMinOps + 3) / 4
		}
		step := func(g *rig) (ops []string, act, up, y []float32) {
			b := g.b
			for _, tt := range []backend.Tensor{g.g, g.u, g.y} {
				if err := b.Upload(tt, slices.Repeat([]float32{float32(math.NaN())}, backend.NumElements(tt.Shape()))); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			for range pairs {
				b.LinearGroup([]backend.Tensor{g.g, g.u}, g.x, []backend.Weight{g.gate, g.up}, nil)
				b.SwiGLU(g.g, g.g, g.u)
				b.Linear(g.y, g.g, g.down, nil)
			}
			ops = queuedOps(b)
			return ops, foldDown(t, b, g.g), foldDown(t, b, g.u), foldDown(t, b, g.y)
		}
		name := fmt.Sprintf("int%d k%d apart %v", c.e.Bits(), c.kChunk, c.apart)
		gSel, gRef := newRig(bSel), newRig(bRef)
		plain, err := bRef.LoadQuantWeight("down.plain", md, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bRef.FreeWeight(plain) })
		replayed := bSel.GraphStats().Replayed
		for rep := range 3 {
			what := fmt.Sprintf("%s run %d", name, rep)
			opsSel, aS, uS, yS := step(gSel)
			opsRef, aR, uR, yR := step(gRef)
			variant := "LinearGroup(joined)+SwiGLU+DEC list"
			if c.apart {
				variant = "SwiGLU+DEC list"
			}
			if count(opsSel, variant) != pairs || count(opsRef, variant) != 0 || len(opsSel) != len(opsRef) {
				t.Fatalf("%s: queued with the option %q, without %q", what, opsSel, opsRef)
			}
			foldSameBits(t, what+": SwiGLU", aS, aR)
			foldSameBits(t, what+": up", uS, uR)
			foldSameBits(t, what+": down against the option off", yS, yR)
			y0 := linearOnce(t, bRef, plain, nil, aS, 1, K, F)
			want := slices.Clone(y0)
			wq.Compensate(want, aS, wq.SelectApprox(nil, aS, c.kChunk), rd, nil)
			if slices.Equal(want, y0) {
				t.Fatalf("%s: DEC changed nothing in down", what)
			}
			foldSameBits(t, what+": down against wq.Compensate", yS, want)
		}
		if st := bSel.GraphStats(); st.Replayed == replayed {
			t.Fatalf("%s: no graph replayed with the option (%+v)", name, st)
		}
	}
}

// linearOnce is Linear over one upload of x [T, K] on b: y [T, N].
func linearOnce(t *testing.T, b *Backend, w, bias backend.Weight, x []float32, T, N, K int) []float32 {
	t.Helper()
	xt, yt := foldTensor(t, b, x, T, K), foldTensor(t, b, nil, T, N)
	b.Linear(yt, xt, w, bias)
	return foldDown(t, b, yt)
}

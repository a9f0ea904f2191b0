package cpu

import (
	"cmp"
	"math"

	"github.com/bitdecode/bitdecode/backend"
)

// f32 returns the CPU tensor behind t if it is an F32 tensor of this backend.
func (b *Backend) f32(op string, t backend.Tensor) (*tensor, error) {
	ct, err := b.tensorOf(op, t)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckF32(op, "cpu", ct, ct.dtype); err != nil {
		return nil, err
	}
	return ct, nil
}

// i32 returns the CPU tensor behind t if it is an I32 tensor of this backend.
func (b *Backend) i32(op string, t backend.Tensor) (*tensor, error) {
	ct, err := b.tensorOf(op, t)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckI32(op, ct, ct.dtype); err != nil {
		return nil, err
	}
	return ct, nil
}

// matrix returns the matrix view (rows, cols) of t.
func (t *tensor) matrix() (rows, cols int) { return backend.Matrix(t.shape) }

// Embedding implements backend.Backend. A packed weight (LoadQuantWeight's)
// gives its rows' dequantized values (backend.QuantEmbedder).
func (b *Backend) Embedding(dst backend.Tensor, table backend.Weight, ids backend.Tensor) {
	const op = "Embedding"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	id, err2 := b.i32(op, ids)
	var tw backend.Named
	var row func(dst []float32, i int)
	var err3 error
	if q := b.quantWeight(table); q != nil && q.m != nil {
		tw, row = backend.Named{Name: q.name, Shape: q.Shape()}, q.m.DequantRow
	} else {
		var w *weight
		if w, err3 = b.weightOf(op, table); err3 == nil {
			tw, row = backend.Named{Name: w.name, Shape: w.shape}, w.row
		}
	}
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckEmbedding(d.shape, tw, len(id.i32)); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckTokenIDs(id.i32, tw); err != nil {
		b.fail(err)
		return
	}
	_, K := d.matrix()
	for t, v := range id.i32 {
		row(d.f32[t*K:(t+1)*K], int(v))
	}
}

// EmbedsQuantized implements backend.QuantEmbedder: Embedding gathers the
// rows of a packed weight as their dequantized values.
func (b *Backend) EmbedsQuantized() {}

// Rows implements backend.Backend.
func (b *Backend) Rows(dst, src backend.Tensor, idx backend.Tensor) {
	const op = "Rows"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	s, err2 := b.f32(op, src)
	ix, err3 := b.i32(op, idx)
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRows(d.shape, s.shape, len(ix.i32), d == s); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRowIndices(ix.i32, s.shape); err != nil {
		b.fail(err)
		return
	}
	_, K := d.matrix()
	for r, v := range ix.i32 {
		copy(d.f32[r*K:(r+1)*K], s.f32[int(v)*K:(int(v)+1)*K])
	}
}

// Linear implements backend.Backend.
func (b *Backend) Linear(dst, x backend.Tensor, w backend.Weight, bias backend.Weight) {
	const op = "Linear"
	if b.failed() {
		return
	}
	if qw := b.quantWeight(w); qw != nil {
		d, err1 := b.f32(op, dst)
		xt, err2 := b.f32(op, x)
		if err := cmp.Or(err1, err2); err != nil {
			b.fail(err)
			return
		}
		b.linearQuant(op, d, xt, qw, bias)
		return
	}
	xt, p, err := b.linearOperands(op, dst, x, w, bias)
	if err != nil {
		b.fail(err)
		return
	}
	T, K := xt.matrix()
	b.linear(p.y, xt.f32, p.w, p.bias, T, K, p.w.shape[0])
}

// linearOperands resolves and checks the operands of one linear layer with
// an unpacked weight: x, and the layer as a linearPart.
func (b *Backend) linearOperands(op string, dst, x backend.Tensor, w, bias backend.Weight) (*tensor, linearPart, error) {
	d, err1 := b.f32(op, dst)
	xt, err2 := b.f32(op, x)
	wt, err3 := b.weightOf(op, w)
	if err := cmp.Or(err1, err2, err3); err != nil {
		return nil, linearPart{}, err
	}
	p := linearPart{y: d.f32, w: wt}
	var bn backend.Named
	if bias != nil {
		bt, err := b.weightOf(op, bias)
		if err != nil {
			return nil, linearPart{}, err
		}
		p.bias, bn = bt.f32, backend.Named{Name: bt.name, Shape: bt.shape}
	}
	if err := backend.CheckLinear(d.shape, xt.shape, backend.Named{Name: wt.name, Shape: wt.shape}, bn, d == xt); err != nil {
		return nil, linearPart{}, err
	}
	return xt, p, nil
}

// LinearGroup implements backend.Backend: the layers' work items run in one
// parallel region (linearGroup), each cut into the tiles Linear uses, so
// the results are bitwise those of separate calls. Quantized weights on one
// integer path share one quantization of x (linearGroupQuant); other
// packed low-bit weights run one Linear each.
func (b *Backend) LinearGroup(dsts []backend.Tensor, x backend.Tensor, ws, biases []backend.Weight) {
	const op = "LinearGroup"
	if b.failed() {
		return
	}
	if err := backend.CheckLinearGroup(dsts, x, ws, biases); err != nil {
		b.fail(err)
		return
	}
	for _, w := range ws {
		if b.quantWeight(w) != nil {
			b.linearGroupQuant(op, dsts, x, ws, biases)
			return
		}
	}
	var xt *tensor
	parts := make([]linearPart, 0, len(ws))
	for i, w := range ws {
		xi, p, err := b.linearOperands(op, dsts[i], x, w, backend.BiasAt(biases, i))
		if err != nil {
			b.fail(err)
			return
		}
		xt, parts = xi, append(parts, p)
	}
	T, K := xt.matrix()
	b.linearGroup(xt.f32, T, K, parts)
}

// RMSNorm implements backend.Backend.
//
// As HF's LlamaRMSNorm computes in float32: the sum of squares (sumSquares:
// compensated float32 lanes, within about 2⁻²³ of the exact sum), mean =
// float32(sum/G), r = 1/sqrt(mean + eps) rounded once to float32 (as the
// CUDA backend does), and y = w·(x·r) in float32.
func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	const op = "RMSNorm"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	xt, err2 := b.f32(op, x)
	wt, err3 := b.weightOf(op, w)
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRMSNorm(d.shape, xt.shape, backend.Named{Name: wt.name, Shape: wt.shape}); err != nil {
		b.fail(err)
		return
	}
	T, C := xt.matrix()
	G := wt.shape[0]
	groups := T * (C / G)
	b.parallelRows(groups, G, func(g0, g1 int) {
		for g := g0; g < g1; g++ {
			rmsNormGroup(d.f32[g*G:(g+1)*G], xt.f32[g*G:(g+1)*G], wt.f32, eps)
		}
	})
}

// rmsNormGroup sets dst = w ⊙ x·r for one group x (len(w) elements), r =
// 1/sqrt(mean(x²) + eps): RMSNorm's arithmetic (see RMSNorm), shared by
// the ops that fuse it. dst may be x.
func rmsNormGroup(dst, x, w []float32, eps float32) {
	mean := float32(sumSquares(x) / float64(len(w)))
	r := float32(1 / math.Sqrt(float64(mean+eps)))
	scaleMulVec(dst, x, w, r)
}

// AddRMSNorm implements backend.Backend: per group, addVec into h, then
// RMSNorm's arithmetic (rmsNormGroup) on the fresh sum while it is in
// cache, so each element is the one Add then RMSNorm would give.
func (b *Backend) AddRMSNorm(h, x, delta backend.Tensor, w backend.Weight, eps float32) {
	const op = "AddRMSNorm"
	if b.failed() {
		return
	}
	ht, err1 := b.f32(op, h)
	xt, err2 := b.f32(op, x)
	dt, err3 := b.f32(op, delta)
	wt, err4 := b.weightOf(op, w)
	if err := cmp.Or(err1, err2, err3, err4); err != nil {
		b.fail(err)
		return
	}
	wn := backend.Named{Name: wt.name, Shape: wt.shape}
	if err := backend.CheckAddRMSNorm(ht.shape, xt.shape, dt.shape, wn, ht == xt || ht == dt); err != nil {
		b.fail(err)
		return
	}
	T, C := ht.matrix()
	G := wt.shape[0]
	groups := T * (C / G)
	b.parallelRows(groups, G, func(g0, g1 int) {
		for g := g0; g < g1; g++ {
			hs := ht.f32[g*G : (g+1)*G]
			addVec(hs, hs, dt.f32[g*G:(g+1)*G])
			rmsNormGroup(xt.f32[g*G:(g+1)*G], hs, wt.f32, eps)
		}
	})
}

// RoPE implements backend.Backend.
//
// As in HF Llama, the angle is the float32 product pos·invFreq[i], and cos
// and sin are taken of that float32 value (in float64, rounded once); they
// are computed once per position and kept with invFreq (ropeTable), then
// each head's halves rotate in float32 (ropeVec).
func (b *Backend) RoPE(x backend.Tensor, pos backend.Tensor, invFreq backend.Weight) {
	const op = "RoPE"
	if b.failed() {
		return
	}
	xt, err1 := b.f32(op, x)
	p, err2 := b.i32(op, pos)
	f, err3 := b.weightOf(op, invFreq)
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRoPE(xt.shape, len(p.i32), backend.Named{Name: f.name, Shape: f.shape}); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckPositions(p.i32); err != nil {
		b.fail(err)
		return
	}
	T, C := xt.matrix()
	half := f.shape[0]
	tab := f.ropeTable(maxPosition(p.i32) + 1)
	b.parallelRows(T, C, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			cos, sin := tab.at(int(p.i32[t]), half)
			ropeRow(xt.f32[t*C:(t+1)*C], cos, sin, nil, 0)
		}
	})
}

// maxPosition returns the largest of pos (0 for none).
func maxPosition(pos []int32) int {
	m := int32(0)
	for _, v := range pos {
		m = max(m, v)
	}
	return int(m)
}

// at returns the cos and sin of the half angles of position p.
func (t *ropeCos) at(p, half int) (cos, sin []float32) {
	return t.cos[p*half : (p+1)*half], t.sin[p*half : (p+1)*half]
}

// ropeRow rotates each head (D = 2·len(cos) elements) of row by RoPE's
// angles cos and sin, first normalizing the head by norm (RMSNorm's
// arithmetic, rmsNormGroup) where norm is non-nil.
func ropeRow(row, cos, sin, norm []float32, eps float32) {
	half := len(cos)
	D := 2 * half
	for h := 0; h+D <= len(row); h += D {
		head := row[h : h+D]
		if norm != nil {
			rmsNormGroup(head, head, norm, eps)
		}
		ropeVec(head[:half], head[half:], cos, sin)
	}
}

// RoPEQK implements backend.Backend: per row, each head of q then of k is
// normalized (with qNorm and kNorm) and rotated while it is in cache, the
// arithmetic of RMSNorm and RoPE in their order.
func (b *Backend) RoPEQK(q, k backend.Tensor, pos backend.Tensor, invFreq backend.Weight, qNorm, kNorm backend.Weight, eps float32) {
	const op = "RoPEQK"
	if b.failed() {
		return
	}
	qt, err1 := b.f32(op, q)
	kt, err2 := b.f32(op, k)
	p, err3 := b.i32(op, pos)
	f, err4 := b.weightOf(op, invFreq)
	if err := cmp.Or(err1, err2, err3, err4); err != nil {
		b.fail(err)
		return
	}
	var qn, kn *weight
	var qName, kName backend.Named
	if qNorm != nil || kNorm != nil {
		var err5, err6 error
		if qNorm != nil {
			qn, err5 = b.weightOf(op, qNorm)
		}
		if kNorm != nil {
			kn, err6 = b.weightOf(op, kNorm)
		}
		if err := cmp.Or(err5, err6); err != nil {
			b.fail(err)
			return
		}
		if qn != nil {
			qName = backend.Named{Name: qn.name, Shape: qn.shape}
		}
		if kn != nil {
			kName = backend.Named{Name: kn.name, Shape: kn.shape}
		}
	}
	fn := backend.Named{Name: f.name, Shape: f.shape}
	if err := backend.CheckRoPEQK(qt.shape, kt.shape, len(p.i32), fn, qName, kName, qt == kt); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckPositions(p.i32); err != nil {
		b.fail(err)
		return
	}
	var qw, kw []float32
	if qn != nil {
		qw, kw = qn.f32, kn.f32
	}
	T, Cq := qt.matrix()
	_, Ck := kt.matrix()
	half := f.shape[0]
	tab := f.ropeTable(maxPosition(p.i32) + 1)
	b.parallelRows(T, Cq+Ck, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			cos, sin := tab.at(int(p.i32[t]), half)
			ropeRow(qt.f32[t*Cq:(t+1)*Cq], cos, sin, qw, eps)
			ropeRow(kt.f32[t*Ck:(t+1)*Ck], cos, sin, kw, eps)
		}
	})
}

// SwiGLU implements backend.Backend: silu(g)·u in float32 (swigluVec).
func (b *Backend) SwiGLU(dst, gate, up backend.Tensor) {
	b.elementwise("SwiGLU", dst, gate, up, swigluVec)
}

// GeGLU implements backend.Backend: gelu_tanh(g)·u in float32 (gegluVec).
func (b *Backend) GeGLU(dst, gate, up backend.Tensor) {
	b.elementwise("GeGLU", dst, gate, up, gegluVec)
}

// Scale implements backend.Backend.
func (b *Backend) Scale(dst, x backend.Tensor, s float32) {
	b.elementwise("Scale", dst, x, x, func(ds, xs, _ []float32) { scaleVec(ds, xs, s) })
}

// Add implements backend.Backend.
func (b *Backend) Add(dst, a, c backend.Tensor) {
	b.elementwise("Add", dst, a, c, addVec)
}

// elementwise runs fn over row chunks of three same-sized float32 tensors,
// dst = fn(x, y), in parallel; shape and dtype errors are recorded under op.
func (b *Backend) elementwise(op string, dst, x, y backend.Tensor, fn func(ds, xs, ys []float32)) {
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	xt, err2 := b.f32(op, x)
	yt, err3 := b.f32(op, y)
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckElementwise(op, d.shape, xt.shape, yt.shape); err != nil {
		b.fail(err)
		return
	}
	T, C := d.matrix()
	b.parallelRows(T, C, func(t0, t1 int) {
		fn(d.f32[t0*C:t1*C], xt.f32[t0*C:t1*C], yt.f32[t0*C:t1*C])
	})
}

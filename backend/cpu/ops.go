package cpu

import (
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/backend"
)

// f32 returns the CPU tensor behind t if it is an F32 tensor of this backend.
func (b *Backend) f32(op string, t backend.Tensor) (*tensor, error) {
	ct, err := b.tensorOf(op, t)
	if err != nil {
		return nil, err
	}
	if ct.dtype != backend.F32 {
		return nil, &backend.ShapeError{Op: op, Detail: fmt.Sprintf("tensor %v: the cpu backend computes on F32 tensors only", ct)}
	}
	return ct, nil
}

// i32 returns the CPU tensor behind t if it is an I32 tensor of this backend.
func (b *Backend) i32(op string, t backend.Tensor) (*tensor, error) {
	ct, err := b.tensorOf(op, t)
	if err != nil {
		return nil, err
	}
	if ct.dtype != backend.I32 {
		return nil, &backend.ShapeError{Op: op, Detail: fmt.Sprintf("index tensor %v is not I32", ct)}
	}
	return ct, nil
}

// matrix returns the matrix view (rows, cols) of t.
func (t *tensor) matrix() (rows, cols int) { return backend.Matrix(t.shape) }

// shapeErr records a ShapeError for op.
func (b *Backend) shapeErr(op, format string, args ...any) {
	b.fail(&backend.ShapeError{Op: op, Detail: fmt.Sprintf(format, args...)})
}

// Embedding implements backend.Backend.
func (b *Backend) Embedding(dst backend.Tensor, table backend.Weight, ids backend.Tensor) {
	const op = "Embedding"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	w, err2 := b.weightOf(op, table)
	id, err3 := b.i32(op, ids)
	if err := firstErr(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	T, K := d.matrix()
	if len(w.shape) != 2 || w.shape[1] != K || len(id.i32) != T {
		b.shapeErr(op, "dst %v, table %s %v, ids %v", d, w.name, w.shape, id)
		return
	}
	V := w.shape[0]
	for t, v := range id.i32 {
		if v < 0 || int(v) >= V {
			b.fail(fmt.Errorf("cpu: %s: token id %d at row %d out of range [0, %d) of %s", op, v, t, V, w.name))
			return
		}
		w.row(d.f32[t*K:(t+1)*K], int(v))
	}
}

// Rows implements backend.Backend.
func (b *Backend) Rows(dst, src backend.Tensor, idx backend.Tensor) {
	const op = "Rows"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	s, err2 := b.f32(op, src)
	ix, err3 := b.i32(op, idx)
	if err := firstErr(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	R, K := d.matrix()
	T, K2 := s.matrix()
	if K != K2 || len(ix.i32) != R || d == s {
		b.shapeErr(op, "dst %v, src %v, idx %v", d, s, ix)
		return
	}
	for r, v := range ix.i32 {
		if v < 0 || int(v) >= T {
			b.fail(fmt.Errorf("cpu: %s: row index %d out of range [0, %d)", op, v, T))
			return
		}
		copy(d.f32[r*K:(r+1)*K], s.f32[int(v)*K:(int(v)+1)*K])
	}
}

// Linear implements backend.Backend.
func (b *Backend) Linear(dst, x backend.Tensor, w backend.Weight, bias backend.Weight) {
	const op = "Linear"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	xt, err2 := b.f32(op, x)
	if qw := b.quantWeight(w); qw != nil {
		if err := firstErr(err1, err2); err != nil {
			b.fail(err)
			return
		}
		b.linearQuant(op, d, xt, qw, bias)
		return
	}
	wt, err3 := b.weightOf(op, w)
	if err := firstErr(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	var bv []float32
	if bias != nil {
		bt, err := b.weightOf(op, bias)
		if err != nil {
			b.fail(err)
			return
		}
		if len(bt.shape) != 1 || len(wt.shape) != 2 || bt.shape[0] != wt.shape[0] {
			b.shapeErr(op, "bias %s %v for weight %s %v", bt.name, bt.shape, wt.name, wt.shape)
			return
		}
		bv = bt.f32
	}
	T, K := xt.matrix()
	T2, N := d.matrix()
	if len(wt.shape) != 2 || wt.shape[0] != N || wt.shape[1] != K || T != T2 || d == xt {
		b.shapeErr(op, "dst %v, x %v, weight %s %v", d, xt, wt.name, wt.shape)
		return
	}
	b.linear(d.f32, xt.f32, wt, bv, T, K, N)
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
	if err := firstErr(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	T, C := xt.matrix()
	if len(wt.shape) != 1 || C%wt.shape[0] != 0 || len(d.f32) != len(xt.f32) {
		b.shapeErr(op, "dst %v, x %v, weight %s %v", d, xt, wt.name, wt.shape)
		return
	}
	G := wt.shape[0]
	groups := T * (C / G)
	b.parallelRows(groups, G, func(g0, g1 int) {
		for g := g0; g < g1; g++ {
			xs := xt.f32[g*G : (g+1)*G]
			mean := float32(sumSquares(xs) / float64(G))
			r := float32(1 / math.Sqrt(float64(mean+eps)))
			scaleMulVec(d.f32[g*G:(g+1)*G], xs, wt.f32, r)
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
	if err := firstErr(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	T, C := xt.matrix()
	if len(f.shape) != 1 || C%(2*f.shape[0]) != 0 || len(p.i32) != T {
		b.shapeErr(op, "x %v, pos %v, invFreq %s %v", xt, p, f.name, f.shape)
		return
	}
	half := f.shape[0]
	D := 2 * half
	maxPos := int32(0)
	for _, v := range p.i32 {
		if v < 0 {
			b.fail(fmt.Errorf("cpu: %s: negative position %d", op, v))
			return
		}
		maxPos = max(maxPos, v)
	}
	tab := f.ropeTable(int(maxPos) + 1)
	b.parallelRows(T, C, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			pt := int(p.i32[t])
			cos := tab.cos[pt*half : (pt+1)*half]
			sin := tab.sin[pt*half : (pt+1)*half]
			row := xt.f32[t*C : (t+1)*C]
			for h := 0; h+D <= C; h += D {
				ropeVec(row[h:h+half], row[h+half:h+D], cos, sin)
			}
		}
	})
}

// SwiGLU implements backend.Backend: silu(g)·u in float32 (swigluVec).
func (b *Backend) SwiGLU(dst, gate, up backend.Tensor) {
	b.elementwise("SwiGLU", dst, gate, up, swigluVec)
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
	if err := firstErr(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if len(d.f32) != len(xt.f32) || len(d.f32) != len(yt.f32) {
		b.shapeErr(op, "dst %v, inputs %v and %v", d, xt, yt)
		return
	}
	T, C := d.matrix()
	b.parallelRows(T, C, func(t0, t1 int) {
		fn(d.f32[t0*C:t1*C], xt.f32[t0*C:t1*C], yt.f32[t0*C:t1*C])
	})
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

package tp

// The ops of a tensor-parallel Backend: each picks the layout of its output
// from its inputs' layouts and its weight's split (package doc), then runs
// on every rank's parts; the projections that leave partial sums (a cols
// split, a vocabulary-split embedding) all-reduce them.

import (
	"fmt"

	"github.com/bitdecode/bitdecode/backend"
)

// layoutErr is the error of an op whose operands' layouts do not fit.
func layoutErr(op, format string, args ...any) error {
	return &backend.ShapeError{Op: op, Detail: "tp layouts: " + fmt.Sprintf(format, args...)}
}

// skip reports whether an op must not run: a pending tp error, or err (then
// recorded).
func (b *Backend) skip(err error) bool {
	if err != nil {
		b.fail(err)
	}
	return b.err != nil
}

// allReduce sums t's parts over the group.
func (b *Backend) allReduce(op string, t *tensor) {
	if err := b.comm.AllReduce(t.parts); err != nil {
		b.fail(fmt.Errorf("tp: %s: all-reduce: %w", op, err))
	}
}

// Embedding implements backend.Backend. A vocabulary-split table gathers on
// each rank the ids in its range and its zero padding row for the others,
// then all-reduces (x + 0 is exact, so the sum is the row).
func (b *Backend) Embedding(dst backend.Tensor, table backend.Weight, ids backend.Tensor) {
	if b.err != nil {
		return
	}
	d, err := b.tensor("Embedding", dst)
	if b.skip(err) {
		return
	}
	w, err := b.weight("Embedding", table)
	if b.skip(err) {
		return
	}
	it, err := b.input("Embedding", ids)
	if b.skip(err) {
		return
	}
	switch w.kind() {
	case backend.Replicated:
		if b.skip(d.ensure(replicated)) {
			return
		}
		for r, be := range b.ranks {
			be.Embedding(d.parts[r], w.parts[r], it.parts[r])
		}
		return
	case backend.Vocab:
	default:
		b.fail(layoutErr("Embedding", "table %s split by %v (want vocab or replicated)", w.name, w.kind()))
		return
	}
	if it.dtype != backend.I32 || len(it.ids) != backend.NumElements(it.shape) {
		b.fail(layoutErr("Embedding", "ids %v were not uploaded with UploadInt32", it))
		return
	}
	if b.skip(backend.CheckTokenIDs(it.ids, backend.Named{Name: w.name, Shape: w.shape})) {
		return
	}
	if b.skip(d.ensure(replicated)) {
		return
	}
	if it.local == nil {
		it.local = make([]backend.Tensor, len(b.ranks))
	}
	local := make([]int32, len(it.ids))
	for r, be := range b.ranks {
		c := w.ranges[r]
		for i, id := range it.ids {
			local[i] = int32(c.N) // the first padding row: zeros
			if int(id) >= c.Start && int(id) < c.Start+c.N {
				local[i] = id - int32(c.Start)
			}
		}
		if it.local[r] == nil {
			if it.local[r], err = be.Alloc(backend.I32, len(local)); b.skip(err) {
				return
			}
		}
		if err := be.UploadInt32(it.local[r], local); b.skip(err) {
			return
		}
		be.Embedding(d.parts[r], w.parts[r], it.local[r])
	}
	b.allReduce("Embedding", d)
}

// Rows implements backend.Backend: each rank gathers its part's rows; dst
// takes src's layout.
func (b *Backend) Rows(dst, src backend.Tensor, idx backend.Tensor) {
	if b.err != nil {
		return
	}
	d, err := b.tensor("Rows", dst)
	if b.skip(err) {
		return
	}
	s, err := b.input("Rows", src)
	if b.skip(err) {
		return
	}
	ix, err := b.input("Rows", idx)
	if b.skip(err) {
		return
	}
	if d == s {
		b.fail(layoutErr("Rows", "dst and src are the same tensor"))
		return
	}
	if b.skip(d.ensure(s.lay)) {
		return
	}
	for r, be := range b.ranks {
		be.Rows(d.parts[r], s.parts[r], ix.parts[r])
	}
}

// linearPlan is how one Linear runs: dst's layout, each rank's bias, and
// whether the parts are partial sums to all-reduce.
type linearPlan struct {
	lay    layout
	bias   func(r int) backend.Weight
	reduce bool
}

// planLinear picks dst's layout for x·wᵀ + bias from x's layout and w's
// split (package doc).
func (b *Backend) planLinear(op string, x *tensor, w *weight, bias backend.Weight) (linearPlan, error) {
	var bw *weight
	if bias != nil {
		var err error
		if bw, err = b.weight(op, bias); err != nil {
			return linearPlan{}, err
		}
	}
	p := linearPlan{bias: func(int) backend.Weight { return nil }}
	perRank := func(r int) backend.Weight { return bw.parts[r] }
	switch w.kind() {
	case backend.Replicated, backend.Rows, backend.Vocab:
		if x.lay.split() {
			return p, layoutErr(op, "weight %s split by %v needs a replicated input, not %v", w.name, w.kind(), x.lay)
		}
		if w.kind() != backend.Replicated {
			p.lay = layoutOf(w)
		}
		if bw != nil {
			if bw.kind() != w.kind() || (w.kind() != backend.Replicated && !layoutOf(bw).equal(layoutOf(w))) || w.pad != 0 {
				return p, layoutErr(op, "bias %s split by %v for weight %s split by %v", bw.name, bw.kind(), w.name, w.kind())
			}
			p.bias = perRank
		}
	case backend.Cols:
		if want := (layout{cols: w.ranges}); !x.lay.equal(want) {
			return p, layoutErr(op, "weight %s split by cols over %v needs its input split the same, not %v", w.name, want, x.lay)
		}
		p.lay, p.reduce = replicated, true
		if bw != nil {
			if bw.kind() != backend.Replicated {
				return p, layoutErr(op, "bias %s split by %v for weight %s split by cols (want replicated)", bw.name, bw.kind(), w.name)
			}
			// The bias is added once, on rank 0, before the sum.
			p.bias = func(r int) backend.Weight {
				if r == 0 {
					return bw.parts[0]
				}
				return nil
			}
		}
	}
	return p, nil
}

// layoutOf returns the column layout a rows- or vocabulary-split weight
// gives its outputs.
func layoutOf(w *weight) layout { return layout{cols: w.ranges, pad: w.pad} }

// Linear implements backend.Backend.
func (b *Backend) Linear(dst, x backend.Tensor, w backend.Weight, bias backend.Weight) {
	if b.err != nil {
		return
	}
	d, err := b.tensor("Linear", dst)
	if b.skip(err) {
		return
	}
	xt, err := b.input("Linear", x)
	if b.skip(err) {
		return
	}
	ww, err := b.weight("Linear", w)
	if b.skip(err) {
		return
	}
	if d == xt {
		b.fail(layoutErr("Linear", "dst and x are the same tensor"))
		return
	}
	p, err := b.planLinear("Linear", xt, ww, bias)
	if b.skip(err) || b.skip(d.ensure(p.lay)) {
		return
	}
	for r, be := range b.ranks {
		be.Linear(d.parts[r], xt.parts[r], ww.parts[r], p.bias(r))
	}
	if p.reduce {
		b.allReduce("Linear "+ww.name, d)
	}
}

// LinearGroup implements backend.Backend: one LinearGroup per rank where no
// weight needs an all-reduce (q, k, v; gate, up), else one Linear per weight.
func (b *Backend) LinearGroup(dsts []backend.Tensor, x backend.Tensor, ws []backend.Weight, biases []backend.Weight) {
	if b.err != nil {
		return
	}
	if b.skip(backend.CheckLinearGroup(dsts, x, ws, biases)) {
		return
	}
	xt, err := b.input("LinearGroup", x)
	if b.skip(err) {
		return
	}
	ds := make([]*tensor, len(ws))
	plans := make([]linearPlan, len(ws))
	for i, w := range ws {
		ww, err := b.weight("LinearGroup", w)
		if b.skip(err) {
			return
		}
		if ww.kind() == backend.Cols {
			for j := range ws {
				b.Linear(dsts[j], x, ws[j], backend.BiasAt(biases, j))
			}
			return
		}
		if ds[i], err = b.tensor("LinearGroup", dsts[i]); b.skip(err) {
			return
		}
		if plans[i], err = b.planLinear("LinearGroup", xt, ww, backend.BiasAt(biases, i)); b.skip(err) {
			return
		}
	}
	for i, d := range ds {
		if b.skip(d.ensure(plans[i].lay)) {
			return
		}
	}
	rd := make([]backend.Tensor, len(ws))
	rw := make([]backend.Weight, len(ws))
	var rb []backend.Weight
	if biases != nil {
		rb = make([]backend.Weight, len(ws))
	}
	for r, be := range b.ranks {
		for i := range ws {
			rd[i], rw[i] = ds[i].parts[r], ws[i].(*weight).parts[r]
			if rb != nil {
				rb[i] = plans[i].bias(r)
			}
		}
		be.LinearGroup(rd, xt.parts[r], rw, rb)
	}
}

// normWeight returns a norm's replicated weight and its group size G.
func (b *Backend) normWeight(op string, w backend.Weight) (*weight, int, error) {
	ww, err := b.weight(op, w)
	if err != nil {
		return nil, 0, err
	}
	if ww.kind() != backend.Replicated || len(ww.shape) != 1 {
		return nil, 0, layoutErr(op, "norm weight %s %v split by %v (want a replicated vector)", ww.name, ww.shape, ww.kind())
	}
	return ww, ww.shape[0], nil
}

// checkGroups checks that a column-split x keeps every group of g columns
// (a head) on one rank.
func checkGroups(op string, x *tensor, g int) error {
	if x.lay.split() && !x.lay.aligned(g) {
		return layoutErr(op, "%v does not keep groups of %d columns on one rank", x, g)
	}
	return nil
}

// RMSNorm implements backend.Backend: over a replicated x, the norm of
// whole rows on every rank; over a column-split x, per group (Qwen3's
// per-head norm, G = D) on each rank's heads.
func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	if b.err != nil {
		return
	}
	d, err := b.tensor("RMSNorm", dst)
	if b.skip(err) {
		return
	}
	xt, err := b.input("RMSNorm", x)
	if b.skip(err) {
		return
	}
	ww, g, err := b.normWeight("RMSNorm", w)
	if b.skip(err) || b.skip(checkGroups("RMSNorm", xt, g)) || b.skip(d.ensure(xt.lay)) {
		return
	}
	for r, be := range b.ranks {
		be.RMSNorm(d.parts[r], xt.parts[r], ww.parts[r], eps)
	}
}

// AddRMSNorm implements backend.Backend.
func (b *Backend) AddRMSNorm(h, x, delta backend.Tensor, w backend.Weight, eps float32) {
	if b.err != nil {
		return
	}
	ht, err := b.input("AddRMSNorm", h)
	if b.skip(err) {
		return
	}
	dt, err := b.input("AddRMSNorm", delta)
	if b.skip(err) {
		return
	}
	xt, err := b.tensor("AddRMSNorm", x)
	if b.skip(err) {
		return
	}
	if !ht.lay.equal(dt.lay) {
		b.fail(layoutErr("AddRMSNorm", "h %v and delta %v", ht, dt))
		return
	}
	ww, g, err := b.normWeight("AddRMSNorm", w)
	if b.skip(err) || b.skip(checkGroups("AddRMSNorm", ht, g)) || b.skip(xt.ensure(ht.lay)) {
		return
	}
	for r, be := range b.ranks {
		be.AddRMSNorm(ht.parts[r], xt.parts[r], dt.parts[r], ww.parts[r], eps)
	}
}

// ropeInputs returns the rotated tensor and RoPE's replicated weights.
func (b *Backend) ropeArgs(op string, x backend.Tensor, invFreq backend.Weight) (*tensor, *weight, error) {
	xt, err := b.input(op, x)
	if err != nil {
		return nil, nil, err
	}
	fw, err := b.weight(op, invFreq)
	if err != nil {
		return nil, nil, err
	}
	if fw.kind() != backend.Replicated || len(fw.shape) != 1 {
		return nil, nil, layoutErr(op, "inverse frequencies %s split by %v", fw.name, fw.kind())
	}
	return xt, fw, checkGroups(op, xt, 2*fw.shape[0])
}

// RoPE implements backend.Backend: each rank rotates its whole heads.
func (b *Backend) RoPE(x backend.Tensor, pos backend.Tensor, invFreq backend.Weight) {
	if b.err != nil {
		return
	}
	xt, fw, err := b.ropeArgs("RoPE", x, invFreq)
	if b.skip(err) {
		return
	}
	pt, err := b.input("RoPE", pos)
	if b.skip(err) {
		return
	}
	for r, be := range b.ranks {
		be.RoPE(xt.parts[r], pt.parts[r], fw.parts[r])
	}
}

// RoPEQK implements backend.Backend.
func (b *Backend) RoPEQK(q, k backend.Tensor, pos backend.Tensor, invFreq backend.Weight, qNorm, kNorm backend.Weight, eps float32) {
	if b.err != nil {
		return
	}
	qt, fw, err := b.ropeArgs("RoPEQK", q, invFreq)
	if b.skip(err) {
		return
	}
	kt, _, err := b.ropeArgs("RoPEQK", k, invFreq)
	if b.skip(err) {
		return
	}
	pt, err := b.input("RoPEQK", pos)
	if b.skip(err) {
		return
	}
	var qn, kn *weight
	if qNorm != nil {
		if qn, _, err = b.normWeight("RoPEQK", qNorm); b.skip(err) {
			return
		}
	}
	if kNorm != nil {
		if kn, _, err = b.normWeight("RoPEQK", kNorm); b.skip(err) {
			return
		}
	}
	part := func(w *weight, r int) backend.Weight {
		if w == nil {
			return nil
		}
		return w.parts[r]
	}
	for r, be := range b.ranks {
		be.RoPEQK(qt.parts[r], kt.parts[r], pt.parts[r], fw.parts[r], part(qn, r), part(kn, r), eps)
	}
}

// elementwise runs f on every rank for dst = f(a, c) over inputs of one
// layout, which dst takes.
func (b *Backend) elementwise(op string, dst, a, c backend.Tensor, f func(be backend.Backend, d, a, c backend.Tensor)) {
	if b.err != nil {
		return
	}
	d, err := b.tensor(op, dst)
	if b.skip(err) {
		return
	}
	at, err := b.input(op, a)
	if b.skip(err) {
		return
	}
	ct, err := b.input(op, c)
	if b.skip(err) {
		return
	}
	if !at.lay.equal(ct.lay) {
		b.fail(layoutErr(op, "inputs %v and %v", at, ct))
		return
	}
	if b.skip(d.ensure(at.lay)) {
		return
	}
	for r, be := range b.ranks {
		f(be, d.parts[r], at.parts[r], ct.parts[r])
	}
}

// SwiGLU implements backend.Backend.
func (b *Backend) SwiGLU(dst, gate, up backend.Tensor) {
	b.elementwise("SwiGLU", dst, gate, up, func(be backend.Backend, d, g, u backend.Tensor) { be.SwiGLU(d, g, u) })
}

// GeGLU implements backend.Backend.
func (b *Backend) GeGLU(dst, gate, up backend.Tensor) {
	b.elementwise("GeGLU", dst, gate, up, func(be backend.Backend, d, g, u backend.Tensor) { be.GeGLU(d, g, u) })
}

// Scale implements backend.Backend.
func (b *Backend) Scale(dst, x backend.Tensor, s float32) {
	b.elementwise("Scale", dst, x, x, func(be backend.Backend, d, x, _ backend.Tensor) { be.Scale(d, x, s) })
}

// Add implements backend.Backend.
func (b *Backend) Add(dst, a, c backend.Tensor) {
	b.elementwise("Add", dst, a, c, func(be backend.Backend, d, a, c backend.Tensor) { be.Add(d, a, c) })
}

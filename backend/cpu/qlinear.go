package cpu

// Linear on packed low-bit weights (package wq), with optional dynamic error
// compensation (DEC).
//
// Y[T, N] = X[T, K] · Ŵ[N, K]ᵀ + bias[N] (+ DEC), where Ŵ is the packed
// matrix's dequantized values (wq.Matrix.DequantRow: ŵ = float32(s·q) + z).
//
// Kernel: the weight stays packed (int4: 4.25 bits per weight with its
// params, a quarter of fp16). int8, int4 and int3 with groups of 128 run in
// their packed order (qdot.go): SIMD tiles decode the codes in registers
// (ŵ = s·q + z by one FMA, exact) and sum x·ŵ in 16 lanes; by default int4
// (and int8 on CPUs with AVX-512 VNNI, int3 with VNNI and VBMI) multiply by
// integer dot products instead, x rounded to 16-bit codes (qint4.go,
// qint8.go, qint3.go). Other formats
// (fp16, other group sizes) dequantize: a work item of qTileN output rows
// dequantizes them once into a per-worker float32 scratch, row-major, then
// every token of the batch runs the F32 SIMD tiles over it (dot.go). Either
// way each output is one fixed float32 sum of the products x_k·ŵ_k, whatever
// T, the tile, the SIMD level or the thread count: prefill and decode agree
// bit for bit, and the float64 reference over Ŵ bounds the error as for
// float32 weights (the packed order sums the same products in another
// order than a float32 Linear over Ŵ, so the two agree to rounding).
//
// DEC: after the base output (bias included), each token selects its input
// channels (wq.SelectApprox, k_chunk per 1024 inputs) and adds the residual
// rows of those channels (wq.Compensate). Tokens are independent items.

import (
	"fmt"
	"sync"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/wq"
)

var _ backend.QuantWeightLoader = (*Backend)(nil)

// qTileN is the number of output rows a quantized Linear work item
// dequantizes at once: a multiple of 4 (the SIMD tiles' rows) whose float32 scratch
// (qTileN·K·4 bytes, 192 KiB at K = 1536) stays in L2.
const qTileN = 32

// qweight is a linear weight stored packed (backend.QuantWeightLoader).
type qweight struct {
	owner *Backend
	name  string
	m     *wq.Matrix
	dec   *wq.DEC
	// packed and pz are the packed order's format and float32 (scale,
	// zero) pairs (qdot.go); nil for formats that dequantize tiles.
	packed *packedFormat
	pz     []float32
	// path is the integer dot-product path it runs on (qint4.go, qint3.go,
	// qint8.go), chosen at load, or pathNone.
	path intPath
}

func (w *qweight) Name() string { return w.name }
func (w *qweight) Shape() []int { return []int{w.m.N, w.m.K} }

// LoadQuantWeight implements backend.QuantWeightLoader. The matrix and the
// residual are shared, not copied: the caller must not modify them.
func (b *Backend) LoadQuantWeight(name string, m *wq.Matrix, dec *wq.DEC) (backend.Weight, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: weight %s: %w", name, err)
	}
	if dec != nil {
		if err := dec.R.Validate(); err != nil {
			return nil, fmt.Errorf("cpu: weight %s: DEC residual: %w", name, err)
		}
		if dec.R.N != m.K || dec.R.K != m.N {
			return nil, fmt.Errorf("cpu: weight %s [%d, %d]: DEC residual is [%d, %d], want [%d, %d]", name, m.N, m.K, dec.R.N, dec.R.K, m.K, m.N)
		}
		if dec.KChunk < 0 {
			return nil, fmt.Errorf("cpu: weight %s: negative DEC k_chunk %d", name, dec.KChunk)
		}
	}
	w := &qweight{owner: b, name: name, m: m, dec: dec, packed: packedOf(m), path: integerPathOf(m)}
	if w.packed != nil {
		w.pz = w.packed.params(m)
	}
	return w, nil
}

// scratchPool holds float32 buffers for dequantized tiles and DEC sums.
var scratchPool sync.Pool

func getScratch(n int) *[]float32 {
	if p, ok := scratchPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

// qlinear computes y = x·Ŵᵀ + bias (+ DEC) for x [T, K], y [T, N].
func (b *Backend) qlinear(y, x []float32, w *qweight, bias []float32, T int) {
	m := w.m
	N, K := m.N, m.K
	switch w.path {
	case pathInt4:
		b.qlinearInt4(y, x, w, bias, T)
		b.dec(y, x, w, T)
		return
	case pathInt3:
		b.qlinearInt3(y, x, w, bias, T)
		b.dec(y, x, w, T)
		return
	case pathInt8:
		b.qlinearInt8(y, x, w, bias, T)
		b.dec(y, x, w, T)
		return
	}
	if p := w.packed; p != nil {
		buf := getScratch(T * K)
		defer scratchPool.Put(buf)
		xp := *buf
		b.parallelRows(T, K, func(t0, t1 int) {
			for t := t0; t < t1; t++ {
				p.permute(xp[t*K:(t+1)*K], x[t*K:(t+1)*K])
			}
		})
		b.tiles(T, N, func(t0, t1, n0, n1 int) { packedTile(p, y, xp, m, w.pz, bias, t0, t1, n0, n1) })
		b.dec(y, x, w, T)
		return
	}
	tiles := (N + qTileN - 1) / qTileN
	b.parallel(tiles, func(item int) {
		n0 := item * qTileN
		n1 := min(N, n0+qTileN)
		buf := getScratch(qTileN * K)
		defer scratchPool.Put(buf)
		tile := (*buf)[:(n1-n0)*K]
		for r := range n1 - n0 {
			m.DequantRow(tile[r*K:(r+1)*K], n0+r)
		}
		// The dequantized rows are an F32 weight of n1-n0 rows; y and bias
		// are offset so that its row r is output n0+r.
		tw := &weight{shape: []int{n1 - n0, K}, format: wF32, f32: tile}
		var bt []float32
		if bias != nil {
			bt = bias[n0:]
		}
		linearTile(y[n0:], x, tw, bt, K, N, 0, T, 0, n1-n0)
	})
	b.dec(y, x, w, T)
}

// dec adds w's dynamic error compensation, if any, to y = x·Ŵᵀ + bias.
func (b *Backend) dec(y, x []float32, w *qweight, T int) {
	N, K := w.m.N, w.m.K
	if w.dec == nil || w.dec.KChunk == 0 {
		return
	}
	b.parallel(T, func(t int) {
		buf := getScratch(2 * N)
		defer scratchPool.Put(buf)
		xt := x[t*K : (t+1)*K]
		sel := wq.SelectApprox(make([]int32, 0, wq.ChunkSelect(w.dec.KChunk, wq.ChunkChannels)*(K/wq.ChunkChannels+1)), xt, w.dec.KChunk)
		wq.Compensate(y[t*N:(t+1)*N], xt, sel, w.dec.R, *buf)
	})
}

// quantWeight returns w as a quantized weight of this backend, or nil if it
// is not one.
func (b *Backend) quantWeight(w backend.Weight) *qweight {
	if qw, ok := w.(*qweight); ok && qw != nil && qw.owner == b {
		return qw
	}
	return nil
}

// freeQuant releases a quantized weight; it reports whether w was one.
func (b *Backend) freeQuant(w backend.Weight) bool {
	qw := b.quantWeight(w)
	if qw == nil {
		return false
	}
	qw.m, qw.dec, qw.pz = nil, nil, nil
	return true
}

// linearQuant is Linear for a quantized weight: checks, then qlinear.
func (b *Backend) linearQuant(op string, d, xt *tensor, qw *qweight, bias backend.Weight) {
	bv, err := b.quantOperands(op, d, xt, qw, bias)
	if err != nil {
		b.fail(err)
		return
	}
	T, _ := xt.matrix()
	b.qlinear(d.f32, xt.f32, qw, bv, T)
}

// quantOperands checks the operands of one Linear with a quantized weight
// and returns the bias values (nil without a bias).
func (b *Backend) quantOperands(op string, d, xt *tensor, qw *qweight, bias backend.Weight) ([]float32, error) {
	if qw.m == nil {
		return nil, fmt.Errorf("cpu: %s: weight %s used after FreeWeight", op, qw.name)
	}
	var bv []float32
	var bn backend.Named
	if bias != nil {
		bt, err := b.weightOf(op, bias)
		if err != nil {
			return nil, err
		}
		bv, bn = bt.f32, backend.Named{Name: bt.name, Shape: bt.shape}
	}
	if err := backend.CheckLinear(d.shape, xt.shape, backend.Named{Name: qw.name, Shape: []int{qw.m.N, qw.m.K}}, bn, d == xt); err != nil {
		return nil, err
	}
	return bv, nil
}

// integerPath names the integer dot-product path a quantized weight runs
// on (qint4.go, qint3.go, qint8.go), or pathNone.
func (w *qweight) integerPath() intPath { return w.path }

// integerPathOf is the integer path a matrix loaded now takes: none under
// BITDECODE_CPU_INT4=float (int4IntegerOn), else its format's where this CPU
// runs it.
func integerPathOf(m *wq.Matrix) intPath {
	switch {
	case !int4IntegerOn:
		return pathNone
	case int4Integer(m):
		return pathInt4
	case int3Integer(m):
		return pathInt3
	case int8Integer(m):
		return pathInt8
	}
	return pathNone
}

// intPath is a quantized weight's integer path: weights on the same path
// and K can share one quantization of x.
type intPath int

const (
	pathNone intPath = iota
	pathInt4
	pathInt3
	pathInt8
)

// linearGroupQuant is LinearGroup where a weight is quantized. When every
// weight runs the same integer path, x is quantized once and every part's
// tiles run in one parallel region (groupTiles), each tile as qlinear cuts
// it, so the outputs are bitwise those of separate Linear calls; otherwise
// each weight runs its own Linear.
func (b *Backend) linearGroupQuant(op string, dsts []backend.Tensor, x backend.Tensor, ws, biases []backend.Weight) {
	qs := make([]*qweight, len(ws))
	path := pathNone
	for i, w := range ws {
		qs[i] = b.quantWeight(w)
		if qs[i] == nil || qs[i].m == nil || (i > 0 && qs[i].integerPath() != path) {
			path = pathNone
			break
		}
		path = qs[i].integerPath()
	}
	if path == pathNone {
		for i, w := range ws {
			b.Linear(dsts[i], x, w, backend.BiasAt(biases, i))
		}
		return
	}
	xt, err := b.f32(op, x)
	if err != nil {
		b.fail(err)
		return
	}
	ys, bvs, Ns := make([][]float32, len(ws)), make([][]float32, len(ws)), make([]int, len(ws))
	for i, qw := range qs {
		d, err := b.f32(op, dsts[i])
		if err != nil {
			b.fail(err)
			return
		}
		if bvs[i], err = b.quantOperands(op, d, xt, qw, backend.BiasAt(biases, i)); err != nil {
			b.fail(err)
			return
		}
		ys[i], Ns[i] = d.f32, qw.m.N
	}
	T, K := xt.matrix()
	switch path {
	case pathInt4:
		toks, release := b.quantizeIntRows(xt.f32, T, K, false)
		defer release()
		b.groupTiles(T, Ns, func(i, t0, t1, n0, n1 int) { int4Tile(toks, ys[i], qs[i].m, qs[i].pz, bvs[i], t0, t1, n0, n1) })
	case pathInt8:
		toks, release := b.quantizeIntRows(xt.f32, T, K, true)
		defer release()
		b.groupTiles(T, Ns, func(i, t0, t1, n0, n1 int) { int8Tile(toks, ys[i], qs[i].m, qs[i].pz, bvs[i], t0, t1, n0, n1) })
	case pathInt3:
		toks, release := b.quantizeInt3Rows(xt.f32, T, K)
		defer release()
		b.groupTiles(T, Ns, func(i, t0, t1, n0, n1 int) { int3Tile(toks, ys[i], qs[i].m, qs[i].pz, bvs[i], t0, t1, n0, n1) })
	}
	for i, qw := range qs {
		b.dec(ys[i], xt.f32, qw, T)
	}
}

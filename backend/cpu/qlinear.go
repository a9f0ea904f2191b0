package cpu

// Linear on packed low-bit weights (package wq), with optional dynamic error
// compensation (DEC).
//
// Y[T, N] = X[T, K] · Ŵ[N, K]ᵀ + bias[N] (+ DEC), where Ŵ is the packed
// matrix's dequantized values (wq.Matrix.DequantRow: ŵ = float32(s·q) + z).
//
// Kernel: the weight stays packed (int4: 4.25 bits per weight with its
// params, a quarter of fp16, an eighth of this backend's float32 weights).
// A work item is a tile of qTileN output rows: its rows are dequantized once
// into a per-worker float32 scratch in the 4-row interleaved layout of
// matmul.go, then every token of the batch runs dot1x4 over it. So each
// output is the same sequential float32 sum over k of x_k·ŵ_k as the float32
// Linear computes on Ŵ, whatever T, the tile or the thread count: prefill
// and decode agree bit for bit, and the float64 reference of Ŵ bounds the
// error exactly as for float32 weights. Dequantization costs a few
// operations per weight per call, amortized over the T tokens; for T = 1 it
// is the whole cost (the GPU GEMV does it in registers at the read ceiling).
//
// DEC: after the base output (bias included), each token selects its input
// channels (wq.SelectApprox, k_chunk per 1024 inputs) and adds the residual
// rows of those channels (wq.Compensate). Tokens are independent items.

import (
	"fmt"
	"slices"
	"sync"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/wq"
)

var _ backend.QuantWeightLoader = (*Backend)(nil)

// qTileN is the number of output rows a quantized Linear work item
// dequantizes at once: a multiple of packRows whose float32 scratch
// (qTileN·K·4 bytes, 192 KiB at K = 1536) stays in L2.
const qTileN = 32

// qweight is a linear weight stored packed (backend.QuantWeightLoader).
type qweight struct {
	owner *Backend
	name  string
	m     *wq.Matrix
	dec   *wq.DEC
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
	return &qweight{owner: b, name: name, m: m, dec: dec}, nil
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
	tiles := (N + qTileN - 1) / qTileN
	b.parallel(tiles, func(item int) {
		n0 := item * qTileN
		n1 := min(N, n0+qTileN)
		buf := getScratch(qTileN * K)
		defer scratchPool.Put(buf)
		tile := *buf
		// Dequantize rows n0..n1 into the 4-row interleaved layout; rows past
		// n1 in the last group are zero.
		for r := 0; r < n1-n0; r += packRows {
			g := tile[r*K : (r+packRows)*K]
			for i := range packRows {
				if n0+r+i >= n1 {
					for k := range K {
						g[k*packRows+i] = 0
					}
					continue
				}
				m.DequantRowStrided(g[i:], n0+r+i, packRows)
			}
		}
		for t := range T {
			xt := x[t*K : (t+1)*K]
			yt := y[t*N : (t+1)*N]
			for r := 0; r < n1-n0; r += packRows {
				a0, a1, a2, a3 := dot1x4(xt, tile[r*K:(r+packRows)*K])
				acc := [packRows]float32{a0, a1, a2, a3}
				copy(yt[n0+r:min(n1, n0+r+packRows)], acc[:])
			}
			if bias != nil {
				for n := n0; n < n1; n++ {
					yt[n] += bias[n]
				}
			}
		}
	})
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
	qw.m, qw.dec = nil, nil
	return true
}

// linearQuant is Linear for a quantized weight: checks, then qlinear.
func (b *Backend) linearQuant(op string, d, xt *tensor, qw *qweight, bias backend.Weight) {
	if qw.m == nil {
		b.fail(fmt.Errorf("cpu: %s: weight %s used after FreeWeight", op, qw.name))
		return
	}
	var bv []float32
	if bias != nil {
		bt, err := b.weightOf(op, bias)
		if err != nil {
			b.fail(err)
			return
		}
		if !slices.Equal(bt.shape, []int{qw.m.N}) {
			b.shapeErr(op, "bias %s %v for weight %s [%d %d]", bt.name, bt.shape, qw.name, qw.m.N, qw.m.K)
			return
		}
		bv = bt.data
	}
	T, K := xt.matrix()
	T2, N := d.matrix()
	if qw.m.N != N || qw.m.K != K || T != T2 || d == xt {
		b.shapeErr(op, "dst %v, x %v, weight %s [%d %d]", d, xt, qw.name, qw.m.N, qw.m.K)
		return
	}
	b.qlinear(d.f32, xt.f32, qw, bv, T)
}

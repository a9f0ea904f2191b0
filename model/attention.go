package model

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/bitdecode/bitdecode/backend"
)

// Attention is the KV cache as a model sees it: once per layer of a forward
// pass, the model hands it the new tokens' q, k and v and gets back their
// attention output. The cache decides how K and V are stored (fp32, a
// low-bit format, paged blocks) and which kernel attends over them.
//
// Layout (T = len(b.Tokens), rows in the order of b.Tokens):
//
//	q   [T, Hq·D]   queries, RoPE applied (and q-norm, where the model has it)
//	k   [T, Hkv·D]  keys, RoPE applied
//	v   [T, Hkv·D]  values
//	out [T, Hq·D]   written by Attend
//
// Head h of a row occupies columns [h·D, (h+1)·D). Query head h reads
// key/value head h / (Hq/Hkv) (grouped-query attention, as transformers'
// repeat_kv). For token t of sequence s at position p, Attend first appends
// k[t] and v[t] to s's cache at position p, then
//
//	out[t, h] = Σ_j softmax_j(q[t,h]·K[j]ᵀ / sqrt(D)) · V[j]
//
// over the cached positions j of s with j <= p (causal) and, for a layer with
// a sliding window W, j > p-W; with Config.AttnSoftcap c, each score s is
// c·tanh(s/c) first. Sequences never see each other's tokens. A cache that
// cannot soft-cap refuses such a model when it is made.
//
// A Batch's Seq.Pos must equal the number of tokens the cache holds for the
// sequence at that layer; an implementation returns an error otherwise. If
// Attend or the forward pass fails part way, the sequences of that batch are
// in an undefined state and must be truncated or removed before reuse.
// Attend may overwrite q, k and v (a rotated GPU cache rotates them in
// place); the forward pass does not read them afterwards.
type Attention interface {
	Attend(layer int, b *Batch, q, k, v, out backend.Tensor) error
}

// BatchStarter is implemented by an Attention that wants to see each batch
// before its first layer: to reserve cache pages for the new tokens, check
// the positions, or upload block tables once rather than once per layer.
// Forward calls Begin before any layer; an error (out of KV memory is a
// normal one) ends the forward pass before anything has changed.
type BatchStarter interface {
	Begin(b *Batch) error
}

// DenseCache is the float32 full-precision KV cache: the reference every
// low-bit cache is measured against, and the cache of tests. It keeps K and
// V on the host, copies q, k and v out of the backend with Download and the
// output back in with Upload, and computes attention with float64 dot
// products and softmax. It works with any backend, but copies every layer's
// activations; it is meant for correctness and baselines, not speed.
//
// Memory is 2·Layers·Hkv·D·4 bytes per cached token. A DenseCache is not
// safe for concurrent use.
type DenseCache struct {
	be      backend.Backend
	layers  int
	hq, hkv int
	d       int
	windows []int   // per layer, 0 = full attention
	softcap float64 // Config.AttnSoftcap (0: none)
	seqs    map[int]*denseSeq

	// host copies of the current layer's tensors, reused across calls
	q, k, v, out []float32
}

// denseSeq is one sequence's cache: per layer, K and V as [L, Hkv·D].
type denseSeq struct {
	k, v [][]float32
}

// NewDenseCache returns an empty DenseCache for a model of the given config,
// using be to move activations.
func NewDenseCache(be backend.Backend, cfg *Config) *DenseCache {
	return &DenseCache{
		be:      be,
		layers:  cfg.Layers,
		hq:      cfg.Heads,
		hkv:     cfg.KVHeads,
		d:       cfg.HeadDim,
		windows: append([]int(nil), cfg.LayerWindows...),
		softcap: cfg.AttnSoftcap,
		seqs:    make(map[int]*denseSeq),
	}
}

// Len returns the number of tokens cached for sequence id (at layer 0).
func (c *DenseCache) Len(id int) int {
	s, ok := c.seqs[id]
	if !ok {
		return 0
	}
	return len(s.k[0]) / (c.hkv * c.d)
}

// Remove forgets sequence id.
func (c *DenseCache) Remove(id int) { delete(c.seqs, id) }

// Truncate keeps the first n tokens of sequence id at every layer, e.g. to
// roll back a failed forward pass or rejected draft tokens.
func (c *DenseCache) Truncate(id, n int) error {
	s, ok := c.seqs[id]
	if !ok {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("model: dense cache: truncate unknown sequence %d", id)
	}
	row := c.hkv * c.d
	for l := range s.k {
		if n < 0 || n*row > len(s.k[l]) {
			return fmt.Errorf("model: dense cache: truncate sequence %d to %d tokens at layer %d, which holds %d", id, n, l, len(s.k[l])/row)
		}
	}
	for l := range s.k {
		s.k[l] = s.k[l][:n*row]
		s.v[l] = s.v[l][:n*row]
	}
	return nil
}

// Attend implements Attention.
func (c *DenseCache) Attend(layer int, b *Batch, q, k, v, out backend.Tensor) error {
	if layer < 0 || layer >= c.layers {
		return fmt.Errorf("model: dense cache: layer %d out of range [0, %d)", layer, c.layers)
	}
	if err := b.Validate(math.MaxInt32); err != nil {
		return fmt.Errorf("model: dense cache: layer %d: %w", layer, err)
	}
	T := len(b.Tokens)
	qw, kvw := c.hq*c.d, c.hkv*c.d
	for _, t := range []struct {
		name  string
		x     backend.Tensor
		width int
	}{{"q", q, qw}, {"k", k, kvw}, {"v", v, kvw}, {"out", out, qw}} {
		if rows, cols := backend.Matrix(t.x.Shape()); rows != T || cols != t.width {
			return fmt.Errorf("model: dense cache: layer %d: %s has shape %v, want [%d, %d]", layer, t.name, t.x.Shape(), T, t.width)
		}
	}
	// Check every sequence before changing any.
	row := kvw
	for _, s := range b.Seqs {
		have := 0
		if ds, ok := c.seqs[s.ID]; ok {
			have = len(ds.k[layer]) / row
		}
		if s.Pos != have {
			return fmt.Errorf("model: dense cache: layer %d: sequence %d continues at position %d, but the cache holds %d tokens", layer, s.ID, s.Pos, have)
		}
	}
	c.q, c.k, c.v, c.out = grow(c.q, T*qw), grow(c.k, T*kvw), grow(c.v, T*kvw), grow(c.out, T*qw)
	for _, t := range []struct {
		dst []float32
		src backend.Tensor
	}{{c.q, q}, {c.k, k}, {c.v, v}} {
		if err := c.be.Download(t.dst, t.src); err != nil {
			return fmt.Errorf("model: dense cache: layer %d: %w", layer, err)
		}
	}
	for _, s := range b.Seqs {
		ds, ok := c.seqs[s.ID]
		if !ok {
			ds = &denseSeq{k: make([][]float32, c.layers), v: make([][]float32, c.layers)}
			c.seqs[s.ID] = ds
		}
		ds.k[layer] = append(ds.k[layer], c.k[s.Start*row:(s.Start+s.Len)*row]...)
		ds.v[layer] = append(ds.v[layer], c.v[s.Start*row:(s.Start+s.Len)*row]...)
	}
	c.attend(layer, b)
	if err := c.be.Upload(out, c.out); err != nil {
		return fmt.Errorf("model: dense cache: layer %d: %w", layer, err)
	}
	return nil
}

// attend computes c.out from c.q and the cached K and V, one work item per
// (token, query head), spread over GOMAXPROCS goroutines. Each item is
// computed independently in a fixed order, so the result does not depend on
// the number of goroutines.
func (c *DenseCache) attend(layer int, b *Batch) {
	type item struct {
		seq *denseSeq
		pos int // position of the query token
		t   int // row in the batch
	}
	var items []item
	for _, s := range b.Seqs {
		ds := c.seqs[s.ID]
		for i := range s.Len {
			items = append(items, item{ds, s.Pos + i, s.Start + i})
		}
	}
	D, group := c.d, c.hq/c.hkv
	qw, kvw := c.hq*D, c.hkv*D
	scale := 1 / math.Sqrt(float64(D))
	window, softcap := c.windows[layer], c.softcap
	work := func(it item, h int, scores []float64, acc []float64) {
		kh := h / group
		q := c.q[it.t*qw+h*D : it.t*qw+(h+1)*D]
		lo := 0
		if window > 0 {
			lo = max(0, it.pos-window+1)
		}
		K, V := it.seq.k[layer], it.seq.v[layer]
		m := math.Inf(-1)
		for j := lo; j <= it.pos; j++ {
			kj := K[j*kvw+kh*D : j*kvw+(kh+1)*D]
			var s float64
			for d, qd := range q {
				s += float64(qd) * float64(kj[d])
			}
			s *= scale
			if softcap != 0 {
				s = softcap * math.Tanh(s/softcap)
			}
			scores[j-lo] = s
			m = max(m, s)
		}
		clear(acc)
		var sum float64
		for j := lo; j <= it.pos; j++ {
			e := math.Exp(scores[j-lo] - m)
			sum += e
			vj := V[j*kvw+kh*D : j*kvw+(kh+1)*D]
			for d, vd := range vj {
				acc[d] += e * float64(vd)
			}
		}
		o := c.out[it.t*qw+h*D : it.t*qw+(h+1)*D]
		for d := range o {
			o[d] = float32(acc[d] / sum)
		}
	}
	n := len(items) * c.hq
	workers := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var scores, acc []float64
			for i := w; i < n; i += workers {
				it := items[i/c.hq]
				scores = grow64(scores, it.pos+1)
				acc = grow64(acc, D)
				work(it, i%c.hq, scores, acc)
			}
		})
	}
	wg.Wait()
}

// grow returns s resized to n elements, reallocating only when it must.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func grow64(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

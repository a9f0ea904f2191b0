package tp

// The ops of a tensor-parallel backend over 2 and 4 CPU ranks against the
// same calls on one rank, on awkward shapes: a decoder layer's op sequence
// with every split kind, uneven vocabulary ranges and KV heads replicated
// over ranks.

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/wq"
)

// newTP returns a backend of n single-thread CPU ranks.
func newTP(t *testing.T, n int) *Backend {
	t.Helper()
	ranks := make([]backend.Backend, n)
	for r := range ranks {
		ranks[r] = cpu.New(1)
	}
	b, err := New(ranks, backend.NewHostCommunicator(ranks))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

// layerShapes are the awkward sizes of the test layer: 8 query heads and 2
// KV heads of D = 6 (RoPE over 3 frequencies), hidden 40, intermediate 28,
// a vocabulary of 37 (uneven over 2 and 4 ranks), 5 tokens.
const (
	tHq, tHkv, tD = 8, 2, 6
	tH, tI, tV    = 40, 28, 37
	tT            = 5
)

// layerOut is what the test layer downloads.
type layerOut struct{ q, k, v, h, logits []float32 }

// runLayer runs a decoder layer's ops (attention replaced by q + q) on be
// with weights from seed and returns q and k after RoPE, the residual h and
// the logits of two rows.
func runLayer(t *testing.T, be *Backend, seed uint64) layerOut {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	load := func(name string, s backend.Split, scale, offset float64, shape ...int) backend.Weight {
		v := randVec(r, backend.NumElements(shape), scale)
		for i := range v {
			v[i] += float32(offset)
		}
		w, err := be.LoadWeightSplit(name, backend.F32, shape, f32Bytes(v), s)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	heads := backend.Split{Kind: backend.Rows, Unit: tD, What: "query heads"}
	kvheads := backend.Split{Kind: backend.Rows, Unit: tD, Replicate: true, What: "KV heads"}
	rows, cols := backend.Split{Kind: backend.Rows}, backend.Split{Kind: backend.Cols}
	oSplit := backend.Split{Kind: backend.Cols, Unit: tD, What: "query heads"}
	rep, vocab := backend.Split{}, backend.Split{Kind: backend.Vocab}

	emb := load("embed", vocab, 1, 0, tV, tH)
	norm := load("norm", rep, 0.1, 1, tH)
	wQ, bq := load("q", heads, 0.1, 0, tHq*tD, tH), load("q.bias", heads, 0.1, 0, tHq*tD)
	wk, bk := load("k", kvheads, 0.1, 0, tHkv*tD, tH), load("k.bias", kvheads, 0.1, 0, tHkv*tD)
	wv, bv := load("v", kvheads, 0.1, 0, tHkv*tD, tH), load("v.bias", kvheads, 0.1, 0, tHkv*tD)
	qn, kn := load("q_norm", rep, 0.1, 1, tD), load("k_norm", rep, 0.1, 1, tD)
	wo, bo := load("o", oSplit, 0.1, 0, tH, tHq*tD), load("o.bias", rep, 0.1, 0, tH)
	gate, up := load("gate", rows, 0.1, 0, tI, tH), load("up", rows, 0.1, 0, tI, tH)
	down := load("down", cols, 0.1, 0, tH, tI)
	invFreq, err := be.LoadWeight("inv_freq", backend.F32, []int{tD / 2}, f32Bytes([]float32{1, 0.1, 0.01}))
	if err != nil {
		t.Fatal(err)
	}

	alloc := func(dt backend.DType, shape ...int) backend.Tensor {
		x, err := be.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	ids, pos, idx := alloc(backend.I32, tT), alloc(backend.I32, tT), alloc(backend.I32, 2)
	h, x := alloc(backend.F32, tT, tH), alloc(backend.F32, tT, tH)
	q, k, v, o := alloc(backend.F32, tT, tHq*tD), alloc(backend.F32, tT, tHkv*tD), alloc(backend.F32, tT, tHkv*tD), alloc(backend.F32, tT, tHq*tD)
	g, u := alloc(backend.F32, tT, tI), alloc(backend.F32, tT, tI)
	hOut, logits := alloc(backend.F32, 2, tH), alloc(backend.F32, 2, tV)
	for _, up := range []struct {
		dst backend.Tensor
		v   []int32
	}{{ids, []int32{0, 36, 18, 19, 9}}, {pos, []int32{0, 1, 2, 7, 30}}, {idx, []int32{4, 1}}} {
		if err := be.UploadInt32(up.dst, up.v); err != nil {
			t.Fatal(err)
		}
	}

	for _, p := range []backend.Tensor{h, x, hOut} { // NaN-poisoned replicated outputs
		nan := make([]float32, backend.NumElements(p.Shape()))
		for i := range nan {
			nan[i] = float32(math.NaN())
		}
		if err := be.Upload(p, nan); err != nil {
			t.Fatal(err)
		}
	}
	be.Embedding(h, emb, ids)
	be.RMSNorm(x, h, norm, 1e-5)
	be.LinearGroup([]backend.Tensor{q, k, v}, x, []backend.Weight{wQ, wk, wv}, []backend.Weight{bq, bk, bv})
	be.RoPEQK(q, k, pos, invFreq, qn, kn, 1e-5)
	be.RMSNorm(q, q, qn, 1e-5) // a per-head norm on a head-split tensor
	be.RoPE(v, pos, invFreq)   // on KV heads replicated over 4 ranks
	be.Add(o, q, q)
	be.Linear(x, o, wo, bo)
	be.AddRMSNorm(h, x, x, norm, 1e-5)
	be.LinearGroup([]backend.Tensor{g, u}, x, []backend.Weight{gate, up}, nil)
	be.SwiGLU(g, g, u)
	be.Linear(x, g, down, nil)
	be.Add(h, h, x)
	be.Rows(hOut, h, idx)
	be.Linear(logits, hOut, emb, nil) // tied LM head
	var out layerOut
	for _, d := range []struct {
		dst *[]float32
		src backend.Tensor
	}{{&out.q, q}, {&out.k, k}, {&out.v, v}, {&out.h, h}, {&out.logits, logits}} {
		*d.dst = make([]float32, backend.NumElements(d.src.Shape()))
		if err := be.Download(*d.dst, d.src); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpsMatchOneRank: q, k and v (before any all-reduce but the embedding's,
// which adds exact zeros) are bitwise those of one rank; h and the logits
// differ only by the order of the all-reduced sums: the partial sums of
// ≤ tI products rounded apart, a few float32 ulps of the largest
// magnitude (tolerance 2⁻¹⁸ of it: 64 ulps).
func TestOpsMatchOneRank(t *testing.T) {
	want := runLayer(t, newTP(t, 1), 5)
	for _, n := range []int{2, 4} {
		got := runLayer(t, newTP(t, n), 5)
		for _, c := range []struct {
			name      string
			got, want []float32
			bitwise   bool
		}{{"q", got.q, want.q, true}, {"k", got.k, want.k, true}, {"v", got.v, want.v, true}, {"h", got.h, want.h, false}, {"logits", got.logits, want.logits, false}} {
			var scale float64
			for _, w := range c.want {
				scale = math.Max(scale, math.Abs(float64(w)))
			}
			tol := scale / (1 << 18)
			for i := range c.want {
				d := math.Abs(float64(c.got[i] - c.want[i]))
				if c.bitwise && math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) || !(d <= tol) {
					t.Fatalf("tp %d: %s[%d] = %g, one rank %g (bitwise: %t, tolerance %g)", n, c.name, i, c.got[i], c.want[i], c.bitwise, tol)
				}
			}
		}
	}
}

// TestLayoutErrors: ops whose operands' layouts do not fit fail with the
// layouts named, and the backend runs again after Sync.
func TestLayoutErrors(t *testing.T) {
	be := newTP(t, 2)
	w, err := be.LoadWeightSplit("o", backend.F32, []int{4, 8}, make([]byte, 4*32), backend.Split{Kind: backend.Cols})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := be.Alloc(backend.F32, 3, 8)
	y, _ := be.Alloc(backend.F32, 3, 4)
	be.Linear(y, x, w, nil)
	if err := be.Sync(); err == nil || !strings.Contains(err.Error(), "before any op wrote it") {
		t.Fatalf("unwritten input: %v", err)
	}
	if err := be.Upload(x, make([]float32, 24)); err != nil {
		t.Fatal(err)
	}
	be.Linear(y, x, w, nil)
	if err := be.Sync(); err == nil || !strings.Contains(err.Error(), "needs its input split the same, not replicated") {
		t.Fatalf("replicated input of a cols split: %v", err)
	}
	if _, err := be.LoadWeightSplit("q", backend.F32, []int{18, 2}, make([]byte, 4*36), backend.Split{Kind: backend.Rows, Unit: 6, What: "query heads"}); err == nil ||
		!strings.Contains(err.Error(), "3 query heads over 2 ranks") {
		t.Fatalf("3 heads over 2 ranks: %v", err)
	}
}

// TestQuantParts: a packed matrix sliced by rows is a view with the same
// codes; by input channels, copies of whole groups; a cut inside a group is
// refused.
func TestQuantParts(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const N, K, G = 6, 256, 32
	for _, e := range []wq.Elem{wq.Int4, wq.Int8, wq.Int3} {
		m, err := wq.Quantize(e, G, N, K, randVec(r, N*K, 1))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 4} {
			be := newTP(t, n)
			for _, s := range []backend.Split{{Kind: backend.Rows}, {Kind: backend.Cols}} {
				w, err := be.newWeight("w", []int{N, K}, s)
				if s.Kind == backend.Rows && n == 4 {
					if err == nil {
						t.Fatalf("%d rows over 4 ranks split", N)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				for rk, c := range w.ranges {
					p, err := w.quantPart(rk, m)
					if err != nil {
						t.Fatal(err)
					}
					if err := p.Validate(); err != nil {
						t.Fatal(err)
					}
					for i := range p.N {
						for j := range p.K {
							mi, mj := i, j
							if s.Kind == backend.Rows {
								mi += c.Start
							} else {
								mj += c.Start
							}
							if p.At(i, j) != m.At(mi, mj) {
								t.Fatalf("%v %v rank %d of %d: [%d, %d] = %g, want %g", e, s.Kind, rk, n, i, j, p.At(i, j), m.At(mi, mj))
							}
						}
					}
				}
			}
		}
	}
	be := newTP(t, 2)
	m, _ := wq.Quantize(wq.Int4, 64, 2, 192, randVec(r, 2*192, 1))
	if _, err := be.LoadQuantWeightSplit("down", m, nil, backend.Split{Kind: backend.Cols}); err == nil || !strings.Contains(err.Error(), "group boundary of 64") {
		t.Fatalf("96 channels a rank in groups of 64: %v", err)
	}
}

// chunkRank is a CPU rank that records backend.ChunkRows calls.
type chunkRank struct {
	backend.Backend
	got [][2]int // (T, runs) per call
}

func (c *chunkRank) SetChunkRows(T int, runs []backend.RowRun) {
	c.got = append(c.got, [2]int{T, len(runs)})
}

// TestChunkRowsForwarded: the group passes the model's prefill-chunk rows
// on to every rank that takes them (and to no other).
func TestChunkRowsForwarded(t *testing.T) {
	a, c := &chunkRank{Backend: cpu.New(1)}, &chunkRank{Backend: cpu.New(1)}
	ranks := []backend.Backend{a, cpu.New(1), c}
	b, err := New(ranks, backend.NewHostCommunicator(ranks))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.SetChunkRows(300, []backend.RowRun{{Start: 2, Len: 256}})
	b.SetChunkRows(0, nil)
	for i, r := range []*chunkRank{a, c} {
		if len(r.got) != 2 || r.got[0] != [2]int{300, 1} || r.got[1] != [2]int{0, 0} {
			t.Errorf("rank %d got %v, want [[300 1] [0 0]]", 2*i, r.got)
		}
	}
}

package tp

// Weights sharded at load: each rank gets the part of its split range,
// read from the caller's data with no full copy on the host (a rows part is
// a slice of the data; a cols part copies only its own bytes; a packed
// low-bit matrix is sliced by rows or by input channels on group
// boundaries).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/wq"
)

// vocabPad is the zero rows after each rank's part of a vocabulary-split
// weight: Embedding maps the ids outside a rank's range to its first
// padding row, so that the all-reduce adds exact zeros; the LM head's
// padding columns of the logits are dropped by Download.
const vocabPad = 1

// weight is the Backend's backend.Weight.
type weight struct {
	owner  *Backend
	name   string
	shape  []int
	split  backend.Split
	ranges []backend.Range // the split dimension's part per rank; nil: replicated
	pad    int             // zero rows after each part (vocabulary splits)
	parts  []backend.Weight
}

func (w *weight) Name() string { return w.name }
func (w *weight) Shape() []int { return slices.Clone(w.shape) }
func (w *weight) kind() backend.SplitKind {
	if w.ranges == nil {
		return backend.Replicated
	}
	return w.split.Kind
}

// weight returns w as this backend's weight.
func (b *Backend) weight(op string, w backend.Weight) (*weight, error) {
	ww, ok := w.(*weight)
	if !ok || ww == nil || ww.owner != b || ww.parts == nil {
		return nil, &backend.ShapeError{Op: op, Detail: fmt.Sprintf("weight %v is not a live weight of this tp backend", w)}
	}
	return ww, nil
}

// newWeight checks s against the logical shape and returns the weight with
// its ranges, parts not yet loaded.
func (b *Backend) newWeight(name string, shape []int, s backend.Split) (*weight, error) {
	w := &weight{owner: b, name: name, shape: slices.Clone(shape), split: s}
	if backend.NumElements(shape) < 0 {
		return nil, fmt.Errorf("tp: weight %s: invalid shape %v", name, shape)
	}
	switch s.Kind {
	case backend.Replicated:
		return w, nil
	case backend.Rows:
		if len(shape) > 2 {
			return nil, fmt.Errorf("tp: weight %s %v: a rows split needs a matrix or a vector", name, shape)
		}
	case backend.Cols, backend.Vocab:
		if len(shape) != 2 {
			return nil, fmt.Errorf("tp: weight %s %v: a %v split needs a matrix", name, shape, s.Kind)
		}
	default:
		return nil, fmt.Errorf("tp: weight %s: unknown split %v", name, s.Kind)
	}
	dim := shape[0]
	if s.Kind == backend.Cols {
		dim = shape[1]
	}
	ranges, err := s.Ranges(dim, len(b.ranks))
	if err != nil {
		return nil, fmt.Errorf("tp: weight %s %v split by %v: %w", name, shape, s.Kind, err)
	}
	w.ranges = ranges
	if s.Kind == backend.Vocab {
		w.pad = vocabPad
	}
	return w, nil
}

// partShape returns the shape of rank r's part, padding included.
func (w *weight) partShape(r int) []int {
	s := slices.Clone(w.shape)
	switch w.kind() {
	case backend.Rows, backend.Vocab:
		s[0] = w.ranges[r].N + w.pad
	case backend.Cols:
		s[1] = w.ranges[r].N
	}
	return s
}

// loadParts calls load for every rank, freeing the loaded parts on error.
func (w *weight) loadParts(load func(r int, be backend.Backend) (backend.Weight, error)) (*weight, error) {
	parts := make([]backend.Weight, len(w.owner.ranks))
	for r, be := range w.owner.ranks {
		p, err := load(r, be)
		if err != nil {
			for q := range r {
				w.owner.ranks[q].FreeWeight(parts[q])
			}
			return nil, fmt.Errorf("tp: rank %d: %w", r, err)
		}
		parts[r] = p
	}
	w.parts = parts
	return w, nil
}

// LoadWeight implements backend.Backend: a weight whole on every rank.
func (b *Backend) LoadWeight(name string, dtype backend.DType, shape []int, data []byte) (backend.Weight, error) {
	return b.LoadWeightSplit(name, dtype, shape, data, backend.Split{Kind: backend.Replicated})
}

// LoadWeightSplit implements backend.SplitLoader.
func (b *Backend) LoadWeightSplit(name string, dtype backend.DType, shape []int, data []byte, s backend.Split) (backend.Weight, error) {
	w, err := b.newWeight(name, shape, s)
	if err != nil {
		return nil, err
	}
	sz := dtype.Size()
	if sz == 0 || dtype == backend.I32 || len(data) != sz*backend.NumElements(shape) {
		return nil, fmt.Errorf("tp: weight %s %v: %d bytes of %v", name, shape, len(data), dtype)
	}
	return w.loadParts(func(r int, be backend.Backend) (backend.Weight, error) {
		return be.LoadWeight(name, dtype, w.partShape(r), w.partData(r, data, sz))
	})
}

// partData returns rank r's bytes of the logical weight data of sz-byte
// elements: a slice of data for a rows part, a copy of its columns for a
// cols part, its rows and zero padding rows for a vocabulary part.
func (w *weight) partData(r int, data []byte, sz int) []byte {
	if w.kind() == backend.Replicated {
		return data
	}
	c := w.ranges[r]
	if w.kind() == backend.Cols {
		N, K := w.shape[0], w.shape[1]
		out := make([]byte, N*c.N*sz)
		for n := range N {
			copy(out[n*c.N*sz:(n+1)*c.N*sz], data[(n*K+c.Start)*sz:(n*K+c.Start+c.N)*sz])
		}
		return out
	}
	row := sz * backend.NumElements(w.shape) / w.shape[0]
	part := data[c.Start*row : (c.Start+c.N)*row]
	if w.pad == 0 {
		return part
	}
	out := make([]byte, len(part)+w.pad*row)
	copy(out, part)
	return out
}

// LoadQuantWeightSplit implements backend.QuantSplitLoader. Ranks without
// a low-bit Linear get their part dequantized to float32.
func (b *Backend) LoadQuantWeightSplit(name string, m *wq.Matrix, dec *wq.DEC, s backend.Split) (backend.Weight, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("tp: weight %s: %w", name, err)
	}
	if dec != nil && len(b.ranks) > 1 {
		return nil, fmt.Errorf("tp: weight %s: DEC (k_chunk %d) is not supported with tensor parallelism over %d ranks (drop DEC or use one rank)", name, dec.KChunk, len(b.ranks))
	}
	if s.Kind == backend.Vocab {
		return nil, fmt.Errorf("tp: weight %s: a packed weight cannot split by vocabulary", name)
	}
	w, err := b.newWeight(name, []int{m.N, m.K}, s)
	if err != nil {
		return nil, err
	}
	parts := make([]*wq.Matrix, len(b.ranks))
	for r := range parts {
		if parts[r], err = w.quantPart(r, m); err != nil {
			return nil, err
		}
	}
	return w.loadParts(func(r int, be backend.Backend) (backend.Weight, error) {
		p := parts[r]
		if ql, ok := be.(backend.QuantWeightLoader); ok {
			return ql.LoadQuantWeight(name, p, dec)
		}
		if dec != nil {
			return nil, fmt.Errorf("weight %s: backend %s cannot run DEC (it has no low-bit Linear)", name, be.Name())
		}
		return be.LoadWeight(name, backend.F32, []int{p.N, p.K}, p.DequantBytes())
	})
}

// quantPart returns rank r's part of the packed matrix m: a view of m's rows
// (no copy) for a rows split, a copy of its groups of input channels for a
// cols split.
func (w *weight) quantPart(r int, m *wq.Matrix) (*wq.Matrix, error) {
	params := 0 // params per row
	if m.Elem.IsInt() {
		params = 2 * (m.K / m.Group)
	}
	rw := m.Elem.RowWords(m.K)
	switch w.kind() {
	case backend.Replicated:
		return m, nil
	case backend.Rows:
		c := w.ranges[r]
		p := &wq.Matrix{Elem: m.Elem, Group: m.Group, N: c.N, K: m.K,
			Words: m.Words[c.Start*rw : (c.Start+c.N)*rw : (c.Start+c.N)*rw]}
		if params > 0 {
			p.Params = m.Params[c.Start*params : (c.Start+c.N)*params : (c.Start+c.N)*params]
		}
		return p, nil
	}
	c := w.ranges[r]
	unit := m.Elem.BlockElems()
	if m.Elem.IsInt() {
		unit = m.Group
	}
	if c.Start%unit != 0 || c.N%unit != 0 {
		return nil, fmt.Errorf("tp: weight %s [%d, %d]: %w: rank %d's input channels [%d, %d) are not on the %v group boundary of %d", w.name, m.N, m.K, backend.ErrSplit, r, c.Start, c.Start+c.N, m.Elem, unit)
	}
	p, err := wq.NewMatrix(m.Elem, m.Group, m.N, c.N)
	if err != nil {
		return nil, fmt.Errorf("tp: weight %s: rank %d: %w", w.name, r, err)
	}
	// Blocks never straddle a group (groups are whole blocks), so the
	// part's words are a contiguous run of each row's words.
	prw, w0 := p.Elem.RowWords(c.N), m.Elem.RowWords(c.Start)
	pp := 0
	if params > 0 {
		pp = 2 * (c.N / m.Group)
	}
	g0 := 2 * (c.Start / max(m.Group, 1))
	for n := range m.N {
		copy(p.Words[n*prw:(n+1)*prw], m.Words[n*rw+w0:n*rw+w0+prw])
		if pp > 0 {
			copy(p.Params[n*pp:(n+1)*pp], m.Params[n*params+g0:n*params+g0+pp])
		}
	}
	return p, nil
}

// LoadRandomSplit implements backend.RandomSplitLoader. Where the ranks are
// no backend.RandomLoader it returns an error wrapping backend.ErrNoRandom.
// A vocabulary part is made on the host (its padding row must be zero), the
// others by each rank.
func (b *Backend) LoadRandomSplit(name string, shape []int, std float32, seed uint64, s backend.Split) (backend.Weight, error) {
	for r, be := range b.ranks {
		if _, ok := be.(backend.RandomLoader); !ok {
			return nil, fmt.Errorf("tp: weight %s: rank %d (%s): %w", name, r, be.Name(), backend.ErrNoRandom)
		}
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("tp: random weight %s %v: want a matrix", name, shape)
	}
	w, err := b.newWeight(name, shape, s)
	if err != nil {
		return nil, err
	}
	return w.loadParts(func(r int, be backend.Backend) (backend.Weight, error) {
		rseed := w.partSeed(seed, r)
		sh := w.partShape(r)
		if w.pad == 0 {
			return be.(backend.RandomLoader).LoadRandom(name, sh, std, rseed)
		}
		return be.LoadWeight(name, backend.BF16, sh, randomBF16(sh[0]-w.pad, sh[1], w.pad, std, rseed))
	})
}

// rankSeed separates the seeds of the random parts.
const rankSeed = 0x9e3779b97f4a7c15

// partSeed is the seed of rank r's random part: one per range, so that
// ranks holding the same range (a replicated weight, a replicated KV head)
// hold the same values.
func (w *weight) partSeed(seed uint64, r int) uint64 {
	if w.ranges == nil {
		return seed
	}
	return seed + uint64(w.ranges[r].Start+1)*rankSeed
}

// randomRowsPerChunk is the rows of a random vocabulary part one goroutine
// fills from its own stream (seeded by the chunk's index, so the values do
// not depend on how many goroutines run).
const randomRowsPerChunk = 1024

// randomBF16 returns BF16 data of rows·cols values uniform with standard
// deviation std, then pad zero rows (vocabulary parts of benchmark models).
// Chunks of rows fill in parallel: a 64K x 4096 part is 268M values.
func randomBF16(rows, cols, pad int, std float32, seed uint64) []byte {
	data := make([]byte, 2*(rows+pad)*cols)
	a := float64(std) * math.Sqrt(3) // uniform on [-a, a] has deviation a/√3
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for c := 0; c*randomRowsPerChunk < rows; c++ {
		lo, hi := c*randomRowsPerChunk*cols, min(rows, (c+1)*randomRowsPerChunk)*cols
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rng := rand.New(rand.NewPCG(seed, rankSeed+uint64(c)))
			for i := lo; i < hi; i++ {
				v := float32((2*rng.Float64() - 1) * a)
				binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(v)>>16))
			}
		})
	}
	wg.Wait()
	return data
}

// LoadRandomQuantSplit implements backend.RandomQuantSplitLoader.
func (b *Backend) LoadRandomQuantSplit(name string, shape []int, e wq.Elem, G int, seed uint64, dec wq.DEC, s backend.Split) (backend.Weight, error) {
	if dec.KChunk > 0 && len(b.ranks) > 1 {
		return nil, fmt.Errorf("tp: weight %s: DEC (k_chunk %d) is not supported with tensor parallelism over %d ranks (drop DEC or use one rank)", name, dec.KChunk, len(b.ranks))
	}
	if s.Kind == backend.Vocab || len(shape) != 2 {
		return nil, fmt.Errorf("tp: random packed weight %s %v split by %v: want a matrix split by rows or cols", name, shape, s.Kind)
	}
	w, err := b.newWeight(name, shape, s)
	if err != nil {
		return nil, err
	}
	if w.kind() == backend.Cols {
		for r, c := range w.ranges {
			if c.Start%G != 0 || c.N%G != 0 {
				return nil, fmt.Errorf("tp: weight %s %v: %w: rank %d's input channels [%d, %d) are not on the %v group boundary of %d", name, shape, backend.ErrSplit, r, c.Start, c.Start+c.N, e, G)
			}
		}
	}
	return w.loadParts(func(r int, be backend.Backend) (backend.Weight, error) {
		ql, ok := be.(backend.RandomQuantLoader)
		if !ok {
			return nil, errors.New("random packed weights need a backend that makes them (the CUDA backend)")
		}
		return ql.LoadRandomQuant(name, w.partShape(r), e, G, w.partSeed(seed, r), dec)
	})
}

// FreeWeight implements backend.Backend.
func (b *Backend) FreeWeight(w backend.Weight) {
	ww, ok := w.(*weight)
	if !ok || ww == nil || ww.owner != b {
		return
	}
	for r, p := range ww.parts {
		b.ranks[r].FreeWeight(p)
	}
	ww.parts = nil
}

// Package tp runs one model over the ranks of a tensor-parallel group
// (Megatron-style): each rank holds a shard of every weight, attention heads
// and the KV cache are split by head, and the partial results of the
// row-split projections are summed with the group's Communicator.
//
// A Backend is a backend.Backend whose tensors have the logical (full)
// shape and a layout chosen by the op that first writes them: replicated
// (every rank holds the whole tensor) or split by columns (rank r holds the
// columns of its range, maybe followed by zero padding columns). Each rank
// holds its part in its own backend; parts are allocated when an op first
// writes a layout, and again when an op writes another. Weights are split
// as the model names (backend.Split) when they load:
//
//	Linear, rows-split weight, replicated x   → column-split output (the
//	                                             weight's ranges), bias per rank
//	Linear, cols-split weight, x split alike  → each rank's partial [T, N],
//	                                             bias on rank 0, AllReduce
//	Embedding, vocab-split table              → each rank its ids' rows (a
//	                                             zero row for the others), AllReduce
//	Linear, vocab-split weight (LM head)      → column-split logits (a zero
//	                                             padding column per rank)
//
// and the other ops run on each rank's part. Ops go to the ranks one after
// the other from the caller's goroutine; a device backend only queues them.
// Download gathers a column-split tensor's columns; a replicated one is
// read from rank 0.
package tp

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/bitdecode/bitdecode/backend"
)

// Backend is a backend.Backend over a tensor-parallel group.
type Backend struct {
	ranks []backend.Backend
	comm  backend.Communicator
	err   error       // first error of the tp layer (layouts, splits) since the last Sync
	bufs  [][]float32 // Download's staging, one per rank, reused
}

var (
	_ backend.Backend                = (*Backend)(nil)
	_ backend.SplitLoader            = (*Backend)(nil)
	_ backend.QuantSplitLoader       = (*Backend)(nil)
	_ backend.RandomSplitLoader      = (*Backend)(nil)
	_ backend.RandomQuantSplitLoader = (*Backend)(nil)
	_ backend.HeadDimPadder          = (*Backend)(nil)
	_ backend.ChunkRows              = (*Backend)(nil)
)

// SetChunkRows implements backend.ChunkRows: each rank that takes the hint
// gets it (every rank's ops run over the same rows, its share of the
// columns).
func (b *Backend) SetChunkRows(T int, runs []backend.RowRun) {
	for _, r := range b.ranks {
		if c, ok := r.(backend.ChunkRows); ok {
			c.SetChunkRows(T, runs)
		}
	}
}

// PadHeadDim implements backend.HeadDimPadder: the largest head dim any
// rank asks for (every rank holds whole heads of it: the loader splits q, k,
// v and o by heads of the padded size), d where no rank pads, ok false
// where a rank has no head dim of at least d.
func (b *Backend) PadHeadDim(d int) (int, bool) {
	dp := d
	for _, r := range b.ranks {
		if p, ok := r.(backend.HeadDimPadder); ok {
			rd, ok := p.PadHeadDim(d)
			if !ok {
				return d, false
			}
			dp = max(dp, rd)
		}
	}
	return dp, true
}

// New returns the backend that runs one model over ranks, summing partial
// results with comm. The Backend owns neither: Close closes comm and then
// the ranks.
func New(ranks []backend.Backend, comm backend.Communicator) (*Backend, error) {
	if len(ranks) == 0 {
		return nil, errors.New("tp: no ranks")
	}
	for r, be := range ranks {
		if be == nil {
			return nil, fmt.Errorf("tp: rank %d is nil", r)
		}
	}
	if comm == nil {
		return nil, errors.New("tp: nil communicator")
	}
	if comm.Ranks() != len(ranks) {
		return nil, fmt.Errorf("tp: a communicator of %d ranks for %d backends", comm.Ranks(), len(ranks))
	}
	return &Backend{ranks: slices.Clone(ranks), comm: comm}, nil
}

// Ranks returns the ranks' backends, rank 0 first.
func (b *Backend) Ranks() []backend.Backend { return b.ranks }

// Name implements backend.Backend: "tp 2 × cuda (H100 ...)".
func (b *Backend) Name() string {
	return fmt.Sprintf("tp %d × %s", len(b.ranks), b.ranks[0].Name())
}

// layout is where a tensor's columns live: nil cols for a replicated tensor,
// else rank r's part holds logical columns cols[r] followed by pad zero
// columns. Ranges may overlap (KV heads replicated on several ranks).
type layout struct {
	cols []backend.Range
	pad  int
}

// replicated is the layout of a tensor whole on every rank.
var replicated = layout{}

func (l layout) split() bool { return l.cols != nil }

func (l layout) equal(o layout) bool { return l.pad == o.pad && slices.Equal(l.cols, o.cols) }

// String names the layout in errors.
func (l layout) String() string {
	if !l.split() {
		return "replicated"
	}
	var sb strings.Builder
	sb.WriteString("columns")
	for _, c := range l.cols {
		fmt.Fprintf(&sb, " [%d,%d)", c.Start, c.Start+c.N)
	}
	if l.pad > 0 {
		fmt.Fprintf(&sb, " +%d padding", l.pad)
	}
	return sb.String()
}

// aligned reports whether every range starts and ends on a multiple of g
// with no padding: groups of g columns (heads) stay on one rank.
func (l layout) aligned(g int) bool {
	if l.pad != 0 || g <= 0 {
		return false
	}
	for _, c := range l.cols {
		if c.Start%g != 0 || c.N%g != 0 {
			return false
		}
	}
	return true
}

// tensor is the Backend's backend.Tensor.
type tensor struct {
	owner   *Backend
	dtype   backend.DType
	shape   []int
	lay     layout
	written bool             // lay is set and parts hold it
	parts   []backend.Tensor // one per rank once written
	ids     []int32          // host copy of an I32 tensor's last upload (Embedding)
	local   []backend.Tensor // per rank: Embedding's ids local to the rank's vocabulary
	freed   bool
}

func (t *tensor) Shape() []int         { return slices.Clone(t.shape) }
func (t *tensor) DType() backend.DType { return t.dtype }
func (t *tensor) String() string       { return fmt.Sprintf("%v%v %v", t.dtype, t.shape, t.lay) }

// partShape returns the shape of rank r's part in layout l.
func (t *tensor) partShape(l layout, r int) []int {
	s := slices.Clone(t.shape)
	if l.split() {
		s[len(s)-1] = l.cols[r].N + l.pad
	}
	return s
}

// Alloc implements backend.Backend. No rank memory is taken until an op
// writes the tensor.
func (b *Backend) Alloc(dtype backend.DType, shape ...int) (backend.Tensor, error) {
	if backend.NumElements(shape) < 0 || dtype.Size() == 0 {
		return nil, fmt.Errorf("tp: alloc %v%v: invalid shape or type", dtype, shape)
	}
	return &tensor{owner: b, dtype: dtype, shape: slices.Clone(shape)}, nil
}

// Free implements backend.Backend.
func (b *Backend) Free(t backend.Tensor) {
	tt, ok := t.(*tensor)
	if !ok || tt == nil || tt.owner != b || tt.freed {
		return
	}
	tt.release()
	tt.freed = true
}

// release frees the tensor's parts on the ranks.
func (t *tensor) release() {
	for r, p := range t.parts {
		t.owner.ranks[r].Free(p)
	}
	for r, p := range t.local {
		t.owner.ranks[r].Free(p)
	}
	t.parts, t.local, t.written = nil, nil, false
}

// tensor returns t as this backend's tensor, or an error naming op.
func (b *Backend) tensor(op string, t backend.Tensor) (*tensor, error) {
	tt, ok := t.(*tensor)
	if !ok || tt == nil || tt.owner != b || tt.freed {
		return nil, &backend.ShapeError{Op: op, Detail: fmt.Sprintf("tensor %v is not a live tensor of this tp backend", t)}
	}
	return tt, nil
}

// input returns t as a written tensor of this backend.
func (b *Backend) input(op string, t backend.Tensor) (*tensor, error) {
	tt, err := b.tensor(op, t)
	if err != nil {
		return nil, err
	}
	if !tt.written {
		return nil, &backend.ShapeError{Op: op, Detail: fmt.Sprintf("tensor %v is read before any op wrote it", tt)}
	}
	return tt, nil
}

// ensure gives t layout l, allocating its parts on the ranks (and freeing
// those of another layout).
func (t *tensor) ensure(l layout) error {
	if t.written && t.lay.equal(l) {
		return nil
	}
	t.release()
	parts := make([]backend.Tensor, len(t.owner.ranks))
	for r, be := range t.owner.ranks {
		p, err := be.Alloc(t.dtype, t.partShape(l, r)...)
		if err != nil {
			for q := range r {
				t.owner.ranks[q].Free(parts[q])
			}
			return fmt.Errorf("tp: rank %d: %w", r, err)
		}
		parts[r] = p
	}
	t.parts, t.lay, t.written = parts, l, true
	return nil
}

// Parts returns the ranks' parts of t, rank 0 first, and the logical column
// range each holds (nil for a replicated tensor). The KV cache attends on
// each rank's part of q, k and v.
func (b *Backend) Parts(t backend.Tensor) ([]backend.Tensor, []backend.Range, error) {
	tt, err := b.input("Parts", t)
	if err != nil {
		return nil, nil, err
	}
	if tt.lay.pad != 0 {
		return nil, nil, &backend.ShapeError{Op: "Parts", Detail: fmt.Sprintf("tensor %v has padding columns", tt)}
	}
	return slices.Clone(tt.parts), slices.Clone(tt.lay.cols), nil
}

// ShardLike gives dst the column layout of like (their last dimensions must
// agree) and allocates its parts, so that each rank can write its own
// columns of dst (the attention output, by head, as q is split).
func (b *Backend) ShardLike(dst, like backend.Tensor) error {
	d, err := b.tensor("ShardLike", dst)
	if err != nil {
		return err
	}
	l, err := b.input("ShardLike", like)
	if err != nil {
		return err
	}
	if d.shape[len(d.shape)-1] != l.shape[len(l.shape)-1] {
		return &backend.ShapeError{Op: "ShardLike", Detail: fmt.Sprintf("dst %v and %v have different columns", d, l)}
	}
	return d.ensure(l.lay)
}

// Upload implements backend.Backend: dst becomes replicated, every rank
// gets src.
func (b *Backend) Upload(dst backend.Tensor, src []float32) error {
	_, err := replicate(b, "Upload", "values", dst, src, backend.Backend.Upload)
	return err
}

// UploadInt32 implements backend.Backend: dst becomes replicated, every
// rank gets src, and the backend keeps a host copy (Embedding maps the ids
// to each rank's vocabulary from it).
func (b *Backend) UploadInt32(dst backend.Tensor, src []int32) error {
	t, err := replicate(b, "UploadInt32", "ids", dst, src, backend.Backend.UploadInt32)
	if err != nil {
		return err
	}
	t.ids = append(t.ids[:0], src...)
	return nil
}

// replicate makes dst replicated and uploads src (what: its elements, for
// the error) to every rank's part with up.
func replicate[T any](b *Backend, op, what string, dst backend.Tensor, src []T, up func(backend.Backend, backend.Tensor, []T) error) (*tensor, error) {
	t, err := b.tensor(op, dst)
	if err != nil {
		return nil, err
	}
	if len(src) != backend.NumElements(t.shape) {
		return nil, fmt.Errorf("tp: upload of %d %s to %v", len(src), what, t)
	}
	if err := t.ensure(replicated); err != nil {
		return nil, err
	}
	for r, be := range b.ranks {
		if err := up(be, t.parts[r], src); err != nil {
			return nil, fmt.Errorf("tp: rank %d: %w", r, err)
		}
	}
	return t, nil
}

// Download implements backend.Backend: a replicated tensor is read from rank
// 0; a column-split one gathers each rank's columns (dropping padding).
func (b *Backend) Download(dst []float32, src backend.Tensor) error {
	if b.err != nil {
		return b.err
	}
	t, err := b.input("Download", src)
	if err != nil {
		return err
	}
	if len(dst) != backend.NumElements(t.shape) {
		return fmt.Errorf("tp: download of %v into %d values", t, len(dst))
	}
	if !t.lay.split() {
		if err := b.ranks[0].Download(dst, t.parts[0]); err != nil {
			return fmt.Errorf("tp: rank 0: %w", err)
		}
		// The other ranks' errors known so far (Sync waits for them all).
		return b.Err()
	}
	return b.gather(dst, t)
}

// scatterRows is the most rows of a split tensor one goroutine copies into
// the destination at Download (the logits of a large batch are tens of MB).
const scatterRows = 16

// gather downloads the column-split tensor t into dst. The ranks download
// one after another, in rank order, as every op reaches them: a rank's
// download must follow its own queued ops, which another rank's flush may
// be launching (backend/gpu's group), so two downloads never run at once.
// What overlaps is the host's work: each rank's part is copied into its
// columns of dst by goroutines while the next rank downloads. Columns that
// an earlier rank holds too (replicated KV heads) are copied from that rank
// only, so no two copies write the same element.
func (b *Backend) gather(dst []float32, t *tensor) error {
	rows, cols := backend.Matrix(t.shape)
	if len(b.bufs) != len(b.ranks) {
		b.bufs = make([][]float32, len(b.ranks))
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for r, be := range b.ranks {
		c := t.lay.cols[r]
		w := c.N + t.lay.pad
		if cap(b.bufs[r]) < rows*w {
			b.bufs[r] = make([]float32, rows*w)
		}
		buf := b.bufs[r][:rows*w]
		if err := be.Download(buf, t.parts[r]); err != nil {
			return fmt.Errorf("tp: rank %d: %w", r, err)
		}
		lo, hi := c.Start, c.Start+c.N
		for _, e := range t.lay.cols[:r] { // identical or disjoint ranges (the splits make no others)
			if e.Start <= lo && lo < e.Start+e.N {
				lo = min(hi, e.Start+e.N)
			}
		}
		for r0 := 0; r0 < rows && lo < hi; r0 += scatterRows {
			r1 := min(rows, r0+scatterRows)
			wg.Go(func() {
				for i := r0; i < r1; i++ {
					copy(dst[i*cols+lo:i*cols+hi], buf[i*w+lo-c.Start:i*w+hi-c.Start])
				}
			})
		}
	}
	return nil
}

// fail records err as the backend's first error.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Err implements backend.Backend: the tp layer's first error, else the
// first rank's, with its rank.
func (b *Backend) Err() error {
	if b.err != nil {
		return b.err
	}
	for r, be := range b.ranks {
		if err := be.Err(); err != nil {
			return fmt.Errorf("tp: rank %d: %w", r, err)
		}
	}
	return nil
}

// Sync implements backend.Backend: it waits for every rank and returns the
// first error (the tp layer's, else the lowest rank's), clearing them all.
func (b *Backend) Sync() error {
	first := b.err
	b.err = nil
	for r, be := range b.ranks {
		if err := be.Sync(); err != nil && first == nil {
			first = fmt.Errorf("tp: rank %d: %w", r, err)
		}
	}
	return first
}

// Close implements backend.Backend: it closes the communicator, then the
// ranks, and returns the first error.
func (b *Backend) Close() error {
	first := b.comm.Close()
	if first != nil {
		first = fmt.Errorf("tp: communicator: %w", first)
	}
	for r, be := range b.ranks {
		if err := be.Close(); err != nil && first == nil {
			first = fmt.Errorf("tp: rank %d: %w", r, err)
		}
	}
	return first
}

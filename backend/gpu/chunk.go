package gpu

// chunk.go: the batch-invariant mode's prefill chunks on the fast path.
//
// The mode (Options.BatchInvariant) runs every fp16 linear layer on
// linear.cu, whose result for a row does not depend on the rows beside it;
// a prefill chunk's rows pay for that ~2x cuBLASLt's time at 256 rows
// (docs/serving.md). A chunk is one sequence's, and a request computes its
// prompt in the same chunks alone, beside other requests' decode rows, or
// again after a preemption (engine.Scheduler), so a chunk row's result may
// depend on its chunk without depending on its batch. So where the model
// names a step's chunks (backend.ChunkRows), Linear and LinearGroup over
// that step's rows compute each chunk's rows apart, by the path the default
// mode takes for a launch of the chunk's length (cuBLASLt for long chunks:
// one algorithm per shape and pointer alignment), and the other rows as the
// mode always does; each part reads and writes its rows of the step's
// tensors in place. Conditions that keep a chunk's bits its own: the parts
// are split only where every output's rows start 256-byte aligned (N a
// multiple of 64 floats), since cuBLASLt keys its plan on the pointers'
// alignment; and no op after a split folds into its last launch (fuse.go,
// join.go, ropekv.go), whose rows are then a part's, not the step's.

import (
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// chunkRows is the model's SetChunkRows: the runs of rows of the ops over T
// rows that are one sequence's prefill chunk each.
type chunkRows struct {
	T    int
	runs []backend.RowRun
}

// SetChunkRows implements backend.ChunkRows.
func (b *Backend) SetChunkRows(T int, runs []backend.RowRun) {
	b.chunks = chunkRows{T: T, runs: append(b.chunks.runs[:0], runs...)}
}

// invariant reports whether the ops queued now run the batch-invariant
// mode's paths: the mode is on and they are not a prefill chunk's part.
func (b *Backend) invariant() bool { return b.opts.BatchInvariant && !b.inChunk }

// chunkRowFloats is the row length (float32 outputs) whose multiples start
// every row 256-byte aligned, the alignment cuBLASLt keys its plans on
// (cuda.Ctx.GEMM): a layer's rows are split only where each output is.
const chunkRowFloats = 256 / 4

// rowPart is a part of a step's rows: [start, start+n), a prefill chunk or
// the rows between chunks.
type rowPart struct {
	start, n int
	chunk    bool
}

// chunkParts returns the parts of a linear layer's T rows whose outputs
// have the channels ns, in row order, where the batch-invariant mode
// computes a prefill chunk's rows apart (see above); nil where it computes
// them all at once.
func (b *Backend) chunkParts(T int, ns ...int) []rowPart {
	if !b.invariant() || b.chunks.T != T || len(b.chunks.runs) == 0 || b.opts.NoChunkPath {
		return nil
	}
	for _, n := range ns {
		if n%chunkRowFloats != 0 {
			return nil
		}
	}
	var parts []rowPart
	at := 0
	for _, r := range b.chunks.runs {
		if r.Start < at || r.Len < 1 || r.Start+r.Len > T {
			return nil // not runs of this step's rows in order: no split
		}
		if r.Start > at {
			parts = append(parts, rowPart{start: at, n: r.Start - at})
		}
		parts = append(parts, rowPart{start: r.Start, n: r.Len, chunk: true})
		at = r.Start + r.Len
	}
	if at < T {
		parts = append(parts, rowPart{start: at, n: T - at})
	}
	return parts
}

// rowsOf returns the view of rows [start, start+n) of the float32 matrix t
// (no memory of its own: t's).
func (t *tensor) rowsOf(start, n int) *tensor {
	_, cols := t.matrix()
	return &tensor{owner: t.owner, shape: []int{n, cols}, dtype: t.dtype, n: n * cols,
		ptr: t.ptr + cuda.DevicePtr(4*start*cols), size: 4 * n * cols}
}

// inParts runs part(p) for each of parts with inChunk set for the chunks,
// then leaves the last queued op unfoldable (chunk.go's opening comment).
func (b *Backend) inParts(parts []rowPart, part func(p rowPart)) {
	for _, p := range parts {
		if b.failed() {
			break
		}
		b.inChunk = p.chunk
		part(p)
	}
	b.inChunk = false
	b.qMu.Lock()
	if n := len(b.queue); n > 0 {
		q := &b.queue[n-1]
		q.gemv, q.plain, q.lin, q.joined, q.half, q.rope, q.sel = nil, nil, nil, nil, nil, nil, nil
	}
	b.qMu.Unlock()
}

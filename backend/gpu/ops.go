package gpu

import (
	"cmp"
	"fmt"
	"math"
	"sync"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// f32 returns the CUDA tensor behind t if it is an F32 tensor of this backend.
func (b *Backend) f32(op string, t backend.Tensor) (*tensor, error) {
	ct, err := b.tensorOf(op, t)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckF32(op, "cuda", ct, ct.dtype); err != nil {
		return nil, err
	}
	return ct, nil
}

// i32 returns the CUDA tensor behind t if it is an I32 tensor of this
// backend whose values have been uploaded.
func (b *Backend) i32(op string, t backend.Tensor) (*tensor, error) {
	ct, err := b.tensorOf(op, t)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckI32(op, ct, ct.dtype); err != nil {
		return nil, err
	}
	if ct.host == nil {
		return nil, fmt.Errorf("backend/gpu: %s: index tensor %v used before UploadInt32", op, ct)
	}
	return ct, nil
}

// vector returns the float32 device memory of a one-dimensional weight.
func (b *Backend) vector(op string, w backend.Weight) (*weight, error) {
	cw, err := b.weightOf(op, w)
	if err != nil {
		return nil, err
	}
	if len(cw.shape) != 1 {
		return nil, &backend.ShapeError{Op: op, Detail: fmt.Sprintf("weight %s %v is not a vector", cw.name, cw.shape)}
	}
	return cw, nil
}

// launch queues f (the op's launches) to run on the device's owner thread
// in order with the other ops (see Backend's queue). key lists every value
// f's launches depend on (device addresses, sizes, scalars): two flushes
// whose ops have equal keys launch the same kernels with the same
// arguments, so the second may replay a CUDA graph of the first (graph.go).
// An op queued without a key makes its flush run directly.
//
// Every segmentOps ops the queue is flushed (see segmentOps): the GPU runs
// the first part of a long sequence of ops while the caller queues the
// rest.
func (b *Backend) launch(op string, f func(c *cuda.Ctx) error, key ...uint64) {
	b.queueOp(queuedOp{op: op, f: f, key: key})
}

// queueOp appends q to the queue, flushing it every segmentOps ops; a
// gemv.cu launch or a joined GEMM stays queued past that for the op after
// it to fold into (fuse.go, join.go), which then flushes.
func (b *Backend) queueOp(q queuedOp) {
	b.queueAfter(func(*queuedOp) queuedOp { return q })
}

// queueAfter is queueOp of the op mk returns, mk called under the queue's
// lock with the op queued last (nil when the queue is empty), which it may
// replace in place (half.go): no flush falls between the two.
func (b *Backend) queueAfter(mk func(last *queuedOp) queuedOp) {
	b.qMu.Lock()
	if b.queue == nil {
		b.queue, b.spare = b.spare, nil
	}
	var last *queuedOp
	if k := len(b.queue); k > 0 {
		last = &b.queue[k-1]
	}
	q := mk(last)
	b.queue = append(b.queue, q)
	full := len(b.queue)+b.qFolds >= segmentOps && !q.foldable()
	b.qMu.Unlock()
	if full {
		b.flush()
	}
}

// Enqueue queues f to run on the device's owner thread after the ops issued
// so far, as one more op named op: code with its own kernels (a GPU KV
// cache) stays in order with the backend's ops without a hand-off per call.
// An error f returns becomes the pending op error. key, as for the
// backend's own ops, lists every value f's launches depend on, so that a
// decode step can be replayed as a CUDA graph; f must then only launch
// kernels on the device's stream. Without a key the flush runs directly.
func (b *Backend) Enqueue(op string, f func(c *cuda.Ctx) error, key ...uint64) {
	b.launch(op, f, key...)
}

// EnqueueUpload queues a copy of the host bytes src into device memory dst
// on the device's stream, after the ops issued so far: per-step tables
// (token ids, positions, a KV cache's block tables) reach the device in
// order with the step's ops without a hand-off to the owner thread of
// their own. src must not change until the queue has run (Do, Download,
// Sync; pass a new slice). The copy runs outside CUDA graphs: uploads at
// the head of a flush run just before its graph is replayed, and an upload
// after an op of the same flush makes the flush run directly. A device
// error of the copy becomes the pending op error.
func (b *Backend) EnqueueUpload(op string, dst cuda.DevicePtr, src []byte) {
	b.queueOp(queuedOp{op: op, upload: true, f: func(c *cuda.Ctx) error {
		return c.HtoDAsync(dst, src, b.stream)
	}})
}

// Do runs the queued ops, then f, in one hand-off to the owner thread, and
// returns f's error (queued ops' errors become the pending op error). Use it
// for work that must happen now, such as freeing memory queued ops may use.
func (b *Backend) Do(f func(c *cuda.Ctx) error) error {
	var ferr error
	b.flushWith(func(c *cuda.Ctx) error { ferr = f(c); return nil })
	return ferr
}

// flush runs the queued ops in one hand-off to the owner thread.
func (b *Backend) flush() { b.flushWith(nil) }

// flushWith runs the queued ops and then, if non-nil, after(c), in one
// hand-off. After an op fails, the remaining queued ops are dropped (the
// error model: ops skip their work once an error is pending).
//
// A rank of a tensor-parallel group first hands every rank's queue to its
// owner while a collective is queued (group.go), so that nothing waits for
// a peer's collective still in a queue.
func (b *Backend) flushWith(after func(c *cuda.Ctx) error) {
	if g := b.group; g != nil && g.pending.Load() {
		g.flushRanks()
	}
	b.runQueue(b.takeQueue(), after)
}

// takeQueue returns the queued ops and empties the queue.
func (b *Backend) takeQueue() []queuedOp {
	b.qMu.Lock()
	ops := b.queue
	b.queue, b.qFolds = nil, 0
	b.qMu.Unlock()
	return ops
}

// runQueue runs ops (taken from the queue) and then, if non-nil, after(c),
// in one hand-off to the owner thread.
func (b *Backend) runQueue(ops []queuedOp, after func(c *cuda.Ctx) error) {
	if len(ops) == 0 && after == nil {
		return
	}
	var opErr error
	err := b.dev.Do(func(c *cuda.Ctx) error {
		direct := func(ops []queuedOp) bool {
			for _, q := range ops {
				if err := q.f(c); err != nil {
					opErr = fmt.Errorf("backend/gpu: %s: %w", q.op, err)
					return false
				}
			}
			return true
		}
		// The uploads at the head, then the rest as a graph if it can be.
		n := 0
		for n < len(ops) && ops[n].upload {
			n++
		}
		if direct(ops[:n]) && !b.graphs.run(c, b.stream, ops[n:]) {
			direct(ops[n:])
		}
		if after != nil {
			return after(c)
		}
		return nil
	})
	clear(ops) // the closures may hold tensors: drop them before reuse
	b.qMu.Lock()
	if b.spare == nil {
		b.spare = ops[:0]
	}
	b.qMu.Unlock()
	if err != nil && after == nil {
		opErr = cmp.Or(opErr, fmt.Errorf("backend/gpu: %w", err))
	}
	if opErr != nil {
		b.fail(opErr)
		if b.group != nil { // the peers would wait for this rank's dropped ops
			b.group.fail(fmt.Errorf("rank %d: %w", b.rank, opErr))
		}
	}
}

// Embedding implements backend.Backend, gathering from the fp16 table.
func (b *Backend) Embedding(dst backend.Tensor, table backend.Weight, ids backend.Tensor) {
	const op = "Embedding"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	w, err2 := b.weightOf(op, table)
	id, err3 := b.i32(op, ids)
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	tw := backend.Named{Name: w.name, Shape: w.shape}
	if err := backend.CheckEmbedding(d.shape, tw, id.n); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckTokenIDs(id.host, tw); err != nil {
		b.fail(err)
		return
	}
	T, K := d.matrix()
	V := w.shape[0]
	b.launch(op, func(c *cuda.Ctx) error {
		return b.ops.EmbeddingF16(c, b.stream, d.ptr, w.f16, id.ptr, T, K, V)
	}, u64(d.ptr), u64(w.f16), u64(id.ptr), u64(T), u64(K), u64(V))
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
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRows(d.shape, s.shape, ix.n, d == s); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRowIndices(ix.host, s.shape); err != nil {
		b.fail(err)
		return
	}
	R, K := d.matrix()
	T, _ := s.matrix()
	b.launch(op, func(c *cuda.Ctx) error {
		return b.ops.Rows(c, b.stream, d.ptr, s.ptr, ix.ptr, R, K, T)
	}, u64(d.ptr), u64(s.ptr), u64(ix.ptr), u64(R), u64(K), u64(T))
}

// linearPath is how Linear computes a layer with fp16 weights.
type linearPath int

const (
	// pathCublas: x rounded to fp16, cuBLASLt (its algorithm chosen per
	// shape), then the bias: large batches.
	pathCublas linearPath = iota
	// pathGEMV: gemv.cu, x read as float32, a warp per output channel.
	pathGEMV
	// pathMMA: linear.cu, the batch-invariant tensor-core kernel; grouped
	// launches.
	pathMMA
)

// The default kernel by batch size (docs/perf/decode-step.md, v4;
// bench/results/2026-11-25-h100-linear): gemv.cu up to gemvDecodeRows rows
// (at T = 1 it beats linear.cu on every separate 8B shape: 15.9 vs 18.6 us
// at 4096x4096; grouped q/k/v and gate/up come out even; at T = 2 still
// ahead or even), linear.cu with grouped launches up to mmaDecodeRows (at
// T = 4 it beats gemv.cu by 1.3-1.9x and cuBLASLt by 1.05x over a layer;
// at 15 rows a whole decode step with it ran 467 tokens/s against 447 with
// cuBLASLt), the wide kernel's rows (more than 16) to cuBLASLt, 2-4x
// faster there; cuBLASLt's launches carry a graph key up to
// linearKeyedMaxRows rows (v12).
const (
	gemvDecodeRows = 2
	mmaDecodeRows  = kernels.LinearNarrowMaxRows
	// linearKeyedMaxRows bounds the decode batches whose cuBLASLt (and
	// batch-invariant wide-kernel) linears carry a graph key, their fp16
	// copy of x in keyedScratch (at most 256 · 14336 · 2 bytes, 7.3 MB, at
	// Llama-3.1-8B shapes); larger batches (prefill chunks) use Linear's
	// scratch and run directly.
	linearKeyedMaxRows = 256
	// Above cublasNarrowMinRows rows (outside the batch-invariant mode) a
	// launch that streams at least cublasNarrowMinBytes of weights goes to
	// cuBLASLt instead of linear.cu's narrow kernel, whose float32 x
	// traffic grows with the rows (v15, docs/perf/decode-step.md: at 15
	// rows cuBLASLt reads gate|up in 91.1 us against 101.8, lm_head 384.5
	// against 414.8, down 49.5 against 49.9, while o, 20.5 against 19.9,
	// and the q|k|v group, 38.5 against 30.7, stay on linear.cu).
	cublasNarrowMinRows  = 8
	cublasNarrowMinBytes = 96 << 20
	// cublasJoinedMinBytes is cublasNarrowMinBytes for a joined group
	// (join.go), one GEMM whatever its weights: at 15 rows the 8B q|k|v
	// group (48 MiB) runs in 27.1 us as one GEMM and the split against
	// 31.0 on linear.cu, 70B's (160 MiB) 72.3 against 75.7; a single
	// 4096 x 4096 weight (32 MiB), o, is even (20.3 against 19.9).
	// decode-step.md v17.
	cublasJoinedMinBytes = 48 << 20
)

// fp16Path is the one place that decides how Linear and LinearGroup
// compute an fp16 weight (or a group's weights, N their summed channels)
// for T rows of K inputs; joined says the group's weights lie one after
// another in one allocation (join.go), so that cuBLASLt computes it as
// one GEMM. In the batch-invariant mode every T takes linear.cu, so that
// a row's result does not depend on the rows beside it, except a prefill
// chunk's rows, which take the default choice for the chunk's length apart
// from the step's others (chunk.go: invariant()).
func (b *Backend) fp16Path(T, N, K int, joined bool) linearPath {
	minBytes := cublasNarrowMinBytes
	if joined {
		minBytes = cublasJoinedMinBytes
	}
	switch {
	case b.invariant():
		return pathMMA
	case b.opts.NoGEMV || K%8 != 0 || T > mmaDecodeRows:
		return pathCublas
	case T <= gemvDecodeRows && !b.opts.MMADecode:
		return pathGEMV
	case T > cublasNarrowMinRows && 2*N*K >= minBytes:
		return pathCublas
	}
	return pathMMA
}

// errInvariantQuant is Linear's refusal of a packed weight in the
// batch-invariant mode.
func errInvariantQuant(name string) error {
	return fmt.Errorf("backend/gpu: Linear: weight %s is packed low-bit (wq): the batch-invariant mode (%s, serve --batch-invariant) runs fp16 weights only, since gemvq.cu and the dequantize+cuBLASLt path round differently by batch size; use fp16 weights or turn the mode off", name, EnvBatchInvariant)
}

// Linear implements backend.Backend (doc.go, "Ops"): for fp16 weights the
// path fp16Path picks (linear.cu, gemv.cu or cuBLASLt); gemvq.cu or
// dequantize+cuBLASLt for packed ones; then DEC for a weight that has it.
func (b *Backend) Linear(dst, x backend.Tensor, w backend.Weight, bias backend.Weight) {
	const op = "Linear"
	if b.failed() {
		return
	}
	d, xt, wt, bt, err := b.linearOperands(op, dst, x, w, bias)
	if err != nil {
		b.fail(err)
		return
	}
	T, _ := xt.matrix()
	_, N := d.matrix()
	if parts := b.chunkParts(T, N); parts != nil && !wt.isQuant() {
		b.inParts(parts, func(p rowPart) { b.linear(d.rowsOf(p.start, p.n), xt.rowsOf(p.start, p.n), wt, bt) })
		return
	}
	b.linear(d, xt, wt, bt)
}

// linear is Linear over resolved operands (LinearGroup's one by one).
func (b *Backend) linear(d, xt *tensor, wt, bt *weight) {
	const op = "Linear"
	T, K := xt.matrix()
	_, N := d.matrix()
	path := b.fp16Path(T, N, K, false)
	var bp cuda.DevicePtr
	if bt != nil {
		bp = bt.f32
	}
	switch {
	case wt.isQuant() && b.opts.BatchInvariant:
		b.fail(errInvariantQuant(wt.name))
		return
	case wt.isQuant():
		b.linearQuant(d, xt, wt, bt, T, N, K)
	case path == pathMMA:
		if err := kernels.CheckLinearShape(T, K); err != nil {
			b.fail(fmt.Errorf("backend/gpu: Linear: weight %s: %w", wt.name, err))
			return
		}
		b.launchLinear(op, xt, T, K, kernels.LinearGroup{Y: d.ptr, W: wt.f16, Bias: bp, N: N})
	case path == pathGEMV:
		// Decode: a warp per output channel reads the weights once and x
		// as float32 (gemv.cu); the bias is fused. The launch's operands
		// ride in the queue (an AddRMSNorm after it may start early:
		// fuse.go's earlyNormInputs).
		b.queueOp(queuedOp{op: op, f: func(c *cuda.Ctx) error {
			if err := b.gemv.Launch(c, b.stream, d.ptr, xt.ptr, wt.f16, bp, T, N, K); err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
			return nil
		}, key: []uint64{u64(d.ptr), u64(xt.ptr), u64(wt.f16), u64(bp), u64(T), u64(N), u64(K)},
			plain: &gemvLaunch{x: xt.ptr, xBytes: 4 * xt.n, T: T, K: K, groups: []kernels.LinearGroup{{Y: d.ptr, W: wt.f16, Bias: bp, N: N}}}})
	case T <= linearKeyedMaxRows:
		b.launchGEMM(op, d, xt, wt, bt, T, N, K)
	default:
		b.launch(op, func(c *cuda.Ctx) error {
			xh, err := b.scratch(c, 2*T*K)
			if err == nil {
				err = b.gemmF16(c, d, xt, xh, wt.f16, bt, T, N, K, true)
			}
			if err != nil {
				return fmt.Errorf("weight %s: %w", wt.name, err)
			}
			return nil
		})
	}
	if wt.dec != nil && !wt.dec.beside(T) {
		b.compensate(d, xt, wt, T)
	}
}

// linearOperands resolves and checks the operands of one linear layer.
func (b *Backend) linearOperands(op string, dst, x backend.Tensor, w, bias backend.Weight) (d, xt *tensor, wt, bt *weight, err error) {
	d, err1 := b.f32(op, dst)
	xt, err2 := b.f32(op, x)
	wt, err3 := b.weightOf(op, w)
	if err := cmp.Or(err1, err2, err3); err != nil {
		return nil, nil, nil, nil, err
	}
	var bn backend.Named
	if bias != nil {
		if bt, err = b.weightOf(op, bias); err != nil {
			return nil, nil, nil, nil, err
		}
		bn = backend.Named{Name: bt.name, Shape: bt.shape}
	}
	if err := backend.CheckLinear(d.shape, xt.shape, backend.Named{Name: wt.name, Shape: wt.shape}, bn, d == xt); err != nil {
		return nil, nil, nil, nil, err
	}
	return d, xt, wt, bt, nil
}

// LinearGroup implements backend.Backend: where every weight is fp16 and
// fp16Path picks linear.cu, one launch per kernels.LinearMaxGroups weights
// over their concatenated output channels, each layer's result bitwise
// that of its own Linear (linear.cu computes a group's m-tiles as a launch
// of it alone); where it picks gemv.cu, one launch per
// kernels.GEMVMaxGroups weights with one split-K factor for their summed
// channels (each layer's result that of its own Linear where its own
// split is the same: gate and up, not k and v at Llama shapes); where it
// picks cuBLASLt (up to linearKeyedMaxRows rows) and JoinWeights placed
// the weights one after another in this order, one GEMM over them all and
// one launch that copies each weight's columns (and bias) to its output
// (join.go); at one row over packed weights JoinWeights placed one after
// another in the tiled layout (joinTiled: q|k|v), one v6.1 GEMV over them
// all and the same split; otherwise (packed weights at 2-16 rows or
// apart, DEC, weights apart, prefill chunks) one Linear per weight, each
// on its own fp16Path.
func (b *Backend) LinearGroup(dsts []backend.Tensor, x backend.Tensor, ws, biases []backend.Weight) {
	const op = "LinearGroup"
	if b.failed() {
		return
	}
	if err := backend.CheckLinearGroup(dsts, x, ws, biases); err != nil {
		b.fail(err)
		return
	}
	groups := make([]kernels.LinearGroup, len(ws))
	type operands struct {
		d  *tensor
		wt *weight
		bt *weight
	}
	each := make([]operands, len(ws))
	var xt *tensor
	grouped := true
	groupN := 0
	for i := range ws {
		d, xi, wt, bt, err := b.linearOperands(op, dsts[i], x, ws[i], backend.BiasAt(biases, i))
		if err != nil {
			b.fail(err)
			return
		}
		xt, each[i] = xi, operands{d, wt, bt}
		if wt.isQuant() || wt.dec != nil {
			grouped = false
		}
		_, N := d.matrix()
		groupN += N
		groups[i] = kernels.LinearGroup{Y: d.ptr, W: wt.f16, N: N}
		if bt != nil {
			groups[i].Bias = bt.f32
		}
	}
	T, K := xt.matrix()
	ns := make([]int, len(groups))
	for i, g := range groups {
		ns[i] = g.N
	}
	if parts := b.chunkParts(T, ns...); parts != nil && grouped {
		b.inParts(parts, func(p rowPart) {
			views := make([]backend.Tensor, len(dsts))
			for i, o := range each {
				views[i] = o.d.rowsOf(p.start, p.n)
			}
			b.LinearGroup(views, xt.rowsOf(p.start, p.n), ws, biases)
		})
		return
	}
	if t := b.tiledGroup(T, K, groups, func(i int) *weight { return each[i].wt }); t != nil && !b.opts.BatchInvariant {
		// One row over packed weights JoinWeights placed one after
		// another in the tiled layout: one v6.1 GEMV over them all, its
		// output split into the group's tensors (join.go).
		b.launchJoinedTiled(op, xt, T, K, groupN, groups, t)
		return
	}
	joined := grouped && joinedGroup(K, groups, func(i int) *weight { return each[i].wt })
	path := b.fp16Path(T, groupN, K, joined)
	if grouped && path == pathGEMV {
		// Decode: one gemv.cu launch per kernels.GEMVMaxGroups weights,
		// one split-K factor for their summed channels (v9: k and v take
		// q's split, gate and up keep theirs).
		for len(groups) > 0 {
			gs := groups[:min(len(groups), kernels.GEMVMaxGroups)]
			groups = groups[len(gs):]
			b.launchGEMVGroup(op, xt, T, K, gs)
		}
		return
	}
	if joined && path == pathCublas && T <= linearKeyedMaxRows {
		// One cuBLASLt GEMM over the weights JoinWeights placed one
		// after another, its output split into the group's tensors
		// (join.go, decode-step.md v17).
		b.launchJoined(op, xt, T, K, groupN, groups)
		return
	}
	if !grouped || path != pathMMA {
		b.decGroup(xt.ptr) // fused DEC weights over x share their selection lists
		for _, o := range each {
			if b.failed() {
				break
			}
			b.linear(o.d, xt, o.wt, o.bt)
		}
		b.decGroup(0)
		return
	}
	if err := kernels.CheckLinearShape(T, K); err != nil {
		b.fail(fmt.Errorf("backend/gpu: LinearGroup: %w", err))
		return
	}
	for len(groups) > 0 {
		gs := groups[:min(len(groups), kernels.LinearMaxGroups)]
		groups = groups[len(gs):]
		b.launchLinear(op, xt, T, K, gs...)
	}
}

// groupKey appends to key what a launch over groups depends on: each
// group's output, weight, bias and channels.
func groupKey(key []uint64, groups ...kernels.LinearGroup) []uint64 {
	for _, g := range groups {
		key = append(key, u64(g.Y), u64(g.W), u64(g.Bias), u64(g.N))
	}
	return key
}

// launchGEMVGroup queues one gemv.cu launch over groups sharing x [T, K].
func (b *Backend) launchGEMVGroup(op string, xt *tensor, T, K int, groups []kernels.LinearGroup) {
	key := groupKey([]uint64{u64(xt.ptr), u64(T), u64(K)}, groups...)
	b.queueOp(queuedOp{op: op, key: key, f: func(c *cuda.Ctx) error {
		return b.gemv.LaunchGroups(c, b.stream, xt.ptr, T, K, groups...)
	}, gemv: &gemvLaunch{x: xt.ptr, xBytes: 4 * xt.n, T: T, K: K, groups: groups}})
}

// launchLinear queues one linear.cu launch over groups sharing x [T, K].
// The narrow kernel's launch carries a graph key; so does the wide kernel's
// (more than kernels.LinearNarrowMaxRows rows) up to linearKeyedMaxRows
// rows, its fp16 copy of x in keyedScratch; above, it uses the growing
// scratch and runs directly.
func (b *Backend) launchLinear(op string, xt *tensor, T, K int, groups ...kernels.LinearGroup) {
	var key []uint64
	var xh cuda.DevicePtr
	scratch := kernels.LinearScratchBytes(T, K)
	if scratch == 0 || T <= linearKeyedMaxRows {
		if scratch > 0 {
			var err error
			if xh, err = b.keyedScratch(scratch); err != nil {
				b.fail(fmt.Errorf("backend/gpu: %s: %w", op, err))
				return
			}
			scratch = 0
		}
		key = groupKey([]uint64{u64(xt.ptr), u64(xh), u64(T), u64(K)}, groups...)
	}
	q := queuedOp{op: op, key: key, f: func(c *cuda.Ctx) error {
		buf := xh
		if scratch > 0 {
			var err error
			if buf, err = b.scratch(c, scratch); err != nil {
				return err
			}
		}
		return b.lin.LaunchGroups(c, b.stream, xt.ptr, buf, T, K, groups...)
	}}
	if T <= kernels.LinearTunedMaxRows && b.invariant() {
		// The batch-invariant mode's narrow kernel at one n-tile (up to
		// 8 rows: the launches gemv.cu takes otherwise at 1-2): a group
		// of two or three weights may take the op after it into its
		// epilogue (fuse.go's foldGLU, foldRoPE); an AddRMSNorm after any
		// may read its inputs early (earlyNormInputs), as after gemv.cu's
		// launches (decode-step.md v30). 9-16 rows, and the default
		// mode's 3-16, keep the launches they had.
		l := &gemvLaunch{x: xt.ptr, xBytes: 4 * xt.n, T: T, K: K, groups: groups}
		switch {
		case len(groups) >= 2 && !b.opts.NoLinearFold:
			q.lin = l
		case !b.opts.NoLinearEarly:
			q.plain = l
		}
	}
	b.queueOp(q)
}

// launchGEMM queues Linear's cuBLASLt path for a decode batch (at most
// linearKeyedMaxRows rows) with a graph key: x's fp16 copy goes to
// keyedScratch, whose address is known when the op is queued, and every
// other value the launches depend on is in the key (dst, x, the weight,
// the bias, the shape; cuBLASLt's algorithm is cached per shape and
// pointer alignment and its workspace is the Ctx's, fixed for its life:
// gpu/cuda's GEMM). Before v12 this path ran without a key, so every flush
// holding one (each layer's at 17 or more rows) ran op by op, outside CUDA
// graphs (docs/perf/decode-step.md, v12).
func (b *Backend) launchGEMM(op string, d, xt *tensor, wt, bt *weight, T, N, K int) {
	xh, err := b.keyedScratch(2 * T * K)
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: weight %s: %w", op, wt.name, err))
		return
	}
	sk, err := b.planSkinny(T, N, K, xh, wt.f16)
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: weight %s: %w", op, wt.name, err))
		return
	}
	var bp cuda.DevicePtr
	if bt != nil {
		bp = bt.f32
	}
	b.queueAfterHalf(xt.ptr, T*K, xh, func(xh cuda.DevicePtr, ready bool) queuedOp {
		name := op
		if ready {
			name = op + "(fp16 x)"
		}
		return queuedOp{op: name, key: []uint64{u64(d.ptr), u64(xt.ptr), u64(xh), u64(wt.f16), u64(bp), u64(T), u64(N), u64(K)},
			f: func(c *cuda.Ctx) error {
				if err := b.gemmF16Plan(c, d, xt, xh, wt.f16, bt, T, N, K, !ready, sk); err != nil {
					return fmt.Errorf("weight %s: %w", wt.name, err)
				}
				return nil
			}}
	})
}

// keyedScratch returns the fp16 buffer of the keyed large-batch linears
// (launchGEMM, linear.cu's wide kernel) with room for bytes. It is grown
// when the op is queued, not when it runs (where Linear's scratch grows),
// so that its address can go into the op's graph key: growing it runs the
// queued ops, waits for the stream and frees the old buffer, in one
// hand-off. A graph captured over the old buffer keeps the old address in
// its key, so it is never replayed over the new one unless the new one has
// that address (and, larger, holds what the graph writes there).
func (b *Backend) keyedScratch(bytes int) (cuda.DevicePtr, error) {
	p, err := b.growKeyed(&b.xkMu, &b.xk, &b.xkBytes, bytes)
	if err != nil {
		return 0, fmt.Errorf("fp16 copy of the input: %w", err)
	}
	return p, nil
}

// growKeyed returns the keyed buffer *buf (of *have bytes, guarded by mu)
// with room for bytes, growing it as keyedScratch describes.
func (b *Backend) growKeyed(mu *sync.Mutex, buf *cuda.DevicePtr, have *int, bytes int) (cuda.DevicePtr, error) {
	mu.Lock()
	defer mu.Unlock()
	if bytes <= *have {
		return *buf, nil
	}
	size := roundSize(max(bytes, 2**have, 1<<20))
	old := *buf
	*buf, *have = 0, 0
	var p cuda.DevicePtr
	err := b.Do(func(c *cuda.Ctx) error {
		if old != 0 {
			if err := b.syncStream(c); err != nil {
				return err
			}
			if err := c.Free(old); err != nil {
				return err
			}
		}
		var err error
		p, err = c.Alloc(size)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%d bytes: %w", size, err)
	}
	*buf, *have = p, size
	return p, nil
}

// gemmF16 is Linear's large-batch path: x rounded to fp16 into xh (room
// for T·K halves; unless convert is false: the op before wrote it,
// half.go), dst = xh·wᵀ with cuBLASLt (fp16 w [N, K], fp32 accumulation
// and output), plus the bias. It runs on the owner thread.
func (b *Backend) gemmF16(c *cuda.Ctx, d, xt *tensor, xh, w cuda.DevicePtr, bt *weight, T, N, K int, convert bool) error {
	return b.gemmF16Plan(c, d, xt, xh, w, bt, T, N, K, convert, skinnyPlan{})
}

// gemmF16Plan is gemmF16 with the GEMM on skinny.cu, the bias fused, where
// plan sk says so (skinny.go).
func (b *Backend) gemmF16Plan(c *cuda.Ctx, d, xt *tensor, xh, w cuda.DevicePtr, bt *weight, T, N, K int, convert bool, sk skinnyPlan) error {
	if convert {
		if err := b.ops.F32ToF16(c, b.stream, xh, xt.ptr, T*K); err != nil {
			return err
		}
	}
	if sk.ok {
		var bias cuda.DevicePtr
		if bt != nil {
			bias = bt.f32
		}
		return b.launchSkinny(c, sk, d.ptr, xh, w, bias, T, N, K)
	}
	g := cuda.GEMMShape{M: T, N: N, K: K, In: cuda.F16, Out: cuda.F32}
	if err := c.GEMM(b.stream, g, d.ptr, xh, w); err != nil {
		return err
	}
	if bt != nil {
		return b.ops.AddBias(c, b.stream, d.ptr, bt.f32, T, N)
	}
	return nil
}

// scratch returns Linear's fp16 buffer with room for bytes, growing it (to
// at least twice its old size, so a prefill of growing length reallocates
// rarely) after the stream has finished with the old one. It runs on the
// owner thread.
func (b *Backend) scratch(c *cuda.Ctx, bytes int) (cuda.DevicePtr, error) {
	if bytes <= b.xhBytes {
		return b.xh, nil
	}
	if b.xh != 0 {
		if err := b.syncStream(c); err != nil {
			return 0, err
		}
		if err := c.Free(b.xh); err != nil {
			return 0, err
		}
		b.xh, b.xhBytes = 0, 0
	}
	size := roundSize(max(bytes, 2*b.xhBytes, 1<<20))
	p, err := c.Alloc(size)
	if err != nil {
		return 0, fmt.Errorf("fp16 copy of the input: %w", err)
	}
	b.xh, b.xhBytes = p, size
	return p, nil
}

// RMSNorm implements backend.Backend. The group is the weight's length: the
// whole row, or one head (Qwen3's q/k norm).
func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	const op = "RMSNorm"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	xt, err2 := b.f32(op, x)
	wt, err3 := b.vector(op, w)
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRMSNorm(d.shape, xt.shape, backend.Named{Name: wt.name, Shape: wt.shape}); err != nil {
		b.fail(err)
		return
	}
	G := wt.shape[0]
	b.launch(op, func(c *cuda.Ctx) error {
		return b.ops.RMSNorm(c, b.stream, d.ptr, xt.ptr, wt.f32, xt.n/G, G, eps)
	}, u64(d.ptr), u64(xt.ptr), u64(wt.f32), u64(xt.n), u64(G), uint64(math.Float32bits(eps)))
}

// RoPE implements backend.Backend.
func (b *Backend) RoPE(x backend.Tensor, pos backend.Tensor, invFreq backend.Weight) {
	const op = "RoPE"
	if b.failed() {
		return
	}
	xt, err1 := b.f32(op, x)
	p, err2 := b.i32(op, pos)
	f, err3 := b.vector(op, invFreq)
	if err := cmp.Or(err1, err2, err3); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckRoPE(xt.shape, p.n, backend.Named{Name: f.name, Shape: f.shape}); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckPositions(p.host); err != nil {
		b.fail(err)
		return
	}
	T, C := xt.matrix()
	b.launch(op, func(c *cuda.Ctx) error {
		return b.ops.RoPE(c, b.stream, xt.ptr, p.ptr, f.f32, T, C, f.shape[0])
	}, u64(xt.ptr), u64(p.ptr), u64(f.f32), u64(T), u64(C), u64(f.shape[0]))
}

// AddRMSNorm implements backend.Backend: one add_rmsnorm launch (ops.cu),
// the bits of Add then RMSNorm; on Hopper, rows of
// kernels.NormClusterMinG to NormClusterMaxG run over a cluster of CTAs
// (add_rmsnorm_cluster, kernels.Ops.AddRMSNorm: its own summation order).
func (b *Backend) AddRMSNorm(h, x, delta backend.Tensor, w backend.Weight, eps float32) {
	const op = "AddRMSNorm"
	if b.failed() {
		return
	}
	ht, err1 := b.f32(op, h)
	xt, err2 := b.f32(op, x)
	dt, err3 := b.f32(op, delta)
	wt, err4 := b.vector(op, w)
	if err := cmp.Or(err1, err2, err3, err4); err != nil {
		b.fail(err)
		return
	}
	wn := backend.Named{Name: wt.name, Shape: wt.shape}
	if err := backend.CheckAddRMSNorm(ht.shape, xt.shape, dt.shape, wn, ht == xt || ht == dt); err != nil {
		b.fail(err)
		return
	}
	G := wt.shape[0]
	early := b.earlyNormInputs(ht) // fuse.go: after a gemv.cu launch that writes neither h nor w
	key := []uint64{u64(ht.ptr), u64(xt.ptr), u64(dt.ptr), u64(wt.f32), u64(ht.n), u64(G), uint64(math.Float32bits(eps)), b2u(early)}
	run := func(xh cuda.DevicePtr) func(c *cuda.Ctx) error {
		return func(c *cuda.Ctx) error {
			return b.ops.AddRMSNormHalfEarly(c, b.stream, ht.ptr, xt.ptr, xh, dt.ptr, wt.f32, ht.n/G, G, eps, early)
		}
	}
	// A cuBLASLt GEMM over x queued next takes x's fp16 copy from this
	// launch (half.go).
	q := queuedOp{op: op, key: key, f: run(0), half: &halfOut{y: xt.ptr, n: xt.n, with: func(xh cuda.DevicePtr) queuedOp {
		return queuedOp{op: op + "+fp16", key: withKey(key, u64(xh)), f: run(xh)}
	}}}
	// A q6 GEMV over x queued next takes x's DEC list from this launch
	// (normsel.go; one row over a cluster, unless Options.NoDECNormSelect).
	if groups := ht.n / G; !b.opts.NoDECNormSelect && groups == 1 && b.ops.AddRMSNormSelects(G) {
		q.sel = &selOut{y: xt.ptr, n: G, T: groups, with: func(sel cuda.DevicePtr, kChunk int) queuedOp {
			return queuedOp{op: op + "+DEC list", key: withKey(key, u64(sel), u64(kChunk)), f: func(c *cuda.Ctx) error {
				return b.ops.AddRMSNormSel(c, b.stream, ht.ptr, xt.ptr, 0, dt.ptr, wt.f32, groups, G, eps, early, sel, kChunk)
			}}
		}}
	}
	b.queueOp(q)
}

// RoPEQK implements backend.Backend: one rope_qk launch (ops.cu), the bits
// of RMSNorm of q's and k's heads (where the norms are set), RoPE(q) and
// RoPE(k).
func (b *Backend) RoPEQK(q, k backend.Tensor, pos backend.Tensor, invFreq backend.Weight, qNorm, kNorm backend.Weight, eps float32) {
	const op = "RoPEQK"
	if b.failed() {
		return
	}
	qt, err1 := b.f32(op, q)
	kt, err2 := b.f32(op, k)
	p, err3 := b.i32(op, pos)
	f, err4 := b.vector(op, invFreq)
	if err := cmp.Or(err1, err2, err3, err4); err != nil {
		b.fail(err)
		return
	}
	// The optional norms: their names for the checks, their addresses (0
	// for none) for the kernel.
	var qName, kName backend.Named
	var qp, kp cuda.DevicePtr
	for _, n := range []struct {
		w    backend.Weight
		name *backend.Named
		ptr  *cuda.DevicePtr
	}{{qNorm, &qName, &qp}, {kNorm, &kName, &kp}} {
		if n.w == nil {
			continue
		}
		cw, err := b.vector(op, n.w)
		if err != nil {
			b.fail(err)
			return
		}
		*n.name, *n.ptr = backend.Named{Name: cw.name, Shape: cw.shape}, cw.f32
	}
	fn := backend.Named{Name: f.name, Shape: f.shape}
	if err := backend.CheckRoPEQK(qt.shape, kt.shape, p.n, fn, qName, kName, qt == kt); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckPositions(p.host); err != nil {
		b.fail(err)
		return
	}
	T, Cq := qt.matrix()
	_, Ck := kt.matrix()
	half := f.shape[0]
	Hq, Hk := Cq/(2*half), Ck/(2*half)
	if qp == 0 && kp == 0 && (b.foldRoPE(qt, kt, p, f.f32, half) || b.foldRoPEJoined(qt, kt, p, f.f32, half)) {
		return
	}
	b.launch(op, func(c *cuda.Ctx) error {
		return b.ops.RoPEQK(c, b.stream, qt.ptr, kt.ptr, p.ptr, f.f32, qp, kp, T, Hq, Hk, half, eps)
	}, u64(qt.ptr), u64(kt.ptr), u64(p.ptr), u64(f.f32), u64(qp), u64(kp), u64(T), u64(Hq), u64(Hk), u64(half),
		uint64(math.Float32bits(eps)))
}

// SwiGLU implements backend.Backend. Right after a decode LinearGroup
// that computes gate and up it runs in that launch's epilogue (fuse.go),
// or in the split of a joined group's GEMM output (join.go); otherwise,
// at one row with a q6 DEC weight loaded, as an op that can also write
// down's DEC list (normsel.go's queueGLUSel).
func (b *Backend) SwiGLU(dst, gate, up backend.Tensor) {
	b.elementwise("SwiGLU", dst, gate, up, b.ops.SwiGLU, func(d, g, u *tensor) bool {
		return b.foldGLU(kernels.ActSiLU, d, g, u) || b.foldGLUJoined(kernels.ActSiLU, d, g, u) || b.queueGLUSel(kernels.ActSiLU, d, g, u)
	})
}

// GeGLU implements backend.Backend. It folds where SwiGLU does, into the
// same kernels with GeGLU's activation.
func (b *Backend) GeGLU(dst, gate, up backend.Tensor) {
	b.elementwise("GeGLU", dst, gate, up, b.ops.GeGLU, func(d, g, u *tensor) bool {
		return b.foldGLU(kernels.ActGeluTanh, d, g, u) || b.foldGLUJoined(kernels.ActGeluTanh, d, g, u) || b.queueGLUSel(kernels.ActGeluTanh, d, g, u)
	})
}

// Scale implements backend.Backend.
func (b *Backend) Scale(dst, x backend.Tensor, s float32) {
	const op = "Scale"
	if b.failed() {
		return
	}
	d, err1 := b.f32(op, dst)
	xt, err2 := b.f32(op, x)
	if err := cmp.Or(err1, err2); err != nil {
		b.fail(err)
		return
	}
	if err := backend.CheckElementwise(op, d.shape, xt.shape, xt.shape); err != nil {
		b.fail(err)
		return
	}
	b.launch(op, func(c *cuda.Ctx) error {
		return b.ops.Scale(c, b.stream, d.ptr, xt.ptr, s, d.n)
	}, u64(d.ptr), u64(xt.ptr), u64(d.n), uint64(math.Float32bits(s)))
}

// Add implements backend.Backend.
func (b *Backend) Add(dst, a, c backend.Tensor) {
	b.elementwise("Add", dst, a, c, b.ops.Add, nil)
}

// elementwise checks three same-sized F32 tensors and launches kernel over
// them, unless fold (if set) folded the op into the op queued before it;
// errors are recorded under op.
func (b *Backend) elementwise(op string, dst, x, y backend.Tensor,
	kernel func(c *cuda.Ctx, s cuda.Stream, dst, x, y cuda.DevicePtr, n int) error,
	fold func(dst, x, y *tensor) bool) {
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
	if fold != nil && fold(d, xt, yt) {
		return
	}
	b.launch(op, func(c *cuda.Ctx) error {
		return kernel(c, b.stream, d.ptr, xt.ptr, yt.ptr, d.n)
	}, u64(d.ptr), u64(xt.ptr), u64(yt.ptr), u64(d.n))
}

// u64 converts a key value (a device address or a size) for launch.
func u64[T ~int | ~uint64](v T) uint64 { return uint64(v) }

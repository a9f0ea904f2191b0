package gpu

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
)

// Memory pool and staging sizes.
const (
	// segmentOps is how many queued ops run per hand-off to the owner
	// thread: the queue is flushed whenever it holds that many, so the GPU
	// starts on a decode step's first ops (replaying their CUDA graph)
	// while the host still queues the rest, instead of idling until the
	// step's Download (docs/perf/decode-step.md, v7). Each segment is a
	// graph of its own (graph.go); the same ops queued after the same
	// flush point split at the same places, step after step.
	segmentOps = 32
	// poolGranule rounds every tensor allocation up, so that tensors of
	// nearly equal sizes share pooled buffers (and every buffer keeps
	// cuMemAlloc's 256-byte alignment, which cuBLASLt's fast paths want).
	poolGranule = 512
	// poolMaxBytes bounds the memory kept in the pool of freed tensors;
	// beyond it a freed tensor's memory goes back to the driver.
	poolMaxBytes = 2 << 30
	// stagingBytes is the device buffer through which LoadWeight converts
	// F32 and BF16 matrices to fp16, one chunk at a time, so loading needs
	// no buffer as large as the largest weight.
	stagingBytes = 32 << 20
)

// Backend is the CUDA backend. Create it with Open (or New); Close
// releases the device.
type Backend struct {
	opts Options
	dev  *cuda.Device
	ops  *kernels.Ops
	gemv *kernels.GEMV   // gemv.cu, decode batches of 1-2 rows (fp16Path); nil with NoGEMV
	lin  *kernels.Linear // linear.cu: decode batches and the batch-invariant mode (fp16Path)

	// gemvq.cu, compiled on the first packed low-bit weight.
	gemvqOnce sync.Once
	gemvq     *kernels.GEMVQ
	gemvqErr  error
	// gemmq.cu, compiled on the first packed Linear of GEMMQMinRows or
	// more rows over a tiled weight (linearFused).
	gemmqOnce sync.Once
	gemmq     *kernels.GEMMQ
	gemmqErr  error
	// sample.cu, compiled on the first ArgmaxRows (sample.go).
	sampleOnce sync.Once
	sampleK    *kernels.Sample
	sampleErr  error
	// dec.cu, compiled on the first DEC weight.
	decOnce sync.Once
	decK    *kernels.DEC
	decErr  error
	// decStream and its fork/join events run DEC beside the base GEMV
	// (kernels.DECConcurrent); made on first use, on the owner thread.
	decStream        cuda.Stream
	decFork, decJoin cuda.Event
	// decLists is the selection lists the fused DEC launches of one
	// LinearGroup share (qlinear.go); empty outside LinearGroup.
	decLists decLists
	// gemvq.cu with dec.cu, for DEC's fused mode, compiled on first use.
	fusedOnce sync.Once
	fused     *kernels.GEMVQDEC
	fusedErr  error
	// gemvq6dec.cu (DEC inside v6.1 at one row), compiled on the first
	// DEC weight in the tiled layout (q6DEC).
	q6Once sync.Once
	q6K    *kernels.GEMVQ6DEC
	q6Err  error
	stream cuda.Stream
	name   string

	mu  sync.Mutex
	err error // first op error since the last Sync

	memMu     sync.Mutex
	pool      map[int][]cuda.DevicePtr // freed tensor buffers by rounded size
	poolBytes int
	tensors   map[*tensor]struct{} // live tensors, freed at Close
	weights   map[*weight]struct{} // live weights, freed at Close
	closed    bool

	loadMu  sync.Mutex
	staging cuda.DevicePtr // stagingBytes, allocated on the first conversion

	// The op queue: ops append closures; Download, Sync, uploads and Do
	// run them in one hand-off to the owner thread (a hand-off costs about
	// 20 us; a decode step of an 8B model issues about 400 ops), and so
	// does every segmentOps-th op.
	qMu   sync.Mutex
	queue []queuedOp
	spare []queuedOp // a flushed queue's backing array, for the next
	// qFolds counts the queued ops EnqueueAttend folded away since the
	// last flush: a segment ends where the ops unfolded would end it, so
	// the fold does not move the step's graphs (ropekv.go).
	qFolds int
	graphs *graphCache // touched on the owner thread only

	// chunks and inChunk: the batch-invariant mode's prefill chunk rows
	// and whether the ops queued now are one's part (chunk.go).
	chunks  chunkRows
	inChunk bool

	ropeAppends atomic.Int64 // attention ops folded onto q|k|v's GEMM (ropekv.go)
	listsGiven  atomic.Int64 // q6 GEMVs whose list the op before wrote (normsel.go)
	// q6Loaded is set once a weight runs DEC in gemv_q6_dec (q6DEC, or a
	// joined group's): only then does SwiGLU over gate and up apart
	// offer its DEC-list variant (normsel.go's queueGLUSel), so steps
	// without DEC keep their queue as it was.
	q6Loaded atomic.Bool

	// Linear's fp16 copy of x; touched only by ops (one goroutine at a
	// time) on the owner thread.
	xh      cuda.DevicePtr
	xhBytes int
	// keyedScratch's fp16 copy of x, grown when an op is queued (xkMu).
	xkMu    sync.Mutex
	xk      cuda.DevicePtr
	xkBytes int
	// fusedScratch's buffer (the fused dequant-GEMM's fp16 x, counters
	// and partial sums), grown when an op is queued (fqMu).
	fqMu    sync.Mutex
	fq      cuda.DevicePtr
	fqBytes int
	// joinedOut: a joined LinearGroup's float32 GEMM output [T, ΣN],
	// grown like keyedScratch (join.go).
	ykMu    sync.Mutex
	yk      cuda.DevicePtr
	ykBytes int
	// skinny: skinny.cu (nil: cuBLASLt for every large batch), its split-K
	// workspace and SkinnyAuto's choices (skMu; skinny.go).
	skinny *kernels.Skinny
	skws   cuda.DevicePtr
	skMu   sync.Mutex
	skPick map[skinnyKey]bool
	// dlRing: Download's pinned chunk ring (download.go), owner thread only.
	dlRing *pinnedRing
	// moe: moe.cu's kernels, compiled at the first LoadExperts (moeMu;
	// moe.go).
	moeMu sync.Mutex
	moe   *kernels.MoE
	// moeq: the expert-indexed packed GEMVs, compiled at the first
	// LoadExperts of packed experts (moeMu; moe.go).
	moeq *kernels.GEMVQMoE
	// moeGrouped: MixExperts's grouped path's buffer (kernels.
	// MoEGroupedLayout), grown like keyedScratch (mgMu; moe.go).
	mgMu    sync.Mutex
	mg      cuda.DevicePtr
	mgBytes int
	// moeNoLDM makes the grouped GEMMs load fragments with 32-bit loads
	// instead of ldmatrix (the same bits; tests and timing only).
	moeNoLDM bool
	// moeTile fixes the grouped GEMMs' tile rows (tests; 0: by the sizes,
	// moeTileRows).
	moeTile int

	// group is the tensor-parallel group of which this backend is rank
	// (OpenGroup), nil for a backend of its own.
	group *group
	rank  int
}

var (
	_ backend.Backend       = (*Backend)(nil)
	_ backend.HeadDimPadder = (*Backend)(nil)
)

// PadHeadDim implements backend.HeadDimPadder: the attention kernels' head
// dims (kernels.PadHeadDim: 64, 128, 256), to which the model loader pads
// the heads of the others (Phi-3-mini's 96 runs at 128).
func (b *Backend) PadHeadDim(d int) (int, bool) { return kernels.PadHeadDim(d) }

// New is Open with the default Options.
func New(ordinal int) (*Backend, error) { return Open(ordinal, Options{}) }

// Open opens GPU ordinal (0 is the first) with options o (configuring
// gpu/cuda first when o.CUDA is set), checks that cuBLASLt loads and
// compiles the kernels of gpu/kernels/ops.cu (NVRTC, cached on disk). Where
// there is no driver or no such device the error wraps gpu/cuda's
// ErrNoDriver or ErrNoDevice.
func Open(ordinal int, o Options) (*Backend, error) {
	if o.DECMode != 0 && o.DECMode != kernels.DECSerial && o.DECMode != kernels.DECConcurrent && o.DECMode != kernels.DECFused {
		return nil, fmt.Errorf("backend/gpu: Options.DECMode %d: want serial, concurrent or fused", o.DECMode)
	}
	if !kernels.ValidGEMVDepth(o.GEMVDepth) {
		return nil, fmt.Errorf("backend/gpu: Options.GEMVDepth %d: want 0, 1, 4, 8 or 16", o.GEMVDepth)
	}
	if o.Skinny < SkinnyDefault || o.Skinny > SkinnyAuto {
		return nil, fmt.Errorf("backend/gpu: Options.Skinny %d: want SkinnyDefault, SkinnyOff, SkinnyOn or SkinnyAuto", o.Skinny)
	}
	if !kernels.ValidGEMVSplits(o.GEMVSplits) {
		return nil, fmt.Errorf("backend/gpu: Options.GEMVSplits %v: want 0, 1, 2 or 4 a tier", o.GEMVSplits)
	}
	if o.DECBlocks < 0 {
		return nil, fmt.Errorf("backend/gpu: Options.DECBlocks %d: want 0 (each weight's own) or a positive number", o.DECBlocks)
	}
	if o.CUDA != nil {
		if err := cuda.Configure(*o.CUDA); err != nil {
			return nil, fmt.Errorf("backend/gpu: %w", err)
		}
	}
	dev, err := cuda.Open(ordinal)
	if err != nil {
		return nil, fmt.Errorf("backend/gpu: %w", err)
	}
	if _, err := cuda.CUBLASLtVersion(); err != nil {
		dev.Close()
		return nil, fmt.Errorf("backend/gpu: %w", err)
	}
	ops, err := kernels.LoadOps(dev)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("backend/gpu: kernels for %s: %w", dev.Name(), err)
	}
	var gemv *kernels.GEMV
	if !o.NoGEMV {
		load := kernels.LoadGEMV
		if o.GEMVDepth > kernels.GEMVBatch { // a ring: compiled only when asked for
			load = kernels.LoadGEMVRings
		}
		if gemv, err = load(dev); err != nil {
			dev.Close()
			return nil, fmt.Errorf("backend/gpu: kernels for %s: %w", dev.Name(), err)
		}
		gemv.EarlyWeights = o.PDLEarlyWeights
		gemv.Depth = o.GEMVDepth
		gemv.Splits = o.GEMVSplits
		gemv.EarlyKinds = cmp.Or(o.GEMVEarly, defaultGEMVEarly)
	}
	// The device is the backend's own: its Ctx's setting covers the
	// backend's launches and those of code queued through Enqueue.
	if err := dev.Do(func(c *cuda.Ctx) error { c.SetGridDependentLaunch(!o.NoPDL); return nil }); err != nil {
		dev.Close()
		return nil, fmt.Errorf("backend/gpu: %w", err)
	}
	lin, err := kernels.LoadLinear(dev)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("backend/gpu: kernels for %s: %w", dev.Name(), err)
	}
	o.SetLinear(lin)
	var skinny *kernels.Skinny
	var skws cuda.DevicePtr
	if !o.BatchInvariant && o.skinnyMode() != SkinnyOff { // the invariant mode runs linear.cu at every T
		if skinny, skws, err = loadSkinny(dev); err != nil {
			dev.Close()
			return nil, fmt.Errorf("backend/gpu: kernels for %s: %w", dev.Name(), err)
		}
	}
	return &Backend{
		opts: o, dev: dev, ops: ops, gemv: gemv, lin: lin, skinny: skinny, skws: skws, skPick: map[skinnyKey]bool{},
		stream: dev.Stream(), graphs: newGraphCache(o.NoGraphs),
		name:    fmt.Sprintf("cuda (%s, %s)", dev.Name(), dev.Arch()),
		pool:    map[int][]cuda.DevicePtr{},
		tensors: map[*tensor]struct{}{},
		weights: map[*weight]struct{}{},
	}, nil
}

// Options returns the options the backend was opened with: code that plans
// its own kernels on Device() takes their Tuning.
func (b *Backend) Options() Options { return b.opts }

// Name implements backend.Backend: "cuda (NVIDIA H100 80GB HBM3, sm_90a)".
func (b *Backend) Name() string { return b.name }

// Device returns the GPU the backend runs on, for code (such as a GPU KV
// cache) that queues its own kernels on Device().Stream() between ops.
func (b *Backend) Device() *cuda.Device { return b.dev }

// Ptr returns the device address of t's elements (row-major, of t's DType),
// for code that reads or writes activations with its own kernels on the
// device's stream. It is valid until t is freed.
func (b *Backend) Ptr(t backend.Tensor) (cuda.DevicePtr, error) {
	ct, err := b.tensorOf("Ptr", t)
	if err != nil {
		return 0, err
	}
	return ct.ptr, nil
}

// queuedOp is an op waiting in the queue.
type queuedOp struct {
	op  string
	f   func(c *cuda.Ctx) error
	key []uint64 // launch arguments, for graph replay (nil: not replayable)
	// upload: a copy from Go memory (EnqueueUpload), which a graph cannot
	// capture; those at the head of a flush run before its graph.
	upload bool
	// gemv: a gemv.cu group launch's operands, which the op queued after
	// it may fold into (fuse.go); nil for every other op.
	gemv *gemvLaunch
	// plain: a gemv.cu launch of one weight's (Linear at decode rows), or
	// a linear.cu narrow launch that lin does not hold (unless
	// Options.NoLinearEarly),
	// whose outputs an AddRMSNorm queued after it checks before reading
	// its inputs early (fuse.go's earlyNormInputs); nil for every other
	// op. Unlike gemv it keeps no op past a segment's end (foldable): a
	// queue that kept the step's o and down launches reached the end of a
	// step with one or two flushes and ran one of them directly, not as a
	// graph (decode-step.md v21b).
	plain *gemvLaunch
	// lin: a linear.cu narrow group launch's operands (LinearGroup of 2-3
	// weights at kernels.LinearNarrowMaxRows rows or fewer), which SwiGLU
	// or RoPEQK queued after it may fold into (fuse.go: linear.cu's pair
	// kernels); nil for every other op, and with Options.NoLinearFold.
	lin *gemvLaunch
	// joined: a joined LinearGroup's one GEMM (join.go), which SwiGLU
	// queued after it may fold into; nil for every other op.
	joined *joinedLaunch
	// half: the float32 tensor the op writes, where a variant of it can
	// write that tensor's fp16 copy for the cuBLASLt GEMM queued after it
	// (half.go); nil for every other op.
	half *halfOut
	// rope: a joined q|k|v GEMM with RoPE in its split, onto which a KV
	// cache's attention op queued after it may fold (ropekv.go); nil for
	// every other op, and with Options.NoRoPEAppend.
	rope *ropeJoined
	// sel: the float32 tensor the op writes, where a variant of it can
	// write that tensor's DEC list for the q6 GEMV queued after it
	// (normsel.go); nil for every other op, and with
	// Options.NoDECNormSelect.
	sel *selOut
}

// foldable reports whether the op after q may fold into it (fuse.go,
// join.go, half.go, ropekv.go): the queue then keeps q past a segment's
// end.
func (q *queuedOp) foldable() bool {
	return q.gemv != nil || q.lin != nil || q.joined != nil || q.half != nil || q.rope != nil || q.sel != nil
}

// tensor is the CUDA backend's backend.Tensor.
type tensor struct {
	owner *Backend
	shape []int
	dtype backend.DType
	n     int            // elements
	ptr   cuda.DevicePtr // device memory of size bytes (rounded)
	size  int
	host  []int32 // I32: the values last uploaded, nil before UploadInt32
	freed bool
}

func (t *tensor) Shape() []int         { return slices.Clone(t.shape) }
func (t *tensor) DType() backend.DType { return t.dtype }
func (t *tensor) String() string       { return fmt.Sprintf("%v%v", t.dtype, t.shape) }

// matrix returns the matrix view (rows, cols) of t.
func (t *tensor) matrix() (rows, cols int) { return backend.Matrix(t.shape) }

// weight is the CUDA backend's backend.Weight: a matrix in fp16 (f16), any
// other shape in float32 (f32).
type weight struct {
	owner *Backend
	name  string
	shape []int
	f16   cuda.DevicePtr // [N, K] fp16 for two-dimensional weights
	f32   cuda.DevicePtr // float32 for all others
	// Packed low-bit weights (LoadQuantWeight): wq's words and (scale,
	// zero) pairs, codes of qbits bits in groups of qgroup channels.
	q, qp         cuda.DevicePtr
	qbits, qgroup int
	// qt and qtp are the weight in the tiled layout (kernels.PackTiles)
	// where it is its only device copy (q and qp 0; tiledLayout), 0 else.
	qt, qtp cuda.DevicePtr
	// dec is the weight's DEC residual and scratch (LoadQuantWeight with
	// a wq.DEC), nil without; Linear then compensates after the base.
	dec *decWeight
	// block is the allocation f16 (or qt and qtp) lies in when
	// JoinWeights placed the weight after others (join.go), nil when they
	// are its own allocations.
	block *weightBlock
	freed bool
}

func (w *weight) Name() string { return w.name }
func (w *weight) Shape() []int { return slices.Clone(w.shape) }

// roundSize rounds a byte count up to the pool granule.
func roundSize(bytes int) int { return (bytes + poolGranule - 1) / poolGranule * poolGranule }

// Alloc implements backend.Backend. Memory comes from the pool of freed
// tensors when a buffer of the same rounded size is there.
func (b *Backend) Alloc(dtype backend.DType, shape ...int) (backend.Tensor, error) {
	n := backend.NumElements(shape)
	if n < 0 {
		return nil, fmt.Errorf("backend/gpu: alloc %v%v: invalid shape", dtype, shape)
	}
	if dtype.Size() == 0 {
		return nil, fmt.Errorf("backend/gpu: alloc %v%v: unsupported dtype", dtype, shape)
	}
	if n > math.MaxInt/dtype.Size() {
		return nil, fmt.Errorf("backend/gpu: alloc %v%v: too large", dtype, shape)
	}
	size := roundSize(n * dtype.Size())
	ptr, err := b.allocMem(size)
	if err != nil {
		return nil, fmt.Errorf("backend/gpu: alloc %v%v: %w", dtype, shape, err)
	}
	t := &tensor{owner: b, shape: slices.Clone(shape), dtype: dtype, n: n, ptr: ptr, size: size}
	b.memMu.Lock()
	b.tensors[t] = struct{}{}
	b.memMu.Unlock()
	return t, nil
}

// allocMem returns size bytes of device memory, from the pool if it has a
// buffer of that size (the lowest address, pool.go). When the device is
// out of memory, the pool is emptied and the allocation tried once more.
func (b *Backend) allocMem(size int) (cuda.DevicePtr, error) {
	b.memMu.Lock()
	if b.closed {
		b.memMu.Unlock()
		return 0, cuda.ErrClosed
	}
	if list := b.pool[size]; len(list) > 0 {
		p, rest := poolTake(list) // the lowest address: stable graph keys (pool.go)
		b.pool[size] = rest
		b.poolBytes -= size
		b.memMu.Unlock()
		return p, nil
	}
	b.memMu.Unlock()
	var p cuda.DevicePtr
	err := b.dev.Do(func(c *cuda.Ctx) error {
		var err error
		if p, err = c.Alloc(size); err == nil {
			return nil
		}
		if b.drainPool(c) == 0 {
			return err
		}
		p, err = c.Alloc(size)
		return err
	})
	return p, err
}

// drainPool frees every pooled buffer (after the stream has finished with
// them) and returns how many bytes it released. It runs on the owner thread.
func (b *Backend) drainPool(c *cuda.Ctx) int {
	b.memMu.Lock()
	pool := b.pool
	released := b.poolBytes
	b.pool, b.poolBytes = map[int][]cuda.DevicePtr{}, 0
	b.memMu.Unlock()
	if released == 0 {
		return 0
	}
	_ = b.syncStream(c)
	for _, list := range pool {
		for _, p := range list {
			_ = c.Free(p)
		}
	}
	return released
}

// Free implements backend.Backend. The memory goes to the pool (up to
// poolMaxBytes), to be reused by a later Alloc of the same rounded size.
func (b *Backend) Free(t backend.Tensor) {
	ct, ok := t.(*tensor)
	if !ok || ct == nil || ct.owner != b {
		return
	}
	b.memMu.Lock()
	if ct.freed || b.closed {
		b.memMu.Unlock()
		return
	}
	ct.freed = true
	delete(b.tensors, ct)
	ptr, size := ct.ptr, ct.size
	ct.host = nil
	if b.poolBytes+size <= poolMaxBytes {
		b.pool[size] = append(b.pool[size], ptr)
		b.poolBytes += size
		b.memMu.Unlock()
		return
	}
	b.memMu.Unlock()
	// Queued ops may still use the buffer: wait for the stream, then free.
	_ = b.Do(func(c *cuda.Ctx) error {
		if err := b.syncStream(c); err != nil {
			return err
		}
		return c.Free(ptr)
	})
}

// tensorOf returns the CUDA tensor behind t, checking owner and liveness.
func (b *Backend) tensorOf(op string, t backend.Tensor) (*tensor, error) {
	ct, ok := t.(*tensor)
	switch {
	case t == nil || (ok && ct == nil):
		return nil, fmt.Errorf("backend/gpu: %s: nil tensor", op)
	case !ok || ct.owner != b:
		return nil, fmt.Errorf("backend/gpu: %s: tensor %T is not from this backend", op, t)
	}
	b.memMu.Lock()
	freed := ct.freed
	b.memMu.Unlock()
	if freed {
		return nil, fmt.Errorf("backend/gpu: %s: tensor %v used after Free", op, ct.shape)
	}
	return ct, nil
}

// weightOf returns the CUDA weight behind w, checking its owner.
func (b *Backend) weightOf(op string, w backend.Weight) (*weight, error) {
	cw, ok := w.(*weight)
	switch {
	case w == nil || (ok && cw == nil):
		return nil, fmt.Errorf("backend/gpu: %s: nil weight", op)
	case !ok || cw.owner != b:
		return nil, fmt.Errorf("backend/gpu: %s: weight %T is not from this backend", op, w)
	}
	b.memMu.Lock()
	freed := cw.freed
	b.memMu.Unlock()
	if freed {
		return nil, fmt.Errorf("backend/gpu: %s: weight %s used after FreeWeight", op, cw.name)
	}
	return cw, nil
}

// copyIn copies host bytes into device memory through the stream and waits.
func (b *Backend) copyIn(dst cuda.DevicePtr, src []byte) error {
	return b.Do(func(c *cuda.Ctx) error {
		if err := c.HtoDAsync(dst, src, b.stream); err != nil {
			return err
		}
		return b.syncStream(c)
	})
}

// Upload implements backend.Backend. F16 and BF16 values are rounded on the
// host.
func (b *Backend) Upload(dst backend.Tensor, src []float32) error {
	t, err := b.tensorOf("Upload", dst)
	if err != nil {
		return err
	}
	if len(src) != t.n {
		return fmt.Errorf("backend/gpu: Upload: %d values into tensor %v of %d elements", len(src), t, t.n)
	}
	var data []byte
	switch t.dtype {
	case backend.F32:
		data = cuda.Bytes(src)
	case backend.F16, backend.BF16:
		h := make([]uint16, len(src))
		conv := half.FromFloat32
		if t.dtype == backend.BF16 {
			conv = half.BF16FromFloat32
		}
		for i, v := range src {
			h[i] = conv(v)
		}
		data = cuda.Bytes(h)
	default:
		return fmt.Errorf("backend/gpu: Upload: float32 values into tensor %v", t)
	}
	if err := b.copyIn(t.ptr, data); err != nil {
		return fmt.Errorf("backend/gpu: Upload into %v: %w", t, err)
	}
	return nil
}

// UploadInt32 implements backend.Backend. The values are also kept on the
// host, where Embedding and Rows check them. The copy is queued, in order
// with the ops (EnqueueUpload): a decode step's ids and positions cost no
// hand-off to the owner thread of their own, and a device error of the
// copy becomes the pending op error.
func (b *Backend) UploadInt32(dst backend.Tensor, src []int32) error {
	t, err := b.tensorOf("UploadInt32", dst)
	if err != nil {
		return err
	}
	if t.dtype != backend.I32 {
		return fmt.Errorf("backend/gpu: UploadInt32: into tensor %v", t)
	}
	if len(src) != t.n {
		return fmt.Errorf("backend/gpu: UploadInt32: %d values into tensor %v", len(src), t)
	}
	// A new slice each time: the queued copy reads it after this returns,
	// perhaps after a later UploadInt32 into the same tensor.
	t.host = slices.Clone(src)
	b.EnqueueUpload("UploadInt32", t.ptr, cuda.Bytes(t.host))
	return nil
}

// Download implements backend.Backend. It waits for the ops queued so far;
// a device error from them is recorded as the pending op error.
func (b *Backend) Download(dst []float32, src backend.Tensor) error {
	t, err := b.downloadSource("Download", src)
	if err != nil {
		return err
	}
	if len(dst) != t.n {
		return fmt.Errorf("backend/gpu: Download: tensor %v of %d elements into %d values", t, t.n, len(dst))
	}
	var h []uint16
	var raw []byte
	switch t.dtype {
	case backend.F32:
		raw = cuda.Bytes(dst)
	case backend.F16, backend.BF16:
		h = make([]uint16, t.n)
		raw = cuda.Bytes(h)
	default:
		return fmt.Errorf("backend/gpu: Download: tensor %v as float32", t)
	}
	if err := b.copyOut("Download", t, raw, h == nil); err != nil {
		return err
	}
	switch t.dtype {
	case backend.F16:
		for i, v := range h {
			dst[i] = half.ToFloat32(v)
		}
	case backend.BF16:
		for i, v := range h {
			dst[i] = half.BF16ToFloat32(v)
		}
	}
	return nil
}

// downloadSource waits for the ops queued so far and returns src's tensor
// for a download named op; a device error from those ops is recorded as
// the pending op error.
func (b *Backend) downloadSource(op string, src backend.Tensor) (*tensor, error) {
	b.flush()
	if err := b.Err(); err != nil {
		return nil, err
	}
	return b.tensorOf(op, src)
}

// copyOut copies t's bytes into raw, through the ring of pinned chunks
// (download.go) where pinned allows it and raw is large enough, and records
// a device error as the pending op error.
func (b *Backend) copyOut(op string, t *tensor, raw []byte, pinned bool) error {
	err := b.Do(func(c *cuda.Ctx) error {
		if chunk := b.downloadChunk(len(raw)); chunk > 0 && pinned {
			return b.downloadPinned(c, raw, t.ptr, chunk)
		}
		if err := c.DtoHAsync(raw, t.ptr, b.stream); err != nil {
			return err
		}
		return b.syncStream(c)
	})
	if err != nil {
		err = fmt.Errorf("backend/gpu: %s of %v: %w", op, t, err)
		b.fail(err)
	}
	return err
}

// fp16Overflow returns the index of the first finite value of F32 or BF16
// data that rounds to infinity in fp16 (|v| >= 65520), or -1.
func fp16Overflow(dtype backend.DType, data []byte) int {
	switch dtype {
	case backend.F32:
		const limit, inf = 0x477ff000, 0x7f800000 // float32 bits of 65520 and +Inf
		for i := 0; i < len(data)/4; i++ {
			if a := binary.LittleEndian.Uint32(data[4*i:]) &^ (1 << 31); a >= limit && a < inf {
				return i
			}
		}
	case backend.BF16:
		const limit, inf = 0x4780, 0x7f80 // bf16 bits of 65536 (the next above 65280) and +Inf
		for i := 0; i < len(data)/2; i++ {
			if a := binary.LittleEndian.Uint16(data[2*i:]) &^ (1 << 15); a >= limit && a < inf {
				return i
			}
		}
	}
	return -1
}

// decodeF32 widens F32, F16 or BF16 little-endian data to float32.
func decodeF32(dtype backend.DType, data []byte, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch dtype {
		case backend.F32:
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		case backend.F16:
			v[i] = half.ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
		case backend.BF16:
			v[i] = half.BF16ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	}
	return v
}

// LoadWeight implements backend.Backend. A matrix (two dimensions) is
// converted to fp16 on the device, in chunks through a staging buffer; a
// finite value beyond fp16's range is an error naming the weight. Any
// other shape is widened to float32 on the host and uploaded.
func (b *Backend) LoadWeight(name string, dtype backend.DType, shape []int, data []byte) (backend.Weight, error) {
	n := backend.NumElements(shape)
	if n < 0 {
		return nil, fmt.Errorf("backend/gpu: weight %s: invalid shape %v", name, shape)
	}
	sz := dtype.Size()
	if dtype == backend.I32 || sz == 0 {
		return nil, fmt.Errorf("backend/gpu: weight %s: unsupported dtype %v (want F32, F16 or BF16)", name, dtype)
	}
	if n > math.MaxInt/4 || len(data) != n*sz {
		return nil, fmt.Errorf("backend/gpu: weight %s: %d bytes of data for %v%v (want %d)", name, len(data), dtype, shape, n*sz)
	}
	w := &weight{owner: b, name: name, shape: slices.Clone(shape)}
	if len(shape) != 2 {
		v := decodeF32(dtype, data, n)
		err := b.dev.Do(func(c *cuda.Ctx) error {
			var err error
			if w.f32, err = c.Alloc(4 * n); err != nil {
				return err
			}
			if err := c.HtoDAsync(w.f32, cuda.Bytes(v), b.stream); err != nil {
				return err
			}
			return b.syncStream(c)
		})
		if err != nil {
			b.freeWeightMem(w)
			return nil, fmt.Errorf("backend/gpu: weight %s %v: %w", name, shape, err)
		}
		return b.register(w)
	}
	if i := fp16Overflow(dtype, data); i >= 0 {
		v := decodeF32(dtype, data[i*sz:(i+1)*sz], 1)[0]
		return nil, fmt.Errorf("backend/gpu: weight %s %v: element %d (row %d) = %g is beyond fp16's range (±65504), in which the cuda backend stores matrices; use --device cpu", name, shape, i, i/shape[1], v)
	}
	b.loadMu.Lock()
	defer b.loadMu.Unlock()
	err := b.dev.Do(func(c *cuda.Ctx) error {
		var err error
		if w.f16, err = c.Alloc(2 * n); err != nil {
			return err
		}
		if dtype == backend.F16 {
			if err := c.HtoDAsync(w.f16, data, b.stream); err != nil {
				return err
			}
			return b.syncStream(c)
		}
		if b.staging == 0 {
			if b.staging, err = c.Alloc(stagingBytes); err != nil {
				return fmt.Errorf("staging buffer: %w", err)
			}
		}
		// Chunks of whole elements; the stream orders each chunk's copy
		// after the previous chunk's conversion.
		chunk := stagingBytes / sz
		for i0 := 0; i0 < n; i0 += chunk {
			m := min(chunk, n-i0)
			if err := c.HtoDAsync(b.staging, data[i0*sz:(i0+m)*sz], b.stream); err != nil {
				return err
			}
			dst := w.f16 + cuda.DevicePtr(2*i0)
			if dtype == backend.F32 {
				err = b.ops.F32ToF16(c, b.stream, dst, b.staging, m)
			} else {
				err = b.ops.BF16ToF16(c, b.stream, dst, b.staging, m)
			}
			if err != nil {
				return err
			}
		}
		return b.syncStream(c)
	})
	if err != nil {
		b.freeWeightMem(w)
		return nil, fmt.Errorf("backend/gpu: weight %s %v%v: %w", name, dtype, shape, err)
	}
	return b.register(w)
}

// register records a loaded weight for Close.
func (b *Backend) register(w *weight) (backend.Weight, error) {
	b.memMu.Lock()
	defer b.memMu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("backend/gpu: weight %s: %w", w.name, cuda.ErrClosed)
	}
	b.weights[w] = struct{}{}
	return w, nil
}

// takeWeightMem returns w's device memory (and its DEC residual's mapped
// host memory) and forgets it, for freeing.
func takeWeightMem(w *weight) (ptrs []cuda.DevicePtr, host *cuda.HostBuffer) {
	ptrs = append(w.block.release(w.f16, w.qt, w.qtp), w.f32, w.q, w.qp)
	w.block = nil
	if w.dec != nil {
		ptrs, host = append(ptrs, w.dec.sel, w.dec.part, w.dec.flags), w.dec.host
	}
	w.f16, w.f32, w.q, w.qp, w.qt, w.qtp, w.dec = 0, 0, 0, 0, 0, 0, nil
	return ptrs, host
}

// freeWeightMem frees w's memory after the stream is done with it. The
// queued ops are launched first: some read w's pointers only when they run
// (Linear's cuBLASLt path), and takeWeightMem clears them.
func (b *Backend) freeWeightMem(w *weight) {
	b.flush()
	ptrs, host := takeWeightMem(w)
	if host == nil && !slices.ContainsFunc(ptrs, func(p cuda.DevicePtr) bool { return p != 0 }) {
		return
	}
	_ = b.Do(func(c *cuda.Ctx) error { // runs queued ops that may read w first
		_ = b.syncStream(c)
		errs := []error{c.FreeHost(host)}
		for _, p := range ptrs {
			errs = append(errs, c.Free(p))
		}
		return errors.Join(errs...)
	})
}

// FreeWeight implements backend.Backend. It waits for queued ops, which may
// read the weight, before freeing its memory.
func (b *Backend) FreeWeight(w backend.Weight) {
	cw, ok := w.(*weight)
	if !ok || cw == nil || cw.owner != b {
		return
	}
	b.memMu.Lock()
	if cw.freed || b.closed {
		b.memMu.Unlock()
		return
	}
	cw.freed = true
	delete(b.weights, cw)
	b.memMu.Unlock()
	b.freeWeightMem(cw)
}

// fail records err as the pending op error unless one is pending already.
func (b *Backend) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// failed reports whether an op error is pending (ops then do nothing).
func (b *Backend) failed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err != nil
}

// Err implements backend.Backend. It does not wait for queued kernels, so
// an error they raise appears only at Download or Sync.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Sync implements backend.Backend: it waits for the stream, then returns and
// clears the first op error (a device error of the queued work included).
func (b *Backend) Sync() error {
	if err := b.Do(func(c *cuda.Ctx) error { return b.syncStream(c) }); err != nil {
		b.fail(fmt.Errorf("backend/gpu: Sync: %w", err))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.err
	b.err = nil
	return err
}

// syncStream waits on the owner thread until the backend's stream has
// finished: cuStreamSynchronize, or for a rank of a tensor-parallel group a
// bounded poll that fails the group instead of waiting forever for a peer
// (group.wait).
func (b *Backend) syncStream(c *cuda.Ctx) error {
	if b.group != nil {
		return b.group.wait(c, b.rank, b.stream)
	}
	return c.SyncStream(b.stream)
}

// Close implements backend.Backend: it waits for queued work, frees every
// tensor, weight and buffer, and closes the device. Calling it again
// returns nil.
func (b *Backend) Close() error {
	b.flush()
	b.memMu.Lock()
	if b.closed {
		b.memMu.Unlock()
		return nil
	}
	b.closed = true
	var ptrs []cuda.DevicePtr
	var hosts []*cuda.HostBuffer
	for _, list := range b.pool {
		ptrs = append(ptrs, list...)
	}
	for t := range b.tensors {
		t.freed = true
		ptrs = append(ptrs, t.ptr)
	}
	for w := range b.weights {
		w.freed = true
		wp, host := takeWeightMem(w)
		ptrs, hosts = append(ptrs, wp...), append(hosts, host)
	}
	b.pool, b.poolBytes, b.tensors, b.weights = nil, 0, nil, nil
	b.memMu.Unlock()
	b.loadMu.Lock()
	ptrs = append(ptrs, b.staging)
	b.staging = 0
	b.loadMu.Unlock()
	ptrs = append(ptrs, b.xh)
	b.xh, b.xhBytes = 0, 0
	b.xkMu.Lock()
	ptrs = append(ptrs, b.xk)
	b.xk, b.xkBytes = 0, 0
	b.xkMu.Unlock()
	b.fqMu.Lock()
	ptrs = append(ptrs, b.fq)
	b.fq, b.fqBytes = 0, 0
	b.fqMu.Unlock()
	b.ykMu.Lock()
	ptrs = append(ptrs, b.yk)
	b.yk, b.ykBytes = 0, 0
	b.ykMu.Unlock()
	b.mgMu.Lock()
	ptrs = append(ptrs, b.mg)
	b.mg, b.mgBytes = 0, 0
	b.mgMu.Unlock()
	b.skMu.Lock()
	if b.skws != 0 {
		ptrs = append(ptrs, b.skws)
	}
	b.skws = 0
	b.skMu.Unlock()

	err := b.dev.Do(func(c *cuda.Ctx) error {
		errs := []error{b.syncStream(c), b.freeRing(c)}
		b.graphs.reset(c)
		for _, p := range ptrs {
			errs = append(errs, c.Free(p))
		}
		for _, h := range hosts {
			errs = append(errs, c.FreeHost(h))
		}
		return errors.Join(errs...)
	})
	if e := b.dev.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("backend/gpu: Close: %w", err)
	}
	return nil
}

// LoadRandom implements backend.RandomLoader: a matrix of pseudo-random fp16
// values of standard deviation std, filled on the device (no host data, so
// an 8B-parameter benchmark model appears in a second).
func (b *Backend) LoadRandom(name string, shape []int, std float32, seed uint64) (backend.Weight, error) {
	n := backend.NumElements(shape)
	if len(shape) != 2 || n <= 0 {
		return nil, fmt.Errorf("backend/gpu: random weight %s: shape %v is not a matrix", name, shape)
	}
	w := &weight{owner: b, name: name, shape: slices.Clone(shape)}
	err := b.dev.Do(func(c *cuda.Ctx) error {
		var err error
		if w.f16, err = c.Alloc(2 * n); err != nil {
			return err
		}
		return b.ops.FillNormalF16(c, b.stream, w.f16, n, uint32(seed^seed>>32), std)
	})
	if err != nil {
		b.freeWeightMem(w)
		return nil, fmt.Errorf("backend/gpu: random weight %s %v: %w", name, shape, err)
	}
	return b.register(w)
}

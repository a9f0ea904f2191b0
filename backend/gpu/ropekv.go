// ropekv.go: a KV cache's attention op folded onto the joined q|k|v GEMM
// queued right before it. At cuBLASLt's batch sizes q|k|v is one GEMM
// whose split applies RoPE (join.go's foldRoPEJoined: rope_cols writes
// float32 q, k and v), and the cache's attention op then starts with an
// append that reads them back (kv_append, or kv_append_rot_warp for a
// rotated format: k and v into the fp16 residual, q's fp16 copy). Where the
// cache queues its op through EnqueueAttend and that op's q, k and v are
// the outputs of the RoPE split queued last, the two become one op: the
// GEMM, then the cache's launches given where q, k and v are before RoPE
// (kernels.RoPEQKV), which its first launch reads once and writes what
// attention reads (kernels.KVWriter.AppendRoPE), the float32 q, k and v
// never written (model.Attention lets Attend overwrite them; the forward
// pass does not read them after). One launch a layer fewer and q, k, v's
// round trip through memory (docs/perf/decode-step.md v24); the same bits.
// Options.NoRoPEAppend turns it off. The queue counts these folds toward
// its segments (Backend.qFolds), so the step's flushes end where they
// ended without the fold: 32 ops fewer a step left the max-batch step's
// tail (final norm, rows, lm_head) as a short flush run directly instead
// of in the last graph (v24's first call).

package gpu

import (
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// ropeJoined is a queued joined q|k|v GEMM with RoPE folded into its
// split (foldRoPEJoined): its operands, for the attention op after it.
type ropeJoined struct {
	l            *joinedLaunch
	q, k, v      kernels.ColsOut
	pos, invFreq cuda.DevicePtr
	half         int
	key          []uint64 // the op's graph key
}

// AttendOp is a KV cache's attention op for EnqueueAttend: its launches
// read q [T, Hq·D], k and v [T, Hkv·D] (float32, at Q, K and V) first and
// end by writing the float32 tensor of N elements at Out.
type AttendOp struct {
	// Op names the op (errors, graph keys).
	Op string
	// Q, K and V are the float32 tensors the op reads; T, Hq, Hkv and D
	// their shape.
	Q, K, V       cuda.DevicePtr
	T, Hq, Hkv, D int
	// Fold says the op may take q, k and v before RoPE instead
	// (Run's src): its launches read them once, in a launch that can start
	// from the joined GEMM's output (one write round, a head dim
	// kernels.AppendRoPEFits takes).
	Fold bool
	// Run queues the op's launches. xh, where not 0, is where to write
	// Out's fp16 copy too (WithHalf ops only; as EnqueueOutWith's f). src,
	// where not nil, holds q, k and v before their biases and RoPE (the
	// joined GEMM's output, which Run's first launch must turn into what
	// the op reads with RoPECols's bits); Q, K and V are then not written.
	Run func(c *cuda.Ctx, xh cuda.DevicePtr, src *kernels.RoPEQKV) error
	// Out and N are the tensor the op writes last. OutHalf, where not 0,
	// holds its fp16 values, of which Out is the exact widening (as
	// EnqueueOut's); else WithHalf says Run can write Out's fp16 copy at
	// xh (as EnqueueOutWith's).
	Out      cuda.DevicePtr
	N        int
	OutHalf  cuda.DevicePtr
	WithHalf bool
	// Key lists every value Run's launches depend on but src (graph
	// replay; nil: the op is not replayable).
	Key []uint64
	// RunSel, where not nil, is Run (without Out's fp16 copy) that also
	// writes DEC's list of each row of Out (N/T channels a row;
	// wq.SelectApprox at k_chunk kChunk) to sel: a q6 GEMV over Out queued
	// next (o) then skips its selection launch (unless Options.NoDECNormSelect,
	// normsel.go; session 19b).
	RunSel func(c *cuda.Ctx, src *kernels.RoPEQKV, sel cuda.DevicePtr, kChunk int) error
}

// EnqueueAttend queues a KV cache's attention op: EnqueueOut's where
// a.OutHalf is set, else EnqueueOutWith's where a.WithHalf is, else
// Enqueue's. Where a.Fold is set, Options.NoRoPEAppend is not, and the op
// queued last is the joined GEMM whose RoPE split writes a.Q, a.K and
// a.V (foldRoPEJoined, without norms, v the GEMM's third output), the two
// become one op: that GEMM, then a.Run given the GEMM's output (ropekv.go).
func (b *Backend) EnqueueAttend(a AttendOp) {
	if a.Fold && b.foldLast(func(last *queuedOp) (queuedOp, bool) {
		r := last.rope
		if r == nil || !ropeFits(r, a) {
			return queuedOp{}, false
		}
		l := r.l
		src := &kernels.RoPEQKV{Y: l.y, BQ: r.q.Bias, BK: r.k.Bias, BV: r.v.Bias, Pos: r.pos, InvFreq: r.invFreq}
		b.ropeAppends.Add(1)
		b.qFolds++ // under the queue's lock (foldLast)
		return attendOp(a, "LinearGroup(joined)+RoPEQK+"+a.Op, r.key, func(c *cuda.Ctx) error { return l.gemm(b, c) }, src, !b.opts.NoDECNormSelect), true
	}) {
		return
	}
	b.queueOp(attendOp(a, a.Op, nil, nil, nil, !b.opts.NoDECNormSelect))
}

// ropeFits reports whether the attention op a reads exactly the outputs
// of the RoPE split r, in the layout kv_append_rope reads.
func ropeFits(r *ropeJoined, a AttendOp) bool {
	D := a.D
	return kernels.AppendRoPEFits(D) && 2*r.half == D && r.l.T == a.T &&
		r.q.Y == a.Q && r.k.Y == a.K && r.v.Y == a.V &&
		r.q.N == a.Hq*D && r.k.N == a.Hkv*D && r.v.N == a.Hkv*D && r.l.N == (a.Hq+2*a.Hkv)*D
}

// attendOp returns a as a queued op named op, whose launches are pre's
// (when not nil) then a.Run's with src; its key is prefix then a.Key.
// With sel (no Options.NoDECNormSelect) and a.RunSel, its variant writing Out's
// DEC list runs a.RunSel instead (normsel.go).
func attendOp(a AttendOp, op string, prefix []uint64, pre func(c *cuda.Ctx) error, src *kernels.RoPEQKV, sel bool) queuedOp {
	var key []uint64
	if a.Key != nil {
		key = withKey(prefix, a.Key...)
	}
	run := func(xh cuda.DevicePtr) func(c *cuda.Ctx) error {
		return func(c *cuda.Ctx) error {
			if pre != nil {
				if err := pre(c); err != nil {
					return err
				}
			}
			return a.Run(c, xh, src)
		}
	}
	q := queuedOp{op: op, f: run(0), key: key}
	switch {
	case a.N <= 0:
	case a.OutHalf != 0:
		q.half = &halfOut{y: a.Out, n: a.N, src: a.OutHalf}
	case a.WithHalf:
		q.half = &halfOut{y: a.Out, n: a.N, with: func(xh cuda.DevicePtr) queuedOp {
			var k []uint64
			if key != nil {
				k = withKey(key, u64(xh))
			}
			return queuedOp{op: op + "+fp16", f: run(xh), key: k}
		}}
	}
	if sel && a.RunSel != nil && a.T > 0 && a.N > 0 && a.N%a.T == 0 {
		q.sel = &selOut{y: a.Out, n: a.N / a.T, T: a.T, with: func(list cuda.DevicePtr, kChunk int) queuedOp {
			var k []uint64
			if key != nil {
				k = withKey(key, u64(list), u64(kChunk))
			}
			return queuedOp{op: op + "+DEC list", key: k, f: func(c *cuda.Ctx) error {
				if pre != nil {
					if err := pre(c); err != nil {
						return err
					}
				}
				return a.RunSel(c, src, list, kChunk)
			}}
		}}
	}
	return q
}

// RoPEAppends returns how many attention ops EnqueueAttend has folded onto
// the joined q|k|v GEMM before them (tests and benchmarks check that the
// fold happens).
func (b *Backend) RoPEAppends() int64 { return b.ropeAppends.Load() }

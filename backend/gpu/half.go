// half.go: a cuBLASLt GEMM's fp16 input written by the op that computes
// it. On the cuBLASLt path (decode batches of more than 16 rows, and the
// large 9-16-row launches: fp16Path) a GEMM reads x in fp16, so Linear
// and a joined LinearGroup launched f32_to_f16 over x before it: four
// launches a layer at Llama shapes, each a full round trip of x between
// two kernels that cannot overlap it (cuBLASLt's kernels wait for the
// whole kernel ahead). Where the op queued right before such a GEMM
// wrote x itself and has a variant that also writes x's fp16 copy
// (AddRMSNorm, before q|k|v and gate|up; the SwiGLU folded into gate|up's
// split, before down), that op is replaced by the variant, writing the
// copy into the GEMM's keyed fp16 buffer, and the GEMM skips its
// conversion. The copy is f32_to_f16's (round to nearest even), so every
// tensor keeps its bits (docs/perf/decode-step.md v19).

package gpu

import "github.com/bitdecode/bitdecode/gpu/cuda"

// halfOut describes a queued op that writes the float32 tensor of n
// elements at y and can also write its fp16 copy: with(xh) is the op that
// does both, the copy at xh (room for n halves). Or, where src is set, the
// op writes y as the exact widening of the n fp16 values it leaves at src
// (EnqueueOut): the GEMM reads those.
type halfOut struct {
	y    cuda.DevicePtr
	n    int
	with func(xh cuda.DevicePtr) queuedOp
	src  cuda.DevicePtr
}

// queueAfterHalf queues the op mk returns for a GEMM whose input is the
// float32 tensor of n elements at x, its fp16 copy going to xh: where the
// op queued last writes that tensor and can write its copy (halfOut), it
// is replaced by the variant writing the copy to xh, or the copy it
// leaves at its src is taken, and mk gets that copy with ready = true (the
// GEMM must not convert x); otherwise mk gets xh and false. Both happen
// under the queue's lock, so no flush falls between them.
func (b *Backend) queueAfterHalf(x cuda.DevicePtr, n int, xh cuda.DevicePtr, mk func(xh cuda.DevicePtr, ready bool) queuedOp) {
	b.queueAfter(func(last *queuedOp) queuedOp {
		if last == nil || last.half == nil || last.half.y != x || last.half.n != n {
			return mk(xh, false)
		}
		if h := last.half; h.src != 0 {
			xh = h.src
		} else {
			*last = h.with(xh)
		}
		return mk(xh, true)
	})
}

// withKey returns key followed by extra, in a new slice (a queued op's key
// is not shared with its variants).
func withKey(key []uint64, extra ...uint64) []uint64 {
	return append(append(make([]uint64, 0, len(key)+len(extra)), key...), extra...)
}

// EnqueueOut is Enqueue for an op whose launches end by writing the
// float32 tensor of n elements at out as the exact widening of the n fp16
// values they leave at outHalf (a GPU KV cache's attention output): a
// cuBLASLt GEMM over that tensor queued right after it (o_proj at more
// than 16 rows) reads outHalf instead of converting the tensor back to
// fp16 (half.go). outHalf must hold those values until the next op has
// run; 0 makes it Enqueue.
func (b *Backend) EnqueueOut(op string, f func(c *cuda.Ctx) error, out cuda.DevicePtr, n int, outHalf cuda.DevicePtr, key ...uint64) {
	q := queuedOp{op: op, f: f, key: key}
	if outHalf != 0 && n > 0 {
		q.half = &halfOut{y: out, n: n, src: outHalf}
	}
	b.queueOp(q)
}

// EnqueueOutWith is Enqueue for an op whose launches end by writing the
// float32 tensor of n elements at out and can also write its fp16 copy
// (f32_to_f16's bits): f(c, 0) writes out alone, f(c, xh) the copy at xh
// too (a rotated KV cache's attention output, rotated back in float32 by
// f16_to_f32_hadamard, which writes the copy of what it rotated). A
// cuBLASLt GEMM over that tensor queued right after it (o_proj at more
// than 16 rows) runs the op with its fp16 buffer and skips its own
// conversion (decode-step.md v22). The variant's key is key and xh.
func (b *Backend) EnqueueOutWith(op string, f func(c *cuda.Ctx, xh cuda.DevicePtr) error, out cuda.DevicePtr, n int, key ...uint64) {
	run := func(xh cuda.DevicePtr) func(c *cuda.Ctx) error {
		return func(c *cuda.Ctx) error { return f(c, xh) }
	}
	q := queuedOp{op: op, f: run(0), key: key}
	if n > 0 {
		q.half = &halfOut{y: out, n: n, with: func(xh cuda.DevicePtr) queuedOp {
			return queuedOp{op: op + "+fp16", f: run(xh), key: withKey(key, u64(xh))}
		}}
	}
	b.queueOp(q)
}

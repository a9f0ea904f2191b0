// warm.go: a GEMV's weights into L2 during the attention before it. At one
// sequence the decode kernels leave the DRAM idle for part of their launch
// (their start, the SMs' spread, the merge), while o's weights, which the
// GEMV after them streams, are known long before: no step writes weights.
// Where a KV cache's attention op has a variant that asks L2 for a region
// during its launches (AttendOp.RunWarm: kernels.DecodeBuffers.Warm, the
// decode plans compiled with kernels.DecodeTuning.L2Warm) and the op queued
// right after it is gemv.cu's GEMV over fp16 weights (Linear at decode
// rows), the attention op is replaced by that variant over the GEMV's
// weights. A prefetch reads nothing back, so every tensor keeps its bits
// (docs/perf/decode-step.md v37).

package gpu

import "github.com/bitdecode/bitdecode/gpu/cuda"

// warmOut describes a queued op (a KV cache's attention) with a variant
// that asks L2 for the n bytes at w during its launches: with(w, n).
type warmOut struct {
	with func(w cuda.DevicePtr, n int) queuedOp
}

// queueAfterWarm queues q, a GEMV that streams the n bytes of weights at
// w: where the op queued last has a warm variant (warmOut), it is replaced
// by the variant over those weights first, under the queue's lock (no
// flush falls between them). The region must be 16-byte aligned and sized
// (the bulk prefetch's unit); o's weights always are (K a multiple of 8).
func (b *Backend) queueAfterWarm(w cuda.DevicePtr, n int, q queuedOp) {
	b.queueAfter(func(last *queuedOp) queuedOp {
		if last != nil && last.warm != nil && w != 0 && w%16 == 0 && n > 0 && n%16 == 0 {
			*last = last.warm.with(w, n)
			b.l2Warms.Add(1)
		}
		return q
	})
}

// L2Warms returns how many attention ops queueAfterWarm has replaced by
// their variant warming L2 with the GEMV after them (tests and benchmarks
// check that the fold happens).
func (b *Backend) L2Warms() int64 { return b.l2Warms.Load() }

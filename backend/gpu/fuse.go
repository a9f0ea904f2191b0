// fuse.go: an op folded into the gemv.cu launch queued right before it.
// LinearGroup at decode batch sizes queues one gemv.cu launch (gemvLaunch
// records its operands); when the next op queued is SwiGLU or GeGLU of
// that group's two outputs (gate, up) or RoPEQK without norms of its first two (q, k),
// the launch is replaced by gemv.cu's pair kernel, which computes the same
// outputs and the op in its epilogue (kernels.GEMV.LaunchSwiGLU,
// LaunchRoPE): one launch and one round trip of the outputs less, every
// tensor left with the bits of the two ops run one after the other
// (docs/perf/decode-step.md v14). The model's Forward needs no change: a
// fold happens when the ops come in that order in one segment of the queue
// (queueOp keeps a gemv launch in the queue for the op after it).
// In the batch-invariant mode the same ops fold into a linear.cu narrow
// group launch of at most kernels.LinearTunedMaxRows rows (queuedOp.lin; kernels.Linear.LaunchGLU, LaunchRoPE: the
// pair kernels, the bits of the narrow kernel then the separate op, so a
// row's bits still do not depend on the batch; decode-step.md v30).
//
// The op after a gemv.cu launch may also start early: AddRMSNorm reads
// the residual and the norm's weight before its dependency wait where the
// launch ahead of it writes neither (earlyNormInputs), and by default the
// RoPE launch issues its first weight loads before its own
// (defaultGEMVEarly; decode-step.md v21).

package gpu

import (
	"cmp"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// gemvLaunch is a queued gemv.cu group launch's operands: x [T, K] float32
// (xBytes long) and the weights' groups (LaunchGroups' split).
type gemvLaunch struct {
	x      cuda.DevicePtr
	xBytes int
	T, K   int
	groups []kernels.LinearGroup
}

// foldLast replaces the last queued op by what match makes of it, if there
// is one and match accepts it (ok), and reports whether it did. match runs
// under the queue's lock.
func (b *Backend) foldLast(match func(last *queuedOp) (q queuedOp, ok bool)) bool {
	b.qMu.Lock()
	defer b.qMu.Unlock()
	n := len(b.queue)
	if n == 0 {
		return false
	}
	q, ok := match(&b.queue[n-1])
	if !ok {
		return false
	}
	b.queue[n-1] = q
	return true
}

// fold is foldLast where the last queued op is a gemv.cu launch (mma
// false) or a linear.cu narrow group launch (mma true: the batch-invariant
// mode's, queuedOp.lin).
func (b *Backend) fold(match func(l *gemvLaunch, mma bool) (q queuedOp, ok bool)) bool {
	return b.foldLast(func(last *queuedOp) (queuedOp, bool) {
		switch {
		case last.gemv != nil:
			return match(last.gemv, false)
		case last.lin != nil:
			return match(last.lin, true)
		}
		return queuedOp{}, false
	})
}

// foldJoined is foldLast where the last queued op is a joined GEMM
// (join.go).
func (b *Backend) foldJoined(match func(l *joinedLaunch) (q queuedOp, ok bool)) bool {
	return b.foldLast(func(last *queuedOp) (queuedOp, bool) {
		if last.joined == nil {
			return queuedOp{}, false
		}
		return match(last.joined)
	})
}

// overlaps reports whether [a, a+an) and [c, c+cn) share a byte.
func overlaps(a cuda.DevicePtr, an int, c cuda.DevicePtr, cn int) bool {
	return a < c+cuda.DevicePtr(cn) && c < a+cuda.DevicePtr(an)
}

// gluOpName names the gated-MLP op of activation act in logs and keys.
func gluOpName(act kernels.Act) string {
	if act == kernels.ActGeluTanh {
		return "GeGLU"
	}
	return "SwiGLU"
}

// foldGLU folds SwiGLU(dst, gate, up) (act kernels.ActSiLU) or GeGLU
// (kernels.ActGeluTanh) into the queued gemv.cu launch whose two outputs
// are gate and up, and reports whether it did. gate's (up's) linear output
// is not written where dst takes its place; dst must not overlap x, which
// other CTAs of the launch still read.
func (b *Backend) foldGLU(act kernels.Act, dst, gate, up *tensor) bool {
	return b.fold(func(l *gemvLaunch, mma bool) (queuedOp, bool) {
		if len(l.groups) != 2 || l.groups[0].Y != gate.ptr || l.groups[1].Y != up.ptr ||
			l.groups[0].N != l.groups[1].N || overlaps(dst.ptr, 4*dst.n, l.x, l.xBytes) {
			return queuedOp{}, false
		}
		g, u := l.groups[0], l.groups[1]
		if dst.ptr == g.Y {
			g.Y = 0
		}
		if dst.ptr == u.Y {
			u.Y = 0
		}
		x, T, K, d := l.x, l.T, l.K, dst.ptr
		key := groupKey([]uint64{u64(x), u64(T), u64(K), u64(d), uint64(act), b2u(mma)}, g, u)
		if mma {
			if !b.lin.PairFits(T, K) {
				return queuedOp{}, false
			}
			return queuedOp{op: "LinearGroup+" + gluOpName(act) + " (linear.cu)", key: key, f: func(c *cuda.Ctx) error {
				return b.lin.LaunchGLU(c, b.stream, act, x, T, K, g, u, d)
			}}, true
		}
		return queuedOp{op: "LinearGroup+" + gluOpName(act), key: key, f: func(c *cuda.Ctx) error {
			return b.gemv.LaunchGLUSplit(c, b.stream, act, x, T, K, b.gemv.SplitFor(T, g.N, u.N), g, u, d)
		}}, true
	})
}

// foldRoPE folds RoPEQK(q, k, pos, invFreq) without norms into the queued
// gemv.cu launch whose first two outputs are q and k (and the third, if
// any, v), and reports whether it did.
func (b *Backend) foldRoPE(q, k, pos *tensor, invFreq cuda.DevicePtr, half int) bool {
	return b.fold(func(l *gemvLaunch, mma bool) (queuedOp, bool) {
		if len(l.groups) < 2 || l.groups[0].Y != q.ptr || l.groups[1].Y != k.ptr {
			return queuedOp{}, false
		}
		var v kernels.LinearGroup
		if len(l.groups) == 3 {
			v = l.groups[2]
		}
		D := 2 * half
		if l.groups[0].N%D != 0 || l.groups[1].N%D != 0 || v.N%2 != 0 {
			return queuedOp{}, false
		}
		qg, kg := l.groups[0], l.groups[1]
		x, T, K, p := l.x, l.T, l.K, pos.ptr
		key := groupKey([]uint64{u64(x), u64(T), u64(K), u64(p), u64(invFreq), u64(half), b2u(mma)}, qg, kg, v)
		if mma {
			if !b.lin.PairFits(T, K) || !kernels.RoPEPairFits(qg.N, kg.N, v.N, half) {
				return queuedOp{}, false
			}
			return queuedOp{op: "LinearGroup+RoPEQK (linear.cu)", key: key, f: func(c *cuda.Ctx) error {
				return b.lin.LaunchRoPE(c, b.stream, x, T, K, qg, kg, v, p, invFreq, half)
			}}, true
		}
		return queuedOp{op: "LinearGroup+RoPEQK", key: key, f: func(c *cuda.Ctx) error {
			return b.gemv.LaunchRoPE(c, b.stream, x, T, K, qg, kg, v, p, invFreq, half)
		}}, true
	})
}

// defaultGEMVEarly is the kinds of gemv.cu launch whose first weight loads
// go before their dependency wait unless Options.GEMVEarly says otherwise:
// q|k|v's RoPE launch, whose CTAs wait during add_rmsnorm_cluster's few
// latency-bound microseconds with the DRAM otherwise idle (decode-step.md
// v21: the B = 1 step -0.03 to -0.065 ms). The backend's weights are
// written only at load, which ends in a stream sync, so no kernel ahead
// writes them.
const defaultGEMVEarly = kernels.GEMVEarlyRoPE

// earlyNormInputs reports whether an add_rmsnorm over the residual h may
// read h (and its norm weight, which only a load writes) before its
// dependency wait: the op queued right before it must be a gemv.cu launch
// (it then runs right ahead of the norm on the stream, and PDL lets the
// norm start only once the kernel before that one has finished) none of
// whose outputs overlaps h; never with Options.NoEarlyNorm. After a flush
// (the queue empty) it says no.
func (b *Backend) earlyNormInputs(h *tensor) bool {
	if b.opts.NoEarlyNorm {
		return false
	}
	b.qMu.Lock()
	defer b.qMu.Unlock()
	n := len(b.queue)
	if n == 0 {
		return false
	}
	l := cmp.Or(b.queue[n-1].plain, b.queue[n-1].gemv, b.queue[n-1].lin)
	if l == nil {
		return false
	}
	for _, g := range l.groups {
		if overlaps(g.Y, 4*l.T*g.N, h.ptr, 4*h.n) {
			return false
		}
	}
	return true
}

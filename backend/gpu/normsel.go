// normsel.go: DEC's list of x made where x is produced (session 19b,
// docs/perf/dec.md, issue #22). A q6 weight (or a joined q6 group: q|k|v,
// gate|up) at one row of x runs select_q6, a launch of its own, before
// gemv_q6_dec: 1.3-1.9 us each in the step, two thirds of DEC's cost at
// k_chunk 8 (session 19). By default (Options.NoDECNormSelect unset;
// session 20) where the op queued right before that GEMV writes x and has a variant that also
// writes x's list (selOut), that op is replaced by the variant and the
// GEMV skips its selection: the same bits everywhere, one launch and one
// dependency round trip less per list. The producers with a variant:
//
//   - AddRMSNorm over a cluster (kernels.Ops.AddRMSNormSel,
//     add_rmsnorm_cluster_sel): q|k|v's and gate|up's x;
//   - a KV cache's attention op whose AttendOp.RunSel is set (gpukv's
//     paged cache: kernels.Ops.F16ToF32Sel / F16ToF32HadamardSel, the
//     output's conversion): o's x;
//   - a joined GEMM with SwiGLU (GeGLU) folded into its split
//     (foldGLUJoined: kernels.Ops.GLUColsSel, swiglu_cols_sel): down's x
//     after gate|up's joined q6 GEMV;
//   - SwiGLU (GeGLU) over gate and up apart (queueGLUSel:
//     kernels.Ops.GLUSel, swiglu_sel; session 24): down's x where gate
//     and up have no DEC, so are not joined (a select_q6 launch of 5.4 us
//     alone before; docs/perf/dec.md "Session 24").
//
// Layer 0's q|k|v keeps its select_q6 launch (its norm is RMSNorm, no
// variant), as does down after a gemv.cu pair kernel (fp16 gate|up: the
// SwiGLU in that GEMV's epilogue, spread over its CTAs).

package gpu

import (
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// selOut describes a queued op that writes the float32 tensor x [T, n]
// at y and can also write DEC's list of each row of it: with(sel, kChunk)
// is the op that does both, the lists at sel ([T][kernels.DECSelected(n,
// kChunk)] int32, wq.SelectApprox at k_chunk kChunk).
type selOut struct {
	y    cuda.DevicePtr
	n, T int
	with func(sel cuda.DevicePtr, kChunk int) queuedOp
}

// queueAfterSel queues the op mk returns for a GEMV over one row x [K]
// whose DEC list goes to sel at k_chunk kChunk: unless
// Options.NoDECNormSelect is set, where the op queued last writes that row and can write its list
// (selOut), that op is replaced by the variant writing the list to sel,
// and mk gets given = true (the GEMV must not select); otherwise false.
// Both under the queue's lock, so no flush falls between them.
func (b *Backend) queueAfterSel(x cuda.DevicePtr, K int, sel cuda.DevicePtr, kChunk int, mk func(given bool) queuedOp) {
	if b.opts.NoDECNormSelect || kChunk <= 0 || sel == 0 {
		b.queueOp(mk(false))
		return
	}
	b.queueAfter(func(last *queuedOp) queuedOp {
		if last == nil || last.sel == nil || last.sel.y != x || last.sel.n != K || last.sel.T != 1 {
			return mk(false)
		}
		*last = last.sel.with(sel, kChunk)
		b.listsGiven.Add(1)
		return mk(true)
	})
}

// DECListsGiven returns how many q6 GEMVs have taken their DEC list from
// the op queued before them (normsel.go) since Open: tests and
// benchmarks check that the fold happens.
func (b *Backend) DECListsGiven() int64 { return b.listsGiven.Load() }

// queueGLUSel queues SwiGLU (act kernels.ActSiLU) or GeGLU
// (kernels.ActGeluTanh) of gate and up apart into d as swiglu's (geglu's)
// plain launch that a q6 GEMV over d queued next may replace by its variant
// writing d's DEC list too (kernels.Ops.GLUSel: the same d), and reports
// whether it did: at one row of N channels GLUSel takes, 16-byte aligned,
// once a weight runs gemv_q6_dec (q6Loaded: without DEC the queue stays
// as it was) and unless Options.NoDECNormSelect. Otherwise the caller
// queues the plain op itself.
func (b *Backend) queueGLUSel(act kernels.Act, d, gate, up *tensor) bool {
	T, N := d.matrix()
	if b.opts.NoDECNormSelect || !b.q6Loaded.Load() || T != 1 || !b.ops.GLUSelects(T, N) ||
		d.ptr%16 != 0 || gate.ptr%16 != 0 || up.ptr%16 != 0 {
		return false
	}
	plain := b.ops.SwiGLU
	if act == kernels.ActGeluTanh {
		plain = b.ops.GeGLU
	}
	op := gluOpName(act)
	dp, gp, upp, n := d.ptr, gate.ptr, up.ptr, d.n
	key := []uint64{u64(dp), u64(gp), u64(upp), u64(n)} // elementwise's key
	q := queuedOp{op: op, key: key, f: func(c *cuda.Ctx) error { return plain(c, b.stream, dp, gp, upp, n) }}
	q.sel = &selOut{y: dp, n: N, T: T, with: func(sel cuda.DevicePtr, kChunk int) queuedOp {
		return queuedOp{op: op + "+DEC list", key: withKey(key, u64(sel), u64(kChunk)), f: func(c *cuda.Ctx) error {
			return b.ops.GLUSel(c, b.stream, act, dp, gp, upp, T, N, sel, kChunk)
		}}
	}}
	b.queueOp(q)
	return true
}

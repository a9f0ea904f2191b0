// join.go: a LinearGroup's weights in one allocation, computed by one
// cuBLASLt GEMM. JoinWeights moves the fp16 matrices of a group (q, k, v;
// gate, up) into one device allocation, one after another, each weight a
// view at its offset: together they are the matrix [ΣN, K] of the group's
// concatenated output channels. Where fp16Path sends such a group to
// cuBLASLt (17-256 rows; from 9 rows for a joined group of at least
// cublasJoinedMinBytes), LinearGroup converts x to fp16 once, runs one GEMM
// [T, ΣN] into a keyed float32 buffer and copies each weight's columns,
// plus its bias, to its output tensor in one launch (kernels.Ops.SplitCols);
// SwiGLU of the group's two outputs queued right after it replaces that
// copy (kernels.Ops.SwiGLUCols, the bits of the copy then SwiGLU), and so
// does RoPEQK without norms of its first two (kernels.Ops.RoPECols). Before,
// the group ran as one conversion and one GEMM per weight: q|k|v at 55 rows
// read its 48 MiB at 43% of the ceiling, as one GEMM at 58%
// (decode-step.md v17).
//
// Packed low-bit weights join in the tiled layout (joinTiled): at one row
// LinearGroup runs one v6.1 GEMV over the group's rows into the same
// joined output buffer and split (launchJoinedTiled), so RoPEQK and a KV
// cache's append fold onto it as above: Llama-3.1-8B's q|k|v, whose k and
// v alone are under v6.1's 128 row groups, -0.16 to -0.27 ms a B = 1 step
// with int4, int3 and int8 weights on the H100 (docs/perf/gemvq.md,
// session 16 "q|k|v packed, one launch"). Options.GEMVQApart keeps them
// apart.

package gpu

import (
	"cmp"
	"fmt"
	"sync/atomic"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// weightBlock is one device allocation holding several fp16 matrices one
// after another, or several packed weights' tiled layouts (their codes one
// after another, then their params: joinTiled) (JoinWeights); it is freed
// with the last of them.
type weightBlock struct {
	ptr  cuda.DevicePtr
	live atomic.Int32 // weights still in it
	// dec is a joined tiled group's joined DEC residual and list scratch
	// (joinTiledDEC), nil without DEC; its memory is freed with ptr.
	dec *jointDEC
}

// jointDEC is the DEC state of a joined tiled group whose weights with DEC
// (all of them, or a run of them next to each other: DEC by projection)
// have it at one k_chunk: those weights' int4 residuals joined into the
// residual of their outputs [lo, lo + res.N) of the [N, K] joined weight
// (each input channel's rows of those weights side by side: wq's Rᵀ of
// those rows), in one allocation ptr with the scratch sel of one token's
// list, so that LinearGroup at one row runs one selection and one
// gemv_q6_dec over the group (joinedLaunch.gemm), which compensates those
// outputs only (GEMVQ6DEC.LaunchPart).
type jointDEC struct {
	ptr    cuda.DevicePtr
	res    kernels.DECResidual
	sel    cuda.DevicePtr // [S] int32
	kChunk int
	S      int
	lo, N  int // the residual's first output in the joined weight, and the joined weight's outputs
}

// release returns what freeing a weight whose own device memory (its fp16
// matrix, or its tiled codes and params) is own frees: own itself for a
// weight of its own (k nil), else the block's allocation once its last
// weight goes, else nothing.
func (k *weightBlock) release(own ...cuda.DevicePtr) []cuda.DevicePtr {
	switch {
	case k == nil:
		return own
	case k.live.Add(-1) == 0:
		if k.dec != nil {
			return []cuda.DevicePtr{k.ptr, k.dec.ptr}
		}
		return []cuda.DevicePtr{k.ptr}
	}
	return nil
}

var _ backend.WeightJoiner = (*Backend)(nil)

// JoinWeights implements backend.WeightJoiner: it moves the fp16 matrices
// ws (each [N_i, K], the same K) into one allocation, one after another in
// this order, and frees their old memory, so that a LinearGroup over ws in
// this order at cuBLASLt's batch sizes runs one GEMM over their
// concatenated output channels (join.go). Packed low-bit weights of one
// width and group are joined likewise in the tiled layout (joinTiled) where
// that moves a weight onto v6.1 at one row. The weights keep their names,
// shapes and values. Where the weights cannot be joined (fewer than two,
// DEC weights, fp16 and packed ones mixed, vectors, different K, a weight
// twice or joined already, an output width not a multiple of
// kernels.ColsFit's 4, or more than kernels.SplitColsMax weights) it does
// nothing and returns nil: the group then runs as one Linear per weight, as
// before. It waits for the queued ops (which may read the weights).
func (b *Backend) JoinWeights(ws ...backend.Weight) error {
	const op = "JoinWeights"
	if len(ws) < 2 || len(ws) > kernels.SplitColsMax {
		return nil
	}
	cws := make([]*weight, len(ws))
	var K, bytes, quant int
	for i, w := range ws {
		cw, err := b.weightOf(op, w)
		if err != nil {
			return err
		}
		if len(cw.shape) != 2 || (cw.f16 == 0 && !cw.isQuant()) || (cw.dec != nil && !cw.isQuant()) || cw.block != nil || !kernels.ColsFit(cw.shape[0]) {
			return nil
		}
		if i == 0 {
			K = cw.shape[1]
		}
		if cw.shape[1] != K {
			return nil
		}
		for _, prev := range cws[:i] {
			if prev == cw {
				return nil
			}
		}
		cws[i] = cw
		bytes += 2 * cw.shape[0] * K
		if cw.isQuant() {
			quant++
		}
	}
	switch quant {
	case 0:
	case len(cws):
		// Packed weights with DEC join only as joinTiled's DEC groups.
		return b.joinTiled(op, cws)
	default:
		return nil
	}
	blk := &weightBlock{}
	var old []cuda.DevicePtr
	err := b.Do(func(c *cuda.Ctx) error {
		var err error
		if blk.ptr, err = c.Alloc(bytes); err != nil {
			return err
		}
		off := 0
		for _, cw := range cws {
			n := 2 * cw.shape[0] * K
			if err := c.DtoDAsync(blk.ptr+cuda.DevicePtr(off), cw.f16, n, b.stream); err != nil {
				return err
			}
			off += n
		}
		return b.syncStream(c)
	})
	if err != nil {
		if blk.ptr != 0 {
			_ = b.Do(func(c *cuda.Ctx) error { return c.Free(blk.ptr) })
		}
		return fmt.Errorf("backend/gpu: %s: %d weights of %d bytes: %w", op, len(ws), bytes, err)
	}
	off := 0
	blk.live.Store(int32(len(cws)))
	b.memMu.Lock()
	for _, cw := range cws {
		old = append(old, cw.f16)
		cw.f16, cw.block = blk.ptr+cuda.DevicePtr(off), blk
		off += 2 * cw.shape[0] * K
	}
	b.memMu.Unlock()
	return b.freeOld(op, old)
}

// freeOld frees the device memory JoinWeights moved the weights out of.
func (b *Backend) freeOld(op string, old []cuda.DevicePtr) error {
	return b.Do(func(c *cuda.Ctx) error {
		for _, p := range old {
			if p == 0 {
				continue
			}
			if err := c.Free(p); err != nil {
				return fmt.Errorf("backend/gpu: %s: %w", op, err)
			}
		}
		return nil
	})
}

// tiledJoinAlign aligns the params of a joined tiled block after its
// codes.
const tiledJoinAlign = 256

// joinTiled is JoinWeights over packed weights cws (no DEC, each [N_i, K],
// the same K): where they share a code width and group, every N_i is whole
// row groups of 16 (the tiled layout of [ΣN, K] is then the weights' tiled
// layouts one after another, codes and params alike), and v6.1 would read
// the joined [ΣN, K] weight at one row (tiledLayout) while some weight alone
// would not (Llama-3.1-8B's k and v: 1024 rows, 64 row groups, under
// v6.1's 128; q|k|v 6144 rows), it writes the weights' tiled layouts into
// one allocation, codes one after another, then params one after another
// (a weight tiled already is copied, one in wq's layout packed by
// tile_pack), frees their old copies, and makes each weight a view of its
// rows (qt, qtp; q and qp 0): every kernel that reads a tiled weight reads
// the view as before (v2 at 2-16 rows and the dequantization: the same bits
// as over wq's layout), and LinearGroup at one row runs v6.1 once over the
// joined rows (launchJoinedTiled). Otherwise it does nothing: a group whose
// weights each run v6.1 alone (gate|up) keeps them apart (one launch each,
// each at its own split). A group whose weights have DEC (joinableDEC: all
// of them, or since session 23 a run of them at one k_chunk, the others
// none) is joined even so, and its residuals too (joinDEC): one selection
// and one gemv_q6_dec launch at one row instead of one each a weight
// (session 19), compensating the outputs of the weights with DEC only.
func (b *Backend) joinTiled(op string, cws []*weight) error {
	g, err := b.quantKernels()
	if err != nil {
		return err
	}
	w0 := cws[0]
	bits, G, K := w0.qbits, w0.qgroup, w0.shape[1]
	N, words, params, alone, decs := 0, 0, 0, true, 0
	for _, cw := range cws {
		n := cw.shape[0]
		if cw.qbits != bits || cw.qgroup != G {
			return nil
		}
		if cw.dec != nil {
			decs++
		}
		tw, tp := kernels.TiledBytes(bits, n, K, G)
		N, words, params = N+n, words+tw, params+tp
		alone = alone && tiledLayout(&b.opts, g, bits, n, K, G, true)
	}
	withDEC := decs > 0
	if withDEC && !b.joinableDEC(g, cws, N, K) {
		return nil
	}
	tw, tp := kernels.TiledBytes(bits, N, K, G)
	if b.opts.GEMVQApart || (alone && !withDEC) || !tiledLayout(&b.opts, g, bits, N, K, G, true) || tw != words || tp != params {
		return nil
	}
	poff := (words + tiledJoinAlign - 1) / tiledJoinAlign * tiledJoinAlign
	blk := &weightBlock{}
	err = b.Do(func(c *cuda.Ctx) error {
		var err error
		if blk.ptr, err = c.Alloc(poff + params); err != nil {
			return err
		}
		wo, po := blk.ptr, blk.ptr+cuda.DevicePtr(poff)
		for _, cw := range cws {
			n := cw.shape[0]
			tw, tp := kernels.TiledBytes(bits, n, K, G)
			if cw.qt != 0 {
				err = cmp.Or(c.DtoDAsync(wo, cw.qt, tw, b.stream), c.DtoDAsync(po, cw.qtp, tp, b.stream))
			} else {
				err = g.PackTiles(c, b.stream, wo, po, cw.q, cw.qp, n, K, bits, G)
			}
			if err != nil {
				return err
			}
			wo, po = wo+cuda.DevicePtr(tw), po+cuda.DevicePtr(tp)
		}
		return b.syncStream(c)
	})
	if err != nil {
		if blk.ptr != 0 {
			_ = b.Do(func(c *cuda.Ctx) error { return c.Free(blk.ptr) })
		}
		return fmt.Errorf("backend/gpu: %s: %d int%d weights [%d, %d] tiled: %w", op, len(cws), bits, N, K, err)
	}
	if withDEC {
		if blk.dec, err = b.joinDEC(cws, N, K); err != nil {
			_ = b.Do(func(c *cuda.Ctx) error { return c.Free(blk.ptr) })
			return fmt.Errorf("backend/gpu: %s: %d DEC residuals [%d, %d]: %w", op, len(cws), K, N, err)
		}
	}
	var old []cuda.DevicePtr
	wo, po := blk.ptr, blk.ptr+cuda.DevicePtr(poff)
	blk.live.Store(int32(len(cws)))
	b.memMu.Lock()
	for _, cw := range cws {
		tw, tp := kernels.TiledBytes(bits, cw.shape[0], K, G)
		old = append(old, cw.q, cw.qp, cw.qt, cw.qtp)
		cw.q, cw.qp, cw.qt, cw.qtp, cw.block = 0, 0, wo, po, blk
		wo, po = wo+cuda.DevicePtr(tw), po+cuda.DevicePtr(tp)
		if dw := cw.dec; dw != nil {
			// A weight of a DEC group runs as a q6 weight from here on
			// (k and v came in wq's layout with fused mode's buffers).
			old = append(old, dw.part, dw.flags)
			dw.part, dw.flags, dw.mode, dw.q6 = 0, 0, kernels.DECSerial, true
			b.q6Loaded.Store(true)
		}
	}
	b.memMu.Unlock()
	return b.freeOld(op, old)
}

// joinableDEC reports whether the packed weights cws, some with DEC, joined
// into one [N, K] weight may run DEC inside v6.1 (q6DEC's rule for the
// joined weight): the weights with DEC next to each other (decRun), with
// int4 residuals in device memory at one k_chunk, fused mode, not
// Options.DECQ3, v6.1 (not v6: V51), a shape gemv_q6_dec reads. A group
// whose weights with DEC differ in k_chunk or lie apart (q and v with DEC,
// k without) is not joined: each weight runs alone with its own DEC.
func (b *Backend) joinableDEC(g *kernels.GEMVQ, cws []*weight, N, K int) bool {
	w0 := cws[0]
	o := &b.opts
	if o.DECQ3 || o.decMode(wq.Int4) != kernels.DECFused || (g.V51 && w0.qbits == 4) ||
		kernels.GEMVQ6DECReads(w0.qbits, w0.qgroup, N, K) != nil {
		return false
	}
	i0, i1, _, _, ok := decRun(cws)
	if !ok {
		return false
	}
	for _, cw := range cws[i0:i1] {
		dw := cw.dec
		if dw.host != nil || dw.res.Elem != wq.Int4 || dw.kChunk != cws[i0].dec.kChunk {
			return false
		}
	}
	_, err := b.q6Kernels()
	return err == nil
}

// decRun returns the weights of cws with DEC, cws[i0:i1], and their outputs
// [lo, lo + n) in the joined weight, where they are a run next to each
// other with lo and n whole residual groups (GEMVQ6DEC.LaunchPart); ok
// false otherwise or where none has DEC.
func decRun(cws []*weight) (i0, i1, lo, n int, ok bool) {
	i0, i1 = -1, -1
	off := 0
	for i, cw := range cws {
		switch {
		case cw.dec != nil && i0 < 0:
			i0, lo = i, off
		case cw.dec != nil && i1 >= 0:
			return 0, 0, 0, 0, false // a second run
		case cw.dec == nil && i0 >= 0 && i1 < 0:
			i1 = i
		}
		if cw.dec != nil {
			n += cw.shape[0]
		}
		off += cw.shape[0]
	}
	if i0 < 0 {
		return 0, 0, 0, 0, false
	}
	if i1 < 0 {
		i1 = len(cws)
	}
	return i0, i1, lo, n, lo%wq.ResidualGroup == 0 && n%wq.ResidualGroup == 0
}

// joinDEC joins the device residuals of the weights of cws with DEC (each
// [K, N_i], wq's int4 Rᵀ, the same k_chunk, a run: decRun) into one
// allocation: the residual of their outputs of the joined [N, K] weight
// (codes, then params at a 256-byte boundary, each input channel's row
// those weights' rows side by side: GEMVQ6DEC.JoinRows), then one token's
// list scratch. The weights keep their own residuals (2-16 rows and
// prefill compensate each weight apart).
func (b *Backend) joinDEC(cws []*weight, N, K int) (*jointDEC, error) {
	i0, i1, lo, RN, ok := decRun(cws)
	if !ok {
		return nil, fmt.Errorf("the weights with DEC are not one run of whole %d-output groups", wq.ResidualGroup)
	}
	dw0 := cws[i0].dec
	S := kernels.DECSelected(K, dw0.kChunk)
	words, params := 4*K*RN/8, 4*K*RN/wq.ResidualGroup
	poff := (words + tiledJoinAlign - 1) / tiledJoinAlign * tiledJoinAlign
	soff := (poff + params + tiledJoinAlign - 1) / tiledJoinAlign * tiledJoinAlign
	j := &jointDEC{kChunk: dw0.kChunk, S: S, lo: lo, N: N}
	err := b.Do(func(c *cuda.Ctx) error {
		var err error
		if j.ptr, err = c.Alloc(soff + 4*max(S, 1)); err != nil {
			return err
		}
		j.res = kernels.DECResidual{Elem: wq.Int4, Words: j.ptr, Params: j.ptr + cuda.DevicePtr(poff), N: RN, K: K}
		j.sel = j.ptr + cuda.DevicePtr(soff)
		n0 := 0
		for _, cw := range cws[i0:i1] {
			r, n := cw.dec.res, cw.shape[0]
			if err := b.q6K.JoinRows(c, b.stream, j.res.Words, r.Words, K, n/8, RN/8, n0/8); err != nil {
				return err
			}
			if err := b.q6K.JoinRows(c, b.stream, j.res.Params, r.Params, K, n/wq.ResidualGroup, RN/wq.ResidualGroup, n0/wq.ResidualGroup); err != nil {
				return err
			}
			n0 += n
		}
		return b.syncStream(c)
	})
	if err != nil && j.ptr != 0 {
		_ = b.Do(func(c *cuda.Ctx) error { return c.Free(j.ptr) })
	}
	return j, err
}

// joinedGroup reports whether the fp16 weights of groups (weight i is
// w(i)), each [groups[i].N, K], lie one after another in one JoinWeights
// allocation in this order, with outputs split_cols can write.
func joinedGroup(K int, groups []kernels.LinearGroup, w func(i int) *weight) bool {
	if len(groups) < 2 || len(groups) > kernels.SplitColsMax {
		return false
	}
	blk := w(0).block
	for i, g := range groups {
		wt := w(i)
		if blk == nil || wt.block != blk || !kernels.ColsFit(g.N) || g.Y%16 != 0 || g.Bias%16 != 0 {
			return false
		}
		if i > 0 && g.W != groups[i-1].W+cuda.DevicePtr(2*groups[i-1].N*K) {
			return false
		}
	}
	return true
}

// joinedLaunch is a queued joined GEMM's operands: x [T, K] float32, its
// fp16 copy xh (ready: written by the op before, half.go), the GEMM's
// output y [T, N] float32 (N = Σ groups' N) and the groups (their weights
// one after another from groups[0].W); or, where tiled is set, a joined
// group of packed weights, whose one GEMV reads x itself.
type joinedLaunch struct {
	x, xh, y cuda.DevicePtr
	T, K, N  int
	ready    bool
	// listGiven: the op queued before this one (the AddRMSNorm writing x)
	// writes x's DEC list to the joined DEC scratch, so gemm does not
	// select (normsel.go); only with tiled.dec.
	listGiven bool
	groups    []kernels.LinearGroup
	sk        skinnyPlan  // the GEMM on skinny.cu where ok (skinny.go)
	tiled     *tiledJoint // the packed weights' joined tiled layout, nil for fp16
}

// tiledJoint is a joined group of packed weights (joinTiled) as one
// [N, K] weight in the tiled layout: its codes tw, params tp, code width
// and group, and its joined DEC residual (nil without DEC).
type tiledJoint struct {
	tw, tp  cuda.DevicePtr
	bits, G int
	dec     *jointDEC
}

// gemm queues x's fp16 conversion (unless ready) and the one GEMM y =
// xh · Wᵀ; for a tiled group, the one GEMV y = x · Ŵᵀ (LaunchTiled: v6.1);
// for a tiled group with DEC, x's selection (select_q6) and one
// gemv_q6_dec at LaunchTiled's split (v6.1's y plus wq.Compensate's
// compensation over the joined residual: each output's bits as its own
// weight's v6.1 at the joined launch's split, then Compensate).
func (l *joinedLaunch) gemm(b *Backend, c *cuda.Ctx) error {
	if t := l.tiled; t != nil && t.dec != nil {
		j := t.dec
		d := kernels.DECLaunch{X: l.x, Y: l.y, Sel: j.sel, R: &j.res, T: 1, KChunk: j.kChunk, Blocks: 1}
		if !l.listGiven {
			if err := b.q6K.Select(c, b.stream, &d); err != nil {
				return err
			}
		}
		S := b.gemvq.SplitV5For(l.N, l.K, t.bits)
		if js := b.opts.GEMVQJoinSplit; js > 0 {
			S = js
		}
		return b.q6K.LaunchPart(c, b.stream, l.y, l.x, t.tw, t.tp, 0, j.sel, b.decRows(j.S), &j.res, j.lo, l.N, l.K, t.bits, t.G, S, b.gemvq.EarlyWeights)
	}
	if t := l.tiled; t != nil {
		if S := b.opts.GEMVQJoinSplit; S > 0 {
			return b.gemvq.LaunchV6(c, b.stream, l.y, l.x, t.tw, t.tp, 0, l.N, l.K, t.bits, t.G, S)
		}
		return b.gemvq.LaunchTiled(c, b.stream, l.y, l.x, t.tw, t.tp, 0, l.T, l.N, l.K, t.bits, t.G)
	}
	if !l.ready {
		if err := b.ops.F32ToF16(c, b.stream, l.xh, l.x, l.T*l.K); err != nil {
			return err
		}
	}
	if l.sk.ok {
		return b.launchSkinny(c, l.sk, l.y, l.xh, l.groups[0].W, 0, l.T, l.N, l.K)
	}
	g := cuda.GEMMShape{M: l.T, N: l.N, K: l.K, In: cuda.F16, Out: cuda.F32}
	return c.GEMM(b.stream, g, l.y, l.xh, l.groups[0].W)
}

// key returns the graph key of the launch, with extra values first.
func (l *joinedLaunch) key(extra ...uint64) []uint64 {
	ready := uint64(0)
	if l.ready {
		ready = 1
	}
	key := append(extra, u64(l.x), u64(l.xh), u64(l.y), u64(l.T), u64(l.K), u64(l.N), ready)
	if t := l.tiled; t != nil {
		key = append(key, u64(t.tw), u64(t.tp), u64(t.bits), u64(t.G))
		if j := t.dec; j != nil {
			key = append(key, u64(j.ptr), u64(j.kChunk), b2u(l.listGiven))
		}
	}
	return groupKey(key, l.groups...)
}

// cols returns group g as split_cols's output.
func cols(g kernels.LinearGroup) kernels.ColsOut {
	return kernels.ColsOut{Y: g.Y, Bias: g.Bias, N: g.N}
}

// launchJoined queues one joined GEMM over groups (joinedGroup holds)
// sharing x [T, K], N their summed channels: x to fp16 in keyedScratch,
// the GEMM into the joined output buffer, split_cols to the groups'
// outputs; one op with a graph key.
func (b *Backend) launchJoined(op string, xt *tensor, T, K, N int, groups []kernels.LinearGroup) {
	xh, err := b.keyedScratch(2 * T * K)
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: %w", op, err))
		return
	}
	y, err := b.growKeyed(&b.ykMu, &b.yk, &b.ykBytes, 4*T*N)
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: joined output [%d, %d]: %w", op, T, N, err))
		return
	}
	sk, err := b.planSkinny(T, N, K, xh, groups[0].W)
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: %w", op, err))
		return
	}
	outs := make([]kernels.ColsOut, len(groups))
	for i, g := range groups {
		outs[i] = cols(g)
	}
	b.queueAfterHalf(xt.ptr, T*K, xh, func(xh cuda.DevicePtr, ready bool) queuedOp {
		l := &joinedLaunch{x: xt.ptr, xh: xh, y: y, T: T, K: K, N: N, ready: ready, groups: groups, sk: sk}
		return queuedOp{op: op + "(joined)", key: l.key(), joined: l, f: func(c *cuda.Ctx) error {
			if err := l.gemm(b, c); err != nil {
				return err
			}
			return b.ops.SplitCols(c, b.stream, l.y, T, outs...)
		}}
	})
}

// tiledGroup returns the joined tiled weight of groups (weight i is w(i),
// each [groups[i].N, K]) where LinearGroup over T rows runs it as one GEMV:
// joinTiled placed the weights' tiled layouts one after another in one
// block in this order, the outputs are ones split_cols can write, and
// v6.1 reads the joined [ΣN, K] weight at T rows (GEMVQ.UsesV6: one row);
// else nil (one Linear per weight: at 2-16 rows v2 and for prefill the
// dequantization over each weight's view, the bits of the weights apart).
func (b *Backend) tiledGroup(T, K int, groups []kernels.LinearGroup, w func(i int) *weight) *tiledJoint {
	if len(groups) < 2 || len(groups) > kernels.SplitColsMax || b.gemvq == nil {
		return nil
	}
	w0 := w(0)
	if w0.block == nil || w0.qt == 0 {
		return nil
	}
	t := &tiledJoint{tw: w0.qt, tp: w0.qtp, bits: w0.qbits, G: w0.qgroup, dec: w0.block.dec}
	tw, tp, N := t.tw, t.tp, 0
	for i, g := range groups {
		wt := w(i)
		// With DEC, a bias keeps the weights apart: the joined launch
		// adds the compensation before split_cols adds the bias, a
		// weight alone after (wq.Compensate's order). A group with DEC
		// may have weights without (joinDEC).
		if wt.block != w0.block || wt.qt != tw || wt.qtp != tp || (wt.dec != nil && t.dec == nil) || wt.qbits != t.bits || wt.qgroup != t.G ||
			!kernels.ColsFit(g.N) || g.Y%16 != 0 || g.Bias%16 != 0 || (t.dec != nil && g.Bias != 0) {
			return nil
		}
		cw, cp := kernels.TiledBytes(t.bits, g.N, K, t.G)
		tw, tp, N = tw+cuda.DevicePtr(cw), tp+cuda.DevicePtr(cp), N+g.N
	}
	if !b.gemvq.UsesV6(T, N, K, t.bits, t.G) || (t.dec != nil && (T != 1 || t.dec.N != N)) {
		return nil
	}
	return t
}

// launchJoinedTiled queues one GEMV over the joined tiled weight t of
// groups sharing x [T, K], N their summed channels, into the joined output
// buffer, then split_cols to the groups' outputs (their biases added
// there: v6.1 adds a bias as its last float32 add, split_cols the same
// add, so each output has the bits of v6.1 over its own rows at the joined
// launch's split); one op with a graph key, onto which RoPEQK and a KV
// cache's attention op may fold as onto a joined fp16 GEMM.
func (b *Backend) launchJoinedTiled(op string, xt *tensor, T, K, N int, groups []kernels.LinearGroup, t *tiledJoint) {
	y, err := b.growKeyed(&b.ykMu, &b.yk, &b.ykBytes, 4*T*N)
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: joined output [%d, %d]: %w", op, T, N, err))
		return
	}
	outs := make([]kernels.ColsOut, len(groups))
	for i, g := range groups {
		outs[i] = cols(g)
	}
	mk := func(given bool) queuedOp {
		l := &joinedLaunch{x: xt.ptr, y: y, T: T, K: K, N: N, ready: true, listGiven: given, groups: groups, tiled: t}
		return queuedOp{op: op + "(joined)", key: l.key(), joined: l, f: func(c *cuda.Ctx) error {
			if err := l.gemm(b, c); err != nil {
				return err
			}
			return b.ops.SplitCols(c, b.stream, l.y, T, outs...)
		}}
	}
	if j := t.dec; j != nil && T == 1 {
		// The AddRMSNorm writing x may write its list too (normsel.go).
		b.queueAfterSel(xt.ptr, K, j.sel, j.kChunk, mk)
		return
	}
	b.queueOp(mk(false))
}

// foldGLUJoined folds SwiGLU(dst, gate, up) (act kernels.ActSiLU) or
// GeGLU (kernels.ActGeluTanh) into the queued joined GEMM whose two
// outputs are gate and up, and reports whether it did: the split becomes
// swiglu_cols, which writes dst and whichever of gate and up dst does not
// replace. The GEMM reads x before the split runs, so dst may be x.
func (b *Backend) foldGLUJoined(act kernels.Act, dst, gate, up *tensor) bool {
	return b.foldJoined(func(l *joinedLaunch) (queuedOp, bool) {
		if len(l.groups) != 2 || l.groups[0].Y != gate.ptr || l.groups[1].Y != up.ptr ||
			l.groups[0].N != l.groups[1].N || dst.ptr%16 != 0 {
			return queuedOp{}, false
		}
		g, u := cols(l.groups[0]), cols(l.groups[1])
		if dst.ptr == g.Y {
			g.Y = 0
		}
		if dst.ptr == u.Y {
			u.Y = 0
		}
		d := dst.ptr
		op := "LinearGroup(joined)+" + gluOpName(act)
		run := func(dh cuda.DevicePtr) func(c *cuda.Ctx) error {
			return func(c *cuda.Ctx) error {
				if err := l.gemm(b, c); err != nil {
					return err
				}
				return b.ops.GLUColsHalf(c, b.stream, act, l.y, d, dh, l.T, g, u)
			}
		}
		key := l.key(u64(d), uint64(act))
		// A cuBLASLt GEMM over dst queued next (down) takes dst's fp16 copy
		// from the split (half.go). The GEMM above reads its own fp16 x,
		// which may be the same buffer, before the split runs.
		q := queuedOp{op: op, key: key, f: run(0), half: &halfOut{y: d, n: l.T * g.N, with: func(dh cuda.DevicePtr) queuedOp {
			return queuedOp{op: op + "+fp16", key: withKey(key, u64(dh)), f: run(dh)}
		}}}
		// A q6 GEMV over dst queued next (down at one row) takes dst's DEC
		// list from the split (normsel.go: swiglu_cols_sel).
		if !b.opts.NoDECNormSelect && l.T == 1 && b.ops.GLUSelects(l.T, g.N) {
			q.sel = &selOut{y: d, n: g.N, T: l.T, with: func(sel cuda.DevicePtr, kChunk int) queuedOp {
				return queuedOp{op: op + "+DEC list", key: withKey(key, u64(sel), u64(kChunk)), f: func(c *cuda.Ctx) error {
					if err := l.gemm(b, c); err != nil {
						return err
					}
					return b.ops.GLUColsSel(c, b.stream, act, l.y, d, l.T, g, u, sel, kChunk)
				}}
			}}
		}
		return q, true
	})
}

// foldRoPEJoined folds RoPEQK(q, k, pos, invFreq) without norms into the
// queued joined GEMM whose first two outputs are q and k (and the third,
// if any, v), and reports whether it did: the split becomes rope_cols
// (kernels.Ops.RoPECols), the bits of split_cols then rope_qk, one launch
// and one round trip of q and k less (decode-step.md v19). A KV cache's
// attention op queued next may in turn fold onto it (ropekv.go).
func (b *Backend) foldRoPEJoined(q, k, pos *tensor, invFreq cuda.DevicePtr, half int) bool {
	return b.foldJoined(func(l *joinedLaunch) (queuedOp, bool) {
		D := 2 * half
		if len(l.groups) < 2 || l.groups[0].Y != q.ptr || l.groups[1].Y != k.ptr ||
			l.groups[0].N%D != 0 || l.groups[1].N%D != 0 {
			return queuedOp{}, false
		}
		qo, ko := cols(l.groups[0]), cols(l.groups[1])
		var vo kernels.ColsOut
		if len(l.groups) == 3 {
			vo = cols(l.groups[2])
		}
		p := pos.ptr
		key := l.key(u64(p), u64(invFreq), u64(half))
		q := queuedOp{op: "LinearGroup(joined)+RoPEQK", key: key, f: func(c *cuda.Ctx) error {
			if err := l.gemm(b, c); err != nil {
				return err
			}
			return b.ops.RoPECols(c, b.stream, l.y, p, invFreq, l.T, half, qo, ko, vo)
		}}
		if !b.opts.NoRoPEAppend && vo.Y != 0 {
			// A KV cache's append queued next may take q, k and v from
			// the GEMM's output instead (ropekv.go).
			q.rope = &ropeJoined{l: l, q: qo, k: ko, v: vo, pos: p, invFreq: invFreq, half: half, key: key}
		}
		return q, true
	})
}

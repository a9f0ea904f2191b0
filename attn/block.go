package attn

import (
	"math"
	"sync"

	"github.com/bitdecode/bitdecode/kv"
)

// This file is one worker's pass over a run of blocks of one sequence and
// one KV head, for the R = Group·Tq query rows that share them: for each
// block (Nr packed tokens, or the fp16 residual) it
//
//  1. turns the K half into rows the score kernels read: float32 for float
//     formats; byte codes for integer ones (int8 codes are read in place);
//  2. computes the R rows of scores, folding the scales out of the inner
//     loop: per-channel keys (KC) scale the query by the group's scales and
//     add Σ q·z once per row; per-token keys with one group (KT, G = D)
//     apply s_t and z_t·Σq to each token's dot product. With AVX-512 VNNI
//     the dot products of integer keys are int8 (VPDPBUSD): the folded
//     query is quantized to int8 per row and per key group (per block for
//     KT), step a = max|q|/127, so each score carries an error of at most
//     (a/2)·Σ_c code_c besides float32 rounding (see quantizeQuery);
//  3. runs the online softmax (running max, rescale, vector exp);
//  4. adds the probabilities times the V rows to the accumulators: float V
//     as is, integer V as codes weighted by p·s_t, and Σ p·z_t per group
//     into a second accumulator that finish adds back.
//
// Every block's weighted sum is formed apart and then added to the running
// accumulators, which keeps the float32 rounding of a long sequence near
// (Nr + L/Nr)·eps.

// prefetchMaxBytes is the largest block (one KV head) that is prefetched
// whole into L2 while the previous one is computed: measured (int4 -11%,
// int2 -5% per step at (1,32K)); fp16 blocks (64 KB) gained nothing.
const prefetchMaxBytes = 32 << 10

// The integer kernels' shapes (kernels_avx512_amd64.s): rows of byte codes
// in whole 64-byte vectors (packed int4 rows: whole vectors too, so D a
// multiple of 128), 16 tokens per step of the four-row kernels, and value
// groups of at least 64 channels for pvI4 (one weight per 64 channels).
const (
	zmmBytes     = 64
	x4Tokens     = 16
	pvI4MinGroup = 64
)

// minGroup is the smallest group size of an integer format (kv.ValidGroups).
const minGroup = 32

// worker holds one goroutine's scratch buffers.
type worker struct {
	p    Params
	k    *kernels
	r    int // query rows per KV head: Group·Tq
	d    int
	nr   int // Nr
	npad int // Nr rounded up to TileTokens

	q      []float32  // [R][D] scaled (and rotated) queries of the current head
	qs     []float32  // [R][D] queries times key scales (KC)
	qi     []int8     // [R][D] quantized queries (VNNI), or their high halves
	qlo    []int8     // [R][D] low halves of 15-bit quantized queries (int8 keys)
	qb4    []int8     // [rows4(R)][4·D] qi's 16-byte chunks repeated in four lanes
	qlo4   []int8     // [rows4(R)][4·D] the same for qlo
	ab     [8]float32 // rowGroup's fold parameters (a local array passed to a kernel escaped: a heap allocation per call)
	qa     []float32  // [R] quantization steps of qi
	qb     []float32  // [R] per-row bias: Σ q·z (KC) or Σ q (KT)
	scores []float32  // [rows4(R)][npad] (the padding rows take scoresU8x4's unused outputs); cap: twice that
	scoreB []float32  // the second block's scores of run's pair path: the rows after scores' [rows4(R)][npad]
	resc   []float32  // [R] the second block's rescale factors of the pair path (1: none)
	kf, vf []float32  // [npad][D] float K / V rows (or codes as float32)
	ku8    []uint8    // [npad][D] K codes
	vu8    []uint8    // [npad][D] V codes
	ones   []float32  // [npad] 1
	zeros  []float32  // [npad] 0
	ps, pz []float32  // [npad] per-token scale and zero of one group
	gs, gz []float32  // [D] per-channel scale and zero of one key group (KC)
	pf     []float32  // fp16 (scale, zero) pairs of a block or key group as float32
	zs     []float32  // [V groups][npad] per-token zeros of V
	vs     []float32  // [V groups][npad] per-token scales of V
	wq     []int16    // [rows4(R)][V groups][npad] quantized PV weights
	wq8    []uint8    // [2·rows4(R)][V groups][npad] u8 PV weights (pvU8; the pair path's second block after the first)
	delta  []float32  // [2·rows4(R)] steps of wq
	zsum   []float32  // [2R][V groups] Σ p·z of one run
	sw     []float32  // [2R][V groups] Σ p·s of one run (softmaxU8's scratch)
	mrow   []float32  // [2R] the running max each row's exp subtracts (softmaxU8; +Inf: no visible token yet)
	lsum   []float32  // [2R] Σ p of one run (softmaxU8)
	rmax   []float32  // [rows4(R)] the rows' maxima of one block's scores (max4)
	vgrps  int        // value groups per row of an integer V half (D / V group), set by run
	vshift int        // log2 of the channels per value group, rounded up (the PV kernels' gshift), set by run
	expU8  bool       // this block's exp runs in softmaxU8, fused with the u8 weights' quantization
	onesD  []float32  // [D] 1
	hpad   []uint16   // the residual's last fp16 rows, padded to a tile
	spare  []float32  // [npad] the unused second output of an odd row
	capE   []float32  // [npad] exp(−2|s/c|) of one row of soft-capped scores (softcapRow)
	limits []int      // [R] last visible token of each row
	firsts []int      // [R] first visible token of each row (sliding window; else 0)
	out    []float32  // [D] one output row of mergeHead
	qReady bool       // qi, qa, qb hold the unscaled query's quantization (KT)
	i4     bool       // this block's int4 keys are scored from the packed nibbles
	i2     bool       // this block's int2 keys are scored from the packed rows (VBMI)
	packed []byte     // the packed int4 or int2 K rows of the block (i4, i2)
	nextK  []byte     // the next block's K half, prefetched by the int4 score kernel
	nextV  []byte     // the next block's V half, prefetched by the int4 PV kernel
	follow []byte     // the first block (this head's bytes) of the task likely to follow, or nil
	// The padded width (v82, pad.go): with pad, p is the Params at the
	// padded width d, and sf and sd are the format and head dim the
	// sequence stores (the blocks' addresses, the residual's rows).
	pad  bool
	sf   kv.Format
	sd   int
	pblk []byte   // two scratch blocks of p.Format (padK, padV)
	rpad []uint16 // [Nr][d] the residual's rows at the padded width
}

// workerPool keeps workers (their scratch) between calls.
var workerPool sync.Pool

// getWorker returns a pooled worker whose buffers fit wp, the Params it
// runs (padParams: p, or p at a padded width), or a new one; p is the
// Params the sequences are stored in.
func getWorker(p, wp Params, k *kernels) *worker {
	w, ok := workerPool.Get().(*worker)
	if !ok || w.r != wp.Shape.Group()*wp.Tq || w.d != wp.Shape.D || w.nr != wp.Format.Residual {
		w = newWorker(wp, k)
	}
	w.p, w.k = wp, k
	w.sf, w.sd, w.pad = p.Format, p.Shape.D, p.Shape.D != wp.Shape.D
	return w
}

func newWorker(p Params, k *kernels) *worker {
	r, d, nr := p.Shape.Group()*p.Tq, p.Shape.D, p.Format.Residual
	npad := (nr + TileTokens - 1) / TileTokens * TileTokens
	w := &worker{p: p, k: k, r: r, d: d, nr: nr, npad: npad, sf: p.Format, sd: d,
		q: make([]float32, r*d), qs: make([]float32, r*d), qi: make([]int8, r*d), qlo: make([]int8, r*d),
		qb4: make([]int8, rows4(r)*4*d), qlo4: make([]int8, rows4(r)*4*d),
		qa: make([]float32, r), qb: make([]float32, r),
		scores: make([]float32, 2*rows4(r)*npad), resc: make([]float32, r),
		kf: make([]float32, npad*d), vf: make([]float32, npad*d),
		ku8: make([]uint8, npad*d), vu8: make([]uint8, npad*d),
		ones: make([]float32, npad), zeros: make([]float32, npad),
		ps: make([]float32, npad), pz: make([]float32, npad),
		gs: make([]float32, d), gz: make([]float32, d),
		pf: make([]float32, max(2*npad*(d/minGroup), 2*d)), zs: make([]float32, npad*(d/minGroup)),
		vs: make([]float32, npad*(d/minGroup)), wq: make([]int16, rows4(r)*npad*(d/minGroup)),
		wq8: make([]uint8, 2*rows4(r)*npad*(d/minGroup)), delta: make([]float32, 2*rows4(r)),
		zsum: make([]float32, 2*r*(d/minGroup)), sw: make([]float32, 2*r*(d/minGroup)),
		mrow: make([]float32, 2*r), lsum: make([]float32, 2*r), rmax: make([]float32, rows4(r)),
		onesD: make([]float32, d), spare: make([]float32, npad), limits: make([]int, r), firsts: make([]int, r), out: make([]float32, d)}
	w.scores, w.scoreB = w.scores[:rows4(r)*npad], w.scores[rows4(r)*npad:]
	for i := range w.ones {
		w.ones[i] = 1
	}
	for i := range w.onesD {
		w.onesD[i] = 1
	}
	return w
}

// loadQueries fills w.q with the scaled (rotated) queries of sequence b's
// KV head h.
func (w *worker) loadQueries(q []float32, b, h int) {
	sh, d := w.p.Shape, w.sd // the stored head dim: w.d past it stays zero (padded)
	scale := w.p.scale()
	for row := 0; row < w.r; row++ {
		i, j := row/sh.Group(), row%sh.Group()
		off := ((b*w.p.Tq+i)*sh.Hq + h*sh.Group() + j) * d
		dst := w.q[row*w.d : row*w.d+d]
		copy(dst, q[off:off+d])
		clear(w.q[row*w.d+d : (row+1)*w.d]) // the padded channels (a pooled worker may hold another call's)
		if w.p.Format.Rotate {
			w.k.rotate(dst)
		}
		for c := range dst {
			dst[c] *= scale
		}
	}
}

// run computes the state of tokens [lo, hi) of sequence s, KV head h.
func (w *worker) run(st *state, q []float32, b, h int, s *Seq, lo, hi int) {
	f := &w.p.Format // a pointer: the layouts are not copied per block (v78)
	sf := &w.sf      // the blocks as stored (f itself unless padded)
	w.loadQueries(q, b, h)
	w.qReady = false
	l := s.Len(f.Residual)
	for row := range w.limits {
		w.limits[row] = l - w.p.Tq + row/w.p.Shape.Group()
		w.firsts[row] = w.p.FirstVisible(w.limits[row])
	}
	nr := f.Residual
	// The per-block integers that would take a division, once a task
	// (v77): the value groups and their shift, and the block index, which
	// moves by one with each packed block.
	if v := f.V; v.Elem.IsInt() && v.Group > 0 {
		w.vgrps, w.vshift = w.d/v.Group, 0
		for g := w.d / max(w.vgrps, 1); 1<<w.vshift < g; {
			w.vshift++
		}
	}
	blk := lo / nr
	pair := w.pairPath()
	for t := lo; t < hi; {
		if pair && blk+1 < len(s.Blocks) && t+2*nr <= hi {
			w.runPair(st, s, h, blk, t, hi)
			t += 2 * nr
			blk += 2
			continue
		}
		if blk < len(s.Blocks) {
			base := s.Blocks[blk][h*sf.BlockBytes():]
			// Prefetch the next block where it is small enough to sit in L2
			// beside this one (the integer formats; it did not help fp16):
			// its K half before this block's scores, its V half before the
			// values (A/B in one process: a little better than the whole
			// block at once, int4 7.52 vs 7.73 ms; none 8.37).
			// The next block's K and V halves are prefetched by the integer
			// kernels, a few lines per tile or pair of this block's work
			// (-12% against one PREFETCHT1 burst per half, int4 (1,32K), one
			// thread, A/B in one process), else by one burst per half where
			// the block is small enough to sit in L2 beside this one (fp16
			// blocks are not prefetched: no gain measured).
			w.nextK, w.nextV = nil, nil
			var next []byte
			switch {
			case blk+1 < len(s.Blocks) && t+nr < hi:
				next = s.Blocks[blk+1][h*sf.BlockBytes():]
			case t+nr >= hi:
				next = w.follow // this task's last block: the next task's first
			}
			if w.k.prefetch != nil && next != nil {
				nk, nv := next[:sf.K.Bytes], next[sf.K.Bytes:sf.BlockBytes()]
				small := sf.BlockBytes() <= prefetchMaxBytes
				switch {
				case w.intKeys(&f.K, nr) || (f.K.Elem == kv.FP16 && w.k.scoresHalf2 != nil):
					w.nextK = nk
				case small:
					w.k.prefetch(nk)
				}
				switch {
				case w.intVals(&f.V, nr) || (f.V.Elem == kv.FP16 && w.k.pvHalf != nil && w.r >= 2):
					w.nextV = nv
				case small:
					w.k.prefetch(nv)
				}
			}
			w.blockScores(w.padK(base, 0), nr)
			w.expU8 = w.fusedExpU8(&f.V, nr)
			w.softmax(st, t, nr)
			w.blockValues(st, w.padV(base, 0), nr)
			t += nr
			blk++
			continue
		}
		n := hi - t // residual tokens
		off := h * nr * w.sd
		w.nextK, w.nextV = nil, nil
		w.floatScores(&keySrc{kind: srcHalf, u16: w.padResidual(s.ResK[off:], n)}, n)
		w.expU8 = false
		w.softmax(st, t, n)
		w.halfValues(st, w.padResidual(s.ResV[off:], n), n)
		t += n
	}
	w.channelOrder(st) // the task's states merge and finish in channel order
}

// pairMaxTokens is the most tokens of a pair of blocks on run's pair
// path: int4's two 128-token blocks (one thread in L3 -1.0 cycles a pair,
// level past L3); int2's two 256-token blocks gained in L3 (-0.55) but
// lost past it (+0.15 to +0.4 one thread at (8, 8K)), as four int4 blocks
// a group lost in L3 (docs/perf/cpu-attention.md round 23).
const pairMaxTokens = 256

// pairPath reports whether run takes its blocks two at a time (v80): both
// blocks' scores, one softmaxU8H call of both blocks' rows, then both PVs,
// so that fewer kernels wait on the one right before them and the
// softmax's fixed cost a call is paid once a two blocks; where the values
// take the fused exp with one value group and the rows fill whole groups
// of four.
func (w *worker) pairPath() bool {
	f := &w.p.Format
	return w.k.twoBlocks && w.k.softmaxU8H != nil && w.r%4 == 0 && w.vgrps == 1 &&
		2*f.Residual <= pairMaxTokens && w.fusedExpU8(&f.V, f.Residual)
}

// runPair is run's pass over the packed blocks blk and blk+1 (tokens [t,
// t+2·Nr) of a task ending at hi) on the pair path: both blocks' scores
// (the second's rows in w.scoreB), the first block's softmax, the second's
// maxima with its rescale kept (softmaxNext), then pairValues. Each kernel
// prefetches the half two kernels ahead in the order K_A, K_B, V_A, V_B,
// then the next blocks' halves, as run's one-block loop does in its order.
func (w *worker) runPair(st *state, s *Seq, h, blk, t, hi int) {
	f := &w.sf // the blocks' addresses as stored (padK and padV lay them out)
	nr, bb, kb := f.Residual, f.BlockBytes(), f.K.Bytes
	a, b := s.Blocks[blk][h*bb:], s.Blocks[blk+1][h*bb:]
	var pf [4][]byte // the kernels' prefetches, in their order
	if w.k.prefetch != nil {
		var c, d []byte // the blocks after the pair
		switch {
		case t+2*nr < hi && blk+2 < len(s.Blocks):
			c = s.Blocks[blk+2][h*bb:]
			if t+4*nr <= hi && blk+3 < len(s.Blocks) { // another pair
				d = s.Blocks[blk+3][h*bb:]
			}
		case t+2*nr >= hi:
			c = w.follow // this task's last blocks: the next task's first
		}
		pf[0], pf[1] = a[kb:bb], b[kb:bb]
		switch {
		case d != nil:
			pf[2], pf[3] = c[:kb], d[:kb]
		case c != nil:
			pf[2], pf[3] = c[:kb], c[kb:bb]
		}
	}
	w.expU8 = true
	w.nextK = pf[0]
	w.blockScores(w.padK(a, 0), nr)
	sc := w.scores
	w.scores, w.nextK = w.scoreB, pf[1]
	w.blockScores(w.padK(b, 1), nr)
	w.scores, w.nextK = sc, nil
	w.softmax(st, t, nr)
	w.softmaxNext(st, t+nr, nr)
	w.pairValues(st, w.padV(a, 0), w.padV(b, 1), nr, pf[2], pf[3])
}

// channelOrder puts st's accumulators in channel order where int4 pvU8
// left them in its lane order (unlaneU8), before a kernel that adds in
// channel order and at a task's end.
func (w *worker) channelOrder(st *state) {
	if st.order == accLanes {
		w.k.unlaneU8(st.acc[:cap(st.acc)])
	}
	st.order = accChannels
}

// laneOrder puts st's accumulators in int4 pvU8's lane order before it
// adds to them: nothing to move while they are zero (a task's first
// blocks), laneU8Go where a channel-order kernel wrote them before.
func (w *worker) laneOrder(st *state) {
	if st.order == accChannels {
		laneU8Go(st.acc[:cap(st.acc)])
	}
	st.order = accLanes
}

// tiles rounds n up to whole score tiles.
func tiles(n int) int { return (n + 7) &^ 7 }

// scoreTileFloats is the size of the float32 K rows one score tile
// converts (16 KB, half of L1): every query row's pass over the tile then
// reads it from L1. One pass per row over a whole block of Nr = 128 rows of
// D = 128 (64 KB) streamed it from L2 R times, and the scores cost three
// times as much as the PV of the same FMA count.
const scoreTileFloats = 4096

// Where the float32 K rows of a block come from.
const (
	srcHalf    = iota // fp16 bits
	srcBF16           // bf16 bits
	srcFP8            // fp8 bytes through a table
	srcCodes          // byte codes as float32
	srcDequant        // integer codes dequantized (KT with several groups)
)

// keySrc is one block's K rows before conversion.
type keySrc struct {
	kind  int
	u16   []uint16 // srcHalf, srcBF16
	b     []byte   // srcFP8; the packed half for srcDequant
	codes []uint8  // srcCodes, srcDequant
	lay   kv.TensorLayout
}

// fill converts K rows [t0, t1) of src into w.kf.
func (w *worker) fill(src *keySrc, t0, t1 int) {
	d := w.d
	dst := w.kf[:(t1-t0)*d]
	switch src.kind {
	case srcHalf:
		w.k.cvtHalf(dst, src.u16[t0*d:t1*d])
	case srcBF16:
		w.k.cvtBF16(dst, src.u16[t0*d:t1*d])
	case srcFP8:
		w.k.cvtFP8(dst, src.b[t0*d:t1*d], src.lay.Elem == kv.FP8E4M3)
	case srcCodes:
		w.k.codesF32(dst, src.codes[t0*d:t1*d])
	default:
		w.dequantRows(dst, src.lay, src.b, src.codes, t0, t1)
	}
}

// tiledScores writes the scores of tokens [t0, t1) for every row, tile by
// tile: out[t] = A[t]·(qs_r · k[t]) + bias_r·B[t] (bias nil: 0).
func (w *worker) tiledScores(src *keySrc, t0, t1 int, qs, A, B, bias []float32) {
	d, np := w.d, w.npad
	tile := max(8, scoreTileFloats/d&^7) // whole tiles of 8 (scoresF32 writes tiles(n) outputs)
	for a := t0; a < t1; a += tile {
		e := min(t1, a+tile)
		w.fill(src, a, e)
		for r := 0; r < w.r; r++ {
			var b float32
			if bias != nil {
				b = bias[r]
			}
			w.k.scoresF32(w.scores[r*np+a:r*np+a+tiles(e-a)], qs[r*d:(r+1)*d], w.kf, A[a:], B[a:], 1, b)
		}
	}
}

// halfTileBytes is the tile of fp16 K rows scoresHalf2 reads per pair
// of query rows: 16 KB at D = 128, so the next pair's pass reads L1.
const halfTileBytes = 16 << 10

// floatScores writes the scores of n float K rows.
func (w *worker) floatScores(src *keySrc, n int) {
	if src.kind == srcHalf && w.k.scoresHalf2 != nil {
		w.halfScores(src.u16, n)
		return
	}
	w.tiledScores(src, 0, n, w.q, w.ones, w.zeros, nil)
}

// halfScores scores n fp16 K rows two query rows at a time, converting
// each row chunk once per pair (an odd last row is paired with itself,
// its second output going to w.wts).
func (w *worker) halfScores(k []uint16, n int) {
	d, np := w.d, w.npad
	tile := max(8, halfTileBytes/(2*d)&^7) // whole tiles of 8 rows
	for a := 0; a < n; a += tile {
		e := min(n, a+tile)
		m := tiles(e - a)
		rows := k[a*d:]
		if need := m * d; len(rows) < need { // the residual's last tile: pad from the block's scratch
			rows = w.halfPad(rows[:(e-a)*d], need)
		}
		for r := 0; r < w.r; r += 2 {
			r1, out1 := r, w.spare
			if r+1 < w.r {
				r1, out1 = r+1, w.scores[(r+1)*np+a:]
			}
			var pf []byte // this tile's share of the next block's keys
			if r == 0 && w.nextK != nil {
				share := (len(w.nextK)/64 + (n+tile-1)/tile - 1) / ((n + tile - 1) / tile) * 64
				pf = w.nextK[min(len(w.nextK), a/tile*share):min(len(w.nextK), (a/tile+1)*share)]
			}
			w.k.scoresHalf2(w.scores[r*np+a:r*np+a+m], out1[:m], w.q[r*d:(r+1)*d], w.q[r1*d:(r1+1)*d], rows, pf)
		}
	}
}

// halfPad copies the last rows of a residual block into a scratch of need
// values, zero past them, so a tile reads whole rows of 8 tokens.
func (w *worker) halfPad(rows []uint16, need int) []uint16 {
	if cap(w.hpad) < need {
		w.hpad = make([]uint16, need)
	}
	p := w.hpad[:need]
	copy(p, rows)
	clear(p[len(rows):])
	return p
}

// blockScores writes the scores of the n tokens of a packed K half to w.scores.
func (w *worker) blockScores(k []byte, n int) {
	lay, d := &w.p.Format.K, w.d
	if !lay.Elem.IsInt() {
		src := keySrc{kind: srcFP8, b: k, lay: *lay}
		switch lay.Elem {
		case kv.FP16:
			src = keySrc{kind: srcHalf, u16: bytesU16(k[:2*n*d])}
		case kv.BF16:
			src = keySrc{kind: srcBF16, u16: bytesU16(k[:2*n*d])}
		}
		w.floatScores(&src, n)
		return
	}
	vnni := w.k.vnni
	// int4 keys on the VNNI path are scored from the packed nibbles.
	w.i4 = vnni && lay.Elem == kv.Int4 && w.k.scoresI4x4 != nil && d%zmmBytes == 0 &&
		(lay.Scaling == kv.PerChannel || lay.Group == d)
	// int2 keys with VBMI too: the codes are extracted in the score kernel.
	w.i2 = vnni && lay.Elem == kv.Int2 && w.k.scoresI2x4 != nil && d%zmmBytes == 0 && n%x4Tokens == 0 &&
		(lay.Scaling == kv.PerChannel && lay.Group%x4Tokens == 0 || lay.Group == d)
	var codes []uint8
	if w.i4 || w.i2 {
		w.packed = k[:n*lay.RowBytes]
	} else {
		codes = w.codes(w.ku8, lay, k, n)
	}
	src := keySrc{kind: srcCodes, codes: codes}
	// An int8 query carries as much error as int8 keys themselves
	// (TestQueryQuantVsFormatError): int8 keys get a 15-bit query, split
	// into two int8 halves and two VPDPBUSD passes.
	wide := lay.Elem == kv.Int8
	switch {
	case lay.Scaling == kv.PerChannel:
		// pi is lay.ParamIndex(t0, 0), (t0/Group)·D, moved by D pairs a
		// group (v77: no division per group).
		for t0, pi := 0, 0; t0 < n; t0, pi = t0+lay.Group, pi+lay.D {
			// Fold the group's scales into Q and its zeros into one bias per row.
			if vnni && !wide && w.r%4 == 0 && w.k.foldQuery4H != nil {
				// Every row in a group of four: the fold reads the pairs as
				// stored (round 20).
				o := lay.ParamsOffset + pi*kv.ParamBytes
				w.quantRows4H(bytesU16(k[o : o+kv.ParamBytes*d]))
				w.intScores(codes, t0, lay.Group, w.ones, w.ones, wide)
				continue
			}
			w.paramPairs(w.gs, w.gz, lay, k, pi, d)
			for r := w.quantRows4(w.gs, w.gz, wide); r < w.r; r++ {
				qr, qs := w.q[r*d:(r+1)*d], w.qs[r*d:(r+1)*d]
				if vnni {
					w.quantRow(r, qs, qr, w.gs, w.gz, wide)
				} else {
					_, w.qb[r] = w.k.foldQuery(nil, qs, qr, w.gs, w.gz)
				}
			}
			if vnni {
				w.intScores(codes, t0, lay.Group, w.ones, w.ones, wide)
			} else {
				w.tiledScores(&src, t0, t0+lay.Group, w.qs, w.ones, w.ones, w.qb)
			}
		}
	case lay.Group == d: // per token, one group: s_t·(Q·codes) + z_t·ΣQ
		w.paramPairs(w.ps, w.pz, lay, k, 0, n)
		if !w.qReady { // Σq, and the query quantized once per run
			for r := w.quantRows4(w.onesD, w.onesD, wide); r < w.r; r++ {
				qr, qs := w.q[r*d:(r+1)*d], w.qs[r*d:(r+1)*d]
				if vnni {
					w.quantRow(r, qs, qr, w.onesD, w.onesD, wide)
				} else {
					_, w.qb[r] = w.k.foldQuery(nil, qs, qr, w.onesD, w.onesD)
				}
			}
			w.qReady = true
		}
		if vnni {
			w.intScores(codes, 0, n, w.ps, w.pz, wide)
		} else {
			w.tiledScores(&src, 0, n, w.q, w.ps, w.pz, w.qb)
		}
	default: // per token, several groups: dequantize the rows, then float scores
		src := keySrc{kind: srcDequant, b: k, codes: codes, lay: *lay}
		w.floatScores(&src, n)
	}
}

// wideSteps is the largest 15-bit query code: 127·wideHi, so that the
// high half of a code (code = wideHi·hi + lo) fits an int8 and the low
// half is within [-64, 63].
const (
	wideHi    = 128
	wideSteps = 127 * wideHi
)

// splitQuery quantizes q to 15 bits, q ≈ a·(128·hi + lo), and returns the
// step a = max|q|/wideSteps: |a·(128·hi[c] + lo[c]) - q[c]| <= a/2 (plus
// float32 rounding of q[c]/a).
func splitQuery(hi, lo []int8, q []float32) float32 {
	var amax float32
	for _, x := range q {
		amax = max(amax, abs32(x))
	}
	if !(amax > 0) {
		clear(hi[:len(q)])
		clear(lo[:len(q)])
		return 0
	}
	inv := wideSteps / amax
	for c, x := range q {
		v := int32(math.RoundToEven(float64(x * inv)))
		h := (v + wideHi/2) >> 7 // rounded v/wideHi (wideHi = 1<<7)
		hi[c], lo[c] = int8(h), int8(v-h*wideHi)
	}
	return amax / wideSteps
}

// quantRow folds row r's query with the key group's scales s and zeros z
// (ones for KT) and quantizes it for the integer scores: int8 (qi), or
// 15 bits in two halves (qi, qlo) for int8 keys; the step goes to qa[r],
// Σ q·z to qb[r], and the four-lane copies to qb4/qlo4 when scoresU8x4
// runs.
func (w *worker) quantRow(r int, qs, q, s, z []float32, wide bool) {
	d := w.d
	qi, lo := w.qi[r*d:(r+1)*d], w.qlo[r*d:(r+1)*d]
	if wide {
		_, w.qb[r] = w.k.foldQuery(nil, qs, q, s, z)
		w.qa[r] = w.k.splitQuery(qi, lo, qs)
	} else {
		w.qa[r], w.qb[r] = w.k.foldQuery(qi, qs, q, s, z)
	}
	w.bcastRows(r, 1, wide)
}

// quantRows4 is quantRow for the rows in whole groups of four, with int8
// queries (not wide) where the level folds four rows per call
// (foldQuery4: the same bits as foldQuery per row); it returns the first
// row left to quantRow.
func (w *worker) quantRows4(s, z []float32, wide bool) int {
	if wide || !w.k.vnni || w.k.foldQuery4 == nil {
		return 0
	}
	d, r := w.d, 0
	lay := w.foldLayout()
	for ; r+4 <= w.r; r += 4 {
		w.k.foldQuery4(w.qi[r*d:(r+4)*d], w.qs[r*d:(r+4)*d], w.q[r*d:(r+4)*d], s, z, w.qa[r:r+4], w.qb[r:r+4], w.qb4[4*r*d:4*(r+4)*d], lay)
		if lay == qNone {
			w.bcastRows(r, 4, false)
		}
	}
	return r
}

// quantRows4H is quantRows4 for every row (R a multiple of 4, int8
// queries, foldQuery4H) with the key group's scales and zeros as the d
// fp16 pairs the block stores: the bits of paramPairs then quantRows4.
func (w *worker) quantRows4H(pairs []uint16) {
	d, lay := w.d, w.foldLayout()
	for r := 0; r+4 <= w.r; r += 4 {
		w.k.foldQuery4H(w.qi[r*d:(r+4)*d], w.qs[r*d:(r+4)*d], w.q[r*d:(r+4)*d], pairs, w.qa[r:r+4], w.qb[r:r+4], w.qb4[4*r*d:4*(r+4)*d], lay)
		if lay == qNone {
			w.bcastRows(r, 4, false)
		}
	}
}

// foldLayout is the score kernel's query layout that foldQuery4 writes
// (qNone: bcastRows writes it after the fold).
func (w *worker) foldLayout() qLayout {
	switch {
	case w.d%zmmBytes != 0:
	case w.i4:
		return qI4L // a group of four rows runs scoresI4x4, which reads only these bytes
	case w.i2:
		return qI2
	case w.x4():
		return qU8
	}
	return qNone
}

// bcastRows writes rows r..r+n-1 of the quantized query (and, wide, their
// low halves) in the layout of the four-row score kernel that runs
// (bcastQ4, bcastQ2 or bcastQ), in one call: the layouts place each row's
// d channels at 4·d bytes per row, so n rows are one call on n·d channels.
func (w *worker) bcastRows(r, n int, wide bool) {
	d := w.d
	qi, dst := w.qi[r*d:(r+n)*d], w.qb4[4*r*d:4*(r+n)*d]
	if w.i4 {
		w.k.bcastQ4(dst, qi)
	} else if w.i2 {
		w.k.bcastQ2(dst, qi)
	} else if w.x4() {
		w.k.bcastQ(dst, qi)
		if wide {
			w.k.bcastQ(w.qlo4[4*r*d:4*(r+n)*d], w.qlo[r*d:(r+n)*d])
		}
	}
}

// intKeys reports whether a block's keys are scored by the four-row
// integer kernels (which prefetch w.nextK as they go).
func (w *worker) intKeys(lay *kv.TensorLayout, n int) bool {
	return w.k.vnni && lay.Elem.IsInt() && (lay.Scaling == kv.PerChannel || lay.Group == w.d) &&
		w.x4() && n%x4Tokens == 0 && (lay.Scaling != kv.PerChannel || lay.Group%x4Tokens == 0)
}

// intVals reports whether a block's values run the integer PV (which
// prefetches w.nextV as it goes).
func (w *worker) intVals(lay *kv.TensorLayout, n int) bool {
	return lay.Elem.IsInt() && w.k.pvS16 != nil && w.d%zmmBytes == 0 && n%x4Tokens == 0 && pow2(lay.Group)
}

// pow2 reports whether a value group of g channels is a power of two, as
// the integer PV kernels' group shift (gshift) needs: one group spanning a
// head of 192 channels (kv.WholeHeadGroup) is not, and runs the float PV.
func pow2(g int) bool { return g > 0 && g&(g-1) == 0 }

// x4 reports whether the integer scores run four rows at a time.
func (w *worker) x4() bool { return w.k.scoresU8x4 != nil && w.d%zmmBytes == 0 }

// intScores writes the integer scores of tokens [t0, t0+m) for every row
// from the quantized queries (quantRow): qa[r]·A[t]·(qi·codes) + qb[r]·B[t],
// plus the low halves' pass for int8 keys.
func (w *worker) intScores(codes []uint8, t0, m int, A, B []float32, wide bool) {
	d, np := w.d, w.npad
	hi := float32(1)
	if wide {
		hi = wideHi
	}
	if w.i4 && m%x4Tokens == 0 {
		A, B = A[t0:], B[t0:]
		// The four-row kernel's factors: none (unit) for KC keys.
		A4, B4 := A, B
		if &A[0] == &w.ones[t0] && &B[0] == &w.ones[t0] {
			A4, B4 = nil, nil
		}
		for r0 := 0; r0 < w.r; r0 += 4 {
			ab, pf := w.rowGroup(r0, t0)
			if w.r-r0 <= 2 && w.k.scoresI4x2 != nil { // a group of 2 (or the last two rows)
				w.k.scoresI4x2(w.scores[r0*np+t0:], np, w.qb4[4*r0*d:], w.packed[t0*d/2:], A, B, ab, m, d, 0, pf)
				continue
			}
			if w.r-r0 == 3 && w.k.scoresI4x3 != nil { // the last three rows (v87)
				w.k.scoresI4x3(w.scores[r0*np+t0:], np, w.qb4[4*r0*d:], w.packed[t0*d/2:], A4, B4, ab, m, d, 0, pf)
				continue
			}
			w.k.scoresI4x4(w.scores[r0*np+t0:], np, w.qb4[4*r0*d:], w.packed[t0*d/2:], A4, B4, ab, m, d, 0, pf)
		}
		return
	}
	if w.i2 { // m a multiple of x4Tokens (blockScores checks)
		A, B = A[t0:], B[t0:]
		if &A[0] == &w.ones[t0] && &B[0] == &w.ones[t0] { // KC keys: the kernel's unit factors
			A, B = nil, nil
		}
		for r0 := 0; r0 < w.r; r0 += 4 {
			ab, pf := w.rowGroup(r0, t0)
			if w.r-r0 == 3 && w.k.scoresI2x3 != nil { // the last three rows (v87)
				w.k.scoresI2x3(w.scores[r0*np+t0:], np, w.qb4[4*r0*d:], w.packed[t0*d/4:], A, B, ab, m, d, 0, pf)
				continue
			}
			w.k.scoresI2x4(w.scores[r0*np+t0:], np, w.qb4[4*r0*d:], w.packed[t0*d/4:], A, B, ab, m, d, 0, pf)
		}
		return
	}
	if w.x4() && m%x4Tokens == 0 {
		for r0 := 0; r0 < w.r; r0 += 4 {
			ab, pf := w.rowGroup(r0, t0)
			for i := range 4 {
				ab[i] *= hi
			}
			out := w.scores[r0*np+t0:]
			w.k.scoresU8x4(out, np, w.qb4[4*r0*d:], codes[t0*d:], A[t0:], B[t0:], ab, m, d, 0, pf)
			if wide {
				for i := range 4 {
					ab[i], ab[4+i] = 0, 0
					if r := r0 + i; r < w.r {
						ab[i] = w.qa[r]
					}
				}
				w.k.scoresU8x4(out, np, w.qlo4[4*r0*d:], codes[t0*d:], A[t0:], B[t0:], ab, m, d, 1, nil)
			}
		}
		return
	}
	for r := 0; r < w.r; r++ {
		out := w.scores[r*np+t0 : r*np+t0+tiles(m)]
		w.k.scoresU8(out, w.qi[r*d:(r+1)*d], codes[t0*d:], A[t0:], B[t0:], hi*w.qa[r], w.qb[r], 0)
		if wide {
			w.k.scoresU8(out, w.qlo[r*d:(r+1)*d], codes[t0*d:], A[t0:], B[t0:], w.qa[r], 0, 1)
		}
	}
}

// rowGroup returns the score kernels' fold parameters of rows r0..r0+3
// (qa, then qb; zeros past the last row) and the next block's lines to
// prefetch, which go with the first row group of the block's first tile.
// ab is w.ab, valid until the next call.
func (w *worker) rowGroup(r0, t0 int) (ab []float32, pf []byte) {
	ab = w.ab[:]
	clear(ab)
	for i := range 4 {
		if r := r0 + i; r < w.r {
			ab[i], ab[4+i] = w.qa[r], w.qb[r]
		}
	}
	if r0 == 0 && t0 == 0 {
		pf = w.nextK // spread over the first group's (or the block's) tiles
	}
	return ab, pf
}

// params converts the fp16 (scale, zero) pairs from pair p0 on, len(dst)/2
// of them, to float32.
func (w *worker) params(dst []float32, lay *kv.TensorLayout, src []byte, p0 int) {
	o := lay.ParamsOffset + p0*kv.ParamBytes
	w.k.cvtHalf(dst, bytesU16(src[o:o+2*len(dst)]))
}

// cvtPairsStep is the pairs cvtPairs converts per step (n a multiple of it).
const cvtPairsStep = 16

// paramPairs converts the n fp16 (scale, zero) pairs from pair p0 on to
// float32 scales s and zeros z: in one pass where the level has cvtPairs,
// else through w.pf.
func (w *worker) paramPairs(s, z []float32, lay *kv.TensorLayout, src []byte, p0, n int) {
	if w.k.cvtPairs != nil && n%cvtPairsStep == 0 {
		o := lay.ParamsOffset + p0*kv.ParamBytes
		w.k.cvtPairs(s[:n], z[:n], bytesU16(src[o:o+4*n]))
		return
	}
	w.params(w.pf[:2*n], lay, src, p0)
	w.k.deinterleave(s, z, w.pf[:2*n])
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// codes returns the n rows of byte codes of a packed integer half: int8
// data as stored, int4 and int2 unpacked into dst.
func (w *worker) codes(dst []uint8, lay *kv.TensorLayout, src []byte, n int) []uint8 {
	data := src[:n*lay.RowBytes]
	switch lay.Elem {
	case kv.Int4:
		w.k.unpack4(dst, data)
	case kv.Int2:
		w.k.unpack2(dst, data)
	default:
		return data
	}
	return dst
}

// floatRows converts the n rows of a float-typed packed half to float32.
func (w *worker) floatRows(dst []float32, lay kv.TensorLayout, src []byte, n int) {
	m := n * w.d
	switch lay.Elem {
	case kv.FP16:
		w.k.cvtHalf(dst[:m], bytesU16(src[:2*m]))
	case kv.BF16:
		w.k.cvtBF16(dst[:m], bytesU16(src[:2*m]))
	default:
		w.k.cvtFP8(dst[:m], src[:m], lay.Elem == kv.FP8E4M3)
	}
}

// dequantRows writes the dequantized rows [t0, t1) of an integer half with
// several per-token groups (the kv reference's two roundings, s·code then
// + z).
func (w *worker) dequantRows(dst []float32, lay kv.TensorLayout, src []byte, codes []uint8, t0, t1 int) {
	d, g := w.d, lay.Group
	for t := t0; t < t1; t++ {
		for c0 := 0; c0 < d; c0 += g {
			s, z := lay.Param(src, lay.ParamIndex(t, c0))
			sf, zf := fp16ToF32[s], fp16ToF32[z]
			row := dst[(t-t0)*d+c0 : (t-t0)*d+c0+g]
			for c, x := range codes[t*d+c0 : t*d+c0+g] {
				row[c] = float32(sf*float32(x)) + zf
			}
		}
	}
}

// softmax masks the scores of tokens [t0, t0+n) (past each row's last
// visible token, and before its first under a sliding window), updates the running max
// and denominator, rescales the accumulators, and turns w.scores into the
// unnormalized probabilities exp(score - m) (0 past n). With w.expU8 the
// exp and the denominator's sum are left to softmaxU8 (intValuesU8),
// which subtracts w.mrow.
func (w *worker) softmax(st *state, t0, n int) {
	np := w.npad
	end := w.maskMax(w.scores, t0, n)
	for r := 0; r < w.r; r++ {
		sc := w.scores[r*np : r*np+end]
		m := max(st.m[r], w.rmax[r])
		if math.IsInf(float64(m), -1) {
			clear(sc)
			w.mrow[r] = float32(math.Inf(1)) // every exp 0
			continue
		}
		// The rescale by a = exp(m_old - m); none while m_old is -Inf (no
		// visible token yet): a would be 0 and l, acc and zacc are still
		// zeros, which a product by +0 leaves as they are (v59).
		if m != st.m[r] && !math.IsInf(float64(st.m[r]), -1) {
			w.rescale(st, r, exp32(st.m[r]-m))
		}
		st.m[r] = m
		if w.expU8 {
			w.mrow[r] = m
			continue
		}
		st.l[r] += w.k.expSub(sc, m)
	}
}

// maskMax soft-caps the visible scores where p.Softcap asks, masks the
// scores sc (rows at stride w.npad) of tokens [t0, t0+n) past each row's
// last visible token and before its first, puts the rows' maxima in
// w.rmax, and returns n rounded up to whole tiles.
func (w *worker) maskMax(scores []float32, t0, n int) int {
	np := w.npad
	ninf := float32(math.Inf(-1))
	end := (n + TileTokens - 1) / TileTokens * TileTokens
	if w.p.Softcap != 0 {
		w.softcapRows(scores, t0, n)
	}
	for r := 0; r < w.r; r++ {
		sc := scores[r*np : r*np+end]
		vis := min(n, max(0, w.limits[r]-t0+1)) // visible tokens of this row
		for t := vis; t < end; t++ {
			sc[t] = ninf
		}
		for t := range min(vis, w.firsts[r]-t0) { // before the row's window
			sc[t] = ninf
		}
	}
	if w.k.max4 != nil && end > 0 { // the rows' maxima four rows a call (the padding rows' are not read)
		for r := 0; r < w.r; r += 4 {
			w.k.max4(w.rmax[r:r+4], scores[r*np:], np, end)
		}
	} else {
		for r := 0; r < w.r; r++ {
			w.rmax[r] = w.k.maxF32(scores[r*np : r*np+end])
		}
	}
	return end
}

// softcapRows soft-caps each row's visible scores of tokens [t0, t0+n)
// (whole tiles of them; the rest are masked next) in place, after the
// scale and before the mask, as transformers orders it. A pass of its own
// before maskMax's loop, which stays as it was without a cap.
func (w *worker) softcapRows(scores []float32, t0, n int) {
	np := w.npad
	for r := 0; r < w.r; r++ {
		if vis := min(n, max(0, w.limits[r]-t0+1)); vis > 0 {
			w.softcapRow(scores[r*np : r*np+(vis+TileTokens-1)/TileTokens*TileTokens])
		}
	}
}

// softcapRow soft-caps one row of scores in place (Params.Softcap c:
// c·tanh(s/c)), len(sc) a multiple of TileTokens: tanh32's arithmetic with
// its exp32(−2|s/c|) from the level's vector expSub over the row at once
// (within expRelErr of exp32, as tanhRelErr assumes), so that the scalar
// loops around it hold no exp.
func (w *worker) softcapRow(sc []float32) {
	c := w.p.Softcap
	inv := 1 / c
	if w.k.softcap != nil {
		w.k.softcap(sc, c, inv)
		return
	}
	if cap(w.capE) < len(sc) {
		w.capE = make([]float32, max(w.npad, len(sc)))
	}
	e := w.capE[:len(sc)]
	for i, s := range sc {
		e[i] = -2 * abs32(s*inv)
	}
	w.k.expSub(e, 0)
	for i, s := range sc {
		x := s * inv
		if ax := abs32(x); ax < tanhSeriesMax || x != x {
			sc[i] = c * tanh32(x) // the series (or NaN), as tanh32 computes it
			continue
		}
		t := (1 - e[i]) / (1 + e[i])
		if x < 0 {
			t = -t
		}
		sc[i] = c * t
	}
}

// rescale multiplies row r's denominator, accumulators and zeros' sums by
// a (the online softmax's exp(m_old - m)).
func (w *worker) rescale(st *state, r int, a float32) {
	d := st.d
	st.l[r] *= a
	w.k.scaleF32(st.acc[r*d:(r+1)*d], a)
	for c := range st.zacc[r*st.vgroups : (r+1)*st.vgroups] {
		st.zacc[r*st.vgroups+c] *= a
	}
}

// softmaxNext is softmax for the pair path's second block (its scores in
// w.scoreB, tokens [t0, t0+n), the fused exp): the masks, the maxima and
// the running max now (its exp's m in w.mrow[R:2R]), the rescale's
// factors kept in w.resc (1: none, which leaves the same bits as a
// product by 1) for pairValues to apply after the first block's PV, where
// softmax would have applied them.
func (w *worker) softmaxNext(st *state, t0, n int) {
	np := w.npad
	end := w.maskMax(w.scoreB, t0, n)
	for r := 0; r < w.r; r++ {
		w.resc[r] = 1
		m := max(st.m[r], w.rmax[r])
		if math.IsInf(float64(m), -1) {
			clear(w.scoreB[r*np : r*np+end])
			w.mrow[w.r+r] = float32(math.Inf(1)) // every exp 0
			continue
		}
		if m != st.m[r] && !math.IsInf(float64(st.m[r]), -1) {
			w.resc[r] = exp32(st.m[r] - m)
		}
		st.m[r] = m
		w.mrow[w.r+r] = m
	}
}

// pairValues is blockValues for the pair path's two blocks (V halves vA and
// vB of n tokens, one value group, the fused exp): one softmaxU8H call of
// both blocks' 2R rows, then the first block's sums and PV, the second's
// rescale (w.resc), sums and PV: the operations of two blockValues calls
// in their order, so the same bits (v80). pfA and pfB are the halves the
// two blocks' PV calls prefetch.
func (w *worker) pairValues(st *state, vA, vB []byte, n int, pfA, pfB []byte) {
	lay, d, np, R := &w.p.Format.V, w.d, w.npad, w.r
	bits := lay.Elem.Bits()
	if bits == 4 && w.k.unlaneU8 != nil {
		w.laneOrder(st)
	} else {
		w.channelOrder(st)
	}
	mid := float32(int(1)<<bits-1) / 2
	o := lay.ParamsOffset // ParamIndex(t, 0) = t with one group
	pa, pb := bytesU16(vA[o:o+kv.ParamBytes*n]), bytesU16(vB[o:o+kv.ParamBytes*n])
	w.k.softmaxU8H(w.wq8, np, w.scores[:2*R*np], np, w.mrow, pa, pb, n, 2*R, mid, w.delta, w.zsum, w.lsum, w.sw)
	for i, v := range [2][]byte{vA, vB} {
		r0, pf := i*R, pfA
		if i == 1 {
			pf = pfB
			for r, a := range w.resc[:R] {
				if a != 1 {
					w.rescale(st, r, a)
				}
			}
		}
		for r, l := range w.lsum[r0 : r0+R] {
			st.l[r] += l
		}
		for r, z := range w.zsum[r0 : r0+R] { // one group: row r's sum
			st.zacc[r] += z
		}
		for r := 0; r < R; r += 4 {
			w.k.pvU8(st.acc[r*d:cap(st.acc)], d, w.delta[r0+r:], w.wq8[(r0+r)*np:], np, np, v[:n*lay.RowBytes], n, d, w.vshift, bits, 4, pf)
			pf = nil // spread over the first call's quads
		}
	}
}

// fusedExpU8 reports whether a block's exp runs in softmaxU8 with its
// weights' quantization: values on the pvU8 path, at a level with the
// fused kernel.
func (w *worker) fusedExpU8(lay *kv.TensorLayout, n int) bool {
	return w.k.softmaxU8 != nil && w.u8Vals(lay) && w.intVals(lay, n)
}

// pv adds the weights w (rows at stride w.npad) times the n rows of v
// (channels [c0, c0+cols) of rows of D) to the rows' accumulators.
func (w *worker) pv(st *state, wts []float32, v []float32, n, c0, cols int) {
	w.channelOrder(st)
	d, np := w.d, w.npad
	for r := 0; r < w.r; r += 4 {
		rows := min(4, w.r-r)
		w.k.pvF32(st.acc[r*d+c0:], d, wts[r*np:], np, v[c0:], d, n, rows, cols)
	}
}

// floatValues accumulates the n float V rows in w.vf weighted by w.scores.
func (w *worker) floatValues(st *state, n int) {
	w.pv(st, w.scores, w.vf, n, 0, w.d)
}

// halfValues accumulates n fp16 V rows weighted by w.scores.
func (w *worker) halfValues(st *state, v []uint16, n int) {
	w.channelOrder(st)
	if w.k.pvHalf == nil {
		w.k.cvtHalf(w.vf[:n*w.d], v[:n*w.d])
		w.floatValues(st, n)
		return
	}
	d, np := w.d, w.npad
	for r := 0; r < w.r; r += 4 {
		var pf []byte
		if r == 0 {
			pf = w.nextV // the next block's values, two lines per token
		}
		w.k.pvHalf(st.acc[r*d:], d, w.scores[r*np:], np, v, d, n, min(4, w.r-r), d, pf)
	}
}

// blockValues accumulates the packed V half of a block weighted by w.scores.
func (w *worker) blockValues(st *state, v []byte, n int) {
	lay, d, np := &w.p.Format.V, w.d, w.npad
	if lay.Elem == kv.FP16 {
		w.halfValues(st, bytesU16(v[:2*n*d]), n)
		return
	}
	if !lay.Elem.IsInt() {
		w.floatRows(w.vf, *lay, v, n)
		w.floatValues(st, n)
		return
	}
	groups := w.vgrps // d / lay.Group (run)
	end := (n + TileTokens - 1) / TileTokens * TileTokens
	if w.intVals(lay, n) {
		if w.u8Vals(lay) {
			// One group on the fused path: softmaxU8H converts the pairs
			// as stored (v79); else the floats first.
			var pairs []uint16
			if groups == 1 && w.expU8 && w.k.softmaxU8H != nil {
				o := lay.ParamsOffset // ParamIndex(t, 0) = t with one group
				pairs = bytesU16(v[o : o+kv.ParamBytes*n])
			} else {
				w.valueParams(v, n, groups)
			}
			w.intValuesU8(st, v[:n*lay.RowBytes], pairs, n, groups, w.vshift, lay.Elem.Bits())
			return
		}
		gshift := w.valueParams(v, n, groups)
		if lay.Elem == kv.Int4 && w.k.pvI4 != nil && lay.Group >= pvI4MinGroup {
			w.intValues(st, nil, v[:n*lay.RowBytes], n, groups, gshift) // the packed nibbles as stored
		} else {
			w.intValues(st, w.codes(w.vu8, lay, v, n), nil, n, groups, gshift)
		}
		return
	}
	if w.k.pvCodes != nil && w.r == 1 {
		w.codeValues(st, v, n, groups)
		return
	}
	w.params(w.pf[:2*n*groups], lay, v, 0)
	codes := w.codes(w.vu8, lay, v, n)
	w.k.dequantV(w.vf, w.zs, np, codes, w.pf, n, d, lay.Group)
	w.pv(st, w.scores, w.vf, n, 0, d)
	for j := 0; j < groups; j++ {
		z := w.zs[j*np : j*np+end]
		clear(z[n:])
		for r := 0; r < w.r; r++ {
			st.zacc[r*groups+j] += w.k.dotF32(w.scores[r*np:r*np+end], z)
		}
	}
}

// codeValues is the PV of integer values for one query row (w.r == 1:
// a decode step of MHA, Phi-3-mini's) where the integer PV kernels do not
// run (D not a multiple of 64, or a value group that is not a power of
// two): per group, the weights p_t·s_t times the byte codes (pvCodes, no
// float32 copy of the block; int4 from its packed rows, pvNib4), and Σ p·z
// into the zeros' accumulator (docs/perf/cpu-attention.md v67, v68).
// Several rows keep dequantV and pvF32,
// which read the dequantized rows once for four rows.
func (w *worker) codeValues(st *state, v []byte, n, groups int) {
	w.channelOrder(st)
	lay, d, np := &w.p.Format.V, w.d, w.npad
	end := (n + TileTokens - 1) / TileTokens * TileTokens
	w.valueParams(v, n, groups)
	g, wts := lay.Group, w.ps[:n]
	// int4 rows are read as stored (pvNib4, v68) where each group is whole
	// 32-channel chunks; other widths are unpacked to bytes first.
	nib := lay.Elem == kv.Int4 && w.k.pvNib4 != nil && g%32 == 0
	var codes []uint8
	if !nib {
		codes = w.codes(w.vu8, lay, v, n)
	}
	for j := 0; j < groups; j++ {
		s, z := w.vs[j*np:j*np+n], w.zs[j*np:j*np+end]
		clear(z[n:])
		for t, p := range w.scores[:n] {
			wts[t] = p * s[t]
		}
		if nib {
			w.k.pvNib4(st.acc[j*g:], wts, v[j*g/2:n*lay.RowBytes], lay.RowBytes, n, g)
		} else {
			w.k.pvCodes(st.acc[j*g:], wts, codes[j*g:], d, n, g)
		}
		st.zacc[j] += w.k.dotF32(w.scores[:end], z)
	}
}

// valueParams converts the block's n·groups value (scale, zero) pairs of
// the V half v into w.vs and w.zs, group-major with stride w.npad, and
// returns log2 of the channels per group (the PV kernels' gshift, w.vshift:
// groups is w.vgrps).
func (w *worker) valueParams(v []byte, n, groups int) (gshift int) {
	np, lay := w.npad, &w.p.Format.V
	switch {
	case groups == 1:
		w.paramPairs(w.vs, w.zs, lay, v, 0, n)
	case (groups == 2 || groups == 4) && n%TileTokens == 0:
		// The pairs [t][j] as two arrays of n·groups (w.vf: no float V rows
		// on these paths), then each split by group with deinterleave:
		// vector kernels instead of the loop below's scalar moves
		// (round 24: ~6-12 cycles a pair at D 256's two groups).
		s, z := w.vf[:n*groups], w.vf[n*groups:2*n*groups]
		w.paramPairs(s, z, lay, v, 0, n*groups)
		w.splitGroups(w.vs, s, n, groups)
		w.splitGroups(w.zs, z, n, groups)
	default:
		w.params(w.pf[:2*n*groups], lay, v, 0)
		for t := 0; t < n; t++ {
			for j := 0; j < groups; j++ {
				w.vs[j*np+t], w.zs[j*np+t] = w.pf[2*(t*groups+j)], w.pf[2*(t*groups+j)+1]
			}
		}
	}
	return w.vshift
}

// splitGroups writes src[t·groups+j] (t < n, groups 2 or 4) to
// dst[j·npad+t]: one deinterleave for two groups, three for four (the
// even groups' and the odd groups' values through w.pf first).
func (w *worker) splitGroups(dst, src []float32, n, groups int) {
	np := w.npad
	if groups == 2 {
		w.k.deinterleave(dst[:n], dst[np:np+n], src[:2*n])
		return
	}
	even, odd := w.pf[:2*n], w.pf[2*n:4*n] // groups 0, 2 and 1, 3, token-major
	w.k.deinterleave(even, odd, src[:4*n])
	w.k.deinterleave(dst[:n], dst[2*np:2*np+n], even)
	w.k.deinterleave(dst[np:np+n], dst[3*np:3*np+n], odd)
}

// intValues is the integer PV of the VNNI path (on byte codes, or on
// packed int4 rows read as stored when packed is not nil): per run of at most
// PVMaxTokens tokens, each row's weights p·s_t are quantized to int16 and
// multiplied with the codes in int32 (pvS16); the zeros go to w.zs. The
// error per output channel is at most (Δ/2)·Σ_t code_t per run, Δ the
// row's step (see valueQuantTol in the tests).
func (w *worker) intValues(st *state, codes []uint8, packed []byte, n, groups, gshift int) {
	w.channelOrder(st)
	d, np := w.d, w.npad
	ldw := groups * np
	for t0 := 0; t0 < n; t0 += PVMaxTokens {
		tn := min(PVMaxTokens, n-t0)
		// Rows past R keep zero weights and steps (never written).
		w.k.quantWRows(w.wq, ldw, np, w.scores[t0:], np, w.vs[t0:], w.zs[t0:], np, tn, groups, w.r, w.delta, w.zsum)
		for i, z := range w.zsum[:w.r*groups] {
			st.zacc[i] += z
		}
		for r := 0; r < w.r; r += 4 {
			var pf []byte // the next block's values, spread over the first call's pairs
			if r == 0 && t0 == 0 {
				pf = w.nextV
			}
			switch {
			case packed != nil && w.r-r <= 2 && w.k.pvI4x2 != nil: // a group of 2 (or the last two rows)
				w.k.pvI4x2(st.acc[r*d:cap(st.acc)], d, w.delta[r:], w.wq[r*ldw:], ldw, np, packed[t0*d/2:], tn, d, gshift, pf)
			case packed != nil:
				w.k.pvI4(st.acc[r*d:cap(st.acc)], d, w.delta[r:], w.wq[r*ldw:], ldw, np, packed[t0*d/2:], tn, d, gshift, pf)
			default:
				w.k.pvS16(st.acc[r*d:cap(st.acc)], d, w.delta[r:], w.wq[r*ldw:], ldw, np, codes[t0*d:], tn, d, gshift, pf)
			}
		}
	}
}

// u8Vals reports whether a block's integer values run pvU8 (8-bit weights,
// read from the packed int4 or int2 rows): AVX-512 VBMI, groups of at least
// 64 channels. int8 values keep 16-bit weights: their own error is ~16x
// below int4's, so the u8 weights' (~1e-3 RMS in v18's measurement) would
// be a quarter of it, not far below it.
func (w *worker) u8Vals(lay *kv.TensorLayout) bool {
	return w.k.pvU8 != nil && (lay.Elem == kv.Int4 || lay.Elem == kv.Int2) && lay.Group >= pvI4MinGroup
}

// intValuesU8 is intValues with u8 weights (pvU8 on the packed rows):
// per run of at most PVMaxTokens tokens each row's weights w_t = p_t·s_t
// are rounded to steps Δ = max w/255, and the rounding times the codes'
// midpoint m = (2^bits-1)/2 goes to the zeros' sums (quantWRowsU8), so the
// error per output channel is Σ_t (Δ·wq_t - w_t)·(code_t - m), at most
// (Δ/2)·Σ_t |code_t - m| per run (see valueQuantTol in the tests).
// pairs, if not nil, are the one group's fp16 (scale, zero) pairs as
// stored, which softmaxU8H converts (w.vs and w.zs not written: v79).
func (w *worker) intValuesU8(st *state, packed []byte, pairs []uint16, n, groups, gshift, bits int) {
	if bits == 4 && w.k.unlaneU8 != nil {
		w.laneOrder(st)
	} else {
		w.channelOrder(st)
	}
	d, np := w.d, w.npad
	mid := float32(int(1)<<bits-1) / 2
	ldw := groups * np
	for t0 := 0; t0 < n; t0 += PVMaxTokens {
		tn := min(PVMaxTokens, n-t0)
		if w.expU8 { // the exp of the run, Σ p, and the weights
			if pairs != nil {
				w.k.softmaxU8H(w.wq8, ldw, w.scores[t0:], np, w.mrow, pairs[2*t0:], nil, tn, w.r, mid, w.delta, w.zsum, w.lsum, w.sw)
			} else {
				w.k.softmaxU8(w.wq8, ldw, np, w.scores[t0:], np, w.mrow, w.vs[t0:], w.zs[t0:], np, tn, groups, w.r, mid, w.delta, w.zsum, w.lsum, w.sw)
			}
			for r, l := range w.lsum[:w.r] {
				st.l[r] += l
			}
		} else {
			w.k.quantWRowsU8(w.wq8, ldw, np, w.scores[t0:], np, w.vs[t0:], w.zs[t0:], np, tn, groups, w.r, mid, w.delta, w.zsum)
		}
		for i, z := range w.zsum[:w.r*groups] {
			st.zacc[i] += z
		}
		for r := 0; r < w.r; r += 4 {
			var pf []byte // the next block's values, spread over the first call's quads
			if r == 0 && t0 == 0 {
				pf = w.nextV
			}
			rows := 4
			switch w.r - r {
			case 1, 2: // a group of 2 (or the last two rows)
				rows = 2
			case 3: // the last three rows: no zero fourth row's multiplies (v86)
				rows = 3
			}
			w.k.pvU8(st.acc[r*d:cap(st.acc)], d, w.delta[r:], w.wq8[r*ldw:], ldw, np, packed[t0*d*bits/8:], tn, d, gshift, bits, rows, pf)
		}
	}
}

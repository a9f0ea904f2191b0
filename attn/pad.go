package attn

import "github.com/bitdecode/bitdecode/kv"

// A head dim that is not a multiple of 64 (Phi-3's 96, Phi-2's 80) misses
// every four-row integer kernel: they read rows of whole 64-byte vectors
// (packed int4 rows of 128 channels). Instead of slower kernels of its
// own, such a head runs in a padded width Dp (v82, docs/perf/cpu-attention.md
// round 24): each block's K and V halves are copied into a scratch block
// laid out as the same spec resolved at Dp (every packed row followed by
// zero codes, every row of per-channel key pairs by zero pairs), the
// queries and the residual's fp16 rows get zero channels, and the worker
// runs Dp's kernels. A padded channel adds nothing: its query is 0 (every
// score's sum, the KC fold's Σ q·z and its step are those of the D real
// channels) and its value codes are 0 (its outputs, dropped at the end,
// never reach a real one). The cost is the copy (one masked load and store
// a row of 64 bytes) and Dp/D of D's arithmetic.

// padAlign returns the width the four-row integer kernels need: whole
// packed int4 rows of 128 channels (scoresI4x4, pvU8) where a half is
// int4, else whole 64-byte vectors.
func padAlign(f *kv.Format) int {
	if f.K.Elem == kv.Int4 || f.V.Elem == kv.Int4 {
		return 2 * zmmBytes
	}
	return zmmBytes
}

// padParams returns the Params the workers run for p: p itself, or, where
// p's head dim is not a multiple of 64, both halves are integer (and not
// 8-bit rows for one query row) and the kernel set pads (padRows), p at
// the padded width (the format resolved there, the softmax scale of the
// real head dim), and true.
func padParams(p Params, k *kernels) (Params, bool) {
	f, d := &p.Format, p.Shape.D
	if k.padRows == nil || d%zmmBytes == 0 || f.Planes.On || !f.K.Elem.IsInt() || !f.V.Elem.IsInt() {
		return p, false
	}
	if p.Shape.Group()*p.Tq == 1 && (f.K.Elem == kv.Int8 || f.V.Elem == kv.Int8) {
		// One query row (MHA decode) of 8-bit rows: its own path (one-row
		// scores, pvCodes: v67) beat the padded one, whose 8-bit rows copy
		// two 64-byte chunks each (round 24: Phi-3-mini's shape int8 70.9
		// -> 76.9 cycles a pair padded; int4 and int2 gain there, int8 at
		// two rows or more too).
		return p, false
	}
	a := padAlign(f)
	dp := (d + a - 1) / a * a
	fp, err := f.Spec.Resolve(dp)
	if err != nil || fp.Residual != f.Residual || !padCompatible(&f.K, &fp.K) || !padCompatible(&f.V, &fp.V) {
		return p, false
	}
	wp := p
	wp.Format, wp.Shape.D, wp.Scale = fp, dp, p.scale()
	return wp, true
}

// padCompatible reports whether the layout s (the real head dim) maps onto
// d (the padded one) row by row: the same codes and tokens, per-channel
// pairs over the same token groups, per-token pairs in the same channel
// groups or one group spanning each head.
func padCompatible(s, d *kv.TensorLayout) bool {
	if s.Elem != d.Elem || s.Scaling != d.Scaling || s.Tokens != d.Tokens || s.Group != d.Group && (s.Scaling == kv.PerChannel || s.Group != s.D || d.Group != d.D) {
		return false
	}
	_, sp := paramRows(s)
	_, dq := paramRows(d)
	return sp <= dq
}

// paramRows returns the rows of a layout's (scale, zero) pairs and the
// pairs a row: a token group's D channels (per channel), or a token's
// D/Group groups (per token).
func paramRows(l *kv.TensorLayout) (rows, per int) {
	if l.Params == 0 {
		return 0, 0
	}
	if l.Scaling == kv.PerChannel {
		return l.Tokens / l.Group, l.D
	}
	return l.Tokens, l.D / l.Group
}

// padHalf writes the packed half src (layout sl, the real head dim) into
// dst in the layout dl (the padded width): the codes' rows and the pairs'
// rows each followed by zeros. It returns dst's dl.Bytes.
func (w *worker) padHalf(dst []byte, dl, sl *kv.TensorLayout, src []byte) []byte {
	dst = dst[:dl.Bytes]
	w.k.padRows(dst, src, sl.Tokens, sl.RowBytes, dl.RowBytes)
	if rows, sp := paramRows(sl); rows > 0 {
		_, dq := paramRows(dl)
		w.k.padRows(dst[dl.ParamsOffset:], src[sl.ParamsOffset:], rows, sp*kv.ParamBytes, dq*kv.ParamBytes)
	}
	return dst
}

// padSlot returns the worker's scratch block i (0 or 1: the pair path's
// two) of the padded format.
func (w *worker) padSlot(i int) []byte {
	n := w.p.Format.BlockBytes()
	if len(w.pblk) < 2*n {
		w.pblk = make([]byte, 2*n)
	}
	return w.pblk[i*n : (i+1)*n]
}

// padK and padV return block blk's K or V half (base: the block's bytes of
// this KV head as stored) in the layout the worker runs: as stored, or
// copied into scratch slot i at the padded width.
func (w *worker) padK(base []byte, i int) []byte {
	f, sf := &w.p.Format, &w.sf
	if !w.pad {
		return base[:f.K.Bytes]
	}
	return w.padHalf(w.padSlot(i), &f.K, &sf.K, base[:sf.K.Bytes])
}

func (w *worker) padV(base []byte, i int) []byte {
	f, sf := &w.p.Format, &w.sf
	if !w.pad {
		return base[f.K.Bytes : f.K.Bytes+f.V.Bytes]
	}
	return w.padHalf(w.padSlot(i)[f.K.Bytes:], &f.V, &sf.V, base[sf.K.Bytes:sf.K.Bytes+sf.V.Bytes])
}

// padResidual returns n fp16 residual rows (src, the real head dim's rows)
// at the worker's width: src itself, or copied with zero channels.
func (w *worker) padResidual(src []uint16, n int) []uint16 {
	if !w.pad {
		return src[:n*w.d]
	}
	if len(w.rpad) < n*w.d {
		w.rpad = make([]uint16, w.nr*w.d)
	}
	dst := w.rpad[:n*w.d]
	w.k.padRows(u16Bytes(dst), u16Bytes(src[:n*w.sd]), n, 2*w.sd, 2*w.d)
	return dst
}

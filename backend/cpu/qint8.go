package cpu

// int8 weights (groups of 128) multiply by integer dot products on CPUs with
// AVX-512 VNNI, by default (with int4's setting: BITDECODE_CPU_INT4=float
// selects the float packed order of qdot.go for int8, int4 and int3 alike).
// The arithmetic is int4's (qint4.go) with int8's layout:
//
// A group of 128 channels is 32 packed words (package wq: byte f of word l of
// a chunk of 16 words is channel 4l + [0 2 1 3][f] of the chunk's 64). Lane l
// takes word l of both chunks, 8 channels: 4l + [0 2 1 3][f] (the low half)
// and 64 + 4l + [0 2 1 3][f] (the high half). x is permuted once per call so
// that those 8 channels are block l of int4's quantizer (int8XPerm: the low
// half where int4's low nibbles pair, the high half where its high ones do),
// which then gives each block its scale sx = max|x|/32258, the 16-bit codes
// c = rint(x/sx) as two int8 terms (254·q1 + q2) and each group its sum X̂;
// so the x codes of a lane pair byte for byte with the weight bytes that the
// tile loads, and VPDPBUSD multiplies the unsigned 8-bit codes by them
// without unpacking anything. Per row n, over the groups in order,
//
//	D_l   = 254·Σ q·q1 + Σ q·q2                  exact in int32 (|D_l| ≤ 8·255·32258 < 2³¹)
//	acc_l = acc_l + float32(float32(D_l)·float32(s·sx_l))
//	zs    = zs + float32(z·X̂)
//	y     = tree(acc) + zs (+ bias)
//
// as int4's, but float32(D_l) rounds once where int4's is exact (|D_l| may
// pass 2²⁴). The blocks are not contiguous channels (4 here and their 4
// partners 64 channels on), which changes nothing in the bound: an outlier
// coarsens its block's 7 other codes to 2⁻¹⁶ of its value. The work per 128
// weights falls from 40 vector operations of the float order (widen, convert,
// FMA, multiply, add per 16) to about 11, so the GEMV runs at the memory's
// speed. dotInt8Generic is the reference of the tiles int8VNNI_1x4, _1x1 and
// _4x4 (4 tokens, prefill); CPUs without AVX-512 VNNI run int8 on the float
// packed order.

import (
	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/wq"
)

// int8Integer reports whether m takes the integer int8 path here.
func int8Integer(m *wq.Matrix) bool {
	return m.Elem == wq.Int8 && m.Group == int4Group && m.K%int4Group == 0 && cpufeat.VNNI()
}

// int8XPerm maps a group's channels into int4's quantizer order: position
// 8l + j of the permuted group holds channel int8XPerm[8l+j] of the group,
// so that int4's low-nibble bytes of block l (its positions 0, 4, 1, 5) are
// word l's bytes 0..3 in the first chunk, and its high-nibble bytes
// (positions 2, 6, 3, 7) word l's bytes 0..3 in the second.
var int8XPerm = func() (p [int4Group]int) {
	byteChan := [4]int{0, 2, 1, 3} // wq's int8 layout: byte f of word l is channel 4l + byteChan[f]
	lo, hi := [4]int{0, 4, 1, 5}, [4]int{2, 6, 3, 7}
	for l := range dotLanes {
		for f := range 4 {
			p[8*l+lo[f]] = 4*l + byteChan[f]
			p[8*l+hi[f]] = 64 + 4*l + byteChan[f]
		}
	}
	return p
}()

// permuteInt8X writes x (len K) into xp in int8XPerm's order, group by group.
func permuteInt8X(xp, x []float32) {
	for g0 := 0; g0+int4Group <= len(x); g0 += int4Group {
		xg, pg := (*[int4Group]float32)(x[g0:]), (*[int4Group]float32)(xp[g0:])
		for j, ch := range &int8XPerm {
			pg[j] = xg[ch]
		}
	}
}

// dotInt8Generic returns row n's output (bias excluded) for the token tok,
// quantized from the permuted x: the reference of the SIMD tiles.
func dotInt8Generic(tok int4Token, m *wq.Matrix, pz []float32, n int) float32 {
	var acc [dotLanes]float32
	var zs float32
	RW := m.Elem.RowWords(m.K)
	row := m.Words[n*RW : (n+1)*RW]
	for g := 0; g < m.K/int4Group; g++ {
		lo, hi := row[2*g*dotLanes:(2*g+1)*dotLanes], row[(2*g+1)*dotLanes:(2*g+2)*dotLanes]
		q := tok.xq[2*g*int4Group : 2*(g+1)*int4Group]
		sx, X := tok.sx[g*dotLanes:(g+1)*dotLanes], tok.xsum[g]
		s, z := pz[2*(g*m.N+n)], pz[2*(g*m.N+n)+1]
		for l := range dotLanes {
			d := laneSum(lo[l], hi[l], q, l)
			acc[l] += float32(float32(d) * (s * sx[l]))
		}
		zs += float32(z * X)
	}
	return reduceLanes(&acc) + zs
}

// int8Tile computes y[t, n] + bias[n] for t in [t0, t1), n in [n0, n1).
func int8Tile(toks []int4Token, y []float32, m *wq.Matrix, pz, bias []float32, t0, t1, n0, n1 int) {
	N := m.N
	if cpufeat.VNNI() {
		vnniTile(int8VNNI_1x1, int8VNNI_1x4, int8VNNI_4x4, toks, y, m, pz, t0, t1, n0, n1)
	} else {
		for t := t0; t < t1; t++ {
			for n := n0; n < n1; n++ {
				y[t*N+n] = dotInt8Generic(toks[t], m, pz, n)
			}
		}
	}
	addBias(y, bias, N, t0, t1, n0, n1)
}

// qlinearInt8 is qlinear for an int8 weight on the integer path.
func (b *Backend) qlinearInt8(y, x []float32, w *qweight, bias []float32, T int) {
	toks, release := b.quantizeIntRows(x, T, w.m.K, true)
	defer release()
	b.tiles(T, w.m.N, func(t0, t1, n0, n1 int) { int8Tile(toks, y, w.m, w.pz, bias, t0, t1, n0, n1) })
}

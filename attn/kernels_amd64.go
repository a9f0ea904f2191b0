//go:build !purego

package attn

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/kv"
)

// The assembly kernels (kernels_avx512_amd64.s, kernels_avx2_amd64.s) take
// pointers and counts; the wrappers below check the lengths the assembly
// relies on (whole vectors, whole tiles) and panic on a violation, which is
// a bug in this package, never a user error.

//go:noescape
func cvtHalfAVX512(dst *float32, src *uint16, n int)

//go:noescape
func rotateAVX512(x *float32, n int, s float32)

//go:noescape
func cvtBF16AVX512(dst *float32, src *uint16, n int)

//go:noescape
func unpack4AVX512(dst *uint8, src *byte, n int)

//go:noescape
func unpack2AVX512(dst *uint8, src *byte, n int)

//go:noescape
func codesF32AVX512(dst *float32, src *uint8, n int)

//go:noescape
func scoresF32AVX512(out, q, k, A, B *float32, n, d int, a, b float32)

//go:noescape
func scoresU8VNNI(out *float32, q *int8, k *uint8, A, B *float32, n, d int, a, b, c float32)

//go:noescape
func pvF32x4AVX512(acc *float32, ldacc int, w *float32, ldw int, v *float32, ldv, n, cols int)

//go:noescape
func pvF32x1AVX512(acc *float32, w *float32, v *float32, ldv, n, cols int)

//go:noescape
func expSubAVX512(x *float32, n int, m float32) float32

//go:noescape
func maxF32AVX512(x *float32, n int) float32

//go:noescape
func softcapAVX512(x *float32, n int, c, inv float32)

//go:noescape
func dotF32AVX512(a, b *float32, n int) float32

//go:noescape
func scaleF32AVX512(x *float32, n int, a float32)

//go:noescape
func padRowsAVX512(dst, src *byte, n, srcRow, dstRow int)

//go:noescape
func foldQueryAVX512(qi *int8, qs, q, s, z *float32, d int) (a, bias float32)

// qPermPk holds foldQuery4AVX512's VPERMB indices per layout: first the
// order of its packs (channel 16k+4l+i of 64 at byte 16l+4k+i: two
// VPACKSSDW, one VPACKSSWB) back to the channels' (qi), then qPerm's four
// vectors composed with that order (v57); for qI4L one vector, the first
// 16 bytes of each of those four (its lanes, stored 64 bytes apart: v64).
var qPermPk = func() (p [5][5 * zmmBytes]int8) {
	var pk [zmmBytes]int8
	for c := range pk {
		pk[c] = int8(16*(c>>2&3) + 4*(c>>4) + c&3)
	}
	for lay := range p {
		copy(p[lay][:zmmBytes], pk[:])
		for o, c := range qPerm[lay] {
			p[lay][zmmBytes+o] = pk[c]
		}
	}
	const lane = zmmBytes / 4
	clear(p[qI4L][zmmBytes:])
	for v := range 4 {
		for i := range lane {
			p[qI4L][zmmBytes+lane*v+i] = pk[qPerm[qI4L][zmmBytes*v+i]]
		}
	}
	return p
}()

//go:noescape
func foldQuery4AVX512(qi *int8, qs, q, s, z *float32, d int, a, bias *float32, dst *int8, perm *int8, nperm int, pairs int)

//go:noescape
func deinterleaveAVX512(a, b, src *float32, n int)

//go:noescape
func cvtPairsAVX512(a, b *float32, src *uint16, n int)

//go:noescape
func max4AVX512(out *float32, x *float32, ld, n int)

//go:noescape
func dequantVAVX512(dst, z *float32, ldz int, codes *uint8, p *float32, n, d, grp int)

//go:noescape
func pvCodesx1AVX512(acc *float32, w *float32, codes *uint8, ldc, n, cols int)

//go:noescape
func pvNib4x1AVX512(acc *float32, w *float32, packed *byte, ldb, n, cols int)

//go:noescape
func quantWAVX512(wq *int16, ldq int, p, s *float32, lds, n, groups int) float32

//go:noescape
func pvS16VNNI(acc *float32, ldacc int, delta *float32, wq *int16, ldw, ldq int, codes *uint8, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func pvHalfx4AVX512(acc *float32, ldacc int, w *float32, ldw int, v *uint16, ldv, n, cols int, pf *byte, pfLines int)

//go:noescape
func pvHalfx2AVX512(acc *float32, ldacc int, w *float32, ldw int, v *uint16, ldv, n, cols int, pf *byte, pfLines int)

//go:noescape
func pvHalfx1AVX512(acc *float32, w *float32, v *uint16, ldv, n, cols int)

//go:noescape
func splitQueryAVX512(hi, lo *int8, q *float32, d int) float32

//go:noescape
func scoresHalf2AVX512(out0, out1, q0, q1 *float32, k *uint16, n, d int, pf *byte, pfTile int)

//go:noescape
func bcastQ16(dst *int8, q *int8, d int)

//go:noescape
func scoresU8x4VNNI(out *float32, ldo int, q *int8, k *uint8, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)

//go:noescape
func quantWRowsAVX512(wq *int16, ldw, ldq int, p *float32, ldp int, s, z *float32, lds, n, groups, rows int, delta, zsum *float32)

//go:noescape
func bcastQ4(dst *int8, q *int8, d int)

//go:noescape
func scoresI4x4VNNI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)

//go:noescape
func scoresI4x3VNNI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)

//go:noescape
func pvI4VNNI(acc *float32, ldacc int, delta *float32, wq *int16, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func pvU8I4x4VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func pvU8I4x3VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func pvU8I4x2VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func pvU8I2x4VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func pvU8I2x3VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func pvU8I2x2VBMI(acc *float32, ldacc int, delta *float32, wq *uint8, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func u8UnlaneAVX512(acc *float32, n int)

//go:noescape
func quantWRowsU8AVX512(wq *uint8, ldw, ldq int, p *float32, ldp int, s, z *float32, lds, n, groups, rows int, mid float32, delta, zsum *float32)

//go:noescape
func softmaxU8AVX512(wq *uint8, ldw, ldq int, x *float32, ldx int, m, s, z *float32, lds, n, groups, rows int, mid float32, delta, zsum, lsum, sw *float32, pairs int, s2 *float32)

//go:noescape
func unpack2VBMI(dst *uint8, src *byte, n int)

//go:noescape
func bcastQ2(dst *int8, q *int8, d int)

//go:noescape
func scoresI2x4VBMI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)

//go:noescape
func scoresI2x3VBMI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)

//go:noescape
func pvI4x2VNNI(acc *float32, ldacc int, delta *float32, wq *int16, ldw, ldq int, packed *byte, n, d, gshift int, pf *byte, pfLines int)

//go:noescape
func scoresI4x2VNNI(out *float32, ldo int, q *int8, k *byte, A, B, ab *float32, n, d int, c float32, pf *byte, pfTile int)

//go:noescape
func cvtFP8AVX512(dst *float32, src *byte, n int, e4m3 bool)

//go:noescape
func cvtFP8AVX2(dst *float32, src *byte, n int, e4m3 bool)

//go:noescape
func prefetchL2(p *byte, n int)

//go:noescape
func dequantVAVX2(dst, z *float32, ldz int, codes *uint8, p *float32, n, d, grp int)

//go:noescape
func cvtHalfAVX2(dst *float32, src *uint16, n int)

//go:noescape
func toHalfF16C(dst *uint16, src *float32, n int)

//go:noescape
func cvtBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func unpack4AVX2(dst *uint8, src *byte, n int)

//go:noescape
func unpack2AVX2(dst *uint8, src *byte, n int)

//go:noescape
func codesF32AVX2(dst *float32, src *uint8, n int)

//go:noescape
func scoresF32AVX2(out, q, k, A, B *float32, n, d int, a, b float32)

//go:noescape
func pvF32x4AVX2(acc *float32, ldacc int, w *float32, ldw int, v *float32, ldv, n, cols int)

//go:noescape
func pvF32x1AVX2(acc *float32, w *float32, v *float32, ldv, n, cols int)

//go:noescape
func expSubAVX2(x *float32, n int, m float32) float32

//go:noescape
func maxF32AVX2(x *float32, n int) float32

//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

//go:noescape
func softcapAVX2(x *float32, n int, c, inv float32)

// vecLen is the length unit of the element-wise kernels: 16 floats (one
// zmm, two ymm).
const vecLen = 16

// bad reports a kernel called with lengths it does not take.
func bad(kernel string, args ...any) {
	panic(fmt.Sprint(append([]any{"attn: ", kernel, ": bad lengths "}, args...)...))
}

// pairPrefetch returns pf's first line for the kernels that prefetch
// perPair lines per pair of tokens and 64 channels (pvI4 and pvI4x2 one,
// pvS16 two), after prefetching in one burst the lines past those (the
// end of the next block's V half: its params).
func pairPrefetch(pf []byte, n, d, perPair int) *byte {
	if len(pf) == 0 {
		return nil
	}
	if spread := perPair * (n / 2) * (d / 64) * 64; len(pf) > spread {
		prefetchL2(&pf[spread], len(pf)-spread)
	}
	return &pf[0]
}

// pvU8PrefetchLines is the number of lines the pvU8 kernels prefetch per
// four tokens and 64 channels.
const pvU8PrefetchLines = 2

// tilePrefetch splits the lines of pf over tiles: whole lines per tile,
// within pf (none when pf is shorter than a line per tile). A power of two
// of tiles (the decode's blocks) divides by a shift (v77).
func tilePrefetch(pf []byte, tiles int) (*byte, int) {
	if tiles <= 0 || len(pf) < 64*tiles {
		return nil, 0
	}
	if tiles&(tiles-1) == 0 {
		return &pf[0], len(pf) >> 6 >> bits.TrailingZeros(uint(tiles))
	}
	return &pf[0], len(pf) / 64 / tiles
}

// simd holds one level's assembly entry points; its methods are the
// checked kernels.
type simd struct {
	rotate           func(x *float32, n int, s float32) // nil: kv.Rotate
	cvtHalf, cvtBF16 func(*float32, *uint16, int)
	toHalf           func(*uint16, *float32, int) // n a multiple of 16
	cvtFP8           func(dst *float32, src *byte, n int, e4m3 bool)
	unpack4, unpack2 func(*uint8, *byte, int)
	codesF32         func(*float32, *uint8, int)
	scores           func(out, q, k, A, B *float32, n, d int, a, b float32)
	scoresU8         func(out *float32, q *int8, k *uint8, A, B *float32, n, d int, a, b, c float32)
	pv4              func(acc *float32, ldacc int, w *float32, ldw int, v *float32, ldv, n, cols int)
	pv1              func(acc *float32, w *float32, v *float32, ldv, n, cols int)
	expSub           func(x *float32, n int, m float32) float32
	maxF32           func(x *float32, n int) float32
	dotF32           func(a, b *float32, n int) float32
	// foldQuery and deinterleave are nil where the pure-Go ones serve.
	foldQuery    func(qi *int8, qs, q, s, z *float32, d int) (a, bias float32)
	deinterleave func(a, b, src *float32, n int)
	dequantV     func(dst, z *float32, ldz int, codes *uint8, p *float32, n, d, g int)
	pvCodes1     func(acc *float32, w *float32, codes *uint8, ldc, n, cols int) // nil where the level has none
	pvNib41      func(acc *float32, w *float32, packed *byte, ldb, n, cols int) // nil where the level has none
	quantW       func(wq *int16, ldq int, p, s *float32, lds, n, groups int) float32
	softcap      func(x *float32, n int, c, inv float32) // c·tanh(x·inv) in place, n a multiple of vecLen
	pvHalf4      func(acc *float32, ldacc int, w *float32, ldw int, v *uint16, ldv, n, cols int, pf *byte, pfLines int)
	pvHalf2      func(acc *float32, ldacc int, w *float32, ldw int, v *uint16, ldv, n, cols int, pf *byte, pfLines int)
	pvHalf1      func(acc *float32, w *float32, v *uint16, ldv, n, cols int)
}

func (s *simd) set(level cpufeat.Level, vnni, vbmi bool) kernels {
	k := kernels{
		level: level,
		vnni:  vnni,
		vbmi:  vbmi,
		rotate: func(x []float32) {
			n := len(x)
			if s.rotate == nil || n < vecLen || n&(n-1) != 0 {
				kv.Rotate(x) // (panics where n is not a power of two)
				return
			}
			s.rotate(&x[0], n, float32(1/math.Sqrt(float64(n))))
		},
		cvtHalf: func(dst []float32, src []uint16) {
			n := len(src)
			if !(n%vecLen == 0 && len(dst) >= n) {
				bad("cvtHalf", n, len(dst))
			}
			if n > 0 {
				s.cvtHalf(&dst[0], &src[0], n)
			}
		},
		toHalf: func(dst []uint16, src []float32) {
			n := len(src)
			if len(dst) < n {
				bad("toHalf", n, len(dst))
			}
			v := n &^ 15
			if v > 0 {
				s.toHalf(&dst[0], &src[0], v)
			}
			toHalfGo(dst[v:n], src[v:])
		},
		cvtBF16: func(dst []float32, src []uint16) {
			n := len(src)
			if !(n%vecLen == 0 && len(dst) >= n) {
				bad("cvtBF16", n, len(dst))
			}
			if n > 0 {
				s.cvtBF16(&dst[0], &src[0], n)
			}
		},
		cvtFP8: func(dst []float32, src []byte, e4m3 bool) {
			n := len(src)
			if !(n%vecLen == 0 && len(dst) >= n) {
				bad("cvtFP8", n, len(dst))
			}
			if n > 0 {
				s.cvtFP8(&dst[0], &src[0], n, e4m3)
			}
		},
		unpack4: func(dst []uint8, src []byte) {
			n := len(src)
			if !(n%32 == 0 && len(dst) >= 2*n) {
				bad("unpack4", n, len(dst))
			}
			if n > 0 {
				s.unpack4(&dst[0], &src[0], n)
			}
		},
		unpack2: func(dst []uint8, src []byte) {
			n := len(src)
			if !(n%16 == 0 && len(dst) >= 4*n) {
				bad("unpack2", n, len(dst))
			}
			if n > 0 {
				s.unpack2(&dst[0], &src[0], n)
			}
		},
		codesF32: func(dst []float32, src []uint8) {
			n := len(src)
			if !(n%vecLen == 0 && len(dst) >= n) {
				bad("codesF32", n, len(dst))
			}
			if n > 0 {
				s.codesF32(&dst[0], &src[0], n)
			}
		},
		scoresF32: func(out, q, k, A, B []float32, a, b float32) {
			n, d := len(out), len(q)
			if !(n%8 == 0 && d%vecLen == 0 && d > 0 && len(k) >= n*d && len(A) >= n && len(B) >= n) {
				bad("scoresF32", n, d, len(k))
			}
			if n > 0 {
				s.scores(&out[0], &q[0], &k[0], &A[0], &B[0], n, d, a, b)
			}
		},
		pvF32: func(acc []float32, ldacc int, w []float32, ldw int, v []float32, ldv, n, rows, cols int) {
			if !(cols%vecLen == 0 && rows >= 1 && rows <= 4 && n >= 0 && cols <= ldv &&
				len(acc) >= (rows-1)*ldacc+cols && len(w) >= (rows-1)*ldw+n && (n == 0 || len(v) >= (n-1)*ldv+cols)) {
				bad("pvF32", n, rows, cols)
			}
			if n == 0 || cols == 0 {
				return
			}
			if rows == 4 {
				s.pv4(&acc[0], ldacc, &w[0], ldw, &v[0], ldv, n, cols)
				return
			}
			for r := 0; r < rows; r++ {
				s.pv1(&acc[r*ldacc], &w[r*ldw], &v[0], ldv, n, cols)
			}
		},
		expSub: func(x []float32, m float32) float32 {
			if !(len(x)%vecLen == 0) {
				bad("expSub", len(x))
			}
			if len(x) == 0 {
				return 0
			}
			return s.expSub(&x[0], len(x), m)
		},
		maxF32: func(x []float32) float32 {
			if !(len(x)%vecLen == 0 && len(x) > 0) {
				bad("maxF32", len(x))
			}
			return s.maxF32(&x[0], len(x))
		},
		dotF32: func(a, b []float32) float32 {
			if !(len(a)%vecLen == 0 && len(b) >= len(a)) {
				bad("dotF32", len(a), len(b))
			}
			if len(a) == 0 {
				return 0
			}
			return s.dotF32(&a[0], &b[0], len(a))
		},
	}
	k.scaleF32 = scaleF32Go
	if level >= cpufeat.AVX512 {
		k.scaleF32 = func(x []float32, a float32) {
			if n := len(x); n >= vecLen {
				scaleF32AVX512(&x[0], n, a) // whole vectors, then the tail masked
			} else {
				scaleF32Go(x, a)
			}
		}
	}
	k.foldQuery, k.deinterleave = foldQueryGo, deinterleaveGo
	if s.foldQuery != nil {
		k.foldQuery = func(qi []int8, qs, q, sc, z []float32) (a, bias float32) {
			d := len(q)
			if !(d%vecLen == 0 && d > 0 && len(qs) >= d && len(sc) >= d && len(z) >= d && (qi == nil || len(qi) >= d)) {
				bad("foldQuery", d)
			}
			var qp *int8
			if qi != nil {
				qp = &qi[0]
			}
			return s.foldQuery(qp, &qs[0], &q[0], &sc[0], &z[0], d)
		}
	}
	if level >= cpufeat.AVX512 {
		k.foldQuery4 = func(qi []int8, qs, q, sc, z, a, bias []float32, dst []int8, lay qLayout) {
			d := len(q) / 4
			if !(d%vecLen == 0 && d > 0 && len(q) == 4*d && len(sc) >= d && len(qs) >= 4*d && len(qi) >= 4*d && len(z) >= d && len(a) >= 4 && len(bias) >= 4) ||
				lay != qNone && !(lay <= qI4L && d%zmmBytes == 0 && len(dst) >= 16*d) {
				bad("foldQuery4", d, int(lay))
			}
			var dp, perm *int8
			nperm := 4 // index vectors written per 64 channels
			if lay != qNone {
				dp, perm = &dst[0], &qPermPk[lay][0]
			}
			switch lay {
			case qI2:
				nperm = 1 // bcastQ2's layout: one vector per 64 channels
			case qI4L:
				nperm = 2 // one vector's four lanes, 64 bytes apart
			}
			foldQuery4AVX512(&qi[0], &qs[0], &q[0], &sc[0], &z[0], d, &a[0], &bias[0], dp, perm, nperm, 0)
		}
		k.foldQuery4H = func(qi []int8, qs, q []float32, pairs []uint16, a, bias []float32, dst []int8, lay qLayout) {
			d := len(q) / 4
			if !(d%vecLen == 0 && d > 0 && len(q) == 4*d && len(pairs) >= 2*d && len(qs) >= 4*d && len(qi) >= 4*d && len(a) >= 4 && len(bias) >= 4) ||
				lay != qNone && !(lay <= qI4L && d%zmmBytes == 0 && len(dst) >= 16*d) {
				bad("foldQuery4H", d, int(lay))
			}
			var dp, perm *int8
			nperm := 4
			if lay != qNone {
				dp, perm = &dst[0], &qPermPk[lay][0]
			}
			switch lay {
			case qI2:
				nperm = 1
			case qI4L:
				nperm = 2
			}
			pp := (*float32)(unsafe.Pointer(&pairs[0]))
			foldQuery4AVX512(&qi[0], &qs[0], &q[0], pp, pp, d, &a[0], &bias[0], dp, perm, nperm, 1)
		}
	}
	if s.softcap != nil {
		k.softcap = func(x []float32, c, inv float32) {
			if len(x)%vecLen != 0 {
				bad("softcap", len(x))
			}
			if len(x) > 0 {
				s.softcap(&x[0], len(x), c, inv)
			}
		}
	}
	if level >= cpufeat.AVX512 {
		k.max4 = func(out, x []float32, ld, n int) {
			if !(n%vecLen == 0 && n > 0 && ld >= n && len(x) >= 3*ld+n && len(out) >= 4) {
				bad("max4", n, ld)
			}
			max4AVX512(&out[0], &x[0], ld, n)
		}
		k.cvtPairs = func(a, b []float32, src []uint16) {
			n := len(src) / 2
			if !(n%vecLen == 0 && len(src) == 2*n && len(a) >= n && len(b) >= n) {
				bad("cvtPairs", n)
			}
			if n > 0 {
				cvtPairsAVX512(&a[0], &b[0], &src[0], n)
			}
		}
	}
	if s.deinterleave != nil {
		k.deinterleave = func(a, b, src []float32) {
			n := len(src)
			if !(n%32 == 0 && len(a) >= n/2 && len(b) >= n/2) {
				bad("deinterleave", n)
			}
			if n > 0 {
				s.deinterleave(&a[0], &b[0], &src[0], n)
			}
		}
	}
	k.dequantV = func(dst, z []float32, ldz int, codes []uint8, p []float32, n, d, g int) {
		if !(d%vecLen == 0 && g%vecLen == 0 && g > 0 && d%g == 0 && n >= 0 && n <= ldz && len(dst) >= n*d &&
			len(codes) >= n*d && len(p) >= 2*n*(d/g) && len(z) >= (d/g-1)*ldz+n) {
			bad("dequantV", n, d, g)
		}
		if n > 0 {
			s.dequantV(&dst[0], &z[0], ldz, &codes[0], &p[0], n, d, g)
		}
	}
	if s.pvCodes1 != nil {
		k.pvCodes = func(acc, w []float32, codes []uint8, ldc, n, cols int) {
			if !(cols%vecLen == 0 && cols > 0 && n >= 0 && cols <= ldc && len(acc) >= cols && len(w) >= n &&
				(n == 0 || len(codes) >= (n-1)*ldc+cols)) {
				bad("pvCodes", n, cols, ldc)
			}
			if n > 0 {
				s.pvCodes1(&acc[0], &w[0], &codes[0], ldc, n, cols)
			}
		}
	}
	if s.pvNib41 != nil {
		k.pvNib4 = func(acc, w []float32, packed []byte, ldb, n, cols int) {
			if !(cols%32 == 0 && cols > 0 && n >= 0 && cols/2 <= ldb && len(acc) >= cols && len(w) >= n &&
				(n == 0 || len(packed) >= (n-1)*ldb+cols/2)) {
				bad("pvNib4", n, cols, ldb)
			}
			if n > 0 {
				s.pvNib41(&acc[0], &w[0], &packed[0], ldb, n, cols)
			}
		}
	}
	k.prefetch = func(b []byte) {
		if len(b) > 0 {
			prefetchL2(&b[0], len(b))
		}
	}
	if s.pvHalf4 != nil {
		k.pvHalf = func(acc []float32, ldacc int, w []float32, ldw int, v []uint16, ldv, n, rows, cols int, pf []byte) {
			if !(cols%vecLen == 0 && rows >= 1 && rows <= 4 && n >= 0 && cols <= ldv &&
				len(acc) >= (rows-1)*ldacc+cols && len(w) >= (rows-1)*ldw+n && (n == 0 || len(v) >= (n-1)*ldv+cols)) {
				bad("pvHalf", n, rows, cols)
			}
			if n == 0 || cols == 0 {
				return
			}
			var pfp *byte
			if len(pf) > 0 {
				pfp = &pf[0]
			}
			switch {
			case rows == 4:
				s.pvHalf4(&acc[0], ldacc, &w[0], ldw, &v[0], ldv, n, cols, pfp, len(pf)/64)
				return
			case rows >= 2 && s.pvHalf2 != nil: // two rows, then a third alone
				s.pvHalf2(&acc[0], ldacc, &w[0], ldw, &v[0], ldv, n, cols, pfp, len(pf)/64)
				if rows == 3 {
					s.pvHalf1(&acc[2*ldacc], &w[2*ldw], &v[0], ldv, n, cols)
				}
				return
			}
			for r := 0; r < rows; r++ {
				s.pvHalf1(&acc[r*ldacc], &w[r*ldw], &v[0], ldv, n, cols)
			}
		}
	}
	if level >= cpufeat.AVX512 {
		k.scoresHalf2 = func(out0, out1, q0, q1 []float32, kh []uint16, pf []byte) {
			n, d := len(out0), len(q0)
			if !(n%8 == 0 && d%vecLen == 0 && d > 0 && len(out1) >= n && len(q1) >= d && len(kh) >= n*d) {
				bad("scoresHalf2", n, d, len(kh))
			}
			if n > 0 {
				pfp, pfTile := tilePrefetch(pf, n/8)
				scoresHalf2AVX512(&out0[0], &out1[0], &q0[0], &q1[0], &kh[0], n, d, pfp, pfTile)
			}
		}
	}
	k.splitQuery = splitQuery
	if level >= cpufeat.AVX512 {
		k.splitQuery = func(hi, lo []int8, q []float32) float32 {
			d := len(q)
			if !(d%vecLen == 0 && d > 0 && len(hi) >= d && len(lo) >= d) {
				bad("splitQuery", d)
			}
			return splitQueryAVX512(&hi[0], &lo[0], &q[0], d)
		}
	}
	k.quantW = quantWGo
	if s.quantW != nil {
		k.quantW = func(wq []int16, ldq int, p, sc []float32, lds, n, groups int) float32 {
			if !(n%vecLen == 0 && groups >= 1 && n <= ldq && n <= lds && len(p) >= n &&
				len(sc) >= (groups-1)*lds+n && len(wq) >= (groups-1)*ldq+n) {
				bad("quantW", n, groups)
			}
			if n == 0 {
				return 0
			}
			return s.quantW(&wq[0], ldq, &p[0], &sc[0], lds, n, groups)
		}
	}
	k.quantWRows = quantWRowsGo
	if level >= cpufeat.AVX512 {
		k.quantWRows = func(wq []int16, ldw, ldq int, p []float32, ldp int, sc, z []float32, lds, n, groups, rows int, delta, zsum []float32) {
			if !(n%vecLen == 0 && groups >= 1 && rows >= 1 && n <= ldq && n <= lds && n <= ldp &&
				len(p) >= (rows-1)*ldp+n && len(sc) >= (groups-1)*lds+n && len(z) >= (groups-1)*lds+n &&
				len(wq) >= (rows-1)*ldw+(groups-1)*ldq+n && len(delta) >= rows && len(zsum) >= rows*groups) {
				bad("quantWRows", n, groups, rows)
			}
			if n > 0 {
				quantWRowsAVX512(&wq[0], ldw, ldq, &p[0], ldp, &sc[0], &z[0], lds, n, groups, rows, &delta[0], &zsum[0])
			}
		}
	}
	if vnni {
		k.bcastQ = func(dst, q []int8) {
			d := len(q)
			if !(d%vecLen == 0 && d > 0 && len(dst) >= 4*d) {
				bad("bcastQ", d, len(dst))
			}
			bcastQ16(&dst[0], &q[0], d)
		}
		k.scoresU8x4 = func(out []float32, ldo int, q []int8, kc []uint8, A, B, ab []float32, n, d int, c float32, pf []byte) {
			if !(n%16 == 0 && d%64 == 0 && d > 0 && ldo >= n && len(out) >= 3*ldo+n && len(q) >= 16*d &&
				len(kc) >= n*d && len(A) >= n && len(B) >= n && len(ab) >= 8) {
				bad("scoresU8x4", n, d, ldo)
			}
			if n > 0 {
				pfp, pfTile := tilePrefetch(pf, n/x4Tokens)
				scoresU8x4VNNI(&out[0], ldo, &q[0], &kc[0], &A[0], &B[0], &ab[0], n, d, c, pfp, pfTile)
			}
		}
		k.bcastQ4 = func(dst, q []int8) {
			d := len(q)
			if !(d%32 == 0 && d > 0 && len(dst) >= 4*d) {
				bad("bcastQ4", d, len(dst))
			}
			bcastQ4(&dst[0], &q[0], d)
		}
		k.scoresI4x4 = func(out []float32, ldo int, q []int8, kc []byte, A, B, ab []float32, n, d int, c float32, pf []byte) {
			unit := len(A) == 0 && len(B) == 0
			if !(n%16 == 0 && d%64 == 0 && d > 0 && ldo >= n && len(out) >= 3*ldo+n && len(q) >= 16*d &&
				len(kc) >= n*d/2 && (unit || len(A) >= n && len(B) >= n) && len(ab) >= 8) {
				bad("scoresI4x4", n, d, ldo)
			}
			if n > 0 {
				pfp, pfTile := tilePrefetch(pf, n/x4Tokens)
				var ap, bp *float32 // nil: every factor 1
				if !unit {
					ap, bp = &A[0], &B[0]
				}
				scoresI4x4VNNI(&out[0], ldo, &q[0], &kc[0], ap, bp, &ab[0], n, d, c, pfp, pfTile)
			}
		}
		k.scoresI4x3 = func(out []float32, ldo int, q []int8, kc []byte, A, B, ab []float32, n, d int, c float32, pf []byte) {
			unit := len(A) == 0 && len(B) == 0
			if !(n%16 == 0 && d%64 == 0 && d > 0 && ldo >= n && len(out) >= 2*ldo+n && len(q) >= 12*d &&
				len(kc) >= n*d/2 && (unit || len(A) >= n && len(B) >= n) && len(ab) >= 8) {
				bad("scoresI4x3", n, d, ldo)
			}
			if n > 0 {
				pfp, pfTile := tilePrefetch(pf, n/x4Tokens)
				var ap, bp *float32 // nil: every factor 1
				if !unit {
					ap, bp = &A[0], &B[0]
				}
				scoresI4x3VNNI(&out[0], ldo, &q[0], &kc[0], ap, bp, &ab[0], n, d, c, pfp, pfTile)
			}
		}
		k.scoresI4x2 = func(out []float32, ldo int, q []int8, kc []byte, A, B, ab []float32, n, d int, c float32, pf []byte) {
			if !(n%16 == 0 && d%64 == 0 && d > 0 && ldo >= n && len(out) >= ldo+n && len(q) >= 8*d &&
				len(kc) >= n*d/2 && len(A) >= n && len(B) >= n && len(ab) >= 8) {
				bad("scoresI4x2", n, d, ldo)
			}
			if n > 0 {
				pfp, pfTile := tilePrefetch(pf, n/x4Tokens)
				scoresI4x2VNNI(&out[0], ldo, &q[0], &kc[0], &A[0], &B[0], &ab[0], n, d, c, pfp, pfTile)
			}
		}
		k.pvI4 = func(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, packed []byte, n, d, gshift int, pf []byte) {
			groups := d >> gshift
			if !(d%64 == 0 && d > 0 && n%2 == 0 && n <= PVMaxTokens && gshift >= 6 && groups<<gshift == d && n <= ldq &&
				len(acc) >= 3*ldacc+d && len(delta) >= 4 && len(wq) >= 3*ldw+(groups-1)*ldq+n && len(packed) >= n*d/2) {
				bad("pvI4", n, d, gshift)
			}
			if n > 0 {
				pfp := pairPrefetch(pf, n, d, 1)
				pvI4VNNI(&acc[0], ldacc, &delta[0], &wq[0], ldw, ldq, &packed[0], n, d, gshift, pfp, len(pf)/64)
			}
		}
		k.pvI4x2 = func(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, packed []byte, n, d, gshift int, pf []byte) {
			groups := d >> gshift
			if !(d%64 == 0 && d > 0 && n%2 == 0 && n <= PVMaxTokens && gshift >= 6 && groups<<gshift == d && n <= ldq &&
				len(acc) >= ldacc+d && len(delta) >= 2 && len(wq) >= ldw+(groups-1)*ldq+n && len(packed) >= n*d/2) {
				bad("pvI4x2", n, d, gshift)
			}
			if n > 0 {
				pfp := pairPrefetch(pf, n, d, 1)
				pvI4x2VNNI(&acc[0], ldacc, &delta[0], &wq[0], ldw, ldq, &packed[0], n, d, gshift, pfp, len(pf)/64)
			}
		}
		k.pvS16 = func(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, codes []uint8, n, d, gshift int, pf []byte) {
			groups := d >> gshift
			if !(d%64 == 0 && d > 0 && n%2 == 0 && n <= PVMaxTokens && gshift >= 5 && groups<<gshift == d && n <= ldq &&
				len(acc) >= 3*ldacc+d && len(delta) >= 4 && len(wq) >= 3*ldw+(groups-1)*ldq+n && len(codes) >= n*d) {
				bad("pvS16", n, d, gshift)
			}
			if n > 0 {
				pfp := pairPrefetch(pf, n, d, 2)
				pvS16VNNI(&acc[0], ldacc, &delta[0], &wq[0], ldw, ldq, &codes[0], n, d, gshift, pfp, len(pf)/64)
			}
		}
		k.scoresU8 = func(out []float32, q []int8, kc []uint8, A, B []float32, a, b, c float32) {
			n, d := len(out), len(q)
			if !(n%8 == 0 && d%vecLen == 0 && d > 0 && len(kc) >= n*d && len(A) >= n && len(B) >= n) {
				bad("scoresU8", n, d, len(kc))
			}
			if n > 0 {
				s.scoresU8(&out[0], &q[0], &kc[0], &A[0], &B[0], n, d, a, b, c)
			}
		}
	} else {
		k.scoresU8 = scoresU8Go
	}
	if vnni && vbmi {
		k.unpack2 = func(dst []uint8, src []byte) {
			n := len(src)
			if !(n%16 == 0 && len(dst) >= 4*n) {
				bad("unpack2", n, len(dst))
			}
			if n > 0 {
				unpack2VBMI(&dst[0], &src[0], n)
			}
		}
		k.bcastQ2 = func(dst, q []int8) {
			d := len(q)
			if !(d%64 == 0 && d > 0 && len(dst) >= 4*d) {
				bad("bcastQ2", d, len(dst))
			}
			bcastQ2(&dst[0], &q[0], d)
		}
		k.scoresI2x4 = func(out []float32, ldo int, q []int8, kc []byte, A, B, ab []float32, n, d int, c float32, pf []byte) {
			unit := len(A) == 0 && len(B) == 0
			if !(n%16 == 0 && d%64 == 0 && d > 0 && ldo >= n && len(out) >= 3*ldo+n && len(q) >= 16*d &&
				len(kc) >= n*d/4 && (unit || len(A) >= n && len(B) >= n) && len(ab) >= 8) {
				bad("scoresI2x4", n, d, ldo)
			}
			if n > 0 {
				pfp, pfTile := tilePrefetch(pf, n/x4Tokens)
				var ap, bp *float32 // nil: every factor 1
				if !unit {
					ap, bp = &A[0], &B[0]
				}
				scoresI2x4VBMI(&out[0], ldo, &q[0], &kc[0], ap, bp, &ab[0], n, d, c, pfp, pfTile)
			}
		}
		k.scoresI2x3 = func(out []float32, ldo int, q []int8, kc []byte, A, B, ab []float32, n, d int, c float32, pf []byte) {
			unit := len(A) == 0 && len(B) == 0
			if !(n%16 == 0 && d%64 == 0 && d > 0 && ldo >= n && len(out) >= 2*ldo+n && len(q) >= 12*d &&
				len(kc) >= n*d/4 && (unit || len(A) >= n && len(B) >= n) && len(ab) >= 8) {
				bad("scoresI2x3", n, d, ldo)
			}
			if n > 0 {
				pfp, pfTile := tilePrefetch(pf, n/x4Tokens)
				var ap, bp *float32 // nil: every factor 1
				if !unit {
					ap, bp = &A[0], &B[0]
				}
				scoresI2x3VBMI(&out[0], ldo, &q[0], &kc[0], ap, bp, &ab[0], n, d, c, pfp, pfTile)
			}
		}
		k.pvU8 = func(acc []float32, ldacc int, delta []float32, wq []uint8, ldw, ldq int, packed []byte, n, d, gshift, bits, rows int, pf []byte) {
			groups := d >> gshift
			if !(d%64 == 0 && d > 0 && n%4 == 0 && n <= PVMaxTokens && gshift >= 6 && groups<<gshift == d && n <= ldq &&
				(bits == 4 || bits == 2) && rows >= 2 && rows <= 4 && len(acc) >= (rows-1)*ldacc+d && len(delta) >= rows &&
				len(wq) >= (rows-1)*ldw+(groups-1)*ldq+n && len(packed) >= n*d*bits/8) {
				bad("pvU8", n, d, gshift, bits, rows)
			}
			if n == 0 {
				return
			}
			// The kernel prefetches two lines per four tokens and 64
			// channels; the lines past those (the next block's params, at
			// the end of its V half) go first, in one burst: the next
			// block's params() reads them before its PV.
			var pfp *byte
			if len(pf) > 0 {
				pfp = &pf[0]
				if spread := pvU8PrefetchLines * (n / 4) * (d / 64) * 64; len(pf) > spread {
					prefetchL2(&pf[spread], len(pf)-spread)
				}
			}
			fn := pvU8I4x4VBMI
			switch {
			case bits == 4 && rows == 3:
				fn = pvU8I4x3VBMI
			case bits == 4 && rows == 2:
				fn = pvU8I4x2VBMI
			case bits == 2 && rows == 4:
				fn = pvU8I2x4VBMI
			case bits == 2 && rows == 3:
				fn = pvU8I2x3VBMI
			case bits == 2:
				fn = pvU8I2x2VBMI
			}
			fn(&acc[0], ldacc, &delta[0], &wq[0], ldw, ldq, &packed[0], n, d, gshift, pfp, len(pf)/64)
		}
		k.unlaneU8 = func(acc []float32) {
			if len(acc)%u8LaneChunk != 0 {
				bad("unlaneU8", len(acc), 0, 0)
			}
			if len(acc) > 0 {
				u8UnlaneAVX512(&acc[0], len(acc))
			}
		}
		k.quantWRowsU8 = func(wq []uint8, ldw, ldq int, p []float32, ldp int, sc, z []float32, lds, n, groups, rows int, mid float32, delta, zsum []float32) {
			if !(n%vecLen == 0 && groups >= 1 && rows >= 1 && n <= ldq && n <= lds && n <= ldp &&
				len(p) >= (rows-1)*ldp+n && len(sc) >= (groups-1)*lds+n && len(z) >= (groups-1)*lds+n &&
				len(wq) >= (rows-1)*ldw+(groups-1)*ldq+n && len(delta) >= rows && len(zsum) >= rows*groups) {
				bad("quantWRowsU8", n, groups, rows)
			}
			if n > 0 {
				quantWRowsU8AVX512(&wq[0], ldw, ldq, &p[0], ldp, &sc[0], &z[0], lds, n, groups, rows, mid, &delta[0], &zsum[0])
			}
		}
		k.softmaxU8 = func(wq []uint8, ldw, ldq int, x []float32, ldx int, m, sc, z []float32, lds, n, groups, rows int, mid float32, delta, zsum, lsum, sw []float32) {
			if !(n%vecLen == 0 && groups >= 1 && rows >= 1 && n <= ldq && n <= lds && n <= ldx &&
				len(x) >= (rows-1)*ldx+n && len(m) >= rows && len(sc) >= (groups-1)*lds+n && len(z) >= (groups-1)*lds+n &&
				len(wq) >= (rows-1)*ldw+(groups-1)*ldq+n && len(delta) >= rows && len(zsum) >= rows*groups &&
				len(lsum) >= rows && len(sw) >= rows*groups) {
				bad("softmaxU8", n, groups, rows)
			}
			if n > 0 {
				softmaxU8AVX512(&wq[0], ldw, ldq, &x[0], ldx, &m[0], &sc[0], &z[0], lds, n, groups, rows, mid, &delta[0], &zsum[0], &lsum[0], &sw[0], 0, &sc[0])
				return
			}
			softmaxU8Go(wq, ldw, ldq, x, ldx, m, sc, z, lds, n, groups, rows, mid, delta, zsum, lsum, sw)
		}
		k.softmaxU8H = func(wq []uint8, ldw int, x []float32, ldx int, m []float32, pairs, pairs2 []uint16, n, rows int, mid float32, delta, zsum, lsum, sw []float32) {
			if !(n%vecLen == 0 && rows >= 1 && n <= ldw && n <= ldx && len(x) >= (rows-1)*ldx+n && len(m) >= rows &&
				len(pairs) >= 2*n && len(wq) >= (rows-1)*ldw+n && len(delta) >= rows && len(zsum) >= rows &&
				len(lsum) >= rows && len(sw) >= rows && (pairs2 == nil || len(pairs2) >= 2*n && rows%4 == 0)) {
				bad("softmaxU8H", n, rows)
			}
			if n > 0 {
				pp := (*float32)(unsafe.Pointer(&pairs[0]))
				pp2 := pp
				if pairs2 != nil {
					pp2 = (*float32)(unsafe.Pointer(&pairs2[0]))
				}
				softmaxU8AVX512(&wq[0], ldw, ldw, &x[0], ldx, &m[0], pp, pp, 0, n, 1, rows, mid, &delta[0], &zsum[0], &lsum[0], &sw[0], 1, pp2)
				return
			}
			softmaxU8HGo(wq, ldw, x, ldx, m, pairs, pairs2, n, rows, mid, delta, zsum, lsum, sw)
		}
		k.twoBlocks = true
	}
	if vnni {
		k.padRows = func(dst, src []byte, n, srcRow, dstRow int) {
			if !(srcRow >= 0 && dstRow >= srcRow && len(src) >= n*srcRow && len(dst) >= n*dstRow) {
				bad("padRows", n, srcRow, dstRow)
			}
			switch {
			case n == 0 || dstRow == 0:
			case srcRow == dstRow:
				copy(dst[:n*dstRow], src)
			default:
				padRowsAVX512(&dst[0], &src[0], n, srcRow, dstRow)
			}
		}
	}
	return k
}

var (
	avx512 = simd{rotate: rotateAVX512, cvtHalf: cvtHalfAVX512, toHalf: toHalfF16C, cvtBF16: cvtBF16AVX512, cvtFP8: cvtFP8AVX512, unpack4: unpack4AVX512, unpack2: unpack2AVX512,
		codesF32: codesF32AVX512, scores: scoresF32AVX512, scoresU8: scoresU8VNNI, pv4: pvF32x4AVX512, pv1: pvF32x1AVX512,
		expSub: expSubAVX512, maxF32: maxF32AVX512, dotF32: dotF32AVX512,
		foldQuery: foldQueryAVX512, deinterleave: deinterleaveAVX512, dequantV: dequantVAVX512, pvCodes1: pvCodesx1AVX512, pvNib41: pvNib4x1AVX512,
		quantW: quantWAVX512, softcap: softcapAVX512, pvHalf4: pvHalfx4AVX512, pvHalf2: pvHalfx2AVX512, pvHalf1: pvHalfx1AVX512}
	avx2 = simd{cvtHalf: cvtHalfAVX2, toHalf: toHalfF16C, cvtBF16: cvtBF16AVX2, cvtFP8: cvtFP8AVX2, unpack4: unpack4AVX2, unpack2: unpack2AVX2,
		codesF32: codesF32AVX2, scores: scoresF32AVX2, pv4: pvF32x4AVX2, pv1: pvF32x1AVX2,
		expSub: expSubAVX2, maxF32: maxF32AVX2, dotF32: dotF32AVX2, dequantV: dequantVAVX2, softcap: softcapAVX2}

	avx512VBMIKernels = avx512.set(cpufeat.AVX512, true, true)
	avx512VNNIKernels = avx512.set(cpufeat.AVX512, true, false)
	avx512Kernels     = avx512.set(cpufeat.AVX512, false, false)
	avx2Kernels       = avx2.set(cpufeat.AVX2, false, false)
)

// asmKernels reports whether this build has assembly kernels.
const asmKernels = true

// kernelsFor returns the kernel set of a SIMD level; vnni selects the int8
// dot products for integer keys (AVX-512 only), vbmi with vnni the int2
// kernels of AVX-512 VBMI (a CPU with VBMI and no VNNI runs without them).
func kernelsFor(l cpufeat.Level, vnni, vbmi bool) *kernels {
	switch {
	case l >= cpufeat.AVX512 && vnni && vbmi:
		return &avx512VBMIKernels
	case l >= cpufeat.AVX512 && vnni:
		return &avx512VNNIKernels
	case l >= cpufeat.AVX512:
		return &avx512Kernels
	case l >= cpufeat.AVX2:
		return &avx2Kernels
	}
	return &genericKernels
}

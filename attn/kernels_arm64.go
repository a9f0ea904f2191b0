//go:build !purego

package attn

import (
	"fmt"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
)

// The NEON kernel sets of arm64: the pure-Go set with the fp16 conversion,
// the byte codes' conversion and int4 unpacking, the float32 scores, the PV
// sums, the softmax's exp, max and dot of kernels_arm64.s; and, where the
// CPU has the dot-product extension (cpufeat.DotProd), the same set with
// the integer-key scores of the VNNI path (queries quantized to int8, the
// dot products by SDOT, one or four query rows a call). The rest (the query
// folds, the packed int4/int2 score kernels, the integer PV) stays in Go or
// on the float path.

//go:noescape
func cvtHalfNEON(dst *float32, src *uint16, n int)

//go:noescape
func codesF32NEON(dst *float32, src *uint8, n int)

//go:noescape
func unpack4NEON(dst *uint8, src *byte, n int)

//go:noescape
func scoresF32NEON(out, q, k, A, B *float32, n, d int, a, b float32)

//go:noescape
func pvF32NEON(acc *float32, ldacc int, w *float32, ldw int, v *float32, ldv, n, rows, cols int)

//go:noescape
func maxF32NEON(x *float32, n int) float32

//go:noescape
func dotF32NEON(a, b *float32, n int) float32

//go:noescape
func expSubNEON(x *float32, n int, m float32) float32

//go:noescape
func scoresU8SDOT(out *float32, q *int8, k *uint8, A, B *float32, n, d int, a, b, c float32, corr int32)

//go:noescape
func scoresU8x4SDOT(out *float32, ldo int, q *int8, k *uint8, A, B, ab *float32, n, d int, c float32, corr *int32)

// neonLanes is the element count the NEON loops step by; the wrappers run
// any rest in Go.
const neonLanes = 16

func cvtHalfN(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	v := len(src) &^ (neonLanes - 1)
	if v > 0 {
		cvtHalfNEON(&dst[0], &src[0], v)
	}
	cvtHalfGo(dst[v:], src[v:])
}

func codesF32N(dst []float32, src []uint8) {
	dst = dst[:len(src)]
	v := len(src) &^ (neonLanes - 1)
	if v > 0 {
		codesF32NEON(&dst[0], &src[0], v)
	}
	codesF32Go(dst[v:], src[v:])
}

func unpack4N(dst []uint8, src []byte) {
	dst = dst[:2*len(src)]
	v := len(src) &^ (neonLanes - 1)
	if v > 0 {
		unpack4NEON(&dst[0], &src[0], v)
	}
	unpack4Go(dst[2*v:], src[v:])
}

func scoresF32N(out, q, k, A, B []float32, a, b float32) {
	d, n := len(q), len(out)
	if d%neonLanes != 0 || n == 0 {
		scoresF32Go(out, q, k, A, B, a, b)
		return
	}
	_, _, _ = k[n*d-1], A[n-1], B[n-1]
	scoresF32NEON(&out[0], &q[0], &k[0], &A[0], &B[0], n, d, a, b)
}

func pvF32N(acc []float32, ldacc int, w []float32, ldw int, v []float32, ldv, n, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	if cols%neonLanes != 0 || rows > 4 {
		pvF32Go(acc, ldacc, w, ldw, v, ldv, n, rows, cols)
		return
	}
	_ = acc[(rows-1)*ldacc+cols-1]
	wp, vp := &acc[0], &acc[0] // any valid pointer where n is 0: never read
	if n > 0 {
		_, _ = w[(rows-1)*ldw+n-1], v[(n-1)*ldv+cols-1]
		wp, vp = &w[0], &v[0]
	}
	pvF32NEON(&acc[0], ldacc, wp, ldw, vp, ldv, n, rows, cols)
}

func maxF32N(x []float32) float32 {
	v := len(x) &^ (neonLanes - 1)
	if v == 0 {
		return maxF32Go(x)
	}
	return max(maxF32NEON(&x[0], v), maxF32Go(x[v:]))
}

func dotF32N(a, b []float32) float32 {
	if len(a)%neonLanes != 0 || len(a) == 0 {
		return dotF32Go(a, b)
	}
	_ = b[len(a)-1]
	return dotF32NEON(&a[0], &b[0], len(a))
}

func expSubN(x []float32, m float32) float32 {
	if len(x)%neonLanes != 0 || len(x) == 0 {
		return expSubGo(x, m)
	}
	return expSubNEON(&x[0], len(x), m)
}

// sdotTokens is the token count scoresU8SDOT steps by.
const sdotTokens = 4

// scoresU8S is scoresU8 with SDOT (scoresU8Go's bits): the codes are read
// as code-128 by the kernel, which adds back 128·Σq (the row's sum, formed
// here once a call).
func scoresU8S(out []float32, q []int8, k []uint8, A, B []float32, a, b, c float32) {
	n, d := len(out), len(q)
	if n%sdotTokens != 0 || d%neonLanes != 0 || n == 0 || d == 0 {
		scoresU8Go(out, q, k, A, B, a, b, c)
		return
	}
	_, _, _ = k[n*d-1], A[n-1], B[n-1]
	var sq int32
	for _, x := range q {
		sq += int32(x)
	}
	scoresU8SDOT(&out[0], &q[0], &k[0], &A[0], &B[0], n, d, a, b, c, sq<<7)
}

// scoresU8x4S is scoresU8x4 with SDOT: four rows of bcastQ's layout (the
// first copy of each 16-byte chunk read), each row's 128·Σq formed here;
// the bits of scoresU8Go per row.
func scoresU8x4S(out []float32, ldo int, q []int8, k []uint8, A, B, ab []float32, n, d int, c float32, pf []byte) {
	if !(n%x4Tokens == 0 && d%64 == 0 && d > 0 && ldo >= n && len(out) >= 3*ldo+n && len(q) >= 16*d &&
		len(k) >= n*d && len(A) >= n && len(B) >= n && len(ab) >= 8) {
		panic(fmt.Sprint("attn: scoresU8x4: bad lengths ", n, d, ldo))
	}
	if n == 0 {
		return
	}
	var corr [4]int32
	for r := range corr {
		row := q[r*4*d : (r+1)*4*d]
		var sq int32
		for j := 0; j < 4*d; j += 4 * neonLanes { // the first copy of each chunk
			for _, x := range row[j : j+neonLanes] {
				sq += int32(x)
			}
		}
		corr[r] = sq << 7
	}
	scoresU8x4SDOT(&out[0], ldo, &q[0], &k[0], &A[0], &B[0], &ab[0], n, d, c, &corr[0])
}

// neonKernels is the NEON set.
var neonKernels = func() kernels {
	k := genericKernels
	k.level = cpufeat.NEON
	k.cvtHalf = cvtHalfN
	k.codesF32 = codesF32N
	k.unpack4 = unpack4N
	k.scoresF32 = scoresF32N
	k.pvF32 = pvF32N
	k.maxF32 = maxF32N
	k.dotF32 = dotF32N
	k.expSub = expSubN
	return k
}()

// neonDotKernels is the NEON set with the integer-key scores (the VNNI
// path's vnni flag: int8 queries, the sums by SDOT); the integer PV
// (pvS16) stays nil, so the values run the float PV of the NEON set. Four
// query rows score at once (scoresU8x4; bcastQ's layout written in Go)
// where the head dim is a multiple of 64; int4 and int2 keys are unpacked
// to byte codes first (no packed score kernels).
var neonDotKernels = func() kernels {
	k := neonKernels
	k.vnni = true
	k.scoresU8 = scoresU8S
	k.bcastQ = bcastQGo
	k.scoresU8x4 = scoresU8x4S
	return k
}()

// asmKernels reports whether this build has assembly kernels.
const asmKernels = true

// kernelsFor returns the kernel set of a SIMD level: NEON's, with the
// integer-key scores where vnni (here: the dot-product extension) is set,
// or the pure-Go set (vbmi is amd64's).
func kernelsFor(l cpufeat.Level, vnni, vbmi bool) *kernels {
	if l == cpufeat.NEON {
		if vnni {
			return &neonDotKernels
		}
		return &neonKernels
	}
	return &genericKernels
}

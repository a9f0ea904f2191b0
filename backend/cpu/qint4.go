package cpu

// int4 weights (groups of 128) multiply by integer dot products, by default
// (BITDECODE_CPU_INT4=float selects the float packed order of qdot.go
// instead, for comparisons; the setting is handed to the device at a
// program's edge by backend.ConfigureDevices and used for weights loaded
// after; it also covers int3's and int8's integer paths, qint3.go and
// qint8.go). The integer path
// runs the int4 GEMV about 1.5-2 times as fast as the float one at the
// float path's perplexity (docs/perf/cpu-linear.md v2.12).
//
// Each token's x is quantized to 16-bit codes in blocks of 8 channels:
// block j (channels 8j..8j+7, the 8 codes of one packed word) gets sx_j =
// max|x_k|/32258 (float32; 32258 = 127·254) and c_k = rint(x_k/sx_j) in
// [−32258, 32258] (0 for an all-zero block; a block holding NaN or ±Inf gets
// sx_j = NaN, so the outputs become NaN as a float product would), each
// code off by at most sx_j/2 = max|x|/64516 of its block; each group of 128
// channels also gets X̂ = Σ_j sx_j·Σ_{k∈j} c_k, the sum of the quantized x
// (float64, rounded once to float32), so that the whole output is the dot
// product of the quantized x with Ŵ (its error Σ ŵ·δx, not Σ s·q·δx: with a
// zero point z near −7.5·s the codes' part s·q is about three times ŵ in
// magnitude, and an exact X would leave its share of δx uncancelled). A code is
// stored as two int8 terms, c = 254·q1 + q2 with q1 = floor((c+127)/254) and
// q2 the remainder, both in [−127, 127]: VNNI multiplies bytes, and the unpacked
// weight bytes serve both terms. With ŵ = s·q + z,
//
//	Σ_k x_k·ŵ_k ≈ Σ_j s·sx_j·Σ_{k∈j} q_k·c_k + z·X̂
//
// In a group of 16 packed words, lane l is word l, block l: its integer sum
// D_l = Σ q·c = 254·Σ q·q1 + Σ q·q2 is exact (VPDPBUSD multiplies unsigned
// codes by signed x codes four at a time; |D_l| ≤ 8·15·32258 < 2²⁴, so
// float32(D_l) is exact too); then, per row n, over the groups in order,
//
//	acc_l = acc_l + float32(float32(D_l)·float32(s·sx_l))
//	zs    = zs + float32(z·X̂)
//	y     = tree(acc) + zs (+ bias)
//
// with tree the canonical lane reduction of dot.go. Blocks of 8 keep an
// outlier channel from coarsening more than its 7 neighbours. The work per
// 128 weights falls from 48 vector operations (each nibble decoded to
// float, FMA, multiply, add) to about 17, so the GEMV runs at the memory's
// speed instead of the FP pipes'. Every level computes the same bits
// (integer sums are exact in any order): the AVX-512 VNNI tiles
// int4VNNI_1x4 and _1x1 (and _4x4, 4 tokens at once, in prefill), the
// AVX2 tile int4AVX2_1x1 (VPMADDUBSW and VPMADDWD: the same int32 sums)
// where VNNI is missing, arm64's
// int4SDOT_1x1 (SDOT, FEAT_DotProd) at the NEON level, and
// dotInt4Generic, the reference.
//
// v2.9 rounded x to one int8 code per channel (sx = max|x|/127): as fast,
// but its error of up to 1/254 of a block's largest |x| cost GPTQ and DEC
// weights about 0.1% perplexity on gocoder-23m (docs/perf/cpu-linear.md).

import (
	"math"
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/wq"
)

// int4Group is the group size of the integer int4 path.
const int4Group = 128

// int4XRatio is the weight of an x code's first int8 term against its
// second (c = 254·q1 + q2); int4XMax = 127·int4XRatio is the largest code.
const (
	int4XRatio = 254
	int4XMax   = 127 * int4XRatio
)

// EnvInt4 names the environment variable that selects the int4, int8 and
// int3 paths: "int8dot" (the default) for integer dot products, "float" for
// the float packed order.
const EnvInt4 = "BITDECODE_CPU_INT4"

// int4IntegerOn is whether weights loaded now take the integer path
// (configure sets it from EnvInt4; tests set it directly).
var int4IntegerOn = true

// int4Integer reports whether m can multiply by integer dot products.
func int4Integer(m *wq.Matrix) bool {
	return m.Elem == wq.Int4 && m.Group == int4Group && m.K%int4Group == 0
}

// int4Token is one token's quantized x: the codes' two int8 terms in the
// tiles' order (per group of 128 channels, 256 bytes: q1 for the low
// nibbles, 64 bytes whose dword l pairs with word l's low nibbles, then q1
// for the high nibbles, then q2 for the low and the high nibbles), the
// scale of every block of 8 channels, and per group the sum X̂.
type int4Token struct {
	xq   []int8    // 2K
	sx   []float32 // K/8
	xsum []float32 // K/128
}

// quantizeInt4X fills tok from the token's x (len K); cs (len K/8) is
// scratch. Every level gives the same bits: int4QuantXAVX512 computes the
// same codes, scales and block sums (X̂ then summed here, in order).
func quantizeInt4X(tok int4Token, x []float32, cs []int32) {
	G := len(x) / int4Group
	if cpufeat.Active() != cpufeat.AVX512 || G == 0 {
		quantizeInt4XGeneric(tok, x)
		return
	}
	int4QuantXAVX512(&x[0], &tok.xq[0], &tok.sx[0], &cs[0], G)
	for g := range G {
		var sum float64
		for l := range dotLanes {
			j := g*dotLanes + l
			sx := tok.sx[j]
			if !(sx > 0 && sx <= math.MaxFloat32) {
				// max|x| was 0 (or sx underflowed), ±Inf or NaN: no codes.
				if sx != 0 {
					sx = float32(math.NaN())
					tok.sx[j] = sx
				}
				q := tok.xq[2*g*int4Group:]
				for _, o := range [4]int{0, 64, 128, 192} {
					*(*[4]int8)(q[o+4*l : o+4*l+4]) = [4]int8{}
				}
				cs[j] = 0
			}
			sum += float64(cs[j]) * float64(sx)
		}
		tok.xsum[g] = float32(sum)
	}
}

// quantizeInt4XGeneric is quantizeInt4X in Go: the reference.
func quantizeInt4XGeneric(tok int4Token, x []float32) {
	for g := 0; g < len(x)/int4Group; g++ {
		xs := x[g*int4Group : (g+1)*int4Group]
		q := tok.xq[2*g*int4Group : 2*(g+1)*int4Group]
		var sum float64 // X̂ = Σ_j sx_j·C_j: exact products, 16 terms
		for l := range dotLanes {
			blk := (*[8]float32)(xs[8*l : 8*l+8])
			// max|x| on the bits: |v|'s bits order as the values do, ±Inf
			// and NaN above every finite one.
			var m0, m1 uint32
			for i := 0; i < 8; i += 2 {
				m0 = max(m0, math.Float32bits(blk[i])&0x7fffffff)
				m1 = max(m1, math.Float32bits(blk[i+1])&0x7fffffff)
			}
			amax := math.Float32frombits(max(m0, m1))
			sx := amax / int4XMax
			finite := max(m0, m1) <= math.Float32bits(math.MaxFloat32)
			if !finite {
				sx = float32(math.NaN())
			}
			tok.sx[g*dotLanes+l] = sx
			var c [8]int32
			if sx > 0 && finite {
				inv := 1 / float64(sx) // v·inv is within 2⁻⁵² of v/sx
				for i, v := range blk {
					c[i] = max(-int4XMax, min(int4XMax, int32(math.RoundToEven(float64(v)*inv))))
				}
			} else if !finite {
				sum = math.NaN()
			}
			// Word l's low nibbles are channels k0, k0+4, k0+1, k0+5 (as
			// bytes 0..3 of w & 0x0f0f0f0f); its high ones k0+2, k0+6,
			// k0+3, k0+7 (wq's layout).
			lo, hi := (*[4]int8)(q[4*l:4*l+4]), (*[4]int8)(q[64+4*l:64+4*l+4])
			lo2, hi2 := (*[4]int8)(q[128+4*l:128+4*l+4]), (*[4]int8)(q[192+4*l:192+4*l+4])
			var C int32 // Σ c over the block
			for i, ch := range [8]int{0, 4, 1, 5, 2, 6, 3, 7} {
				ci := c[ch]
				C += ci
				// q1 = floor((c + 127)/254) ∈ [−127, 127], q2 = c − 254·q1
				// ∈ [−127, 126] (the offset keeps the division's operand
				// positive).
				h := int32(uint32(ci+int4XMax+int4XRatio/2)/int4XRatio) - 127
				if i < 4 {
					lo[i], lo2[i] = int8(h), int8(ci-int4XRatio*h)
				} else {
					hi[i-4], hi2[i-4] = int8(h), int8(ci-int4XRatio*h)
				}
			}
			sum += float64(C) * float64(sx)
		}
		tok.xsum[g] = float32(sum)
	}
}

// dotInt4Generic returns row n's output (bias excluded) for the quantized
// token tok: the reference of the SIMD tiles.
func dotInt4Generic(tok int4Token, m *wq.Matrix, pz []float32, n int) float32 {
	var acc [dotLanes]float32
	var zs float32
	RW := m.Elem.RowWords(m.K)
	row := m.Words[n*RW : (n+1)*RW]
	for g := 0; g < m.K/int4Group; g++ {
		words := row[g*dotLanes : (g+1)*dotLanes]
		q := tok.xq[2*g*int4Group : 2*(g+1)*int4Group]
		sx, X := tok.sx[g*dotLanes:(g+1)*dotLanes], tok.xsum[g]
		s, z := pz[2*(g*m.N+n)], pz[2*(g*m.N+n)+1]
		for l, w := range words {
			d := laneSum(w&0x0f0f0f0f, w>>4&0x0f0f0f0f, q, l)
			acc[l] += float32(float32(d) * (s * sx[l]))
		}
		zs += float32(z * X)
	}
	return reduceLanes(&acc) + zs
}

// intTileFunc and intQuadFunc are the VNNI tiles of the integer paths: one
// token against 1 or 4 rows, and 4 tokens against 4 rows (gen_dot.go).
type (
	intTileFunc func(xq *int8, sx *float32, xsum *float32, w unsafe.Pointer, ws uintptr, rowBytes int, dst *float32, pz *float32, ps uintptr)
	intQuadFunc func(xq *int8, xs uintptr, sx *float32, xsum *float32, ss uintptr, w unsafe.Pointer, ws uintptr, groups int, dst *float32, ds uintptr, pz *float32, ps uintptr)
)

// vnniTile runs the VNNI tiles k11, k14 and k44 of an integer path (int4's
// or int8's) over y[t, n] for t in [t0, t1), n in [n0, n1): rows 4 at a
// time where 4 remain, tokens 4 at a time with k44 where toks lie as
// quantizeIntRows lays them out.
func vnniTile(k11, k14 intTileFunc, k44 intQuadFunc, toks []int4Token, y []float32, m *wq.Matrix, pz []float32, t0, t1, n0, n1 int) {
	N, RW := m.N, m.Elem.RowWords(m.K)
	quads := t1-t0 >= 4 && int4Strided(toks[t0:t1]) // the 4x4 tile's layout
	for n := n0; n < n1; {
		nr, k := 1, k11
		if n+4 <= n1 {
			nr, k = 4, k14
		}
		t := t0
		for ; quads && nr == 4 && t+4 <= t1; t += 4 {
			a := &toks[t]
			k44(&a.xq[0], uintptr(len(a.xq)), &a.sx[0], &a.xsum[0], int4TokenStride(m.K), unsafe.Pointer(&m.Words[n*RW]), uintptr(4*RW), m.K/int4Group, &y[t*N+n], uintptr(4*N), &pz[2*n], uintptr(8*N))
		}
		for ; t < t1; t++ {
			k(&toks[t].xq[0], &toks[t].sx[0], &toks[t].xsum[0], unsafe.Pointer(&m.Words[n*RW]), uintptr(4*RW), 4*RW, &y[t*N+n], &pz[2*n], uintptr(8*N))
		}
		n += nr
	}
}

// laneSum returns lane l's exact integer sum D = 254·D1 + D2 over a group:
// its 4 code bytes lo that pair with the x codes of int4's low nibbles and
// its 4 bytes hi that pair with the high ones, against the group's x codes
// q (both int8 terms; int4Token's order). int8's lanes (qint8.go) give the
// bytes of a word of each of the group's two chunks.
func laneSum(lo, hi uint32, q []int8, l int) int32 {
	var d1, d2 int32
	for i := range 4 {
		wl, wh := int32(lo>>(8*i)&0xff), int32(hi>>(8*i)&0xff)
		d1 += wl*int32(q[4*l+i]) + wh*int32(q[64+4*l+i])
		d2 += wl*int32(q[128+4*l+i]) + wh*int32(q[192+4*l+i])
	}
	return int4XRatio*d1 + d2
}

// int4Tile computes y[t, n] + bias[n] for t in [t0, t1), n in [n0, n1).
func int4Tile(toks []int4Token, y []float32, m *wq.Matrix, pz, bias []float32, t0, t1, n0, n1 int) {
	N := m.N
	if cpufeat.VNNI() {
		vnniTile(int4VNNI_1x1, int4VNNI_1x4, int4VNNI_4x4, toks, y, m, pz, t0, t1, n0, n1)
	} else if cpufeat.DotProd() {
		RW := m.Elem.RowWords(m.K)
		for n := n0; n < n1; n++ {
			for t := t0; t < t1; t++ {
				int4SDOT_1x1(&toks[t].xq[0], &toks[t].sx[0], &toks[t].xsum[0], unsafe.Pointer(&m.Words[n*RW]), uintptr(4*RW), 4*RW, &y[t*N+n], &pz[2*n], uintptr(8*N))
			}
		}
	} else if lvl := cpufeat.Active(); lvl == cpufeat.AVX2 || lvl == cpufeat.AVX512 {
		RW := m.Elem.RowWords(m.K)
		for n := n0; n < n1; n++ {
			for t := t0; t < t1; t++ {
				int4AVX2_1x1(&toks[t].xq[0], &toks[t].sx[0], &toks[t].xsum[0], unsafe.Pointer(&m.Words[n*RW]), uintptr(4*RW), 4*RW, &y[t*N+n], &pz[2*n], uintptr(8*N))
			}
		}
	} else {
		for t := t0; t < t1; t++ {
			for n := n0; n < n1; n++ {
				y[t*N+n] = dotInt4Generic(toks[t], m, pz, n)
			}
		}
	}
	addBias(y, bias, N, t0, t1, n0, n1)
}

// int4TokenStride is the bytes from one token's block scales (and group
// sums) to the next token's in quantizeIntRows's scratch: K/8 scales and
// K/128 sums a token.
func int4TokenStride(K int) uintptr { return uintptr(4 * (K/8 + K/int4Group)) }

// int4Strided reports whether the quantized tokens q sit as
// quantizeIntRows lays them out (codes 2K bytes apart, scales and sums
// int4TokenStride apart, each token's sums right after its scales), as
// int4VNNI_4x4 reads any 4 of them.
func int4Strided(q []int4Token) bool {
	K := len(q[0].xq) / 2
	xs, ss := uintptr(2*K), int4TokenStride(K)
	x0, s0 := uintptr(unsafe.Pointer(&q[0].xq[0])), uintptr(unsafe.Pointer(&q[0].sx[0]))
	for i, tok := range q {
		d := uintptr(i)
		if len(tok.xq) != 2*K || uintptr(unsafe.Pointer(&tok.xq[0])) != x0+d*xs ||
			uintptr(unsafe.Pointer(&tok.sx[0])) != s0+d*ss || uintptr(unsafe.Pointer(&tok.xsum[0])) != s0+d*ss+uintptr(4*len(tok.sx)) {
			return false
		}
	}
	return true
}

// qlinearInt4 is qlinear for an int4 weight on the integer path.
func (b *Backend) qlinearInt4(y, x []float32, w *qweight, bias []float32, T int) {
	toks, release := b.quantizeIntRows(x, T, w.m.K, false)
	defer release()
	b.tiles(T, w.m.N, func(t0, t1, n0, n1 int) { int4Tile(toks, y, w.m, w.pz, bias, t0, t1, n0, n1) })
}

// quantizeIntRows quantizes x [T, K] for the int4 integer path (int8's with
// permute: each row first in int8XPerm's order, qint8.go), one token a row,
// on b's worker goroutines; release returns the scratch once the tokens are
// no longer read.
func (b *Backend) quantizeIntRows(x []float32, T, K int, permute bool) (toks []int4Token, release func()) {
	G := K / int4Group
	qbuf := make([]int8, 2*T*K)
	sbuf := getScratch(T * (K/8 + G))
	cbuf := make([]int32, T*K/8)
	toks = make([]int4Token, T)
	for t := range toks {
		f := (*sbuf)[t*(K/8+G) : (t+1)*(K/8+G)]
		toks[t] = int4Token{xq: qbuf[2*t*K : 2*(t+1)*K], sx: f[:K/8], xsum: f[K/8:]}
	}
	b.parallelRows(T, K, func(t0, t1 int) {
		var xp []float32
		if permute {
			buf := getScratch(K)
			defer scratchPool.Put(buf)
			xp = *buf
		}
		for t := t0; t < t1; t++ {
			xt := x[t*K : (t+1)*K]
			if permute {
				permuteInt8X(xp, xt)
				xt = xp
			}
			quantizeInt4X(toks[t], xt, cbuf[t*K/8:(t+1)*K/8])
		}
	})
	return toks, func() { scratchPool.Put(sbuf) }
}

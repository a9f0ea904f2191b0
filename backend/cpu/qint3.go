package cpu

// int3 weights (groups of 128, K a multiple of 512) multiply by integer
// dot products on CPUs with AVX-512 VNNI and VBMI, by default (with int4's
// setting: BITDECODE_CPU_INT4=float selects the float packed order of
// qdot.go for both). The arithmetic is int4's (qint4.go) with int3's
// layout:
//
// A chunk of 512 channels is 16 blocks of 3 words (package wq: word j of a
// block holds its channels 10j..10j+9 in ten 3-bit fields, and bit j of
// channels 30 and 31 in its bits 15 and 31). Lane l of zmm i (i = 0, 1, 2)
// is word v = 16i + l of the chunk; VPMULTISHIFTQB widens it to 12 bytes in
// three passes: channels 10j..10j+3, then 10j+4..10j+7, then 10j+8, 10j+9
// and channel 30's and 31's code bits moved to bit j (so that the three
// words' bytes add up to those channels' codes). x is quantized per block
// of 32 channels (channels 30 and 31 belong to all three words of a block,
// so a word's bytes share its block's scale): sx = max|x|/32258, 16-bit
// codes c = rint(x/sx) as two int8 terms (254·q1 + q2), the codes of
// channels 30 and 31 repeated for each of the block's words; and per group
// X̂ = Σ sx·c (float64, rounded once). Per word lane, D = Σ over its 12
// bytes of code·c, exact (|D| ≤ 12·7·32258 < 2²⁴); then per row n, over
// the chunks in order and the zmm i in order,
//
//	acc_l = acc_l + float32(float32(D_l)·float32(s_g·sx_b))   g, b: the group, block of word 16i+l
//	zs_g  = zs_g + float32(z_g·X̂_g)                            (g = the chunk's 4 groups)
//	y     = tree(acc) + ((zs_0 + zs_2) + (zs_1 + zs_3)) (+ bias)
//
// The blocks of 32 (int4's are 8) cost an outlier channel 2⁻¹⁶ of its value
// on its 31 neighbours, still far below a float32 sum's rounding at these
// depths for typical activations. dotInt3IntGeneric is the reference of the
// tiles int3VNNI_1x4 and _1x1, quantizeInt3XGeneric that of int3QuantXVBMI
// (the same codes, scales and block sums); CPUs without VNNI and VBMI run
// int3 on the float packed order.

import (
	"math"
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/wq"
)

// int3XBytes is a token's x code bytes per chunk: 3 zmm × 2 terms × 3
// passes × 64.
const int3XBytes = 3 * 2 * 3 * 64

// int3Words is the words of a chunk of 512 int3 channels.
const int3Words = 48

// int3Integer reports whether m takes the integer int3 path here.
func int3Integer(m *wq.Matrix) bool {
	return m.Elem == wq.Int3 && m.Group == packedGroup && m.K%int3Chunk == 0 && cpufeat.VNNI() && cpufeat.VBMI()
}

// int3Token is one token's quantized x: per chunk the codes' two int8
// terms in the tiles' order (byte 4l+e of pass p, term t, zmm i at
// 384i + 192t + 64p), the scale of each word's block (48 per chunk), and
// per group X̂.
type int3Token struct {
	xq   []int8    // K/512·1152
	sxw  []float32 // K/512·48
	xsum []float32 // K/128
}

// int3PassChan is the block channel of byte e of pass p of word j (channels
// 30 and 31 for pass 2's bytes 2 and 3).
func int3PassChan(j, p, e int) int {
	if p == 2 && e >= 2 {
		return 28 + e
	}
	return 10*j + 4*p + e
}

// quantizeInt3X fills tok from the token's x (len K); cs (len K/32) is
// scratch. Every level gives the same bits: int3QuantXVBMI computes the
// same codes, scales and block sums (X̂ then summed here, in order).
func quantizeInt3X(tok int3Token, x []float32, cs []int32) {
	C := len(x) / int3Chunk
	if !cpufeat.VBMI() || C == 0 {
		quantizeInt3XGeneric(tok, x)
		return
	}
	int3QuantXVBMI(&x[0], &tok.xq[0], &tok.sxw[0], &cs[0], C)
	for ch := range C {
		var sum float64
		for b := range 16 {
			sx := tok.sxw[ch*int3Words+3*b]
			if !(sx > 0 && sx <= math.MaxFloat32) {
				// max|x| was 0 (or sx underflowed), ±Inf or NaN: no codes.
				if sx != 0 {
					sx = float32(math.NaN())
				}
				xq := tok.xq[ch*int3XBytes : (ch+1)*int3XBytes]
				for j := range 3 {
					v := 3*b + j
					tok.sxw[ch*int3Words+v] = sx
					for p := range 3 {
						at := 384*(v/16) + 64*p + 4*(v%16)
						*(*[4]int8)(xq[at : at+4]) = [4]int8{}
						*(*[4]int8)(xq[at+192 : at+196]) = [4]int8{}
					}
				}
				cs[16*ch+b] = 0
			}
			sum += float64(cs[16*ch+b]) * float64(sx)
			if b%4 == 3 {
				tok.xsum[4*ch+b/4] = float32(sum)
				sum = 0
			}
		}
	}
}

// quantizeInt3XGeneric is quantizeInt3X in Go: the reference.
func quantizeInt3XGeneric(tok int3Token, x []float32) {
	for ch := 0; ch < len(x)/int3Chunk; ch++ {
		xq := tok.xq[ch*int3XBytes : (ch+1)*int3XBytes]
		var sum float64
		for b := range 16 {
			blk := (*[32]float32)(x[ch*int3Chunk+32*b : ch*int3Chunk+32*b+32])
			var mb uint32
			for _, v := range blk {
				mb = max(mb, math.Float32bits(v)&0x7fffffff)
			}
			amax := math.Float32frombits(mb)
			sx := amax / int4XMax
			finite := mb <= math.Float32bits(math.MaxFloat32)
			if !finite {
				sx = float32(math.NaN())
			}
			var c [32]int32
			var C int32
			if sx > 0 && finite {
				inv := 1 / float64(sx)
				for k, v := range blk {
					c[k] = max(-int4XMax, min(int4XMax, int32(math.RoundToEven(float64(v)*inv))))
					C += c[k]
				}
			}
			for j := range 3 {
				v := 3*b + j
				tok.sxw[ch*int3Words+v] = sx
				i, l := v/16, v%16
				for p := range 3 {
					for e := range 4 {
						ci := c[int3PassChan(j, p, e)]
						h := int32(uint32(ci+int4XMax+int4XRatio/2)/int4XRatio) - 127
						at := 384*i + 64*p + 4*l + e
						xq[at], xq[at+192] = int8(h), int8(ci-int4XRatio*h)
					}
				}
			}
			sum += float64(C) * float64(sx)
			if b%4 == 3 {
				tok.xsum[4*ch+b/4] = float32(sum)
				sum = 0
			}
		}
	}
}

// int3Byte is the unsigned byte of field f (0..11) of word j of a block: a
// code for f < 10, bit j of channel 30's (f = 10) or 31's (f = 11) code.
func int3Byte(w uint32, j, f int) int32 {
	switch f {
	case 10:
		return int32(w>>15&1) << j
	case 11:
		return int32(w>>31&1) << j
	}
	return int32(w >> int3Shift(f) & 7)
}

// dotInt3IntGeneric returns row n's output (bias excluded) for the
// quantized token tok: the reference of the VNNI tiles.
func dotInt3IntGeneric(tok int3Token, m *wq.Matrix, pz []float32, n int) float32 {
	var acc [dotLanes]float32
	var zs [4]float32
	RW := m.Elem.RowWords(m.K)
	row := m.Words[n*RW : (n+1)*RW]
	for ch := 0; ch < m.K/int3Chunk; ch++ {
		ps := pz[8*(ch*m.N+n) : 8*(ch*m.N+n)+8]
		words := row[ch*int3Words : (ch+1)*int3Words]
		xq := tok.xq[ch*int3XBytes : (ch+1)*int3XBytes]
		for i := range 3 {
			for l := range dotLanes {
				v := 16*i + l
				var d1, d2 int32
				for p := range 3 {
					for e := range 4 {
						q := int3Byte(words[v], v%3, 4*p+e)
						at := 384*i + 64*p + 4*l + e
						d1 += q * int32(xq[at])
						d2 += q * int32(xq[at+192])
					}
				}
				u := ps[v/12] * tok.sxw[ch*int3Words+v]
				acc[l] += float32(float32(int4XRatio*d1+d2) * u)
			}
		}
		for g := range 4 {
			zs[g] += float32(ps[4+g] * tok.xsum[4*ch+g])
		}
	}
	return reduceLanes(&acc) + ((zs[0] + zs[2]) + (zs[1] + zs[3]))
}

// int3Tile computes y[t, n] + bias[n] for t in [t0, t1), n in [n0, n1).
func int3Tile(toks []int3Token, y []float32, m *wq.Matrix, pz, bias []float32, t0, t1, n0, n1 int) {
	N := m.N
	if cpufeat.VNNI() && cpufeat.VBMI() {
		RW := m.Elem.RowWords(m.K)
		for n := n0; n < n1; {
			nr := 1
			if n+4 <= n1 {
				nr = 4
			}
			k := int3VNNI_1x1
			if nr == 4 {
				k = int3VNNI_1x4
			}
			for t := t0; t < t1; t++ {
				k(&toks[t].xq[0], &toks[t].sxw[0], &toks[t].xsum[0], unsafe.Pointer(&m.Words[n*RW]), uintptr(4*RW), 4*RW, &y[t*N+n], &pz[8*n], uintptr(32*N))
			}
			n += nr
		}
	} else {
		for t := t0; t < t1; t++ {
			for n := n0; n < n1; n++ {
				y[t*N+n] = dotInt3IntGeneric(toks[t], m, pz, n)
			}
		}
	}
	addBias(y, bias, N, t0, t1, n0, n1)
}

// qlinearInt3 is qlinear for an int3 weight on the integer path.
func (b *Backend) qlinearInt3(y, x []float32, w *qweight, bias []float32, T int) {
	toks, release := b.quantizeInt3Rows(x, T, w.m.K)
	defer release()
	b.tiles(T, w.m.N, func(t0, t1, n0, n1 int) { int3Tile(toks, y, w.m, w.pz, bias, t0, t1, n0, n1) })
}

// quantizeInt3Rows quantizes x [T, K] for the int3 integer path, one token
// a row, on b's worker goroutines; release returns the scratch once the
// tokens are no longer read.
func (b *Backend) quantizeInt3Rows(x []float32, T, K int) (toks []int3Token, release func()) {
	C := K / int3Chunk
	qbuf := make([]int8, T*C*int3XBytes)
	per := C*int3Words + 4*C
	sbuf := getScratch(T * per)
	cbuf := make([]int32, T*K/32)
	toks = make([]int3Token, T)
	for t := range toks {
		f := (*sbuf)[t*per : (t+1)*per]
		toks[t] = int3Token{xq: qbuf[t*C*int3XBytes : (t+1)*C*int3XBytes], sxw: f[:C*int3Words], xsum: f[C*int3Words:]}
	}
	b.parallelRows(T, K, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			quantizeInt3X(toks[t], x[t*K:(t+1)*K], cbuf[t*K/32:(t+1)*K/32])
		}
	})
	return toks, func() { scratchPool.Put(sbuf) }
}

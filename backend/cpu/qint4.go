package cpu

// int4 weights (groups of 128) may multiply by integer dot products: an
// opt-in (BITDECODE_CPU_INT4=int8dot, handed to the device at a program's
// edge by backend.ConfigureDevices, used for weights loaded after) that
// runs the int4 GEMV about twice as fast at a measured accuracy cost. Off by
// default: on gocoder-23m it keeps RTN's perplexity (8.6959 against 8.6977)
// but costs GPTQ and DEC about 0.1% (int4 GPTQ +1.11% against +1.01%, RTN
// with DEC k_chunk 32 +0.72% against +0.59%; docs/perf/cpu-linear.md v2.9),
// so the default is the float packed order of qdot.go.
//
// Each token's x is quantized to int8 codes in blocks of 8 channels: block
// j (channels 8j..8j+7, the 8 codes of one packed word) gets sx_j =
// max|x_k|/127 (float32) and xq_k = clamp(rint(x_k/sx_j), −127, 127) (0 for
// an all-zero block; a block holding NaN or ±Inf gets sx_j = NaN, so the
// outputs become NaN as a float product would); each group of 128 channels
// also gets X = Σ x_k (float32, in channel order). With ŵ = s·q + z,
//
//	Σ_k x_k·ŵ_k ≈ Σ_j s·sx_j·Σ_{k∈j} q_k·xq_k + z·X
//
// In a group of 16 packed words, lane l is word l, block l: its integer sum
// D_l = Σ q·xq is exact (VPDPBUSD multiplies unsigned codes by signed x
// codes four at a time); then, per row n, over the groups in order,
//
//	acc_l = acc_l + float32(float32(D_l)·float32(s·sx_l))
//	zs    = zs + float32(z·X)
//	y     = tree(acc) + zs (+ bias)
//
// with tree the canonical lane reduction of dot.go. Blocks of 8 keep an
// outlier channel from coarsening more than its 7 neighbours (per 128-
// channel blocks it cost 4% of the largest logit on the model test and 7%
// more KL divergence; docs/perf/cpu-linear.md v2.9). The work per 128
// weights falls from 48 vector operations (each nibble decoded to float,
// FMA, multiply, add) to about 13, so the GEMV runs at the memory's speed
// instead of the FP pipes'. Every level computes the same bits (integer
// sums are exact in any order): the AVX-512 VNNI tiles int4VNNI_1x4 and
// _1x1, the AVX2 tile int4AVX2_1x1 (VPMADDUBSW and VPMADDWD: the same int32
// sums) where VNNI is missing, and dotInt4Generic, the reference.

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/wq"
)

// int4Group is the group size of the integer int4 path.
const int4Group = 128

// EnvInt4 names the environment variable that selects the int4 path:
// "int8dot" for integer dot products, anything else the float path.
const EnvInt4 = "BITDECODE_CPU_INT4"

// int4IntegerOn is whether weights loaded now take the integer path
// (configure sets it from EnvInt4; tests set it directly).
var int4IntegerOn bool

// configure reads the CPU device's settings from env: EnvInt4, "int8dot"
// or "float" (the default).
func configure(env func(string) (string, bool)) error {
	v, ok := env(EnvInt4)
	switch {
	case !ok || v == "" || v == "float":
		int4IntegerOn = false
	case v == "int8dot":
		int4IntegerOn = true
	default:
		return fmt.Errorf("%s=%q: want int8dot or float", EnvInt4, v)
	}
	return nil
}

// int4Integer reports whether m can multiply by integer dot products.
func int4Integer(m *wq.Matrix) bool {
	return m.Elem == wq.Int4 && m.Group == int4Group && m.K%int4Group == 0
}

// int4Token is one token's quantized x: the int8 codes in the tiles' order
// (per group, 64 bytes whose dword l pairs with word l's low nibbles, then
// 64 for its high nibbles), the scale of every block of 8 channels, and
// per group the sum X.
type int4Token struct {
	xq   []int8
	sx   []float32 // K/8
	xsum []float32 // K/128
}

// quantizeInt4X fills tok from the token's x (len K).
func quantizeInt4X(tok int4Token, x []float32) {
	for g := 0; g < len(x)/int4Group; g++ {
		xs := x[g*int4Group : (g+1)*int4Group]
		var sum float32
		for _, v := range xs {
			sum += v
		}
		tok.xsum[g] = sum
		q := tok.xq[g*int4Group : (g+1)*int4Group]
		for l := range dotLanes {
			k0 := 8 * l
			var amax float32
			for _, v := range xs[k0 : k0+8] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			sx := amax / 127
			finite := amax <= math.MaxFloat32
			if !finite {
				sx = float32(math.NaN())
			}
			tok.sx[g*dotLanes+l] = sx
			// Word l's low nibbles are channels k0, k0+4, k0+1, k0+5 (as
			// bytes 0..3 of w & 0x0f0f0f0f); its high ones k0+2, k0+6,
			// k0+3, k0+7 (wq's layout).
			for i, ch := range [8]int{0, 4, 1, 5, 2, 6, 3, 7} {
				var c int8
				if sx > 0 && finite {
					r := math.RoundToEven(float64(xs[k0+ch] / sx))
					c = int8(max(-127, min(127, r)))
				}
				q[(i/4)*64+4*l+i%4] = c
			}
		}
	}
}

// dotInt4Generic returns row n's output (bias excluded) for the quantized
// token tok: the reference of the VNNI tiles.
func dotInt4Generic(tok int4Token, m *wq.Matrix, pz []float32, n int) float32 {
	var acc [dotLanes]float32
	var zs float32
	RW := m.Elem.RowWords(m.K)
	row := m.Words[n*RW : (n+1)*RW]
	for g := 0; g < m.K/int4Group; g++ {
		words := row[g*dotLanes : (g+1)*dotLanes]
		q := tok.xq[g*int4Group : (g+1)*int4Group]
		sx, X := tok.sx[g*dotLanes:(g+1)*dotLanes], tok.xsum[g]
		s, z := pz[2*(g*m.N+n)], pz[2*(g*m.N+n)+1]
		for l, w := range words {
			u := s * sx[l]
			lo, hi := w&0x0f0f0f0f, w>>4&0x0f0f0f0f
			var d int32
			for i := range 4 {
				d += int32(lo>>(8*i)&0xff) * int32(q[4*l+i])
				d += int32(hi>>(8*i)&0xff) * int32(q[64+4*l+i])
			}
			acc[l] += float32(float32(d) * u)
		}
		zs += float32(z * X)
	}
	return reduceLanes(&acc) + zs
}

// int4Tile computes y[t, n] + bias[n] for t in [t0, t1), n in [n0, n1).
func int4Tile(toks []int4Token, y []float32, m *wq.Matrix, pz, bias []float32, t0, t1, n0, n1 int) {
	N := m.N
	if cpufeat.VNNI() {
		RW := m.Elem.RowWords(m.K)
		for n := n0; n < n1; {
			nr := 1
			if n+4 <= n1 {
				nr = 4
			}
			k := int4VNNI_1x1
			if nr == 4 {
				k = int4VNNI_1x4
			}
			for t := t0; t < t1; t++ {
				k(&toks[t].xq[0], &toks[t].sx[0], &toks[t].xsum[0], unsafe.Pointer(&m.Words[n*RW]), uintptr(4*RW), 4*RW, &y[t*N+n], &pz[2*n], uintptr(8*N))
			}
			n += nr
		}
	} else if cpufeat.Active() >= cpufeat.AVX2 {
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
	if bias != nil {
		for t := t0; t < t1; t++ {
			for n := n0; n < n1; n++ {
				y[t*N+n] += bias[n]
			}
		}
	}
}

// qlinearInt4 is qlinear for an int4 weight on the integer path.
func (b *Backend) qlinearInt4(y, x []float32, w *qweight, bias []float32, T int) {
	m := w.m
	N, K := m.N, m.K
	G := K / int4Group
	qbuf := make([]int8, T*K)
	sbuf := getScratch(T * (K/8 + G))
	defer scratchPool.Put(sbuf)
	toks := make([]int4Token, T)
	for t := range toks {
		f := (*sbuf)[t*(K/8+G) : (t+1)*(K/8+G)]
		toks[t] = int4Token{xq: qbuf[t*K : (t+1)*K], sx: f[:K/8], xsum: f[K/8:]}
	}
	b.parallelRows(T, K, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			quantizeInt4X(toks[t], x[t*K:(t+1)*K])
		}
	})
	tn := b.rowsPerItem(T, N)
	tilesT := (T + tileT - 1) / tileT
	tilesN := (N + tn - 1) / tn
	b.parallel(tilesT*tilesN, func(item int) {
		t0 := (item / tilesN) * tileT
		n0 := (item % tilesN) * tn
		int4Tile(toks, y, m, w.pz, bias, t0, min(T, t0+tileT), n0, min(N, n0+tn))
	})
}

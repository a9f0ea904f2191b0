package attn

import (
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// This file holds the inner loops of the CPU decode (decode.go, block.go)
// as a set of kernels with one pure-Go version, the reference and the
// fallback (arm64, the purego tag, cpufeat.Force(Generic)), and assembly
// versions for AVX2 and AVX-512 (kernels_amd64.go) picked at each call from
// cpufeat.Active(). Every kernel works on rows of D values laid out
// contiguously (K/V rows of one block, query rows) and on token counts
// padded to TileTokens; the caller owns the padding.

// TileTokens is the token padding of the scratch rows the kernels read: the
// score kernels compute whole tiles of 8 tokens, the exp and dot kernels
// whole vectors of 16 floats. Rows past the real token count must be
// finite (scores) or carry a score of -Inf (exp).
const TileTokens = 16

// kernels is one SIMD level's implementation of the inner loops.
type kernels struct {
	level cpufeat.Level
	// vnni is set when the integer-key scores run as int8 dot products
	// (scoresU8 is not nil).
	vnni bool
	// vbmi is set when int2 keys are scored from their packed rows
	// (scoresI2x4, AVX-512 VBMI) and unpack2 uses VPMULTISHIFTQB.
	vbmi bool

	// rotate is kv.Rotate, the same bits: the Hadamard rotation of the
	// queries, the outputs and the new keys and values of rotating formats.
	rotate func(x []float32)
	// cvtHalf converts fp16 bits to float32, len(src) values.
	cvtHalf func(dst []float32, src []uint16)
	// toHalf rounds len(src) float32 values to fp16 bits as
	// half.FromFloat32 does (to nearest even; NaN quieted, its payload's
	// top bits kept): the cache's append of new keys and values.
	toHalf func(dst []uint16, src []float32)
	// cvtBF16 converts bf16 bits to float32.
	cvtBF16 func(dst []float32, src []uint16)
	// cvtFP8 converts fp8 bytes (e4m3, else e5m2) to float32, exactly.
	cvtFP8 func(dst []float32, src []byte, e4m3 bool)
	// unpack4 and unpack2 write the codes of packed int4 / int2 data as
	// one byte per code, in channel order (int4: the low nibble first).
	unpack4 func(dst []uint8, src []byte)
	unpack2 func(dst []uint8, src []byte)
	// codesF32 converts byte codes to float32.
	codesF32 func(dst []float32, src []uint8)
	// scoresF32 writes, for each token t < len(out) (a multiple of 8),
	// out[t] = a·A[t]·(q · k[t]) + b·B[t], k rows of len(q) floats.
	scoresF32 func(out, q, k, A, B []float32, a, b float32)
	// scoresU8 is scoresF32 on int8 queries and byte codes (the dot
	// product exact in int32, then converted to float32), plus c·out[t]
	// when c is not 0: out[t] = a·A[t]·(q·k[t]) + b·B[t] (+ c·out[t]).
	scoresU8 func(out []float32, q []int8, k []uint8, A, B []float32, a, b, c float32)
	// pvF32 adds Σ_t w[r·ldw+t]·v[t·ldv+c] over t < n to acc[r·ldacc+c]
	// for rows r < rows (1..4) and channels c < cols (a multiple of 16):
	// each block's sum is formed apart and then added to acc.
	pvF32 func(acc []float32, ldacc int, w []float32, ldw int, v []float32, ldv, n, rows, cols int)
	// expSub replaces x[i] by exp(x[i] - m) (0 for -Inf) and returns the
	// sum, len(x) a multiple of 16, m finite and >= every x[i].
	expSub func(x []float32, m float32) float32
	// maxF32 returns the largest value of x (-Inf for none; len(x) a
	// multiple of 16).
	maxF32 func(x []float32) float32
	// softcap soft-caps x in place, x[i] = c·tanh(x[i]·inv) within
	// tanhRelErr of tanh (len(x) a multiple of 16). Nil where the level
	// has none: softcapRow's Go loops around expSub serve.
	softcap func(x []float32, c, inv float32)
	// max4 writes maxF32 of the four rows x[r·ld : r·ld+n] to out[r], the
	// same bits, in one call (n a multiple of 16, not 0). Nil where the
	// level has no such kernel.
	max4 func(out, x []float32, ld, n int)
	// dotF32 returns Σ a[i]·b[i], len(a) a multiple of 16.
	dotF32 func(a, b []float32) float32
	// scaleF32 multiplies x by a in place (each x[i]·a rounded once, the
	// bits of the Go loop).
	scaleF32 func(x []float32, a float32)
	// foldQuery writes qs = q ⊙ s and returns bias = Σ q ⊙ z; with qi not
	// nil it also quantizes qs to int8 with the step a = max|qs|/127
	// (round to nearest even), returning a (0 for an all-zero qs). len(q)
	// a multiple of 16.
	foldQuery func(qi []int8, qs, q, s, z []float32) (a, bias float32)
	// foldQuery4 is foldQuery (qi not nil) for four rows at stride d of
	// qi, qs and q sharing s and z: row r's step and bias in a[r] and
	// bias[r], the bits of four foldQuery calls. With lay not qNone it
	// also writes the four rows' codes to dst (4·d bytes per row) in the
	// query layout of that score kernel, the bytes bcastQ, bcastQ4 or
	// bcastQ2 would write (qI4L: only the bytes of bcastQ4's that
	// scoresI4x4 reads; d a multiple of 64). Nil where the level has no
	// such kernel (then foldQuery runs per row).
	foldQuery4 func(qi []int8, qs, q, s, z, a, bias []float32, dst []int8, lay qLayout)
	// foldQuery4H is foldQuery4 with s and z given as d fp16 (scale,
	// zero) pairs as a block stores them, converted inside the fold: the
	// bits of cvtPairs then foldQuery4, without the float arrays (round
	// 20). Nil where the level has no such kernel.
	foldQuery4H func(qi []int8, qs, q []float32, pairs []uint16, a, bias []float32, dst []int8, lay qLayout)
	// cvtPairs converts the fp16 pairs src[2i], src[2i+1] to a[i], b[i]
	// (cvtHalf then deinterleave in one pass); len(src) a multiple of 32.
	// Nil where the level has no such kernel.
	cvtPairs func(a, b []float32, src []uint16)
	// deinterleave splits pairs src[2i], src[2i+1] into a[i], b[i];
	// len(src) a multiple of 32.
	deinterleave func(a, b, src []float32)
	// dequantV writes n rows of D float values code·s (the row's group
	// scale) from byte codes, and the zeros apart, z[j·ldz+t] for group j:
	// p holds the (scale, zero) pairs as float32, [n][D/g][2].
	dequantV func(dst, z []float32, ldz int, codes []uint8, p []float32, n, d, g int)
	// pvCodes adds Σ_t w[t]·float(codes[t·ldc+c]) over t < n to acc[c]
	// for c < cols (a multiple of 16): one row's weighted sum of byte codes,
	// formed apart and then added to acc, with no float32 copy of the
	// codes (the integer values of a head dim that is no multiple of 64,
	// v67). Nil where the level has no such kernel.
	pvCodes func(acc, w []float32, codes []uint8, ldc, n, cols int)
	// pvNib4 is pvCodes on packed int4 rows (ldb bytes apart, the low
	// nibble of byte i channel 2i) read as stored, cols a multiple of 32:
	// the same bits as pvCodes on the unpacked codes (v68). Nil where the
	// level has no such kernel.
	pvNib4 func(acc, w []float32, packed []byte, ldb, n, cols int)
	// quantW quantizes the PV weights w[j][t] = p[t]·s[j·lds+t] of groups
	// j < groups and tokens t < n (a multiple of 16) to int16 with one
	// step Δ = max w / 32767: wq[j·ldq+t] = rint(w/Δ). It returns Δ (0,
	// with all weights 0, when no w is positive).
	quantW func(wq []int16, ldq int, p, s []float32, lds, n, groups int) float32
	// pvS16 adds, for 4 rows r and channels c < d (a multiple of 64),
	// delta[r]·Σ_t wq[r·ldw + (c>>gshift)·ldq + t]·codes[t·d+c] over t < n
	// (even, at most PVMaxTokens) to acc[r·ldacc+c]: the integer PV of the
	// VNNI path, exact in int32 before the multiply by delta. Nil where
	// the level has no such kernel. pf, if not empty, is prefetched two
	// lines per pair of tokens (the next block's values).
	pvS16 func(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, codes []uint8, n, d, gshift int, pf []byte)
	// pvI4 is pvS16 on packed int4 rows (d/2 bytes) read as stored, for
	// groups of at least 64 channels (gshift >= 6). Nil where the level has
	// no such kernel.
	// pf, if not empty, is prefetched a line per pair of tokens.
	pvI4 func(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, packed []byte, n, d, gshift int, pf []byte)
	// pvI4x2 is pvI4 for two rows (acc, delta and wq rows 0 and 1 only):
	// the same sums per row, for a GQA group of 2. Nil where the level has
	// no such kernel.
	pvI4x2 func(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, packed []byte, n, d, gshift int, pf []byte)
	// pvU8 is the integer PV with 8-bit weights for rows r < rows (2, 3
	// or 4; 3 for a last group of three rows, R % 4 == 3, v86): it adds delta[r]·Σ_t wq[r·ldw + (c>>gshift)·ldq + t]·code(t, c)
	// over t < n (a multiple of 4, at most PVMaxTokens) to acc[r·ldacc+c]
	// for channels c < d (a multiple of 64), the codes read from packed
	// rows of bits (4 or 2) bits per code as stored (d·bits/8 bytes), groups
	// of at least 64 channels (gshift >= 6). VPDPBUSD multiplies four
	// tokens' u8 weights with their codes per 32-bit lane: half the
	// multiplies of pvI4's VPDPWSSD. Nil where the level has no such kernel
	// (AVX-512 VNNI + VBMI). pf, if not empty, is prefetched two lines per
	// four tokens.
	pvU8 func(acc []float32, ldacc int, delta []float32, wq []uint8, ldw, ldq int, packed []byte, n, d, gshift, bits, rows int, pf []byte)
	// unlaneU8, where not nil, says that pvU8 with bits 4 reads and writes
	// its accumulators in the lane order (laneU8Go: per 64 channels the
	// even ones 0..30, the odd ones 1..31, the even 32..62, the odd
	// 33..63) and puts acc (a multiple of 64 floats) back in channel
	// order: the epilogue's dword interleave once a task, not once a call
	// and row (docs/perf/cpu-attention.md v66). The floats move as they
	// are: the same bits.
	unlaneU8 func(acc []float32)
	// quantWRowsU8 is quantWRows with u8 weights for pvU8: row r's step
	// delta[r] = max w/255 and wq = rint(w/Δ), and the zeros' sums also
	// take the weights' rounding times mid (the codes' midpoint):
	// zsum[r·groups+j] = Σ_t p[t]·z[j·lds+t] + mid·Σ_t (w_t - Δ·wq_t),
	// so that the PV's error is Σ_t (Δ·wq_t - w_t)·(code_t - mid).
	quantWRowsU8 func(wq []uint8, ldw, ldq int, p []float32, ldp int, s, z []float32, lds, n, groups, rows int, mid float32, delta, zsum []float32)
	// softmaxU8 is the softmax's exp fused with quantWRowsU8 for pvU8
	// (rows r < rows, x rows at stride ldx): x[t] is replaced by
	// p_t = expU8(x[t] - m[r]) (within expU8RelErr of e^(x-m): the weights
	// are rounded to 8 bits next, so the exp needs ~10 bits, not 24),
	// lsum[r] = Σ_t p_t (lanes folded as in sum16), and the weights
	// w = p·s are quantized as quantWRowsU8 does (delta[r] = max w/255,
	// wq = rint(w/Δ)), the residues' sum taken as Σ_t w_t - Δ·Σ_t wq_t:
	// zsum[r·groups+j] = Σ_t p_t·z[j·lds+t] + mid·(Σ_t w_t - Δ·Σ_t wq_t).
	// With one group (groups 1) x[t] ends as w_t = p_t·s[t] instead of
	// p_t (the product the steps and codes are made from: v76). sw is
	// scratch of rows·groups floats. Nil where the level has no such
	// kernel (then expSub and quantWRowsU8 run).
	softmaxU8 func(wq []uint8, ldw, ldq int, x []float32, ldx int, m, s, z []float32, lds, n, groups, rows int, mid float32, delta, zsum, lsum, sw []float32)
	// softmaxU8H is softmaxU8 for one value group (ldq = ldw) with its
	// scales and zeros given as the n fp16 (scale, zero) pairs a block
	// stores (pairs[2t], pairs[2t+1]): the bits of cvtPairs then
	// softmaxU8 (v79). With pairs2 not nil the rows [rows/2, rows) take
	// theirs from pairs2 (rows a multiple of 4): two blocks' rows in one
	// call, each row's results those of a call on its own block (v80).
	// Nil where the level has no such kernel.
	softmaxU8H func(wq []uint8, ldw int, x []float32, ldx int, m []float32, pairs, pairs2 []uint16, n, rows int, mid float32, delta, zsum, lsum, sw []float32)
	// twoBlocks lets the block loop score two packed blocks before one
	// softmaxU8H call of both blocks' rows (run's pair path, v80).
	twoBlocks bool
	// prefetch asks for b to be brought into L2 (nil: no-op).
	prefetch func(b []byte)
	// scoresHalf2 writes out0[t] = q0·k[t] and out1[t] = q1·k[t] for
	// fp16 rows k, len(out0) a multiple of 8 (nil where the level scores
	// converted float32 tiles); pf, if not empty, is prefetched a share per
	// 8-token tile.
	scoresHalf2 func(out0, out1, q0, q1 []float32, k []uint16, pf []byte)
	// quantWRows is quantW for rows r < rows (p rows at stride ldp, wq
	// rows at ldw, steps to delta[r]) that also returns the zeros' sums
	// zsum[r·groups+j] = Σ_t p[t]·z[j·lds+t] (lane order of sum16).
	quantWRows func(wq []int16, ldw, ldq int, p []float32, ldp int, s, z []float32, lds, n, groups, rows int, delta, zsum []float32)
	// bcastQ writes each 16-byte chunk of q four times (the lanes of a
	// 512-bit vector), len(dst) >= 4·len(q): scoresU8x4's query operand.
	bcastQ func(dst, q []int8)
	// scoresU8x4 is scoresU8 for four query rows at once (rows of out at
	// stride ldo, q the rows' bcastQ chunks at stride 4·d, per-row a and b
	// in ab[0:4] and ab[4:8]), n a multiple of 16, d of 64; pf, if not
	// empty, is prefetched a share per tile (the next block's keys). Nil
	// where the level has no such kernel.
	scoresU8x4 func(out []float32, ldo int, q []int8, k []uint8, A, B, ab []float32, n, d int, c float32, pf []byte)
	// bcastQ4 and scoresI4x4 are bcastQ and scoresU8x4 for packed int4
	// keys read as stored (no unpacking): q's even channels (the low
	// nibbles) and odd channels per 32, each repeated in four lanes; d a
	// multiple of 64; A and B empty stand for ones (KC keys; scoresI4x4
	// only); pf, if not empty, is prefetched a share per tile. Nil where
	// the level has no such kernel.
	bcastQ4    func(dst, q []int8)
	scoresI4x4 func(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte)
	// scoresI4x3 is scoresI4x4 for three rows (rows 0..2 of out, q and
	// ab; out's row 3 not written), for a last group of three rows (R %
	// 4 == 3: GQA groups 3 and 7) without a zero fourth row's multiplies
	// (v87). Nil where the level has no such kernel.
	scoresI4x3 func(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte)
	// scoresI4x2 is scoresI4x4 for two rows (rows 0 and 1 of out, q and
	// ab; a in ab[0:2], b in ab[4:6]), for a GQA group of 2. Nil where the
	// level has no such kernel.
	scoresI4x2 func(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte)
	// bcastQ2 and scoresI2x4 are bcastQ and scoresU8x4 for packed int2
	// keys read as stored: per 64 channels c0, 64 bytes at 4·c0 whose
	// dword 4g+m holds q's channels c0+16g+4b+m (b < 4), the next 192 not
	// written; d a multiple of 64; A and B empty stand for ones (KC keys); pf, if not
	// empty, is prefetched a share per tile. Nil where the level has no
	// such kernel.
	bcastQ2    func(dst, q []int8)
	scoresI2x4 func(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte)
	// scoresI2x3 is scoresI2x4 for three rows (rows 0..2 of out, q and
	// ab; out's row 3 not written), as scoresI4x3 (v87). Nil where the
	// level has no such kernel.
	scoresI2x3 func(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte)
	// splitQuery quantizes q to 15 bits in two int8 halves (block.go).
	splitQuery func(hi, lo []int8, q []float32) float32
	// pvHalf is pvF32 on fp16 V rows converted in registers (nil where
	// the level converts the rows first); with 4 rows, pf, if not empty, is
	// prefetched two lines per token of each 64-channel pass.
	pvHalf func(acc []float32, ldacc int, w []float32, ldw int, v []uint16, ldv, n, rows, cols int, pf []byte)
	// padRows copies n rows of srcRow bytes (src, srcRow apart) to rows of
	// dstRow >= srcRow bytes (dst, dstRow apart), each followed by zero
	// bytes up to dstRow: a block's rows at a head dim that is not a
	// multiple of 64 laid out as the padded width's (v82). Nil where the
	// level does not pad (then such head dims keep their own paths).
	padRows func(dst, src []byte, n, srcRow, dstRow int)
}

// PVMaxTokens is the most tokens one integer PV call sums: n·32767·255
// stays below 2^31, so the int32 sums are exact.
const PVMaxTokens = 256

// genericKernels is the pure-Go set.
var genericKernels = kernels{
	level:     cpufeat.Generic,
	rotate:    kv.Rotate,
	cvtHalf:   cvtHalfGo,
	toHalf:    toHalfGo,
	cvtBF16:   cvtBF16Go,
	cvtFP8:    cvtFP8Go,
	unpack4:   unpack4Go,
	unpack2:   unpack2Go,
	codesF32:  codesF32Go,
	scoresF32: scoresF32Go,
	scoresU8:  scoresU8Go,
	pvF32:     pvF32Go,
	expSub:    expSubGo,
	maxF32:    maxF32Go,
	dotF32:    dotF32Go,
	scaleF32:  scaleF32Go,

	foldQuery:    foldQueryGo,
	deinterleave: deinterleaveGo,
	dequantV:     dequantVGo,
	quantW:       quantWGo,
	quantWRows:   quantWRowsGo,
	splitQuery:   splitQuery,
}

// genericVNNIKernels is the pure-Go set with the integer-key scores of the
// VNNI path (queries quantized to int8): the reference of that path, which
// tests run on every machine.
var genericVNNIKernels = func() kernels {
	k := genericKernels
	k.vnni = true
	k.pvS16 = pvS16Go
	// No scoresU8x4 (scoresU8x4Go is its reference in the kernel tests):
	// this set keeps the row-at-a-time integer scores under test.
	k.bcastQ = bcastQGo
	k.padRows = padRowsGo
	return k
}()

// genericU8Kernels is genericVNNIKernels with the 8-bit PV weights of
// int4 and int2 values (pvU8, quantWRowsU8): the reference of the AVX-512
// VBMI path, which tests run on every machine.
var genericU8Kernels = func() kernels {
	k := genericVNNIKernels
	k.pvU8 = pvU8Go
	k.quantWRowsU8 = quantWRowsU8Go
	k.softmaxU8 = softmaxU8Go
	k.softmaxU8H = softmaxU8HGo
	k.twoBlocks = true
	return k
}()

// testKernels, when tests set it, replaces the active level's kernels.
var testKernels *kernels

// activeKernels returns the kernel set of the active SIMD level.
func activeKernels() *kernels {
	if testKernels != nil {
		return testKernels
	}
	// The integer dot products: AVX-512 VNNI on amd64, the dot-product
	// extension (SDOT) on arm64; each is false on the other architecture.
	return kernelsFor(cpufeat.Active(), cpufeat.VNNI() || cpufeat.DotProd(), cpufeat.VBMI())
}

// padRowsGo is padRows in Go.
func padRowsGo(dst, src []byte, n, srcRow, dstRow int) {
	if !(srcRow >= 0 && dstRow >= srcRow && len(src) >= n*srcRow && len(dst) >= n*dstRow) {
		panic(fmt.Sprintf("attn: padRows: n %d, rows of %d to %d bytes, src %d, dst %d", n, srcRow, dstRow, len(src), len(dst)))
	}
	if srcRow == dstRow {
		copy(dst[:n*dstRow], src)
		return
	}
	for i := range n {
		row := dst[i*dstRow : (i+1)*dstRow]
		copy(row, src[i*srcRow:(i+1)*srcRow])
		clear(row[srcRow:])
	}
}

// fp16ToF32 maps every fp16 bit pattern to its float32 value: the pure-Go
// conversion without branches.
var fp16ToF32 = func() []float32 {
	t := make([]float32, 1<<16)
	for h := range t {
		t[h] = half.ToFloat32(uint16(h))
	}
	return t
}()

func cvtHalfGo(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = fp16ToF32[h]
	}
}

func toHalfGo(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = half.FromFloat32(x)
	}
}

func cvtBF16Go(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

// nibbles[b] holds the two int4 codes of byte b, low nibble first, as a
// little-endian uint16; crumbs[b] the four int2 codes as a uint32.
var nibbles, crumbs = func() (n [256]uint16, c [256]uint32) {
	for b := range 256 {
		n[b] = uint16(b&15) | uint16(b>>4)<<8
		c[b] = uint32(b&3) | uint32(b>>2&3)<<8 | uint32(b>>4&3)<<16 | uint32(b>>6)<<24
	}
	return
}()

func unpack4Go(dst []uint8, src []byte) {
	dst = dst[:2*len(src)]
	for i, b := range src {
		v := nibbles[b]
		dst[2*i], dst[2*i+1] = uint8(v), uint8(v>>8)
	}
}

func unpack2Go(dst []uint8, src []byte) {
	dst = dst[:4*len(src)]
	for i, b := range src {
		v := crumbs[b]
		dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = uint8(v), uint8(v>>8), uint8(v>>16), uint8(v>>24)
	}
}

func codesF32Go(dst []float32, src []uint8) {
	dst = dst[:len(src)]
	for i, c := range src {
		dst[i] = float32(c)
	}
}

func scoresF32Go(out, q, k, A, B []float32, a, b float32) {
	d := len(q)
	A, B = A[:len(out)], B[:len(out)]
	for t := range out {
		out[t] = a*A[t]*dot(q, k[t*d:(t+1)*d]) + b*B[t]
	}
}

func scoresU8Go(out []float32, q []int8, k []uint8, A, B []float32, a, b, c float32) {
	d := len(q)
	A, B = A[:len(out)], B[:len(out)]
	for t := range out {
		row := k[t*d : (t+1)*d]
		var s int32
		for c, x := range q {
			s += int32(x) * int32(row[c])
		}
		x := a*A[t]*float32(s) + b*B[t]
		if c != 0 {
			x += c * out[t]
		}
		out[t] = x
	}
}

func pvF32Go(acc []float32, ldacc int, w []float32, ldw int, v []float32, ldv, n, rows, cols int) {
	var sum [4 * 256]float32
	for r := 0; r < rows; r++ {
		s := sum[:cols]
		clear(s)
		for t := 0; t < n; t++ {
			if p := w[r*ldw+t]; p != 0 {
				axpy(s, p, v[t*ldv:t*ldv+cols])
			}
		}
		a := acc[r*ldacc : r*ldacc+cols]
		for c := range a {
			a[c] += s[c]
		}
	}
}

// The exp of the softmax: Cephes' expf (range reduction by ln 2 split in
// two constants, a degree-5 polynomial), in float32, the same steps as the
// AVX2 kernel; the AVX-512 kernel reduces the same way with a degree-5
// minimax polynomial and fewer multiplier operations (expSubAVX512).
// Relative error within expRelErr (measured against math.Exp over
// [-87, 0] in TestExp32, every level's expSub in TestExpSubSweep).
const (
	expMin    = -87.33654 // below: exp underflows float32's normal range, returns 0
	expLog2e  = 1.44269504088896341
	expC1     = 0.693359375
	expC2     = -2.12194440e-4
	expP0     = 1.9875691500e-4
	expP1     = 1.3981999507e-3
	expP2     = 8.3334519073e-3
	expP3     = 4.1665795894e-2
	expP4     = 1.6666665459e-1
	expP5     = 5.0000001201e-1
	expRelErr = 4 * eps32f // in units of float32 epsilon, see TestExp32
	eps32f    = 1.0 / (1 << 23)
)

// exp32 returns e^x for x <= 0 as the vector kernels compute it.
func exp32(x float32) float32 {
	if !(x >= expMin) { // -Inf, NaN and underflow
		return 0
	}
	n := float32(math.RoundToEven(float64(x * expLog2e)))
	r := x - n*expC1
	r -= n * expC2
	p := float32(expP0)
	p = p*r + expP1
	p = p*r + expP2
	p = p*r + expP3
	p = p*r + expP4
	p = p*r + expP5
	p = p*(r*r) + r
	p += 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

func expSubGo(x []float32, m float32) float32 {
	var s [16]float32
	for i := range x {
		e := exp32(x[i] - m)
		x[i] = e
		s[i%16] += e
	}
	return sum16(&s)
}

// sum16 adds 16 lane sums in the order the vector kernels do: halves
// folded onto each other (8, 4, 2, 1).
func sum16(s *[16]float32) float32 {
	for w := 8; w >= 1; w /= 2 {
		for i := 0; i < w; i++ {
			s[i] += s[i+w]
		}
	}
	return s[0]
}

func maxF32Go(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

func scaleF32Go(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

func dotF32Go(a, b []float32) float32 {
	var s [16]float32
	b = b[:len(a)]
	for i := range a {
		s[i%16] += a[i] * b[i]
	}
	return sum16(&s)
}

// dot returns Σ a[i]·b[i] with four accumulators (a fixed order).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds alpha·x to y.
func axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * x[i]
	}
}

func foldQueryGo(qi []int8, qs, q, s, z []float32) (a, bias float32) {
	var bs [16]float32
	var amax float32
	qs, s, z = qs[:len(q)], s[:len(q)], z[:len(q)]
	for c, x := range q {
		y := x * s[c]
		qs[c] = y
		bs[c%16] += x * z[c]
		amax = max(amax, abs32(y))
	}
	bias = sum16(&bs)
	if qi == nil {
		return 0, bias
	}
	if !(amax > 0) {
		clear(qi[:len(q)])
		return 0, bias
	}
	inv := 127 / amax
	for c, y := range qs {
		qi[c] = int8(math.RoundToEven(float64(y * inv)))
	}
	return amax / 127, bias
}

func deinterleaveGo(a, b, src []float32) {
	a, b = a[:len(src)/2], b[:len(src)/2]
	for i := range a {
		a[i], b[i] = src[2*i], src[2*i+1]
	}
}

func dequantVGo(dst, z []float32, ldz int, codes []uint8, p []float32, n, d, g int) {
	groups := d / g
	for t := 0; t < n; t++ {
		for j := 0; j < groups; j++ {
			s := p[2*(t*groups+j)]
			z[j*ldz+t] = p[2*(t*groups+j)+1]
			row := dst[t*d+j*g : t*d+(j+1)*g]
			for c, x := range codes[t*d+j*g : t*d+(j+1)*g] {
				row[c] = float32(x) * s
			}
		}
	}
}

func quantWGo(wq []int16, ldq int, p, s []float32, lds, n, groups int) float32 {
	var m float32
	for j := 0; j < groups; j++ {
		for t, x := range p[:n] {
			m = max(m, x*s[j*lds+t])
		}
	}
	if !(m > 0) {
		for j := 0; j < groups; j++ {
			clear(wq[j*ldq : j*ldq+n])
		}
		return 0
	}
	inv := 32767 / m
	for j := 0; j < groups; j++ {
		for t, x := range p[:n] {
			wq[j*ldq+t] = int16(math.RoundToEven(float64(x * s[j*lds+t] * inv)))
		}
	}
	return m / 32767
}

func pvS16Go(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, codes []uint8, n, d, gshift int, pf []byte) {
	pvRowsGo(acc, ldacc, delta, wq, ldw, ldq, codes, n, d, gshift, 4)
}

// pvRowsGo adds delta[r]·Σ_t wq[r][c>>gshift][t]·codes[t][c] to acc's row r
// for rows rows and d channels, with exact int32 sums: the arithmetic of
// pvS16 (16-bit weights) and pvU8 (8-bit weights).
func pvRowsGo[W int16 | uint8](acc []float32, ldacc int, delta []float32, wq []W, ldw, ldq int, codes []uint8, n, d, gshift, rows int) {
	var sum [256]int32
	for r := 0; r < rows; r++ {
		s := sum[:d]
		clear(s)
		for t := 0; t < n; t++ {
			for c, x := range codes[t*d : (t+1)*d] {
				s[c] += int32(wq[r*ldw+(c>>gshift)*ldq+t]) * int32(x)
			}
		}
		a := acc[r*ldacc : r*ldacc+d]
		for c := range a {
			a[c] += delta[r] * float32(s[c])
		}
	}
}

// qLayout names a four-row score kernel's query layout (foldQuery4).
type qLayout int

// The query layouts: none, bcastQ's (scoresU8x4), bcastQ4's (scoresI4x4
// and scoresI4x2), bcastQ2's (scoresI2x4), and the first 16 bytes of each
// 64 of bcastQ4's, all scoresI4x4 reads (v64).
const (
	qNone qLayout = iota
	qU8
	qI4
	qI2
	qI4L
)

// qPerm holds, per layout, the VPERMB indices that take 64 query codes
// to their 256 bytes in the layout: the reference bcast of the bytes
// 0..63.
var qPerm = func() (p [5][4 * zmmBytes]int8) {
	var id [zmmBytes]int8
	for i := range id {
		id[i] = int8(i)
	}
	bcastQGo(p[qU8][:], id[:])
	bcastQ4Go(p[qI4][:], id[:])
	bcastQ2Go(p[qI2][:], id[:])
	p[qI4L] = p[qI4]
	return p
}()

func bcastQGo(dst, q []int8) {
	for k := 0; k < len(q); k += 16 {
		for l := 0; l < 4; l++ {
			copy(dst[4*k+16*l:4*k+16*l+16], q[k:k+16])
		}
	}
}

func scoresU8x4Go(out []float32, ldo int, q []int8, k []uint8, A, B, ab []float32, n, d int, c float32, pf []byte) {
	row := make([]int8, d)
	for r := 0; r < 4; r++ {
		for j := 0; j < d; j += 16 { // the first lane of each broadcast chunk
			copy(row[j:j+16], q[r*4*d+4*j:r*4*d+4*j+16])
		}
		scoresU8Go(out[r*ldo:r*ldo+n], row, k, A, B, ab[r], ab[4+r], c)
	}
}

func quantWRowsGo(wq []int16, ldw, ldq int, p []float32, ldp int, s, z []float32, lds, n, groups, rows int, delta, zsum []float32) {
	for r := 0; r < rows; r++ {
		pr := p[r*ldp : r*ldp+n]
		delta[r] = quantWGo(wq[r*ldw:], ldq, pr, s, lds, n, groups)
		for j := 0; j < groups; j++ {
			zsum[r*groups+j] = dotF32Go(pr, z[j*lds:j*lds+n])
		}
	}
}

func quantWRowsU8Go(wq []uint8, ldw, ldq int, p []float32, ldp int, s, z []float32, lds, n, groups, rows int, mid float32, delta, zsum []float32) {
	for r := 0; r < rows; r++ {
		pr := p[r*ldp : r*ldp+n]
		var m float32
		for j := 0; j < groups; j++ {
			for t, x := range pr {
				m = max(m, x*s[j*lds+t])
			}
		}
		var dl, inv float32
		if m > 0 {
			dl, inv = m/255, 255/m
		}
		delta[r] = dl
		for j := 0; j < groups; j++ {
			var zl, rl [16]float32
			for t, x := range pr {
				w := x * s[j*lds+t]
				qv := float32(math.RoundToEven(float64(w * inv)))
				wq[r*ldw+j*ldq+t] = uint8(qv)
				zl[t%16] += x * z[j*lds+t]
				rl[t%16] += w - float32(dl*qv)
			}
			zsum[r*groups+j] = sum16(&zl) + mid*sum16(&rl)
		}
	}
}

// u8LaneChunk is the channels one lane order permutes among (unlaneU8).
const u8LaneChunk = 64

// u8LaneChannel is the channel at position p (< u8LaneChunk) of int4
// pvU8's lane order: vector p/16 of four (even, odd, even, odd channels;
// the second pair 32 channels on), lane p%16.
func u8LaneChannel(p int) int {
	v, l := p/16, p%16
	return v/2*32 + 2*l + v%2
}

// unlaneU8Go is unlaneU8 in Go: acc (a multiple of u8LaneChunk floats)
// from the lane order to channel order.
func unlaneU8Go(acc []float32) {
	var t [u8LaneChunk]float32
	for c0 := 0; c0+u8LaneChunk <= len(acc); c0 += u8LaneChunk {
		copy(t[:], acc[c0:])
		for p, x := range t {
			acc[c0+u8LaneChannel(p)] = x
		}
	}
}

// laneU8Go is the inverse of unlaneU8Go: acc from channel order to the
// lane order (for accumulators another kernel wrote before an int4 pvU8
// block of the same task; once a task at most).
func laneU8Go(acc []float32) {
	var t [u8LaneChunk]float32
	for c0 := 0; c0+u8LaneChunk <= len(acc); c0 += u8LaneChunk {
		copy(t[:], acc[c0:])
		for p := range t {
			acc[c0+p] = t[u8LaneChannel(p)]
		}
	}
}

// pvU8Go is pvU8 in Go: the codes unpacked, exact int32 sums per row.
func pvU8Go(acc []float32, ldacc int, delta []float32, wq []uint8, ldw, ldq int, packed []byte, n, d, gshift, bits, rows int, pf []byte) {
	codes := make([]uint8, n*d)
	if bits == 4 {
		unpack4Go(codes, packed[:n*d/2])
	} else {
		unpack2Go(codes, packed[:n*d/4])
	}
	pvRowsGo(acc, ldacc, delta, wq, ldw, ldq, codes, n, d, gshift, rows)
}

func bcastQ4Go(dst, q []int8) {
	for c0 := 0; c0 < len(q); c0 += 32 {
		for l := 0; l < 4; l++ {
			for i := 0; i < 16; i++ {
				dst[4*c0+16*l+i] = q[c0+2*i]
				dst[4*c0+64+16*l+i] = q[c0+2*i+1]
			}
		}
	}
}

// bcastQ2Go is bcastQ2 in Go (the kernel test's reference): per 64
// channels c0, 64 bytes at 4·c0 (the next 192 are not written) whose dword
// 4g+m holds channels c0+16g+4b+m (b < 4), the channels of a packed
// dword's bytes shifted right by 2m (scoresI2x4VBMI's broadcast operand).
func bcastQ2Go(dst, q []int8) {
	for c0 := 0; c0 < len(q); c0 += 64 {
		for g := 0; g < 4; g++ {
			for m := 0; m < 4; m++ {
				for b := 0; b < 4; b++ {
					dst[4*c0+16*g+4*m+b] = q[c0+16*g+4*b+m]
				}
			}
		}
	}
}

// scoresI2x4Go is scoresI2x4 in Go: the codes unpacked and the rows'
// queries put back in channel order, then scoresU8 per row (A and B
// empty: ones).
func scoresI2x4Go(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte) {
	if len(A) == 0 && len(B) == 0 {
		A, B = make([]float32, n), make([]float32, n)
		for t := range A {
			A[t], B[t] = 1, 1
		}
	}
	row := make([]int8, d)
	codes := make([]uint8, n*d)
	unpack2Go(codes, k[:n*d/4])
	for r := 0; r < 4; r++ {
		for c0 := 0; c0 < d; c0 += 64 {
			for g := 0; g < 4; g++ {
				for m := 0; m < 4; m++ {
					for b := 0; b < 4; b++ {
						row[c0+16*g+4*b+m] = q[r*4*d+4*c0+16*g+4*m+b]
					}
				}
			}
		}
		scoresU8Go(out[r*ldo:r*ldo+n], row, codes, A, B, ab[r], ab[4+r], c)
	}
}

// scoresI4x4Go is scoresI4x4 in Go: the codes unpacked and the rows'
// queries put back in channel order, then scoresU8 per row (A and B
// empty: ones).
func scoresI4x4Go(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte) {
	if len(A) == 0 && len(B) == 0 {
		A, B = make([]float32, n), make([]float32, n)
		for t := range A {
			A[t], B[t] = 1, 1
		}
	}
	row := make([]int8, d)
	codes := make([]uint8, n*d)
	unpack4Go(codes, k[:n*d/2])
	for r := 0; r < 4; r++ {
		for c0 := 0; c0 < d; c0 += 32 {
			for i := 0; i < 16; i++ {
				row[c0+2*i] = q[r*4*d+4*c0+i]
				row[c0+2*i+1] = q[r*4*d+4*c0+64+i]
			}
		}
		scoresU8Go(out[r*ldo:r*ldo+n], row, codes, A, B, ab[r], ab[4+r], c)
	}
}

func pvI4Go(acc []float32, ldacc int, delta []float32, wq []int16, ldw, ldq int, packed []byte, n, d, gshift int, pf []byte) {
	codes := make([]uint8, n*d)
	unpack4Go(codes, packed[:n*d/2])
	pvS16Go(acc, ldacc, delta, wq, ldw, ldq, codes, n, d, gshift, nil)
}

func cvtFP8Go(dst []float32, src []byte, e4m3 bool) {
	lut := &fp8Tables[1]
	if e4m3 {
		lut = &fp8Tables[0]
	}
	dst = dst[:len(src)]
	for i, b := range src {
		dst[i] = lut[b]
	}
}

// The exp of the u8-weight path (softmaxU8): its probabilities go to the
// PV as weights rounded to 8 bits (steps of max w/255, a relative error up
// to 2^-9 at the largest weight), so a degree-3 polynomial for 2^f on
// |f| <= 1/2 (minimax for the relative error, 7.5e-5 before float32
// rounding) serves instead of exp32's degree 5 with Cody-Waite's two-part
// ln 2: x·log2 e = n + f, n = rint, 2^n put into the exponent bits.
// Arguments below expU8Min (2^-125) give 0, so every result is normal.
// Relative error within expU8RelErr of e^x (TestExpU8Sweep: 7.5e-5 of
// the polynomial, the reduction's |x·log2 e|·eps <= 1.5e-5, float32
// rounding).
const (
	expU8Min    = -86.64339 // -125·ln 2
	expU8C0     = 0.99992806
	expU8C1     = 0.69326097
	expU8C2     = 0.24261113
	expU8C3     = 0.05517167
	expU8Magic  = 12582912.0 // 1.5·2^23: adding it rounds to an integer
	expU8RelErr = 1e-4
)

// expU8 returns e^x for x <= 0 as softmaxU8's kernels compute it (the
// AVX-512 kernel's FMAs round once where these steps round twice: the
// two agree within expU8RelErr of e^x, not bit for bit).
func expU8(x float32) float32 {
	if !(x >= expU8Min) { // -Inf, NaN, and below 2^-125
		return 0
	}
	y := float64(x) * expLog2e
	n := math.RoundToEven(y)
	f := y - n
	p := ((expU8C3*f+expU8C2)*f+expU8C1)*f + expU8C0
	return float32(p) * math.Float32frombits(uint32(int32(n)+127)<<23)
}

func softmaxU8Go(wq []uint8, ldw, ldq int, x []float32, ldx int, m, s, z []float32, lds, n, groups, rows int, mid float32, delta, zsum, lsum, sw []float32) {
	for r := 0; r < rows; r++ {
		var l [16]float32
		xr := x[r*ldx : r*ldx+n]
		for t := range xr {
			e := expU8(xr[t] - m[r])
			xr[t] = e
			l[t%16] += e
		}
		lsum[r] = sum16(&l)
	}
	quantU8Rows(wq, ldw, ldq, x, ldx, s, z, lds, n, groups, rows, mid, delta, zsum, sw)
	if groups == 1 { // x ends as the weights w = p·s (v76)
		for r := 0; r < rows; r++ {
			for t, w := range x[r*ldx : r*ldx+n] {
				x[r*ldx+t] = w * s[t]
			}
		}
	}
}

// softmaxU8HGo is softmaxU8H in Go: the pairs converted (fp16ToF32, the
// floats cvtPairs writes), then softmaxU8Go with one group; with pairs2,
// each half of the rows on its own pairs (the rows are independent).
func softmaxU8HGo(wq []uint8, ldw int, x []float32, ldx int, m []float32, pairs, pairs2 []uint16, n, rows int, mid float32, delta, zsum, lsum, sw []float32) {
	if pairs2 != nil {
		h := rows / 2
		softmaxU8HGo(wq, ldw, x, ldx, m, pairs, nil, n, h, mid, delta, zsum, lsum, sw)
		softmaxU8HGo(wq[h*ldw:], ldw, x[h*ldx:], ldx, m[h:], pairs2, nil, n, rows-h, mid, delta[h:], zsum[h:], lsum[h:], sw[h:])
		return
	}
	s, z := make([]float32, n), make([]float32, n)
	for t := range n {
		s[t], z[t] = fp16ToF32[pairs[2*t]], fp16ToF32[pairs[2*t+1]]
	}
	softmaxU8Go(wq, ldw, ldw, x, ldx, m, s, z, n, n, 1, rows, mid, delta, zsum, lsum, sw)
}

// quantU8Rows is softmaxU8's quantization of the weights p·s (p the
// rows of x): the steps and codes of quantWRowsU8, the residues' sum as
// Σ w - Δ·Σ wq (w's lane sums in the order of sum16, as the kernels).
func quantU8Rows(wq []uint8, ldw, ldq int, p []float32, ldp int, s, z []float32, lds, n, groups, rows int, mid float32, delta, zsum, sw []float32) {
	for r := 0; r < rows; r++ {
		pr := p[r*ldp : r*ldp+n]
		var m float32
		for j := 0; j < groups; j++ {
			var zl, wl [16]float32
			for t, x := range pr {
				w := x * s[j*lds+t]
				m = max(m, w)
				zl[t%16] += x * z[j*lds+t]
				wl[t%16] += w
			}
			zsum[r*groups+j], sw[r*groups+j] = sum16(&zl), sum16(&wl)
		}
		var dl, inv float32
		if m > 0 {
			dl, inv = m/255, 255/m
		}
		delta[r] = dl
		for j := 0; j < groups; j++ {
			var sq int32
			for t, x := range pr {
				q := int32(math.RoundToEven(float64(x * s[j*lds+t] * inv)))
				wq[r*ldw+j*ldq+t] = uint8(q)
				sq += q
			}
			corr := sw[r*groups+j] - float32(dl*float32(sq))
			zsum[r*groups+j] += float32(mid * corr)
		}
	}
}

// Soft-capping (Params.Softcap): tanh32's two ranges. Below
// tanhSeriesMax, tanh's odd Taylor series through x¹¹ (its first omitted
// term, 21844/6081075·x¹³, is below 2.2e-10 of x there); from it on,
// (1 − e)/(1 + e) with e = exp32(−2|x|) ≤ e^(−1/2), where exp32's relative
// error δ (expRelErr) moves 1 − e by at most e·δ/(1 − e) ≤ 1.55·δ relative.
const (
	tanhSeriesMax = 0.25
	tanhC3        = -1.0 / 3
	tanhC5        = 2.0 / 15
	tanhC7        = -17.0 / 315
	tanhC9        = 62.0 / 2835
	tanhC11       = -1382.0 / 155925
	// tanhRelErr bounds tanh32's error relative to tanh(x) (TestTanh32):
	// 1.55·expRelErr and four roundings (1 − e, 1 + e, the quotient, the
	// sign), or the series' few roundings.
	tanhRelErr = 12 * eps32f
)

// tanh32 returns tanh(x) in float32 with a relative error of at most
// tanhRelErr, from the package's exp32; NaN stays NaN.
func tanh32(x float32) float32 {
	ax := abs32(x)
	if ax < tanhSeriesMax {
		z := x * x
		p := float32(tanhC11)
		p = p*z + tanhC9
		p = p*z + tanhC7
		p = p*z + tanhC5
		p = p*z + tanhC3
		return x + x*(p*z)
	}
	if x != x {
		return x
	}
	e := exp32(-2 * ax)
	t := (1 - e) / (1 + e)
	if x < 0 {
		return -t
	}
	return t
}

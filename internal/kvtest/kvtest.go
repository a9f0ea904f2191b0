// Package kvtest holds what the GPU attention tests of several packages
// share: realistic random keys and values (the attention benchmarks draw
// theirs here too), and the error bound of the decode kernels against
// attn.Reference.
package kvtest

import (
	"math"
	"math/rand/v2"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/kv"
)

// KeysValues draws n tokens of keys with per-channel offsets and outlier
// channels (x10-x50, one channel in 16) and unit-scale values, [n][hkv·d].
func KeysValues(r *rand.Rand, n, hkv, d int) (k, v []float32) {
	m := hkv * d
	scale, off := make([]float64, m), make([]float64, m)
	for i := range scale {
		scale[i], off[i] = 0.5+r.Float64(), 0.5*r.NormFloat64()
		if r.IntN(16) == 0 {
			scale[i] *= 10 + 40*r.Float64()
		}
	}
	k, v = make([]float32, n*m), make([]float32, n*m)
	for i := range k {
		k[i] = float32(off[i%m] + scale[i%m]*r.NormFloat64())
		v[i] = float32(r.NormFloat64())
	}
	return k, v
}

// DecodeTol is the absolute bound of a GPU decode kernel's output row
// (before the caller's relative term for the output's own rounding) against
// attn.Reference's statistics st, for head dim d: attn's CPU bound (float32
// folding of scores and sums) with tiles of 64 tokens in place of blocks;
// with tensorCores, also the fp16 (bf16 for bf16 storage: 2^-8) rounding of
// the mma operands: the scaled query (each score term within the operand
// epsilon, so the score within eps·ScoreMag·scale) and the probabilities
// times value scales (each weight within eps, the output within
// eps·MaxAbsV for the weights and as much again for the denominator).
func DecodeTol(f kv.Format, st attn.RefStats, d, row int, tensorCores bool) float64 {
	const eps32, eps16 = 1.0 / (1 << 23), 1.0 / (1 << 11)
	scale := 1 / math.Sqrt(float64(d))
	scoreTol := scale * float64(d+8) * eps32 * st.ScoreMag[row]
	acc := (64 + float64(st.MaxL)/64 + 32) * 2 * eps32
	if tensorCores {
		epsOp := eps16
		if f.K.Elem == kv.BF16 {
			epsOp = 1.0 / (1 << 8)
		}
		scoreTol += scale * epsOp * st.ScoreMag[row]
		acc += 2 * epsOp
	}
	return st.MaxAbsV * (2.5*scoreTol + acc)
}

// PlaneDecodeTol is DecodeTol for the bit-plane kernels (gpu/kernels
// planes.cu) against attn.ReferencePlanes' statistics: the same terms, with
// bf16 operands (2^-8) for bf16 K/V when tensorCores.
func PlaneDecodeTol(bf16 bool, st attn.PlaneRefStats, d, row int, tensorCores bool) float64 {
	scoreTol, acc := planeTerms(bf16, st, d, row, tensorCores)
	return st.MaxAbsV * (2.5*scoreTol + acc)
}

// PlaneMassTol is the bound of one token's attention mass from a GPU
// bit-plane kernel against attn.ReferencePlanes' (attn's own CPU bound with
// the kernel's score error): rows·(4·δmax + (L+4)·eps32), δmax the largest
// score bound over the output rows, L the sequence's length, rows the query
// rows of a KV head.
func PlaneMassTol(bf16 bool, st attn.PlaneRefStats, d, rows, l int, tensorCores bool) float64 {
	const eps32 = 1.0 / (1 << 23)
	var dmax float64
	for row := range st.ScoreMag {
		s, _ := planeTerms(bf16, st, d, row, tensorCores)
		dmax = max(dmax, s)
	}
	return float64(rows) * (4*dmax + float64(l+4)*eps32)
}

func planeTerms(bf16 bool, st attn.PlaneRefStats, d, row int, tensorCores bool) (scoreTol, acc float64) {
	const eps32, eps16 = 1.0 / (1 << 23), 1.0 / (1 << 11)
	scale := 1 / math.Sqrt(float64(d))
	scoreTol = scale * float64(d+8) * eps32 * st.ScoreMag[row]
	acc = (64 + float64(st.MaxL)/64 + 32) * 2 * eps32
	if tensorCores {
		epsOp := eps16
		if bf16 {
			epsOp = 1.0 / (1 << 8)
		}
		scoreTol += scale * epsOp * st.ScoreMag[row]
		acc += 2 * epsOp
	}
	return scoreTol, acc
}

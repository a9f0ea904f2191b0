package wq

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// ChunkChannels is the number of consecutive input channels that share one
// top-k budget (k_chunk of the DecDEC seed: k per 1024 channels).
const ChunkChannels = 1024

// ResidualGroup is the group of output channels per fp16 (scale, zero) pair
// of an int4 residual row (package doc, "Dynamic error compensation").
const ResidualGroup = 128

// Histogram of the approximate top-k: the bucket of a value is its float32
// bit pattern shifted right by bucketShift (exponent and the top three
// mantissa bits, so 8 buckets per octave, each spanning a factor <= 9/8),
// counted down from the chunk's largest; bucketCount buckets cover 32 octaves
// below the chunk maximum (real activations have outliers 1000x the typical
// channel: 64 buckets, 8 octaves, lost the typical channels' order in the
// test data) and the last one also takes everything smaller.
const (
	bucketShift = 20
	bucketCount = 256
)

// DEC is a weight's dynamic error compensation: its residual and how many
// channels a step selects.
type DEC struct {
	// R is the residual Rᵀ [K, N]: row k holds R[:, k] = W[:, k] − Ŵ[:, k]
	// of the N outputs, int4 in groups of ResidualGroup outputs, or fp16.
	R *Matrix
	// KChunk is k_chunk: channels selected per ChunkChannels input channels.
	KChunk int
	// Blocks is n_tb, the thread blocks a GPU backend spreads the
	// compensation of the N outputs over (tuned per weight shape by
	// 'bitdecode tune dec'); 0 lets the backend choose. It changes the speed,
	// never the numbers; the CPU backend ignores it.
	Blocks int
}

// Bytes returns the host memory of the residual.
func (d *DEC) Bytes() int64 { return d.R.Bytes() }

// NewResidual returns Rᵀ [K, N] for the original row-major weight w [N, K]
// and its quantized form q: R = fp16(W) − Ŵ (float64, then rounded to
// fp16), stored in element type e (Int4 with groups of ResidualGroup, Int8
// likewise, or FP16) by the RTN rules.
func NewResidual(w []float32, q *Matrix, e Elem) (*Matrix, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	N, K := q.N, q.K
	if len(w) != N*K {
		return nil, fmt.Errorf("wq: residual: %d values for [%d, %d]", len(w), N, K)
	}
	if e == Int3 {
		return nil, fmt.Errorf("wq: residual: int3 residuals are not supported (int4, int8 or fp16)")
	}
	rt := make([]float32, K*N)
	row := make([]float32, K)
	for n := range N {
		q.DequantRow(row, n)
		for k := range K {
			rt[k*N+n] = float32(float64(RoundFP16(w[n*K+k])) - float64(row[k]))
		}
	}
	r, err := Quantize(e, ResidualGroup, K, N, rt)
	if err != nil {
		return nil, fmt.Errorf("wq: residual of a [%d, %d] weight: %w", N, K, err)
	}
	return r, nil
}

// ChunkSelect returns kc, the channels a chunk of c channels selects with
// k_chunk = kChunk: min(c, ceil(kChunk·c/ChunkChannels)).
func ChunkSelect(kChunk, c int) int {
	if kChunk <= 0 || c <= 0 {
		return 0
	}
	return min(c, (kChunk*c+ChunkChannels-1)/ChunkChannels)
}

// bucketKey orders |x| coarsely: monotone in |x|, 8 steps per octave.
func bucketKey(x float32) int {
	return int(math.Float32bits(x) &^ (1 << 31) >> bucketShift)
}

// SelectApprox appends to dst the input channels selected from x by the
// approximate per-chunk top-k and returns it, in increasing order. In each
// chunk of ChunkChannels channels (c in the last), with kc = ChunkSelect:
//
//  1. every channel gets bucket b = min(keyMax − key(|x|), 255), key being
//     the float32 bits of |x| shifted right by 20 (8 buckets per octave);
//  2. B is the first bucket at which the count of buckets 0..B reaches kc;
//  3. the chunk is scanned in increasing channel order, taking every
//     channel with b < B and channels with b == B until kc are taken.
//
// So the selection differs from an exact top-k only inside bucket B, whose
// members are within a factor 9/8 of each other (when B < 255: the k-th
// largest |x| is more than 2^-32 of the chunk's largest). A GPU does
// steps 1–3 with a shared-memory histogram, a 256-entry scan and a ballot.
func SelectApprox(dst []int32, x []float32, kChunk int) []int32 {
	var hist [bucketCount]int
	for c0 := 0; c0 < len(x); c0 += ChunkChannels {
		chunk := x[c0:min(len(x), c0+ChunkChannels)]
		kc := ChunkSelect(kChunk, len(chunk))
		if kc == 0 {
			continue
		}
		keyMax := 0
		for _, v := range chunk {
			keyMax = max(keyMax, bucketKey(v))
		}
		clear(hist[:])
		bucket := func(v float32) int { return min(keyMax-bucketKey(v), bucketCount-1) }
		for _, v := range chunk {
			hist[bucket(v)]++
		}
		B, above := 0, 0 // above: channels in buckets < B
		for ; B < bucketCount-1 && above+hist[B] < kc; B++ {
			above += hist[B]
		}
		fill := kc - above
		for i, v := range chunk {
			switch b := bucket(v); {
			case b < B:
				dst = append(dst, int32(c0+i))
			case b == B && fill > 0:
				dst = append(dst, int32(c0+i))
				fill--
			}
		}
	}
	return dst
}

// SelectExact appends to dst the exact per-chunk top-k of |x| (ties to the
// lower channel), in increasing order: the reference SelectApprox's recall
// is measured against.
func SelectExact(dst []int32, x []float32, kChunk int) []int32 {
	for c0 := 0; c0 < len(x); c0 += ChunkChannels {
		c1 := min(len(x), c0+ChunkChannels)
		kc := ChunkSelect(kChunk, c1-c0)
		if kc == 0 {
			continue
		}
		idx := make([]int32, 0, c1-c0)
		for i := c0; i < c1; i++ {
			idx = append(idx, int32(i))
		}
		slices.SortStableFunc(idx, func(a, b int32) int {
			return cmp.Compare(math.Abs(float64(x[b])), math.Abs(float64(x[a])))
		})
		top := idx[:kc]
		slices.Sort(top)
		dst = append(dst, top...)
	}
	return dst
}

// Recall returns |got ∩ want| / |want| for two increasing channel lists
// (1 if want is empty).
func Recall(got, want []int32) float64 {
	if len(want) == 0 {
		return 1
	}
	hit, i := 0, 0
	for _, w := range want {
		for i < len(got) && got[i] < w {
			i++
		}
		if i < len(got) && got[i] == w {
			hit++
		}
	}
	return float64(hit) / float64(len(want))
}

// Compensate adds the residual rows of the selected channels to one token's
// base output: dec_n = Σ_{k ∈ sel, increasing} float32(x_k·R̂_kn), summed in
// float32, then y_n += dec_n. r is Rᵀ [K, N]; sel is increasing; scratch
// needs 2·N floats (nil allocates). With sel empty y is untouched.
func Compensate(y, x []float32, sel []int32, r *Matrix, scratch []float32) {
	if len(sel) == 0 {
		return
	}
	N := r.K
	if len(scratch) < 2*N {
		scratch = make([]float32, 2*N)
	}
	dec, row := scratch[:N], scratch[N:2*N]
	clear(dec)
	for _, k := range sel {
		xk := x[k]
		r.DequantRow(row, int(k))
		for n, v := range row {
			dec[n] += float32(xk * v) // the conversion forbids a fused multiply-add
		}
	}
	for n := range y[:N] {
		y[n] += dec[n]
	}
}

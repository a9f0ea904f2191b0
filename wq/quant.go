package wq

import (
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/internal/half"
)

// QuantParams computes the fp16 (scale, zero) pair of one group whose fp16
// values span [lo, hi], by the rules of the package doc. scale32 is the
// float32 scale before rounding to fp16, which ErrorBound needs.
func QuantParams(e Elem, lo, hi float32) (scale, zero uint16, scale32 float32) {
	scale32 = (hi - lo) / float32(e.Levels())
	return half.FromFloat32(scale32), half.FromFloat32(lo), scale32
}

// QuantCode returns the code of the value w under an fp16 (scale, zero)
// pair: clamp(rint((w − z)/s), 0, L), or 0 if s is zero or w is NaN.
func QuantCode(e Elem, w float32, scale, zero uint16) uint8 {
	return quantCode(e, w, half.ToFloat32(scale), half.ToFloat32(zero))
}

// quantCode is QuantCode with the pair widened to float32 (s, z).
func quantCode(e Elem, w, s, z float32) uint8 {
	if s == 0 {
		return 0
	}
	q := float32(math.RoundToEven(float64((w - z) / s)))
	switch {
	case q != q: // NaN input
		return 0
	case q < 0:
		return 0
	case q > float32(e.Levels()):
		return uint8(e.Levels())
	}
	return uint8(q)
}

// Dequant returns the value ŵ = float32(s·q) + z that code q stands for.
func Dequant(q uint8, scale, zero uint16) float32 {
	return float32(half.ToFloat32(scale)*float32(q)) + half.ToFloat32(zero)
}

// ErrorBound returns the largest |w − ŵ| the RTN rules allow for an fp16
// value w of magnitude up to absMax in a group with float32 scale scale32
// and fp16 scale scale:
//
//	s/2                       rounding w to the nearest code
//	+ L·|s − scale32|         codes near the top of the range carry the fp16
//	                          error of the scale L = 2^b − 1 times (a clamp
//	                          at L moves the value by at most as much)
//	+ 4·eps32·(absMax + L·s)  float32 rounding of the subtract, divide,
//	                          multiply and add
func ErrorBound(e Elem, scale uint16, scale32, absMax float32) float64 {
	s := float64(half.ToFloat32(scale))
	l := float64(e.Levels())
	const eps32 = 1.0 / (1 << 23)
	return s/2 + l*math.Abs(s-float64(scale32)) + 4*eps32*(float64(absMax)+l*s)
}

// groupRange returns min and max of v (fp16-rounded float32 values); NaNs
// are skipped, an all-NaN group gives (0, 0).
func groupRange(v []float32) (lo, hi float32) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo > hi {
		return 0, 0
	}
	return lo, hi
}

// RoundFP16 returns x rounded to the nearest fp16 value (ties to even), as
// float32: the input every quantizer of this package starts from.
func RoundFP16(x float32) float32 { return half.ToFloat32(half.FromFloat32(x)) }

// Quantize stores the row-major [N, K] weight w in format (e, G) with
// round to nearest (package doc): values are rounded to fp16, then each
// group gets its (scale, zero) pair and each value its code. fp16 stores the
// rounded values. Non-finite weights are an error.
func Quantize(e Elem, G, N, K int, w []float32) (*Matrix, error) {
	m, err := NewMatrix(e, G, N, K)
	if err != nil {
		return nil, err
	}
	if len(w) != N*K {
		return nil, fmt.Errorf("wq: quantize: %d values for [%d, %d]", len(w), N, K)
	}
	// Rows are independent (each writes its own codes and params), so
	// chunks of them run on GOMAXPROCS goroutines with the same result; the
	// error reported is the first non-finite weight in row order.
	chunks := (N + quantizeRowsChunk - 1) / quantizeRowsChunk
	errs := make([]error, chunks)
	parallelFor(chunks, func(c int) {
		row := make([]float32, K)
		for n := c * quantizeRowsChunk; n < min(N, (c+1)*quantizeRowsChunk); n++ {
			for k := range K {
				v := w[n*K+k]
				if math.Float32bits(v)&0x7f800000 == 0x7f800000 { // NaN or ±Inf
					errs[c] = fmt.Errorf("wq: quantize: non-finite weight %v at row %d, column %d", v, n, k)
					return
				}
				row[k] = roundFP16(v)
			}
			m.quantizeRow(n, row)
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// quantizeRowsChunk is the rows of one Quantize work item.
const quantizeRowsChunk = 64

// quantizeRow stores one row of fp16-rounded values with RTN: each group's
// pair, then its codes (QuantCode's), packed a block at a time.
func (m *Matrix) quantizeRow(n int, row []float32) {
	if !m.Elem.IsInt() {
		for k, v := range row {
			m.setRaw(n, k, uint32(half.FromFloat32(v)))
		}
		return
	}
	codes := make([]uint8, m.Group)
	for g := 0; g < m.K/m.Group; g++ {
		vals := row[g*m.Group : (g+1)*m.Group]
		lo, hi := groupRange(vals)
		s, z, _ := QuantParams(m.Elem, lo, hi)
		m.SetParam(n, g, s, z)
		sf, zf := half.ToFloat32(s), half.ToFloat32(z)
		for i, v := range vals {
			codes[i] = quantCode(m.Elem, v, sf, zf)
		}
		m.setCodes(n, g*m.Group, codes)
	}
}

// roundFP16 is RoundFP16 with a fast path for the values fp16 holds as they
// are (bf16 and fp16 checkpoints' weights in fp16's normal range: their low
// 13 mantissa bits are zero and the exponent fits).
func roundFP16(x float32) float32 {
	b := math.Float32bits(x)
	if e := b >> 23 & 0xff; b&0x1fff == 0 && e >= 127-14 && e <= 127+15 {
		return x
	}
	return RoundFP16(x)
}

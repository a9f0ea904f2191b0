// Package half converts between float32 and the 16- and 8-bit floating-point
// formats that KV caches and checkpoints store: IEEE fp16 (binary16), bfloat16,
// and the two OCP fp8 formats e4m3 and e5m2.
//
// Every conversion to a narrower format rounds to nearest, ties to even, the
// rounding CUDA's __float2half_rn, __float2bfloat16_rn and cvt.rn instructions
// use, so a GPU kernel reproduces these values bit for bit. The fp8 conversions
// saturate to the largest finite value (PTX's .satfinite), as KV caches want:
// an outlier becomes the largest representable value instead of infinity.
package half

import "math"

// Bits layout of IEEE binary16: 1 sign bit, 5 exponent bits, 10 mantissa bits.
const (
	f16ExpBits  = 5
	f16MantBits = 10
	f16ExpBias  = 15
	f16ExpMask  = 0x1f << f16MantBits
	f16MantMask = 1<<f16MantBits - 1
	f16SignBit  = 0x8000

	f32MantBits = 23
	f32ExpBias  = 127
)

// ToFloat32 returns the float32 value of the fp16 bit pattern h. The
// conversion is exact (every fp16 value is a float32 value).
func ToFloat32(h uint16) float32 {
	sign := uint32(h&f16SignBit) << 16
	exp := uint32(h&f16ExpMask) >> f16MantBits
	mant := uint32(h & f16MantMask)
	switch {
	case exp == 0x1f: // inf or NaN: keep the payload's top bits
		return math.Float32frombits(sign | 0xff<<f32MantBits | mant<<(f32MantBits-f16MantBits))
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = mant * 2^-24, exact in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	default:
		return math.Float32frombits(sign | (exp+f32ExpBias-f16ExpBias)<<f32MantBits | mant<<(f32MantBits-f16MantBits))
	}
}

// FromFloat32 returns the fp16 bit pattern nearest to f (ties to even).
// Values beyond the fp16 range become infinity, NaN stays NaN.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & f16SignBit
	exp := int32(b>>f32MantBits) & 0xff
	mant := b & (1<<f32MantBits - 1)
	if exp == 0xff {
		if mant != 0 {
			return sign | f16ExpMask | 0x200 | uint16(mant>>(f32MantBits-f16MantBits)) // quiet NaN
		}
		return sign | f16ExpMask
	}
	e := exp - f32ExpBias + f16ExpBias // biased fp16 exponent
	if e >= 0x1f {
		return sign | f16ExpMask // overflow to infinity
	}
	if e <= 0 {
		// Result is subnormal (or zero): shift the full significand
		// (implicit bit included) right and round to nearest even.
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to zero
		}
		full := mant | 1<<f32MantBits
		shift := uint32(f32MantBits - f16MantBits + 1 - e)
		return sign | uint16(roundShift(full, shift))
	}
	// Normal: drop 13 mantissa bits with round to nearest even; a carry
	// out of the mantissa correctly bumps the exponent (and may give inf).
	v := uint32(e)<<f16MantBits | mant>>(f32MantBits-f16MantBits)
	return sign | uint16(roundAdd(v, mant, f32MantBits-f16MantBits))
}

// roundShift returns x >> s rounded to nearest, ties to even.
func roundShift(x, s uint32) uint32 {
	q := x >> s
	rem := x & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// roundAdd rounds the truncated value v, whose dropped low bits are the low
// s bits of src, to nearest even.
func roundAdd(v, src, s uint32) uint32 {
	rem := src & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && v&1 == 1) {
		v++
	}
	return v
}

// BF16ToFloat32 returns the float32 value of the bfloat16 bit pattern h (exact).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16FromFloat32 returns the bfloat16 nearest to f (ties to even); NaN stays NaN.
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16(roundAdd(b>>16, b, 16))
}

// FP8 describes one of the 8-bit float formats: 1 sign bit, ExpBits exponent
// bits, the rest mantissa.
type FP8 struct {
	ExpBits  uint32
	MantBits uint32
	Bias     int32
	// MaxFinite is the bit pattern (without sign) of the largest finite value.
	MaxFinite uint8
	// NaN is the bit pattern (without sign) used for NaN.
	NaN uint8
}

var (
	// E4M3 is OCP fp8 e4m3 (fn variant): no infinities, max 448, NaN = S.1111.111.
	E4M3 = FP8{ExpBits: 4, MantBits: 3, Bias: 7, MaxFinite: 0x7e, NaN: 0x7f}
	// E5M2 is OCP fp8 e5m2: IEEE-like, max finite 57344, NaN = S.11111.1x.
	E5M2 = FP8{ExpBits: 5, MantBits: 2, Bias: 15, MaxFinite: 0x7b, NaN: 0x7e}
)

// ToFloat32 returns the float32 value of the fp8 bit pattern b (exact).
func (f FP8) ToFloat32(b uint8) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	m := uint32(b & 0x7f)
	if m == uint32(f.NaN) || (f.ExpBits == 5 && m > 0x7c) {
		return float32(math.NaN())
	}
	if f.ExpBits == 5 && m == 0x7c {
		return sign * float32(math.Inf(1))
	}
	exp := int32(m >> f.MantBits)
	mant := m & (1<<f.MantBits - 1)
	if exp == 0 {
		return sign * float32(mant) * float32(math.Ldexp(1, int(1-f.Bias-int32(f.MantBits))))
	}
	return sign * float32(math.Ldexp(float64(1<<f.MantBits|mant), int(exp-f.Bias-int32(f.MantBits))))
}

// FromFloat32 returns the fp8 value nearest to x (ties to even), saturating
// to ±MaxFinite on overflow; NaN becomes NaN.
func (f FP8) FromFloat32(x float32) uint8 {
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x80
		x = -x
	}
	if x != x {
		return sign | f.NaN
	}
	maxv := f.ToFloat32(f.MaxFinite)
	if x >= maxv {
		return sign | f.MaxFinite
	}
	// Find the binade; values below the smallest normal are subnormals with
	// a fixed quantum.
	minNormalExp := 1 - f.Bias
	e := int32(math.Floor(math.Log2(float64(x))))
	if x == 0 {
		return sign
	}
	// Guard against Log2 rounding at binade edges.
	if math.Ldexp(1, int(e)) > float64(x) {
		e--
	} else if math.Ldexp(1, int(e+1)) <= float64(x) {
		e++
	}
	if e < minNormalExp {
		e = minNormalExp
	}
	quantum := math.Ldexp(1, int(e-int32(f.MantBits)))
	q := math.RoundToEven(float64(x) / quantum) // exact division by a power of two
	// q in [0, 2^(MantBits+1)]; encode.
	if e == minNormalExp && q < float64(uint32(1)<<f.MantBits) {
		return sign | uint8(q) // subnormal
	}
	if q >= float64(uint32(2)<<f.MantBits) { // rounded up into the next binade
		q /= 2
		e++
	}
	code := uint32(e+f.Bias)<<f.MantBits | (uint32(q) - 1<<f.MantBits)
	if code > uint32(f.MaxFinite) {
		code = uint32(f.MaxFinite)
	}
	return sign | uint8(code)
}

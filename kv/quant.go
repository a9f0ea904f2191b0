package kv

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/internal/half"
)

// QuantParams computes the fp16 (scale, zero) pair of one group of fp16
// values as the package doc defines it. scale32 is the float32 scale before
// rounding to fp16, which ErrorBound needs.
func QuantParams(e Elem, lo, hi float32) (scale, zero uint16, scale32 float32) {
	scale32 = (hi - lo) / float32(e.Levels())
	return half.FromFloat32(scale32), half.FromFloat32(lo), scale32
}

// QuantCode quantizes one value with an fp16 (scale, zero) pair.
func QuantCode(e Elem, x float32, scale, zero uint16) uint8 {
	s := half.ToFloat32(scale)
	if s == 0 {
		return 0
	}
	q := float32(math.RoundToEven(float64((x - half.ToFloat32(zero)) / s)))
	switch {
	case q < 0:
		return 0
	case q > float32(e.Levels()):
		return uint8(e.Levels())
	case q != q: // NaN input: code 0 (the NaN shows in the scale instead)
		return 0
	}
	return uint8(q)
}

// Dequant returns the value that code q stands for under (scale, zero).
func Dequant(q uint8, scale, zero uint16) float32 {
	return float32(half.ToFloat32(scale)*float32(q)) + half.ToFloat32(zero)
}

// ErrorBound returns the largest |x - Dequant(QuantCode(x))| that the rounding
// steps of the package doc allow for a value x of magnitude up to absMax in a
// group with float32 scale scale32 and fp16 scale scale:
//
//	s/2                       rounding x to the nearest code
//	+ L·|s - scale32|         codes near the top of the range carry the fp16
//	                          error of the scale, L = 2^b - 1 times (a clamp at
//	                          L moves the value by at most that much too)
//	+ 4·eps32·(absMax + L·s)  float32 rounding of the subtract, divide,
//	                          multiply and add
func ErrorBound(e Elem, scale uint16, scale32, absMax float32) float64 {
	s := float64(half.ToFloat32(scale))
	l := float64(e.Levels())
	const eps32 = 1.0 / (1 << 23)
	return s/2 + l*math.Abs(s-float64(scale32)) + 4*eps32*(float64(absMax)+l*s)
}

// Pack quantizes (or converts) one block of fp16 values src, [Nr][D] bits
// token-major, into dst (len >= l.Bytes) in the canonical layout.
func (l TensorLayout) Pack(dst []byte, src []uint16) {
	if len(src) < l.Tokens*l.D || len(dst) < l.Bytes {
		panic(fmt.Sprintf("kv: Pack: src %d values, dst %d bytes; want %d and %d", len(src), len(dst), l.Tokens*l.D, l.Bytes))
	}
	clear(dst[:l.Bytes])
	if l.Sim.Elem.IsInt() {
		l.packReference(dst, src)
		return
	}
	if !l.Elem.IsInt() {
		for t := 0; t < l.Tokens; t++ {
			for c := 0; c < l.D; c++ {
				h := src[t*l.D+c]
				var v uint16
				switch l.Elem {
				case FP16:
					v = h
				case BF16:
					v = half.BF16FromFloat32(half.ToFloat32(h))
				default:
					v = uint16(l.fp8().FromFloat32(half.ToFloat32(h)))
				}
				l.putElem(dst, t, c, v)
			}
		}
		return
	}
	// Integer types: compute each group's params, then the codes.
	x := func(t, c int) float32 { return half.ToFloat32(src[t*l.D+c]) }
	for p := 0; p < l.Params; p++ {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		l.forGroup(p, func(t, c int) {
			v := x(t, c)
			lo, hi = min(lo, v), max(hi, v)
		})
		scale, zero, _ := QuantParams(l.Elem, lo, hi)
		l.putParam(dst, p, scale, zero)
	}
	for t := 0; t < l.Tokens; t++ {
		for c := 0; c < l.D; c++ {
			scale, zero := l.Param(dst, l.ParamIndex(t, c))
			l.putElem(dst, t, c, uint16(QuantCode(l.Elem, x(t, c), scale, zero)))
		}
	}
}

// forGroup calls fn for every (token, channel) of param group p.
func (l TensorLayout) forGroup(p int, fn func(t, c int)) {
	if l.Scaling == PerChannel {
		g, c := p/l.D, p%l.D
		for t := g * l.Group; t < (g+1)*l.Group; t++ {
			fn(t, c)
		}
		return
	}
	groups := l.D / l.Group
	t, g := p/groups, p%groups
	for c := g * l.Group; c < (g+1)*l.Group; c++ {
		fn(t, c)
	}
}

// Unpack dequantizes (or converts) a packed block into dst, [Nr][D] float32.
func (l TensorLayout) Unpack(dst []float32, src []byte) {
	for t := 0; t < l.Tokens; t++ {
		l.UnpackRow(dst[t*l.D:(t+1)*l.D], src, t)
	}
}

// UnpackRow dequantizes token t of a packed block into dst[:D].
func (l TensorLayout) UnpackRow(dst []float32, src []byte, t int) {
	for c := range l.D {
		v := l.elem(src, t, c)
		switch l.Elem {
		case FP16:
			dst[c] = half.ToFloat32(v)
		case BF16:
			dst[c] = half.BF16ToFloat32(v)
		case FP8E4M3, FP8E5M2:
			dst[c] = l.fp8().ToFloat32(uint8(v))
		default:
			scale, zero := l.Param(src, l.ParamIndex(t, c))
			dst[c] = Dequant(uint8(v), scale, zero)
		}
	}
}

func (l TensorLayout) fp8() half.FP8 {
	if l.Elem == FP8E5M2 {
		return half.E5M2
	}
	return half.E4M3
}

// FP8 returns the fp8 format of an fp8 layout.
func (l TensorLayout) FP8() half.FP8 { return l.fp8() }

// Code returns the integer code of token t, channel c of a packed block.
func (l TensorLayout) Code(src []byte, t, c int) uint8 { return uint8(l.elem(src, t, c)) }

// elemPos returns where the element of token t, channel c starts: its byte
// and the bit within that byte (sub-byte codes only).
func (l TensorLayout) elemPos(t, c int) (int, uint) {
	if l.Order == MMA {
		return l.mmaPos(t, c)
	}
	bits := l.Elem.Bits()
	if bits >= 8 {
		return t*l.RowBytes + c*bits/8, 0
	}
	per := l.PerByte()
	return t*l.RowBytes + c/per, uint(c%per) * uint(bits)
}

// elem returns the raw bits of the element of token t, channel c.
func (l TensorLayout) elem(src []byte, t, c int) uint16 {
	i, sh := l.elemPos(t, c)
	switch l.Elem.Bits() {
	case 16:
		return binary.LittleEndian.Uint16(src[i:])
	case 8:
		return uint16(src[i])
	}
	return uint16(src[i]>>sh) & uint16(l.Elem.Levels())
}

func (l TensorLayout) putElem(dst []byte, t, c int, v uint16) {
	i, sh := l.elemPos(t, c)
	switch l.Elem.Bits() {
	case 16:
		binary.LittleEndian.PutUint16(dst[i:], v)
	case 8:
		dst[i] = uint8(v)
	default:
		dst[i] |= uint8(v) << sh
	}
}

// Param returns the fp16 (scale, zero) pair with index i of a packed block.
func (l TensorLayout) Param(src []byte, i int) (scale, zero uint16) {
	o := l.ParamsOffset + i*ParamBytes
	return binary.LittleEndian.Uint16(src[o:]), binary.LittleEndian.Uint16(src[o+2:])
}

func (l TensorLayout) putParam(dst []byte, i int, scale, zero uint16) {
	o := l.ParamsOffset + i*ParamBytes
	binary.LittleEndian.PutUint16(dst[o:], scale)
	binary.LittleEndian.PutUint16(dst[o+2:], zero)
}

// packReference stores a reference format's block: each group of the
// simulated integer format (l.Sim) quantized with its float32 scale and
// zero, the dequantized values rounded to fp16.
func (l TensorLayout) packReference(dst []byte, src []uint16) {
	sim := newLayout(l.Sim, l.D, l.Tokens)
	levels := float32(l.Sim.Elem.Levels())
	for p := 0; p < sim.Params; p++ {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		sim.forGroup(p, func(t, c int) {
			v := half.ToFloat32(src[t*l.D+c])
			lo, hi = min(lo, v), max(hi, v)
		})
		scale := (hi - lo) / levels
		sim.forGroup(p, func(t, c int) {
			v := half.ToFloat32(src[t*l.D+c])
			q := float32(0)
			if scale > 0 {
				q = float32(math.RoundToEven(float64((v - lo) / scale)))
				q = max(0, min(levels, q))
			}
			l.putElem(dst, t, c, half.FromFloat32(q*scale+lo))
		})
	}
}

package attn

// This file packs a full residual block of fp16 values into an integer
// layout (linear order) with the same bytes as kv.TensorLayout.Pack, but
// without its per-value generality: the block is converted to float32 once,
// each (scale, zero) group's min and max come from one pass over it, and
// every code is computed with its group's float32 scale and zero hoisted.
// The operations per value are kv.QuantCode's (subtract, divide in float32,
// round half to even, clamp), so the codes are the same bits. The pack
// runs once per Nr tokens per layer and KV head, inside a decode step: with
// kv's packer it was ~24 us of every step of a 128-token generation
// (docs/perf/cpu-attention.md v24).

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// packScratch holds a block's values as float32 between packs.
var packScratch sync.Pool

// fastPackable reports whether packInt handles layout l: an integer format
// (not a reference format simulating one) in linear order with whole
// codes per byte.
func fastPackable(l kv.TensorLayout) bool {
	if !l.Elem.IsInt() || l.Sim.Elem.IsInt() || l.Order != kv.Linear {
		return false
	}
	switch l.Elem.Bits() {
	case 8, 4, 2:
		if l.Group <= 0 {
			return false
		}
		if l.Scaling == kv.PerChannel {
			return l.Tokens%l.Group == 0
		}
		return l.D%l.Group == 0
	}
	return false
}

// copyPackable reports whether layout l stores the fp16 values as they are:
// fp16 elements (not a reference format) in linear order, rows of D values
// back to back.
func copyPackable(l kv.TensorLayout) bool {
	return l.Elem == kv.FP16 && !l.Sim.Elem.IsInt() && l.Order == kv.Linear && l.RowBytes == 2*l.D && l.Params == 0
}

// packLayout packs one block of fp16 values src ([Nr][D] token-major) into
// dst in layout l, as l.Pack does.
func packLayout(dst []byte, l kv.TensorLayout, src []uint16, k *kernels) {
	if copyPackable(l) && len(src) >= l.Tokens*l.D && len(dst) >= l.Bytes {
		// An fp16 block in linear order is the values as they are,
		// little-endian, then zeros to the layout's end: kv's packer wrote
		// them an element at a time through its position arithmetic (~3%
		// of a 512-token prefill of gocoder-23m with an fp16 cache).
		n := l.Tokens * l.D
		for i, v := range src[:n] {
			binary.LittleEndian.PutUint16(dst[2*i:], v)
		}
		clear(dst[2*n : l.Bytes])
		return
	}
	if !fastPackable(l) {
		l.Pack(dst, src)
		return
	}
	n := l.Tokens * l.D
	if len(src) < n || len(dst) < l.Bytes {
		l.Pack(dst, src) // panics with kv's message
		return
	}
	bp, _ := packScratch.Get().(*[]float32)
	if bp == nil || cap(*bp) < n {
		b := make([]float32, n)
		bp = &b
	}
	x := (*bp)[:n]
	k.cvtHalf(x, src[:n])
	packInt(dst[:l.Bytes], l, x)
	packScratch.Put(bp)
}

// groupQuant is one group's fp16 params as the float32 values QuantCode
// uses.
type groupQuant struct{ s, z float32 }

// roundMagic is 1.5·2^23: adding it to a float32 of magnitude below 2^22
// and subtracting it again rounds to an integer, half to even (the
// hardware's rounding), which is math.RoundToEven without the float64
// call. Larger magnitudes are clamped to 0 or the top code either way.
const roundMagic = 12582912

// quantCode is kv.QuantCode with the group's params as float32: the same
// code for every input, NaN and ±Inf included.
func quantCode(v float32, q groupQuant, levels float32) uint8 {
	if q.s == 0 {
		return 0
	}
	c := float32(float32((v-q.z)/q.s)+roundMagic) - roundMagic
	switch {
	case c < 0:
		return 0
	case c > levels:
		return uint8(levels)
	case c != c:
		return 0
	}
	return uint8(c)
}

// putRow stores one token's codes cb ([D]) into its data row at dst.
func putRow(dst []byte, cb []uint8, bits int) {
	switch bits {
	case 8:
		copy(dst[:len(cb)], cb)
	case 4:
		for i := range len(cb) / 2 {
			dst[i] = cb[2*i] | cb[2*i+1]<<4
		}
	default:
		for i := range len(cb) / 4 {
			dst[i] = cb[4*i] | cb[4*i+1]<<2 | cb[4*i+2]<<4 | cb[4*i+3]<<6
		}
	}
}

// packInt quantizes the float32 values x ([Nr][D]) of an integer layout l
// into dst (len l.Bytes).
func packInt(dst []byte, l kv.TensorLayout, x []float32) {
	clear(dst)
	d, nr, g := l.D, l.Tokens, l.Group
	levels := float32(l.Elem.Levels())
	bits := l.Elem.Bits()
	put := func(p int, lo, hi float32) groupQuant {
		scale, zero, _ := kv.QuantParams(l.Elem, lo, hi)
		o := l.ParamsOffset + p*kv.ParamBytes
		dst[o], dst[o+1] = byte(scale), byte(scale>>8)
		dst[o+2], dst[o+3] = byte(zero), byte(zero>>8)
		return groupQuant{half.ToFloat32(scale), half.ToFloat32(zero)}
	}
	cb := make([]uint8, d)
	if l.Scaling == kv.PerChannel {
		// Params [Nr/G][D]: one per (token group, channel).
		qs := make([]groupQuant, d)
		los, his := make([]float32, d), make([]float32, d)
		for tg := 0; tg < nr/g; tg++ {
			for c := range los {
				los[c], his[c] = float32(math.Inf(1)), float32(math.Inf(-1))
			}
			for t := tg * g; t < (tg+1)*g; t++ {
				row := x[t*d : (t+1)*d]
				los, his := los[:len(row)], his[:len(row)]
				for c, v := range row {
					los[c], his[c] = min(los[c], v), max(his[c], v)
				}
			}
			for c := range qs {
				qs[c] = put(tg*d+c, los[c], his[c])
			}
			for t := tg * g; t < (tg+1)*g; t++ {
				row := x[t*d : (t+1)*d]
				qs, cb := qs[:len(row)], cb[:len(row)]
				for c, v := range row {
					cb[c] = quantCode(v, qs[c], levels)
				}
				putRow(dst[t*l.RowBytes:], cb, bits)
			}
		}
		return
	}
	// Params [Nr][D/G]: one per (token, channel group).
	groups := d / g
	for t := 0; t < nr; t++ {
		for gi := 0; gi < groups; gi++ {
			vals := x[t*d+gi*g : t*d+(gi+1)*g]
			lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
			for _, v := range vals {
				lo, hi = min(lo, v), max(hi, v)
			}
			q := put(t*groups+gi, lo, hi)
			out := cb[gi*g : (gi+1)*g]
			for j, v := range vals {
				out[j] = quantCode(v, q, levels)
			}
		}
		putRow(dst[t*l.RowBytes:], cb, bits)
	}
}

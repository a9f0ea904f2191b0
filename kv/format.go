package kv

import (
	"fmt"
	"io"
	"slices"
)

// The head dimensions every format takes (HeadDimOK): multiples of
// HeadDimAlign from MinHeadDim to MaxHeadDim (64, 80, 96, 112, 128, ...,
// 256; Phi-3-mini's 96 and Phi-2's 80 among them). HeadDimAlign keeps an
// int2 row a whole number of 4-byte words and every per-token group a whole
// number of 16-channel SIMD vectors. The Hadamard rotation (Spec.Rotate)
// and the GPU kernels take fewer: Rotatable, and gpu/kernels' own checks.
const (
	MinHeadDim   = 64
	MaxHeadDim   = 256
	HeadDimAlign = 16
)

// HeadDimOK reports whether d is a head dimension every format supports:
// a multiple of HeadDimAlign in [MinHeadDim, MaxHeadDim].
func HeadDimOK(d int) bool {
	return d >= MinHeadDim && d <= MaxHeadDim && d%HeadDimAlign == 0
}

// HeadDimRule describes HeadDimOK's set, for error messages.
var HeadDimRule = fmt.Sprintf("a multiple of %d from %d to %d", HeadDimAlign, MinHeadDim, MaxHeadDim)

// Rotatable reports whether the Walsh-Hadamard rotation (Rotate) applies to
// head dimension d: a power of two.
func Rotatable(d int) bool { return d > 0 && d&(d-1) == 0 }

// Format is a Spec resolved for one head dimension: group sizes capped at D
// and the byte layout of a packed block fixed. It is the single source of
// the cache's memory accounting.
type Format struct {
	Spec
	D    int          // head dimension
	K, V TensorLayout // layouts of the packed K and V halves of a block
}

// Resolve fixes the spec for head dimension d.
func (s Spec) Resolve(d int) (Format, error) {
	if !HeadDimOK(d) {
		return Format{}, fmt.Errorf("kv: head dim %d is not supported (want %s)", d, HeadDimRule)
	}
	if s.Rotate && !Rotatable(d) {
		return Format{}, fmt.Errorf("kv: %s: the Hadamard rotation needs a power-of-two head dim, not %d (say norot; a model's cache leaves it off there by default)", s.String(), d)
	}
	for _, h := range []struct {
		name string
		tf   TensorFormat
	}{{"key", s.K}, {"value", s.V}} {
		if g := h.tf.Group; h.tf.Elem.IsInt() && h.tf.Scaling == PerToken && g != GroupHeadDim && g < WholeHeadGroup && d%g != 0 {
			return Format{}, fmt.Errorf("kv: %s: %s groups of %d channels do not divide head dim %d (groups of d, or of a divisor of %d)", s.String(), h.name, g, d, d)
		}
	}
	if s.Planes.On && d%PlaneHeadDimAlign != 0 {
		return Format{}, fmt.Errorf("kv: %s: the bit-plane format needs a head dim that is a multiple of %d (16-byte plane slices), not %d", s.String(), PlaneHeadDimAlign, d)
	}
	f := Format{Spec: s, D: d}
	f.K = newLayout(s.K, d, s.Residual)
	f.V = newLayout(s.V, d, s.Residual)
	f.V.role = roleV
	f.Spec.K.Group, f.Spec.V.Group = specGroup(f.K, d), specGroup(f.V, d)
	if s.Reference {
		// Stored as fp16; Pack simulates the integer format (Sim).
		for _, l := range []*TensorLayout{&f.K, &f.V} {
			if l.Elem.IsInt() {
				sim, role := l.TensorFormat, l.role
				*l = newLayout(TensorFormat{Elem: FP16}, d, s.Residual)
				l.Sim, l.role = sim, role
			}
		}
	}
	return f, nil
}

// specGroup is the group a resolved spec names for layout l: its group
// size, or GroupHeadDim ("d") for a per-token group of the whole head that
// is no size ParseSpec takes (96 at D = 96), so that the resolved spec's
// String parses back to the same format.
func specGroup(l TensorLayout, d int) int {
	if l.Elem.IsInt() && l.Scaling == PerToken && l.Group == d && !slices.Contains(ValidGroups, d) {
		return GroupHeadDim
	}
	return l.Group
}

// MustResolve is ParseSpec followed by Resolve, for specs known to be valid.
func MustResolve(spec string, d int) Format {
	f, err := MustParseSpec(spec).Resolve(d)
	if err != nil {
		panic(err)
	}
	return f
}

// BlockBytes is the size of one packed block (K and V, Nr tokens, one KV head).
func (f Format) BlockBytes() int { return f.K.Bytes + f.V.Bytes }

// ResidualBytes is the size of the fp16 residual block (K and V, Nr tokens,
// one KV head) that every sequence holds besides its packed blocks.
func (f Format) ResidualBytes() int {
	if f.Planes.On {
		return 0 // bw splits every token into its block as it is written
	}
	return 2 * f.Residual * f.D * 2
}

// BytesPerToken is the packed size of one token of one KV head (K and V,
// scales and zeros included), the rate at which a long cache grows.
func (f Format) BytesPerToken() float64 {
	return float64(f.BlockBytes()) / float64(f.Residual)
}

// BitsPerElement is BytesPerToken in bits per cached K or V element.
func (f Format) BitsPerElement() float64 {
	return f.BytesPerToken() * 8 / float64(2*f.D)
}

// Blocks returns how many packed blocks and residual tokens a cache of L
// tokens holds.
func (f Format) Blocks(l int) (packed, residual int) {
	if f.Planes.On {
		return (l + f.Residual - 1) / f.Residual, 0 // the last block may be partly filled
	}
	return l / f.Residual, l % f.Residual
}

// SequenceBytes is the memory one KV head of a sequence of L tokens takes:
// its packed blocks plus one full residual block (allocated whole).
func (f Format) SequenceBytes(l int) int64 {
	packed, _ := f.Blocks(l)
	return int64(packed)*int64(f.BlockBytes()) + int64(f.ResidualBytes())
}

// ReadBytes is what one decode step reads for one KV head of a sequence of L
// tokens: the packed blocks and the occupied part of the residual block. For
// bw it is the all-High read (every plane, plus the index); the read of a
// tier mix is PlaneLayout.PlaneReadBytes.
func (f Format) ReadBytes(l int) int64 {
	if f.Planes.On {
		return f.PlaneLayout().PlaneReadBytes([NumTiers]int{High: l})
	}
	packed, res := f.Blocks(l)
	return int64(packed)*int64(f.BlockBytes()) + int64(res)*int64(2*f.D*2)
}

// TensorLayout is the byte layout of the K or the V half of a packed block:
// Nr tokens of D channels of one KV head. The canonical ("linear") layout is
//
//	data   [Nr][D] elements, token-major; sub-byte codes packed little-endian
//	       within each byte: channel c of a row sits in byte c/PerByte at bit
//	       (c%PerByte)*Bits (int4: even channel in the low nibble)
//	params integer types only, fp16 (scale, zero) pairs, scale first:
//	       PerChannel: [Nr/G][D] pairs (token group, channel)
//	       PerToken:   [Nr][D/G] pairs (token, channel group)
//
// data comes first, params follow at ParamsOffset (16-byte aligned). GPU
// kernels may keep their own packed order (layout induction) but must unpack
// to the same codes and params.
type TensorLayout struct {
	TensorFormat
	D, Tokens    int // head dim, tokens per block (Nr)
	RowBytes     int // bytes of one token's data row (Linear order)
	ParamsOffset int // byte offset of the params
	Params       int // number of (scale, zero) pairs
	Bytes        int // total bytes, a multiple of LayoutAlign
	// Order is the arrangement of the codes (Linear unless WithOrder).
	Order Order
	// Sim, in a reference format (Spec.Reference), is the integer format
	// Pack simulates with float32 parameters before storing fp16 values.
	Sim  TensorFormat
	role role
}

// LayoutAlign is the alignment of the params and of a whole layout, so that a
// GPU reads each part with 16-byte vectors.
const LayoutAlign = 16

// ParamBytes is the size of one (scale, zero) pair: two fp16 values.
const ParamBytes = 4

// WholeHeadGroup is the smallest per-token group size that, where it does
// not divide the head dim, spans the whole head instead (one group per
// token, as a group larger than the head does): the default group of 128 at
// D = 96 or 192. A smaller group must divide D (Resolve refuses it
// otherwise), so that no group is cut short.
const WholeHeadGroup = DefaultGroup

func newLayout(tf TensorFormat, d, nr int) TensorLayout {
	if tf.Elem.IsInt() && tf.Scaling == PerToken && (tf.Group == GroupHeadDim || tf.Group > d || tf.Group >= WholeHeadGroup && d%tf.Group != 0) {
		tf.Group = d // one group spans at most the whole head
	}
	l := TensorLayout{TensorFormat: tf, D: d, Tokens: nr}
	l.RowBytes = d * tf.Elem.Bits() / 8
	data := nr * l.RowBytes
	l.ParamsOffset = alignUp(data, LayoutAlign)
	if tf.Elem.IsInt() {
		if tf.Scaling == PerChannel {
			l.Params = nr / tf.Group * d
		} else {
			l.Params = nr * (d / tf.Group)
		}
	}
	l.Bytes = alignUp(l.ParamsOffset+l.Params*ParamBytes, LayoutAlign)
	return l
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// PerByte is the number of codes in one byte (1 for 8- and 16-bit types,
// where an element spans whole bytes).
func (l TensorLayout) PerByte() int {
	if b := l.Elem.Bits(); b < 8 {
		return 8 / b
	}
	return 1
}

// ParamIndex returns the index of the (scale, zero) pair for token t, channel c.
func (l TensorLayout) ParamIndex(t, c int) int {
	if l.Scaling == PerChannel {
		return t/l.Group*l.D + c
	}
	return t*(l.D/l.Group) + c/l.Group
}

// Describe writes a human-readable account of the format for head dim D:
// layouts, bits per element and memory per token, as `bitdecode inspect kv`
// prints it.
func (f Format) Describe(w io.Writer) {
	if f.Planes.On {
		f.describePlanes(w)
		return
	}
	fmt.Fprintf(w, "format     %s (head dim %d)\n", f.Spec.String(), f.D)
	for _, h := range []struct {
		name string
		l    TensorLayout
	}{{"K", f.K}, {"V", f.V}} {
		name := h.l.TensorFormat.String()
		if h.name == "V" && h.l.Elem.IsInt() {
			name = fmt.Sprintf("%v/v%d", h.l.Elem, h.l.Group) // values are always per token
		}
		fmt.Fprintf(w, "%s          %s: data %d B (%d B/token row)", h.name, name, h.l.ParamsOffset, h.l.RowBytes)
		if h.l.Params > 0 {
			fmt.Fprintf(w, ", %d fp16 scale/zero pairs = %d B", h.l.Params, h.l.Params*ParamBytes)
		}
		fmt.Fprintf(w, ", %d B per block\n", h.l.Bytes)
	}
	fmt.Fprintf(w, "block      %d tokens, %d B per KV head (K+V)\n", f.Residual, f.BlockBytes())
	fmt.Fprintf(w, "residual   %d fp16 tokens, %d B per KV head per sequence\n", f.Residual, f.ResidualBytes())
	fmt.Fprintf(w, "per token  %.2f B per KV head, %.3f bits per element (fp16: 16; %.2fx smaller)\n",
		f.BytesPerToken(), f.BitsPerElement(), 16/f.BitsPerElement())
	if f.Rotate {
		fmt.Fprintf(w, "rotation   Walsh-Hadamard on K and V (and Q, and the output back)\n")
	}
}

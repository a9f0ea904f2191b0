package kv

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/internal/half"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical String()
	}{
		{"int4", "int4:kc128:v128:res128"},
		{"INT4", "int4:kc128:v128:res128"},
		{"k8v4", "k8v4:kc128:v128:res128"},
		{"k4v2", "k4v2:kc128:v128:res256"},
		{"int4:kt64", "int4:kt64:v128:res128"},
		{"int4:ktd", "int4:ktd:v128:res128"},
		{"int2:kc32:res256", "int2:kc32:v128:res256"},
		{"int2:kc32:v32", "int2:kc32:v32:res256"},
		{"int4:g32", "int4:kc32:v32:res128"},
		{"int8:kc64:res64", "int8:kc64:v128:res64"},
		{"fp8e4m3", "fp8e4m3:res128"},
		{"fp8", "fp8e4m3:res128"},
		{"fp8e5m2", "fp8e5m2:res128"},
		{"fp16", "fp16:res128"},
		{"bf16", "bf16:res128"},
		{"k16v4", "k16v4:v128:res128"},
		{"int4:rot", "int4:kc128:v128:res128:rot"},
		{" int4:kc64:v64:res512:rot ", "int4:kc64:v64:res512:rot"},
	}
	for _, tc := range tests {
		sp, err := ParseSpec(tc.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", tc.in, err)
			continue
		}
		if got := sp.String(); got != tc.want {
			t.Errorf("ParseSpec(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		back, err := ParseSpec(sp.String())
		if err != nil || !reflect.DeepEqual(back, sp) {
			t.Errorf("round trip of %q: %+v, %v; want %+v", sp.String(), back, err, sp)
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct{ in, field, msg string }{
		{"", "", "empty spec"},
		{"int3", "int3", "fp16, bf16"},
		{"k3v4", "k3v4", "widths"},
		{"int4:kc48", "kc48", "group size"},
		{"int4:kcd", "kcd", "applies to kt"},
		{"int4:kc:kt", "kt", "given twice"},
		{"int4:res100", "res100", "multiple of 32"},
		{"int4:res2048", "res2048", "multiple of 32"},
		{"int4:kc128:res64", "res64", "whole key groups"},
		{"fp16:kt", "kt", "integer keys only"},
		{"fp16:v64", "v64", "integer values only"},
		{"int4:bogus", "bogus", "want kc[G]"},
		{"int4:rot2", "rot2", "no argument"},
	}
	for _, tc := range tests {
		_, err := ParseSpec(tc.in)
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("ParseSpec(%q) = %v, want *SpecError", tc.in, err)
			continue
		}
		if se.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseSpec(%q) error %q (field %q); want field %q and text %q", tc.in, err, se.Field, tc.field, tc.msg)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"int4", "k8v4:kt64", "int2:kc32:res256:rot", "fp8", "k4v2:g32", "::", "kv",
		"bw", "bw:h20:m40:l40", "bw:bf16:e75:w0:s0:r1", "bw:a8=0x70:a4=2048:nofilter:blk128", "bw:trunc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpec(s)
		if err != nil {
			return
		}
		back, err := ParseSpec(sp.String())
		if err != nil || !reflect.DeepEqual(back, sp) {
			t.Fatalf("%q -> %q -> %+v, %v", s, sp.String(), back, err)
		}
		for _, d := range testHeadDims {
			f, err := sp.Resolve(d)
			if ok := resolvesAt(sp, d); ok != (err == nil) {
				t.Fatalf("Resolve(%d) of valid spec %q: %v, want ok %v", d, s, err, ok)
			}
			if err != nil {
				continue
			}
			if f.BlockBytes() <= 0 || f.BlockBytes()%LayoutAlign != 0 {
				t.Fatalf("%q D=%d: block bytes %d", s, d, f.BlockBytes())
			}
		}
	})
}

func TestAccounting(t *testing.T) {
	tests := []struct {
		spec       string
		d          int
		blockBytes int
		bits       float64 // bits per element, metadata included
	}{
		// int4 KC128, D=128: K data 128*64 + 128 channel pairs*4 = 8704; V the same.
		{"int4", 128, 2 * (8192 + 512), 4.25},
		// int4 KT128 is the same size: 128 token pairs.
		{"int4:kt128", 128, 2 * (8192 + 512), 4.25},
		// int2, Nr=256: data 256*32 = 8192, K params 2*128 pairs = 1024 bytes, V 256 pairs = 1024.
		{"int2", 128, 2 * (8192 + 1024), 2.25},
		// int8 with G=32: data 128*128, params 4*128 pairs (K) and 128*4 pairs (V).
		{"int8:g32", 128, 2 * (16384 + 2048), 9},
		{"fp16", 128, 2 * 128 * 128 * 2, 16},
		{"fp8", 64, 2 * 128 * 64, 8},
		// D=96 caps V's group at 96: int4 KC128 K 128*48 + 96 channel
		// pairs*4, V 128*48 + 128 token pairs*4.
		{"int4", 96, 2*6144 + 96*4 + 128*4, 0},
		// D=192: 128 does not divide 192, so V's group spans the head.
		{"int4", 192, 2*12288 + 192*4 + 128*4, 0},
		// D=80, int2 KT (one group): data 256*20, 256 token pairs, both halves.
		{"int2:ktd", 80, 2 * (5120 + 1024), 0},
		// D=64 caps V's group at 64: one pair per token.
		{"int4", 64, (4096 + 64*4) + (4096 + 128*4), 0}, // bits checked below
	}
	for _, tc := range tests {
		f := MustResolve(tc.spec, tc.d)
		if got := f.BlockBytes(); got != tc.blockBytes {
			t.Errorf("%s D=%d: BlockBytes = %d, want %d", tc.spec, tc.d, got, tc.blockBytes)
		}
		if tc.bits != 0 && math.Abs(f.BitsPerElement()-tc.bits) > 1e-12 {
			t.Errorf("%s D=%d: BitsPerElement = %g, want %g", tc.spec, tc.d, f.BitsPerElement(), tc.bits)
		}
		if got, want := f.SequenceBytes(3*f.Residual+5), int64(3*f.BlockBytes()+f.ResidualBytes()); got != want {
			t.Errorf("%s: SequenceBytes = %d, want %d", tc.spec, got, want)
		}
		if got, want := f.ReadBytes(2*f.Residual+7), int64(2*f.BlockBytes()+7*2*f.D*2); got != want {
			t.Errorf("%s: ReadBytes = %d, want %d", tc.spec, got, want)
		}
	}
	if _, err := MustParseSpec("int4").Resolve(100); err == nil {
		t.Error("Resolve(100) succeeded; want an error naming the supported head dims")
	}
}

// realisticBlock returns fp16 K-like data [n][d]: unit-scale noise with a few
// outlier channels (x10..x50) and a per-channel offset, as real keys have.
func realisticBlock(r *rand.Rand, n, d int) []uint16 {
	scale := make([]float64, d)
	offset := make([]float64, d)
	for c := range d {
		scale[c] = 0.5 + r.Float64()
		offset[c] = r.NormFloat64() * 0.5
		if r.IntN(16) == 0 {
			scale[c] *= 10 + 40*r.Float64()
		}
	}
	out := make([]uint16, n*d)
	for t := range n {
		for c := range d {
			out[t*d+c] = half.FromFloat32(float32(offset[c] + scale[c]*r.NormFloat64()))
		}
	}
	return out
}

// TestPackUnpackBound checks every element of every format against the
// per-group bound derived from the quantization step.
func TestPackUnpackBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	specs := []string{"int8", "int4", "int2", "int4:kt128", "int4:kt32", "int2:kc32:v32", "int4:ktd:v64", "int8:g64",
		"fp16", "bf16", "fp8e4m3", "fp8e5m2", "k8v4", "k4v2"}
	for _, spec := range specs {
		for _, d := range testHeadDims {
			f, err := MustParseSpec(spec).Resolve(d)
			if !resolvesAt(MustParseSpec(spec), d) {
				if err == nil {
					t.Errorf("%s D=%d resolved; its groups do not fit", spec, d)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s D=%d: %v", spec, d, err)
			}
			for _, l := range []TensorLayout{f.K, f.V} {
				src := realisticBlock(r, l.Tokens, d)
				buf := make([]byte, l.Bytes)
				for i := range buf {
					buf[i] = 0xAA // poison: Pack must overwrite everything it owns
				}
				l.Pack(buf, src)
				got := make([]float32, l.Tokens*d)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				l.Unpack(got, buf)
				checkBlock(t, spec, d, l, src, buf, got)
			}
		}
	}
}

func checkBlock(t *testing.T, spec string, d int, l TensorLayout, src []uint16, buf []byte, got []float32) {
	t.Helper()
	for i, g := range got {
		tk, c := i/d, i%d
		x := float64(half.ToFloat32(src[i]))
		var bound float64
		switch l.Elem {
		case FP16:
			bound = 0
		case BF16:
			bound = math.Abs(x) / 256 // half an ulp of an 8-bit significand
		case FP8E4M3, FP8E5M2:
			// Half an ulp of the mantissa, or half the subnormal quantum;
			// beyond the largest finite value the conversion saturates.
			f8 := l.FP8()
			maxv := float64(f8.ToFloat32(f8.MaxFinite))
			bound = math.Max(math.Abs(x)/float64(int(2)<<f8.MantBits), math.Ldexp(1, int(-f8.Bias-int32(f8.MantBits))))
			if math.Abs(x) > maxv {
				x = math.Copysign(maxv, x)
			}
		default:
			p := l.ParamIndex(tk, c)
			scale, zero := l.Param(buf, p)
			lo, hi, absMax := float32(math.Inf(1)), float32(math.Inf(-1)), float32(0)
			l.forGroup(p, func(t2, c2 int) {
				v := half.ToFloat32(src[t2*d+c2])
				lo, hi = min(lo, v), max(hi, v)
				absMax = max(absMax, float32(math.Abs(float64(v))))
			})
			if zero != half.FromFloat32(lo) {
				t.Fatalf("%s D=%d: zero of group %d = %#04x, want min %g", spec, d, p, zero, lo)
			}
			_, _, scale32 := QuantParams(l.Elem, lo, hi)
			bound = ErrorBound(l.Elem, scale, scale32, absMax)
		}
		if g != g || math.Abs(float64(g)-x) > bound {
			t.Fatalf("%s D=%d %v: element (t=%d, c=%d) = %g, want %g ± %g", spec, d, l.TensorFormat, tk, c, g, x, bound)
		}
	}
}

// TestQuantExtremes: a group's min and max are reproduced exactly enough,
// constant groups are exact, codes use the whole range.
func TestQuantExtremes(t *testing.T) {
	f := MustResolve("int4:kt32", 64)
	l := f.K
	src := make([]uint16, l.Tokens*64)
	for i := range src {
		src[i] = half.FromFloat32(3.25) // constant everywhere
	}
	for c := 0; c < 32; c++ { // token 0, first group: a ramp 0..15
		src[c] = half.FromFloat32(float32(c % 16))
	}
	buf := make([]byte, l.Bytes)
	l.Pack(buf, src)
	got := make([]float32, len(src))
	l.Unpack(got, buf)
	for c := 0; c < 32; c++ {
		if got[c] != float32(c%16) || l.Code(buf, 0, c) != uint8(c%16) {
			t.Fatalf("ramp c=%d: got %g code %d", c, got[c], l.Code(buf, 0, c))
		}
	}
	for i := 32; i < len(got); i++ {
		if got[i] != 3.25 {
			t.Fatalf("constant group element %d = %g, want 3.25", i, got[i])
		}
	}
}

func TestRotate(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{64, 128, 256} {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		dot := func(x, y []float32) (s float64) {
			for i := range x {
				s += float64(x[i]) * float64(y[i])
			}
			return s
		}
		want := dot(a, b)
		ra, rb := append([]float32(nil), a...), append([]float32(nil), b...)
		Rotate(ra)
		Rotate(rb)
		if got := dot(ra, rb); math.Abs(got-want) > 1e-4*math.Sqrt(dot(a, a)*dot(b, b)) {
			t.Errorf("n=%d: rotated dot %g, want %g", n, got, want)
		}
		Rotate(ra)
		for i := range a {
			if math.Abs(float64(ra[i]-a[i])) > 1e-5 {
				t.Fatalf("n=%d: Rotate twice changed element %d: %g -> %g", n, i, a[i], ra[i])
			}
		}
	}
}

func FuzzPack(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4}, uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, specIdx, dIdx uint8) {
		specs := []string{"int8", "int4", "int2", "int4:kt32", "fp8e4m3", "int2:kc32:v32:res64"}
		spec := specs[int(specIdx)%len(specs)]
		d := testHeadDims[int(dIdx)%len(testHeadDims)]
		f, err := MustParseSpec(spec).Resolve(d)
		if err != nil {
			if resolvesAt(MustParseSpec(spec), d) {
				t.Fatalf("%s D=%d: %v", spec, d, err)
			}
			return
		}
		for _, l := range []TensorLayout{f.K, f.V} {
			src := make([]uint16, l.Tokens*d)
			for i := range src {
				if len(data) > 0 {
					h := uint16(data[(2*i)%len(data)]) | uint16(data[(2*i+1)%len(data)])<<8
					if h&0x7c00 == 0x7c00 { // inf/NaN are not cache contents
						h &^= 0x4000
					}
					src[i] = h
				}
			}
			buf := make([]byte, l.Bytes)
			l.Pack(buf, src)
			got := make([]float32, len(src))
			l.Unpack(got, buf)
			checkBlock(t, spec, d, l, src, buf, got)
		}
	})
}

// TestPaddedChannels packs blocks of heads padded from 96 to 128 dims at
// load (model.Config.PadHeads, for the GPU kernels): keys with the RoPE
// layout's zero channels [48, 64) and [112, 128), values with [96, 128)
// zero. Every format must give finite values within its per-group bound
// (checkBlock: zeros in a group widen its range only to include 0), and a
// group of only zero channels (a per-channel key group, a value group of
// [96, 128)) exactly zeros, its scale 0.
func TestPaddedChannels(t *testing.T) {
	const D, Dp = 96, 128
	r := rand.New(rand.NewPCG(9, 10))
	zeroK := func(c int) bool { return c >= D/2 && c < Dp/2 || c >= Dp/2+D/2 }
	zeroV := func(c int) bool { return c >= D }
	for _, spec := range []string{"int8", "int4", "int2", "int8:kc32:v32", "int4:kc32:v32", "int2:kc32:v32", "int4:kt128",
		"int4:kt32", "int4:ktd:v64", "int8:g64", "k8v4", "k4v2", "fp16", "bf16", "fp8e4m3"} {
		f, err := MustParseSpec(spec).Resolve(Dp)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		for i, l := range []TensorLayout{f.K, f.V} {
			zero := []func(int) bool{zeroK, zeroV}[i]
			src := realisticBlock(r, l.Tokens, Dp)
			for tk := range l.Tokens {
				for c := range Dp {
					if zero(c) {
						src[tk*Dp+c] = 0
					}
				}
			}
			buf := make([]byte, l.Bytes)
			l.Pack(buf, src)
			got := make([]float32, l.Tokens*Dp)
			l.Unpack(got, buf)
			for _, g := range got {
				if math.IsInf(float64(g), 0) || g != g {
					t.Fatalf("%s %v: a padded block unpacks to %g", spec, l.TensorFormat, g)
				}
			}
			checkBlock(t, spec, Dp, l, src, buf, got)
		}
	}
}

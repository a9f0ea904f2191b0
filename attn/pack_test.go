package attn

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// packSpecs are the formats whose residual pack is checked: every integer
// width and scaling, group sizes, residual sizes, rotation, mixed widths,
// a reference format and float ones (which take kv's path).
var packSpecs = []string{"int8", "int4", "int4:kt128", "int4:kt32:v32", "int2", "int2:kc32:v32", "int2:ktd",
	"k8v4", "k4v2", "int4:ktd:rot", "int4:kc64:res64", "int4:kc128:v64:res128:rot", "k4v16", "k16v2:v64", "int4:kc32:v32:res32",
	"fp16", "bf16", "fp8e4m3"}

// TestPackResidualMatchesKV: PackResidual's blocks are byte for byte the
// ones kv.TensorLayout.Pack writes, on K with outlier channels, V, and
// blocks poisoned with a constant group (scale 0), NaN, ±Inf, subnormals
// and ±0, at every SIMD level (the fp16 conversion differs per level).
func TestPackResidualMatchesKV(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	const hkv = 2
	for _, spec := range packSpecs {
		for _, d := range []int{64, 80, 96, 128, 192, 256} {
			f, ok := resolveOrSkip(t, spec, d)
			if !ok {
				continue
			}
			n := f.Residual * d
			for _, poison := range []bool{false, true} {
				resK, resV := packTestBlock(r, hkv, f.Residual, d, poison), packTestBlock(r, hkv, f.Residual, d, poison)
				want := make([]byte, hkv*f.BlockBytes())
				for h := 0; h < hkv; h++ {
					base := want[h*f.BlockBytes():]
					f.K.Pack(base[:f.K.Bytes], resK[h*n:(h+1)*n])
					f.V.Pack(base[f.K.Bytes:f.K.Bytes+f.V.Bytes], resV[h*n:(h+1)*n])
				}
				for _, l := range cpufeat.Levels() {
					_, restore := cpufeat.Force(l)
					got := bytes.Repeat([]byte{0xa5}, hkv*f.BlockBytes()) // stale bytes must be overwritten
					PackResidual(got, f, hkv, resK, resV)
					restore()
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s D=%d poison=%v level %v: byte %d of %d is %#x, kv.Pack wrote %#x",
							spec, d, poison, l, i, len(want), got[i], want[i])
					}
				}
			}
		}
	}
}

// packTestBlock returns [hkv][nr][d] fp16 bits: normal values with a few
// outlier channels (x10-x50); poisoned, one token's values all equal, one
// channel constant, and NaN, ±Inf, subnormal and ±0 values scattered.
func packTestBlock(r *rand.Rand, hkv, nr, d int, poison bool) []uint16 {
	out := make([]uint16, hkv*nr*d)
	gain := make([]float32, d)
	for c := range gain {
		gain[c] = 1
		if r.IntN(16) == 0 {
			gain[c] = 10 + 40*r.Float32()
		}
	}
	for i := range out {
		out[i] = half.FromFloat32(float32(r.NormFloat64()) * gain[i%d])
	}
	if !poison {
		return out
	}
	for h := 0; h < hkv; h++ {
		blk := out[h*nr*d : (h+1)*nr*d]
		t := r.IntN(nr)
		for c := 0; c < d; c++ {
			blk[t*d+c] = half.FromFloat32(0.75)
		}
		c := r.IntN(d)
		for t := 0; t < nr; t++ {
			blk[t*d+c] = half.FromFloat32(-2.5)
		}
		special := []uint16{half.FromFloat32(float32(math.NaN())), half.FromFloat32(float32(math.Inf(1))),
			half.FromFloat32(float32(math.Inf(-1))), 0x0001, 0x8003, 0x0000, 0x8000}
		for i := 0; i < 3*len(special); i++ {
			blk[r.IntN(len(blk))] = special[i%len(special)]
		}
	}
	return out
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		panic(fmt.Sprintf("firstDiff: lengths %d and %d", len(a), len(b)))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestRotateMatchesKV: every level's rotate writes kv.Rotate's bits, for
// every power-of-two length up to 512 (the assembly takes 16 and up), on
// values with outlier channels and on vectors poisoned with NaN, ±Inf,
// subnormals and ±0.
func TestRotateMatchesKV(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for n := 1; n <= 512; n *= 2 {
		for trial := 0; trial < 20; trial++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if r.IntN(16) == 0 {
					x[i] *= 10 + 40*r.Float32()
				}
			}
			if trial%4 == 3 {
				special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
					math.Float32frombits(1), -math.Float32frombits(3), 0, float32(math.Copysign(0, -1))}
				for i := 0; i < 3 && i < n; i++ {
					x[r.IntN(n)] = special[r.IntN(len(special))]
				}
			}
			want := append([]float32(nil), x...)
			kv.Rotate(want)
			for _, l := range cpufeat.Levels() {
				_, restore := cpufeat.Force(l)
				got := append([]float32(nil), x...)
				activeKernels().rotate(got)
				restore()
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d trial %d level %v: x[%d] = %v (%#x), kv.Rotate %v (%#x)",
							n, trial, l, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

// TestQuantCodeMatchesKV: quantCode's rounding (add and subtract 1.5·2^23)
// gives kv.QuantCode's code for every width on random values, on values
// exactly halfway between two codes, past both ends, and on NaN, ±Inf,
// subnormals and ±0, with a zero scale among the params.
func TestQuantCodeMatchesKV(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(1), -math.Float32frombits(5), 0, float32(math.Copysign(0, -1)), 1e30, -1e30, 1 << 22, -(1 << 22)}
	for _, e := range []kv.Elem{kv.Int8, kv.Int4, kv.Int2} {
		levels := float32(e.Levels())
		for trial := 0; trial < 20000; trial++ {
			lo := float32(r.NormFloat64() * 4)
			hi := lo + float32(r.ExpFloat64()*8)
			if trial%100 == 0 {
				hi = lo // scale 0
			}
			scale, zero, _ := kv.QuantParams(e, lo, hi)
			q := groupQuant{half.ToFloat32(scale), half.ToFloat32(zero)}
			var v float32
			switch trial % 4 {
			case 0, 1: // inside the range and a little past it
				v = lo + (hi-lo)*(1.2*r.Float32()-0.1)
			case 2: // halfway between two codes (exactly, with scale 1 and zero 0)
				if trial%8 == 2 {
					scale, zero = half.FromFloat32(1), half.FromFloat32(0)
					q = groupQuant{1, 0}
				}
				v = q.z + q.s*(float32(r.IntN(int(levels)+4)-2)+0.5)
			default:
				v = special[r.IntN(len(special))]
			}
			if got, want := quantCode(v, q, levels), kv.QuantCode(e, v, scale, zero); got != want {
				t.Fatalf("%v: v=%v scale=%v zero=%v: quantCode %d, kv.QuantCode %d", e, v, q.s, q.z, got, want)
			}
		}
	}
}

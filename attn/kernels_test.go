package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/kv"
)

// levelSets returns the kernel sets this CPU runs, generic first: every
// SIMD level, AVX-512 with and without VNNI, and with VNNI with and
// without VBMI (the int2 kernels of a CPU without VBMI run too); NEON with
// and without the dot-product extension.
func levelSets() []*kernels {
	var out []*kernels
	for _, l := range cpufeat.Levels() {
		if k := kernelsFor(l, false, false); !slices.Contains(out, k) {
			// A level without kernels of its own (NEON) runs a set
			// already listed.
			out = append(out, k)
		}
		if l == cpufeat.NEON && cpufeat.Detected().DotProd {
			// The NEON set with SDOT's integer-key scores, after the one
			// without (the float path a CPU without DotProd runs).
			out = append(out, kernelsFor(l, true, false))
		}
		if l == cpufeat.AVX512 && cpufeat.Detected().VNNI {
			out = append(out, kernelsFor(l, true, false))
			if cpufeat.Detected().VBMI {
				out = append(out, kernelsFor(l, true, true))
			}
		}
	}
	return out
}

func (k *kernels) String() string {
	s := k.level.String()
	switch {
	case k.vnni && k.level == cpufeat.NEON:
		s += "+dotprod"
	case k.vnni:
		s += "+vnni"
	}
	if k.vbmi {
		s += "+vbmi"
	}
	if k.pvU8 != nil && !k.vbmi {
		s += "+u8"
	}
	return s
}

func randF32(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(scale * r.NormFloat64())
	}
	return x
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sameBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d: got %g (%#x), want %g (%#x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestConversionKernels: conversions and unpacking are exact, so every
// level must give the pure-Go bits, on every fp16 pattern (inf, NaN,
// subnormals included) and every byte.
// TestToHalf: every level's toHalf gives half.FromFloat32's bits (the
// cache's append of new keys and values) on every fp16 value widened and
// its neighbours (ties to even both ways, the overflow edge), float32
// subnormals, ±0, ±Inf, signaling and quiet NaNs with every payload bit,
// and a stride over all 2^32 float32 patterns; lengths off the kernels'
// 16 included.
func TestToHalf(t *testing.T) {
	var src []float32
	for h := range 1 << 16 {
		b := math.Float32bits(half.ToFloat32(uint16(h)))
		for _, d := range []int32{0, 1, -1, 0x1000, -0x1000, 0xfff, 0x1001} {
			src = append(src, math.Float32frombits(uint32(int32(b)+d)))
		}
	}
	for b := uint64(0); b < 1<<32; b += 40961 {
		src = append(src, math.Float32frombits(uint32(b)))
	}
	for bit := range 23 {
		for _, sign := range []uint32{0, 1 << 31} {
			src = append(src, math.Float32frombits(sign|0x7f800000|1<<bit), math.Float32frombits(sign|0x7fc00000|1<<bit))
		}
	}
	src = append(src, 65504, 65519.996, 65520, -65520, 0x1p-25, 0x1p-24, 0x1.8p-25, 0x1p-149, float32(math.Copysign(0, -1)))
	for _, k := range levelSets() {
		for _, n := range []int{len(src), 15, 16, 33} {
			got := make([]uint16, n)
			k.toHalf(got, src[:n])
			for i, x := range src[:n] {
				if want := half.FromFloat32(x); got[i] != want {
					t.Fatalf("%v toHalf(%#x) = %#x, want %#x", k, math.Float32bits(x), got[i], want)
				}
			}
		}
	}
}

func TestConversionKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	bytes := randBytes(r, 4096)
	for i := range 256 {
		bytes[i] = byte(i)
	}
	g := &genericKernels
	for _, k := range levelSets() {
		for _, n := range []int{16, 48, 1 << 16} {
			src := all[len(all)-n:]
			got, want := nanSlice(n), nanSlice(n)
			k.cvtHalf(got, src)
			g.cvtHalf(want, src)
			for i := range want { // NaN payloads may differ; NaN must stay NaN
				if (got[i] != got[i]) != (want[i] != want[i]) || (want[i] == want[i] && got[i] != want[i]) {
					t.Fatalf("%v cvtHalf(%#x) = %g, want %g", k, src[i], got[i], want[i])
				}
			}
			k.cvtBF16(got, src)
			g.cvtBF16(want, src)
			sameBits(t, fmt.Sprintf("%v cvtBF16 n=%d", k, n), got, want)
			if k.cvtPairs != nil && n%32 == 0 { // pairs of every fp16 value: cvtHalf, then deinterleave
				pa, pb, wa, wb := nanSlice(n/2), nanSlice(n/2), nanSlice(n/2), nanSlice(n/2)
				k.cvtPairs(pa, pb, src)
				g.cvtHalf(want, src)
				g.deinterleave(wa, wb, want)
				for i := range wa {
					for _, c := range [][2]float32{{pa[i], wa[i]}, {pb[i], wb[i]}} {
						if (c[0] != c[0]) != (c[1] != c[1]) || (c[1] == c[1] && math.Float32bits(c[0]) != math.Float32bits(c[1])) {
							t.Fatalf("%v cvtPairs n=%d pair %d: %g, want %g", k, n, i, c[0], c[1])
						}
					}
				}
			}
		}
		for _, e4m3 := range []bool{true, false} { // every fp8 byte, exactly (NaN stays NaN)
			got, want := nanSlice(len(bytes)), nanSlice(len(bytes))
			k.cvtFP8(got, bytes, e4m3)
			g.cvtFP8(want, bytes, e4m3)
			for i := range want {
				if (got[i] != got[i]) != (want[i] != want[i]) || (want[i] == want[i] && math.Float32bits(got[i]) != math.Float32bits(want[i])) {
					t.Fatalf("%v cvtFP8(%#x, e4m3 %v) = %g, want %g", k, bytes[i], e4m3, got[i], want[i])
				}
			}
		}
		for _, n := range []int{32, 96, 4096} {
			got, want := make([]uint8, 4*n), make([]uint8, 4*n)
			k.unpack4(got, bytes[:n])
			g.unpack4(want, bytes[:n])
			if string(got[:2*n]) != string(want[:2*n]) {
				t.Fatalf("%v unpack4 n=%d differs", k, n)
			}
			k.unpack2(got, bytes[:n])
			g.unpack2(want, bytes[:n])
			if string(got) != string(want) {
				t.Fatalf("%v unpack2 n=%d differs", k, n)
			}
			f1, f2 := nanSlice(n), nanSlice(n)
			k.codesF32(f1, bytes[:n])
			g.codesF32(f2, bytes[:n])
			sameBits(t, fmt.Sprintf("%v codesF32 n=%d", k, n), f1, f2)
		}
	}
	// The pure-Go unpacking agrees with kv's element order.
	want := make([]uint8, 8)
	g.unpack4(want[:2], []byte{0xa7})
	g.unpack2(want[4:], []byte{0b11_10_01_00})
	if want[0] != 7 || want[1] != 0xa || want[4] != 0 || want[5] != 1 || want[6] != 2 || want[7] != 3 {
		t.Fatalf("unpack order: %v", want)
	}
	if half.ToFloat32(0x3c00) != fp16ToF32[0x3c00] {
		t.Fatal("fp16 table")
	}
}

// dotTol bounds a float32 dot product of d terms computed in any order
// against the float64 one: d·eps·Σ|a·b|.
func dotTol(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += math.Abs(float64(a[i]) * float64(b[i]))
	}
	return float64(len(a)+2) * eps32 * s
}

// TestScoreKernels: scores of every level against float64 on awkward
// head dims (80 and 96, Phi-2's and Phi-3-mini's, are neither multiples
// of 64 nor powers of two; the kernels take any multiple of 16) and token
// counts.
func TestScoreKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range levelSets() {
		for _, d := range []int{16, 64, 80, 96, 128, 192, 256} {
			for _, n := range []int{8, 16, 24, 48, 136} {
				q, kr := randF32(r, d, 1), randF32(r, n*d, 3)
				A, B := randF32(r, n, 1), randF32(r, n, 1)
				a, b := float32(0.7), float32(-1.3)
				out := nanSlice(n)
				k.scoresF32(out, q, kr, A, B, a, b)
				for tk := 0; tk < n; tk++ {
					row := kr[tk*d : (tk+1)*d]
					var want float64
					for c := range q {
						want += float64(q[c]) * float64(row[c])
					}
					tol := math.Abs(float64(a*A[tk]))*dotTol(q, row) + 4*eps32*(math.Abs(float64(a*A[tk])*want)+math.Abs(float64(b*B[tk])))
					want = float64(a*A[tk])*want + float64(b*B[tk])
					if g := out[tk]; g != g || math.Abs(float64(g)-want) > tol {
						t.Fatalf("%v scoresF32 d=%d n=%d token %d: got %g want %g (tol %.3g)", k, d, n, tk, g, want, tol)
					}
				}
				if k.scoresHalf2 != nil { // fp16 rows converted in registers, two query rows
					h := make([]uint16, n*d)
					hf := make([]float32, n*d)
					for i, x := range kr {
						h[i] = half.FromFloat32(x)
					}
					k.cvtHalf(hf, h)
					q1 := randF32(r, d, 1)
					o0, o1, w0, w1 := nanSlice(n), nanSlice(n), nanSlice(n), nanSlice(n)
					ones, zeros := make([]float32, n), make([]float32, n)
					for i := range ones {
						ones[i] = 1
					}
					k.scoresHalf2(o0, o1, q, q1, h, make([]byte, 64*n/8))
					k.scoresF32(w0, q, hf, ones, zeros, 1, 0)
					k.scoresF32(w1, q1, hf, ones, zeros, 1, 0)
					sameBits(t, fmt.Sprintf("%v scoresHalf2 d=%d n=%d", k, d, n), append(o0, o1...), append(w0, w1...))
				}
				// Integer scores: exact sums, then the same float steps as Go.
				qi := make([]int8, d)
				for c := range qi {
					qi[c] = int8(r.IntN(255) - 127)
				}
				codes := randBytes(r, n*d)
				got, want := nanSlice(n), nanSlice(n)
				k.scoresU8(got, qi, codes, A, B, a, b, 0) // c = 0: the NaN in out must not show
				scoresU8Go(want, qi, codes, A, B, a, b, 0)
				sameBits(t, fmt.Sprintf("%v scoresU8 d=%d n=%d", k, d, n), got, want)
				k.scoresU8(got, qi, codes, A, B, 0.5, 0, 1)
				scoresU8Go(want, qi, codes, A, B, 0.5, 0, 1)
				sameBits(t, fmt.Sprintf("%v scoresU8 c=1 d=%d n=%d", k, d, n), got, want)
				// A step that brings a·A·s near b·B (|s| ~ 1e4-1e5): where Go
				// fuses b·B into the add (arm64), rounding b·B apart shows.
				k.scoresU8(got, qi, codes, A, B, 2e-5, b, 0)
				scoresU8Go(want, qi, codes, A, B, 2e-5, b, 0)
				sameBits(t, fmt.Sprintf("%v scoresU8 small a d=%d n=%d", k, d, n), got, want)
				if k.scoresI4x4 != nil && d%64 == 0 && n%16 == 0 { // packed int4 keys, four rows (d % 128 == 64: the half chunk)
					qs4, qb, qb2 := make([]int8, 4*d), make([]int8, 16*d), make([]int8, 16*d)
					for i := range qs4 {
						qs4[i] = int8(r.IntN(255) - 127)
					}
					for row := 0; row < 4; row++ {
						k.bcastQ4(qb[row*4*d:], qs4[row*d:(row+1)*d])
						bcastQ4Go(qb2[row*4*d:], qs4[row*d:(row+1)*d])
					}
					if string(bytesOf(qb)) != string(bytesOf(qb2)) {
						t.Fatalf("%v bcastQ4 d=%d differs from pure Go", k, d)
					}
					packed := randBytes(r, n*d/2)
					ab := randF32(r, 8, 1)
					ldo := n + 16
					o4, w4 := nanSlice(4*ldo), nanSlice(4*ldo)
					k.scoresI4x4(o4, ldo, qb, packed, A, B, ab, n, d, 0, packed)
					scoresI4x4Go(w4, ldo, qb, packed, A, B, ab, n, d, 0, nil)
					codes4 := make([]uint8, n*d)
					unpack4Go(codes4, packed)
					w1 := nanSlice(n)
					for row := 0; row < 4; row++ {
						name := fmt.Sprintf("%v scoresI4x4 d=%d n=%d row %d", k, d, n, row)
						sameBits(t, name, o4[row*ldo:row*ldo+n], w4[row*ldo:row*ldo+n])
						// The reference with the row's query in channel order.
						scoresU8Go(w1, qs4[row*d:(row+1)*d], codes4, A, B, ab[row], ab[4+row], 0)
						sameBits(t, name+" (scoresU8)", o4[row*ldo:row*ldo+n], w1)
					}
					// c = 1 (out's values added) and unit factors (A and B
					// empty, KC keys): the bits of the reference with ones.
					ones := make([]float32, n)
					for i := range ones {
						ones[i] = 1
					}
					for _, c := range []float32{0, 1} {
						u4 := randF32(r, 4*ldo, 1)
						v4 := append([]float32(nil), u4...)
						x4 := append([]float32(nil), u4...)
						y4 := append([]float32(nil), u4...)
						k.scoresI4x4(u4, ldo, qb, packed, nil, nil, ab, n, d, c, nil)
						scoresI4x4Go(v4, ldo, qb, packed, ones, ones, ab, n, d, c, nil)
						k.scoresI4x4(x4, ldo, qb, packed, A, B, ab, n, d, c, nil)
						scoresI4x4Go(y4, ldo, qb, packed, A, B, ab, n, d, c, nil)
						for row := 0; row < 4; row++ {
							sameBits(t, fmt.Sprintf("%v scoresI4x4 unit d=%d n=%d row %d c=%g", k, d, n, row, c), u4[row*ldo:row*ldo+n], v4[row*ldo:row*ldo+n])
							sameBits(t, fmt.Sprintf("%v scoresI4x4 d=%d n=%d row %d c=%g", k, d, n, row, c), x4[row*ldo:row*ldo+n], y4[row*ldo:row*ldo+n])
						}
					}
					if k.scoresI4x2 != nil { // two rows: rows 0 and 1 of scoresI4x4, rows 2 and 3 untouched
						o2 := nanSlice(4 * ldo)
						k.scoresI4x2(o2, ldo, qb, packed, A, B, ab, n, d, 0, packed)
						for row := 0; row < 2; row++ {
							sameBits(t, fmt.Sprintf("%v scoresI4x2 d=%d n=%d row %d", k, d, n, row), o2[row*ldo:row*ldo+n], w4[row*ldo:row*ldo+n])
						}
						for i, x := range o2[2*ldo:] {
							if x == x {
								t.Fatalf("%v scoresI4x2 d=%d n=%d wrote %g at row 2 or 3 (offset %d)", k, d, n, x, i)
							}
						}
					}
				}
				if k.scoresI2x4 != nil && d%64 == 0 && n%16 == 0 { // packed int2 keys, four rows
					qs4, qb, qb2 := make([]int8, 4*d), make([]int8, 16*d), make([]int8, 16*d)
					for i := range qs4 {
						qs4[i] = int8(r.IntN(255) - 127)
					}
					for row := 0; row < 4; row++ {
						k.bcastQ2(qb[row*4*d:], qs4[row*d:(row+1)*d])
						bcastQ2Go(qb2[row*4*d:], qs4[row*d:(row+1)*d])
					}
					if string(bytesOf(qb)) != string(bytesOf(qb2)) {
						t.Fatalf("%v bcastQ2 d=%d differs from pure Go", k, d)
					}
					packed := randBytes(r, n*d/4)
					ab := randF32(r, 8, 1)
					for _, c := range []float32{0, 1} {
						ldo := n + 16
						o4, w4 := nanSlice(4*ldo), nanSlice(4*ldo)
						if c != 0 {
							o4 = randF32(r, 4*ldo, 1)
							w4 = append([]float32(nil), o4...)
						}
						u4 := append([]float32(nil), o4...)
						k.scoresI2x4(o4, ldo, qb, packed, A, B, ab, n, d, c, packed)
						// The reference: each row's query in channel order against the unpacked codes.
						scoresI2x4Go(w4, ldo, qb, packed, A, B, ab, n, d, c, nil)
						// Unit factors (A and B empty, KC keys): the bits of ones.
						ones := make([]float32, n)
						for i := range ones {
							ones[i] = 1
						}
						v4 := append([]float32(nil), u4...)
						k.scoresI2x4(u4, ldo, qb, packed, nil, nil, ab, n, d, c, nil)
						scoresI2x4Go(v4, ldo, qb, packed, ones, ones, ab, n, d, c, nil)
						for row := 0; row < 4; row++ {
							sameBits(t, fmt.Sprintf("%v scoresI2x4 unit d=%d n=%d row %d c=%g", k, d, n, row, c), u4[row*ldo:row*ldo+n], v4[row*ldo:row*ldo+n])
						}
						codes2 := make([]uint8, n*d)
						unpack2Go(codes2, packed)
						w1 := nanSlice(n)
						for row := 0; row < 4; row++ {
							name := fmt.Sprintf("%v scoresI2x4 d=%d n=%d row %d c=%g", k, d, n, row, c)
							sameBits(t, name, o4[row*ldo:row*ldo+n], w4[row*ldo:row*ldo+n])
							if c == 0 {
								scoresU8Go(w1, qs4[row*d:(row+1)*d], codes2, A, B, ab[row], ab[4+row], 0)
								sameBits(t, name+" (scoresU8)", o4[row*ldo:row*ldo+n], w1)
							}
						}
					}
				}
				if k.scoresU8x4 != nil && d%64 == 0 && n%16 == 0 { // four rows at once: the bits of scoresU8 per row
					qs4, qb := make([]int8, 4*d), make([]int8, 16*d)
					for i := range qs4 {
						qs4[i] = int8(r.IntN(255) - 127)
					}
					for row := 0; row < 4; row++ {
						k.bcastQ(qb[row*4*d:], qs4[row*d:(row+1)*d])
					}
					ab := randF32(r, 8, 1)
					for _, c := range []float32{0, 1, -1} {
						if c < 0 { // small steps: a·A·s near b·B (see scoresU8's case)
							c = 0
							for i := range 4 {
								ab[i] *= 2e-5
							}
						}
						ldo := n + 16
						o4, w4 := nanSlice(4*ldo), nanSlice(4*ldo)
						if c != 0 {
							o4, w4 = randF32(r, 4*ldo, 1), nil
							w4 = append(w4, o4...)
						}
						k.scoresU8x4(o4, ldo, qb, codes, A, B, ab, n, d, c, codes)
						for row := 0; row < 4; row++ {
							scoresU8Go(w4[row*ldo:row*ldo+n], qs4[row*d:(row+1)*d], codes, A, B, ab[row], ab[4+row], c)
							sameBits(t, fmt.Sprintf("%v scoresU8x4 d=%d n=%d row %d c=%g", k, d, n, row, c), o4[row*ldo:row*ldo+n], w4[row*ldo:row*ldo+n])
						}
					}
				}
			}
		}
	}
}

// TestPVCodesKernel: pvCodes on byte codes gives the bits of pvF32 (one
// row) on the codes converted to float32, which TestPVKernel holds to
// float64, at head-dim widths that are and are not multiples of 64, with
// the accumulator's channels past cols untouched.
func TestPVCodesKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	ran := 0
	for _, k := range levelSets() {
		if k.pvCodes == nil {
			continue
		}
		ran++
		for _, cols := range []int{16, 32, 80, 96, 128, 192} {
			for _, n := range []int{0, 1, 7, 128} {
				ld := cols + 32
				codes := make([]uint8, max(n, 1)*ld)
				for i := range codes {
					codes[i] = uint8(r.IntN(256))
				}
				vf := make([]float32, len(codes))
				for i, c := range codes {
					vf[i] = float32(c)
				}
				acc, w := randF32(r, ld, 100), randF32(r, n+5, 0.01)
				got, want := append([]float32(nil), acc...), append([]float32(nil), acc...)
				k.pvCodes(got, w, codes, ld, n, cols)
				k.pvF32(want, ld, w, n+5, vf, ld, n, 1, cols)
				sameBits(t, fmt.Sprintf("%v pvCodes cols=%d n=%d", k, cols, n), got, want)
				if k.pvNib4 == nil || cols%32 != 0 {
					continue
				}
				// The same codes as int4 (low nibbles), packed two a byte
				// (rows of ld/2 bytes): the bits of pvCodes on them.
				packed := make([]byte, max(n, 1)*ld/2)
				for i := range codes {
					codes[i] &= 15
					packed[i/2] |= codes[i] << (4 * (i % 2))
				}
				nib, ref := append([]float32(nil), acc...), append([]float32(nil), acc...)
				k.pvNib4(nib, w, packed, ld/2, n, cols)
				k.pvCodes(ref, w, codes, ld, n, cols)
				sameBits(t, fmt.Sprintf("%v pvNib4 cols=%d n=%d", k, cols, n), nib, ref)
			}
		}
	}
	if ran == 0 && cpufeat.Detected().Max == cpufeat.AVX512 {
		t.Error("no AVX-512 kernel set has pvCodes")
	}
}

func TestPVKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range levelSets() {
		for _, cols := range []int{16, 32, 80, 128, 256} {
			for _, rows := range []int{1, 2, 3, 4} {
				for _, n := range []int{0, 1, 7, 130} {
					ld := cols + 16
					acc := randF32(r, rows*ld, 1)
					w, v := randF32(r, rows*(n+3), 1), randF32(r, n*ld, 2)
					got := append([]float32(nil), acc...)
					k.pvF32(got, ld, w, n+3, v, ld, n, rows, cols)
					if k.pvHalf != nil { // fp16 rows converted in registers: the bits of pvF32 on the converted rows
						h := make([]uint16, len(v))
						for i, x := range v {
							h[i] = half.FromFloat32(x)
						}
						hf := make([]float32, len(v))
						k.cvtHalf(hf[:len(v)/16*16], h[:len(v)/16*16])
						for i := len(v) / 16 * 16; i < len(v); i++ {
							hf[i] = half.ToFloat32(h[i])
						}
						g1, g2 := append([]float32(nil), acc...), append([]float32(nil), acc...)
						k.pvHalf(g1, ld, w, n+3, h, ld, n, rows, cols, bytesOf(make([]int8, 256)))
						k.pvF32(g2, ld, w, n+3, hf, ld, n, rows, cols)
						sameBits(t, fmt.Sprintf("%v pvHalf cols=%d rows=%d n=%d", k, cols, rows, n), g1, g2)
					}
					for i := range acc {
						row, c := i/ld, i%ld
						want, tol := float64(acc[i]), 0.0
						if c < cols {
							var s, mag float64
							for tk := 0; tk < n; tk++ {
								p := float64(w[row*(n+3)+tk]) * float64(v[tk*ld+c])
								s, mag = s+p, mag+math.Abs(p)
							}
							want += s
							tol = float64(n+2)*eps32*mag + eps32*math.Abs(want)
						}
						if g := got[i]; g != g || math.Abs(float64(g)-want) > tol {
							t.Fatalf("%v pvF32 cols=%d rows=%d n=%d: element %d got %g want %g (tol %.3g)", k, cols, rows, n, i, g, want, tol)
						}
					}
				}
			}
		}
	}
}

// TestExpSubSweep: every level's expSub on a dense sweep of [expMin, 0]
// (x - m with m = 0 and with m = 3, so the subtraction rounds too) against
// math.Exp of the float32 argument: relative error within expRelErr,
// exactly 0 below expMin, and the lane sums within the float32 sum's bound.
func TestExpSubSweep(t *testing.T) {
	const n = 1 << 16
	for _, k := range levelSets() {
		for _, m := range []float32{0, 3} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(expMin*float64(i)/(n-16)) + m // the last 16 below expMin
			}
			got := append([]float32(nil), x...)
			s := k.expSub(got, m)
			worst, want := checkExpSweep(t, fmt.Sprintf("%v expSub", k), x, got, m, expMin, expRelErr)
			t.Logf("%v m=%g: worst relative error %.3g (%.2f eps)", k, m, worst, worst/eps32)
			if math.Abs(float64(s)-want) > (expRelErr+float64(n)*eps32)*want {
				t.Fatalf("%v expSub sum %g, want %g", k, s, want)
			}
		}
	}
}

// checkExpSweep checks got[i] = exp(x[i] - m) as a sweep kernel computed it:
// within relErr of math.Exp of the float32 argument, exactly 0 where the
// argument is below lo. It returns the worst relative error and Σ exp.
func checkExpSweep(t *testing.T, what string, x, got []float32, m, lo float32, relErr float64) (worst, want float64) {
	t.Helper()
	for i := range x {
		a := x[i] - m
		e := math.Exp(float64(a))
		if a < lo {
			e = 0
		}
		want += e
		g := float64(got[i])
		if e == 0 {
			if g != 0 {
				t.Fatalf("%s: exp(%g) = %g, want 0", what, a, g)
			}
			continue
		}
		worst = max(worst, math.Abs(g-e)/e)
		if g != g || math.Abs(g-e) > relErr*e {
			t.Fatalf("%s: exp(%g) = %g, want %g (relative error %.3g > %.3g)", what, a, g, e, math.Abs(g-e)/e, relErr)
		}
	}
	return worst, want
}

// TestExp32: the float32 exp of the softmax against math.Exp: relative
// error within expRelErr on [expMin, 0], exactly 0 below and for -Inf.
func TestExp32(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		x := float32(expMin * float64(i) / 200000)
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	t.Logf("exp32: worst relative error %.3g (%.2f eps)", worst, worst/eps32)
	if worst > expRelErr {
		t.Fatalf("exp32 relative error %.3g > %.3g", worst, float64(expRelErr))
	}
	if exp32(float32(math.Inf(-1))) != 0 || exp32(-100) != 0 || exp32(0) != 1 {
		t.Fatal("exp32 edge cases")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, k := range levelSets() {
		for _, n := range []int{16, 64, 272} {
			x := randF32(r, n, 20)
			x[0], x[n-1] = float32(math.Inf(-1)), -200
			m := k.maxF32(x)
			if m != maxF32Go(x) {
				t.Fatalf("%v maxF32 = %g, want %g", k, m, maxF32Go(x))
			}
			got := append([]float32(nil), x...)
			s := k.expSub(got, m)
			var want float64
			for i := range x {
				e := math.Exp(float64(x[i] - m))
				if x[i]-m < expMin {
					e = 0
				}
				want += e
				if g := float64(got[i]); g != g || math.Abs(g-e) > expRelErr*e {
					t.Fatalf("%v expSub element %d: exp(%g) = %g, want %g", k, i, x[i]-m, g, e)
				}
			}
			if math.Abs(float64(s)-want) > (expRelErr+float64(n)*eps32)*want {
				t.Fatalf("%v expSub sum %g, want %g", k, s, want)
			}
			a, b := randF32(r, n, 1), randF32(r, n, 1)
			if d, tol := float64(k.dotF32(a, b)), dotTol(a, b); math.Abs(d-float64(dot(a, b))) > 2*tol {
				t.Fatalf("%v dotF32 = %g, want %g", k, d, dot(a, b))
			}
		}
	}
}

// TestFoldDequantKernels: query folding and quantization, pair splitting
// and V dequantization at every level against pure Go: the same bits
// except the bias (a sum whose FMA rounding may differ, within its bound).
func TestFoldDequantKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	g := &genericKernels
	for _, k := range levelSets() {
		for _, d := range []int{16, 64, 80, 96, 128, 192, 256} {
			q, s, z := randF32(r, d, 1), randF32(r, d, 0.1), randF32(r, d, 2)
			s[d/2] *= 40 // an outlier channel
			qs1, qs2 := nanSlice(d), nanSlice(d)
			qi1, qi2 := make([]int8, d), make([]int8, d)
			a1, b1 := k.foldQuery(qi1, qs1, q, s, z)
			a2, b2 := g.foldQuery(qi2, qs2, q, s, z)
			sameBits(t, fmt.Sprintf("%v foldQuery qs d=%d", k, d), qs1, qs2)
			if a1 != a2 || string(bytesOf(qi1)) != string(bytesOf(qi2)) {
				t.Fatalf("%v foldQuery d=%d: step %g vs %g, codes %v vs %v", k, d, a1, a2, qi1, qi2)
			}
			if tol := dotTol(q, z); math.Abs(float64(b1-b2)) > 2*tol {
				t.Fatalf("%v foldQuery d=%d: bias %g vs %g", k, d, b1, b2)
			}
			for c := range q { // the quantization's own bound
				if e := math.Abs(float64(a1)*float64(qi1[c]) - float64(qs1[c])); e > float64(a1)/2*(1+4*eps32) {
					t.Fatalf("%v foldQuery d=%d channel %d: error %g > a/2 = %g", k, d, c, e, a1/2)
				}
			}
			if a, _ := k.foldQuery(qi1, qs1, make([]float32, d), s, z); a != 0 || qi1[0] != 0 {
				t.Fatalf("%v foldQuery of a zero query: step %g", k, a)
			}
			if k.foldQuery4 != nil { // four rows (one of them zero): the bits of foldQuery per row
				q4 := randF32(r, 4*d, 1)
				clear(q4[2*d : 3*d])
				q4[3*d+d/4] *= 30
				qs4, qi4, a4, b4 := nanSlice(4*d), make([]int8, 4*d), nanSlice(4), nanSlice(4)
				k.foldQuery4(qi4, qs4, q4, s, z, a4, b4, nil, qNone)
				if d%zmmBytes == 0 { // the fold's broadcast: each layout's reference bcast of qi4, zero row included
					refs := map[qLayout]func(dst, q []int8){qU8: bcastQGo, qI4: bcastQ4Go, qI2: bcastQ2Go, qI4L: bcastQ4Go}
					for lay, bcast := range refs {
						want, got := make([]int8, 16*d), make([]int8, 16*d)
						for i := range got {
							got[i] = 0x55
						}
						bcast(want, qi4)
						qi5, qs5, a5, b5 := make([]int8, 4*d), nanSlice(4*d), nanSlice(4), nanSlice(4)
						k.foldQuery4(qi5, qs5, q4, s, z, a5, b5, got, lay)
						name := fmt.Sprintf("%v foldQuery4 d=%d layout %d", k, d, lay)
						if lay == qI2 { // bcastQ2 writes 64 bytes of each 256: the rest keeps its bytes
							for i := range want {
								if i%256 >= 64 {
									want[i] = 0x55
								}
							}
						}
						if lay == qI4L { // 16 bytes of each 64 of bcastQ4's: the rest keeps its bytes
							for i := range want {
								if i%64 >= 16 {
									want[i] = 0x55
								}
							}
						}
						if string(bytesOf(got)) != string(bytesOf(want)) || string(bytesOf(qi5)) != string(bytesOf(qi4)) {
							t.Fatalf("%s: broadcast codes differ from the reference bcast", name)
						}
						sameBits(t, name+" qs", qs5, qs4)
						sameBits(t, name+" steps and biases", append(a5, b5...), append(a4, b4...))
					}
				}
				if k.foldQuery4H != nil { // the pairs as stored: the bits of foldQuery4 on their floats, every layout
					pairs, sh, zh := make([]uint16, 2*d), make([]float32, d), make([]float32, d)
					for c := range d {
						pairs[2*c] = uint16(r.IntN(1<<10)) | uint16(8+r.IntN(8))<<10    // scale 2^-7..2^1
						pairs[2*c+1] = uint16(r.IntN(1<<11)) | uint16(12+r.IntN(6))<<10 // zero ±2^-3..2^3
						sh[c], zh[c] = fp16ToF32[pairs[2*c]], fp16ToF32[pairs[2*c+1]]
					}
					pairs[2*(d/3)] = 0x5a00 // an outlier channel's scale: 192
					sh[d/3] = fp16ToF32[pairs[2*(d/3)]]
					lays := []qLayout{qNone}
					if d%zmmBytes == 0 {
						lays = append(lays, qU8, qI4, qI2, qI4L)
					}
					for _, lay := range lays {
						var want, got []int8
						if lay != qNone {
							want, got = make([]int8, 16*d), make([]int8, 16*d)
							for i := range got {
								want[i], got[i] = 0x55, 0x55
							}
						}
						qiw, qsw, aw, bw := make([]int8, 4*d), nanSlice(4*d), nanSlice(4), nanSlice(4)
						qig, qsg, ag, bg := make([]int8, 4*d), nanSlice(4*d), nanSlice(4), nanSlice(4)
						k.foldQuery4(qiw, qsw, q4, sh, zh, aw, bw, want, lay)
						k.foldQuery4H(qig, qsg, q4, pairs, ag, bg, got, lay)
						name := fmt.Sprintf("%v foldQuery4H d=%d layout %d", k, d, lay)
						sameBits(t, name+" qs", qsg, qsw)
						sameBits(t, name+" steps and biases", append(ag, bg...), append(aw, bw...))
						if string(bytesOf(qig)) != string(bytesOf(qiw)) || string(bytesOf(got)) != string(bytesOf(want)) {
							t.Fatalf("%s: codes differ from foldQuery4's", name)
						}
					}
				}
				for row := 0; row < 4; row++ {
					qsr, qir := nanSlice(d), make([]int8, d)
					ar, br := k.foldQuery(qir, qsr, q4[row*d:(row+1)*d], s, z)
					name := fmt.Sprintf("%v foldQuery4 d=%d row %d", k, d, row)
					sameBits(t, name+" qs", qs4[row*d:(row+1)*d], qsr)
					sameBits(t, name+" step and bias", []float32{a4[row], b4[row]}, []float32{ar, br})
					if string(bytesOf(qi4[row*d:(row+1)*d])) != string(bytesOf(qir)) {
						t.Fatalf("%s: codes %v, want %v", name, qi4[row*d:(row+1)*d], qir)
					}
				}
			}
			qs1 = randF32(r, d, 3) // (the zero query above overwrote qs1)
			qs1[d/3] *= 20
			hi1, lo1, hi2, lo2 := make([]int8, d), make([]int8, d), make([]int8, d), make([]int8, d)
			if a1, a2 := k.splitQuery(hi1, lo1, qs1), splitQuery(hi2, lo2, qs1); a1 != a2 ||
				string(bytesOf(hi1)) != string(bytesOf(hi2)) || string(bytesOf(lo1)) != string(bytesOf(lo2)) {
				t.Fatalf("%v splitQuery d=%d differs from pure Go", k, d)
			}
			a16 := float64(k.splitQuery(hi1, lo1, qs1))
			for c := range q { // within half a step of 15 bits, halves in range
				v := 128*float64(hi1[c]) + float64(lo1[c])
				if e := math.Abs(a16*v - float64(qs1[c])); lo1[c] < -64 || lo1[c] > 63 || e > a16/2*(1+4*eps32)+eps32*math.Abs(float64(qs1[c])) {
					t.Fatalf("%v splitQuery d=%d channel %d: code %v (lo %d), error %g", k, d, c, v, lo1[c], e)
				}
			}
			src := randF32(r, 2*d, 1)
			a, b, wa, wb := nanSlice(d), nanSlice(d), nanSlice(d), nanSlice(d)
			if d%16 == 0 && (2*d)%32 == 0 {
				k.deinterleave(a, b, src)
				g.deinterleave(wa, wb, src)
				sameBits(t, fmt.Sprintf("%v deinterleave d=%d", k, d), append(a, b...), append(wa, wb...))
			}
			for _, grp := range []int{16, 32, d} {
				if d%grp != 0 {
					continue
				}
				n, ldz := 5, 7
				codes := randBytes(r, n*d)
				p := randF32(r, 2*n*(d/grp), 1)
				dst1, dst2 := nanSlice(n*d), nanSlice(n*d)
				z1, z2 := nanSlice(ldz*(d/grp)), nanSlice(ldz*(d/grp))
				k.dequantV(dst1, z1, ldz, codes, p, n, d, grp)
				g.dequantV(dst2, z2, ldz, codes, p, n, d, grp)
				sameBits(t, fmt.Sprintf("%v dequantV d=%d g=%d", k, d, grp), dst1, dst2)
				for j := 0; j < d/grp; j++ {
					sameBits(t, fmt.Sprintf("%v dequantV zeros d=%d g=%d", k, d, grp), z1[j*ldz:j*ldz+n], z2[j*ldz:j*ldz+n])
				}
			}
		}
	}
}

func bytesOf(x []int8) []byte {
	b := make([]byte, len(x))
	for i, v := range x {
		b[i] = byte(v)
	}
	return b
}

// TestForceSelectsKernels: Decode dispatches on cpufeat.Active at each
// call, so cpufeat.Force picks the kernels (and the purego tag or a CPU
// without AVX2 leaves only the pure-Go ones), and every forced level
// agrees with the reference on a small GQA case.
func TestForceSelectsKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	f := kv.MustResolve("int4", sh.D)
	caches, _, _ := buildBatch(t, r, f, sh, []int{300})
	p := Params{Format: f, Shape: sh, Tq: 1}
	q := randQ(r, sh.Hq*sh.D)
	want := nanSlice(len(q))
	st, err := Reference(want, q, seqsOf(caches), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range cpufeat.Levels() {
		got, restore := cpufeat.Force(l)
		k := activeKernels()
		out := nanSlice(len(q))
		err := Decode(out, q, seqsOf(caches), p)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		d := cpufeat.Detected()
		wantLevel := got
		if !asmKernels {
			wantLevel = cpufeat.Generic
		}
		intDot := got == cpufeat.AVX512 && d.VNNI || got == cpufeat.NEON && d.DotProd && asmKernels
		if k.level != wantLevel || k.vnni != intDot || k.vbmi != (got == cpufeat.AVX512 && d.VNNI && d.VBMI) {
			t.Fatalf("Force(%v): kernels of level %v (vnni %v, vbmi %v)", l, k.level, k.vnni, k.vbmi)
		}
		compareDecode(t, "forced "+l.String(), p, q, out, want, st, queryQuantTol(k, p, seqsOf(caches), q), valueQuantTol(k, p, seqsOf(caches), st))
	}
}

// TestQuantWRows: the weights' quantization for several rows and groups at
// every level against pure Go: the same steps and codes, the zeros' sums
// within their float32 bound.
func TestQuantWRows(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	g := &genericKernels
	for _, k := range levelSets() {
		for _, groups := range []int{1, 2, 4} {
			n, ld, rows := 48, 64, 3
			p, s, z := randF32(r, rows*ld, 1), randF32(r, groups*ld, 1), randF32(r, groups*ld, 1)
			for i := range p {
				p[i] = abs32(p[i])
			}
			for i := range s {
				s[i] = abs32(s[i])
			}
			ldw := groups * ld
			wq1, wq2 := make([]int16, rows*ldw), make([]int16, rows*ldw)
			d1, d2, z1, z2 := nanSlice(rows), nanSlice(rows), nanSlice(rows*groups), nanSlice(rows*groups)
			k.quantWRows(wq1, ldw, ld, p, ld, s, z, ld, n, groups, rows, d1, z1)
			g.quantWRows(wq2, ldw, ld, p, ld, s, z, ld, n, groups, rows, d2, z2)
			sameBits(t, fmt.Sprintf("%v quantWRows steps groups=%d", k, groups), d1, d2)
			sameWeights(t, fmt.Sprintf("%v quantWRows groups=%d", k, groups), wq1, wq2)
			for i := range z1 {
				row, j := i/groups, i%groups
				if tol := dotTol(p[row*ld:row*ld+n], z[j*ld:j*ld+n]); math.Abs(float64(z1[i]-z2[i])) > 2*tol {
					t.Fatalf("%v quantWRows groups=%d: zero sum %d = %g, want %g", k, groups, i, z1[i], z2[i])
				}
			}
		}
	}
}

// TestPVI4: the integer PV on packed int4 rows gives the bits of pvS16 on
// the unpacked codes (the same int32 sums and epilogue), for every group
// size it takes.
func TestPVI4(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, k := range levelSets() {
		if k.pvI4 == nil {
			continue
		}
		for _, d := range []int{64, 128, 192, 256} { // 192: three groups of 64 (128 does not divide it)
			for gshift := 6; 1<<gshift <= d && d%(1<<gshift) == 0; gshift++ {
				n, ldq := 96, 112
				groups := d >> gshift
				ldw := groups * ldq
				wq := make([]int16, 4*ldw)
				for i := range wq {
					wq[i] = int16(r.IntN(65535) - 32767)
				}
				packed := randBytes(r, n*d/2)
				codes := make([]uint8, n*d)
				unpack4Go(codes, packed)
				delta := randF32(r, 4, 1e-3)
				a1 := randF32(r, 4*d, 1)
				a2 := append([]float32(nil), a1...)
				k.pvI4(a1, d, delta, wq, ldw, ldq, packed, n, d, gshift, codes[:640])
				k.pvS16(a2, d, delta, wq, ldw, ldq, codes, n, d, gshift, codes[:640])
				sameBits(t, fmt.Sprintf("%v pvI4 d=%d g=%d", k, d, 1<<gshift), a1, a2)
				if k.pvI4x2 != nil { // two rows: rows 0 and 1 of the four-row sums, rows 2 and 3 untouched
					a3 := append([]float32(nil), a1...)
					k.pvI4x2(a3, d, delta, wq, ldw, ldq, packed, n, d, gshift, codes[:640])
					k.pvS16(a2, d, delta, wq, ldw, ldq, codes, n, d, gshift, nil)
					sameBits(t, fmt.Sprintf("%v pvI4x2 d=%d g=%d", k, d, 1<<gshift), a3[:2*d], a2[:2*d])
					sameBits(t, fmt.Sprintf("%v pvI4x2 d=%d g=%d rows 2-3", k, d, 1<<gshift), a3[2*d:], a1[2*d:])
				}
			}
		}
	}
}

// TestQuantWRowsU8: the u8 weights' quantization for several rows and
// groups against pure Go: the same steps and codes, the zeros' sums (with
// the residues times mid) within their float32 bound.
func TestQuantWRowsU8(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	g := &genericU8Kernels
	for _, k := range levelSets() {
		if k.quantWRowsU8 == nil {
			continue
		}
		for _, groups := range []int{1, 2, 4} {
			n, ld, rows, mid := 48, 64, 3, float32(7.5)
			p, s, z := randF32(r, rows*ld, 1), randF32(r, groups*ld, 1), randF32(r, groups*ld, 1)
			for i := range p {
				p[i] = abs32(p[i])
			}
			for i := range s {
				s[i] = abs32(s[i])
			}
			clear(p[ld : 2*ld]) // a row of zero weights
			ldw := groups * ld
			wq1, wq2 := make([]uint8, rows*ldw), make([]uint8, rows*ldw)
			d1, d2, z1, z2 := nanSlice(rows), nanSlice(rows), nanSlice(rows*groups), nanSlice(rows*groups)
			k.quantWRowsU8(wq1, ldw, ld, p, ld, s, z, ld, n, groups, rows, mid, d1, z1)
			g.quantWRowsU8(wq2, ldw, ld, p, ld, s, z, ld, n, groups, rows, mid, d2, z2)
			sameBits(t, fmt.Sprintf("%v quantWRowsU8 steps groups=%d", k, groups), d1, d2)
			sameWeights(t, fmt.Sprintf("%v quantWRowsU8 groups=%d", k, groups), wq1, wq2)
			for i := range z1 {
				row, j := i/groups, i%groups
				// Exact: Σ p·z + mid·Σ (w - Δ·wq) in float64 from the codes.
				var want float64
				for tk := 0; tk < n; tk++ {
					w := float64(p[row*ld+tk]) * float64(s[j*ld+tk])
					want += float64(p[row*ld+tk])*float64(z[j*ld+tk]) + float64(mid)*(w-float64(d2[row])*float64(wq2[row*ldw+j*ld+tk]))
				}
				tol := dotTol(p[row*ld:row*ld+n], z[j*ld:j*ld+n]) + float64(mid)*float64(n+4)*eps32*(dotTol(p[row*ld:row*ld+n], s[j*ld:j*ld+n])+float64(n)*float64(d2[row]))
				if math.Abs(float64(z1[i])-want) > tol || math.Abs(float64(z2[i])-want) > tol {
					t.Fatalf("%v quantWRowsU8 groups=%d: zero sum %d = %g (Go %g), want %g (tol %.3g)", k, groups, i, z1[i], z2[i], want, tol)
				}
			}
			for row := 0; row < rows; row++ { // every weight within half a step of w/Δ
				for j := 0; j < groups; j++ {
					for tk := 0; tk < n; tk++ {
						w := float64(p[row*ld+tk]) * float64(s[j*ld+tk])
						q := float64(wq2[row*ldw+j*ld+tk])
						if dl := float64(d2[row]); math.Abs(w-dl*q) > dl*(0.5+1e-5) || (dl == 0 && q != 0) {
							t.Fatalf("quantWRowsU8Go: row %d group %d token %d: w %g, step %g, code %g", row, j, tk, w, dl, q)
						}
					}
				}
			}
		}
	}
}

// TestScaleF32: every level's in-place scale gives the Go loop's bits at
// lengths with and without a tail, and leaves the values past x alone.
// TestMax4 checks the four-row max against maxF32 per row (the same bits)
// and the Go reference, with -Inf tokens and a row all -Inf.
func TestMax4(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	ninf := float32(math.Inf(-1))
	for _, k := range levelSets() {
		if k.max4 == nil {
			continue
		}
		for _, n := range []int{16, 48, 256} {
			ld := n + 32
			x := randF32(r, 4*ld, 5)
			for i := n; i < ld; i++ { // past n: never read
				x[i] = 1e30
			}
			for c := range x[2*ld : 2*ld+n] { // row 2 masked
				x[2*ld+c] = ninf
			}
			x[3*ld+n-1] = 40 // the last token the largest
			got := nanSlice(4)
			k.max4(got, x, ld, n)
			for row := range 4 {
				rowx := x[row*ld : row*ld+n]
				name := fmt.Sprintf("%v max4 n=%d row %d", k, n, row)
				sameBits(t, name, got[row:row+1], []float32{k.maxF32(rowx)})
				sameBits(t, name+" (Go)", got[row:row+1], []float32{maxF32Go(rowx)})
			}
		}
	}
}

func TestScaleF32(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	for _, k := range levelSets() {
		for _, n := range []int{1, 15, 16, 17, 31, 80, 128, 261} {
			x := randF32(r, n+3, 2)
			want := append([]float32(nil), x...)
			a := float32(r.Float64())
			k.scaleF32(x[:n], a)
			scaleF32Go(want[:n], a)
			sameBits(t, fmt.Sprintf("%v scaleF32 n=%d", k, n), x, want)
		}
	}
}

// u8Sets returns the kernel sets that have softmaxU8: the pure-Go one and
// this machine's.
func u8Sets() []*kernels {
	out := []*kernels{&genericU8Kernels}
	for _, k := range levelSets() {
		if k.softmaxU8 != nil {
			out = append(out, k)
		}
	}
	return out
}

// TestExpU8Sweep: softmaxU8's exp on a dense sweep of [expU8Min, 0] (x - m
// with m = 0 and m = 3) against math.Exp of the float32 argument: relative
// error within expU8RelErr, exactly 0 below expU8Min, and Σ p within the
// float32 sum's bound (one group and unit scales: x ends as w = p·1 = p);
// with zero scales, w, the step and the zeros' sum 0.
func TestExpU8Sweep(t *testing.T) {
	n := 1 << 16
	if testing.Short() {
		n = 1 << 12
	}
	for _, k := range u8Sets() {
		for _, m := range []float32{0, 3} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(expU8Min*float64(i)/float64(n-16)) + m // the last 16 below expU8Min
			}
			got := append([]float32(nil), x...)
			wq, s, z := make([]uint8, n), make([]float32, n), make([]float32, n)
			for i := range s {
				s[i] = 1
			}
			delta, zsum, lsum, sw := nanSlice(1), nanSlice(1), nanSlice(1), nanSlice(1)
			k.softmaxU8(wq, n, n, got, n, []float32{m}, s, z, n, n, 1, 1, 1.5, delta, zsum, lsum, sw)
			worst, want := checkExpSweep(t, fmt.Sprintf("%v softmaxU8", k), x, got, m, expU8Min, expU8RelErr)
			t.Logf("%v m=%g: worst relative error %.3g", k, m, worst)
			if math.Abs(float64(lsum[0])-want) > (expU8RelErr+float64(n/16+4)*eps32)*want {
				t.Fatalf("%v softmaxU8 sum %g, want %g", k, lsum[0], want)
			}
			clear(s)
			copy(got, x)
			k.softmaxU8(wq, n, n, got, n, []float32{m}, s, z, n, n, 1, 1, 1.5, delta, zsum, lsum, sw)
			if delta[0] != 0 || zsum[0] != 0 {
				t.Fatalf("%v softmaxU8 with zero scales: step %g, zero sum %g, want 0", k, delta[0], zsum[0])
			}
			for i, w := range got {
				if w != 0 {
					t.Fatalf("%v softmaxU8 with zero scales: w[%d] = %g, want 0", k, i, w)
				}
			}
		}
	}
}

// TestSoftmaxU8: the fused exp and u8 weights for several rows and groups
// at every level that has them: each p within expU8RelErr of e^(x-m) (0
// for -Inf, for a row whose m is +Inf, and past expU8Min), Σ p within its
// float32 bound, and, from the kernel's own p, the steps and codes of
// quantU8Rows (the Go steps) bit for bit, every weight within half a step,
// and the zeros' sums with mid·(Σ w - Δ·Σ wq) within their float32 bound.
// With one group x ends as w = p·s: p is then the kernel's x with unit
// scales (the same exp and Σ p), and w its product by s bit for bit.
func TestSoftmaxU8(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, k := range u8Sets() {
		for _, groups := range []int{1, 2, 4} {
			for _, sh := range [][3]int{{48, 64, 1}, {48, 64, 3}, {48, 64, 5}, {112, 128, 3}, {256, 256, 4}, {64, 64, 16}, {32, 48, 17}} { // n, ld, rows: one vector to four rows a loop, 64 weights a step and a tail, the steps of 16 rows in one vector and of 17 row by row
				n, ld, rows, mid := sh[0], sh[1], sh[2], float32(7.5)
				x := randF32(r, rows*ld, 4)
				m := make([]float32, rows)
				for row := range m {
					m[row] = maxF32Go(x[row*ld : row*ld+n])
					x[row*ld+5] = float32(math.Inf(-1))
					x[row*ld+9] = m[row] - 90 // below expU8Min
				}
				if rows > 1 {
					m[1] = float32(math.Inf(1)) // a row with no visible token yet
				}
				s, z := randF32(r, groups*ld, 1), randF32(r, groups*ld, 1)
				for i := range s {
					s[i] = abs32(s[i])
				}
				ldw := groups * ld
				wq := make([]uint8, rows*ldw)
				p := append([]float32(nil), x...)
				delta, zsum, lsum, sw := nanSlice(rows), nanSlice(rows*groups), nanSlice(rows), nanSlice(rows*groups)
				k.softmaxU8(wq, ldw, ld, p, ld, m, s, z, ld, n, groups, rows, mid, delta, zsum, lsum, sw)
				name := fmt.Sprintf("%v softmaxU8 groups=%d rows=%d n=%d", k, groups, rows, n)
				if groups == 1 { // p holds w: the kernel's p from unit scales (v76)
					w := p
					p = append([]float32(nil), x...)
					ones := make([]float32, ld)
					for i := range ones {
						ones[i] = 1
					}
					l1 := nanSlice(rows)
					k.softmaxU8(make([]uint8, rows*ldw), ldw, ld, p, ld, m, ones, z, ld, n, 1, rows, mid, nanSlice(rows), nanSlice(rows), l1, nanSlice(rows))
					sameBits(t, name+" Σ p with unit scales", l1, lsum)
					for row := 0; row < rows; row++ {
						for tk := 0; tk < n; tk++ {
							if got, want := w[row*ld+tk], p[row*ld+tk]*s[tk]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("%s: row %d token %d: w = %g, want p·s = %g", name, row, tk, got, want)
							}
						}
					}
				}
				for row := 0; row < rows; row++ {
					var sum float64
					for tk := 0; tk < n; tk++ {
						a := x[row*ld+tk] - m[row]
						e := math.Exp(float64(a))
						if !(a >= expU8Min) {
							e = 0
						}
						g := float64(p[row*ld+tk])
						if g != g || math.Abs(g-e) > expU8RelErr*e {
							t.Fatalf("%s: row %d token %d: exp(%g) = %g, want %g", name, row, tk, a, g, e)
						}
						sum += g
					}
					if math.Abs(float64(lsum[row])-sum) > float64(n/16+4)*eps32*sum {
						t.Fatalf("%s: row %d: Σ p = %g, want %g", name, row, lsum[row], sum)
					}
				}
				wq2 := make([]uint8, rows*ldw)
				d2, z2, sw2 := nanSlice(rows), nanSlice(rows*groups), nanSlice(rows*groups)
				quantU8Rows(wq2, ldw, ld, p, ld, s, z, ld, n, groups, rows, mid, d2, z2, sw2)
				sameBits(t, name+" steps", delta, d2)
				sameWeights(t, name, wq, wq2)
				for i := range zsum {
					row, j := i/groups, i%groups
					pr, dl := p[row*ld:row*ld+n], float64(delta[row])
					var want, sumW float64
					for tk := 0; tk < n; tk++ {
						w := float64(pr[tk] * s[j*ld+tk]) // rounded as the kernels do
						q := float64(wq[row*ldw+j*ld+tk])
						if math.Abs(w-dl*q) > dl*(0.5+1e-5) || (dl == 0 && q != 0) {
							t.Fatalf("%s: row %d group %d token %d: w %g, step %g, code %g", name, row, j, tk, w, dl, q)
						}
						want += float64(pr[tk])*float64(z[j*ld+tk]) + float64(mid)*(w-dl*q)
						sumW += w
					}
					tol := dotTol(pr, z[j*ld:j*ld+n]) + float64(mid)*eps32*(float64(n/16+8)*sumW+float64(n)*dl)
					if math.Abs(float64(zsum[i])-want) > tol || math.Abs(float64(z2[i])-want) > tol {
						t.Fatalf("%s: zero sum %d = %g (Go %g), want %g (tol %.3g)", name, i, zsum[i], z2[i], want, tol)
					}
				}
			}
		}
	}
}

// TestUnlaneU8: int4 pvU8's lane order (v66): u8LaneChannel is a
// permutation of each 64 channels, laneU8Go and unlaneU8Go are inverses,
// and every level's unlaneU8 moves the floats as unlaneU8Go does (NaN
// payloads included), for 0 to 4 chunks.
func TestUnlaneU8(t *testing.T) {
	seen := make(map[int]bool)
	for p := 0; p < u8LaneChunk; p++ {
		c := u8LaneChannel(p)
		if c < 0 || c >= u8LaneChunk || seen[c] {
			t.Fatalf("u8LaneChannel(%d) = %d: not a permutation", p, c)
		}
		seen[c] = true
	}
	r := rand.New(rand.NewPCG(35, 36))
	for n := 0; n <= 4*u8LaneChunk; n += u8LaneChunk {
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(r.Uint32())
		}
		want := append([]float32(nil), x...)
		laneU8Go(want)
		for p := 0; p < n; p++ {
			if math.Float32bits(want[p]) != math.Float32bits(x[p/u8LaneChunk*u8LaneChunk+u8LaneChannel(p%u8LaneChunk)]) {
				t.Fatalf("n=%d: laneU8Go position %d does not hold its channel", n, p)
			}
		}
		back := append([]float32(nil), want...)
		unlaneU8Go(back)
		sameBits(t, fmt.Sprintf("unlaneU8Go(laneU8Go) n=%d", n), back, x)
		for _, k := range levelSets() {
			if k.unlaneU8 == nil {
				continue
			}
			got := append([]float32(nil), want...)
			k.unlaneU8(got)
			sameBits(t, fmt.Sprintf("%v unlaneU8 n=%d", k, n), got, x)
		}
	}
}

// TestAccOrder: a state's accumulators through the worker's order changes
// (v66): from channel order to the lane order and back, and from zeros,
// keep their bits at every level with unlaneU8; the lane order holds
// laneU8Go's positions.
func TestAccOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 38))
	for _, k := range levelSets() {
		if k.unlaneU8 == nil {
			continue
		}
		w := &worker{k: k}
		const rows, d = 4, 128
		x := randF32(r, rows*d, 1)
		st := state{acc: append([]float32(nil), x...), d: d, order: accChannels}
		w.laneOrder(&st)
		want := append([]float32(nil), x...)
		laneU8Go(want)
		sameBits(t, fmt.Sprintf("%v laneOrder", k), st.acc, want)
		w.channelOrder(&st)
		sameBits(t, fmt.Sprintf("%v channelOrder", k), st.acc, x)
		w.channelOrder(&st) // already in channel order: nothing moves
		sameBits(t, fmt.Sprintf("%v channelOrder twice", k), st.acc, x)
		clear(st.acc)
		st.order = accZero
		w.laneOrder(&st) // zeros: nothing to move
		if st.order != accLanes {
			t.Fatalf("%v: laneOrder left order %d", k, st.order)
		}
	}
}

// TestPVU8: the u8-weight PV on packed int4 and int2 rows at every level
// that has it gives the bits of the pure-Go version (steps of powers of two,
// so that the fused and unfused epilogues round alike), for every group
// size, two, three and four rows; rows past the kernel's are untouched.
func TestPVU8(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	ran := 0
	for _, k := range levelSets() {
		if k.pvU8 == nil {
			continue
		}
		ran++
		for _, bits := range []int{4, 2} {
			for _, d := range []int{64, 128, 192, 256} { // 192: groups of 64 only
				for gshift := 6; 1<<gshift <= d && d%(1<<gshift) == 0; gshift++ {
					for _, rows := range []int{2, 3, 4} {
						for _, n := range []int{100, PVMaxTokens} {
							ldq := n + 12
							groups := d >> gshift
							ldw := groups * ldq
							wq := randBytes(r, 4*ldw)
							packed := randBytes(r, n*d*bits/8)
							if n == PVMaxTokens { // the largest sums: every code and weight at its maximum
								for i := range wq {
									wq[i] = 255
								}
								for i := range packed {
									packed[i] = 0xff
								}
							}
							delta := make([]float32, 4)
							for i := range delta {
								delta[i] = float32(math.Ldexp(1, -r.IntN(20)))
							}
							a1 := randF32(r, 4*d, 1)
							a2 := append([]float32(nil), a1...)
							a0 := append([]float32(nil), a1...)
							lanes := bits == 4 && k.unlaneU8 != nil // the kernel's accumulators in its lane order (v66)
							if lanes {
								laneU8Go(a1)
							}
							k.pvU8(a1, d, delta, wq, ldw, ldq, packed, n, d, gshift, bits, rows, packed[:640])
							if lanes {
								k.unlaneU8(a1)
							}
							pvU8Go(a2, d, delta, wq, ldw, ldq, packed, n, d, gshift, bits, rows, nil)
							name := fmt.Sprintf("%v pvU8 int%d d=%d g=%d rows=%d n=%d", k, bits, d, 1<<gshift, rows, n)
							sameBits(t, name, a1, a2)
							sameBits(t, name+" untouched rows", a1[rows*d:], a0[rows*d:])
						}
					}
				}
			}
		}
	}
	if f := cpufeat.Detected(); f.Max == cpufeat.AVX512 && f.VNNI && f.VBMI && ran == 0 {
		t.Fatal("this CPU has AVX-512 VNNI and VBMI, but no kernel set has pvU8")
	}
}

// sameWeights fails t unless the quantized weights got and want are equal
// element for element.
func sameWeights[T int16 | uint8](t *testing.T, name string, got, want []T) {
	t.Helper()
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: weight %d = %d, want %d", name, i, got[i], want[i])
		}
	}
}

// TestFoldPairsDecode: the decode with the key groups' pairs folded as
// stored (foldQuery4H) gives the bits of the decode through cvtPairs and
// foldQuery4, for the KC formats whose rows fold four at a time.
func TestFoldPairsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 26))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	for _, k := range levelSets() {
		if k.foldQuery4H == nil {
			continue
		}
		without := *k
		without.foldQuery4H = nil
		for _, spec := range []string{"int2", "int4", "int4:kc32:v32", "k4v2"} {
			f, err := kv.MustParseSpec(spec).Resolve(sh.D)
			if err != nil {
				t.Fatal(err)
			}
			caches, _, _ := buildBatch(t, r, f, sh, []int{700, 1030})
			seqs := seqsOf(caches)
			p := Params{Format: f, Shape: sh, Tq: 1}
			q := randF32(r, len(seqs)*sh.Hq*sh.D, 1)
			sameDecodeBits(t, fmt.Sprintf("%v %s decode with foldQuery4H", k, spec), k, &without, q, seqs, p)
		}
	}
}

// rowMaxima returns the maximum of the first n values of each of rows rows
// of x (row stride ld).
func rowMaxima(x []float32, rows, ld, n int) []float32 {
	m := make([]float32, rows)
	for row := range m {
		m[row] = maxF32Go(x[row*ld : row*ld+n])
	}
	return m
}

// softmaxOuts returns a softmaxU8 call's four per-row outputs (steps, zero
// sums, Σ p, Σ w), NaN-filled so that a row the kernel skips shows.
func softmaxOuts(rows int) [4][]float32 {
	return [4][]float32{nanSlice(rows), nanSlice(rows), nanSlice(rows), nanSlice(rows)}
}

// sameSoftmaxU8 checks that two softmaxU8 calls agree bit for bit: x
// after the call, the weights' codes and the four per-row outputs.
func sameSoftmaxU8(t *testing.T, name string, got, want []float32, wq, wq2 []uint8, g, w [4][]float32) {
	t.Helper()
	sameBits(t, name+" x", got, want)
	sameWeights(t, name, wq, wq2)
	for i, what := range []string{"steps", "zero sums", "Σ p", "Σ w"} {
		sameBits(t, name+" "+what, g[i], w[i])
	}
}

// TestSoftmaxU8H: softmaxU8H on one group's fp16 (scale, zero) pairs as
// stored gives the bits of softmaxU8 on the pairs' floats (x, codes,
// steps and sums), for one to five rows and several lengths (v79).
func TestSoftmaxU8H(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 79))
	for _, k := range u8Sets() {
		if k.softmaxU8H == nil {
			continue
		}
		for _, sh := range [][3]int{{16, 16, 1}, {48, 64, 2}, {112, 128, 3}, {128, 128, 4}, {256, 256, 4}, {240, 256, 5}} { // n, ld, rows
			n, ld, rows, mid := sh[0], sh[1], sh[2], float32(1.5)
			x := randF32(r, rows*ld, 4)
			m := rowMaxima(x, rows, ld, n)
			pairs := make([]uint16, 2*n)
			s, z := make([]float32, ld), make([]float32, ld)
			for tk := 0; tk < n; tk++ {
				pairs[2*tk] = half.FromFloat32(float32(r.Float64()) * 0.1)
				pairs[2*tk+1] = half.FromFloat32(float32(r.NormFloat64()))
				s[tk], z[tk] = fp16ToF32[pairs[2*tk]], fp16ToF32[pairs[2*tk+1]]
			}
			got, want := append([]float32(nil), x...), append([]float32(nil), x...)
			wq, wq2 := make([]uint8, rows*ld), make([]uint8, rows*ld)
			g, w := softmaxOuts(rows), softmaxOuts(rows)
			k.softmaxU8H(wq, ld, got, ld, m, pairs, nil, n, rows, mid, g[0], g[1], g[2], g[3])
			k.softmaxU8(wq2, ld, ld, want, ld, m, s, z, ld, n, 1, rows, mid, w[0], w[1], w[2], w[3])
			sameSoftmaxU8(t, fmt.Sprintf("%v softmaxU8H n=%d rows=%d", k, n, rows), got, want, wq, wq2, g, w)
		}
	}
}

// TestSoftmaxU8HDecode: the decode with softmaxU8H (V's pairs converted
// in the fused softmax, v79) gives the bits of the decode with cvtPairs
// and softmaxU8, one value group or several, Tq 1 and 3.
func TestSoftmaxU8HDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(38, 79))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	for _, k := range append(levelSets(), &genericU8Kernels) {
		if k.softmaxU8H == nil {
			continue
		}
		without := *k
		without.softmaxU8H = nil
		for _, spec := range []string{"int2", "int4", "k4v2", "int4:kc32:v32"} {
			f, err := kv.MustParseSpec(spec).Resolve(sh.D)
			if err != nil {
				t.Fatal(err)
			}
			caches, _, _ := buildBatch(t, r, f, sh, []int{600, 1030})
			seqs := seqsOf(caches)
			for _, tq := range []int{1, 3} {
				p := Params{Format: f, Shape: sh, Tq: tq}
				q := randF32(r, len(seqs)*tq*sh.Hq*sh.D, 1)
				sameDecodeBits(t, fmt.Sprintf("%v %s Tq %d decode with softmaxU8H", k, spec, tq), k, &without, q, seqs, p)
			}
		}
	}
}

// TestSoftmaxU8HPairs: softmaxU8H with a second block's pairs (rows
// [rows/2, rows) on pairs2, v80) gives the bits of two calls, one a block.
func TestSoftmaxU8HPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 80))
	for _, k := range u8Sets() {
		if k.softmaxU8H == nil {
			continue
		}
		for _, sh := range [][3]int{{16, 16, 4}, {128, 128, 8}, {112, 128, 8}, {256, 256, 8}, {128, 128, 16}} { // n, ld, rows
			n, ld, rows, mid := sh[0], sh[1], sh[2], float32(7.5)
			h := rows / 2
			x := randF32(r, rows*ld, 4)
			m := rowMaxima(x, rows, ld, n)
			m[1] = float32(math.Inf(1)) // a row with no visible token: every exp 0
			pairs := [2][]uint16{make([]uint16, 2*n), make([]uint16, 2*n)}
			for _, p := range pairs {
				for tk := 0; tk < n; tk++ {
					p[2*tk] = half.FromFloat32(float32(r.Float64()) * 0.1)
					p[2*tk+1] = half.FromFloat32(float32(r.NormFloat64()))
				}
			}
			got, want := append([]float32(nil), x...), append([]float32(nil), x...)
			wq, wq2 := make([]uint8, rows*ld), make([]uint8, rows*ld)
			g, w := softmaxOuts(rows), softmaxOuts(rows)
			k.softmaxU8H(wq, ld, got, ld, m, pairs[0], pairs[1], n, rows, mid, g[0], g[1], g[2], g[3])
			k.softmaxU8H(wq2, ld, want, ld, m, pairs[0], nil, n, h, mid, w[0], w[1], w[2], w[3])
			k.softmaxU8H(wq2[h*ld:], ld, want[h*ld:], ld, m[h:], pairs[1], nil, n, h, mid, w[0][h:], w[1][h:], w[2][h:], w[3][h:])
			sameSoftmaxU8(t, fmt.Sprintf("%v softmaxU8H pairs n=%d rows=%d", k, n, rows), got, want, wq, wq2, g, w)
		}
	}
}

// TestTwoBlocksDecode: the decode with the pair path (two blocks' rows in
// one softmaxU8H call, v80) gives the bits of the one-block loop: int4,
// k4v2 and int2 at res128 (one value group: 4- and 2-bit values), the
// formats that do not take it (int2's 256-token blocks, v32), Tq 1 to 3, a
// group of 2 (R not a multiple of 4), sliding windows (whole blocks masked
// before the window, the running max from -Inf in a pair's second block).
func TestTwoBlocksDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 80))
	for _, k := range append(levelSets(), &genericU8Kernels) {
		if !k.twoBlocks {
			continue
		}
		without := *k
		without.twoBlocks = false
		// Groups 4 and 2, and the other groups checkpoints have (1, 3, 7,
		// 8: R = group·Tq a multiple of 4 or not) and D = 96 at the padded
		// width (v82).
		shapes := []Shape{{Hq: 8, Hkv: 2, D: 128}, {Hq: 4, Hkv: 2, D: 128}, {Hq: 2, Hkv: 2, D: 128}, {Hq: 6, Hkv: 2, D: 128},
			{Hq: 14, Hkv: 2, D: 128}, {Hq: 8, Hkv: 1, D: 128}, {Hq: 8, Hkv: 2, D: 96}}
		specs := []string{"int4", "int2", "k4v2", "int2:kc128:v128:res128", "int4:kc32:v32"}
		if raceEnabled { // the pair path and a format gated off it, at one shape
			shapes, specs = shapes[:1], specs[:2]
		}
		for _, sh := range shapes {
			for _, spec := range specs {
				f, err := kv.MustParseSpec(spec).Resolve(sh.D)
				if err != nil {
					t.Fatal(err)
				}
				caches, _, _ := buildBatch(t, r, f, sh, []int{600, 1030, 1500})
				seqs := seqsOf(caches)
				for _, c := range [][2]int{{1, 0}, {3, 0}, {1, 300}, {2, 700}} { // Tq, window
					p := Params{Format: f, Shape: sh, Tq: c[0], Window: c[1]}
					q := randF32(r, len(seqs)*c[0]*sh.Hq*sh.D, 1)
					sameDecodeBits(t, fmt.Sprintf("%v %s %v Tq %d window %d decode with two blocks a softmaxU8H call", k, spec, sh, c[0], c[1]), k, &without, q, seqs, p)
				}
			}
		}
	}
}

// TestThreeRowPVDecode: at R % 4 == 3 (groups 3 and 7, Tq 1) the decode's
// last three rows run pvU8 with rows 3 (v86) and scoresI4x3 or scoresI2x3
// (v87), and its output is bitwise that of the same kernel set without
// those and whose pvU8 runs them as four rows, the fourth a zero
// padding row (main's path before v86).
func TestThreeRowPVDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(86, 3))
	var ran atomic.Bool // set by the decode's workers
	for _, k := range levelSets() {
		if k.pvU8 == nil {
			continue
		}
		padded := *k // rows 3 as four rows, the fourth's sums dropped
		padded.scoresI4x3, padded.scoresI2x3 = nil, nil
		padded.pvU8 = func(acc []float32, ldacc int, delta []float32, wq []uint8, ldw, ldq int, packed []byte, n, d, gshift, bits, rows int, pf []byte) {
			if rows == 3 {
				rows = 4
				ran.Store(true)
			}
			k.pvU8(acc, ldacc, delta, wq, ldw, ldq, packed, n, d, gshift, bits, rows, pf)
		}
		shapes := []Shape{{Hq: 6, Hkv: 2, D: 128}, {Hq: 7, Hkv: 1, D: 128}}
		if testing.Short() {
			shapes = shapes[:1]
		}
		for _, sh := range shapes {
			for _, spec := range []string{"int4", "int2", "k4v2"} {
				f, err := kv.MustParseSpec(spec).Resolve(sh.D)
				if err != nil {
					t.Fatal(err)
				}
				caches, _, _ := buildBatch(t, r, f, sh, []int{700, 1100})
				seqs := seqsOf(caches)
				for _, tq := range []int{1, 3} {
					p := Params{Format: f, Shape: sh, Tq: tq}
					q := randF32(r, len(seqs)*tq*sh.Hq*sh.D, 1)
					sameDecodeBits(t, fmt.Sprintf("%v %s %v Tq %d: three-row pvU8 against the padded four rows", k, spec, sh, tq), k, &padded, q, seqs, p)
				}
			}
		}
	}
	if f := cpufeat.Detected(); f.Max == cpufeat.AVX512 && f.VNNI && f.VBMI && !ran.Load() {
		t.Fatal("no decode ran pvU8 with three rows")
	}
}

// TestThreeRowScores: the three-row packed int4 and int2 score kernels write
// rows 0..2 bitwise as scoresI4x4 and scoresI2x4 do (KC unit factors and
// KT's A and B, c 0 and not, every d % 64 == 0 up to 256) and leave row 3
// untouched.
func TestThreeRowScores(t *testing.T) {
	r := rand.New(rand.NewPCG(87, 3))
	ran := false
	for _, k := range levelSets() {
		type pair struct {
			name        string
			bits        int
			three, four func(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte)
		}
		for _, kp := range []pair{{"scoresI4x3", 4, k.scoresI4x3, k.scoresI4x4}, {"scoresI2x3", 2, k.scoresI2x3, k.scoresI2x4}} {
			if kp.three == nil {
				continue
			}
			ran = true
			testThreeRows(t, r, k, kp.name, kp.bits, kp.three, kp.four)
		}
	}
	if f := cpufeat.Detected(); f.Max == cpufeat.AVX512 && f.VNNI && !ran {
		t.Fatal("this CPU has AVX-512 VNNI, but no kernel set has scoresI4x3")
	}
}

// testThreeRows is TestThreeRowScores for one kernel pair (keys of bits bits).
func testThreeRows(t *testing.T, r *rand.Rand, k *kernels, kname string, bits int, three, four func(out []float32, ldo int, q []int8, k []byte, A, B, ab []float32, n, d int, c float32, pf []byte)) {
	t.Helper()
	for _, d := range []int{64, 128, 192, 256} {
		for _, unit := range []bool{true, false} {
			for _, c := range []float32{0, 0.5} {
				n, ldo := 48, 52
				q := make([]int8, 16*d)
				for i := range q {
					q[i] = int8(r.IntN(256) - 128)
				}
				kc := randBytes(r, n*d*bits/8)
				var A, B []float32
				if !unit {
					A, B = randF32(r, n, 1), randF32(r, n, 1)
				}
				ab := randF32(r, 8, 1)
				out3 := randF32(r, 4*ldo, 1)
				out4 := append([]float32(nil), out3...)
				out0 := append([]float32(nil), out3...)
				three(out3, ldo, q, kc, A, B, ab, n, d, c, nil)
				four(out4, ldo, q, kc, A, B, ab, n, d, c, nil)
				name := fmt.Sprintf("%v %s d=%d unit=%v c=%v", k, kname, d, unit, c)
				sameBits(t, name, out3[:3*ldo], out4[:3*ldo])
				sameBits(t, name+" row 3 untouched", out3[3*ldo:], out0[3*ldo:])
			}
		}
	}
}

// sameDecodeBits decodes q over seqs with p under the kernel sets a and b
// and asserts the same bits (name says what differs).
func sameDecodeBits(t *testing.T, name string, a, b *kernels, q []float32, seqs []*Seq, p Params) {
	t.Helper()
	got, want := nanSlice(len(q)), nanSlice(len(q))
	for _, run := range []struct {
		k   *kernels
		out []float32
	}{{a, got}, {b, want}} {
		withKernels(run.k, func() {
			if err := Decode(run.out, q, seqs, p); err != nil {
				t.Fatal(err)
			}
		})
	}
	sameBits(t, name, got, want)
}

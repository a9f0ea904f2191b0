package half

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFP16RoundTripAllPatterns(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := ToFloat32(uint16(h))
		if f != f {
			if g := FromFloat32(f); ToFloat32(g) == ToFloat32(g) {
				t.Fatalf("NaN %#04x came back as %#04x", h, g)
			}
			continue
		}
		if g := FromFloat32(f); g != uint16(h) {
			t.Fatalf("FromFloat32(ToFloat32(%#04x)=%g) = %#04x", h, f, g)
		}
	}
}

// nearest checks that got is the nearest representable value to x among
// all candidates, with ties going to the even pattern.
func TestFP16RoundsToNearestEven(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// All finite fp16 values, sorted by bit pattern for positives.
	check := func(x float32) {
		got := FromFloat32(x)
		gv := float64(ToFloat32(got))
		ax := math.Abs(float64(x))
		if ax > 65520 { // rounds to inf
			if !math.IsInf(gv, 0) {
				t.Fatalf("x=%g: got %g, want inf", x, gv)
			}
			return
		}
		// Neighbours of got in magnitude.
		mag := got & 0x7fff
		for _, n := range []uint16{mag - 1, mag + 1} {
			if n > 0x7bff || (mag == 0 && n == 0xffff) {
				continue
			}
			nv := math.Abs(float64(ToFloat32(n)))
			dg := math.Abs(ax - math.Abs(gv))
			dn := math.Abs(ax - nv)
			if dn < dg || (dn == dg && mag&1 == 1) {
				t.Fatalf("x=%g: got %#04x (%g), neighbour %#04x (%g) is nearer or even", x, got, gv, n, nv)
			}
		}
	}
	for i := 0; i < 200000; i++ {
		var x float32
		switch i % 3 {
		case 0:
			x = float32(r.NormFloat64())
		case 1:
			x = float32(r.NormFloat64() * 1e-5) // subnormal range
		default:
			x = float32(r.NormFloat64() * 3e4)
		}
		check(x)
	}
	// Exact ties between consecutive fp16 values.
	for h := uint16(0); h < 0x7bff; h += 37 {
		a, b := float64(ToFloat32(h)), float64(ToFloat32(h+1))
		check(float32((a + b) / 2))
	}
}

func TestBF16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BF16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if g := BF16FromFloat32(f); g != uint16(h) {
			t.Fatalf("bf16 round trip %#04x -> %#04x", h, g)
		}
	}
	// 1 + 2^-8 is a tie between 1 and 1+2^-7: goes to even (1.0).
	if g := BF16FromFloat32(1 + 1.0/256); g != 0x3f80 {
		t.Fatalf("tie: got %#04x want 0x3f80", g)
	}
	if g := BF16FromFloat32(1 + 3.0/256); g != 0x3f82 {
		t.Fatalf("tie up: got %#04x want 0x3f82", g)
	}
}

func TestFP8(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    FP8
		max  float32
	}{{"e4m3", E4M3, 448}, {"e5m2", E5M2, 57344}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.ToFloat32(tc.f.MaxFinite); got != tc.max {
				t.Fatalf("max finite = %g, want %g", got, tc.max)
			}
			// Every finite code round-trips.
			var finite []float64
			for c := 0; c < 128; c++ {
				v := tc.f.ToFloat32(uint8(c))
				if v != v || math.IsInf(float64(v), 0) {
					continue
				}
				finite = append(finite, float64(v))
				if g := tc.f.FromFloat32(v); g != uint8(c) {
					t.Fatalf("code %#02x (%g) -> %#02x", c, v, g)
				}
				if g := tc.f.FromFloat32(-v); c != 0 && g != uint8(c)|0x80 {
					t.Fatalf("code -%#02x (%g) -> %#02x", c, -v, g)
				}
			}
			// Random values round to the nearest finite code, ties to even, saturating.
			r := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 100000; i++ {
				x := float32(math.Abs(r.NormFloat64()) * math.Pow(10, r.Float64()*8-5))
				if i%1000 == 0 && i > 0 {
					// a midpoint
					k := r.IntN(len(finite) - 1)
					x = float32((finite[k] + finite[k+1]) / 2)
				}
				got := tc.f.FromFloat32(x)
				gv := float64(tc.f.ToFloat32(got))
				best, bestCode := math.Inf(1), -1
				for c, v := range finite {
					d := math.Abs(float64(x) - v)
					if d < best || (d == best && c%2 == 0) {
						best, bestCode = d, c
					}
				}
				if float64(x) >= float64(tc.max) {
					bestCode = int(tc.f.MaxFinite)
				}
				if int(got) != bestCode {
					t.Fatalf("x=%g: got code %#02x (%g), want %#02x (%g)", x, got, gv, bestCode, finite[bestCode])
				}
			}
			if g := tc.f.FromFloat32(float32(math.NaN())); tc.f.ToFloat32(g) == tc.f.ToFloat32(g) {
				t.Fatalf("NaN encoded as non-NaN %#02x", g)
			}
		})
	}
}

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

func TestParsePlaneSpec(t *testing.T) {
	tests := []struct{ in, want string }{
		{"bw", "bw:h100:m0:l0:w64:s4:r16:blk64"},
		{"BW:h20:m40:l40", "bw:h20:m40:l40:w64:s4:r16:blk64"},
		{"bw:m40:l40", "bw:h20:m40:l40:w64:s4:r16:blk64"},
		{"bw:m100:w0:s0", "bw:h0:m100:l0:w0:s0:r16:blk64"},
		{"bw:e75", "bw:h25:m0:l0:e75:w64:s4:r16:blk64"},
		{"bw:bf16:l100:r1:blk128", "bw:bf16:h0:m0:l100:w64:s4:r1:blk128"},
		{"bw:a8=0x70:a4=2048", "bw:h100:m0:l0:w64:s4:r16:a8=0x70:a4=0x800:blk64"},
		{"bw:trunc:nofilter", "bw:h100:m0:l0:w64:s4:r16:a8=0x0:a4=0x0:nofilter:blk64"},
		{"bw:fp16:s0", "bw:h100:m0:l0:w64:s0:r16:blk64"},
		{"bw:h20:m40:l40:k4", "bw:h20:m40:l40:w64:s4:r16:k4:blk64"},
		{"bw:m100:k1", "bw:h0:m100:l0:w64:s4:r16:k1:blk64"},
		{"bw:m100:k16", "bw:h0:m100:l0:w64:s4:r16:blk64"},
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
		if back, err := ParseSpec(sp.String()); err != nil || !reflect.DeepEqual(back, sp) {
			t.Errorf("round trip of %q: %+v, %v; want %+v", sp.String(), back, err, sp)
		}
	}
}

func TestParsePlaneSpecErrors(t *testing.T) {
	tests := []struct{ in, field, msg string }{
		{"bw:h20:m40", "", "want 100%"},
		{"bw:m60:l60", "", "exceed 100%"},
		{"bw:h101", "h101", "[0, 100]"},
		{"bw:h", "h", "[0, 100]"},
		{"bw:a8=256", "a8=256", "[0, 255]"},
		{"bw:a4=0x1000", "a4=0x1000", "[0, 4095]"},
		{"bw:a8", "a8", "[0, 255]"},
		{"bw:r0", "r0", "[1, "},
		{"bw:k0", "k0", "[1, "},
		{"bw:blk48", "blk48", "multiple of 32"},
		{"bw:trunc:a8=3", "a8=3", "given twice"},
		{"bw:a4=3:trunc", "trunc", "given twice"},
		{"bw:w4:w8", "w8", "given twice"},
		{"bw:fp16:bf16", "bf16", "given twice"},
		{"bw:kc32", "kc32", "unknown word"},
		{"bw:nofilter1", "nofilter1", "unknown word"},
		{"bw:h020x", "h020x", "[0, 100]"},
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

// refRead is a second, field-by-field statement of Recon.Read written from
// the format description (fp16: sign 15, exponent 14..10; bf16: sign 15,
// exponent 14..7), to check the masked implementation against.
func refRead(e Elem, h uint16, tier Tier, adj8, adj4 uint16, filter bool) uint16 {
	if tier == High {
		return h
	}
	keep, fill := 8, adj8 // bits kept from the top, the fill of the rest
	if tier == Low {
		keep, fill = 4, adj4
	}
	x := h>>(16-keep)<<(16-keep) | fill
	sign := h >> 15
	var expLo, expBits int // lowest exponent bit, exponent width
	if e == FP16 {
		expLo, expBits = 10, 5
	} else {
		expLo, expBits = 7, 8
	}
	readExpBits := min(expBits, keep-1) // exponent bits inside the kept top
	readExp := int(h>>(15-readExpBits)) & (1<<readExpBits - 1)
	if filter && readExp == 0 {
		return 0
	}
	fullExp := int(x>>expLo) & (1<<expBits - 1)
	if readExpBits < expBits && readExp == 1<<readExpBits-1 && fullExp == 1<<expBits-1 {
		maxFinite := uint16(1<<expBits-2)<<expLo | (1<<expLo - 1)
		return sign<<15 | maxFinite
	}
	return x
}

// TestPlaneReadExhaustive checks Recon.Read on every 16-bit pattern, both
// element types, every tier, several fills, filter on and off.
func TestPlaneReadExhaustive(t *testing.T) {
	fills := [][2]uint16{{0, 0}, {0x80, 0x800}, {0x7f, 0x7ff}, {0xff, 0xfff}, {0x40, 0xc00}, {0x13, 0x401}}
	for _, e := range []Elem{FP16, BF16} {
		for _, f := range fills {
			for _, filter := range []bool{true, false} {
				r := Recon{Elem: e, Adj8: f[0], Adj4: f[1], Filter: filter}
				for tier := High; tier < Evicted; tier++ {
					bad := 0
					for h := range 1 << 16 {
						got, want := r.Read(uint16(h), tier), refRead(e, uint16(h), tier, f[0], f[1], filter)
						if got != want && bad < 5 {
							bad++
							t.Errorf("%v %v fill %#x/%#x filter %v: Read(%#04x) = %#04x, want %#04x", e, tier, f[0], f[1], filter, h, got, want)
						}
					}
				}
			}
		}
	}
}

// TestPlaneRoundTrip splits realistic K rows (outlier channels) and every
// fp16 pattern into the planes and reads them back at each tier: High is
// bit-exact, Medium and Low equal Recon.Read bit for bit, and a tier's read
// does not depend on the planes it does not fetch.
func TestPlaneRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, e := range []Elem{FP16, BF16} {
		for _, d := range []int{64, 96, 128, 160, 192, 256} {
			nr := 64
			rows := realisticBlock(r, nr, d)
			if e == BF16 {
				for i, h := range rows {
					rows[i] = half.BF16FromFloat32(half.ToFloat32(h))
				}
			}
			// Overwrite the first rows with every 16-bit pattern (zeros,
			// subnormals, inf and NaN included), as many as fit.
			for i := 0; i < min(len(rows), 1<<16); i++ {
				if i < nr*d/2 {
					rows[i] = uint16(i * 2 * 65536 / (nr * d))
				}
			}
			lay := NewPlaneLayout(d, nr)
			blk := make([]byte, lay.BlockBytes)
			for tok := range nr {
				lay.Split(blk, 0, tok, rows[tok*d:(tok+1)*d])
				lay.Split(blk, 1, tok, rows[(nr-1-tok)*d:(nr-tok)*d]) // V: rows reversed
			}
			rec := Recon{Elem: e, Adj8: 0x5a, Adj4: 0x9c3, Filter: true}
			got := make([]uint16, d)
			for tier := High; tier <= Evicted; tier++ {
				poisoned := append([]byte(nil), blk...)
				for half := range 2 { // garbage in the planes this tier must not read
					for p := tier.Planes(); p < NumPlanes; p++ {
						lo := half*lay.HalfBytes + lay.PlaneOffset[p]
						for i := lo; i < lo+nr*lay.SliceBytes[p]; i++ {
							poisoned[i] = uint8(r.Uint32())
						}
					}
				}
				for half := range 2 {
					for tok := range nr {
						src := tok
						if half == 1 {
							src = nr - 1 - tok
						}
						lay.ReadRow(got, poisoned, half, tok, tier, rec)
						for c := range d {
							want := rec.Read(rows[src*d+c], tier)
							if tier == High && want != rows[src*d+c] {
								t.Fatalf("Read(High) is not the identity")
							}
							if got[c] != want {
								t.Fatalf("%v D=%d %v half %d token %d channel %d: read %#04x, want %#04x (stored %#04x)",
									e, d, tier, half, tok, c, got[c], want, rows[src*d+c])
							}
						}
					}
				}
			}
		}
	}
}

// TestPlaneReadError checks the error of partial reads of normal fp16 values
// against the bound the format gives: a Medium read keeps the exponent and 2
// mantissa bits, so with the fill 0x80 the error is at most 0x80 units of
// the element's last place; a Low read keeps 3 of 5 exponent bits, the fill
// 0x800 sets the missing two to 0b10 and the mantissa to 0, so the result
// is 2^(e0+2) for a value in [2^e0, 2^(e0+4)): within a factor 4.
func TestPlaneReadError(t *testing.T) {
	rec := Recon{Elem: FP16, Adj8: 0x80, Adj4: 0x800, Filter: true}
	for h := range 1 << 16 {
		x := float64(half.ToFloat32(uint16(h)))
		exp := h >> 10 & 0x1f
		if exp == 0 || exp == 0x1f {
			continue
		}
		ulp := math.Ldexp(1, int(exp)-15-10)
		m := float64(half.ToFloat32(rec.Read(uint16(h), Medium)))
		if math.Abs(m-x) > 0x80*ulp {
			t.Fatalf("Medium read of %#04x (%g) = %g: error %g > 128 ulp (%g)", h, x, m, math.Abs(m-x), 0x80*ulp)
		}
		if exp>>2 == 0 { // a 4-bit read sees a zero exponent prefix: filtered
			if l := rec.Read(uint16(h), Low); l != 0 {
				t.Fatalf("Low read of %#04x = %#04x, want 0 (filtered)", h, l)
			}
			continue
		}
		l := float64(half.ToFloat32(rec.Read(uint16(h), Low)))
		if ratio := l / x; ratio <= 0.25 || ratio > 4 || math.Signbit(l) != math.Signbit(x) {
			t.Fatalf("Low read of %#04x (%g) = %g: ratio %g outside (1/4, 4]", h, x, l, ratio)
		}
	}
}

func TestPlaneLayout(t *testing.T) {
	for _, d := range []int{64, 96, 128, 160, 192, 256} {
		for _, nr := range []int{32, 64, 96, 1024} {
			l := NewPlaneLayout(d, nr)
			if l.BlockBytes != 4*nr*d {
				t.Errorf("D=%d Nr=%d: block %d B, want %d", d, nr, l.BlockBytes, 4*nr*d)
			}
			seen := make([]bool, l.BlockBytes)
			for half := range 2 {
				for p := range NumPlanes {
					for tok := range nr {
						lo, hi := l.Slice(half, p, tok)
						if lo%LayoutAlign != 0 || hi > l.BlockBytes {
							t.Fatalf("D=%d Nr=%d half %d plane %d token %d: slice [%d, %d) unaligned or out of the block", d, nr, half, p, tok, lo, hi)
						}
						for i := lo; i < hi; i++ {
							if seen[i] {
								t.Fatalf("D=%d Nr=%d: byte %d in two slices", d, nr, i)
							}
							seen[i] = true
						}
					}
				}
			}
			for i, s := range seen {
				if !s {
					t.Fatalf("D=%d Nr=%d: byte %d in no slice", d, nr, i)
				}
			}
		}
	}
	f := MustResolve("bw:h20:m40:l40", 128)
	l := f.PlaneLayout()
	if f.BlockBytes() != l.BlockBytes || f.ResidualBytes() != 0 {
		t.Errorf("Format block %d B, residual %d B; want %d and 0", f.BlockBytes(), f.ResidualBytes(), l.BlockBytes)
	}
	if got := f.SequenceBytes(65); got != int64(2*l.BlockBytes) {
		t.Errorf("SequenceBytes(65) = %d, want two blocks %d", got, 2*l.BlockBytes)
	}
	for tier, want := range map[Tier]int{High: 512, Medium: 256, Low: 128, Evicted: 0} {
		if got := l.TierBytes(tier); got != want {
			t.Errorf("TierBytes(%v) = %d, want %d", tier, got, want)
		}
	}
	if got, want := l.PlaneReadBytes([NumTiers]int{10, 20, 30, 40}), int64(10*516+20*260+30*132); got != want {
		t.Errorf("PlaneReadBytes = %d, want %d", got, want)
	}
	if got, want := f.ReadBytes(100), int64(100*516); got != want {
		t.Errorf("ReadBytes(100) = %d, want %d", got, want)
	}
}

func TestWithAdjust(t *testing.T) {
	sp := MustParseSpec("bw:a4=7").WithAdjust(0x50, 0x900)
	if sp.Planes.Adj8 != 0x50 || sp.Planes.Adj4 != 7 {
		t.Errorf("WithAdjust: a8 %#x a4 %#x, want 0x50 and 7 (the spec's own)", sp.Planes.Adj8, sp.Planes.Adj4)
	}
	if r := MustParseSpec("bw").Planes.Recon(FP16); r.Adj8 != DefaultAdj8 || r.Adj4 != DefaultAdj4 || !r.Filter {
		t.Errorf("default Recon = %+v", r)
	}
	if sp := MustParseSpec("int4"); !reflect.DeepEqual(sp.WithAdjust(1, 2), sp) {
		t.Error("WithAdjust changed a non-bw spec")
	}
}

// TestParsePlanePolicy checks the request-level policy syntax: options
// given replace the base's, shares are replaced together, the storage
// options are refused, and PolicyString parses back.
func TestParsePlanePolicy(t *testing.T) {
	base := MustParseSpec("bw:h20:m40:l40:w32:s2:r8:a8=0x70:nofilter").Planes
	tests := []struct{ in, want string }{
		{"h20:m40:l40", "h20:m40:l40:w32:s2:r8"},
		{"l100", "h0:m0:l100:w32:s2:r8"},
		{"m30", "h70:m30:l0:w32:s2:r8"},
		{"bw:h100", "h100:m0:l0:w32:s2:r8"},
		{"w0:s0", "h20:m40:l40:w0:s0:r8"},
		{"H25:E75:R1", "h25:m0:l0:e75:w32:s2:r1"},
		{"k4", "h20:m40:l40:w32:s2:r8:k4"},
		{"m100:k1", "h0:m100:l0:w32:s2:r8:k1"},
	}
	for _, tc := range tests {
		p, err := ParsePlanePolicy(tc.in, base)
		if err != nil {
			t.Errorf("ParsePlanePolicy(%q): %v", tc.in, err)
			continue
		}
		if got := p.PolicyString(); got != tc.want {
			t.Errorf("ParsePlanePolicy(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !p.On || p.Adj8 != base.Adj8 || p.Adj4 != base.Adj4 || p.NoFilter != base.NoFilter {
			t.Errorf("ParsePlanePolicy(%q) changed the reconstruction: %+v", tc.in, p)
		}
		if back, err := ParsePlanePolicy(p.PolicyString(), base); err != nil || back != p {
			t.Errorf("round trip of %q: %+v, %v; want %+v", p.PolicyString(), back, err, p)
		}
	}
	errs := []struct{ in, field, msg string }{
		{"", "", "empty tier policy"},
		{"bw", "", "empty tier policy"},
		{"h20:m40", "", "want 100%"},
		{"h101", "h101", "[0, 100]"},
		{"bf16", "bf16", "storage options"},
		{"blk128", "blk128", "storage options"},
		{"a8=3", "a8=3", "storage options"},
		{"trunc", "trunc", "storage options"},
		{"nofilter", "nofilter", "storage options"},
		{"int4", "int4", "storage options"},
		{"h20::m80", "", "empty option"},
		{"r0", "r0", "[1, "},
		{"w4:w8", "w8", "given twice"},
	}
	for _, tc := range errs {
		_, err := ParsePlanePolicy(tc.in, base)
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("ParsePlanePolicy(%q) = %v, want *SpecError", tc.in, err)
			continue
		}
		if se.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParsePlanePolicy(%q) error %q (field %q); want field %q and text %q", tc.in, err, se.Field, tc.field, tc.msg)
		}
	}
}

// TestMassSampled checks the sampled positions: one in every k, the last
// of each run of k, and every position for k <= 1.
func TestMassSampled(t *testing.T) {
	for _, k := range []int{0, 1, 2, 3, 4, 16} {
		n := 0
		for pos := range 48 {
			got := MassSampled(pos, k)
			want := k <= 1 || (pos+1)%k == 0
			if got != want {
				t.Errorf("MassSampled(%d, %d) = %v, want %v", pos, k, got, want)
			}
			if got {
				n++
			}
		}
		if want := 48 / max(k, 1); n != want {
			t.Errorf("k %d: %d of 48 positions sampled, want %d", k, n, want)
		}
	}
}

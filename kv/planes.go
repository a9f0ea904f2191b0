package kv

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// This file defines the bit-plane format ("bw", read-time precision tiers
// after BitWeaver, seed 003): K and V stay fp16 (or bf16), but every element
// is split when it is written into three planes stored apart, so that a
// reader fetches 4, 8 or 16 bits of a token and rebuilds the rest. The
// layout below is the only definition; the CPU attention, the engine's
// cache and the GPU kernel all derive their offsets from PlaneLayout.

// Tier is the precision a cached token is read at. The zero value is High,
// so a fresh tier map reads everything exactly.
type Tier uint8

// The tiers, best first.
const (
	High    Tier = iota // 16 bits: planes 0, 1 and 2 (exact)
	Medium              // 8 bits: planes 0 and 1, low byte filled with Adj8
	Low                 // 4 bits: plane 0, low 12 bits filled with Adj4
	Evicted             // not read: the token is left out of attention
	NumTiers
)

var tierNames = [NumTiers]string{"high", "medium", "low", "evicted"}

// String returns "high", "medium", "low" or "evicted".
func (t Tier) String() string {
	if t < NumTiers {
		return tierNames[t]
	}
	return fmt.Sprintf("Tier(%d)", uint8(t))
}

// Bits returns the bits of an element a read at tier t fetches: 16, 8, 4 or 0.
func (t Tier) Bits() int {
	switch t {
	case High:
		return 16
	case Medium:
		return 8
	case Low:
		return 4
	}
	return 0
}

// Planes returns how many planes (from plane 0 on) a read at tier t fetches.
func (t Tier) Planes() int {
	switch t {
	case High:
		return 3
	case Medium:
		return 2
	case Low:
		return 1
	}
	return 0
}

// The planes of a bw tensor. An fp16/bf16 element h (bits 15..0, sign in
// bit 15) is split as
//
//	plane 0 (PlaneTop): h >> 12          4 bits: sign and the top 3 exponent bits
//	plane 1 (PlaneMid): (h >> 8) & 0xF   4 bits
//	plane 2 (PlaneLow): h & 0xFF         8 bits
const (
	PlaneTop  = 0
	PlaneMid  = 1
	PlaneLow  = 2
	NumPlanes = 3
)

// Bit masks of the bits each tier reads, and the widths of the fills.
const (
	readMaskMedium = 0xFF00 // bits 15..8 come from planes 0 and 1
	readMaskLow    = 0xF000 // bits 15..12 come from plane 0
	// MaxAdj8 is the largest 8-bit adjustment term (it fills bits 7..0).
	MaxAdj8 = 0xFF
	// MaxAdj4 is the largest 4-bit adjustment term (it fills bits 11..0).
	MaxAdj4 = 0xFFF
	// DefaultAdj8 and DefaultAdj4 are the terms used when neither the spec
	// nor the model's settings give one: the middle of the missing bits
	// (0x80: half the 8 missing mantissa bits of an fp16 8-bit read; 0x800:
	// the two exponent bits a 4-bit fp16 read misses set to 0b10 and the
	// mantissa zero, 2^(e0+2) for a value in [2^e0, 2^(e0+4)), the geometric
	// middle of the four binades the read cannot tell apart).
	DefaultAdj8 = 0x80
	DefaultAdj4 = 0x800
	// AdjUnset marks an adjustment term the spec leaves to the model.
	AdjUnset = -1
)

// Element bit fields of the two 16-bit float types.
const (
	fp16ExpMask   = 0x7C00
	fp16MaxFinite = 0x7BFF
	bf16ExpMask   = 0x7F80
	bf16MaxFinite = 0x7F7F
	signMask      = 0x8000
)

// PlaneSpec is the part of a Spec that the bw format adds: the tier
// fractions the engine's policy aims at, its window, sinks and period, and
// how partial reads are rebuilt. Fractions are whole percents summing to 100.
type PlaneSpec struct {
	// On marks a bw spec; the other fields are zero otherwise.
	On bool
	// High, Medium, Low and Evicted are the target shares of cached tokens
	// in each tier, percent.
	High, Medium, Low, Evicted int
	// Window is W: the newest W tokens are always High.
	Window int
	// Sinks is S: the first S tokens (attention sinks) are always High.
	Sinks int
	// Period is R: the policy re-tiers every R decoded tokens.
	Period int
	// MassEvery is k: the attention mass the policy ranks by accumulates
	// only the query tokens at positions p with MassSampled(p, k) (one
	// token in k: the mass is sampled, the bookkeeping of the other steps
	// skipped); 1 takes every token.
	MassEvery int
	// Adj8 and Adj4 fill the missing bits of 8- and 4-bit reads (AdjUnset:
	// the model's setting, else DefaultAdj8/DefaultAdj4).
	Adj8, Adj4 int
	// NoFilter turns the subnormal filter off.
	NoFilter bool
}

// Defaults of the bw format.
const (
	DefaultPlaneBlock  = 64 // tokens per block (page)
	DefaultPlaneWindow = 64
	DefaultPlaneSinks  = 4
	DefaultPlanePeriod = 16
	// DefaultPlaneMassEvery samples the attention mass of one query token
	// in 16, one per default re-tier period: on the H100 the mass then
	// costs 1.1-1.5% of the attention step instead of 18-24%, and on
	// gocoder-23m the H/M mixes and H2O eviction rank as well as with every
	// token (docs/bitweaver.md, "Bookkeeping on the GPU").
	DefaultPlaneMassEvery = 16
	// MaxPlaneTokens bounds W and S in a spec.
	MaxPlaneTokens = 1 << 20
)

// PlaneGrammar documents the bw spec; SpecGrammar includes it.
const PlaneGrammar = `bw       fp16 K and V stored as bit planes, read at 16/8/4 bits per token by
         importance (read-time precision tiers, docs/bitweaver.md):
         bw[:bf16][:hP][:mP][:lP][:eP][:wN][:sN][:rN][:kN][:a8=X][:a4=X][:trunc][:nofilter][:blkN]
         hP mP lP eP  percent of tokens read at 16 (HIGH), 8 (MEDIUM), 4 bits (LOW)
                 or not at all (EVICTED); sum 100, h takes the rest if omitted
                 (default h100: everything exact)
         wN sN   the newest N / first N tokens always HIGH (default w64 s4)
         rN      re-tier every N decoded tokens (default r16)
         kN      rank by the attention mass of every N-th token's queries only
                 (positions p with p%N = N-1; default k16; k1: every token)
         a8=X    fill of bits 7..0 on 8-bit reads, 0..255 (0x.. hex ok)
         a4=X    fill of bits 11..0 on 4-bit reads, 0..4095
                 (default: the model's setting, else a8=0x80 a4=0x800)
         trunc   a8=0:a4=0 (plain truncation)
         nofilter  keep partial reads whose exponent may be zero (default: zero them)
         blkN    tokens per block, multiple of 32 in [32, 1024] (default 64)
         examples: bw   bw:m100:w0:s0   bw:h20:m40:l40   bw:h25:e75`

// parsePlaneSpec parses the options of a "bw" spec.
func parsePlaneSpec(s string, opts []string) (Spec, error) {
	fail := func(field string, err error) (Spec, error) {
		return Spec{}, &SpecError{Spec: s, Field: field, Err: err}
	}
	sp := Spec{K: TensorFormat{Elem: FP16}, V: TensorFormat{Elem: FP16}, Residual: DefaultPlaneBlock}
	p := PlaneSpec{On: true, Window: DefaultPlaneWindow, Sinks: DefaultPlaneSinks, Period: DefaultPlanePeriod,
		MassEvery: DefaultPlaneMassEvery, Adj8: AdjUnset, Adj4: AdjUnset}
	seen := map[string]bool{}
	given := map[string]bool{}
	const want = "want bf16, fp16, hP, mP, lP, eP, wN, sN, rN, kN, a8=X, a4=X, trunc, nofilter or blkN"
	for _, opt := range opts {
		key, arg := opt, ""
		if opt == "fp16" || opt == "bf16" {
			// element names end in digits; they take no argument
		} else if i := strings.IndexByte(opt, '='); i >= 0 {
			key, arg = opt[:i], opt[i+1:]
		} else if i := strings.IndexAny(opt, "0123456789"); i > 0 && key != "a8" && key != "a4" {
			key, arg = opt[:i], opt[i:]
		}
		if key == "trunc" || key == "a8" || key == "a4" {
			if seen["trunc"] || (key == "trunc" && (seen["a8"] || seen["a4"])) {
				return fail(opt, errors.New("given twice (trunc sets a8 and a4)"))
			}
		}
		if seen[key] || (key == "fp16" && seen["bf16"]) || (key == "bf16" && seen["fp16"]) {
			return fail(opt, errors.New("given twice"))
		}
		seen[key] = true
		num := func(lo, hi int) (int, error) {
			base, digits := 10, arg
			if strings.HasPrefix(arg, "0x") {
				base, digits = 16, arg[2:]
			}
			n, err := strconv.ParseInt(digits, base, 32)
			if err != nil || n < int64(lo) || n > int64(hi) {
				return 0, fmt.Errorf("want an integer in [%d, %d]", lo, hi)
			}
			return int(n), nil
		}
		var err error
		switch key {
		case "fp16", "bf16", "trunc", "nofilter":
			if arg != "" {
				return fail(opt, fmt.Errorf("%w: %s takes no argument", ErrSpec, key))
			}
			switch key {
			case "bf16":
				sp.K.Elem, sp.V.Elem = BF16, BF16
			case "trunc":
				p.Adj8, p.Adj4 = 0, 0
			case "nofilter":
				p.NoFilter = true
			}
		case "h", "m", "l", "e":
			var n int
			if n, err = num(0, 100); err == nil {
				given[key] = true
				switch key {
				case "h":
					p.High = n
				case "m":
					p.Medium = n
				case "l":
					p.Low = n
				case "e":
					p.Evicted = n
				}
			}
		case "w":
			p.Window, err = num(0, MaxPlaneTokens)
		case "s":
			p.Sinks, err = num(0, MaxPlaneTokens)
		case "r":
			p.Period, err = num(1, MaxPlaneTokens)
		case "k":
			p.MassEvery, err = num(1, MaxPlaneTokens)
		case "a8":
			p.Adj8, err = num(0, MaxAdj8)
		case "a4":
			p.Adj4, err = num(0, MaxAdj4)
		case "blk":
			sp.Residual, err = num(ResidualAlign, MaxResidual)
			if err == nil && sp.Residual%ResidualAlign != 0 {
				err = fmt.Errorf("want a multiple of %d", ResidualAlign)
			}
		default:
			return fail(opt, fmt.Errorf("%w: %s", ErrSpec, want))
		}
		if err != nil {
			return fail(opt, err)
		}
	}
	rest := p.Medium + p.Low + p.Evicted
	switch {
	case !given["h"] && rest > 100:
		return fail("", fmt.Errorf("tier shares m+l+e = %d%% exceed 100%%", rest))
	case !given["h"]:
		p.High = 100 - rest
	case p.High+rest != 100:
		return fail("", fmt.Errorf("tier shares h+m+l+e = %d%%, want 100%%", p.High+rest))
	}
	sp.Planes = p
	return sp, nil
}

// planeString is Spec.String for bw specs.
func (s Spec) planeString() string {
	p := s.Planes
	var b strings.Builder
	b.WriteString("bw")
	if s.K.Elem == BF16 {
		b.WriteString(":bf16")
	}
	fmt.Fprintf(&b, ":h%d:m%d:l%d", p.High, p.Medium, p.Low)
	if p.Evicted > 0 {
		fmt.Fprintf(&b, ":e%d", p.Evicted)
	}
	fmt.Fprintf(&b, ":w%d:s%d:r%d", p.Window, p.Sinks, p.Period)
	if k := p.massEvery(); k != DefaultPlaneMassEvery {
		fmt.Fprintf(&b, ":k%d", k)
	}
	if p.Adj8 != AdjUnset {
		fmt.Fprintf(&b, ":a8=%#x", p.Adj8)
	}
	if p.Adj4 != AdjUnset {
		fmt.Fprintf(&b, ":a4=%#x", p.Adj4)
	}
	if p.NoFilter {
		b.WriteString(":nofilter")
	}
	fmt.Fprintf(&b, ":blk%d", s.Residual)
	return b.String()
}

// WithAdjust returns s with the adjustment terms it leaves unset filled in
// (a model's settings); a spec that sets them keeps its own. Non-bw specs
// are returned unchanged.
func (s Spec) WithAdjust(adj8, adj4 int) Spec {
	if !s.Planes.On {
		return s
	}
	if s.Planes.Adj8 == AdjUnset && adj8 >= 0 && adj8 <= MaxAdj8 {
		s.Planes.Adj8 = adj8
	}
	if s.Planes.Adj4 == AdjUnset && adj4 >= 0 && adj4 <= MaxAdj4 {
		s.Planes.Adj4 = adj4
	}
	return s
}

// Recon says how partial reads are rebuilt into 16-bit elements: the
// element type and the terms that fill the bits a read did not fetch.
type Recon struct {
	Elem       Elem // FP16 or BF16
	Adj8, Adj4 uint16
	Filter     bool // the subnormal filter
}

// Recon returns the reconstruction rule of a bw spec, with the default
// adjustment terms where the spec leaves them unset.
func (p PlaneSpec) Recon(e Elem) Recon {
	r := Recon{Elem: e, Adj8: DefaultAdj8, Adj4: DefaultAdj4, Filter: !p.NoFilter}
	if p.Adj8 != AdjUnset {
		r.Adj8 = uint16(p.Adj8)
	}
	if p.Adj4 != AdjUnset {
		r.Adj4 = uint16(p.Adj4)
	}
	return r
}

// Read returns the 16-bit element that a read of h at tier t yields. It is
// the scalar definition every implementation reproduces bit for bit:
//
//	High:    h                                   (exact)
//	Medium:  x = h & 0xFF00 | Adj8
//	Low:     x = h & 0xF000 | Adj4
//	then, on Medium and Low reads, with E the exponent field (fp16 bits
//	14..10, bf16 bits 14..7) and R the bits read:
//	filter:   if Filter and h & E & R == 0, the result is 0 (+0.0): the
//	          exponent bits read are all zero, so the element may be zero
//	          or subnormal, where a fill would invent magnitude
//	saturate: if E is not all read (E &^ R != 0), the exponent bits read
//	          are all ones and x's exponent is all ones (an inf/NaN pattern
//	          made by the fill), the result is the largest finite value with
//	          h's sign (fp16 0x7BFF, bf16 0x7F7F)
//	else x.
//
// Evicted returns 0 (an evicted token is never read; the value is only
// defined so that the function is total).
func (r Recon) Read(h uint16, t Tier) uint16 {
	var x, read uint16
	switch t {
	case High:
		return h
	case Medium:
		read, x = readMaskMedium, h&readMaskMedium|r.Adj8&MaxAdj8
	case Low:
		read, x = readMaskLow, h&readMaskLow|r.Adj4&MaxAdj4
	default:
		return 0
	}
	return r.fix(h, x, read)
}

// fix applies the filter and the saturation to a filled read x of h.
func (r Recon) fix(h, x, read uint16) uint16 {
	exp, maxFinite := uint16(fp16ExpMask), uint16(fp16MaxFinite)
	if r.Elem == BF16 {
		exp, maxFinite = bf16ExpMask, bf16MaxFinite
	}
	got := h & exp & read
	if r.Filter && got == 0 {
		return 0
	}
	if exp&^read != 0 && got == exp&read && x&exp == exp {
		return h&signMask | maxFinite
	}
	return x
}

// PlaneLayout is the byte layout of one bw block: Tokens (Nr) tokens of one
// KV head, K half then V half, each half three planes:
//
//	offset in a half     plane                          one token's slice
//	0                    0: top nibbles [Nr][D/2] B     D/2 B at t·D/2
//	Nr·D/2               1: next nibbles [Nr][D/2] B    D/2 B at Nr·D/2 + t·D/2
//	Nr·D                 2: low bytes [Nr][D] B         D B at Nr·D + t·D
//
// A half is 2·Nr·D bytes, a block (K and V) 4·Nr·D bytes, the same as fp16.
// In planes 0 and 1 the nibble of channel c sits in byte c/2 of the token's
// slice, even c in the low nibble (the int4 convention); in plane 2 the low
// byte of channel c is byte c. Every slice starts at a multiple of
// LayoutAlign (16) bytes for D a multiple of PlaneHeadDimAlign, so a GPU
// thread reads a slice with 16-byte vectors: one vector holds 32 channels
// of plane 0 or 1, or 16 channels of plane 2.
type PlaneLayout struct {
	D, Tokens int
	// SliceBytes is one token's slice in each plane: D/2, D/2, D.
	SliceBytes [NumPlanes]int
	// PlaneOffset is where each plane starts within a half: 0, Nr·D/2, Nr·D.
	PlaneOffset [NumPlanes]int
	// HalfBytes is the size of the K (or V) half: 2·Nr·D.
	HalfBytes int
	// BlockBytes is one KV head's block, K and V: 4·Nr·D.
	BlockBytes int
}

// PlaneHeadDimAlign is what the bit-plane format's head dim must be a
// multiple of (besides kv.HeadDimOK): a nibble plane's slice of D/2 bytes
// is then a whole number of LayoutAlign vectors.
const PlaneHeadDimAlign = 2 * LayoutAlign

// NewPlaneLayout returns the layout of blocks of nr tokens and head dim d.
func NewPlaneLayout(d, nr int) PlaneLayout {
	l := PlaneLayout{D: d, Tokens: nr, SliceBytes: [NumPlanes]int{d / 2, d / 2, d}}
	l.PlaneOffset = [NumPlanes]int{0, nr * d / 2, nr * d}
	l.HalfBytes = 2 * nr * d
	l.BlockBytes = 2 * l.HalfBytes
	return l
}

// Slice returns the byte range of token t's slice of a plane in a half
// (0: K, 1: V) of a block that starts at byte 0.
func (l PlaneLayout) Slice(half, plane, t int) (lo, hi int) {
	lo = half*l.HalfBytes + l.PlaneOffset[plane] + t*l.SliceBytes[plane]
	return lo, lo + l.SliceBytes[plane]
}

// Split writes token t's elements src[:D] (fp16 or bf16 bits) into the
// planes of a half (0: K, 1: V) of block blk (len >= BlockBytes).
func (l PlaneLayout) Split(blk []byte, half, t int, src []uint16) {
	a, _ := l.Slice(half, PlaneTop, t)
	b, _ := l.Slice(half, PlaneMid, t)
	c, _ := l.Slice(half, PlaneLow, t)
	top, mid, low := blk[a:a+l.D/2], blk[b:b+l.D/2], blk[c:c+l.D]
	for i := 0; i < l.D; i += 2 {
		h0, h1 := src[i], src[i+1]
		top[i/2] = uint8(h0>>12) | uint8(h1>>12)<<4
		mid[i/2] = uint8(h0>>8)&0xF | uint8(h1>>8)<<4
		low[i], low[i+1] = uint8(h0), uint8(h1)
	}
}

// ReadRow rebuilds token t of a half at tier t from the planes that tier
// reads (and no others) into dst[:D] as 16-bit elements, with r's fill,
// filter and saturation. It equals r.Read of the element written, bit for
// bit. An Evicted tier writes zeros.
func (l PlaneLayout) ReadRow(dst []uint16, blk []byte, half, t int, tier Tier, r Recon) {
	dst = dst[:l.D]
	if tier == Evicted {
		clear(dst)
		return
	}
	a, _ := l.Slice(half, PlaneTop, t)
	top := blk[a : a+l.D/2]
	switch tier {
	case High:
		b, _ := l.Slice(half, PlaneMid, t)
		c, _ := l.Slice(half, PlaneLow, t)
		mid, low := blk[b:b+l.D/2], blk[c:c+l.D]
		for i := 0; i < l.D; i += 2 {
			tb, mb := uint16(top[i/2]), uint16(mid[i/2])
			dst[i] = (tb&0xF)<<12 | (mb&0xF)<<8 | uint16(low[i])
			dst[i+1] = (tb>>4)<<12 | (mb>>4)<<8 | uint16(low[i+1])
		}
	case Medium:
		b, _ := l.Slice(half, PlaneMid, t)
		mid := blk[b : b+l.D/2]
		for i := 0; i < l.D; i += 2 {
			tb, mb := uint16(top[i/2]), uint16(mid[i/2])
			h0 := (tb&0xF)<<12 | (mb&0xF)<<8
			h1 := (tb>>4)<<12 | (mb>>4)<<8
			dst[i] = r.fix(h0, h0|r.Adj8&MaxAdj8, readMaskMedium)
			dst[i+1] = r.fix(h1, h1|r.Adj8&MaxAdj8, readMaskMedium)
		}
	case Low:
		for i := 0; i < l.D; i += 2 {
			tb := uint16(top[i/2])
			h0, h1 := (tb&0xF)<<12, (tb>>4)<<12
			dst[i] = r.fix(h0, h0|r.Adj4&MaxAdj4, readMaskLow)
			dst[i+1] = r.fix(h1, h1|r.Adj4&MaxAdj4, readMaskLow)
		}
	}
}

// TierBytes returns the bytes a read of one token of one KV head at tier t
// fetches from the planes, K and V together: 4·D (High), 2·D (Medium),
// D (Low), 0 (Evicted).
func (l PlaneLayout) TierBytes(t Tier) int { return 2 * l.D * t.Bits() / 8 }

// IndexBytes is the size of one entry of the tier-sorted token index a
// decode kernel reads per token it reads (an int32 token position).
const IndexBytes = 4

// PlaneReadBytes returns the bytes one decode step reads for one KV head
// whose tokens are counts[tier] in each tier: the planes each tier needs
// plus one index entry per token read.
func (l PlaneLayout) PlaneReadBytes(counts [NumTiers]int) int64 {
	var n int64
	for t := High; t < Evicted; t++ {
		n += int64(counts[t]) * int64(l.TierBytes(t)+IndexBytes)
	}
	return n
}

// PlaneLayout returns the plane layout of a resolved bw format.
func (f Format) PlaneLayout() PlaneLayout { return NewPlaneLayout(f.D, f.Residual) }

// describePlanes is Describe's account of a bw format.
func (f Format) describePlanes(w io.Writer) {
	l, p := f.PlaneLayout(), f.Spec.Planes
	r := p.Recon(f.K.Elem)
	fmt.Fprintf(w, "format     %s (head dim %d)\n", f.Spec.String(), f.D)
	fmt.Fprintf(w, "elements   %v K and V split into bit planes at write time (no residual block)\n", f.K.Elem)
	fmt.Fprintf(w, "block      %d tokens, %d B per KV head: K then V, each plane 0 (bits 15..12) %d B, plane 1 (11..8) %d B, plane 2 (7..0) %d B\n",
		l.Tokens, l.BlockBytes, l.Tokens*l.SliceBytes[0], l.Tokens*l.SliceBytes[1], l.Tokens*l.SliceBytes[2])
	fmt.Fprintf(w, "token      slices of %d/%d/%d B per plane (16-byte aligned)\n", l.SliceBytes[0], l.SliceBytes[1], l.SliceBytes[2])
	fmt.Fprintf(w, "tiers      high %d%% (16 bit, %d B/token), medium %d%% (8 bit, %d B), low %d%% (4 bit, %d B), evicted %d%%; +%d B index per token read\n",
		p.High, l.TierBytes(High), p.Medium, l.TierBytes(Medium), p.Low, l.TierBytes(Low), p.Evicted, IndexBytes)
	fmt.Fprintf(w, "policy     H2O accumulated attention; newest %d and first %d tokens high; re-tier every %d tokens; mass of every %d-th token's queries\n", p.Window, p.Sinks, p.Period, p.MassEvery)
	adj := func(v, def int) string {
		if v == AdjUnset {
			return fmt.Sprintf("model setting (else %#x)", def)
		}
		return fmt.Sprintf("%#x", v)
	}
	fmt.Fprintf(w, "fill       8-bit reads: bits 7..0 = %s; 4-bit reads: bits 11..0 = %s; subnormal filter %v\n",
		adj(p.Adj8, DefaultAdj8), adj(p.Adj4, DefaultAdj4), r.Filter)
	share := float64(4*p.High+2*p.Medium+p.Low) / 400
	fmt.Fprintf(w, "per token  %d B stored per KV head (16 bits per element); reads at the target shares %.1f%% of fp16\n",
		4*f.D, 100*share)
}

// ParsePlanePolicy parses the policy part of a bw spec (see PlaneGrammar):
// ':'-separated hP, mP, lP, eP, wN, sN, rN and kN, with an optional leading
// "bw". The options given replace base's; if any share (h, m, l, e) is
// given, all four are replaced and h takes the rest if omitted, as in a
// spec, so "l100" means everything LOW whatever base's shares were. The
// options that fix how the planes are stored or rebuilt (bf16, fp16, blkN,
// a8, a4, trunc, nofilter) are refused: they belong to the cache, not to a
// reader of it. base's other fields are kept. Errors are *SpecError.
func ParsePlanePolicy(s string, base PlaneSpec) (PlaneSpec, error) {
	fail := func(field string, err error) (PlaneSpec, error) {
		return PlaneSpec{}, &SpecError{Spec: s, Field: field, Err: err}
	}
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), ":")
	if parts[0] == "bw" {
		parts = parts[1:]
	}
	if len(parts) == 0 || len(parts) == 1 && parts[0] == "" {
		return fail("", errors.New("empty tier policy; want options such as h20:m40:l40 (hP mP lP eP wN sN rN kN)"))
	}
	given := map[byte]bool{}
	for _, opt := range parts {
		key := strings.TrimRight(opt, "0123456789")
		if len(key) != 1 || !strings.Contains("hmlewsrk", key) {
			if opt == "" {
				return fail(opt, fmt.Errorf("%w: empty option", ErrSpec))
			}
			return fail(opt, fmt.Errorf("%w: a tier policy takes only hP, mP, lP, eP, wN, sN, rN and kN (the storage options bf16, fp16, blkN, a8, a4, trunc and nofilter are the cache's)", ErrSpec))
		}
		given[key[0]] = true
	}
	sp, err := parsePlaneSpec(s, parts)
	if err != nil {
		return PlaneSpec{}, err
	}
	p, out := sp.Planes, base
	out.On = true
	if given['h'] || given['m'] || given['l'] || given['e'] {
		out.High, out.Medium, out.Low, out.Evicted = p.High, p.Medium, p.Low, p.Evicted
	}
	if given['w'] {
		out.Window = p.Window
	}
	if given['s'] {
		out.Sinks = p.Sinks
	}
	if given['r'] {
		out.Period = p.Period
	}
	if given['k'] {
		out.MassEvery = p.MassEvery
	}
	return out, nil
}

// massEvery is MassEvery with 0 (a spec made by hand) read as 1, every
// token, as MassSampled reads it.
func (p PlaneSpec) massEvery() int { return max(p.MassEvery, 1) }

// MassSampled reports whether the query token at position pos (0-based in
// its sequence) adds its attention to the mass under PlaneSpec.MassEvery =
// every: one position in every, the last of each run of every tokens
// (pos % every == every-1), so that with every = Period and re-tiers at
// multiples of the period, the mass a re-tier ranks by holds the newest
// query; every <= 1 samples every position. The one definition: the CPU
// decode (attn.Params.MassEvery), the GPU mass pass (planes.cu mass) and
// the GPU cache's launches (gpukv) apply it alike.
func MassSampled(pos, every int) bool {
	return every <= 1 || pos%every == every-1
}

// MassSampledAny reports whether any of the n query tokens at positions
// pos, pos+1, ..., pos+n-1 is MassSampled: a decode call for which it is
// false adds nothing to the mass and may skip it.
func MassSampledAny(pos, n, every int) bool {
	if every <= 1 {
		return n > 0
	}
	// The first sampled position at or after pos is pos + (every-1-pos%every).
	return n > every-1-pos%every
}

// PolicyString returns the policy part of p in spec syntax, which
// ParsePlanePolicy parses back: "h20:m40:l40:w64:s4:r16" (eP and kN only
// when set).
func (p PlaneSpec) PolicyString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "h%d:m%d:l%d", p.High, p.Medium, p.Low)
	if p.Evicted > 0 {
		fmt.Fprintf(&b, ":e%d", p.Evicted)
	}
	fmt.Fprintf(&b, ":w%d:s%d:r%d", p.Window, p.Sinks, p.Period)
	if k := p.massEvery(); k != DefaultPlaneMassEvery {
		fmt.Fprintf(&b, ":k%d", k)
	}
	return b.String()
}

package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// tanhSweep returns TestTanh32's arguments: a dense sweep of [-20, 20]
// (both of tanh32's ranges and the switch between them), every float32
// around the switch, powers of two (and 1.375 times them) down to the
// subnormals, the region where tanh rounds to ±1 in float32 (|x| near 9)
// and where exp(−2|x|) falls below expMin (|x| near 43.7), 0 and −0.
func tanhSweep() []float32 {
	var xs []float32
	const n = 400000
	for i := -n; i <= n; i++ {
		xs = append(xs, float32(20*float64(i)/n))
	}
	for _, x0 := range []float32{tanhSeriesMax, -tanhSeriesMax} {
		x := x0
		for range 4096 {
			x = math.Nextafter32(x, 0)
		}
		for range 8192 {
			xs = append(xs, x)
			x = math.Nextafter32(x, x0*2)
		}
	}
	for x := float32(1); x > 0; x /= 2 {
		xs = append(xs, x, -x, x*1.375)
	}
	for _, x0 := range []float32{9.01, -expMin / 2} { // saturation in float32; exp32's underflow
		for i := -2000; i <= 2000; i++ {
			x := x0 + float32(i)*1e-3
			xs = append(xs, x, -x)
		}
	}
	return append(xs, 0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32)
}

// TestTanh32 holds the soft-cap's tanh to math.Tanh of the float32
// argument: relative error within tanhRelErr over tanhSweep, exactly ±1
// far out, ±1 at ±Inf and NaN at NaN; tanh32 and each level's soft-cap
// kernel at c = 1 (c·tanh(x·1): tanh itself, no rounding of its own).
// The kernels (AVX-512 and AVX2) run the same operations, so give the
// same bits.
func TestTanh32(t *testing.T) {
	xs := tanhSweep()
	inf := float32(math.Inf(1))
	exact := []struct{ x, want float32 }{{inf, 1}, {-inf, -1}, {100, 1}, {-100, -1}, {1e30, 1}, {-math.MaxFloat32, -1}, {0, 0}}
	type impl struct {
		name string
		f    func(x []float32) // in place
	}
	impls := []impl{{"tanh32", func(x []float32) {
		for i := range x {
			x[i] = tanh32(x[i])
		}
	}}}
	for _, k := range levelSets() {
		if k.softcap != nil {
			impls = append(impls, impl{k.String() + " softcap", func(x []float32) { k.softcap(x, 1, 1) }})
		}
	}
	in := append([]float32(nil), xs...) // xs, the exact cases, NaN, zeros to whole vectors
	for _, c := range exact {
		in = append(in, c.x)
	}
	in = append(in, float32(math.NaN()))
	for len(in)%vecLenTest != 0 {
		in = append(in, 0)
	}
	var first []float32 // the first kernel's results
	for _, im := range impls {
		x := append([]float32(nil), in...)
		im.f(x)
		worst := 0.0
		for i, a := range xs {
			got, want := float64(x[i]), math.Tanh(float64(a))
			if want == 0 {
				if got != 0 {
					t.Fatalf("%s(%g) = %g, want 0", im.name, a, got)
				}
				continue
			}
			e := math.Abs(got-want) / math.Abs(want)
			worst = max(worst, e)
			if got != got || e > tanhRelErr {
				t.Fatalf("%s(%g) = %g, want %g (relative error %.3g > %.3g)", im.name, a, got, want, e, float64(tanhRelErr))
			}
		}
		t.Logf("%s: worst relative error %.3g (%.2f eps) over %d arguments", im.name, worst, worst/eps32, len(xs))
		for j, c := range exact {
			if got := x[len(xs)+j]; got != c.want {
				t.Errorf("%s(%g) = %g, want %g", im.name, c.x, got, c.want)
			}
		}
		if got := x[len(xs)+len(exact)]; got == got {
			t.Errorf("%s(NaN) = %g, want NaN", im.name, got)
		}
		if im.name == "tanh32" {
			continue
		}
		if first == nil {
			first = x
			continue
		}
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(first[i]) && (x[i] == x[i] || first[i] == first[i]) {
				t.Fatalf("%s: tanh(%g) = %g (%#x), the first kernel's %g (%#x)", im.name, in[i], x[i], math.Float32bits(x[i]), first[i], math.Float32bits(first[i]))
			}
		}
	}
}

// softcapShapes are the shapes of the soft-capping tests: query groups of
// 1, 2, 4 (the int4 pair path's) and 7, head dims 64, 96 and 128.
var softcapShapes = []Shape{
	{Hq: 4, Hkv: 4, D: 64},   // MHA, D 64
	{Hq: 2, Hkv: 2, D: 128},  // MHA, D 128 (one query row: the one-row paths)
	{Hq: 4, Hkv: 2, D: 64},   // GQA 2
	{Hq: 8, Hkv: 2, D: 128},  // GQA 4
	{Hq: 14, Hkv: 2, D: 128}, // GQA 7
	{Hq: 8, Hkv: 2, D: 96},   // GQA 4 at D 96 (padded integer paths)
}

// TestDecodeSoftcapMatchesReference runs every format's decode (every
// kernel set: pure Go, the VNNI and u8 references, each SIMD level) with
// soft-capped scores against the float64 reference, on ragged lengths
// off the block size, 1 and 3 query tokens and, on groups of 1 and 2, a
// prefill chunk of prefillRows query tokens; caps of 2 (most scores of
// these caches saturate) and 8 (most stay in tanh's near-linear range),
// one with a sliding window. Each case also checks that the cap
// moves the reference by far more than the tolerance, so that a path that
// skipped it would fail. -short runs shortSpecs on every other pair.
func TestDecodeSoftcapMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	// The cap is one pass over a block's scores in code every format
	// shares, so each spec takes one shape here (stride 6 over the six
	// shapes, each shape three specs); TestDecodeMatchesReference crosses
	// every spec with every shape without a cap. (Stride 2 took 29 s of
	// CI's attn run.)
	specs, stride := testSpecs, len(softcapShapes)
	if testing.Short() {
		specs, stride = shortSpecs, 4
	}
	if raceEnabled {
		specs, stride = shortSpecs, len(softcapShapes)
	}
	for pi, spec := range specs {
		for si, sh := range softcapShapes {
			if (pi+si)%stride != 0 {
				continue
			}
			f, ok := resolveOrSkip(t, spec, sh.D)
			if !ok {
				continue
			}
			nr := f.Residual
			all := []int{prefillRows + 4, nr + 7, 2*nr - 1, 3*nr + 1, 4*nr + 3}
			lens := []int{all[si%len(all)], all[(si+2)%len(all)], all[(si+4)%len(all)]}
			caches, _, _ := buildBatch(t, r, f, sh, lens)
			tqs := []int{1, 3}
			if sh.Group() <= 2 && (!testing.Short() || sh.Hq == 4 && sh.D <= 64) {
				tqs = append(tqs, prefillRows)
			}
			for ti, tq := range tqs {
				c := []float32{2, 8}[(pi+ti)%2]
				w := 0
				if ti == 1 {
					w = nr + 3
				}
				p := Params{Format: f, Shape: sh, Tq: tq, Window: w, Softcap: c}
				q := randQ(r, len(lens)*tq*sh.Hq*sh.D)
				name := fmt.Sprintf("%s Hq=%d Hkv=%d D=%d lens=%v Tq=%d W=%d cap=%g", spec, sh.Hq, sh.Hkv, sh.D, lens, tq, w, c)
				checkDecode(t, name, seqsOf(caches), p, q)
				capSeen(t, name, seqsOf(caches), p, q)
			}
		}
	}
}

// capSeen requires p's soft-cap to move the reference's output by at
// least 4 times the tolerance of some row: the cases above would catch a
// path that ignored the cap.
func capSeen(t *testing.T, name string, seqs []*Seq, p Params, q []float32) {
	t.Helper()
	capped, plain := nanSlice(len(q)), nanSlice(len(q))
	st, err := Reference(capped, q, seqs, p)
	if err != nil {
		t.Fatal(err)
	}
	p0 := p
	p0.Softcap = 0
	if _, err := Reference(plain, q, seqs, p0); err != nil {
		t.Fatal(err)
	}
	d, moved := p.Shape.D, 0.0
	for row := 0; row < len(q)/d; row++ {
		tol := decodeTol(st, p, row, 0)
		for c := range d {
			moved = max(moved, math.Abs(float64(capped[row*d+c]-plain[row*d+c]))/tol)
		}
	}
	if moved < 4 {
		t.Fatalf("%s: the cap moves the output by at most %.1f tolerances; the test would not see it skipped", name, moved)
	}
}

// TestSoftcapRefused: a negative, infinite or NaN cap is refused by Decode
// and Reference, and any cap by the bit-plane decode; a cap of 0 is off
// (the bits of no cap).
func TestSoftcapRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	sh := Shape{Hq: 4, Hkv: 2, D: 64}
	f := kv.MustResolve("int4", sh.D)
	caches, _, _ := buildBatch(t, r, f, sh, []int{100})
	q := randQ(r, sh.Hq*sh.D)
	out := nanSlice(len(q))
	for _, c := range []float64{-1, math.Inf(1), math.NaN()} {
		p := Params{Format: f, Shape: sh, Tq: 1, Softcap: float32(c)}
		if err := Decode(out, q, seqsOf(caches), p); err == nil {
			t.Errorf("Decode accepted soft-cap %g", c)
		}
		if _, err := Reference(out, q, seqsOf(caches), p); err == nil {
			t.Errorf("Reference accepted soft-cap %g", c)
		}
	}
	pf := kv.MustResolve("bw", sh.D)
	pc, err := NewPlaneCache(pf, sh)
	if err != nil {
		t.Fatal(err)
	}
	k, v := newKVGen(r, sh.Hkv, sh.D).tokens(40)
	if err := pc.Append(k, v); err != nil {
		t.Fatal(err)
	}
	err = DecodePlanes(out, q, []*PlaneSeq{&pc.PlaneSeq}, Params{Format: pf, Shape: sh, Tq: 1, Softcap: 50}, nil)
	if err == nil || !strings.Contains(err.Error(), "soft-capping") {
		t.Errorf("DecodePlanes with a soft-cap: err = %v, want a refusal naming soft-capping", err)
	}
	a, b := nanSlice(len(q)), nanSlice(len(q))
	if err := Decode(a, q, seqsOf(caches), Params{Format: f, Shape: sh, Tq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := Decode(b, q, seqsOf(caches), Params{Format: f, Shape: sh, Tq: 1, Softcap: 0}); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "cap 0", b, a)
}

// TestSoftcapKernels holds every level's soft-cap of a row (softcapRow:
// the AVX-512 or AVX2 kernel, or Go loops around the level's expSub) to
// c·math.Tanh(x/c) of the float32 quotient, within tanhRelErr of tanh
// (and the rounding of c·t), over a dense sweep across both of tanh32's
// ranges, the switch, tanhSweep's tiny and saturating arguments times c,
// far scores, subnormals, ±Inf and NaN; the levels' kernels bit for bit
// alike (NaN for NaN).
func TestSoftcapKernels(t *testing.T) {
	const c = 50
	var x []float32
	for i := -20000; i <= 20000; i++ {
		x = append(x, float32(float64(i)*0.01)) // scores in [-200, 200]: |x/c| up to 4
	}
	s := float32(c * tanhSeriesMax)
	for range 64 {
		s = math.Nextafter32(s, 0)
	}
	for range 128 {
		x = append(x, s, -s) // around the switch
		s = math.Nextafter32(s, 100)
	}
	for _, a := range tanhSweep()[800001:] { // past the dense sweep: the switch, tiny, saturating
		x = append(x, c*a)
	}
	x = append(x, float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e-30, 0, float32(math.NaN()), 1e-40, -1e-44, math.MaxFloat32, -math.MaxFloat32)
	for len(x)%vecLenTest != 0 {
		x = append(x, 1)
	}
	var first []float32 // the first level's kernel's results: the kernels agree bit for bit
	for _, k := range levelSets() {
		w := newWorker(Params{Format: kv.MustResolve("fp16", 64), Shape: Shape{Hq: 1, Hkv: 1, D: 64}, Tq: 1, Softcap: c}, k)
		got := append([]float32(nil), x...)
		w.softcapRow(got)
		worst := 0.0
		for i, s := range x {
			g := float64(got[i])
			if s != s {
				if g == g {
					t.Fatalf("%v: soft-cap of NaN = %g", k, g)
				}
				continue
			}
			want := c * math.Tanh(float64(s*(1.0/c)))
			e := math.Abs(g - want)
			if want != 0 {
				e /= math.Abs(want)
			}
			worst = max(worst, e)
			if g != g || e > tanhRelErr+eps32 {
				t.Fatalf("%v: soft-cap of %g = %g, want %g (relative error %.3g)", k, s, g, want, e)
			}
		}
		t.Logf("%v: worst relative error %.3g (%.2f eps)", k, worst, worst/eps32)
		if k.softcap == nil {
			continue
		}
		if first == nil {
			first = got
			continue
		}
		for i, g := range got {
			if f := first[i]; math.Float32bits(g) != math.Float32bits(f) && (g == g || f == f) {
				t.Fatalf("%v: soft-cap of %g = %g, the first kernel's %g", k, x[i], g, f)
			}
		}
	}
}

// vecLenTest is the row length unit of softcapRow (TileTokens).
const vecLenTest = TileTokens

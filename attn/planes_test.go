package attn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

// planeShapes cover GQA groups 1, 3, 4, 7 and 8 and head dims that are
// powers of two and not (the bit-plane format takes multiples of 32).
var planeShapes = []Shape{
	{Hq: 2, Hkv: 2, D: 64},  // MHA
	{Hq: 6, Hkv: 2, D: 128}, // GQA 3
	{Hq: 8, Hkv: 2, D: 128}, // GQA 4
	{Hq: 7, Hkv: 1, D: 64},  // GQA 7
	{Hq: 8, Hkv: 1, D: 256}, // GQA 8
	{Hq: 4, Hkv: 4, D: 96},  // MHA at Phi-3-mini's head dim
	{Hq: 4, Hkv: 1, D: 160}, // GQA 4 at a multiple of 32, not of 64
}

// tierMix names a way to set tier maps; the newest token stays High in
// every mix with evictions so that no query row loses every token.
type tierMix struct {
	name string
	set  func(r *rand.Rand, pos, l int) kv.Tier
}

var tierMixes = []tierMix{
	{"all-high", func(*rand.Rand, int, int) kv.Tier { return kv.High }},
	{"all-medium", func(*rand.Rand, int, int) kv.Tier { return kv.Medium }},
	{"all-low", func(*rand.Rand, int, int) kv.Tier { return kv.Low }},
	{"high-medium-low", func(r *rand.Rand, _, _ int) kv.Tier { return kv.Tier(r.IntN(3)) }},
	{"mixed-with-evicted", func(r *rand.Rand, pos, l int) kv.Tier {
		if pos >= l-3 { // each query row (Tq <= 3) keeps its own token
			return kv.High
		}
		return kv.Tier(r.IntN(4))
	}},
	{"high-evicted", func(r *rand.Rand, pos, l int) kv.Tier {
		if pos >= l-3 || r.IntN(2) == 0 {
			return kv.High
		}
		return kv.Evicted
	}},
}

// buildPlanes fills one PlaneCache per length in uneven chunks and returns
// them with the raw K/V per sequence.
func buildPlanes(t testing.TB, r *rand.Rand, f kv.Format, sh Shape, lens []int) ([]*PlaneCache, [][]float32, [][]float32) {
	var caches []*PlaneCache
	var keys, vals [][]float32
	for _, l := range lens {
		c, err := NewPlaneCache(f, sh)
		if err != nil {
			t.Fatal(err)
		}
		g := newKVGen(r, sh.Hkv, sh.D)
		var ks, vs []float32
		for done := 0; done < l; {
			n := min(l-done, 1+r.IntN(100))
			k, v := g.tokens(n)
			if err := c.Append(k, v); err != nil {
				t.Fatal(err)
			}
			ks, vs = append(ks, k...), append(vs, v...)
			done += n
		}
		caches = append(caches, c)
		keys, vals = append(keys, ks), append(vals, vs)
	}
	return caches, keys, vals
}

func planeSeqsOf(cs []*PlaneCache) []*PlaneSeq {
	s := make([]*PlaneSeq, len(cs))
	for i, c := range cs {
		s[i] = &c.PlaneSeq
	}
	return s
}

func newMass(seqs []*PlaneSeq, hkv int) [][][]float32 {
	m := make([][][]float32, len(seqs))
	for b, s := range seqs {
		m[b] = make([][]float32, hkv)
		for h := range m[b] {
			m[b][h] = make([]float32, s.Len)
		}
	}
	return m
}

// planeTol bounds |DecodePlanes - ReferencePlanes| for one output row from
// the fast path's float32 steps, on the same rebuilt values:
//   - the query is scaled in float32 and each score is a D-term float32 dot
//     with four partial sums: (D+4)·eps·scale·ScoreMag;
//   - a score error δ moves each probability by a factor within e^{±2δ};
//   - the weighted V sums add PlaneAccumBlock terms per block and one term
//     per block, 2·eps relative each: (PlaneAccumBlock + L/PlaneAccumBlock
//   - 32)·2·eps·MaxAbsV;
//   - the float32 exp is within expRelErr of e^x: 2·expRelErr·MaxAbsV.
func planeTol(st PlaneRefStats, p Params, row int) (out, score float64) {
	d := float64(p.Shape.D)
	score = float64(p.scale()) * (d + 4) * eps32 * st.ScoreMag[row]
	acc := (PlaneAccumBlock+float64(st.MaxL)/PlaneAccumBlock+32)*2*eps32 + 2*expRelErr
	return st.MaxAbsV * (2.5*score + acc), score
}

func comparePlanes(t *testing.T, name string, p Params, got, want []float32, st PlaneRefStats) {
	t.Helper()
	d := p.Shape.D
	for row := 0; row < len(got)/d; row++ {
		tol, _ := planeTol(st, p, row)
		for c := 0; c < d; c++ {
			g, w := got[row*d+c], want[row*d+c]
			if g != g || math.Abs(float64(g-w)) > tol {
				t.Fatalf("%s: row %d channel %d: got %g, want %g (tol %.3g)", name, row, c, g, w, tol)
			}
		}
	}
}

// compareMass checks the accumulated attention mass against the reference:
// per token within R·(4·δmax + (n+4)·eps) (probabilities and their
// denominators carry the score error twice and n-term sums), and per KV
// head the total equals the number of query rows whose token is sampled
// (Params.MassEvery; each row sums to 1).
func compareMass(t *testing.T, name string, p Params, mass [][][]float32, st PlaneRefStats, seqs []*PlaneSeq) {
	t.Helper()
	g := p.Shape.Group()
	var dmax float64
	for row := range st.ScoreMag {
		_, s := planeTol(st, p, row)
		dmax = max(dmax, s)
	}
	for b, s := range seqs {
		sampled := 0 // query tokens whose rows add to the mass (Params.MassEvery)
		for i := range p.Tq {
			if kv.MassSampled(s.Len-p.Tq+i, p.MassEvery) {
				sampled++
			}
		}
		rows := float64(g * sampled)
		tol := float64(g*p.Tq) * (4*dmax + float64(s.Len+4)*eps32 + 2*expRelErr)
		for h := range mass[b] {
			var sum float64
			for tok := 0; tok < s.Len; tok++ {
				got, want := float64(mass[b][h][tok]), st.Mass[b][h][tok]
				if got != got || math.Abs(got-want) > tol {
					t.Fatalf("%s: seq %d head %d token %d: mass %g, want %g (tol %.3g)", name, b, h, tok, got, want, tol)
				}
				if s.Tiers[h][tok] == kv.Evicted && got != 0 {
					t.Fatalf("%s: evicted token %d has mass %g", name, tok, got)
				}
				sum += got
			}
			if math.Abs(sum-rows) > rows*float64(s.Len+8)*eps32*4+tol {
				t.Fatalf("%s: seq %d head %d: total mass %g, want %g (rows)", name, b, h, sum, rows)
			}
		}
	}
}

// TestDecodePlanesMatchesReference runs every tier mix on every shape with
// ragged lengths (not multiples of the block), two sequences of different
// lengths per batch, 1 or 3 query tokens, fp16 and bf16, default fills,
// truncation and the filter off.
func TestDecodePlanesMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	specs := []string{"bw", "bw:bf16", "bw:trunc:nofilter:blk32", "bw:a8=0xc0:a4=0x400"}
	for si, spec := range specs {
		for shi, sh := range planeShapes {
			f, err := kv.MustParseSpec(spec).Resolve(sh.D)
			if err != nil {
				t.Fatal(err)
			}
			nr := f.Residual
			all := []int{3, nr - 1, nr + 1, 3*nr + 5, 5*nr - 1, 7}
			lens := []int{all[(si+shi)%len(all)], all[(si+shi+2)%len(all)]}
			caches, _, _ := buildPlanes(t, r, f, sh, lens)
			seqs := planeSeqsOf(caches)
			for _, mix := range tierMixes {
				for _, s := range seqs {
					for h := range s.Tiers {
						for pos := range s.Len {
							s.Tiers[h][pos] = mix.set(r, pos, s.Len)
						}
					}
				}
				for _, c := range []struct{ tq, every int }{{1, 1}, {3, 1}, {3, 2}} {
					tq := c.tq
					p := Params{Format: f, Shape: sh, Tq: tq, MassEvery: c.every}
					n := len(lens) * tq * sh.Hq * sh.D
					q := randQ(r, n)
					want := nanSlice(n)
					st, err := ReferencePlanes(want, q, seqs, p)
					if err != nil {
						t.Fatal(err)
					}
					got := nanSlice(n)
					mass := newMass(seqs, sh.Hkv)
					if err := DecodePlanes(got, q, seqs, p, mass); err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("%s %s Hq=%d Hkv=%d D=%d lens=%v Tq=%d k=%d", spec, mix.name, sh.Hq, sh.Hkv, sh.D, lens, tq, c.every)
					comparePlanes(t, name, p, got, want, st)
					compareMass(t, name, p, mass, st, seqs)
				}
			}
		}
	}
}

// TestDecodePlanesAllHighIsFP16: with every token High, the bit-plane
// decode equals the fp16 cache's decode (attn.Decode over format fp16, same
// K and V) within the sum of both paths' float32 tolerances, and the two
// float64 references agree to float64 rounding.
func TestDecodePlanesAllHighIsFP16(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	fb := kv.MustResolve("bw", sh.D)
	ff := kv.MustResolve("fp16:res64", sh.D)
	lens := []int{300, 77}
	pcs, keys, vals := buildPlanes(t, r, fb, sh, lens)
	var fcs []*Cache
	for b := range lens {
		c, err := NewCache(ff, sh)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Append(keys[b], vals[b]); err != nil {
			t.Fatal(err)
		}
		fcs = append(fcs, c)
	}
	for _, tq := range []int{1, 2} {
		n := len(lens) * tq * sh.Hq * sh.D
		q := randQ(r, n)
		pb, pf := Params{Format: fb, Shape: sh, Tq: tq}, Params{Format: ff, Shape: sh, Tq: tq}
		wantB, wantF := nanSlice(n), nanSlice(n)
		stB, err := ReferencePlanes(wantB, q, planeSeqsOf(pcs), pb)
		if err != nil {
			t.Fatal(err)
		}
		stF, err := Reference(wantF, q, seqsOf(fcs), pf)
		if err != nil {
			t.Fatal(err)
		}
		gotB, gotF := nanSlice(n), nanSlice(n)
		if err := DecodePlanes(gotB, q, planeSeqsOf(pcs), pb, nil); err != nil {
			t.Fatal(err)
		}
		if err := Decode(gotF, q, seqsOf(fcs), pf); err != nil {
			t.Fatal(err)
		}
		d := sh.D
		for row := 0; row < n/d; row++ {
			tolB, _ := planeTol(stB, pb, row)
			tol := tolB + decodeTol(stF, pf, row, 0)
			for c := 0; c < d; c++ {
				i := row*d + c
				if math.Abs(float64(wantB[i]-wantF[i])) > 1e-6*math.Abs(float64(wantF[i]))+1e-7 {
					t.Fatalf("Tq=%d row %d ch %d: references differ: bw %g, fp16 %g", tq, row, c, wantB[i], wantF[i])
				}
				if gotB[i] != gotB[i] || math.Abs(float64(gotB[i]-gotF[i])) > tol {
					t.Fatalf("Tq=%d row %d ch %d: bw all-high %g, fp16 decode %g (tol %.3g)", tq, row, c, gotB[i], gotF[i], tol)
				}
			}
		}
	}
}

// TestDecodePlanesDeterministic: the same inputs give the same bits with 1
// and with several threads, and on repeated runs.
func TestDecodePlanesDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	f := kv.MustResolve("bw", sh.D)
	caches, _, _ := buildPlanes(t, r, f, sh, []int{500, 130, 64})
	seqs := planeSeqsOf(caches)
	for _, s := range seqs {
		for h := range s.Tiers {
			for pos := range s.Len - 1 {
				s.Tiers[h][pos] = kv.Tier(r.IntN(4))
			}
		}
	}
	p := Params{Format: f, Shape: sh, Tq: 1}
	n := len(seqs) * sh.Hq * sh.D
	q := randQ(r, n)
	run := func(procs int) ([]float32, [][][]float32) {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		out, mass := nanSlice(n), newMass(seqs, sh.Hkv)
		if err := DecodePlanes(out, q, seqs, p, mass); err != nil {
			t.Fatal(err)
		}
		return out, mass
	}
	o1, m1 := run(1)
	for _, procs := range []int{1, 4} {
		o2, m2 := run(procs)
		for i := range o1 {
			if math.Float32bits(o1[i]) != math.Float32bits(o2[i]) {
				t.Fatalf("GOMAXPROCS %d: output %d differs: %g vs %g", procs, i, o1[i], o2[i])
			}
		}
		for b := range m1 {
			for h := range m1[b] {
				for i := range m1[b][h] {
					if math.Float32bits(m1[b][h][i]) != math.Float32bits(m2[b][h][i]) {
						t.Fatalf("GOMAXPROCS %d: mass differs at %d/%d/%d", procs, b, h, i)
					}
				}
			}
		}
	}
}

func TestTierIndex(t *testing.T) {
	tiers := []kv.Tier{kv.Low, kv.High, kv.Evicted, kv.Medium, kv.High, kv.Low}
	idx, counts := TierIndex(tiers, nil)
	want := []int32{1, 4, 3, 0, 5}
	if fmt.Sprint(idx) != fmt.Sprint(want) || counts != [kv.NumTiers]int{2, 1, 2, 1} {
		t.Errorf("TierIndex = %v %v, want %v [2 1 2 1]", idx, counts, want)
	}
}

func TestDecodePlanesErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	sh := Shape{Hq: 2, Hkv: 1, D: 64}
	f := kv.MustResolve("bw", sh.D)
	caches, _, _ := buildPlanes(t, r, f, sh, []int{10})
	seqs := planeSeqsOf(caches)
	p := Params{Format: f, Shape: sh, Tq: 1}
	q, out := randQ(r, sh.Hq*sh.D), nanSlice(sh.Hq*sh.D)
	for i := range seqs[0].Tiers[0] {
		seqs[0].Tiers[0][i] = kv.Evicted
	}
	if err := DecodePlanes(out, q, seqs, p, nil); !errors.Is(err, ErrAllEvicted) {
		t.Errorf("all evicted: %v, want ErrAllEvicted", err)
	}
	seqs[0].Tiers[0] = seqs[0].Tiers[0][:5]
	if err := DecodePlanes(out, q, seqs, p, nil); err == nil {
		t.Error("short tier map: no error")
	}
	if err := DecodePlanes(out, q, seqs, Params{Format: kv.MustResolve("int4", 64), Shape: sh, Tq: 1}, nil); err == nil {
		t.Error("int4 format: no error")
	}
	if _, err := NewPlaneCache(kv.MustResolve("fp16", 64), sh); err == nil {
		t.Error("NewPlaneCache(fp16): no error")
	}
}

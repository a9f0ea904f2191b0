package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/kv"
)

const eps32 = 1.0 / (1 << 23)

// kvGen draws K and V that look like real caches: keys with a per-channel
// offset and a few outlier channels (x10..x50), values near unit scale.
type kvGen struct {
	kScale, kOff []float64
	r            *rand.Rand
}

func newKVGen(r *rand.Rand, hkv, d int) *kvGen {
	g := &kvGen{r: r, kScale: make([]float64, hkv*d), kOff: make([]float64, hkv*d)}
	for i := range g.kScale {
		g.kScale[i] = 0.5 + r.Float64()
		g.kOff[i] = 0.5 * r.NormFloat64()
		if r.IntN(16) == 0 {
			g.kScale[i] *= 10 + 40*r.Float64()
		}
	}
	return g
}

func (g *kvGen) tokens(n int) (k, v []float32) {
	m := len(g.kScale)
	k, v = make([]float32, n*m), make([]float32, n*m)
	for t := 0; t < n; t++ {
		for i := 0; i < m; i++ {
			k[t*m+i] = float32(g.kOff[i] + g.kScale[i]*g.r.NormFloat64())
			v[t*m+i] = float32(g.r.NormFloat64())
		}
	}
	return k, v
}

// buildBatch makes one cache per length, filled in uneven chunks, and
// returns the caches and the raw (unquantized) K/V per sequence.
func buildBatch(t testing.TB, r *rand.Rand, f kv.Format, sh Shape, lens []int) ([]*Cache, [][]float32, [][]float32) {
	var caches []*Cache
	var keys, vals [][]float32
	for _, l := range lens {
		c, err := NewCache(f, sh)
		if err != nil {
			t.Fatal(err)
		}
		g := newKVGen(r, sh.Hkv, sh.D)
		var ks, vs []float32
		for done := 0; done < l; {
			n := min(l-done, 1+r.IntN(200))
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

func seqsOf(cs []*Cache) []*Seq {
	s := make([]*Seq, len(cs))
	for i, c := range cs {
		s[i] = &c.Seq
	}
	return s
}

func randQ(r *rand.Rand, n int) []float32 {
	q := make([]float32, n)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	return q
}

func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// decodeTol is the bound on |Decode - Reference| for one output row,
// derived from the fast path's float32 steps:
//   - a score folds scales and zeros (KC: Σ(q·s)·code + Σq·z; KT:
//     s·Σq·code + z·Σq), a D-term float32 sum of terms bounded by
//     |q|·(|x̂| + 2|z|), whose sum over channels the reference returns as
//     ScoreMag: (D+4)·eps·ScoreMag·scale (the query is rounded to float32
//     and rotated in float32 too, (log2 D + 2)·eps·ScoreMag·scale more);
//   - a score error δ moves each probability by a factor within e^{±2δ};
//   - the weighted V sums add Nr terms per block and one term per block,
//     each within 2·eps relative (value fold p·s·code + p·z), so
//     (Nr + L/Nr + 32)·2·eps·MaxAbsV; the output rotation adds
//     log2(D)·sqrt(D)·2·eps·MaxAbsV.
func decodeTol(st RefStats, p Params, row int) float64 {
	d := float64(p.Shape.D)
	scoreTol := float64(p.scale()) * (d + 4 + math.Log2(d) + 2) * eps32 * st.ScoreMag[row]
	nr := float64(p.Format.Residual)
	acc := (nr + float64(st.MaxL)/nr + 32) * 2 * eps32
	if p.Format.Rotate {
		acc += math.Log2(d) * math.Sqrt(d) * 2 * eps32
	}
	return st.MaxAbsV * (2.5*scoreTol + acc)
}

func compareDecode(t *testing.T, name string, p Params, q, got, want []float32, st RefStats) {
	t.Helper()
	d := p.Shape.D
	for row := 0; row < len(got)/d; row++ {
		tol := decodeTol(st, p, row)
		for c := 0; c < d; c++ {
			g, w := got[row*d+c], want[row*d+c]
			if g != g || math.Abs(float64(g-w)) > tol {
				t.Fatalf("%s: row %d channel %d: got %g, want %g (tol %.3g)", name, row, c, g, w, tol)
			}
		}
	}
}

var testSpecs = []string{"fp16", "bf16", "fp8e4m3", "fp8e5m2", "int8", "int4", "int4:kt128", "int4:kt32:v32",
	"int2", "int2:kc32:v32", "k8v4", "k4v2", "int4:ktd:rot", "int4:rot", "int4:kc64:res64"}

var testShapes = []Shape{
	{Hq: 4, Hkv: 4, D: 64},   // MHA
	{Hq: 8, Hkv: 2, D: 128},  // GQA 4
	{Hq: 8, Hkv: 1, D: 128},  // MQA 8
	{Hq: 16, Hkv: 1, D: 64},  // MQA 16
	{Hq: 6, Hkv: 2, D: 256},  // GQA 3
	{Hq: 12, Hkv: 2, D: 128}, // GQA 6 (not a power of two)
}

// TestDecodeMatchesReference runs every format on every shape class with
// ragged lengths: residual of 0, 1, Nr-1 tokens after 0, 1 and 3 packed
// blocks, several lengths in one batch, and 1 or 3 query tokens.
func TestDecodeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, spec := range testSpecs {
		for si, sh := range testShapes {
			f, err := kv.MustParseSpec(spec).Resolve(sh.D)
			if err != nil {
				t.Fatal(err)
			}
			nr := f.Residual
			// Keep the test quick: every shape sees a different slice of lengths.
			all := []int{3, nr - 1, nr, nr + 1, 2*nr - 1, 3 * nr, 3*nr + 1, 4*nr - 1}
			lens := []int{all[si%len(all)], all[(si+3)%len(all)], all[(si+5)%len(all)]}
			caches, _, _ := buildBatch(t, r, f, sh, lens)
			for _, tq := range []int{1, 3} {
				p := Params{Format: f, Shape: sh, Tq: tq}
				n := len(lens) * tq * sh.Hq * sh.D
				q := randQ(r, n)
				want := nanSlice(n)
				st, err := Reference(want, q, seqsOf(caches), p)
				if err != nil {
					t.Fatal(err)
				}
				got := nanSlice(n)
				if err := Decode(got, q, seqsOf(caches), p); err != nil {
					t.Fatal(err)
				}
				compareDecode(t, fmt.Sprintf("%s Hq=%d Hkv=%d D=%d lens=%v Tq=%d", spec, sh.Hq, sh.Hkv, sh.D, lens, tq), p, q, got, want, st)
			}
		}
	}
}

// TestDecodeLongSplits covers sequences longer than one split, so the
// log-sum-exp merge runs, and checks that results are bitwise repeatable.
func TestDecodeLongSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	for _, spec := range []string{"int4", "int2:kc32:v32", "fp16"} {
		f := kv.MustResolve(spec, sh.D)
		lens := []int{2*SplitTokens + 77, SplitTokens + f.Residual, 5}
		caches, _, _ := buildBatch(t, r, f, sh, lens)
		p := Params{Format: f, Shape: sh, Tq: 2}
		n := len(lens) * p.Tq * sh.Hq * sh.D
		q := randQ(r, n)
		want := nanSlice(n)
		st, err := Reference(want, q, seqsOf(caches), p)
		if err != nil {
			t.Fatal(err)
		}
		got := nanSlice(n)
		if err := Decode(got, q, seqsOf(caches), p); err != nil {
			t.Fatal(err)
		}
		compareDecode(t, spec+" long", p, q, got, want, st)
		again := nanSlice(n)
		if err := Decode(again, q, seqsOf(caches), p); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(again[i]) {
				t.Fatalf("%s: element %d differs between runs: %g vs %g", spec, i, got[i], again[i])
			}
		}
	}
}

// TestCausalMask: with Tq query tokens over a tiny cache, each query token
// must see exactly the tokens up to its own position; an off-by-one would
// move the output by a large fraction.
func TestCausalMask(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	sh := Shape{Hq: 2, Hkv: 1, D: 64}
	f := kv.MustResolve("fp16", sh.D)
	caches, keys, vals := buildBatch(t, r, f, sh, []int{4})
	p := Params{Format: f, Shape: sh, Tq: 4}
	q := randQ(r, 4*sh.Hq*sh.D)
	got := nanSlice(len(q))
	if err := Decode(got, q, seqsOf(caches), p); err != nil {
		t.Fatal(err)
	}
	// Query token 0 sees only token 0: its output is V[0] (fp16-rounded).
	for c := 0; c < sh.D; c++ {
		if math.Abs(float64(got[c]-vals[0][c])) > 1e-3 {
			t.Fatalf("query 0 channel %d: got %g, want V[0] = %g", c, got[c], vals[0][c])
		}
	}
	exact := nanSlice(len(q))
	ExactReference(exact, q, keys, vals, sh, 4, 0)
	for i := range got {
		if math.Abs(float64(got[i]-exact[i])) > 2e-3 {
			t.Fatalf("element %d: got %g, exact %g", i, got[i], exact[i])
		}
	}
}

// TestRotationPreservesAttention: with rotation on, fp16 storage gives the
// same attention as without (up to fp16 rounding of the stored values).
func TestRotationPreservesAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	sh := Shape{Hq: 4, Hkv: 2, D: 128}
	lens := []int{300}
	caches, keys, vals := buildBatch(t, r, kv.MustResolve("fp16:rot", sh.D), sh, lens)
	p := Params{Format: kv.MustResolve("fp16:rot", sh.D), Shape: sh, Tq: 1}
	q := randQ(r, sh.Hq*sh.D)
	got := nanSlice(len(q))
	if err := Decode(got, q, seqsOf(caches), p); err != nil {
		t.Fatal(err)
	}
	exact := nanSlice(len(q))
	ExactReference(exact, q, keys, vals, sh, 1, 0)
	for i := range got {
		if math.Abs(float64(got[i]-exact[i])) > 5e-3 {
			t.Fatalf("element %d: got %g, exact %g", i, got[i], exact[i])
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	sh := Shape{Hq: 6, Hkv: 4, D: 128}
	if err := sh.Validate(); err == nil {
		t.Error("Hq=6 Hkv=4 accepted")
	}
	if err := (Shape{Hq: 4, Hkv: 2, D: 96}).Validate(); err == nil {
		t.Error("D=96 accepted")
	}
	f := kv.MustResolve("int4", 128)
	c, _ := NewCache(f, Shape{Hq: 4, Hkv: 2, D: 128})
	p := Params{Format: f, Shape: c.Shape, Tq: 1}
	if err := Decode(make([]float32, 512), make([]float32, 512), []*Seq{&c.Seq}, p); err == nil {
		t.Error("decode over an empty cache accepted")
	}
	if err := c.Append(make([]float32, 10), make([]float32, 10)); err == nil {
		t.Error("Append of a partial token accepted")
	}
}

func TestDecodeF32(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	sh := Shape{Hq: 6, Hkv: 2, D: 64}
	lens := []int{2, 200, 57}
	_, keys, vals := buildBatch(t, r, kv.MustResolve("fp16", sh.D), sh, lens)
	for _, tq := range []int{1, 2} {
		q := randQ(r, len(lens)*tq*sh.Hq*sh.D)
		got, want := nanSlice(len(q)), nanSlice(len(q))
		if err := DecodeF32(got, q, keys, vals, sh, tq, 0); err != nil {
			t.Fatal(err)
		}
		ExactReference(want, q, keys, vals, sh, tq, 0)
		for i := range got {
			// float32 sums of at most 200 terms of magnitude <= ~5: 1e-4 is 100x that rounding.
			if got[i] != got[i] || math.Abs(float64(got[i]-want[i])) > 1e-4 {
				t.Fatalf("Tq=%d element %d: got %g want %g", tq, i, got[i], want[i])
			}
		}
	}
}

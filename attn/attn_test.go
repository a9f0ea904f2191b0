package attn

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
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
//   - with the int8 dot products of integer keys (VNNI), qTol more: the
//     query's quantization step (see queryQuantTol);
//   - a score error δ moves each probability by a factor within e^{±2δ};
//   - the weighted V sums add Nr terms per block and one term per block,
//     each within 2·eps relative (value fold p·s·code + p·z), so
//     (Nr + L/Nr + 32)·2·eps·MaxAbsV; the float32 exp is within expRelErr
//     of e^x, 2·expRelErr·MaxAbsV more; the output rotation adds
//     log2(D)·sqrt(D)·2·eps·MaxAbsV;
//   - soft-capping (Params.Softcap c) passes a score's error on times
//     c·tanh's slope, at most 1, and adds tanh32's own, tanhRelErr·c, and
//     the rounding of s/c, at most max|x·sech²x|·eps·c < eps·c.
func decodeTol(st RefStats, p Params, row int, qTol float64) float64 {
	d := float64(p.Shape.D)
	scoreTol := float64(p.scale())*(d+4+math.Log2(d)+2)*eps32*st.ScoreMag[row] + qTol
	if c := float64(p.Softcap); c != 0 {
		scoreTol += (tanhRelErr + eps32) * c
	}
	nr := float64(p.Format.Residual)
	acc := (nr+float64(st.MaxL)/nr+32)*2*eps32 + 2*expRelErr
	if p.Format.Rotate {
		acc += math.Log2(d) * math.Sqrt(d) * 2 * eps32
	}
	return st.MaxAbsV * (2.5*scoreTol + acc)
}

// queryQuantTol returns, per output row, the bound of the score error
// that quantizing the query to int8 (15 bits for int8 keys) adds on the
// VNNI path of integer keys (0 for the float paths): the largest over the
// row's tokens of (a/2)·Σ_c code_c, with a the step the path picks for the row and
// the token's key group (KC: the query times the group's scales; KT: the
// query, times the token's scale s_t), computed with the worker's own
// query loading so that a is the very step Decode uses.
func queryQuantTol(k *kernels, p Params, seqs []*Seq, q []float32) []float64 {
	f, sh := p.Format, p.Shape
	d, nr, g := f.D, f.Residual, sh.Group()
	tol := make([]float64, len(q)/d)
	lay := f.K
	if !k.vnni || !lay.Elem.IsInt() || (lay.Scaling == kv.PerToken && lay.Group != d) {
		return tol
	}
	w := newWorker(p, &genericVNNIKernels)
	qs, qi, lo := make([]float32, d), make([]int8, d), make([]int8, d)
	quant := func(q []float32) float64 { // the path's step
		if lay.Elem == kv.Int8 {
			return float64(splitQuery(qi, lo, q))
		}
		return float64(quantizeQuery(qi, q))
	}
	for b, s := range seqs {
		for h := 0; h < sh.Hkv; h++ {
			w.loadQueries(q, b, h)
			for _, blk := range s.Blocks {
				base := blk[h*f.BlockBytes():]
				for r := 0; r < w.r; r++ {
					row := (b*p.Tq+r/g)*sh.Hq + h*g + r%g
					qr := w.q[r*d : (r+1)*d]
					var a float64
					for t := 0; t < nr; t++ {
						step := 0.0
						if lay.Scaling == kv.PerChannel {
							if t%lay.Group == 0 {
								for c := range qs {
									sc, zc := lay.Param(base, lay.ParamIndex(t, c))
									w.gs[c], w.gz[c] = fp16ToF32[sc], fp16ToF32[zc]
								}
								for c := range qs {
									qs[c] = qr[c] * w.gs[c]
								}
								a = quant(qs)
							}
							step = a
						} else {
							if t == 0 {
								a = quant(qr)
							}
							sc, _ := lay.Param(base, t)
							step = a * float64(fp16ToF32[sc])
						}
						var codes float64
						for c := 0; c < d; c++ {
							codes += float64(lay.Code(base, t, c))
						}
						tol[row] = max(tol[row], step/2*codes*(1+4*eps32))
					}
				}
			}
		}
	}
	return tol
}

// valueQuantTol returns, per output row, the bound of the error that the
// integer PV of the VNNI path (intValues) adds to the output: per run of
// at most PVMaxTokens tokens, each row's weights w_t = p_t·s_t are rounded
// to steps Δ = max w/32767, moving the run's sum by at most
// (Δ/2)·Σ_t code_t per channel. Δ <= p_max·s_max/32767 with p_max <= the
// run's share of the denominator l, so over all runs the output moves by
// at most max over runs of s_max·max_c Σ_t code_tc / 65534 (0 where the
// float PV runs).
//
// With u8 weights (pvU8, int4 and int2 values on AVX-512 VBMI: intValuesU8)
// the step is Δ = max w/255 and the rounding times the codes' midpoint m
// goes to the zeros' sums, so the run moves by at most (Δ/2)·Σ_t |code_t - m|:
// s_max·max_c Σ_t |code_tc - m| / 510 over the output, plus the float32
// rounding of that correction (m·Σ_t of residues below Δ/2, each within
// eps of w_t, summed in 16 lanes): m·s_max·eps·(2 + PVMaxTokens·(PVMaxTokens/16+4)/510).
//
// Where softmaxU8 runs (the exp fused with the u8 weights), each of those
// blocks' probabilities is p_t·(1+ε_t), |ε_t| <= ε = expU8RelErr, in the
// numerator's weights, the zeros' sums and the denominator alike, so the
// output is the average of the V rows under weights that differ from the
// exact ones by a factor within [(1-ε)/(1+ε), (1+ε)/(1-ε)]: it moves by
// at most 2ε/(1-ε)·max|v| (st.MaxAbsV). The step then comes from the
// largest p·s, up to (1+ε)·p_max·s_max: the rounding term takes (1+ε). The
// correction is mid·(Σ w - Δ·Σ wq): Σ w's float32 sum (n/16 + 4 roundings
// of partial sums up to Σ w), Δ·Σ wq's and the difference's roundings
// (each within eps of Σ w + n·Δ/2), over l: m·s_max·eps·(PVMaxTokens/16 + 8
// + PVMaxTokens/255)·(1+ε).
func valueQuantTol(k *kernels, p Params, seqs []*Seq, st RefStats) []float64 {
	f, sh := p.Format, p.Shape
	d, nr, g := f.D, f.Residual, sh.Group()
	tol := make([]float64, len(seqs)*p.Tq*sh.Hq)
	lay := f.V
	if k.pvS16 == nil || !lay.Elem.IsInt() {
		return tol
	}
	u8 := k.pvU8 != nil && (lay.Elem == kv.Int4 || lay.Elem == kv.Int2) && lay.Group >= pvI4MinGroup
	mid := float64(int(1)<<lay.Elem.Bits()-1) / 2
	fused := u8 && k.softmaxU8 != nil
	expTol, grow := 0.0, 1.0
	if fused {
		expTol, grow = 2*expU8RelErr/(1-expU8RelErr)*st.MaxAbsV, 1+expU8RelErr
	}
	for b, s := range seqs {
		for h := 0; h < sh.Hkv; h++ {
			var worst float64
			for _, blk := range s.Blocks {
				base := blk[h*f.BlockBytes()+f.K.Bytes:]
				for t0 := 0; t0 < nr; t0 += PVMaxTokens {
					var smax float64
					colSum := make([]float64, d)
					for t := t0; t < min(nr, t0+PVMaxTokens); t++ {
						for c := 0; c < d; c++ {
							sc, _ := lay.Param(base, lay.ParamIndex(t, c))
							smax = max(smax, float64(fp16ToF32[sc]))
							code := float64(lay.Code(base, t, c))
							if u8 {
								code = math.Abs(code - mid)
							}
							colSum[c] += code
						}
					}
					for _, cs := range colSum {
						switch {
						case fused:
							fix := mid * smax * eps32 * (PVMaxTokens/16 + 8 + PVMaxTokens/255.0) * grow
							worst = max(worst, smax*cs/510*(1+1e-4)*grow+fix+expTol)
						case u8:
							fix := mid * smax * eps32 * (2 + PVMaxTokens*(PVMaxTokens/16+4)/510.0)
							worst = max(worst, smax*cs/510*(1+1e-4)+fix)
						default:
							worst = max(worst, smax*cs/65534*(1+1e-4))
						}
					}
				}
			}
			for i := 0; i < p.Tq; i++ {
				for j := 0; j < g; j++ {
					tol[(b*p.Tq+i)*sh.Hq+h*g+j] = worst
				}
			}
		}
	}
	return tol
}

// quantizeQuery is foldQuery's quantization in float64 terms: the step
// a = max|q|/127 and qi = rint(q/a).
func quantizeQuery(qi []int8, q []float32) float32 {
	var amax float32
	for _, x := range q {
		amax = max(amax, abs32(x))
	}
	if !(amax > 0) {
		clear(qi)
		return 0
	}
	inv := 127 / amax
	for c, x := range q {
		qi[c] = int8(math.RoundToEven(float64(x * inv)))
	}
	return amax / 127
}

func compareDecode(t *testing.T, name string, p Params, q, got, want []float32, st RefStats, qTol, vTol []float64) {
	t.Helper()
	d := p.Shape.D
	for row := 0; row < len(got)/d; row++ {
		tol := decodeTol(st, p, row, qTol[row]) + vTol[row]
		for c := 0; c < d; c++ {
			g, w := got[row*d+c], want[row*d+c]
			if g != g || math.Abs(float64(g-w)) > tol {
				t.Fatalf("%s: row %d channel %d: got %g, want %g (tol %.3g)", name, row, c, g, w, tol)
			}
		}
	}
}

// allKernelSets returns every kernel set this machine runs plus the
// pure-Go int8-query set, generic first.
func allKernelSets() []*kernels {
	return append([]*kernels{&genericKernels, &genericVNNIKernels, &genericU8Kernels}, levelSets()[1:]...)
}

// withKernels runs fn with the decode using kernel set k.
func withKernels(k *kernels, fn func()) {
	testKernels = k
	defer func() { testKernels = nil }()
	fn()
}

// checkDecode runs Decode with every kernel set against one reference.
func checkDecode(t *testing.T, name string, seqs []*Seq, p Params, q []float32) {
	t.Helper()
	n := len(q)
	want := nanSlice(n)
	st, err := Reference(want, q, seqs, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range allKernelSets() {
		got := nanSlice(n)
		withKernels(k, func() { err = Decode(got, q, seqs, p) })
		if err != nil {
			t.Fatal(err)
		}
		compareDecode(t, fmt.Sprintf("%v %s", k, name), p, q, got, want, st, queryQuantTol(k, p, seqs, q), valueQuantTol(k, p, seqs, st))
	}
}

var testSpecs = []string{"fp16", "bf16", "fp8e4m3", "fp8e5m2", "int8", "int4", "int4:kt128", "int4:kt32:v32",
	"int2", "int2:kc32:v32", "int2:ktd", "k8v4", "k4v2", "int4:ktd:rot", "int4:rot", "int4:kc64:res64", "k4v16", "k16v2:v64"}

// shortSpecs is the -short subset: one of each path (float K/V, KC, KT
// with one and several groups, int2, mixed widths, rotation).
var shortSpecs = []string{"fp16", "bf16", "int8", "int4", "int4:kt32:v32", "int2:kc32:v32", "k4v2", "int4:ktd:rot"}

var testShapes = []Shape{
	{Hq: 4, Hkv: 4, D: 64},   // MHA
	{Hq: 8, Hkv: 2, D: 128},  // GQA 4
	{Hq: 8, Hkv: 1, D: 128},  // MQA 8
	{Hq: 16, Hkv: 1, D: 64},  // MQA 16
	{Hq: 6, Hkv: 2, D: 256},  // GQA 3
	{Hq: 12, Hkv: 2, D: 128}, // GQA 6 (not a power of two)
	{Hq: 4, Hkv: 2, D: 64},   // GQA 2
	{Hq: 14, Hkv: 2, D: 128}, // GQA 7
	{Hq: 4, Hkv: 4, D: 96},   // MHA at Phi-3-mini's head dim (not a multiple of 64)
	{Hq: 8, Hkv: 2, D: 96},   // GQA 4 at D = 96
	{Hq: 6, Hkv: 2, D: 80},   // GQA 3 at Phi-2's head dim (not a multiple of 32)
	{Hq: 2, Hkv: 2, D: 80},   // MHA at D = 80 (one row: pvCodes)
	{Hq: 8, Hkv: 2, D: 192},  // GQA 4 at a multiple of 64 that is not a power of two
	{Hq: 2, Hkv: 2, D: 192},  // MHA at D = 192 (one value group of 192: pvCodes, pvNib4)
	{Hq: 4, Hkv: 1, D: 160},  // MQA 4 at a multiple of 32 that is not one of 64
}

// fitsHead reports whether spec resolves at head dim d by the rules of
// kv.Spec.Resolve beyond kv.HeadDimOK: the rotation needs a power of two,
// and a per-token group under kv.WholeHeadGroup must divide d. The tests
// skip the (spec, D) pairs it rules out, after checking Resolve refuses
// them.
func fitsHead(sp kv.Spec, d int) bool {
	fits := func(tf kv.TensorFormat) bool {
		g := tf.Group
		return !tf.Elem.IsInt() || tf.Scaling != kv.PerToken || g == kv.GroupHeadDim || g >= kv.WholeHeadGroup || d%g == 0
	}
	return (!sp.Rotate || kv.Rotatable(d)) && fits(sp.K) && fits(sp.V)
}

// resolveOrSkip resolves spec at d; ok is false (and Resolve's refusal
// checked) where fitsHead rules the pair out.
func resolveOrSkip(t testing.TB, spec string, d int) (f kv.Format, ok bool) {
	t.Helper()
	sp := kv.MustParseSpec(spec)
	f, err := sp.Resolve(d)
	switch fit := fitsHead(sp, d); {
	case fit && err != nil:
		t.Fatalf("%s D=%d: %v", spec, d, err)
	case !fit && err == nil:
		t.Fatalf("%s D=%d resolved; want a refusal (rotation or groups do not fit)", spec, d)
	}
	return f, err == nil
}

// TestDecodeMatchesReference runs every format on every shape class with
// ragged lengths: residual of 0, 1, Nr-1 tokens after 0, 1 and 3 packed
// blocks, several lengths in one batch, and 1 or 3 query tokens, at every
// SIMD level against one reference. -short runs a subset of the formats.
func TestDecodeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	specs := testSpecs
	if testing.Short() {
		specs = shortSpecs
	}
	for _, spec := range specs {
		for si, sh := range testShapes {
			f, ok := resolveOrSkip(t, spec, sh.D)
			if !ok {
				continue
			}
			nr := f.Residual
			// Keep the test quick: every shape sees a different slice of lengths.
			all := []int{3, nr - 1, nr, nr + 1, 2*nr - 1, 3 * nr, 3*nr + 1, 4*nr - 1}
			lens := []int{all[si%len(all)], all[(si+3)%len(all)], all[(si+5)%len(all)]}
			caches, _, _ := buildBatch(t, r, f, sh, lens)
			for _, tq := range []int{1, 3} {
				p := Params{Format: f, Shape: sh, Tq: tq}
				q := randQ(r, len(lens)*tq*sh.Hq*sh.D)
				checkDecode(t, fmt.Sprintf("%s Hq=%d Hkv=%d D=%d lens=%v Tq=%d", spec, sh.Hq, sh.Hkv, sh.D, lens, tq), seqsOf(caches), p, q)
			}
		}
	}
}

// TestDecodeLongSplits covers sequences longer than one split, so the
// log-sum-exp merge runs, and checks that results are bitwise repeatable
// and the same whatever GOMAXPROCS, at every level.
func TestDecodeLongSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	sh := Shape{Hq: 8, Hkv: 2, D: 128}
	specs := []string{"int4", "int2:kc32:v32", "fp16", "int4:kt128", "k4v2"}
	if testing.Short() {
		specs = specs[:3]
	}
	for _, spec := range specs {
		f := kv.MustResolve(spec, sh.D)
		lens := []int{2*SplitTokens + 77, SplitTokens + f.Residual, 5}
		caches, _, _ := buildBatch(t, r, f, sh, lens)
		p := Params{Format: f, Shape: sh, Tq: 2}
		q := randQ(r, len(lens)*p.Tq*sh.Hq*sh.D)
		checkDecode(t, spec+" long", seqsOf(caches), p, q)
		sets, procList := allKernelSets(), []int{1, 2, 3}
		if testing.Short() { // the pure-Go set and the machine's own
			sets, procList = []*kernels{sets[0], sets[len(sets)-1]}, []int{1, 2}
		}
		for _, k := range sets {
			var runs [][]float32
			for _, procs := range procList {
				prev := runtime.GOMAXPROCS(procs)
				for range 2 {
					out := nanSlice(len(q))
					withKernels(k, func() {
						if err := Decode(out, q, seqsOf(caches), p); err != nil {
							t.Fatal(err)
						}
					})
					runs = append(runs, out)
				}
				runtime.GOMAXPROCS(prev)
			}
			for _, again := range runs[1:] {
				for i := range again {
					if math.Float32bits(runs[0][i]) != math.Float32bits(again[i]) {
						t.Fatalf("%v %s: element %d differs between runs: %g vs %g", k, spec, i, runs[0][i], again[i])
					}
				}
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
	for _, d := range []int{48, 100, 272} {
		if err := (Shape{Hq: 4, Hkv: 2, D: d}).Validate(); err == nil {
			t.Errorf("D=%d accepted", d)
		}
	}
	for _, d := range []int{64, 80, 96, 112, 192, 256} {
		if err := (Shape{Hq: 4, Hkv: 2, D: d}).Validate(); err != nil {
			t.Errorf("D=%d: %v", d, err)
		}
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

// TestDecodeLongSplit covers the long split (LongSplitTokens, for a
// sequence with enough KV heads times splits): the rule's choices, the
// merged result against the reference, and that a long sequence gives the
// same bits alone and in a batch beside a short one, at GOMAXPROCS 1 and 2.
func TestDecodeLongSplit(t *testing.T) {
	for _, c := range []struct{ L, hkv, want int }{
		{32768, 8, LongSplitTokens}, {8192, 8, LongSplitTokens}, {4096, 8, SplitTokens},
		{8192, 2, SplitTokens}, {32768, 2, LongSplitTokens}, {100, 8, SplitTokens},
	} {
		if got := seqSplit(c.L, c.hkv, 128); got != c.want {
			t.Errorf("seqSplit(%d, %d, 128) = %d, want %d", c.L, c.hkv, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(17, 18))
	sh := Shape{Hq: 16, Hkv: 8, D: 128}
	specs := []string{"int4", "fp16"}
	if testing.Short() {
		specs = specs[:1]
	}
	for _, spec := range specs {
		f := kv.MustResolve(spec, sh.D)
		lens := []int{2*LongSplitTokens + 77, 5}
		caches, _, _ := buildBatch(t, r, f, sh, lens)
		p := Params{Format: f, Shape: sh, Tq: 1}
		q := randQ(r, len(lens)*sh.Hq*sh.D)
		checkDecode(t, spec+" long split", seqsOf(caches), p, q)
		n := sh.Hq * sh.D // the long sequence's outputs
		var ref []float32
		for _, procs := range []int{1, 2} {
			prev := runtime.GOMAXPROCS(procs)
			both, alone := nanSlice(len(q)), nanSlice(n)
			err1 := Decode(both, q, seqsOf(caches), p)
			err2 := Decode(alone, q[:n], seqsOf(caches[:1]), p)
			runtime.GOMAXPROCS(prev)
			if err := cmp.Or(err1, err2); err != nil {
				t.Fatal(err)
			}
			if ref == nil {
				ref = alone
			}
			for i := range n {
				if math.Float32bits(both[i]) != math.Float32bits(alone[i]) || math.Float32bits(alone[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("%s, GOMAXPROCS %d: element %d: %g in the batch, %g alone, %g at GOMAXPROCS 1", spec, procs, i, both[i], alone[i], ref[i])
				}
			}
		}
	}
}

package kvcache

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/model"
)

func countTiers(tiers []kv.Tier) [kv.NumTiers]int {
	var c [kv.NumTiers]int
	for _, t := range tiers {
		c[t]++
	}
	return c
}

// TestRetierShares: with the sinks and window inside the High share, the
// shares are exact; sinks and window are High; among the other tokens the
// tier never improves as mass falls; a spec without e evicts nothing.
func TestRetierShares(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	tests := []struct {
		spec string
		l    int
		want [kv.NumTiers]int
	}{
		{"bw:h20:m40:l40", 1000, [kv.NumTiers]int{200, 400, 400, 0}},
		{"bw:h25:e75", 1001, [kv.NumTiers]int{1001 - 750, 0, 0, 750}},
		{"bw:h10:m30:l60", 997, [kv.NumTiers]int{997 - 299 - 598, 299, 598, 0}},
		{"bw:m100:w0:s0", 300, [kv.NumTiers]int{0, 300, 0, 0}},
		{"bw:l100:w0:s0", 5, [kv.NumTiers]int{0, 0, 5, 0}},
		// Window and sinks exceed the High share: Medium shrinks first.
		{"bw:h10:m40:l50:w100:s4", 200, [kv.NumTiers]int{104, 0, 96, 0}},
		// Shorter than the window: everything High.
		{"bw:l100", 50, [kv.NumTiers]int{50, 0, 0, 0}},
	}
	for _, tc := range tests {
		sp := kv.MustParseSpec(tc.spec).Planes
		p := &TierPolicy{Spec: sp}
		mass := make([]float32, tc.l)
		for i := range mass {
			mass[i] = float32(r.ExpFloat64())
		}
		tiers := make([]kv.Tier, tc.l)
		p.Retier(tiers, mass, tc.l)
		if got := countTiers(tiers); got != tc.want {
			t.Errorf("%s L=%d: tier counts %v, want %v", tc.spec, tc.l, got, tc.want)
		}
		for pos, tier := range tiers {
			forced := pos < sp.Sinks || pos >= tc.l-sp.Window
			if forced && tier != kv.High {
				t.Fatalf("%s: sink/window token %d is %v", tc.spec, pos, tier)
			}
			if sp.Evicted == 0 && tier == kv.Evicted {
				t.Fatalf("%s: token %d evicted without e in the spec", tc.spec, pos)
			}
			for q := range tiers {
				qForced := q < sp.Sinks || q >= tc.l-sp.Window
				if !forced && !qForced && mass[q] > mass[pos] && tiers[q] > tier {
					t.Fatalf("%s: token %d (mass %g) is %v but token %d (mass %g) is %v", tc.spec, q, mass[q], tiers[q], pos, mass[pos], tier)
				}
			}
		}
	}
}

func TestNewTier(t *testing.T) {
	for spec, want := range map[string]kv.Tier{"bw": kv.High, "bw:m100": kv.High, "bw:m100:w0:s0": kv.Medium,
		"bw:l100:w0": kv.Low, "bw:m50:l50:w0": kv.Medium, "bw:h10:l90:w0": kv.High} {
		p := &TierPolicy{Spec: kv.MustParseSpec(spec).Planes}
		if got := p.NewTier(); got != want {
			t.Errorf("%s: NewTier = %v, want %v", spec, got, want)
		}
	}
}

// TestRetierTieBreak: equal masses rank newer tokens first, so the oldest
// candidates get the lowest tiers, the same on every call.
func TestRetierTieBreak(t *testing.T) {
	p := &TierPolicy{Spec: kv.MustParseSpec("bw:h50:l50:w2:s1").Planes}
	mass := make([]float32, 10)
	tiers := make([]kv.Tier, 10)
	p.Retier(tiers, mass, 10)
	want := []kv.Tier{kv.High, kv.Low, kv.Low, kv.Low, kv.Low, kv.Low, kv.High, kv.High, kv.High, kv.High}
	for i := range want {
		if tiers[i] != want[i] {
			t.Fatalf("tiers %v, want %v", tiers, want)
		}
	}
}

// TestPlaneCacheRetier drives the bw cache as a model does (one Attend per
// layer) token by token and in chunks of R: both re-tier at the same
// points, so the tier counts agree exactly and meet the policy's shares,
// sinks and window stay High, and the read statistics add up.
func TestPlaneCacheRetier(t *testing.T) {
	cfg := &model.Config{Architecture: "test", Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64}
	be := cpu.New(1)
	spec := kv.MustParseSpec("bw:h20:m40:l40:w16:s2:r8")
	r := rand.New(rand.NewPCG(33, 34))
	const n = 96
	qs, ks, vs := randomQKV(r, cfg, n)
	feed := func(chunk int) *Planes { return feedPlanes(t, be, cfg, spec, n, chunk, qs, ks, vs) }
	step, chunked := feed(1), feed(8)
	want := (&TierPolicy{Spec: spec.Planes}).Counts(n)
	for layer := range cfg.Layers {
		for h := range cfg.KVHeads {
			a, b := step.Tiers(7, layer, h), chunked.Tiers(7, layer, h)
			if countTiers(a) != want || countTiers(b) != want {
				t.Errorf("layer %d head %d: counts %v (steps) and %v (chunks), want %v", layer, h, countTiers(a), countTiers(b), want)
			}
			for pos := range a {
				if (pos < 2 || pos >= n-16) && (a[pos] != kv.High || b[pos] != kv.High) {
					t.Errorf("layer %d head %d: forced token %d is %v / %v", layer, h, pos, a[pos], b[pos])
				}
			}
		}
	}
	st := step.ReadStats()
	var fp16 int64
	for l := 1; l <= n; l++ {
		fp16 += int64(l) * 4 * 64
	}
	fp16 *= int64(cfg.Layers * cfg.KVHeads)
	if st.FP16Bytes != fp16 || st.PlaneBytes >= fp16 || st.PlaneBytes <= fp16/4 {
		t.Errorf("read stats %+v: fp16 bytes want %d, plane bytes within (1/4, 1) of it", st, fp16)
	}
	if got := st.Tokens[kv.High] + st.Tokens[kv.Medium] + st.Tokens[kv.Low]; st.IndexBytes != got*kv.IndexBytes {
		t.Errorf("index bytes %d for %d tokens read", st.IndexBytes, got)
	}
	if _, err := NewPaged(be, cfg, spec, Options{}); err == nil {
		t.Error("NewPaged accepted a bw spec")
	}
}

// TestRetierMatchesComparisonSort checks Retier's integer-key ranking
// against the ranking it defines, a comparison sort by (mass with
// cmp.Compare, then position), on masses with ties, zeros of both signs,
// negatives and NaNs, for several specs and lengths.
func TestRetierMatchesComparisonSort(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	specs := []kv.PlaneSpec{
		{High: 20, Medium: 40, Low: 40, Window: 64, Sinks: 4, Period: 16},
		{High: 10, Medium: 30, Low: 50, Evicted: 10, Window: 8, Sinks: 1, Period: 16},
		{Medium: 100, Period: 16},
	}
	pool := []float32{0, float32(math.Copysign(0, -1)), 1, 0.5, -2, float32(math.NaN()), float32(math.Inf(1)), 1e-40}
	for _, sp := range specs {
		for _, l := range []int{1, 5, 100, 1000, 5000} {
			mass := make([]float32, l)
			for i := range mass {
				if r.IntN(3) == 0 {
					mass[i] = pool[r.IntN(len(pool))]
				} else {
					mass[i] = float32(r.IntN(50)) / 7
				}
			}
			p := TierPolicy{Spec: sp}
			got := make([]kv.Tier, l)
			p.Retier(got, mass, l)
			want := retierBySort(sp, mass, l)
			if !slices.Equal(got, want) {
				t.Fatalf("spec %+v, l %d: integer-key ranking differs from the comparison sort", sp, l)
			}
		}
	}
}

// retierBySort is Retier with the comparison sort it is defined by.
func retierBySort(s kv.PlaneSpec, mass []float32, l int) []kv.Tier {
	tiers := make([]kv.Tier, l)
	sinks := min(s.Sinks, l)
	win := max(sinks, l-s.Window)
	var order []int
	for t := sinks; t < win; t++ {
		order = append(order, t)
	}
	for t := 0; t < sinks; t++ {
		tiers[t] = kv.High
	}
	for t := win; t < l; t++ {
		tiers[t] = kv.High
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(mass[a], mass[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	want := (&TierPolicy{Spec: s}).Counts(l)
	i := 0
	for _, tier := range []kv.Tier{kv.Evicted, kv.Low, kv.Medium} {
		for n := 0; n < want[tier] && i < len(order); n++ {
			tiers[order[i]] = tier
			i++
		}
	}
	for ; i < len(order); i++ {
		tiers[order[i]] = kv.High
	}
	return tiers
}

// feedPlanes feeds a new CPU bw cache of spec sequence 7's n tokens (q, k
// and v [n][heads][D]) in calls of chunk tokens, every layer the same.
func feedPlanes(t *testing.T, be backend.Backend, cfg *model.Config, spec kv.Spec, n, chunk int, qs, ks, vs []float32) *Planes {
	t.Helper()
	qw, kvw := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	c, err := NewPlanes(be, cfg, spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for pos := 0; pos < n; pos += chunk {
		var b model.Batch
		b.Add(7, pos, make([]int32, chunk)...)
		tensors := make([]backend.Tensor, 4)
		for i, src := range [][]float32{qs[pos*qw : (pos+chunk)*qw], ks[pos*kvw : (pos+chunk)*kvw], vs[pos*kvw : (pos+chunk)*kvw], qs[pos*qw : (pos+chunk)*qw]} {
			if tensors[i], err = be.Alloc(backend.F32, len(src)); err != nil {
				t.Fatal(err)
			}
			if err := be.Upload(tensors[i], src); err != nil {
				t.Fatal(err)
			}
		}
		for layer := range cfg.Layers {
			if err := c.Attend(layer, &b, tensors[0], tensors[1], tensors[2], tensors[3]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// TestSamplesMass checks TierPolicy.SamplesMass against kv.MassSampled
// position by position.
func TestSamplesMass(t *testing.T) {
	for _, k := range []int{0, 1, 2, 3, 4, 16} {
		p := TierPolicy{Spec: kv.PlaneSpec{MassEvery: k}}
		for pos := range 40 {
			for n := range 20 {
				want := false
				for i := range n {
					want = want || kv.MassSampled(pos+i, k)
				}
				if got := p.SamplesMass(pos, n); got != want {
					t.Errorf("k %d: SamplesMass(%d, %d) = %v, want %v", k, pos, n, got, want)
				}
			}
		}
	}
}

// TestPlaneCacheSampledMass feeds the CPU cache with the mass sampled (kN)
// token by token and in chunks: the mass of every layer and KV head sums
// to the group's query rows times the sampled positions (each row's
// probabilities sum to 1; nothing is evicted), both ways; the tier counts
// meet the shares both ways; and sampling changes the tiers (the steps it
// leaves out are not ranked by).
func TestPlaneCacheSampledMass(t *testing.T) {
	cfg := &model.Config{Architecture: "test", Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64}
	be := cpu.New(1)
	r := rand.New(rand.NewPCG(35, 36))
	const n = 96
	qs, ks, vs := randomQKV(r, cfg, n)
	const base = "bw:h20:m40:l40:w16:s2:r8"
	all := feedPlanes(t, be, cfg, kv.MustParseSpec(base+":k1"), n, 1, qs, ks, vs) // every token's mass
	g := cfg.Heads / cfg.KVHeads
	for _, k := range []int{1, 3, 4, 8, 16} {
		spec := kv.MustParseSpec(fmt.Sprintf("%s:k%d", base, k))
		sampled := 0
		for pos := range n {
			if kv.MassSampled(pos, k) {
				sampled++
			}
		}
		want := (&TierPolicy{Spec: spec.Planes}).Counts(n)
		differ := false
		for _, chunk := range []int{1, 8} {
			c := feedPlanes(t, be, cfg, spec, n, chunk, qs, ks, vs)
			for layer := range cfg.Layers {
				for h := range cfg.KVHeads {
					var sum float64
					for _, m := range c.seqs[7].mass[layer][h] {
						sum += float64(m)
					}
					if rows := float64(g * sampled); math.Abs(sum-rows) > 1e-4*rows {
						t.Errorf("k%d chunk %d layer %d head %d: mass sums to %g, want %g (%d rows of %d sampled tokens)", k, chunk, layer, h, sum, rows, g, sampled)
					}
					tiers := c.Tiers(7, layer, h)
					if countTiers(tiers) != want {
						t.Errorf("k%d chunk %d layer %d head %d: counts %v, want %v", k, chunk, layer, h, countTiers(tiers), want)
					}
					differ = differ || !slices.Equal(tiers, all.Tiers(7, layer, h))
				}
			}
		}
		if k > 1 && !differ {
			t.Errorf("k%d: the tiers equal those of the unsampled mass", k)
		}
	}
}

// randomQKV returns n tokens' standard normal q, k and v rows of cfg's
// shapes, token-major.
func randomQKV(r *rand.Rand, cfg *model.Config, n int) (qs, ks, vs []float32) {
	qw, kvw := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	qs, ks, vs = make([]float32, n*qw), make([]float32, n*kvw), make([]float32, n*kvw)
	for _, s := range [][]float32{qs, ks, vs} {
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
	}
	return qs, ks, vs
}

package kvcache

import (
	"math"
	"slices"

	"github.com/bitdecode/bitdecode/kv"
)

// TierPolicy assigns the tiers of a bw cache (H2O heavy hitters extended to
// precision tiers, seed 003 §4.2): tokens are ranked by the attention mass
// they have accumulated (each decode step adds a token's probability summed
// over the query heads of its KV head); the first Sinks and the newest
// Window tokens are always High; the others get tiers by rank so that the
// shares of the cache's L tokens in each tier meet the spec's targets.
//
// Counts: nE = ⌊L·e/100⌋, nL = ⌊L·l/100⌋, nM = ⌊L·m/100⌋, nH = L - nE - nL
// - nM (High takes the rounding). The ranked candidates (neither sink nor
// window) are filled from the bottom: the nE lowest become Evicted, the next
// nL Low, the next nM Medium, the rest High. The shares are exact whenever
// the sinks and the window fit in the High share; otherwise the forced High
// tokens take the places of the best-ranked candidates, so Medium shrinks
// first (the cache then reads more than the target, never less).
//
// Ranking: larger mass first; equal mass, newer (larger position) first, a
// total order, so the result is deterministic.
//
// Sampling (Spec.MassEvery = k > 1): only the query tokens at positions p
// with kv.MassSampled(p, k) add their attention to the mass, one token in
// k; the decode steps of the others write no mass at all (on the GPU: no
// score stores and no mass pass). The CPU and GPU caches sample the same
// positions, so they rank by the same mass.
type TierPolicy struct {
	Spec  kv.PlaneSpec
	order []uint64 // rankKey of each candidate, sorted worst first
}

// rankKey orders candidates worst first as Retier ranks them: smaller mass
// first (cmp.Compare's order: NaN below every number, −0 equal to +0),
// then older. The mass's float32 bits are mapped to an unsigned order in the
// high word, the position is the low word, so one integer sort (no
// comparison closure: 1.7x faster over 8K tokens on the 2-core CI machine)
// gives the ranking.
func rankKey(m float32, t int) uint64 {
	var k uint32
	switch b := math.Float32bits(m); {
	case m != m: // NaN: below everything
		k = 0
	case m == 0: // −0 and +0 compare equal
		k = 0x80000000
	case b&0x80000000 != 0:
		k = ^b
	default:
		k = b | 0x80000000
	}
	return uint64(k)<<32 | uint64(uint32(t))
}

// Counts returns the target number of tokens in each tier for a cache of l
// tokens (before the sinks and the window are forced High).
func (p *TierPolicy) Counts(l int) [kv.NumTiers]int {
	var c [kv.NumTiers]int
	c[kv.Evicted] = l * p.Spec.Evicted / 100
	c[kv.Low] = l * p.Spec.Low / 100
	c[kv.Medium] = l * p.Spec.Medium / 100
	c[kv.High] = l - c[kv.Evicted] - c[kv.Low] - c[kv.Medium]
	return c
}

// Retier rewrites tiers[:l] from mass[:l]. It moves no data.
func (p *TierPolicy) Retier(tiers []kv.Tier, mass []float32, l int) {
	s := p.Spec
	sinks := min(s.Sinks, l)
	win := max(sinks, l-s.Window) // first token of the window
	p.order = p.order[:0]
	for t := sinks; t < win; t++ {
		p.order = append(p.order, rankKey(mass[t], t))
	}
	for t := 0; t < sinks; t++ {
		tiers[t] = kv.High
	}
	for t := win; t < l; t++ {
		tiers[t] = kv.High
	}
	// Worst first: smaller mass, then older.
	slices.Sort(p.order)
	want := p.Counts(l)
	i := 0
	for _, tier := range []kv.Tier{kv.Evicted, kv.Low, kv.Medium} {
		for n := 0; n < want[tier] && i < len(p.order); n++ {
			tiers[uint32(p.order[i])] = tier
			i++
		}
	}
	for ; i < len(p.order); i++ {
		tiers[uint32(p.order[i])] = kv.High
	}
}

// NewTier is the tier of a token when it is written, until the next
// re-tier: High, unless the spec has neither a High share nor a window, in
// which case the best tier with a share (so bw:m100:w0:s0 reads every
// token, the newest included, at 8 bits: a uniform read).
func (p *TierPolicy) NewTier() kv.Tier {
	s := p.Spec
	if s.High > 0 || s.Window > 0 {
		return kv.High
	}
	switch {
	case s.Medium > 0:
		return kv.Medium
	case s.Low > 0:
		return kv.Low
	}
	return kv.High // everything evicted: a token still sees itself
}

// SamplesMass reports whether any of the n query tokens at positions pos,
// pos+1, ..., pos+n-1 adds its attention to the mass (kv.MassSampledAny
// with Spec.MassEvery): a decode call for which it is false skips the mass.
func (p *TierPolicy) SamplesMass(pos, n int) bool {
	return kv.MassSampledAny(pos, n, p.Spec.MassEvery)
}

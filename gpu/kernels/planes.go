package kernels

import (
	_ "embed"
	"fmt"
	"math"
	"math/bits"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
)

//go:embed planes.cu
var planesSource string

// planesMinSplitTokens is the fewest positions a split of the tensor-core
// planes kernel gets (v2.4: 256, as the integer decode kernels since v3.1;
// v2.3's 512 left 1 x 8K at 15 splits, 120 CTAs on 132 SMs, where 26
// splits took 2-9% less time on the H100, bench/results/2026-11-25-h100-bw-7).
const planesMinSplitTokens = 256

// PlanesKernel selects a bit-plane decode implementation (planes.cu): both
// compute the same function within the format's bound.
type PlanesKernel int

const (
	// PlanesMMA is split_mma: tensor cores, A fragments rebuilt from the
	// plane bytes in registers (the default).
	PlanesMMA PlanesKernel = iota
	// PlanesV1 is split_v1: CUDA cores, the scalar reconstruction.
	PlanesV1
)

// String returns "mma" or "v1".
func (k PlanesKernel) String() string {
	if k == PlanesV1 {
		return "v1"
	}
	return "mma"
}

// Constants of planes.cu (kept equal to its constexprs).
const (
	planesThreads = 128
	// PlanesGroup is planes.cu's kGroup: each tier run of a (sequence, KV
	// head) is cut into groups of this many index entries.
	PlanesGroup = 16
	// planesTile is kTile: split lengths are a multiple of it.
	planesTile = 64
	// planesRows is bitdecode.cuh's kQueryRows: query rows per CTA of
	// split_mma.
	planesRows = 8
	// planesMaxSplits is bitdecode.cuh's kMaxSplits.
	planesMaxSplits = 1024
	// planesLaneBudget bounds the plane bytes one lane of split_mma loads per
	// tile (decode.go's mmaLaneBudget rule): groups per tile are
	// budget / (2·D·bits/16), so at D = 128 HIGH 1, MEDIUM 2, LOW 4.
	planesLaneBudget = 256
	// planesMassCTAs caps the mass pass's CTAs per launch: about one full
	// wave of 128-thread CTAs on a 132-SM H100 (16 per SM); each thread
	// loops over its (sequence, KV head)'s entries beyond.
	planesMassCTAs = 2048
	// planesMaxWeight bounds PlanesTuning.Weights.
	planesMaxWeight = 64
)

// planesWeights is split_mma's default cost of a HIGH, MEDIUM and LOW group
// when a CTA's groups are shared among its warps (planes.cu warpBound):
// the measured time of a group (v2.3 on the H100, uniform reads at 128 x
// 8K: 1441, 783, 580 us, 1 : 0.54 : 0.40), rounded. v2.2 weighed the bytes
// (4, 2, 1), which left the LOW warp the slowest; 5, 3, 2 took h20:m40:l40
// at 128 x 8K from 1154 to 1020 us and left 16 x 32K as it was
// (bench/results/2026-11-25-h100-bw-6). v2.1 split equal numbers of groups
// and the CTA waited for its HIGH warp.
var planesWeights = [3]int{5, 3, 2}

// planesLowWeights is split_mma's default cost of a HIGH, MEDIUM and LOW
// group for formats that read LOW tokens (PlanesLayout.Low) at D = 128,
// whose tiles are 1/2/4 groups (v2.9). v2.9 weighed tiles, 6, 3, 2: HIGH 1,
// MEDIUM 1/2, LOW 1/3 of a HIGH group, a LOW tile 4/3 of any other (a warp
// of a mixed CTA takes about the time of its tiles, each a DRAM round trip
// under load plus its rebuild: the uniform rows at 128 x 8K take 2.9, 3.0
// and 3.6 us per tile and warp). Measured on the H100 for h20:m40:l40
// (bench/results/2026-11-26-h100-bw-11, first call, main's binary with the
// knobs): 5, 3, 2 at MT 1/2/2 133.2, 484.0, 949.2 us at 1 x 128K, 16 x 32K,
// 128 x 8K; 6, 3, 2 at MT 1/2/4 122.1, 444.3, 889.6 (1.09x, 1.09x, 1.07x);
// 2, 1, 1 at MT 1/2/2 125.0, 456.6, 882.2; 8, 4, 3 at 1/2/2 131.2, 471.5,
// 936.7; 4, 2, 1 at 1/2/4 134.3, 493.2, 939.2; 10, 5, 4 at 1/2/4 slower.
// v2.11 (session 12, bench/results/2026-11-26-h100-bw-12, second call:
// split_mma v2.10's binary, the knob beside the default in one call): 5,
// 3, 2 at MT 1/2/4, which v2.9's calls did not reach, took h20:m40:l40
// from 121.0, 442.3, 889.0 us (6, 3, 2) to 117.5, 431.4, 873.0 (1.030x,
// 1.025x, 1.018x; the default plan's three runs agree within 0.6%), so the values are v2.3's again (planesWeights), kept apart so
// that the plans that read LOW tokens can be tuned on their own. Rejected
// (v2.9-4): 6, 3, 2. LOW's weight is 2 in every version, so a (sequence,
// KV head) of LOW tokens alone is cut into the same splits (splitBound
// rounds by the weight): all-4-bit reads keep their bits; a CTA of one
// tier shares its groups among its warps equally whatever the weights
// (warpBound).
var planesLowWeights = [3]int{5, 3, 2}

// planesDefaultWeights returns split_mma's tier weights for layout l at
// tiles mt when PlanesTuning.Weights is not set: planesLowWeights for
// formats that read LOW tokens at D = 128 with LOW tiles of 4 groups
// (planesMT's), planesWeights otherwise (other head dims, and formats
// without LOW reads, were not measured with other weights).
func planesDefaultWeights(l PlanesLayout, mt [3]int) [3]int {
	if l.Low && l.D == 128 && mt == [3]int{1, 2, 4} {
		return planesLowWeights
	}
	return planesWeights
}

// Bits of split_mma's mode argument (planes.cu kCostSplits, kDealWarps,
// kDealSplits).
const (
	planesCostSplits = 1
	planesDealWarps  = 2
	planesDealSplits = 4
)

// planesDealSplitsMax is the most splits per (sequence, KV head) for
// which split_mma deals a mixed head's tiers to its splits by default
// (planesDeal).
const planesDealSplitsMax = 4

// planesDeal returns split_mma's dealing bits under tuning t for a plan of
// up to splits splits per (sequence, KV head) (v2.12, session 13). A CTA
// whose groups hold more than one tier deals its tiles to its warps in
// turn (planesDealWarps), so that every warp reads the same mix whatever
// the tiers' costs; with at most planesDealSplitsMax splits every split of
// a mixed (sequence, KV head) also takes the same share of each tier
// (planesDealSplits), else the splits are cut by cost (v2.4). Measured on
// the H100 for h20:m40:l40 (bench/results/2026-11-26-h100-bw-13, against
// v2.11 in the same calls): 128 x 8K (1 split) 876.8 -> 838.8 us either
// way (85.7% of the ceiling); 16 x 32K (2 splits) 432.2 -> 421.4 us with
// dealt splits (85.2%), 422.9 with dealt warps alone; 1 x 8K (26 splits)
// 20.9 -> 22.3 us with dealt splits (short CTAs that each run all three
// tier loops for a few tiles), 20.7 with dealt warps alone; 1 x 128K (33
// splits) 117.4 -> 118.0 and 117.0. t.Deal overrides: PlanesDealNone is
// v2.11's contiguous shares by the weights (warpBound). A (sequence, KV
// head) of one tier takes v2.11's splits and warps in every case: uniform
// reads keep their bits.
func planesDeal(t PlanesTuning, splits int) int {
	switch t.Deal {
	case PlanesDealNone:
		return 0
	case PlanesDealWarps:
		return planesDealWarps
	case PlanesDealSplits:
		return planesDealWarps | planesDealSplits
	}
	if splits <= planesDealSplitsMax {
		return planesDealWarps | planesDealSplits
	}
	return planesDealWarps
}

// planesMinB is split_mma's default CTAs per SM for __launch_bounds__: 1
// leaves the registers to ptxas (236 at D = 128 on CUDA 13: 2 CTAs per SM).
const planesMinB = 1

// PlanesLayout is the bit-plane format as the kernels read it: the block
// layout is kv.PlaneLayout (4·Nr·D bytes per KV head), and the fills and
// filter are kv.Recon's.
type PlanesLayout struct {
	D    int  // head dim: HeadDimOK (64, 128 or 256)
	Nr   int  // tokens per block
	BF16 bool // K and V are bf16 (else fp16)
	// Adj8 fills bits 7..0 of MEDIUM reads, Adj4 bits 11..0 of LOW reads.
	Adj8, Adj4 int
	// Filter turns on the subnormal filter of partial reads.
	Filter bool
	// Medium says the format's policy reads MEDIUM tokens (its spec's m
	// share is not 0), Low LOW tokens (its l share is not 0): hints for
	// split_mma's tiles and tier weights (planesMT, planesDefaultWeights),
	// not promises (a request may read its own tiers).
	Medium, Low bool
}

// PlanesLayoutFor returns the kernels' view of bw format f, with f's fills
// (kv.PlaneSpec.Recon: the spec's, else the defaults; resolve the model's
// settings with Spec.WithAdjust first).
func PlanesLayoutFor(f kv.Format) (PlanesLayout, error) {
	if !f.Planes.On {
		return PlanesLayout{}, fmt.Errorf("kernels: format %s is not a bit-plane (bw) format", f.Spec.String())
	}
	r := f.Planes.Recon(f.K.Elem)
	l := PlanesLayout{D: f.D, Nr: f.Residual, BF16: f.K.Elem == kv.BF16, Adj8: int(r.Adj8 & kv.MaxAdj8),
		Adj4: int(r.Adj4 & kv.MaxAdj4), Filter: r.Filter, Medium: f.Planes.Medium > 0, Low: f.Planes.Low > 0}
	return l, l.check()
}

// BlockBytes returns one KV head's block: kv.PlaneLayout.BlockBytes.
func (l PlanesLayout) BlockBytes() int { return kv.NewPlaneLayout(l.D, l.Nr).BlockBytes }

func (l PlanesLayout) check() error {
	switch {
	case !HeadDimOK(l.D):
		return headDimError("planes", l.D)
	case l.Nr < PlanesGroup || l.Nr%PlanesGroup != 0:
		return fmt.Errorf("kernels: planes: block of %d tokens is not a positive multiple of %d", l.Nr, PlanesGroup)
	case l.Adj8 < 0 || l.Adj8 > kv.MaxAdj8 || l.Adj4 < 0 || l.Adj4 > kv.MaxAdj4:
		return fmt.Errorf("kernels: planes: fills a8=%#x a4=%#x out of range", l.Adj8, l.Adj4)
	}
	return nil
}

// fast reports whether split_mma can take its fp16 ftz path: fp16, filter
// on, and a LOW fill that cannot saturate (bits 11..10 not both set).
func (l PlanesLayout) fast() bool {
	return !l.BF16 && l.Filter && (l.Adj4>>10)&3 != 3
}

// PlanesShape is the shape of one bit-plane decode call.
type PlanesShape struct {
	B, Hq, Hkv, Tq int
	MaxBlocks      int // columns of the block table
	MaxL           int // longest sequence (cached tokens, query tokens included)
	// IndexStride is the entries per (sequence, KV head) in the index
	// (TierIndex.Stride); 0 means MaxL.
	IndexStride int
	// SplitLen fixes the positions per split (a multiple of 64): a
	// sequence's result then depends on its own tokens only, not on the
	// batch. 0 lets the planner size splits to fill the GPU.
	SplitLen int
	// Mass sizes the workspace for the attention-mass output.
	Mass bool
	// MassStride is the tokens per (sequence, KV head) of the mass array;
	// 0 means MaxL.
	MassStride int
	// MassEvery samples the mass (kv.PlaneSpec.MassEvery): only the rows
	// of query token i, at position L_b-Tq+i, with kv.MassSampled(L_b-Tq+i,
	// MassEvery) add to it; 0 and 1 take every row. A launch per call, not
	// the plan's: LaunchShape takes any value.
	MassEvery int
}

// PlanesBuffers are the device buffers of one call (planes.cu has the
// layouts).
type PlanesBuffers struct {
	Pool       cuda.DevicePtr // [nBlocks][Hkv][BlockBytes] plane blocks
	BlockTable cuda.DevicePtr // [B][MaxBlocks] int32
	Lens       cuda.DevicePtr // [B] int32
	Index      cuda.DevicePtr // [B][Hkv][IndexStride] int32 (TierIndex.Index)
	Counts     cuda.DevicePtr // [B][Hkv][4] int32 (TierIndex.Counts)
	// Offsets, when not 0, is [B][Hkv][4] int32: where the HIGH, MEDIUM and
	// LOW runs start in each (sequence, KV head)'s index (the 4th word is
	// unused). 0 means the runs lie end to end (TierIndex's layout); the
	// engine's persistent index (PlanesRetier) has its own.
	Offsets cuda.DevicePtr
	Q, Out  cuda.DevicePtr // [B][Tq][Hq][D] fp16
	// Mass, when not 0, is [B][Hkv][MassStride] float32: every token read
	// gets its attention probability summed over its KV head's query rows
	// added (attn.DecodePlanes' mass). The plan needs PlanesShape.Mass.
	Mass cuda.DevicePtr
}

// PlanesPlan is a compiled, sized bit-plane decode for one (layout, shape).
type PlanesPlan struct {
	kernel              PlanesKernel
	layout              PlanesLayout
	shape               PlanesShape
	rmax, rowChunks     int
	splitLen, maxSplits int
	mt                  [3]int         // split_mma: groups per tile per tier
	weights             [3]int         // split_mma: warp (and split) weights per tier
	costSplits          bool           // split_mma: splits of equal cost (v2.4), else of equal positions
	deal                int            // split_mma: planesDealWarps, planesDealSplits or 0 (planesDeal)
	counters            cuda.DevicePtr // split_mma's fused merge (v2.4): [B][Hkv·rowChunks] int32, or 0
	split, combine      cuda.Function
	mass                cuda.Function
	partO, partML       cuda.DevicePtr
	scores, finalML     cuda.DevicePtr
	dev                 *cuda.Device
	// tl is the launch timeline (PlanesTuning.Timeline, decode_timeline.go);
	// tl.buf is 0 without it.
	tl launchTimeline
}

// SplitLen returns the positions per split and the number of splits of the
// longest (sequence, KV head).
func (p *PlanesPlan) SplitLen() (positions, splits int) { return p.splitLen, p.maxSplits }

// Kernel returns the plan's implementation.
func (p *PlanesPlan) Kernel() PlanesKernel { return p.kernel }

// Fused reports whether the plan's last split CTA of each row chunk merges
// the splits (split_mma with at most 64 splits, v2.4) instead of the
// combine launch.
func (p *PlanesPlan) Fused() bool { return p.counters != 0 }

// PlanesPositions returns the positions a (sequence, KV head) with counts
// (tokens per tier) spans: every tier run rounded up to whole groups of
// PlanesGroup. Splits cut this space.
func PlanesPositions(counts [kv.NumTiers]int) int {
	g := 0
	for t := kv.High; t < kv.Evicted; t++ {
		g += (counts[t] + PlanesGroup - 1) / PlanesGroup
	}
	return g * PlanesGroup
}

// planesMaxPositions bounds PlanesPositions for l tokens: at most two runs
// end in a partial group besides the last.
func planesMaxPositions(l int) int { return ((l+PlanesGroup-1)/PlanesGroup + 2) * PlanesGroup }

// planesMT returns split_mma's groups per tile for each tier: the lane
// budget over a group's bytes per lane (2·D·bits/16), a power of two in
// [1, 8] (at D = 128 HIGH 1, MEDIUM 2, LOW 4), or t's. At D = 128, a format
// that reads MEDIUM tokens (medium) but no LOW ones (low) gets LOW tiles of
// MEDIUM's size (1/2/2, v2.2: on the H100 1-3% faster all-MEDIUM, 203
// registers instead of 232; bench/results/2026-11-25-h100-bw-5). v2.2 gave
// 1/2/2 to the mixes too (1-9% faster h20:m40:l40 then, under weights 4,
// 2, 1); with v2.8's LOW loop and the tile weights (planesLowWeights) 1/2/4
// is 1.06-1.10x faster for h20:m40:l40 than v2.8's plan and 1.02-1.03x
// faster than 1/2/2 with its best weights (2, 1, 1) at 1 x 128K and 16 x
// 32K, 0.8% slower at 128 x 8K (bench/results/2026-11-26-h100-bw-11).
// Other head dims were not measured and keep the budget's tiles.
func planesMT(d int, t [3]int, medium, low bool) [3]int {
	if t != [3]int{} {
		return t
	}
	var mt [3]int
	for i, b := range []int{16, 8, 4} {
		n := max(1, min(8, planesLaneBudget/(2*d*b/16)))
		mt[i] = 1 << (bits.Len(uint(n)) - 1)
	}
	if medium && !low && d == 128 {
		mt[kv.Low] = min(mt[kv.Low], mt[kv.Medium])
	}
	return mt
}

// planesPrefetch returns split_mma's PF bits under tuning t: bit 0
// double-buffers runs of HIGH tiles (t.Prefetch), bit 1 of MEDIUM tiles
// (t.PrefetchMedium = 1), bit 2 of LOW tiles (t.PrefetchLow = 1) (tierRun,
// v2.5); planesProgram drops every bit at D > 128. All off by default:
// measured on the H100 (bench/results/2026-11-25-h100-bw-9), MEDIUM and
// LOW double buffering (250 registers at MT 1/2/2, no spills) left
// all-8-bit reads within 1.5% either way and made h20:m40:l40 4-16%
// slower. bf16, nofilter, LOW tiles of 4 and D = 256 spill with them.
func planesPrefetch(t PlanesTuning) int {
	pf := 0
	if t.Prefetch {
		pf |= 1
	}
	if t.PrefetchMedium > 0 {
		pf |= 2
	}
	if t.PrefetchLow > 0 {
		pf |= 4
	}
	return pf
}

// planesCTAsPerSM is how many split_mma CTAs run at once on an SM at the
// default registers (CUDA 13 ptxas, D = 128: 236 at MT 1/2/4, 206 at
// 1/2/2: two CTAs of 128 threads). A constant, like decodeRefSMs, so the
// splits (and the result's bits) depend on the shape only.
const planesCTAsPerSM = 2

// planesSplitLen returns the positions per split (a multiple of planesTile)
// of kernel k for items CTAs per split and sequences of up to maxL tokens
// spanning up to maxPos positions. split_v1, and split_mma with
// t.TargetCTAs, take v2.3's rule: about the target's CTAs (decodeTargetCTAs,
// 528, for split_v1), split_mma's splits at least t.MinSplitTokens
// (planesMinSplitTokens) positions. split_mma's default is one wave on
// planesCTAsPerSM·decodeRefSMs slots over tiles of planesTile positions:
// with few items the split count that fills it the most (splitBlocks, v2.4),
// with many slots/items splits (v2.6; v2.4 took the decode kernels'
// splitWaves, about four waves: BITDECODE_PLANES_SPLITS=target:1024 gives
// 16 x 32K its 8 splits again). v2.3's target left 1 x 128K at two waves of 520 CTAs
// and 16 x 32K at 2.4 waves of 640 CTAs (Hkv 8). (Rejected, v2.4-1: the
// shortest length for the count, 33 splits of 3984 positions at 1 x 128K
// filling all 264 slots where 33 of 4096 leave 8 empty: within 1% either
// way on the H100, the step being bound by bytes, not slots; again in
// session 27 with v2.13's kernel, BITDECODE_PLANES_SPLITS=target:264:
// -0.4% to +0.4%, so decode.go's shortest runs, v2.27, are not taken
// here: planes.cu cuts a head's real positions into equal splits anyway.)
func planesSplitLen(k PlanesKernel, items, maxL, maxPos int, t PlanesTuning) int {
	maxTiles := (maxPos + planesTile - 1) / planesTile
	minSplit := planesMinSplitTokens
	if t.MinSplitTokens != 0 {
		minSplit = t.MinSplitTokens
	}
	if k == PlanesMMA && t.TargetCTAs == 0 {
		minTiles := (minSplit + planesTile - 1) / planesTile
		slots := planesCTAsPerSM * decodeRefSMs
		if items >= splitFewItems {
			// v2.6: one wave for many items too (the decode kernels'
			// splitWaves = 4 took 16 x 32K to 8 splits, 3.9 waves: 2
			// splits, one wave, measured 1.07x faster all-8-bit, 1.03x
			// all-16-bit; 4 splits 1.05x, bench/results/2026-11-25-h100-bw-9).
			most := min(decodeMaxSplits, max(1, maxTiles/max(1, minTiles)))
			splits := min(most, max(1, slots/items))
			return (maxTiles + splits - 1) / splits * planesTile
		}
		return splitBlocks(items, maxTiles, minTiles, slots, splitWavesDown) * planesTile
	}
	target := decodeTargetCTAs
	if t.TargetCTAs > 0 {
		target = t.TargetCTAs
	}
	splits := min(max(1, (target+items-1)/items), maxTiles, planesMaxSplits)
	if k == PlanesMMA {
		splits = min(splits, max(1, maxL/minSplit))
	}
	return ((maxPos+splits-1)/splits + planesTile - 1) / planesTile * planesTile
}

// PlanPlanes is PlanPlanesWith the default tuning (the zero PlanesTuning).
func PlanPlanes(dev *cuda.Device, k PlanesKernel, l PlanesLayout, s PlanesShape) (*PlanesPlan, error) {
	return PlanPlanesWith(dev, k, l, s, PlanesTuning{})
}

// PlanPlanesWith compiles (on first use) kernel k for layout l, tuned by t,
// and sizes the split-KV workspace for shape s.
func PlanPlanesWith(dev *cuda.Device, k PlanesKernel, l PlanesLayout, s PlanesShape, t PlanesTuning) (*PlanesPlan, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	if s.IndexStride == 0 {
		s.IndexStride = s.MaxL
	}
	if s.MassStride == 0 {
		s.MassStride = s.MaxL
	}
	if s.B < 1 || s.Hkv < 1 || s.Hq < s.Hkv || s.Hq%s.Hkv != 0 || s.Tq < 1 || s.MaxL < s.Tq ||
		s.MaxBlocks < (s.MaxL+l.Nr-1)/l.Nr || s.IndexStride < s.MaxL || s.MassStride < s.MaxL {
		return nil, fmt.Errorf("kernels: planes: bad shape %+v", s)
	}
	p := &PlanesPlan{kernel: k, layout: l, shape: s, dev: dev}
	rows := s.Hq / s.Hkv * s.Tq
	switch k {
	case PlanesMMA:
		p.rmax = planesRows
	case PlanesV1:
		p.rmax = decodeRowChunks[len(decodeRowChunks)-1]
		for _, r := range decodeRowChunks {
			if r >= rows {
				p.rmax = r
				break
			}
		}
	default:
		return nil, fmt.Errorf("kernels: planes: unknown kernel %d", k)
	}
	p.rowChunks = (rows + p.rmax - 1) / p.rmax
	maxPos := planesMaxPositions(s.MaxL)
	items := s.B * s.Hkv * p.rowChunks
	p.splitLen = planesSplitLen(k, items, s.MaxL, maxPos, t)
	if s.SplitLen != 0 {
		if s.SplitLen < 0 || s.SplitLen%planesTile != 0 {
			return nil, fmt.Errorf("kernels: planes: split of %d positions is not a positive multiple of %d", s.SplitLen, planesTile)
		}
		p.splitLen = s.SplitLen
	}
	p.maxSplits = (maxPos + p.splitLen - 1) / p.splitLen
	if p.maxSplits > planesMaxSplits {
		return nil, fmt.Errorf("kernels: planes: %d tokens in splits of %d positions exceed %d splits", s.MaxL, p.splitLen, planesMaxSplits)
	}
	p.weights = planesWeights
	if k == PlanesMMA {
		p.mt = planesMT(l.D, t.MT, l.Medium, l.Low)
		p.costSplits = !t.PositionSplits
		p.deal = planesDeal(t, p.maxSplits)
		p.weights = planesDefaultWeights(l, p.mt)
	}
	if t.Weights != [3]int{} {
		p.weights = t.Weights
	}
	minB := planesMinB
	if t.MinB != 0 {
		minB = t.MinB
	}
	prog, splitExpr, combineExpr, massExpr := planesProgram(k, l, p.rmax, p.mt, planesPrefetch(t), minB)
	timeline := t.Timeline && k == PlanesMMA
	if timeline {
		prog.Options = append(prog.Options, timelineDefine)
		prog.Exprs = append(prog.Exprs, timelineStampExpr)
	}
	mod, err := compileReporting(dev, prog, t.Ptxas, splitExpr+", "+combineExpr)
	if err != nil {
		return nil, err
	}
	if p.split, err = mod.Function(splitExpr); err != nil {
		return nil, err
	}
	if p.combine, err = mod.Function(combineExpr); err != nil {
		return nil, err
	}
	if p.mass, err = mod.Function(massExpr); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	parts := s.B * s.Hkv * p.rowChunks * p.maxSplits * p.rmax
	if p.partO, err = dev.Alloc(parts * l.D * 4); err != nil {
		return nil, err
	}
	if p.partML, err = dev.Alloc(parts * 2 * 4); err != nil {
		return nil, err
	}
	if s.Mass {
		if p.scores, err = dev.Alloc(s.B * s.Hkv * rows * s.IndexStride * 4); err != nil {
			return nil, err
		}
		if p.finalML, err = dev.Alloc(s.B * s.Hkv * rows * 2 * 4); err != nil {
			return nil, err
		}
	}
	// split_mma merges its splits itself (the last CTA of each row chunk)
	// when they fit the shared memory of its merge (finishSplits, v2.4;
	// its loads ahead since v2.10): no combine launch.
	if k == PlanesMMA && p.maxSplits <= decodeFuseMaxSplits && !t.NoFuse {
		n := s.B * s.Hkv * p.rowChunks
		if p.counters, err = dev.Alloc(n * 4); err != nil {
			return nil, err
		}
		if err = dev.Do(func(c *cuda.Ctx) error { return c.Memset32(p.counters, 0, n) }); err != nil {
			return nil, err
		}
	}
	if timeline {
		grid := cuda.Dim3{X: p.maxSplits, Y: s.Hkv * p.rowChunks, Z: s.B}
		if err = p.tl.load(dev, mod, grid); err != nil {
			return nil, err
		}
	}
	ok = true
	return p, nil
}

// planesProgram returns planes.cu's program for kernel k and layout l with
// rmax query rows per CTA (split_v1) or mt groups per tile of each tier
// (split_mma, with prefetch, registers for minB CTAs per SM), and its
// split, combine and mass kernels' name expressions.
func planesProgram(k PlanesKernel, l PlanesLayout, rmax int, mt [3]int, prefetch, minB int) (prog cuda.Program, splitExpr, combineExpr, massExpr string) {
	if k == PlanesMMA {
		// Double-buffered tiles hold two tiles of planes in registers
		// (HIGH: 128 at D = 128); at D = 256 that alone is the whole
		// register file.
		if l.D > 128 {
			prefetch = 0
		}
		splitExpr = fmt.Sprintf("planes::split_mma<%d, %t, %t, %d, %d, %d, %d, %d>", l.D, l.BF16, l.fast(), mt[0], mt[1], mt[2], prefetch, minB)
	} else {
		splitExpr = fmt.Sprintf("planes::split_v1<%d, %t, %d>", l.D, l.BF16, rmax)
	}
	combineExpr = fmt.Sprintf("planes::combine<%d, %d>", l.D, rmax)
	massExpr = "planes::mass"
	return program("planes.cu", planesSource, []string{splitExpr, combineExpr, massExpr}, nil), splitExpr, combineExpr, massExpr
}

// Close frees the plan's workspace.
func (p *PlanesPlan) Close() error {
	var first error
	for _, ptr := range []*cuda.DevicePtr{&p.partO, &p.partML, &p.scores, &p.finalML, &p.counters, &p.tl.buf} {
		if *ptr != 0 {
			if err := p.dev.Free(*ptr); err != nil && first == nil {
				first = err
			}
			*ptr = 0
		}
	}
	return first
}

// Launch queues the decode (split kernel, combine, and the mass pass when
// b.Mass is set) on stream st for the plan's shape. scale is the softmax
// scale; 0 means 1/sqrt(D).
func (p *PlanesPlan) Launch(c *cuda.Ctx, st cuda.Stream, b PlanesBuffers, scale float32) error {
	return p.launch(c, st, b, p.shape, scale)
}

// LaunchShape queues a decode of shape s, which must fit the plan: the same
// heads, block-table width, index and mass strides and split length, at
// most the plan's sequences, query tokens and length.
func (p *PlanesPlan) LaunchShape(c *cuda.Ctx, st cuda.Stream, b PlanesBuffers, s PlanesShape, scale float32) error {
	ps := p.shape
	if s.IndexStride == 0 {
		s.IndexStride = ps.IndexStride
	}
	if s.MassStride == 0 {
		s.MassStride = ps.MassStride
	}
	if s.Hq != ps.Hq || s.Hkv != ps.Hkv || s.MaxBlocks != ps.MaxBlocks || s.IndexStride != ps.IndexStride ||
		s.MassStride != ps.MassStride || s.B < 1 || s.B > ps.B || s.Tq < 1 || s.Tq > ps.Tq || s.MaxL < s.Tq || s.MaxL > ps.MaxL {
		return fmt.Errorf("kernels: planes: shape %+v does not fit the plan's %+v", s, ps)
	}
	return p.launch(c, st, b, s, scale)
}

func (p *PlanesPlan) launch(c *cuda.Ctx, st cuda.Stream, b PlanesBuffers, s PlanesShape, scale float32) error {
	l := p.layout
	if b.Mass != 0 && !p.shape.Mass {
		return fmt.Errorf("kernels: planes: mass output asked of a plan made without PlanesShape.Mass")
	}
	const log2e = 1.4426950408889634
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(l.D)))
	}
	rows := s.Hq / s.Hkv * s.Tq
	rowChunks := (rows + p.rmax - 1) / p.rmax
	maxSplits := (planesMaxPositions(s.MaxL) + p.splitLen - 1) / p.splitLen
	var scores, finalML cuda.DevicePtr
	if b.Mass != 0 {
		scores, finalML = p.scores, p.finalML
	}
	nrMagic, nrShift := planesDivMagic(l.Nr)
	filter, mode := int32(0), int32(p.deal)
	if l.Filter {
		filter = 1
	}
	if p.costSplits {
		mode |= planesCostSplits
	}
	// The workspace is laid out for the plan's rowChunks and maxSplits;
	// smaller shapes index it with their own, which fit inside.
	args := []any{b.Pool, b.BlockTable, int32(s.MaxBlocks), b.Lens, b.Index, b.Counts, b.Offsets, int32(s.IndexStride),
		b.Q, p.partO, p.partML, scores,
		int32(s.Hq), int32(s.Hkv), int32(s.Tq), int32(l.Nr), nrMagic, int32(nrShift), int32(p.splitLen), int32(maxSplits),
		int32(rowChunks), int32(l.Adj8), int32(l.Adj4), filter, float32(float64(scale) * log2e),
		int32(p.weights[0]), int32(p.weights[1]), int32(p.weights[2]), mode, p.counters, b.Out, finalML}
	if p.tl.buf != 0 {
		region, err := p.tl.region(c, st)
		if err != nil {
			return err
		}
		args = append(args, region)
	}
	err := c.Launch(p.split, cuda.Dim3{X: maxSplits, Y: s.Hkv * rowChunks, Z: s.B}, cuda.Dim3{X: planesThreads}, 0, st, args...)
	if err != nil {
		return err
	}
	if p.counters == 0 {
		err = c.Launch(p.combine, cuda.Dim3{X: s.Hkv * rowChunks, Y: s.B, Z: p.rmax}, cuda.Dim3{X: planesThreads}, 0, st,
			p.partO, p.partML, b.Counts, b.Out, finalML, int32(s.Hq), int32(s.Hkv), int32(s.Tq), int32(p.splitLen),
			int32(maxSplits), int32(rowChunks))
	}
	if err != nil || b.Mass == 0 {
		return err
	}
	// A (sequence, KV head) lists at most its length in entries: MaxL, not
	// IndexStride (the engine's is its context size), bounds the pass, and
	// the CTAs are capped at about one full wave (the kernel loops).
	entries := min(s.MaxL, s.IndexStride)
	ctas := min((entries+planesThreads-1)/planesThreads, max(1, planesMassCTAs/(s.B*s.Hkv)))
	every := max(s.MassEvery, 1)
	return c.Launch(p.mass, cuda.Dim3{X: ctas, Y: s.Hkv, Z: s.B},
		cuda.Dim3{X: planesThreads}, 0, st,
		scores, finalML, b.Index, b.Counts, b.Offsets, b.Mass, b.Lens, int32(s.Hkv), int32(rows), int32(s.Tq), int32(every),
		int32(s.IndexStride), int32(s.MassStride))
}

// planesDivMagic returns split_mma's multiplier and shift for dividing
// token positions by the block size nr (>= 2; planes.cu divNr, v2.7):
// t / nr = (t · magic) >> (32 + shift) for every 0 <= t < 2^31, with l =
// ceil(log2 nr), magic = ceil(2^(31+l) / nr) < 2^32, shift = l - 1
// (Granlund and Montgomery, "Division by invariant integers using
// multiplication", 1994, theorem 4.2 with N = 31: 2^(31+l) <= magic·nr <=
// 2^(31+l) + 2^l).
func planesDivMagic(nr int) (magic uint32, shift int) {
	l := bits.Len(uint(nr - 1))
	return uint32((uint64(1)<<(31+l) + uint64(nr) - 1) / uint64(nr)), l - 1
}

// TierIndex is the host copy of the kernels' tier-sorted index (planes.cu):
// for each of B sequences and Hkv KV heads, the positions of the tokens to
// read grouped by tier, HIGH ascending, then MEDIUM, then LOW (EVICTED
// tokens absent; attn.TierIndex's order), and the number of tokens of each
// tier. Upload Index and Counts as PlanesBuffers.Index and .Counts.
type TierIndex struct {
	B, Hkv, Stride int
	// Index is [B][Hkv][Stride] int32; entries past a head's count are unused.
	Index []int32
	// Counts is [B][Hkv][4] int32: HIGH, MEDIUM, LOW, EVICTED (kv.Tier order).
	Counts []int32
}

// NewTierIndex returns an empty index (no tokens) for b sequences of hkv KV
// heads of up to stride tokens.
func NewTierIndex(b, hkv, stride int) *TierIndex {
	return &TierIndex{B: b, Hkv: hkv, Stride: stride, Index: make([]int32, b*hkv*stride), Counts: make([]int32, b*hkv*int(kv.NumTiers))}
}

// Set fills sequence b's KV head h from its tier map: tiers[t] is the tier
// of token t, len(tiers) the sequence's length (at most Stride).
func (x *TierIndex) Set(b, h int, tiers []kv.Tier) error {
	if b < 0 || b >= x.B || h < 0 || h >= x.Hkv {
		return fmt.Errorf("kernels: tier index: sequence %d KV head %d out of range [%d, %d)", b, h, x.B, x.Hkv)
	}
	if len(tiers) > x.Stride {
		return fmt.Errorf("kernels: tier index: %d tokens exceed the stride of %d", len(tiers), x.Stride)
	}
	bh := b*x.Hkv + h
	var n [kv.NumTiers]int
	for pos, t := range tiers {
		if t >= kv.NumTiers {
			return fmt.Errorf("kernels: tier index: token %d has tier %d", pos, t)
		}
		n[t]++
	}
	next := [kv.NumTiers]int{}
	for t := kv.High + 1; t < kv.NumTiers; t++ {
		next[t] = next[t-1] + n[t-1]
	}
	idx := x.Index[bh*x.Stride : (bh+1)*x.Stride]
	for pos, t := range tiers {
		if t != kv.Evicted {
			idx[next[t]] = int32(pos)
			next[t]++
		}
	}
	for t := range n {
		x.Counts[bh*int(kv.NumTiers)+t] = int32(n[t])
	}
	return nil
}

// TierCounts returns sequence b's KV head h's tokens per tier.
func (x *TierIndex) TierCounts(b, h int) [kv.NumTiers]int {
	var n [kv.NumTiers]int
	for t := range n {
		n[t] = int(x.Counts[(b*x.Hkv+h)*int(kv.NumTiers)+t])
	}
	return n
}

// PlanesWriter is planes.cu's write kernel: new tokens' K and V split into
// their blocks' planes on the GPU (the bit-plane cache's append).
type PlanesWriter struct {
	fn cuda.Function
}

// LoadPlanesWriter compiles the write kernel (once per device; then from
// the kernel cache).
func LoadPlanesWriter(dev *cuda.Device) (*PlanesWriter, error) {
	const expr = "planes::write"
	mod, err := dev.Compile(program("planes.cu", planesSource, []string{expr}, nil))
	if err != nil {
		return nil, err
	}
	fn, err := mod.Function(expr)
	if err != nil {
		return nil, err
	}
	return &PlanesWriter{fn: fn}, nil
}

// Launch queues the split of T tokens: k and v are [T][Hkv·D] float32,
// rounded to fp16 (bf16 when bf16); token t goes to slot within[t] of pool
// block block[t] (int32 arrays of T; a negative block skips the token), in
// a pool of [blocks][Hkv][4·Nr·D] bytes (kv.PlaneLayout per KV head).
func (w *PlanesWriter) Launch(c *cuda.Ctx, st cuda.Stream, k, v, block, within, pool cuda.DevicePtr, T, hkv, d, nr int, bf16 bool) error {
	if T == 0 {
		return nil
	}
	n := T * hkv * d / 2
	b := flagArg(bf16)
	return c.Launch(w.fn, cuda.Dim3{X: (n + planesThreads - 1) / planesThreads}, cuda.Dim3{X: planesThreads}, 0, st,
		k, v, block, within, pool, int32(T), int32(hkv), int32(d), int32(nr), b)
}

// PlanesRetier is planes.cu's retier and append kernels: the engine's
// persistent tier index kept on the device. Per (sequence slot, layer) sl
// and KV head h (bh = sl·Hkv + h) the arrays are
//
//	mass    [bh][Stride] float32 (the attention mass the decode accumulates)
//	index   [bh][Stride] int32   (PlanesBuffers.Index of that slot and layer)
//	counts  [bh][4] int32        (HIGH, MEDIUM, LOW, EVICTED)
//	offsets [bh][4] int32        (PlanesBuffers.Offsets: run starts)
//
// Retier rewrites the index of whole (slot, layer)s from their mass by
// kvcache.TierPolicy's rule (the same tier maps: ties and all), and Append
// adds new tokens to the run of the tier they get.
type PlanesRetier struct {
	retierV3, retierV2, retier, append cuda.Function
	// V1 and V2 select planes.cu's retier (v1: 6-7 radix passes of 8
	// bits over the 64-bit key of mass and position) or retier_v2 (4
	// passes over the mass key, ties ranked by position in the
	// compaction) instead of retier_v3 (the default and the GPU cache's:
	// v2's rule in 3 passes of 11, 11 and 10 bits, one histogram per
	// distinct prefix, a selection done once its remaining rank is 0,
	// compaction in chunks of 4096); all three give the same index (the
	// policy's). V1 wins if both are set.
	V1, V2 bool
}

// PlanesRetierJob is one (sequence slot, layer) to re-tier: its N tokens,
// the sinks [0, Sinks) and window [Win, N) that stay HIGH, the cumulative
// counts of the policy's fill from the bottom among the candidates [Sinks,
// Win) (the KE lowest-ranked EVICTED, then LOW up to KL, MEDIUM up to KM:
// 0 <= KE <= KL <= KM <= Win - Sinks), and Last, the tier new tokens get
// (its run is stored last, so Append moves nothing).
type PlanesRetierJob struct {
	SL, N, Sinks, Win, KE, KL, KM int
	Last                          kv.Tier
}

// PlanesRetierJobWords is the int32 words of one job in the table
// LaunchRetier reads (planes.cu's kRetierJob).
const PlanesRetierJobWords = 8

// Words appends job j's words to w.
func (j PlanesRetierJob) Words(w []int32) []int32 {
	return append(w, int32(j.SL), int32(j.N), int32(j.Sinks), int32(j.Win), int32(j.KE), int32(j.KL), int32(j.KM), int32(j.Last))
}

// check validates a job against the arrays' stride.
func (j PlanesRetierJob) check(stride int) error {
	if j.SL < 0 || j.N < 0 || j.N > stride || j.Sinks < 0 || j.Win < j.Sinks || j.Win > j.N || j.KE < 0 || j.KL < j.KE ||
		j.KM < j.KL || j.KM > j.Win-j.Sinks || j.Last > kv.Low {
		return fmt.Errorf("kernels: planes retier: bad job %+v (stride %d)", j, stride)
	}
	return nil
}

// PlanesAppendJob is one sequence's new tokens [Pos, Pos+Len) of tier Tier
// in slot Slot (every layer and KV head).
type PlanesAppendJob struct {
	Slot, Pos, Len int
	Tier           kv.Tier
}

// PlanesAppendJobWords is the int32 words of one append job (kAppendJob).
const PlanesAppendJobWords = 4

// Words appends job j's words to w.
func (j PlanesAppendJob) Words(w []int32) []int32 {
	return append(w, int32(j.Slot), int32(j.Pos), int32(j.Len), int32(j.Tier))
}

// LoadPlanesRetier compiles the retier and append kernels (once per device;
// then from the kernel cache).
func LoadPlanesRetier(dev *cuda.Device) (*PlanesRetier, error) {
	exprs := []string{"planes::retier_v3", "planes::retier_v2", "planes::retier", "planes::append"}
	mod, err := dev.Compile(program("planes.cu", planesSource, exprs, nil))
	if err != nil {
		return nil, err
	}
	r := &PlanesRetier{}
	for i, f := range []*cuda.Function{&r.retierV3, &r.retierV2, &r.retier, &r.append} {
		if *f, err = mod.Function(exprs[i]); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// planesRetierThreads is planes.cu's kRetierThreads.
const planesRetierThreads = 1024

// LaunchRetier queues the re-tier of nJobs jobs whose words
// (PlanesRetierJob.Words) are at jobs on the device, over arrays of hkv KV
// heads and stride tokens per (slot, layer, KV head).
func (r *PlanesRetier) LaunchRetier(c *cuda.Ctx, st cuda.Stream, jobs cuda.DevicePtr, nJobs int, mass, index, counts, offsets cuda.DevicePtr, hkv, stride int) error {
	if nJobs == 0 {
		return nil
	}
	fn := r.retierV3
	switch {
	case r.V1:
		fn = r.retier
	case r.V2:
		fn = r.retierV2
	}
	return c.Launch(fn, cuda.Dim3{X: hkv, Y: nJobs}, cuda.Dim3{X: planesRetierThreads}, 0, st,
		jobs, mass, index, counts, offsets, int32(hkv), int32(stride))
}

// LaunchAppend queues the append of nJobs sequences' new tokens
// (PlanesAppendJob.Words at jobs) to every layer's index.
func (r *PlanesRetier) LaunchAppend(c *cuda.Ctx, st cuda.Stream, jobs cuda.DevicePtr, nJobs int, index, counts, offsets cuda.DevicePtr, hkv, layers, stride int) error {
	if nJobs == 0 {
		return nil
	}
	return c.Launch(r.append, cuda.Dim3{X: hkv, Y: layers, Z: nJobs}, cuda.Dim3{X: planesThreads}, 0, st,
		jobs, index, counts, offsets, int32(hkv), int32(layers), int32(stride))
}

// CheckRetierJobs validates jobs against the arrays' stride (the kernels
// trust them).
func CheckRetierJobs(jobs []PlanesRetierJob, stride int) error {
	for _, j := range jobs {
		if err := j.check(stride); err != nil {
			return err
		}
	}
	return nil
}

// TierMapFromIndex rebuilds the tier map of n tokens from one (sequence, KV
// head)'s index entries, counts and run offsets (offsets nil: TierIndex's
// end-to-end layout); tokens the index lists nowhere are EVICTED. It fails
// if the index lists a token twice or out of range, or a run is not
// ascending.
func TierMapFromIndex(index []int32, counts [kv.NumTiers]int32, offsets []int32, n int) ([]kv.Tier, error) {
	m := make([]kv.Tier, n)
	seen := make([]bool, n)
	start := int32(0)
	for t := kv.High; t < kv.Evicted; t++ {
		o := start
		if offsets != nil {
			o = offsets[t]
		}
		start += counts[t]
		prev := int32(-1)
		for i := int32(0); i < counts[t]; i++ {
			if o+i < 0 || int(o+i) >= len(index) {
				return nil, fmt.Errorf("kernels: tier index: run %d entry %d at %d outside [0, %d)", t, i, o+i, len(index))
			}
			pos := index[o+i]
			if pos < 0 || int(pos) >= n || seen[pos] || pos <= prev {
				return nil, fmt.Errorf("kernels: tier index: run %d entry %d is token %d (after %d; %d tokens)", t, i, pos, prev, n)
			}
			seen[pos], prev = true, pos
			m[pos] = t
		}
	}
	ev := 0
	for i := range m {
		if !seen[i] {
			m[i] = kv.Evicted
			ev++
		}
	}
	if int32(ev) != counts[kv.Evicted] {
		return nil, fmt.Errorf("kernels: tier index: %d tokens absent, counts say %d evicted", ev, counts[kv.Evicted])
	}
	return m, nil
}

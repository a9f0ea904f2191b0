package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
)

// Tier mixes of the bit-plane tests: every token of every KV head gets a
// tier by mix.
const (
	mixHigh   = "high"   // all HIGH
	mixMedium = "medium" // all MEDIUM
	mixLow    = "low"    // all LOW
	mixRandom = "random" // HIGH, MEDIUM, LOW at random
	mixRuns   = "runs"   // random tiers in runs of 1-200 tokens
	mixEvict  = "evict"  // HIGH, MEDIUM, LOW, EVICTED at random; token 0 HIGH
)

var planeMixes = []string{mixHigh, mixMedium, mixLow, mixRandom, mixRuns, mixEvict}

// planeTiers draws the tier map of one KV head of l tokens.
func planeTiers(r *rand.Rand, mix string, l int) []kv.Tier {
	t := make([]kv.Tier, l)
	switch mix {
	case mixMedium:
		for i := range t {
			t[i] = kv.Medium
		}
	case mixLow:
		for i := range t {
			t[i] = kv.Low
		}
	case mixRandom:
		for i := range t {
			t[i] = kv.Tier(r.IntN(3))
		}
	case mixRuns:
		for i := 0; i < l; {
			n, tier := 1+r.IntN(200), kv.Tier(r.IntN(3))
			for ; n > 0 && i < l; n, i = n-1, i+1 {
				t[i] = tier
			}
		}
	case mixEvict:
		for i := range t {
			t[i] = kv.Tier(r.IntN(4))
		}
		t[0] = kv.High // every query row sees a token
	}
	return t
}

// planesCase is one bit-plane decode call: caches built on the CPU with
// package attn, the planes a token's tier does not read poisoned, uploaded
// to a pool in shuffled block order (paged), run on the GPU and checked
// against attn.ReferencePlanes.
type planesCase struct {
	kernel kernels.PlanesKernel
	spec   string
	sh     attn.Shape
	lens   []int
	tq     int
	mix    string
	// splitLen fixes the split length (positions) when not 0.
	splitLen int
	// scale multiplies K and V (0: 1). Tiny values (2^-12) put many
	// elements where the subnormal filter and the fills decide the read.
	scale float64
	// vScale multiplies V only (0: 1).
	vScale float64
	// massEvery samples the mass (PlanesShape.MassEvery; 0: every row).
	massEvery int
	// deal sets PlanesTuning.Deal when not 0 (split_mma's shares of a
	// mixed (sequence, KV head)'s tiers, v2.12).
	deal kernels.PlanesDeal
	// timeline compiles split_mma with its launch timeline
	// (PlanesTuning.Timeline) and checks its records (checkPlanesTimeline).
	timeline bool
}

func (c planesCase) String() string {
	return fmt.Sprintf("%v %s Hq=%d Hkv=%d D=%d lens=%v Tq=%d mix=%s split=%d scale=%g k=%d deal=%d", c.kernel, c.spec, c.sh.Hq, c.sh.Hkv, c.sh.D,
		c.lens, c.tq, c.mix, c.splitLen, c.scale, c.massEvery, c.deal)
}

// planesData is a built case, host side.
type planesData struct {
	f         kv.Format
	lay       kernels.PlanesLayout
	seqs      []*attn.PlaneSeq
	pool      []byte
	table     []int32
	maxBlocks int
	lens      []int32
	maxL      int
	index     *kernels.TierIndex
	q         []float32 // what the reference sees (fp16 values)
	qh        []uint16
	want      []float32
	st        attn.PlaneRefStats
	k, v      [][]float32 // the float32 K/V of each sequence, [L][Hkv][D]
}

// poisonUnread overwrites the planes a tier does not read of every token
// (MEDIUM: plane 2; LOW: planes 1 and 2; EVICTED: all) and the unused
// slots of the last block with 0xff, in K and V.
func poisonUnread(blocks [][]byte, tiers [][]kv.Tier, lay kv.PlaneLayout, l int) {
	for i, blk := range blocks {
		for h := range tiers {
			base := blk[h*lay.BlockBytes : (h+1)*lay.BlockBytes]
			for t := 0; t < lay.Tokens; t++ {
				pos := i*lay.Tokens + t
				first := kv.NumPlanes // first plane to poison
				if pos < l {
					first = tiers[h][pos].Planes()
				} else {
					first = 0
				}
				for half := 0; half < 2; half++ {
					for p := first; p < kv.NumPlanes; p++ {
						lo, hi := lay.Slice(half, p, t)
						for j := lo; j < hi; j++ {
							base[j] = 0xff
						}
					}
				}
			}
		}
	}
}

func buildPlanes(t *testing.T, r *rand.Rand, c planesCase) *planesData {
	t.Helper()
	f, err := kv.MustParseSpec(c.spec).Resolve(c.sh.D)
	if err != nil {
		t.Fatal(err)
	}
	lay, err := kernels.PlanesLayoutFor(f)
	if err != nil {
		t.Fatal(err)
	}
	pl := f.PlaneLayout()
	dt := &planesData{f: f, lay: lay, maxBlocks: 1}
	nBlocks := 0
	for _, l := range c.lens {
		cache, err := attn.NewPlaneCache(f, c.sh)
		if err != nil {
			t.Fatal(err)
		}
		k, v := kvtest.KeysValues(r, l, c.sh.Hkv, c.sh.D)
		if c.scale != 0 {
			for i := range k {
				k[i] *= float32(c.scale)
				v[i] *= float32(c.scale)
			}
		}
		if c.vScale != 0 {
			for i := range v {
				v[i] *= float32(c.vScale)
			}
		}
		if err := cache.Append(k, v); err != nil {
			t.Fatal(err)
		}
		for h := range cache.Tiers {
			cache.Tiers[h] = planeTiers(r, c.mix, l)
		}
		poisonUnread(cache.Blocks, cache.Tiers, pl, l)
		dt.seqs = append(dt.seqs, &cache.PlaneSeq)
		dt.k, dt.v = append(dt.k, k), append(dt.v, v)
		dt.maxL = max(dt.maxL, l)
		dt.maxBlocks = max(dt.maxBlocks, len(cache.Blocks))
		nBlocks += len(cache.Blocks)
	}
	// Paged pool: blocks in a shuffled order, plus one unused poisoned block.
	blockBytes := c.sh.Hkv * pl.BlockBytes
	dt.pool = make([]byte, (nBlocks+1)*blockBytes)
	for i := range dt.pool {
		dt.pool[i] = 0xff
	}
	perm := r.Perm(nBlocks + 1)
	dt.table = make([]int32, len(dt.seqs)*dt.maxBlocks)
	dt.lens = make([]int32, len(dt.seqs))
	dt.index = kernels.NewTierIndex(len(dt.seqs), c.sh.Hkv, dt.maxL)
	next := 0
	for b, s := range dt.seqs {
		for i, blk := range s.Blocks {
			slot := perm[next]
			next++
			copy(dt.pool[slot*blockBytes:], blk)
			dt.table[b*dt.maxBlocks+i] = int32(slot)
		}
		dt.lens[b] = int32(s.Len)
		for h := 0; h < c.sh.Hkv; h++ {
			if err := dt.index.Set(b, h, s.Tiers[h][:s.Len]); err != nil {
				t.Fatal(err)
			}
		}
	}
	nq := len(dt.seqs) * c.tq * c.sh.Hq * c.sh.D
	dt.q, dt.qh = make([]float32, nq), make([]uint16, nq)
	for i := range dt.q {
		dt.qh[i] = half.FromFloat32(float32(r.NormFloat64()))
		dt.q[i] = half.ToFloat32(dt.qh[i]) // the reference sees the fp16 query the GPU sees
	}
	dt.want = make([]float32, nq)
	if dt.st, err = attn.ReferencePlanes(dt.want, dt.q, dt.seqs, attn.Params{Format: f, Shape: c.sh, Tq: c.tq, MassEvery: c.massEvery}); err != nil {
		t.Fatal(err)
	}
	return dt
}

// gpuBufs uploads host slices and frees them at the end of the test.
type gpuBufs struct {
	t      *testing.T
	d      *cuda.Device
	allocs []cuda.DevicePtr
}

func (g *gpuBufs) up(src []byte) cuda.DevicePtr {
	g.t.Helper()
	p, err := g.d.Alloc(max(len(src), 16))
	if err != nil {
		g.t.Fatal(err)
	}
	g.allocs = append(g.allocs, p)
	if len(src) > 0 {
		if err := g.d.HtoD(p, src); err != nil {
			g.t.Fatal(err)
		}
	}
	return p
}

func (g *gpuBufs) free() {
	for _, p := range g.allocs {
		g.d.Free(p)
	}
}

// planesOut runs the plan on the case's buffers (mass from massInit when
// withMass) and returns the fp16 output and the mass.
func planesOut(t *testing.T, d *cuda.Device, plan *kernels.PlanesPlan, bufs kernels.PlanesBuffers, nq int, massInit []float32) ([]uint16, []float32) {
	t.Helper()
	poison := make([]uint16, nq)
	for i := range poison {
		poison[i] = 0x7e00 // fp16 NaN
	}
	if err := d.HtoD(bufs.Out, cuda.Bytes(poison)); err != nil {
		t.Fatal(err)
	}
	if bufs.Mass != 0 {
		if err := d.HtoD(bufs.Mass, cuda.Bytes(massInit)); err != nil {
			t.Fatal(err)
		}
	}
	// A copy from Go (pageable) memory returns once the driver has staged
	// it, before its DMA lands, and the legacy stream it goes on does not
	// order the launch's non-blocking stream: without this, the mass pass
	// could add to the mass before massInit overwrote it (seen once on the
	// H100, session 13: a run's mass equal to massInit).
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	err := d.Do(func(cx *cuda.Ctx) error {
		if err := plan.Launch(cx, d.Stream(), bufs, 0); err != nil {
			return err
		}
		return cx.SyncStream(d.Stream())
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uint16, nq)
	if err := d.DtoH(cuda.Bytes(got), bufs.Out); err != nil {
		t.Fatal(err)
	}
	var mass []float32
	if bufs.Mass != 0 {
		mass = make([]float32, len(massInit))
		if err := d.DtoH(cuda.Bytes(mass), bufs.Mass); err != nil {
			t.Fatal(err)
		}
	}
	return got, mass
}

// runPlanesCase runs case c, checks it and returns its output.
func runPlanesCase(t *testing.T, r *rand.Rand, c planesCase) []uint16 {
	t.Helper()
	d := device(t)
	dt := buildPlanes(t, r, c)
	g := &gpuBufs{t: t, d: d}
	defer g.free()
	bufs := kernels.PlanesBuffers{
		Pool: g.up(dt.pool), BlockTable: g.up(cuda.Bytes(dt.table)), Lens: g.up(cuda.Bytes(dt.lens)),
		Index: g.up(cuda.Bytes(dt.index.Index)), Counts: g.up(cuda.Bytes(dt.index.Counts)), Q: g.up(cuda.Bytes(dt.qh)),
	}
	nq := len(dt.q)
	bufs.Out = g.up(make([]byte, nq*2))
	massInit := make([]float32, len(dt.seqs)*c.sh.Hkv*dt.maxL)
	for i := range massInit {
		massInit[i] = float32(r.IntN(1000)) / 64 // exact in float32: the sum is checked, not the rounding
	}
	bufs.Mass = g.up(cuda.Bytes(massInit))
	tp := tuning.Planes
	if c.deal != kernels.PlanesDealDefault {
		tp.Deal = c.deal
	}
	tp.Timeline = c.timeline
	plan, err := kernels.PlanPlanesWith(d, c.kernel, dt.lay, kernels.PlanesShape{B: len(dt.seqs), Hq: c.sh.Hq, Hkv: c.sh.Hkv, Tq: c.tq,
		MaxBlocks: dt.maxBlocks, MaxL: dt.maxL, SplitLen: c.splitLen, Mass: true, MassEvery: c.massEvery}, tp)
	if err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	defer plan.Close()
	var first []uint16
	var firstMass []float32
	for run := 0; run < 3; run++ {
		got, mass := planesOut(t, d, plan, bufs, nq, massInit)
		if run == 0 {
			first, firstMass = got, mass
			checkPlanesOut(t, c, dt, got)
			checkPlanesMass(t, c, dt, mass, massInit)
			continue
		}
		for i := range got {
			if got[i] != first[i] {
				t.Fatalf("%v: run %d element %d: %#04x, first run %#04x: not deterministic", c, run, i, got[i], first[i])
			}
		}
		for i := range mass {
			if math.Float32bits(mass[i]) != math.Float32bits(firstMass[i]) {
				t.Fatalf("%v: run %d mass %d: %g, first run %g: not deterministic", c, run, i, mass[i], firstMass[i])
			}
		}
	}
	if c.timeline {
		checkPlanesTimeline(t, c, plan)
	}
	// split_mma's merge in its last split CTA (finishSplits, v2.10)
	// against the combine launch (combineRow: finishSplits' arithmetic in
	// the same order): the same bits, mass included.
	if _, splits := plan.SplitLen(); plan.Fused() {
		tn := tp
		tn.NoFuse = true
		unfused, err := kernels.PlanPlanesWith(d, c.kernel, dt.lay, kernels.PlanesShape{B: len(dt.seqs), Hq: c.sh.Hq, Hkv: c.sh.Hkv, Tq: c.tq,
			MaxBlocks: dt.maxBlocks, MaxL: dt.maxL, SplitLen: c.splitLen, Mass: true, MassEvery: c.massEvery}, tn)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		got, mass := planesOut(t, d, unfused, bufs, nq, massInit)
		unfused.Close()
		for i := range got {
			if got[i] != first[i] {
				t.Fatalf("%v: %d splits merged by the combine launch, element %d: %#04x, by the last split %#04x", c, splits, i, got[i], first[i])
			}
		}
		for i := range mass {
			if math.Float32bits(mass[i]) != math.Float32bits(firstMass[i]) {
				t.Fatalf("%v: %d splits merged by the combine launch, mass %d: %g, by the last split %g", c, splits, i, mass[i], firstMass[i])
			}
		}
	}
	// The same index stored with run offsets (LOW, HIGH, MEDIUM, a gap
	// between), as the engine's persistent index may be: the same bits.
	index, offsets := relaidIndex(dt.index)
	bufs.Index, bufs.Offsets = g.up(cuda.Bytes(index)), g.up(cuda.Bytes(offsets))
	got, mass := planesOut(t, d, plan, bufs, nq, massInit)
	for i := range got {
		if got[i] != first[i] {
			t.Fatalf("%v: with run offsets, element %d: %#04x, end to end %#04x", c, i, got[i], first[i])
		}
	}
	for i := range mass {
		if math.Float32bits(mass[i]) != math.Float32bits(firstMass[i]) {
			t.Fatalf("%v: with run offsets, mass %d: %g, end to end %g", c, i, mass[i], firstMass[i])
		}
	}

	return first
}

// relaidIndex stores x's runs of every (sequence, KV head) in the order LOW,
// HIGH, MEDIUM with one unused entry between LOW and HIGH when the stride
// allows (poisoned entries elsewhere), and returns the index and its run
// offsets ([B][Hkv][4]: HIGH, MEDIUM, LOW, unused).
func relaidIndex(x *kernels.TierIndex) (index, offsets []int32) {
	index = make([]int32, len(x.Index))
	for i := range index {
		index[i] = -1 << 30
	}
	offsets = make([]int32, x.B*x.Hkv*4)
	for bh := range x.B * x.Hkv {
		c := x.Counts[4*bh : 4*bh+4]
		src := x.Index[bh*x.Stride : (bh+1)*x.Stride]
		dst := index[bh*x.Stride : (bh+1)*x.Stride]
		start := [3]int32{0, c[0], c[0] + c[1]} // end to end: HIGH, MEDIUM, LOW
		gap := int32(0)
		if int(c[0]+c[1]+c[2]) < x.Stride {
			gap = 1
		}
		at := [3]int32{c[2] + gap, c[2] + gap + c[0], 0}
		for t := range 3 {
			copy(dst[at[t]:at[t]+c[t]], src[start[t]:start[t]+c[t]])
			offsets[4*bh+t] = at[t]
		}
	}
	return index, offsets
}

// fp16Round is the rounding of a value w to fp16: half an ulp, 2^-11
// relative, and at least half the subnormal step 2^-24 (tiny outputs).
func fp16Round(w float64) float64 { return max(math.Abs(w)/2048, 1.0/(1<<25)) }

// fp16Max is the largest finite fp16 value.
const fp16Max = 65504

// checkPlanesOut compares every output element with the reference within
// kvtest.PlaneDecodeTol plus the fp16 rounding of the output.
func checkPlanesOut(t *testing.T, c planesCase, dt *planesData, got []uint16) {
	t.Helper()
	d := c.sh.D
	for row := 0; row < len(got)/d; row++ {
		tol := kvtest.PlaneDecodeTol(dt.lay.BF16, dt.st, d, row, c.kernel == kernels.PlanesMMA)
		for ch := 0; ch < d; ch++ {
			g := float64(half.ToFloat32(got[row*d+ch]))
			w := float64(dt.want[row*d+ch])
			if math.IsInf(g, 0) && math.Abs(w)+tol >= fp16Max {
				continue // the bound reaches beyond fp16's range (bf16 K/V read at 4 bits: huge values)
			}
			if g != g || math.Abs(g-w) > tol+fp16Round(w) {
				t.Fatalf("%v: row %d channel %d: got %g, want %g (tol %.3g)", c, row, ch, g, w, tol+fp16Round(w))
			}
		}
	}
}

// checkPlanesMass checks the mass each call added against the reference,
// per token, and that evicted tokens and the padding past each sequence got
// nothing.
func checkPlanesMass(t *testing.T, c planesCase, dt *planesData, mass, init []float32) {
	t.Helper()
	rows := c.sh.Group() * c.tq
	for b, s := range dt.seqs {
		tol := kvtest.PlaneMassTol(dt.lay.BF16, dt.st, c.sh.D, rows, s.Len, c.kernel == kernels.PlanesMMA)
		for h := 0; h < c.sh.Hkv; h++ {
			off := (b*c.sh.Hkv + h) * dt.maxL
			for tok := 0; tok < dt.maxL; tok++ {
				added := float64(mass[off+tok]) - float64(init[off+tok])
				want := 0.0
				if tok < s.Len {
					want = dt.st.Mass[b][h][tok]
				}
				// The float32 sum adds the rounding of init + mass.
				e := tol + math.Abs(float64(mass[off+tok]))/(1<<23)
				if added != added || math.Abs(added-want) > e {
					t.Fatalf("%v: seq %d head %d token %d: mass added %g, want %g (tol %.3g)", c, b, h, tok, added, want, e)
				}
				if (tok >= s.Len || s.Tiers[h][tok] == kv.Evicted) && mass[off+tok] != init[off+tok] {
					t.Fatalf("%v: seq %d head %d token %d (not read) has mass %g added", c, b, h, tok, added)
				}
			}
		}
	}
}

// planeShapes cover D 64/128/256 and GQA groups 1, 3, 4, 5, 7, 8 and 16.
var planeShapes = []attn.Shape{{Hq: 32, Hkv: 8, D: 128}, {Hq: 4, Hkv: 4, D: 64}, {Hq: 6, Hkv: 2, D: 256},
	{Hq: 8, Hkv: 1, D: 128}, {Hq: 14, Hkv: 2, D: 128}, {Hq: 16, Hkv: 1, D: 64}, {Hq: 10, Hkv: 2, D: 256}}

// planeSpecs cover the fp16 ftz path (default and other fills), the exact
// integer path (bf16, no filter, a LOW fill that saturates) and block sizes.
var planeSpecs = []string{"bw", "bw:a8=0x70:a4=0x500:blk32", "bw:trunc:blk128", "bw:bf16", "bw:nofilter", "bw:a4=0xfff"}

// TestGPUPlanesMatchesReference runs both kernels over every tier mix, spec
// and shape, with ragged lengths (partial last blocks), three sequences per
// call, shuffled pages, 1 or 3 query tokens, against attn.ReferencePlanes,
// with the attention mass (every row, or sampled: PlanesShape.MassEvery)
// and bitwise determinism.
func TestGPUPlanesMatchesReference(t *testing.T) {
	for _, k := range []kernels.PlanesKernel{kernels.PlanesMMA, kernels.PlanesV1} {
		t.Run(k.String(), func(t *testing.T) { testPlanesMatches(t, k) })
	}
}

func testPlanesMatches(t *testing.T, k kernels.PlanesKernel) {
	device(t)
	r := rand.New(rand.NewPCG(31, 32))
	n := 0
	for i, spec := range planeSpecs {
		nr := kv.MustParseSpec(spec).Residual
		all := []int{5, nr - 1, nr, nr + 1, 3*nr + 7, 1000, 2100}
		for j, sh := range planeShapes {
			for m, mix := range planeMixes {
				lens := []int{all[(i+j+m)%len(all)], all[(i+j+2*m+3)%len(all)], all[(i+2*j+m+5)%len(all)]}
				// Every other Tq = 3 case samples the mass of one query
				// token in 2 (kv.MassSampled): the rows of the others add
				// nothing.
				runPlanesCase(t, r, planesCase{kernel: k, spec: spec, sh: sh, lens: lens, tq: 1 + 2*(n%2), mix: mix, massEvery: 2 * (n % 4 / 3)})
				n++
			}
		}
	}
}

// TestGPUPlanesSplits runs long sequences with the planner's splits and
// with fixed short ones (split boundaries inside tier runs and groups);
// 320 positions give 63 splits, which split_mma still merges in its last
// split CTA, past the 32 partials that merge loads ahead (kMergeAhead).
func TestGPUPlanesSplits(t *testing.T) {
	device(t)
	r := rand.New(rand.NewPCG(33, 34))
	sh := attn.Shape{Hq: 32, Hkv: 8, D: 128}
	for _, k := range []kernels.PlanesKernel{kernels.PlanesMMA, kernels.PlanesV1} {
		t.Run(k.String(), func(t *testing.T) {
			for _, mix := range []string{mixRandom, mixRuns, mixEvict, mixLow} {
				for _, split := range []int{0, 64, 192, 320} {
					runPlanesCase(t, r, planesCase{kernel: k, spec: "bw", sh: sh, lens: []int{20000, 777}, tq: 1, mix: mix, splitLen: split})
				}
			}
		})
	}
}

// TestGPUPlanesSpecPlans runs split_mma under the plans the format's hints
// choose (PlanesLayout.Medium, .Low): a spec that reads MEDIUM and LOW
// tokens (tiles 1/2/4, planesLowWeights: v2.9; since v2.11 the same values
// as planesWeights) and one that reads MEDIUM tokens alone (tiles 1/2/2),
// over mixed tier maps, with the planner's splits and fixed short ones.
// The other tests' "bw" specs plan 1/2/4 with planesWeights.
func TestGPUPlanesSpecPlans(t *testing.T) {
	device(t)
	r := rand.New(rand.NewPCG(41, 42))
	sh := attn.Shape{Hq: 32, Hkv: 8, D: 128}
	for _, spec := range []string{"bw:h20:m40:l40", "bw:m100"} {
		for _, mix := range []string{mixRandom, mixRuns, mixEvict} {
			for _, split := range []int{0, 192} {
				runPlanesCase(t, r, planesCase{kernel: kernels.PlanesMMA, spec: spec, sh: sh, lens: []int{20000, 777}, tq: 1, mix: mix, splitLen: split})
			}
		}
	}
}

// TestGPUPlanesDeal runs split_mma's three shares of a mixed (sequence, KV
// head)'s tiers (PlanesTuning.Deal: v2.11's contiguous runs by the
// weights, the warps dealt, the splits and the warps dealt: v2.12's
// default) over mixed tier maps, with the planner's splits and fixed short
// ones; then requires uniform reads (one tier per (sequence, KV head)) to
// give the same bits under all three, since only mixed heads are dealt.
func TestGPUPlanesDeal(t *testing.T) {
	device(t)
	r := rand.New(rand.NewPCG(43, 44))
	sh := attn.Shape{Hq: 32, Hkv: 8, D: 128}
	deals := []kernels.PlanesDeal{kernels.PlanesDealNone, kernels.PlanesDealWarps, kernels.PlanesDealSplits}
	for _, deal := range deals {
		for _, mix := range []string{mixRandom, mixRuns, mixEvict} {
			for _, split := range []int{0, 192} {
				runPlanesCase(t, r, planesCase{kernel: kernels.PlanesMMA, spec: "bw:h20:m40:l40", sh: sh, lens: []int{20000, 777, 40},
					tq: 1, mix: mix, splitLen: split, deal: deal})
			}
		}
	}
	for i, mix := range []string{mixHigh, mixMedium, mixLow} {
		var first []uint16
		for _, deal := range deals {
			c := planesCase{kernel: kernels.PlanesMMA, spec: "bw:h20:m40:l40", sh: sh, lens: []int{9000, 333}, tq: 1, mix: mix, deal: deal}
			got := runPlanesCase(t, rand.New(rand.NewPCG(45, uint64(i))), c)
			if first == nil {
				first = got
				continue
			}
			for j := range got {
				if got[j] != first[j] {
					t.Fatalf("%v: element %d: %#04x, with deal %d %#04x: a head of one tier must not be dealt", c, j, got[j], deals[0], first[j])
				}
			}
		}
	}
}

// TestGPUPlanesTimelineSameBits runs split_mma compiled with its launch
// timeline (PlanesTuning.Timeline, session 14) and without it on the same
// inputs: the timeline only reads the clock and writes its own buffer, so
// the outputs must be equal bit for bit (and within the reference bound,
// which runPlanesCase checks, with the records checkPlanesTimeline's), with
// many splits merged, with two and with one.
func TestGPUPlanesTimelineSameBits(t *testing.T) {
	device(t)
	sh := attn.Shape{Hq: 32, Hkv: 8, D: 128}
	specs := []string{"bw:m100", "bw:h20:m40:l40"}
	if testing.Short() {
		specs = specs[:1]
	}
	for i, spec := range specs {
		for _, lens := range [][]int{{20000, 777, 40}, {700}} {
			run := func(timeline bool) []uint16 {
				c := planesCase{kernel: kernels.PlanesMMA, spec: spec, sh: sh, lens: lens, tq: 1, mix: mixRandom, timeline: timeline}
				return runPlanesCase(t, rand.New(rand.NewPCG(47, uint64(i))), c)
			}
			want, got := run(false), run(true)
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s lens %v: element %d is %#04x with the timeline, %#04x without", spec, lens, j, got[j], want[j])
				}
			}
		}
	}
}

// checkPlanesTimeline checks the records of plan's last launches: every
// launch has CTAs, the phases one thread writes come in its order after
// the launch's stamp (thread 0: entry, warp 0's prologue and loop, the
// barrier, the partial, the count, the exit; each warp's lane 0: its
// prologue, then its loop), and a fused plan has exactly one merging CTA
// per (sequence, KV head and row chunk). Marks of different warps are not
// compared: %globaltimer read on either side of a barrier by two warps
// came out up to ~100 ns the other way round on the H100 (call 1 of
// session 14: warp 3's loop end after thread 0's barrier time).
func checkPlanesTimeline(t *testing.T, c planesCase, plan *kernels.PlanesPlan) {
	t.Helper()
	launches, err := plan.Timeline()
	if err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	if len(launches) == 0 {
		t.Fatalf("%v: no timeline launches", c)
	}
	for k, l := range launches {
		if len(l.CTAs) == 0 {
			t.Fatalf("%v: launch %d: no CTA records", c, k)
		}
		last := map[[2]int]int{}
		for _, r := range l.CTAs {
			phases := []uint64{l.Stamp, r.Entry, r.Prologue[0], r.Loop[0], r.WarpsDone, r.Partial, r.Exit}
			if r.Arrived != 0 {
				phases = []uint64{l.Stamp, r.Entry, r.Prologue[0], r.Loop[0], r.WarpsDone, r.Partial, r.Arrived, r.Exit}
			}
			for w := range r.Prologue {
				if r.Prologue[w] == 0 || r.Loop[w] < r.Prologue[w] {
					t.Fatalf("%v: launch %d CTA %+v: warp %d's phases out of order", c, k, r, w)
				}
			}
			for i := 1; i < len(phases); i++ {
				if phases[i] < phases[i-1] {
					t.Fatalf("%v: launch %d CTA %+v: phase %d before phase %d", c, k, r, i, i-1)
				}
			}
			if r.Last {
				last[[2]int{r.Seq, r.Item}]++
			}
		}
		if plan.Fused() {
			for key, n := range last {
				if n != 1 {
					t.Fatalf("%v: launch %d: (sequence, item) %v merged by %d CTAs", c, k, key, n)
				}
			}
			if len(last) == 0 {
				t.Fatalf("%v: launch %d: no merging CTA", c, k)
			}
		}
	}
}

// TestGPUPlanesFilter runs K and V scaled to 2^-12 (many fp16 elements
// whose partial reads hit the subnormal filter, a fill or the saturation
// rule) with every fill and filter variant and both element types.
func TestGPUPlanesFilter(t *testing.T) {
	device(t)
	r := rand.New(rand.NewPCG(39, 40))
	for _, k := range []kernels.PlanesKernel{kernels.PlanesMMA, kernels.PlanesV1} {
		for _, spec := range []string{"bw", "bw:nofilter", "bw:a8=0xff:a4=0x3ff", "bw:a4=0xfff", "bw:bf16", "bw:bf16:nofilter:a8=0x80"} {
			for _, mix := range []string{mixMedium, mixLow, mixRandom} {
				runPlanesCase(t, r, planesCase{kernel: k, spec: spec, sh: attn.Shape{Hq: 8, Hkv: 2, D: 128}, lens: []int{40, 200}, tq: 1,
					mix: mix, scale: 1.0 / 4096})
			}
		}
		for _, spec := range []string{"bw:a4=0xfff", "bw:a4=0xc00:nofilter"} {
			for _, mix := range []string{mixLow, mixRandom} {
				runPlanesCase(t, r, planesCase{kernel: k, spec: spec, sh: attn.Shape{Hq: 8, Hkv: 2, D: 128}, lens: []int{40, 200}, tq: 1,
					mix: mix, vScale: 4096})
			}
		}
	}
}

// TestGPUPlanesHighMatchesFP16 checks that an all-HIGH bit-plane cache
// gives the fp16 tensor-core decode's result (both within their bounds of
// the same float64 attention) for the same K/V.
func TestGPUPlanesHighMatchesFP16(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(35, 36))
	for _, sh := range []attn.Shape{{Hq: 32, Hkv: 8, D: 128}, {Hq: 6, Hkv: 2, D: 256}, {Hq: 4, Hkv: 4, D: 64}} {
		c := planesCase{kernel: kernels.PlanesMMA, spec: "bw", sh: sh, lens: []int{4099, 300}, tq: 1, mix: mixHigh}
		dt := buildPlanes(t, r, c)
		g := &gpuBufs{t: t, d: d}
		defer g.free()
		// Planes.
		nq := len(dt.q)
		pb := kernels.PlanesBuffers{Pool: g.up(dt.pool), BlockTable: g.up(cuda.Bytes(dt.table)), Lens: g.up(cuda.Bytes(dt.lens)),
			Index: g.up(cuda.Bytes(dt.index.Index)), Counts: g.up(cuda.Bytes(dt.index.Counts)), Q: g.up(cuda.Bytes(dt.qh)),
			Out: g.up(make([]byte, nq*2))}
		pp, err := kernels.PlanPlanes(d, kernels.PlanesMMA, dt.lay, kernels.PlanesShape{B: len(dt.seqs), Hq: sh.Hq, Hkv: sh.Hkv, Tq: 1,
			MaxBlocks: dt.maxBlocks, MaxL: dt.maxL})
		if err != nil {
			t.Fatal(err)
		}
		gotP, _ := planesOut(t, d, pp, pb, nq, nil)
		pp.Close()
		// fp16 decode of the same K/V.
		f := kv.MustResolve("fp16:res64", sh.D).WithOrder(kv.MMA)
		lay, err := kernels.LayoutFor(f)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []*attn.Seq
		maxBlocks, nBlocks := 1, 0
		for b := range dt.seqs {
			cache, err := attn.NewCache(f, sh)
			if err != nil {
				t.Fatal(err)
			}
			if err := cache.Append(dt.k[b], dt.v[b]); err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, &cache.Seq)
			maxBlocks = max(maxBlocks, len(cache.Blocks))
			nBlocks += len(cache.Blocks)
		}
		blockBytes := sh.Hkv * f.BlockBytes()
		pool := make([]byte, max(nBlocks, 1)*blockBytes)
		table := make([]int32, len(seqs)*maxBlocks)
		n := sh.Hkv * f.Residual * sh.D
		resK, resV := make([]uint16, len(seqs)*n), make([]uint16, len(seqs)*n)
		next := 0
		for b, s := range seqs {
			for i, blk := range s.Blocks {
				copy(pool[next*blockBytes:], blk)
				table[b*maxBlocks+i] = int32(next)
				next++
			}
			copy(resK[b*n:], kernels.ResidualOrder(kernels.DecodeMMA, f, s.ResK[:n], false))
			copy(resV[b*n:], kernels.ResidualOrder(kernels.DecodeMMA, f, s.ResV[:n], true))
		}
		db := kernels.DecodeBuffers{Pool: g.up(pool), BlockTable: g.up(cuda.Bytes(table)), ResK: g.up(cuda.Bytes(resK)),
			ResV: g.up(cuda.Bytes(resV)), Lens: pb.Lens, Q: pb.Q, Out: g.up(make([]byte, nq*2))}
		dp, err := kernels.PlanDecode(d, kernels.DecodeMMA, lay, kernels.DecodeShape{B: len(seqs), Hq: sh.Hq, Hkv: sh.Hkv, Tq: 1,
			MaxBlocks: maxBlocks, MaxL: dt.maxL})
		if err != nil {
			t.Fatal(err)
		}
		err = d.Do(func(cx *cuda.Ctx) error {
			if err := dp.Launch(cx, d.Stream(), db, 0); err != nil {
				return err
			}
			return cx.SyncStream(d.Stream())
		})
		dp.Close()
		if err != nil {
			t.Fatal(err)
		}
		gotD := make([]uint16, nq)
		if err := d.DtoH(cuda.Bytes(gotD), db.Out); err != nil {
			t.Fatal(err)
		}
		checkPlanesOut(t, c, dt, gotP)
		for row := 0; row < nq/sh.D; row++ {
			tol := 2 * kvtest.PlaneDecodeTol(false, dt.st, sh.D, row, true)
			for ch := 0; ch < sh.D; ch++ {
				i := row*sh.D + ch
				a, b := float64(half.ToFloat32(gotP[i])), float64(half.ToFloat32(gotD[i]))
				if math.Abs(a-b) > tol+2*fp16Round(b) {
					t.Fatalf("%v: row %d channel %d: planes %g, fp16 decode %g (tol %.3g)", c, row, ch, a, b, tol+2*fp16Round(b))
				}
			}
		}
	}
}

func TestPlanesLayoutFor(t *testing.T) {
	l, err := kernels.PlanesLayoutFor(kv.MustResolve("bw:h20:m40:l40:a8=0x70:a4=0x500:blk32", 128))
	if err != nil {
		t.Fatal(err)
	}
	want := kernels.PlanesLayout{D: 128, Nr: 32, Adj8: 0x70, Adj4: 0x500, Filter: true, Medium: true, Low: true}
	if l != want {
		t.Errorf("layout %+v, want %+v", l, want)
	}
	if l.BlockBytes() != 4*32*128 {
		t.Errorf("block bytes %d, want %d", l.BlockBytes(), 4*32*128)
	}
	l, err = kernels.PlanesLayoutFor(kv.MustResolve("bw:bf16:nofilter", 64))
	if err != nil || !l.BF16 || l.Filter || l.Adj8 != kv.DefaultAdj8 || l.Adj4 != kv.DefaultAdj4 || l.Medium || l.Low {
		t.Errorf("bf16 nofilter: %+v, %v", l, err)
	}
	if _, err := kernels.PlanesLayoutFor(kv.MustResolve("fp16", 128)); err == nil {
		t.Error("PlanesLayoutFor(fp16) succeeded; want an error naming the format")
	}
	if _, err := kernels.LayoutFor(kv.MustResolve("bw", 128)); err == nil {
		t.Error("LayoutFor(bw) succeeded; the packed-block decode kernel cannot read planes")
	}
}

// TestTierIndexMatchesAttn checks TierIndex.Set against attn.TierIndex, the
// order attn.DecodePlanes reads.
func TestTierIndexMatchesAttn(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 38))
	x := kernels.NewTierIndex(2, 3, 500)
	for b := 0; b < 2; b++ {
		for h := 0; h < 3; h++ {
			for _, mix := range planeMixes {
				tiers := planeTiers(r, mix, 1+r.IntN(500))
				if err := x.Set(b, h, tiers); err != nil {
					t.Fatal(err)
				}
				want, counts := attn.TierIndex(tiers, nil)
				if got := x.TierCounts(b, h); got != counts {
					t.Fatalf("%s: counts %v, want %v", mix, got, counts)
				}
				off := (b*3 + h) * 500
				if got := x.Index[off : off+len(want)]; !slices.Equal(got, want) {
					t.Fatalf("%s: index %v, want %v", mix, got, want)
				}
			}
		}
	}
	if err := x.Set(0, 0, make([]kv.Tier, 501)); err == nil {
		t.Error("Set accepted more tokens than the stride")
	}
	if err := x.Set(2, 0, nil); err == nil {
		t.Error("Set accepted a sequence out of range")
	}
}

func TestPlanesPositions(t *testing.T) {
	for _, tc := range []struct {
		counts [kv.NumTiers]int
		want   int
	}{
		{[kv.NumTiers]int{}, 0},
		{[kv.NumTiers]int{16, 0, 0, 5}, 16},
		{[kv.NumTiers]int{1, 1, 1, 0}, 48},
		{[kv.NumTiers]int{17, 32, 15, 100}, 32 + 32 + 16},
	} {
		if got := kernels.PlanesPositions(tc.counts); got != tc.want {
			t.Errorf("PlanesPositions(%v) = %d, want %d", tc.counts, got, tc.want)
		}
	}
}

// writeCase draws T tokens of K/V, their destinations (some skipped) and
// the pool the Go split gives, for the GPU write kernel's test.
func writeCase(r *rand.Rand, lay kv.PlaneLayout, hkv, blocks, T int, bf16 bool) (k, v []float32, block, within []int32, want []byte) {
	k, v = kvtest.KeysValues(r, T, hkv, lay.D)
	block, within = make([]int32, T), make([]int32, T)
	want = make([]byte, blocks*hkv*lay.BlockBytes)
	for i := range want {
		want[i] = byte(i * 7) // garbage the kernel must leave alone
	}
	row := make([]uint16, lay.D)
	used := map[[2]int32]bool{}
	for t := range block {
		block[t] = int32(r.IntN(blocks))
		within[t] = int32(r.IntN(lay.Tokens))
		if used[[2]int32{block[t], within[t]}] || r.IntN(8) == 0 {
			block[t] = -1 // skipped (and no two tokens share a slot)
			continue
		}
		used[[2]int32{block[t], within[t]}] = true
		for h := 0; h < hkv; h++ {
			base := want[(int(block[t])*hkv+h)*lay.BlockBytes : (int(block[t])*hkv+h+1)*lay.BlockBytes]
			for kvHalf, src := range [][]float32{k, v} {
				for c := range row {
					x := src[(t*hkv+h)*lay.D+c]
					if bf16 {
						row[c] = half.BF16FromFloat32(x)
					} else {
						row[c] = half.FromFloat32(x)
					}
				}
				lay.Split(base, kvHalf, int(within[t]), row)
			}
		}
	}
	return
}

// TestGPUPlanesWrite checks the write kernel against kv.PlaneLayout.Split.
func TestGPUPlanesWrite(t *testing.T) {
	d := device(t)
	w, err := kernels.LoadPlanesWriter(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, tc := range []struct{ d, nr, hkv, T int }{{128, 64, 8, 300}, {64, 32, 2, 100}, {256, 128, 4, 50}} {
		for _, bf16 := range []bool{false, true} {
			lay := kv.NewPlaneLayout(tc.d, tc.nr)
			blocks := 5
			k, v, block, within, want := writeCase(r, lay, tc.hkv, blocks, tc.T, bf16)
			g := &gpuBufs{t: t, d: d}
			init := make([]byte, len(want))
			for i := range init {
				init[i] = byte(i * 7)
			}
			pool := g.up(init)
			kp, vp, bp, wp := g.up(cuda.Bytes(k)), g.up(cuda.Bytes(v)), g.up(cuda.Bytes(block)), g.up(cuda.Bytes(within))
			err := d.Do(func(c *cuda.Ctx) error {
				if err := w.Launch(c, d.Stream(), kp, vp, bp, wp, pool, tc.T, tc.hkv, tc.d, tc.nr, bf16); err != nil {
					return err
				}
				return c.SyncStream(d.Stream())
			})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want))
			if err := d.DtoH(got, pool); err != nil {
				t.Fatal(err)
			}
			g.free()
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("D=%d Nr=%d Hkv=%d bf16=%v: pool byte %d: %#02x, want %#02x", tc.d, tc.nr, tc.hkv, bf16, i, got[i], want[i])
				}
			}
		}
	}
}

// TestTierMapFromIndex rebuilds tier maps from TierIndex.Set's layout and
// from a relaid copy (run offsets), and refuses broken indexes.
func TestTierMapFromIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, mix := range planeMixes {
		for _, l := range []int{1, 17, 300} {
			x := kernels.NewTierIndex(1, 1, l+1)
			want := planeTiers(r, mix, l)
			if err := x.Set(0, 0, want); err != nil {
				t.Fatal(err)
			}
			var c [kv.NumTiers]int32
			copy(c[:], x.Counts)
			relaid, offs := relaidIndex(x)
			for _, v := range []struct {
				index, offsets []int32
			}{{x.Index, nil}, {relaid, offs[:3]}} {
				got, err := kernels.TierMapFromIndex(v.index, c, v.offsets, l)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("%s, %d tokens, offsets %v: %v, %v; want %v", mix, l, v.offsets, got, err, want)
				}
			}
			if c[kv.High] > 1 {
				bad := slices.Clone(x.Index)
				bad[0], bad[1] = bad[1], bad[0] // a run out of order
				if _, err := kernels.TierMapFromIndex(bad, c, nil, l); err == nil {
					t.Errorf("%s, %d tokens: a run out of order was accepted", mix, l)
				}
			}
		}
	}
}

package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/kvtest"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/kvcache/gpukv"
)

// BWGrid is issue #8's grid for the bit-plane kernel: the grid `bench attn
// --device cuda` uses when every format is a bw spec.
var BWGrid = []Point{{1, 8192}, {1, 32768}, {1, 131072}, {16, 8192}, {16, 32768}, {64, 8192}, {128, 8192}}

// PlanesKernel returns the bit-plane kernel matching decode kernel k's
// version: tensor cores for mma, CUDA cores for v1.
func PlanesKernel(k kernels.DecodeKernel) kernels.PlanesKernel {
	if k == kernels.DecodeV1 {
		return kernels.PlanesV1
	}
	return kernels.PlanesMMA
}

// planeTierMaps draws the tier map of every (sequence, KV head) for spec p
// at l tokens: kvcache.TierPolicy's counts, sinks and window, over random
// attention masses (so the tokens of each tier are scattered as under H2O),
// a different draw per head.
func planeTierMaps(r *rand.Rand, p kv.PlaneSpec, b, hkv, l int) [][]kv.Tier {
	pol := kvcache.TierPolicy{Spec: p}
	mass := make([]float32, l)
	maps := make([][]kv.Tier, b*hkv)
	for i := range maps {
		for t := range mass {
			mass[t] = r.Float32()
		}
		maps[i] = make([]kv.Tier, l)
		pol.Retier(maps[i], mass, l)
	}
	return maps
}

// runPlanesCPU times attn.DecodePlanes at one grid point over bw caches of
// keys/vals, tiered by planeTierMaps; the error is against float64
// attention on the unquantized K/V (exact), like the other CPU rows.
func runPlanesCPU(f kv.Format, sh attn.Shape, pt Point, keys, vals [][]float32, q, exact []float32, base float64, reps int, minSec float64) (AttnRow, error) {
	r := rand.New(rand.NewPCG(uint64(pt.B), uint64(pt.L)+1))
	maps := planeTierMaps(r, f.Planes, pt.B, sh.Hkv, pt.L)
	lay := f.PlaneLayout()
	seqs := make([]*attn.PlaneSeq, pt.B)
	var bytesRead int64
	for b := range seqs {
		c, err := attn.NewPlaneCache(f, sh)
		if err != nil {
			return AttnRow{}, err
		}
		if err := c.Append(keys[b], vals[b]); err != nil {
			return AttnRow{}, err
		}
		for h := range c.Tiers {
			c.Tiers[h] = maps[b*sh.Hkv+h]
			_, counts := attn.TierIndex(c.Tiers[h], nil)
			bytesRead += lay.PlaneReadBytes(counts)
		}
		seqs[b] = &c.PlaneSeq
	}
	bytesRead += int64(2 * len(q) * 4)
	out := make([]float32, len(q))
	p := attn.Params{Format: f, Shape: sh, Tq: 1}
	var derr error
	sec := timeIt(reps, minSec, func() {
		if err := attn.DecodePlanes(out, q, seqs, p, nil); err != nil {
			derr = err
		}
	})
	if derr != nil {
		return AttnRow{}, derr
	}
	row := AttnRow{Device: "cpu", Format: f.Spec.String(), B: pt.B, L: pt.L, Hq: sh.Hq, Hkv: sh.Hkv, D: sh.D,
		TimeUS: sec * 1e6, BytesRead: bytesRead, GBps: float64(bytesRead) / sec / 1e9,
		Speedup: base / sec, MaxAbsErr: maxAbsDiff(out[:len(exact)], exact),
		BytesPerToken: f.BytesPerToken(), BitsPerElem: f.BitsPerElement()}
	return row, nil
}

// runPlanesPoint measures the bit-plane kernel at one grid point: the cache
// of every sequence holds L tokens, split into planes from synthetic K/V
// (gpuPrototypes distinct blocks replicated over the pool), tiered by
// planeTierMaps; the pool, block tables and index rotate over enough sets
// that the bytes one step reads exceed L2.
func runPlanesPoint(dev *cuda.Device, f kv.Format, cfg GPUConfig, pt Point) (*GPURow, error) {
	sh := cfg.Shape
	lay, err := kernels.PlanesLayoutFor(f)
	if err != nil {
		return nil, err
	}
	pl := f.PlaneLayout()
	l, nr := pt.L, pl.Tokens
	nBlocks := (l + nr - 1) / nr
	headBlock := sh.Hkv * pl.BlockBytes
	r := rand.New(rand.NewPCG(uint64(pt.B), uint64(pt.L)))
	maps := planeTierMaps(r, f.Planes, pt.B, sh.Hkv, l)
	tr, err := newTierReads(pl, maps, pt.B, sh.Hkv, l)
	if err != nil {
		return nil, err
	}
	nq := pt.B * sh.Hq * sh.D
	readBytes := tr.planeBytes + tr.indexBytes + int64(len(tr.index.Counts)*4) + int64(2*nq*2)
	storedSet := int64(pt.B) * int64(nBlocks) * int64(headBlock)
	sets := int(max(1, min((gpuRotateBytes+readBytes-1)/readBytes, gpuMaxPoolBytes/max(storedSet, 1))))
	poolBlocks := sets * pt.B * nBlocks

	cache, err := attn.NewPlaneCache(f, sh)
	if err != nil {
		return nil, err
	}
	k, v := kvtest.KeysValues(r, gpuPrototypes*nr, sh.Hkv, sh.D)
	if err := cache.Append(k, v); err != nil {
		return nil, err
	}
	a := &devArena{dev: dev}
	defer a.free()
	pool, err := a.alloc(poolBlocks * headBlock)
	if err != nil {
		return nil, err
	}
	if err := fillPool(dev, pool, cache.Blocks, headBlock, poolBlocks); err != nil {
		return nil, err
	}
	hostTables := rotatedTables(r, sets, pt.B, nBlocks, cfg.Paged)
	tables, indexes := make([]cuda.DevicePtr, sets), make([]cuda.DevicePtr, sets)
	for s := range sets {
		if tables[s], err = a.upload(cuda.Bytes(hostTables[s])); err != nil {
			return nil, err
		}
		if indexes[s], err = a.upload(cuda.Bytes(tr.index.Index)); err != nil {
			return nil, err
		}
	}
	countsPtr, err := a.upload(cuda.Bytes(tr.index.Counts))
	if err != nil {
		return nil, err
	}
	lensPtr, err := a.upload(cuda.Bytes(sameLens(pt.B, l)))
	if err != nil {
		return nil, err
	}
	qh := queriesFP16(r, k, sh, pt.B)
	qPtr, err := a.upload(cuda.Bytes(qh))
	if err != nil {
		return nil, err
	}
	outPtr, err := a.alloc(nq * 2)
	if err != nil {
		return nil, err
	}
	massPtr, err := a.alloc(pt.B * sh.Hkv * l * 4)
	if err != nil {
		return nil, err
	}
	kern := PlanesKernel(cfg.Kernel)
	// The plan can also write the attention mass (the H2O bookkeeping),
	// timed as a second variant of the same step.
	plan, err := kernels.PlanPlanesWith(dev, kern, lay, kernels.PlanesShape{B: pt.B, Hq: sh.Hq, Hkv: sh.Hkv, Tq: 1, MaxBlocks: nBlocks, MaxL: l, Mass: true}, cfg.GPU.Tuning.Planes)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	bufs := func(s int, mass cuda.DevicePtr) kernels.PlanesBuffers {
		return kernels.PlanesBuffers{Pool: pool, BlockTable: tables[s], Lens: lensPtr, Index: indexes[s], Counts: countsPtr, Q: qPtr, Out: outPtr, Mass: mass}
	}
	var us, massUS float64
	err = dev.Do(func(c *cuda.Ctx) (err error) {
		us, err = c.MedianUS(dev.Stream(), gpuWarmups, gpuRuns, func(i int) error {
			return plan.Launch(c, dev.Stream(), bufs(i%sets, 0), 0)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if cfg.GPU.Tuning.Planes.Timeline {
		// Session 14: where the last launches' time went, CTA by CTA
		// (the step without the mass, as timed above).
		if err := printTimeline(cfg.Progress, f.Spec.String(), pt, plan.Timeline); err != nil {
			return nil, err
		}
	}
	err = dev.Do(func(c *cuda.Ctx) (err error) {
		massUS, err = c.MedianUS(dev.Stream(), gpuWarmups, gpuRuns, func(i int) error {
			return plan.Launch(c, dev.Stream(), bufs(i%sets, massPtr), 0)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	// Re-tiering, once every Period steps: the GPU re-tier of every
	// (sequence, KV head) from random masses (kernels.PlanesRetier, what
	// the engine's cache runs), writing a scratch index: one layer alone
	// (v1, the engine's, and v2), and retierLayers layers in one launch
	// (the engine re-tiers every layer of a sequence at the same batch),
	// per layer.
	retierUS, err := gpuRetierUS(dev, r, f.Planes, pt.B, sh.Hkv, l, 1, false)
	if err != nil {
		return nil, err
	}
	retierV2US, err := gpuRetierUS(dev, r, f.Planes, pt.B, sh.Hkv, l, 1, true)
	if err != nil {
		return nil, err
	}
	retierLayersUS, err := gpuRetierUS(dev, r, f.Planes, pt.B, sh.Hkv, l, retierLayers, false)
	if err != nil {
		return nil, err
	}
	retierLayersUS /= retierLayers
	_, splits := plan.SplitLen()
	all := float64(l) * float64(pt.B*sh.Hkv)
	row := &GPURow{Kernel: kern.String(), AttnRow: AttnRow{Device: "cuda", Format: f.Spec.String(), B: pt.B, L: pt.L, Hq: sh.Hq, Hkv: sh.Hkv, D: sh.D,
		TimeUS: us, BytesRead: readBytes, GBps: float64(readBytes) / us / 1e3, BytesPerToken: f.BytesPerToken(), BitsPerElem: f.BitsPerElement()},
		Splits: splits, Paged: cfg.Paged, KernelErr: -1,
		Planes: &PlanesRow{PlaneBytes: tr.planeBytes, IndexBytes: tr.indexBytes, ReadBitsPerElem: float64(tr.planeBytes) * 8 / (all * float64(2*sh.D)),
			ReadVsFP16: float64(tr.planeBytes) / (all * float64(pl.TierBytes(kv.High))), MassUS: massUS, RetierUS: retierUS,
			RetierV2US: retierV2US, RetierLayersUS: retierLayersUS}}
	period, every := max(f.Planes.Period, 1), max(f.Planes.MassEvery, 1)
	row.Planes.MassEvery = every
	row.Planes.MassShare = max(massUS-us, 0) / float64(every) / us
	row.Planes.BookkeepingShare = row.Planes.MassShare + retierLayersUS/float64(period)/us
	for t := range tr.counts {
		row.Planes.Tokens[t] = float64(tr.counts[t]) / all
	}
	if l <= gpuErrCheckTokens {
		// The last run used set (gpuWarmups+gpuRuns-1)%sets.
		tbl := hostTables[(gpuWarmups+gpuRuns-1)%sets][:nBlocks]
		if row.KernelErr, err = checkPlanes(dev, outPtr, qh, cache, maps[:sh.Hkv], tbl, l, f, sh); err != nil {
			return nil, err
		}
	}
	return row, nil
}

// tierReads is what a planes decode step reads for tier maps: the tier
// index the kernel takes, the tokens per tier, and the plane and index
// bytes.
type tierReads struct {
	index                  *kernels.TierIndex
	counts                 [kv.NumTiers]int64
	planeBytes, indexBytes int64
}

// newTierReads builds the tier index of B sequences' Hkv tier maps of l
// tokens and counts what a step reads.
func newTierReads(pl kv.PlaneLayout, maps [][]kv.Tier, B, hkv, l int) (*tierReads, error) {
	tr := &tierReads{index: kernels.NewTierIndex(B, hkv, l)}
	for b := 0; b < B; b++ {
		for h := 0; h < hkv; h++ {
			if err := tr.index.Set(b, h, maps[b*hkv+h]); err != nil {
				return nil, err
			}
			c := tr.index.TierCounts(b, h)
			read := c[kv.High] + c[kv.Medium] + c[kv.Low]
			tr.indexBytes += int64(read * kv.IndexBytes)
			tr.planeBytes += pl.PlaneReadBytes(c) - int64(read*kv.IndexBytes)
			for t := range c {
				tr.counts[t] += int64(c[t])
			}
		}
	}
	return tr, nil
}

// checkPlanes returns the largest error of sequence 0's output at out
// against the float64 reference over the stored values and tiers the
// kernel read (pool block j holds prototype j mod gpuPrototypes of cache).
func checkPlanes(dev *cuda.Device, out cuda.DevicePtr, qh []uint16, cache *attn.PlaneCache, tiers [][]kv.Tier, table []int32, l int, f kv.Format, sh attn.Shape) (float64, error) {
	got := make([]uint16, len(qh))
	if err := dev.DtoH(cuda.Bytes(got), out); err != nil {
		return 0, err
	}
	seq := &attn.PlaneSeq{Len: l, Tiers: tiers}
	for _, b := range table {
		seq.Blocks = append(seq.Blocks, cache.Blocks[int(b)%gpuPrototypes])
	}
	q0 := fp16ToFloat32s(qh[:sh.Hq*sh.D])
	want := make([]float32, len(q0))
	if _, err := attn.ReferencePlanes(want, q0, []*attn.PlaneSeq{seq}, attn.Params{Format: f, Shape: sh, Tq: 1}); err != nil {
		return 0, err
	}
	return maxAbsErrFP16(got, want), nil
}

// PlanesRow is what a bit-plane (bw) row adds to a GPU row.
type PlanesRow struct {
	// Tokens is the share of cached tokens in each tier (HIGH, MEDIUM, LOW,
	// EVICTED), over every sequence and KV head.
	Tokens [kv.NumTiers]float64 `json:"tier_share"`
	// PlaneBytes and IndexBytes are the plane and tier-index bytes the step
	// reads (kv.PlaneLayout.PlaneReadBytes); BytesRead adds Q, O and the
	// tier counts.
	PlaneBytes int64 `json:"plane_bytes"`
	IndexBytes int64 `json:"index_bytes"`
	// ReadBitsPerElem is the plane bits read per cached K/V element.
	ReadBitsPerElem float64 `json:"read_bits_per_element"`
	// ReadVsFP16 is PlaneBytes over an fp16 cache's bytes for the same tokens.
	ReadVsFP16 float64 `json:"read_vs_fp16"`
	// MassUS is the same step also writing the attention mass of every
	// token read (the H2O statistic); RetierUS the GPU re-tier of every
	// (sequence, KV head) of one layer, index written in place
	// (kernels.PlanesRetier, v1), which happens once every Period steps;
	// RetierV2US the same with the v2 kernel; RetierLayersUS the re-tier
	// of retierLayers layers in one launch, per layer (what the engine
	// does). MassShare is (MassUS − step)/MassEvery over the step without
	// mass: the mass's cost per step when one step in MassEvery writes it
	// (kv.PlaneSpec.MassEvery; the others run the plain step).
	// BookkeepingShare is MassShare plus RetierLayersUS/Period over the
	// step, the share of the attention step the tiers' bookkeeping costs.
	MassUS           float64 `json:"mass_us"`
	MassEvery        int     `json:"mass_every"`
	MassShare        float64 `json:"mass_share"`
	RetierUS         float64 `json:"retier_gpu_us"`
	RetierV2US       float64 `json:"retier_gpu_v2_us"`
	RetierLayersUS   float64 `json:"retier_gpu_per_layer_us"`
	BookkeepingShare float64 `json:"bookkeeping_share"`
}

// retierLayers is the layers bench attn re-tiers in one launch for the
// engine's per-layer cost (Llama-3.1-8B's 32).
const retierLayers = 32

// gpuRetierUS times the GPU re-tier of b sequences of hkv KV heads and l
// tokens under policy p, layers layers each (one launch, b·layers jobs;
// the v2 kernel if v2), on random masses, into a scratch index (median of
// gpuRuns).
func gpuRetierUS(dev *cuda.Device, r *rand.Rand, p kv.PlaneSpec, b, hkv, l, layers int, v2 bool) (float64, error) {
	rt, err := kernels.LoadPlanesRetier(dev)
	if err != nil {
		return 0, err
	}
	rt.V2 = v2
	a := &devArena{dev: dev}
	defer a.free()
	b *= layers
	mass := make([]float32, b*hkv*l)
	for i := range mass {
		mass[i] = r.Float32()
	}
	var words []int32
	for s := range b {
		words = gpukv.PlaneRetierJob(p, s, l).Words(words)
	}
	massPtr, err := a.upload(cuda.Bytes(mass))
	if err != nil {
		return 0, err
	}
	jobs, err := a.upload(cuda.Bytes(words))
	if err != nil {
		return 0, err
	}
	index, err := a.alloc(b * hkv * l * 4)
	if err != nil {
		return 0, err
	}
	counts, err := a.alloc(b * hkv * 16)
	if err != nil {
		return 0, err
	}
	offsets, err := a.alloc(b * hkv * 16)
	if err != nil {
		return 0, err
	}
	var us float64
	err = dev.Do(func(c *cuda.Ctx) (err error) {
		us, err = c.MedianUS(dev.Stream(), gpuWarmups, gpuRuns, func(int) error {
			return rt.LaunchRetier(c, dev.Stream(), jobs, b, massPtr, index, counts, offsets, hkv, l)
		})
		return err
	})
	return us, err
}

// fp16Times fills every bw row's fp16 time and speedup from fp16, the
// fp16 kernel's time at each point, measuring the points it lacks.
func fp16Times(dev *cuda.Device, cfg GPUConfig, rep *GPUReport, fp16 map[Point]float64, progress func(string, ...any)) error {
	for i := range rep.Rows {
		row := &rep.Rows[i]
		if row.Planes == nil {
			continue
		}
		pt := Point{row.B, row.L}
		if _, ok := fp16[pt]; !ok {
			f := kv.MustResolve("fp16", cfg.Shape.D).WithOrder(cfg.Kernel.Order())
			c := cfg
			c.ResidualFull = false
			fr, err := runGPUPoint(dev, f, c, pt)
			if err != nil {
				return fmt.Errorf("fp16 B=%d L=%d: %w", pt.B, pt.L, err)
			}
			fp16[pt] = fr.TimeUS
			progress("  %-24s B=%-3d L=%-6d %9.1f us (the fp16 kernel, for the bw rows)\n", "fp16", pt.B, pt.L, fr.TimeUS)
		}
		row.FP16US = fp16[pt]
		row.SpeedupFP16 = row.FP16US / row.TimeUS
	}
	return nil
}

// isFP16 reports whether f is plain fp16 K and V (the bw rows' reference).
func isFP16(f kv.Format) bool {
	return !f.Planes.On && f.K.Elem == kv.FP16 && f.V.Elem == kv.FP16 && !f.Rotate
}

package bench

import (
	"fmt"
	"io"
	"slices"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// LinearRow is one linear-layer shape of a decode step at batch T: the
// median time of gemv.cu and of cuBLASLt (fp16 x, as the backend's large-
// batch path), and gemv.cu's GB/s on the weight bytes.
type LinearRow struct {
	Name       string    `json:"name"`
	N, K, T    int       `json:"-"`
	GEMVUS     float64   `json:"gemv_us"`
	SplitUS    []float64 `json:"gemv_split_1_2_4_us"`
	CublasUS   float64   `json:"cublaslt_us"`
	GEMVGBps   float64   `json:"gemv_gb_per_s"`
	CublasGBps float64   `json:"cublaslt_gb_per_s"`
	// Int4US is gemvq.cu over the same matrix in wq's int4 (groups of 128),
	// Int4GBps on its packed bytes (codes and scale pairs); likewise int3
	// and int8; 0 for the lm_head, which stays 16-bit.
	Int4US   float64 `json:"int4_gemv_us,omitempty"`
	Int4GBps float64 `json:"int4_gemv_gb_per_s,omitempty"`
	Int3US   float64 `json:"int3_gemv_us,omitempty"`
	Int3GBps float64 `json:"int3_gemv_gb_per_s,omitempty"`
	Int8US   float64 `json:"int8_gemv_us,omitempty"`
	Int8GBps float64 `json:"int8_gemv_gb_per_s,omitempty"`
}

// TimeLinears times the linear-layer shapes of config c at T rows on dev.
func TimeLinears(dev *cuda.Device, c *model.Config, T int, progress io.Writer) ([]LinearRow, error) {
	g, err := kernels.LoadGEMV(dev)
	if err != nil {
		return nil, err
	}
	gq, err := kernels.LoadGEMVQ(dev)
	if err != nil {
		return nil, err
	}
	ops, err := kernels.LoadOps(dev)
	if err != nil {
		return nil, err
	}
	H, I := c.Hidden, c.Intermediate
	shapes := []LinearRow{
		{Name: "q/o proj", N: c.Heads * c.HeadDim, K: H}, {Name: "k/v proj", N: c.KVHeads * c.HeadDim, K: H},
		{Name: "gate/up", N: I, K: H}, {Name: "down", N: H, K: I}, {Name: "lm_head", N: c.Vocab, K: H},
	}
	var rows []LinearRow
	err = dev.Do(func(x *cuda.Ctx) error {
		st := dev.Stream()
		for _, r := range shapes {
			r.T = T
			// Copies of the weights, rotated, so no run reads from L2.
			copies := coldCopies(2 * int64(r.N) * int64(r.K))
			ws := make([]cuda.DevicePtr, copies)
			for i := range ws {
				p, err := x.Alloc(2 * r.N * r.K)
				if err != nil {
					return err
				}
				defer x.Free(p)
				if err := ops.FillNormalF16(x, st, p, r.N*r.K, uint32(i+1), 0.02); err != nil {
					return err
				}
				ws[i] = p
			}
			xp, err := x.Alloc(4 * T * r.K)
			if err != nil {
				return err
			}
			defer x.Free(xp)
			if err := x.Memset32Async(xp, 0x3c003c00, T*r.K, st); err != nil {
				return err
			}
			xh, err := x.Alloc(2 * T * r.K)
			if err != nil {
				return err
			}
			defer x.Free(xh)
			yp, err := x.Alloc(4 * T * r.N)
			if err != nil {
				return err
			}
			defer x.Free(yp)
			if g.Fits(T, r.K) {
				if r.GEMVUS, err = x.MedianUS(st, 3, 20, func(i int) error {
					return g.Launch(x, st, yp, xp, ws[i%copies], 0, T, r.N, r.K)
				}); err != nil {
					return err
				}
				for _, split := range []int{1, 2, 4} {
					us, err := x.MedianUS(st, 3, 20, func(i int) error {
						return g.LaunchSplit(x, st, yp, xp, ws[i%copies], 0, T, r.N, r.K, split)
					})
					if err != nil {
						return err
					}
					r.SplitUS = append(r.SplitUS, us)
				}
			}
			if r.CublasUS, err = x.MedianUS(st, 3, 20, func(i int) error {
				if err := ops.F32ToF16(x, st, xh, xp, T*r.K); err != nil {
					return err
				}
				return x.GEMM(st, cuda.GEMMShape{M: T, N: r.N, K: r.K, In: cuda.F16, Out: cuda.F32}, yp, xh, ws[i%copies])
			}); err != nil {
				return err
			}
			if r.Name != "lm_head" && T <= kernels.GEMVQMaxRows {
				for _, q := range []struct {
					e        wq.Elem
					us, gbps *float64
				}{{wq.Int4, &r.Int4US, &r.Int4GBps}, {wq.Int3, &r.Int3US, &r.Int3GBps}, {wq.Int8, &r.Int8US, &r.Int8GBps}} {
					if *q.us, *q.gbps, err = timeQuant(x, st, gq, q.e, xp, yp, T, r.N, r.K); err != nil {
						return err
					}
				}
			}
			bytes := float64(2 * r.N * r.K)
			r.CublasGBps = bytes / r.CublasUS / 1e3
			if r.GEMVUS > 0 {
				r.GEMVGBps = bytes / r.GEMVUS / 1e3
			}
			fmt.Fprintf(progress, "linear %-9s %6dx%-6d T=%d: gemv %7.1f us (%4.0f GB/s; split 1/2/4: %.1f), cuBLASLt %7.1f us (%4.0f GB/s), gemvq int4 %6.1f us (%4.0f GB/s) int3 %6.1f us (%4.0f GB/s) int8 %6.1f us (%4.0f GB/s)\n",
				r.Name, r.N, r.K, T, r.GEMVUS, r.GEMVGBps, r.SplitUS, r.CublasUS, r.CublasGBps, r.Int4US, r.Int4GBps, r.Int3US, r.Int3GBps, r.Int8US, r.Int8GBps)
			rows = append(rows, r)
		}
		return nil
	})
	return rows, err
}

// timeQuant quantizes a random N(0, 0.02²) [N, K] matrix to wq's format e
// with groups of 128 on the host, uploads four copies and times gemvq.cu
// over them in rotation.
func timeQuant(x *cuda.Ctx, st cuda.Stream, gq *kernels.GEMVQ, e wq.Elem, xp, yp cuda.DevicePtr, T, N, K int) (us, gbps float64, err error) {
	words, params, bytes, free, err := uploadQuant(x, e, N, K)
	if err != nil {
		return 0, 0, err
	}
	defer free()
	us, err = x.MedianUS(st, 3, 20, func(i int) error {
		return gq.Launch(x, st, yp, xp, words[i%len(words)], params[i%len(params)], 0, T, N, K, e.Bits(), 128)
	})
	if err != nil {
		return 0, 0, err
	}
	return us, float64(bytes) / us / 1e3, nil
}

// LinearF16Row is one (shape, T) point of SweepLinearF16: the median GPU
// time of linear.cu (one launch over every group), of gemv.cu (one launch
// per group; T <= kernels.GEMVMaxRows) and of cuBLASLt (x to fp16, one
// GEMM per group, and for a group one GEMM over the joined weights), each
// with its fraction of the read ceiling on the weight bytes.
type LinearF16Row struct {
	Name       string  `json:"name"`
	N          []int   `json:"n"` // one per group
	K          int     `json:"k"`
	T          int     `json:"t"`
	LinearUS   float64 `json:"linear_us"`
	LinearFrac float64 `json:"linear_ceiling_fraction"`
	GEMVUS     float64 `json:"gemv_us,omitempty"`
	GEMVFrac   float64 `json:"gemv_ceiling_fraction,omitempty"`
	CublasUS   float64 `json:"cublaslt_us"`
	CublasFrac float64 `json:"cublaslt_ceiling_fraction"`
	// JoinedUS is cuBLASLt as backend/gpu runs a group whose weights are
	// joined (one allocation): x to fp16, one GEMM over the summed
	// channels, split_cols to each group's output; 0 for one group.
	JoinedUS   float64 `json:"cublaslt_joined_us,omitempty"`
	JoinedFrac float64 `json:"cublaslt_joined_ceiling_fraction,omitempty"`
	// Chosen is the algorithm cuda.Ctx.GEMM ran for the one GEMM over all
	// the groups' channels (the cuBLASLt column for one group, the joined
	// one for several), Tuned whether its tuning picked it over the
	// heuristic's first; Algos (with SweepLinearF16's algos) times every
	// algorithm that tuning considers on that GEMM alone (no conversion,
	// no split), the heuristic's first one first.
	// GEMMUS is cuBLASLt's one GEMM over all the groups' channels alone (x
	// already in fp16, no split: the step's GEMM since v19's producers).
	GEMMUS   float64 `json:"cublaslt_gemm_us,omitempty"`
	GEMMFrac float64 `json:"cublaslt_gemm_ceiling_fraction,omitempty"`
	// SkinnyUS is skinny.cu (its default version: v3 on compute capability
	// 9.0, else v2) over the same joined weights and fp16 x at
	// SkinnySplit's split (Split); SkinnyEarlyUS the same with early weight
	// loads; SkinnySplitUS at splits 1, 2, ... (those whose partials fit
	// the sweep's workspace); SkinnyV1US and SkinnyV2US v1 and v2 at their
	// own splits (where not the default). T <= kernels.SkinnyMaxRows only.
	SkinnyUS      float64    `json:"skinny_us,omitempty"`
	SkinnyFrac    float64    `json:"skinny_ceiling_fraction,omitempty"`
	Split         int        `json:"skinny_split,omitempty"`
	SkinnyEarlyUS float64    `json:"skinny_early_us,omitempty"`
	SkinnySplitUS []float64  `json:"skinny_split_us,omitempty"`
	SkinnyV1US    float64    `json:"skinny_v1_us,omitempty"`
	SkinnyV2US    float64    `json:"skinny_v2_us,omitempty"`
	Chosen        string     `json:"cublaslt_chosen,omitempty"`
	Tuned         bool       `json:"cublaslt_tuned,omitempty"`
	Algos         []AlgoTime `json:"cublaslt_algos,omitempty"`
}

// AlgoTime is one cuBLASLt algorithm's median time on a GEMM.
type AlgoTime struct {
	Algo string  `json:"algo"`
	US   float64 `json:"us"`
	Frac float64 `json:"ceiling_fraction"`
}

// LinearF16Shapes are the fp16 linear layers of a decode step of config c
// as SweepLinearF16 times them: the separate projections, and q/k/v and
// gate/up as the grouped launches the backend makes.
func LinearF16Shapes(c *model.Config) []struct {
	Name string
	N    []int
	K    int
} {
	H, I, qd, kvd := c.Hidden, c.Intermediate, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	return []struct {
		Name string
		N    []int
		K    int
	}{
		{"q/o proj", []int{qd}, H}, {"k/v proj", []int{kvd}, H}, {"qkv grouped", []int{qd, kvd, kvd}, H},
		{"gate/up", []int{I}, H}, {"gate+up grouped", []int{I, I}, H}, {"down", []int{H}, I}, {"lm_head", []int{c.Vocab}, H},
	}
}

// SweepLinearF16 times the fp16 linear layers of config c on GPU 0 at each
// row count in Ts, weights cold in L2 (copies in rotation), after probing
// the read ceiling (printed on progress). With algos GEMM's tuning is on
// (cuda.Ctx.SetGEMMTuning: the cuBLASLt and joined columns run the tuned
// choice), and for each shape's one GEMM over all its channels every
// algorithm the tuning considers is timed too (LinearF16Row.Algos).
// linear.cu runs with the launch settings o gives it in the backend
// (Options.SetLinear: none outside the batch-invariant mode), printed on
// progress.
func SweepLinearF16(c *model.Config, Ts []int, algos bool, o GPUOptions, progress io.Writer) ([]LinearF16Row, error) {
	dev, bw, err := openProbed("linear", progress)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	g, err := kernels.LoadGEMV(dev)
	if err != nil {
		return nil, err
	}
	l, err := kernels.LoadLinear(dev)
	if err != nil {
		return nil, err
	}
	o.SetLinear(l)
	fmt.Fprintf(progress, "linear.cu: early weights %v, persistent grids %v\n", l.EarlyWeights, l.Persistent)
	ops, err := kernels.LoadOps(dev)
	if err != nil {
		return nil, err
	}
	sk, err := kernels.LoadSkinny(dev)
	if err != nil {
		return nil, err
	}
	maxT := slices.Max(Ts)
	var rows []LinearF16Row
	err = dev.Do(func(x *cuda.Ctx) error {
		x.SetGEMMTuning(algos)
		defer x.SetGEMMTuning(false)
		st := dev.Stream()
		var frees []cuda.DevicePtr
		defer func() {
			for _, p := range frees {
				x.Free(p)
			}
		}()
		alloc := func(bytes int) (cuda.DevicePtr, error) {
			p, err := x.Alloc(bytes)
			if err == nil {
				frees = append(frees, p)
			}
			return p, err
		}
		for _, sh := range LinearF16Shapes(c) {
			jw, err := newJoinedWeights(x, st, ops, alloc, sh.N, sh.K)
			if err != nil {
				return err
			}
			ws, total, bytes, copies := jw.ws, jw.total, jw.bytes, jw.copies
			xp, err := alloc(4 * maxT * sh.K)
			if err != nil {
				return err
			}
			if err := x.Memset32Async(xp, 0x3c003c00, maxT*sh.K, st); err != nil {
				return err
			}
			xh, err := alloc(2 * maxT * sh.K)
			if err != nil {
				return err
			}
			var ys []cuda.DevicePtr
			for _, n := range sh.N {
				p, err := alloc(4 * maxT * n)
				if err != nil {
					return err
				}
				ys = append(ys, p)
			}
			yj, err := alloc(4 * maxT * total) // the joined GEMM's output
			if err != nil {
				return err
			}
			// skinny.cu's split-K workspace: counters zeroed once (each
			// launch leaves them zero), partials up to skinnySweepBytes.
			wsBytes := min(kernels.SkinnyWorkspaceBytes(min(maxT, kernels.SkinnyMaxRows), total, kernels.SkinnyMaxSplit), skinnySweepBytes)
			skws, err := alloc(wsBytes)
			if err != nil {
				return err
			}
			if err := x.Memset32Async(skws, 0, wsBytes/4, st); err != nil {
				return err
			}
			for _, T := range Ts {
				r := LinearF16Row{Name: sh.Name, N: sh.N, K: sh.K, T: T}
				frac := func(us float64) float64 { return float64(bytes) / us / 1e3 / bw.GBps }
				if r.LinearUS, err = x.MedianUS(st, 3, 20, func(i int) error {
					var gr []kernels.LinearGroup
					for j, n := range sh.N {
						gr = append(gr, kernels.LinearGroup{Y: ys[j], W: ws[i%copies][j], N: n})
					}
					return l.LaunchGroups(x, st, xp, xh, T, sh.K, gr...)
				}); err != nil {
					return err
				}
				r.LinearFrac = frac(r.LinearUS)
				if g.Fits(T, sh.K) {
					if r.GEMVUS, err = x.MedianUS(st, 3, 20, func(i int) error {
						for j, n := range sh.N {
							if err := g.Launch(x, st, ys[j], xp, ws[i%copies][j], 0, T, n, sh.K); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						return err
					}
					r.GEMVFrac = frac(r.GEMVUS)
				}
				if r.CublasUS, err = x.MedianUS(st, 3, 20, func(i int) error {
					if err := ops.F32ToF16(x, st, xh, xp, T*sh.K); err != nil {
						return err
					}
					for j, n := range sh.N {
						if err := x.GEMM(st, cuda.GEMMShape{M: T, N: n, K: sh.K, In: cuda.F16, Out: cuda.F32}, ys[j], xh, ws[i%copies][j]); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					return err
				}
				r.CublasFrac = frac(r.CublasUS)
				if len(sh.N) > 1 {
					if r.JoinedUS, err = x.MedianUS(st, 3, 20, func(i int) error {
						if err := ops.F32ToF16(x, st, xh, xp, T*sh.K); err != nil {
							return err
						}
						if err := x.GEMM(st, cuda.GEMMShape{M: T, N: total, K: sh.K, In: cuda.F16, Out: cuda.F32}, yj, xh, ws[i%copies][0]); err != nil {
							return err
						}
						var outs []kernels.ColsOut
						for j, n := range sh.N {
							outs = append(outs, kernels.ColsOut{Y: ys[j], N: n})
						}
						return ops.SplitCols(x, st, yj, T, outs...)
					}); err != nil {
						return err
					}
					r.JoinedFrac = frac(r.JoinedUS)
				}
				fmt.Fprintf(progress, "linear %-15s %6dx%-6d T=%-4d linear.cu %8.1f us (%3.0f%%)  gemv.cu %8.1f us (%3.0f%%)  cuBLASLt %8.1f us (%3.0f%%)  joined %8.1f us (%3.0f%%)\n",
					r.Name, total, sh.K, T, r.LinearUS, 100*r.LinearFrac, r.GEMVUS, 100*r.GEMVFrac, r.CublasUS, 100*r.CublasFrac, r.JoinedUS, 100*r.JoinedFrac)
				g := cuda.GEMMShape{M: T, N: total, K: sh.K, In: cuda.F16, Out: cuda.F32}
				if err := ops.F32ToF16(x, st, xh, xp, T*sh.K); err != nil {
					return err
				}
				if r.GEMMUS, err = x.MedianUS(st, 3, 20, func(i int) error {
					return x.GEMM(st, g, yj, xh, ws0(jw, i))
				}); err != nil {
					return err
				}
				r.GEMMFrac = frac(r.GEMMUS)
				if T <= kernels.SkinnyMaxRows {
					skinny := func(S int, early bool) (float64, error) {
						return x.MedianUS(st, 3, 20, func(i int) error {
							return sk.Launch(x, st, yj, xh, ws0(jw, i), 0, skws, T, total, sh.K, S, early)
						})
					}
					r.Split = sk.SkinnySplit(T, total, sh.K)
					if r.SkinnyUS, err = skinny(r.Split, false); err != nil {
						return err
					}
					r.SkinnyFrac = frac(r.SkinnyUS)
					if r.SkinnyEarlyUS, err = skinny(r.Split, true); err != nil {
						return err
					}
					for S := 1; S <= kernels.SkinnyMaxSplit && sk.CheckSplit(T, total, sh.K, S) == nil && kernels.SkinnyWorkspaceBytes(T, total, S) <= wsBytes; S++ {
						us, err := skinny(S, false)
						if err != nil {
							return err
						}
						r.SkinnySplitUS = append(r.SkinnySplitUS, us)
					}
					def := sk.Version
					for _, o := range []struct {
						v  int
						us *float64
					}{{kernels.SkinnyV1, &r.SkinnyV1US}, {kernels.SkinnyV2, &r.SkinnyV2US}} {
						if o.v == def {
							continue
						}
						sk.Version = o.v
						*o.us, err = skinny(sk.SkinnySplit(T, total, sh.K), false)
						sk.Version = def
						if err != nil {
							return err
						}
					}
					fmt.Fprintf(progress, "  gemm alone %8.1f us (%3.0f%%)  skinny.cu v%d split %d %8.1f us (%3.0f%%)  early %8.1f us  by split %.1f  v1 %8.1f us  v2 %8.1f us\n",
						r.GEMMUS, 100*r.GEMMFrac, def, r.Split, r.SkinnyUS, 100*r.SkinnyFrac, r.SkinnyEarlyUS, r.SkinnySplitUS, r.SkinnyV1US, r.SkinnyV2US)
				}
				if a, tuned, ok := x.GEMMChoice(g); ok {
					r.Chosen, r.Tuned = a.String(), tuned
					fmt.Fprintf(progress, "  chosen (tuned %v): %v\n", tuned, a)
				}
				if algos {
					list, err := x.GEMMAlgos(g)
					if err != nil {
						return err
					}
					y := yj
					if len(sh.N) == 1 {
						y = ys[0]
					}
					for k, a := range list {
						us, err := x.MedianUS(st, 3, 20, func(i int) error {
							return x.GEMMWith(st, g, a, y, xh, ws[i%copies][0])
						})
						if err != nil {
							fmt.Fprintf(progress, "  algo %2d failed: %v (%v)\n", k, err, a)
							continue
						}
						r.Algos = append(r.Algos, AlgoTime{Algo: a.String(), US: us, Frac: frac(us)})
						fmt.Fprintf(progress, "  algo %2d %8.1f us (%3.0f%%)  %v\n", k, us, 100*frac(us), a)
					}
				}
				rows = append(rows, r)
			}
			for _, p := range frees {
				x.Free(p)
			}
			frees = frees[:0]
		}
		return nil
	})
	return rows, err
}

// skinnySweepBytes bounds skinny.cu's split-K workspace in SweepLinearF16:
// splits whose partials need more are not timed (lm_head's, where the
// m-blocks fill the SMs without a split).
const skinnySweepBytes = 64 << 20

// ws0 is copy i's (in rotation) first weight of jw: the joined weights'
// start, one matrix of jw.total rows.
func ws0(jw joinedWeights, i int) cuda.DevicePtr { return jw.ws[i%jw.copies][0] }

// joinedWeights are a shape's fp16 weights in coldCopies' copies, each
// copy's groups one after another in one allocation, as backend/gpu's
// JoinWeights places them, filled with N(0, 0.02).
type joinedWeights struct {
	ws     [][]cuda.DevicePtr // ws[copy][group]
	total  int                // the groups' output columns together
	bytes  int64              // one copy's bytes
	copies int
}

// newJoinedWeights allocates (through alloc) and fills the joinedWeights
// of the groups N over K.
func newJoinedWeights(x *cuda.Ctx, st cuda.Stream, ops *kernels.Ops, alloc func(int) (cuda.DevicePtr, error), N []int, K int) (joinedWeights, error) {
	jw := joinedWeights{}
	for _, n := range N {
		jw.total += n
	}
	jw.bytes = int64(2) * int64(jw.total) * int64(K)
	jw.copies = coldCopies(jw.bytes)
	jw.ws = make([][]cuda.DevicePtr, jw.copies)
	for i := range jw.ws {
		p, err := alloc(int(jw.bytes))
		if err != nil {
			return jw, err
		}
		for j, n := range N {
			if err := ops.FillNormalF16(x, st, p, n*K, uint32(10*i+j+1), 0.02); err != nil {
				return jw, err
			}
			jw.ws[i] = append(jw.ws[i], p)
			p += cuda.DevicePtr(2 * n * K)
		}
	}
	return jw, nil
}

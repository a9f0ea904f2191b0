// gemv_variants.go: gemv.cu's variants (split-K factor, ring depth) on the
// launches a B = 1 decode step makes, alone and in a chain of programmatic
// dependents, for `bitdecode bench gemv --variants` (docs/perf/decode-step.md
// v20).

package bench

import (
	"fmt"
	"io"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/model"
)

// GEMVVariantRow is one (launch, T, split, depth) point of SweepGEMVVariants:
// the median time of one launch alone (weights cold), and per launch in a
// graph of Chain launches over weight copies in rotation, back to back, as
// programmatic dependents, without and with gemv.cu's early weight loads;
// each with its fraction of the read ceiling on the weight bytes. Default
// marks the split and depth the backend's launch takes.
type GEMVVariantRow struct {
	Name      string  `json:"name"`
	T         int     `json:"t"`
	Split     int     `json:"split"`
	Depth     int     `json:"depth"`
	Default   bool    `json:"default"`
	AloneUS   float64 `json:"alone_us"`
	AloneFrac float64 `json:"alone_ceiling_fraction"`
	ChainUS   float64 `json:"chain_us"`
	ChainFrac float64 `json:"chain_ceiling_fraction"`
	EarlyUS   float64 `json:"chain_early_us"`
	EarlyFrac float64 `json:"chain_early_ceiling_fraction"`
	Chain     int     `json:"chain"`
}

// gemvLaunchKinds are the gemv.cu launches of a decode step at T <= 2.
const (
	gemvPlain  = iota // LaunchGroupsSplit of one weight (o, down)
	gemvRoPE          // LaunchRoPESplit (q|k|v)
	gemvSwiGLU        // LaunchSwiGLUSplit (gate|up)
)

// SweepGEMVVariants times gemv.cu at every split-K factor (1, 2, 4) and
// depth (kernels.GEMVBatch, rings of 4, 8, 16) on the launches the backend makes at T rows (T <=
// 2) for config c: o and down alone, q|k|v with RoPE, gate|up with SwiGLU,
// after probing the read ceiling (printed on progress).
func SweepGEMVVariants(c *model.Config, Ts []int, progress io.Writer) ([]GEMVVariantRow, error) {
	dev, bw, err := openProbed("gemv variants", progress)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	g, err := kernels.LoadGEMVRings(dev)
	if err != nil {
		return nil, err
	}
	ops, err := kernels.LoadOps(dev)
	if err != nil {
		return nil, err
	}
	H, I, qd, kvd, D := c.Hidden, c.Intermediate, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.HeadDim
	shapes := []struct {
		name string
		kind int
		N    []int
		K    int
	}{
		{"o", gemvPlain, []int{qd}, qd}, {"q|k|v+rope", gemvRoPE, []int{qd, kvd, kvd}, H},
		{"gate|up+swiglu", gemvSwiGLU, []int{I, I}, H}, {"down", gemvPlain, []int{H}, I},
	}
	var rows []GEMVVariantRow
	err = dev.Do(func(x *cuda.Ctx) error {
		st := dev.Stream()
		prevPDL := x.SetGridDependentLaunch(true)
		defer x.SetGridDependentLaunch(prevPDL)
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
		const maxT = 2
		pos, err := alloc(4 * maxT)
		if err != nil {
			return err
		}
		if err := x.Memset32Async(pos, 1000, maxT, st); err != nil {
			return err
		}
		invFreq, err := alloc(4 * D / 2)
		if err != nil {
			return err
		}
		if err := x.Memset32Async(invFreq, 0x3c23d70a, D/2, st); err != nil { // 0.01
			return err
		}
		for _, sh := range shapes {
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
			var ys []cuda.DevicePtr
			for _, n := range sh.N {
				p, err := alloc(4 * maxT * n)
				if err != nil {
					return err
				}
				ys = append(ys, p)
			}
			dst, err := alloc(4 * maxT * sh.N[0])
			if err != nil {
				return err
			}
			for _, T := range Ts {
				launch := func(i, split int) error {
					w := ws[i%copies]
					gr := make([]kernels.LinearGroup, len(sh.N))
					for j, n := range sh.N {
						gr[j] = kernels.LinearGroup{Y: ys[j], W: w[j], N: n}
					}
					switch sh.kind {
					case gemvRoPE:
						return g.LaunchRoPESplit(x, st, xp, T, sh.K, split, gr[0], gr[1], gr[2], pos, invFreq, D/2)
					case gemvSwiGLU:
						gr[0].Y, gr[1].Y = 0, 0
						return g.LaunchSwiGLUSplit(x, st, xp, T, sh.K, split, gr[0], gr[1], dst)
					}
					return g.LaunchGroupsSplit(x, st, xp, T, sh.K, split, gr...)
				}
				frac := func(us float64) float64 { return float64(bytes) / us / 1e3 / bw.GBps }
				for _, split := range []int{1, 2, 4} {
					for _, depth := range []int{kernels.GEMVBatch, 4, 8, 16} {
						r := GEMVVariantRow{Name: sh.name, T: T, Split: split, Depth: depth, Chain: gemvChain,
							Default: split == kernels.GroupSplit(T, sh.N...) && depth == kernels.GEMVDepthFor(T, split, sh.K)}
						g.Depth = depth
						if r.AloneUS, err = x.MedianUS(st, 3, 20, func(i int) error { return launch(i, split) }); err != nil {
							g.Depth = 0
							return err
						}
						r.AloneFrac = frac(r.AloneUS)
						for _, early := range []bool{false, true} {
							g.EarlyWeights = early
							us, err := chainUS(x, st, gemvChain, func(i int) error { return launch(i, split) })
							g.EarlyWeights = false
							if err != nil {
								g.Depth = 0
								return err
							}
							if early {
								r.EarlyUS, r.EarlyFrac = us, frac(us)
							} else {
								r.ChainUS, r.ChainFrac = us, frac(us)
							}
						}
						g.Depth = 0
						mark := " "
						if r.Default {
							mark = "*"
						}
						fmt.Fprintf(progress, "gemv %-15s %6dx%-6d T=%d split %d depth %2d %s alone %7.1f us (%3.0f%%)  chain of %2d %7.1f us (%3.0f%%)  early %7.1f us (%3.0f%%)\n",
							r.Name, total, sh.K, T, split, depth, mark, r.AloneUS, 100*r.AloneFrac, gemvChain, r.ChainUS, 100*r.ChainFrac, r.EarlyUS, 100*r.EarlyFrac)
						rows = append(rows, r)
					}
				}
			}
			for _, p := range frees[2:] {
				x.Free(p)
			}
			frees = frees[:2]
		}
		return nil
	})
	return rows, err
}

// gemvChain is the launches in SweepGEMVVariants' graphs, over the weight
// copies in rotation (at least 128 MB between two reads of one copy).
const gemvChain = 16

// chainUS captures n launches (launch(0..n-1)) in one graph and returns the
// median time of its replay per launch.
func chainUS(x *cuda.Ctx, st cuda.Stream, n int, launch func(i int) error) (float64, error) {
	if err := x.BeginCapture(st); err != nil {
		return 0, err
	}
	var lerr error
	for i := range n {
		if lerr = launch(i); lerr != nil {
			break
		}
	}
	gr, err := x.EndCapture(st)
	if lerr != nil {
		if gr != nil {
			x.DestroyGraph(gr)
		}
		return 0, lerr
	}
	if err != nil {
		return 0, err
	}
	defer x.DestroyGraph(gr)
	us, err := x.MedianUS(st, 3, 10, func(int) error { return x.LaunchGraph(gr, st) })
	return us / float64(n), err
}

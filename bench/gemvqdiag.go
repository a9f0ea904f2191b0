package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/model"
	"github.com/bitdecode/bitdecode/wq"
)

// GEMVQDiagRow is one point of `bench gemvq --diag`: a form of int4, int8
// or int3 gemv_q5, gemv_q4 or gemv_q7 (kernels.GEMVQDiagForms) on a shape at a split, launched once a
// timed region (Launches 1) or Launches times back to back on distinct
// cold copies (US is then the time a launch), with or without early loads.
type GEMVQDiagRow struct {
	Variant   string  `json:"variant"` // NVRTC -D options, "" for the defaults
	Form      string  `json:"form"`
	Bits      int     `json:"bits"`
	Name      string  `json:"name"`
	N         int     `json:"n"`
	K         int     `json:"k"`
	Split     int     `json:"split"`
	Launches  int     `json:"launches"`
	Early     bool    `json:"early"`
	US        float64 `json:"us"`
	GBps      float64 `json:"gb_per_s"`
	OfCeiling float64 `json:"ceiling_fraction"`
	Registers int     `json:"registers"`
}

// gemvqDiagBackToBack is how many launches a back-to-back region queues.
const gemvqDiagBackToBack = 4

// SweepGEMVQDiag times, for each code width of bits (4, 8), the forms of
// gemv_q5 that tell the access pattern from the fixed cost of a kernel
// (docs/perf/gemvq.md, sessions 15, 15b, 16, 23): v5.1, its copies alone over
// wq's layout and over the tiled one (loads, loads-tiled), v6 (v5.1 over
// the tiled layout), v5.2 and v6.1 (LEAN), v4.1 (gemv_q4) and v6.2
// (gemv_q7) and v6.1c (int3's codes in place; int3 only) (int3: v6.1,
// v6.2 and v6.1c only, kernels.GEMVQDiagBuilt), alternated at each split, on config c's gate/up
// and down, on gate/up x4 (four times gate/up's rows: ~117 MB) and, when
// shapes0 names them, on q/o (Hidden x Hidden) and q|k|v (the joined
// projections' rows), weights cold in L2; then each form
// gemvqDiagBackToBack times back to back, with and without early loads
// (programmatic dependent launches). runs is the timed runs of each point
// (1: no warm-up and no back-to-back, for a profiler). Each compile-time
// variant (space-separated NAME=VALUE knobs of gemvq4.cu, "" the
// defaults) is timed beside the others at each point.
func SweepGEMVQDiag(c *model.Config, variants []string, bits []int, shapes0 []string, splits []int, runs int, progress io.Writer) ([]GEMVQDiagRow, error) {
	for _, b := range bits {
		if !kernels.GEMVQDiagBits(b) {
			return nil, fmt.Errorf("bench: gemvq diag: no forms for int%d (int4, int8, int3)", b)
		}
	}
	dev, bw, err := openProbed("gemvq diag", progress)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	var rows []GEMVQDiagRow
	for _, b := range bits {
		r, err := sweepGEMVQDiag(dev, bw, c, variants, b, shapes0, splits, runs, progress)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// sweepGEMVQDiag is SweepGEMVQDiag for one code width on an open device.
func sweepGEMVQDiag(dev *cuda.Device, bw cuda.Bandwidth, c *model.Config, variants []string, bits int, shapes0 []string, splits []int, runs int,
	progress io.Writer) ([]GEMVQDiagRow, error) {
	var err error
	mods := make([]*kernels.GEMVQDiag, len(variants))
	for i, v := range variants {
		var opts []string
		for _, f := range strings.Fields(v) {
			opts = append(opts, "-D"+f)
		}
		if mods[i], err = kernels.LoadGEMVQDiag(dev, bits, opts...); err != nil {
			return nil, fmt.Errorf("bench: gemvq diag variant %q: %w", v, err)
		}
	}
	H, I, qd, kvd := c.Hidden, c.Intermediate, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	shapes := []diagShape{{"gate/up", I, H, 1}, {"down", H, I, 1}, {"gate/up x4", 4 * I, H, 4}}
	if len(shapes0) > 0 {
		shapes = append(shapes, diagShape{"q/o", qd, H, 1}, diagShape{"q|k|v", qd + 2*kvd, H, 1})
		shapes = slices.DeleteFunc(shapes, func(s diagShape) bool { return !slices.Contains(shapes0, s.name) })
	}
	if len(splits) == 0 {
		splits = kernels.GEMVQ4Splits()
	}
	warm := 3
	if runs <= 1 {
		runs, warm = 1, 0
	}
	var rows []GEMVQDiagRow
	err = dev.Do(func(x *cuda.Ctx) error {
		st := dev.Stream()
		for _, sh := range shapes {
			bufs, bytes, free, err := uploadDiag(x, bits, sh.N/sh.x, sh.K, sh.x)
			if err != nil {
				return err
			}
			defer free()
			xp, err := x.Alloc(4 * sh.K)
			if err != nil {
				return err
			}
			defer x.Free(xp)
			yp, err := x.Alloc(4 * sh.N)
			if err != nil {
				return err
			}
			defer x.Free(yp)
			if err := x.Memset32Async(xp, 0x3f800000, sh.K, st); err != nil {
				return err
			}
			add := func(vi, f, s, launches int, early bool, us float64) error {
				fi, err := mods[vi].Info(x, f, s)
				if err != nil {
					return err
				}
				r := GEMVQDiagRow{Variant: variants[vi], Form: kernels.GEMVQDiagForms[f], Bits: bits, Name: sh.name, N: sh.N, K: sh.K, Split: s, Launches: launches, Early: early,
					US: us, GBps: float64(bytes) / us / 1e3, Registers: fi.Registers}
				r.OfCeiling = r.GBps / bw.GBps
				fmt.Fprintf(progress, "gemvq diag %-11s [%s] int%d %-10s %5dx%-5d S=%d x%d early=%-5v: %6.1f us %5.0f GB/s %3.0f%% regs %d\n",
					r.Form, r.Variant, bits, sh.name, sh.N, sh.K, s, launches, early, us, r.GBps, 100*r.OfCeiling, fi.Registers)
				rows = append(rows, r)
				return nil
			}
			for _, launches := range []int{1, gemvqDiagBackToBack} {
				if launches > 1 && runs == 1 {
					break
				}
				for _, early := range []bool{false, true} {
					if launches == 1 && early {
						continue // early loads only matter behind another kernel
					}
					for _, s := range splits {
						for vi, d := range mods {
							for f := range kernels.GEMVQDiagForms {
								if !kernels.GEMVQDiagBuilt(bits, f) {
									continue
								}
								b := bufs[kernels.GEMVQDiagTiled(f)]
								us, err := x.MedianUS(st, warm, runs, func(i int) error {
									for l := range launches {
										j := (i*launches + l) % len(b.words)
										if err := d.Launch(x, st, f, yp, xp, b.words[j], b.params[j], sh.N, sh.K, 128, s, early); err != nil {
											return err
										}
									}
									return nil
								})
								if err != nil {
									return err
								}
								if err := add(vi, f, s, launches, early, us/float64(launches)); err != nil {
									return err
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	return rows, err
}

// diagShape is a shape of the diagnostic sweep: [N, K], x copies of a
// [N/x, K] matrix stacked.
type diagShape struct {
	name    string
	N, K, x int
}

// diagBufs are the cold copies of one layout of a weight.
type diagBufs struct{ words, params []cuda.DevicePtr }

// uploadDiag quantizes a random N(0, 0.02²) [N, K] int-bits matrix (int4,
// int8) with groups of 128, stacks x copies of it ([x·N, K]) and uploads coldCopies copies
// in wq's layout (bufs[false]) and in the tiled one (bufs[true],
// kernels.PackTiles); bytes is the stacked matrix's (wq's accounting).
func uploadDiag(c *cuda.Ctx, bits, N, K, x int) (bufs map[bool]diagBufs, bytes int64, free func(), err error) {
	r := rand.New(rand.NewPCG(uint64(N), uint64(K)))
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
	}
	m, err := wq.Quantize(map[int]wq.Elem{3: wq.Int3, 4: wq.Int4, 8: wq.Int8}[bits], 128, N, K, w)
	if err != nil {
		return nil, 0, nil, err
	}
	words, params := slices.Repeat(m.Words, x), slices.Repeat(m.Params, x)
	tw, tp, err := kernels.PackTiles(bits, x*N, K, 128, words, params)
	if err != nil {
		return nil, 0, nil, err
	}
	var ptrs []cuda.DevicePtr
	free = func() {
		for _, p := range ptrs {
			c.Free(p)
		}
	}
	put := func(b []byte) (cuda.DevicePtr, error) {
		p, err := c.Alloc(len(b))
		if err != nil {
			return 0, err
		}
		ptrs = append(ptrs, p)
		return p, c.HtoD(p, b)
	}
	bytes = int64(x) * m.Bytes()
	bufs = map[bool]diagBufs{}
	for _, tiled := range []bool{false, true} {
		wb, pb := cuda.Bytes(words), cuda.Bytes(params)
		if tiled {
			wb, pb = cuda.Bytes(tw), cuda.Bytes(tp)
		}
		var b diagBufs
		for range coldCopies(bytes) {
			wp, err := put(wb)
			if err != nil {
				free()
				return nil, 0, nil, err
			}
			pp, err := put(pb)
			if err != nil {
				free()
				return nil, 0, nil, err
			}
			b.words, b.params = append(b.words, wp), append(b.params, pp)
		}
		bufs[tiled] = b
	}
	return bufs, bytes, free, nil
}

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

// GEMVQRow is one (variant, weight format, shape, split) point of the
// gemvq.cu sweep.
type GEMVQRow struct {
	Variant    string  `json:"variant"` // NVRTC -D options, "" for the defaults
	Version    int     `json:"version"` // 2: gemvq.cu (tensor cores), 3: gemvq3.cu (CUDA cores, T <= 2), 4: gemvq4.cu (tensor cores, T = 1), 5: its gemv_q5 (v4 fed by a cp.async ring, coalesced copies; the LEAN step, v5.2, where built, else v5.1), 6: gemv_q5 with each lane's own copies (v5.0, GEMVQ.V5Lanes), 7: gemv_q5 with session 15's step (v5.1, GEMVQ.V51), 8: v6.1 over the tiled layout (int4, int3, int8: GEMVQ.LaunchV6 with V61), 9: v6.2 (gemv_q7, v6.1 with x split once a CTA: LaunchV6)
	Bits       int     `json:"bits"`
	Name       string  `json:"name"`
	N          int     `json:"n"`
	K          int     `json:"k"`
	T          int     `json:"t"`
	Split      int     `json:"split"`
	Auto       bool    `json:"auto"` // the split Launch picks
	US         float64 `json:"us"`
	GBps       float64 `json:"gb_per_s"`
	OfCeiling  float64 `json:"ceiling_fraction"`
	Registers  int     `json:"registers"`
	LocalBytes int     `json:"local_bytes"`
}

// SweepGEMVQ times gemvq.cu's GEMV (v2), at T <= 2 gemvq3.cu's (v3) and at T = 1 gemvq4.cu's (v4, v5) on GPU 0 (after probing its read
// ceiling, printed on progress) for the linear-layer shapes of config c
// at T rows, for each compile-time variant (space-separated NAME=VALUE knobs
// of gemvq.cu, e.g. "GEMVQ_PIPE=0 GEMVQ_UNROLL=8"), each code width and each
// split, with weights cold in L2 (four copies in rotation).
// Shapes and splits, when not empty, restrict the sweep (shape names as in
// the rows: "gate/up", ...).
func SweepGEMVQ(c *model.Config, T int, variants []string, bits []int, shapes0 []string, splits []int, progress io.Writer) ([]GEMVQRow, error) {
	dev, bw, err := openProbed("gemvq", progress)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	return sweepGEMVQ(dev, c, T, variants, bits, shapes0, splits, bw.GBps, progress)
}

// openProbed opens GPU 0 for the sweep named what and probes its read
// ceiling, printed on progress; the caller closes the device.
func openProbed(what string, progress io.Writer) (*cuda.Device, cuda.Bandwidth, error) {
	dev, err := cuda.Open(0)
	if err != nil {
		return nil, cuda.Bandwidth{}, fmt.Errorf("bench: %s: %w", what, err)
	}
	bw, err := dev.ProbeBandwidth()
	if err != nil {
		dev.Close()
		return nil, cuda.Bandwidth{}, err
	}
	fmt.Fprintf(progress, "%s: read ceiling %.0f GB/s\n", dev.Name(), bw.GBps)
	return dev, bw, nil
}

func sweepGEMVQ(dev *cuda.Device, c *model.Config, T int, variants []string, bits []int, shapes0 []string, splits []int, ceilingGBps float64, progress io.Writer) ([]GEMVQRow, error) {
	H, I, qd, kvd := c.Hidden, c.Intermediate, c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	shapes := []struct {
		name string
		N, K int
	}{{"q/o proj", qd, H}, {"k/v proj", kvd, H}, {"q|k|v", qd + 2*kvd, H}, {"gate/up", I, H}, {"down", H, I}}
	if len(shapes0) > 0 {
		kept := shapes[:0]
		for _, sh := range shapes {
			if slices.Contains(shapes0, sh.name) {
				kept = append(kept, sh)
			}
		}
		shapes = kept
	}
	if len(splits) == 0 {
		splits = []int{1, 2, 4, 8, 16}
	}
	var rows []GEMVQRow
	for _, v := range variants {
		var opts []string
		for _, f := range strings.Fields(v) {
			opts = append(opts, "-D"+f)
		}
		g, err := kernels.LoadGEMVQOptions(dev, opts...)
		if err != nil {
			return nil, fmt.Errorf("bench: gemvq variant %q: %w", v, err)
		}
		err = dev.Do(func(x *cuda.Ctx) error {
			st := dev.Stream()
			for _, b := range bits {
				e := map[int]wq.Elem{3: wq.Int3, 4: wq.Int4, 8: wq.Int8}[b]
				for _, sh := range shapes {
					ws, ps, bytes, free, err := uploadQuant(x, e, sh.N, sh.K)
					if err != nil {
						return err
					}
					xp, err := x.Alloc(4 * T * sh.K)
					if err != nil {
						free()
						return err
					}
					yp, err := x.Alloc(4 * T * sh.N)
					if err != nil {
						free()
						x.Free(xp)
						return err
					}
					if err := x.Memset32Async(xp, 0x3f800000, T*sh.K, st); err != nil {
						return err
					}
					// v6.1 (ver 8) and v6.2 (ver 9) read each cold copy's tiled layout,
					// packed on the device.
					var tws, tps []cuda.DevicePtr
					if T == 1 && g.ReadsV6(b, 128, sh.K) {
						for i := range ws {
							tw, err := x.Alloc(4 * kernels.TiledWords(b, sh.N, sh.K))
							if err != nil {
								return err
							}
							tp, err := x.Alloc(4 * kernels.TiledParams(sh.N, sh.K, 128))
							if err != nil {
								return err
							}
							tws, tps = append(tws, tw), append(tps, tp)
							if err := g.PackTiles(x, st, tw, tp, ws[i], ps[i], sh.N, sh.K, b, 128); err != nil {
								return err
							}
						}
					}
					// v2, v3 (T <= 2) and v4 (T = 1) alternate at each
					// split, so that a drift of the clocks touches all.
					for _, s := range splits {
						for _, ver := range []int{2, 3, 4, 5, 6, 7, 8, 9} {
							if ver == 2 && s > kernels.GEMVQMaxSplit(T) || ver == 3 && (T > kernels.GEMVQ3MaxRows || !slices.Contains(kernels.GEMVQ3Splits(), s)) ||
								ver >= 4 && (T != 1 || !slices.Contains(kernels.GEMVQ4Splits(), s)) || ver >= 8 && len(tws) == 0 {
								continue
							}
							us, err := x.MedianUS(st, 3, 20, func(i int) error {
								switch ver {
								case 8, 9:
									g.V51, g.V61 = false, ver == 8
									return g.LaunchV6(x, st, yp, xp, tws[i%len(tws)], tps[i%len(tps)], 0, sh.N, sh.K, b, 128, s)
								case 5, 6, 7:
									g.V5Lanes, g.V51 = ver == 6, ver == 7
									return g.LaunchV5(x, st, yp, xp, ws[i%len(ws)], ps[i%len(ps)], 0, sh.N, sh.K, b, 128, s)
								case 4:
									return g.LaunchV4(x, st, yp, xp, ws[i%len(ws)], ps[i%len(ps)], 0, sh.N, sh.K, b, 128, s)
								case 3:
									return g.LaunchV3(x, st, yp, xp, ws[i%len(ws)], ps[i%len(ps)], 0, T, sh.N, sh.K, b, 128, s)
								}
								return g.LaunchSplit(x, st, yp, xp, ws[i%len(ws)], ps[i%len(ps)], 0, T, sh.N, sh.K, b, 128, s)
							})
							if err != nil {
								return err
							}
							fi, err := g.Info(x, T, b, s)
							auto := kernels.SplitFor(sh.N, sh.K)
							switch ver {
							case 3:
								fi, err = g.InfoV3(x, T, b, s)
								auto = g.SplitV3For(T, sh.N, sh.K, b)
							case 4:
								fi, err = g.InfoV4(x, b, s)
								auto = g.SplitV4For(sh.N, sh.K, b)
							case 5, 6, 7:
								fi, err = g.InfoV5(x, b, s)
								auto = g.SplitV5For(sh.N, sh.K, b)
							case 8, 9:
								g.V61 = ver == 8
								fi, err = g.InfoV6(x, b, sh.K, s)
								auto = g.SplitV5For(sh.N, sh.K, b)
							}
							if err != nil {
								return err
							}
							r := GEMVQRow{Variant: v, Version: ver, Bits: b, Name: sh.name, N: sh.N, K: sh.K, T: T, Split: s, Auto: s == auto, US: us,
								GBps: float64(bytes) / us / 1e3, Registers: fi.Registers, LocalBytes: fi.LocalBytes}
							r.OfCeiling = r.GBps / ceilingGBps
							mark := ""
							if r.Auto {
								mark = " (auto)"
							}
							fmt.Fprintf(progress, "gemvq v%d [%s] int%d %-9s %5dx%-5d T=%d S=%-2d: %6.1f us %5.0f GB/s %3.0f%% regs %d local %d%s\n",
								ver, v, b, sh.name, sh.N, sh.K, T, s, us, r.GBps, 100*r.OfCeiling, fi.Registers, fi.LocalBytes, mark)
							rows = append(rows, r)
						}
					}
					free()
					for i := range tws {
						x.Free(tws[i])
						x.Free(tps[i])
					}
					x.Free(xp)
					x.Free(yp)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// coldBytes is how many bytes of weight copies a GEMV timing rotates over:
// more than twice an H100's 50 MB L2, so every run reads from DRAM.
const coldBytes = 128 << 20

// coldCopies returns the copies of a matrix of the given bytes that make up
// coldBytes (at least 4).
func coldCopies(bytes int64) int { return max(4, int((coldBytes+bytes-1)/bytes)) }

// uploadQuant quantizes a random N(0, 0.02²) [N, K] matrix to format e with
// groups of 128 and uploads coldCopies copies; free releases them.
func uploadQuant(x *cuda.Ctx, e wq.Elem, N, K int) (words, params []cuda.DevicePtr, bytes int64, free func(), err error) {
	r := rand.New(rand.NewPCG(uint64(N), uint64(K)))
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
	}
	m, err := wq.Quantize(e, 128, N, K, w)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	var ptrs []cuda.DevicePtr
	free = func() {
		for _, p := range ptrs {
			x.Free(p)
		}
	}
	for range coldCopies(m.Bytes()) {
		wp, err := x.Alloc(4 * len(m.Words))
		if err != nil {
			free()
			return nil, nil, 0, nil, err
		}
		ptrs = append(ptrs, wp)
		pp, err := x.Alloc(2 * len(m.Params))
		if err != nil {
			free()
			return nil, nil, 0, nil, err
		}
		ptrs = append(ptrs, pp)
		if err := x.HtoD(wp, cuda.Bytes(m.Words)); err != nil {
			free()
			return nil, nil, 0, nil, err
		}
		if err := x.HtoD(pp, cuda.Bytes(m.Params)); err != nil {
			free()
			return nil, nil, 0, nil, err
		}
		words, params = append(words, wp), append(params, pp)
	}
	return words, params, m.Bytes(), free, nil
}

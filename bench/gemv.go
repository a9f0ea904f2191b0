package bench

import (
	"fmt"
	"io"

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

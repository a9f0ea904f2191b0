package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
)

// prefillPiecesCopies is how many copies of each operand
// BenchmarkPrefillPieces rotates over, so that no run reads what the run
// before left in L2.
const prefillPiecesCopies = 2

// prefillPiecesRows are the rows of x BenchmarkPrefillPieces times the
// conversion and the GEMM at: a batch above the GEMV's 16, a prefill
// chunk, a long one.
var prefillPiecesRows = []int{64, 512, 2048}

// BenchmarkPrefillPieces times, one by one with events (cuda.MedianUS), the
// pieces of backend/gpu's Linear over a packed weight above
// kernels.GEMVQMaxRows rows (linearQuant; docs/perf/gemvq.md, session
// 15e) at Llama-3.1-8B's gate/up (14336x4096) and down (4096x14336)
// shapes: the dequantization of the whole int4 or int3 weight to fp16
// (Dequant, DequantTiled; the form before session 15e with DequantScalar),
// x's conversion to fp16 (F32ToF16) and cuBLASLt's GEMM (fp16 in, fp32
// out; fp16 out for comparison) at T = 64, 512, 2048, and at T = 512 each
// algorithm of the heuristic's first eight (GEMMWith). It reports us, and
// GB/s (bytes read + written) or TFLOP/s, after the read ceiling
// (Device.ProbeBandwidth). Run on the GPU machine:
//
//	./kernels.test -test.run '^$' -test.bench PrefillPieces -test.benchtime 1x
func BenchmarkPrefillPieces(b *testing.B) {
	d, ops := opsSetup(b)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		b.Fatal(err)
	}
	bw, err := d.ProbeBandwidth()
	if err != nil {
		b.Fatal(err)
	}
	// Printed, not logged: a benchmark with sub-benchmarks shows no log of its own.
	fmt.Printf("read ceiling %.0f GB/s\n", bw.GBps)
	alloc := func(bytes int) cuda.DevicePtr { return benchAlloc(b, d, bytes) }
	r := rand.New(rand.NewPCG(15, 5))
	upload := func(src []byte) cuda.DevicePtr {
		p := alloc(len(src))
		if err := d.HtoD(p, src); err != nil {
			b.Fatal(err)
		}
		return p
	}
	seed := uint32(1)
	normalF16 := func(n int) cuda.DevicePtr {
		p := alloc(2 * n)
		if err := d.Do(func(c *cuda.Ctx) error { return ops.FillNormalF16(c, d.Stream(), p, n, seed, 1) }); err != nil {
			b.Fatal(err)
		}
		seed++
		return p
	}
	// median times step(i) (i rotating over the copies) on the device's
	// stream: 3 untimed runs, then the median of 20.
	median := func(step func(c *cuda.Ctx, s cuda.Stream, i int) error) float64 {
		var us float64
		err := d.Do(func(c *cuda.Ctx) error {
			var err error
			us, err = c.MedianUS(d.Stream(), 3, 20, func(i int) error { return step(c, d.Stream(), i%prefillPiecesCopies) })
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return us
	}
	const G = 128
	for _, s := range [][2]int{{14336, 4096}, {4096, 14336}} {
		N, K := s[0], s[1]
		out := alloc(2 * N * K)
		for _, bits := range []int{4, 3} {
			// Random codes and (scale, zero) pairs (any codes are valid; the
			// tiled layout has as many words and pairs at these shapes).
			var words, params [prefillPiecesCopies]cuda.DevicePtr
			for i := range prefillPiecesCopies {
				w := make([]byte, N*K/32*bits*4)
				for j := range w {
					w[j] = byte(r.Uint32())
				}
				words[i] = upload(w)
				p := make([]uint16, 2*N*(K/G))
				for j := 0; j < len(p); j += 2 {
					p[j], p[j+1] = half.FromFloat32(float32(0.001+0.01*r.Float64())), half.FromFloat32(float32(-0.05+0.1*r.Float64()))
				}
				params[i] = upload(cuda.Bytes(p))
			}
			bytes := float64(N*K/32*bits*4 + 4*N*(K/G) + 2*N*K)
			for _, tiled := range []bool{false, true} {
				for _, scalar := range []bool{true, false} {
					layout, form := "wq", "staged"
					if tiled {
						layout = "tiled"
					}
					if scalar {
						form = "scalar"
					}
					b.Run(fmt.Sprintf("dequant/int%d/%dx%d/%s/%s", bits, N, K, layout, form), func(b *testing.B) {
						g.DequantScalar = scalar
						defer func() { g.DequantScalar = false }()
						us := median(func(c *cuda.Ctx, st cuda.Stream, i int) error {
							if tiled {
								return g.DequantTiled(c, st, out, words[i], params[i], N, K, bits, G)
							}
							return g.Dequant(c, st, out, words[i], params[i], N, K, bits, G)
						})
						b.ReportMetric(us, "us")
						b.ReportMetric(bytes/us/1e3, "GB/s")
					})
				}
			}
		}
		var w [prefillPiecesCopies]cuda.DevicePtr
		for i := range w {
			w[i] = normalF16(N * K)
		}
		for _, T := range prefillPiecesRows {
			x32 := alloc(4 * T * K)
			if err := d.Do(func(c *cuda.Ctx) error { return c.Memset32Async(x32, 0x3f800000, T*K, d.Stream()) }); err != nil {
				b.Fatal(err)
			}
			var xh [prefillPiecesCopies]cuda.DevicePtr
			for i := range xh {
				xh[i] = normalF16(T * K)
			}
			y := alloc(4 * T * N)
			b.Run(fmt.Sprintf("f32tof16/T=%d/K=%d", T, K), func(b *testing.B) {
				us := median(func(c *cuda.Ctx, st cuda.Stream, i int) error { return ops.F32ToF16(c, st, xh[i], x32, T*K) })
				b.ReportMetric(us, "us")
			})
			flop := 2 * float64(T) * float64(N) * float64(K)
			for _, o := range []cuda.DType{cuda.F32, cuda.F16} {
				gs := cuda.GEMMShape{M: T, N: N, K: K, In: cuda.F16, Out: o}
				b.Run(fmt.Sprintf("gemm/T=%d/%dx%d/out=%v", T, N, K, o), func(b *testing.B) {
					us := median(func(c *cuda.Ctx, st cuda.Stream, i int) error { return c.GEMM(st, gs, y, xh[i], w[i]) })
					b.ReportMetric(us, "us")
					b.ReportMetric(flop/us/1e6, "TFLOP/s")
				})
			}
			if T != 512 {
				continue
			}
			gs := cuda.GEMMShape{M: T, N: N, K: K, In: cuda.F16, Out: cuda.F32}
			var algos []cuda.GEMMAlgo
			if err := d.Do(func(c *cuda.Ctx) error {
				var err error
				algos, err = c.GEMMAlgos(gs)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			for ai, a := range algos {
				if a.Variant {
					continue
				}
				b.Run(fmt.Sprintf("algo/T=%d/%dx%d/%d", T, N, K, ai), func(b *testing.B) {
					us := median(func(c *cuda.Ctx, st cuda.Stream, i int) error { return c.GEMMWith(st, gs, a, y, xh[i], w[i]) })
					b.Logf("%v", a)
					b.ReportMetric(us, "us")
					b.ReportMetric(flop/us/1e6, "TFLOP/s")
				})
			}
		}
	}
}

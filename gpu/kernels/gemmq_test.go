package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// TestGEMMQMatchesReference checks gemmq.cu (the fused dequant-GEMM over
// the tiled layout, 17 to 256 rows of x) against a float64 reference on
// wq's dequantized values Ŵ (wq.Matrix.At): int4, int3 and int8, groups of
// 128 and 256, N not a multiple of the CTA's 128 rows nor of 16, an odd
// number of 128-channel tiles (a last ring step of one tile; for int8's
// steps of two blocks, a last step of one block), T = 17, 24, 32, 48, 64,
// 100, 128 and 256 (partial token chunks), with and without a bias, each
// of the width's tilings (int8's steps of one and two blocks) and split-K
// (one slice, three, and the rule's), over a scratch and y poisoned with
// NaN. Its numbers are v2's: x and ŵ rounded
// once to fp16, float32 products and sums (the tensor cores' over K/16
// k-steps, then at most a few dozen slices), so v2's bound holds
// (TestGEMVQMatchesReference has the derivation): 2⁻¹⁰·(1 + 2⁻¹⁰) plus
// (K/16 + 40)·2⁻²³ of Σ(|s|·q + |z|)·|x|, and 2⁻²⁴ of |y| for wq's ŵ.
func TestGEMMQMatchesReference(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMMQ(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(16, 19))
	all := []int{17, 24, 32, 48, 64, 100, 128, 256}
	for _, c := range []struct {
		e       wq.Elem
		G, N, K int
		Ts      []int
	}{{wq.Int4, 128, 300, 1152, all}, {wq.Int3, 128, 300, 1152, all}, {wq.Int4, 256, 2050, 1536, []int{17, 64, 130}},
		{wq.Int3, 256, 77, 1536, []int{24, 256}}, {wq.Int4, 128, 4096, 4096, []int{32}}, {wq.Int3, 128, 1000, 14336, []int{64}},
		{wq.Int8, 128, 300, 1152, all}, {wq.Int8, 256, 2050, 1536, []int{17, 64, 130}}, {wq.Int8, 256, 77, 1536, []int{24, 256}},
		{wq.Int8, 128, 1000, 14336, []int{40}}} {
		bits := c.e.Bits()
		t.Run(fmt.Sprintf("int%d-g%d-N%d-K%d", bits, c.G, c.N, c.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			qm := gemvqWeight(t, r, c.e, c.G, c.N, c.K)
			maxT := 0
			for _, T := range c.Ts {
				maxT = max(maxT, T)
			}
			x := gemvqX(r, maxT, c.K)
			bias := make([]float32, c.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			// The float64 reference of every row of x, without the bias
			// (the first T rows are a launch of T).
			want, mag := make([]float64, maxT*c.N), make([]float64, maxT*c.N)
			for n := range c.N {
				for k := range c.K {
					wv := float64(qm.At(n, k))
					sc, z := qm.Param(n, k/c.G)
					a := math.Abs(float64(half.ToFloat32(sc)))*float64(qm.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))
					for ti := range maxT {
						xv := float64(x[ti*c.K+k])
						want[ti*c.N+n] += xv * wv
						mag[ti*c.N+n] += a * math.Abs(xv)
					}
				}
			}
			tw, tp, err := kernels.PackTiles(bits, c.N, c.K, c.G, qm.Words, qm.Params)
			if err != nil {
				t.Fatal(err)
			}
			twp, tpp := m.put(cuda.Bytes(tw)), m.put(cuda.Bytes(tp))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			type run struct{ config, splits int }
			runs := []run{{-1, 0}}
			for ci := range kernels.GEMMQConfigsFor(bits) {
				runs = append(runs, run{ci, 1}, run{ci, 3})
			}
			for _, T := range c.Ts {
				for ri, rn := range runs {
					withBias := ri%2 == 0
					g.Config, g.Splits = rn.config, rn.splits
					sp := m.put(cuda.Bytes(nanF32(g.ScratchBytes(T, c.N, c.K, bits) / 4)))
					yp := m.put(cuda.Bytes(nanF32(T * c.N)))
					var b cuda.DevicePtr
					if withBias {
						b = bp
					}
					m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
						return g.Launch(cx, s, yp, xp, twp, tpp, b, sp, T, c.N, c.K, bits, c.G)
					})
					g.Config, g.Splits = -1, 0
					got := make([]float32, T*c.N)
					m.read(cuda.Bytes(got), yp)
					for i := range got {
						w := want[i]
						if withBias {
							w += float64(bias[i%c.N])
						}
						tol := (0x1p-10*(1+0x1p-10)+float64(c.K/16+40)*0x1p-23)*mag[i] + 0x1p-24*math.Abs(w)
						if gv := float64(got[i]); gv != gv || math.Abs(gv-w) > tol {
							t.Fatalf("T=%d %+v bias %v: y[%d,%d] = %g, want %g (tol %.3g)", T, rn, withBias, i/c.N, i%c.N, gv, w, tol)
						}
					}
				}
			}
		})
	}
}

// gemmqBenchVariants are the builds of gemmq.cu BenchmarkGEMMQ times: the
// default, the mma as asm volatile, the two diagnostics (loads only,
// math only) and the copy loops before session 17 (GEMMQ_COPY=0); pick
// them with -test.bench.
var gemmqBenchVariants = []struct{ name, opt string }{{"default", ""}, {"volatile", "-DGEMMQ_VOLATILE=1"},
	{"loads", "-DGEMMQ_DIAG=1"}, {"math", "-DGEMMQ_DIAG=2"}, {"copyloops", "-DGEMMQ_COPY=0"}}

// gemmqBenchCopies is how many copies of each weight BenchmarkGEMMQ
// rotates over (two int4 gate/up copies, 59 MB, pass the H100's 50 MB L2).
const gemmqBenchCopies = 2

// BenchmarkGEMMQ times gemmq.cu's fused dequant-GEMM (both launches, with
// events: cuda.MedianUS) over random int4 codes in the tiled layout at
// Llama-3.1-8B's shapes (gate/up 14336x4096, down 4096x14336, q/o
// 4096x4096, k/v 1024x4096; int3 at gate/up, q/o and k/v; int8 at all
// four) and T = 24 to 256 rows: the rule's token tiling and split-K
// ("auto"), and for int4 and int8 every tiling at the rule's split and at
// splits 1 to 16 (the tuning sweep of docs/perf/gemvq.md, session 16;
// each tiling named by kernels.GEMMQConfigName), for each build of
// gemmqBenchVariants; then cuBLASLt over fp16 weights of the shape with
// fp16 x (fp16 weights' GEMM), and the path gemmq.cu replaces ("deq"): the tiled
// dequantization to fp16, x to fp16 and cuBLASLt. It reports us, TFLOP/s
// and the weight bytes' GB/s, after the read ceiling
// (Device.ProbeBandwidth). Run on the GPU machine:
//
//	./kernels.test -test.run '^$' -test.bench GEMMQ -test.benchtime 1x
func BenchmarkGEMMQ(b *testing.B) {
	d, ops := opsSetup(b)
	g, err := kernels.LoadGEMMQ(d)
	if err != nil {
		b.Fatal(err)
	}
	bw, err := d.ProbeBandwidth()
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("read ceiling %.0f GB/s\n", bw.GBps)
	// Each tiling's resources (registers, spills) from the driver.
	for _, bits := range []int{4, 3, 8} {
		for ci := range kernels.GEMMQConfigsFor(bits) {
			var fi cuda.FuncInfo
			if err := d.Do(func(c *cuda.Ctx) error { var err error; fi, err = g.Info(c, bits, ci); return err }); err != nil {
				b.Fatal(err)
			}
			fmt.Printf("gemmq int%d c%d %s: %d registers, %d local bytes\n", bits, ci, kernels.GEMMQConfigName(bits, ci), fi.Registers, fi.LocalBytes)
		}
	}
	alloc := func(bytes int) cuda.DevicePtr { return benchAlloc(b, d, bytes) }
	r := rand.New(rand.NewPCG(16, 7))
	upload := func(src []byte) cuda.DevicePtr {
		p := alloc(len(src))
		if err := d.HtoD(p, src); err != nil {
			b.Fatal(err)
		}
		return p
	}
	median := func(step func(c *cuda.Ctx, s cuda.Stream, i int) error) float64 {
		var us float64
		err := d.Do(func(c *cuda.Ctx) error {
			var err error
			us, err = c.MedianUS(d.Stream(), 3, 20, func(i int) error { return step(c, d.Stream(), i%gemmqBenchCopies) })
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return us
	}
	const G, maxT = 128, 256
	x := alloc(4 * maxT * 14336)
	xs := make([]float32, maxT*14336)
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
	if err := d.HtoD(x, cuda.Bytes(xs)); err != nil {
		b.Fatal(err)
	}
	xh := alloc(2 * maxT * 14336)
	if err := d.Do(func(c *cuda.Ctx) error { return ops.F32ToF16(c, d.Stream(), xh, x, maxT*14336) }); err != nil {
		b.Fatal(err)
	}
	y := alloc(4 * maxT * 14336)
	scratch := alloc(64 << 20)
	gq, err := kernels.LoadGEMVQ(d)
	if err != nil {
		b.Fatal(err)
	}
	wdeq := alloc(2 * 14336 * 4096)         // the dequantized weight ("deq")
	variants := map[string]*kernels.GEMMQ{} // compiled on first use
	for _, sh := range []struct {
		bits int
		N, K int
	}{{4, 14336, 4096}, {4, 4096, 14336}, {4, 4096, 4096}, {4, 1024, 4096}, {3, 14336, 4096}, {3, 4096, 4096}, {3, 1024, 4096},
		{8, 14336, 4096}, {8, 4096, 14336}, {8, 4096, 4096}, {8, 1024, 4096}} {
		N, K, bits := sh.N, sh.K, sh.bits
		var tw, tp [gemmqBenchCopies]cuda.DevicePtr
		for i := range gemmqBenchCopies {
			words, params := kernels.TiledBytes(bits, N, K, G)
			w := make([]byte, words)
			for j := range w {
				w[j] = byte(r.Uint32())
			}
			tw[i] = upload(w)
			p := make([]uint16, params/2)
			for j := 0; j < len(p); j += 2 {
				p[j], p[j+1] = half.FromFloat32(float32(0.001+0.01*r.Float64())), half.FromFloat32(float32(-0.05+0.1*r.Float64()))
			}
			tp[i] = upload(cuda.Bytes(p))
		}
		wbytes := float64(N*K/32*bits*4 + 4*N*(K/G))
		for _, T := range []int{24, 32, 48, 64, 128, 256} {
			flop := 2 * float64(T) * float64(N) * float64(K)
			type run struct {
				name           string
				config, splits int
			}
			runs := []run{{"auto", -1, 0}}
			if bits == 4 || bits == 8 {
				for ci := range kernels.GEMMQConfigsFor(bits) {
					name := fmt.Sprintf("c%d-%s", ci, kernels.GEMMQConfigName(bits, ci))
					runs = append(runs, run{name + "-auto", ci, 0})
					for _, s := range []int{1, 2, 4, 8, 16} {
						runs = append(runs, run{fmt.Sprintf("%s-s%d", name, s), ci, s})
					}
				}
			}
			for _, v := range gemmqBenchVariants {
				for _, rn := range runs {
					b.Run(fmt.Sprintf("int%d/%dx%d/T=%d/%s/%s", bits, N, K, T, v.name, rn.name), func(b *testing.B) {
						g := g
						if v.opt != "" {
							if variants[v.name] == nil {
								if variants[v.name], err = kernels.LoadGEMMQOptions(d, v.opt); err != nil {
									b.Fatal(err)
								}
							}
							g = variants[v.name]
						}
						g.Config, g.Splits = rn.config, rn.splits
						defer func() { g.Config, g.Splits = -1, 0 }()
						if g.ScratchBytes(T, N, K, bits) > 64<<20 {
							b.Skip("scratch")
						}
						us := median(func(c *cuda.Ctx, st cuda.Stream, i int) error {
							return g.Launch(c, st, y, x, tw[i], tp[i], 0, scratch, T, N, K, bits, G)
						})
						b.ReportMetric(us, "us")
						b.ReportMetric(flop/us/1e6, "TFLOP/s")
						b.ReportMetric(wbytes/us/1e3, "GB/s")
					})
				}
			}
		}
		{
			// The path gemmq.cu replaces: the tiled dequantization, x to
			// fp16, cuBLASLt (backend linearQuant at 17-128 rows where
			// gemmqRoutes says no).
			for _, T := range []int{24, 32, 48, 64, 128, 256} {
				gs := cuda.GEMMShape{M: T, N: N, K: K, In: cuda.F16, Out: cuda.F32}
				b.Run(fmt.Sprintf("int%d/%dx%d/T=%d/deq", bits, N, K, T), func(b *testing.B) {
					us := median(func(c *cuda.Ctx, st cuda.Stream, i int) error {
						if err := gq.DequantTiled(c, st, wdeq, tw[i], tp[i], N, K, bits, G); err != nil {
							return err
						}
						if err := ops.F32ToF16(c, st, xh, x, T*K); err != nil {
							return err
						}
						return c.GEMM(st, gs, y, xh, wdeq)
					})
					b.ReportMetric(us, "us")
					b.ReportMetric(2*float64(T)*float64(N)*float64(K)/us/1e6, "TFLOP/s")
					b.ReportMetric(wbytes/us/1e3, "GB/s")
				})
			}
		}
		if bits != 4 {
			continue
		}
		var wf [gemmqBenchCopies]cuda.DevicePtr
		for i := range wf {
			wf[i] = alloc(2 * N * K)
			if err := d.Do(func(c *cuda.Ctx) error { return ops.FillNormalF16(c, d.Stream(), wf[i], N*K, uint32(i+1), 1) }); err != nil {
				b.Fatal(err)
			}
		}
		for _, T := range []int{24, 32, 48, 64, 128, 256} {
			gs := cuda.GEMMShape{M: T, N: N, K: K, In: cuda.F16, Out: cuda.F32}
			b.Run(fmt.Sprintf("fp16/%dx%d/T=%d", N, K, T), func(b *testing.B) {
				us := median(func(c *cuda.Ctx, st cuda.Stream, i int) error { return c.GEMM(st, gs, y, xh, wf[i]) })
				b.ReportMetric(us, "us")
				b.ReportMetric(2*float64(T)*float64(N)*float64(K)/us/1e6, "TFLOP/s")
			})
		}
	}
}

package kernels_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// BenchmarkDecodeLayersPDL times the dependent kernels of a B = 1 decode
// step without attention, Llama-3.1-8B shapes over pdlBenchLayers layers
// with their own weights (3.5 GB, far beyond L2): per layer add_rmsnorm,
// q, k, v (gemv.cu), rope_qk, f32_to_f16 and f16_to_f32 (the conversions
// around attention, here back to back), o, add_rmsnorm, gate, up, swiglu,
// down: 13 launches. Captured as one CUDA graph (as the backend replays a
// step) or launched on the stream, with programmatic dependent launch off,
// on, and on with gemv.cu's early weight loads. It reports us/layer and the
// layer's weight bytes over that time (GB/s); the difference between modes
// is what PDL saves per layer (docs/perf/decode-step.md v6). Run on the GPU
// machine:
//
//	./kernels.test -test.run '^$' -test.bench DecodeLayersPDL -test.count 3
func BenchmarkDecodeLayersPDL(b *testing.B) {
	d, ops := opsSetup(b)
	g, err := kernels.LoadGEMV(d)
	if err != nil {
		b.Fatal(err)
	}
	const (
		H, I, Hq, Hkv, D = 4096, 14336, 32, 8, 128
		layers           = pdlBenchLayers
	)
	type layer struct{ q, k, v, o, gate, up, down, n1, n2 cuda.DevicePtr }
	var ls [layers]layer
	alloc := func(bytes int) cuda.DevicePtr { return benchAlloc(b, d, bytes) }
	fill := func(p cuda.DevicePtr, n int, seed uint32) {
		if err := d.Do(func(c *cuda.Ctx) error { return ops.FillNormalF16(c, d.Stream(), p, n, seed, 0.02) }); err != nil {
			b.Fatal(err)
		}
	}
	f32 := func(n int) cuda.DevicePtr {
		p := alloc(4 * n)
		if err := d.Do(func(c *cuda.Ctx) error { return c.Memset32Async(p, 0x3f800000, n, d.Stream()) }); err != nil { // 1.0
			b.Fatal(err)
		}
		return p
	}
	seed := uint32(1)
	mat := func(n, k int) cuda.DevicePtr {
		p := alloc(2 * n * k)
		fill(p, n*k, seed)
		seed++
		return p
	}
	for l := range ls {
		ls[l] = layer{q: mat(Hq*D, H), k: mat(Hkv*D, H), v: mat(Hkv*D, H), o: mat(H, Hq*D),
			gate: mat(I, H), up: mat(I, H), down: mat(H, I), n1: f32(H), n2: f32(H)}
	}
	h, x, delta := f32(H), f32(H), f32(H)
	q, k, v, qo := f32(Hq*D), f32(Hkv*D), f32(Hkv*D), f32(Hq*D)
	gt, up := f32(I), f32(I)
	qh := alloc(2 * Hq * D)
	pos := alloc(4)
	invFreq := f32(D / 2)
	if err := d.Do(func(c *cuda.Ctx) error {
		if err := c.Memset32Async(pos, 100, 1, d.Stream()); err != nil {
			return err
		}
		return c.SyncStream(d.Stream())
	}); err != nil {
		b.Fatal(err)
	}
	layerBytes := 2 * (2*Hq*D*H + 2*Hkv*D*H + 3*I*H)
	step := func(c *cuda.Ctx, s cuda.Stream) error {
		for _, w := range ls {
			for _, f := range []func() error{
				func() error { return ops.AddRMSNorm(c, s, h, x, delta, w.n1, 1, H, 1e-5) },
				func() error { return g.Launch(c, s, q, x, w.q, 0, 1, Hq*D, H) },
				func() error { return g.Launch(c, s, k, x, w.k, 0, 1, Hkv*D, H) },
				func() error { return g.Launch(c, s, v, x, w.v, 0, 1, Hkv*D, H) },
				func() error { return ops.RoPEQK(c, s, q, k, pos, invFreq, 0, 0, 1, Hq, Hkv, D/2, 1e-5) },
				func() error { return ops.F32ToF16(c, s, qh, q, Hq*D) },
				func() error { return ops.F16ToF32(c, s, qo, qh, Hq*D) },
				func() error { return g.Launch(c, s, delta, qo, w.o, 0, 1, H, Hq*D) },
				func() error { return ops.AddRMSNorm(c, s, h, x, delta, w.n2, 1, H, 1e-5) },
				func() error { return g.Launch(c, s, gt, x, w.gate, 0, 1, I, H) },
				func() error { return g.Launch(c, s, up, x, w.up, 0, 1, I, H) },
				func() error { return ops.SwiGLU(c, s, gt, gt, up, I) },
				func() error { return g.Launch(c, s, delta, gt, w.down, 0, 1, H, I) },
			} {
				if err := f(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, graph := range []bool{true, false} {
		for _, mode := range []struct {
			name       string
			pdl, early bool
		}{{"off", false, false}, {"on", true, false}, {"early", true, true}} {
			how := "stream"
			if graph {
				how = "graph"
			}
			b.Run(fmt.Sprintf("%s/%s", how, mode.name), func(b *testing.B) {
				g.EarlyWeights = mode.early
				defer func() { g.EarlyWeights = false }()
				var elapsed time.Duration
				err := d.Do(func(c *cuda.Ctx) error {
					prev := c.SetGridDependentLaunch(mode.pdl)
					defer c.SetGridDependentLaunch(prev)
					s := d.Stream()
					run := func() error { return step(c, s) }
					if graph {
						if err := c.BeginCapture(s); err != nil {
							return err
						}
						serr := step(c, s)
						gr, err := c.EndCapture(s)
						if serr != nil {
							return serr
						}
						if err != nil {
							return err
						}
						defer c.DestroyGraph(gr)
						run = func() error { return c.LaunchGraph(gr, s) }
					}
					var err error
					elapsed, err = timeBenchLoop(b, c, s, run)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				perLayer := elapsed.Seconds() / float64(b.N) / layers
				b.ReportMetric(perLayer*1e6, "us/layer")
				b.ReportMetric(float64(layerBytes)/perLayer/1e9, "GB/s")
			})
		}
	}
}

// pdlBenchLayers is how many layers BenchmarkDecodeLayersPDL runs: 3.5 GB
// of weights, so that every layer reads its weights from DRAM.
const pdlBenchLayers = 8

// timeBenchLoop runs run three times to warm up, then once per b.Loop
// iteration, and returns the time of the loop, s synchronized before and
// after.
func timeBenchLoop(b *testing.B, c *cuda.Ctx, s cuda.Stream, run func() error) (time.Duration, error) {
	for range 3 {
		if err := run(); err != nil {
			return 0, err
		}
	}
	if err := c.SyncStream(s); err != nil {
		return 0, err
	}
	start := time.Now()
	for b.Loop() {
		if err := run(); err != nil {
			return 0, err
		}
	}
	if err := c.SyncStream(s); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// benchAlloc allocates bytes of device memory that b frees when it ends.
func benchAlloc(b testing.TB, d *cuda.Device, bytes int) cuda.DevicePtr {
	b.Helper()
	p, err := d.Alloc(bytes)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Free(p) })
	return p
}

package cuda

import (
	"testing"
	"time"
)

// Benchmarks of the runtime's own overheads, for whoever designs the decode
// loop. Run on the GPU machine: ./cuda.test -test.run '^$' -test.bench . -test.benchmem

func benchDevice(b *testing.B) *Device {
	b.Helper()
	gpuOnce.Do(func() { gpuDev, gpuErr = Open(0) })
	if gpuErr != nil {
		b.Skip(gpuErr)
	}
	return gpuDev
}

func benchNop(b *testing.B, d *Device) Function {
	b.Helper()
	m, err := d.Compile(Program{Name: "nop.cu", Source: `extern "C" __global__ void nop(float* p, int n, float a) {}`})
	if err != nil {
		b.Skip(err)
	}
	f, err := m.Function("nop")
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkDoRoundTrip is the cost of one hand-off to the owner thread.
func BenchmarkDoRoundTrip(b *testing.B) {
	d := benchDevice(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Do(func(*Ctx) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLaunchInDo queues launches from inside one Do: the intended
// pattern for a decode step.
func BenchmarkLaunchInDo(b *testing.B) {
	d := benchDevice(b)
	f := benchNop(b, d)
	b.ReportAllocs()
	err := d.Do(func(c *Ctx) error {
		for b.Loop() {
			if err := c.Launch(f, Dim3{X: 1}, Dim3{X: 32}, 0, d.Stream(), DevicePtr(0), int32(7), float32(1)); err != nil {
				return err
			}
		}
		return c.SyncStream(d.Stream())
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLaunchPerDo pays one hand-off per launch (Device.Launch).
func BenchmarkLaunchPerDo(b *testing.B) {
	d := benchDevice(b)
	f := benchNop(b, d)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Launch(f, Dim3{X: 1}, Dim3{X: 32}, 0, d.Stream(), DevicePtr(0), int32(7), float32(1)); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGEMMDecode is a decode-shaped linear layer, M=3 N=4096 K=4096
// f16 (32 MiB of weights), queued back to back from one Do.
func BenchmarkGEMMDecode(b *testing.B) {
	d := benchDevice(b)
	g := GEMMShape{M: 3, N: 4096, K: 4096, In: F16, Out: F16}
	err := d.Do(func(c *Ctx) error {
		x, err := c.Alloc(2 * g.M * g.K)
		if err != nil {
			return err
		}
		defer c.Free(x)
		w, err := c.Alloc(2 * g.N * g.K)
		if err != nil {
			return err
		}
		defer c.Free(w)
		y, err := c.Alloc(2 * g.M * g.N)
		if err != nil {
			return err
		}
		defer c.Free(y)
		c.Memset8(x, 0, 2*g.M*g.K)
		c.Memset8(w, 0, 2*g.N*g.K)
		s := d.Stream()
		if err := c.GEMM(s, g, y, x, w); err != nil { // plan outside the timing
			return err
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		b.SetBytes(int64(2 * g.N * g.K))
		b.ReportAllocs()
		for b.Loop() {
			if err := c.GEMM(s, g, y, x, w); err != nil {
				return err
			}
		}
		return c.SyncStream(s)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGraphChainPDL replays a CUDA graph of pdlChain small dependent
// kernels (each adds the buffer the one before it wrote: pdlSource's
// consume, one block) with programmatic dependent launch off and on, and
// reports the time per kernel: what a kernel boundary costs inside a graph,
// and what PDL takes off it.
func BenchmarkGraphChainPDL(b *testing.B) {
	d := benchDevice(b)
	m, err := d.Compile(Program{Name: "pdl.cu", Source: pdlSource, GridDependent: true})
	if err != nil {
		b.Skip(err)
	}
	consume, err := m.Function("consume")
	if err != nil {
		b.Fatal(err)
	}
	const n, chain = 1024, 500
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var elapsed time.Duration
			err := d.Do(func(c *Ctx) error {
				prev := c.SetGridDependentLaunch(on)
				defer c.SetGridDependentLaunch(prev)
				s := d.Stream()
				p, err := c.Alloc(8 * n)
				if err != nil {
					return err
				}
				defer c.Free(p)
				if err := c.Memset32Async(p, 0, 2*n, s); err != nil {
					return err
				}
				a, bb := p, p+DevicePtr(4*n)
				if err := c.BeginCapture(s); err != nil {
					return err
				}
				var lerr error
				for i := 0; i < chain && lerr == nil; i++ {
					lerr = c.Launch(consume, Dim3{X: 1}, Dim3{X: 256}, 0, s, bb, a, int32(n))
					a, bb = bb, a
				}
				g, err := c.EndCapture(s)
				if lerr != nil {
					return lerr
				}
				if err != nil {
					return err
				}
				defer c.DestroyGraph(g)
				if err := c.LaunchGraph(g, s); err != nil {
					return err
				}
				if err := c.SyncStream(s); err != nil {
					return err
				}
				start := time.Now()
				for b.Loop() {
					if err := c.LaunchGraph(g, s); err != nil {
						return err
					}
				}
				if err := c.SyncStream(s); err != nil {
					return err
				}
				elapsed = time.Since(start)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(elapsed.Seconds()/float64(b.N)/chain*1e6, "us/kernel")
		})
	}
}

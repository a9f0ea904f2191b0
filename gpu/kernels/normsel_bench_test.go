package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// selBenchChain is how many launches of one kernel BenchmarkOpsSel
// captures into its graph: the graph's replays then time the kernel back
// to back, each launch a programmatic dependent of the one before (as
// in the step), with one graph launch's overhead spread over the chain.
const selBenchChain = 64

// BenchmarkOpsSel (session 20b, docs/perf/dec.md) times DEC's list
// producers against the kernels they replace at the Llama-3.1-8B decode
// step's shapes (B = 1): add_rmsnorm_cluster against add_rmsnorm_cluster_sel
// (G 4096, early loads, h updated in place, the fp16 copy off as in the
// q6 route), f16_to_f32_hadamard_warp against f16_to_f32_hadamard_sel (32
// heads of 128) and swiglu_cols against swiglu_cols_sel (N 14336), the
// lists at k_chunk 4, 8 and 64. It reports us/launch (a graph of
// selBenchChain launches of one kernel, replayed). Run on the GPU
// machine:
//
//	./kernels.test -test.run '^$' -test.bench OpsSel -test.benchtime 2000x -test.count 3
func BenchmarkOpsSel(b *testing.B) {
	d, o := opsSetup(b)
	for _, k := range opsSelKernels(b, d, o, []int{4, 8, 64}) {
		b.Run(k.name, func(b *testing.B) { timeOpsSelChain(b, d, k.launch) })
	}
}

// opsSelKernel is one kernel BenchmarkOpsSel times: its name and launch.
type opsSelKernel struct {
	name   string
	launch func(c *cuda.Ctx, s cuda.Stream) error
}

// opsSelKernels makes BenchmarkOpsSel's inputs on d and returns its
// kernels of o: each plain kernel, then its producer at each k_chunk of ks.
func opsSelKernels(b *testing.B, d *cuda.Device, o *kernels.Ops, ks []int) []opsSelKernel {
	b.Helper()
	if !o.AddRMSNormSelects(4096) {
		b.Skipf("%s: no list producers (no clusters)", d.Arch())
	}
	const (
		H, I, heads, D = 4096, 14336, 32, 128
		eps            = 1e-5
	)
	r := rand.New(rand.NewPCG(20, 2))
	put := func(v []float32) cuda.DevicePtr {
		p := benchAlloc(b, d, 4*len(v))
		if err := d.Do(func(c *cuda.Ctx) error {
			if err := c.HtoDAsync(p, cuda.Bytes(v), d.Stream()); err != nil {
				return err
			}
			return c.SyncStream(d.Stream())
		}); err != nil {
			b.Fatal(err)
		}
		return p
	}
	h, delta, w := put(kernels.DECTestActivations(r, H, 0)), put(randF32(r, H, 0.05)), put(randF32(r, H, 1))
	x := benchAlloc(b, d, 4*H)
	att := benchAlloc(b, d, 2*H)
	if err := d.Do(func(c *cuda.Ctx) error { return o.FillNormalF16(c, d.Stream(), att, H, 7, 1) }); err != nil {
		b.Fatal(err)
	}
	y := put(append(kernels.DECTestActivations(r, I, 0), randF32(r, I, 1)...))
	dst, up := benchAlloc(b, d, 4*I), benchAlloc(b, d, 4*I)
	sel := benchAlloc(b, d, 4*I) // every list fits: at most I channels
	var out []opsSelKernel
	out = append(out, opsSelKernel{"norm/plain", func(c *cuda.Ctx, s cuda.Stream) error {
		return o.AddRMSNormHalfEarly(c, s, h, x, 0, delta, w, 1, H, eps, true)
	}})
	for _, k := range ks {
		out = append(out, opsSelKernel{fmt.Sprintf("norm/sel-k%d", k), func(c *cuda.Ctx, s cuda.Stream) error {
			return o.AddRMSNormSel(c, s, h, x, 0, delta, w, 1, H, eps, true, sel, k)
		}})
	}
	out = append(out, opsSelKernel{"out/plain", func(c *cuda.Ctx, s cuda.Stream) error {
		return o.F16ToF32Hadamard(c, s, x, att, heads, D)
	}})
	for _, k := range ks {
		out = append(out, opsSelKernel{fmt.Sprintf("out/sel-k%d", k), func(c *cuda.Ctx, s cuda.Stream) error {
			return o.F16ToF32HadamardSel(c, s, x, att, 1, heads*D, D, sel, k)
		}})
	}
	upOut := kernels.ColsOut{Y: up, N: I}
	out = append(out, opsSelKernel{"glu/plain", func(c *cuda.Ctx, s cuda.Stream) error {
		return o.GLUColsHalf(c, s, kernels.ActSiLU, y, dst, 0, 1, kernels.ColsOut{N: I}, upOut)
	}})
	for _, k := range ks {
		out = append(out, opsSelKernel{fmt.Sprintf("glu/sel-k%d", k), func(c *cuda.Ctx, s cuda.Stream) error {
			return o.GLUColsSel(c, s, kernels.ActSiLU, y, dst, 1, kernels.ColsOut{N: I}, upOut, sel, k)
		}})
	}
	return out
}

// timeOpsSelChain reports launch's us/launch: a graph of selBenchChain
// launches, each a programmatic dependent of the one before, replayed.
func timeOpsSelChain(b *testing.B, d *cuda.Device, launch func(c *cuda.Ctx, s cuda.Stream) error) {
	var elapsed time.Duration
	err := d.Do(func(c *cuda.Ctx) error {
		prev := c.SetGridDependentLaunch(true)
		defer c.SetGridDependentLaunch(prev)
		s := d.Stream()
		if err := c.BeginCapture(s); err != nil {
			return err
		}
		var lerr error
		for range selBenchChain {
			if lerr = launch(c, s); lerr != nil {
				break
			}
		}
		gr, err := c.EndCapture(s)
		if lerr != nil {
			return lerr
		}
		if err != nil {
			return err
		}
		defer c.DestroyGraph(gr)
		elapsed, err = timeBenchLoop(b, c, s, func() error { return c.LaunchGraph(gr, s) })
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(elapsed.Seconds()/float64(b.N)/selBenchChain*1e6, "us/launch")
}

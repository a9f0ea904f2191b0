// Tests of GEMM's tuning: every cuBLASLt algorithm it considers (the
// heuristic's and the split-K variants) and the one it picks, against a
// float64 reference.

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGPUGEMMAlgos runs a decode-batch GEMM (55 rows, an 8 MiB weight, so
// GEMM tunes it with SetGEMMTuning on) with every algorithm GEMMAlgos
// lists and with GEMM's own choice, each over a NaN-poisoned output, and
// requires each within gemmCase's bound of the float64 product of the
// same rounded inputs; then 50 rows of the same operands (the same 16-row
// bucket: the tuned choice is reused where cuBLASLt accepts it) within the
// same bound.
func TestGPUGEMMAlgos(t *testing.T) {
	d := testDevice(t)
	if _, err := CUBLASLtVersion(); err != nil {
		t.Skipf("no cuBLASLt: %v", err)
	}
	g := GEMMShape{M: 55, N: 2048, K: 2048, In: F16, Out: F32}
	rng := rand.New(rand.NewPCG(55, 2048))
	x := make([]uint16, g.M*g.K)
	w := make([]uint16, g.N*g.K)
	for i := range x {
		x[i] = f32ToF16(float32(rng.Float64()*2 - 1))
	}
	for i := range w {
		w[i] = f32ToF16(float32(rng.Float64()*2 - 1))
	}
	xf := make([]float64, len(x))
	for i, v := range x {
		xf[i] = float64(f16ToF32(v))
	}
	wf := make([]float64, len(w))
	for i, v := range w {
		wf[i] = float64(f16ToF32(v))
	}
	ref := make([]float64, g.M*g.N)
	for m := range g.M {
		xr := xf[m*g.K : (m+1)*g.K]
		for n := range g.N {
			wr := wf[n*g.K : (n+1)*g.K]
			var s float64
			for k, v := range xr {
				s += v * wr[k]
			}
			ref[m*g.N+n] = s
		}
	}
	check := func(what string, y []float32, rows int) {
		t.Helper()
		checkGEMMOutput(t, what, g.N, ref[:rows*g.N], func(i int) float64 { return float64(y[i]) }, 3)
	}
	y := make([]float32, g.M*g.N)
	must(t, d.Do(func(c *Ctx) error {
		px, err := c.Alloc(2 * len(x))
		if err != nil {
			return err
		}
		defer c.Free(px)
		pw, err := c.Alloc(2 * len(w))
		if err != nil {
			return err
		}
		defer c.Free(pw)
		py, err := c.Alloc(4 * len(y))
		if err != nil {
			return err
		}
		defer c.Free(py)
		if err := c.HtoD(px, Bytes(x)); err != nil {
			return err
		}
		if err := c.HtoD(pw, Bytes(w)); err != nil {
			return err
		}
		c.SetGEMMTuning(true)
		defer c.SetGEMMTuning(false)
		s := d.Stream()
		run := func(what string, rows int, call func(GEMMShape) error) error {
			gg := g
			gg.M = rows
			if err := c.Memset8Async(py, 0xff, 4*len(y), s); err != nil {
				return err
			}
			if err := call(gg); err != nil {
				return err
			}
			if err := c.SyncStream(s); err != nil {
				return err
			}
			if err := c.DtoH(Bytes(y), py); err != nil {
				return err
			}
			check(what, y, rows)
			return nil
		}
		algos, err := c.GEMMAlgos(g)
		if err != nil {
			return err
		}
		if len(algos) == 0 || algos[0].Variant {
			t.Fatalf("GEMMAlgos: %d algorithms, the first a variant: want the heuristic's first first", len(algos))
		}
		variants := 0
		for i, a := range algos {
			if a.Variant {
				variants++
			}
			if err := run(fmtAlgo(i, a), g.M, func(gg GEMMShape) error { return c.GEMMWith(s, gg, a, py, px, pw) }); err != nil {
				return err
			}
		}
		t.Logf("%d algorithms (%d split-K variants), the heuristic's first: %v", len(algos), variants, algos[0])
		if err := run("GEMM (tuned)", g.M, func(gg GEMMShape) error { return c.GEMM(s, gg, py, px, pw) }); err != nil {
			return err
		}
		a, tuned, ok := c.GEMMChoice(g)
		if !ok {
			t.Fatalf("GEMMChoice after GEMM: no plan")
		}
		t.Logf("GEMM's choice (tuned %v): %v", tuned, a)
		return run("GEMM at 50 rows (the bucket's choice)", 50, func(gg GEMMShape) error { return c.GEMM(s, gg, py, px, pw) })
	}))
}

func fmtAlgo(i int, a GEMMAlgo) string {
	return "algo " + fmt.Sprint(i) + " (" + a.String() + ")"
}

// TestGEMMTuneBucket pins the 16-row buckets.
func TestGEMMTuneBucket(t *testing.T) {
	for _, c := range []struct{ m, want int }{{1, 1}, {16, 1}, {17, 2}, {55, 4}, {64, 4}, {100, 7}, {256, 16}} {
		if got := gemmTuneBucket(c.m); got != c.want {
			t.Errorf("gemmTuneBucket(%d) = %d, want %d", c.m, got, c.want)
		}
	}
}

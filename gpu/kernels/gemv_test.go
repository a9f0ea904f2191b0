package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
)

// TestGEMVMatchesReference checks y = x·Wᵀ + bias for every row count and
// shapes with K a multiple of 8 but not of the 1024-channel unrolled step,
// against a float64 reference on the same fp16 weights. Weights are
// N(0, 0.02²); x has outlier channels (x20) as real activations do. The
// bound is float32 accumulation: each lane sums K/32 products, then 5
// shuffle levels and up to 3 split-K adds, so |err| <= (K/32 + 8)·2⁻²⁴·Σ|x·w|.
// Every split-K factor (1, 2, 4) is checked.
func TestGEMVMatchesReference(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMV(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range []struct{ T, N, K int }{{1, 4096, 4096}, {1, 1000, 1032}, {2, 130, 8}, {3, 257, 4104}, {5, 64, 14336}, {8, 333, 2048}} {
		t.Run(fmt.Sprintf("T%d-N%d-K%d", sh.T, sh.N, sh.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			w := make([]uint16, sh.N*sh.K)
			for i := range w {
				w[i] = half.FromFloat32(float32(0.02 * r.NormFloat64()))
			}
			x := make([]float32, sh.T*sh.K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if i%sh.K%37 == 3 {
					x[i] *= 20
				}
			}
			bias := make([]float32, sh.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			wp, xp, bp := m.put(cuda.Bytes(w)), m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			for i, split := range []int{1, 2, 4} {
				withBias := i%2 == 1
				yp := m.put(cuda.Bytes(nanF32(sh.T * sh.N)))
				b := cuda.DevicePtr(0)
				if withBias {
					b = bp
				}
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					return g.LaunchSplit(c, s, yp, xp, wp, b, sh.T, sh.N, sh.K, split)
				})
				got := make([]float32, sh.T*sh.N)
				m.read(cuda.Bytes(got), yp)
				for ti := range sh.T {
					for n := range sh.N {
						var want, mag float64
						for k := range sh.K {
							p := float64(x[ti*sh.K+k]) * float64(half.ToFloat32(w[n*sh.K+k]))
							want += p
							mag += math.Abs(p)
						}
						if withBias {
							want += float64(bias[n])
							mag += math.Abs(float64(bias[n]))
						}
						tol := float64(sh.K/32+8) * 0x1p-24 * mag
						g := float64(got[ti*sh.N+n])
						if g != g || math.Abs(g-want) > tol {
							t.Fatalf("split %d, bias %v: y[%d,%d] = %g, want %g (tol %.3g)", split, withBias, ti, n, g, want, tol)
						}
					}
				}
			}
		})
	}
}

// TestGEMVDependentLaunch checks gemv.cu as a programmatic dependent: x is
// written by the kernel right before the GEMV (ops.cu add, x = x0 + 0, on a
// NaN-poisoned buffer), and y is compared bitwise with a launch that
// follows a finished stream, for PDL off, on, and on with early weight
// loads, at every split and at 1 and 8 rows. A GEMV that read x before the
// add had finished would see NaN.
func TestGEMVDependentLaunch(t *testing.T) {
	d, ops := opsSetup(t)
	g, err := kernels.LoadGEMV(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ T, N, K int }{{1, 4096, 4096}, {1, 1024, 4096}, {8, 333, 2048}} {
		m := newGPUMem(t, d)
		w := make([]uint16, sh.N*sh.K)
		for i := range w {
			w[i] = half.FromFloat32(float32(0.02 * r.NormFloat64()))
		}
		x := make([]float32, sh.T*sh.K)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		wp, x0 := m.put(cuda.Bytes(w)), m.put(cuda.Bytes(x))
		zero := m.put(cuda.Bytes(make([]float32, sh.T*sh.K)))
		for _, split := range []int{1, 2, 4} {
			yp := m.put(cuda.Bytes(nanF32(sh.T * sh.N)))
			m.run(func(c *cuda.Ctx, s cuda.Stream) error {
				return g.LaunchSplit(c, s, yp, x0, wp, 0, sh.T, sh.N, sh.K, split)
			})
			want := make([]float32, sh.T*sh.N)
			m.read(cuda.Bytes(want), yp)
			for _, mode := range []struct {
				name       string
				pdl, early bool
			}{{"off", false, false}, {"on", true, false}, {"early", true, true}} {
				xp := m.put(cuda.Bytes(nanF32(sh.T * sh.K)))
				y := m.put(cuda.Bytes(nanF32(sh.T * sh.N)))
				g.EarlyWeights = mode.early
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					prev := c.SetGridDependentLaunch(mode.pdl)
					defer c.SetGridDependentLaunch(prev)
					if mode.pdl && !c.GridDependentLaunch() {
						t.Logf("no programmatic dependent launch on %s: mode %s runs serialized", d.Arch(), mode.name)
					}
					if err := ops.Add(c, s, xp, x0, zero, sh.T*sh.K); err != nil {
						return err
					}
					return g.LaunchSplit(c, s, y, xp, wp, 0, sh.T, sh.N, sh.K, split)
				})
				g.EarlyWeights = false
				got := make([]float32, sh.T*sh.N)
				m.read(cuda.Bytes(got), y)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("T%d N%d K%d split %d, PDL %s: y[%d] = %g, want %g (the launch after a finished stream)", sh.T, sh.N, sh.K, split, mode.name, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestGEMVGroups checks LaunchGroups: up to three weights over one x in one
// grid, at every split-K factor, each output bitwise that of LaunchSplit of
// its weight alone at the same split (the grid's CTA ranges and the
// parameters picked per CTA are what the group adds) and within
// TestGEMVMatchesReference's float32 bound of a float64 reference, every
// element of the NaN-poisoned outputs written. LaunchGroups
// takes GroupSplit of the summed channels: q|k|v at 8B's 4096+1024+1024
// take 2, where k and v alone take 4. Bad forms are refused.
func TestGEMVGroups(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMV(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, T := range []int{1, 2, 8} {
		if s := kernels.GroupSplit(T, 4096, 1024, 1024); s != 2 {
			t.Errorf("GroupSplit(%d, 4096, 1024, 1024) = %d, want 2", T, s)
		}
		if s := kernels.GroupSplit(T, 4096); s != 4 { // o, down (gemv.cu v5)
			t.Errorf("GroupSplit(%d, 4096) = %d, want 4", T, s)
		}
		want := 1
		if T == 1 {
			want = 2 // gate|up at one row (gemv.cu v8)
		}
		if s := kernels.GroupSplit(T, 14336, 14336); s != want {
			t.Errorf("GroupSplit(%d, 14336, 14336) = %d, want %d", T, s, want)
		}
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range []struct {
		T, K int
		Ns   []int
	}{{1, 1032, []int{1000, 257, 3}}, {2, 264, []int{130, 131}}, {5, 2048, []int{77}}, {1, 520, []int{2560, 640, 640}}} {
		t.Run(fmt.Sprintf("T%d-K%d-N%v", sh.T, sh.K, sh.Ns), func(t *testing.T) {
			m := newGPUMem(t, d)
			x := make([]float32, sh.T*sh.K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if i%sh.K%37 == 3 {
					x[i] *= 20
				}
			}
			xp := m.put(cuda.Bytes(x))
			ws := make([][]uint16, len(sh.Ns))
			biases := make([][]float32, len(sh.Ns))
			groups := make([]kernels.LinearGroup, len(sh.Ns))
			for i, N := range sh.Ns {
				ws[i] = make([]uint16, N*sh.K)
				for j := range ws[i] {
					ws[i][j] = half.FromFloat32(float32(0.02 * r.NormFloat64()))
				}
				groups[i] = kernels.LinearGroup{W: m.put(cuda.Bytes(ws[i])), N: N}
				if i%2 == 0 {
					biases[i] = make([]float32, N)
					for j := range biases[i] {
						biases[i][j] = float32(r.NormFloat64())
					}
					groups[i].Bias = m.put(cuda.Bytes(biases[i]))
				}
			}
			outs := func(launch func(c *cuda.Ctx, s cuda.Stream, gs []kernels.LinearGroup) error) [][]float32 {
				gs := append([]kernels.LinearGroup(nil), groups...)
				for i := range gs {
					gs[i].Y = m.put(cuda.Bytes(nanF32(sh.T * gs[i].N)))
				}
				m.run(func(c *cuda.Ctx, s cuda.Stream) error { return launch(c, s, gs) })
				ys := make([][]float32, len(gs))
				for i := range gs {
					ys[i] = make([]float32, sh.T*gs[i].N)
					m.read(cuda.Bytes(ys[i]), gs[i].Y)
				}
				return ys
			}
			for _, split := range []int{1, 2, 4, kernels.GroupSplit(sh.T, sh.Ns...)} {
				got := outs(func(c *cuda.Ctx, s cuda.Stream, gs []kernels.LinearGroup) error {
					return g.LaunchGroupsSplit(c, s, xp, sh.T, sh.K, split, gs...)
				})
				if split == kernels.GroupSplit(sh.T, sh.Ns...) {
					auto := outs(func(c *cuda.Ctx, s cuda.Stream, gs []kernels.LinearGroup) error {
						return g.LaunchGroups(c, s, xp, sh.T, sh.K, gs...)
					})
					for i := range got {
						sameF32Bits(t, fmt.Sprintf("LaunchGroups weight %d", i), auto[i], got[i])
					}
				}
				alone := outs(func(c *cuda.Ctx, s cuda.Stream, gs []kernels.LinearGroup) error {
					for _, gr := range gs {
						if err := g.LaunchSplit(c, s, gr.Y, xp, gr.W, gr.Bias, sh.T, gr.N, sh.K, split); err != nil {
							return err
						}
					}
					return nil
				})
				for i, N := range sh.Ns {
					sameF32Bits(t, fmt.Sprintf("split %d weight %d", split, i), got[i], alone[i])
					for ti := range sh.T {
						for n := range N {
							var want, mag float64
							for k := range sh.K {
								p := float64(x[ti*sh.K+k]) * float64(half.ToFloat32(ws[i][n*sh.K+k]))
								want += p
								mag += math.Abs(p)
							}
							if biases[i] != nil {
								want += float64(biases[i][n])
								mag += math.Abs(float64(biases[i][n]))
							}
							tol := float64(sh.K/32+8) * 0x1p-24 * mag
							y := float64(got[i][ti*N+n])
							if y != y || math.Abs(y-want) > tol {
								t.Fatalf("split %d weight %d: y[%d,%d] = %g, want %g (tol %.3g)", split, i, ti, n, y, want, tol)
							}
						}
					}
				}
			}
		})
	}
	// Refused before any launch (the pointers are never used).
	one := kernels.LinearGroup{Y: 1, W: 1, N: 8}
	for name, launch := range map[string]func(c *cuda.Ctx, s cuda.Stream) error{
		"four groups": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchGroups(c, s, 1, 1, 8, one, one, one, one)
		},
		"N = 0": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchGroups(c, s, 1, 1, 8, one, kernels.LinearGroup{Y: 1, W: 1})
		},
		"split 3": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchGroupsSplit(c, s, 1, 1, 8, 3, one)
		},
		"T = 9": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchGroups(c, s, 1, 9, 8, one)
		},
	} {
		var err error
		if derr := d.Do(func(c *cuda.Ctx) error { err = launch(c, d.Stream()); return nil }); derr != nil {
			t.Fatal(derr)
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// sameF32Bits fails unless a and b are bitwise equal.
func sameF32Bits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d = %g, want %g", what, i, a[i], b[i])
		}
	}
}

// TestGEMVDepths checks gemv.cu's depths: at 1 and 2 rows, every split-K
// factor and depth (GEMVBatch, v6's schedule, and rings of 4, 8 and 16
// loads, v7), with and without early weight loads, the plain, SwiGLU and
// RoPE launches write bitwise what GEMVBatch writes without early loads
// (each lane adds its products in the same order at every depth), on
// shapes whose slices end inside a ring or a batch (K = 8, 1032, 4104,
// 14336) and ragged last CTAs; GEMVBatch itself is checked against float64
// by TestGEMVMatchesReference, TestGEMVSwiGLU and TestGEMVRoPE.
// GEMVDepthFor's picks are asserted, and a ring at 3 rows is refused.
func TestGEMVDepths(t *testing.T) {
	for _, c := range []struct{ T, s, K int }{{1, 4, 4096}, {1, 2, 4096}, {1, 1, 4096}, {1, 4, 14336}, {2, 4, 4096}, {3, 1, 4096}} {
		if got := kernels.GEMVDepthFor(c.T, c.s, c.K); got != kernels.GEMVBatch {
			t.Errorf("GEMVDepthFor(%d, %d, %d) = %d, want GEMVBatch", c.T, c.s, c.K, got)
		}
	}
	for d, ok := range map[int]bool{0: true, 1: true, 4: true, 8: true, 16: true, 2: false, 32: false, -1: false} {
		if kernels.ValidGEMVDepth(d) != ok {
			t.Errorf("ValidGEMVDepth(%d) = %v", d, !ok)
		}
	}
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMVRings(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(21, 22))
	const D = 8 // RoPE's head dim: q, k N multiples of 8
	shapes := []struct{ N, K int }{{72, 8}, {136, 1032}, {40, 4104}, {24, 14336}}
	if testing.Short() {
		shapes = shapes[:2]
	}
	for _, sh := range shapes {
		for _, T := range []int{1, 2} {
			m := newGPUMem(t, d)
			x := make([]float32, T*sh.K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			xp := m.put(cuda.Bytes(x))
			var ws [3]cuda.DevicePtr
			for i := range ws {
				w := make([]uint16, sh.N*sh.K)
				for j := range w {
					w[j] = half.FromFloat32(float32(0.02 * r.NormFloat64()))
				}
				ws[i] = m.put(cuda.Bytes(w))
			}
			bias := make([]float32, sh.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			bp := m.put(cuda.Bytes(bias))
			pos := m.put(cuda.Bytes([]int32{7, 1234}[:T]))
			inv := make([]float32, D/2)
			for i := range inv {
				inv[i] = float32(math.Pow(10000, -2*float64(i)/D))
			}
			ip := m.put(cuda.Bytes(inv))
			// run launches one kind at the current depth and returns its
			// outputs (three groups' y, and dst for SwiGLU).
			run := func(kind, split int, early bool) [][]float32 {
				var ys [4]cuda.DevicePtr
				for i := range ys {
					ys[i] = m.put(cuda.Bytes(nanF32(T * sh.N)))
				}
				gr := func(i int) kernels.LinearGroup {
					return kernels.LinearGroup{Y: ys[i], W: ws[i], Bias: bp, N: sh.N}
				}
				g.EarlyWeights = early
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					switch kind {
					case 0:
						return g.LaunchGroupsSplit(c, s, xp, T, sh.K, split, gr(0), gr(1), gr(2))
					case 1:
						return g.LaunchSwiGLUSplit(c, s, xp, T, sh.K, split, gr(0), gr(1), ys[3])
					}
					return g.LaunchRoPESplit(c, s, xp, T, sh.K, split, gr(0), gr(1), gr(2), pos, ip, D/2)
				})
				g.EarlyWeights = false
				out := make([][]float32, 4)
				for i := range out {
					out[i] = make([]float32, T*sh.N)
					m.read(cuda.Bytes(out[i]), ys[i])
				}
				if kind != 1 {
					out = out[:3]
				} else {
					out = append(out[:2], out[3])
				}
				return out
			}
			for kind, name := range []string{"groups", "swiglu", "rope"} {
				for _, split := range []int{1, 2, 4} {
					g.Depth = kernels.GEMVBatch
					want := run(kind, split, false)
					for _, o := range want {
						for i, v := range o {
							if v != v {
								t.Fatalf("N%d K%d T%d %s split %d, GEMVBatch: output %d not written", sh.N, sh.K, T, name, split, i)
							}
						}
					}
					for _, depth := range []int{kernels.GEMVBatch, 4, 8, 16} {
						for _, early := range []bool{false, true} {
							g.Depth = depth
							got := run(kind, split, early)
							for i := range got {
								sameF32Bits(t, fmt.Sprintf("N%d K%d T%d %s split %d depth %d early %v output %d",
									sh.N, sh.K, T, name, split, depth, early, i), got[i], want[i])
							}
						}
					}
					g.Depth = 0
				}
			}
		}
	}
	g.Depth = 8
	err = d.Do(func(c *cuda.Ctx) error { return g.LaunchSplit(c, d.Stream(), 1, 1, 1, 0, 3, 8, 8, 1) })
	g.Depth = 0
	if err == nil {
		t.Error("depth 8 at 3 rows: no error")
	}
	// LoadGEMV compiles no ring: asking it for one is an error, not a launch.
	g0, err := kernels.LoadGEMV(d)
	if err != nil {
		t.Fatal(err)
	}
	g0.Depth = 4
	if err := d.Do(func(c *cuda.Ctx) error { return g0.LaunchSplit(c, d.Stream(), 1, 1, 1, 0, 1, 8, 8, 1) }); err == nil {
		t.Error("LoadGEMV's kernels at depth 4: no error")
	}
}

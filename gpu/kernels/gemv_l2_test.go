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

// TestGEMVL2Ahead checks GEMV.L2Kinds (gemv.cu's kEarlyL2: the grid's
// first CTAs prefetch later CTAs' weights into L2 before their dependency
// wait): every kind of launch (plain groups, SwiGLU, RoPE), every split,
// one and two rows of x, budgets that cover part of the grid's second half
// (1 MiB), all of it (1024) and the default, with and without early
// register loads, as a programmatic dependent of an Add that writes x
// (ops.cu's kernels trigger their dependents before they wait): every
// output bitwise the launch without the prefetch after a finished stream,
// every NaN-poisoned element written.
func TestGEMVL2Ahead(t *testing.T) {
	d, ops := opsSetup(t)
	g, err := kernels.LoadGEMV(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(31, 32))
	const D = 8 // RoPE's head dim: q, k N multiples of 8
	// N x K x 2 bytes: 1 MiB and 4.5 MiB a weight, so that a 1 MiB budget
	// covers part of the second half and 1024 all of it.
	shapes := []struct{ N, K int }{{256, 2048}, {1152, 2048}}
	if testing.Short() {
		shapes = shapes[:1]
	}
	for _, sh := range shapes {
		for _, T := range []int{1, 2} {
			m := newGPUMem(t, d)
			x := make([]float32, T*sh.K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			x0 := m.put(cuda.Bytes(x))
			zero := m.put(cuda.Bytes(make([]float32, T*sh.K)))
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
			// run launches one kind after an Add that writes its x (as a
			// programmatic dependent where pdl is set) and returns its
			// outputs (three groups' y, and dst for SwiGLU).
			run := func(kind, split int, pdl bool) [][]float32 {
				var ys [4]cuda.DevicePtr
				for i := range ys {
					ys[i] = m.put(cuda.Bytes(nanF32(T * sh.N)))
				}
				xp := m.put(cuda.Bytes(nanF32(T * sh.K)))
				gr := func(i int) kernels.LinearGroup {
					return kernels.LinearGroup{Y: ys[i], W: ws[i], Bias: bp, N: sh.N}
				}
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					prev := c.SetGridDependentLaunch(pdl)
					defer c.SetGridDependentLaunch(prev)
					if err := ops.Add(c, s, xp, x0, zero, T*sh.K); err != nil {
						return err
					}
					switch kind {
					case 0:
						return g.LaunchGroupsSplit(c, s, xp, T, sh.K, split, gr(0), gr(1), gr(2))
					case 1:
						return g.LaunchSwiGLUSplit(c, s, xp, T, sh.K, split, gr(0), gr(1), ys[3])
					}
					return g.LaunchRoPESplit(c, s, xp, T, sh.K, split, gr(0), gr(1), gr(2), pos, ip, D/2)
				})
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
			kinds := []kernels.GEMVEarlyKind{kernels.GEMVEarlyPlain, kernels.GEMVEarlySwiGLU, kernels.GEMVEarlyRoPE}
			for kind, name := range []string{"groups", "swiglu", "rope"} {
				for _, split := range []int{1, 2, 4} {
					g.L2Kinds, g.EarlyKinds = 0, 0
					want := run(kind, split, false)
					for _, o := range want {
						for i, v := range o {
							if v != v {
								t.Fatalf("N%d K%d T%d %s split %d: output %d not written", sh.N, sh.K, T, name, split, i)
							}
						}
					}
					for _, mib := range []int{1, 1024, 0} {
						for _, early := range []bool{false, true} {
							g.L2Kinds, g.L2MiB, g.EarlyKinds = kinds[kind], mib, 0
							if early {
								g.EarlyKinds = kinds[kind]
							}
							got := run(kind, split, true)
							for i := range got {
								sameF32Bits(t, fmt.Sprintf("N%d K%d T%d %s split %d L2 %d MiB early %v output %d",
									sh.N, sh.K, T, name, split, mib, early, i), got[i], want[i])
							}
						}
					}
					g.L2Kinds, g.L2MiB, g.EarlyKinds = 0, 0, 0
				}
			}
		}
	}
}

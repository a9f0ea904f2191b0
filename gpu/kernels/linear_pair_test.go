package kernels_test

// Tests of linear.cu's pair kernels (v5): SwiGLU (GeGLU) and RoPE folded
// into the epilogue of the batch-invariant narrow kernel, bitwise the
// grouped launch followed by the separate ops.cu kernel, for every row
// count of the narrow kernel, in every mode of linearModes.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// linearModes are the narrow launch settings the tests below compare
// bitwise: early weight loads, and persistent grids (Linear.Persistent) of
// 7 CTAs (every CTA takes several tiles in turn) or of the GPU's count.
var linearModes = []struct {
	early, persistent bool
	limit             int
}{{false, false, 0}, {true, false, 0}, {false, true, 7}, {true, true, 7}, {true, true, 0}}

// setMode sets l's launch settings to linearModes[i]; resetLinear restores
// the defaults.
func setMode(l *kernels.Linear, i int) string {
	m := linearModes[i]
	l.EarlyWeights, l.Persistent = m.early, m.persistent
	l.LimitResident(m.limit)
	return fmt.Sprintf("early %v persistent %v (limit %d)", m.early, m.persistent, m.limit)
}

func resetLinear(l *kernels.Linear) { setMode(l, 0) }

// TestLinearEarlyWeights checks that the narrow kernel's early weight
// loads (Linear.EarlyWeights) and persistent grids (Linear.Persistent)
// change no bit: T = 1 and 8, a group with a partial m-tile, every mode
// against the plain launch; at 9 and 16 rows (past
// kernels.LinearTunedMaxRows) the modes must not apply, so the same bits.
func TestLinearEarlyWeights(t *testing.T) {
	d, l := linearSetup(t)
	defer resetLinear(l)
	r := rand.New(rand.NewPCG(31, 32))
	const K = 4104
	for _, T := range []int{1, 8, 9, 16} {
		m := newGPUMem(t, d)
		xp, gs := pairInputs(t, m, r, T, K, 1000, 256, 40)
		run := func(mode int) [][]float32 {
			setMode(l, mode)
			o := poisonedOuts(m, gs, T)
			m.run(func(c *cuda.Ctx, s cuda.Stream) error { return l.LaunchGroups(c, s, xp, 0, T, K, o...) })
			var ys [][]float32
			for _, g := range o {
				ys = append(ys, m.f32s(g.Y, T*g.N))
			}
			return ys
		}
		plain := run(0)
		for mode := 1; mode < len(linearModes); mode++ {
			got := run(mode)
			for i := range gs {
				sameF32Bits(t, fmt.Sprintf("T=%d group %d %s", T, i, setMode(l, mode)), got[i], plain[i])
			}
		}
	}
}

// TestLinearGLU checks Linear.LaunchGLU against LaunchGroups then
// Ops.SwiGLU (Ops.GeGLU), bitwise, at T = 1, 3, 8, 9 and 16 (both n-tile
// counts), an odd N (a partial last m-tile), gate's output not written
// (dst in its place, as the backend folds SwiGLU(gate, gate, up)) and all
// three outputs distinct, in every mode of linearModes; and
// that the rows of a launch of T are those of a launch of one row (the
// fold keeps the batch invariance).
func TestLinearGLU(t *testing.T) {
	d, ops := opsSetup(t)
	_, l := linearSetup(t)
	defer resetLinear(l)
	r := rand.New(rand.NewPCG(33, 34))
	for _, sh := range []struct{ T, K, N int }{{1, 4096, 1024}, {3, 1032, 1001}, {8, 520, 131}, {9, 264, 64}, {16, 2056, 200}} {
		for _, act := range []kernels.Act{kernels.ActSiLU, kernels.ActGeluTanh} {
			t.Run(fmt.Sprintf("%v-T%d-K%d-N%d", act, sh.T, sh.K, sh.N), func(t *testing.T) {
				m := newGPUMem(t, d)
				xp, gs := pairInputs(t, m, r, sh.T, sh.K, sh.N, sh.N)
				n := sh.T * sh.N
				ref := append([]kernels.LinearGroup(nil), gs...)
				ref[0].Y, ref[1].Y = m.poisonedF32(n), m.poisonedF32(n)
				refDst := m.poisonedF32(n)
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					if err := l.LaunchGroups(c, s, xp, 0, sh.T, sh.K, ref...); err != nil {
						return err
					}
					if act == kernels.ActGeluTanh {
						return ops.GeGLU(c, s, refDst, ref[0].Y, ref[1].Y, n)
					}
					return ops.SwiGLU(c, s, refDst, ref[0].Y, ref[1].Y, n)
				})
				wantG, wantU, want := m.f32s(ref[0].Y, n), m.f32s(ref[1].Y, n), m.f32s(refDst, n)
				for mode := range linearModes {
					what := setMode(l, mode)
					for _, distinct := range []bool{false, true} {
						fu := append([]kernels.LinearGroup(nil), gs...)
						fu[0].Y, fu[1].Y = 0, m.poisonedF32(n)
						dst := m.poisonedF32(n)
						if distinct {
							fu[0].Y = m.poisonedF32(n)
						}
						m.run(func(c *cuda.Ctx, s cuda.Stream) error {
							return l.LaunchGLU(c, s, act, xp, sh.T, sh.K, fu[0], fu[1], dst)
						})
						what := fmt.Sprintf("%s, gate written %v", what, distinct)
						sameF32Bits(t, what+": dst", m.f32s(dst, n), want)
						sameF32Bits(t, what+": up", m.f32s(fu[1].Y, n), wantU)
						if distinct {
							sameF32Bits(t, what+": gate", m.f32s(fu[0].Y, n), wantG)
						}
					}
				}
				// The last row alone: the same bits as in the batch.
				resetLinear(l)
				last := sh.T - 1
				one := append([]kernels.LinearGroup(nil), gs...)
				one[0].Y, one[1].Y = m.poisonedF32(sh.N), m.poisonedF32(sh.N)
				dst1 := m.poisonedF32(sh.N)
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					return l.LaunchGLU(c, s, act, xp+cuda.DevicePtr(4*last*sh.K), 1, sh.K, one[0], one[1], dst1)
				})
				sameF32Bits(t, "the last row alone: dst", m.f32s(dst1, sh.N), want[last*sh.N:])
			})
		}
	}
	one := kernels.LinearGroup{Y: 1, W: 1, N: 8}
	for name, launch := range map[string]func(c *cuda.Ctx, s cuda.Stream) error{
		"N differ": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchGLU(c, s, kernels.ActSiLU, 1, 1, 8, one, kernels.LinearGroup{Y: 1, W: 1, N: 16}, 1)
		},
		"no dst": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchGLU(c, s, kernels.ActSiLU, 1, 1, 8, one, one, 0)
		},
		"T = 17": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchGLU(c, s, kernels.ActSiLU, 1, 17, 8, one, one, 1)
		},
		"K = 12": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchGLU(c, s, kernels.ActSiLU, 1, 1, 12, one, one, 1)
		},
	} {
		if err := d.Do(func(c *cuda.Ctx) error { return launch(c, d.Stream()) }); err == nil {
			t.Errorf("%s: launched, want an error", name)
		}
	}
}

// TestLinearRoPE checks Linear.LaunchRoPE against LaunchGroups then
// Ops.RoPEQK without norms, bitwise, at T = 1, 2, 8, 9 and 16 with
// positions from 0 to 131071, heads of D = 32, 64 and 128, v with an odd
// number of m-tiles, a partial last one, and none; in all the
// modes of linearModes; and a row of the batch against a launch of it
// alone.
func TestLinearRoPE(t *testing.T) {
	d, ops := opsSetup(t)
	_, l := linearSetup(t)
	defer resetLinear(l)
	r := rand.New(rand.NewPCG(35, 36))
	posAll := []int32{0, 7, 131071, 5000, 1, 65536, 999, 32767, 3, 100000, 12, 77, 4095, 4096, 8191, 2}
	for _, sh := range []struct{ T, K, D, Hq, Hk, Nv int }{
		{1, 4096, 128, 32, 8, 1024}, {2, 520, 64, 4, 2, 48}, {8, 264, 32, 3, 1, 0}, {9, 1032, 128, 2, 1, 40}, {16, 136, 64, 5, 3, 192},
	} {
		t.Run(fmt.Sprintf("T%d-K%d-D%d-Hq%d-Hk%d-Nv%d", sh.T, sh.K, sh.D, sh.Hq, sh.Hk, sh.Nv), func(t *testing.T) {
			m := newGPUMem(t, d)
			hf := sh.D / 2
			xp, gs, Ns, _, pos, invFreq := ropeInputs(t, m, r, sh.T, sh.K, sh.D, sh.Hq, sh.Hk, sh.Nv, posAll)
			outs := func(T int) []kernels.LinearGroup { return poisonedOuts(m, gs, T) }
			ref := outs(sh.T) // the narrow kernel, then rope_qk
			m.run(func(c *cuda.Ctx, s cuda.Stream) error {
				if err := l.LaunchGroups(c, s, xp, 0, sh.T, sh.K, ref[:len(Ns)]...); err != nil {
					return err
				}
				return ops.RoPEQK(c, s, ref[0].Y, ref[1].Y, pos, invFreq, 0, 0, sh.T, sh.Hq, sh.Hk, hf, 1e-6)
			})
			for mode := range linearModes {
				what := setMode(l, mode)
				fu := outs(sh.T)
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					return l.LaunchRoPE(c, s, xp, sh.T, sh.K, fu[0], fu[1], fu[2], pos, invFreq, hf)
				})
				for i, N := range Ns {
					sameF32Bits(t, fmt.Sprintf("%s weight %d", what, i), m.f32s(fu[i].Y, sh.T*N), m.f32s(ref[i].Y, sh.T*N))
				}
			}
			resetLinear(l)
			// The last row alone, at its own position.
			last := sh.T - 1
			one := outs(1)
			m.run(func(c *cuda.Ctx, s cuda.Stream) error {
				return l.LaunchRoPE(c, s, xp+cuda.DevicePtr(4*last*sh.K), 1, sh.K, one[0], one[1], one[2], pos+cuda.DevicePtr(4*last), invFreq, hf)
			})
			for i, N := range Ns {
				sameF32Bits(t, fmt.Sprintf("the last row alone, weight %d", i), m.f32s(one[i].Y, N), m.f32s(ref[i].Y, sh.T*N)[last*N:])
			}
		})
	}
	q := kernels.LinearGroup{Y: 1, W: 1, N: 128}
	for name, launch := range map[string]func(c *cuda.Ctx, s cuda.Stream) error{
		"q not heads": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchRoPE(c, s, 1, 1, 8, kernels.LinearGroup{Y: 1, W: 1, N: 100}, q, kernels.LinearGroup{}, 1, 1, 64)
		},
		"half 8": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchRoPE(c, s, 1, 1, 8, kernels.LinearGroup{Y: 1, W: 1, N: 16}, kernels.LinearGroup{Y: 1, W: 1, N: 16}, kernels.LinearGroup{}, 1, 1, 8)
		},
		"no pos": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchRoPE(c, s, 1, 1, 8, q, q, kernels.LinearGroup{}, 0, 1, 64)
		},
		"T = 17": func(c *cuda.Ctx, s cuda.Stream) error {
			return l.LaunchRoPE(c, s, 1, 17, 8, q, q, kernels.LinearGroup{}, 1, 1, 64)
		},
	} {
		if err := d.Do(func(c *cuda.Ctx) error { return launch(c, d.Stream()) }); err == nil {
			t.Errorf("%s: launched, want an error", name)
		}
	}
}

package kernels_test

// Tests of gemv.cu's pair kernels (v6): SwiGLU and RoPE folded into the
// epilogue of a grouped GEMV, bitwise the grouped GEMV followed by the
// separate ops.cu kernel, and within a few ulp of the float64 op on the
// GEMV's own outputs.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
)

// pairInputs puts x [T][K] (N(0, 1) with x20 outlier channels) and len(Ns)
// fp16 weights [N][K] (N(0, 0.02²)), every other one with a bias.
func pairInputs(t *testing.T, m *gpuMem, r *rand.Rand, T, K int, Ns ...int) (cuda.DevicePtr, []kernels.LinearGroup) {
	t.Helper()
	x := make([]float32, T*K)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i%K%37 == 3 {
			x[i] *= 20
		}
	}
	groups := make([]kernels.LinearGroup, len(Ns))
	for i, N := range Ns {
		w := make([]uint16, N*K)
		for j := range w {
			w[j] = half.FromFloat32(float32(0.02 * r.NormFloat64()))
		}
		groups[i] = kernels.LinearGroup{W: m.put(cuda.Bytes(w)), N: N}
		if i%2 == 1 {
			groups[i].Bias = m.put(cuda.Bytes(randF32(r, N, 1)))
		}
	}
	return m.put(cuda.Bytes(x)), groups
}

// poisonedOuts returns a copy of gs whose groups of N > 0 each write a
// fresh poisoned float32 output of T rows.
func poisonedOuts(m *gpuMem, gs []kernels.LinearGroup, T int) []kernels.LinearGroup {
	o := append([]kernels.LinearGroup(nil), gs...)
	for i := range o {
		if o[i].N > 0 {
			o[i].Y = m.poisonedF32(T * o[i].N)
		}
	}
	return o
}

// ropeInputs makes the operands of a q|k(|v) launch with a RoPE epilogue:
// pairInputs' x [T, K] and groups of widths Ns (q Hq·D, k Hk·D, and v Nv
// when Nv > 0; gs then ends with an empty v group when Nv is 0), T
// positions from pos, and the inverse frequencies of base 500000 at head
// dim D (inv, D/2 of them), both also on the device.
func ropeInputs(t *testing.T, m *gpuMem, r *rand.Rand, T, K, D, Hq, Hk, Nv int, pos []int32) (xp cuda.DevicePtr, gs []kernels.LinearGroup, Ns []int, inv []float32, posP, invP cuda.DevicePtr) {
	t.Helper()
	Ns = []int{Hq * D, Hk * D}
	if Nv > 0 {
		Ns = append(Ns, Nv)
	}
	xp, gs = pairInputs(t, m, r, T, K, Ns...)
	if Nv == 0 {
		gs = append(gs, kernels.LinearGroup{})
	}
	inv = make([]float32, D/2)
	for i := range inv {
		inv[i] = float32(math.Pow(500000, -float64(2*i)/float64(D)))
	}
	return xp, gs, Ns, inv, m.put(cuda.Bytes(pos[:T])), m.put(cuda.Bytes(inv))
}

// ulpsApart reports how many float32 steps lie between a and b (a large
// number for NaNs or different signs far from 0).
func ulpsApart(a, b float32) int64 {
	if a != a || b != b {
		return math.MaxInt64
	}
	ord := func(f float32) int64 {
		u := int64(math.Float32bits(f))
		if u&(1<<31) != 0 {
			return -(u &^ (1 << 31))
		}
		return u
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

// TestGEMVSwiGLU checks LaunchSwiGLU(Split) against LaunchGroupsSplit then
// Ops.SwiGLU, bitwise, at every split (the pair CTA's three shapes: 2 pairs
// of 4 warps, 1 of 4, 1 of 8), row counts 1-8, a ragged last CTA (odd N),
// with gate's output not written (dst in its place, as the backend folds
// SwiGLU(gate, gate, up)) and with all three outputs distinct; and dst
// within 8 ulp of silu(g)·u in float64 of the GEMV's own g and u: expf's 2
// ulp, half an ulp for each of the add, the division, the product and the
// reference's rounding, 4 in all, doubled since an ulp counted on the
// result may be half the relative step of an operand's.
func TestGEMVSwiGLU(t *testing.T) {
	d, ops := opsSetup(t)
	g, err := kernels.LoadGEMV(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, sh := range []struct{ T, K, N int }{{1, 4096, 1024}, {1, 1032, 1001}, {2, 264, 131}, {5, 520, 3}, {8, 2048, 96}} {
		for _, act := range []kernels.Act{kernels.ActSiLU, kernels.ActGeluTanh} {
			t.Run(fmt.Sprintf("%v-T%d-K%d-N%d", act, sh.T, sh.K, sh.N), func(t *testing.T) {
				m := newGPUMem(t, d)
				xp, gs := pairInputs(t, m, r, sh.T, sh.K, sh.N, sh.N)
				n := sh.T * sh.N
				for _, split := range []int{1, 2, 4, 0} {
					auto := split == 0
					if auto {
						split = kernels.GroupSplit(sh.T, sh.N, sh.N)
					}
					// The reference: the grouped GEMV, then swiglu.
					ref := append([]kernels.LinearGroup(nil), gs...)
					ref[0].Y, ref[1].Y = m.poisonedF32(n), m.poisonedF32(n)
					refDst := m.poisonedF32(n)
					m.run(func(c *cuda.Ctx, s cuda.Stream) error {
						if err := g.LaunchGroupsSplit(c, s, xp, sh.T, sh.K, split, ref...); err != nil {
							return err
						}
						if act == kernels.ActGeluTanh {
							return ops.GeGLU(c, s, refDst, ref[0].Y, ref[1].Y, n)
						}
						return ops.SwiGLU(c, s, refDst, ref[0].Y, ref[1].Y, n)
					})
					wantG, wantU, want := m.f32s(ref[0].Y, n), m.f32s(ref[1].Y, n), m.f32s(refDst, n)
					for _, distinct := range []bool{false, true} {
						fu := append([]kernels.LinearGroup(nil), gs...)
						fu[1].Y = m.poisonedF32(n)
						dst := m.poisonedF32(n)
						if distinct {
							fu[0].Y = m.poisonedF32(n)
						}
						m.run(func(c *cuda.Ctx, s cuda.Stream) error {
							switch {
							case auto && act == kernels.ActGeluTanh:
								return g.LaunchGeGLU(c, s, xp, sh.T, sh.K, fu[0], fu[1], dst)
							case auto:
								return g.LaunchSwiGLU(c, s, xp, sh.T, sh.K, fu[0], fu[1], dst)
							}
							return g.LaunchGLUSplit(c, s, act, xp, sh.T, sh.K, split, fu[0], fu[1], dst)
						})
						what := fmt.Sprintf("split %d (auto %v), gate written %v", split, auto, distinct)
						sameF32Bits(t, what+": dst", m.f32s(dst, n), want)
						sameF32Bits(t, what+": up", m.f32s(fu[1].Y, n), wantU)
						if distinct {
							sameF32Bits(t, what+": gate", m.f32s(fu[0].Y, n), wantG)
						}
					}
					for i := range n {
						gv, uv := float64(wantG[i]), float64(wantU[i])
						ref := float32(gv / (1 + math.Exp(-gv)) * uv)
						if act == kernels.ActGeluTanh {
							ref = float32(geluTanh64(gv) * uv)
						}
						if u := ulpsApart(want[i], ref); u > 8 && math.Abs(float64(want[i]-ref)) > 1e-30 {
							t.Fatalf("split %d: dst[%d] = %g, want %g (%v(%g)·%g in float64; %d ulp)", split, i, want[i], ref, act, gv, uv, u)
						}
					}
				}
			})
		}
	}
	one := kernels.LinearGroup{Y: 1, W: 1, N: 8}
	for name, launch := range map[string]func(c *cuda.Ctx, s cuda.Stream) error{
		"N differ": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchSwiGLU(c, s, 1, 1, 8, one, kernels.LinearGroup{Y: 1, W: 1, N: 16}, 1)
		},
		"no dst":  func(c *cuda.Ctx, s cuda.Stream) error { return g.LaunchSwiGLU(c, s, 1, 1, 8, one, one, 0) },
		"T = 9":   func(c *cuda.Ctx, s cuda.Stream) error { return g.LaunchSwiGLU(c, s, 1, 9, 8, one, one, 1) },
		"split 3": func(c *cuda.Ctx, s cuda.Stream) error { return g.LaunchSwiGLUSplit(c, s, 1, 1, 8, 3, one, one, 1) },
	} {
		if err := d.Do(func(c *cuda.Ctx) error { return launch(c, d.Stream()) }); err == nil {
			t.Errorf("%s: launched, want an error", name)
		}
	}
}

// TestGEMVRoPE checks LaunchRoPE(Split) against LaunchGroupsSplit then
// Ops.RoPEQK without norms, bitwise, at every split, row counts 1-8 with
// positions from 0 to 131071, heads of D = 6 (an odd number of pairs: a
// ragged last CTA), 64 and 128, with v and without; and the rotated q and k
// within (|ref| + 2·(|x1| + |x2|))·2⁻²³ of the float64 rotation of the GEMV's
// own outputs x1, x2: cos and sin rounded to float32, two products and their
// difference rounded, each at most half of 2⁻²³ relative, with a factor 2
// spare.
func TestGEMVRoPE(t *testing.T) {
	d, ops := opsSetup(t)
	g, err := kernels.LoadGEMV(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(23, 24))
	for _, sh := range []struct{ T, K, D, Hq, Hk, Nv int }{
		{1, 4096, 128, 32, 8, 1024}, {2, 520, 64, 4, 2, 128}, {3, 264, 6, 3, 1, 0}, {8, 1032, 128, 2, 1, 256}, {5, 136, 6, 5, 3, 10},
	} {
		t.Run(fmt.Sprintf("T%d-K%d-D%d-Hq%d-Hk%d-Nv%d", sh.T, sh.K, sh.D, sh.Hq, sh.Hk, sh.Nv), func(t *testing.T) {
			m := newGPUMem(t, d)
			hf := sh.D / 2
			posv := []int32{0, 7, 131071, 5000, 1, 65536, 999, 32767}[:sh.T]
			xp, gs, Ns, inv, pos, invFreq := ropeInputs(t, m, r, sh.T, sh.K, sh.D, sh.Hq, sh.Hk, sh.Nv, posv)
			for _, split := range []int{1, 2, 4, 0} {
				auto := split == 0
				if auto {
					split = kernels.GroupSplit(sh.T, Ns...)
				}
				outs := func() []kernels.LinearGroup { return poisonedOuts(m, gs, sh.T) }
				lin := outs() // the GEMV alone
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					return g.LaunchGroupsSplit(c, s, xp, sh.T, sh.K, split, lin[:len(Ns)]...)
				})
				ref := outs() // the GEMV, then rope_qk
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					if err := g.LaunchGroupsSplit(c, s, xp, sh.T, sh.K, split, ref[:len(Ns)]...); err != nil {
						return err
					}
					return ops.RoPEQK(c, s, ref[0].Y, ref[1].Y, pos, invFreq, 0, 0, sh.T, sh.Hq, sh.Hk, hf, 1e-6)
				})
				fu := outs()
				m.run(func(c *cuda.Ctx, s cuda.Stream) error {
					if auto {
						return g.LaunchRoPE(c, s, xp, sh.T, sh.K, fu[0], fu[1], fu[2], pos, invFreq, hf)
					}
					return g.LaunchRoPESplit(c, s, xp, sh.T, sh.K, split, fu[0], fu[1], fu[2], pos, invFreq, hf)
				})
				for i, N := range Ns {
					what := fmt.Sprintf("split %d (auto %v) weight %d", split, auto, i)
					got, want := m.f32s(fu[i].Y, sh.T*N), m.f32s(ref[i].Y, sh.T*N)
					sameF32Bits(t, what, got, want)
					plain := m.f32s(lin[i].Y, sh.T*N)
					if i == 2 {
						sameF32Bits(t, what+" (v, not rotated)", got, plain)
						continue
					}
					for ti := range sh.T {
						for h := range N / sh.D {
							for j := range hf {
								lo := ti*N + h*sh.D + j
								x1, x2 := float64(plain[lo]), float64(plain[lo+hf])
								th := float64(float32(float64(posv[ti])) * inv[j])
								c, s := math.Cos(th), math.Sin(th)
								for e, ref := range map[int]float64{lo: x1*c - x2*s, lo + hf: x2*c + x1*s} {
									tol := (math.Abs(ref) + 2*(math.Abs(x1)+math.Abs(x2))) * 0x1p-23
									if v := float64(got[e]); v != v || math.Abs(v-ref) > tol {
										t.Fatalf("%s: y[%d] = %g, want %g (tol %.3g)", what, e, v, ref, tol)
									}
								}
							}
						}
					}
				}
			}
		})
	}
	q := kernels.LinearGroup{Y: 1, W: 1, N: 128}
	for name, launch := range map[string]func(c *cuda.Ctx, s cuda.Stream) error{
		"q not heads": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchRoPE(c, s, 1, 1, 8, kernels.LinearGroup{Y: 1, W: 1, N: 100}, q, kernels.LinearGroup{}, 1, 1, 64)
		},
		"v odd": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchRoPE(c, s, 1, 1, 8, q, q, kernels.LinearGroup{Y: 1, W: 1, N: 7}, 1, 1, 64)
		},
		"no pos": func(c *cuda.Ctx, s cuda.Stream) error {
			return g.LaunchRoPE(c, s, 1, 1, 8, q, q, kernels.LinearGroup{}, 0, 1, 64)
		},
	} {
		if err := d.Do(func(c *cuda.Ctx) error { return launch(c, d.Stream()) }); err == nil {
			t.Errorf("%s: launched, want an error", name)
		}
	}
}

package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// gemvq6DECSetup loads gemvq.cu's kernels and gemvq6dec.cu's, or skips
// without a GPU.
func gemvq6DECSetup(t *testing.T) (*cuda.Device, *kernels.GEMVQ, *kernels.GEMVQ6DEC) {
	t.Helper()
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernels.LoadGEMVQ6DEC(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, g, k
}

// TestGEMVQ6DECMatchesV61 checks gemv_q6_dec (v6.1 with a DEC warp a CTA)
// on the GPU: y equals v6.1's y (LaunchV6 at the same split and early
// flag) plus wq.Compensate's compensation for wq.SelectApprox's list, bit
// for bit, which ties it to the float64 reference through v6.1's bound
// (TestGEMVQ6MatchesV5) and wq's DEC tests; with nsel = 0 it is v6.1's y.
// int4 and int3 bases, every split (16-128 outputs a CTA: 8-, 16- and
// 64-byte row slices, 1-4 outputs a lane), k_chunk 0, 1, 8, 64 and 128 (one
// batch and several: down's 896 rows), activations with outliers, ties,
// zeros, signed zeros and subnormals, a bias, K with a short last chunk.
// Both forms (session 22b): the DEC warp summing every row while the base
// streams, and the tail (every row over every warp after the base; several
// passes where the list is longer than a pass: splits 1 and 2 at k 64,
// split 8 at k 128), each with one DEC warp and with a copier and a summer
// (GEMVQ6DEC_WARPS=2), and the form Launch picks. y starts as NaN. Select
// (select_q6) must write wq.SelectApprox's list.
func TestGEMVQ6DECMatchesV61(t *testing.T) {
	d, g, k1 := gemvq6DECSetup(t)
	k2, err := kernels.LoadGEMVQ6DEC(d, "-DGEMVQ6DEC_WARPS=2")
	if err != nil {
		t.Fatal(err)
	}
	type build struct {
		name string
		k    *kernels.GEMVQ6DEC
	}
	var builds []build
	for _, b := range []build{{"one DEC warp", k1}, {"pair", k2}} {
		for _, f := range []struct {
			name string
			tail kernels.GEMVQ6DECTail
		}{{"auto", kernels.TailAuto}, {"warp", kernels.TailNever}, {"tail", kernels.TailAlways}} {
			k := *b.k
			k.Tail = f.tail
			builds = append(builds, build{b.name + ", " + f.name, &k})
		}
	}
	r := rand.New(rand.NewPCG(18, 22))
	type tc struct {
		bits, N, K int
		splits     []int
		kChunks    []int
		mode       int
	}
	all := kernels.GEMVQ4Splits()
	cases := []tc{
		{4, 4096, 4096, all, []int{0, 1, 3, 8, 64}, 0},
		{4, 1024, 4096, all, []int{64}, 1},
		{4, 4096, 14336, []int{2, 8}, []int{8, 64, 128}, 0},
		{4, 2048, 1152, all, []int{1, 64}, 2},
		{3, 4096, 4096, all, []int{0, 8, 64}, 0},
		{3, 1024, 2176, []int{1, 8}, []int{64}, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("int%d-N%d-K%d-x%d", c.bits, c.N, c.K, c.mode), func(t *testing.T) {
			const G = 128
			m := newGPUMem(t, d)
			e := wq.Int4
			if c.bits == 3 {
				e = wq.Int3
			}
			qm := gemvqWeight(t, r, e, G, c.N, c.K)
			rm := fixture(t, fixtureKey{e: wq.Int4, N: c.N, K: c.K})
			x := kernels.DECTestActivations(r, c.K, c.mode)
			bias := randF32(r, c.N, 1)
			tw, tp, err := kernels.PackTiles(c.bits, c.N, c.K, G, qm.Words, qm.Params)
			if err != nil {
				t.Fatal(err)
			}
			twp, tpp := m.put(cuda.Bytes(tw)), m.put(cuda.Bytes(tp))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			res := &kernels.DECResidual{Elem: wq.Int4, Words: m.put(cuda.Bytes(rm.Words)), Params: m.put(cuda.Bytes(rm.Params)), N: c.N, K: c.K}
			for _, split := range c.splits {
				for _, early := range []bool{false, true} {
					yb := m.poisonedF32(c.N)
					m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
						g.EarlyWeights = early
						defer func() { g.EarlyWeights = false }()
						return g.LaunchV6(cx, s, yb, xp, twp, tpp, bp, c.N, c.K, c.bits, G, split)
					})
					base := m.f32s(yb, c.N)
					for _, kc := range c.kChunks {
						var sel []int32
						if kc > 0 {
							sel = wq.SelectApprox(nil, x, kc)
						}
						if len(sel) != kernels.DECSelected(c.K, kc) {
							t.Fatalf("k %d: %d selected, DECSelected %d", kc, len(sel), kernels.DECSelected(c.K, kc))
						}
						want := slices.Clone(base)
						wq.Compensate(want, x, sel, rm, nil)
						sp := m.put(cuda.Bytes(append(sel, 0)))
						if kc > 0 && split == c.splits[0] && !early {
							// select_q6 (Select) writes wq.SelectApprox's list.
							gp := m.put(make([]byte, 4*len(sel)))
							m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
								return k1.Select(cx, s, &kernels.DECLaunch{X: xp, Y: bp, Sel: gp, R: res, T: 1, KChunk: kc})
							})
							got := make([]int32, len(sel))
							m.read(cuda.Bytes(got), gp)
							if !slices.Equal(got, sel) {
								t.Fatalf("k %d: select_q6's list differs from wq.SelectApprox's", kc)
							}
						}
						for _, b := range builds {
							yp := m.poisonedF32(c.N)
							m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
								return b.k.Launch(cx, s, yp, xp, twp, tpp, bp, sp, len(sel), res, c.N, c.K, c.bits, G, split, early)
							})
							got := m.f32s(yp, c.N)
							for n := range c.N {
								if math.Float32bits(got[n]) != math.Float32bits(want[n]) || got[n] != got[n] {
									t.Fatalf("%s build, split %d early %v k %d: y[%d] = %g (%#08x), want v6.1 %g + wq.Compensate = %g (%#08x)", b.name,
										split, early, kc, n, got[n], math.Float32bits(got[n]), base[n], want[n], math.Float32bits(want[n]))
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestGEMVQ6DECPart checks LaunchPart (session 23, DEC by projection) on the
// GPU: a joined weight of parts one after another (their tiled layouts
// concatenated, as backend/gpu's joinTiled), with a residual for one part
// or a run of parts only: the outputs of those parts have the bits of
// Launch over each part alone at the same split (v6.1 + wq.Compensate), the
// others v6.1's y of the joined weight (LaunchV6), bit for bit. q|k|v of
// the 8B (v alone, k alone, q alone, k|v), gate|up-like halves, int4 and
// int3, every split, k_chunk 8, 64 and 256, both forms (the DEC warp's and
// the tail). y starts as NaN. A residual past N or not on whole residual
// groups is refused.
func TestGEMVQ6DECPart(t *testing.T) {
	d, g, k0 := gemvq6DECSetup(t)
	r := rand.New(rand.NewPCG(23, 22))
	const G, K = 128, 4096
	type tc struct {
		bits int
		Ns   []int
		on   [2]int // the parts [on[0], on[1]) have DEC
	}
	cases := []tc{
		{4, []int{4096, 1024, 1024}, [2]int{2, 3}},
		{4, []int{4096, 1024, 1024}, [2]int{1, 2}},
		{3, []int{4096, 1024, 1024}, [2]int{0, 1}},
		{3, []int{4096, 1024, 1024}, [2]int{1, 3}},
		{4, []int{2048, 2048}, [2]int{0, 1}},
		{3, []int{2048, 2048}, [2]int{1, 2}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("int%d-%v-parts%d-%d", c.bits, c.Ns, c.on[0], c.on[1]), func(t *testing.T) {
			m := newGPUMem(t, d)
			e := wq.Int4
			if c.bits == 3 {
				e = wq.Int3
			}
			N, lo, RN := 0, 0, 0
			var tw, tp []byte
			type part struct {
				tw, tp cuda.DevicePtr
				n, at  int
			}
			var parts []part
			for i, n := range c.Ns {
				qm := gemvqWeight(t, r, e, G, n, K)
				w, p, err := kernels.PackTiles(c.bits, n, K, G, qm.Words, qm.Params)
				if err != nil {
					t.Fatal(err)
				}
				tw, tp = append(tw, cuda.Bytes(w)...), append(tp, cuda.Bytes(p)...)
				parts = append(parts, part{m.put(cuda.Bytes(w)), m.put(cuda.Bytes(p)), n, N})
				if i == c.on[0] {
					lo = N
				}
				if i >= c.on[0] && i < c.on[1] {
					RN += n
				}
				N += n
			}
			twp, tpp := m.put(tw), m.put(tp)
			rm := fixture(t, fixtureKey{e: wq.Int4, N: RN, K: K})
			res := &kernels.DECResidual{Elem: wq.Int4, Words: m.put(cuda.Bytes(rm.Words)), Params: m.put(cuda.Bytes(rm.Params)), N: RN, K: K}
			x := kernels.DECTestActivations(r, K, 0)
			xp := m.put(cuda.Bytes(x))
			for _, split := range kernels.GEMVQ4Splits() {
				yb := m.poisonedF32(N)
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					return g.LaunchV6(cx, s, yb, xp, twp, tpp, 0, N, K, c.bits, G, split)
				})
				base := m.f32s(yb, N)
				for _, kc := range []int{8, 64, 256} {
					sel := wq.SelectApprox(nil, x, kc)
					sp := m.put(cuda.Bytes(append(sel, 0)))
					for _, form := range []kernels.GEMVQ6DECTail{kernels.TailNever, kernels.TailAlways} {
						k := *k0
						k.Tail = form
						yp := m.poisonedF32(N)
						m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
							return k.LaunchPart(cx, s, yp, xp, twp, tpp, 0, sp, len(sel), res, lo, N, K, c.bits, G, split, false)
						})
						got := m.f32s(yp, N)
						want := slices.Clone(base)
						// Each part with DEC alone: its own residual rows
						// (the part's columns of the run's), Launch.
						for i := c.on[0]; i < c.on[1]; i++ {
							p := parts[i]
							pr, err := residualColumns(rm, p.at-lo, p.n)
							if err != nil {
								t.Fatal(err)
							}
							pres := &kernels.DECResidual{Elem: wq.Int4, Words: m.put(cuda.Bytes(pr.Words)), Params: m.put(cuda.Bytes(pr.Params)), N: p.n, K: K}
							ya := m.poisonedF32(p.n)
							m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
								return k.Launch(cx, s, ya, xp, p.tw, p.tp, 0, sp, len(sel), pres, p.n, K, c.bits, G, split, false)
							})
							alone := m.f32s(ya, p.n)
							ref := slices.Clone(base[p.at : p.at+p.n])
							wq.Compensate(ref, x, sel, pr, nil)
							for n := range p.n {
								if math.Float32bits(alone[n]) != math.Float32bits(ref[n]) {
									t.Fatalf("split %d k %d form %d: part %d alone y[%d] = %g, want v6.1 + wq.Compensate %g", split, kc, form, i, n, alone[n], ref[n])
								}
							}
							copy(want[p.at:], alone)
						}
						for n := range N {
							if math.Float32bits(got[n]) != math.Float32bits(want[n]) || got[n] != got[n] {
								t.Fatalf("split %d k %d form %d: y[%d] = %g (%#08x), want %g (%#08x) (DEC on [%d, %d))", split, kc, form, n,
									got[n], math.Float32bits(got[n]), want[n], math.Float32bits(want[n]), lo, lo+RN)
							}
						}
					}
				}
			}
			bad := *res
			bad.N = RN + wq.ResidualGroup
			if err := d.Do(func(cx *cuda.Ctx) error {
				return k0.LaunchPart(cx, 0, 0, xp, twp, tpp, 0, 0, 0, &bad, N-RN, N, K, c.bits, G, 1, false)
			}); err == nil {
				t.Error("a residual past N was accepted")
			}
			if err := d.Do(func(cx *cuda.Ctx) error {
				return k0.LaunchPart(cx, 0, 0, xp, twp, tpp, 0, 0, 0, res, 64, N, K, c.bits, G, 1, false)
			}); err == nil {
				t.Error("a residual from output 64 was accepted")
			}
		})
	}
}

// residualColumns returns columns [a, a + n) of the int4 residual Rᵀ rm
// (outputs of one part of a joined weight; a and n whole groups): the
// part's own residual, as wq.NewResidual makes it for the part alone.
func residualColumns(rm *wq.Matrix, a, n int) (*wq.Matrix, error) {
	out, err := wq.NewMatrix(rm.Elem, rm.Group, rm.N, n)
	if err != nil {
		return nil, err
	}
	w, ow := rm.Elem.RowWords(rm.K), rm.Elem.RowWords(n)
	g, og := rm.K/rm.Group, n/rm.Group
	for k := range rm.N {
		copy(out.Words[k*ow:(k+1)*ow], rm.Words[k*w+rm.Elem.RowWords(a):])
		copy(out.Params[2*k*og:2*(k+1)*og], rm.Params[2*(k*g+a/rm.Group):])
	}
	return out, nil
}

package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
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

// selectedX returns x[sel].
func selectedX(x []float32, sel []int32) []float32 {
	v := make([]float32, len(sel))
	for i, k := range sel {
		v[i] = x[k]
	}
	return v
}

// TestGEMVQ6DECMatchesV61 checks gemv_q6_dec (v6.1 with a DEC warp a CTA)
// on the GPU: y equals v6.1's y (LaunchV6 at the same split and early
// flag) plus wq.Compensate's compensation for wq.SelectApprox's list, bit
// for bit, which ties it to the float64 reference through v6.1's bound
// (TestGEMVQ6MatchesV5) and wq's DEC tests; with nsel = 0 it is v6.1's y.
// int4 and int3 bases, every split (16-128 outputs a CTA: 8-, 16- and
// 64-byte row slices, 1-4 outputs a lane), k_chunk 0, 1, 8 and 64 (one
// batch and several: down's 896 rows), activations with outliers, ties,
// zeros, signed zeros and subnormals, a bias, K with a short last chunk.
// One DEC warp, and a copier and a summer (GEMVQ6DEC_WARPS=2). y starts as
// NaN.
func TestGEMVQ6DECMatchesV61(t *testing.T) {
	d, g, k1 := gemvq6DECSetup(t)
	k2, err := kernels.LoadGEMVQ6DEC(d, "-DGEMVQ6DEC_WARPS=2")
	if err != nil {
		t.Fatal(err)
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
		{4, 4096, 14336, []int{2, 8}, []int{8, 64}, 0},
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
						sp, xsp := m.put(cuda.Bytes(sel)), m.put(cuda.Bytes(selectedX(x, sel)))
						for wi, k := range []*kernels.GEMVQ6DEC{k1, k2} {
							yp := m.poisonedF32(c.N)
							m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
								return k.Launch(cx, s, yp, xp, twp, tpp, bp, sp, xsp, len(sel), res, c.N, c.K, c.bits, G, split, early)
							})
							got := m.f32s(yp, c.N)
							for n := range c.N {
								if math.Float32bits(got[n]) != math.Float32bits(want[n]) || got[n] != got[n] {
									t.Fatalf("%d DEC warps, split %d early %v k %d: y[%d] = %g (%#08x), want v6.1 %g + wq.Compensate = %g (%#08x)", wi+1,
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

// TestGEMVQ6DECTimes times gemv_q6_dec against v6.1 on the Llama-3.1-8B
// shapes (a bench, not a check: it runs only with
// BITDECODE_GEMVQ6DEC_BENCH=1). Each run follows a 192 MB write that
// evicts L2, as `bitdecode bench dec`; four activation rows (and their
// lists) rotate; median of 30 runs. Per shape and base width it prints v6.1
// at LaunchTiled's split, the DEC kernel with no rows (the extra warp's
// cost), and k_chunk 1-64 at that split and at every split for k 64.
func TestGEMVQ6DECTimes(t *testing.T) {
	if os.Getenv("BITDECODE_GEMVQ6DEC_BENCH") != "1" {
		t.Skip("a bench: set BITDECODE_GEMVQ6DEC_BENCH=1")
	}
	d, g, k := gemvq6DECSetup(t)
	dk, err := kernels.LoadDEC(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(18, 23))
	const (
		G      = 128
		copies = 4
		flushB = 192 << 20
		runs   = 30
	)
	m := newGPUMem(t, d)
	flush, err := d.Alloc(flushB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Free(flush) })
	randWords := func(n int) []uint32 {
		w := make([]uint32, n)
		for i := range w {
			w[i] = r.Uint32()
		}
		return w
	}
	randParams := func(n int) []uint16 {
		p := make([]uint16, n)
		for i := range p {
			p[i] = half.FromFloat32(float32(0.01 * (1 + r.Float64())))
			if i%2 == 1 {
				p[i] = half.FromFloat32(float32(-0.08 * r.Float64()))
			}
		}
		return p
	}
	shapes := []struct {
		name string
		N, K int
	}{{"q/o", 4096, 4096}, {"k/v", 1024, 4096}, {"gate/up", 14336, 4096}, {"down", 4096, 14336}, {"q|k|v", 6144, 4096}, {"gate|up", 28672, 4096}}
	kChunks := []int{1, 8, 16, 32, 64}
	fmt.Printf("gemvq6dec bench: us, median of %d, L2 flushed each run\n", runs)
	for _, bits := range []int{4, 3} {
		for _, sh := range shapes {
			N, K := sh.N, sh.K
			e := wq.Int4
			if bits == 3 {
				e = wq.Int3
			}
			words, params := randWords(N*e.RowWords(K)), randParams(2*N*K/G)
			wp, pp := m.put(cuda.Bytes(words)), m.put(cuda.Bytes(params))
			twp, tpp := m.put(make([]byte, 4*kernels.TiledWords(bits, N, K))), m.put(make([]byte, 4*kernels.TiledParams(N, K, G)))
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error { return g.PackTiles(cx, s, twp, tpp, wp, pp, N, K, bits, G) })
			res := &kernels.DECResidual{Elem: wq.Int4, Words: m.put(cuda.Bytes(randWords(K * wq.Int4.RowWords(N)))),
				Params: m.put(cuda.Bytes(randParams(2 * K * N / wq.ResidualGroup))), N: N, K: K}
			var xs [copies]cuda.DevicePtr
			var xv [copies][]float32
			for i := range xs {
				xv[i] = kernels.DECTestActivations(r, K, 0)
				xs[i] = m.put(cuda.Bytes(xv[i]))
			}
			yp := m.put(make([]byte, 4*N))
			split := g.SplitV5For(N, K, bits)
			var out []float64
			time := func(launch func(cx *cuda.Ctx, s cuda.Stream, i int) error) float64 {
				var us float64
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					var err error
					us, err = cx.MedianUSPrep(s, 3, runs, func(i int) error { return cx.Memset32Async(flush, uint32(i), flushB/4, s) },
						func(i int) error { return launch(cx, s, i%copies) })
					return err
				})
				return us
			}
			base := time(func(cx *cuda.Ctx, s cuda.Stream, i int) error {
				return g.LaunchV6(cx, s, yp, xs[i], twp, tpp, 0, N, K, bits, G, split)
			})
			lists := func(kc int) (sp, xsp [copies]cuda.DevicePtr, n int) {
				for i := range copies {
					sel := wq.SelectApprox(nil, xv[i], kc)
					n = len(sel)
					sp[i], xsp[i] = m.put(cuda.Bytes(sel)), m.put(cuda.Bytes(selectedX(xv[i], sel)))
				}
				return sp, xsp, n
			}
			decAt := func(kc, S int) float64 {
				sp, xsp, n := lists(max(kc, 1))
				if kc == 0 {
					n = 0
				}
				return time(func(cx *cuda.Ctx, s cuda.Stream, i int) error {
					return k.Launch(cx, s, yp, xs[i], twp, tpp, 0, sp[i], xsp[i], n, res, N, K, bits, G, S, true)
				})
			}
			var fi cuda.FuncInfo
			var perSM int
			_ = d.Do(func(cx *cuda.Ctx) error { fi, perSM, err = k.Info(cx, bits, split); return err })
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, decAt(0, split))
			line := fmt.Sprintf("int%d %-8s %5dx%-5d S %d (regs %d, local %d, static smem %d, CTAs/SM %d): v6.1 %.2f | dec k0 %.2f (%+.1f%%)",
				bits, sh.name, N, K, split, fi.Registers, fi.LocalBytes, fi.StaticSharedBytes, perSM, base, out[0], 100*(out[0]/base-1))
			for _, kc := range kChunks {
				us := decAt(kc, split)
				line += fmt.Sprintf(" | k%d %.2f (%+.1f%%)", kc, us, 100*(us/base-1))
			}
			// The selection as a launch of its own (dec.cu's select_topk, no
			// PDL), alone and ahead of the k 64 launch that reads its list.
			selp := m.put(make([]byte, 4*kernels.DECSelected(K, 64)))
			_, xsp, n := lists(64)
			selectL := func(i int) *kernels.DECLaunch {
				return &kernels.DECLaunch{X: xs[i], Y: yp, Sel: selp, R: res, T: 1, KChunk: 64}
			}
			selUS := time(func(cx *cuda.Ctx, s cuda.Stream, i int) error { return dk.Select(cx, s, selectL(i)) })
			both := time(func(cx *cuda.Ctx, s cuda.Stream, i int) error {
				if err := dk.Select(cx, s, selectL(i)); err != nil {
					return err
				}
				return k.Launch(cx, s, yp, xs[i], twp, tpp, 0, selp, xsp[i], n, res, N, K, bits, G, split, true)
			})
			line += fmt.Sprintf(" | select k64 alone %.2f | select + dec k64 %.2f (%+.1f%%)", selUS, both, 100*(both/base-1))
			fmt.Println(line)
			line = fmt.Sprintf("int%d %-8s k64 by split:", bits, sh.name)
			for _, S := range kernels.GEMVQ4Splits() {
				bs := time(func(cx *cuda.Ctx, s cuda.Stream, i int) error {
					return g.LaunchV6(cx, s, yp, xs[i], twp, tpp, 0, N, K, bits, G, S)
				})
				line += fmt.Sprintf(" | S %d v6.1 %.2f dec %.2f", S, bs, decAt(64, S))
			}
			fmt.Println(line)
		}
	}
}

// TestGEMVQ6DECDiag times gemv_q6_dec's diagnostic forms (a bench: it runs
// only with BITDECODE_GEMVQ6DEC_BENCH=1): the DEC warp alone
// (-DGEMVQ6DEC_DIAG=1: the base warps skip their loop), its sums alone (=2)
// and its copies alone (=3), and a copier and a summer warp
// (-DGEMVQ6DEC_WARPS=2), with and without the base, against
// v6.1 on q/o and down at the split LaunchTiled picks. (Call 2 of session 18
// also timed 8 KB staging buffers, -DGEMVQ6DEC_BUF=8192, and an L2 prefetch
// of every listed row first, -DGEMVQ6DEC_PF=1: neither helped.)
func TestGEMVQ6DECDiag(t *testing.T) {
	if os.Getenv("BITDECODE_GEMVQ6DEC_BENCH") != "1" {
		t.Skip("a bench: set BITDECODE_GEMVQ6DEC_BENCH=1")
	}
	d, g, k0 := gemvq6DECSetup(t)
	forms := []struct {
		name string
		opts []string
		bits []int
	}{
		{"default", nil, []int{4, 3}},
		{"dec-alone", []string{"-DGEMVQ6DEC_DIAG=1"}, []int{4, 3}},
		{"sums-alone", []string{"-DGEMVQ6DEC_DIAG=2"}, []int{4, 3}},
		{"copies-alone", []string{"-DGEMVQ6DEC_DIAG=3"}, []int{4, 3}},
		{"pair", []string{"-DGEMVQ6DEC_WARPS=2"}, []int{4, 3}},
		{"pair-dec-alone", []string{"-DGEMVQ6DEC_WARPS=2", "-DGEMVQ6DEC_DIAG=1"}, []int{4, 3}},
	}
	ks := make([]*kernels.GEMVQ6DEC, len(forms))
	ks[0] = k0
	for i := 1; i < len(forms); i++ {
		var err error
		if ks[i], err = kernels.LoadGEMVQ6DEC(d, forms[i].opts...); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(18, 24))
	const (
		G      = 128
		copies = 4
		flushB = 192 << 20
		runs   = 30
	)
	m := newGPUMem(t, d)
	flush, err := d.Alloc(flushB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Free(flush) })
	for _, bits := range []int{4, 3} {
		for _, sh := range []struct {
			name string
			N, K int
		}{{"q/o", 4096, 4096}, {"down", 4096, 14336}} {
			N, K := sh.N, sh.K
			e := wq.Int4
			if bits == 3 {
				e = wq.Int3
			}
			words := make([]uint32, N*e.RowWords(K))
			for i := range words {
				words[i] = r.Uint32()
			}
			params := make([]uint16, 2*N*K/G)
			for i := range params {
				params[i] = half.FromFloat32(float32(0.01 * (1 + r.Float64())))
			}
			wp, pp := m.put(cuda.Bytes(words)), m.put(cuda.Bytes(params))
			twp, tpp := m.put(make([]byte, 4*kernels.TiledWords(bits, N, K))), m.put(make([]byte, 4*kernels.TiledParams(N, K, G)))
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error { return g.PackTiles(cx, s, twp, tpp, wp, pp, N, K, bits, G) })
			rw := make([]uint32, K*wq.Int4.RowWords(N))
			for i := range rw {
				rw[i] = r.Uint32()
			}
			rp := make([]uint16, 2*K*N/wq.ResidualGroup)
			for i := range rp {
				rp[i] = half.FromFloat32(float32(0.001 * (1 + r.Float64())))
			}
			res := &kernels.DECResidual{Elem: wq.Int4, Words: m.put(cuda.Bytes(rw)), Params: m.put(cuda.Bytes(rp)), N: N, K: K}
			var xs [copies]cuda.DevicePtr
			var xv [copies][]float32
			for i := range xs {
				xv[i] = kernels.DECTestActivations(r, K, 0)
				xs[i] = m.put(cuda.Bytes(xv[i]))
			}
			yp := m.put(make([]byte, 4*N))
			split := g.SplitV5For(N, K, bits)
			time := func(launch func(cx *cuda.Ctx, s cuda.Stream, i int) error) float64 {
				var us float64
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					var err error
					us, err = cx.MedianUSPrep(s, 3, runs, func(i int) error { return cx.Memset32Async(flush, uint32(i), flushB/4, s) },
						func(i int) error { return launch(cx, s, i%copies) })
					return err
				})
				return us
			}
			base := time(func(cx *cuda.Ctx, s cuda.Stream, i int) error {
				return g.LaunchV6(cx, s, yp, xs[i], twp, tpp, 0, N, K, bits, G, split)
			})
			line := fmt.Sprintf("diag int%d %-5s S %d: v6.1 %.2f", bits, sh.name, split, base)
			for fi, f := range forms {
				if !slices.Contains(f.bits, bits) {
					continue
				}
				var fiInfo cuda.FuncInfo
				var perSM int
				_ = d.Do(func(cx *cuda.Ctx) error { fiInfo, perSM, err = ks[fi].Info(cx, bits, split); return err })
				if err != nil {
					t.Fatal(err)
				}
				line += fmt.Sprintf(" | %s (%d regs, %d CTAs/SM):", f.name, fiInfo.Registers, perSM)
				for _, kc := range []int{0, 8, 64} {
					var sp, xsp [copies]cuda.DevicePtr
					n := 0
					for i := range copies {
						var sel []int32
						if kc > 0 {
							sel = wq.SelectApprox(nil, xv[i], kc)
						}
						n = len(sel)
						sp[i], xsp[i] = m.put(cuda.Bytes(append(sel, 0))), m.put(cuda.Bytes(append(selectedX(xv[i], sel), 0)))
					}
					us := time(func(cx *cuda.Ctx, s cuda.Stream, i int) error {
						return ks[fi].Launch(cx, s, yp, xs[i], twp, tpp, 0, sp[i], xsp[i], n, res, N, K, bits, G, split, true)
					})
					line += fmt.Sprintf(" k%d %.2f", kc, us)
				}
			}
			fmt.Println(line)
		}
	}
}

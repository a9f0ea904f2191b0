package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// TestOpsAddRMSNormSel (session 19b): add_rmsnorm_cluster_sel writes the
// same h, x and xh as add_rmsnorm_cluster, bit for bit (x = delta or not,
// early or not, with and without xh), and each row's list equals
// wq.SelectApprox's of that row of x exactly (every slot written: the
// scratch starts poisoned), for rows of 1024-8192 with a partial last
// chunk, k_chunk 1-1024, and activations with outliers, ties, zeros and
// subnormals (the norm's weight 1 in modes 1 and 2, so that they reach x).
func TestOpsAddRMSNormSel(t *testing.T) {
	d, o := opsSetup(t)
	if !o.AddRMSNormSelects(4096) {
		t.Skipf("%s: no add_rmsnorm_cluster_sel (no clusters)", d.Arch())
	}
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(19, 20))
	const eps = 1e-5
	for _, sh := range []struct{ rows, G int }{{1, 4096}, {2, 4096}, {1, 1024}, {1, 2080}, {3, 3072}, {1, 5120}, {2, 8192}, {1, 8160}} {
		if !o.AddRMSNormSelects(sh.G) {
			t.Fatalf("G=%d: AddRMSNormSelects says no", sh.G)
		}
		for _, kChunk := range []int{1, 8, 64, 300, 1024} {
			for mode := range 3 {
				n := sh.rows * sh.G
				var hv []float32
				for range sh.rows {
					hv = append(hv, kernels.DECTestActivations(r, sh.G, mode)...)
				}
				dv := make([]float32, n) // delta 0: h's ties and zeros reach x
				wv := randF32(r, sh.G, 1)
				if mode > 0 {
					for i := range wv {
						wv[i] = 1
					}
				} else {
					dv = randF32(r, n, 1)
				}
				wp := g.put(cuda.Bytes(wv))
				S := kernels.DECSelected(sh.G, kChunk)
				for _, mo := range []struct{ aliased, early, half bool }{{false, false, false}, {true, true, true}} {
					what := fmt.Sprintf("%+v k_chunk %d mode %d %+v", sh, kChunk, mode, mo)
					// The base: add_rmsnorm_cluster.
					hb, db := g.put(cuda.Bytes(hv)), g.put(cuda.Bytes(dv))
					xb, xhb := g.poisonedF32(n), cuda.DevicePtr(0)
					if mo.half {
						xhb = g.poisonedF16(n)
					}
					g.run(func(c *cuda.Ctx, s cuda.Stream) error {
						return o.AddRMSNormHalfEarly(c, s, hb, xb, xhb, db, wp, sh.rows, sh.G, eps, mo.early)
					})
					// The new kernel, into a poisoned list.
					hp, dp := g.put(cuda.Bytes(hv)), g.put(cuda.Bytes(dv))
					xp, xhp := dp, cuda.DevicePtr(0)
					if !mo.aliased {
						xp = g.poisonedF32(n)
					}
					if mo.half {
						xhp = g.poisonedF16(n)
					}
					sel := g.put(cuda.Bytes(slices.Repeat([]int32{-7}, sh.rows*S)))
					g.run(func(c *cuda.Ctx, s cuda.Stream) error {
						return o.AddRMSNormSel(c, s, hp, xp, xhp, dp, wp, sh.rows, sh.G, eps, mo.early, sel, kChunk)
					})
					sameF32(t, what+": h", g.f32s(hp, n), g.f32s(hb, n))
					x := g.f32s(xp, n)
					sameF32(t, what+": x", x, g.f32s(xb, n))
					if mo.half {
						sameU16(t, what+": xh", g.u16s(xhp, n), g.u16s(xhb, n))
					}
					sameLists(t, g, what+" row", sel, x, sh.G, kChunk)
				}
			}
		}
	}
}

// TestOpsOutSel (session 19b): the attention output's conversion with
// DEC's list, f16_to_f32_sel and f16_to_f32_hadamard_sel, writes the y of
// F16ToF32 and of F16ToF32Hadamard (f16_to_f32_hadamard_warp) bit for bit
// and each token's list equal to wq.SelectApprox's of its row of y (every
// slot written), for T = 1 and 3, rows of a whole or partial last chunk,
// D 32-256, k_chunk 1-1024, and inputs with ties, zeros and subnormals.
func TestOpsOutSel(t *testing.T) {
	d, o := opsSetup(t)
	if !o.OutSelects(1, 4096, 128) {
		t.Skipf("%s: no o-input kernels with DEC's list (no clusters)", d.Arch())
	}
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(19, 21))
	for _, sh := range []struct{ T, heads, D int }{{1, 32, 128}, {3, 32, 128}, {1, 40, 64}, {1, 16, 256}, {2, 100, 32}, {1, 8, 128}} {
		rowLen := sh.heads * sh.D
		n := sh.T * rowLen
		for _, kChunk := range []int{1, 8, 64, 1024} {
			for mode := range 3 {
				var xv []uint16
				for range sh.T {
					for _, v := range kernels.DECTestActivations(r, rowLen, mode) {
						xv = append(xv, half.FromFloat32(v))
					}
				}
				src := g.put(cuda.Bytes(xv))
				S := kernels.DECSelected(rowLen, kChunk)
				for _, rot := range []bool{false, true} {
					what := fmt.Sprintf("%+v k_chunk %d mode %d rotated %v", sh, kChunk, mode, rot)
					yb, yp := g.poisonedF32(n), g.poisonedF32(n)
					sel := g.put(cuda.Bytes(slices.Repeat([]int32{-7}, sh.T*S)))
					g.run(func(c *cuda.Ctx, s cuda.Stream) error {
						if rot {
							if err := o.F16ToF32Hadamard(c, s, yb, src, sh.T*sh.heads, sh.D); err != nil {
								return err
							}
							return o.F16ToF32HadamardSel(c, s, yp, src, sh.T, rowLen, sh.D, sel, kChunk)
						}
						if err := o.F16ToF32(c, s, yb, src, n); err != nil {
							return err
						}
						return o.F16ToF32Sel(c, s, yp, src, sh.T, rowLen, sel, kChunk)
					})
					y := g.f32s(yp, n)
					sameF32(t, what+": y", y, g.f32s(yb, n))
					sameLists(t, g, what+" token", sel, y, rowLen, kChunk)
				}
			}
		}
	}
}

// TestOpsGLUColsSel (session 19b): swiglu_cols_sel writes GLUColsHalf's
// dst, gate and up bit for bit (gate replaced by dst or not, biases or
// not, SwiGLU and GeGLU) and each row's list equal to wq.SelectApprox's of
// that row of dst (every slot written), for T = 1 and 2, N a multiple of
// 1024 or not, k_chunk 1-1024, and inputs with ties and zeros (up 1 or 0).
func TestOpsGLUColsSel(t *testing.T) {
	d, o := opsSetup(t)
	if !o.GLUSelects(1, 14336) {
		t.Skipf("%s: no swiglu_cols_sel (no clusters)", d.Arch())
	}
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(19, 25))
	for _, sh := range []struct{ T, N int }{{1, 14336}, {2, 4096}, {1, 3000}} {
		for _, kChunk := range []int{1, 8, 64, 1024} {
			for mode := range 3 {
				var yv []float32
				for range sh.T {
					gv, uv := gluTestRow(r, sh.N, mode)
					yv = append(append(yv, gv...), uv...)
				}
				yp := g.put(cuda.Bytes(yv))
				bias := g.put(cuda.Bytes(randF32(r, sh.N, 0.1)))
				S := kernels.DECSelected(sh.N, kChunk)
				n := sh.T * sh.N
				for _, mo := range []struct {
					act         kernels.Act
					replace, bs bool
				}{{kernels.ActSiLU, true, false}, {kernels.ActGeluTanh, false, true}} {
					what := fmt.Sprintf("%+v k_chunk %d mode %d %+v", sh, kChunk, mode, mo)
					outs := func() (dst cuda.DevicePtr, gate, up kernels.ColsOut) {
						dst = g.poisonedF32(n)
						gate = kernels.ColsOut{Y: g.poisonedF32(n), N: sh.N}
						up = kernels.ColsOut{Y: g.poisonedF32(n), N: sh.N}
						if mo.replace {
							gate.Y = 0
						}
						if mo.bs {
							gate.Bias, up.Bias = bias, bias
						}
						return dst, gate, up
					}
					db, gb, ub := outs()
					dp, gp, up := outs()
					sel := g.put(cuda.Bytes(slices.Repeat([]int32{-7}, sh.T*S)))
					g.run(func(c *cuda.Ctx, s cuda.Stream) error {
						if err := o.GLUColsHalf(c, s, mo.act, yp, db, 0, sh.T, gb, ub); err != nil {
							return err
						}
						return o.GLUColsSel(c, s, mo.act, yp, dp, sh.T, gp, up, sel, kChunk)
					})
					x := g.f32s(dp, n)
					sameF32(t, what+": dst", x, g.f32s(db, n))
					sameF32(t, what+": up", g.f32s(up.Y, n), g.f32s(ub.Y, n))
					if !mo.replace {
						sameF32(t, what+": gate", g.f32s(gp.Y, n), g.f32s(gb.Y, n))
					}
					sameLists(t, g, what+" row", sel, x, sh.N, kChunk)
				}
			}
		}
	}
}

// TestOpsGLUSel checks swiglu_sel (session 24): over gate and up apart,
// dst is SwiGLU's (GeGLU's) bit for bit, also where dst is gate (the
// model's SwiGLU(gate, gate, up)), and each row's list is
// wq.SelectApprox's of dst, on outliers, ties, zeros and a partial last
// chunk.
func TestOpsGLUSel(t *testing.T) {
	d, o := opsSetup(t)
	if !o.GLUSelects(1, 14336) {
		t.Skipf("%s: no swiglu_sel (no clusters)", d.Arch())
	}
	g := newGPUMem(t, d)
	r := rand.New(rand.NewPCG(24, 1))
	for _, sh := range []struct{ T, N int }{{1, 14336}, {2, 4096}, {1, 3000}} {
		for _, kChunk := range []int{1, 16, 64, 1024} {
			for mode := range 3 {
				var gv, uv []float32
				for range sh.T {
					gr, ur := gluTestRow(r, sh.N, mode)
					gv, uv = append(gv, gr...), append(uv, ur...)
				}
				S := kernels.DECSelected(sh.N, kChunk)
				n := sh.T * sh.N
				for _, mo := range []struct {
					act     kernels.Act
					inPlace bool
				}{{kernels.ActSiLU, true}, {kernels.ActGeluTanh, false}} {
					what := fmt.Sprintf("%+v k_chunk %d mode %d %+v", sh, kChunk, mode, mo)
					plain := o.SwiGLU
					if mo.act == kernels.ActGeluTanh {
						plain = o.GeGLU
					}
					gRef, uRef, dRef := g.put(cuda.Bytes(gv)), g.put(cuda.Bytes(uv)), g.poisonedF32(n)
					gp, up := g.put(cuda.Bytes(gv)), g.put(cuda.Bytes(uv))
					dp := g.poisonedF32(n)
					if mo.inPlace {
						dp = gp
					}
					sel := g.put(cuda.Bytes(slices.Repeat([]int32{-7}, sh.T*S)))
					g.run(func(c *cuda.Ctx, s cuda.Stream) error {
						if err := plain(c, s, dRef, gRef, uRef, n); err != nil {
							return err
						}
						return o.GLUSel(c, s, mo.act, dp, gp, up, sh.T, sh.N, sel, kChunk)
					})
					x := g.f32s(dp, n)
					sameF32(t, what+": dst", x, g.f32s(dRef, n))
					sameF32(t, what+": up", g.f32s(up, n), uv)
					sameLists(t, g, what+" row", sel, x, sh.N, kChunk)
				}
			}
		}
	}
}

// gluTestRow draws one row of a GLU's gate (DEC's test activations of
// mode) and up (random; all 1 in mode 1, so that the gate's ties pass
// through; every fifth 0 in mode 2).
func gluTestRow(r *rand.Rand, n, mode int) (gate, up []float32) {
	gate, up = kernels.DECTestActivations(r, n, mode), randF32(r, n, 1)
	for i := range up {
		switch {
		case mode == 1:
			up[i] = 1
		case mode == 2 && i%5 == 0:
			up[i] = 0
		}
	}
	return gate, up
}

// sameLists checks DEC's lists in sel (S = DECSelected(rowLen, kChunk)
// slots a row) against wq.SelectApprox of each row of x, exactly; what
// names the case and the kind of row.
func sameLists(t *testing.T, g *gpuMem, what string, sel cuda.DevicePtr, x []float32, rowLen, kChunk int) {
	t.Helper()
	S := kernels.DECSelected(rowLen, kChunk)
	rows := len(x) / rowLen
	got := make([]int32, rows*S)
	g.read(cuda.Bytes(got), sel)
	for row := range rows {
		want := wq.SelectApprox(nil, x[row*rowLen:(row+1)*rowLen], kChunk)
		if gr := got[row*S : (row+1)*S]; !slices.Equal(gr, want) {
			i := 0
			for i < len(want) && gr[i] == want[i] {
				i++
			}
			t.Fatalf("%s %d: the list differs from wq.SelectApprox's first at %d of %d: %d, want %d", what, row, i, S, gr[i], want[i])
		}
	}
}

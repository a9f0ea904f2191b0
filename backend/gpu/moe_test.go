package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/internal/half"
)

// moeCase is one shape of TestMixExperts.
type moeCase struct {
	T, H, IE, E, k int
	norm, shared   bool
	// grouped runs MixExperts's grouped path (moe.cu v2; else the GEMVs).
	grouped bool
}

// TestMixExperts holds RouteExperts and MixExperts (moe.cu) to a float64
// reference of transformers' routing and experts on random inputs: the
// experts each token chooses (the k largest softmax probabilities; the
// random logits are 0.15 apart at least, so float32 cannot reorder them),
// their weights, and the mixture out = Σ_j w_j·down(silu(gate·x) ⊙ up·x)
// (+ sigmoid(g)·shared), within 1e-3 of the reference relative to the
// row's norm: the weights are fp16 (exactly as the reference reads them),
// x is float32, and the dot products of ≤ 96 terms round in float32
// (~1e-6); a wrong expert or row gives O(1). Outputs are poisoned first;
// odd widths take the kernels' scalar path, T·k rows more than a block.
func TestMixExperts(t *testing.T) {
	g := gpuBackend(t)
	r := rand.New(rand.NewPCG(3, 9))
	for _, c := range []moeCase{
		{T: 1, H: 64, IE: 32, E: 8, k: 2, norm: true},
		{T: 7, H: 48, IE: 24, E: 4, k: 2, shared: true},
		{T: 33, H: 96, IE: 40, E: 16, k: 4, norm: true},
		{T: 5, H: 31, IE: 17, E: 6, k: 3, shared: true},
		{T: 2, H: 64, IE: 32, E: 40, k: 8, norm: true, shared: true},
		{T: 3, H: 32, IE: 16, E: 300, k: 5, norm: true}, // more experts than the router keeps in registers
	} {
		t.Run(fmt.Sprintf("T%d_H%d_IE%d_E%d_k%d", c.T, c.H, c.IE, c.E, c.k), func(t *testing.T) {
			checkMixExperts(t, g, r, c)
		})
	}
}

// TestMixExpertsGrouped holds MixExperts's grouped path (moe.cu v2: pairs
// grouped by expert on the device, each expert a tensor-core GEMM over
// fp16-rounded x and activations) to the float64 reference of
// TestMixExperts at T >= 64: each output within its bound of the reference
// that rounds x and each activation to fp16 as the kernels do (what is
// left: the tensor cores' fp32 accumulation, which truncates, carried
// through silu and the down GEMM, and an activation that rounds to the
// neighbouring fp16 where that error straddles a rounding boundary; a
// first bound of 2e-4 on the norm, from IEEE float32 accumulation, was
// wrong: the truncations reach 3e-4, call 1), and the norm within 2e-3 of
// the unrounded reference (fp16 inputs: ~2.4e-4 a rounding, as the dense
// prefill's cuBLASLt path). Then the same tokens in reverse order must give each
// token the same bits: a row's result does not depend on which tokens share
// its tile (a stale or unwritten row, or a race, shows there); the
// GEMMs' two fragment loaders (ldmatrix, 32-bit loads) the same bits; and
// each tile size (64, 32 and 16 rows, moe.cu v3; the default picks one from
// the sizes: 32, 32, 64 and 16 for the four cases) the same bits.
func TestMixExpertsGrouped(t *testing.T) {
	g := gpuBackend(t)
	r := rand.New(rand.NewPCG(5, 11))
	for _, c := range []moeCase{
		{T: 96, H: 128, IE: 192, E: 8, k: 2, norm: true},                // Mixtral's routing: ~24 rows an expert, partial tiles
		{T: 80, H: 128, IE: 64, E: 64, k: 8, norm: true, shared: true},  // Qwen's: 64 experts of ~10 rows, a shared expert
		{T: 200, H: 256, IE: 128, E: 4, k: 1},                           // experts of ~50 and more rows: several tiles each
		{T: 64, H: 64, IE: 256, E: 300, k: 5, norm: true, shared: true}, // more experts than tiles of rows
	} {
		c.grouped = true
		t.Run(fmt.Sprintf("T%d_H%d_IE%d_E%d_k%d", c.T, c.H, c.IE, c.E, c.k), func(t *testing.T) {
			checkMixExperts(t, g, r, c)
		})
	}
}

// mmaTrunc bounds the relative error of a dot product over K terms on
// mma.m16n8k16 with fp32 accumulators, in units of the sum of the terms'
// magnitudes: each mma adds 16 exact fp16 products and the accumulator with
// at most one truncation (≤ 2⁻²³ of the largest term) per term, 17 per mma
// (gpu/kernels' linearTol).
func mmaTrunc(K int) float64 { return float64((K+15)/16*17) * 0x1p-23 }

func checkMixExperts(t *testing.T, g *gpu.Backend, r *rand.Rand, c moeCase) {
	T, H, IE, E, k := c.T, c.H, c.IE, c.E, c.k
	rows := -1
	if c.grouped {
		rows = 1
	}
	defer gpu.SetMoEGroupRows(g, gpu.SetMoEGroupRows(g, rows))
	f16 := func(v float64) float64 { return float64(half.ToFloat32(half.FromFloat32(float32(v)))) }
	// Weights as fp16 values (what the backend stores).
	rnd := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = half.ToFloat32(half.FromFloat32(float32(r.NormFloat64() * scale)))
		}
		return v
	}
	load := func(name string, v []float32, shape ...int) backend.Weight {
		data := make([]byte, 4*len(v))
		for i, x := range v {
			b := math.Float32bits(x)
			data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
		}
		w, err := g.LoadWeight(name, backend.F32, shape, data)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.FreeWeight(w) })
		return w
	}
	gv, uv, dv := make([][]float32, E), make([][]float32, E), make([][]float32, E)
	gw, uw, dw := make([]backend.Weight, E), make([]backend.Weight, E), make([]backend.Weight, E)
	for e := range E {
		gv[e], uv[e], dv[e] = rnd(IE*H, 1/math.Sqrt(float64(H))), rnd(IE*H, 1/math.Sqrt(float64(H))), rnd(H*IE, 1/math.Sqrt(float64(IE)))
		gw[e], uw[e], dw[e] = load("gate", gv[e], IE, H), load("up", uv[e], IE, H), load("down", dv[e], H, IE)
	}
	ex, err := g.LoadExperts(gw, uw, dw, k)
	if err != nil {
		t.Fatal(err)
	}
	defer g.FreeExperts(ex)
	x := make([]float32, T*H)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	// Logits: a permutation of distinct levels 0.15 apart.
	logits := make([]float32, T*E)
	for tok := range T {
		perm := r.Perm(E)
		for i := range E {
			logits[tok*E+i] = float32(0.15*float64(perm[i]) - 1)
		}
	}
	shared := make([]float32, T*H)
	sg := make([]float32, T)
	for i := range shared {
		shared[i] = float32(r.NormFloat64())
	}
	for i := range sg {
		sg[i] = float32(2 * r.NormFloat64())
	}
	alloc := func(dt backend.DType, shape ...int) backend.Tensor {
		x, err := g.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Free(x) })
		return x
	}
	up := func(dst backend.Tensor, v []float32) {
		if err := g.Upload(dst, v); err != nil {
			t.Fatal(err)
		}
	}
	xt, lt, st, sgt := alloc(backend.F32, T, H), alloc(backend.F32, T, E), alloc(backend.F32, T, H), alloc(backend.F32, T, 1)
	up(xt, x)
	up(lt, logits)
	up(st, shared)
	up(sgt, sg)
	idx, wt, act, out := alloc(backend.I32, T, k), alloc(backend.F32, T, k), alloc(backend.F32, T*k, IE), alloc(backend.F32, T, H)
	nan := make([]float32, T*H)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	up(out, nan)
	g.RouteExperts(idx, wt, lt, c.norm)
	var sharedT, sgT backend.Tensor
	if c.shared {
		sharedT, sgT = st, sgt
	}
	g.MixExperts(out, xt, ex, idx, wt, act, sharedT, sgT)
	got := make([]float32, T*H)
	if err := g.Download(got, out); err != nil {
		t.Fatal(err)
	}
	gotIdx := make([]int32, T*k)
	if err := g.DownloadInt32(gotIdx, idx); err != nil {
		t.Fatal(err)
	}
	gotW := make([]float32, T*k)
	if err := g.Download(gotW, wt); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	worst, worstR, worstB := 0.0, 0.0, 0.0
	for tok := range T {
		l := logits[tok*E : (tok+1)*E]
		mx := math.Inf(-1)
		for _, v := range l {
			mx = max(mx, float64(v))
		}
		p := make([]float64, E)
		var sum float64
		for i, v := range l {
			p[i] = math.Exp(float64(v) - mx)
			sum += p[i]
		}
		order := make([]int, E)
		for i := range order {
			order[i], p[i] = i, p[i]/sum
		}
		slices.SortFunc(order, func(a, b int) int {
			if p[a] > p[b] {
				return -1
			}
			return 1
		})
		top := slices.Clone(order[:k])
		var s float64
		for _, e := range top {
			s += p[e]
		}
		slices.Sort(top) // the slots' order
		y, yr, tol, mag := make([]float64, H), make([]float64, H), make([]float64, H), make([]float64, H)
		xr := x[tok*H : (tok+1)*H]
		for j, e := range top {
			if int(gotIdx[tok*k+j]) != e {
				t.Fatalf("token %d slot %d: expert %d, want %d (slots %v)", tok, j, gotIdx[tok*k+j], e, top)
			}
			w := p[e]
			if c.norm {
				w /= s
			}
			if d := math.Abs(float64(gotW[tok*k+j]) - w); !(d <= 1e-6*w+1e-9) {
				t.Fatalf("token %d slot %d: weight %v, want %v", tok, j, gotW[tok*k+j], w)
			}
			a, ar, da := make([]float64, IE), make([]float64, IE), make([]float64, IE)
			for n := range IE {
				var gs, us, gr, ur, mg, mu float64
				for i := range H {
					gs += float64(gv[e][n*H+i]) * float64(xr[i])
					us += float64(uv[e][n*H+i]) * float64(xr[i])
					gx, ux := float64(gv[e][n*H+i])*f16(float64(xr[i])), float64(uv[e][n*H+i])*f16(float64(xr[i]))
					gr, ur, mg, mu = gr+gx, ur+ux, mg+math.Abs(gx), mu+math.Abs(ux)
				}
				a[n] = gs / (1 + math.Exp(-gs)) * us
				sig := 1 / (1 + math.Exp(-gr))
				act := gr * sig * ur
				ar[n] = f16(act)
				// The kernel's float32 activation is within dA of act (the
				// mma's truncations through silu'·u and silu, and float32's
				// own ~1e-6); its fp16 rounding then within da[n] of ar[n].
				dA := math.Abs(sig*(1+gr*(1-sig))*ur)*mmaTrunc(H)*mg + math.Abs(gr*sig)*mmaTrunc(H)*mu + 1e-6*math.Abs(act)
				da[n] = max(math.Abs(f16(act+dA)-ar[n]), math.Abs(ar[n]-f16(act-dA)))
			}
			for n := range H {
				var d, dr, md, ed float64
				for i := range IE {
					d += float64(dv[e][n*IE+i]) * a[i]
					dr += float64(dv[e][n*IE+i]) * ar[i]
					md += math.Abs(float64(dv[e][n*IE+i]) * ar[i])
					ed += math.Abs(float64(dv[e][n*IE+i])) * da[i]
				}
				y[n] += w * d
				yr[n] += w * dr
				tol[n] += math.Abs(w) * (mmaTrunc(IE)*md + ed)
				mag[n] += math.Abs(w * dr)
			}
		}
		if c.shared {
			sgm := 1 / (1 + math.Exp(-float64(sg[tok])))
			for n := range H {
				y[n] += sgm * float64(shared[tok*H+n])
				yr[n] += sgm * float64(shared[tok*H+n])
				mag[n] += math.Abs(sgm * float64(shared[tok*H+n]))
			}
		}
		relTo := func(ref []float64) float64 {
			var dn, yn float64
			for n := range H {
				d := float64(got[tok*H+n]) - ref[n]
				dn += d * d
				yn += ref[n] * ref[n]
			}
			return math.Sqrt(dn / yn)
		}
		rel, relR := relTo(y), relTo(yr)
		switch {
		case !c.grouped && !(rel <= 1e-3):
			t.Fatalf("token %d: ‖gpu − ref‖/‖ref‖ = %.3g", tok, rel)
		case c.grouped && !(rel <= 2e-3):
			t.Fatalf("token %d: ‖gpu − ref‖/‖ref‖ = %.3g (%.3g against the fp16-rounded reference)", tok, rel, relR)
		case c.grouped:
			// Each output within its bound of the fp16-rounded reference:
			// the mma truncations and activation roundings above, the
			// products by w and the k + 1 float32 adds of moe_combine.
			for n := range H {
				bound := tol[n] + float64(k+2)*0x1p-23*mag[n]
				if d := math.Abs(float64(got[tok*H+n]) - yr[n]); !(d <= bound) {
					t.Fatalf("token %d: out[%d] = %v, the fp16-rounded reference %v: |Δ| %.3g over the bound %.3g", tok, n, got[tok*H+n], yr[n], d, bound)
				}
				worstB = max(worstB, math.Abs(float64(got[tok*H+n])-yr[n])/bound)
			}
		}
		worst, worstR = max(worst, rel), max(worstR, relR)
	}
	t.Logf("worst ‖gpu − ref‖/‖ref‖ %.2e (%.2e against x and activations rounded to fp16; grouped: the largest |Δ| is %.2f of its bound)", worst, worstR, worstB)
	if !c.grouped {
		return
	}
	// The tokens in reverse order: each token's bits again.
	xRev, lRev, sRev, sgRev := make([]float32, T*H), make([]float32, T*E), make([]float32, T*H), make([]float32, T)
	for tok := range T {
		rt := T - 1 - tok
		copy(xRev[rt*H:(rt+1)*H], x[tok*H:(tok+1)*H])
		copy(lRev[rt*E:(rt+1)*E], logits[tok*E:(tok+1)*E])
		copy(sRev[rt*H:(rt+1)*H], shared[tok*H:(tok+1)*H])
		sgRev[rt] = sg[tok]
	}
	up(xt, xRev)
	up(lt, lRev)
	up(st, sRev)
	up(sgt, sgRev)
	up(out, nan)
	g.RouteExperts(idx, wt, lt, c.norm)
	g.MixExperts(out, xt, ex, idx, wt, act, sharedT, sgT)
	again := make([]float32, T*H)
	if err := g.Download(again, out); err != nil {
		t.Fatal(err)
	}
	// Fragments by 32-bit loads instead of ldmatrix: the same bits.
	defer gpu.SetMoEGroupLDM(g, gpu.SetMoEGroupLDM(g, false))
	up(out, nan)
	g.MixExperts(out, xt, ex, idx, wt, act, sharedT, sgT)
	lds := make([]float32, T*H)
	if err := g.Download(lds, out); err != nil {
		t.Fatal(err)
	}
	for i := range lds {
		if a, b := math.Float32bits(lds[i]), math.Float32bits(again[i]); a != b {
			t.Fatalf("out[%d]: %v with 32-bit fragment loads, %v with ldmatrix", i, lds[i], again[i])
		}
	}
	gpu.SetMoEGroupLDM(g, true)
	for _, tm := range []int{64, 32, 16} {
		old := gpu.SetMoEGroupTile(g, tm)
		up(out, nan)
		g.MixExperts(out, xt, ex, idx, wt, act, sharedT, sgT)
		tiled := make([]float32, T*H)
		err := g.Download(tiled, out)
		gpu.SetMoEGroupTile(g, old)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tiled {
			if a, b := math.Float32bits(tiled[i]), math.Float32bits(again[i]); a != b {
				t.Fatalf("out[%d]: %v with tiles of %d rows, %v with the default tiles", i, tiled[i], tm, again[i])
			}
		}
	}
	for tok := range T {
		rt := T - 1 - tok
		for n := range H {
			if a, b := math.Float32bits(again[rt*H+n]), math.Float32bits(got[tok*H+n]); a != b {
				t.Fatalf("token %d, reversed to %d: out[%d] %v, in order %v: a row's bits depend on the batch", tok, rt, n, again[rt*H+n], got[tok*H+n])
			}
		}
	}
}

package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// gemvqWeight returns a random [N, K] weight quantized to e with groups of
// G: N(0, 0.02²) with one input column in 97 twenty times wider (the
// outlier columns the GEMV tests share).
func gemvqWeight(t *testing.T, r *rand.Rand, e wq.Elem, G, N, K int) *wq.Matrix {
	t.Helper()
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
		if i%K%97 == 11 {
			w[i] *= 20
		}
	}
	qm, err := wq.Quantize(e, G, N, K, w)
	if err != nil {
		t.Fatal(err)
	}
	return qm
}

// gemvqX returns rows rows of x of K channels: N(0, 1) with one channel in
// 37 twenty times wider (the outlier channels the GEMV tests share).
func gemvqX(r *rand.Rand, rows, K int) []float32 {
	x := make([]float32, rows*K)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i%K%37 == 3 {
			x[i] *= 20
		}
	}
	return x
}

// TestGEMVQMatchesReference checks gemvq.cu (v2), gemvq3.cu (v3, one
// and two rows of x) and gemvq4.cu (v4, one row) against a float64 reference on
// wq's dequantized values Ŵ (wq.Matrix.At), for int3, int4 and int8, groups
// of 128, 64 and 32, one and two n-tiles of rows, K not a multiple of the
// 128-channel tile, N not a multiple of 16, and every split; weights
// N(0, 0.02²) with outlier input columns and x with outlier channels.
// x is rounded to fp16 (2⁻¹¹ relatively). With groups of whole tiles the
// kernel sums s·Σq·x + z·Σx per tile (exact codes, float32 sums); otherwise
// it rounds ŵ once to fp16 (within 2⁻¹¹ + 2⁻²⁴ of wq's). Either way each
// term's error is within 2⁻¹⁰·(1 + 2⁻¹⁰) of (|s|·q + |z|)·|x| ≥ |ŵ·x|, and
// the float32 sums of the tensor cores, the tiles and the split reduction add
// (K/16 + 40)·2⁻²³ of Σ(|s|·q + |z|)·|x|. v3's and v4's bounds are their
// own (below).
// y starts as NaN. The fp16 dequantization for
// prefill must equal fp16(ŵ) bit for bit.
func TestGEMVQMatchesReference(t *testing.T) {
	d, _ := opsSetup(t)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		e          wq.Elem
		G, T, N, K int
	}{{wq.Int4, 128, 1, 4096, 4096}, {wq.Int4, 128, 3, 1000, 1024}, {wq.Int4, 32, 8, 257, 2048}, {wq.Int8, 128, 1, 1024, 4096},
		{wq.Int8, 64, 5, 333, 1408}, {wq.Int4, 128, 2, 64, 14336}, {wq.Int4, 64, 16, 100, 1344}, {wq.Int4, 128, 11, 4096, 4096},
		{wq.Int3, 128, 1, 4096, 4096}, {wq.Int3, 32, 9, 77, 1440}, {wq.Int8, 128, 16, 200, 4096},
		// v3's rows (T <= 2): every format, N not a multiple of a row group
		// (4 or 2 rows, 16 or 8 a CTA), K a multiple of the group only (not
		// of the 1024-channel step), and the 8B shapes' K.
		{wq.Int4, 64, 2, 1000, 1344}, {wq.Int8, 32, 1, 257, 1440}, {wq.Int8, 128, 2, 333, 14336}, {wq.Int3, 64, 2, 77, 1408},
		{wq.Int3, 128, 1, 1030, 14336}, {wq.Int4, 128, 1, 1021, 4096},
		// v4's (T = 1, G 128 times a power of two): N not a multiple of the
		// 16-row group, an odd number of 128-channel tiles (a step of two
		// with one tile), groups of two tiles, the 8B shapes' K.
		{wq.Int4, 128, 1, 100, 1152}, {wq.Int4, 256, 1, 77, 1536}, {wq.Int8, 128, 1, 333, 1408}, {wq.Int3, 128, 1, 50, 384},
		{wq.Int4, 128, 1, 1000, 14336}, {wq.Int8, 256, 1, 129, 4096},
		// Launch's v5 (2048 rows or more: GEMVQ.UsesV5; v4 for int8 with
		// V4 set): N not a multiple of 16, odd tile counts.
		{wq.Int8, 128, 1, 2048, 1408}, {wq.Int4, 128, 1, 2050, 1152}, {wq.Int3, 256, 1, 2063, 1536}} {
		t.Run(fmt.Sprintf("int%d-g%d-T%d-N%d-K%d", c.e.Bits(), c.G, c.T, c.N, c.K), func(t *testing.T) {
			m := newGPUMem(t, d)
			qm := gemvqWeight(t, r, c.e, c.G, c.N, c.K)
			x := gemvqX(r, c.T, c.K)
			bias := make([]float32, c.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			wp, pp := m.put(cuda.Bytes(qm.Words)), m.put(cuda.Bytes(qm.Params))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			want := make([]float64, c.T*c.N)
			mag := make([]float64, c.T*c.N)
			wabs := make([]float64, c.N) // Σ(|s|q + |z|) of a row: v4's bound below fp16's normals
			for n := range c.N {
				for ti := range c.T {
					sum, m, wa := 0.0, 0.0, 0.0
					for k := range c.K {
						xv := float64(x[ti*c.K+k])
						sum += xv * float64(qm.At(n, k))
						sc, z := qm.Param(n, k/c.G)
						a := math.Abs(float64(half.ToFloat32(sc)))*float64(qm.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))
						m += a * math.Abs(xv)
						wa += a
					}
					want[ti*c.N+n], mag[ti*c.N+n], wabs[n] = sum+float64(bias[n]), m, wa
				}
			}
			prodErr := 0x1p-10 * (1 + 0x1p-10)
			// v2 (LaunchSplit) at every split; v3 (T <= 2: LaunchV3 at
			// splits 1, 2, 4, the last with its early weight loads; Launch
			// takes it at T = 1), whose products and sums are float32
			// over exact codes and x as it is: no term error of 2⁻¹⁰, and a
			// path of at most 32 + 2 + K/1024 + 5 + 4 + 1 float32 roundings
			// (a span's chain, the (s, z) step, the steps, the shuffles, the
			// slices, the bias), plus wq's own rounding of ŵ (2⁻²⁴).
			// v4 (T = 1, G 128 times a power of two: LaunchV4 at splits 1,
			// 2, 4, 8, the last with early loads; Launch takes it where
			// UsesV4, and v3 with V3 set) multiplies exact codes by x = hi + 2⁻¹¹·lo
			// on tensor cores: (K/64 + 83)·2⁻²⁴ of Σ(|s|q + |z|)|x| (the
			// split 4, the tensor core's float32 sums over a tile 33 with
			// truncation, Σx through the tensor core 37, the slices 7, wq's
			// ŵ 1, a tile's two roundings into the running sum K/64,
			// docs/perf/gemvq.md v4),
			// plus 2⁻³⁶·Σ(|s|q + |z|) where lo is below fp16's normals.
			// v5 (gemvq4.cu's gemv_q5: v4's math fed by a cp.async ring, the
			// same sums) has v4's bound.
			type run struct {
				ver            int
				split          int
				early, auto    bool
				v3knob, v4knob bool
				lanes          bool // v5 with each lane's own copies (GEMVQ.V5Lanes)
				v51            bool // v5 with session 15's step (GEMVQ.V51; else v5.2 where built)
			}
			var runs []run
			for _, split := range []int{1, 2, 4, 8, 16} {
				runs = append(runs, run{ver: 2, split: split})
			}
			if c.T <= kernels.GEMVQ3MaxRows {
				runs = append(runs, run{ver: 3, split: 1}, run{ver: 3, split: 2}, run{ver: 3, split: 4, early: true})
			}
			v4 := c.T == 1 && g.ReadsV4(c.e.Bits(), c.G, c.K)
			if v4 {
				runs = append(runs, run{ver: 4, split: 1}, run{ver: 4, split: 2}, run{ver: 4, split: 4}, run{ver: 4, split: 8, early: true},
					run{ver: 3, auto: true, v3knob: true},
					run{ver: 5, split: 1}, run{ver: 5, split: 2}, run{ver: 5, split: 4}, run{ver: 5, split: 8, early: true},
					run{ver: 5, split: 2, lanes: true}, run{ver: 5, split: 8, early: true, lanes: true},
					run{ver: 5, split: 2, v51: true}, run{ver: 5, split: 8, early: true, v51: true})
				v4auto := 3
				g.V4 = true
				if g.UsesV4(c.T, c.N, c.K, c.e.Bits(), c.G) {
					v4auto = 4
				}
				g.V4 = false
				runs = append(runs, run{ver: v4auto, auto: true, v4knob: true})
			}
			auto := 2
			switch {
			case g.UsesV5(c.T, c.N, c.K, c.e.Bits(), c.G):
				auto = 5
			case g.UsesV4(c.T, c.N, c.K, c.e.Bits(), c.G):
				auto = 4
			case c.T <= kernels.GEMVQ3AutoRows:
				auto = 3
			}
			runs = append(runs, run{ver: auto, auto: true})
			for _, rn := range runs {
				yp := m.put(cuda.Bytes(nanF32(c.T * c.N)))
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					g.EarlyWeights, g.V3, g.V4, g.V5Lanes, g.V51 = rn.early, rn.v3knob, rn.v4knob, rn.lanes, rn.v51
					defer func() { g.EarlyWeights, g.V3, g.V4, g.V5Lanes, g.V51 = false, false, false, false, false }()
					switch {
					case rn.auto:
						return g.Launch(cx, s, yp, xp, wp, pp, bp, c.T, c.N, c.K, c.e.Bits(), c.G)
					case rn.ver == 5:
						return g.LaunchV5(cx, s, yp, xp, wp, pp, bp, c.N, c.K, c.e.Bits(), c.G, rn.split)
					case rn.ver == 4:
						return g.LaunchV4(cx, s, yp, xp, wp, pp, bp, c.N, c.K, c.e.Bits(), c.G, rn.split)
					case rn.ver == 3:
						return g.LaunchV3(cx, s, yp, xp, wp, pp, bp, c.T, c.N, c.K, c.e.Bits(), c.G, rn.split)
					}
					return g.LaunchSplit(cx, s, yp, xp, wp, pp, bp, c.T, c.N, c.K, c.e.Bits(), c.G, rn.split)
				})
				got := make([]float32, c.T*c.N)
				m.read(cuda.Bytes(got), yp)
				for i, w := range want {
					tol := (prodErr+float64(c.K/16+40)*0x1p-23)*mag[i] + 0x1p-24*math.Abs(w)
					switch rn.ver {
					case 3:
						tol = float64(c.K/1024+46)*0x1p-23*mag[i] + 0x1p-24*math.Abs(w)
					case 4, 5:
						tol = float64(c.K/64+83)*0x1p-24*mag[i] + 0x1p-36*wabs[i%c.N] + 0x1p-24*math.Abs(w)
					}
					if gv := float64(got[i]); gv != gv || math.Abs(gv-w) > tol {
						t.Fatalf("%+v: y[%d,%d] = %g, want %g (tol %.3g)", rn, i/c.N, i%c.N, gv, w, tol)
					}
				}
			}
			hp := m.put(make([]byte, 2*c.N*c.K))
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
				return g.Dequant(cx, s, hp, wp, pp, c.N, c.K, c.e.Bits(), c.G)
			})
			h := make([]uint16, c.N*c.K)
			m.read(cuda.Bytes(h), hp)
			for n := range c.N {
				for k := range c.K {
					if want := half.FromFloat32(qm.At(n, k)); h[n*c.K+k] != want {
						t.Fatalf("dequant [%d,%d] = %#04x, want %#04x", n, k, h[n*c.K+k], want)
					}
				}
			}
		})
	}
}

// TestGEMVQDECMatchesSerial checks fused DEC (gemv_q_dec, and at one row
// of x gemvq3.cu's gemv_q3_dec over v3's sums: the DEC CTAs
// select the channels themselves, or read a select_topk launch's list past
// kernels.DECFusedSelectMax channels, and meet the base CTAs per tile)
// against serial mode bit for bit: gemv_q with the same split, then
// dec.cu's Select and Compensate (which TestDECCompensateMatchesWQ ties to
// wq.Compensate). int3 and int4 bases (int8 shares the code) with int4
// residuals (the fused kernels' only kind);
// 1 to 8 tokens; k_chunk from 8 to 512 with K a multiple of 1024 or not;
// activations with outliers, ties, zeros and subnormals; n_tb giving 1 to
// 32 outputs per DEC thread (every instantiation of P), and P = 1 slices
// of 32 to 128 outputs. y starts as NaN,
// each case runs four times in a row (the flags must be zero and every part
// word kernels.DECPartEmpty after every launch: the one-trip protocol's
// state for the next): three runs select in the kernel, the second
// keeping its lists (kernels.DECLaunch.Keep: they must equal select_topk's),
// and a fourth reads a list made from other activations (Listed), whose
// serial step is the reference then. The cases of a shape share its
// quantized weight and residual (fixture); each case draws its activations
// and bias from a generator of its own, so that -test.run may pick cases
// (docs/perf/dec.md, session 14, has the groups the GPU runs in parallel).
func TestGEMVQDECMatchesSerial(t *testing.T) {
	d, dk := decSetup(t)
	g, err := kernels.LoadGEMVQ(d)
	if err != nil {
		t.Fatal(err)
	}
	gd, err := kernels.LoadGEMVQDEC(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		e, res              wq.Elem
		N, K, T, kChunk, tb int
		pattern             int
	}{
		{wq.Int4, wq.Int4, 4096, 4096, 1, 8, 8, 0},
		{wq.Int4, wq.Int4, 1024, 4096, 3, 64, 4, 1},
		{wq.Int3, wq.Int4, 14336, 4096, 1, 32, 4, 0},   // P = 32
		{wq.Int4, wq.Int4, 4096, 14336, 2, 64, 8, 2},   // S = 896, selected in the kernel
		{wq.Int4, wq.Int4, 4096, 14336, 1, 128, 32, 0}, // S = 1792: a select_topk launch first
		{wq.Int4, wq.Int4, 256, 1152, 5, 512, 3, 2},    // a short last chunk
		{wq.Int4, wq.Int4, 384, 1536, 8, 100, 12, 1},
		// Outputs per DEC thread (P) 1, 2, 4, 8 and 16 on the 8B shapes.
		{wq.Int4, wq.Int4, 4096, 4096, 2, 64, 32, 1},  // P = 1 (256 threads)
		{wq.Int4, wq.Int4, 14336, 4096, 1, 64, 64, 2}, // P = 2 (128 threads)
		{wq.Int3, wq.Int4, 14336, 4096, 3, 64, 28, 0}, // P = 4
		{wq.Int4, wq.Int4, 14336, 4096, 2, 16, 16, 1}, // P = 8
		{wq.Int4, wq.Int4, 14336, 4096, 1, 8, 8, 2},   // P = 16
		// P = 1 with slices of 32 to 128 outputs (the n_tb that win at k 64;
		// v8's split path ran there, docs/perf/dec.md).
		{wq.Int4, wq.Int4, 4096, 14336, 1, 64, 64, 0},  // down at n_tb 64: 64 outputs, S = 896
		{wq.Int4, wq.Int4, 1024, 4096, 2, 64, 32, 1},   // k/v at n_tb 32: 32 outputs
		{wq.Int4, wq.Int4, 14336, 4096, 1, 64, 224, 2}, // gate/up at n_tb 224: 128-thread CTAs, 64 outputs
		{wq.Int3, wq.Int4, 4096, 4096, 3, 100, 40, 0},  // slices of 96 and 128 outputs
		// One row of x: v3's fused kernel (gemv_q3_dec, kernels.DECBaseV3)
		// at its splits 1, 2 and 4 (tiles of 16, 8 and 4 rows), k_chunk 1
		// and 64, K not a multiple of the 1024-channel step.
		{wq.Int4, wq.Int4, 1024, 4096, 1, 1, 32, 0},    // k/v: split 4
		{wq.Int4, wq.Int4, 1024, 4096, 1, 64, 8, 1},    // P = 1 at 128 threads
		{wq.Int4, wq.Int4, 4096, 4096, 1, 64, 32, 2},   // q/o: split 2
		{wq.Int4, wq.Int4, 4096, 14336, 1, 1, 8, 1},    // down: k 1, S = 14
		{wq.Int3, wq.Int4, 14336, 4096, 1, 64, 128, 0}, // gate/up
		{wq.Int4, wq.Int4, 256, 1152, 1, 64, 3, 2},     // a short last step and chunk
		{wq.Int3, wq.Int4, 384, 1536, 1, 1, 12, 1},
		{wq.Int4, wq.Int4, 128, 2176, 1, 16, 1, 0}, // one DEC CTA, 17 groups
	} {
		name := fmt.Sprintf("int%d-res%v-N%d-K%d-T%d-k%d-ntb%d-p%d", c.e.Bits(), c.res, c.N, c.K, c.T, c.kChunk, c.tb, c.pattern)
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(i)))
			m := newGPUMem(t, d)
			qm := fixture(t, fixtureKey{weight: true, e: c.e, N: c.N, K: c.K})
			res := mappedResidual(t, d, fixture(t, fixtureKey{e: c.res, N: c.N, K: c.K}))
			x := make([]float32, 0, c.T*c.K)
			for range c.T {
				x = append(x, kernels.DECTestActivations(r, c.K, c.pattern)...)
			}
			bias := make([]float32, c.N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			wp, pp := m.put(cuda.Bytes(qm.Words)), m.put(cuda.Bytes(qm.Params))
			xp, bp := m.put(cuda.Bytes(x)), m.put(cuda.Bytes(bias))
			S := kernels.DECSelected(c.K, c.kChunk)
			sel := m.put(make([]byte, 4*c.T*S))
			bits := c.e.Bits()

			// The base under DEC: v3 at one row (DECBaseV3), v2 else; the
			// fused launch's and LaunchDECBase's the same.
			v3, split, err := gd.BaseSplit(c.T, c.N, c.K, bits, c.kChunk)
			if err != nil {
				t.Fatal(err)
			}
			if v3 != kernels.DECBaseV3(c.T, c.K, bits, c.kChunk) || v3 && split != g.SplitV3For(1, c.N, c.K, bits) {
				t.Fatalf("fused base v3 %v split %d, LaunchDECBase's v3 %v split %d", v3, split, kernels.DECBaseV3(c.T, c.K, bits, c.kChunk), g.SplitV3For(1, c.N, c.K, bits))
			}
			ys := m.put(cuda.Bytes(nanF32(c.T * c.N)))
			ls := &kernels.DECLaunch{X: xp, Y: ys, Sel: sel, R: res, T: c.T, KChunk: c.kChunk, Blocks: c.tb}
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
				if err := g.LaunchDECBase(cx, s, ys, xp, wp, pp, bp, c.T, c.N, c.K, bits, 128, c.kChunk); err != nil {
					return err
				}
				if err := dk.Select(cx, s, ls); err != nil {
					return err
				}
				return dk.Compensate(cx, s, ls)
			})
			want := m.f32s(ys, c.T*c.N)

			// A list from other activations, for the listed run: the
			// serial step with it (base and x from x, rows from x2's list).
			x2 := make([]float32, 0, c.T*c.K)
			for range c.T {
				x2 = append(x2, kernels.DECTestActivations(r, c.K, (c.pattern+1)%3)...)
			}
			x2p, selX2 := m.put(cuda.Bytes(x2)), m.put(make([]byte, 4*c.T*S))
			ys2 := m.put(cuda.Bytes(nanF32(c.T * c.N)))
			m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
				if err := g.LaunchDECBase(cx, s, ys2, xp, wp, pp, bp, c.T, c.N, c.K, bits, 128, c.kChunk); err != nil {
					return err
				}
				if err := dk.Select(cx, s, &kernels.DECLaunch{X: x2p, Y: ys2, Sel: selX2, R: res, T: c.T, KChunk: c.kChunk, Blocks: c.tb}); err != nil {
					return err
				}
				return dk.Compensate(cx, s, &kernels.DECLaunch{X: xp, Y: ys2, Sel: selX2, R: res, T: c.T, KChunk: c.kChunk, Blocks: c.tb})
			})
			want2 := m.f32s(ys2, c.T*c.N)

			yf := m.put(cuda.Bytes(nanF32(c.T * c.N)))
			flags := m.put(make([]byte, 4*kernels.DECFlagWords(c.N)))
			part := m.put(cuda.Bytes(emptyPart(c.T * c.N)))
			poison := make([]int32, c.T*S)
			for i := range poison {
				poison[i] = -1
			}
			sel2 := m.put(cuda.Bytes(poison))
			// Runs 0-2 select in the kernel (run 1 keeps the lists in
			// sel2: they must equal Select's); run 3 reads x2's list.
			for run := range 4 {
				lf := &kernels.DECLaunch{X: xp, Y: yf, Sel: sel2, Flags: flags, Part: part, R: res, T: c.T, KChunk: c.kChunk, Blocks: c.tb,
					Keep: run == 1}
				wantRun := want
				if run == 3 {
					lf.Sel, lf.Listed, wantRun = selX2, true, want2
				}
				m.write(yf, cuda.Bytes(nanF32(c.T*c.N)))
				m.run(func(cx *cuda.Ctx, s cuda.Stream) error {
					gd.EarlyWeights = run == 2 // v3's early loads: the same bits
					defer func() { gd.EarlyWeights = false }()
					return gd.Launch(cx, s, yf, xp, wp, pp, bp, c.T, c.N, c.K, bits, 128, lf)
				})
				sameBits(t, fmt.Sprintf("fused run %d", run), m.f32s(yf, c.T*c.N), wantRun)
				fl := make([]uint32, kernels.DECFlagWords(c.N))
				m.read(cuda.Bytes(fl), flags)
				for i, f := range fl {
					if f != 0 {
						t.Fatalf("run %d: flag %d = %d after the launch, want 0", run, i, f)
					}
				}
				checkPartEmpty(t, m, run, part, c.T*c.N)
				if run == 1 {
					kept, ref := make([]int32, c.T*S), make([]int32, c.T*S)
					m.read(cuda.Bytes(kept), sel2)
					m.read(cuda.Bytes(ref), sel)
					for j := range kept {
						if kept[j] != ref[j] {
							t.Fatalf("kept list [%d] = %d, select_topk's %d", j, kept[j], ref[j])
						}
					}
				}
			}
			if slices.Equal(want2, want) {
				t.Fatalf("x2's list gives the same outputs as x's: the listed run proves nothing")
			}
		})
	}
}

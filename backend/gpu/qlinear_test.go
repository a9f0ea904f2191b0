package gpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/cpu"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/internal/half"
	"github.com/bitdecode/bitdecode/wq"
)

// TestQuantLinear runs Linear over packed int3, int4 and int8 weights on the
// GPU for decode batches (T = 1: gemvq3.cu's v3, whose float32 sums of exact
// products are within the bound below; T = 2, 3 and 12: gemvq.cu, one and
// two n-tiles) and a
// prefill batch (T = 20: fp16 dequantization and cuBLASLt) against a float64
// reference on ŵ. Both paths multiply fp16 x with float32 sums and ŵ either
// exact (codes times scales per tile) or rounded once to fp16, so the bound
// is 2⁻¹⁰·(1 + 2⁻¹⁰) plus (K/16 + 40)·2⁻²³ of Σ(|s|·q + |z|)·|x|
// (gemvq_test.go has the derivation). TestQuantLinearDEC covers weights
// with DEC.
func TestQuantLinear(t *testing.T) {
	b := gpuBackend(t)
	r := rand.New(rand.NewPCG(7, 8))
	const N, K = 300, 1024
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
	}
	bias := make([]float32, N)
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	bw, err := b.LoadWeight("bias", backend.F32, []int{N}, encode(backend.F32, bias))
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeWeight(bw)
	for _, e := range []wq.Elem{wq.Int4, wq.Int8, wq.Int3} {
		m, err := wq.Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		qw, err := b.LoadQuantWeight("w", m, nil)
		if err != nil {
			t.Fatalf("int%d: %v", e.Bits(), err)
		}
		for _, T := range []int{1, 2, 3, 12, 20} {
			x := make([]float32, T*K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			got := linearOnce(t, b, qw, bw, x, T, N, K)
			for ti := range T {
				for n := range N {
					want, mag := quantRef(m, bias, x[ti*K:(ti+1)*K], n)
					tol := (0x1p-10*(1+0x1p-10)+float64(K/16+40)*0x1p-23)*mag + 0x1p-24*math.Abs(want)
					if g := float64(got[ti*N+n]); g != g || math.Abs(g-want) > tol {
						t.Fatalf("int%d T=%d: y[%d,%d] = %g, want %g (tol %.3g)", e.Bits(), T, ti, n, g, want, tol)
					}
				}
			}
		}
		b.FreeWeight(qw)
	}
}

// TestQuantLinearGroupDEC runs LinearGroup over four int4 weights with DEC
// in fused mode, as q/k/v or gate/up run: the first weight of each
// k_chunk selects in its DEC CTAs and keeps the lists, the later ones read
// them. Every output must have the bits of its own Linear on a serial-mode
// backend (fresh selection each), on the first run and on CUDA graph
// replays.
func TestQuantLinearGroupDEC(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	const K, T = 1536, 2
	Ns := []int{384, 256, 384, 128}
	kChunks := []int{32, 32, 16, 16}
	gpuBackend(t) // skips without a GPU
	open := func(mode kernels.DECMode) *gpu.Backend {
		be, err := gpu.Open(0, gpu.Options{DECMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		return be
	}
	bFused, bSerial := open(kernels.DECFused), open(kernels.DECSerial)
	var fused, serial []backend.Weight
	for i, N := range Ns {
		w := make([]float32, N*K)
		for j := range w {
			w[j] = float32(0.02 * r.NormFloat64())
		}
		m, err := wq.Quantize(wq.Int4, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		res, err := wq.NewResidual(w, m, wq.Int4)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := bFused.LoadQuantWeight(fmt.Sprintf("w%d", i), m, &wq.DEC{R: res, KChunk: kChunks[i], Blocks: 3})
		if err != nil {
			t.Fatal(err)
		}
		sw, err := bSerial.LoadQuantWeight(fmt.Sprintf("w%d", i), m, &wq.DEC{R: res, KChunk: kChunks[i], Blocks: 3})
		if err != nil {
			t.Fatal(err)
		}
		fused, serial = append(fused, fw), append(serial, sw)
	}
	x := make([]float32, T*K)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i%K%89 == 7 {
			x[i] *= 25
		}
	}
	run := func(be backend.Backend, ws []backend.Weight, group bool) [][]float32 {
		xt, _ := be.Alloc(backend.F32, T, K)
		defer be.Free(xt)
		if err := be.Upload(xt, x); err != nil {
			t.Fatal(err)
		}
		ys := make([]backend.Tensor, len(ws))
		for i := range ws {
			ys[i], _ = be.Alloc(backend.F32, T, Ns[i])
			defer be.Free(ys[i])
		}
		if group {
			be.LinearGroup(ys, xt, ws, nil)
		} else {
			for i, w := range ws {
				be.Linear(ys[i], xt, w, nil)
			}
		}
		out := make([][]float32, len(ws))
		for i := range ws {
			out[i] = make([]float32, T*Ns[i])
			if err := be.Download(out[i], ys[i]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	want := run(bSerial, serial, false)
	for rep := range 3 {
		got := run(bFused, fused, true)
		for i := range got {
			for j := range got[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("run %d: weight %d (k_chunk %d): y[%d] = %g, serial %g", rep, i, kChunks[i], j, got[i][j], want[i][j])
				}
			}
		}
	}
}

// TestQuantLinearDEC runs Linear over weights with DEC (an int4 residual
// in mapped host memory, k_chunk 32) for a packed int4 base (gemvq.cu) and
// an int3 base (dequantized to fp16), decode (T = 3) and prefill (T = 20)
// batches, with a bias:
//   - the output must equal wq.Compensate applied to the same backend's
//     output without DEC, bit for bit (the selection and the sums are
//     wq's; the base product is deterministic);
//   - and the CPU backend's output with the same DEC within the base
//     products' tolerance (the compensation itself is identical);
//   - k_chunk 0 must give the base output exactly.
func TestQuantLinearDEC(t *testing.T) {
	b := gpuBackend(t)
	c := cpu.New(0)
	r := rand.New(rand.NewPCG(17, 18))
	const N, K = 384, 1536 // N a multiple of the residual group, K of the weight group
	w := make([]float32, N*K)
	for i := range w {
		w[i] = float32(0.02 * r.NormFloat64())
	}
	bias := make([]float32, N)
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	bw, err := b.LoadWeight("bias", backend.F32, []int{N}, encode(backend.F32, bias))
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeWeight(bw)
	cb, err := c.LoadWeight("bias", backend.F32, []int{N}, encode(backend.F32, bias))
	if err != nil {
		t.Fatal(err)
	}
	// Backends of the other DEC modes (Options.DECMode), each with its bias.
	modeBackend := func(mode kernels.DECMode, onDevice bool) (*gpu.Backend, backend.Weight) {
		mb, err := gpu.Open(0, gpu.Options{DECMode: mode, DECResidualOnDevice: onDevice})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mb.Close() })
		mbw, err := mb.LoadWeight("bias", backend.F32, []int{N}, encode(backend.F32, bias))
		if err != nil {
			t.Fatal(err)
		}
		return mb, mbw
	}
	bSerial, bwSerial := modeBackend(kernels.DECSerial, false)
	bCon, bwCon := modeBackend(kernels.DECConcurrent, false)
	bFused, bwFused := modeBackend(kernels.DECFused, false)
	bDev, bwDev := modeBackend(0, true) // the default mode (fused), the residual in device memory
	for _, e := range []wq.Elem{wq.Int4, wq.Int3} {
		m, err := wq.Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		res, err := wq.NewResidual(w, m, wq.Int4)
		if err != nil {
			t.Fatal(err)
		}
		const kChunk = 32
		load := func(be backend.QuantWeightLoader, dec *wq.DEC) backend.Weight {
			qw, err := be.LoadQuantWeight("w", m, dec)
			if err != nil {
				t.Fatalf("int%d: %v", e.Bits(), err)
			}
			return qw
		}
		base := load(b, nil)
		withDEC := load(b, &wq.DEC{R: res, KChunk: kChunk, Blocks: 5})
		// The same DEC on the second stream beside the base GEMV (decode
		// batches; prefill stays serial): the same bits.
		concurrent := load(bCon, &wq.DEC{R: res, KChunk: kChunk, Blocks: 5})
		// And inside the base GEMV's grid (fused mode).
		fused := load(bFused, &wq.DEC{R: res, KChunk: kChunk, Blocks: 3})
		serial := load(bSerial, &wq.DEC{R: res, KChunk: kChunk, Blocks: 5})
		onDev := load(bDev, &wq.DEC{R: res, KChunk: kChunk, Blocks: 4})
		zeroK := load(b, &wq.DEC{R: res, KChunk: 0})
		onCPU := load(c, &wq.DEC{R: res, KChunk: kChunk})
		for _, T := range []int{3, 20} {
			name := fmt.Sprintf("int%d T=%d", e.Bits(), T)
			x := make([]float32, T*K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if i%K%97 == 13 {
					x[i] *= 30
				}
			}
			run := func(be backend.Backend, qw, bias backend.Weight) []float32 {
				return linearOnce(t, be, qw, bias, x, T, N, K)
			}
			y0 := run(b, base, bw)
			got := run(b, withDEC, bw)
			want := slices.Clone(y0)
			for ti := range T {
				xt := x[ti*K : (ti+1)*K]
				wq.Compensate(want[ti*N:(ti+1)*N], xt, wq.SelectApprox(nil, xt, kChunk), res, nil)
			}
			checkCompensated(t, name, got, want, y0)
			for rep := range 3 { // later runs replay a CUDA graph (fused: the flags were reset)
				if y := run(bCon, concurrent, bwCon); !slices.Equal(y, got) {
					t.Fatalf("%s: concurrent DEC (run %d) differs from serial", name, rep)
				}
				if y := run(bFused, fused, bwFused); !slices.Equal(y, got) {
					t.Fatalf("%s: fused DEC (run %d) differs from the default", name, rep)
				}
				if y := run(bSerial, serial, bwSerial); !slices.Equal(y, got) {
					t.Fatalf("%s: serial DEC (run %d) differs from the default", name, rep)
				}
				if y := run(bDev, onDev, bwDev); !slices.Equal(y, got) {
					t.Fatalf("%s: DEC with the residual on the device (run %d) differs", name, rep)
				}
			}
			if y := run(b, zeroK, bw); !slices.Equal(y, y0) {
				t.Fatalf("%s: k_chunk 0 changed the base output", name)
			}
			ref := run(c, onCPU, cb)
			for ti := range T {
				for n := range N {
					// The base products' bound (TestQuantLinear); DEC adds
					// wq.Compensate's exact float32 sums on both sides.
					mag := 0.0
					for k := range K {
						sc, z := m.Param(n, k/m.Group)
						mag += (math.Abs(float64(half.ToFloat32(sc)))*float64(m.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))) * math.Abs(float64(x[ti*K+k]))
					}
					tol := (0x1p-10*(1+0x1p-10)+float64(K/16+40)*0x1p-23)*mag + 0x1p-22*math.Abs(float64(ref[ti*N+n]))
					i := ti*N + n
					if d := math.Abs(float64(got[i]) - float64(ref[i])); d > tol {
						t.Fatalf("%s: y[%d,%d] = %g, CPU backend %g (tol %.3g)", name, ti, n, got[i], ref[i], tol)
					}
				}
			}
		}
		for _, qw := range []backend.Weight{base, withDEC, zeroK} {
			b.FreeWeight(qw)
		}
		bCon.FreeWeight(concurrent)
		bFused.FreeWeight(fused)
		bSerial.FreeWeight(serial)
		bDev.FreeWeight(onDev)
		c.FreeWeight(onCPU)
	}
	m, _ := wq.Quantize(wq.Int4, 128, N, K, w)
	res, _ := wq.NewResidual(w, m, wq.Int4)
	if _, err := b.LoadQuantWeight("w", m, &wq.DEC{R: res, KChunk: 8, Blocks: 100}); err == nil {
		t.Fatal("n_tb 100 for 384 outputs (12 units) was accepted")
	}
	if _, err := b.LoadQuantWeight("w", m, &wq.DEC{R: m, KChunk: 8}); err == nil {
		t.Fatal("a residual of the wrong shape was accepted")
	}
}

// TestQuantLinearTiled runs Linear over int4 weights of 2048 rows or more
// without DEC, whose only device copy is the tiled layout by default
// (v6 at T = 1, v2 over the tiled layout at 2-16 rows, the tiled
// dequantization and cuBLASLt for prefill), on a backend with the default
// options and on one with Options.GEMVQWQ (wq's layout: v5.1, v2, the
// dequantization): the same bits at every T, for a quantized weight and a
// random one (LoadRandomQuant), and for the quantized one within
// TestQuantLinear's float64 bound, a bias added. int3 likewise (session
// 15d: its tiled layout), except at T = 1, where the tiled weight runs
// v6.1 and wq's v3.2 (other sums): there the bound only. int8 likewise
// (session 16: v6.1 against v4.1 at T = 1): the same bits at T = 1 where
// their splits agree and their slices start at the same tiles (K 4096), the
// bound only where they do not (K 1152: v4.1 at split 4, v6.1 at 8). At
// 17-128 rows (session 16) the tiled weights run gemmq.cu's fused
// dequant-GEMM (other sums; int8 since session 16's "int8 in gemmq.cu",
// where gpu.GEMMQRoutes: 2048+ rows, up to 64 rows of x at these K):
// there the bound, and the same bits as
// wq's layout on a backend with Options.GEMMQOff (the tiled dequantization
// and cuBLASLt).
func TestQuantLinearTiled(t *testing.T) {
	gpuBackend(t) // skips without a device
	tb, err := gpu.Open(0, gpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	ob, err := gpu.Open(0, gpu.Options{GEMMQOff: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	wb, err := gpu.Open(0, gpu.Options{GEMVQWQ: true})
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	r := rand.New(rand.NewPCG(15, 9))
	const N = 2100
	bias := make([]float32, N)
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	for _, c := range []struct {
		e      wq.Elem
		K      int
		bitsT1 bool // the same bits at T = 1 too
	}{{wq.Int4, 1152, true}, {wq.Int3, 1152, false}, {wq.Int8, 1152, false}, {wq.Int8, 4096, true}} {
		e, K := c.e, c.K
		w := make([]float32, N*K)
		for i := range w {
			w[i] = float32(0.02 * r.NormFloat64())
		}
		m, err := wq.Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		for _, random := range []bool{false, true} {
			run := func(be *gpu.Backend, x []float32, T int) []float32 {
				var qw backend.Weight
				var err error
				if random {
					qw, err = be.LoadRandomQuant("w", []int{N, K}, e, 128, 3, wq.DEC{})
				} else {
					qw, err = be.LoadQuantWeight("w", m, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer be.FreeWeight(qw)
				bw, err := be.LoadWeight("bias", backend.F32, []int{N}, encode(backend.F32, bias))
				if err != nil {
					t.Fatal(err)
				}
				defer be.FreeWeight(bw)
				return linearOnce(t, be, qw, bw, x, T, N, K)
			}
			for _, T := range []int{1, 2, 7, 9, 16, 17, 40, 64} {
				x := make([]float32, T*K)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				want, got := run(wb, x, T), run(tb, x, T)
				fused := gpu.GEMMQRoutes(T, N, K, e.Bits())
				for i := range want {
					if got[i] != got[i] || (c.bitsT1 || T > 1) && !fused && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("int%d K %d random %v T=%d: y[%d] = %g tiled, %g in wq's layout", e.Bits(), K, random, T, i, got[i], want[i])
					}
				}
				if fused {
					off := run(ob, x, T)
					for i := range want {
						if math.Float32bits(off[i]) != math.Float32bits(want[i]) {
							t.Fatalf("int%d random %v T=%d: y[%d] = %g tiled with GEMMQOff, %g in wq's layout", e.Bits(), random, T, i, off[i], want[i])
						}
					}
				}
				if random {
					continue
				}
				for ti := range T {
					for n := range N {
						ref, mag := quantRef(m, bias, x[ti*K:(ti+1)*K], n)
						tol := (0x1p-10*(1+0x1p-10)+float64(K/16+40)*0x1p-23)*mag + 0x1p-24*math.Abs(ref)
						if g := float64(got[ti*N+n]); math.Abs(g-ref) > tol {
							t.Fatalf("int%d T=%d: y[%d,%d] = %g, want %g (tol %.3g)", e.Bits(), T, ti, n, g, ref, tol)
						}
					}
				}
			}
		}
	}
}

// BenchmarkQuantLinearLayout times Linear over int4, int3 and int8
// Llama-3.1-8B gate/up (14336x4096), down (4096x14336) and q/o (4096x4096)
// weights, each in quantLayoutCopies random copies (cold in the H100's 50 MB
// L2), with the tiled layout as their only device copy (the default) and in
// wq's layout (Options.GEMVQWQ), alternated at each format, shape and T
// (quantLayoutRows): 1 (v6.1 against v5.2 for int4, v3.2 for int3, v4.1 for
// int8), 2, 8 and 16 (v2 over either layout), 24-256 (batched decode:
// gemmq.cu's fused dequant-GEMM over int4's and int3's tiled layouts up to
// 128 rows, the dequantization to fp16 and cuBLASLt otherwise) and 512 and
// 2048 (prefill chunks: the dequantization and cuBLASLt); then fp16 weights
// of the same shapes at the rows past 16 (cuBLASLt). It reports us per
// Linear (docs/perf/gemvq.md, sessions 15c, 15d, 15e and 16). Run on the
// GPU machine:
//
//	./gpu.test -test.run '^$' -test.bench QuantLinearLayout -test.count 2
func BenchmarkQuantLinearLayout(b *testing.B) {
	type layout struct {
		name string
		be   *gpu.Backend
		ws   map[quantLayoutKey][]backend.Weight
	}
	var lays []*layout
	for _, l := range []struct {
		name string
		o    gpu.Options
	}{{"wq", gpu.Options{GEMVQWQ: true}}, {"tiled", gpu.Options{}}} {
		be, err := gpu.Open(0, l.o)
		if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
			b.Skipf("no CUDA device: %v", err)
		}
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		lays = append(lays, &layout{name: l.name, be: be, ws: map[quantLayoutKey][]backend.Weight{}})
	}
	var keys []quantLayoutKey
	for _, e := range []wq.Elem{wq.Int4, wq.Int3, wq.Int8} {
		for _, s := range quantLayoutShapes {
			keys = append(keys, quantLayoutKey{e, s})
		}
	}
	for _, l := range lays {
		for _, k := range keys {
			for i := range quantLayoutCopies(k.shape[0] * k.shape[1] * k.elem.Bits() / 8) {
				w, err := l.be.LoadRandomQuant("w", []int{k.shape[0], k.shape[1]}, k.elem, 128, uint64(i+1), wq.DEC{})
				if err != nil {
					b.Fatal(err)
				}
				l.ws[k] = append(l.ws[k], w)
			}
		}
	}
	for _, k := range keys {
		s := k.shape
		for _, T := range quantLayoutRows {
			for _, l := range lays {
				b.Run(fmt.Sprintf("%v/%dx%d/T=%d/%s", k.elem, s[0], s[1], T, l.name), func(b *testing.B) {
					benchLinearRotating(b, l.be, l.ws[k], T, s)
				})
			}
		}
	}
	// fp16 weights, on the default backend.
	be := lays[len(lays)-1].be
	for _, s := range quantLayoutShapes {
		var ws []backend.Weight
		for i := range quantLayoutCopies(2 * s[0] * s[1]) {
			w, err := be.LoadRandom("w", []int{s[0], s[1]}, 0.02, uint64(i+1))
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, w)
		}
		for _, T := range quantLayoutRows[slices.Index(quantLayoutRows, kernels.GEMMQMinRows-1)+1:] {
			b.Run(fmt.Sprintf("fp16/%dx%d/T=%d", s[0], s[1], T), func(b *testing.B) {
				benchLinearRotating(b, be, ws, T, s)
			})
		}
	}
}

// benchLinearRotating times be's Linear of T random rows of x over each of
// ws ([N, K] = s) in turn, after three untimed rounds (direct, captured,
// replayed), and reports us per Linear.
func benchLinearRotating(b *testing.B, be *gpu.Backend, ws []backend.Weight, T int, s [2]int) {
	xt, _ := be.Alloc(backend.F32, T, s[1])
	yt, _ := be.Alloc(backend.F32, T, s[0])
	defer be.Free(xt)
	defer be.Free(yt)
	x := make([]float32, T*s[1])
	r := rand.New(rand.NewPCG(uint64(T), 1))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	if err := be.Upload(xt, x); err != nil {
		b.Fatal(err)
	}
	iter := func() {
		for _, w := range ws {
			be.Linear(yt, xt, w, nil)
		}
	}
	for range 3 { // direct, captured, replayed
		iter()
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		iter()
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(el.Seconds()*1e6/float64(b.N*len(ws)), "us/linear")
}

// quantLayoutRows are the rows of x BenchmarkQuantLinearLayout times:
// the GEMVs' (1-16), batched decode's (24-256: gemmq.cu's fused
// dequant-GEMM over the tiled layout up to 128 rows since session 16, the
// dequantization and cuBLASLt over wq's and above), prefill chunks (512,
// 2048). fp16 weights run those past 16.
var quantLayoutRows = []int{1, 2, 8, 16, 24, 32, 48, 64, 128, 256, 512, 2048}

// quantLayoutShapes are BenchmarkQuantLinearLayout's [N, K]: Llama-3.1-8B's
// gate/up, down and q/o.
var quantLayoutShapes = [][2]int{{14336, 4096}, {4096, 14336}, {4096, 4096}}

// quantLayoutCopies is how many copies of a weight of this many bytes
// BenchmarkQuantLinearLayout rotates over: at least 4, and at least
// 120 MB in all (cold in the H100's 50 MB L2).
func quantLayoutCopies(bytes int) int { return max(4, (120<<20+bytes-1)/bytes) }

// BenchmarkQuantLinearGroupQKV times LinearGroup over Llama-3.1-8B's q|k|v
// (4096, 1024 and 1024 rows of 4096) with int4, int3 and int8 weights, in
// quantLayoutCopies random copies (at least 120 MB, cold in the H100's 50 MB L2),
// each copy's three weights apart (q on v6.1, k and v on v3.2 at one row)
// and joined (JoinWeights: one v6.1 launch over 6144 rows and split_cols),
// alternated at each width and T (1, and 8: v2 over each weight either
// way), each followed by a small add (k += v), under CUDA graphs as in the
// decode step, with the environment's
// options (BITDECODE_GEMVQ_JOIN_SPLIT: the joined launch's split). It
// reports us per group
// (docs/perf/gemvq.md, session 16 "q|k|v packed, one launch"). Run on the
// GPU machine:
//
//	./gpu.test -test.run '^$' -test.bench QuantLinearGroupQKV -test.count 2
func BenchmarkQuantLinearGroupQKV(b *testing.B) {
	o, err := gpu.ParseOptions(os.LookupEnv) // BITDECODE_GEMVQ_JOIN_SPLIT
	if err != nil {
		b.Fatal(err)
	}
	be, err := gpu.Open(0, o)
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		b.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	const K = 4096
	ns := []int{4096, 1024, 1024}
	for _, e := range []wq.Elem{wq.Int4, wq.Int3, wq.Int8} {
		sets := map[bool][][]backend.Weight{}
		for _, joined := range []bool{false, true} {
			for i := range quantLayoutCopies((ns[0] + ns[1] + ns[2]) * K * e.Bits() / 8) {
				var ws []backend.Weight
				for j, n := range ns {
					w, err := be.LoadRandomQuant("w", []int{n, K}, e, 128, uint64(10*i+j+1), wq.DEC{})
					if err != nil {
						b.Fatal(err)
					}
					defer be.FreeWeight(w)
					ws = append(ws, w)
				}
				if joined {
					if err := be.JoinWeights(ws...); err != nil {
						b.Fatal(err)
					}
				}
				sets[joined] = append(sets[joined], ws)
			}
		}
		for _, T := range []int{1, 8} {
			for _, joined := range []bool{false, true} {
				name := map[bool]string{false: "apart", true: "joined"}[joined]
				b.Run(fmt.Sprintf("%v/T=%d/%s", e, T, name), func(b *testing.B) {
					benchGroupRotating(b, be, sets[joined], T, ns, K)
				})
			}
		}
	}
}

// benchGroupRotating times be's LinearGroup of T random rows of x over
// each weight set of sets (output widths ns, K inputs) in turn, after three
// untimed rounds (direct, captured, replayed), and reports us per group.
func benchGroupRotating(b *testing.B, be *gpu.Backend, sets [][]backend.Weight, T int, ns []int, K int) {
	xt, _ := be.Alloc(backend.F32, T, K)
	defer be.Free(xt)
	var ys []backend.Tensor
	for _, n := range ns {
		y, _ := be.Alloc(backend.F32, T, n)
		defer be.Free(y)
		ys = append(ys, y)
	}
	x := make([]float32, T*K)
	r := rand.New(rand.NewPCG(uint64(T), 2))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	if err := be.Upload(xt, x); err != nil {
		b.Fatal(err)
	}
	// Each group is followed by an op that does not fold into it (k += v,
	// as the step's RoPE and attention ops follow q|k|v): a joined group's
	// op is foldable, and a queue of foldable ops alone never ends a
	// segment, so without it every timed group ran directly in one flush,
	// outside graphs (this session's two calls: joined 12-15 us, then
	// 25-34 us a group).
	iter := func() {
		for _, ws := range sets {
			be.LinearGroup(ys, xt, ws, nil)
			be.Add(ys[1], ys[1], ys[2])
		}
	}
	// Untimed: direct, captured, replayed, for every phase of the queue's
	// segments against the iterations.
	for range groupBenchWarm {
		iter()
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		iter()
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(el.Seconds()*1e6/float64(b.N*len(sets)), "us/group")
}

// groupBenchWarm is how many untimed rounds benchGroupRotating runs.
const groupBenchWarm = 24

// quantLayoutKey names one of BenchmarkQuantLinearLayout's weights: its
// format and its [N, K].
type quantLayoutKey struct {
	elem  wq.Elem
	shape [2]int
}

// linearOnce runs be.Linear over the T rows of x (K channels a row), w and
// bias, and returns y's T·N values; the tensors are freed after.
func linearOnce(t *testing.T, be backend.Backend, w, bias backend.Weight, x []float32, T, N, K int) []float32 {
	t.Helper()
	xt, _ := be.Alloc(backend.F32, T, K)
	yt, _ := be.Alloc(backend.F32, T, N)
	defer be.Free(xt)
	defer be.Free(yt)
	if err := be.Upload(xt, x); err != nil {
		t.Fatal(err)
	}
	be.Linear(yt, xt, w, bias)
	y := make([]float32, T*N)
	if err := be.Download(y, yt); err != nil {
		t.Fatal(err)
	}
	return y
}

// quantRef returns output n of a packed Linear over one row x of K inputs
// in float64 (bias[n] + Σ x·ŵ, ŵ wq's dequantized value) and the magnitude
// Σ (|s|·q + |z|)·|x| its error bounds scale with.
func quantRef(m *wq.Matrix, bias, x []float32, n int) (ref, mag float64) {
	ref = float64(bias[n])
	for k, v := range x {
		xv := float64(v)
		ref += xv * float64(m.At(n, k))
		sc, z := m.Param(n, k/m.Group)
		mag += (math.Abs(float64(half.ToFloat32(sc)))*float64(m.Raw(n, k)) + math.Abs(float64(half.ToFloat32(z)))) * math.Abs(xv)
	}
	return ref, mag
}

// TestQuantLinearQ6DEC runs weights with DEC whose residual is in device
// memory and whose base v6.1 reads (session 19: the tiled layout, one row
// of x runs select_topk then gemvq6dec.cu's gemv_q6_dec), int4 and int3
// bases, k_chunk 8 and 64:
//   - Linear over one weight (4096 x 2048, a bias), T = 1 (gemv_q6_dec),
//     3 (v2 over the tiled layout, then Compensate) and 20 (prefill):
//     the output must equal wq.Compensate applied to the same backend's
//     output without DEC (the same tiled base), bit for bit, on the first
//     run and on CUDA graph replays;
//   - LinearGroup over q, k, v (2048, 512 and 512 rows; k and v alone stay
//     in wq's layout) joined by JoinWeights with their residuals: at T = 1
//     one selection and one gemv_q6_dec over the joined residual, at T = 2
//     one Linear each; every output must equal wq.Compensate applied to
//     the same group without DEC (joined alike), bit for bit;
//   - Options.DECQ3 keeps the weight in wq's layout (no q6).
func TestQuantLinearQ6DEC(t *testing.T) {
	gpuBackend(t) // skips without a GPU
	r := rand.New(rand.NewPCG(19, 22))
	open := func(o gpu.Options) *gpu.Backend {
		be, err := gpu.Open(0, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		return be
	}
	b := open(gpu.Options{DECResidualOnDevice: true})
	bQ3 := open(gpu.Options{DECResidualOnDevice: true, DECQ3: true})
	const K = 2048
	randX := func(T int) []float32 {
		x := make([]float32, T*K)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			if i%K%97 == 13 {
				x[i] *= 30
			}
		}
		return x
	}
	type layer struct {
		m   *wq.Matrix
		res *wq.Matrix
	}
	newLayer := func(e wq.Elem, N int) layer {
		w := make([]float32, N*K)
		for i := range w {
			w[i] = float32(0.02 * r.NormFloat64())
		}
		m, err := wq.Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		res, err := wq.NewResidual(w, m, wq.Int4)
		if err != nil {
			t.Fatal(err)
		}
		return layer{m, res}
	}
	compensated := func(y, x []float32, T, N int, res *wq.Matrix, kChunk int) []float32 {
		want := slices.Clone(y)
		for ti := range T {
			xt := x[ti*K : (ti+1)*K]
			wq.Compensate(want[ti*N:(ti+1)*N], xt, wq.SelectApprox(nil, xt, kChunk), res, nil)
		}
		return want
	}
	for _, e := range []wq.Elem{wq.Int4, wq.Int3} {
		for _, kChunk := range []int{8, 64} {
			const N = 4096
			l := newLayer(e, N)
			bias := make([]float32, N)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			bw, err := b.LoadWeight("bias", backend.F32, []int{N}, encode(backend.F32, bias))
			if err != nil {
				t.Fatal(err)
			}
			base, err := b.LoadQuantWeight("w", l.m, nil)
			if err != nil {
				t.Fatal(err)
			}
			withDEC, err := b.LoadQuantWeight("w", l.m, &wq.DEC{R: l.res, KChunk: kChunk})
			if err != nil {
				t.Fatal(err)
			}
			if q6, _ := gpu.Q6DEC(withDEC); !q6 {
				t.Fatalf("int%d: a %dx%d weight with a device residual is not a q6 weight", e.Bits(), N, K)
			}
			q3, err := bQ3.LoadQuantWeight("w", l.m, &wq.DEC{R: l.res, KChunk: kChunk})
			if err != nil {
				t.Fatal(err)
			}
			if q6, _ := gpu.Q6DEC(q3); q6 {
				t.Fatalf("int%d: DECQ3 made a q6 weight", e.Bits())
			}
			for _, T := range []int{1, 3, 20} {
				name := fmt.Sprintf("int%d k%d T=%d", e.Bits(), kChunk, T)
				x := randX(T)
				y0 := linearOnce(t, b, base, bw, x, T, N, K)
				want := compensated(y0, x, T, N, l.res, kChunk)
				for rep := range 3 { // later runs replay a CUDA graph
					checkCompensated(t, fmt.Sprintf("%s run %d", name, rep), linearOnce(t, b, withDEC, bw, x, T, N, K), want, y0)
				}
			}
			for _, w := range []backend.Weight{base, withDEC, bw} {
				b.FreeWeight(w)
			}
			bQ3.FreeWeight(q3)
		}
	}
	// q|k|v joined, with and without DEC.
	Ns := []int{2048, 512, 512}
	for _, e := range []wq.Elem{wq.Int4, wq.Int3} {
		const kChunk = 64
		var plain, dec []backend.Weight
		var res []*wq.Matrix
		for i, N := range Ns {
			l := newLayer(e, N)
			p, err := b.LoadQuantWeight(fmt.Sprintf("p%d", i), l.m, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := b.LoadQuantWeight(fmt.Sprintf("d%d", i), l.m, &wq.DEC{R: l.res, KChunk: kChunk})
			if err != nil {
				t.Fatal(err)
			}
			plain, dec, res = append(plain, p), append(dec, d), append(res, l.res)
		}
		for _, ws := range [][]backend.Weight{plain, dec} {
			if err := b.JoinWeights(ws...); err != nil {
				t.Fatal(err)
			}
		}
		for i, w := range dec {
			if q6, joint := gpu.Q6DEC(w); !q6 || !joint {
				t.Fatalf("int%d: joined DEC weight %d: q6 %v, joint residual %v", e.Bits(), i, q6, joint)
			}
		}
		group := func(ws []backend.Weight, x []float32, T int) [][]float32 {
			xt, _ := b.Alloc(backend.F32, T, K)
			defer b.Free(xt)
			if err := b.Upload(xt, x); err != nil {
				t.Fatal(err)
			}
			ys := make([]backend.Tensor, len(ws))
			for i := range ws {
				ys[i], _ = b.Alloc(backend.F32, T, Ns[i])
				defer b.Free(ys[i])
			}
			b.LinearGroup(ys, xt, ws, nil)
			out := make([][]float32, len(ws))
			for i := range ws {
				out[i] = make([]float32, T*Ns[i])
				if err := b.Download(out[i], ys[i]); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		for _, T := range []int{1, 2} {
			x := randX(T)
			y0 := group(plain, x, T)
			for rep := range 3 {
				got := group(dec, x, T)
				for i := range got {
					checkCompensated(t, fmt.Sprintf("int%d q|k|v T=%d run %d weight %d", e.Bits(), T, rep, i), got[i], compensated(y0[i], x, T, Ns[i], res[i], kChunk), y0[i])
				}
			}
		}
		for _, w := range append(plain, dec...) {
			b.FreeWeight(w)
		}
	}
}

// checkCompensated requires got, a DEC layer's output, to equal want
// (wq.Compensate applied to base, the layer's output without DEC) bit for
// bit, and DEC to have changed at least half of the outputs.
func checkCompensated(t *testing.T, name string, got, want, base []float32) {
	t.Helper()
	changed := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: y[%d] = %g, want %g (wq.Compensate of the base output %g)", name, i, got[i], want[i], base[i])
		}
		if got[i] != base[i] {
			changed++
		}
	}
	if changed < len(got)/2 {
		t.Fatalf("%s: DEC changed only %d of %d outputs", name, changed, len(got))
	}
}

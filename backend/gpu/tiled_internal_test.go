package gpu

// The tiled layout as a packed weight's only device copy (tiledLayout,
// docs/perf/gemvq.md session 15c): which weights take it, their bytes, and
// on the GPU that a loaded weight keeps one copy.

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// TestTiledLayoutRouting checks without a GPU which packed weights are
// stored in the tiled layout only: int4 without DEC where Launch runs v5
// at one row of x (2033+ rows, that is 128 row groups of 16; groups of
// 128·2^k), int3 likewise where LaunchTiled runs v6.1 (session 15d), int8
// where Launch runs v4.1 (session 16), unless Options.GEMVQWQ, GEMVQV2 or
// GEMVQV3 (whose one-row routes read wq's layout), or for int3
// GEMVQInt3V32, for int8 GEMVQInt8V4.
func TestTiledLayoutRouting(t *testing.T) {
	for _, c := range []struct {
		name       string
		o          Options
		bits, N, K int
		G          int
		plain      bool
		want       bool
	}{
		{"int4 gate/up", Options{}, 4, 14336, 4096, 128, true, true},
		{"int4 down", Options{}, 4, 4096, 14336, 128, true, true},
		{"int4 G256", Options{}, 4, 4096, 4096, 256, true, true},
		{"int4 128 row groups", Options{}, 4, 2033, 1152, 128, true, true},
		{"int4 127 row groups", Options{}, 4, 2032, 1152, 128, true, false},
		{"int4 k/v", Options{}, 4, 1024, 4096, 128, true, false},
		{"int4 with DEC", Options{}, 4, 14336, 4096, 128, false, false},
		{"int4 G64", Options{}, 4, 4096, 4096, 64, true, false},
		{"int4 G384", Options{}, 4, 4096, 4608, 384, true, false},
		{"int8 gate/up", Options{}, 8, 14336, 4096, 128, true, true},
		{"int8 down", Options{}, 8, 4096, 14336, 128, true, true},
		{"int8 q/o", Options{}, 8, 4096, 4096, 128, true, true},
		{"int8 128 row groups", Options{}, 8, 2033, 1152, 128, true, true},
		{"int8 127 row groups", Options{}, 8, 2032, 1152, 128, true, false},
		{"int8 k/v", Options{}, 8, 1024, 4096, 128, true, false},
		{"int8 with DEC", Options{}, 8, 14336, 4096, 128, false, false},
		{"int8 G64", Options{}, 8, 4096, 4096, 64, true, false},
		{"int8 GEMVQInt8V4", Options{GEMVQInt8V4: true}, 8, 14336, 4096, 128, true, false},
		{"int4 GEMVQInt8V4", Options{GEMVQInt8V4: true}, 4, 14336, 4096, 128, true, true},
		{"int8 GEMVQWQ", Options{GEMVQWQ: true}, 8, 14336, 4096, 128, true, false},
		{"int8 GEMVQV2", Options{GEMVQV2: true}, 8, 14336, 4096, 128, true, false},
		{"int8 GEMVQV3", Options{GEMVQV3: true}, 8, 14336, 4096, 128, true, false},
		{"int3 gate/up", Options{}, 3, 14336, 4096, 128, true, true},
		{"int3 down", Options{}, 3, 4096, 14336, 128, true, true},
		{"int3 127 row groups", Options{}, 3, 2032, 1152, 128, true, false},
		{"int3 with DEC", Options{}, 3, 14336, 4096, 128, false, false},
		{"int3 G64", Options{}, 3, 4096, 4096, 64, true, false},
		{"int3 GEMVQInt3V32", Options{GEMVQInt3V32: true}, 3, 14336, 4096, 128, true, false},
		{"int4 GEMVQInt3V32", Options{GEMVQInt3V32: true}, 4, 14336, 4096, 128, true, true},
		{"int3 GEMVQWQ", Options{GEMVQWQ: true}, 3, 14336, 4096, 128, true, false},
		{"int3 GEMVQV3", Options{GEMVQV3: true}, 3, 14336, 4096, 128, true, false},
		{"GEMVQWQ", Options{GEMVQWQ: true}, 4, 14336, 4096, 128, true, false},
		{"GEMVQV2", Options{GEMVQV2: true}, 4, 14336, 4096, 128, true, false},
		{"GEMVQV3", Options{GEMVQV3: true}, 4, 14336, 4096, 128, true, false},
	} {
		// quantKernels' knobs from the options, on a GEMVQ with no device
		// (UsesV5 and ReadsV6 read only them and the shape).
		g := &kernels.GEMVQ{V2: c.o.GEMVQV2, V3: c.o.GEMVQV3, V32Int3: c.o.GEMVQInt3V32, V4Int8: c.o.GEMVQInt8V4}
		if got := tiledLayout(&c.o, g, c.bits, c.N, c.K, c.G, c.plain); got != c.want {
			t.Errorf("%s: tiledLayout(int%d [%d, %d] G%d, plain %v) = %v, want %v", c.name, c.bits, c.N, c.K, c.G, c.plain, got, c.want)
		}
	}
}

// TestTiledLayoutBytes checks the device bytes of a packed weight in each
// layout without a GPU: on Llama-3.1-8B's int4 weights that take the tiled
// layout (q/o, gate, up, down: 2048+ rows) the same bytes as wq's layout,
// so the tiled-only model needs what wq's did, not twice (session 15's
// second copy: +3.5 GB over 32 layers); a shape with a partial row group
// and step pays only that padding, which PackTiles' sizes count.
func TestTiledLayoutBytes(t *testing.T) {
	const layers = 32
	total, totalWQ := 0, 0
	for _, s := range []struct{ N, K, count int }{{4096, 4096, 2}, {14336, 4096, 2}, {4096, 14336, 1}} {
		tiled, plain := quantBytes(true, 4, s.N, s.K, 128), quantBytes(false, 4, s.N, s.K, 128)
		if tiled != plain || plain != s.N*s.K/2+4*s.N*(s.K/128) {
			t.Fatalf("[%d, %d]: tiled %d bytes, wq's layout %d, want %d both", s.N, s.K, tiled, plain, s.N*s.K/2+4*s.N*(s.K/128))
		}
		total += layers * s.count * tiled
		totalWQ += layers * s.count * plain
	}
	if total != totalWQ || total < 3<<30 || total > 4<<30 {
		t.Fatalf("8B tiled int4 weights: %d bytes, wq's layout %d (want equal, 3-4 GiB)", total, totalWQ)
	}
	// int3 (session 15d): the same bytes as wq's on the 8B shapes too.
	for _, s := range []struct{ N, K int }{{4096, 4096}, {14336, 4096}, {4096, 14336}} {
		tiled, plain := quantBytes(true, 3, s.N, s.K, 128), quantBytes(false, 3, s.N, s.K, 128)
		if tiled != plain || plain != s.N*s.K*3/8+4*s.N*(s.K/128) {
			t.Fatalf("int3 [%d, %d]: tiled %d bytes, wq's layout %d, want %d both", s.N, s.K, tiled, plain, s.N*s.K*3/8+4*s.N*(s.K/128))
		}
	}
	// int8 (session 16): the same bytes as wq's on the 8B shapes, and with
	// a partial row group only its rows' padding (a step is one tile).
	for _, s := range []struct{ N, K int }{{4096, 4096}, {14336, 4096}, {4096, 14336}, {2050, 1152}} {
		tiled, plain := quantBytes(true, 8, s.N, s.K, 128), quantBytes(false, 8, s.N, s.K, 128)
		rows := (s.N + 15) / 16 * 16
		if want := rows*s.K + 4*rows*(s.K/128); tiled != want || plain != s.N*s.K+4*s.N*(s.K/128) {
			t.Fatalf("int8 [%d, %d]: tiled %d bytes, wq's layout %d, want %d and %d", s.N, s.K, tiled, plain, want, s.N*s.K+4*s.N*(s.K/128))
		}
	}
	// 2050 rows (a partial row group) and K 1152 (9 tiles: a half step).
	const N, K = 2050, 1152
	tw, tp, err := kernels.PackTiles(4, N, K, 128, make([]uint32, N*K/8), make([]uint16, 2*N*(K/128)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := quantBytes(true, 4, N, K, 128), 4*(len(tw)+len(tp)); got != want {
		t.Fatalf("[%d, %d] tiled: %d bytes, PackTiles gives %d", N, K, got, want)
	}
	if got, want := quantBytes(true, 4, N, K, 128), 4*(2064*5*32+2064*9); got != want {
		t.Fatalf("[%d, %d] tiled: %d bytes, want %d (129 row groups of 5 steps and 9 groups)", N, K, got, want)
	}
}

// TestTiledOnlyCopy loads int4 (and int8, session 16) weights on the GPU
// and checks which copies they keep (DEC needs N a multiple of 128): 2048+ rows without DEC (LoadQuantWeight, LoadRandomQuant)
// the tiled one only; fewer rows, DEC or Options.GEMVQWQ wq's only.
func TestTiledOnlyCopy(t *testing.T) {
	open := func(o Options) *Backend {
		b, err := Open(0, o)
		if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
			t.Skipf("no CUDA device: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b, bwq := open(Options{}), open(Options{GEMVQWQ: true})
	r := rand.New(rand.NewPCG(15, 3))
	quantElem := func(e wq.Elem, N, K int) *wq.Matrix {
		w := make([]float32, N*K)
		for i := range w {
			w[i] = float32(0.02 * r.NormFloat64())
		}
		m, err := wq.Quantize(e, 128, N, K, w)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	quant := func(N, K int) *wq.Matrix { return quantElem(wq.Int4, N, K) }
	big, small := quant(2176, 1152), quant(1000, 1152)
	res, err := wq.NewResidual(make([]float32, 2176*1152), big, wq.Int4)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, be *Backend, load func(*Backend) (backend.Weight, error), tiled bool) {
		bw, err := load(be)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w := bw.(*weight)
		defer be.FreeWeight(w)
		if got := w.qt != 0 && w.qtp != 0; got != tiled || (w.q != 0 && w.qp != 0) == tiled || !w.isQuant() {
			t.Fatalf("%s: q %#x qp %#x qt %#x qtp %#x, want the tiled copy only: %v", name, w.q, w.qp, w.qt, w.qtp, tiled)
		}
	}
	loadQ := func(m *wq.Matrix, dec *wq.DEC) func(*Backend) (backend.Weight, error) {
		return func(be *Backend) (backend.Weight, error) { return be.LoadQuantWeight("w", m, dec) }
	}
	random := func(N int, dec wq.DEC) func(*Backend) (backend.Weight, error) {
		return func(be *Backend) (backend.Weight, error) {
			return be.LoadRandomQuant("w", []int{N, 1152}, wq.Int4, 128, 5, dec)
		}
	}
	check("2176 rows", b, loadQ(big, nil), true)
	check("2176 rows, k_chunk 0", b, loadQ(big, &wq.DEC{R: res, KChunk: 0}), true)
	check("2176 rows random", b, random(2176, wq.DEC{}), true)
	check("1000 rows", b, loadQ(small, nil), false)
	check("2176 rows with DEC", b, loadQ(big, &wq.DEC{R: res, KChunk: 8}), false)
	check("2176 rows random with DEC", b, random(2176, wq.DEC{KChunk: 8}), false)
	check("2176 rows, GEMVQWQ", bwq, loadQ(big, nil), false)
	check("2176 rows random, GEMVQWQ", bwq, random(2176, wq.DEC{}), false)
	// int8 (session 16): tiled where Launch runs v4.1, wq's layout under
	// Options.GEMVQInt8V4.
	b8 := open(Options{GEMVQInt8V4: true})
	big8 := quantElem(wq.Int8, 2176, 1152)
	random8 := func(N int) func(*Backend) (backend.Weight, error) {
		return func(be *Backend) (backend.Weight, error) {
			return be.LoadRandomQuant("w", []int{N, 1152}, wq.Int8, 128, 5, wq.DEC{})
		}
	}
	check("int8 2176 rows", b, loadQ(big8, nil), true)
	check("int8 2176 rows random", b, random8(2176), true)
	check("int8 1000 rows", b, loadQ(quantElem(wq.Int8, 1000, 1152), nil), false)
	check("int8 2176 rows, GEMVQWQ", bwq, loadQ(big8, nil), false)
	check("int8 2176 rows, GEMVQInt8V4", b8, loadQ(big8, nil), false)
	check("int8 2176 rows random, GEMVQInt8V4", b8, random8(2176), false)
}

// quantBytes returns the device bytes of a packed int-bits [N, K] weight
// with groups of G in the tiled layout (kernels.TiledBytes, what tileQuant
// allocates) or in wq's (what loadQuantBase uploads): codes and params,
// DEC state apart.
func quantBytes(tiled bool, bits, N, K, G int) int {
	if tiled {
		words, params := kernels.TiledBytes(bits, N, K, G)
		return words + params
	}
	return 4*(N*K/32*bits) + 4*(N*(K/G))
}

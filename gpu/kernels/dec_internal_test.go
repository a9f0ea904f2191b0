package kernels

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/wq"
)

// selectModel computes what dec.cu's select_topk writes, step by step as the
// kernel does (block max, histogram, the crossing bucket of an inclusive
// scan, two exclusive prefix sums in thread order), rather than by wq's
// loop: a CPU check of the kernel's formulation. It fails t if a step's
// invariant breaks (no unique crossing, a position beyond kc).
func selectModel(t *testing.T, x []float32, kChunk int) []int32 {
	t.Helper()
	const chunkN = wq.ChunkChannels
	K := len(x)
	kChunk = min(kChunk, chunkN)
	out := make([]int32, DECSelected(K, kChunk))
	for i := range out {
		out[i] = -1
	}
	kcFull := wq.ChunkSelect(kChunk, chunkN)
	for chunk := 0; chunk*chunkN < K; chunk++ {
		c0 := chunk * chunkN
		c := min(chunkN, K-c0)
		kc := wq.ChunkSelect(kChunk, c)
		if kc == 0 {
			continue
		}
		var key, b [chunkN]int
		keyMax := -1
		for i := range chunkN {
			key[i] = -1
			if i < c {
				key[i] = int(math.Float32bits(x[c0+i]) & 0x7fffffff >> 20)
			}
			keyMax = max(keyMax, key[i])
		}
		var hist [256]int
		for i := range chunkN {
			b[i] = 256
			if i < c {
				b[i] = min(keyMax-key[i], 255)
				hist[b[i]]++
			}
		}
		var cum [256]int
		run := 0
		for j, h := range hist {
			run += h
			cum[j] = run
		}
		B, fill, crossings := -1, 0, 0
		for j := range cum {
			prev := 0
			if j > 0 {
				prev = cum[j-1]
			}
			if cum[j] >= kc && prev < kc {
				B, fill = j, kc-prev
				crossings++
			}
		}
		if crossings != 1 {
			t.Fatalf("chunk %d: %d crossing buckets, want exactly 1", chunk, crossings)
		}
		rankB, pos := 0, 0
		for i := range chunkN {
			valid := i < c
			inB := valid && b[i] == B
			take := valid && (b[i] < B || (inB && rankB < fill))
			if inB {
				rankB++
			}
			if take {
				if pos >= kc {
					t.Fatalf("chunk %d: position %d beyond kc %d", chunk, pos, kc)
				}
				out[chunk*kcFull+pos] = int32(c0 + i)
				pos++
			}
		}
		if pos != kc {
			t.Fatalf("chunk %d: took %d channels, want %d", chunk, pos, kc)
		}
	}
	return out
}

// DECTestActivations (exported to the GPU tests of package kernels_test)
// returns K activations like a transformer layer's inputs:
// N(0, 1), a few outlier channels (x20-x50, the same channels every token
// would have), with mode adding exact ties (values from a small set), zeros,
// signed zeros and subnormals, which stress the boundary fill.
func DECTestActivations(r *rand.Rand, K, mode int) []float32 {
	x := make([]float32, K)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i%97 == 13 {
			x[i] *= float32(20 + 30*r.Float64())
		}
		switch mode {
		case 1: // ties: a few magnitudes, random signs
			x[i] = float32([]float64{0.5, 1, 1.0625, 3, 40}[r.IntN(5)])
			if r.IntN(2) == 0 {
				x[i] = -x[i]
			}
		case 2: // zeros, negative zeros and subnormals among normal values
			switch r.IntN(4) {
			case 0:
				x[i] = 0
			case 1:
				x[i] = float32(math.Copysign(0, -1))
			case 2:
				x[i] = math.Float32frombits(uint32(1 + r.IntN(1000)))
			}
		}
	}
	return x
}

// TestDECSelectModelMatchesWQ checks the kernel's formulation of the
// approximate top-k (selectModel) against wq.SelectApprox on activations
// with outliers, ties, zeros and subnormals, for K not a multiple of 1024
// and k_chunk from 1 past 1024.
func TestDECSelectModelMatchesWQ(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, K := range []int{1, 31, 1000, 1024, 1537, 4096, 14336, 3001} {
		for _, kChunk := range []int{0, 1, 3, 8, 64, 500, 1024, 5000} {
			for mode := range 3 {
				x := DECTestActivations(r, K, mode)
				want := wq.SelectApprox(nil, x, kChunk)
				got := selectModel(t, x, kChunk)
				if len(want) != DECSelected(K, kChunk) {
					t.Fatalf("K=%d k_chunk=%d: wq selects %d, DECSelected says %d", K, kChunk, len(want), DECSelected(K, kChunk))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("K=%d k_chunk=%d mode %d: model %v..., wq %v...", K, kChunk, mode, got[:min(8, len(got))], want[:min(8, len(want))])
				}
			}
		}
	}
}

// TestDECSlices checks the output slicing: contiguous units covering [0,
// N/32), words per thread enough for the largest slice from DECMinBlocks on
// (and not below it), and batches of at least one row in dec.cu's shared
// memory for every slice (so its loops make progress).
func TestDECSlices(t *testing.T) {
	for _, e := range decElems {
		for _, N := range []int{128, 1024, 4096, 14336, 28672} {
			if DECReads(e, N) != nil {
				t.Fatalf("%v N=%d: %v", e, N, DECReads(e, N))
			}
			lo := DECMinBlocks(e, N)
			if lo > 1 && decWords(e, N, lo-1, DECThreads) != 0 {
				t.Errorf("%v N=%d: %d blocks fit, DECMinBlocks says %d", e, N, lo-1, lo)
			}
			for blocks := lo; blocks <= DECMaxBlocks(N); blocks++ {
				w := decWords(e, N, blocks, DECThreads)
				if w == 0 {
					t.Fatalf("%v N=%d n_tb=%d: no words per thread", e, N, blocks)
				}
				next := 0
				for b := range blocks {
					u0, u1 := decSlice(N, blocks, b)
					if u0 != next || u1 < u0 {
						t.Fatalf("%v N=%d n_tb=%d: block %d slice [%d, %d), want start %d", e, N, blocks, b, u0, u1, next)
					}
					next = u1
					if words := (u1 - u0) * decUnitWords(e); words > w*DECThreads {
						t.Fatalf("%v N=%d n_tb=%d: slice of %d words > %d·%d", e, N, blocks, words, w, DECThreads)
					}
					if u1 > u0 && decBatchRows(e, u0, u1, DECThreads, 2*decParamLoads) < 1 {
						t.Fatalf("%v N=%d n_tb=%d: block %d batches no rows", e, N, blocks, b)
					}
				}
				if next != N/decUnit {
					t.Fatalf("%v N=%d n_tb=%d: slices end at unit %d, want %d", e, N, blocks, next, N/decUnit)
				}
			}
		}
	}
	// Fused mode: P outputs per thread cover every slice from
	// DECFusedMinBlocks on (not below it) with the fused kernels' threads.
	for _, N := range []int{128, 1024, 4096, 14336, 28672} {
		lo := DECFusedMinBlocks(N)
		if lo > 1 && decOutputs(N, lo-1, decMinThreads) != 0 {
			t.Errorf("N=%d: %d blocks fit fused, DECFusedMinBlocks says %d", N, lo-1, lo)
		}
		for _, threads := range []int{decMinThreads, 2 * decMinThreads} {
			for blocks := lo; blocks <= DECMaxBlocks(N); blocks++ {
				p := decOutputs(N, blocks, threads)
				if p == 0 {
					t.Fatalf("N=%d n_tb=%d threads=%d: no outputs per thread", N, blocks, threads)
				}
				most := 0
				for b := range blocks {
					u0, u1 := decSlice(N, blocks, b)
					most = max(most, (u1-u0)*decUnit)
					pl := decParamLoads
					if threads <= decMinThreads {
						pl *= 2 // dec.cu's param_loads
					}
					if u1 > u0 && decBatchRows(wq.Int4, u0, u1, threads, pl) < 1 {
						t.Fatalf("N=%d n_tb=%d threads=%d: block %d batches no rows", N, blocks, threads, b)
					}
				}
				if most > p*threads || (p > 1 && most <= p/2*threads) {
					t.Fatalf("N=%d n_tb=%d threads=%d: largest slice %d outputs, P = %d (not the fewest that cover it)", N, blocks, threads, most, p)
				}
			}
		}
	}
	if DECReads(wq.Int3, 4096) == nil || DECReads(wq.Int4, 4000) == nil || DECReads(wq.FP16, 48) == nil || DECReads(wq.Int4, 96) == nil {
		t.Error("DECReads accepts a shape it cannot read")
	}
}

// decBatchRows mirrors dec.cu's rmax: the rows of one shared-memory batch
// for the slice of units [u0, u1) with paramLoads param loads per thread.
func decBatchRows(e wq.Elem, u0, u1, threads, paramLoads int) int {
	nch := (u1 - u0) * decUnitWords(e) / 4
	rows := min(threads, threads*decLoads/nch)
	if e.IsInt() {
		g0 := u0 * decUnit / wq.ResidualGroup
		np := (u1*decUnit-1)/wq.ResidualGroup + 1 - g0
		rows = min(rows, threads*paramLoads/np)
	}
	return rows
}

// TestDECArgsLayout checks the packing of dec::Args: eight pointers, then
// N, K, T, S, k_chunk (capped at 1024), n_tb, element type and W as int32.
func TestDECArgsLayout(t *testing.T) {
	l := &DECLaunch{X: 0x1000, Y: 0x2000, Sel: 0x3000, Flags: 0x6000, Part: 0x7000, T: 3, KChunk: 2000, Blocks: 16,
		R: &DECResidual{Elem: wq.Int4, Words: 0x4000, Params: 0x5000, N: 4096, K: 14336}, selOut: 0x8000}
	b := l.args(777, 4)
	if len(b) != decArgsBytes {
		t.Fatalf("%d bytes, want %d", len(b), decArgsBytes)
	}
	for i, want := range []uint64{0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x8000} {
		if got := binary.LittleEndian.Uint64(b[8*i:]); got != want {
			t.Errorf("pointer %d = %#x, want %#x", i, got, want)
		}
	}
	for i, want := range []uint32{4096, 14336, 3, 777, 1024, 16, uint32(wq.Int4), 4} {
		if got := binary.LittleEndian.Uint32(b[64+4*i:]); got != want {
			t.Errorf("int %d = %d, want %d", i, got, want)
		}
	}
}

// TestDECConstantsMatchSource checks that the Go constants mirroring
// dec.cu's equal the source's.
func TestDECConstantsMatchSource(t *testing.T) {
	for name, want := range map[string]int{
		"kThreads": DECThreads, "kUnit": decUnit, "kTile": DECTile, "kGroup": wq.ResidualGroup,
		"kChunkChannels": wq.ChunkChannels, "kLoads": decLoads, "kParamLoads": decParamLoads, "kMinThreads": decMinThreads,
		"kFP16": int(wq.FP16), "kInt8": int(wq.Int8), "kInt4": int(wq.Int4), "kSelMax": DECFusedSelectMax,
	} {
		m := regexp.MustCompile(`constexpr int ` + name + ` = (\d+);`).FindStringSubmatch(decSource)
		if m == nil {
			t.Errorf("dec.cu has no constexpr %s", name)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != want {
			t.Errorf("dec.cu %s = %d, Go says %d", name, got, want)
		}
	}
	if !regexp.MustCompile(`sizeof\(Args\) == ` + strconv.Itoa(decArgsBytes)).MatchString(decSource) {
		t.Errorf("dec.cu does not assert sizeof(Args) == %d", decArgsBytes)
	}
}

// TestDECProtocolLoadsStrong checks that fused mode's loads of the memory
// other CTAs write during the launch (y, part, the flags) are strong: no
// ld with a cache operator (a weak load) in dec.cu or gemvq.cu but the
// residual's, which never changes. v6's NaN came from one: ptxas merged
// the reloads of add_part's wait loop with its first weak load and dropped
// the wait (docs/perf/dec.md, v6.1).
func TestDECProtocolLoadsStrong(t *testing.T) {
	weak := regexp.MustCompile(`"ld\.global\.(cg|ca|cs|cv|lu)\b[^"]*"`)
	for name, src := range map[string]string{"dec.cu": decSource, "gemvq.cu": gemvqSource} {
		for _, m := range weak.FindAllString(src, -1) {
			t.Errorf("%s has a weak load with a cache operator, %s: fused mode's protocol loads are ld.relaxed.gpu (ld_gpu)", name, m)
		}
	}
	for _, want := range []string{"ld.relaxed.gpu.global.f32", "ld.relaxed.gpu.global.u32", "st.relaxed.gpu.global.f32"} {
		if !strings.Contains(decSource, want) {
			t.Errorf("dec.cu has no %s", want)
		}
	}
	// add_part waits on part through ld_gpu.
	if !regexp.MustCompile(`while \(!part_ready\(v\)\) v = ld_gpu\(`).MatchString(decSource) {
		t.Errorf("dec.cu's add_part does not wait on part through ld_gpu")
	}
}

// TestDECLaunchChecks checks the wrapper's refusals, which run before any
// device call (a nil Ctx is never touched).
func TestDECLaunchChecks(t *testing.T) {
	r := &DECResidual{Elem: wq.Int4, Words: 0x10000, Params: 0x20000, N: 4096, K: 4096}
	ok := DECLaunch{X: 0x100, Y: 0x200, Sel: 0x300, R: r, T: 1, KChunk: 8, Blocks: 4}
	var d DEC
	for name, mut := range map[string]func(l *DECLaunch){
		"no residual": func(l *DECLaunch) { l.R = nil },
		"T=0":         func(l *DECLaunch) { l.T = 0 },
		"null x":      func(l *DECLaunch) { l.X = 0 },
		"n_tb 0":      func(l *DECLaunch) { l.Blocks = 0 },
		"n_tb 129":    func(l *DECLaunch) { l.Blocks = 129 },
		"misaligned": func(l *DECLaunch) {
			l.R = &DECResidual{Elem: wq.Int4, Words: 0x10004, Params: 0x20000, N: 4096, K: 4096}
		},
		"int3": func(l *DECLaunch) {
			l.R = &DECResidual{Elem: wq.Int3, Words: 0x10000, Params: 0x20000, N: 4096, K: 4096}
		},
		"no params":   func(l *DECLaunch) { l.R = &DECResidual{Elem: wq.Int8, Words: 0x10000, N: 4096, K: 4096} },
		"negative k":  func(l *DECLaunch) { l.KChunk = -1 },
		"fp16 n_tb 1": func(l *DECLaunch) { l.R = &DECResidual{Elem: wq.FP16, Words: 0x10000, N: 14336, K: 4096}; l.Blocks = 1 },
	} {
		l := ok
		mut(&l)
		if err := d.Compensate((*cuda.Ctx)(nil), 0, &l); err == nil {
			t.Errorf("%s: Compensate accepted it", name)
		}
	}
	zero := ok
	zero.KChunk = 0
	if err := d.Select(nil, 0, &zero); err != nil {
		t.Errorf("k_chunk 0: Select: %v, want nothing launched", err)
	}
	if err := d.Compensate(nil, 0, &zero); err != nil {
		t.Errorf("k_chunk 0: Compensate: %v, want nothing launched", err)
	}
	if m, err := ParseDECMode("FUSED"); err != nil || m != DECFused || m.String() != "fused" {
		t.Errorf("ParseDECMode(FUSED) = %v, %v", m, err)
	}
	if m, err := ParseDECMode(""); err != nil || m != DECSerial {
		t.Errorf("ParseDECMode(\"\") = %v, %v; want serial", m, err)
	}
	if _, err := ParseDECMode("async"); err == nil {
		t.Error("ParseDECMode(async) accepted")
	}
}

// warpSelectModel models dec.cu's select_chunks (fused mode's in-kernel
// selection) step by step on the CPU: one warp per chunk, lane l owning
// channels c0 + 32j + l, B found by the lane whose 8-bucket range crosses
// kc, ranks and positions from running popcounts of ballots in (j, lane)
// order.
func warpSelectModel(x []float32, kChunk int) []int32 {
	K := len(x)
	kcFull := wq.ChunkSelect(min(kChunk, wq.ChunkChannels), wq.ChunkChannels)
	out := make([]int32, DECSelected(K, kChunk))
	for c0 := 0; c0 < K; c0 += wq.ChunkChannels {
		chunk, c := c0/wq.ChunkChannels, min(wq.ChunkChannels, K-c0)
		kc := wq.ChunkSelect(min(kChunk, wq.ChunkChannels), c)
		if kc == 0 {
			continue
		}
		var key [32][32]int // [lane][j]
		m := -1
		for l := range 32 {
			for j := range 32 {
				key[l][j] = -1
				if ch := 32*j + l; ch < c {
					key[l][j] = int(math.Float32bits(x[c0+ch]) & 0x7fffffff >> 20)
				}
				m = max(m, key[l][j])
			}
		}
		var h [256]int
		for l := range 32 {
			for j := range 32 {
				if key[l][j] < 0 {
					key[l][j] = 256
				} else {
					key[l][j] = min(m-key[l][j], 255)
					h[key[l][j]]++
				}
			}
		}
		B, fill, hits, run := 0, 0, 0, 0
		for l := range 32 {
			sum := 0
			for i := range 8 {
				sum += h[8*l+i]
			}
			excl, incl := run, run+sum
			run = incl
			if excl < kc && incl >= kc {
				hits++
				r := excl
				for i := range 8 {
					if r < kc && r+h[8*l+i] >= kc {
						B, fill = 8*l+i, kc-r
					}
					r += h[8*l+i]
				}
			}
		}
		if hits != 1 {
			panic("not exactly one crossing lane")
		}
		inB, pos := 0, 0
		for j := range 32 {
			var mB, mT uint32
			for l := range 32 {
				if key[l][j] == B {
					mB |= 1 << l
				}
			}
			for l := range 32 {
				below := uint32(1)<<l - 1
				isB := key[l][j] == B
				if key[l][j] < B || (isB && inB+bits.OnesCount32(mB&below) < fill) {
					mT |= 1 << l
				}
			}
			for l := range 32 {
				if mT&(1<<l) != 0 {
					out[chunk*kcFull+pos+bits.OnesCount32(mT&(uint32(1)<<l-1))] = int32(c0 + 32*j + l)
				}
			}
			inB += bits.OnesCount32(mB)
			pos += bits.OnesCount32(mT)
		}
	}
	return out
}

// TestDECWarpSelectModelMatchesWQ checks fused mode's in-kernel selection
// formulation (warpSelectModel) against wq.SelectApprox on activations with
// outliers, ties, zeros and subnormals, K not a multiple of 1024 and
// k_chunk from 1 past 1024.
func TestDECWarpSelectModelMatchesWQ(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, K := range []int{1, 31, 1000, 1024, 1537, 4096, 14336, 3001} {
		for _, kChunk := range []int{1, 3, 8, 64, 500, 1024, 5000} {
			for mode := range 3 {
				x := DECTestActivations(r, K, mode)
				want := wq.SelectApprox(nil, x, kChunk)
				if got := warpSelectModel(x, kChunk); !slices.Equal(got, want) {
					t.Fatalf("K=%d k_chunk=%d mode %d: model %v..., wq %v...", K, kChunk, mode, got[:min(8, len(got))], want[:min(8, len(want))])
				}
			}
		}
	}
}

// TestDECFusedArgsLists checks where a fused launch's DEC CTAs get their
// lists (dec::Args.sel, .selOut): they select themselves (sel null), and
// with Keep also write them to Sel (selOut); with Listed they read Sel and
// nothing selects; past DECFusedSelectMax a selection launch fills Sel.
func TestDECFusedArgsLists(t *testing.T) {
	r := &DECResidual{Elem: wq.Int4, Words: 0x10000, Params: 0x20000, N: 4096, K: 4096}
	base := DECLaunch{X: 0x100, Y: 0x200, Sel: 0x300, Flags: 0x400, Part: 0x500, R: r, T: 1, KChunk: 64, Blocks: 8}
	ptrs := func(b []byte) (sel, selOut uint64) {
		return binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[56:])
	}
	for _, c := range []struct {
		name                string
		mut                 func(l *DECLaunch)
		sel, selOut         uint64
		selects, wantFailed bool
	}{
		{"selects", func(l *DECLaunch) {}, 0, 0, false, false},
		{"keep", func(l *DECLaunch) { l.Keep = true }, 0, 0x300, false, false},
		{"listed", func(l *DECLaunch) { l.Listed = true }, 0x300, 0, false, false},
		{"listed keeps nothing", func(l *DECLaunch) { l.Listed, l.Keep = true, true }, 0x300, 0, false, false},
		{"listed past the shared list", func(l *DECLaunch) {
			l.Listed, l.KChunk, l.R = true, 128, &DECResidual{Elem: wq.Int4, Words: 0x10000, Params: 0x20000, N: 4096, K: 14336}
		}, 0x300, 0, false, false},
		{"select launch first", func(l *DECLaunch) {
			l.Keep, l.KChunk, l.R = true, 128, &DECResidual{Elem: wq.Int4, Words: 0x10000, Params: 0x20000, N: 4096, K: 14336}
		}, 0x300, 0, true, false},
		{"listed without a list", func(l *DECLaunch) { l.Listed, l.Sel = true, 0 }, 0, 0, false, true},
		{"keep without a list", func(l *DECLaunch) { l.Keep, l.Sel = true, 0 }, 0, 0, false, true},
	} {
		l := base
		c.mut(&l)
		args, _, selects, err := DECFusedArgs(&l, 256)
		if c.wantFailed {
			if err == nil {
				t.Errorf("%s: no error", c.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if sel, selOut := ptrs(args); sel != c.sel || selOut != c.selOut || selects != c.selects {
			t.Errorf("%s: sel %#x, selOut %#x, selection launch %v; want %#x, %#x, %v", c.name, sel, selOut, selects, c.sel, c.selOut, c.selects)
		}
	}
}

package cpu

// Linear: Y[T, N] = X[T, K] · W[N, K]ᵀ + bias[N], float32 activations,
// weights in their stored format (weight.go), summed in the canonical order
// of dot.go.
//
// Weight layout: as stored, row-major, one output's K weights per row
// (PyTorch's nn.Linear); nothing is repacked or widened at load, so a
// memory-mapped checkpoint is read in place. X and Y are row-major.
//
// Tiling: the output is cut into work items, handed to the worker
// goroutines in order (the item decides what is computed, not the
// goroutine). Prefill (T ≥ widenMinRows): an item is tileN weight rows over
// a span of tileT-token blocks (linearSplit); it first widens its weight
// rows once into a float32 scratch (exact; AVX-512 kernels), then for each
// block each group of 4 rows (8 KiB of float32 at K = 512) stays in L1
// while the block's tokens pass over it 4 at a time (the 4×4 SIMD tile: 16
// zmm accumulators, 4 x vectors); the block's tokens (tileT·K·4 bytes: 128
// KiB at K = 512) stay in L2. The packed and integer paths cut items of one
// block by tileN rows (tiles). Decode (a few tokens): the work is split over N only
// and each weight byte is read once, by the 1×4 tile (4 independent add
// chains, one x load per 4 weight vectors, the next rows prefetched), at
// the memory's speed; 4 tokens share the 4×4 tile, which widens each weight
// vector once for all 4.
//
// Versions (docs/perf/cpu-linear.md has each one's prediction and outcome):
//
//	v1 (2026-11-22): float32 weights widened at load, packed 4-row layout,
//	   scalar dot1x4 with one sequential sum per output: 9 GFLOP/s per core.
//	v2 (2026-11-25): stored precision, 16-lane canonical order, AVX-512 and
//	   AVX2 tiles from gen_dot.go, pure-Go tile as the reference; v2.1
//	   prefetch, v2.2 64-row decode items, v2.4 and v2.7 widened prefill
//	   tiles: decode GEMV 44-92% of the read ceiling, prefill 60-73% of the
//	   fp32 peak on a quiet minute (2.3, a spinning worker pool, rejected).
//	v3 (2026-11-25, session 2): every parallel region on internal/team's
//	   persistent workers, which spin for a bounded time between regions
//	   (v3.1: back off to started goroutines after a caller parks); v3.3
//	   linearGroup: gocoder-23m's decode step 0.55-0.74x of v2's time,
//	   the step's Linear calls at 66-102% of their bytes floor.
//	v2.21 (2026-11-27, session 31): a prefill item spans up to 8 token
//	   blocks, its weight rows widened once for all of them; v2.22 the
//	   4×4 tiles' reductions as one shuffle network; v2.23 no prefetch
//	   in the 4×4 tile over the widened rows (down +23%).

import "sort"

// Tile sizes of Linear; see above. tileN is a multiple of 4 (the SIMD
// tiles' weight rows), tileT of 4 (their tokens).
const (
	tileT = 64
	tileN = 32
)

// gemvTileN is the weight rows of one work item of a decode-sized Linear
// (T < widenMinRows): 64 KiB of bf16 rows at K = 512, a long contiguous run
// for the prefetchers (v2.2 in docs/perf/cpu-linear.md: the LM head's GEMV
// went from 264-273 to 203-214 us against tileN = 32 rows; cutting N into 8
// items per thread measured no better).
const gemvTileN = 64

// rowsPerItem returns the weight rows of one work item. Only the work split
// depends on it, never the result.
func (b *Backend) rowsPerItem(T, N int) int {
	if T >= widenMinRows {
		return tileN
	}
	return gemvTileN
}

// The prefill split of a float Linear (linearSplit), in blocks of tileT
// tokens. Only the work split depends on these, never the result.
//
// prefillItemsPerThread is the least number of items per thread the head
// (all blocks but the last) is cut into: a weight with fewer row blocks
// has its head cut into token spans, each span's items widening their rows
// again. maxSpanBlocks bounds a span (at T = 4096 a 63-block item would be
// ~1.4 ms of a core). The last block is an item of its own per row block
// (with more than one thread): the region ends on short items (~25 us at
// K = 512), which the core that finishes its head items first takes.
const (
	prefillItemsPerThread = 4
	maxSpanBlocks         = 8
)

// split is how one [T, N] output is cut into work items: tokens [0, H) in
// spans of spanT, then [H, T) in blocks of tileT; by tn weight rows, the
// items of a span in weight-row order, span after span. Only the work split
// depends on it, never the result.
type split struct {
	T, N, H, spanT, tn, tilesN, headSpans, items int
}

// newSplit cuts [T, N] into items of spanT tokens over [0, H), tileT
// tokens over [H, T), by tn rows.
func newSplit(T, N, H, spanT, tn int) split {
	tilesN := (N + tn - 1) / tn
	hs := (H + spanT - 1) / spanT
	return split{T: T, N: N, H: H, spanT: spanT, tn: tn, tilesN: tilesN, headSpans: hs,
		items: (hs + (T-H+tileT-1)/tileT) * tilesN}
}

// item returns work item j's tokens [t0, t1) and weight rows [n0, n1).
func (s split) item(j int) (t0, t1, n0, n1 int) {
	sp := j / s.tilesN
	n0 = (j % s.tilesN) * s.tn
	n1 = min(s.N, n0+s.tn)
	if sp < s.headSpans {
		t0 = sp * s.spanT
		return t0, min(s.H, t0+s.spanT), n0, n1
	}
	t0 = s.H + (sp-s.headSpans)*tileT
	return t0, min(s.T, t0+tileT), n0, n1
}

// tileSplit is the split of b.tiles: items of tileT tokens by rowsPerItem
// rows.
func (b *Backend) tileSplit(T, N int) split {
	return newSplit(T, N, 0, tileT, b.rowsPerItem(T, N))
}

// linearSplit is the split of a float Linear (linear, linearGroup). Below
// widenMinRows tokens it is tileSplit's. For prefill an item is tileN
// weight rows over a span of up to maxSpanBlocks tileT-token blocks:
// linearTile widens the rows once and passes the span's blocks over them
// one at a time (v2.21 in docs/perf/cpu-linear.md; before, an item was one
// block and every block's item widened the rows again). The blocks but the
// last (all of them with one thread) are cut into equal spans, as few as
// give prefillItemsPerThread items per thread; the last block follows,
// one item per row block.
func (b *Backend) linearSplit(T, N int) split {
	if T < widenMinRows {
		return b.tileSplit(T, N)
	}
	tilesT := (T + tileT - 1) / tileT
	tilesN := (N + tileN - 1) / tileN
	head := tilesT // blocks in spans; the rest one item each
	if b.threads > 1 && tilesT > 1 {
		head--
	}
	want := prefillItemsPerThread * b.threads
	spans := max(1, (want+tilesN-1)/tilesN, (head+maxSpanBlocks-1)/maxSpanBlocks)
	spans = min(head, spans)
	return newSplit(T, N, min(T, head*tileT), (head+spans-1)/spans*tileT, tileN)
}

// linear computes y = x·wᵀ + bias for x [T, K], matrix w [N, K], y [T, N],
// bias [N] or nil, on b's worker goroutines.
func (b *Backend) linear(y, x []float32, w *weight, bias []float32, T, K, N int) {
	s := b.linearSplit(T, N)
	b.parallel(s.items, func(item int) {
		t0, t1, n0, n1 := s.item(item)
		linearTile(y, x, w, bias, K, N, t0, t1, n0, n1)
	})
}

// tiles runs tile over the [T, N] output in work items of tileT tokens by
// rowsPerItem outputs (tileSplit), on b's worker goroutines: the walk of
// the packed and integer Linear paths.
func (b *Backend) tiles(T, N int, tile func(t0, t1, n0, n1 int)) {
	s := b.tileSplit(T, N)
	b.parallel(s.items, func(item int) {
		tile(s.item(item))
	})
}

// addBias adds bias [N] to the tile [t0, t1) x [n0, n1) of y [T, N]; a nil
// bias adds nothing.
func addBias(y, bias []float32, N, t0, t1, n0, n1 int) {
	if bias == nil {
		return
	}
	for t := t0; t < t1; t++ {
		for n := n0; n < n1; n++ {
			y[t*N+n] += bias[n]
		}
	}
}

// linearPart is one weight of a grouped Linear: y [T, N] = x·wᵀ + bias, N
// the weight's rows, bias [N] or nil.
type linearPart struct {
	y    []float32
	w    *weight
	bias []float32
}

// linearGroup computes the Linears of parts, which share x [T, K] (a
// layer's q, k and v; gate and up), in one parallel region: the work items
// of every part, in part order, are taken from one counter, so no core
// idles at the end of each part's items waiting for the other's last one.
// Each part is cut into exactly the items linear uses (linearSplit), so its
// output has the same bits as a separate linear call. Shapes are the
// caller's to check (a grouped op checks each part as Linear does).
func (b *Backend) linearGroup(x []float32, T, K int, parts []linearPart) {
	ss := make([]split, len(parts))
	for i, p := range parts {
		ss[i] = b.linearSplit(T, p.w.shape[0])
	}
	b.runSplits(ss, func(i, t0, t1, n0, n1 int) {
		p := parts[i]
		linearTile(p.y, x, p.w, p.bias, K, ss[i].N, t0, t1, n0, n1)
	})
}

// groupTiles runs tile over the outputs [T, Ns[i]] of a group's parts in
// one parallel region: part i is cut into exactly the tiles b.tiles(T,
// Ns[i]) makes, and the work items of every part, in part order, come
// from one counter (linearGroup).
func (b *Backend) groupTiles(T int, Ns []int, tile func(i, t0, t1, n0, n1 int)) {
	ss := make([]split, len(Ns))
	for i, N := range Ns {
		ss[i] = b.tileSplit(T, N)
	}
	b.runSplits(ss, tile)
}

// runSplits runs the work items of every split ss[i], in part order, in
// one parallel region; tile gets the part and the item's ranges.
func (b *Backend) runSplits(ss []split, tile func(i, t0, t1, n0, n1 int)) {
	starts := make([]int, len(ss)+1) // part i's items are [starts[i], starts[i+1])
	for i, s := range ss {
		starts[i+1] = starts[i] + s.items
	}
	b.parallel(starts[len(ss)], func(item int) {
		i := sort.SearchInts(starts, item+1) - 1
		t0, t1, n0, n1 := ss[i].item(item - starts[i])
		tile(i, t0, t1, n0, n1)
	})
}

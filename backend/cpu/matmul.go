package cpu

// Linear: Y[T, N] = X[T, K] · W[N, K]ᵀ + bias[N], float32 activations,
// weights in their stored format (weight.go), summed in the canonical order
// of dot.go.
//
// Weight layout: as stored, row-major, one output's K weights per row
// (PyTorch's nn.Linear); nothing is repacked or widened at load, so a
// memory-mapped checkpoint is read in place. X and Y are row-major.
//
// Tiling: the output is cut into tiles of tileT tokens × tileN weight rows
// (gemvTileN rows below widenMinRows tokens), one work item each, handed to
// the worker goroutines in order (the item decides what is computed, not
// the goroutine). Prefill (T ≥ widenMinRows): a tile first widens its
// weight rows once into a float32 scratch (exact; AVX-512 kernels), then
// each group of 4 rows (8 KiB of float32 at K = 512) stays in L1 while the
// tile's tokens pass over it 4 at a time (the 4×4 SIMD tile: 16 zmm
// accumulators, 4 x vectors); the tile's tokens (tileT·K·4 bytes: 128 KiB at
// K = 512) stay in L2. Decode (a few tokens): the work is split over N only
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

// linear computes y = x·wᵀ + bias for x [T, K], matrix w [N, K], y [T, N],
// bias [N] or nil, on b's worker goroutines.
func (b *Backend) linear(y, x []float32, w *weight, bias []float32, T, K, N int) {
	b.tiles(T, N, func(t0, t1, n0, n1 int) { linearTile(y, x, w, bias, K, N, t0, t1, n0, n1) })
}

// tiles runs tile over the [T, N] output in work items of tileT tokens by
// rowsPerItem outputs, on b's worker goroutines: the one walk every Linear
// path (float, packed, integer) shares.
func (b *Backend) tiles(T, N int, tile func(t0, t1, n0, n1 int)) {
	tn := b.rowsPerItem(T, N)
	tilesT := (T + tileT - 1) / tileT
	tilesN := (N + tn - 1) / tn
	b.parallel(tilesT*tilesN, func(item int) {
		t0 := (item / tilesN) * tileT
		n0 := (item % tilesN) * tn
		tile(t0, min(T, t0+tileT), n0, min(N, n0+tn))
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
// Each part is cut into exactly the tiles linear uses, so its output has
// the same bits as a separate linear call. Shapes are the caller's to
// check (a grouped op checks each part as Linear does).
func (b *Backend) linearGroup(x []float32, T, K int, parts []linearPart) {
	Ns := make([]int, len(parts))
	for i, p := range parts {
		Ns[i] = p.w.shape[0]
	}
	b.groupTiles(T, Ns, func(i, t0, t1, n0, n1 int) {
		p := parts[i]
		linearTile(p.y, x, p.w, p.bias, K, Ns[i], t0, t1, n0, n1)
	})
}

// groupTiles runs tile over the outputs [T, Ns[i]] of a group's parts in
// one parallel region: part i is cut into exactly the tiles b.tiles(T,
// Ns[i]) makes, and the work items of every part, in part order, come
// from one counter (linearGroup).
func (b *Backend) groupTiles(T int, Ns []int, tile func(i, t0, t1, n0, n1 int)) {
	starts := make([]int, len(Ns)+1) // part i's items are [starts[i], starts[i+1])
	for i, N := range Ns {
		tn := b.rowsPerItem(T, N)
		starts[i+1] = starts[i] + (T+tileT-1)/tileT*((N+tn-1)/tn)
	}
	b.parallel(starts[len(Ns)], func(item int) {
		i := sort.SearchInts(starts, item+1) - 1
		N := Ns[i]
		tn := b.rowsPerItem(T, N)
		tilesN := (N + tn - 1) / tn
		j := item - starts[i]
		t0 := (j / tilesN) * tileT
		n0 := (j % tilesN) * tn
		tile(i, t0, min(T, t0+tileT), n0, min(N, n0+tn))
	})
}

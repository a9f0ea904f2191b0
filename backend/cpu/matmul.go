package cpu

// Linear: Y[T, N] = X[T, K] · W[N, K]ᵀ + bias[N], float32.
//
// Weight layout ("packed"): a checkpoint stores W row-major, one output's K
// weights per row (PyTorch's nn.Linear). At load the rows are interleaved in
// groups of packRows = 4: group g holds rows 4g..4g+3 as K consecutive
// quadruples, element (n, k) at index
//
//	(n/4)·K·4 + k·4 + n%4          (packedIndex)
//
// with the last group padded by zero rows when N is not a multiple of 4.
// The micro-kernel then reads one contiguous stream per group instead of four
// rows far apart, which is what lets a one-token GEMV run at DRAM bandwidth:
// the hardware prefetcher follows one stream, not four (measured below).
// X and Y are row-major.
//
// Tiling: the output is cut into tiles of tileT tokens × tileN weight rows;
// a tile is one work item, handed to the worker goroutines in order. A tile's
// weights (tileN·K·4 bytes: 64 KiB at K=512, 192 KiB at K=1536) stay in L2
// while its tokens pass over them. For one token (decode) there is one tile
// row and the work is split over N only.
//
// Micro-kernel: dot1x4 computes 4 outputs of one token from one packed
// group: each x[k] is loaded once for 4 weights, and the 4 accumulators are 4
// independent add chains that hide the float add latency. Go does not
// vectorize, so this is scalar SSE code; wider register tiles lose to
// register spills (measured below).
//
// Summation order: every output is acc = x[0]·w[0] + x[1]·w[1] + ... in
// increasing k with one float32 accumulator, then + bias. The order depends
// on nothing but K, so a token's outputs are bitwise the same whatever the
// thread count, the tile it falls in, or the other tokens in the batch.
// float32 accumulation over K terms keeps the relative error of a dot product
// near sqrt(K)·2⁻²⁴ for typical data, far below bf16 weight precision.
//
// Versions (2026-11-22, AMD EPYC Zen 5, Go 1.26, GOAMD64=v1, K=512):
//
//	row-major, 1x4, L2-resident W (N=1536), 1 core: GEMV 9.5 GFLOP/s, GEMM(T=64) 9.0
//	row-major, 1x8:                  GEMV 8.1 (more live row pointers)
//	row-major, 2x4 / 4x2:            GEMM 7.9
//	row-major, 3x4 / 4x4:            GEMM 4.3 / 4.1 (16 accumulators + 8 operands
//	                                 exceed the 15 usable XMM registers: spills)
//	row-major, 1x4, 2 partial sums:  GEMV 4.6 (bounds checks on k+1)
//	row-major, 1x4, DRAM-resident W (64 MiB): 9.6 GB/s (1 core), 9.9 GB/s (2 cores)
//	packed, 1x4 (kept), DRAM-resident W:      17 GB/s (1 core), 32 GB/s (2 cores),
//	                                 the machine's read bandwidth; L2-resident 9.1 GFLOP/s
//	packed, 2x4:                     GEMM 4.3 (bounds checks on the second row)
//	gocoder-23m decode, 2 cores: row-major 100 tok/s, packed see model/bench_test.go

// packRows is the number of weight rows interleaved in the packed layout.
const packRows = 4

// packedIndex returns the index of element (n, k) of an [N, K] weight in
// the packed layout.
func packedIndex(n, k, K int) int { return (n/packRows)*K*packRows + k*packRows + n%packRows }

// packedLen returns the length of the packed form of an [N, K] weight: N
// rounded up to whole groups.
func packedLen(N, K int) int { return (N + packRows - 1) / packRows * packRows * K }

// Tile sizes of Linear; see above. tileN is a multiple of packRows.
const (
	tileT = 64
	tileN = 32
)

// linear computes y = x·wᵀ + bias for x [T, K], packed w [N, K], y [T, N],
// bias [N] or nil, on b's worker goroutines.
func (b *Backend) linear(y, x, w, bias []float32, T, K, N int) {
	tilesT := (T + tileT - 1) / tileT
	tilesN := (N + tileN - 1) / tileN
	b.parallel(tilesT*tilesN, func(item int) {
		t0 := (item / tilesN) * tileT
		n0 := (item % tilesN) * tileN
		t1 := min(T, t0+tileT)
		n1 := min(N, n0+tileN)
		for t := t0; t < t1; t++ {
			xt := x[t*K : (t+1)*K]
			yt := y[t*N : (t+1)*N]
			for n := n0; n < n1; n += packRows {
				a0, a1, a2, a3 := dot1x4(xt, w[n*K:(n+packRows)*K])
				if n+packRows <= n1 {
					yt[n], yt[n+1], yt[n+2], yt[n+3] = a0, a1, a2, a3
					continue
				}
				// The last group of a weight whose N is not a multiple of
				// packRows: keep the real rows only.
				acc := [packRows]float32{a0, a1, a2, a3}
				copy(yt[n:n1], acc[:])
			}
			if bias != nil {
				for n := n0; n < n1; n++ {
					yt[n] += bias[n]
				}
			}
		}
	})
}

// dot1x4 returns the dot products of x with the four weight rows of one
// packed group g (len(g) = 4·len(x), row i's element k at g[4k+i]), each
// summed in increasing k.
func dot1x4(x, g []float32) (a0, a1, a2, a3 float32) {
	// Re-slicing proves to the compiler that every index below is in range,
	// which removes the bounds checks from the inner loop.
	g = g[:packRows*len(x)]
	for k, xv := range x {
		w := g[packRows*k : packRows*k+packRows : packRows*k+packRows]
		a0 += xv * w[0]
		a1 += xv * w[1]
		a2 += xv * w[2]
		a3 += xv * w[3]
	}
	return a0, a1, a2, a3
}

// linear.cu: the batch-invariant linear layer, y = x·Wᵀ + bias, on the
// tensor cores, for any number of rows T, with one property the other paths
// lack: the bits of row t of y depend only on row t of x (and W, bias),
// whatever T is and whatever other rows share the launch.
//
//   x    [T][K] float32 (rounded to fp16 in the kernel, once per element,
//        round to nearest even: the same value for every T)
//   W    [N][K] fp16 row-major (the backend's weight layout)
//   bias [N] float32, or null
//   y    [T][N] float32
//
// Up to kMaxGroups weights that share x run in one launch (q, k, v; gate,
// up): their 16-channel m-tiles are concatenated along blockIdx.y, each
// group writes its own y. A group's tile is computed exactly as in a launch
// of that group alone (the split-K is the constant kSplit), so grouping
// changes no bit either.
//
// Two kernels, one arithmetic: the narrow kernel (T <= 16, decode) below,
// and the wide kernel (T > 16) after it (the tiled linear_f16_tiled since
// v7; v3's linear_f16_wide kept beside it), which computes every output
// element with the same operations in the same order.
//
// Narrow: a CTA computes one m-tile (kM = 16 output channels) for a block
// of NT·8 tokens (blockIdx.x) with kSplit warps. K is cut into k-blocks of
// kBlockK = 128 channels; warp w takes blocks w, w+kSplit, w+2·kSplit, ...
// (interleaved, so the CTA reads 16 rows x 1 KB contiguous at a time), the
// next block's weights loaded while the current one is multiplied. In a
// block, lane (g, q) = (lane/4, lane%4) holds 16 bytes of W row g and of
// row g+8 at k = kb + 32s + 8q (s < kSubs) and x of token g of each n-tile
// at the same 8 k. mma.m16n8k16 takes W as A (16 channels x 16 k) and x as
// B (16 k x 8 tokens) with the k axis permuted within each 32-k step: A
// column 2q+i and B row 2q+i hold k = 8q+i, columns/rows 2q+8+i hold
// k = 8q+2+i (first mma), then +4 (second mma). A permutation of a dot
// product's terms is still the dot product; it lets each lane read 16
// contiguous bytes.
//
// The reduction order is fixed by K alone: warp w's accumulator runs over
// its k-blocks in order, each two mmas per 32-k step into fp32; then warp
// 0 + warp 1 + ... + warp kSplit-1 in that order (shared memory); then the
// bias. Padding tokens and channels enter as zeros and change nothing
// else. What makes a row's bits independent of T: the same instruction
// sequence runs for every token of every n-tile (NT and the token's column
// in the n-tile only change which accumulator registers and B column hold
// it, and the tensor core computes each output element from its own row
// and column alone).
//
// Needs K % 8 == 0 (16-byte rows); Linear.Launch refuses other K.
//
// Versions (H100; docs/perf/decode-step.md, bench/results/2026-11-25-h100-linear):
//   v1 direct 16-byte loads, kSplit = 4 warps per m-tile on 4 contiguous
//      k-slices, no prefetch, x read as float32 by each warp (L1/L2), NT in
//      {1, 2, 4, 8}. T = 1: q/o 4096x4096 25.4 us (43% of the read
//      ceiling), qkv grouped 31.4 us (53%), gate+up grouped 123 us (63%):
//      slower than gemv.cu (16.3, 27.2, 85.6 us); latency-bound (one
//      round trip per 128-k step, 8 warps per SM at 4096 rows).
//   v2 kSplit = 8 warps on interleaved k-blocks, the next block's weights
//      prefetched into registers: twice the warps and four times the bytes
//      in flight per m-tile. T = 1: q/o 18.7 us (60%), qkv grouped 25.4 us
//      (66%; gemv.cu's three launches 27.3), gate+up grouped 86.7 us (90%;
//      gemv.cu 85.3), down 48.0 (81%), lm_head 360 (97%); from T = 4 faster
//      than gemv.cu everywhere. But T = 64 gate+up 448 us and T = 256 1.7 ms
//      (cuBLASLt 96 and 116): every CTA re-reads x [T, K] as float32 for 16
//      channels.
//   v3 the wide kernel for T > 16 (below): a 128-channel x 64-token CTA
//      tile, x converted once and staged in shared memory with cp.async,
//      the same per-element arithmetic.
//   v4 programmatic dependent launch: linear.cu is a GridDependent program;
//      every kernel waits for the kernel ahead (gridDependencyWait) before
//      its first load (docs/perf/decode-step.md v6).
//   v5 (decode-step.md v30) for the batch-invariant mode at one sequence:
//      pair kernels (SwiGLU/GeGLU after gate|up, RoPE after q|k|v in the
//      epilogue, two m-tiles a CTA), each warp's first k-block loaded
//      before the dependency wait (flag), persistent grids (a CTA takes
//      m-tiles in turn, the next tile's first block before the partials'
//      sum). The same bits (every tile computed as v4 computes it). H100,
//      Llama-3.1-8B step at B = 1, 8K of int4 KV in a 128K cache, the
//      batch-invariant mode: 6.82 -> 6.41 ms (the fast path 5.94).
//   v6 (decode-step.md v31) the narrow kernels' weight loads ask the L2
//      for the aligned 256 bytes (ldgStream256, at compile time: loadW's
//      template flag; the wide kernel unchanged). Same bits. T = 1 lm_head
//      357 -> 347 us, gate+up 85.5 -> 83.2; the step above 6.40 -> 6.26 ms.
//   v7 (decode-step.md v32) the tiled wide kernel, linear_f16_tiled: W and
//      x both staged by cp.async in a ring, 2-4 m-tiles x 4 n-tiles a
//      warp, the k-block classes over a cluster of 2-4 CTAs where the
//      m-blocks alone leave SMs idle (rank 0 adds them in class order
//      through distributed shared memory). The same bits as v3 and the
//      narrow kernel. bench gemv (x's conversion included), v3 -> v7, us:
//      55 rows o 64.5 -> 35.3, q|k|v 61.6 -> 36.8, gate+up 124 -> 97.3,
//      down 213 -> 80.4, lm_head 485 -> 391 (cuBLASLt 19.7, 38, 97.5,
//      54.7, 398); 256 rows o 61.5 -> 56.9, q|k|v 115 -> 74.2, gate+up 396
//      -> 279, down 200 -> 148.9, lm_head 1730 -> 1065 (cuBLASLt 27.6,
//      47.5, 116, 71, 461). The int4 55 x 32K step in the batch-invariant
//      mode 43.5-43.8 -> 36.8-36.9 ms (the fast path 28.5).
//   v8 (decode-step.md v35) the deep ring: BN 64 in clusters of 2 with an
//      8-stage ring at one CTA an SM (linear_f16_tiled_c<64, 2, true>) in
//      place of BN 128 above 64 rows where its grid fits at once; the
//      first stage's weights before the dependency wait (early). The same
//      bits. bench gemv, 100 rows: o 54.8 -> 36.6, down 139.7 -> 90.2, k/v
//      52.5 -> 35.4 us; 55 rows unchanged (deep clusters of 4 ran 1.2x
//      slower there). The int4 100 x 16K step in the mode 36.3 -> 34.05 ms.
//
// Go wrapper: linear.go; tests: linear_test.go (float64 reference on the
// fp16-rounded x, invariance across T and row order).

#include "bitdecode.cuh"

namespace linear {

constexpr int kM = 16;       // output channels per m-tile (mma M)
constexpr int kN = 8;        // tokens per n-tile (mma N)
constexpr int kChunk = 8;    // halves per lane per 16-byte load
constexpr int kBlock = 32;   // k per 32-k block: 4 lanes x kChunk
constexpr int kSubs = 4;     // 32-k blocks per k-block
constexpr int kBlockK = kSubs * kBlock;  // 128: one k-block, 8 loads of 16 B per lane
constexpr int kSplit = 8;    // warps per m-tile, one class of k-blocks each (fixed: one reduction order)
constexpr int kThreads = kSplit * 32;

// pack2 rounds two floats to fp16 (nearest even) into one register, lo in
// the low half (the mma operand order).
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// ldgStream256 is ldgStream with the L2 asked to fetch the whole aligned
// 256 bytes around p on a miss (PTX .L2::256B): a k-block's 256 bytes of a
// weight row, which the row's four lanes read in four 64-byte pieces (a
// warp's load covers 8 rows x 64 bytes), one DRAM request instead of up
// to four (decode-step.md v31).
__device__ __forceinline__ uint4 ldgStream256(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// loadW loads one k-block of the lane's two weight rows: 16 bytes of row
// g and of row g+8 at k = k + 32s for each s < kSubs (zeros past K and for
// rows past N); L2 (the narrow kernels) loads with ldgStream256. The same
// registers either way.
template <bool L2>
__device__ __forceinline__ void loadW(uint4 (&a)[kSubs], uint4 (&b)[kSubs], const u16* rowA, const u16* rowB,
                                      bool okA, bool okB, int k, int K) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int s = 0; s < kSubs; s++) {
    const bool ok = k + s * kBlock < K;
    const u16* pa = rowA + k + s * kBlock;
    const u16* pb = rowB + k + s * kBlock;
    a[s] = ok && okA ? (L2 ? ldgStream256(pa) : ldgStream(pa)) : zero;
    b[s] = ok && okB ? (L2 ? ldgStream256(pb) : ldgStream(pb)) : zero;
  }
}

// tilePtrs returns the lane's two weight rows of m-tile m0 of W (N rows):
// rows m0 + g and m0 + g + 8 (row 0 where past N, okA / okB false).
__device__ __forceinline__ void tilePtrs(const u16* W, int N, int K, int m0, int g, const u16*& rowA,
                                         const u16*& rowB, bool& okA, bool& okB) {
  okA = m0 + g < N, okB = m0 + g + 8 < N;
  rowA = W + size_t(okA ? m0 + g : 0) * K;
  rowB = W + size_t(okB ? m0 + g + 8 : 0) * K;
}

// classChain runs warp `warp`'s class of k-blocks (warp, warp + kSplit, ...)
// of one m-tile into acc, in order, the next block's weights loaded before
// the current one's math (16 loads in flight); wa and wb hold the class's
// first block (loaded by the caller, before or after its dependency wait).
// x is read from rows tok0 + nt·8 + g (zeros past T).
template <int NT>
__device__ __forceinline__ void classChain(float (&acc)[NT][4], uint4 (&wa)[kSubs], uint4 (&wb)[kSubs],
                                           const float* __restrict__ x, int T, int K, int tok0, const u16* rowA,
                                           const u16* rowB, bool okA, bool okB, int warp, int g, int q) {
  const float* xr[NT];
  bool okT[NT];
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    const int t = tok0 + nt * kN + g;
    okT[nt] = t < T;
    xr[nt] = x + size_t(okT[nt] ? t : 0) * K;
  }
#pragma unroll
  for (int nt = 0; nt < NT; nt++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[nt][i] = 0.f;
  const int nBlocks = (K + kBlockK - 1) / kBlockK;
  uint4 na[kSubs], nb[kSubs];
  for (int blk = warp; blk < nBlocks; blk += kSplit) {
    if (blk + kSplit < nBlocks) loadW<true>(na, nb, rowA, rowB, okA, okB, (blk + kSplit) * kBlockK + q * kChunk, K);
#pragma unroll
    for (int s = 0; s < kSubs; s++) {
      const int k = blk * kBlockK + s * kBlock + q * kChunk;
      const bool ok = k < K;
      // A fragments: a0 row g, a1 row g+8, a2 row g (next pair), a3 row g+8.
      const u32 lo[4] = {wa[s].x, wb[s].x, wa[s].y, wb[s].y};
      const u32 hi[4] = {wa[s].z, wb[s].z, wa[s].w, wb[s].w};
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        u32 xb[4] = {0u, 0u, 0u, 0u};
        if (ok && okT[nt]) {
          const float4 u = __ldg(reinterpret_cast<const float4*>(xr[nt] + k));
          const float4 v = __ldg(reinterpret_cast<const float4*>(xr[nt] + k + 4));
          xb[0] = pack2(u.x, u.y);
          xb[1] = pack2(u.z, u.w);
          xb[2] = pack2(v.x, v.y);
          xb[3] = pack2(v.z, v.w);
        }
        mma16816(acc[nt], lo, xb[0], xb[1]);
        mma16816(acc[nt], hi, xb[2], xb[3]);
      }
    }
#pragma unroll
    for (int s = 0; s < kSubs; s++) wa[s] = na[s], wb[s] = nb[s];
  }
}

// firstBlock loads warp `warp`'s first k-block of an m-tile (nothing where
// the warp has none).
__device__ __forceinline__ void firstBlock(uint4 (&wa)[kSubs], uint4 (&wb)[kSubs], const u16* rowA, const u16* rowB,
                                           bool okA, bool okB, int K, int warp, int q) {
  if (warp * kBlockK < K) loadW<true>(wa, wb, rowA, rowB, okA, okB, warp * kBlockK + q * kChunk, K);
}

// sumClasses adds the kSplit warps' partials of one m-tile in warp order
// (warp 0's acc first) into warp 0's acc; part is the tile's shared
// buffer. Every thread of the CTA calls it (one barrier).
template <int NT>
__device__ __forceinline__ void sumClasses(float (&acc)[NT][4], float (*part)[NT * 4][32], int warp, int lane) {
  if (warp > 0) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) part[warp - 1][nt * 4 + i][lane] = acc[nt][i];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int s = 0; s < kSplit - 1; s++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[nt][i] += part[s][nt * 4 + i][lane];
}

// Tile is one m-tile of a grouped launch: its weight, bias, output and
// channel count, its first channel m0, and the lane's two weight rows
// (tilePtrs).
struct Tile {
  const u16* W;
  const float* bias;
  float* y;
  int N, m0;
  const u16* rowA;
  const u16* rowB;
  bool okA, okB;
};

// groupTile returns m-tile `tile` of the launch's concatenated groups
// (tiles0 and tiles1 the first two groups' m-tile counts) for lane row g.
__device__ __forceinline__ Tile groupTile(int tile, int tiles0, int tiles1, int K, int g, const u16* w0,
                                          const float* b0, float* y0, int n0, const u16* w1, const float* b1,
                                          float* y1, int n1, const u16* w2, const float* b2, float* y2, int n2) {
  Tile t{w0, b0, y0, n0, 0, nullptr, nullptr, false, false};
  if (tile >= tiles0 + tiles1) {
    tile -= tiles0 + tiles1;
    t.W = w2, t.bias = b2, t.y = y2, t.N = n2;
  } else if (tile >= tiles0) {
    tile -= tiles0;
    t.W = w1, t.bias = b1, t.y = y1, t.N = n1;
  }
  t.m0 = tile * kM;
  tilePtrs(t.W, t.N, K, t.m0, g, t.rowA, t.rowB, t.okA, t.okB);
  return t;
}

// linear_f16 computes NT n-tiles (NT·8 tokens) of m-tiles blockIdx.y,
// blockIdx.y + gridDim.y, ... (one per CTA, or several in turn where the
// grid is smaller than the tile count: each warp then loads the next
// tile's first k-block before the current tile's partials are added, so
// the SM's loads do not pause between tiles); the group arguments are (W,
// bias, y, N) of up to three weights sharing x, n = 0 for an absent group.
// Every tile is computed the same way whatever the grid. With early set,
// each warp's first k-block of weights is loaded before the dependency
// wait (the backend's weights are written only at load, never by a kernel
// ahead).
template <int NT>
__global__ void __launch_bounds__(kThreads) linear_f16(const float* __restrict__ x, int T, int K, int early,
                                                       const u16* w0, const float* b0, float* y0, int n0,
                                                       const u16* w1, const float* b1, float* y1, int n1,
                                                       const u16* w2, const float* b2, float* y2, int n2) {
  __shared__ float part[kSplit - 1][NT * 4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int tiles0 = (n0 + kM - 1) / kM, tiles1 = (n1 + kM - 1) / kM;
  const int nTiles = tiles0 + tiles1 + (n2 + kM - 1) / kM;
  const int tok0 = blockIdx.x * (NT * kN);
  Tile cur = groupTile(blockIdx.y, tiles0, tiles1, K, g, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2, y2, n2);
  uint4 wa[kSubs], wb[kSubs];
  if (early) firstBlock(wa, wb, cur.rowA, cur.rowB, cur.okA, cur.okB, K, warp, q);
  // Programmatic dependent launch (the program is GridDependent): the
  // index math above (and with early the first weights) overlaps the
  // kernel ahead; nothing it writes is read before it has finished.
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) firstBlock(wa, wb, cur.rowA, cur.rowB, cur.okA, cur.okB, K, warp, q);
  for (int tile = blockIdx.y; tile < nTiles; tile += gridDim.y) {
    float acc[NT][4];
    classChain<NT>(acc, wa, wb, x, T, K, tok0, cur.rowA, cur.rowB, cur.okA, cur.okB, warp, g, q);
    const Tile t = cur;
    if (tile + gridDim.y < nTiles) {
      cur = groupTile(tile + gridDim.y, tiles0, tiles1, K, g, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2, y2, n2);
      firstBlock(wa, wb, cur.rowA, cur.rowB, cur.okA, cur.okB, K, warp, q);
    }
    // Warps 1..kSplit-1 hand their partials to warp 0, which adds them in
    // warp order, then the bias.
    sumClasses<NT>(acc, part, warp, lane);
    if (warp == 0) {
      // C fragment: c0, c1 channel g, tokens 2q, 2q+1; c2, c3 channel g+8.
      const int chA = t.m0 + g, chB = t.m0 + g + 8;
      const float biasA = t.bias && t.okA ? t.bias[chA] : 0.f, biasB = t.bias && t.okB ? t.bias[chB] : 0.f;
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const int ch = i < 2 ? chA : chB, tk = tok0 + nt * kN + 2 * q + (i & 1);
          if (ch < t.N && tk < T) t.y[size_t(tk) * t.N + ch] = acc[nt][i] + (i < 2 ? biasA : biasB);
        }
    }
    __syncthreads();  // part is the next tile's
  }
}

// Pair kernels (v5): the op after a grouped launch folded into its
// epilogue, where that op combines two channels of the group's outputs
// element by element (gemv.cu's pair kernels, decode-step.md v14, on
// linear.cu's arithmetic). A CTA of 2·kSplit warps computes two m-tiles,
// member m = warp / kSplit, each exactly as linear_f16 computes it (its
// class chains, the partials in warp order, then the bias: the same bits),
// stages both in shared memory, and its epilogue threads apply the op with
// the separate kernel's float operations (ops.cu):
//   kPairGLU   groups 0 (gate) and 1 (up) of the same N: pair p is gate's
//              m-tile p and up's; dst[t, n] = act(g)·u as ops.cu's swiglu
//              (act kActSiLU) or geglu (kActGeluTanh); gate's and up's
//              outputs written where y0, y1 are set (null: not written).
//   kPairRoPE  groups 0 (q) and 1 (k) in heads of D = 2·half (half a
//              multiple of kM, N a multiple of D): pair (head, j) is the
//              m-tiles of rows head·D + 16j and head·D + 16j + half, rotated
//              in place as ops.cu's rope(_qk) rotates them (ropeCosSin,
//              ropeRotate); group 2 (v, n2 may be 0) in pairs of adjacent
//              m-tiles, written as computed.
// Pairs: kPairGLU ceil(n0 / kM); kPairRoPE n0 / (2kM) + n1 / (2kM) +
// ceil(ceil(n2 / kM) / 2), in that order; a CTA takes pairs blockIdx.y,
// blockIdx.y + gridDim.y, ... as linear_f16 takes its tiles.
constexpr int kPairGLU = 0;
constexpr int kPairRoPE = 1;

// PairRef is one pair of a pair launch: its group (kPairRoPE), its two
// m-tiles, and for q and k the m-tile's index jj in half a head.
struct PairRef {
  int grp, tileA, tileB, jj;
};

template <int MODE>
__device__ __forceinline__ PairRef pairOf(int p, int n0, int n1, int half) {
  PairRef r{0, p, p, 0};
  if (MODE == kPairGLU) return r;
  const int hq = half / kM;  // m-tiles in half a head
  const int c0 = n0 / (2 * kM), c1 = n1 / (2 * kM);
  if (p >= c0 + c1) {
    r.grp = 2, p -= c0 + c1;
  } else if (p >= c0) {
    r.grp = 1, p -= c0;
  }
  if (r.grp < 2) {
    const int head = p / hq;
    r.jj = p - head * hq;
    r.tileA = head * 2 * hq + r.jj, r.tileB = r.tileA + hq;
  } else {
    r.tileA = 2 * p, r.tileB = 2 * p + 1;
  }
  return r;
}

// pairTile returns member m's m-tile of pair r (tilePtrs for lane row g).
template <int MODE>
__device__ __forceinline__ Tile pairTile(const PairRef& r, int m, int K, int g, const u16* w0, const float* b0,
                                         float* y0, int n0, const u16* w1, const float* b1, float* y1, int n1,
                                         const u16* w2, const float* b2, float* y2, int n2) {
  Tile t;
  if (MODE == kPairGLU) {
    t.W = m == 0 ? w0 : w1, t.bias = m == 0 ? b0 : b1, t.y = m == 0 ? y0 : y1, t.N = n0;
  } else {
    t.W = r.grp == 0 ? w0 : r.grp == 1 ? w1 : w2, t.bias = r.grp == 0 ? b0 : r.grp == 1 ? b1 : b2;
    t.y = r.grp == 0 ? y0 : r.grp == 1 ? y1 : y2, t.N = r.grp == 0 ? n0 : r.grp == 1 ? n1 : n2;
  }
  t.m0 = (m == 0 ? r.tileA : r.tileB) * kM;
  tilePtrs(t.W, t.N, K, t.m0, g, t.rowA, t.rowB, t.okA, t.okB);
  return t;
}

template <int NT, int MODE>
__global__ void __launch_bounds__(2 * kThreads) linear_f16_pair(const float* __restrict__ x, int T, int K, int early,
                                                                const u16* w0, const float* b0, float* y0, int n0,
                                                                const u16* w1, const float* b1, float* y1, int n1,
                                                                const u16* w2, const float* b2, float* y2, int n2,
                                                                float* dst, const int* __restrict__ pos,
                                                                const float* __restrict__ invFreq, int half,
                                                                int act) {
  __shared__ float part[2][kSplit - 1][NT * 4][32];
  __shared__ float val[2][kM][NT * kN];
  const int warp = threadIdx.x / 32 % kSplit, m = threadIdx.x / kThreads, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int tok0 = blockIdx.x * (NT * kN);
  const int nPairs = MODE == kPairGLU ? (n0 + kM - 1) / kM
                                      : n0 / (2 * kM) + n1 / (2 * kM) + ((n2 + kM - 1) / kM + 1) / 2;
  PairRef pr = pairOf<MODE>(blockIdx.y, n0, n1, half);
  Tile cur = pairTile<MODE>(pr, m, K, g, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2, y2, n2);
  uint4 wa[kSubs], wb[kSubs];
  if (early) firstBlock(wa, wb, cur.rowA, cur.rowB, cur.okA, cur.okB, K, warp, q);
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) firstBlock(wa, wb, cur.rowA, cur.rowB, cur.okA, cur.okB, K, warp, q);
  for (int p = blockIdx.y; p < nPairs; p += gridDim.y) {
    float acc[NT][4];
    classChain<NT>(acc, wa, wb, x, T, K, tok0, cur.rowA, cur.rowB, cur.okA, cur.okB, warp, g, q);
    const Tile t = cur;
    const PairRef r = pr;
    if (p + gridDim.y < nPairs) {
      pr = pairOf<MODE>(p + gridDim.y, n0, n1, half);
      cur = pairTile<MODE>(pr, m, K, g, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2, y2, n2);
      firstBlock(wa, wb, cur.rowA, cur.rowB, cur.okA, cur.okB, K, warp, q);
    }
    // Each member's partials in warp order, then the bias, into val.
    if (warp > 0) {
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) part[m][warp - 1][nt * 4 + i][lane] = acc[nt][i];
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int s = 0; s < kSplit - 1; s++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
          for (int i = 0; i < 4; i++) acc[nt][i] += part[m][s][nt * 4 + i][lane];
      const float biasA = t.bias && t.okA ? t.bias[t.m0 + g] : 0.f;
      const float biasB = t.bias && t.okB ? t.bias[t.m0 + g + 8] : 0.f;
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
          val[m][i < 2 ? g : g + 8][nt * kN + 2 * q + (i & 1)] = acc[nt][i] + (i < 2 ? biasA : biasB);
    }
    __syncthreads();
    // The epilogue: one thread per (channel of the tile, token).
    for (int e = threadIdx.x; e < kM * NT * kN; e += 2 * kThreads) {
      const int c = e / (NT * kN), tl = e % (NT * kN), tk = tok0 + tl;
      if (tk >= T) continue;
      const float v0 = val[0][c][tl], v1 = val[1][c][tl];
      if (MODE == kPairGLU) {
        const int ch = r.tileA * kM + c;
        if (ch >= n0) continue;
        const size_t o = size_t(tk) * n0 + ch;
        if (y0) y0[o] = v0;
        if (y1) y1[o] = v1;
        dst[o] = __fmul_rn(gluAct(act, v0), v1);  // ops.cu's swiglu (act kActSiLU) or geglu
        continue;
      }
      float* row = t.y + size_t(tk) * t.N;
      const int chA = r.tileA * kM + c, chB = r.tileB * kM + c;
      if (r.grp == 2) {  // v: as computed
        if (chA < t.N) row[chA] = v0;
        if (chB < t.N) row[chB] = v1;
        continue;
      }
      // ops.cu's rope: the angle's float32 product, cos and sin in double.
      float rc, rs;
      ropeCosSin(float(pos[tk]), invFreq[r.jj * kM + c], rc, rs);
      ropeRotate(v0, v1, rc, rs, row[chA], row[chB]);
    }
    __syncthreads();  // part and val are the next pair's
  }
}

// ----------------------------------------------------------------------------
// The wide kernel (T > kNarrowRows): the same arithmetic per output, with
// x and W reused across a 128-channel x 64-token CTA tile.
//
// A CTA's kWideWarps warps each own one m-tile (16 channels) for the same
// 64 tokens (8 n-tiles). Instead of one warp per class of k-blocks (the
// narrow kernel's warps w = 0..kSplit-1, block b in class b % kSplit), each
// warp walks the classes one after the other: acc = the mma chain over the
// class's blocks in order, from zero, exactly as warp w of the narrow
// kernel computes it; then total = acc (class 0) or total + acc (classes
// 1.., empty ones included), the narrow kernel's slice order; then the
// bias. So every output element is bitwise the narrow kernel's.
//
// x is converted to fp16 once (linear_x_f16, with the narrow kernel's cvt)
// and each 64-token x 128-channel block is copied to shared memory with
// cp.async, double-buffered, while each warp loads its W block straight to
// registers (the next block's before the current block's math). Shared rows
// are kXStride halves (320 bytes): the 8 lanes of a quarter-warp (2 tokens
// x 4 16-byte pieces) then fall in 8 distinct 16-byte bank groups.
constexpr int kWideWarps = 8;                  // m-tiles per CTA: 128 channels
constexpr int kWideTokens = 64;                // tokens per CTA: 8 n-tiles
constexpr int kWideNT = kWideTokens / kN;
constexpr int kWideThreads = kWideWarps * 32;
constexpr int kXStride = kBlockK + 32;         // halves per token row in shared memory
constexpr int kXChunks = kWideTokens * kBlockK / kChunk;  // 16-byte pieces per x block
static_assert(kXChunks % kWideThreads == 0, "x block pieces must divide among the threads");

// linear_x_f16 rounds x [n] (n % 8 == 0) to fp16 with pack2, the narrow
// kernel's conversion: the wide kernel then sees the same operands.
__global__ void linear_x_f16(u16* __restrict__ xh, const float* __restrict__ x, long long n) {
  gridDependencyWait();
  gridLaunchDependents();
  for (long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * kChunk; i < n; i += (long long)gridDim.x * blockDim.x * kChunk) {
    const float4 u = *reinterpret_cast<const float4*>(x + i);
    const float4 v = *reinterpret_cast<const float4*>(x + i + 4);
    *reinterpret_cast<uint4*>(xh + i) = make_uint4(pack2(u.x, u.y), pack2(u.z, u.w), pack2(v.x, v.y), pack2(v.z, v.w));
  }
}

// nextBlock returns the k-block after b in the wide kernel's order (class
// by class, each class's blocks in order), or -1 after the last.
__device__ __forceinline__ int nextBlock(int b, int nBlocks) {
  if (b + kSplit < nBlocks) return b + kSplit;
  const int c = b % kSplit + 1;
  return c < kSplit && c < nBlocks ? c : -1;
}

// stageX copies the x block of k-block b (64 tokens x 128 channels, fp16)
// into one shared buffer: cp.async for pieces inside [T, K], zeros beyond.
__device__ __forceinline__ void stageX(u16* xs, const u16* __restrict__ xh, int T, int K, int tok0, int b) {
#pragma unroll
  for (int j = 0; j < kXChunks / kWideThreads; j++) {
    const int i = threadIdx.x + j * kWideThreads;
    const int t = i / (kBlockK / kChunk), kc = i % (kBlockK / kChunk) * kChunk;
    const int k = b * kBlockK + kc;
    u16* dst = xs + t * kXStride + kc;
    if (tok0 + t < T && k < K) cpAsync16(dst, xh + size_t(tok0 + t) * K + k);
    else *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
}

__global__ void __launch_bounds__(kWideThreads, 1) linear_f16_wide(const u16* __restrict__ xh, int T, int K,
                                                                  const u16* w0, const float* b0, float* y0, int n0,
                                                                  const u16* w1, const float* b1, float* y1, int n1,
                                                                  const u16* w2, const float* b2, float* y2, int n2) {
  __shared__ __align__(16) u16 xs[2][kWideTokens * kXStride];
  gridDependencyWait();
  gridLaunchDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int tiles0 = (n0 + kM - 1) / kM, tiles1 = (n1 + kM - 1) / kM, tiles2 = (n2 + kM - 1) / kM;
  int tile = blockIdx.y * kWideWarps + warp;
  const bool active = tile < tiles0 + tiles1 + tiles2;
  const u16* W = w0;
  const float* bias = b0;
  float* y = y0;
  int N = n0;
  if (tile >= tiles0 + tiles1) {
    tile -= tiles0 + tiles1;
    W = w2, bias = b2, y = y2, N = n2;
  } else if (tile >= tiles0) {
    tile -= tiles0;
    W = w1, bias = b1, y = y1, N = n1;
  }
  const int m0 = tile * kM, tok0 = blockIdx.x * kWideTokens;
  const bool okA = active && m0 + g < N, okB = active && m0 + g + 8 < N;
  const u16* rowA = W + size_t(okA ? m0 + g : 0) * K;
  const u16* rowB = W + size_t(okB ? m0 + g + 8 : 0) * K;
  const int nBlocks = (K + kBlockK - 1) / kBlockK;

  float tot[kWideNT][4], acc[kWideNT][4];
#pragma unroll
  for (int nt = 0; nt < kWideNT; nt++)
#pragma unroll
    for (int i = 0; i < 4; i++) tot[nt][i] = 0.f, acc[nt][i] = 0.f;
  uint4 wa[kSubs], wb[kSubs], na[kSubs], nb[kSubs];
  // Prologue: block 0's x and weights.
  stageX(xs[0], xh, T, K, tok0, 0);
  cpAsyncCommit();
  loadW<false>(wa, wb, rowA, rowB, okA, okB, q * kChunk, K);
  int buf = 0;
  for (int c = 0; c < kSplit; c++) {
    for (int blk = c; blk < nBlocks; blk += kSplit) {
      const int next = nextBlock(blk, nBlocks);
      if (next >= 0) {
        stageX(xs[buf ^ 1], xh, T, K, tok0, next);
        loadW<false>(na, nb, rowA, rowB, okA, okB, next * kBlockK + q * kChunk, K);
      }
      cpAsyncCommit();
      cpAsyncWait<1>();
      __syncthreads();
      const u16* xb = xs[buf];
#pragma unroll
      for (int s = 0; s < kSubs; s++) {
        const u32 lo[4] = {wa[s].x, wb[s].x, wa[s].y, wb[s].y};
        const u32 hi[4] = {wa[s].z, wb[s].z, wa[s].w, wb[s].w};
#pragma unroll
        for (int nt = 0; nt < kWideNT; nt++) {
          const uint4 v = *reinterpret_cast<const uint4*>(xb + (nt * kN + g) * kXStride + s * kBlock + q * kChunk);
          mma16816(acc[nt], lo, v.x, v.y);
          mma16816(acc[nt], hi, v.z, v.w);
        }
      }
      __syncthreads();
      buf ^= 1;
#pragma unroll
      for (int s = 0; s < kSubs; s++) wa[s] = na[s], wb[s] = nb[s];
    }
    // The narrow kernel's order: slice 0, then + slice 1, + slice 2, ...
#pragma unroll
    for (int nt = 0; nt < kWideNT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        tot[nt][i] = c == 0 ? acc[nt][i] : tot[nt][i] + acc[nt][i];
        acc[nt][i] = 0.f;
      }
  }
  cpAsyncWait<0>();
  if (!active) return;
  const int chA = m0 + g, chB = m0 + g + 8;
  const float biasA = bias && okA ? bias[chA] : 0.f, biasB = bias && okB ? bias[chB] : 0.f;
#pragma unroll
  for (int nt = 0; nt < kWideNT; nt++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int ch = i < 2 ? chA : chB, t = tok0 + nt * kN + 2 * q + (i & 1);
      if (ch < N && t < T) y[size_t(t) * N + ch] = tot[nt][i] + (i < 2 ? biasA : biasB);
    }
}

// ----------------------------------------------------------------------------
// The tiled wide kernel (v7, T > kNarrowRows; linear_f16_wide above is v3,
// kept as Linear.WideV3): the same arithmetic per output as the narrow
// kernel, with both operands staged through shared memory and reused
// across a warp's 2-4 m-tiles and 4 n-tiles.
//
// A CTA computes kTileM = 128 channels (8 m-tiles of the concatenated
// groups, blockIdx.y) x BN tokens (64 or 128) for S (1, 2, 4, 8) of the
// kSplit classes of k-blocks. Its 8 warps form kWarpsM x kWarpsN; warp
// (wm, wn) owns MT m-tiles x kTiledNT = 4 n-tiles (a 64x32 or 32x32
// accumulator tile). Every k-block is walked as two stages of KS = kStageK =
// 64 k (or one of 128: linear_f16_tiled<128, 128>, a variant): W's 128 rows
// and x's BN rows of the stage are copied by cp.async into a ring of STAGES
// buffers (STAGES - 1 in flight while one is multiplied), rows of 2·KS
// bytes whose 16-byte chunks are XOR-swizzled by the row's parity (chunk c
// of row r at c ^ 4(r & 1)): a quarter-warp's 8 lanes (rows 2p, 2p+1,
// chunks 4s..4s+3) then hit 8 distinct bank groups. Per 32-k
// step each lane reads 16 bytes (LDS.128) of its rows g and g+8 per m-tile
// and of token g per n-tile: the narrow kernel's registers (its permuted
// k), and every accumulator takes the lo mma then the hi mma of the step,
// steps in k order, blocks of its class in order, from zero.
//
// The classes: with S = 1 a CTA walks the classes 0..kSplit-1 in turn as
// v3 does, total = class 0, then + class 1, ... (empty classes included).
// With S > 1 the S CTAs of a thread block cluster (blockIdx.x % S their
// rank) share one output tile: in round j rank r computes class jS + r;
// at the round's end ranks 1..S-1 put their accumulators in shared memory
// and rank 0 adds its own class then theirs in rank order, read through
// distributed shared memory (two cluster barriers a round): class order
// again. So every output element is bitwise the narrow kernel's and v3's,
// at any BN and S. Rank 0 adds the bias and writes y.
constexpr int kTileM = 128;                       // channels a CTA: 8 m-tiles
constexpr int kStageK = 64;                       // k a ring stage (KS): half a k-block
constexpr int kTiledNT = 4;                       // n-tiles a warp: 32 tokens
// kDeepStages is the deep ring's depth (v8: BN 64 in a cluster at one CTA
// an SM; 8 x 24 KiB + the 32 KiB accumulator tile = 224 KiB, under the
// H100's 227 KiB a block): 7 stages in flight.
constexpr int kDeepStages = 8;

// TiledShape is the warp layout and shared memory of a BN-token CTA tile
// whose classes are split over a cluster of S CTAs, in ring stages of KS k
// (kStageK, or a whole k-block: kBlockK).
template <int BN, int S, int KS, bool DEEP = false>
struct TiledShape {
  static constexpr int kWarpsN = BN / (kTiledNT * kN);     // 2 (BN 64) or 4 (BN 128)
  static constexpr int kWarpsM = kSplit / kWarpsN;         // 4 or 2
  static constexpr int kMT = kTileM / kM / kWarpsM;        // m-tiles a warp: 2 or 4
  // Ring depth: 3 stages at BN 64 (2 CTAs an SM; 4 measured 2-5% slower
  // at 55 rows, session 22 call 2) and of whole k-blocks, 4 at BN 128;
  // DEEP (BN 64 in a cluster, v8): kDeepStages, one CTA an SM.
  static constexpr int kStages = DEEP ? kDeepStages : KS == kBlockK || BN == 64 ? 3 : 4;
  static_assert(!DEEP || (BN == 64 && KS == kStageK && S > 1), "the deep ring is BN 64's clustered variant");
  // CTAs an SM the launch bounds ask for: 2 at BN 64 but DEEP, else 1.
  static constexpr int kMinBlocks = BN == 64 && !DEEP ? 2 : 1;
  static constexpr int kChunks = KS / kChunk;              // 16-byte chunks a row a stage (8 or 16)
  static constexpr int kPerBlock = kBlockK / KS;           // stages a k-block (2 or 1)
  static constexpr int kStageHalves = (kTileM + BN) * KS;
  static_assert((KS == kStageK || KS == kBlockK) && kChunks % 8 == 0, "128- or 256-byte rows");
  static constexpr int kRingBytes = kStages * kStageHalves * 2;
  static constexpr int kRedBytes = kTileM * BN * 4;        // one accumulator tile (S > 1)
  static_assert(kWarpsM * kWarpsN == kSplit && kMT * kM * kWarpsM == kTileM, "8 warps cover the tile");
};

// cpAsync16Z copies 16 bytes global -> shared (cp.async, the L2 asked for
// the aligned 256 bytes around src), or writes 16 zero bytes when !ok
// (src-size 0: src is not read).
__device__ __forceinline__ void cpAsync16Z(u32 dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0)
               : "memory");
}

// swz is the physical 16-byte chunk of chunk c in a row of parity (r & 1).
__device__ __forceinline__ int swz(int r, int c) { return c ^ ((r & 1) << 2); }

// tileGroup resolves m-tile `tile` of the concatenated groups: its weight,
// bias, output, channel count and first channel (N = 0 past the last).
__device__ __forceinline__ void tileGroup(int tile, int tiles0, int tiles1, int tiles2, const u16* w0,
                                          const float* b0, float* y0, int n0, const u16* w1, const float* b1,
                                          float* y1, int n1, const u16* w2, const float* b2, float* y2, int n2,
                                          const u16*& W, const float*& bias, float*& y, int& N, int& m0) {
  W = w0, bias = b0, y = y0, N = n0;
  if (tile >= tiles0 + tiles1 + tiles2) {
    N = 0, tile = 0;
  } else if (tile >= tiles0 + tiles1) {
    tile -= tiles0 + tiles1;
    W = w2, bias = b2, y = y2, N = n2;
  } else if (tile >= tiles0) {
    tile -= tiles0;
    W = w1, bias = b1, y = y1, N = n1;
  }
  m0 = tile * kM;
}

// TiledSeq walks one CTA's k-blocks in order (classes rank, rank + S, ...;
// each class's blocks in order; PER stages a block): blk < 0 after the last.
template <int S, int PER>
struct TiledSeq {
  int j, blk, half;
  __device__ __forceinline__ void seek(int rank, int nBlocks) {  // first non-empty class from j
    for (; j < kSplit / S; j++)
      if (j * S + rank < nBlocks) {
        blk = j * S + rank;
        return;
      }
    blk = -1;
  }
  __device__ __forceinline__ void next(int rank, int nBlocks) {
    if (++half < PER) return;
    half = 0;
    blk += kSplit;
    if (blk < nBlocks) return;
    j++;
    seek(rank, nBlocks);
  }
};

// TiledLoader issues a CTA's ring copies: thread i copies chunk i % C of
// rows i / C + Pj of W's 128 rows (j < 128 / P) and of x's BN rows (j < BN
// / P) each stage (C chunks a row, P = kThreads / C rows a pass), zero-filled
// past N, T and K. No commits: the caller commits a stage's group.
template <int BN, int S, int KS, bool DEEP>
struct TiledLoader {
  using Sh = TiledShape<BN, S, KS, DEEP>;
  static constexpr int kRowsPer = kThreads / Sh::kChunks;  // 32 or 16
  const u16* wsrc[kTileM / kRowsPer];
  const u16 *xh, *w0;
  int T, K, tok0, lc, lr;
  u32 ring0;
  __device__ __forceinline__ TiledLoader(const u16* xh_, int T_, int K_, const u16* w0_, const float* b0, float* y0,
                                         int n0, const u16* w1, const float* b1, float* y1, int n1, const u16* w2,
                                         const float* b2, float* y2, int n2, u32 ring)
      : xh(xh_), w0(w0_), T(T_), K(K_), tok0(int(blockIdx.x / S) * BN), lc(int(threadIdx.x) % Sh::kChunks),
        lr(int(threadIdx.x) / Sh::kChunks), ring0(ring) {
    const int tiles0 = (n0 + kM - 1) / kM, tiles1 = (n1 + kM - 1) / kM, tiles2 = (n2 + kM - 1) / kM;
#pragma unroll
    for (int j = 0; j < kTileM / kRowsPer; j++) {
      const int r = lr + j * kRowsPer;
      const u16* W;
      const float* bias;
      float* y;
      int N, m0;
      tileGroup(blockIdx.y * (kTileM / kM) + r / kM, tiles0, tiles1, tiles2, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2,
                y2, n2, W, bias, y, N, m0);
      wsrc[j] = m0 + r % kM < N ? W + size_t(m0 + r % kM) * K + lc * kChunk : nullptr;
    }
  }
  // loadW copies W's rows of stage (blk, half) into ring buffer buf.
  __device__ __forceinline__ void loadW(int buf, int blk, int half) const {
    const int k = blk * kBlockK + half * KS + lc * kChunk;
    const u32 base = ring0 + u32(buf * Sh::kStageHalves * 2);
#pragma unroll
    for (int j = 0; j < kTileM / kRowsPer; j++) {
      const int r = lr + j * kRowsPer;
      const bool ok = k < K && wsrc[j] != nullptr;
      cpAsync16Z(base + u32((r * KS + swz(r, lc) * kChunk) * 2), ok ? wsrc[j] + (k - lc * kChunk) : w0, ok);
    }
  }
  // loadX copies x's BN rows of stage (blk, half) into ring buffer buf.
  __device__ __forceinline__ void loadX(int buf, int blk, int half) const {
    const int k = blk * kBlockK + half * KS + lc * kChunk;
    const u32 base = ring0 + u32(buf * Sh::kStageHalves * 2);
#pragma unroll
    for (int j = 0; j < BN / kRowsPer; j++) {
      const int r = lr + j * kRowsPer, t = tok0 + r;
      const bool ok = k < K && t < T;
      cpAsync16Z(base + u32(((kTileM + r) * KS + swz(r, lc) * kChunk) * 2), ok ? xh + size_t(t) * K + k : xh,
                 ok);
    }
  }
};

// tiledRank is the CTA's rank in its cluster of S (0 without one).
template <int S>
__device__ __forceinline__ int tiledRank() {
  if constexpr (S > 1) return int(clusterRank());
  return 0;
}

// tiledEarlyW issues the weight copies of the ring's first stage (v8:
// with early, before the kernel's dependency wait: the backend's weights
// are written only at load, never by a kernel ahead); tiledBody's prologue
// then adds that stage's x copies and commits them as one group, as
// without early. (All STAGES - 1 prologue stages early made the first
// stage's group wait for them all: lm_head at 100 rows +1%, wide2 call 1.)
// The same copies, into the same buffers, as without early.
template <int BN, int S, int KS, bool DEEP>
__device__ __forceinline__ void tiledEarlyW(int K, const u16* w0, int n0, const u16* w1, int n1, const u16* w2,
                                            int n2) {
  using Sh = TiledShape<BN, S, KS, DEEP>;
  extern __shared__ __align__(128) unsigned char tiledSmem[];
  const TiledLoader<BN, S, KS, DEEP> ld(nullptr, 0, K, w0, nullptr, nullptr, n0, w1, nullptr, nullptr, n1, w2,
                                        nullptr, nullptr, n2, u32(__cvta_generic_to_shared(tiledSmem)));
  const int rank = tiledRank<S>(), nBlocks = (K + kBlockK - 1) / kBlockK;
  TiledSeq<S, Sh::kPerBlock> pro{0, -1, 0};
  pro.seek(rank, nBlocks);
  if (pro.blk >= 0) ld.loadW(0, pro.blk, pro.half);
}

// tiledBody is linear_f16_tiled's work (the cluster attribute is the only
// difference between the S instantiations' entry points), called after the
// kernel's dependency wait; early: tiledEarlyW has issued the first
// stage's weight copies.
template <int BN, int S, int KS, bool DEEP>
__device__ __forceinline__ void tiledBody(const u16* __restrict__ xh, int T, int K, int early, const u16* w0,
                                          const float* b0, float* y0, int n0, const u16* w1, const float* b1,
                                          float* y1, int n1, const u16* w2, const float* b2, float* y2, int n2) {
  using Sh = TiledShape<BN, S, KS, DEEP>;
  constexpr int MT = Sh::kMT, NT = kTiledNT, STAGES = Sh::kStages;
  extern __shared__ __align__(128) unsigned char tiledSmem[];
  u16* ring = reinterpret_cast<u16*>(tiledSmem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int wm = warp % Sh::kWarpsM, wn = warp / Sh::kWarpsM;
  const int rank = tiledRank<S>();
  const int tok0 = int(blockIdx.x / S) * BN;
  const int tiles0 = (n0 + kM - 1) / kM, tiles1 = (n1 + kM - 1) / kM, tiles2 = (n2 + kM - 1) / kM;
  const int nBlocks = (K + kBlockK - 1) / kBlockK;
  const TiledLoader<BN, S, KS, DEEP> ld(xh, T, K, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2, y2, n2,
                                        u32(__cvta_generic_to_shared(ring)));

  float tot[MT][NT][4], acc[MT][NT][4];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) tot[m][n][i] = 0.f, acc[m][n][i] = 0.f;

  TiledSeq<S, Sh::kPerBlock> pro{0, -1, 0};
  pro.seek(rank, nBlocks);
#pragma unroll
  for (int st = 0; st < STAGES - 1; st++) {
    if (pro.blk >= 0) {
      if (st > 0 || !early) ld.loadW(st, pro.blk, pro.half);
      ld.loadX(st, pro.blk, pro.half);
      pro.next(rank, nBlocks);
    }
    cpAsyncCommit();
  }
  int cbuf = 0, pbuf = STAGES - 1;
  // The lane's chunk of each 32-k step s2 is swz(g, 4·s2 + q): rows g,
  // g+8 and token rows g share g's parity (every row base below is even).
  const float4* red = reinterpret_cast<const float4*>(tiledSmem + Sh::kRingBytes);
  for (int j = 0; j < kSplit / S; j++) {
    for (int blk = j * S + rank; blk < nBlocks; blk += kSplit) {
#pragma unroll 1
      for (int half = 0; half < Sh::kPerBlock; half++) {
        cpAsyncWait<STAGES - 2>();
        __syncthreads();
        if (pro.blk >= 0) {
          ld.loadW(pbuf, pro.blk, pro.half);
          ld.loadX(pbuf, pro.blk, pro.half);
          pro.next(rank, nBlocks);
        }
        cpAsyncCommit();
        pbuf = pbuf == STAGES - 1 ? 0 : pbuf + 1;
        const u16* Ws = ring + cbuf * Sh::kStageHalves;
        const u16* Xs = Ws + kTileM * KS;
        cbuf = cbuf == STAGES - 1 ? 0 : cbuf + 1;
#pragma unroll
        for (int s2 = 0; s2 < KS / kBlock; s2++) {
          const int ch = swz(g, 4 * s2 + q) * kChunk;
          uint4 a[MT][2], b[NT];
#pragma unroll
          for (int m = 0; m < MT; m++) {
            const int r = (wm * MT + m) * kM + g;
            a[m][0] = *reinterpret_cast<const uint4*>(Ws + r * KS + ch);
            a[m][1] = *reinterpret_cast<const uint4*>(Ws + (r + 8) * KS + ch);
          }
#pragma unroll
          for (int n = 0; n < NT; n++)
            b[n] = *reinterpret_cast<const uint4*>(Xs + ((wn * NT + n) * kN + g) * KS + ch);
          // Every accumulator's lo mma, then every hi mma (the step's order
          // per accumulator; independent chains between them).
#pragma unroll
          for (int m = 0; m < MT; m++) {
            const u32 lo[4] = {a[m][0].x, a[m][1].x, a[m][0].y, a[m][1].y};
#pragma unroll
            for (int n = 0; n < NT; n++) mma16816(acc[m][n], lo, b[n].x, b[n].y);
          }
#pragma unroll
          for (int m = 0; m < MT; m++) {
            const u32 hi[4] = {a[m][0].z, a[m][1].z, a[m][0].w, a[m][1].w};
#pragma unroll
            for (int n = 0; n < NT; n++) mma16816(acc[m][n], hi, b[n].z, b[n].w);
          }
        }
      }
    }
    // The round's classes into the total, in class order.
    if constexpr (S == 1) {
#pragma unroll
      for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
          for (int i = 0; i < 4; i++) tot[m][n][i] = j == 0 ? acc[m][n][i] : tot[m][n][i] + acc[m][n][i];
    } else {
      float4* mine = const_cast<float4*>(red) + warp * MT * NT * 32 + lane;
      if (j > 0) clusterWait();  // rank 0 has read the last round's
      if (rank > 0) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int n = 0; n < NT; n++)
            mine[(m * NT + n) * 32] = make_float4(acc[m][n][0], acc[m][n][1], acc[m][n][2], acc[m][n][3]);
      }
      clusterArrive();
      clusterWait();
      if (rank == 0) {
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
          for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) tot[m][n][i] = j == 0 ? acc[m][n][i] : tot[m][n][i] + acc[m][n][i];
#pragma unroll 1
        for (int r = 1; r < S; r++) {
#pragma unroll
          for (int m = 0; m < MT; m++)
#pragma unroll
            for (int n = 0; n < NT; n++) {
              const float4 v = clusterLoadF32x4(mine + (m * NT + n) * 32, u32(r));
              tot[m][n][0] += v.x, tot[m][n][1] += v.y, tot[m][n][2] += v.z, tot[m][n][3] += v.w;
            }
        }
      }
      clusterArrive();
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[m][n][i] = 0.f;
  }
  cpAsyncWait<0>();
  if constexpr (S > 1) {
    clusterWait();  // no CTA leaves before rank 0 has read its shared memory
    if (rank > 0) return;
  }
  // C fragment: c0, c1 channel g, tokens 2q, 2q+1; c2, c3 channel g+8.
#pragma unroll
  for (int m = 0; m < MT; m++) {
    const u16* W;
    const float* bias;
    float* y;
    int N, m0;
    tileGroup(blockIdx.y * (kTileM / kM) + wm * MT + m, tiles0, tiles1, tiles2, w0, b0, y0, n0, w1, b1, y1, n1, w2,
              b2, y2, n2, W, bias, y, N, m0);
    const int chA = m0 + g, chB = m0 + g + 8;
    const float biasA = bias && chA < N ? bias[chA] : 0.f, biasB = bias && chB < N ? bias[chB] : 0.f;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int ch = i < 2 ? chA : chB, t = tok0 + (wn * NT + n) * kN + 2 * q + (i & 1);
        if (ch < N && t < T) y[size_t(t) * N + ch] = tot[m][n][i] + (i < 2 ? biasA : biasB);
      }
  }
}

// linear_f16_tiled: grid (token blocks of BN) · S x ceil(m-tiles / 8),
// kThreads threads, TiledShape<BN, S, KS, DEEP>::kRingBytes (+ kRedBytes
// where S > 1) of dynamic shared memory; the group arguments as
// linear_f16_wide's; early as linear_f16's (the first stage's weight
// copies before the dependency wait: tiledEarlyW).
template <int BN, int KS>
__global__ void __launch_bounds__(kThreads, TiledShape<BN, 1, KS>::kMinBlocks)
    linear_f16_tiled(const u16* __restrict__ xh, int T, int K, int early, const u16* w0, const float* b0, float* y0,
                     int n0, const u16* w1, const float* b1, float* y1, int n1, const u16* w2, const float* b2,
                     float* y2, int n2) {
  if (early) tiledEarlyW<BN, 1, KS, false>(K, w0, n0, w1, n1, w2, n2);
  gridDependencyWait();
  gridLaunchDependents();
  tiledBody<BN, 1, KS, false>(xh, T, K, early, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2, y2, n2);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// linear_f16_tiled_c<BN, S, DEEP>: linear_f16_tiled over clusters of S
// CTAs along x (Hopper), each a share of the classes; DEEP (BN 64): the
// kDeepStages ring at one CTA an SM (v8).
template <int BN, int S, bool DEEP>
__global__ void __cluster_dims__(S, 1, 1) __launch_bounds__(kThreads, TiledShape<BN, S, kStageK, DEEP>::kMinBlocks)
    linear_f16_tiled_c(const u16* __restrict__ xh, int T, int K, int early, const u16* w0, const float* b0,
                       float* y0, int n0, const u16* w1, const float* b1, float* y1, int n1, const u16* w2,
                       const float* b2, float* y2, int n2) {
  if (early) tiledEarlyW<BN, S, kStageK, DEEP>(K, w0, n0, w1, n1, w2, n2);
  gridDependencyWait();
  gridLaunchDependents();
  tiledBody<BN, S, kStageK, DEEP>(xh, T, K, early, w0, b0, y0, n0, w1, b1, y1, n1, w2, b2, y2, n2);
}
#endif

}  // namespace linear

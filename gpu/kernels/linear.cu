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
// Work: a CTA computes one m-tile (kM = 16 output channels) for a block of
// NT·8 tokens (blockIdx.x) with kSplit warps. K is cut into k-blocks of
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
//      in flight per m-tile.
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

// loadW loads one k-block of the lane's two weight rows: 16 bytes of row
// g and of row g+8 at k = k + 32s for each s < kSubs (zeros past K and for
// rows past N).
__device__ __forceinline__ void loadW(uint4 (&a)[kSubs], uint4 (&b)[kSubs], const u16* rowA, const u16* rowB,
                                      bool okA, bool okB, int k, int K) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int s = 0; s < kSubs; s++) {
    const bool ok = k + s * kBlock < K;
    a[s] = ok && okA ? ldgStream(rowA + k + s * kBlock) : zero;
    b[s] = ok && okB ? ldgStream(rowB + k + s * kBlock) : zero;
  }
}

// linear_f16 computes NT n-tiles (NT·8 tokens) of one m-tile; the group
// arguments are (W, bias, y, N) of up to three weights sharing x, n = 0
// for an absent group.
template <int NT>
__global__ void __launch_bounds__(kThreads) linear_f16(const float* __restrict__ x, int T, int K,
                                                       const u16* w0, const float* b0, float* y0, int n0,
                                                       const u16* w1, const float* b1, float* y1, int n1,
                                                       const u16* w2, const float* b2, float* y2, int n2) {
  __shared__ float part[kSplit - 1][NT * 4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  // The group and m-tile of this CTA.
  int tile = blockIdx.y;
  const int tiles0 = (n0 + kM - 1) / kM, tiles1 = (n1 + kM - 1) / kM;
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
  const int m0 = tile * kM, tok0 = blockIdx.x * (NT * kN);
  const bool okA = m0 + g < N, okB = m0 + g + 8 < N;
  const u16* rowA = W + size_t(okA ? m0 + g : 0) * K;
  const u16* rowB = W + size_t(okB ? m0 + g + 8 : 0) * K;
  const float* xr[NT];
  bool okT[NT];
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    const int t = tok0 + nt * kN + g;
    okT[nt] = t < T;
    xr[nt] = x + size_t(okT[nt] ? t : 0) * K;
  }
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; nt++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[nt][i] = 0.f;

  // Warp w takes k-blocks w, w+kSplit, ... in order, the next block's
  // weights loaded before the current one's math (16 loads in flight).
  const int nBlocks = (K + kBlockK - 1) / kBlockK;
  uint4 wa[kSubs], wb[kSubs], na[kSubs], nb[kSubs];
  if (warp < nBlocks) loadW(wa, wb, rowA, rowB, okA, okB, warp * kBlockK + q * kChunk, K);
  for (int blk = warp; blk < nBlocks; blk += kSplit) {
    if (blk + kSplit < nBlocks) loadW(na, nb, rowA, rowB, okA, okB, (blk + kSplit) * kBlockK + q * kChunk, K);
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

  // Warps 1..kSplit-1 hand their partials to warp 0, which adds them in
  // warp order, then the bias.
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
  // C fragment: c0, c1 channel g, tokens 2q, 2q+1; c2, c3 channel g+8.
  const int chA = m0 + g, chB = m0 + g + 8;
  const float biasA = bias && okA ? bias[chA] : 0.f, biasB = bias && okB ? bias[chB] : 0.f;
#pragma unroll
  for (int nt = 0; nt < NT; nt++)
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int ch = i < 2 ? chA : chB, t = tok0 + nt * kN + 2 * q + (i & 1);
      if (ch < N && t < T) y[size_t(t) * N + ch] = acc[nt][i] + (i < 2 ? biasA : biasB);
    }
}

}  // namespace linear

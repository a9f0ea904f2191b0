// gemv.cu: the linear layer of a decode step, y = x·Wᵀ + bias, for a few
// rows of x (T <= 8 tokens), where a GEMM library's tiles waste most of a
// weight read on rows that do not exist.
//
//   x    [T][K] float32 (the activations, read as they are: no fp16 copy)
//   W    [N][K] fp16 row-major (the backend's weight layout)
//   bias [N] float32, or null
//   y    [T][N] float32
//
// Work: S warps per output channel n (S = 1, 2 or 4: split-K, so that a
// small N still puts enough warps, and bytes in flight, on every SM), kWarps
// warps per CTA. Warp s of a channel takes the s-th of S contiguous slices
// of K (multiples of 8 channels). Lane l reads 8 consecutive weights (one
// 16-byte load) at k = 8l + 256i of its slice, converts them to float and
// multiplies them by the T rows' x (float4 loads, L1 hits: all warps of an
// SM read the same x). A lane issues its loads in batches of 4 (64 bytes),
// each batch after the math of the one before (v6's schedule, U = kBatch),
// or keeps U loads (U = 4, 8 or 16: 64-256 bytes) in flight in a ring of
// registers, each refilled right before its math (rowDot). Each warp's
// partial sums are
// reduced with xor shuffles, the S slices added in slice order through
// shared memory: a fixed order, deterministic. A launch computes up to
// kMaxGroups weights over the same x (q, k, v), CTA ranges one after the
// other, with one S for all.
//
// Programmatic dependent launch: gemv.cu is a GridDependent program
// (gemv.go). Every thread waits for the kernel ahead (gridDependencyWait)
// before reading x or writing y, then lets the next kernel's CTAs in; with
// early (GEMV.EarlyWeights) a lane's first U weight loads are issued
// before the wait, so they overlap the tail of the kernel ahead.
//
// Versions (H100, T = 1; docs/perf/decode-step.md):
//   v1 S = 1: q/o 4096x4096 21.9 us (51% of the read ceiling), k/v
//      1024x4096 11.7 us (24%), gate/up 14336x4096 47.9 us (81%).
//   v2 split-K for small N.
//   v3 programmatic dependent launch, optional early weight loads (v6): in a
//      graph of 8 Llama-3.1-8B layers -1.6 us a layer with PDL, -1.1 more
//      with the early loads (13 launches a layer; 181 us).
//   v4 groups: q, k and v (gate and up) in one grid with one split
//      for their summed N (decode-step.md v9): k and v 1024x4096 took split
//      4 alone and take q's 2 in the group of 6144 channels, so their sums
//      add in a different order than v3's. In a Llama-3.1-8B step (ncu):
//      q|k|v 19.8 us (84% of the read ceiling; v3 28.2 for the three),
//      gate|up 78.7 us (98%; v3 86.0): -0.40 to -0.48 ms a decode step.
//   v5 split 4 up to N = 4096 (was 2048; gemv.go's gemvSplitFor): o and
//      down (4096 channels) take 4 instead of 2, their slices added in a
//      different order than v4's (decode-step.md v10).
//   v6 pair kernels (gemv_f16_pair): SwiGLU after gate|up and RoPE after
//      q|k|v computed in the GEMV's epilogue, a launch and a round trip of
//      the outputs less each; the same bits as the separate kernels
//      (decode-step.md v14). ncu, Llama-3.1-8B at T = 1: gate|up+swiglu
//      80.4 us (78.6 + 3.0 separate), q|k|v+rope 20.9 (20.0 + 3.5); the
//      decode step -0.03 ms on average (PDL already hid most of the two
//      small kernels).
//   v7 the RoPE pair's cos and sin computed while its first loads fly,
//      not after its barrier: the decode step -0.07 to -0.13 ms at 32K and
//      128K (decode-step.md v20b). Rings of U = 4, 8, 16 loads a lane
//      (rowDot) beside v6's schedule (U = kBatch, the default): the same
//      bits, faster alone but 0.17-0.3 ms a step slower (v20a), so a knob.
//   v8 split 2 up to 32768 channels at one row of x (gemv.go's
//      gemvDefaultSplits): gate|up (28672) takes 2 instead of 1, its two K
//      slices added in order; the B = 1 decode step -0.08 to -0.1 ms
//      (decode-step.md v21). The backend issues the RoPE launch's first
//      loads early by default (GEMV.EarlyKinds).
// Needs K % 8 == 0 (16-byte rows); the Go side falls back to cuBLASLt
// otherwise.
//
// Go wrapper: gemv.go; test: gemv_test.go (float64 reference).

#include "bitdecode.cuh"

namespace gemv {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 8;  // halves per lane per load

template <int T>
__device__ __forceinline__ void fma8(float (&acc)[T], const uint4& w, const float* __restrict__ x, int K, int k) {
  float wf[8];
  const u32 words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 f = h2x2(words[i]);
    wf[2 * i] = f.x;
    wf[2 * i + 1] = f.y;
  }
#pragma unroll
  for (int t = 0; t < T; t++) {
    const float4 a = *reinterpret_cast<const float4*>(x + size_t(t) * K + k);
    const float4 b = *reinterpret_cast<const float4*>(x + size_t(t) * K + k + 4);
    acc[t] = fmaf(wf[0], a.x, acc[t]);
    acc[t] = fmaf(wf[1], a.y, acc[t]);
    acc[t] = fmaf(wf[2], a.z, acc[t]);
    acc[t] = fmaf(wf[3], a.w, acc[t]);
    acc[t] = fmaf(wf[4], b.x, acc[t]);
    acc[t] = fmaf(wf[5], b.y, acc[t]);
    acc[t] = fmaf(wf[6], b.z, acc[t]);
    acc[t] = fmaf(wf[7], b.w, acc[t]);
  }
}

// kStep is the halves a warp's one load covers (32 lanes x kChunk).
constexpr int kStep = 32 * kChunk;

// sliceBounds returns slice s's part [k0, k1) of K for split S: K/S rounded
// up to whole kChunk-channel chunks.
template <int S>
__device__ __forceinline__ int2 sliceBounds(int K, int slice) {
  const int sliceLen = (K / kChunk + S - 1) / S * kChunk;
  const int k0 = slice * sliceLen;
  return make_int2(k0, min(K, k0 + sliceLen));
}

// kBatch is the depth U that selects v6's schedule: batches of kBatchLen
// loads issued together, their math, then the next batch. Any other U is a
// ring of U loads (rowDot).
constexpr int kBatch = 1;
constexpr int kBatchLen = 4;

// Ring is the register array of depth U: U loads, kBatchLen for kBatch.
template <int U>
struct Ring {
  static constexpr int kLen = U == kBatch ? kBatchLen : U;
};

// prefetch issues a lane's first U weight loads of its slice (k the lane's
// first channel, k1 the slice's end): slot u takes k + u·kStep where that is
// inside the slice. Only W is read: gemv.cu calls it before the dependency
// wait where early is set.
// For kBatch (v6) it issues the first batch only where the whole batch is
// inside the slice (rowDot then does the rest one load at a time).
template <int U>
__device__ __forceinline__ void prefetch(uint4 (&w)[Ring<U>::kLen], const u16* __restrict__ row, int k, int k1,
                                         bool valid) {
  if (!valid) return;
  if constexpr (U == kBatch) {
    if (k + (kBatchLen - 1) * kStep < k1) {
#pragma unroll
      for (int u = 0; u < kBatchLen; u++) w[u] = ldgStream(row + k + u * kStep);
    }
    return;
  }
#pragma unroll
  for (int u = 0; u < U; u++)
    if (k + u * kStep < k1) w[u] = ldgStream(row + k + u * kStep);
}

// rowDot is a lane's part of row·x over its slice (k the lane's first
// channel, k1 the slice's end), for T rows of x, into acc (zeroed here; left
// 0 where !valid), over the loads w that prefetch issued. A ring (U = 4, 8,
// 16; v7): each step takes its 16 bytes from slot u and refills the slot
// with the load U steps ahead before its math, so U loads (16·U bytes a
// lane) stay in flight to the slice's end. kBatch (v6's schedule): the
// batch's math, then the next kBatchLen loads together. The products are
// added at k, k + kStep, k + 2·kStep, ... in that order at every U: every
// kernel of this file sums a channel with it, and U never changes a bit.
template <int T, int U>
__device__ __forceinline__ void rowDot(float (&acc)[T], const u16* __restrict__ row, const float* __restrict__ x,
                                       int K, int k, int k1, bool valid, int early, uint4 (&w)[Ring<U>::kLen]) {
#pragma unroll
  for (int t = 0; t < T; t++) acc[t] = 0.f;
  if (!valid) return;
  if constexpr (U == kBatch) {  // v6's code: its first batch in w where it fits (loaded here unless early)
    if (k + (kBatchLen - 1) * kStep < k1) {
      if (!early) prefetch<U>(w, row, k, k1, true);
#pragma unroll
      for (int u = 0; u < kBatchLen; u++) fma8<T>(acc, w[u], x, K, k + u * kStep);
      k += kBatchLen * kStep;
    }
    for (; k + (kBatchLen - 1) * kStep < k1; k += kBatchLen * kStep) {
      uint4 b[kBatchLen];
#pragma unroll
      for (int u = 0; u < kBatchLen; u++) b[u] = ldgStream(row + k + u * kStep);
#pragma unroll
      for (int u = 0; u < kBatchLen; u++) fma8<T>(acc, b[u], x, K, k + u * kStep);
    }
    for (; k < k1; k += kStep) fma8<T>(acc, ldgStream(row + k), x, K, k);
    return;
  }
  constexpr int R = Ring<U>::kLen;
  for (; k < k1; k += R * kStep) {
#pragma unroll
    for (int u = 0; u < R; u++) {
      const int kk = k + u * kStep;
      if (kk < k1) {
        const uint4 cur = w[u];
        if (kk + R * kStep < k1) w[u] = ldgStream(row + kk + R * kStep);
        fma8<T>(acc, cur, x, K, kk);
      }
    }
  }
}

// reduceSlices adds a warp's lanes (xor shuffles), then, for S > 1, the S
// slices of a channel (warps warp - slice .. warp - slice + S - 1) in slice
// order through part: the channel's sum ends in lane 0 of its slice-0 warp.
// Every thread of the CTA calls it (a barrier for S > 1).
template <int T, int S, int W>
__device__ __forceinline__ void reduceSlices(float (&acc)[T], float (&part)[W][T], int warp, int lane, int slice) {
#pragma unroll
  for (int t = 0; t < T; t++)
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], off);
  if (S > 1) {
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < T; t++) part[warp][t] = acc[t];
    __syncthreads();
    if (lane == 0 && slice == 0)
#pragma unroll
      for (int t = 0; t < T; t++)
#pragma unroll
        for (int s = 1; s < S; s++) acc[t] += part[warp + s][t];
  }
}

// kMaxGroups is the most weights one launch computes (q, k, v; gate, up).
constexpr int kMaxGroups = 3;

// gemv_f16 computes up to kMaxGroups weights (W_i, bias_i, y_i, N_i) that
// share x in one grid: the first ceil(N0 / (kWarps / S)) CTAs take weight
// 0's channels, the next ones weight 1's, and so on (a CTA never straddles
// two weights); a weight with N = 0 has no CTAs. One split S for all of
// them; a weight's bits depend only on S, not on the others in the launch.
template <int T, int S, int U>
__global__ void __launch_bounds__(kThreads) gemv_f16(const float* __restrict__ x, int K, int early,
                                                     const u16* W0, const float* b0, float* y0, int N0,
                                                     const u16* W1, const float* b1, float* y1, int N1,
                                                     const u16* W2, const float* b2, float* y2, int N2) {
  constexpr int kPer = kWarps / S;
  // The CTA's weight, from the launch's parameters only (no memory access
  // before the dependency wait below).
  const int c0 = (N0 + kPer - 1) / kPer, c1 = (N1 + kPer - 1) / kPer, bx = blockIdx.x;
  const int g = bx < c0 ? 0 : bx < c0 + c1 ? 1 : 2;
  const u16* __restrict__ W = g == 0 ? W0 : g == 1 ? W1 : W2;
  const float* __restrict__ bias = g == 0 ? b0 : g == 1 ? b1 : b2;
  float* __restrict__ y = g == 0 ? y0 : g == 1 ? y1 : y2;
  const int N = g == 0 ? N0 : g == 1 ? N1 : N2;
  const int cta = bx - (g > 0 ? c0 : 0) - (g > 1 ? c1 : 0);
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = cta * kPer + warp / S, slice = warp % S;
  const int2 kb = sliceBounds<S>(K, slice);
  const int k1 = kb.y;
  const u16* row = W + size_t(n < N ? n : 0) * K;
  const int k = kb.x + lane * kChunk;
  // The ring's first U loads: with early set they are issued before the
  // dependency wait (W is not written by the kernel ahead; x and y are
  // touched only after it).
  uint4 w[Ring<U>::kLen];
  if (early) prefetch<U>(w, row, k, k1, n < N);
  gridDependencyWait();
  gridLaunchDependents();
  if (!early && U != kBatch) prefetch<U>(w, row, k, k1, n < N);
  float acc[T];
  rowDot<T, U>(acc, row, x, K, k, k1, n < N, early, w);
  __shared__ float part[kWarps][T];
  reduceSlices<T, S>(acc, part, warp, lane, slice);
  if (lane == 0 && slice == 0 && n < N) {
    const float b = bias ? bias[n] : 0.f;
#pragma unroll
    for (int t = 0; t < T; t++) y[size_t(t) * N + n] = acc[t] + b;
  }
}

// Pair kernels (v6, decode-step.md v14): the op after a grouped GEMV folded
// into its epilogue, where that op combines two channels of the group's
// outputs element by element. A CTA takes PairTile<S>::kPairs pairs of channels,
// each pair 2 x S warps (member m of the pair, slice s: warp 2·S·p + S·m + s),
// so 4 warps at S = 1 and 2 and 8 at S = 4. Every channel is summed as
// gemv_f16 sums it at the same S (rowDot, reduceSlices, the bias last), so
// the two values are those gemv_f16 writes; the pair's epilogue thread then
// applies the op with the separate kernel's float operations (ops.cu):
//   kPairSwiGLU  groups 0 (gate) and 1 (up) of the same N; pair n is gate's
//                row n and up's row n; dst[t,n] = act(g)·u as ops.cu's
//                swiglu (half = kActSiLU) or geglu (half = kActGeluTanh)
//                computes it: the parameter half, unused by this mode's
//                RoPE, selects the activation; gate's and up's outputs
//                written where y0, y1 are set (null: not written);
//   kPairRoPE    groups 0 (q) and 1 (k) in heads of D = 2·half, pair (h, i)
//                the rows h·D + i and h·D + i + half, rotated as ops.cu's
//                rope(_qk) rotates them (cos and sin of the float32 angle
//                pos[t]·invFreq[i] in double, rounded once); group 2 (v, N2
//                may be 0) in pairs of adjacent rows, written as they are.
constexpr int kPairSwiGLU = 0;
constexpr int kPairRoPE = 1;

// PairTile is a pair CTA's shape at split S: kPairs pairs of channels,
// kWarpsP warps.
template <int S>
struct PairTile {
  static constexpr int kPairs = 2 * S >= kWarps ? 1 : kWarps / (2 * S);
  static constexpr int kWarpsP = 2 * S * kPairs;
  static constexpr int kThreadsP = 32 * kWarpsP;
};

// gemv_f16_pair: the grouped GEMV of gemv_f16 at split S with MODE's op in
// its epilogue. Groups as gemv_f16's (W_i, b_i, y_i, N_i); dst, pos,
// invFreq and half are the op's (unused ones null or 0). CTA ranges: MODE
// kPairSwiGLU ceil(N0 / kPairs) CTAs; kPairRoPE ceil(N_i / 2 / kPairs) CTAs
// for each group i, one after the other.
template <int T, int S, int U, int MODE>
__global__ void __launch_bounds__(PairTile<S>::kThreadsP)
    gemv_f16_pair(const float* __restrict__ x, int K, int early, const u16* W0, const float* b0, float* y0, int N0,
                  const u16* W1, const float* b1, float* y1, int N1, const u16* W2, const float* b2, float* y2,
                  int N2, float* dst, const int* __restrict__ pos, const float* __restrict__ invFreq, int half) {
  constexpr int kPairs = PairTile<S>::kPairs;
  constexpr int kW = PairTile<S>::kWarpsP;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int p = warp / (2 * S), m = (warp / S) % 2, slice = warp % S;
  const int bx = blockIdx.x;
  // The pair's group, its index j in the group, its rows a and a + hh (from
  // the launch's parameters only: no memory access before the wait).
  int g = 0, j, NP, a, hh;
  if (MODE == kPairSwiGLU) {
    j = bx * kPairs + p;
    NP = N0;
    a = j;
    hh = 0;
  } else {
    const int c0 = (N0 / 2 + kPairs - 1) / kPairs, c1 = (N1 / 2 + kPairs - 1) / kPairs;
    g = bx < c0 ? 0 : bx < c0 + c1 ? 1 : 2;
    const int N = g == 0 ? N0 : g == 1 ? N1 : N2;
    j = (bx - (g > 0 ? c0 : 0) - (g > 1 ? c1 : 0)) * kPairs + p;
    NP = N / 2;
    hh = g < 2 ? half : 1;
    const int head = j / hh;
    a = head * 2 * hh + (j - head * hh);
  }
  const bool valid = j < NP;
  // This warp's weight and row.
  const u16* W;
  int r;
  if (MODE == kPairSwiGLU) {
    W = m == 0 ? W0 : W1;
    r = a;
  } else {
    W = g == 0 ? W0 : g == 1 ? W1 : W2;
    r = a + m * hh;
  }
  const u16* row = W + size_t(valid ? r : 0) * K;
  const int2 kb = sliceBounds<S>(K, slice);
  const int k1 = kb.y;
  const int k = kb.x + lane * kChunk;
  uint4 w[Ring<U>::kLen];
  if (early) prefetch<U>(w, row, k, k1, valid);
  gridDependencyWait();
  gridLaunchDependents();
  if (!early && U != kBatch) prefetch<U>(w, row, k, k1, valid);
  // RoPE's cos and sin for the epilogue thread's pair (q and k), computed
  // while the ring's first loads are in flight rather than after the
  // barrier at the end of the last wave (v7): the same operations.
  float rc = 0.f, rs = 0.f;
  if (MODE == kPairRoPE && g < 2 && threadIdx.x < kPairs * T) {
    const int je = j - p + threadIdx.x / T, t = threadIdx.x % T;
    if (je < NP) {
      ropeCosSin(float(pos[t]), invFreq[je % hh], rc, rs);
    }
  }
  float acc[T];
  rowDot<T, U>(acc, row, x, K, k, k1, valid, early, w);
  __shared__ float part[kW][T];
  __shared__ float val[kPairs][2][T];
  reduceSlices<T, S>(acc, part, warp, lane, slice);
  if (lane == 0 && slice == 0 && valid) {
    const float* bias = MODE == kPairSwiGLU ? (m == 0 ? b0 : b1) : (g == 0 ? b0 : g == 1 ? b1 : b2);
    const float b = bias ? bias[r] : 0.f;
#pragma unroll
    for (int t = 0; t < T; t++) val[p][m][t] = acc[t] + b;
  }
  __syncthreads();
  // The epilogue: one thread per (pair, row of x).
  if (threadIdx.x >= kPairs * T) return;
  const int pe = threadIdx.x / T, t = threadIdx.x % T;
  const int je = (MODE == kPairSwiGLU ? bx * kPairs : j - p) + pe;  // pair pe's index in the group
  if (je >= NP) return;
  const float v0 = val[pe][0][t], v1 = val[pe][1][t];
  if (MODE == kPairSwiGLU) {
    const size_t o = size_t(t) * N0 + je;
    if (y0) y0[o] = v0;
    if (y1) y1[o] = v1;
    dst[o] = __fmul_rn(gluAct(half, v0), v1);  // ops.cu's swiglu (half kActSiLU) or geglu
    return;
  }
  const int head = je / hh, i = je - head * hh;
  const int N = g == 0 ? N0 : g == 1 ? N1 : N2;
  float* y = g == 0 ? y0 : g == 1 ? y1 : y2;
  float* lo = y + size_t(t) * N + head * 2 * hh + i;
  if (g == 2) {  // v: as computed
    lo[0] = v0;
    lo[hh] = v1;
    return;
  }
  // ops.cu's rope: the angle's float32 product, cos and sin in double
  // (rc, rs above).
  ropeRotate(v0, v1, rc, rs, lo[0], lo[hh]);
}

}  // namespace gemv

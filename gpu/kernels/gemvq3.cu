// gemvq3.cu: gemvq v3, the decode GEMV over packed low-bit weights for one or
// two rows of x on CUDA cores, y = x·Ŵᵀ + bias (kernels.GEMVQ.Launch runs it
// at one row; gemvq.cu's v2 keeps T >= 2), and with -DGEMVQ_WITH_DEC=1 DEC's
// fused mode over its sums at one row (gemv_q3_dec, at the end; session 14).
// The layout is gemvq.cu's (package wq, wq/doc.go
// "Packed layout"): words [N][K/32·BITS] u32, params [N][K/G] (scale, zero)
// fp16 pairs, x [T][K] float32, bias [N] float32 or null, y [T][N] float32.
//
// Work (built like gemv.cu): a CTA is kWarps warps; S of them (split-K) share
// a row group of R rows (R = kRowsPerWarp<BITS>: 4 rows of int4/int3, 2 of
// int8, so a lane's loads of one step are 48-64 bytes), and slice s of the S
// takes the s-th of S contiguous runs of K's warp steps. In step j lane l
// owns span j·1024 + 32l .. +31 (32 channels, one 16-byte load of int4, two
// of int8, three 4-byte loads of int3) of each of its R rows; the next
// step's loads are issued before the current step's math (register double
// buffering), so 2 KB a warp stay in flight. x goes through a per-warp
// shared-memory buffer each step (stageX: coalesced float4 loads, L1 hits,
// every warp of an SM reads the same x) and each lane's span of it serves
// its R rows.
//
// Numbers: the codes are widened with gemvq.cu's codesSpan (lop3/prmt with
// the fp16 magic 0x6400 and one half2 subtraction: exact integers (q, q′) in
// half2, two codes per instruction), then to float (one cvt each, exact);
// products q·x and their sums are float32 with x as it is (not rounded to
// fp16), and the span's (scale, zero) are applied once per 32-channel span
// of a row: acc += z·Σx + s·Σq·x (Σx shared by the R rows). Float rather
// than half2 products: a half2 product or sum rounds at 2⁻¹¹, a float32 FMA
// at 2⁻²⁴, and the half2 route saves no instruction once each product is
// converted to float for the sum. A lane's spans add in step order, the
// lanes by xor shuffles, the S slices in slice order through shared memory:
// a fixed order, deterministic.
//
// Programmatic dependent launch: gemvq3.cu is a GridDependent program
// (header.go). Every thread waits for the kernel ahead (gridDependencyWait)
// before reading x or writing y, then lets the next kernel's CTAs in; with
// early set a lane's first step of codes and params is loaded before the
// wait (weights are not written by the kernel ahead).
//
// Versions (H100, T = 1, int4 G128, `bench gemvq`; docs/perf/gemvq.md):
//   v3.0 each lane read its own span of x from L1 (8 float4 128 bytes apart
//        across the warp: 32 wavefronts a load): gate/up 14336x4096 26.1 us
//        at best, v2 24.6.
//   v3.1 x through a per-warp shared buffer (stageX): gate/up 22.2-22.7 us
//        (45-46% of the read ceiling), down 22.8-24.7, q/o 10.5, k/v 6.0;
//        int8 gate/up 29.0-31.5 (63-68%); int3 gate/up 22.2-22.8. In the
//        decode step (int4 weights, int4 KV, B = 1) -0.37 to -0.41 ms.
//   v3.2 issue-bound by ncu (12.7 M warp instructions on int4 gate/up, ~890
//        a warp step where the codes need ~460): the per-step overhead cut
//        (one group division a step for the R rows, rows past N clamped
//        instead of a branch each, no zeroing of unused codes, x staged
//        without bounds checks on whole steps, two steps an iteration so
//        the double buffer is not copied): ~600 a step, no spills at T = 1;
//        the split rule by waves (gemvq.go gemvq3SplitFor). A persistent
//        grid with a cp.async ring (v3.2a) was slower and is not kept.
//        int4 gate/up 19.0-19.2 us (53-54%; 10.5 M warp instructions at
//        S 4), down 19.7 (52%), q/o 9.9, k/v 6.0; int8 gate/up 28.5-29.3
//        (68-70%), down 26.7 (75%); int3 gate/up 18.8, down 19.4. The
//        decode step (int4 weights, B = 1) -0.36 ms against v3.1.
//
// Go wrapper: gemvq.go; test: gemvq_test.go; docs/perf/gemvq.md (v3).

#include "bitdecode.cuh"
#include "gemvq.cu"

namespace gemvq3 {

using gemvq::Span;

constexpr int kWarps = 4;             // warps per CTA
constexpr int kThreads = 32 * kWarps;
constexpr int kSpan = 32;             // channels per lane per step
constexpr int kStep = 32 * kSpan;     // channels per warp step

// kRowsPerWarp is R, the rows a warp reads in each step: 64 bytes of codes
// a lane for int4 and int8, 48 for int3.
// kMinBlocks is the CTAs per SM the launch bounds ask registers for: 6 at
// one row of x (80 registers, 24 warps an SM, no spill on sm_90; unbounded
// the compiler takes 153-211 for its early loads), 5 at two (96).
// GEMVQ3_MIN_BLOCKS (an NVRTC -D knob, `bench gemvq --variants`) overrides
// it where > 0.
#ifndef GEMVQ3_MIN_BLOCKS
#define GEMVQ3_MIN_BLOCKS 0
#endif
template <int T>
constexpr int kMinBlocks = GEMVQ3_MIN_BLOCKS > 0 ? GEMVQ3_MIN_BLOCKS : T == 1 ? 6 : 5;

template <int BITS>
constexpr int kRowsPerWarp = BITS == 8 ? 2 : 4;

// Step<BITS, R> is one lane's codes of one step (a span of each of R rows)
// and the rows' (scale, zero) pairs of the span's group.
template <int BITS, int R>
struct Step {
  Span<BITS> a[R];
  u32 sz[R];
};

// preloadCodes loads step j's codes and params into st where the lane's
// span is inside K (a lane past K, or a step past the warp's run, loads
// nothing and spanDot skips it). A row past N reads row N − 1 instead (its
// sums are not written), so no row takes a branch of its own, and the
// span's group index (one division by G) serves the R rows. Only weights
// are read: gemvq3.cu calls it before the dependency wait where early is
// set.
template <int BITS, int R>
__device__ __forceinline__ void preloadCodes(Step<BITS, R>& st, const u32* __restrict__ words, const u16* __restrict__ params,
                                             int n0, int N, int K, int G, int j, int lane) {
  const int k = j * kStep + lane * kSpan;
  if (k >= K) return;
  const int rowWords = K / 32 * BITS, groups = K / G, kg = k / G;
  const u32* prm = reinterpret_cast<const u32*>(params);
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int n = min(n0 + r, N - 1);
    gemvq::loadSpan<BITS>(st.a[r], words + size_t(n) * rowWords, k);
    st.sz[r] = __ldg(prm + size_t(n) * groups + kg);
  }
}

// kXSpan is the float4 stride of a span in a warp's x staging buffer: 8
// float4 and one of padding, so that both the coalesced stores (8 lanes a
// span) and each lane's reads of its own span (lanes 144 bytes apart) are
// free of bank conflicts.
constexpr int kXSpan = 9;

// stageX copies step j's x (1024 channels of T tokens) into the warp's
// buffer xw, span by span: lane l loads channels 128i + 4l..+3 (i = 0..7),
// one coalesced 512-byte row a warp instruction (4 L1 wavefronts where each
// lane reading its own span would take 32: v3.1), and stores them where
// spanDot's lane reads its span. Zeros past K.
template <int T>
__device__ __forceinline__ void stageX(float4 (&xw)[T][32 * kXSpan], const float* __restrict__ x, int K, int j, int lane) {
  __syncwarp();  // the warp's reads of the previous step are done
  const float* xj = x + j * kStep + 4 * lane;
  float4* xl = &xw[0][(lane / 8) * kXSpan + lane % 8];
  if ((j + 1) * kStep <= K) {  // the whole step inside K (a uniform branch)
#pragma unroll
    for (int t = 0; t < T; t++)
#pragma unroll
      for (int i = 0; i < 8; i++) xl[t * 32 * kXSpan + 4 * i * kXSpan] = *reinterpret_cast<const float4*>(xj + size_t(t) * K + 128 * i);
  } else {
#pragma unroll
    for (int t = 0; t < T; t++)
#pragma unroll
      for (int i = 0; i < 8; i++) {
        const bool in = j * kStep + 128 * i + 4 * lane < K;
        xl[t * 32 * kXSpan + 4 * i * kXSpan] = in ? *reinterpret_cast<const float4*>(xj + size_t(t) * K + 128 * i) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
  }
  __syncwarp();
}

// spanDot adds step j's products to acc: for each row r and token t,
// acc[r][t] += z_r·Σx + s_r·Σ q·x over the lane's span of the step, x from
// the warp's staging buffer xw (stageX).
template <int T, int BITS, int R>
__device__ __forceinline__ void spanDot(float (&acc)[R][T], const Step<BITS, R>& st, const float4 (&xw)[T][32 * kXSpan], int K, int j,
                                        int lane) {
  const int k = j * kStep + lane * kSpan;
  if (k >= K) return;
  float dot[R][T], xs[T];
#pragma unroll
  for (int t = 0; t < T; t++) {
    xs[t] = 0.f;
#pragma unroll
    for (int r = 0; r < R; r++) dot[r][t] = 0.f;
  }
  // Four chunks of 8 channels (pairs 4c..4c+3): x's 8 values per token,
  // then each row's 4 pairs of codes (codesSpan's unused pairs are dead
  // code for the compiler).
#pragma unroll
  for (int c = 0; c < 4; c++) {
    float xv[T][8];
#pragma unroll
    for (int t = 0; t < T; t++) {
      const float4 a = xw[t][lane * kXSpan + 2 * c], b = xw[t][lane * kXSpan + 2 * c + 1];
      xv[t][0] = a.x, xv[t][1] = a.y, xv[t][2] = a.z, xv[t][3] = a.w;
      xv[t][4] = b.x, xv[t][5] = b.y, xv[t][6] = b.z, xv[t][7] = b.w;
      xs[t] += ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w));
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
      u32 h[16];
      gemvq::codesSpan<BITS>(h, st.a[r]);
#pragma unroll
      for (int p = 0; p < 4; p++) {
        const float2 q = h2x2(h[4 * c + p]);
#pragma unroll
        for (int t = 0; t < T; t++) {
          dot[r][t] = fmaf(q.x, xv[t][2 * p], dot[r][t]);
          dot[r][t] = fmaf(q.y, xv[t][2 * p + 1], dot[r][t]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; r++) {
    const float2 sz = h2x2(st.sz[r]);  // (scale, zero)
#pragma unroll
    for (int t = 0; t < T; t++) acc[r][t] = fmaf(sz.x, dot[r][t], fmaf(sz.y, xs[t], acc[r][t]));
  }
}

// rowSums is v3.2's sums, the one body of gemv_q3 and gemv_q3_dec: warp
// (lane lane) of a CTA takes slice slice of its K steps for rows n0..n0+R-1
// (R = kRowsPerWarp<BITS>), loads the first step's weights before the
// dependency wait where early is set (after it otherwise), sums the steps
// two an iteration through xs[warp] (stageX), adds the lanes by xor
// shuffles and writes them to part[warp], then the CTA syncs (the S slices
// are the caller's to add, in slice order). last() runs once a thread at
// the start of its warp's last step (its codes and x loaded, before its
// products), or after the dependency wait for a warp with no steps:
// gemv_q3_dec peeks its part word there; gemv_q3's is empty (no code).
template <int T, int BITS, int S, class Last>
__device__ __forceinline__ void rowSums(float (&part)[kWarps][kRowsPerWarp<BITS>][T], float4 (&xs)[kWarps][T][32 * kXSpan],
                                        const float* __restrict__ x, const u32* __restrict__ words, const u16* __restrict__ params,
                                        int N, int K, int G, int early, int warp, int lane, int slice, int n0, Last last) {
  constexpr int R = kRowsPerWarp<BITS>;
  const int steps = (K + kStep - 1) / kStep, per = (steps + S - 1) / S;
  const int j0 = slice * per, j1 = min(steps, j0 + per);
  Step<BITS, R> cur;
  if (early) preloadCodes(cur, words, params, n0, N, K, G, j0 < j1 ? j0 : steps, lane);
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) preloadCodes(cur, words, params, n0, N, K, G, j0 < j1 ? j0 : steps, lane);
  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int t = 0; t < T; t++) acc[r][t] = 0.f;
  // Two steps an iteration, the buffers swapping roles (no copy of the
  // next step's registers into the current one's).
  Step<BITS, R> nxt;
  for (int j = j0; j < j1; j += 2) {
    preloadCodes(nxt, words, params, n0, N, K, G, j + 1 < j1 ? j + 1 : steps, lane);
    stageX<T>(xs[warp], x, K, j, lane);
    if (j + 1 >= j1) last();
    spanDot<T, BITS, R>(acc, cur, xs[warp], K, j, lane);
    if (j + 1 >= j1) break;
    preloadCodes(cur, words, params, n0, N, K, G, j + 2 < j1 ? j + 2 : steps, lane);
    stageX<T>(xs[warp], x, K, j + 1, lane);
    if (j + 2 >= j1) last();
    spanDot<T, BITS, R>(acc, nxt, xs[warp], K, j + 1, lane);
  }
  if (j0 >= j1) last();  // a warp with no steps
  // The lanes' sums (xor shuffles), then the slices' through part.
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int t = 0; t < T; t++)
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc[r][t] += __shfl_xor_sync(0xffffffffu, acc[r][t], off);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int t = 0; t < T; t++) part[warp][r][t] = acc[r][t];
  __syncthreads();
}

// gemv_q3: grid (ceil(N / (R·kWarps/S))), block kThreads. Warp w of a CTA
// takes row group w / S (rows n0..n0+R-1) and slice w % S of its K steps
// (rowSums), then slice 0 adds the S slices in slice order. T rows of x (1
// or 2); early: load the first step's weights before the dependency wait.
template <int T, int BITS, int S>
__global__ void __launch_bounds__(kThreads, kMinBlocks<T>) gemv_q3(const float* __restrict__ x, const u32* __restrict__ words,
                                                    const u16* __restrict__ params, const float* __restrict__ bias,
                                                    float* __restrict__ y, int N, int K, int G, int early) {
  constexpr int R = kRowsPerWarp<BITS>;
  constexpr int kGroups = kWarps / S;  // row groups per CTA
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % S;
  const int n0 = (blockIdx.x * kGroups + warp / S) * R;
  __shared__ float4 xs[kWarps][T][32 * kXSpan];
  __shared__ float part[kWarps][R][T];
  rowSums<T, BITS, S>(part, xs, x, words, params, N, K, G, early, warp, lane, slice, n0, [] {});
  if (slice != 0 || lane >= R * T) return;
  const int r = lane / T, t = lane % T, n = n0 + r;
  if (n >= N) return;
  float v = part[warp][r][t];
#pragma unroll
  for (int s = 1; s < S; s++) v += part[warp + s][r][t];
  y[size_t(t) * N + n] = v + (bias ? bias[n] : 0.f);
}

// gemv_q3_moe is gemv_q3 at one row of x for the experts a mixture's
// tokens chose (moe.go's packed path): grid (ceil(N / (R·kWarps/S)), J·P)
// for J projections of the same shape (gate and up: J 2) and P pairs, CTA
// (b, q) is gemv_q3<1, BITS, S>'s CTA b over projection j = q / P's weight
// of expert e = idx[p], p = q % P (its words and params at wtab[2jE + e]
// and ptab[2jE + e]), with x's row p / xdiv and y's row q: the same sums
// (rowSums), bit for bit. Nothing is loaded before the dependency wait (the
// addresses come from the router's output); a route out of [0, E) writes
// NaN to the CTA's rows.
template <int BITS, int S>
__global__ void __launch_bounds__(kThreads, kMinBlocks<1>)
    gemv_q3_moe(const float* __restrict__ x, const unsigned long long* __restrict__ wtab, const unsigned long long* __restrict__ ptab,
                const int* __restrict__ idx, float* __restrict__ y, int N, int K, int G, int xdiv, int E, int P) {
  constexpr int R = kRowsPerWarp<BITS>;
  constexpr int kGroups = kWarps / S;
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  gridDependencyWait();
  const int q = blockIdx.y, p = q % P, e = idx[p];
  const size_t tab = size_t(q / P) * 2 * E;
  y += size_t(q) * N;
  if (e < 0 || e >= E) {
    const int n = blockIdx.x * kGroups * R + threadIdx.x;
    if (threadIdx.x < kGroups * R && n < N) y[n] = __int_as_float(0x7fffffff);
    return;
  }
  x += size_t(p / xdiv) * K;
  const u32* words = reinterpret_cast<const u32*>(wtab[tab + e]);
  const u16* params = reinterpret_cast<const u16*>(ptab[tab + e]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % S;
  const int n0 = (blockIdx.x * kGroups + warp / S) * R;
  __shared__ float4 xs[kWarps][1][32 * kXSpan];
  __shared__ float part[kWarps][R][1];
  rowSums<1, BITS, S>(part, xs, x, words, params, N, K, G, 0, warp, lane, slice, n0, [] {});
  if (slice != 0 || lane >= R) return;
  const int n = n0 + lane;
  if (n >= N) return;
  float v = part[warp][lane][0];
#pragma unroll
  for (int s = 1; s < S; s++) v += part[warp + s][lane][0];
  y[n] = v + 0.f;
}

#ifdef GEMVQ_WITH_DEC
// gemv_q3_dec is DEC's fused mode over v3's sums at one row of x (dec.cu,
// "fused mode"; kernels.GEMVQDEC compiles this file with -DGEMVQ_WITH_DEC=1,
// gemvq.cu and dec.cu as headers): grid (d.blocks + ceil(N / (R·kWarps/S))),
// block kThreads. The first d.blocks CTAs are DEC's (dec::fused_cta_any with
// 128 threads, P <= PMAX, int4 residuals; resident first, they select or read
// d.sel and sum their slices while the base CTAs run); every other CTA is
// gemv_q3<1, BITS, S>'s CTA blockIdx.x − d.blocks, the same sums in the same
// order (rowSums, the body of both), whose R·kWarps/S rows are one DEC tile
// (dec.cu's one-trip protocol with TILE = those rows): lane r < R of each
// row group's slice-0 warp owns row r, loads its part word at the start of
// its warp's last step (rowSums' last), and the
// CTA writes y = base, or base + part where the whole tile is present
// (dec::tile_value, serial mode's single add), then dec::tile_close. The
// result equals gemv_q3 at split S followed by dec.cu's Compensate, bit for
// bit. Shared memory: the DEC CTAs' buffers alias the base CTAs' x staging
// (24 KB a CTA). Launch bounds: kDECMinBlocks = 5 CTAs an SM (96
// registers; the DEC paths spill where they must). At gemv_q3's 6 (80) the
// base loop spilled and ran 2-8% slower with the DEC CTAs idle, 14-111%
// with DEC (docs/perf/dec.md, session 14; #s14-80reg); at 5 the base alone
// is v3.2's within -5/+4%.
// kDECMinBlocks is gemv_q3_dec's CTAs an SM for its launch bounds
// (GEMVQ3_DEC_MIN_BLOCKS, an NVRTC -D knob, overrides it).
// GEMVQ3_DEC_DIAG=1 (a timing diagnostic, wrong results): the DEC CTAs end
// after the dependency wait and the base CTAs write y without the protocol
// (session 14's d5/d6 rows).
#ifndef GEMVQ3_DEC_MIN_BLOCKS
#define GEMVQ3_DEC_MIN_BLOCKS 5
#endif
#ifndef GEMVQ3_DEC_DIAG
#define GEMVQ3_DEC_DIAG 0
#endif
constexpr int kDECMinBlocks = GEMVQ3_DEC_MIN_BLOCKS;

template <int BITS, int S, int PMAX>
__global__ void __launch_bounds__(kThreads, kDECMinBlocks) gemv_q3_dec(const float* __restrict__ x, const u32* __restrict__ words,
                                                        const u16* __restrict__ params, const float* __restrict__ bias,
                                                        float* __restrict__ y, int N, int K, int G, int early,
                                                        const __grid_constant__ dec::Args d) {
  constexpr int T = 1;
  constexpr int R = kRowsPerWarp<BITS>;
  constexpr int kGroups = kWarps / S;  // row groups per CTA
  constexpr int kTileRows = kGroups * R;  // the CTA's rows: one DEC tile
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  static_assert(kThreads >= dec::kMinThreads, "dec.cu's CTAs need a thread per row of a batch");
  constexpr int kXBytes = int(sizeof(float4)) * kWarps * T * 32 * kXSpan;
  constexpr int kDECBytes = dec::fused_smem_bytes(kThreads);
  __shared__ __align__(16) unsigned char smem[kXBytes > kDECBytes ? kXBytes : kDECBytes];
  if (int(blockIdx.x) < d.blocks) {
    gridDependencyWait();
    gridLaunchDependents();
    if (GEMVQ3_DEC_DIAG) return;
    dec::fused_cta_any<kThreads, PMAX, false, kTileRows>(d, blockIdx.x, smem);  // int4 residuals
    return;
  }
  float4 (&xs)[kWarps][T][32 * kXSpan] = *reinterpret_cast<float4 (*)[kWarps][T][32 * kXSpan]>(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % S;
  const int n0 = ((int(blockIdx.x) - d.blocks) * kGroups + warp / S) * R;
  // The element this thread owns in the tile (slice 0's lane r: row n0 + r)
  // and its part word, loaded at the start of the warp's last step. (The
  // loop is at 80 registers in gemv_q3: its row is recomputed, not kept.)
  float pv = 0.f;
  auto peek = [&]() {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, row = ((int(blockIdx.x) - d.blocks) * kGroups + w / S) * R + l;
    if (w % S == 0 && l < R && row < N) pv = dec::part_peek(d, size_t(row));
  };
  __shared__ float part[kWarps][R][T];
  rowSums<T, BITS, S>(part, xs, x, words, params, N, K, G, early, warp, lane, slice, n0, peek);
  // The fused epilogue (gemvq.cu's gemv with FUSED, over this CTA's tile).
  const int n = n0 + lane;
  const bool mine = slice == 0 && lane < R && n < N;
  if (GEMVQ3_DEC_DIAG) {
    if (mine) y[n] = part[warp][lane][0] + (S > 1 ? part[warp + S - 1][lane][0] : 0.f) + pv;
    return;
  }
  __shared__ u32 fscratch;
  float v = 0.f;
  if (mine) {
    v = part[warp][lane][0];
#pragma unroll
    for (int s = 1; s < S; s++) v += part[warp + s][lane][0];
    v = v + (bias ? bias[n] : 0.f);
  }
  bool present = __syncthreads_and(!mine || dec::part_ready(pv));
  if (!present) {  // the same for the whole CTA
    if (mine && !dec::part_ready(pv)) pv = dec::part_load(d, size_t(n));
    present = __syncthreads_and(!mine || dec::part_ready(pv));
  }
  if (mine) dec::st_gpu(d.y + n, dec::tile_value(present, pv, v));
  dec::tile_close<kTileRows>(d, int(blockIdx.x) - d.blocks, present, &fscratch);
}
#endif

}  // namespace gemvq3

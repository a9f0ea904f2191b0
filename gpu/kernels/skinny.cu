// skinny.cu: the skinny GEMM of the large decode batches, y = x·Wᵀ + bias
// for 17-128 rows, each weight byte read once from DRAM through a ring of
// shared-memory stages, on the tensor cores.
//
//   x    [T][K] fp16 (the backend's fp16 copy of the input: v19's producers
//        write it, or f32_to_f16)
//   W    [N][K] fp16 row-major (the backend's weight layout)
//   bias [N] float32, or null
//   y    [T][N] float32
//   ws   the split-K workspace: kCounters int counters (zero between
//        launches; the kernel leaves them zero), then partials [S][T][N]
//        float32 (S = the split; unused when S = 1)
//
// A CTA owns kBM = 128 output channels (one m-block, blockIdx.x) for all of
// x's rows (NT n-tiles of 8, T <= NT·8) and a contiguous run of K's
// kBK-channel k-blocks (blockIdx.y of the split S: blocks [y·nb/S,
// (y+1)·nb/S)). Its warps form kWarpsM x WARPS_N: warp (wm, wn) computes
// 32 channels (two m16 tiles) x WN·8 tokens (WN n8 tiles) with
// mma.m16n8k16 (A = W, row-major; B = x, its rows the B columns: ldmatrix
// without .trans gives both fragments from row-major [row][k] tiles).
//
// The weights stream: each k-block's W tile (128 rows x 128 bytes) and x
// tile (NT·8 rows x 128 bytes) are copied into stage i % kStages with
// cp.async (16 bytes a copy, zero-filled past N, T and K), kStages - 1
// stages in flight while one is multiplied: at 2 CTAs a SM (NT = 8: 24 KB
// a stage, 96 KB a CTA) ~96 KB of weights in flight a SM, against the ~23
// KB the read ceiling needs at ~1 us of latency. Shared rows are 128 bytes;
// their eight 16-byte chunks are XOR-swizzled by the row (chunk c of row r
// at c ^ (r % 8)) so that ldmatrix's eight row addresses of a matrix, and
// cp.async's writes, fall in distinct bank groups.
//
// Reduction order, fixed by (N, K, S) alone (never by arrival): each k-run's
// accumulator runs over its k-blocks in order, four k16 steps a block, fp32;
// with S = 1 the CTA adds the bias and writes y. With S > 1 each CTA writes
// its partial [T][128] to ws; the last of the m-block's S CTAs to count
// itself done (bitdecode.cuh's lastArrival) sums the partials in split
// order, 0 + 1 + ... + S-1, adds the bias, writes y and resets the counter.
// So the bits depend on the shape and the split only (the host picks the
// split from the shape: skinny.go's SkinnySplit), not on which CTA is last.
// They are not linear.cu's bits and not the same for every T: this is the
// default mode's GEMM (cuBLASLt's place), never the batch-invariant mode's.
//
// Programmatic dependent launch: skinny.cu is a GridDependent program.
// With early set, the first kStages - 1 stages' weights are copied before
// the dependency wait (weights are not written by the kernel ahead: the
// backend's weights are uploaded before any step), x's tiles after it.
//
// Versions (H100, 2026-11-26; docs/perf/decode-step.md v21-mb,
// bench/results/2026-11-26-h100-mb-12; bench gemv, x in fp16, weights cold):
//   v1 skinny_f16: 128-channel CTAs, W and x through a 4-stage cp.async
//      ring in shared memory, ldmatrix, a fixed split-K per shape with the
//      last CTA's in-order sum. 55 rows: o 68.6 us (cuBLASLt 17.2), q|k|v
//      52.5 (24.1), gate|up 103.8 (90.3), down 102.6 (48.2), lm_head 402.0
//      (397.1): shared-memory bound (every warp reads all of x's tile) and
//      a serial sum.
//   v2 skinny_f16_v2 (below): W straight to a ring of registers, only x
//      in shared memory, the sum's loads all in flight. 55 rows: o 26.1 us
//      (42% of the read ceiling), q|k|v 32.7 (51%), gate|up 98.9 (78%),
//      down 58.8 (66%), lm_head 420.8 (82%): still slower than cuBLASLt on
//      every shape at 15-100 rows, so the backend keeps cuBLASLt unless
//      asked (Options.Skinny).
//   v3 skinny_f16_v3 (below; compute capability 9.0, the default there):
//      v1's ring read by wgmma from shared memory; the split's partials
//      summed a slice by each of its CTAs (v40c). 55 / 100 rows at its
//      split (decode-step.md v40, bench/results/2026-11-27-skinny3-26): o
//      20.3 / 23.1 us (cuBLASLt 17.5 / 17.3), q|k|v 28.4 / 32.0 (25.0 /
//      24.1), gate+up 96.0 / 101.7 (89.8 / 96.6), down 52.1 / 56.3 (48.2 /
//      51.4), lm_head 391.0 / 416.6 (394.5 / 400.8): 1.1-2.5x v2, still
//      behind cuBLASLt on the split shapes (their fill and the split).
//
// Go wrapper: skinny.go; tests: skinny_test.go (float64 reference on
// NaN-poisoned y, T = 17..128, K not a multiple of the tile, every split).

#include "bitdecode.cuh"

namespace skinny {

constexpr int kBM = 128;                  // output channels a CTA (its m-block)
constexpr int kBK = 64;                   // k a stage: 128-byte rows
constexpr int kChunk = 8;                 // halves a 16-byte copy
constexpr int kChunks = kBK / kChunk;     // 16-byte chunks a row (8: the swizzle's period)
constexpr int kStages = 4;                // ring depth: kStages - 1 stages in flight
constexpr int kWarpM = 2;                 // m16 tiles a warp
constexpr int kWarpsM = kBM / (16 * kWarpM);  // 4 warps along the channels
constexpr int kMaxWN = 8;                 // n8 tiles a warp at most (64 accumulators)
constexpr int kCounters = 4096;           // ws's counters: m-blocks of a split launch at most
constexpr int kMaxSplit = 8;              // the largest split (Go: SkinnyMaxSplit)
static_assert(kChunks == 8, "the swizzle assumes eight chunks a row");

// Config is a CTA's shape for NT n-tiles of tokens.
template <int NT>
struct Config {
  static constexpr int WN = NT < kMaxWN ? NT : kMaxWN;  // n8 tiles a warp
  static constexpr int WarpsN = NT / WN;
  static constexpr int Threads = 32 * kWarpsM * WarpsN;
  static constexpr int Tokens = NT * 8;
  static constexpr int WHalves = kBM * kBK;         // a stage's W tile
  static constexpr int XHalves = Tokens * kBK;      // a stage's x tile
  static constexpr int StageHalves = WHalves + XHalves;
  static constexpr int SharedBytes = kStages * StageHalves * 2;
  static_assert(NT % WN == 0 && WN % 2 == 0, "n-tiles come in pairs (one ldmatrix.x4 a pair)");
  static_assert((kBM * kChunks) % Threads == 0 && (Tokens * kChunks) % Threads == 0, "copies divide among threads");
};

// swz returns the half offset of chunk c of row r in a swizzled tile.
BD_DEVICE int swz(int r, int c) { return r * kBK + ((c ^ (r & 7)) * kChunk); }

// sharedAddr is the shared-window address of p (ldmatrix, cp.async).
BD_DEVICE u32 sharedAddr(const void* p) {
  u32 s;
  asm("{ .reg .u64 a;\n cvta.to.shared.u64 a, %1;\n cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(p));
  return s;
}

// copy16 copies 16 bytes to shared memory with cp.async, or zeros where
// !ok (src-size 0: nothing is read from src).
BD_DEVICE void copy16(u32 dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}

// ldsm4 is ldmatrix.x4: four 8x8 fp16 matrices, lane l giving row l % 8 of
// matrix l / 8; register i holds matrix i's row lane/4, columns 2(lane%4)+{0,1}.
BD_DEVICE void ldsm4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// loadRows queues the copies of k-block kb of rows row0.. (ROWS of them,
// n in all: zeros past n and K) of src [n][K] into the swizzled tile at
// sm, THREADS threads sharing them: a stage's W tile (kBM rows from m0, N
// in all) or x tile (NT·8 rows from 0, T in all), in v1 and in v3.
template <int ROWS, int THREADS>
BD_DEVICE void loadRows(u16* sm, const u16* __restrict__ src, int n, int K, int row0, int kb) {
  static_assert((ROWS * kChunks) % THREADS == 0, "copies divide among threads");
#pragma unroll
  for (int j = 0; j < ROWS * kChunks / THREADS; j++) {
    const int i = threadIdx.x + j * THREADS;
    const int r = i / kChunks, c = i % kChunks;
    const int k = kb * kBK + c * kChunk;
    const bool ok = row0 + r < n && k < K;
    copy16(sharedAddr(sm + swz(r, c)), ok ? src + size_t(row0 + r) * K + k : src, ok);
  }
}

// loadW queues the copies of k-block kb's W tile (rows m0.., N rows in all)
// into the stage at wsm.
template <int NT>
BD_DEVICE void loadW(u16* wsm, const u16* __restrict__ W, int N, int K, int m0, int kb) {
  loadRows<kBM, Config<NT>::Threads>(wsm, W, N, K, m0, kb);
}

// loadX queues the copies of k-block kb's x tile (T rows) into the stage at xsm.
template <int NT>
BD_DEVICE void loadX(u16* xsm, const u16* __restrict__ x, int T, int K, int kb) {
  loadRows<Config<NT>::Tokens, Config<NT>::Threads>(xsm, x, T, K, 0, kb);
}

// preloadW queues the weights of the first kStages - 1 stages of a k-run
// (k-blocks kb0.., nb of them), before the dependency wait.
template <int NT>
BD_DEVICE void preloadW(u16* smem, const u16* __restrict__ W, int N, int K, int m0, int kb0, int nb) {
#pragma unroll
  for (int s = 0; s < kStages - 1; s++)
    if (s < nb) loadW<NT>(smem + s * Config<NT>::StageHalves, W, N, K, m0, kb0 + s);
}

// skinny_f16 computes one m-block's k-run (blockIdx.x, blockIdx.y of
// gridDim.y splits) of y = x·Wᵀ + bias for T <= NT·8 rows.
template <int NT>
__global__ void __launch_bounds__(Config<NT>::Threads) skinny_f16(const u16* __restrict__ x, const u16* __restrict__ W,
                                                                  const float* __restrict__ bias, float* __restrict__ y,
                                                                  int* ws, int T, int N, int K, int early) {
  using C = Config<NT>;
  extern __shared__ __align__(128) u16 smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int m0 = blockIdx.x * kBM;
  const int S = gridDim.y, split = blockIdx.y;
  const int nBlocks = (K + kBK - 1) / kBK;
  const int kb0 = split * nBlocks / S, nb = (split + 1) * nBlocks / S - kb0;
  constexpr int P = kStages - 1;

  // The weights of the first P stages need nothing from the kernel ahead.
  if (early) preloadW<NT>(smem, W, N, K, m0, kb0, nb);
  cpAsyncCommit();
  gridDependencyWait();
  gridLaunchDependents();
#pragma unroll
  for (int s = 0; s < P; s++) {
    if (s < nb) {
      u16* st = smem + s * C::StageHalves;
      if (!early) loadW<NT>(st, W, N, K, m0, kb0 + s);
      loadX<NT>(st + C::WHalves, x, T, K, kb0 + s);
    }
    cpAsyncCommit();
  }

  float acc[kWarpM][C::WN][4];
#pragma unroll
  for (int a = 0; a < kWarpM; a++)
#pragma unroll
    for (int b = 0; b < C::WN; b++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[a][b][i] = 0.f;

  // Lane l addresses row l % 8 of ldmatrix's matrix l / 8: for A (W) the
  // matrices are (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15);
  // for a pair of B n-tiles (x) (tokens 0-7, k 0-7), (0-7, 8-15), (8-15,
  // 0-7), (8-15, 8-15): registers b0, b1 of the first n-tile, then the second.
  const int mi = lane / 8, rr = lane % 8;
  const int aRow = wm * (16 * kWarpM) + rr + 8 * (mi & 1), aChunk = mi >> 1;
  const int bRow = wn * (8 * C::WN) + rr + 8 * (mi >> 1), bChunk = mi & 1;

  for (int i = 0; i < nb; i++) {
    cpAsyncWait<P - 1>();
    __syncthreads();  // stage i is in; every warp is done with stage i-1's buffer
    if (i + P < nb) {
      u16* st = smem + ((i + P) % kStages) * C::StageHalves;
      loadW<NT>(st, W, N, K, m0, kb0 + i + P);
      loadX<NT>(st + C::WHalves, x, T, K, kb0 + i + P);
    }
    cpAsyncCommit();
    const u16* wsm = smem + (i % kStages) * C::StageHalves;
    const u16* xsm = wsm + C::WHalves;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; kk++) {
      u32 a[kWarpM][4];
#pragma unroll
      for (int t = 0; t < kWarpM; t++) ldsm4(a[t], sharedAddr(wsm + swz(aRow + 16 * t, 2 * kk + aChunk)));
#pragma unroll
      for (int p = 0; p < C::WN / 2; p++) {
        u32 b[4];
        ldsm4(b, sharedAddr(xsm + swz(bRow + 16 * p, 2 * kk + bChunk)));
#pragma unroll
        for (int t = 0; t < kWarpM; t++) {
          mma16816(acc[t][2 * p], a[t], b[0], b[1]);
          mma16816(acc[t][2 * p + 1], a[t], b[2], b[3]);
        }
      }
    }
  }
  cpAsyncWait<0>();

  // C fragment: c0, c1 channel g, tokens 2q, 2q+1; c2, c3 channel g+8.
  const int g = lane / 4, q = lane % 4;
  const int S1 = S;  // the split, for the partials' stride
  float* part = reinterpret_cast<float*>(ws + kCounters);
  float* dst = S1 == 1 ? y : part + size_t(split) * T * N;
#pragma unroll
  for (int t = 0; t < kWarpM; t++)
#pragma unroll
    for (int n = 0; n < C::WN; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int ch = m0 + wm * (16 * kWarpM) + 16 * t + g + (i < 2 ? 0 : 8);
        const int tok = wn * (8 * C::WN) + 8 * n + 2 * q + (i & 1);
        if (ch < N && tok < T) {
          const float v = acc[t][n][i];
          dst[size_t(tok) * N + ch] = S1 == 1 && bias ? v + bias[ch] : v;
        }
      }
  if (S1 == 1) return;

  // The last of the m-block's splits sums the partials in split order.
  if (!lastArrival(ws + blockIdx.x, S1, threadIdx.x, [] { __syncthreads(); })) return;
  const int cols = min(kBM, N - m0);
  for (int e = threadIdx.x; e < T * kBM; e += C::Threads) {
    const int tok = e / kBM, c = e % kBM;
    if (c >= cols) continue;
    const size_t at = size_t(tok) * N + m0 + c;
    float v = __ldcg(part + at);
    for (int s = 1; s < S1; s++) v += __ldcg(part + size_t(s) * T * N + at);
    y[at] = bias ? v + bias[m0 + c] : v;
  }
  if (threadIdx.x == 0) ws[blockIdx.x] = 0;
}

// ----------------------------------------------------------------------------
// v2: the weights straight to registers, only x through shared memory.
//
// v1 read each W tile from shared memory once and each x tile kWarpsM = 4
// times (every warp multiplies all the rows): 72 KB of shared traffic per
// 16 KB of weights at NT = 8, near the SM's 128 bytes a clock at 2 CTAs.
// v2 loads each warp's own weight rows from global memory into registers
// (16 bytes of rows g and g+8 of each m16 tile at k = k0 + 8q, lane (g, q):
// linear.cu's permuted k order, where A column 2q+i and B row 2q+i hold
// k = 8q+i, columns / rows 2q+8+i hold k = 8q+2+i, then +4 for the second
// mma), a ring of kRing stages of registers ahead of the math, and stages
// only x with cp.async (each lane reads its token's 16 bytes at k0 + 8q
// with one ld.shared.v4 an n-tile and 32-k step). Shared x rows are 128
// bytes; chunk c of row r lies at c ^ 4(r % 2), so the eight lanes of a
// phase (rows 2j, 2j+1, chunks 4s..4s+3) hit eight distinct 16-byte bank
// groups. The reduction order is v1's: each k-run's accumulator over its
// k-blocks in order (two mmas a 32-k step), the split partials summed in
// split order by the last CTA (float4 loads, every split's load issued
// before the adds), then the bias.
constexpr int kRing = 3;        // W register stages: kRing - 1 stages of loads in flight a lane
constexpr int kSubs2 = kBK / 32;  // 32-k steps a stage

// xswz returns the half offset of chunk c of row r in a v2 x tile.
BD_DEVICE int xswz(int r, int c) { return r * kBK + ((c ^ ((r & 1) << 2)) * kChunk); }

// WRegs is a lane's weights of one stage: rows g and g+8 of each m16 tile,
// 16 bytes at each 32-k step.
struct WRegs {
  uint4 a[kWarpM][kSubs2], b[kWarpM][kSubs2];
};

// loadW2 loads the lane's weights of k-block kb (zeros past N and K).
BD_DEVICE void loadW2(WRegs& w, const u16* __restrict__ W, int N, int K, int row0, int q, int kb) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int t = 0; t < kWarpM; t++)
#pragma unroll
    for (int s = 0; s < kSubs2; s++) {
      const int k = kb * kBK + s * 32 + q * kChunk;
      const int ra = row0 + 16 * t, rb = ra + 8;
      w.a[t][s] = ra < N && k < K ? ldgStream(W + size_t(ra) * K + k) : zero;
      w.b[t][s] = rb < N && k < K ? ldgStream(W + size_t(rb) * K + k) : zero;
    }
}

// preloadW2 loads the first kRing - 1 stages of a k-run into the ring.
BD_DEVICE void preloadW2(WRegs (&ring)[kRing], const u16* __restrict__ W, int N, int K, int row0, int q, int kb0, int nb) {
#pragma unroll
  for (int s = 0; s < kRing - 1; s++)
    if (s < nb) loadW2(ring[s], W, N, K, row0, q, kb0 + s);
}

// loadX2 queues the copies of k-block kb's x tile (T rows) into xsm.
template <int NT>
BD_DEVICE void loadX2(u16* xsm, const u16* __restrict__ x, int T, int K, int kb) {
  using C = Config<NT>;
#pragma unroll
  for (int j = 0; j < C::Tokens * kChunks / C::Threads; j++) {
    const int i = threadIdx.x + j * C::Threads;
    const int r = i / kChunks, c = i % kChunks;
    const int k = kb * kBK + c * kChunk;
    const bool ok = r < T && k < K;
    copy16(sharedAddr(xsm + xswz(r, c)), ok ? x + size_t(r) * K + k : x, ok);
  }
}

// X2SharedBytes is v2's shared memory: the ring of x tiles.
template <int NT>
struct X2 {
  static constexpr int Halves = Config<NT>::Tokens * kBK;
  static constexpr int SharedBytes = kStages * Halves * 2;
};

// sumSplits is the last split CTA's sum of an m-block's S partials [S][T][N]
// at part into y (v2, v3): every split's load first, then the adds in split
// order (0 + 1 + ... + S-1), then the bias; THREADS threads.
template <int THREADS>
BD_DEVICE void sumSplits(const float* part, float* __restrict__ y, const float* __restrict__ bias, int T, int N, int m0, int S) {
  const int cols = min(kBM, N - m0);
  const size_t plane = size_t(T) * N;
  if ((N & 3) == 0) {
    // kSumUnroll float4 columns a thread at a time: their S loads each in
    // flight together (the tail no other CTA overlaps).
    constexpr int kSumUnroll = 4;
    for (int e0 = threadIdx.x; e0 < T * (kBM / 4); e0 += kSumUnroll * THREADS) {
      float4 p[kSumUnroll][kMaxSplit];
#pragma unroll
      for (int u = 0; u < kSumUnroll; u++) {
        const int e = e0 + u * THREADS;
        const int tok = e / (kBM / 4), c = e % (kBM / 4) * 4;
        if (e < T * (kBM / 4) && c < cols) {
          const size_t at = size_t(tok) * N + m0 + c;
#pragma unroll
          for (int s = 0; s < kMaxSplit; s++)
            if (s < S) p[u][s] = __ldcg(reinterpret_cast<const float4*>(part + s * plane + at));
        }
      }
#pragma unroll
      for (int u = 0; u < kSumUnroll; u++) {
        const int e = e0 + u * THREADS;
        const int tok = e / (kBM / 4), c = e % (kBM / 4) * 4;
        if (e >= T * (kBM / 4) || c >= cols) continue;
        float4 v = p[u][0];
#pragma unroll
        for (int s = 1; s < kMaxSplit; s++)
          if (s < S) v.x += p[u][s].x, v.y += p[u][s].y, v.z += p[u][s].z, v.w += p[u][s].w;
        if (bias) v.x += bias[m0 + c], v.y += bias[m0 + c + 1], v.z += bias[m0 + c + 2], v.w += bias[m0 + c + 3];
        *reinterpret_cast<float4*>(y + size_t(tok) * N + m0 + c) = v;
      }
    }
  } else {
    for (int e = threadIdx.x; e < T * kBM; e += THREADS) {
      const int tok = e / kBM, c = e % kBM;
      if (c >= cols) continue;
      const size_t at = size_t(tok) * N + m0 + c;
      float p[kMaxSplit];
#pragma unroll
      for (int s = 0; s < kMaxSplit; s++)
        if (s < S) p[s] = __ldcg(part + s * plane + at);
      float v = p[0];
#pragma unroll
      for (int s = 1; s < kMaxSplit; s++)
        if (s < S) v += p[s];
      y[at] = bias ? v + bias[m0 + c] : v;
    }
  }
}

// sumSlice is sumSplits' sum of slice r of S (in float4 columns of the T x
// kBM outputs: [r·n/S, (r+1)·n/S)) by one of the m-block's S CTAs (v3).
template <int THREADS>
BD_DEVICE void sumSlice(const float* part, float* __restrict__ y, const float* __restrict__ bias, int T, int N, int m0, int S,
                        int r) {
  const int cols = min(kBM, N - m0);
  const size_t plane = size_t(T) * N;
  const int n4 = T * (kBM / 4), e0 = r * n4 / S, e1 = (r + 1) * n4 / S;
  for (int e = e0 + int(threadIdx.x); e < e1; e += THREADS) {
    const int tok = e / (kBM / 4), c = e % (kBM / 4) * 4;
    if (c >= cols) continue;
    const size_t at = size_t(tok) * N + m0 + c;
    if ((N & 3) == 0) {
      float4 p[kMaxSplit];
#pragma unroll
      for (int s = 0; s < kMaxSplit; s++)
        if (s < S) p[s] = __ldcg(reinterpret_cast<const float4*>(part + s * plane + at));
      float4 v = p[0];
#pragma unroll
      for (int s = 1; s < kMaxSplit; s++)
        if (s < S) v.x += p[s].x, v.y += p[s].y, v.z += p[s].z, v.w += p[s].w;
      if (bias) v.x += bias[m0 + c], v.y += bias[m0 + c + 1], v.z += bias[m0 + c + 2], v.w += bias[m0 + c + 3];
      *reinterpret_cast<float4*>(y + at) = v;
    } else {
      for (int u = 0; u < 4 && c + u < cols; u++) {
        float p[kMaxSplit];
#pragma unroll
        for (int s = 0; s < kMaxSplit; s++)
          if (s < S) p[s] = __ldcg(part + s * plane + at + u);
        float v = p[0];
#pragma unroll
        for (int s = 1; s < kMaxSplit; s++)
          if (s < S) v += p[s];
        y[at + u] = bias ? v + bias[m0 + c + u] : v;
      }
    }
  }
}

// skinny_f16_v2 is skinny_f16 (same arguments, grid and result order) with
// the weights in registers.
template <int NT>
__global__ void __launch_bounds__(Config<NT>::Threads) skinny_f16_v2(const u16* __restrict__ x, const u16* __restrict__ W,
                                                                     const float* __restrict__ bias, float* __restrict__ y,
                                                                     int* ws, int T, int N, int K, int early) {
  using C = Config<NT>;
  extern __shared__ __align__(128) u16 smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int g = lane / 4, q = lane % 4;
  const int m0 = blockIdx.x * kBM;
  const int S = gridDim.y, split = blockIdx.y;
  const int nBlocks = (K + kBK - 1) / kBK;
  const int kb0 = split * nBlocks / S, nb = (split + 1) * nBlocks / S - kb0;
  const int row0 = m0 + wm * (16 * kWarpM) + g;  // the lane's first weight row
  constexpr int P = kStages - 1;

  WRegs ring[kRing];
  // The weights of the first stages need nothing from the kernel ahead.
  if (early) preloadW2(ring, W, N, K, row0, q, kb0, nb);
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) preloadW2(ring, W, N, K, row0, q, kb0, nb);
#pragma unroll
  for (int s = 0; s < P; s++) {
    if (s < nb) loadX2<NT>(smem + s * X2<NT>::Halves, x, T, K, kb0 + s);
    cpAsyncCommit();
  }

  float acc[kWarpM][C::WN][4];
#pragma unroll
  for (int a = 0; a < kWarpM; a++)
#pragma unroll
    for (int b = 0; b < C::WN; b++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[a][b][i] = 0.f;

  const int xRow = wn * (8 * C::WN) + g;  // the lane's token in its first n-tile
  // Unrolled by kRing so that each ring slot is named at compile time (a
  // copy between slots would wait for the loads in flight): stage i takes
  // slot i % kRing and refills the slot stage i-1 emptied with stage i +
  // kRing - 1.
  for (int i0 = 0; i0 < nb; i0 += kRing) {
#pragma unroll
    for (int r = 0; r < kRing; r++) {
      const int i = i0 + r;
      if (i >= nb) break;  // the same for every thread of the CTA
      cpAsyncWait<P - 1>();
      __syncthreads();  // x of stage i is in; every warp is done with stage i-1's buffer
      if (i + P < nb) loadX2<NT>(smem + ((i + P) % kStages) * X2<NT>::Halves, x, T, K, kb0 + i + P);
      cpAsyncCommit();
      if (i + kRing - 1 < nb) loadW2(ring[(r + kRing - 1) % kRing], W, N, K, row0, q, kb0 + i + kRing - 1);
      const u16* xsm = smem + (i % kStages) * X2<NT>::Halves;
#pragma unroll
      for (int s = 0; s < kSubs2; s++) {
#pragma unroll
        for (int n = 0; n < C::WN; n++) {
          const uint4 v = *reinterpret_cast<const uint4*>(xsm + xswz(xRow + 8 * n, 4 * s + q));
#pragma unroll
          for (int t = 0; t < kWarpM; t++) {
            const uint4 wa = ring[r].a[t][s], wb = ring[r].b[t][s];
            const u32 lo[4] = {wa.x, wb.x, wa.y, wb.y};
            const u32 hi[4] = {wa.z, wb.z, wa.w, wb.w};
            mma16816(acc[t][n], lo, v.x, v.y);
            mma16816(acc[t][n], hi, v.z, v.w);
          }
        }
      }
    }
  }
  cpAsyncWait<0>();

  // C fragment: c0, c1 channel g, tokens 2q, 2q+1; c2, c3 channel g+8.
  float* part = reinterpret_cast<float*>(ws + kCounters);
  float* dst = S == 1 ? y : part + size_t(split) * T * N;
#pragma unroll
  for (int t = 0; t < kWarpM; t++)
#pragma unroll
    for (int n = 0; n < C::WN; n++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int ch = row0 + 16 * t + (i < 2 ? 0 : 8);
        const int tok = wn * (8 * C::WN) + 8 * n + 2 * q + (i & 1);
        if (ch < N && tok < T) {
          const float v = acc[t][n][i];
          dst[size_t(tok) * N + ch] = S == 1 && bias ? v + bias[ch] : v;
        }
      }
  if (S == 1) return;

  // The last of the m-block's splits sums the partials in split order:
  // every split's load first, then the adds (0 + 1 + ... + S-1), the bias.
  if (!lastArrival(ws + blockIdx.x, S, threadIdx.x, [] { __syncthreads(); })) return;
  sumSplits<C::Threads>(part, y, bias, T, N, m0, S);
  if (threadIdx.x == 0) ws[blockIdx.x] = 0;
}


// ----------------------------------------------------------------------------
// v3: v1's ring, both operands read from shared memory by Hopper's wgmma.
//
// v1 lost to cuBLASLt on shared-memory traffic: every warp's ldmatrix read
// all of x's tile into registers. v3 keeps v1's stages (each k-block's W
// tile, 128 rows x 128 bytes, and x tile, NT·8 rows x 128 bytes, copied with
// cp.async, chunk c of row r at c ^ (r % 8)), which is exactly the
// 128-byte-swizzled K-major layout that wgmma's shared-memory descriptors
// read when a tile starts on a 1024-byte boundary; so the two warpgroups
// multiply straight from the stage, no ldmatrix and no operand registers:
// warpgroup w computes channels 64w..64w+63 of the m-block against all of
// x's NT·8 rows (wgmma.m64nNk16, N = NT·8, four k16 steps a stage, each
// descriptor's start advanced 32 bytes within the swizzle atom). The
// reduction order is v1's: each k-run's accumulator over its k-blocks in
// order (the tensor core's own order within a k16 step), the split partials
// summed in split order by the last CTA, then the bias. sm_90a only
// (__CUDA_ARCH_FEAT_SM90_ALL); Go loads it on compute capability 9.0.
constexpr int kWarpGroups3 = kBM / 64;  // consumer warpgroups: 64 channels each
constexpr int kThreads3 = 128 * kWarpGroups3;
constexpr int kAtomBytes = 1024;        // a 128-byte swizzle atom: 8 rows of 128 bytes

// Config3 is v3's shape for NT n-tiles of tokens.
template <int NT>
struct Config3 {
  static constexpr int Tokens = NT * 8;
  static constexpr int WHalves = kBM * kBK;
  static constexpr int StageHalves = WHalves + Tokens * kBK;
  // The ring, plus the slack that aligns it to a swizzle atom.
  static constexpr int SharedBytes = kStages * StageHalves * 2 + kAtomBytes;
  static_assert((StageHalves * 2) % kAtomBytes == 0 && (WHalves * 2) % kAtomBytes == 0, "tiles on swizzle atoms");
  static_assert((kBM * kChunks) % kThreads3 == 0 && (Tokens * kChunks) % kThreads3 == 0, "copies divide among threads");
};

// desc128 is the wgmma descriptor of a K-major operand tile at shared
// address a (1024-byte aligned, or advanced by 32 bytes a k16 step inside
// its atoms): 128-byte swizzle, 8-row groups 1024 bytes apart (the stride
// offset), the leading offset unused by this layout (1).
BD_DEVICE unsigned long long desc128(u32 a) {
  return (unsigned long long)((a & 0x3ffff) >> 4) | (1ull << 16) | ((unsigned long long)(kAtomBytes >> 4) << 32) | (1ull << 62);
}

// wgmmaSS is wgmma.m64nNk16 (fp16 in, fp32 accumulators d, N/2 a thread)
// with both operands in shared memory: d += A·Bᵀ. One specialization per N
// of skinnyNTs (skinny.go), alike but for N and the register list, which
// inline PTX cannot loop over.
template <int N>
BD_DEVICE void wgmmaSS(float (&d)[N / 2], unsigned long long a, unsigned long long b);

template <>
BD_DEVICE void wgmmaSS<32>(float (&d)[16], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}

template <>
BD_DEVICE void wgmmaSS<64>(float (&d)[32], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}

template <>
BD_DEVICE void wgmmaSS<128>(float (&d)[64], unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}

// skinny_f16_v3 is skinny_f16 (same arguments, grid and result order) on
// wgmma. Accumulator element 4j + e of a thread (warp w of its warpgroup,
// lane g·4 + q): channel 16w + g (+8 for e >= 2), token 8j + 2q + (e & 1).
// The split's partials go through ws, and each of the m-block's S CTAs sums
// a slice of them once all are written (v40c; ws's counters: two an
// m-block). (Summing them within a cluster of the S CTAs instead, each CTA
// a slice from the others' shared memory, measured no better at 55 rows
// and up to 1.6x slower at 100, where clusters of one-CTA-an-SM CTAs leave
// SMs idle: decode-step.md v40.)
template <int NT>
__global__ void __launch_bounds__(kThreads3) skinny_f16_v3(const u16* __restrict__ x, const u16* __restrict__ W,
                                                          const float* __restrict__ bias, float* __restrict__ y, int* ws,
                                                          int T, int N, int K, int early) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = Config3<NT>;
  constexpr int kN = C::Tokens;
  extern __shared__ __align__(128) u16 smemRaw[];
  u16* smem = reinterpret_cast<u16*>((reinterpret_cast<size_t>(smemRaw) + kAtomBytes - 1) & ~size_t(kAtomBytes - 1));
  const int wg = threadIdx.x / 128, w = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  const int m0 = blockIdx.x * kBM;
  const int S = gridDim.y, split = blockIdx.y;
  const int nBlocks = (K + kBK - 1) / kBK;
  const int kb0 = split * nBlocks / S, nb = (split + 1) * nBlocks / S - kb0;
  constexpr int P = kStages - 1;

  // The weights of the first P stages need nothing from the kernel ahead.
  if (early)
#pragma unroll
    for (int s = 0; s < P; s++)
      if (s < nb) loadRows<kBM, kThreads3>(smem + s * C::StageHalves, W, N, K, m0, kb0 + s);
  cpAsyncCommit();
  gridDependencyWait();
  gridLaunchDependents();
#pragma unroll
  for (int s = 0; s < P; s++) {
    if (s < nb) {
      u16* st = smem + s * C::StageHalves;
      if (!early) loadRows<kBM, kThreads3>(st, W, N, K, m0, kb0 + s);
      loadRows<kN, kThreads3>(st + C::WHalves, x, T, K, 0, kb0 + s);
    }
    cpAsyncCommit();
  }

  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; i++) acc[i] = 0.f;

  for (int i = 0; i < nb; i++) {
    cpAsyncWait<P - 1>();
    fenceProxyAsync();  // this thread's copies of stage i, visible to wgmma (the async proxy)
    __syncthreads();    // every thread's copies of stage i; every warpgroup done with stage i-1
    if (i + P < nb) {
      u16* st = smem + ((i + P) % kStages) * C::StageHalves;
      loadRows<kBM, kThreads3>(st, W, N, K, m0, kb0 + i + P);
      loadRows<kN, kThreads3>(st + C::WHalves, x, T, K, 0, kb0 + i + P);
    }
    cpAsyncCommit();
    const u16* wsm = smem + (i % kStages) * C::StageHalves;
    const unsigned long long a = desc128(sharedAddr(wsm + wg * 64 * kBK)), b = desc128(sharedAddr(wsm + C::WHalves));
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kBK / 16; kk++) wgmmaSS<kN>(acc, a + 2 * kk, b + 2 * kk);  // +32 bytes a k16 step
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  cpAsyncWait<0>();

  float* part = reinterpret_cast<float*>(ws + kCounters);
  float* dst = S == 1 ? y : part + size_t(split) * T * N;
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int j = 0; j < kN / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int ch = m0 + wg * 64 + 16 * w + g + (e < 2 ? 0 : 8);
      const int tok = 8 * j + 2 * q + (e & 1);
      if (ch < N && tok < T) {
        const float v = acc[4 * j + e];
        dst[size_t(tok) * N + ch] = S == 1 && bias ? v + bias[ch] : v;
      }
    }
  if (S == 1) return;

  // Every split sums a slice (v40c): once all S partials are written (the
  // grid is one wave, so the S CTAs are resident together: Skinny.Launch),
  // split r sums the r-th S-th of the m-block's T x 128 outputs over the S
  // partials in split order and adds the bias, where v2's last CTA sums all
  // of them alone. The same sums in the same order, so sumSplits' bits.
  int* arrived = ws + 2 * blockIdx.x;
  int* left = arrived + 1;
  __syncthreads();  // every thread's partials are written (CTA scope)
  if (threadIdx.x == 0) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");  // release: this CTA's partials before its count
    atomicAdd(arrived, 1);
    while (atomicAdd(arrived, 0) < S) __nanosleep(64);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");  // acquire: the others' partials after their counts
  }
  __syncthreads();
  sumSlice<kThreads3>(part, y, bias, T, N, m0, S, split);
  __syncthreads();  // this CTA's reads of the partials are done
  if (threadIdx.x == 0 && atomicAdd(left, 1) == S - 1) *arrived = 0, *left = 0;  // the last one out resets
#else
  __trap();  // wgmma needs sm_90a (skinny.go loads v3 on compute capability 9.0 only)
#endif
}

}  // namespace skinny

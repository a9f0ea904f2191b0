// gemmq.cu: the fused dequant-GEMM over packed low-bit weights for batches
// past the GEMV's rows (issue #19, session 16): y = x·Ŵᵀ + bias for
// T = 17..256 rows of x, reading each packed weight once (per chunk of
// tokens) and dequantizing it in registers, instead of writing the whole Ŵ
// to fp16 and handing it to cuBLASLt (gemvq.cu's dequant_q, then gemmF16).
//
// Operands: the weight in the tiled layout (gemvq.cu "The tiled layout":
// a row group of 16 rows x one block of channels is contiguous, 256
// channels a block for int4 and int3, 128 for int8), x pre-rounded to fp16 by gemm_q_prep into xp [T][K],
// each 128-channel tile's halves permuted into the mma's k order (below),
// bias [N] float32 or null, y [T][N] float32.
//
// Work: mma.sync m16n8k16 with the weights as A (16 output channels x 16
// input channels, dequantized in registers with gemvq.cu's operations:
// the same ŵ as v2, rounded once to fp16) and x as B (16 channels x 8
// tokens, ldmatrix'd from shared memory). A CTA of kWM x WN warps owns
// kRowsCTA = 128 output channels (kWM warps of kMT = 2 row groups each)
// and 8·NT·WN tokens (WN warps of NT n-tiles of 8 each), and a slice of K
// (split-K over gridDim.z). Its steps of BLOCKS tiled blocks (256 channels
// for int4 and int3 at BLOCKS 1; 128 or 256 for int8 at BLOCKS 1 or 2) go
// through a ring of STAGES shared-memory slots filled by cp.async: the row
// groups' code blocks (a row group's BLOCKS blocks of a step are one
// contiguous run in the tiled layout), their (scale, zero) pairs, and the
// tokens' fp16 x of the step. A lane (r = lane/4, c = lane%4) of a
// warp reads, per 128-channel tile, channels 32c..32c+31 of rows r and r+8
// of each of its row groups from the slot (v2's spans), and feeds mma
// k-step j with pairs 2j, 2j+1 (channels 32c+4j..32c+4j+3): v2's
// permutation of k. xp holds each tile's channels in that order (channel
// 32c + 4j + e at 16j + 2c + e%2 + 8·(e/2)), so ldmatrix gives every lane
// the x of its own channels. A fragment's ŵ is dequantized once per
// k-step and reused over the warp's NT n-tiles; an ldmatrix'd x fragment
// over its kMT row groups. Session 17: KS warp groups may split a step's
// tiles (their sums added once at the end), and each thread's copies are
// unrolled from addresses computed once (GEMMQ_COPY; docs/perf/gemvq.md
// "Session 17: gemmq.cu's loads under its math"). int8 (session 16, "int8 in gemmq.cu"): a span
// is 8 words, k-step j's pairs 2j, 2j+1 both in word j, so a lane reads
// its spans a half (4 words, one 16-byte load) at a time, and each row's
// 16-byte chunks sit in the slot with the chunk index XOR the row's
// parity, so that the 8 lanes of a quarter warp (rows r, r+1) read
// distinct banks.
//
// Split-K (gridDim.z > 1): each CTA writes its float32 partial sums to
// part [z][T][N], and the last CTA of an output tile to arrive (a counter
// per tile, zeroed by gemm_q_prep) adds the slices in z order, then the
// bias: a fixed order, deterministic.
//
// Numbers: x rounded to fp16 once, ŵ rounded to fp16 once (v2's half2
// dequantization, bit for bit), products and sums float32 (the tensor
// cores' accumulation over K/16 k-steps, then the slices): v2's bound
// (gemvq_test.go).
//
// Go wrapper: gemmq.go; test: gemmq_test.go (and gemmq_digest_test.go:
// int4's and int3's bits unchanged by int8's forms).

#include "bitdecode.cuh"
#include "gemvq.cu"

namespace gemmq {

using gemvq::kRows;
using gemvq::kTile;
using gemvq::Span;

constexpr int kWM = 4;                      // warps along the output channels
constexpr int kMT = 2;                      // row groups (m-tiles) a warp
constexpr int kRGs = kWM * kMT;             // row groups a CTA
constexpr int kRowsCTA = kRGs * kRows;      // output channels a CTA
constexpr int kXRow = kTile + 8;            // halves of a token's tile in a slot (8 of padding)
constexpr int kPrepThreads = 256;           // gemm_q_prep's block

// Knobs (NVRTC -D options; kernels.LoadGEMMQOptions, for tuning):
//   GEMMQ_VOLATILE  1: the mma is bitdecode.cuh's asm volatile (in
//                   program order with the ldmatrix loads); 0: a plain asm
//                   the compiler may schedule (the same operations).
// Diagnostics (wrong results; they bound where the time goes):
//   GEMMQ_DIAG=1    loads only: the ring is filled and waited for, no
//                   dequantization or mma.
//   GEMMQ_DIAG=2    math only: no copies (the slots' stale contents are
//                   multiplied).
//   GEMMQ_COPY      1 (session 17): each thread's copies of a step
//                   unrolled at compile time, their row and chunk split
//                   once, shared addresses as 32-bit offsets from the
//                   ring's base; 0: the copy loops before it (~33
//                   instructions a 16-byte copy in SASS, a third of the
//                   kernel's instructions at 32 tokens). The same copies.
#ifndef GEMMQ_VOLATILE
#define GEMMQ_VOLATILE 0
#endif
#ifndef GEMMQ_COPY
#define GEMMQ_COPY 1
#endif
#ifndef GEMMQ_DIAG
#define GEMMQ_DIAG 0
#endif

// mma is mma.sync m16n8k16 (fp16 in, f32 accumulators), A = (a0..a3): a
// plain asm unless GEMMQ_VOLATILE, so that the compiler may interleave the
// k-steps' mma with the next k-step's loads and dequantization.
__device__ __forceinline__ void mma(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  if (GEMMQ_VOLATILE) {
    gemvq::mmaA4(d, a0, a1, a2, a3, b0, b1);
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

// kCodeWords is a row group's code block (one tiled block), in u32.
template <int BITS>
constexpr int kCodeWords = kRows * gemvq::kTiledLine<BITS>;

// kBlockTiles is the 128-channel tiles of a tiled block: 2 for int4 and
// int3 (256 channels), 1 for int8.
template <int BITS>
constexpr int kBlockTiles = gemvq::kTiledLine<BITS> * 32 / BITS / kTile;

// kStepTiles is the tiles of a ring step of BLOCKS blocks (at most 2: a
// step's channels span at most two groups, G >= 128).
template <int BITS, int BLOCKS>
constexpr int kStepTiles = BLOCKS * kBlockTiles<BITS>;

// Slot<BITS, TC, BLOCKS> is one ring slot: kRGs runs of BLOCKS code
// blocks, their pairs of at most two groups (16 rows each), and TC tokens'
// x of the step's tiles.
template <int BITS, int TC, int BLOCKS>
struct Slot {
  static constexpr int kCodes = kRGs * BLOCKS * kCodeWords<BITS> * 4;  // bytes
  static constexpr int kParams = kRGs * 2 * kRows * 4;
  static constexpr int kX = kStepTiles<BITS, BLOCKS> * TC * kXRow * 2;
  static constexpr int kBytes = kCodes + kParams + kX;
};

// codeChunk is where 16-byte chunk ch of a row group's run of code blocks
// sits in the slot's run: in place for int4 and int3; for int8 (8 chunks a
// row of a block) XOR the row's parity (see the file's comment).
template <int BITS>
__device__ __forceinline__ int codeChunk(int ch) {
  if constexpr (BITS == 8) return ch ^ (ch / 8 & 1);
  return ch;
}

// sharedU32 is the shared-window address of p.
__device__ __forceinline__ u32 sharedU32(const void* p) { return u32(__cvta_generic_to_shared(p)); }

// cpAsync16s is cpAsync16 with the destination already a shared-window
// address.
__device__ __forceinline__ void cpAsync16s(u32 s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}

// Deal<CHUNKS, THREADS> deals rows of CHUNKS 16-byte chunks to THREADS
// threads, chunk i = tid + k·THREADS of the rows to thread tid's copy k:
// row i / CHUNKS, chunk i % CHUNKS. Where one of CHUNKS and THREADS
// divides the other (kRegular) copy k's row and chunk are copy 0's plus
// compile-time offsets (dRow, dCh), so a thread computes its addresses
// once and adds constants (and a step's offset) per copy.
template <int CHUNKS, int THREADS>
struct Deal {
  static constexpr bool kRegular = THREADS % CHUNKS == 0 || CHUNKS % THREADS == 0;
  static constexpr int kCopies(int rows) { return (rows * CHUNKS + THREADS - 1) / THREADS; }
  static constexpr int dRow(int k) { return THREADS % CHUNKS == 0 ? k * (THREADS / CHUNKS) : k / (CHUNKS / THREADS); }
  static constexpr int dCh(int k) { return THREADS % CHUNKS == 0 ? 0 : k % (CHUNKS / THREADS) * THREADS; }
};

// opaque64 returns v through an empty asm, so that the compiler keeps it
// in registers as computed instead of re-deriving it, re-associated, at
// every use (seen in SASS: the copies' addresses recomputed from the
// kernel's arguments, ~12 instructions each).
__device__ __forceinline__ unsigned long long opaque64(unsigned long long v) {
  asm("" : "+l"(v));
  return v;
}

// ldsm4 is ldmatrix.x4: four 8x8 fp16 matrices, lane l naming row l%8 of
// matrix l/8.
__device__ __forceinline__ void ldsm4(u32& d0, u32& d1, u32& d2, u32& d3, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3) : "r"(addr));
}

// deqPair is gemvq::dequantSpan's pair m alone (the same operations, the
// same bits): (s·q + z, s·q′ + z) of channels 2m, 2m+1 of the span.
template <int BITS>
__device__ __forceinline__ u32 deqPair(const Span<BITS>& s, int m, u32 s2, u32 z2) {
  static_assert(BITS != 8, "int8 dequantizes a word at a time: deqPair8");
  if constexpr (BITS == 4) {
    return gemvq::deq(gemvq::lop3OrMask(s.w[m / 4] >> (4 * (m % 4)), 0x000f000fu), s2, z2);
  } else {
    if (m < 15) return gemvq::deq(gemvq::lop3OrMask(s.w[m / 5] >> (3 * (m % 5)), 0x00070007u), s2, z2);
    const u32 q = ((s.w[0] >> 15) & 0x00010001u) | ((s.w[1] >> 14) & 0x00020002u) | ((s.w[2] >> 13) & 0x00040004u);
    return gemvq::deq(q | kMagic, s2, z2);
  }
}

// deqPair8 is gemvq::dequantSpan<8>'s pair 2j + e (e = 0, 1) from the
// span's word j (the same operations, the same bits).
__device__ __forceinline__ u32 deqPair8(u32 w, int e, u32 s2, u32 z2) {
  return gemvq::deq(prmt(w, 0x64646464u, e ? 0x4341u : 0x4240u), s2, z2);
}

// spanOffset is the u32 offset of a lane's span (tile u of the step, lane
// column c) of row rr (0..15) in a row group's run of code blocks:
// gemvq::tiledRow<BITS>(rr, 1) + tiledSpan<BITS>(u·128·BITS/32 + c·BITS)
// (for int4 and int3 u·kTiledLine/2 + c·BITS; for int8 tile u is block u).
template <int BITS>
__device__ __forceinline__ int spanOffset(int rr, int u, int c) {
  return int(gemvq::tiledRow<BITS>(rr, 1) + gemvq::tiledSpan<BITS>(u * kTile * BITS / 32 + c * BITS));
}

// gemm_q_prep writes x [T][K] float32 as fp16 into xp with each 128-channel
// tile's channels in the mma's k order (channel 32c + 4j + e at
// 16j + 2c + e%2 + 8·(e/2)), and zeroes the split-K counters cnt [ncnt].
__global__ void __launch_bounds__(kPrepThreads) gemm_q_prep(const float* __restrict__ x, u32* __restrict__ xp, int T, int K,
                                                            u32* __restrict__ cnt, int ncnt) {
  const int stride = gridDim.x * kPrepThreads;
  const int i0 = blockIdx.x * kPrepThreads + threadIdx.x;
  for (int i = i0; i < ncnt; i += stride) cnt[i] = 0;
  const int quads = T * (K / 4);
  for (int i = i0; i < quads; i += stride) {
    const int t = i / (K / 4), k = i % (K / 4) * 4;
    const float4 v = *reinterpret_cast<const float4*>(x + size_t(t) * K + k);
    const int ch = k % kTile, c = ch / 32, j = ch % 32 / 4;
    u32* row = xp + (size_t(t) * K + (k - ch)) / 2;  // the tile's 64 half2
    row[8 * j + c] = pack2(v.x, v.y);                 // halves 16j + 2c, +1
    row[8 * j + 4 + c] = pack2(v.z, v.w);             // halves 16j + 2c + 8, +9
  }
}

// kMinCTAs is gemm_q's __launch_bounds__ minimum of CTAs an SM: 1 as
// before session 17 for KS = 1; for KS > 1 as many as fill 512 threads
// (two CTAs of 256 at 32 tokens, one of 512 at 64 and 128), so that the
// register cap (128 a thread) keeps the doubled warps resident.
template <int THREADS, int KS>
constexpr int kMinCTAs = KS > 1 && THREADS < 512 ? 512 / THREADS : 1;

// gemm_q: grid (ceil(N/128), ceil(T/(8·NT·WN)), splits), block
// 32·kWM·WN·KS, dynamic shared memory STAGES · Slot<BITS, 8·NT·WN,
// BLOCKS>::kBytes. tw, tp: the weight's tiled layout; xp: gemm_q_prep's x;
// part [splits][T][N] and cnt [gridDim.x·gridDim.y] (zeroed) where
// splits > 1. BLOCKS: tiled blocks a ring step (1 for int4 and int3).
// KS (session 17, "gemmq.cu's loads under its math"): warp groups that
// split each ring step's 128-channel tiles (group wk takes tiles u ≡ wk
// mod KS) with their own accumulators, added (group 0's + group 1's ...)
// once after the last step: KS times the warps on the same slots, the
// same dequantizations (none duplicated), to hide the dequantize -> mma
// chains' latency behind other warps. KS = 1 is the kernel before it, the
// same bits.
template <int BITS, int NT, int WN, int STAGES, int BLOCKS, int KS>
__global__ void __launch_bounds__(32 * kWM * WN * KS, (kMinCTAs<32 * kWM * WN * KS, KS>)) gemm_q(const u32* __restrict__ xp, const u32* __restrict__ tw, const u32* __restrict__ tp,
                                                           const float* __restrict__ bias, float* __restrict__ y, float* __restrict__ part,
                                                           u32* __restrict__ cnt, int T, int N, int K, int G) {
  static_assert(BITS == 4 || BITS == 3 || BITS == 8, "the tiled layout is int4's, int3's and int8's");
  static_assert(BITS == 8 || BLOCKS == 1, "int4's and int3's step is one block (256 channels)");
  static_assert(kStepTiles<BITS, BLOCKS> <= 2, "a step spans at most two groups' pairs");
  static_assert(NT % 2 == 0, "ldmatrix.x4 loads two n-tiles");
  static_assert(KS >= 1 && kStepTiles<BITS, BLOCKS> % KS == 0, "the warp groups split a step's tiles evenly");
  constexpr int TC = 8 * NT * WN;
  constexpr int kThreads = 32 * kWM * WN * KS;
  constexpr int kTilesStep = kStepTiles<BITS, BLOCKS>;
  constexpr int kStep = kTilesStep * kTile;  // channels a ring step
  using S = Slot<BITS, TC, BLOCKS>;
  extern __shared__ __align__(16) unsigned char smem[];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp % kWM, wn = warp / kWM % WN, wk = warp / (kWM * WN);
  const int r = lane / 4, c = lane % 4;
  const int rg0 = blockIdx.x * kRGs;            // the CTA's first row group
  const int rgs = (N + kRows - 1) / kRows;      // row groups of the weight
  const int tc0 = blockIdx.y * TC;              // the CTA's first token
  const int tiles = K / kTile, groups = K / G;
  const int gLog = __ffs(G) - 1;  // G is 128 times a power of two (GEMMQ.Reads): c / G = c >> gLog
  const int blocks = (tiles + kBlockTiles<BITS> - 1) / kBlockTiles<BITS>;  // a row group's, in the layout
  const int steps = (tiles + kTilesStep - 1) / kTilesStep;
  const int per = (steps + gridDim.z - 1) / gridDim.z;
  const int st0 = blockIdx.z * per, st1 = min(steps, st0 + per);

  // load issues the cp.async copies of step st into ring slot s.
  // GEMMQ_COPY: a thread's copies (Deal) from addresses computed here
  // once; the codes' rows of int3 (96 chunks) are not regular and take
  // the loops below.
  constexpr int kChunks = BLOCKS * kCodeWords<BITS> / 4;  // 16-byte chunks of a row group's run
  constexpr int kXChunks = kTilesStep * 16;              // of a token's x, a step
  using DC = Deal<kChunks, kThreads>;
  using DX = Deal<kXChunks, kThreads>;
  static_assert(kThreads % kXChunks == 0, "x's chunks dealt evenly");
  const u32 sbase = sharedU32(smem);
  const size_t rowWords = size_t(blocks) * kCodeWords<BITS>;  // a row group's codes
  const int cRow = threadIdx.x / kChunks, cCh = threadIdx.x % kChunks;  // copy 0's (regular deals)
  // Byte addresses: copy k of a step reads cSrc + the step's offset +
  // dRow(k)·cRowB + dCh(k)·16.
  const unsigned long long cSrc = opaque64(reinterpret_cast<unsigned long long>(tw + (rg0 + cRow) * rowWords + cCh * 4));
  const unsigned long long cRowB = opaque64(rowWords * 4);
  const int cLeft = rgs - rg0 - cRow;  // row groups from copy 0's on
  const u32 cDst = (cRow * kChunks + codeChunk<BITS>(cCh)) * 16;
  const int xT = threadIdx.x / kXChunks, xCh = threadIdx.x % kXChunks, xU = xCh / 16;
  const unsigned long long xSrc = opaque64(reinterpret_cast<unsigned long long>(xp + size_t(tc0 + xT) * K / 2 + xCh * 4));
  const unsigned long long xStepB = opaque64(size_t(K) * 2 * DX::dRow(1));  // from one copy's token to the next's
  const int xLeft = T - tc0 - xT;                                              // tokens from copy 0's on
  const u32 xDst = S::kCodes + S::kParams + ((xU * TC + xT) * kXRow) * 2 + xCh % 16 * 16;
  auto load = [&](int s, int st) {
    if constexpr (GEMMQ_COPY) {
      const u32 slot = sbase + s * S::kBytes;
      const int nch = min(BLOCKS, blocks - st * BLOCKS) * (kCodeWords<BITS> / 4);
      if constexpr (DC::kRegular) {
        // Codes: each row group's run of the step's blocks, contiguous
        // (the last step's run may be shorter).
        // p walks the rows (one 64-bit add a new row).
        unsigned long long p = opaque64(cSrc + u32(st) * u32(BLOCKS * kCodeWords<BITS> * 4));
#pragma unroll
        for (int k = 0; k < DC::kCopies(kRGs); k++) {
          if (k > 0)
            for (int r = DC::dRow(k - 1); r < DC::dRow(k); r++) p += cRowB;
          if (DC::dRow(k) < cLeft && cCh + DC::dCh(k) < nch)
            cpAsync16s(slot + cDst + (DC::dRow(k) * kChunks + DC::dCh(k)) * 16, reinterpret_cast<const void*>(p + DC::dCh(k) * 16));
        }
      } else {
        for (int i = threadIdx.x; i < kRGs * kChunks; i += kThreads) {
          const int g = i / kChunks, ch = i % kChunks;
          if (rg0 + g < rgs && ch < nch)
            cpAsync16s(slot + (g * kChunks + codeChunk<BITS>(ch)) * 16, tw + (size_t(rg0 + g) * blocks + st * BLOCKS) * kCodeWords<BITS> + ch * 4);
        }
      }
      // Pairs: groups st·kStep/G .. (st·kStep + kStep - 1)/G (at most two:
      // G >= 128), 4 chunks each; one copy for the first 64 threads.
      static_assert(kRGs * 8 <= kThreads, "a copy a thread for the pairs");
      if (threadIdx.x < kRGs * 8) {
        const int g = threadIdx.x / 8, gi = threadIdx.x / 4 % 2, ch = threadIdx.x % 4;
        const int gFirst = st * kStep >> gLog, gLast = min(groups - 1, (st * kStep + kStep - 1) >> gLog);
        if (rg0 + g < rgs && gFirst + gi <= gLast)
          cpAsync16s(slot + S::kCodes + ((g * 2 + gi) * kRows) * 4 + ch * 16, tp + (size_t(rg0 + g) * groups + gFirst + gi) * kRows + ch * 4);
      }
      // x: the CTA's tokens' tiles of the step (16 chunks each), those that
      // exist.
      const int nu = min(kTilesStep, tiles - kTilesStep * st);
      unsigned long long p = opaque64(xSrc + u32(st) * u32(kStep * 2));
      if (xU < nu)
#pragma unroll
        for (int k = 0; k < DX::kCopies(TC); k++) {
          if (k > 0) p += xStepB;
          if (((TC * kXChunks) % kThreads == 0 || xT + DX::dRow(k) < TC) && DX::dRow(k) < xLeft)
            cpAsync16s(slot + xDst + DX::dRow(k) * kXRow * 2, reinterpret_cast<const void*>(p));
        }
      return;
    }
    unsigned char* slot = smem + s * S::kBytes;
    // Codes: each row group's run of the step's blocks, contiguous (the
    // last step's run may be shorter).
    constexpr int kChunks = BLOCKS * kCodeWords<BITS> / 4;  // 16-byte chunks a run
    const int nch = min(BLOCKS, blocks - st * BLOCKS) * (kCodeWords<BITS> / 4);
    for (int i = threadIdx.x; i < kRGs * kChunks; i += kThreads) {
      const int g = i / kChunks, ch = i % kChunks;
      if (rg0 + g < rgs && ch < nch)
        cpAsync16(slot + (g * kChunks + codeChunk<BITS>(ch)) * 16, tw + (size_t(rg0 + g) * blocks + st * BLOCKS) * kCodeWords<BITS> + ch * 4);
    }
    // Pairs: groups st·kStep/G .. (st·kStep + kStep - 1)/G (at most two:
    // G >= 128).
    const int gFirst = st * kStep / G, gLast = min(groups - 1, (st * kStep + kStep - 1) / G);
    for (int i = threadIdx.x; i < kRGs * 2 * 4; i += kThreads) {
      const int g = i / 8, gi = i / 4 % 2, ch = i % 4;
      if (rg0 + g < rgs && gFirst + gi <= gLast)
        cpAsync16(slot + S::kCodes + ((g * 2 + gi) * kRows) * 4 + ch * 16, tp + (size_t(rg0 + g) * groups + gFirst + gi) * kRows + ch * 4);
    }
    // x: the CTA's tokens' tiles of the step (16 chunks each), those that
    // exist.
    const int nu = min(kTilesStep, tiles - kTilesStep * st);
    for (int i = threadIdx.x; i < TC * kTilesStep * 16; i += kThreads) {
      const int t = i / (kTilesStep * 16), u = i / 16 % kTilesStep, ch = i % 16;
      if (tc0 + t < T && u < nu)
        cpAsync16(slot + S::kCodes + S::kParams + ((u * TC + t) * kXRow) * 2 + ch * 16,
                  xp + (size_t(tc0 + t) * K + st * kStep + u * kTile) / 2 + ch * 4);
    }
  };

  float acc[kMT][NT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.f;

  // The ring: STAGES-1 steps in flight ahead of the one computed.
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (GEMMQ_DIAG != 2 && st0 + s < st1) load(s, st0 + s);
    cpAsyncCommit();
  }
  // ldmatrix rows: lane l names row l%8 of matrix l/8 (matrices: n-tile
  // pair member l/16, k half (l/8)%2).
  const int xTok = wn * NT * 8 + (lane / 16) * 8 + lane % 8, xHalf = (lane / 8) % 2 * 8;
  for (int st = st0; st < st1; st++) {
    const int it = st - st0;
    cpAsyncWait<STAGES - 2>();
    __syncthreads();
    if (GEMMQ_DIAG != 2 && st + STAGES - 1 < st1) load((it + STAGES - 1) % STAGES, st + STAGES - 1);
    cpAsyncCommit();
    const unsigned char* slot = smem + (it % STAGES) * S::kBytes;
    const u32* codes = reinterpret_cast<const u32*>(slot);
    const u32* prm = reinterpret_cast<const u32*>(slot + S::kCodes);
    const u32 xs = sharedU32(slot + S::kCodes + S::kParams);
    const int nu = min(kTilesStep, tiles - kTilesStep * st);
    if (GEMMQ_DIAG == 1) {
      acc[0][0][0] += __uint_as_float(codes[threadIdx.x] & 0x3fffffffu);  // the slot read, nothing else
      continue;
    }
#pragma unroll
    for (int uk = 0; uk < kTilesStep / KS; uk++) {
      const int u = uk * KS + wk;
      if (u >= nu) break;  // warp-uniform (the last step's missing tiles)
      const u32 xu = xs + ((u * TC + xTok) * kXRow + xHalf) * 2;
      const int gi = ((st * kStep + u * kTile) >> gLog) - (st * kStep >> gLog);
      if constexpr (BITS == 8) {
        // The lane's pairs of rows r and r+8 of its row groups, then its
        // spans a half at a time: words 4q..4q+3 (k-steps 4q..4q+3), the
        // 16-byte chunk 2c + q of the row, stored at 2c + q XOR the row's
        // parity (r's: rows r and r+8 have one parity).
        u32 s2[kMT][2], z2[kMT][2];
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const u32 sz = prm[((wm * kMT + mt) * 2 + gi) * kRows + r + 8 * h];
            s2[mt][h] = prmt(sz, 0, 0x1010), z2[mt][h] = prmt(sz, 0, 0x3232);
          }
#pragma unroll
        for (int q = 0; q < 2; q++) {
          uint4 a[kMT][2];
#pragma unroll
          for (int mt = 0; mt < kMT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
              const u32* row = codes + (wm * kMT + mt) * BLOCKS * kCodeWords<BITS> + u * kCodeWords<BITS> + (r + 8 * h) * gemvq::kTiledLine<BITS>;
              a[mt][h] = *reinterpret_cast<const uint4*>(row + ((2 * c + q) ^ (r & 1)) * 4);
            }
#pragma unroll
          for (int jj = 0; jj < 4; jj++) {
            const int j = 4 * q + jj;
            u32 b[NT][2];
#pragma unroll
            for (int np = 0; np < NT / 2; np++) ldsm4(b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1], xu + (np * 16 * kXRow + 16 * j) * 2);
#pragma unroll
            for (int mt = 0; mt < kMT; mt++) {
              const u32 w0 = jj == 0 ? a[mt][0].x : jj == 1 ? a[mt][0].y : jj == 2 ? a[mt][0].z : a[mt][0].w;
              const u32 w1 = jj == 0 ? a[mt][1].x : jj == 1 ? a[mt][1].y : jj == 2 ? a[mt][1].z : a[mt][1].w;
              const u32 a0 = deqPair8(w0, 0, s2[mt][0], z2[mt][0]);
              const u32 a1 = deqPair8(w1, 0, s2[mt][1], z2[mt][1]);
              const u32 a2 = deqPair8(w0, 1, s2[mt][0], z2[mt][0]);
              const u32 a3 = deqPair8(w1, 1, s2[mt][1], z2[mt][1]);
#pragma unroll
              for (int nt = 0; nt < NT; nt++) mma(acc[mt][nt], a0, a1, a2, a3, b[nt][0], b[nt][1]);
            }
          }
        }
      } else {
        // The lane's spans and pairs of rows r and r+8 of its row groups.
        Span<BITS> a[kMT][2];
        u32 s2[kMT][2], z2[kMT][2];
#pragma unroll
        for (int mt = 0; mt < kMT; mt++) {
          const int g = wm * kMT + mt;
          const u32* blk = codes + g * kCodeWords<BITS>;
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const u32* p = blk + spanOffset<BITS>(r + 8 * h, u, c);
            if constexpr (BITS == 4) {
              const uint4 v = *reinterpret_cast<const uint4*>(p);
              a[mt][h].w[0] = v.x, a[mt][h].w[1] = v.y, a[mt][h].w[2] = v.z, a[mt][h].w[3] = v.w;
            } else {
#pragma unroll
              for (int i = 0; i < 3; i++) a[mt][h].w[i] = p[i];
            }
            const u32 sz = prm[(g * 2 + gi) * kRows + r + 8 * h];
            s2[mt][h] = prmt(sz, 0, 0x1010), z2[mt][h] = prmt(sz, 0, 0x3232);
          }
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
          u32 b[NT][2];
#pragma unroll
          for (int np = 0; np < NT / 2; np++) ldsm4(b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1], xu + (np * 16 * kXRow + 16 * j) * 2);
#pragma unroll
          for (int mt = 0; mt < kMT; mt++) {
            const u32 a0 = deqPair<BITS>(a[mt][0], 2 * j, s2[mt][0], z2[mt][0]);
            const u32 a1 = deqPair<BITS>(a[mt][1], 2 * j, s2[mt][1], z2[mt][1]);
            const u32 a2 = deqPair<BITS>(a[mt][0], 2 * j + 1, s2[mt][0], z2[mt][0]);
            const u32 a3 = deqPair<BITS>(a[mt][1], 2 * j + 1, s2[mt][1], z2[mt][1]);
#pragma unroll
            for (int nt = 0; nt < NT; nt++) mma(acc[mt][nt], a0, a1, a2, a3, b[nt][0], b[nt][1]);
          }
        }
      }
    }
  }
  cpAsyncWait<0>();
  if constexpr (KS > 1) {
    // Groups 1..KS-1 hand their sums to group 0 through the ring's shared
    // memory (every copy has landed, every warp past its last step), which
    // adds them in group order. Layout: element e of a group's thread i
    // at [group-1][e][i]: consecutive threads, consecutive words.
    constexpr int kE = kMT * NT * 4, kG = kThreads / KS;
    static_assert((KS - 1) * kE * kG * 4 <= STAGES * Slot<BITS, TC, BLOCKS>::kBytes, "the ring holds the groups' sums");
    float* red = reinterpret_cast<float*>(smem);
    const int li = threadIdx.x % kG;
    __syncthreads();
    if (wk > 0) {
#pragma unroll
      for (int mt = 0; mt < kMT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
          for (int i = 0; i < 4; i++) red[((wk - 1) * kE + (mt * NT + nt) * 4 + i) * kG + li] = acc[mt][nt][i];
    }
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int k = 1; k < KS; k++)
#pragma unroll
        for (int mt = 0; mt < kMT; mt++)
#pragma unroll
          for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][nt][i] += red[((k - 1) * kE + (mt * NT + nt) * 4 + i) * kG + li];
    }
  }

  // acc[mt][nt]: rows r, r+8 of row group wm·kMT + mt, tokens 2c, 2c+1 of
  // n-tile nt of the warp's.
  const int splits = gridDim.z;
#pragma unroll
  for (int mt = 0; mt < kMT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int n = (rg0 + wm * kMT + mt) * kRows + r + (i >= 2 ? 8 : 0);
        const int t = tc0 + wn * NT * 8 + nt * 8 + 2 * c + (i & 1);
        if (wk > 0 || n >= N || t >= T) continue;
        if (splits == 1) y[size_t(t) * N + n] = acc[mt][nt][i] + (bias ? bias[n] : 0.f);
        else part[(size_t(blockIdx.z) * T + t) * N + n] = acc[mt][nt][i];
      }
  if (splits == 1) return;
  // The last CTA of the tile to arrive adds the slices in order.
  __shared__ u32 last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(cnt + blockIdx.y * gridDim.x + blockIdx.x, 1u) == u32(splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Each thread sums four outputs of a token (float4 loads where N allows:
  // N a multiple of 4), its slices' loads issued together, then added in
  // slice order.
  const int n0 = rg0 * kRows;
  const bool vec = N % 4 == 0;
  for (int i = threadIdx.x; i < TC * (kRowsCTA / 4); i += kThreads) {
    const int t = tc0 + i / (kRowsCTA / 4), n = n0 + i % (kRowsCTA / 4) * 4;
    if (n >= N || t >= T) continue;
    float v[4];
    if (vec) {
      float4 q[8];
      const float4* p = reinterpret_cast<const float4*>(part + size_t(t) * N + n);
      const size_t zs = size_t(T) * N / 4;  // a slice, in float4
      float4 sum = __ldcg(p);
      for (int z0 = 1; z0 < splits; z0 += 8) {
#pragma unroll
        for (int z = 0; z < 8; z++)
          if (z0 + z < splits) q[z] = __ldcg(p + (z0 + z) * zs);
#pragma unroll
        for (int z = 0; z < 8; z++)
          if (z0 + z < splits) sum.x += q[z].x, sum.y += q[z].y, sum.z += q[z].z, sum.w += q[z].w;
      }
      v[0] = sum.x, v[1] = sum.y, v[2] = sum.z, v[3] = sum.w;
    } else {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        v[e] = 0.f;
        if (n + e >= N) continue;
        v[e] = __ldcg(part + size_t(t) * N + n + e);
        for (int z = 1; z < splits; z++) v[e] += __ldcg(part + (size_t(z) * T + t) * N + n + e);
      }
    }
#pragma unroll
    for (int e = 0; e < 4; e++)
      if (n + e < N) y[size_t(t) * N + n + e] = v[e] + (bias ? bias[n + e] : 0.f);
  }
}

}  // namespace gemmq

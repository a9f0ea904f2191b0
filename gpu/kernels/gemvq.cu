// gemvq.cu: the decode-sized linear layer over packed low-bit weights
// (package wq's layout, wq/doc.go), y = x·Ŵᵀ + bias for T <= 16 rows of x,
// reading each packed weight once on tensor cores; and the dequantization of
// a whole packed matrix to fp16 for prefill (cuBLASLt then multiplies).
//
//   words  [N][RowWords(K)] u32: row n's codes (int8, int4 or int3, wq/doc.go
//          "Packed layout"). The rule every width follows: pair m of a block
//          of 32 channels (channels 2m, 2m+1) sits at the same bit offset in
//          the low and the high half of a word, so shift + lop3 with the
//          fp16 magic 0x6400 gives the half2 (1024+q, 1024+q′).
//   params [N][K/G][2] fp16: (scale s, zero z) of row n, group g.
//   x [T][K] float32, bias [N] float32 or null, y [T][N] float32.
//
// Numbers: x is rounded to fp16 as the tensor-core operand; products and
// sums are float32 (mma.sync with f32 accumulation). By default ŵ is formed
// in half2 before the mma: q exact (1024+q − 1024), then one fma.rn.f16x2
// with (s, s) and (z, z), ŵ rounded once to fp16 (within one fp16 ulp of
// wq's float32 ŵ, wq/doc.go). GEMVQ_FOLD=1 instead, where G is a multiple of
// the 128-channel tile, lets the mma multiply the exact integer codes and
// adds s·Σq·x + z·Σx per tile (Σx from a second mma with A = ones): wq's ŵ
// exactly, in distributed form, with fewer ops per weight; it measured no
// faster, so it is off. gemvq3.cu (v3) includes this file for Span, loadSpan
// and codesSpan.
//
// Work: mma.sync m16n8k16 with the weights as A (16 output channels x 16
// input channels) and x as B (16 input channels x 8 tokens; T > 8 takes a
// second n-tile). A CTA owns 16 output channels; its S warps split K into
// contiguous runs of 128-channel tiles. In a tile, lane (r = lane/4,
// c = lane%4) reads channels 32c..32c+31 of rows r and r+8 (one 16-byte load
// each for int4: 64 contiguous bytes of a row per 4 lanes, whole sectors),
// dequantizes them into 16 half2 pairs per row, and feeds them to 8 mma
// k-steps: step j takes pairs 2j and 2j+1, the lane's own channels
// 32c+4j..32c+4j+3. That assignment of the mma's k index to channels is a
// permutation, and the B operand uses the same one: lane (c, token t) reads
// x[t][32c+4j..+3], so no data moves between lanes. Each lane's 32 channels
// lie in one quantization group (G is a multiple of 32), so any G works.
// kUnroll tiles' codes are loaded before their math, keeping 3-4 KB per warp
// in flight. The S warps' partial sums are added in warp order through shared
// memory: a fixed order, deterministic.
//
// Versions (H100, T = 1, int4 G128; docs/perf/gemvq.md has each step):
//   v1 CUDA cores, a warp per output channel, lane l on channels 32l..,
//      ŵ and products in float32: gate/up 14336x4096 66.5 us (15% of the
//      read ceiling, launch latency included): ~6 instructions per weight.
//   v2 tensor cores, ŵ in half2: gate/up 23-24 us (GPU time), 42%.
//   v2 with the scales folded out of the inner loop (GEMVQ_FOLD=1): no
//      gain, off.
//   v3 (gemvq3.cu, CUDA cores) takes one row of x since session 13; this
//      file keeps T >= 2 and DEC's fused mode (gemv_q_dec).
//
// Go wrapper: gemvq.go; test: gemvq_test.go (float64 reference of wq's Ŵ).

#include "bitdecode.cuh"

// gemvq_dec.cu (kernels.LoadGEMVQDEC) is this file compiled with
// -DGEMVQ_WITH_DEC=1: dec.cu, handed to NVRTC as a header beside
// bitdecode.cuh, comes first for gemv_q_dec's DEC CTAs.
#ifdef GEMVQ_WITH_DEC
#include "dec.cu"
#endif

namespace gemvq {

#ifdef GEMVQ_WITH_DEC
using FusedArgs = dec::Args;
#else
struct FusedArgs {};  // gemv_q: no DEC
#endif

constexpr int kRows = 16;      // output channels per CTA (the mma's M)
constexpr int kTile = 128;     // input channels per tile (4 lanes x 32)
constexpr int kSpan = 32;      // input channels per lane per tile
// Tuning knobs (NVRTC -D options; the defaults are the measured best,
// docs/perf/gemvq.md; `bitdecode bench gemvq --variants` times them):
//   GEMVQ_PIPE      1: the next batch of kUnroll tiles is loaded before the
//                   current one's math (register double buffering).
//   GEMVQ_WARPS_SM  warps per SM the launch bounds ask registers for
//                   (0: no bound).
//   GEMVQ_UNROLL    tiles per load batch (0: kUnroll's default).
//   GEMVQ_FOLD      1: with G a multiple of 128, mma over the exact codes
//                   and apply (s, z) per tile (fewer ops per weight); 0:
//                   ŵ in half2 before the mma.
//   GEMVQ_XSTAGE    1: a tile's x goes through a per-warp shared-memory
//                   buffer (one coalesced float4 per lane and token, the first
//                   token's loaded with the codes); 0: each lane reads its
//                   own 32 channels (8 float4 loads 128 bytes apart).
// Diagnostics (wrong results; they bound where the time goes):
//   GEMVQ_DIAG=1    x is not read (B = 1.0): the cost of the x path.
//   GEMVQ_DIAG=2    loads only: the codes are XOR-ed into the output, no
//                   dequantization or mma: the load pattern's bandwidth.
#ifndef GEMVQ_PIPE
#define GEMVQ_PIPE 1
#endif
#ifndef GEMVQ_WARPS_SM
#define GEMVQ_WARPS_SM 0
#endif
#ifndef GEMVQ_UNROLL
#define GEMVQ_UNROLL 0
#endif
#ifndef GEMVQ_DIAG
#define GEMVQ_DIAG 0
#endif
#ifndef GEMVQ_FOLD
#define GEMVQ_FOLD 0
#endif
#ifndef GEMVQ_XSTAGE
#define GEMVQ_XSTAGE 1
#endif

// kUnroll: tiles whose codes are loaded before their math (64 bytes per lane
// for int4, double buffered).
template <int BITS>
constexpr int kUnroll = GEMVQ_UNROLL > 0 ? GEMVQ_UNROLL : 2;
constexpr u32 kOnes = 0x3c003c00u;   // half2 (1, 1)

// lop3OrMask is (a & mask) | kMagic: the masked codes under 1024.
__device__ __forceinline__ u32 lop3OrMask(u32 a, u32 mask) { return lop3AndOr(a, mask, kMagic); }
// deq turns the half2 (1024+q, 1024+q′) into (s·q + z, s·q′ + z): the
// subtraction is exact, the fma rounds once.
__device__ __forceinline__ u32 deq(u32 magicq, u32 s2, u32 z2) { return hfma2(hsub2(magicq, kMagic), s2, z2); }
// sub1024 turns (1024+q, 1024+q′) into (q, q′) exactly.
__device__ __forceinline__ u32 sub1024(u32 v) { return hsub2(v, kMagic); }
// odd16 turns (1024+16q, 1024+16q′) into (q, q′) exactly: ·1/16 − 64.
__device__ __forceinline__ u32 odd16(u32 v) { return hfma2(v, 0x2c002c00u, 0xd400d400u); }

// mmaA4 is bitdecode.cuh's mma16816 with the A fragment as four registers.
__device__ __forceinline__ void mmaA4(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  const u32 a[4] = {a0, a1, a2, a3};
  mma16816(d, a, b0, b1);
}

// Span<BITS> is one lane's 32 channels of one row: kWords u32 of codes.
template <int BITS>
struct Span {
  static constexpr int kWords = BITS;  // 32 channels x BITS bits / 32
  u32 w[kWords];
};

// loadSpan reads the codes of channels k..k+31 of a row (k a multiple of 32).
// int4 and int8 spans are 16-byte aligned and bypass L1; int3's 12 bytes are
// read as three words through L1 (the three loads share sectors).
template <int BITS>
__device__ __forceinline__ void loadSpan(Span<BITS>& s, const u32* row, int k) {
  const u32* p = row + k / 32 * BITS;
  if constexpr (BITS == 3) {
#pragma unroll
    for (int i = 0; i < 3; i++) s.w[i] = __ldg(p + i);
  } else {
#pragma unroll
    for (int i = 0; i < BITS; i += 4) {
      const uint4 v = ldgStream(p + i);
      s.w[i] = v.x, s.w[i + 1] = v.y, s.w[i + 2] = v.z, s.w[i + 3] = v.w;
    }
  }
}

// dequantSpan writes the span's 16 pairs (pair m: channels 2m, 2m+1) as
// half2 ŵ, given the row's (scale, zero) half2 sz of the span's group.
template <int BITS>
__device__ __forceinline__ void dequantSpan(u32 (&out)[16], const Span<BITS>& s, u32 sz) {
  const u32 s2 = prmt(sz, 0, 0x1010), z2 = prmt(sz, 0, 0x3232);
  if constexpr (BITS == 4) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int p = 0; p < 4; p++) out[4 * i + p] = deq(lop3OrMask(s.w[i] >> (4 * p), 0x000f000fu), s2, z2);
  } else if constexpr (BITS == 8) {
#pragma unroll
    for (int i = 0; i < 8; i++) {
      out[2 * i] = deq(prmt(s.w[i], 0x64646464u, 0x4240), s2, z2);      // bytes 0, 2: k0, k0+1
      out[2 * i + 1] = deq(prmt(s.w[i], 0x64646464u, 0x4341), s2, z2);  // bytes 1, 3: k0+2, k0+3
    }
  } else {
#pragma unroll
    for (int j = 0; j < 3; j++)
#pragma unroll
      for (int p = 0; p < 5; p++) out[5 * j + p] = deq(lop3OrMask(s.w[j] >> (3 * p), 0x00070007u), s2, z2);
    // Channels 30 and 31: bit j of each code is bit 15 (31) of word j.
    const u32 q = ((s.w[0] >> 15) & 0x00010001u) | ((s.w[1] >> 14) & 0x00020002u) | ((s.w[2] >> 13) & 0x00040004u);
    out[15] = deq(q | kMagic, s2, z2);
  }
}

// codesSpan writes the span's 16 pairs of codes as exact half2 integers
// (q, q′), the cheapest unpacking per width: int4 takes the even nibbles
// with the magic and one subtraction, the odd ones in place (1024 + 16q) and
// one fma by 1/16 and −64, so a word of 8 codes costs one shift, four lop3
// and four half2 ops.
template <int BITS>
__device__ __forceinline__ void codesSpan(u32 (&out)[16], const Span<BITS>& s) {
  if constexpr (BITS == 4) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const u32 lo = s.w[i], hi = s.w[i] >> 8;
      out[4 * i] = sub1024(lop3OrMask(lo, 0x000f000fu));
      out[4 * i + 1] = odd16(lop3OrMask(lo, 0x00f000f0u));
      out[4 * i + 2] = sub1024(lop3OrMask(hi, 0x000f000fu));
      out[4 * i + 3] = odd16(lop3OrMask(hi, 0x00f000f0u));
    }
  } else if constexpr (BITS == 8) {
#pragma unroll
    for (int i = 0; i < 8; i++) {
      out[2 * i] = sub1024(prmt(s.w[i], 0x64646464u, 0x4240));
      out[2 * i + 1] = sub1024(prmt(s.w[i], 0x64646464u, 0x4341));
    }
  } else {
#pragma unroll
    for (int j = 0; j < 3; j++)
#pragma unroll
      for (int p = 0; p < 5; p++) out[5 * j + p] = sub1024(lop3OrMask(s.w[j] >> (3 * p), 0x00070007u));
    const u32 q = ((s.w[0] >> 15) & 0x00010001u) | ((s.w[1] >> 14) & 0x00020002u) | ((s.w[2] >> 13) & 0x00040004u);
    out[15] = sub1024(q | kMagic);
  }
}

// The tiled layout (gemvq4.cu "The tiled layout", gemvq6.go PackTiles;
// int4, int3 and int8): a row group of kRows rows is cut into steps of
// kTiledLine words of each row (a ring step of v6.1: two tiles of 128
// channels, 32 words of int4, 24 of int3; one tile of int8, 32 words,
// session 16), stored block after block. int4 and int8: word kw of row n sits at
// ((n/kRows·steps + kw/32)·kRows + n%kRows)·32 + kw%32, steps =
// ceil(rowWords/32). int3 (session 15d): a block's 384 words are v6.1's
// lanes' reads in order, lane (g, c) (g = n%8, c = kw%12/3) at 12·(4g + c),
// then tile u = kw%24/12, row half r = n%16/8, word i = kw%3 at 6u + 3r + i,
// so a span's 3 words stay contiguous and each lane's 12 words of a step are
// three 16-byte units. The params are [row group][group][kRows] (scale,
// zero) pairs for all three. The TILED forms of v2 and the dequantization read
// it with the same operations in the same order as over wq's layout: only
// the addresses differ, so they give the same bits.
template <int BITS>
constexpr int kTiledLine = BITS == 3 ? 24 : 32;  // words of a row in one block

// tiledRow returns the word offset of row n's first word in the tiled
// layout; word kw of the row is tiledRow + tiledSpan(kw) (kw at a span's
// first word or after it within the span).
template <int BITS = 4>
__device__ __forceinline__ size_t tiledRow(int n, int steps) {
  if constexpr (BITS == 3) return size_t(n / kRows) * steps * (kRows * kTiledLine<3>) + (n % 8) * 48 + (n % kRows / 8) * 3;
  return (size_t(n / kRows) * steps * kRows + n % kRows) * kTiledLine<BITS>;
}
// tiledSpan is word kw's offset from its row's first word (tiledRow).
template <int BITS = 4>
__device__ __forceinline__ size_t tiledSpan(int kw) {
  if constexpr (BITS == 3) return size_t(kw / 24) * (kRows * kTiledLine<3>) + (kw % 12 / 3) * 12 + (kw % 24 / 12) * 6 + kw % 3;
  return size_t(kw / kTiledLine<BITS>) * (kRows * kTiledLine<BITS>) + kw % kTiledLine<BITS>;
}
// tiledParam returns the (scale, zero) pair index of row n, group grp.
__device__ __forceinline__ size_t tiledParam(int n, int grp, int groups) {
  return (size_t(n / kRows) * groups + grp) * kRows + n % kRows;
}

// loadX converts x[t][k..k+31] to 16 half2 (pair m: channels k+2m, k+2m+1).
__device__ __forceinline__ void loadX(u32 (&xb)[16], const float* x) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const float4 v = *reinterpret_cast<const float4*>(x + 4 * i);
    xb[2 * i] = pack2(v.x, v.y);
    xb[2 * i + 1] = pack2(v.z, v.w);
  }
}

constexpr int minBlocks(int S) { return GEMVQ_WARPS_SM / S > 1 ? GEMVQ_WARPS_SM / S : 1; }

// Batch<BITS> is kUnroll tiles of one lane's codes for rows r and r+8 and
// their (scale, zero) pairs.
template <int BITS>
struct Batch {
  Span<BITS> a0[kUnroll<BITS>], a1[kUnroll<BITS>];
  u32 sz0[kUnroll<BITS>], sz1[kUnroll<BITS>];
  float4 x0[kUnroll<BITS>];  // GEMVQ_XSTAGE: channels 4·lane.. of token 0
};

// kXStride is the u32 stride of a token's row in the x staging buffer: 64
// half2 of a tile plus 4 of padding, so the mma lanes' 16-byte reads of 8
// tokens spread over all banks.
constexpr int kXStride = 64 + 4;

// gemv is the work of the CTA that owns output channels 16·cta..16·cta+15
// (all 32·S threads call it). FUSED: DEC runs in the same grid (dec.cu,
// fused mode; fa its arguments): the CTA's 16 outputs are DEC's tile cta,
// and its epilogue follows dec.cu's protocol (part_load at the start of
// the warp's last batch, part_ready voted over the CTA, tile_value, then
// tile_close). TILED: words and params in the tiled layout (above; int4 or int3,
// not FUSED; int8 since session 16): the same operations over other addresses.
template <int NT, int BITS, int S, bool FUSED = false, bool TILED = false>
__device__ __forceinline__ void gemv(const float* __restrict__ x, const u32* __restrict__ words, const u16* __restrict__ params,
                                     const float* __restrict__ bias, float* __restrict__ y, int T, int N, int K, int G, int cta,
                                     const FusedArgs* fa = nullptr) {
  static_assert(!FUSED || S > 1, "the fused epilogue is the split-K one");
  static_assert(!TILED || !FUSED, "the tiled layout is read without DEC");
  constexpr int U = kUnroll<BITS>;
  // fold: with groups of whole tiles (G a multiple of 128), a tile's codes
  // share one (scale, zero) per row, so the tensor cores multiply the exact
  // integer codes and the scales are applied once per tile to the sums.
  const bool fold = GEMVQ_FOLD && G % kTile == 0;
  __shared__ float part[S > 1 ? S : 1][NT][kRows][8];
  __shared__ __align__(16) u32 xs[GEMVQ_XSTAGE ? S : 1][GEMVQ_XSTAGE ? 8 * NT : 1][kXStride];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 4, c = lane % 4;
  const int n0 = cta * kRows;
  const int rowWords = K / 32 * BITS, groups = K / G;
  const int tiles = (K + kTile - 1) / kTile, per = (tiles + S - 1) / S;
  const int t0 = warp * per, t1 = min(tiles, t0 + per);
  // Rows r and r+8 of the CTA's 16 (rows past N read nothing and give 0).
  const bool ok0 = n0 + r < N, ok1 = n0 + r + 8 < N;
  const int steps = (rowWords + kTiledLine<BITS> - 1) / kTiledLine<BITS>;  // TILED
  const u32* row0 = words + (TILED ? tiledRow<BITS>(ok0 ? n0 + r : 0, steps) : size_t(ok0 ? n0 + r : 0) * rowWords);
  const u32* row1 = words + (TILED ? tiledRow<BITS>(ok1 ? n0 + r + 8 : 0, steps) : size_t(ok1 ? n0 + r + 8 : 0) * rowWords);
  const u32* prm = reinterpret_cast<const u32*>(params);
  const u32* p0 = prm + (TILED ? tiledParam(ok0 ? n0 + r : 0, 0, groups) : size_t(ok0 ? n0 + r : 0) * groups);
  const u32* p1 = prm + (TILED ? tiledParam(ok1 ? n0 + r + 8 : 0, 0, groups) : size_t(ok1 ? n0 + r + 8 : 0) * groups);
  constexpr int kPStride = TILED ? kRows : 1;  // pairs between a row's groups

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; nt++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[nt][i] = 0.f;

  // load fills b with the tiles tb..tb+U-1 (zeros past the warp's run or K).
  auto load = [&](Batch<BITS>& b, int tb) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int k = (tb + u) * kTile + c * kSpan;
      const bool in = tb + u < t1 && k < K;
#pragma unroll
      for (int i = 0; i < BITS; i++) b.a0[u].w[i] = b.a1[u].w[i] = 0;
      b.sz0[u] = b.sz1[u] = 0;
      if (GEMVQ_XSTAGE) {
        const int kx = (tb + u) * kTile + 4 * lane;
        b.x0[u] = tb + u < t1 && kx < K ? *reinterpret_cast<const float4*>(x + kx) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
      if constexpr (TILED) {
        if (in && ok0) loadSpan<BITS>(b.a0[u], row0 + tiledSpan<BITS>(k / 32 * BITS), 0), b.sz0[u] = __ldg(p0 + k / G * kPStride);
        if (in && ok1) loadSpan<BITS>(b.a1[u], row1 + tiledSpan<BITS>(k / 32 * BITS), 0), b.sz1[u] = __ldg(p1 + k / G * kPStride);
      } else {
        if (in && ok0) loadSpan<BITS>(b.a0[u], row0, k), b.sz0[u] = __ldg(p0 + k / G);
        if (in && ok1) loadSpan<BITS>(b.a1[u], row1, k), b.sz1[u] = __ldg(p1 + k / G);
      }
    }
  };
  // math runs the tiles of b through the tensor cores.
  auto math = [&](const Batch<BITS>& b, int tb) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int k = (tb + u) * kTile + c * kSpan;
      if (tb + u >= t1) break;  // warp-uniform
      if (GEMVQ_DIAG == 2) {
        u32 h = b.sz0[u] ^ b.sz1[u];
#pragma unroll
        for (int i = 0; i < BITS; i++) h ^= b.a0[u].w[i] ^ b.a1[u].w[i];
        acc[0][0] += __uint_as_float(h & 0x3fffffffu);
        continue;
      }
      if (GEMVQ_XSTAGE && GEMVQ_DIAG != 1) {
        // The tile's x as half2 in the warp's buffer: lane l converts
        // channels 4l..4l+3 of every token (token 0's came with the codes).
        const int kx = (tb + u) * kTile + 4 * lane;
        __syncwarp();
        for (int t = 0; t < T; t++) {
          const float4 v = t == 0 ? b.x0[u] : kx < K ? *reinterpret_cast<const float4*>(x + size_t(t) * K + kx) : make_float4(0.f, 0.f, 0.f, 0.f);
          *reinterpret_cast<uint2*>(&xs[warp][t][2 * lane]) = make_uint2(pack2(v.x, v.y), pack2(v.z, v.w));
        }
        __syncwarp();
      }
      u32 w0[16], w1[16];
      if (fold) {
        codesSpan<BITS>(w0, b.a0[u]);
        codesSpan<BITS>(w1, b.a1[u]);
      } else {
        dequantSpan<BITS>(w0, b.a0[u], b.sz0[u]);
        dequantSpan<BITS>(w1, b.a1[u], b.sz1[u]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        const int t = nt * 8 + r;
        u32 xb[16];
        if (GEMVQ_XSTAGE && GEMVQ_DIAG != 1) {
          if (t < T) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
              const uint4 v = *reinterpret_cast<const uint4*>(&xs[warp][t][16 * c + 4 * q]);
              xb[4 * q] = v.x, xb[4 * q + 1] = v.y, xb[4 * q + 2] = v.z, xb[4 * q + 3] = v.w;
            }
          } else {
#pragma unroll
            for (int i = 0; i < 16; i++) xb[i] = 0;
          }
        } else if (GEMVQ_DIAG == 1) {
#pragma unroll
          for (int i = 0; i < 16; i++) xb[i] = 0x3c003c00u;
        } else if (t < T && k < K) {
          loadX(xb, x + size_t(t) * K + k);
        } else {
#pragma unroll
          for (int i = 0; i < 16; i++) xb[i] = 0;
        }
        if (fold) {
          // This tile's Σ q·x and Σ x (A = ones: every row gets the sums),
          // then y += s·Σ q·x + z·Σ x with the rows' pairs of this group.
          float d[4] = {0.f, 0.f, 0.f, 0.f}, xs4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
          for (int j = 0; j < 8; j++) {
            mmaA4(d, w0[2 * j], w1[2 * j], w0[2 * j + 1], w1[2 * j + 1], xb[2 * j], xb[2 * j + 1]);
            mmaA4(xs4, kOnes, kOnes, kOnes, kOnes, xb[2 * j], xb[2 * j + 1]);
          }
          const float s0 = h2f(u16(b.sz0[u] & 0xffff)), z0 = h2f(u16(b.sz0[u] >> 16));
          const float s1 = h2f(u16(b.sz1[u] & 0xffff)), z1 = h2f(u16(b.sz1[u] >> 16));
          acc[nt][0] = fmaf(s0, d[0], fmaf(z0, xs4[0], acc[nt][0]));
          acc[nt][1] = fmaf(s0, d[1], fmaf(z0, xs4[1], acc[nt][1]));
          acc[nt][2] = fmaf(s1, d[2], fmaf(z1, xs4[2], acc[nt][2]));
          acc[nt][3] = fmaf(s1, d[3], fmaf(z1, xs4[3], acc[nt][3]));
        } else {
#pragma unroll
          for (int j = 0; j < 8; j++) mmaA4(acc[nt], w0[2 * j], w1[2 * j], w0[2 * j + 1], w1[2 * j + 1], xb[2 * j], xb[2 * j + 1]);
        }
      }
    }
  };
  // Fused mode (dec.cu's one-trip protocol): thread i owns element i of
  // the tile (row i / 8, token i % 8) and loads its part word early, at the
  // start of its warp's last batch, so the load's latency hides behind that
  // batch's math and the reduction; a word read as the DEC CTA's is final.
#ifdef GEMVQ_WITH_DEC
  bool mine = false;
  float pv = 0.f;
  size_t fp = 0;
  if constexpr (FUSED) {
    static_assert(NT == 1 && kRows == dec::kTile, "a base CTA owns one DEC tile of T <= 8 tokens");
    static_assert(kRows * 8 <= 32 * S, "a thread per element of the tile");
    const int n = n0 + threadIdx.x / 8 % kRows, t = threadIdx.x % 8;
    mine = threadIdx.x < kRows * 8 && n < N && t < T;
    fp = size_t(t) * N + n;
  }
  // peek issues the part word's load (fused mode).
  auto peek = [&]() {
    if constexpr (FUSED) {
      if (mine) pv = dec::part_load(*fa, fp);
    }
  };
#else
  auto peek = []() {};
#endif
#if GEMVQ_PIPE
  Batch<BITS> cur;
  load(cur, t0);
  for (int tb = t0; tb < t1; tb += U) {
    Batch<BITS> next;
    load(next, tb + U);
    if (tb + U >= t1) peek();  // the warp's last batch
    math(cur, tb);
    cur = next;
  }
  if (t0 >= t1) peek();  // a warp with no tiles
#else
  for (int tb = t0; tb < t1; tb += U) {
    Batch<BITS> cur;
    load(cur, tb);
    math(cur, tb);
  }
  peek();
#endif

  // acc[nt]: rows r, r+8 (output channels), columns 2c, 2c+1 (tokens).
  if (S > 1) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      part[warp][nt][r][2 * c] = acc[nt][0];
      part[warp][nt][r][2 * c + 1] = acc[nt][1];
      part[warp][nt][r + 8][2 * c] = acc[nt][2];
      part[warp][nt][r + 8][2 * c + 1] = acc[nt][3];
    }
    __syncthreads();
#ifdef GEMVQ_WITH_DEC
    if constexpr (FUSED) {
      __shared__ u32 fscratch;
      const int i = threadIdx.x;
      const int row = i / 8 % kRows, col = i % 8, n = n0 + row;
      float v = 0.f;
      if (mine) {
        v = part[0][0][row][col];
#pragma unroll
        for (int s = 1; s < S; s++) v += part[s][0][row][col];
        v += bias ? bias[n] : 0.f;
      }
      // Present: every element's word is the DEC CTA's. If not, read the
      // missing words once more (the DEC CTA may have stored them since
      // the early load) before the slower path of tile_close.
      bool present = __syncthreads_and(!mine || dec::part_ready(pv));
      if (!present) {  // the same for the whole CTA
        if (mine && !dec::part_ready(pv)) pv = dec::part_load(*fa, fp);
        present = __syncthreads_and(!mine || dec::part_ready(pv));
      }
      // y through the DEC arguments' pointer and a strong store, never
      // through the __restrict__ y: the DEC CTAs and tile_close read and
      // write this memory through fa->y, so the compiler may not assume y
      // unaliased here and sink the store past tile_close's fence and CAS.
      if (mine) dec::st_gpu(fa->y + fp, dec::tile_value(present, pv, v));
      dec::tile_close(*fa, cta, present, &fscratch);
      return;
    }
#endif
    for (int i = threadIdx.x; i < NT * kRows * 8; i += 32 * S) {
      const int nt = i / (kRows * 8), row = i / 8 % kRows, col = i % 8;
      const int n = n0 + row, t = nt * 8 + col;
      if (n >= N || t >= T) continue;
      float v = part[0][nt][row][col];
#pragma unroll
      for (int s = 1; s < S; s++) v += part[s][nt][row][col];
      v += bias ? bias[n] : 0.f;
      y[size_t(t) * N + n] = v;
    }
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int n = n0 + r + (i >= 2 ? 8 : 0), t = nt * 8 + 2 * c + (i & 1);
        if (n < N && t < T) y[size_t(t) * N + n] = acc[nt][i] + (bias ? bias[n] : 0.f);
      }
  }
}

// gemv_q: grid (ceil(N/16)), block 32·S. NT n-tiles of 8 tokens (T <= 8·NT).
// TILED: words and params in the tiled layout (int4, int3, int8; the same bits).
template <int NT, int BITS, int S, bool TILED = false>
__global__ void __launch_bounds__(32 * S, minBlocks(S)) gemv_q(const float* __restrict__ x, const u32* __restrict__ words, const u16* __restrict__ params,
                                                               const float* __restrict__ bias, float* __restrict__ y, int T, int N, int K, int G) {
  gemv<NT, BITS, S, false, TILED>(x, words, params, bias, y, T, N, K, G, blockIdx.x);
}

#ifdef GEMVQ_WITH_DEC
// gemv_q_dec: DEC's fused mode (dec.cu, "fused mode"): grid (d.blocks +
// ceil(N/16)), block 32·S (S = 4 or 8: dec.cu's CTAs need >= 128 threads),
// T <= 8. The first d.blocks CTAs are DEC's: resident first, they select
// the channels themselves (d.sel null) or read d.sel, sum their slice of
// the compensation from the residual (host or device memory) into d.part
// while the base CTAs run, and claim each tile before storing its last
// token's sums (dec.cu's one-trip protocol). Every base CTA computes
// its 16 outputs like gemv_q and writes y with or without the compensation,
// whichever side comes second adding it (dec.cu's protocol; a base CTA waits
// only for the stores of a DEC CTA that has claimed its tile).
// PMAX bounds the DEC CTAs' outputs per thread (registers); residuals are
// int4. The result equals gemv_q followed by dec.cu's serial compensation,
// bit for bit. Compiled only with dec.cu's source in front
// (kernels.LoadGEMVQDEC). The launch bounds keep gemv_q's occupancy (16
// warps per SM; measured 2026-11-25: without them the DEC path took 166
// registers at S = 4 against gemv_q's 116, 3 CTAs per SM instead of 4, and
// 14336x4096 at k_chunk 8 cost +30% instead of +15%).
template <int BITS, int S, int PMAX>
__global__ void __launch_bounds__(32 * S, 16 / S) gemv_q_dec(const float* __restrict__ x, const u32* __restrict__ words, const u16* __restrict__ params,
                                                    const float* __restrict__ bias, float* __restrict__ y, int T, int N, int K, int G, const __grid_constant__ dec::Args d) {
  static_assert(32 * S >= dec::kMinThreads, "dec.cu's CTAs need a thread per row of a batch");
  __shared__ __align__(16) unsigned char smem[dec::fused_smem_bytes(32 * S)];
  if (int(blockIdx.x) < d.blocks) {
    dec::fused_cta_any<32 * S, PMAX, false>(d, blockIdx.x, smem);  // int4 residuals
    return;
  }
  gemv<1, BITS, S, true>(x, words, params, bias, y, T, N, K, G, int(blockIdx.x) - d.blocks, &d);
}
#endif

// kDequantThreads is dequant_q's CTA: one thread per 32-channel span, so a
// CTA's spans (consecutive in [N][K]) write one contiguous 16 KB of Ŵ.
constexpr int kDequantThreads = 256;
// kDequantStage is a thread's staged span in dequant_q's shared memory, in
// 16-byte units: its 64 bytes of halves plus 16 of padding, so that a
// quarter warp's 16-byte writes (80 bytes apart) fall in distinct banks.
constexpr int kDequantStage = 5;

// dequant_q writes Ŵ in fp16 ([N][K], wq's float32 ŵ rounded to nearest) for
// prefill: one thread per 32-channel span. TILED: words and params in the
// tiled layout (int4, int3, int8; the same bits, the same writes). Session 15e:
// each thread stages its 32 halves in shared memory and the CTA writes its
// contiguous 16 KB of Ŵ as coalesced 16-byte stores; SCALAR keeps the
// earlier form (each thread's 32 two-byte stores straight to memory, a
// warp's store instruction 32 partial sectors 64 bytes apart: ~7x the
// store transactions), a knob for A/Bs (GEMVQ.DequantScalar). Both give
// the same bits.
template <int BITS, bool TILED = false, bool SCALAR = false>
__global__ void __launch_bounds__(kDequantThreads) dequant_q(const u32* __restrict__ words, const u16* __restrict__ params,
                                                             u16* __restrict__ out, int N, int K, int G) {
  __shared__ uint4 stage[SCALAR ? 1 : kDequantThreads * kDequantStage];
  const long long i0 = (long long)blockIdx.x * kDequantThreads, i = i0 + threadIdx.x;
  const int spans = K / kSpan;
  const long long total = (long long)N * spans;
  if (i < total) {
    const int n = int(i / spans), k = int(i % spans) * kSpan;
    Span<BITS> s;
    const int rowWords = K / 32 * BITS;
    const u32* p = words + (TILED ? tiledRow<BITS>(n, (rowWords + kTiledLine<BITS> - 1) / kTiledLine<BITS>) + tiledSpan<BITS>(k / 32 * BITS)
                                  : size_t(n) * rowWords + k / 32 * BITS);
    if constexpr (SCALAR) {
#pragma unroll
      for (int j = 0; j < BITS; j++) s.w[j] = p[j];
    } else {
      loadSpan<BITS>(s, p, 0);  // the same words (16-byte loads for int4, int8)
    }
    const u32 sz = reinterpret_cast<const u32*>(params)[TILED ? tiledParam(n, k / G, K / G) : size_t(n) * (K / G) + k / G];
    const float sc = h2f(u16(sz & 0xffff)), z = h2f(u16(sz >> 16));
    // The codes through the same unpacking as the GEMV, with s = 1, z = 0
    // (exact integers in fp16), then wq's float32 ŵ.
    u32 q[16];
    dequantSpan<BITS>(q, s, 0x00003c00u);  // (s, z) = (1, 0)
    if constexpr (SCALAR) {
      u16* o = out + size_t(n) * K + k;
#pragma unroll
      for (int m = 0; m < 16; m++) {
        o[2 * m] = f2h(fmaf(sc, h2f(u16(q[m] & 0xffff)), z));
        o[2 * m + 1] = f2h(fmaf(sc, h2f(u16(q[m] >> 16)), z));
      }
    } else {
      u32 h[16];
#pragma unroll
      for (int m = 0; m < 16; m++)
        h[m] = u32(f2h(fmaf(sc, h2f(u16(q[m] & 0xffff)), z))) | u32(f2h(fmaf(sc, h2f(u16(q[m] >> 16)), z))) << 16;
#pragma unroll
      for (int j = 0; j < 4; j++) stage[threadIdx.x * kDequantStage + j] = make_uint4(h[4 * j], h[4 * j + 1], h[4 * j + 2], h[4 * j + 3]);
    }
  }
  if constexpr (!SCALAR) {
    __syncthreads();
    // The CTA's spans are Ŵ's halves i0·32 on, 4 16-byte units each.
    const int units = (total - i0 < kDequantThreads ? int(total - i0) : kDequantThreads) * 4;
    uint4* o = reinterpret_cast<uint4*>(out + i0 * kSpan);
    for (int c = threadIdx.x; c < units; c += kDequantThreads) o[c] = stage[c / 4 * kDequantStage + c % 4];
  }
}

}  // namespace gemvq

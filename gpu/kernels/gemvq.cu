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
// Numbers: each ŵ is formed in half2 arithmetic, q exact (1024+q − 1024),
// then one fma.rn.f16x2 of q with (s, s) and (z, z): ŵ rounded once to fp16,
// within one fp16 ulp of wq's float32 ŵ (wq/doc.go). x is rounded to fp16 as
// the tensor-core operand; products and sums are float32 (mma.sync with f32
// accumulation). These are the operands the prefill path (dequant_q +
// cuBLASLt over fp16 x) multiplies too.
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
// Versions (H100, T = 1, int4 G128; docs/perf/decode-step.md):
//   v1 CUDA cores, a warp per output channel, lane l on channels 32l..:
//      gate/up 14336x4096 66.5 us (469 GB/s, 15% of the read ceiling): x
//      reads 128 bytes apart across lanes (32 L1 wavefronts per load) and
//      ~4 float ops per weight.
//   v2 tensor cores, this file.
//
// Go wrapper: gemvq.go; test: gemvq_test.go (float64 reference of wq's Ŵ).

typedef unsigned short u16;
typedef unsigned int u32;

namespace gemvq {

constexpr int kRows = 16;      // output channels per CTA (the mma's M)
constexpr int kTile = 128;     // input channels per tile (4 lanes x 32)
constexpr int kSpan = 32;      // input channels per lane per tile
// kUnroll: tiles whose codes are loaded before their math (128 bytes per lane
// in flight for int4 and int8, 96 for int3).
template <int BITS>
constexpr int kUnroll = BITS == 8 ? 2 : 4;
constexpr u32 kMagic = 0x64006400u;  // half2 (1024, 1024)

__device__ __forceinline__ float h2f(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ u16 f2h(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
// pack2 rounds (lo, hi) to the half2 with lo in the low 16 bits.
__device__ __forceinline__ u32 pack2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ u32 lop3OrMask(u32 a, u32 mask) {  // (a & mask) | kMagic
  u32 r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(mask), "r"(kMagic));
  return r;
}
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
// deq turns the half2 (1024+q, 1024+q′) into (s·q + z, s·q′ + z): the
// subtraction is exact, the fma rounds once.
__device__ __forceinline__ u32 deq(u32 magicq, u32 s2, u32 z2) {
  u32 q, w;
  asm("sub.f16x2 %0, %1, %2;" : "=r"(q) : "r"(magicq), "r"(kMagic));
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(w) : "r"(q), "r"(s2), "r"(z2));
  return w;
}

__device__ __forceinline__ void mma16816(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
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
      uint4 v;
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p + i));
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

// loadX converts x[t][k..k+31] to 16 half2 (pair m: channels k+2m, k+2m+1).
__device__ __forceinline__ void loadX(u32 (&xb)[16], const float* x) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const float4 v = *reinterpret_cast<const float4*>(x + 4 * i);
    xb[2 * i] = pack2(v.x, v.y);
    xb[2 * i + 1] = pack2(v.z, v.w);
  }
}

// gemv_q: grid (ceil(N/16)), block 32·S. NT n-tiles of 8 tokens (T <= 8·NT).
template <int NT, int BITS, int S>
__global__ void __launch_bounds__(32 * S) gemv_q(const float* __restrict__ x, const u32* __restrict__ words, const u16* __restrict__ params,
                                                 const float* __restrict__ bias, float* __restrict__ y, int T, int N, int K, int G) {
  __shared__ float part[S > 1 ? S : 1][NT][kRows][8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 4, c = lane % 4;
  const int n0 = blockIdx.x * kRows;
  const int rowWords = K / 32 * BITS, groups = K / G;
  const int tiles = (K + kTile - 1) / kTile, per = (tiles + S - 1) / S;
  const int t0 = warp * per, t1 = min(tiles, t0 + per);
  // Rows r and r+8 of the CTA's 16 (rows past N read nothing and give 0).
  const bool ok0 = n0 + r < N, ok1 = n0 + r + 8 < N;
  const u32* row0 = words + size_t(ok0 ? n0 + r : 0) * rowWords;
  const u32* row1 = words + size_t(ok1 ? n0 + r + 8 : 0) * rowWords;
  const u32* prm = reinterpret_cast<const u32*>(params);
  const u32* p0 = prm + size_t(ok0 ? n0 + r : 0) * groups;
  const u32* p1 = prm + size_t(ok1 ? n0 + r + 8 : 0) * groups;

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; nt++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[nt][i] = 0.f;

  for (int tb = t0; tb < t1; tb += kUnroll<BITS>) {
    Span<BITS> a0[kUnroll<BITS>], a1[kUnroll<BITS>];
    u32 sz0[kUnroll<BITS>], sz1[kUnroll<BITS>];
    // Loads first: kUnroll tiles of codes and their (scale, zero) pairs.
#pragma unroll
    for (int u = 0; u < kUnroll<BITS>; u++) {
      const int k = (tb + u) * kTile + c * kSpan;
      const bool in = tb + u < t1 && k < K;
#pragma unroll
      for (int i = 0; i < BITS; i++) a0[u].w[i] = a1[u].w[i] = 0;
      sz0[u] = sz1[u] = 0;
      if (in && ok0) loadSpan<BITS>(a0[u], row0, k), sz0[u] = __ldg(p0 + k / G);
      if (in && ok1) loadSpan<BITS>(a1[u], row1, k), sz1[u] = __ldg(p1 + k / G);
    }
#pragma unroll
    for (int u = 0; u < kUnroll<BITS>; u++) {
      const int k = (tb + u) * kTile + c * kSpan;
      if (tb + u >= t1) break;  // warp-uniform
      u32 w0[16], w1[16];
      dequantSpan<BITS>(w0, a0[u], sz0[u]);
      dequantSpan<BITS>(w1, a1[u], sz1[u]);
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        const int t = nt * 8 + r;
        u32 xb[16];
        if (t < T && k < K) {
          loadX(xb, x + size_t(t) * K + k);
        } else {
#pragma unroll
          for (int i = 0; i < 16; i++) xb[i] = 0;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) mma16816(acc[nt], w0[2 * j], w1[2 * j], w0[2 * j + 1], w1[2 * j + 1], xb[2 * j], xb[2 * j + 1]);
      }
    }
  }

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
    for (int i = threadIdx.x; i < NT * kRows * 8; i += 32 * S) {
      const int nt = i / (kRows * 8), row = i / 8 % kRows, col = i % 8;
      const int n = n0 + row, t = nt * 8 + col;
      if (n >= N || t >= T) continue;
      float v = part[0][nt][row][col];
#pragma unroll
      for (int s = 1; s < S; s++) v += part[s][nt][row][col];
      y[size_t(t) * N + n] = v + (bias ? bias[n] : 0.f);
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

// dequant_q writes Ŵ in fp16 ([N][K], wq's float32 ŵ rounded to nearest) for
// prefill: one thread per 32-channel span.
template <int BITS>
__global__ void __launch_bounds__(256) dequant_q(const u32* __restrict__ words, const u16* __restrict__ params, u16* __restrict__ out,
                                                  int N, int K, int G) {
  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  const int spans = K / kSpan;
  if (i >= (long long)N * spans) return;
  const int n = int(i / spans), k = int(i % spans) * kSpan;
  Span<BITS> s;
  const u32* p = words + size_t(n) * (K / 32 * BITS) + k / 32 * BITS;
#pragma unroll
  for (int j = 0; j < BITS; j++) s.w[j] = p[j];
  const u32 sz = reinterpret_cast<const u32*>(params)[size_t(n) * (K / G) + k / G];
  const float sc = h2f(u16(sz & 0xffff)), z = h2f(u16(sz >> 16));
  // The codes through the same unpacking as the GEMV, with s = 1, z = 0
  // (exact integers in fp16), then wq's float32 ŵ.
  u32 q[16];
  dequantSpan<BITS>(q, s, 0x00003c00u);  // (s, z) = (1, 0)
  u16* o = out + size_t(n) * K + k;
#pragma unroll
  for (int m = 0; m < 16; m++) {
    o[2 * m] = f2h(fmaf(sc, h2f(u16(q[m] & 0xffff)), z));
    o[2 * m + 1] = f2h(fmaf(sc, h2f(u16(q[m] >> 16)), z));
  }
}

}  // namespace gemvq

// gemvq.cu: the decode-sized linear layer over packed low-bit weights
// (package wq's layout, wq/doc.go), y = x·Ŵᵀ + bias for T <= 8 rows of x,
// reading each packed weight once; and the dequantization of a whole packed
// matrix to fp16 for prefill (cuBLASLt then multiplies).
//
//   words  [N][RowWords(K)] u32: row n's codes. int4: one word per 8
//          channels k0..k0+7, nibble p of bits 0-15 is k0+2p, nibble p of
//          bits 16-31 is k0+2p+1. int8: one word per 4 channels, bytes
//          0, 1, 2, 3 hold k0, k0+2, k0+1, k0+3.
//   params [N][K/G][2] fp16: (scale s, zero z) of row n, group g.
//   ŵ = float32(s)·q + float32(z), with s·q exact in float32 (one fmaf):
//   exactly wq's reference value.
//   x [T][K] float32, bias [N] float32 or null, y [T][N] float32.
//
// Work: as gemv.cu: S warps per output channel (split-K slices of whole
// 16-byte chunks), lane l reads chunks l, l+32, ... of its slice with one
// 16-byte load each (32 int4 or 16 int8 channels, always inside one group
// since G is a multiple of 32), converts codes to float exactly (the
// 2^23 magic), multiplies by x in float32; slices are added in order
// through shared memory: deterministic.
//
// Go wrapper: gemvq.go; test: gemvq_test.go (float64 reference of wq's Ŵ).

typedef unsigned short u16;
typedef unsigned int u32;

namespace gemvq {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

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
// code returns (w >> shift) & mask as float, exactly: one shift, one lop3
// that masks and ORs in 2^23's exponent, one subtraction of 2^23.
__device__ __forceinline__ float code(u32 w, int shift, u32 mask) {
  u32 r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(w >> shift), "r"(mask), "r"(0x4B000000u));  // (a & b) | c
  return __uint_as_float(r) - 8388608.f;
}

__device__ __forceinline__ uint4 ldgStream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// chunkValues unpacks one 16-byte chunk into its channels' codes in channel
// order: 32 for int4, 16 for int8.
template <int BITS>
__device__ __forceinline__ void chunkCodes(const uint4& c, float (&q)[128 / BITS]) {
  const u32 w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if (BITS == 4) {
#pragma unroll
      for (int p = 0; p < 4; p++) {
        q[8 * i + 2 * p] = code(w[i], 4 * p, 0xfu);
        q[8 * i + 2 * p + 1] = code(w[i], 16 + 4 * p, 0xfu);
      }
    } else {
      q[4 * i] = code(w[i], 0, 0xffu);
      q[4 * i + 2] = code(w[i], 8, 0xffu);
      q[4 * i + 1] = code(w[i], 16, 0xffu);
      q[4 * i + 3] = code(w[i], 24, 0xffu);
    }
  }
}

template <int T, int BITS, int S>
__global__ void __launch_bounds__(kThreads) gemv_q(const float* __restrict__ x, const u32* __restrict__ words, const u16* __restrict__ params,
                                                   const float* __restrict__ bias, float* __restrict__ y, int N, int K, int G) {
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  constexpr int kPer = 128 / BITS;  // channels per 16-byte chunk
  __shared__ float part[kWarps][T];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = blockIdx.x * (kWarps / S) + warp / S, slice = warp % S;
  const int chunks = K / kPer, sliceLen = (chunks + S - 1) / S;
  const int c0 = slice * sliceLen, c1 = min(chunks, c0 + sliceLen);
  float acc[T];
#pragma unroll
  for (int t = 0; t < T; t++) acc[t] = 0.f;
  if (n < N) {
    const uint4* row = reinterpret_cast<const uint4*>(words + size_t(n) * (K * BITS / 32));
    const u32* prow = reinterpret_cast<const u32*>(params) + size_t(n) * (K / G);
    for (int c = c0 + lane; c < c1; c += 32) {
      const uint4 raw = ldgStream(row + c);
      const int k = c * kPer;
      const u32 sz = prow[k / G];
      const float s = h2f(u16(sz & 0xffff)), z = h2f(u16(sz >> 16));
      float q[kPer];
      chunkCodes<BITS>(raw, q);
      // x four channels at a time (float4: one load, L1 hits), in channel
      // order per row: the same sums as one channel at a time.
#pragma unroll
      for (int j = 0; j < kPer; j += 4) {
        const float w0 = fmaf(s, q[j], z), w1 = fmaf(s, q[j + 1], z), w2 = fmaf(s, q[j + 2], z), w3 = fmaf(s, q[j + 3], z);
#pragma unroll
        for (int t = 0; t < T; t++) {
          const float4 xv = *reinterpret_cast<const float4*>(x + size_t(t) * K + k + j);
          acc[t] = fmaf(w0, xv.x, acc[t]);
          acc[t] = fmaf(w1, xv.y, acc[t]);
          acc[t] = fmaf(w2, xv.z, acc[t]);
          acc[t] = fmaf(w3, xv.w, acc[t]);
        }
      }
    }
  }
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
  if (lane == 0 && slice == 0 && n < N) {
    const float b = bias ? bias[n] : 0.f;
#pragma unroll
    for (int t = 0; t < T; t++) y[size_t(t) * N + n] = acc[t] + b;
  }
}

// dequant_q writes Ŵ in fp16 ([N][K], rounded to nearest) for prefill: one
// thread per 16-byte chunk.
template <int BITS>
__global__ void __launch_bounds__(256) dequant_q(const u32* __restrict__ words, const u16* __restrict__ params, u16* __restrict__ out,
                                                  int N, int K, int G) {
  constexpr int kPer = 128 / BITS;
  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  const int chunks = K / kPer;
  if (i >= (long long)N * chunks) return;
  const int n = int(i / chunks), c = int(i % chunks), k = c * kPer;
  const uint4 raw = reinterpret_cast<const uint4*>(words + size_t(n) * (K * BITS / 32))[c];
  const u32 sz = reinterpret_cast<const u32*>(params)[size_t(n) * (K / G) + k / G];
  const float s = h2f(u16(sz & 0xffff)), z = h2f(u16(sz >> 16));
  float q[kPer];
  chunkCodes<BITS>(raw, q);
#pragma unroll
  for (int j = 0; j < kPer; j++) out[size_t(n) * K + k + j] = f2h(fmaf(s, q[j], z));
}

}  // namespace gemvq

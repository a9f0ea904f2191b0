// pack.cu: quantize and pack a full residual block into a packed KV block
// (BitDecoding's "residual kernel"), bit for bit as kv.TensorLayout.Pack in
// kv.MMA order does on the CPU.
//
// Input:  one half (K or V) of the fp16 residual block of one KV head,
//         [Nr][D] in kv.MMA order for 16-bit codes (the order decode_mma.cu
//         reads the residual in), at src + head*Nr*D*2.
// Output: the half of the packed block, in kv.MMA order with its fp16
//         (scale, zero) pairs at paramsOff, at dst + head*blockBytes.
// Rounding (kv/doc.go): lo/hi exact; scale32 = (hi-lo)/L rounded to nearest
// (__fdiv_rn); s = fp16(scale32), z = lo; q = clamp(rint((x-z)/s), 0, L).
//
// Work: CTAs of 256 threads per (KV head, K or V, slice), the half staged
// in shared memory with coalesced 16-byte copies. Phase 1 (integer codes):
// each thread folds staged 16-byte chunks into the 2-4 quantization groups
// their 8 elements belong to; lanes holding the same groups reduce by
// shuffles and one lane per group updates the group's min and max with
// shared-memory integer atomics on order-preserving keys (exact in any
// order, so deterministic); then one thread per group writes (s, z) (slice
// 0) and keeps them in shared memory. Phase 2: one thread per 32-bit output
// word converts the word's elements, which sit as one contiguous run in the
// staged lane data (the two fragment orders agree element for element):
// no two threads write the same byte, so no atomics. A launch of few heads
// is cut into slices of words (every slice stages the half and finds the
// groups again) so that it fills the GPU.
//   v3  1024 threads, one thread per group, every code's fragment position
//       computed twice: 20.7 us for 8 int4 heads of 128 tokens (16 SMs),
//       300 us for 1024 heads.
//   v4  256 threads, slices, up to 8 threads per group: 12.4 us and
//       213.5 us; ncu at 1024 heads: 78% of issue slots busy, ALU 74%,
//       about 165 instructions per element (index arithmetic).
//   v5  the chunk- and word-oriented phases above, group indices by
//       shifts: 11.0 us and 127.7 us (95.8 M instructions at 1024 heads,
//       still 74% of issue slots: one IEEE division per code remains).
//
// Programmatic dependent launch (docs/perf/decode-attention.md, session 17):
// pack.cu is a GridDependent program (header.go); both kernels wait for the
// kernel ahead (the append that filled the residual) before touching memory
// and then let the attention kernel after them be scheduled.
//
// Go wrapper and test: pack.go, pack_test.go (bitwise equal to the Go packer).

#include "bitdecode.cuh"

namespace pack {

constexpr int kThreads = 256;  // v4 (v3: 1024)

// Fragment order: bitdecode.cuh's kv.MMA layout (Frag's geometry, fragElem
// for the token and channel of a lane's element kk), as decode_mma.cu reads it.
template <int D, int BITS>
using Geo = Frag<D, BITS>;

// groupOf is the quantization group of (t, c): G = 2^gs tokens per channel
// (PERCHAN, keys "kc") or G channels per token. (Shifts: v5's first build
// divided by the runtime G, two integer divisions per element.)
template <int D, bool PERCHAN>
BD_DEVICE int groupOf(int t, int c, int gs) { return PERCHAN ? (t >> gs) * D + c : t * (D >> gs) + (c >> gs); }

// key orders floats as signed integers (-0 below +0, as Go's min and max),
// so group minima and maxima are integer min/max, exact in any order.
BD_DEVICE int key(float f) {
  const int b = __float_as_int(f);
  return b ^ ((b >> 31) & 0x7fffffff);
}
BD_DEVICE float unkey(int k) { return __int_as_float(k ^ ((k >> 31) & 0x7fffffff)); }

// halfAt returns fp16 element e (0..7) of a 16-byte chunk as a float.
BD_DEVICE float halfAt(const uint4& v, int e) {
  const u32 w = e / 2 == 0 ? v.x : e / 2 == 1 ? v.y : e / 2 == 2 ? v.z : v.w;
  return h2f(u16(e % 2 ? w >> 16 : w & 0xffff));
}

// packHalf packs slice `slice` of `slices` (words [words·slice/slices,
// words·(slice+1)/slices)) of one half (K or V) of one KV head's block from
// the residual staged in shared memory (stage: [Nr][D] fp16 in the fragment
// order of ROLE); sS and sZ receive the half's group parameters, which
// slice 0 also writes to the block.
//   BITS     8, 4, 2 (integer codes) or 16 (fp16, or bf16 with BF)
//   PERCHAN  groups of G tokens per channel (keys "kc"); else G channels per token
// G is a power of two of at least 16 (kv.ValidGroups), so the 8 elements of
// a staged 16-byte chunk fall in 2 groups (keys per token) or 4 (otherwise).
template <int D, int BITS, bool PERCHAN, int ROLE, bool BF>
BD_DEVICE void packHalf(const u8* stage, u8* out, float* sS, float* sZ, int Nr, int paramsOff, int G, int slice, int slices) {
  using In = Geo<D, 16>;
  using Out = Geo<D, BITS>;
  constexpr int L = (1 << (BITS < 16 ? BITS : 1)) - 1;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int gs = __ffs(G) - 1;  // G is a power of two (PlanPack checks)
  if constexpr (BITS < 16) {
    const int groups = PERCHAN ? (Nr >> gs) * D : Nr * (D >> gs);
    int* kLo = reinterpret_cast<int*>(sS);  // phase 1 keeps the keys where (s, z) go
    int* kHi = reinterpret_cast<int*>(sZ);
    for (int gi = threadIdx.x; gi < groups; gi += kThreads) {
      kLo[gi] = 0x7fffffff;
      kHi[gi] = int(0x80000000u);
    }
    __syncthreads();
    // Phase 1: lane L of a warp takes staged chunk base + L (a 16-byte run
    // of lane L's elements 8j..8j+7 in 16-token group grp: the warp's 32
    // chunks share grp and j), folds its elements into its 2 or 4 groups,
    // the lanes holding the same groups reduce by shuffles (the 8 g's, or
    // the 4 q's for keys per token), and one lane per group updates the
    // group with shared-memory integer atomics.
    constexpr bool kTwo = ROLE == 0 && !PERCHAN;  // keys per token: groups by hiRow
    constexpr int kSlots = kTwo ? 2 : 4;
    const int chunks = Nr * D / 8;  // a multiple of 32
    for (int base = threadIdx.x - lane; base < chunks; base += kThreads) {
      const int ci = base + lane;
      const int grp = ci / (32 * (D / 16)), j = (ci / 32) % (D / 16);
      const uint4 v = *reinterpret_cast<const uint4*>(stage + size_t(ci) * 16);
      int lo[kSlots], hi[kSlots], gis[kSlots];
#pragma unroll
      for (int m = 0; m < kSlots; m++) lo[m] = 0x7fffffff, hi[m] = int(0x80000000u);
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const int m = kTwo ? (e / 2) % 2 : e % 2 + 2 * (e / 4);
        int t, c;
        fragElem<ROLE>(grp, g, q, 8 * j + e, t, c);
        gis[m] = groupOf<D, PERCHAN>(t, c, gs);
        const int k = key(halfAt(v, e));
        lo[m] = min(lo[m], k);
        hi[m] = max(hi[m], k);
      }
#pragma unroll
      for (int m = 0; m < kSlots; m++) {
        if (kTwo) {
#pragma unroll
          for (int off = 1; off < 4; off *= 2) {
            lo[m] = min(lo[m], __shfl_xor_sync(0xffffffffu, lo[m], off));
            hi[m] = max(hi[m], __shfl_xor_sync(0xffffffffu, hi[m], off));
          }
        } else {
#pragma unroll
          for (int off = 4; off < 32; off *= 2) {
            lo[m] = min(lo[m], __shfl_xor_sync(0xffffffffu, lo[m], off));
            hi[m] = max(hi[m], __shfl_xor_sync(0xffffffffu, hi[m], off));
          }
        }
        if ((kTwo ? q : g) == 0) {
          atomicMin(&kLo[gis[m]], lo[m]);
          atomicMax(&kHi[gis[m]], hi[m]);
        }
      }
    }
    __syncthreads();
    for (int gi = threadIdx.x; gi < groups; gi += kThreads) {
      const float lo = unkey(kLo[gi]), hi = unkey(kHi[gi]);
      const float scale32 = __fdiv_rn(__fsub_rn(hi, lo), float(L));
      const u16 s = f2h(scale32), z = f2h(lo);
      if (slice == 0) *reinterpret_cast<u32*>(out + paramsOff + 4 * gi) = u32(s) | (u32(z) << 16);
      sS[gi] = h2f(s);
      sZ[gi] = h2f(z);
    }
    __syncthreads();
  }
  // Phase 2: one thread per output word. Its codes are the lane's fragment
  // elements w·kPerWord.., which sit in the staged lane data as 2·kPerWord
  // contiguous bytes (int4: exactly one chunk).
  constexpr int kInBytes = 2 * Out::kPerWord;
  constexpr int kPiece = kInBytes < 16 ? kInBytes : 16;
  const int words = Nr * D * BITS / 32;
  const int w1 = words * (slice + 1) / slices;
  for (int wi = words * slice / slices + threadIdx.x; wi < w1; wi += kThreads) {
    const int off = wi * 4, grp = off / Out::kGroupBytes, r = off % Out::kGroupBytes;
    const int ln = (r / Out::kChunk) % 32, w = ((r / (32 * Out::kChunk)) * Out::kChunk + r % Out::kChunk) / 4;
    const int lg = ln / 4, lq = ln % 4;
    u32 in[kInBytes / 4];
#pragma unroll
    for (int piece = 0; piece < kInBytes / kPiece; piece++) {
      const int b = w * kInBytes + piece * kPiece;  // lane byte of the staged data
      const u8* src = stage + grp * In::kGroupBytes + ((b / 16) * 32 + ln) * 16 + b % 16;
      if constexpr (kPiece == 16) {
        const uint4 v = *reinterpret_cast<const uint4*>(src);
        in[4 * piece] = v.x, in[4 * piece + 1] = v.y, in[4 * piece + 2] = v.z, in[4 * piece + 3] = v.w;
      } else if constexpr (kPiece == 8) {
        const uint2 v = *reinterpret_cast<const uint2*>(src);
        in[0] = v.x, in[1] = v.y;
      } else {
        in[0] = *reinterpret_cast<const u32*>(src);
      }
    }
    u32 word = 0;
#pragma unroll
    for (int p = 0; p < Out::kPerWord; p++) {
      const float x = h2f(u16(p % 2 ? in[p / 2] >> 16 : in[p / 2] & 0xffff));
      u32 code;
      if constexpr (BITS == 16) {
        code = BF ? f2bf(x) : f2h(x);
      } else {
        int t, c;
        fragElem<ROLE>(grp, lg, lq, w * Out::kPerWord + p, t, c);
        const int gi = groupOf<D, PERCHAN>(t, c, gs);
        const float sc = sS[gi];
        float qv = 0.f;
        if (sc != 0.f) qv = fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(x, sZ[gi]), sc)), 0.f), float(L));
        code = u32(qv);
      }
      word |= code << ((p % 2) * 16 + (p / 2) * BITS);
    }
    *reinterpret_cast<u32*>(out + wi * 4) = word;
  }
}

// packOne stages one half (K: role 0, V: role 1) of a residual block in
// dynamic shared memory with coalesced 16-byte loads, so the scattered group
// reads of both phases hit shared memory (v1 read global memory directly:
// 66 us for 8 int4 heads), then packs its slice (blockIdx.z of gridDim.z)
// into the block at out. The groups' (s, z) follow the stage.
template <int D, int KBITS, int VBITS, bool KC, bool BF>
BD_DEVICE void packOne(const u8* __restrict__ in, u8* __restrict__ out, int role, u8* stage, int maxGroups,
                       int Nr, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV) {
  const size_t halfBytes = size_t(Nr) * D * 2;
  float* sS = reinterpret_cast<float*>(stage + halfBytes);
  float* sZ = sS + maxGroups;
  const uint4* src = reinterpret_cast<const uint4*>(in);
  uint4* st = reinterpret_cast<uint4*>(stage);
  for (int i = threadIdx.x; i < int(halfBytes / 16); i += kThreads) st[i] = src[i];
  __syncthreads();
  if (role == 0) packHalf<D, KBITS, KC, 0, BF>(stage, out, sS, sZ, Nr, kParamsOff, gK, blockIdx.z, gridDim.z);
  else packHalf<D, VBITS, false, 1, BF>(stage, out + kBytes, sS, sZ, Nr, vParamsOff, gV, blockIdx.z, gridDim.z);
}

// pack_block packs one KV head's block per (x, y) CTA column: blockIdx.x
// is the head (sequence-major), blockIdx.y 0 packs K and 1 packs V,
// blockIdx.z is the slice; residual h is at res + h*Nr*D*2 and its block
// goes to dst + h*blockBytes. maxGroups sizes the (s, z) arrays after the
// stage in dynamic shared memory.
template <int D, int KBITS, int VBITS, bool KC, bool BF>
__global__ void __launch_bounds__(kThreads) pack_block(const u8* __restrict__ resK, const u8* __restrict__ resV, u8* __restrict__ dst,
                                                        int Nr, int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV,
                                                        int maxGroups) {
  gridDependencyWait();  // the residual: the append ahead's output
  gridLaunchDependents();
  extern __shared__ __align__(16) u8 stage[];
  const int h = blockIdx.x, role = blockIdx.y;
  const size_t halfBytes = size_t(Nr) * D * 2;
  packOne<D, KBITS, VBITS, KC, BF>((role == 0 ? resK : resV) + h * halfBytes, dst + size_t(h) * blockBytes, role, stage, maxGroups,
                                   Nr, kBytes, kParamsOff, vParamsOff, gK, gV);
}

// pack_paged packs the full residual blocks of a paged cache: blockIdx.x =
// i*Hkv + h packs KV head h of item i, from residual slot srcSlots[i]
// (res + (slot*Hkv + h)*Nr*D*2) into pool block dstBlocks[i]
// (pool + (block*Hkv + h)*blockBytes); blockIdx.y and z as in pack_block.
template <int D, int KBITS, int VBITS, bool KC, bool BF>
__global__ void __launch_bounds__(kThreads) pack_paged(const u8* __restrict__ resK, const u8* __restrict__ resV,
                                                        const int* __restrict__ srcSlots, const int* __restrict__ dstBlocks,
                                                        u8* __restrict__ pool, int Hkv, int Nr, int blockBytes, int kBytes,
                                                        int kParamsOff, int vParamsOff, int gK, int gV, int maxGroups) {
  gridDependencyWait();  // the residual: the append ahead's output
  gridLaunchDependents();
  extern __shared__ __align__(16) u8 stage[];
  const int i = blockIdx.x / Hkv, h = blockIdx.x % Hkv, role = blockIdx.y;
  const size_t halfBytes = size_t(Nr) * D * 2;
  const u8* in = (role == 0 ? resK : resV) + (size_t(srcSlots[i]) * Hkv + h) * halfBytes;
  u8* out = pool + (size_t(dstBlocks[i]) * Hkv + h) * blockBytes;
  packOne<D, KBITS, VBITS, KC, BF>(in, out, role, stage, maxGroups, Nr, kBytes, kParamsOff, vParamsOff, gK, gV);
}

}  // namespace pack

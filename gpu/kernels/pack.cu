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
// Work (v4): CTAs of 256 threads per (KV head, K or V, slice), the half
// staged in shared memory. Phase 1: up to nSub threads per quantization
// group find its min and max (partials met in shared memory), keep (s, z)
// in shared memory, and slice 0 writes the pair. Phase 2: one thread
// per 32-bit output word of the CTA's slice gathers its codes (the word's
// elements follow from the fragment order) and writes the word: no two
// threads write the same byte, so no atomics. A launch of few heads is cut
// into slices of words (every slice stages the half and finds the groups'
// parameters again) so that it fills the GPU: v3 ran one 1024-thread CTA
// per half with one thread per group, 20.7 us for 8 int4 heads of 128
// tokens on 16 SMs, 300 us for 1024 heads.
//
// Go wrapper and test: pack.go, pack_test.go (bitwise equal to the Go packer).

#define BD_DEVICE __device__ __forceinline__

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

namespace pack {

constexpr int kThreads = 256;  // v4 (v3: 1024, one CTA per half)

BD_DEVICE float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
BD_DEVICE u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
BD_DEVICE u16 f2bf(float f) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }

// elemPos mirrors kv.TensorLayout.mmaPos: the byte and bit of token t,
// channel c for BITS-bit codes; ROLE 0 = keys (tokens on M), 1 = values.
template <int D, int BITS, int ROLE>
BD_DEVICE void elemPos(int t, int c, int& byteIdx, int& shift) {
  const int grp = t / 16, tt = t % 16;
  int lane, k;
  if (ROLE == 0) {
    const int kb = c / 16, cc = c % 16;
    const int g = tt % 8, hiRow = tt / 8, q = (cc % 8) / 2, hiCol = cc / 8, lo = cc % 2;
    lane = g * 4 + q;
    k = kb * 8 + (hiRow + 2 * hiCol) * 2 + lo;
  } else {
    const int mb = c / 16, cm = c % 16;
    const int g = cm % 8, hiRow = cm / 8, q = (tt % 8) / 2, hiCol = tt / 8, lo = tt % 2;
    lane = g * 4 + q;
    k = mb * 8 + (hiRow + 2 * hiCol) * 2 + lo;
  }
  constexpr int perWord = 32 / BITS;
  const int w = k / perWord, p = k % perWord;
  const int bit = (p % 2) * 16 + (p / 2) * BITS;
  const int inLane = w * 4 + bit / 8;
  constexpr int laneBytes = D / 2 * BITS / 8;
  constexpr int chunk = laneBytes < 16 ? laneBytes : 16;
  constexpr int groupBytes = 16 * D * BITS / 8;
  byteIdx = grp * groupBytes + (inLane / chunk * 32 + lane) * chunk + inLane % chunk;
  shift = bit % 8;
}

// wordElem is the inverse for whole words: the (token, channel) of code p of
// the 32-bit word at byte offset off.
template <int D, int BITS, int ROLE>
BD_DEVICE void wordElem(int off, int p, int& t, int& c) {
  constexpr int laneBytes = D / 2 * BITS / 8;
  constexpr int chunk = laneBytes < 16 ? laneBytes : 16;
  constexpr int groupBytes = 16 * D * BITS / 8;
  const int grp = off / groupBytes, r = off % groupBytes;
  const int j = r / (32 * chunk), lane = (r / chunk) % 32, inLane = j * chunk + r % chunk;
  // Code p of the lane's word w is fragment element w*perWord + p (elemPos).
  constexpr int perWord = 32 / BITS;
  const int kk = (inLane / 4) * perWord + p;
  const int g = lane / 4, q = lane % 4;
  const int blk = kk / 8, a = (kk % 8) / 2, lo = kk % 2;
  const int hiRow = a % 2, hiCol = a / 2;
  if (ROLE == 0) {
    t = grp * 16 + g + 8 * hiRow;
    c = blk * 16 + 2 * q + lo + 8 * hiCol;
  } else {
    c = blk * 16 + g + 8 * hiRow;
    t = grp * 16 + 2 * q + lo + 8 * hiCol;
  }
}

template <int D, int ROLE>
BD_DEVICE float srcAt(const u8* src, int t, int c) {
  int b, sh;
  elemPos<D, 16, ROLE>(t, c, b, sh);
  return h2f(*reinterpret_cast<const u16*>(src + b));
}

// packHalf packs slice `slice` of `slices` (words [words·slice/slices,
// words·(slice+1)/slices)) of one half (K or V) of one KV head's block from
// the residual staged in shared memory (stage: [Nr][D] fp16 in MMA order of
// ROLE); sS and sZ receive the half's group parameters, which slice 0 also
// writes to the block.
//   BITS     8, 4, 2 (integer codes) or 16 (fp16, or bf16 with BF)
//   PERCHAN  groups of G tokens per channel (keys "kc"); else G channels per token
template <int D, int BITS, bool PERCHAN, int ROLE, bool BF>
BD_DEVICE void packHalf(const u8* stage, u8* out, float* sS, float* sZ, int Nr, int paramsOff, int G, int slice, int slices) {
  constexpr int L = (1 << (BITS < 16 ? BITS : 1)) - 1;
  const int groups = BITS < 16 ? (PERCHAN ? Nr / G * D : Nr * (D / G)) : 0;
  // Phase 1: thread i takes group i % groups (neighbouring threads take
  // neighbouring groups: conflict-free shared-memory reads) and every
  // sub-th element of it, sub = i / groups of nSub; partial minima and
  // maxima meet in shared memory. (v4's first try, a team of lanes per
  // group, read one group's elements 64 bytes apart: 16-way bank conflicts,
  // no faster than v3.)
  __shared__ float pLo[kThreads], pHi[kThreads];
  int nSub = 1;
  while (2 * nSub * groups <= kThreads && 2 * nSub <= G) nSub *= 2;
  for (int base = 0; base < groups; base += kThreads / nSub) {
    const int i = threadIdx.x, gi = base + i % (kThreads / nSub), sub = i / (kThreads / nSub);
    float lo = __int_as_float(0x7f800000), hi = -lo;
    if (gi < groups) {
#pragma unroll 4
      for (int e = sub; e < G; e += nSub) {
        int t, c;
        if (PERCHAN) { t = gi / D * G + e; c = gi % D; }
        else { t = gi / (D / G); c = gi % (D / G) * G + e; }
        const float x = srcAt<D, ROLE>(stage, t, c);
        lo = fminf(lo, x);
        hi = fmaxf(hi, x);
      }
    }
    if (nSub > 1) {
      pLo[i] = lo;
      pHi[i] = hi;
      __syncthreads();
      if (sub == 0) {
        for (int k = 1; k < nSub; k++) {
          lo = fminf(lo, pLo[i + k * (kThreads / nSub)]);
          hi = fmaxf(hi, pHi[i + k * (kThreads / nSub)]);
        }
      }
      __syncthreads();
    }
    if (gi < groups && sub == 0) {
      const float scale32 = __fdiv_rn(__fsub_rn(hi, lo), float(L));
      const u16 s = f2h(scale32), z = f2h(lo);
      if (slice == 0) *reinterpret_cast<u32*>(out + paramsOff + 4 * gi) = u32(s) | (u32(z) << 16);
      sS[gi] = h2f(s);
      sZ[gi] = h2f(z);
    }
  }
  __syncthreads();
  const int words = Nr * D * BITS / 32;
  const int w1 = words * (slice + 1) / slices;
  for (int wi = words * slice / slices + threadIdx.x; wi < w1; wi += kThreads) {
    u32 word = 0;
    constexpr int perWord = 32 / BITS;
#pragma unroll
    for (int p = 0; p < perWord; p++) {
      int t, c;
      wordElem<D, BITS, ROLE>(wi * 4, p, t, c);
      const float x = srcAt<D, ROLE>(stage, t, c);
      const int bit = (p % 2) * 16 + (p / 2) * BITS;
      u32 code;
      if (BITS == 16) {
        code = BF ? f2bf(x) : f2h(x);
      } else {
        const int gi = PERCHAN ? t / G * D + c : t * (D / G) + c / G;
        const float sc = sS[gi];
        float q = 0.f;
        if (sc != 0.f) q = fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(x, sZ[gi]), sc)), 0.f), float(L));
        code = u32(q);
      }
      word |= code << bit;
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
  extern __shared__ __align__(16) u8 stage[];
  const int i = blockIdx.x / Hkv, h = blockIdx.x % Hkv, role = blockIdx.y;
  const size_t halfBytes = size_t(Nr) * D * 2;
  const u8* in = (role == 0 ? resK : resV) + (size_t(srcSlots[i]) * Hkv + h) * halfBytes;
  u8* out = pool + (size_t(dstBlocks[i]) * Hkv + h) * blockBytes;
  packOne<D, KBITS, VBITS, KC, BF>(in, out, role, stage, maxGroups, Nr, kBytes, kParamsOff, vParamsOff, gK, gV);
}

}  // namespace pack

// decode_mma.cu: tensor-core split-KV decode attention over bitdecode's
// low-bit KV cache (BitDecoding's design, our own code).
//
//   out[b,i,hq,:] = softmax_t(scale · q[b,i,hq,:]·K[b,t,h,:]) · V[b,t,h,:],  t <= L_b - Tq + i
//
// Operand roles (KERNELS.md §4): the query rows of a KV head (Hq/Hkv heads x
// Tq tokens, at most 8 per CTA; more go to further row chunks) are the N=8
// side of mma.sync.m16n8k16, so a GQA group of 4-8 wastes nothing on M:
//   scores  S^T[16 tokens x 8 rows] += K[16 tokens x 16 ch] · Q^T[16 ch x 8 rows]
//   output  O^T[16 ch x 8 rows]     += V^T[16 ch x 16 tokens] · P^T[16 tokens x 8 rows]
// K and V blocks are stored in kv's mma order (kv/mma.go): each lane loads
// its own A fragments with 16-byte loads, in the order it consumes them, and
// unpacks two codes per instruction pair (shift + lop3 with the fp16 magic
// 1024, then one f16x2 subtract: exact integers). Scales never enter the
// inner loop:
//   K per channel (KC): B = fp16(Q ⊙ s[g,:]), one bias Q·z[g,:] per row,
//                       recomputed once per key group of G tokens;
//   K per token (KT):   S = s_t·(Q·codes) + z_t·ΣQ per channel group;
//   V per token:        B = fp16(p_t·s_t) per channel group, plus Σ p_t·z_t.
// The fp16 residual block (newest L % Nr tokens, kept in mma order too) is the
// same code with 16-bit codes and no scales.
//
// Work: a CTA of 4 warps per (split of whole blocks, KV head x row chunk,
// sequence). Each warp runs its own online softmax over tiles of 16·MT
// tokens (tiles w, w+4, ...), so warps never wait for each other; the P
// fragments go from the S^T accumulator layout to the B operand layout of
// the second mma with movmatrix.trans. At the end the 4 warps are merged in
// a fixed order through shared memory and the split's partial (unnormalized
// O, running max, denominator) goes to global memory; the last CTA of the
// row chunk to finish merges the splits in order (finishSplits; past 64
// splits decode_combine does, in a second launch). The only atomic is that
// counter: which CTA merges varies, the merge's order does not, so the
// result is bitwise deterministic.
//
// Versions (H100, Hq=32 Hkv=8 D=128; us and fraction of the 3.02 TB/s read
// ceiling; docs/perf/decode-attention.md has every step):
//   v1 decode.cu: CUDA cores, 8 channels per thread, shuffle reductions.
//      fp16 (128,8K) 3148 us 45%; int4 3663 us 10%: issue-bound.
//   v2   tensor cores, fragment-ordered blocks, folded scales, warps on
//        interleaved tiles, one-CTA-per-row-chunk combine.
//        fp16 (128,8K) 1408 us 101%; int4 KC 614 us 62%, KT 430 us 88%.
//   v2.1 contiguous tile runs per warp (one refold per key group), parallel
//        combine, at least 4 tiles per warp per split: (1,8K) int4 53 -> 23 us,
//        fp16 56 -> 29 us; int4 KC (128,8K) 70%.
//   v2.2 register double buffering of the next tile: fp16 (16,32K) 91 -> 96%;
//        rejected for low-bit formats (occupancy, see kPrefetch).
//   v2.3 bigger tiles for low-bit formats (256 lane bytes: int8 MT=2, int4 4,
//        int2 8): int8 (128,8K) 80 -> 92%, int4 KC 67 -> 76%, int2 46 -> 53%.
//   v2.4 cp.async staging of the code bytes through a per-warp ring (template
//        parameter ST): slower (int4 KC 76 -> 74%, int2 (16,32K) -9%); off by
//        default (ST = 0), kept for experiments (BITDECODE_DECODE_STAGES).
//   v2.5 the merge of the splits folded into this kernel (finishSplits in
//        decode.cu: the last CTA of a row chunk merges, in split order):
//        (1,8K) int4 KC 18.4 -> 16.4 us. v3.1 (decode.go) plans the splits
//        for whole waves: one for a single sequence, about four otherwise.
//   v3   the Hopper variant, decode_wgmma.cu (TMA ring + wgmma).
//   v2.6 two instructions per unpacked register (code: masks in place, an
//        fma for the scaled positions, a byte permute for int8), int2 tiles
//        of 4 groups at 168 registers: int4 KC (128,8K) 77 -> 83%, int2
//        52 -> 58%, k4v2 66 -> 69%; wgmma int8 92 -> 97%.
// Go wrapper and tests: decode_mma.go, decode_mma_test.go.

#define BD_DEVICE __device__ __forceinline__

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

#define kNegInf (-__int_as_float(0x7f800000))

namespace mma {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 8;      // query rows per CTA: the mma N extent
constexpr int kGroup = 16;    // tokens per fragment group: the mma M (K) / K (V) extent
constexpr u32 kMagic = 0x64006400u;  // fp16 pair (1024, 1024)

BD_DEVICE float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
BD_DEVICE u32 pack2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
BD_DEVICE u32 lop_and_or(u32 a, u32 b, u32 c) {  // (a & b) | c
  u32 r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
BD_DEVICE u32 hsub2(u32 a, u32 b) {
  u32 r;
  asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
BD_DEVICE u32 hfma2(u32 a, u32 b, u32 c) {
  u32 r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
BD_DEVICE u32 prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
BD_DEVICE u32 trans8x8(u32 x) {
  u32 r;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(r) : "r"(x));
  return r;
}
// pack2T packs two floats as the mma operand type: fp16, or bf16 for
// bf16-stored K/V (BF).
template <bool BF>
BD_DEVICE u32 pack2T(float lo, float hi) {
  if (!BF) return pack2(lo, hi);
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
BD_DEVICE void mma16816bf(float c[4], const u32 a[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
BD_DEVICE void mma16816(float c[4], const u32 a[4], u32 b0, u32 b1);
template <bool BF>
BD_DEVICE void mmaT(float c[4], const u32 a[4], u32 b0, u32 b1) {
  if (BF) mma16816bf(c, a, b0, b1);
  else mma16816(c, a, b0, b1);
}
BD_DEVICE void mma16816(float c[4], const u32 a[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Fragment group geometry for BITS-bit codes and head dim D.
template <int D, int BITS>
struct Frag {
  static constexpr int kLaneBytes = D / 2 * BITS / 8;            // one lane's share of a group
  static constexpr int kChunk = kLaneBytes < 16 ? kLaneBytes : 16;  // bytes per load
  static constexpr int kChunks = kLaneBytes / kChunk;
  static constexpr int kWords = kLaneBytes / 4;
  static constexpr int kGroupBytes = kGroup * D * BITS / 8;
  static constexpr int kRegs = D / 16 * 4;                        // half2 registers
};

// Read-only global loads through the non-coherent path, 16, 8 and 4 bytes.
BD_DEVICE void ldg128(const void* p, u32& a, u32& b, u32& c, u32& d) {
  asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(p));
}
BD_DEVICE void ldg64(const void* p, u32& a, u32& b) {
  asm("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(a), "=r"(b) : "l"(p));
}
BD_DEVICE u32 ldg32(const void* p) {
  u32 a;
  asm("ld.global.nc.u32 %0, [%1];" : "=r"(a) : "l"(p));
  return a;
}

// loadGroup reads lane's words of the 16-token group at p.
template <int D, int BITS>
BD_DEVICE void loadGroup(const u8* __restrict__ p, int lane, u32 w[Frag<D, BITS>::kWords]) {
  using F = Frag<D, BITS>;
#pragma unroll
  for (int j = 0; j < F::kChunks; j++) {
    const u8* src = p + (j * 32 + lane) * F::kChunk;
    if (F::kChunk == 16) {
      ldg128(src, w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
    } else if (F::kChunk == 8) {
      ldg64(src, w[2 * j], w[2 * j + 1]);
    } else {
      w[j] = ldg32(src);
    }
  }
}

// code returns register position p of a word w of BITS-bit codes (the
// codes at bits [p·BITS, p·BITS + BITS) of each 16-bit half) as a half2 of
// exact integers; w8 is w >> 8, shared by the word's upper positions. After
// unrolling, p is a constant and this is two instructions per register:
//   int8:       a byte permute puts each half's byte under the fp16 exponent
//               of 1024 (0x64cc = 1024 + c), then one subtract;
//   int4, int2: a code of the low byte, masked in place under 1024, reads
//               1024 + c·2^s (0x6400 | c << s; exact, the mantissa holds bits
//               0..9), and one fma (x·2^-s - 1024·2^-s) returns c exactly.
//               The high byte's codes do the same from w8.
// (v2.6: the shift per register this replaces cost int2 23 instructions per
// word instead of 17, int4 11 instead of 9.)
template <int BITS>
BD_DEVICE u32 code(u32 w, u32 w8, int p) {
  static_assert(BITS == 2 || BITS == 4 || BITS == 8, "code widths");
  if constexpr (BITS == 8) return hsub2(prmt(w, 0x64646464u, p == 0 ? 0x4240u : 0x4341u), kMagic);
  constexpr int kLow = BITS < 8 ? 8 / BITS : 1;  // positions in the low byte of a half
  const int s = (p % kLow) * BITS;
  const u32 x = lop_and_or(p < kLow ? w : w8, (((1u << BITS) - 1) << s) * 0x10001u, kMagic);
  if (s == 0) return hsub2(x, kMagic);
  const u32 scale = u32(15 - s) << 10, bias = 0x8000u | (u32(25 - s) << 10);  // fp16 2^-s, -2^(10-s)
  return hfma2(x, scale * 0x10001u, bias * 0x10001u);
}

// unpack turns lane's words into half2 registers in fragment order: register
// j holds codes 2j and 2j+1, exact small integers (or the fp16 values).
template <int D, int BITS>
BD_DEVICE void unpack(const u32 w[Frag<D, BITS>::kWords], u32 h[Frag<D, BITS>::kRegs]) {
  if constexpr (BITS == 16) {
#pragma unroll
    for (int j = 0; j < Frag<D, BITS>::kRegs; j++) h[j] = w[j];
  } else {
    constexpr int kPairs = 16 / BITS;  // register pairs per word
#pragma unroll
    for (int i = 0; i < Frag<D, BITS>::kWords; i++) {
      const u32 w8 = w[i] >> 8;
#pragma unroll
      for (int p = 0; p < kPairs; p++) h[i * kPairs + p] = code<BITS>(w[i], w8, p);
    }
  }
}

BD_DEVICE void param(const u8* __restrict__ half, int off, int i, float& s, float& z) {
  const u32 v = ldg32(half + off + 4 * i);
  s = h2f(u16(v & 0xffff));
  z = h2f(u16(v >> 16));
}

// WarpState is one warp's online softmax over its tiles. Lane (g, q) holds
// rows 2q and 2q+1: running max m (log2 domain), its share of the
// denominator l and of the value zeros, and O^T accumulators acc[mb] =
// (ch 16mb+g, rows 2q/2q+1), (ch 16mb+g+8, rows 2q/2q+1).
template <int D, int VG>
struct WarpState {
  float m[2], l[2];
  float acc[D / 16][4];
  float zacc[2][VG];
};

// TileRaw is one tile's packed K and V words of one lane, loaded ahead of
// their use (the main loop keeps two: the tile being computed and the next).
template <int D, int KBITS, int VBITS, int MT>
struct TileRaw {
  u32 k[MT][Frag<D, KBITS>::kWords];
  u32 v[MT][Frag<D, VBITS>::kWords];
};

template <int D, int KBITS, int VBITS, int MT>
BD_DEVICE void loadTile(TileRaw<D, KBITS, VBITS, MT>& raw, const u8* __restrict__ kdat, const u8* __restrict__ vdat, int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    loadGroup<D, KBITS>(kdat + mt * Frag<D, KBITS>::kGroupBytes, lane, raw.k[mt]);
    loadGroup<D, VBITS>(vdat + mt * Frag<D, VBITS>::kGroupBytes, lane, raw.v[mt]);
  }
}

// cp.async: 16-byte global -> shared copies that complete in the background
// (groups committed and waited for in order), the staging of v2.4.
BD_DEVICE void cpAsync16(void* smem, const void* gmem) {
  u32 s;
  asm("{ .reg .u64 a;\n cvta.to.shared.u64 a, %1;\n cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
BD_DEVICE void cpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
BD_DEVICE void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// loadTileShared is loadTile from a tile staged in shared memory with the
// global layout (K groups, then V groups).
template <int D, int BITS>
BD_DEVICE void loadGroupShared(const u8* p, int lane, u32 w[Frag<D, BITS>::kWords]) {
  using F = Frag<D, BITS>;
#pragma unroll
  for (int j = 0; j < F::kChunks; j++) {
    const u8* src = p + (j * 32 + lane) * F::kChunk;
    if (F::kChunk == 16) {
      const uint4 v = *reinterpret_cast<const uint4*>(src);
      w[4 * j] = v.x, w[4 * j + 1] = v.y, w[4 * j + 2] = v.z, w[4 * j + 3] = v.w;
    } else if (F::kChunk == 8) {
      const uint2 v = *reinterpret_cast<const uint2*>(src);
      w[2 * j] = v.x, w[2 * j + 1] = v.y;
    } else {
      w[j] = *reinterpret_cast<const u32*>(src);
    }
  }
}
template <int D, int KBITS, int VBITS, int MT>
BD_DEVICE void loadTileShared(TileRaw<D, KBITS, VBITS, MT>& raw, const u8* kdat, const u8* vdat, int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    loadGroupShared<D, KBITS>(kdat + mt * Frag<D, KBITS>::kGroupBytes, lane, raw.k[mt]);
    loadGroupShared<D, VBITS>(vdat + mt * Frag<D, VBITS>::kGroupBytes, lane, raw.v[mt]);
  }
}

// Tile processes MT fragment groups starting at token tok0 of the sequence:
// the packed half pointers point at the first group's K and V data.
//   KBITS/VBITS  code widths (16: fp16, no scales)
//   KC           keys per channel (scales folded into bq); else per token
//   KG, VG       channel groups per token of K (KT) and V scales
//   BF           16-bit K/V are bf16 (bf16 mma; bq must be bf16 too)
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, int MT, bool BF>
BD_DEVICE void tile(WarpState<D, VG>& st, const TileRaw<D, KBITS, VBITS, MT>& raw,
                    const u8* __restrict__ khalf, const u8* __restrict__ vhalf, int kParamsOff, int vParamsOff,
                    int gK, int gV, int within0, int tok0, int tEnd, const int limit[2],
                    const u32 bq[D / 16][2], const float biasC[2], const float qsumC[2][KG], int lane) {
  const int g = lane / 4, q = lane % 4;
  float s[MT][4];
  // Scores.
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    u32 a[Frag<D, KBITS>::kRegs];
    unpack<D, KBITS>(raw.k[mt], a);
    float c[KG][4];
#pragma unroll
    for (int k = 0; k < KG; k++) c[k][0] = c[k][1] = c[k][2] = c[k][3] = 0.f;
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++) mmaT<BF>(c[KBITS < 16 && !KC ? kb * 16 * KG / D : 0], &a[4 * kb], bq[kb][0], bq[kb][1]);
    if (KBITS < 16 && !KC) {  // per-token scales: s_t·(Q·codes) + z_t·ΣQ per channel group
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int t = within0 + mt * kGroup + g + 8 * half;
        float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
        for (int k = 0; k < KG; k++) {
          float sc, z;
          param(khalf, kParamsOff, t * KG + k, sc, z);
          acc0 += sc * c[k][2 * half] + z * qsumC[0][k];
          acc1 += sc * c[k][2 * half + 1] + z * qsumC[1][k];
        }
        s[mt][2 * half] = acc0;
        s[mt][2 * half + 1] = acc1;
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; e++) s[mt][e] = c[0][e] + biasC[e & 1];
    }
    // Mask padding past the end and tokens after a query token's position.
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int t = tok0 + mt * kGroup + g + 8 * (e >> 1);
      if (t >= tEnd || t > limit[e & 1]) s[mt][e] = kNegInf;
    }
  }
  // Online softmax for rows 2q, 2q+1.
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float mx = kNegInf;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) mx = fmaxf(mx, fmaxf(s[mt][r], s[mt][r + 2]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float mNew = fmaxf(st.m[r], mx);
    if (mNew == kNegInf) {
      alpha[r] = 1.f;
#pragma unroll
      for (int mt = 0; mt < MT; mt++) s[mt][r] = s[mt][r + 2] = 0.f;
    } else {
      alpha[r] = exp2f(st.m[r] - mNew);
      float sum = 0.f;
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        s[mt][r] = exp2f(s[mt][r] - mNew);
        s[mt][r + 2] = exp2f(s[mt][r + 2] - mNew);
        sum += s[mt][r] + s[mt][r + 2];
      }
      st.l[r] = st.l[r] * alpha[r] + sum;
    }
    st.m[r] = mNew;
  }
#pragma unroll
  for (int mb = 0; mb < D / 16; mb++) {
    st.acc[mb][0] *= alpha[0];
    st.acc[mb][1] *= alpha[1];
    st.acc[mb][2] *= alpha[0];
    st.acc[mb][3] *= alpha[1];
  }
#pragma unroll
  for (int k = 0; k < VG; k++) {
    st.zacc[0][k] *= alpha[0];
    st.zacc[1][k] *= alpha[1];
  }
  // Values.
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    u32 a[Frag<D, VBITS>::kRegs];
    unpack<D, VBITS>(raw.v[mt], a);
#pragma unroll
    for (int k = 0; k < VG; k++) {
      float p[4];
      if (VBITS < 16) {  // p·s per token and channel group; zeros accumulate apart
#pragma unroll
        for (int half = 0; half < 2; half++) {
          const int t = within0 + mt * kGroup + g + 8 * half;
          float sc, z;
          param(vhalf, vParamsOff, t * VG + k, sc, z);
          p[2 * half] = s[mt][2 * half] * sc;
          p[2 * half + 1] = s[mt][2 * half + 1] * sc;
          st.zacc[0][k] += s[mt][2 * half] * z;
          st.zacc[1][k] += s[mt][2 * half + 1] * z;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++) p[e] = s[mt][e];
      }
      // (token g | g+8, rows 2q, 2q+1) -> B: (tokens 2q.. | 2q+8.., row g)
      const u32 b0 = trans8x8(pack2T<BF>(p[0], p[1]));
      const u32 b1 = trans8x8(pack2T<BF>(p[2], p[3]));
#pragma unroll
      for (int mb = k * D / 16 / VG; mb < (k + 1) * D / 16 / VG; mb++) mmaT<BF>(st.acc[mb], &a[4 * mb], b0, b1);
    }
  }
}

// Fill B fragments of the (scaled) queries: lane's channels of k-block kb are
// 16kb + 2q, +1 (b0) and 16kb + 2q + 8, +9 (b1), for row g.
template <int D, bool BF = false>
BD_DEVICE void makeB(const float qf[D / 16][4], const float* sc, u32 bq[D / 16][2]) {
#pragma unroll
  for (int kb = 0; kb < D / 16; kb++) {
    bq[kb][0] = pack2T<BF>(qf[kb][0] * sc[4 * kb], qf[kb][1] * sc[4 * kb + 1]);
    bq[kb][1] = pack2T<BF>(qf[kb][2] * sc[4 * kb + 2], qf[kb][3] * sc[4 * kb + 3]);
  }
}

// quadSum sums v over the 4 lanes of a quad (same g).
BD_DEVICE float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// toC moves a per-row value held by the quad of row g to the C layout's
// rows 2q and 2q+1.
BD_DEVICE void toC(float v, int q, float out[2]) {
  out[0] = __shfl_sync(0xffffffffu, v, (2 * q) * 4);
  out[1] = __shfl_sync(0xffffffffu, v, (2 * q + 1) * 4);
}

// MINB is the CTAs per SM the registers must allow (__launch_bounds__).
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, int MT, bool BF, int ST, int MINB>
__global__ void __launch_bounds__(kThreads, MINB) decode_mma(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const u8* __restrict__ resK, const u8* __restrict__ resV, const int* __restrict__ resSlots,
    const int* __restrict__ lens, const u16* __restrict__ q, float* __restrict__ partO, float* __restrict__ partML,
    int Hq, int Hkv, int Tq, int Nr, int splitLen, int maxSplits, int rowChunks,
    int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV, float scaleLog2,
    int* __restrict__ counters, u16* __restrict__ out) {
  static_assert(KBITS == 16 || KC || KG >= 1, "key groups");
  __shared__ float redO[kWarps][kRows][D];
  __shared__ float redM[kWarps][kRows], redL[kWarps][kRows];

  const int split = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y / rowChunks, rc = blockIdx.y % rowChunks;
  const int L = lens[b];
  const int t0 = split * splitLen;
  if (t0 >= L) return;
  const int t1 = min(L, t0 + splitLen);
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * kRows, nrows = min(kRows, R - row0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, qd = lane % 4;

  // Queries of row g (zero beyond nrows), scaled by scale·log2(e), for the
  // lane's B-fragment channels.
  float qf[D / 16][4];
  {
    const int row = row0 + g, i = row / group, hq = h * group + row % group;
    const u16* qp = q + ((size_t(b) * Tq + i) * Hq + hq) * D;
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int c = 16 * kb + 2 * qd + (e & 1) + 8 * (e >> 1);
        qf[kb][e] = g < nrows ? h2f(qp[c]) * scaleLog2 : 0.f;
      }
  }
  int limit[2];  // last visible token of rows 2q, 2q+1 (beyond nrows: all)
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = row0 + 2 * qd + r;
    limit[r] = 2 * qd + r < nrows ? L - Tq + row / group : 0x7fffffff;
  }
  float ones[D / 4];
#pragma unroll
  for (int i = 0; i < D / 4; i++) ones[i] = 1.f;
  u32 bPlain[D / 16][2];
  makeB<D>(qf, ones, bPlain);
  u32 bPlainT[D / 16][2];  // the packed blocks' operand type (bf16 for bf16 storage)
  makeB<D, BF>(qf, ones, bPlainT);
  float zeroC[2] = {0.f, 0.f};
  // ΣQ per KT channel group, in C layout.
  float qsumC[2][KG];
#pragma unroll
  for (int k = 0; k < KG; k++) {
    float part = 0.f;
#pragma unroll
    for (int kb = k * D / 16 / KG; kb < (k + 1) * D / 16 / KG; kb++) part += qf[kb][0] + qf[kb][1] + qf[kb][2] + qf[kb][3];
    float tmp[2];
    toC(quadSum(part), qd, tmp);
    qsumC[0][k] = tmp[0];
    qsumC[1][k] = tmp[1];
  }

  WarpState<D, VG> st;
  st.m[0] = st.m[1] = kNegInf;
  st.l[0] = st.l[1] = 0.f;
#pragma unroll
  for (int mb = 0; mb < D / 16; mb++) st.acc[mb][0] = st.acc[mb][1] = st.acc[mb][2] = st.acc[mb][3] = 0.f;
#pragma unroll
  for (int k = 0; k < VG; k++) st.zacc[0][k] = st.zacc[1][k] = 0.f;

  const int nPacked = L / Nr;
  const int packedEnd = min(t1, nPacked * Nr);
  constexpr int TT = MT * kGroup;
  // Packed tiles: t0 is a multiple of Nr and TT divides Nr, so tiles never
  // straddle blocks and key groups (G >= 16) never straddle a fragment group.
  int curGroup = -1;
  u32 bScaled[D / 16][2];
  float biasC[2] = {0.f, 0.f};
  // Each warp takes a contiguous run of tiles, so it refolds the key scales
  // once per key group rather than once per tile. The next tile's K and V
  // are loaded before the current one is computed (two register buffers).
  const int nTiles = max(0, packedEnd - t0) / TT;
  const int perWarp = (nTiles + kWarps - 1) / kWarps;
  const int tileBegin = warp * perWarp, tileEnd = min(nTiles, (warp + 1) * perWarp);
  constexpr int kFragBytes = Frag<D, KBITS>::kGroupBytes, vFragBytes = Frag<D, VBITS>::kGroupBytes;
  // blockOf returns tile ti's block (one KV head's K half) and its first token's offset in it.
  auto blockOf = [&](int ti, int& within) -> const u8* {
    const int tok = t0 + ti * TT, blk = tok / Nr;
    within = tok - blk * Nr;
    return pool + (size_t(blockTable[b * maxBlocks + blk]) * Hkv + h) * blockBytes;
  };
  auto load = [&](TileRaw<D, KBITS, VBITS, MT>& raw, int ti) {
    int within;
    const u8* half = blockOf(ti, within);
    loadTile<D, KBITS, VBITS, MT>(raw, half + (within / kGroup) * kFragBytes, half + kBytes + (within / kGroup) * vFragBytes, lane);
  };
  auto compute = [&](const TileRaw<D, KBITS, VBITS, MT>& raw, int ti) {
    int within;
    const u8* half = blockOf(ti, within);
    const int tok = t0 + ti * TT;
    if (KBITS < 16 && KC) {
      // Key scales per channel: refold Q when the token group changes.
      const int kgrp = tok / gK;
      if (kgrp != curGroup) {
        curGroup = kgrp;
        const int gi = within / gK;
        float sc[D / 4];
        float bias = 0.f;
#pragma unroll
        for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
          for (int hi = 0; hi < 2; hi++) {  // channels 16kb+2q+8hi, +1: one 8-byte pair of pairs
            const int c = 16 * kb + 2 * qd + 8 * hi;
            u32 p0, p1;
            ldg64(half + kParamsOff + 4 * (gi * D + c), p0, p1);
            const float s0 = h2f(u16(p0 & 0xffff)), z0 = h2f(u16(p0 >> 16));
            const float s1 = h2f(u16(p1 & 0xffff)), z1 = h2f(u16(p1 >> 16));
            sc[4 * kb + 2 * hi] = s0;
            sc[4 * kb + 2 * hi + 1] = s1;
            bias += qf[kb][2 * hi] * z0 + qf[kb][2 * hi + 1] * z1;
          }
        makeB<D>(qf, sc, bScaled);
        toC(quadSum(bias), qd, biasC);
      }
    }
    tile<D, KBITS, VBITS, KC, KG, VG, MT, BF>(st, raw, half, half + kBytes, kParamsOff, vParamsOff, gK, gV, within, tok, t1, limit,
                                          (KBITS < 16 && KC) ? bScaled : bPlainT, (KBITS < 16 && KC) ? biasC : zeroC, qsumC, lane);
  };
  // Register double buffering pays for fp16 (v2.1: (16,32K) 91% -> 96% of
  // the read ceiling) but costs low-bit formats occupancy (224 registers, 2
  // CTAs/SM; int4 KT (128,8K) 85% -> 73%), so they load just in time.
  constexpr bool kPrefetch = KBITS == 16 && VBITS == 16;
  if (ST > 0) {
    // v2.4: each warp stages its tiles through a ring of ST tiles in
    // shared memory with cp.async, ST-1 tiles ahead of the one it computes,
    // so the bytes in flight no longer come out of the register budget.
    extern __shared__ __align__(16) u8 ring[];
    constexpr int kTileK = MT * kFragBytes, kTileBytes = kTileK + MT * vFragBytes;
    constexpr int kST = ST > 0 ? ST : 1;
    u8* mine = ring + warp * kST * kTileBytes;
    auto issue = [&](int ti, int slot) {
      int within;
      const u8* half = blockOf(ti, within);
      const u8* ks = half + (within / kGroup) * kFragBytes;
      const u8* vs = half + kBytes + (within / kGroup) * vFragBytes;
      u8* dst = mine + slot * kTileBytes;
#pragma unroll
      for (int o = lane * 16; o < kTileK; o += 512) cpAsync16(dst + o, ks + o);
#pragma unroll
      for (int o = lane * 16; o < kTileBytes - kTileK; o += 512) cpAsync16(dst + kTileK + o, vs + o);
    };
#pragma unroll
    for (int s = 0; s < kST - 1; s++) {
      if (tileBegin + s < tileEnd) issue(tileBegin + s, s);
      cpAsyncCommit();
    }
    for (int ti = tileBegin; ti < tileEnd; ti++) {
      const int rel = ti - tileBegin;
      if (ti + kST - 1 < tileEnd) issue(ti + kST - 1, (rel + kST - 1) % kST);
      cpAsyncCommit();
      cpAsyncWait<kST - 1>();  // tile ti's group has landed
      __syncwarp();
      TileRaw<D, KBITS, VBITS, MT> raw;
      const u8* src = mine + (rel % kST) * kTileBytes;
      loadTileShared<D, KBITS, VBITS, MT>(raw, src, src + kTileK, lane);
      __syncwarp();  // every lane has read the slot before the next issue refills it
      compute(raw, ti);
    }
    cpAsyncWait<0>();
  } else if (kPrefetch && tileBegin < tileEnd) {
    TileRaw<D, KBITS, VBITS, MT> r0, r1;
    load(r0, tileBegin);
    for (int ti = tileBegin; ti < tileEnd; ti += 2) {
      if (ti + 1 < tileEnd) load(r1, ti + 1);
      compute(r0, ti);
      if (ti + 1 >= tileEnd) break;
      if (ti + 2 < tileEnd) load(r0, ti + 2);
      compute(r1, ti + 1);
    }
  } else {
    for (int ti = tileBegin; ti < tileEnd; ti++) {
      TileRaw<D, KBITS, VBITS, MT> raw;
      load(raw, ti);
      compute(raw, ti);
    }
  }
  // Residual tokens (fp16, mma order), one 16-token group per tile.
  if (t1 > packedEnd) {
    const size_t off = (size_t(resSlots ? resSlots[b] : b) * Hkv + h) * Nr * D * 2;
    const int resStart = nPacked * Nr;
    float qsum1[2][1] = {{0.f}, {0.f}};
    WarpState<D, 1> rs;  // residual uses unscaled values: a state without groups
    rs.m[0] = st.m[0]; rs.m[1] = st.m[1]; rs.l[0] = st.l[0]; rs.l[1] = st.l[1];
#pragma unroll
    for (int mb = 0; mb < D / 16; mb++)
#pragma unroll
      for (int e = 0; e < 4; e++) rs.acc[mb][e] = st.acc[mb][e];
    rs.zacc[0][0] = rs.zacc[1][0] = 0.f;
    for (int tok = max(t0, packedEnd) + warp * kGroup; tok < t1; tok += kWarps * kGroup) {
      const int within = tok - resStart;
      const int fb = (within / kGroup) * kGroup * D * 2;
      TileRaw<D, 16, 16, 1> raw;
      loadTile<D, 16, 16, 1>(raw, resK + off + fb, resV + off + fb, lane);
      tile<D, 16, 16, false, 1, 1, 1, false>(rs, raw, nullptr, nullptr, 0, 0, 1, 1, within, tok, t1, limit, bPlain, zeroC, qsum1, lane);
    }
    // The residual tiles rescaled acc and zacc alike only through alpha: carry
    // the zeros' scale by replaying the max change on zacc.
    if (VG > 0) {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const float a = (st.m[r] == kNegInf) ? 1.f : exp2f(st.m[r] - rs.m[r]);
#pragma unroll
        for (int k = 0; k < VG; k++) st.zacc[r][k] *= a;
      }
    }
    st.m[0] = rs.m[0]; st.m[1] = rs.m[1]; st.l[0] = rs.l[0]; st.l[1] = rs.l[1];
#pragma unroll
    for (int mb = 0; mb < D / 16; mb++)
#pragma unroll
      for (int e = 0; e < 4; e++) st.acc[mb][e] = rs.acc[mb][e];
  }

  // Warp totals: denominators and value zeros summed over the 8 lanes of
  // each row (xor over g); zeros folded into the accumulators.
#pragma unroll
  for (int r = 0; r < 2; r++) {
#pragma unroll
    for (int off = 4; off < 32; off *= 2) st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], off);
#pragma unroll
    for (int k = 0; k < VG; k++)
#pragma unroll
      for (int off = 4; off < 32; off *= 2) st.zacc[r][k] += __shfl_xor_sync(0xffffffffu, st.zacc[r][k], off);
  }
#pragma unroll
  for (int mb = 0; mb < D / 16; mb++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int c = 16 * mb + g + 8 * (e >> 1), r = 2 * qd + (e & 1);
      float v = st.acc[mb][e];
      if (VBITS < 16) v += st.zacc[e & 1][c * VG / D];
      redO[warp][r][c] = v;
    }
  if (g == 0) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      redM[warp][2 * qd + r] = st.m[r];
      redL[warp][2 * qd + r] = st.l[r];
    }
  }
  __syncthreads();
  // Merge the warps in order.
  const size_t part = (size_t(b) * Hkv * rowChunks + blockIdx.y) * maxSplits + split;
  for (int idx = threadIdx.x; idx < kRows * D; idx += kThreads) {
    const int r = idx / D, c = idx % D;
    float m = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; w++) m = fmaxf(m, redM[w][r]);
    float o = 0.f, l = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; w++) {
      const float a = redM[w][r] == kNegInf ? 0.f : exp2f(redM[w][r] - m);
      o = fmaf(redO[w][r][c], a, o);
      l = fmaf(redL[w][r], a, l);
    }
    partO[part * kRows * D + idx] = o;
    if (c == 0) {
      partML[(part * kRows + r) * 2] = m;
      partML[(part * kRows + r) * 2 + 1] = l;
    }
  }
  if (counters) {  // v2.5: the last split merges (finishSplits, decode.cu)
    finishSplits<D, kRows>(partO, partML, &counters[size_t(b) * Hkv * rowChunks + blockIdx.y], out, part - split,
                           (L + splitLen - 1) / splitLen, b, h, row0, nrows, group, Hq, Tq, threadIdx.x, [] { __syncthreads(); });
  }
}

}  // namespace mma

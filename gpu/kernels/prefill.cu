// prefill.cu: prefill (many query rows) attention over bitdecode's paged
// low-bit KV cache, in FlashAttention-2's shape (our own code).
//
//   out[b,i,hq,:] = softmax_t(scale · q[b,i,hq,:]·K[b,t,h,:]) · V[b,t,h,:],
//   t <= L_b - Tq + i (and t > that - window with a sliding window)
//
// the function decode_mma.cu computes (the same causal rule, sliding window,
// soft-cap and residual), for launches of many query rows a KV head: a
// prefill chunk of Tq tokens times the GQA group. decode_mma.cu takes 8 query
// rows a CTA (bitdecode.cuh's kQueryRows), so a chunk of 512 tokens at group 4
// (2048 rows) re-reads the visible K/V 256 times a KV head from L2 (session
// 28: a 32K prompt's fp16 prefill 5.26 s, ~36 TB of L2 reads). Here a CTA of
// kWarps warps takes 16·kWarps rows and dequantizes each K and V tile once,
// into shared memory, for all of them.
//
// Tensors (the decode kernels', decode.go's DecodeBuffers):
//   pool   [blocks][Hkv][blockBytes]  packed blocks, kv.MMA order (K half, V half)
//   blockTable [B][maxBlocks] int32, lens [B] int32 (cached tokens, the chunk's included)
//   resK, resV [slots][Hkv][Nr][D] fp16, kv.MMA order (the newest L % Nr tokens)
//   q   [B][Tq][Hq][D] fp16;  out [B][Tq][Hq][D] fp16;  out32 (optional) the same in float32
// Rows: row r of KV head h is query token r / G, head h·G + r % G (G = Hq/Hkv:
// the decode kernels' mapping; any G, MQA included).
//
// Work: a CTA (kWarps = 4 warps) per (row tile of 16·kWarps rows, KV head,
// sequence); warp w owns rows 16w..16w+15 of the tile. Each lane keeps the
// warp's query rows as mma.sync.m16n8k16 A fragments (fp16, scale·log2(e)
// folded in; a bf16 copy for bf16 blocks) and, per key tile of TN tokens:
//   1. the CTA dequantizes the tile's K and V into shared memory, token-major
//      [TN][D + kPad] fp16 (bf16 for bf16 blocks): one 16-byte chunk of a
//      lane's fragment words a unit (fragElem gives each code's token and
//      channel), codes times scale plus zero in float, rounded once;
//   2. S = Q·Kᵀ (ldmatrix of K rows as the B operand), the soft-cap, the
//      mask (the rows' causal limits, the window, the tile's end), the
//      online softmax in the log2 domain (ex2), P from the accumulators
//      straight into A fragments, O += P·V (ldmatrix.trans of V).
// Packed tokens run first, then the residual's (fp16 tiles), so a tile is
// of one type. Padding tokens of a tile are written as zeros and masked.
// The output is O / l, rounded to fp16 (and widened to out32 where given).
// No splits and no atomics: deterministic, and a row's bits depend on its
// sequence alone.
//
// Tile constants: TN = 64 keys (32 at D = 256: registers) and kPad = 8
// halves (a row stride of D + 8 halves puts ldmatrix's 8 rows in distinct
// banks).
//
// Versions (H100, Llama-3.1-8B shapes; docs/perf/prefill.md):
//   v1 (session 28-prefill) the kernel above.
// Go wrapper and routing: prefill.go (PlanPrefill, PrefillRoute); test:
// prefill_test.go (against attn.Reference and decode_mma.cu's prefill).

#include "bitdecode.cuh"

namespace pf {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16 * kWarps;  // query rows of a CTA
constexpr int kPad = 8;             // halves of padding per shared row

BD_DEVICE u32 smemAddr(const void* p) {
  u32 s;
  asm("{ .reg .u64 a;\n cvta.to.shared.u64 a, %1;\n cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(p));
  return s;
}
BD_DEVICE void ldsm4(u32 addr, u32& d0, u32& d1, u32& d2, u32& d3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3) : "r"(addr));
}
BD_DEVICE void ldsm4t(u32 addr, u32& d0, u32& d1, u32& d2, u32& d3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3) : "r"(addr));
}

// Group is where one 16-token fragment group of a half lives: its codes
// (kv.MMA order), the half whose (scale, zero) pairs it takes, and its first
// token's place in its block.
struct Group {
  const u8* codes;
  const u8* half;
  int within;
};

// dequantHalf writes the TN tokens of one half of a key tile (K: ROLE 0, V:
// 1) into dst [TN][D + kPad] as 16-bit values, token-major; at(grp) returns
// the tile's fragment group grp (Group). Tokens at or past valid (tile
// relative) are written as zeros (masked later; a zero keeps 0·v finite).
// BITS 16 copies fp16 or bf16 bits; 8, 4 and 2 dequantize code·s + z in
// float32 (package kv's Dequant: the product rounded, then the sum), rounded
// to fp16 once. Pairs (package kv's ParamIndex): keys per channel (KC)
// (t/G)·D + c of their block, keys per token t·(D/G) + c/G, values
// t·(D/G) + c/G (G the group: tokens for KC, channels otherwise), at
// paramsOff of the half. Each unit is one lane's chunk j of a group, so a
// warp's 32 units read one contiguous run (the decode kernels' loads); a
// lane's code pair 2i, 2i+1 (bits p·BITS and 16 + p·BITS of a word) is two
// channels of a token for keys, two tokens of a channel for values.
template <int D, int BITS, int ROLE, bool KC, int TN, typename AT>
BD_DEVICE void dequantHalf(u16* __restrict__ dst, AT at, int valid, int G, int paramsOff, int tid) {
  using F = Frag<D, BITS>;
  constexpr int kPerWord = 32 / BITS;
  constexpr int kWordsPerChunk = F::kChunk / 4;
  constexpr int kUnits = TN / 16 * 32 * F::kChunks;
  constexpr int kStride = D + kPad;
  static_assert(kUnits % kThreads == 0, "whole units per thread");
#pragma unroll 2
  for (int u = tid; u < kUnits; u += kThreads) {
    const int grp = u / (32 * F::kChunks), rem = u % (32 * F::kChunks), j = rem / 32, lane = rem % 32;
    const int g = lane / 4, qd = lane % 4;
    const Group gr = at(grp);
    u32 w[4];
    const u8* p = gr.codes + (j * 32 + lane) * F::kChunk;
    if constexpr (F::kChunk == 16) {
      const uint4 v = *reinterpret_cast<const uint4*>(p);
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (F::kChunk == 8) {
      const uint2 v = *reinterpret_cast<const uint2*>(p);
      w[0] = v.x, w[1] = v.y;
    } else {
      w[0] = *reinterpret_cast<const u32*>(p);
    }
#pragma unroll
    for (int ww = 0; ww < kWordsPerChunk; ww++) {
      const int wi = j * kWordsPerChunk + ww;
#pragma unroll
      for (int pp = 0; pp < kPerWord; pp += 2) {
        int t, c;
        fragElem<ROLE>(0, g, qd, wi * kPerWord + pp, t, c);  // the pair's first element
        u16 h0, h1;
        if constexpr (BITS == 16) {
          h0 = u16(w[ww] & 0xffff), h1 = u16(w[ww] >> 16);
        } else {
          const int s = (pp / 2) * BITS;
          constexpr u32 kMask = (1u << BITS) - 1;
          const float c0 = float((w[ww] >> s) & kMask), c1 = float((w[ww] >> (16 + s)) & kMask);
          const int tb = gr.within + t;  // token within its block
          float s0, z0, s1, z1;
          if constexpr (ROLE == 0 && KC) {
            const u32 i = (tb / G) * D + c;
            u32 p0, p1;
            ldg64(gr.half + paramsOff + 4 * i, p0, p1);
            s0 = h2f(u16(p0 & 0xffff)), z0 = h2f(u16(p0 >> 16));
            s1 = h2f(u16(p1 & 0xffff)), z1 = h2f(u16(p1 >> 16));
          } else if constexpr (ROLE == 0) {
            param(gr.half, paramsOff, tb * (D / G) + c / G, s0, z0);
            s1 = s0, z1 = z0;
          } else {
            param(gr.half, paramsOff, tb * (D / G) + c / G, s0, z0);
            param(gr.half, paramsOff, (tb + 1) * (D / G) + c / G, s1, z1);
          }
          h0 = f2h(__fadd_rn(__fmul_rn(s0, c0), z0));
          h1 = f2h(__fadd_rn(__fmul_rn(s1, c1), z1));
        }
        const int t1 = ROLE == 0 ? t : t + 1, c1 = ROLE == 0 ? c + 1 : c;
        const int r0 = grp * 16 + t, r1 = grp * 16 + t1;
        if (r0 >= valid) h0 = 0;
        if (r1 >= valid) h1 = 0;
        if constexpr (ROLE == 0) {
          *reinterpret_cast<u32*>(&dst[r0 * kStride + c]) = u32(h0) | u32(h1) << 16;
        } else {
          dst[r0 * kStride + c] = h0;
          dst[r1 * kStride + c1] = h1;
        }
      }
    }
  }
}

// Rows holds a lane's two query rows (g and g + 8 of its warp's 16): their
// causal limits (last visible token; INT_MAX past the launch's rows), the
// online softmax's running max and denominator, and the output
// accumulators acc[n][e] (channels 8n + 2q + (e & 1), row g + 8·(e >> 1)).
template <int D>
struct Rows {
  int limit[2];
  float m[2], l[2];
  float acc[D / 8][4];
};

// tileStep runs one key tile of TN tokens starting at token tok0 (dequantized
// in sK, sV) for the warp's 16 rows: S = Q·Kᵀ, the soft-cap, the mask (tokens
// at or past tEnd, after a row's limit, or span or more before it), the
// online softmax, O += P·V. qa: the query A fragments of the tile's type.
// masked: whether any element can be masked (else the tests are skipped).
template <int D, int TN, bool BF>
BD_DEVICE void tileStep(Rows<D>& st, const u32 (&qa)[D / 16][4], const u16* sK, const u16* sV, int tok0, int tEnd, int span,
                        bool masked, int lane) {
  constexpr int kStride = D + kPad;
  const int g = lane / 4, qd = lane % 4;
  float s[TN / 8][4];
#pragma unroll
  for (int nb = 0; nb < TN / 8; nb++) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
  // S: B fragments of K (rows = tokens): ldmatrix.x4 gives two k-blocks.
  const int mi = lane / 8, mr = lane % 8;
  const u32 kBase = smemAddr(sK) + ((mr)*kStride + (mi / 2) * 16 + (mi % 2) * 8) * 2;
#pragma unroll
  for (int nb = 0; nb < TN / 8; nb++)
#pragma unroll
    for (int kb = 0; kb < D / 16; kb += 2) {
      u32 b0, b1, b2, b3;
      ldsm4(kBase + (nb * 8 * kStride + kb * 16) * 2, b0, b1, b2, b3);
      mmaT<BF>(s[nb], qa[kb], b0, b1);
      mmaT<BF>(s[nb], qa[kb + 1], b2, b3);
    }
#ifdef BD_SOFTCAP
#pragma unroll
  for (int nb = 0; nb < TN / 8; nb++)
#pragma unroll
    for (int e = 0; e < 4; e++) s[nb][e] = softcapScore(s[nb][e]);
#endif
  if (masked) {
#pragma unroll
    for (int nb = 0; nb < TN / 8; nb++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int t = tok0 + nb * 8 + 2 * qd + (e & 1), lim = st.limit[e >> 1];
        if (t >= tEnd || t > lim || lim - t >= span) s[nb][e] = kNegInf;
      }
  }
  // Online softmax (log2 domain) of rows g (e < 2) and g + 8 (e >= 2).
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float mx = kNegInf;
#pragma unroll
    for (int nb = 0; nb < TN / 8; nb++) mx = fmaxf(mx, fmaxf(s[nb][2 * r], s[nb][2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mNew = fmaxf(st.m[r], mx);
    if (mNew == kNegInf) {
      alpha[r] = 1.f;
#pragma unroll
      for (int nb = 0; nb < TN / 8; nb++) s[nb][2 * r] = s[nb][2 * r + 1] = 0.f;
    } else {
      alpha[r] = ex2(st.m[r] - mNew);
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < TN / 8; nb++) {
        s[nb][2 * r] = ex2(s[nb][2 * r] - mNew);
        s[nb][2 * r + 1] = ex2(s[nb][2 * r + 1] - mNew);
        sum += s[nb][2 * r] + s[nb][2 * r + 1];
      }
      st.l[r] = st.l[r] * alpha[r] + sum;
    }
    st.m[r] = mNew;
  }
#pragma unroll
  for (int n = 0; n < D / 8; n++) {
    st.acc[n][0] *= alpha[0], st.acc[n][1] *= alpha[0];
    st.acc[n][2] *= alpha[1], st.acc[n][3] *= alpha[1];
  }
  // O += P·V: P's accumulators are the A fragments of 16 tokens; V's B
  // fragments by ldmatrix.trans (rows = tokens), two channel blocks a load.
  const u32 vBase = smemAddr(sV) + (((mi % 2) * 8 + mr) * kStride + (mi / 2) * 8) * 2;
#pragma unroll
  for (int kt = 0; kt < TN / 16; kt++) {
    u32 a[4];
    a[0] = pack2T<BF>(s[2 * kt][0], s[2 * kt][1]);
    a[1] = pack2T<BF>(s[2 * kt][2], s[2 * kt][3]);
    a[2] = pack2T<BF>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
    a[3] = pack2T<BF>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      u32 b0, b1, b2, b3;
      ldsm4t(vBase + (kt * 16 * kStride + n * 8) * 2, b0, b1, b2, b3);
      mmaT<BF>(st.acc[n], a, b0, b1);
      mmaT<BF>(st.acc[n + 1], a, b2, b3);
    }
  }
}

// prefill_fa is the kernel (the opening comment). Template: D head dim; KBITS,
// VBITS 16 (fp16, or bf16 where BF), 8, 4, 2; KC keys per channel; TN key tile.
// Grid (row tiles, Hkv, B), kThreads threads.
template <int D, int KBITS, int VBITS, bool KC, bool BF, int TN>
__global__ void __launch_bounds__(kThreads) prefill_fa(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const u8* __restrict__ resK, const u8* __restrict__ resV, const int* __restrict__ resSlots,
    const int* __restrict__ lens, const u16* __restrict__ q, u16* __restrict__ out, float* __restrict__ out32,
    int Hq, int Hkv, int Tq, int Nr, int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV,
    float scaleLog2, int window) {
  static_assert(!BF || (KBITS == 16 && VBITS == 16), "bf16 blocks are 16-bit");
  static_assert(TN % 16 == 0 && (D / 16) % 2 == 0, "tile shapes");
  constexpr int kStride = D + kPad;
  __shared__ __align__(16) u16 sK[TN * kStride];
  __shared__ __align__(16) u16 sV[TN * kStride];

  const int b = blockIdx.z, h = blockIdx.y;
  const int tileRow = gridDim.x - 1 - blockIdx.x;  // the longest row tiles first
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, qd = lane % 4;
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = tileRow * kRows;
  const int L = lens[b];
  const int nrows = min(kRows, R - row0);

  // The warp's query rows as A fragments: a0 (row g, ch 2q, 2q+1), a1 (row
  // g+8), a2 (row g, ch 2q+8, 2q+9), a3 (row g+8) of each 16-channel block.
  Rows<D> st;
  u32 qa[D / 16][4];
  u32 qb[BF ? D / 16 : 1][4];
  {
    float qf[2][D / 16][4];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int row = row0 + warp * 16 + g + 8 * r;
      const bool ok = row < R;
      const int i = ok ? row / group : 0, hq = h * group + (ok ? row % group : 0);
      const u16* qp = q + ((size_t(b) * Tq + i) * Hq + hq) * D;
#pragma unroll
      for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int c = 16 * kb + 2 * qd + (e & 1) + 8 * (e >> 1);
          qf[r][kb][e] = ok ? h2f(qp[c]) * scaleLog2 : 0.f;
        }
      st.limit[r] = ok ? L - Tq + row / group : 0x7fffffff;
    }
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++) {
      qa[kb][0] = pack2(qf[0][kb][0], qf[0][kb][1]);
      qa[kb][1] = pack2(qf[1][kb][0], qf[1][kb][1]);
      qa[kb][2] = pack2(qf[0][kb][2], qf[0][kb][3]);
      qa[kb][3] = pack2(qf[1][kb][2], qf[1][kb][3]);
      if constexpr (BF) {
        qb[kb][0] = pack2T<true>(qf[0][kb][0], qf[0][kb][1]);
        qb[kb][1] = pack2T<true>(qf[1][kb][0], qf[1][kb][1]);
        qb[kb][2] = pack2T<true>(qf[0][kb][2], qf[0][kb][3]);
        qb[kb][3] = pack2T<true>(qf[1][kb][2], qf[1][kb][3]);
      }
    }
  }
  st.m[0] = st.m[1] = kNegInf;
  st.l[0] = st.l[1] = 0.f;
#pragma unroll
  for (int n = 0; n < D / 8; n++) st.acc[n][0] = st.acc[n][1] = st.acc[n][2] = st.acc[n][3] = 0.f;

  // The CTA's visible range: up to its last row's limit; from its first
  // row's window start (rounded down to a fragment group).
  const int span = windowSpan(window);
  const int lastRow = row0 + nrows - 1;
  const int tEnd = min(L, L - Tq + lastRow / group + 1);
  const int tBegin = window > 0 ? max(0, L - Tq + row0 / group - window + 1) / 16 * 16 : 0;
  // A warp's tile needs the mask unless every one of its rows sees the
  // whole tile: from its first row's window start to its first row's limit.
  const int wRow0 = row0 + warp * 16, wRowN = min(R, wRow0 + 16) - 1;
  const int wSeeTo = wRow0 < R ? L - Tq + wRow0 / group : -1;                                  // every row sees <= this
  const int wSeeFrom = window > 0 && wRow0 < R ? L - Tq + wRowN / group - window + 1 : -0x7fffffff;  // and >= this
  const int nPacked = L / Nr, packedEnd = nPacked * Nr;
  const size_t resOff = (size_t(resSlots ? resSlots[b] : b) * Hkv + h) * Nr * D * 2;

  // Packed tokens, then the residual's: tiles of TN tokens from tBegin.
  for (int part = 0; part < 2; part++) {
    const int from = part == 0 ? tBegin : max(tBegin, packedEnd);
    const int to = part == 0 ? min(tEnd, packedEnd) : tEnd;
    for (int tok0 = from; tok0 < to; tok0 += TN) {
      const int valid = to - tok0;
      __syncthreads();  // every warp has read the last tile
      if (part == 0) {
        auto at = [&](int grp, bool v) {
          const int tok = tok0 + grp * 16, blk = tok / Nr, within = tok - blk * Nr;
          const u8* kh = pool + (size_t(blockTable[b * maxBlocks + min(blk, nPacked - 1)]) * Hkv + h) * blockBytes;
          const u8* hf = v ? kh + kBytes : kh;
          const int bits = v ? VBITS : KBITS;
          return Group{hf + (within / 16) * (16 * D * bits / 8), hf, within};
        };
        dequantHalf<D, KBITS, 0, KC, TN>(sK, [&](int grp) { return at(grp, false); }, valid, gK, kParamsOff, tid);
        dequantHalf<D, VBITS, 1, false, TN>(sV, [&](int grp) { return at(grp, true); }, valid, gV, vParamsOff, tid);
      } else {
        auto at = [&](const u8* res, int grp) {
          // (a padding group past the slot's Nr tokens reads its last group: zeroed anyway)
          const int within = min(tok0 - packedEnd + grp * 16, Nr - 16);
          return Group{res + resOff + size_t(within) * D * 2, nullptr, within};
        };
        dequantHalf<D, 16, 0, false, TN>(sK, [&](int grp) { return at(resK, grp); }, valid, 1, 0, tid);
        dequantHalf<D, 16, 1, false, TN>(sV, [&](int grp) { return at(resV, grp); }, valid, 1, 0, tid);
      }
      __syncthreads();
      if (wRow0 >= R) continue;  // a warp past the launch's rows (its rows are not written)
      const bool masked = tok0 + TN > min(to, wSeeTo + 1) || tok0 < wSeeFrom;
      if constexpr (BF) {
        if (part == 0) {
          tileStep<D, TN, true>(st, qb, sK, sV, tok0, to, span, masked, lane);
          continue;
        }
      }
      tileStep<D, TN, false>(st, qa, sK, sV, tok0, to, span, masked, lane);
    }
  }
  if (wRow0 >= R) return;
  // Denominators over the quad, then O / l to out (fp16) and out32.
#pragma unroll
  for (int r = 0; r < 2; r++) {
    st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], 1);
    st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = wRow0 + g + 8 * r;
    if (row >= R) continue;
    const float inv = 1.f / st.l[r];
    const int i = row / group, hq = h * group + row % group;
    const size_t o = ((size_t(b) * Tq + i) * Hq + hq) * D;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      const int c = 8 * n + 2 * qd;
      const u32 hv = pack2(st.acc[n][2 * r] * inv, st.acc[n][2 * r + 1] * inv);
      *reinterpret_cast<u32*>(&out[o + c]) = hv;
      if (out32 != nullptr) *reinterpret_cast<float2*>(&out32[o + c]) = h2x2(hv);
    }
  }
}

}  // namespace pf

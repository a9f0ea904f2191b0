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
//   1. the CTA puts the tile's K and V into shared memory in kv.MMA's fp16
//      fragment order (the stage layout below): 16-bit halves and the
//      residual by cp.async, low-bit halves dequantized once (code·s + z by
//      one f16x2 fma) from code words loaded a tile ahead into registers;
//      two stages, so the next tile's loads run under this tile's math;
//   2. each warp: S = Q·Kᵀ (the stage's key fragments are S's B operands
//      as they lie), the soft-cap, the mask (the rows' causal limits, the
//      window, the tile's end), the online softmax in the log2 domain
//      (ex2), P from the accumulators straight into A fragments, O += P·V
//      (the value fragments are its B operands as they lie).
// Packed tokens run first, then the residual's (fp16 tiles), so a tile is
// of one type. Padding tokens of a tile (past the causal end or the packed
// part) read finite data of the sequence's blocks and are masked.
// The output is O / l, rounded to fp16 (and widened to out32 where given).
// No splits and no atomics: deterministic, and a row's bits depend on its
// sequence and chunk alone.
//
// Tile constants: TN = 64 keys (32 at D = 256: registers); two stages of
// 2·TN·D fp16 each (64 KiB at D = 128: two CTAs an SM).
//
// Versions (H100, Llama-3.1-8B shapes, bitdecode run --max-tokens 1, 32K
// prompt, whole prefill; docs/perf/prefill.md):
//   v1 (commit 74365ab1) one stage, K and V dequantized to token-major
//      [TN][D + 8] rows (ldmatrix, .trans for V), per-element code and
//      params, the tile's global loads after the barrier: fp16 5.28 -> 4.96 s,
//      int4 3.24 -> 6.72 s (worse: 255 registers with spills, the loads and
//      the dequantization in series with the math).
//   v2 the fragment-order stage (no transposition, one 16-byte load per
//      operand group), cp.async and a register prefetch a tile ahead,
//      f16x2 dequantization by register: fp16 5.27 -> 3.14 s, int4 3.24 ->
//      4.35 s (still worse: two runtime divisions and two param loads per
//      dequantized register).
//   v3 the groups as template arguments, each pair loaded once per word
//      (pairParams): int4 32K 3.21 -> 3.08 s (main's 3.21), fp16 3.10 s
//      (main's 5.27); one 512-token chunk at 32K fp16 1839 us (150 TFLOP/s,
//      2.2x decode_mma.cu's plan), int4 1794 us (1.05x).
//      Rejected: the math in steps of 32 or 16 keys (BITDECODE_PREFILL_STEP,
//      TC): fp16 chunk at 32K 1826 -> 1900 / 2689 us.
// Go wrapper and routing: prefill.go (PlanPrefill, PrefillRoute); test:
// prefill_test.go (against attn.Reference and decode_mma.cu's prefill).

#include "bitdecode.cuh"

namespace pf {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16 * kWarps;  // query rows of a CTA

// Group is where one 16-token fragment group of a half lives: its codes
// (kv.MMA order), the half whose (scale, zero) pairs it takes, and its first
// token's place in its block.
struct Group {
  const u8* codes;
  const u8* half;
  int within;
};

// Stage layout (v2): a tile's K and V halves in shared memory are kept in
// kv.MMA's 16-bit fragment order, [TN/16 groups][D/8 chunks of 16 bytes
// ordered (chunk, lane)], exactly the fp16 layout of a packed group. Lane
// (g, q)'s chunk kb of a key group holds its A fragment a0..a3 of channel
// block kb (rows = tokens g, g+8), which are the B fragments of S = Q·Kᵀ:
// (a0, a2) for tokens 0-7 of the group, (a1, a3) for tokens 8-15. Its chunk
// mb of a value group holds V^T's A fragment of channel block mb (rows =
// channels g, g+8; columns = tokens), the B fragments of O += P·V: (a0, a2)
// for channels 16mb + 0-7, (a1, a3) for 16mb + 8-15. So each lane reads its
// operands with one 16-byte load per (group, block), no transposition;
// 16-bit halves (fp16, bf16, the residual) are copied as they are
// (cp.async), low-bit halves dequantized once into the same order.

// Quant is the raw code words of the low-bit half (BITS < 16) of one tile
// that a thread dequantizes: its kUnits units, each one lane's chunk j of a
// fragment group (the decode kernels' 16-byte loads), loaded a tile ahead.
template <int D, int BITS, int TN>
struct Quant {
  using F = Frag<D, (BITS < 16 ? BITS : 8)>;
  static constexpr int kWords = F::kChunk / 4;                           // words per unit
  static constexpr int kUnits = (TN / 16 * 32 * F::kChunks) / kThreads;  // units per thread
  u32 w[(BITS < 16 ? kUnits * kWords : 1)];
};

// unitOf returns unit k of thread tid: its group, chunk and lane.
template <int D, int BITS>
BD_DEVICE void unitOf(int k, int tid, int& grp, int& j, int& lane) {
  using F = Frag<D, BITS>;
  const int u = tid + k * kThreads;
  grp = u / (32 * F::kChunks);
  const int rem = u % (32 * F::kChunks);
  j = rem / 32, lane = rem % 32;
}

// fetchQuant loads thread tid's units of a low-bit half (at(grp): the
// tile's groups) into r.
template <int D, int BITS, int TN, typename AT>
BD_DEVICE void fetchQuant(Quant<D, BITS, TN>& r, AT at, int tid) {
  using F = Frag<D, BITS>;
  using Q = Quant<D, BITS, TN>;
  static_assert((TN / 16 * 32 * F::kChunks) % kThreads == 0, "whole units per thread");
#pragma unroll
  for (int k = 0; k < Q::kUnits; k++) {
    int grp, j, lane;
    unitOf<D, BITS>(k, tid, grp, j, lane);
    const u8* p = at(grp).codes + (j * 32 + lane) * F::kChunk;
    u32* w = &r.w[k * Q::kWords];
    if constexpr (F::kChunk == 16) {
      ldg128(p, w[0], w[1], w[2], w[3]);
    } else if constexpr (F::kChunk == 8) {
      ldg64(p, w[0], w[1]);
    } else {
      w[0] = ldg32(p);
    }
  }
}

// pairParams returns the (scale, zero) pairs of a lane's fp16 register of
// fragment block blk, rows hiRow, columns hiCol (a = hiRow + 2·hiCol: a0..a3)
// as f16x2 (s2, z2), for the register's two elements: two channels of a
// token (keys) or two tokens of a channel (values). Pair indices are package
// kv's ParamIndex in the half's params at pr: keys per channel (KC)
// (t/G)·D + c, keys per token t·(D/G) + c/G, values t·(D/G) + c/G (G the
// group: tokens for KC, channels otherwise; t a token of the block). The
// indices are written so that registers sharing a pair compute the same
// expression (rows g and g + 8 share a KC key group, G >= 16; a 16-channel
// block shares a channel group, G >= 16; every block shares it, G >= D), and
// the compiler loads it once.
template <int D, int ROLE, bool KC, int G>
BD_DEVICE void pairParams(const u8* pr, int within, int g, int qd, int blk, int hiRow, int hiCol, u32& s2, u32& z2) {
  if constexpr (ROLE == 0 && KC) {
    const int kg = G >= 16 ? within / G : (within + g + 8 * hiRow) / G;
    u32 p0, p1;
    ldg64(pr + 4 * (kg * D + blk * 16 + 2 * qd + 8 * hiCol), p0, p1);
    s2 = prmt(p0, p1, 0x5410u), z2 = prmt(p0, p1, 0x7632u);
  } else if constexpr (ROLE == 0) {
    const int cg = G >= D ? 0 : G >= 16 ? blk * 16 / G : (blk * 16 + 8 * hiCol) / G;
    const u32 p0 = ldg32(pr + 4 * ((within + g + 8 * hiRow) * (D / G) + cg));
    s2 = prmt(p0, p0, 0x1010u), z2 = prmt(p0, p0, 0x3232u);
  } else {
    const int cg = G >= D ? 0 : G >= 16 ? blk * 16 / G : (blk * 16 + 8 * hiRow) / G;
    const int t = within + 2 * qd + 8 * hiCol;
    const u32 p0 = ldg32(pr + 4 * (t * (D / G) + cg)), p1 = ldg32(pr + 4 * ((t + 1) * (D / G) + cg));
    s2 = prmt(p0, p1, 0x5410u), z2 = prmt(p0, p1, 0x7632u);
  }
}

// storeQuant dequantizes thread tid's units in r into dst (the stage's half,
// fragment order): register position p of a word (codes 2i, 2i+1 of the
// lane's fragment, code<BITS>'s exact integers as a half2) becomes
// fma(code, s, z) in f16x2, one rounding of the exact code·s + z (package
// kv's Dequant to float32, then fp16, rounds twice: within the format's
// bound), with pairParams' pairs (G: the half's group).
template <int D, int BITS, int ROLE, bool KC, int G, int TN, typename AT>
BD_DEVICE void storeQuant(u8* __restrict__ dst, const Quant<D, BITS, TN>& r, AT at, int paramsOff, int tid) {
  using Q = Quant<D, BITS, TN>;
  constexpr int kRegsPerWord = 16 / BITS;  // f16x2 registers a word of codes unpacks to
#pragma unroll
  for (int k = 0; k < Q::kUnits; k++) {
    int grp, j, lane;
    unitOf<D, BITS>(k, tid, grp, j, lane);
    const int g = lane / 4, qd = lane % 4;
    const Group gr = at(grp);
    const u8* pr = gr.half + paramsOff;
    u8* gdst = dst + grp * (16 * D * 2);
#pragma unroll
    for (int ww = 0; ww < Q::kWords; ww++) {
      const u32 w = r.w[k * Q::kWords + ww], w8 = w >> 8;
      const int wi = j * Q::kWords + ww;  // the word's index among the lane's
      u32 h[kRegsPerWord];
#pragma unroll
      for (int p = 0; p < kRegsPerWord; p++) {
        // fp16 register reg = wi·R + p of the lane (elements 2reg, 2reg+1):
        // A fragment a = reg % 4 of block reg / 4.
        const int reg = wi * kRegsPerWord + p;
        const int a = kRegsPerWord >= 4 ? p % 4 : reg % 4;
        u32 s2, z2;
        pairParams<D, ROLE, KC, G>(pr, gr.within, g, qd, reg / 4, a % 2, a / 2, s2, z2);
        h[p] = hfma2(code<BITS>(w, w8, p), s2, z2);
      }
      // The word's registers are lane registers wi·R .. wi·R + R - 1 (R =
      // kRegsPerWord), whole or half 16-byte chunks of the fp16 order.
#pragma unroll
      for (int p = 0; p < kRegsPerWord; p += 4 < kRegsPerWord ? 4 : kRegsPerWord) {
        const int reg = wi * kRegsPerWord + p;
        u8* d = gdst + ((reg / 4) * 32 + lane) * 16 + (reg % 4) * 4;
        if constexpr (kRegsPerWord >= 4) {
          *reinterpret_cast<uint4*>(d) = make_uint4(h[p], h[p + 1], h[p + 2], h[p + 3]);
        } else {
          *reinterpret_cast<uint2*>(d) = make_uint2(h[0], h[1]);
        }
      }
    }
  }
}

// copyHalf starts the cp.async copies of a 16-bit half of a tile (at(grp):
// the tile's groups) into dst, in their fragment order (not committed).
template <int D, int TN, typename AT>
BD_DEVICE void copyHalf(u8* __restrict__ dst, AT at, int tid) {
  constexpr int kChunksPerGroup = 16 * D * 2 / 16;
  static_assert((TN / 16 * kChunksPerGroup) % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = tid; i < TN / 16 * kChunksPerGroup; i += kThreads) {
    const int grp = i / kChunksPerGroup, cc = i % kChunksPerGroup;
    cpAsync16(dst + grp * (16 * D * 2) + cc * 16, at(grp).codes + cc * 16);
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

// tileStep runs one key tile of TN tokens starting at token tok0 (the stage
// sK, sV, fragment order) for the warp's 16 rows: S = Q·Kᵀ, the soft-cap,
// the mask (tokens at or past tEnd, after a row's limit, or span or more
// before it), the online softmax (log2 domain, ex2), O += P·V. qa: the
// query A fragments of the tile's type (bf16 where BF). masked: whether
// any element can be masked (else the tests are skipped).
template <int D, int TN, bool BF>
BD_DEVICE void tileStep(Rows<D>& st, const u32 (&qa)[D / 16][4], const u8* sK, const u8* sV, int tok0, int tEnd, int span,
                        bool masked, int lane) {
  const int qd = lane % 4;
  float s[TN / 8][4];
#pragma unroll
  for (int nb = 0; nb < TN / 8; nb++) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
  for (int gi = 0; gi < TN / 16; gi++)
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++) {
      const uint4 a = *reinterpret_cast<const uint4*>(sK + gi * (16 * D * 2) + (kb * 32 + lane) * 16);
      mmaT<BF>(s[2 * gi], qa[kb], a.x, a.z);
      mmaT<BF>(s[2 * gi + 1], qa[kb], a.y, a.w);
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
#pragma unroll
  for (int kt = 0; kt < TN / 16; kt++) {
    u32 a[4];
    a[0] = pack2T<BF>(s[2 * kt][0], s[2 * kt][1]);
    a[1] = pack2T<BF>(s[2 * kt][2], s[2 * kt][3]);
    a[2] = pack2T<BF>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
    a[3] = pack2T<BF>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
#pragma unroll
    for (int mb = 0; mb < D / 16; mb++) {
      const uint4 b = *reinterpret_cast<const uint4*>(sV + kt * (16 * D * 2) + (mb * 32 + lane) * 16);
      mmaT<BF>(st.acc[2 * mb], a, b.x, b.z);
      mmaT<BF>(st.acc[2 * mb + 1], a, b.y, b.w);
    }
  }
}

// prefillSmem is the dynamic shared memory of prefill_fa: two stages of a
// tile's K and V halves, fp16 fragment order (prefill.go's prefillSmem).
template <int D, int TN>
constexpr int prefillSmem() {
  return 2 * 2 * TN * D * 2;
}

// prefill_fa is the kernel (the opening comment). Template: D head dim; KBITS,
// VBITS 16 (fp16, or bf16 where BF), 8, 4, 2; KC keys per channel; GK, GV
// the key and value groups (tokens for KC keys, channels otherwise; 1 for
// 16-bit halves); TN key tile (loads and stages), TC its math's step.
// Grid (row tiles, Hkv, B), kThreads threads, prefillSmem<D, TN>() bytes of
// dynamic shared memory.
template <int D, int KBITS, int VBITS, bool KC, bool BF, int GK, int GV, int TN, int TC>
__global__ void __launch_bounds__(kThreads) prefill_fa(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const u8* __restrict__ resK, const u8* __restrict__ resV, const int* __restrict__ resSlots,
    const int* __restrict__ lens, const u16* __restrict__ q, u16* __restrict__ out, float* __restrict__ out32,
    int Hq, int Hkv, int Tq, int Nr, int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV,
    float scaleLog2, int window) {
  static_assert(!BF || (KBITS == 16 && VBITS == 16), "bf16 blocks are 16-bit");
  static_assert(TN % 16 == 0 && TC % 16 == 0 && TN % TC == 0 && (D / 16) % 2 == 0, "tile shapes");
  extern __shared__ __align__(16) u8 smem[];
  constexpr int kHalfBytes = TN * D * 2;
  auto stageK = [&](int st) { return smem + st * 2 * kHalfBytes; };
  auto stageV = [&](int st) { return smem + st * 2 * kHalfBytes + kHalfBytes; };

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
      // Rows g and g + 8 of the warp's 16, as the decode kernels read theirs
      // (zeros past the launch's R rows).
      const int r0 = row0 + warp * 16 + 8 * r, row = r0 + g;
      loadQueryFrag<D>(q, b, Tq, Hq, h, group, r0, R - r0, g, qd, scaleLog2, qf[r]);
      st.limit[r] = row < R ? L - Tq + row / group : 0x7fffffff;
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
  // whole tile: from its last row's window start to its first row's limit.
  const int wRow0 = row0 + warp * 16, wRowN = min(R, wRow0 + 16) - 1;
  const int wSeeTo = wRow0 < R ? L - Tq + wRow0 / group : -1;
  const int wSeeFrom = window > 0 && wRow0 < R ? L - Tq + wRowN / group - window + 1 : -0x7fffffff;
  const int nPacked = L / Nr, packedEnd = nPacked * Nr;
  const size_t resOff = (size_t(resSlots ? resSlots[b] : b) * Hkv + h) * Nr * D * 2;

  // The tiles: packed tokens [tBegin, to0) first, then the residual's
  // [from1, tEnd), TN tokens each (a tile is of one type).
  const int to0 = min(tEnd, packedEnd), from1 = max(tBegin, packedEnd);
  const int nT0 = to0 > tBegin ? (to0 - tBegin + TN - 1) / TN : 0;
  const int nT1 = tEnd > from1 ? (tEnd - from1 + TN - 1) / TN : 0;
  auto tileTok = [&](int ti) { return ti < nT0 ? tBegin + ti * TN : from1 + (ti - nT0) * TN; };
  // Group grp of packed tile tok0 in half v (0: K, 1: V); padding groups
  // past the packed tokens read the last packed block (finite, masked).
  auto packedAt = [&](int tok0, int grp, int v) {
    const int tok = tok0 + grp * 16, blk = tok / Nr, within = tok - blk * Nr;
    const u8* kh = pool + (size_t(blockTable[b * maxBlocks + min(blk, nPacked - 1)]) * Hkv + h) * blockBytes;
    const u8* hf = v ? kh + kBytes : kh;
    return Group{hf + (within / 16) * (16 * D * (v ? VBITS : KBITS) / 8), hf, within};
  };
  // Group grp of residual tile tok0 (a padding group past the slot's Nr
  // tokens reads its last group: finite, masked).
  auto resAt = [&](const u8* res, int tok0, int grp) {
    const int within = min(tok0 - packedEnd + grp * 16, Nr - 16);
    return Group{res + resOff + size_t(within) * D * 2, nullptr, within};
  };
  Quant<D, KBITS, TN> rawK;
  Quant<D, VBITS, TN> rawV;
  // fetch starts tile ti's loads into stage sg: cp.async for 16-bit
  // halves, registers (rawK, rawV) for low-bit ones.
  auto fetch = [&](int ti, int sg) {
    const int tok0 = tileTok(ti);
    if (ti < nT0) {
      if constexpr (KBITS == 16) copyHalf<D, TN>(stageK(sg), [&](int grp) { return packedAt(tok0, grp, 0); }, tid);
      else fetchQuant<D, KBITS, TN>(rawK, [&](int grp) { return packedAt(tok0, grp, 0); }, tid);
      if constexpr (VBITS == 16) copyHalf<D, TN>(stageV(sg), [&](int grp) { return packedAt(tok0, grp, 1); }, tid);
      else fetchQuant<D, VBITS, TN>(rawV, [&](int grp) { return packedAt(tok0, grp, 1); }, tid);
    } else {
      copyHalf<D, TN>(stageK(sg), [&](int grp) { return resAt(resK, tok0, grp); }, tid);
      copyHalf<D, TN>(stageV(sg), [&](int grp) { return resAt(resV, tok0, grp); }, tid);
    }
    cpAsyncCommit();
  };
  const int nTiles = nT0 + nT1;
  if (nTiles > 0) fetch(0, 0);
  for (int ti = 0; ti < nTiles; ti++) {
    const int sg = ti & 1, tok0 = tileTok(ti);
    if (ti < nT0) {  // the low-bit halves of tile ti, from registers (stage sg was last read two tiles ago)
      if constexpr (KBITS < 16) storeQuant<D, KBITS, 0, KC, GK, TN>(stageK(sg), rawK, [&](int grp) { return packedAt(tok0, grp, 0); }, kParamsOff, tid);
      if constexpr (VBITS < 16) storeQuant<D, VBITS, 1, false, GV, TN>(stageV(sg), rawV, [&](int grp) { return packedAt(tok0, grp, 1); }, vParamsOff, tid);
    }
    cpAsyncWait<0>();
    __syncthreads();  // stage sg complete; every warp done with tile ti - 1 (stage sg ^ 1)
    if (ti + 1 < nTiles) fetch(ti + 1, sg ^ 1);
    if (wRow0 >= R) continue;  // a warp past the launch's rows (its rows are not written)
    const int to = ti < nT0 ? to0 : tEnd;
    // The tile's math in steps of TC keys (each its own online-softmax
    // step: TC/8·4 score registers a lane).
#pragma unroll
    for (int c0 = 0; c0 < TN; c0 += TC) {
      const int t0 = tok0 + c0;
      const bool masked = t0 + TC > min(to, wSeeTo + 1) || t0 < wSeeFrom;
      const u8* sKc = stageK(sg) + c0 / 16 * (16 * D * 2);
      const u8* sVc = stageV(sg) + c0 / 16 * (16 * D * 2);
      if constexpr (BF) {
        if (ti < nT0) {
          tileStep<D, TC, true>(st, qb, sKc, sVc, t0, to, span, masked, lane);
          continue;
        }
      }
      tileStep<D, TC, false>(st, qa, sKc, sVc, t0, to, span, masked, lane);
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

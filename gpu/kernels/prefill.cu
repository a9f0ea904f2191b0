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
// 28: a 32K prompt's fp16 prefill 5.26 s, ~36 TB of L2 reads). Here a CTA
// takes 16·MT·kWarps rows and dequantizes each K and V tile once, into
// shared memory, for all of them.
//
// Tensors (the decode kernels', decode.go's DecodeBuffers):
//   pool   [blocks][Hkv][blockBytes]  packed blocks, kv.MMA order (K half, V half)
//   blockTable [B][maxBlocks] int32, lens [B] int32 (cached tokens, the chunk's included)
//   resK, resV [slots][Hkv][Nr][D] fp16, kv.MMA order (the newest L % Nr tokens)
//   q   [B][Tq][Hq][D] fp16;  out [B][Tq][Hq][D] fp16;  out32 (optional) the same in float32
// Rows: row r of KV head h is query token r / G, head h·G + r % G (G = Hq/Hkv:
// the decode kernels' mapping; any G, MQA included).
//
// Work: a CTA per (row tile of rowsOf<MT>() = 16·MT·kWarps rows, KV head,
// sequence) of KS warp groups of kWarps = 4 warps; warp w of each group
// owns rows 16·MT·w .. 16·MT·(w+1) - 1 of the tile, MT m16 tiles (v4: MT =
// 2 up to D = 128, so each key and value fragment read from shared memory
// feeds two mmas; 1 at D = 256). The rows' query, as mma.sync.m16n8k16 A
// fragments (fp16, scale·log2(e) folded in; a bf16 copy for bf16 blocks),
// lies in the Q stage in shared memory, one 16-byte load per (m16 tile,
// 16-channel block) (v4: out of registers, which hold the MT tiles'
// accumulators and scores). Group ks takes key tiles ks, ks + KS, ... of
// TN tokens (v4: KS = 2, so that a launch of one CTA an SM still runs
// 8 warps an SM), each with its own two stages; per tile:
//   1. the group puts the tile's K and V into its stage in kv.MMA's fp16
//      fragment order (the stage layout below): 16-bit halves and the
//      residual by cp.async, low-bit halves dequantized once (code·s + z by
//      one f16x2 fma) from code words copied a tile ahead into its raw
//      stage (cp.async; v2-v3: registers); two stages, so the next tile's
//      copies run under this tile's math;
//   2. each warp: S = Q·Kᵀ (the stage's key fragments are S's B operands
//      as they lie), the soft-cap, the mask (the rows' causal limits, the
//      window, the tile's end), the online softmax in the log2 domain
//      (ex2), P from the accumulators straight into A fragments, O += P·V
//      (the value fragments are its B operands as they lie).
// At the end group 0 merges the groups' running max, denominators and
// accumulators of each row in a fixed order (group 1's handed over in
// shared memory).
// Packed tokens run first, then the residual's (fp16 tiles), so a tile is
// of one type. Padding tokens of a tile (past the causal end or the packed
// part) read finite data of the sequence's blocks and are masked.
// The output is O / l, rounded to fp16 (and widened to out32 where given).
// No splits across CTAs and no atomics: deterministic, and a row's bits
// depend on its sequence and chunk alone.
//
// Tile constants: TN = 64 keys (32 at D = 256: registers); a group's two
// stages of 2·TN·D fp16 each (64 KiB at D = 128); the Q stage rows·D fp16
// (32 KiB at D = 128, MT = 2). At D = 128, MT = 2, KS = 2: 160-192 KiB and
// 256 threads of 255 registers, one CTA an SM.
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
//   v4 (session 29) two m16 tiles a warp (MT = 2, 128 rows a CTA), so each
//      key and value fragment loaded from shared memory feeds two mmas; the
//      query in a Q stage in shared memory and the low-bit code words copied
//      by cp.async into a raw stage (registers for 128 accumulators and 64
//      scores a lane); two warp groups a CTA splitting its key tiles (KS =
//      2), merged at the end; MT by launch (prefillLaunchMT: 1 while one
//      sequence's 64-row CTAs fit one wave). Predicted: 1.2-1.6x the
//      kernel (toward ~250 TFLOP/s), the 32K prompt toward 2.5-2.7 s.
//      Measured (bench/results/2026-11-27-prefill-29): MT = 2 alone (KS = 1)
//      slower than MT = 1 (fp16 chunk at 32K 1513 against 1174 us; the
//      first code 0.90x main: Llama-3.1-8B's chunk is 128 CTAs of 128 rows,
//      one 4-warp CTA an SM); with KS = 2, beside main
//      in one call, fp16 1853 -> 1093 us (1.70x, 252 TFLOP/s), int4 1705 ->
//      1304 (1.31x), bf16 1.78x, int8 1.71x, D 256 2.9x; no spill beyond 44
//      bytes (int8 at D 256: 1.2 KB in v3). 32K prompt fp16 3.14 -> 2.39 s,
//      int4 3.06 -> 2.64 s. Taken apart (call 5): at v3's shape (MT = 1,
//      KS = 1) this code already runs fp16 1.54x (163 registers instead of
//      245: the query and code words out of them); MT = 2 with KS = 2 adds
//      1.07x for fp16, 1.26-1.32x for int4 and int8.
//   v5 (session 30) dequant_blocks: a low-bit layout's chunk writes the
//      sequence's packed blocks once as fp16 (storeQuant into global
//      memory) and runs prefill_fa<D, 16, 16, ..> over the copy, the same
//      bits (PrefillPlan.LaunchDequant). One 512-token chunk at 32K keys:
//      int4 1325 -> 1184 us, int8 1465 -> 1183, k4v2 1284 -> 1177 (fp16
//      1109); the 32K prompt with an int4 cache 2.45 -> 2.31 s
//      (bench/results/2026-11-27-prefill-30).
// Go wrapper and routing: prefill.go (PlanPrefill, PrefillRoute); test:
// prefill_test.go (against attn.Reference and decode_mma.cu's prefill).

#include "bitdecode.cuh"

namespace pf {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// rowsOf is the query rows of a CTA whose warps own MT m16 tiles each
// (prefill.go's prefillRowsOf).
template <int MT>
constexpr int rowsOf() {
  return 16 * MT * kWarps;
}

// kFragBytes is one warp's A (or B) fragment of a 16x16 block in fragment
// order: 32 lanes of 16 bytes.
constexpr int kFragBytes = 32 * 16;

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

// Quant is the geometry of the raw code words of a low-bit half (BITS <
// 16) of one tile: kUnits units a thread, each one lane's chunk j of a
// fragment group (the decode kernels' 16-byte loads), copied a tile ahead
// into the half's raw stage (unit u = tid + k·kThreads at u·kChunk) by the
// thread that dequantizes it (v4: shared memory, not registers, which the
// two m16 tiles' accumulators and scores need).
template <int D, int BITS, int TN>
struct Quant {
  using F = Frag<D, (BITS < 16 ? BITS : 8)>;
  static constexpr int kWords = F::kChunk / 4;                           // words per unit
  static constexpr int kUnits = (TN / 16 * 32 * F::kChunks) / kThreads;  // units per thread
  static constexpr int kBytes = BITS < 16 ? TN * D * BITS / 8 : 0;       // the half's raw stage
};

// cpAsync8 is cpAsync16 for 8 bytes (cp.async.ca: .cg copies 16 only).
BD_DEVICE void cpAsync8(void* smem, const void* gmem) {
  u32 s;
  asm("{ .reg .u64 a;\n cvta.to.shared.u64 a, %1;\n cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(s), "l"(gmem) : "memory");
}

// unitOf returns unit k of thread tid: its group, chunk and lane.
template <int D, int BITS>
BD_DEVICE void unitOf(int k, int tid, int& grp, int& j, int& lane) {
  using F = Frag<D, BITS>;
  const int u = tid + k * kThreads;
  grp = u / (32 * F::kChunks);
  const int rem = u % (32 * F::kChunks);
  j = rem / 32, lane = rem % 32;
}

// fetchQuant starts the cp.async copies of thread tid's units of a low-bit
// half (at(grp): the tile's groups) into its raw stage raw (not committed).
template <int D, int BITS, int TN, typename AT>
BD_DEVICE void fetchQuant(u8* __restrict__ raw, AT at, int tid) {
  using F = Frag<D, BITS>;
  using Q = Quant<D, BITS, TN>;
  static_assert((TN / 16 * 32 * F::kChunks) % kThreads == 0, "whole units per thread");
  static_assert(F::kChunk == 16 || F::kChunk == 8, "16- or 8-byte units");
#pragma unroll
  for (int k = 0; k < Q::kUnits; k++) {
    int grp, j, lane;
    unitOf<D, BITS>(k, tid, grp, j, lane);
    const u8* p = at(grp).codes + (j * 32 + lane) * F::kChunk;
    u8* d = raw + (tid + k * kThreads) * F::kChunk;
    if constexpr (F::kChunk == 16) {
      cpAsync16(d, p);
    } else {
      cpAsync8(d, p);
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
BD_DEVICE void storeQuant(u8* __restrict__ dst, const u8* raw, AT at, int paramsOff, int tid) {
  using Q = Quant<D, BITS, TN>;
  constexpr int kRegsPerWord = 16 / BITS;  // f16x2 registers a word of codes unpacks to
#pragma unroll
  for (int k = 0; k < Q::kUnits; k++) {
    int grp, j, lane;
    unitOf<D, BITS>(k, tid, grp, j, lane);
    u32 rw[Q::kWords];
    const u8* ru = raw + (tid + k * kThreads) * Q::F::kChunk;
    if constexpr (Q::kWords == 4) {
      const uint4 v = *reinterpret_cast<const uint4*>(ru);
      rw[0] = v.x, rw[1] = v.y, rw[2] = v.z, rw[3] = v.w;
    } else {
      const uint2 v = *reinterpret_cast<const uint2*>(ru);
      rw[0] = v.x, rw[1] = v.y;
    }
    const int g = lane / 4, qd = lane % 4;
    const Group gr = at(grp);
    const u8* pr = gr.half + paramsOff;
    u8* gdst = dst + grp * (16 * D * 2);
#pragma unroll
    for (int ww = 0; ww < Q::kWords; ww++) {
      const u32 w = rw[ww], w8 = w >> 8;
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

// Rows holds a lane's query rows, two per m16 tile of its warp (g and g + 8
// of tile mt's 16): their causal limits (last visible token; INT_MAX past
// the launch's rows), the online softmax's running max and denominator, and
// the output accumulators acc[mt][n][e] (channels 8n + 2q + (e & 1), row
// g + 8·(e >> 1) of tile mt).
template <int D, int MT>
struct Rows {
  int limit[MT][2];
  float m[MT][2], l[MT][2];
  float acc[MT][D / 8][4];
};

// tileStep runs one key tile of TN tokens starting at token tok0 (the stage
// sK, sV, fragment order) for the warp's 16·MT rows: S = Q·Kᵀ, the
// soft-cap, the mask (tokens at or past tEnd, after a row's limit, or span
// or more before it), the online softmax (log2 domain, ex2), O += P·V. sQ:
// the lane's query A fragments of the tile's type (bf16 where BF) in the Q
// stage, fragment (mt, kb) at sQ + (mt·D/16 + kb)·kFragBytes. Each key and
// value fragment loaded from the stage feeds the MT tiles' mmas. masked:
// whether any element can be masked (else the tests are skipped).
template <int D, int TN, bool BF, int MT>
BD_DEVICE void tileStep(Rows<D, MT>& st, const u8* sQ, const u8* sK, const u8* sV, int tok0, int tEnd, int span, bool masked,
                        int lane) {
  const int qd = lane % 4;
  float s[MT][TN / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nb = 0; nb < TN / 8; nb++) s[mt][nb][0] = s[mt][nb][1] = s[mt][nb][2] = s[mt][nb][3] = 0.f;
#pragma unroll
  for (int kb = 0; kb < D / 16; kb++) {
    u32 qa[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      const uint4 f = *reinterpret_cast<const uint4*>(sQ + (mt * (D / 16) + kb) * kFragBytes);
      qa[mt][0] = f.x, qa[mt][1] = f.y, qa[mt][2] = f.z, qa[mt][3] = f.w;
    }
#pragma unroll
    for (int gi = 0; gi < TN / 16; gi++) {
      const uint4 a = *reinterpret_cast<const uint4*>(sK + gi * (16 * D * 2) + kb * kFragBytes + lane * 16);
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        mmaT<BF>(s[mt][2 * gi], qa[mt], a.x, a.z);
        mmaT<BF>(s[mt][2 * gi + 1], qa[mt], a.y, a.w);
      }
    }
  }
#ifdef BD_SOFTCAP
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nb = 0; nb < TN / 8; nb++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[mt][nb][e] = softcapScore(s[mt][nb][e]);
#endif
  if (masked) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int nb = 0; nb < TN / 8; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int t = tok0 + nb * 8 + 2 * qd + (e & 1), lim = st.limit[mt][e >> 1];
          if (t >= tEnd || t > lim || lim - t >= span) s[mt][nb][e] = kNegInf;
        }
  }
  float alpha[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = kNegInf;
#pragma unroll
      for (int nb = 0; nb < TN / 8; nb++) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * r], s[mt][nb][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mNew = fmaxf(st.m[mt][r], mx);
      if (mNew == kNegInf) {
        alpha[mt][r] = 1.f;
#pragma unroll
        for (int nb = 0; nb < TN / 8; nb++) s[mt][nb][2 * r] = s[mt][nb][2 * r + 1] = 0.f;
      } else {
        alpha[mt][r] = ex2(st.m[mt][r] - mNew);
        float sum = 0.f;
#pragma unroll
        for (int nb = 0; nb < TN / 8; nb++) {
          s[mt][nb][2 * r] = ex2(s[mt][nb][2 * r] - mNew);
          s[mt][nb][2 * r + 1] = ex2(s[mt][nb][2 * r + 1] - mNew);
          sum += s[mt][nb][2 * r] + s[mt][nb][2 * r + 1];
        }
        st.l[mt][r] = st.l[mt][r] * alpha[mt][r] + sum;
      }
      st.m[mt][r] = mNew;
    }
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      st.acc[mt][n][0] *= alpha[mt][0], st.acc[mt][n][1] *= alpha[mt][0];
      st.acc[mt][n][2] *= alpha[mt][1], st.acc[mt][n][3] *= alpha[mt][1];
    }
#pragma unroll
  for (int kt = 0; kt < TN / 16; kt++) {
    u32 a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      a[mt][0] = pack2T<BF>(s[mt][2 * kt][0], s[mt][2 * kt][1]);
      a[mt][1] = pack2T<BF>(s[mt][2 * kt][2], s[mt][2 * kt][3]);
      a[mt][2] = pack2T<BF>(s[mt][2 * kt + 1][0], s[mt][2 * kt + 1][1]);
      a[mt][3] = pack2T<BF>(s[mt][2 * kt + 1][2], s[mt][2 * kt + 1][3]);
    }
#pragma unroll
    for (int mb = 0; mb < D / 16; mb++) {
      const uint4 b = *reinterpret_cast<const uint4*>(sV + kt * (16 * D * 2) + mb * kFragBytes + lane * 16);
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        mmaT<BF>(st.acc[mt][2 * mb], a[mt], b.x, b.z);
        mmaT<BF>(st.acc[mt][2 * mb + 1], a[mt], b.y, b.w);
      }
    }
  }
}

// qStageBytes is the Q stage of prefill_fa: the CTA's rows as A fragments
// (fp16; a bf16 copy after it where BF), rowsOf<MT>()·D·2 bytes a copy.
template <int D, bool BF, int MT>
constexpr int qStageBytes() {
  return (BF ? 2 : 1) * rowsOf<MT>() * D * 2;
}

// groupSmem is one warp group's shared memory in prefill_fa: two stages of
// a tile's K and V halves (fp16 fragment order) and the low-bit halves' raw
// stages.
template <int D, int KBITS, int VBITS, int TN>
constexpr int groupSmem() {
  return 2 * 2 * TN * D * 2 + Quant<D, KBITS, TN>::kBytes + Quant<D, VBITS, TN>::kBytes;
}

// prefillSmem is the dynamic shared memory of prefill_fa: KS warp groups'
// groupSmem, then the Q stage (prefill.go's prefillSmem).
template <int D, int KBITS, int VBITS, int TN, bool BF, int MT, int KS>
constexpr int prefillSmem() {
  return KS * groupSmem<D, KBITS, VBITS, TN>() + qStageBytes<D, BF, MT>();
}

// groupSync is the barrier of warp group ks's kThreads threads (named
// barrier 1 + ks; __syncthreads where the CTA is one group).
template <int KS>
BD_DEVICE void groupSync(int ks) {
  if constexpr (KS == 1) {
    __syncthreads();
  } else {
    asm volatile("bar.sync %0, %1;" ::"r"(1 + ks), "n"(kThreads) : "memory");
  }
}

// prefill_fa is the kernel (the opening comment). Template: D head dim; KBITS,
// VBITS 16 (fp16, or bf16 where BF), 8, 4, 2; KC keys per channel; GK, GV
// the key and value groups (tokens for KC keys, channels otherwise; 1 for
// 16-bit halves); TN key tile (loads and stages), TC its math's step; MT
// the m16 tiles of query rows a warp owns (rowsOf<MT>() rows a CTA); KS the
// warp groups of kWarps warps that split the CTA's key tiles (group ks
// takes tiles ks, ks + KS, ...; v4), each with its own stages, for the same
// rows, merged at the end.
// Grid (row tiles, Hkv, B), KS·kThreads threads, prefillSmem<D, KBITS,
// VBITS, TN, BF, MT, KS>() bytes of dynamic shared memory.
template <int D, int KBITS, int VBITS, bool KC, bool BF, int GK, int GV, int TN, int TC, int MT, int KS>
__global__ void __launch_bounds__(KS * kThreads) prefill_fa(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const u8* __restrict__ resK, const u8* __restrict__ resV, const int* __restrict__ resSlots,
    const int* __restrict__ lens, const u16* __restrict__ q, u16* __restrict__ out, float* __restrict__ out32,
    int Hq, int Hkv, int Tq, int Nr, int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV,
    float scaleLog2, int window) {
  static_assert(!BF || (KBITS == 16 && VBITS == 16), "bf16 blocks are 16-bit");
  static_assert(TN % 16 == 0 && TC % 16 == 0 && TN % TC == 0 && (D / 16) % 2 == 0, "tile shapes");
  static_assert(MT == 1 || MT == 2, "one or two m16 tiles a warp");
  static_assert(KS == 1 || KS == 2, "one or two warp groups");
  extern __shared__ __align__(16) u8 smem[];
  constexpr int kRows = rowsOf<MT>();
  constexpr int kHalfBytes = TN * D * 2;
  constexpr int kQBytes = kRows * D * 2;  // one copy of the Q stage

  const int b = blockIdx.z, h = blockIdx.y;
  const int tileRow = gridDim.x - 1 - blockIdx.x;  // the longest row tiles first
  // Thread tid of warp group ks (its loads and stages); warp: its rows.
  const int ks = threadIdx.x / kThreads, tid = threadIdx.x % kThreads;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, qd = lane % 4;
  u8* const gsm = smem + ks * groupSmem<D, KBITS, VBITS, TN>();  // the group's stages
  auto stageK = [&](int st) { return gsm + st * 2 * kHalfBytes; };
  auto stageV = [&](int st) { return gsm + st * 2 * kHalfBytes + kHalfBytes; };
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = tileRow * kRows;
  const int L = lens[b];
  const int nrows = min(kRows, R - row0);
  const int wRow0 = row0 + warp * 16 * MT;  // the warp's first row

  // The warp's query rows as A fragments, a0 (row g, ch 2q, 2q+1), a1 (row
  // g+8), a2 (row g, ch 2q+8, 2q+9), a3 (row g+8) of each (m16 tile mt,
  // 16-channel block kb), in the Q stage: lane's fragment (mt, kb) at sQ +
  // (mt·D/16 + kb)·kFragBytes, one 16-byte load. The stage keeps the query
  // out of registers; group 0 writes it, and each lane of a group reads
  // what the same lane of group 0 wrote (the barrier below where KS > 1).
  u8* const sQ = smem + KS * groupSmem<D, KBITS, VBITS, TN>() + warp * MT * (D / 16) * kFragBytes + lane * 16;
  Rows<D, MT> st;
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const int row = wRow0 + 16 * mt + 8 * r + g;
      st.limit[mt][r] = row < R ? L - Tq + row / group : 0x7fffffff;
    }
    if (ks == 0) {
      float qf[2][D / 16][4];
      // Rows g and g + 8 of the tile's 16, as the decode kernels read theirs
      // (zeros past the launch's R rows).
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int r0 = wRow0 + 16 * mt + 8 * r;
        loadQueryFrag<D>(q, b, Tq, Hq, h, group, r0, R - r0, g, qd, scaleLog2, qf[r]);
      }
#pragma unroll
      for (int kb = 0; kb < D / 16; kb++) {
        u8* f = sQ + (mt * (D / 16) + kb) * kFragBytes;
        *reinterpret_cast<uint4*>(f) = make_uint4(pack2(qf[0][kb][0], qf[0][kb][1]), pack2(qf[1][kb][0], qf[1][kb][1]),
                                                  pack2(qf[0][kb][2], qf[0][kb][3]), pack2(qf[1][kb][2], qf[1][kb][3]));
        if constexpr (BF) {
          *reinterpret_cast<uint4*>(f + kQBytes) =
              make_uint4(pack2T<true>(qf[0][kb][0], qf[0][kb][1]), pack2T<true>(qf[1][kb][0], qf[1][kb][1]),
                         pack2T<true>(qf[0][kb][2], qf[0][kb][3]), pack2T<true>(qf[1][kb][2], qf[1][kb][3]));
        }
      }
    }
    st.m[mt][0] = st.m[mt][1] = kNegInf;
    st.l[mt][0] = st.l[mt][1] = 0.f;
#pragma unroll
    for (int n = 0; n < D / 8; n++) st.acc[mt][n][0] = st.acc[mt][n][1] = st.acc[mt][n][2] = st.acc[mt][n][3] = 0.f;
  }
  if constexpr (KS > 1) __syncthreads();  // the Q stage written

  // The CTA's visible range: up to its last row's limit; from its first
  // row's window start (rounded down to a fragment group).
  const int span = windowSpan(window);
  const int lastRow = row0 + nrows - 1;
  const int tEnd = min(L, L - Tq + lastRow / group + 1);
  const int tBegin = window > 0 ? max(0, L - Tq + row0 / group - window + 1) / 16 * 16 : 0;
  // A warp's tile needs the mask unless every one of its rows sees the
  // whole tile: from its last row's window start to its first row's limit.
  const int wRowN = min(R, wRow0 + 16 * MT) - 1;
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
  // The low-bit halves' raw stages (after the group's K/V stages): its next
  // tile's code words, copied while this tile's math runs.
  u8* const rawK = gsm + 4 * kHalfBytes;
  u8* const rawV = rawK + Quant<D, KBITS, TN>::kBytes;
  // fetch starts tile ti's copies: into stage sg for 16-bit halves, into
  // the raw stages for low-bit ones.
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
  // Group ks's tiles: ti = ks + KS·j, its stage j & 1.
  const int nTiles = nT0 + nT1;
  if (ks < nTiles) fetch(ks, 0);
  for (int ti = ks, j = 0; ti < nTiles; ti += KS, j++) {
    const int sg = j & 1, tok0 = tileTok(ti);
    cpAsyncWait<0>();  // tile ti's copies (this thread's: its raw units too)
    if (ti < nT0) {  // the low-bit halves of tile ti, from this thread's raw units (stage sg was last read two tiles ago)
      if constexpr (KBITS < 16) storeQuant<D, KBITS, 0, KC, GK, TN>(stageK(sg), rawK, [&](int grp) { return packedAt(tok0, grp, 0); }, kParamsOff, tid);
      if constexpr (VBITS < 16) storeQuant<D, VBITS, 1, false, GV, TN>(stageV(sg), rawV, [&](int grp) { return packedAt(tok0, grp, 1); }, vParamsOff, tid);
    }
    groupSync<KS>(ks);  // stage sg complete; every warp of the group done with its tile before (stage sg ^ 1)
    if (ti + KS < nTiles) fetch(ti + KS, sg ^ 1);
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
          tileStep<D, TC, true, MT>(st, sQ + kQBytes, sKc, sVc, t0, to, span, masked, lane);
          continue;
        }
      }
      tileStep<D, TC, false, MT>(st, sQ, sKc, sVc, t0, to, span, masked, lane);
    }
  }
  if constexpr (KS > 1) {
    // The groups' partial softmaxes of the same rows, merged by group 0 in
    // a fixed order (deterministic): m = max(m0, m1), l and acc the sums of
    // each group's scaled by ex2(m_k - m). Group 1 hands its state over in
    // the stages, element e of thread tid at (e·kThreads + tid)·4 bytes.
    static_assert(KS == 2, "the merge is of two groups");
    constexpr int kState = MT * 2 * 2 + MT * D / 8 * 4;  // floats a thread: m, l, acc
    static_assert(kState * kThreads * 4 <= KS * groupSmem<D, KBITS, VBITS, TN>(), "the state fits the stages");
    float* x = reinterpret_cast<float*>(smem) + tid;
    __syncthreads();  // every group done with its stages
    if (ks == 1) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
          x[(mt * 2 + r) * kThreads] = st.m[mt][r];
          x[(MT * 2 + mt * 2 + r) * kThreads] = st.l[mt][r];
        }
#pragma unroll
        for (int n = 0; n < D / 8; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) x[(MT * 4 + (mt * D / 8 + n) * 4 + e) * kThreads] = st.acc[mt][n][e];
      }
    }
    __syncthreads();
    if (ks == 1) return;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      float a0[2], a1[2];
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const float m1 = x[(mt * 2 + r) * kThreads], l1 = x[(MT * 2 + mt * 2 + r) * kThreads];
        const float m = fmaxf(st.m[mt][r], m1);
        // ex2(-inf) = 0: a group that saw none of the row's keys adds nothing.
        a0[r] = ex2(st.m[mt][r] - m), a1[r] = ex2(m1 - m);
        st.l[mt][r] = st.l[mt][r] * a0[r] + l1 * a1[r];
      }
#pragma unroll
      for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          st.acc[mt][n][e] = st.acc[mt][n][e] * a0[e >> 1] + x[(MT * 4 + (mt * D / 8 + n) * 4 + e) * kThreads] * a1[e >> 1];
    }
  }
  if (wRow0 >= R) return;
  // Denominators over the quad, then O / l to out (fp16) and out32.
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float l = st.l[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = wRow0 + 16 * mt + g + 8 * r;
      if (row >= R) continue;
      const float inv = 1.f / l;
      const int i = row / group, hq = h * group + row % group;
      const size_t o = ((size_t(b) * Tq + i) * Hq + hq) * D;
#pragma unroll
      for (int n = 0; n < D / 8; n++) {
        const int c = 8 * n + 2 * qd;
        const u32 hv = pack2(st.acc[mt][n][2 * r] * inv, st.acc[mt][n][2 * r + 1] * inv);
        *reinterpret_cast<u32*>(&out[o + c]) = hv;
        if (out32 != nullptr) *reinterpret_cast<float2*>(&out32[o + c]) = h2x2(hv);
      }
    }
}

// dequant_blocks writes the packed blocks of one sequence's low-bit K and V
// (both halves below 16 bits; the launch's sequence 0: its block table and
// length) as fp16 blocks of the same residual size into dst, block i of the
// table at dst + (i·Hkv + h)·2·Nr·D·2 (K half, then V half), in kv.MMA's
// 16-bit fragment order: the bits storeQuant writes into prefill_fa's stages,
// so prefill_fa<.., 16, 16, ..> over dst (an identity block table) computes
// what prefill_fa over the low-bit pool does, bit for bit (PrefillPlan's
// dequantizing route; docs/perf/prefill.md v5). A CTA per (tile of TN
// packed tokens, KV head); tiles past the packed tokens return. Grid
// (ceil(maxL / TN), Hkv), kThreads threads; TN divides Nr.
template <int D, int KBITS, int VBITS, bool KC, int GK, int GV, int TN>
__global__ void __launch_bounds__(kThreads) dequant_blocks(const u8* __restrict__ pool, const int* __restrict__ blockTable,
                                                             const int* __restrict__ lens, u8* __restrict__ dst, int Hkv, int Nr,
                                                             int blockBytes, int kBytes, int kParamsOff, int vParamsOff) {
  static_assert(KBITS < 16 && VBITS < 16, "low-bit halves");
  using QK = Quant<D, KBITS, TN>;
  using QV = Quant<D, VBITS, TN>;
  __shared__ __align__(16) u8 raw[QK::kBytes + QV::kBytes];
  const int h = blockIdx.y, tid = threadIdx.x;
  const int tok0 = blockIdx.x * TN;
  if (tok0 >= lens[0] / Nr * Nr) return;
  const int blk = tok0 / Nr, within0 = tok0 - blk * Nr;
  const u8* kh = pool + (size_t(blockTable[blk]) * Hkv + h) * blockBytes;
  auto atK = [&](int grp) { return Group{kh + (within0 / 16 + grp) * (16 * D * KBITS / 8), kh, within0 + grp * 16}; };
  auto atV = [&](int grp) { return Group{kh + kBytes + (within0 / 16 + grp) * (16 * D * VBITS / 8), kh + kBytes, within0 + grp * 16}; };
  fetchQuant<D, KBITS, TN>(raw, atK, tid);
  fetchQuant<D, VBITS, TN>(raw + QK::kBytes, atV, tid);
  cpAsyncCommit();
  cpAsyncWait<0>();  // this thread's units (each thread dequantizes its own)
  u8* d = dst + (size_t(blk) * Hkv + h) * (2 * Nr * D * 2) + (within0 / 16) * (16 * D * 2);
  storeQuant<D, KBITS, 0, KC, GK, TN>(d, raw, atK, kParamsOff, tid);
  storeQuant<D, VBITS, 1, false, GV, TN>(d + Nr * D * 2, raw + QK::kBytes, atV, vParamsOff, tid);
}

}  // namespace pf

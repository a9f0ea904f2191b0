// gemvq4.cu: gemvq v4, the decode GEMV over packed low-bit weights for one
// row of x with the products on tensor cores, y = x·Ŵᵀ + bias
// (kernels.GEMVQ.Launch runs it at one row for int8 weights of 2048 rows or
// more with groups of 128 times a power of two, GEMVQ.UsesV4: on the H100
// it beats gemvq3.cu's v3.2 there and not on int4 or int3; GEMVQ.V3 is the
// A/B knob); and gemv_q5 (v5, below), the same math fed by a cp.async ring,
// which Launch runs for int4 weights there (GEMVQ.UsesV5). The layout is gemvq.cu's (package wq, wq/doc.go "Packed
// layout"): words [N][K/32·BITS] u32, params [N][K/G] (scale, zero) fp16
// pairs, x [K] float32, bias [N] float32 or null, y [N] float32.
//
// Work (v3.2's structure: split-K warps, the next step's loads before the
// current step's math, PDL): a CTA is kWarps warps; S of them (split-K)
// share a row group of kRows = 16 rows (the mma's M), and slice s of the S
// takes the s-th of S contiguous runs of K's steps of U tiles of 128
// channels (U = 4 for int4/int3, 2 for int8: 96-128 bytes of codes a lane a
// step). In a tile, lane (g = lane/4, c = lane%4) reads channels 32c..32c+31
// of rows g and g+8 (gemvq.cu v2's assignment: one 16-byte load a row for
// int4) and feeds them to 8 mma k-steps; the B operand uses the same
// permutation of k.
//
// Numbers. A = the exact codes as fp16 integers (gemvq.cu's codesSpan: lop3
// with the magic 0x6400 and one half2 subtraction or fma, two codes an
// instruction). B = x split in two fp16 halves, x = hi + 2⁻¹¹·lo: hi =
// fp16(x), lo = fp16(2¹¹·(x − hi)) (x − hi and the scaling are exact in
// float32; the 2¹¹ keeps lo out of fp16's subnormals), hi in B's column 0
// and lo in column 1, so one mma gives both sums (columns 2m, 2m+1 carry
// the step's other tiles, for Σx: tileDot). The tensor core's products of
// fp16 are exact and its sums float32; the accumulators start at zero each
// tile (a tile lies in one group, G 128 times a power of two), and each
// tile adds y += s·(Σq·hi + 2⁻¹¹·Σq·lo) + z·Σx in float32, Σx = Σhi +
// 2⁻¹¹·Σlo from one mma chain a step with A = ones. x's split goes through
// a per-warp shared buffer each step (stageX: one coalesced float4 a lane a
// tile, split and stored where the mma lanes read their B fragment with
// 16-byte loads free of bank conflicts). The warp's tiles add in order,
// the S slices in slice order through shared memory: deterministic. The
// bound (gemvq_test.go, docs/perf/gemvq.md v4) is (K/64 + 83)·2⁻²⁴ of
// Σ(|s|q + |z|)|x|, plus 2⁻³⁶·Σ(|s|q + |z|) for x below fp16's normals.
// |x| must stay below fp16's 65504 (hi would overflow; v2 rounds x to fp16
// too).
//
// Programmatic dependent launch: gemvq4.cu is a GridDependent program
// (header.go), as gemvq3.cu: with early set a lane's first step of codes
// and params is loaded before the dependency wait.
//
// Versions (H100, T = 1, G128, `bench gemvq`; docs/perf/gemvq.md v4):
//   v4.0 2 tiles a step (1 for int8), 3 CTAs of 8 warps an SM, Σx from a
//        table summed by the CTA after the dependency wait: half v3.2's
//        instructions (5.35 M on int4 gate/up against 10.46 M) but
//        latency-bound (0.34 issued a cycle, 0.57 waves at S 2): int4
//        gate/up 19.9 us (v3.2 19.1), the int4 step 3.83 ms (3.45).
//   v4.1 4 tiles a step (2 for int8), 2 CTAs an SM, Σx by an mma with
//        A = ones: 4.70 M instructions, still latency-bound (0.25 issued a
//        cycle, long scoreboard 8 of 13 cycles an instruction): int4
//        gate/up 19.9 us, down 19.9; int8 gate/up 25.2 (78%, v3.2 28.8),
//        down 25.4 (78%, v3.2 26.6); int3 slower than v3.2 everywhere.
//   v5.0 (gemv_q5, session 14) v4's math fed by a per-warp ring of 4
//        slots filled by cp.async (3 steps of 2 tiles in flight, x with
//        the codes), 2 CTAs an SM: int4 gate/up 19.9 us, down 19.1-19.5;
//        int8 (1 tile a step) 40-43, int3 24-25: no faster standalone,
//        the int4 step -0.1 ms (its deeper loads before the PDL wait).
//   v5.1 whole 128-byte lines a copy (COAL): int8 gate/up 27.1-27.6 us
//        (v5.0 41.5), int4 unchanged (gate/up 19.9, down 18.9); the int4
//        step 3.33-3.39 ms at 1K against v3.2's 3.42-3.48. Launch runs it
//        for int4 at T = 1 (GEMVQ.UsesV5).
//   v6   (session 15) v5.1 over the GPU-private tiled layout (below; a
//        warp's ring step one contiguous 2 KB block): the same sums, int4
//        gate/up 18.9-19.0 us (v5.1 19.8-20.0), down 17.8-18.0 (18.7-18.9),
//        the int4 step -0.06 ms at 1K; since session 15c the weight's
//        only device copy and the default (backend/gpu tiledLayout,
//        Options.GEMVQWQ the knob; -0.08 to -0.12 ms). Its copies alone read
//        only 1-3 points more than v5.1's over wq's layout: the layout is
//        not what caps int4 (docs/perf/gemvq.md, session 15).
//   v5.2 (session 15b, LEAN: leanLoop) v5.1's step with the same copies
//        and sums (the same bits) in 19% fewer instructions (5.18 M on
//        int4 gate/up against 6.38 M): addresses kept in registers,
//        predicated copies, whole steps without per-tile tests. int4
//        gate/up 18.3-18.9 us (v5.1 20.0-20.1), 13.9-14.1 back to back
//        (15.3-15.5), down 18.8-19.0 (18.9) / 14.7-14.8 (15.3-15.5); the
//        int4 step -0.10 ms at 1K. Launch's v5 (GEMVQ.V51 keeps v5.1); v6.1
//        is v6's step likewise (gate/up 17.3 us, 13.3 back to back).
//   v6.1 int3 (session 15d) v6.1 over int3's tiled layout (a block in the
//        lanes' read order: three 512-byte copies a step, three 16-byte
//        reads a lane), v5.0 int3's bits: gate/up 16.9 us against v3.2's
//        18.8, down 15.6 against 19.3, q/o 8.4 against 9.4; the int3 step
//        3.37-3.40 -> 3.05-3.06 ms at 1K. LaunchTiled runs it (UsesV6).
//   v6.1 int8 (session 16) v6.1 over int8's tiled layout (int4's formula,
//        a step of one tile): v4.1's bits where the slices start at the
//        same tiles (the 8B shapes). Alone slower than v4.1 (gate/up 27.1
//        us against 25.3, down 26.0 against 25.5), back to back with early
//        loads faster (23.0 against 23.3, 86% of the ceiling; down 22.1
//        against 23.1, 90%); the int8 step -0.02 ms at 1K, -0.04 at 32K.
//        LaunchTiled runs it where Launch runs v4.1 (UsesV6).
//   v6.2 (session 23, gemv_q7 below) x split once a CTA: int4/int3 at
//        splits 1-2 (gate/up: int4 12.6 us back to back, 81%).
//   v6.1c int3 (session 24, gemv_q5's XC) v6.1 with v6.2's in-place int3
//        codes (362 -> 328 SASS a step): down S 8 12.1 -> 11.9-12.0 us
//        back to back (66%); slower where a warp takes 2 steps (o at S 8),
//        so LaunchV6 runs it from 4 steps a warp (gemvq6cUses).
//
// Go wrapper: gemvq.go, gemvq6.go (v6, the tiled layout, the bench's
// forms); tests: gemvq_test.go, gemvq6_test.go; docs/perf/gemvq.md.

#include "bitdecode.cuh"
#include "gemvq.cu"

namespace gemvq4 {

using gemvq::Span;

constexpr int kWarps = 8;              // warps per CTA
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16;              // rows per row group (the mma's M)
constexpr int kTile = 128;             // channels per tile (4 lanes x 32)
constexpr float kLoScale = 2048.f;     // lo = fp16(2¹¹·(x − hi))
constexpr float kLoUnscale = 1.f / 2048.f;

// kTilesPerStep is U: tiles a warp loads ahead in one step (a lane's 2
// rows x U spans: 128 bytes of int4 and int8, 96 of int3). Call 1 took
// U = 2 (1 for int8) at 3 CTAs an SM: latency-bound (13.5 warps an SM on
// int4 gate/up at S 2, long scoreboard half the stalls, 0.34 issued a
// cycle). GEMVQ4_TILES (an NVRTC -D knob) sets U for int4/int3 (int8
// takes half).
#ifndef GEMVQ4_TILES
#define GEMVQ4_TILES 4
#endif
template <int BITS>
constexpr int kTilesPerStep = BITS == 8 ? (GEMVQ4_TILES + 1) / 2 : GEMVQ4_TILES;

// kMinBlocks is the CTAs per SM the launch bounds ask registers for: 2 (16
// warps an SM, 128 registers). GEMVQ4_MIN_BLOCKS (an NVRTC -D knob)
// overrides it where > 0.
#ifndef GEMVQ4_MIN_BLOCKS
#define GEMVQ4_MIN_BLOCKS 0
#endif
constexpr int kMinBlocks = GEMVQ4_MIN_BLOCKS > 0 ? GEMVQ4_MIN_BLOCKS : 2;

// Step<BITS, U> is one lane's codes of one step (rows g and g+8 of U tiles)
// and their (scale, zero) pairs.
template <int BITS, int U>
struct Step {
  Span<BITS> a[U][2];
  u32 sz[U][2];
};

// Rows are a lane's two rows of the row group (g and g+8; a row past N reads
// row N − 1, whose sums are not written): the words of their codes from the
// lane's span of tile 0 and of their params, as 32-bit offsets from the
// kernel's pointers (one multiply-add an address).
struct Rows {
  const u32* words;
  const u32* params;
  unsigned w0, w1, p0, p1;
};

// preload loads the tiles t0..t0+U−1 below te into st (tiles past te load
// nothing: the warp-uniform bound of its run). Only weights are read.
template <int BITS, int U>
__device__ __forceinline__ void preload(Step<BITS, U>& st, const Rows& rw, int t0, int te, int gshift) {
#pragma unroll
  for (int u = 0; u < U; u++) {
    const unsigned t = t0 + u;
    if (int(t) < te) {
      gemvq::loadSpan<BITS>(st.a[u][0], rw.words + (rw.w0 + t * (kTile / 32 * BITS)), 0);
      gemvq::loadSpan<BITS>(st.a[u][1], rw.words + (rw.w1 + t * (kTile / 32 * BITS)), 0);
      st.sz[u][0] = __ldg(rw.params + (rw.p0 + (t >> gshift)));
      st.sz[u][1] = __ldg(rw.params + (rw.p1 + (t >> gshift)));
    }
  }
}

// XStage is a warp's staging buffer of one step's x, split: hi[u][q][c] is
// the 4 half2 of channels 32c+8q..+7 of tile u (B fragment registers 4q..
// 4q+3 of lane c); lo likewise. The 64-byte pad puts lo[u][q] in the other
// half of the banks from hi[u][q], so a quarter-warp's 16-byte reads (lanes
// g = 2m reading hi, g = 2m+1 lo, of one tile) are free of conflicts.
template <int U>
struct XStage {
  uint4 hi[U][4][4];
  uint4 pad[4];
  uint4 lo[U][4][4];
};

// split2 splits (a, b) into the half2 hi = fp16(a, b) and lo = fp16(2¹¹·(a −
// hi.a), 2¹¹·(b − hi.b)): the differences and the scaling are exact.
__device__ __forceinline__ void split2(float a, float b, u32& hi, u32& lo) {
  hi = pack2(a, b);
  const float2 h = h2x2(hi);
  lo = pack2((a - h.x) * kLoScale, (b - h.y) * kLoScale);
}

// stageXFrom splits the tiles t0..t0+U−1 of x into the warp's buffer
// (zeros from te on): lane l takes channels 4l..4l+3 of tile t0 + u as the
// float4 load(u) and stores their hi and lo pairs where the mma lanes read
// them. stageX loads from x (v4), stageXSlot from the slot (v5).
// FULL (v5.2): every tile is below te, so no tile is zeroed or tested.
template <int U, bool FULL = false, typename LOAD>
__device__ __forceinline__ void stageXFrom(XStage<U>& xs, int t0, int te, int lane, LOAD load) {
  __syncwarp();  // the warp's reads of the previous step are done
  const int c = lane / 8, q = lane % 8 / 2, h = lane % 2;
#pragma unroll
  for (int u = 0; u < U; u++) {
    u32 h0 = 0, l0 = 0, h1 = 0, l1 = 0;
    if (FULL || t0 + u < te) {  // warp-uniform
      const float4 v = load(u);
      split2(v.x, v.y, h0, l0);
      split2(v.z, v.w, h1, l1);
    }
    reinterpret_cast<uint2*>(&xs.hi[u][q][c])[h] = make_uint2(h0, h1);
    reinterpret_cast<uint2*>(&xs.lo[u][q][c])[h] = make_uint2(l0, l1);
  }
  __syncwarp();
}

// stageX is stageXFrom with each lane's float4 of a tile loaded from x
// (one coalesced load a tile).
template <int U>
__device__ __forceinline__ void stageX(XStage<U>& xs, const float* __restrict__ x, int t0, int te, int lane) {
  stageXFrom<U>(xs, t0, te, lane, [&](int u) { return *reinterpret_cast<const float4*>(x + (t0 + u) * kTile + 4 * lane); });
}

// codesSpanX is gemvq.cu's codesSpan (the same exact half2 codes) with
// int3's pairs taken in place where fp16's magic allows: pair p of a word
// (bits 3p..3p+2 of each 16-bit half) masked in place is 1024 + 8^p·q, exact
// for p <= 2 (8^2·7 < 1024), so pairs 1 and 2 need one fma (·8^-p −
// 1024·8^-p, exact: the result q is an integer) instead of a shift and a
// subtraction, and pairs 3 and 4 are pairs 0 and 1 of the word shifted by
// 9: one shift a word instead of four (int3's step, NVRTC 12.5: v6.2's 305
// -> 272 SASS instructions, v6.1's 362 -> 328 as v6.1c). int4 and int8:
// codesSpan.
template <int BITS>
__device__ __forceinline__ void codesSpanX(u32 (&out)[16], const Span<BITS>& s) {
  if constexpr (BITS == 3) {
    constexpr u32 kEighth = 0x30003000u, kSixtyFourth = 0x24002400u;  // half2 (1/8, 1/8), (1/64, 1/64)
    constexpr u32 kMinus128 = 0xd800d800u, kMinus16 = 0xcc00cc00u;      // half2 (−128, −128), (−16, −16)
#pragma unroll
    for (int j = 0; j < 3; j++) {
      const u32 w = s.w[j], v = s.w[j] >> 9;
      out[5 * j] = gemvq::sub1024(gemvq::lop3OrMask(w, 0x00070007u));
      out[5 * j + 1] = hfma2(gemvq::lop3OrMask(w, 0x00380038u), kEighth, kMinus128);
      out[5 * j + 2] = hfma2(gemvq::lop3OrMask(w, 0x01c001c0u), kSixtyFourth, kMinus16);
      out[5 * j + 3] = gemvq::sub1024(gemvq::lop3OrMask(v, 0x00070007u));
      out[5 * j + 4] = hfma2(gemvq::lop3OrMask(v, 0x00380038u), kEighth, kMinus128);
    }
    const u32 q = ((s.w[0] >> 15) & 0x00010001u) | ((s.w[1] >> 14) & 0x00020002u) | ((s.w[2] >> 13) & 0x00040004u);
    out[15] = gemvq::sub1024(q | kMagic);
  } else {
    gemvq::codesSpan<BITS>(out, s);
  }
}

// tileDot adds the tiles t0..t0+U−1 below te to acc (rows g and g+8 in the
// lanes c = 0): the codes times x's halves on the tensor cores, then
// s·(Σq·hi + 2⁻¹¹·Σq·lo) + z·Σx. B's columns 2m and 2m+1 (lanes g = 2m,
// 2m+1) hold hi and lo of tile u + m (mod U): for the codes of tile u only
// columns 0 and 1 count (lanes c = 0), and one mma chain with A = ones
// over tile 0's B gives every tile's Σhi and Σlo (lane c: tile c mod U),
// handed to the lanes c = 0 by a shuffle a tile. FULL (v5.2): every tile is
// below te (no test, so the tiles' chains may interleave). XC (v6.1c,
// session 24): the codes by codesSpanX (int3's in place; the same codes).
template <int BITS, int U, bool FULL = false, bool XC = false>
__device__ __forceinline__ void tileDot(float (&acc)[2], const Step<BITS, U>& st, const XStage<U>& xs, int t0, int te, int lane) {
  static_assert(U == 1 || U == 2 || U == 4, "B's 8 columns hold the hi and lo of at most 4 tiles");
  const int g = lane / 4, c = lane % 4;
  float sxl = 0.f;  // Σx of tile c mod U
#pragma unroll
  for (int u = 0; u < U; u++) {
    if (!FULL && t0 + u >= te) break;  // warp-uniform
    u32 w0[16], w1[16], xb[16];
    if constexpr (XC) {
      codesSpanX<BITS>(w0, st.a[u][0]);
      codesSpanX<BITS>(w1, st.a[u][1]);
    } else {
      gemvq::codesSpan<BITS>(w0, st.a[u][0]);
      gemvq::codesSpan<BITS>(w1, st.a[u][1]);
    }
    const int tu = (u + g / 2) % U;
    const uint4* xq = g & 1 ? &xs.lo[tu][0][c] : &xs.hi[tu][0][c];
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const uint4 v = xq[4 * q];
      xb[4 * q] = v.x, xb[4 * q + 1] = v.y, xb[4 * q + 2] = v.z, xb[4 * q + 3] = v.w;
    }
    if (u == 0) {
      float e[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int j = 0; j < 8; j++) gemvq::mmaA4(e, gemvq::kOnes, gemvq::kOnes, gemvq::kOnes, gemvq::kOnes, xb[2 * j], xb[2 * j + 1]);
      sxl = fmaf(e[1], kLoUnscale, e[0]);  // (col 2c, col 2c+1): Σhi, Σlo of tile c mod U
    }
    float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 8; j++) gemvq::mmaA4(d, w0[2 * j], w1[2 * j], w0[2 * j + 1], w1[2 * j + 1], xb[2 * j], xb[2 * j + 1]);
    // Lanes c = 0: d = (row g: Σq·hi, Σq·lo; row g+8: the same) of tile u.
    const float s = __shfl_sync(0xffffffffu, sxl, (lane & ~3) | u);
    const float2 sz0 = h2x2(st.sz[u][0]), sz1 = h2x2(st.sz[u][1]);  // (scale, zero)
    acc[0] = fmaf(sz0.x, fmaf(d[1], kLoUnscale, d[0]), fmaf(sz0.y, s, acc[0]));
    acc[1] = fmaf(sz1.x, fmaf(d[3], kLoUnscale, d[2]), fmaf(sz1.y, s, acc[1]));
  }
}

// storeRows writes y of row group n0 (bias added where given) from the
// sums acc of its S slices' warps (lanes c = 0: rows g and g+8), added in
// slice order; every thread of the CTA calls it. The kernel's slice, g and
// c come in as arguments: recomputed here, they changed the SASS of 8 (g
// and c) to 22 (all three) of the 36 instantiations (NVRTC 12.5).
template <int S>
__device__ __forceinline__ void storeRows(const float (&acc)[2], float* __restrict__ y, const float* __restrict__ bias, int N, int n0,
                                          int warp, int slice, int lane, int g, int c) {
  __shared__ float part[kWarps][kRows];
  if (c == 0) part[warp][g] = acc[0], part[warp][g + 8] = acc[1];
  __syncthreads();
  if (slice != 0 || lane >= kRows) return;
  const int n = n0 + lane;
  if (n >= N) return;
  float v = part[warp][lane];
#pragma unroll
  for (int s = 1; s < S; s++) v += part[warp + s][lane];
  y[n] = v + (bias ? bias[n] : 0.f);
}

// gemv_q4: grid (ceil(N / (kRows·kWarps/S))), block kThreads. Warp w of a
// CTA takes row group w / S and slice w % S of its K steps. gshift is
// log2(G/128) (a tile's group is tile >> gshift); K a multiple of G.
// early: load the first step's weights before the dependency
// wait.
template <int BITS, int S>
__global__ void __launch_bounds__(kThreads, kMinBlocks) gemv_q4(const float* __restrict__ x, const u32* __restrict__ words,
                                                         const u16* __restrict__ params, const float* __restrict__ bias,
                                                         float* __restrict__ y, int N, int K, int gshift, int early) {
  constexpr int U = kTilesPerStep<BITS>;
  constexpr int kGroups = kWarps / S;  // row groups per CTA
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % S;
  const int g = lane / 4, c = lane % 4;
  const int n0 = (blockIdx.x * kGroups + warp / S) * kRows;
  const int tiles = K / kTile, steps = (tiles + U - 1) / U, per = (steps + S - 1) / S;
  const int tb = min(tiles, slice * per * U), te = min(tiles, (slice + 1) * per * U);
  const int rowWords = K / 32 * BITS, groups = tiles >> gshift;
  const int na = min(n0 + g, N - 1), nb = min(n0 + g + 8, N - 1);
  const u32* prm = reinterpret_cast<const u32*>(params);
  const Rows rw{words, prm, unsigned(na * rowWords + c * BITS), unsigned(nb * rowWords + c * BITS), unsigned(na * groups),
                unsigned(nb * groups)};
  Step<BITS, U> cur;
  if (early) preload(cur, rw, tb, te, gshift);
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) preload(cur, rw, tb, te, gshift);
  float acc[2] = {0.f, 0.f};
  __shared__ XStage<U> xs[kWarps];
  // Two steps an iteration, the buffers swapping roles.
  Step<BITS, U> nxt;
  for (int t = tb; t < te; t += 2 * U) {
    preload(nxt, rw, t + U, te, gshift);
    stageX<U>(xs[warp], x, t, te, lane);
    tileDot<BITS, U>(acc, cur, xs[warp], t, te, lane);
    if (t + U >= te) break;
    preload(cur, rw, t + 2 * U, te, gshift);
    stageX<U>(xs[warp], x, t + U, te, lane);
    tileDot<BITS, U>(acc, nxt, xs[warp], t + U, te, lane);
  }
  storeRows<S>(acc, y, bias, N, n0, warp, slice, lane, g, c);
}

// ============================================================================
// gemv_q5 (v5, session 14): v4's math with the codes, params and x of the
// next kRing − 1 steps in flight in a per-warp ring of shared memory, filled
// by cp.async (Marlin's structure for one row of x). v4.1 was
// latency-bound: its loads went one step ahead in registers (128 of them,
// 2 CTAs an SM) and every step waited on x's float4 from L1/L2 before its
// math. Here a step is kStageTiles<BITS> tiles (2 of int4/int3, 1 of int8:
// 2 KB of codes a warp); lane l copies its own spans (16-byte copies of
// int4/int8, 4-byte ones of int3), x's float4 l of each tile and, where
// c < U, the params of tile c of its rows g and g+8, so the codes and x are
// read back by the lane that copied them and only the params cross lanes
// (a __syncwarp after the wait). The math is v4's tileDot on a Step read
// from the slot: the same sums in the same order, v4's bound.

// kRing is the ring's depth in steps (kRing − 1 in flight while one is
// read). GEMVQ5_STAGES (an NVRTC -D knob) overrides it where > 0.
#ifndef GEMVQ5_STAGES
#define GEMVQ5_STAGES 0
#endif
constexpr int kRing = GEMVQ5_STAGES > 0 ? GEMVQ5_STAGES : 4;

// kMinBlocks5 is the CTAs an SM v5's launch bounds ask registers for: 2
// (the rings' shared memory allows no more at kRing 4). GEMVQ5_MIN_BLOCKS
// (an NVRTC -D knob) overrides it where > 0 (3 with GEMVQ5_STAGES=2: 24
// warps an SM, session 15's occupancy variant).
#ifndef GEMVQ5_MIN_BLOCKS
#define GEMVQ5_MIN_BLOCKS 0
#endif
constexpr int kMinBlocks5 = GEMVQ5_MIN_BLOCKS > 0 ? GEMVQ5_MIN_BLOCKS : 2;

// kStageTiles is v5's U: tiles a ring slot holds (2 KB of codes a warp).
template <int BITS>
constexpr int kStageTiles = BITS == 8 ? 1 : 2;

// kVec is the u32 words of one cp.async of codes: 4 (16 bytes) where a
// span is whole 16-byte units (int4, int8), 1 for int3's 12-byte span.
template <int BITS>
constexpr int kVec = BITS % 4 == 0 ? 4 : 1;

// Slot is one ring slot of a warp: w[u][r][i][32·kVec] holds copy i of
// lane l's span of row r (g, g+8) of tile u at l·kVec (a lane's 16-byte
// unit contiguous, the warp's 512 bytes free of bank conflicts); prm[u][m]
// row m's (scale, zero) of tile u; x[u][l] channels 4l..4l+3 of tile u.
template <int BITS, int U>
struct Slot {
  static constexpr int kCopies = BITS / kVec<BITS>;
  u32 w[U][2][kCopies][32 * kVec<BITS>];
  u32 prm[U][kRows];
  float4 x[U][32];
};

// kRingBytes is a warp's ring in bytes (gemvq.go gemvq5SlotBytes mirrors
// Slot's size; the kernel traps if the launch's dynamic shared memory is
// smaller than kWarps rings).
template <int BITS>
constexpr int kRingBytes = kRing * int(sizeof(Slot<BITS, kStageTiles<BITS>>));

__device__ __forceinline__ u32 sharedAddr(const void* p) {
  u32 s;
  asm("{ .reg .u64 a;\n cvta.to.shared.u64 a, %1;\n cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(p));
  return s;
}
// cpAsyncCA copies BYTES (4, 8 or 16) through L1 (x: every warp of an SM
// reads the same tiles; int3's 4-byte spans).
template <int BYTES>
__device__ __forceinline__ void cpAsyncCA(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(sharedAddr(smem)), "l"(gmem), "n"(BYTES) : "memory");
}

// issueParams starts the copies of the lane's two rows' params (a half2
// scale and zero) of tile t0 + c below te into sl (lanes c < U, c = lane
// % 4). PSTRIDE is the words between a row's consecutive groups: 1 in wq's
// layout, kRows in the tiled one (v6: a row group's 16 pairs of a group
// contiguous).
template <int BITS, int U, unsigned PSTRIDE = 1>
__device__ __forceinline__ void issueParams(Slot<BITS, U>& sl, const Rows& rw, int t0, int te, int gshift, int lane) {
  const int g = lane / 4, c = lane % 4;
  if (c < U && t0 + c < te) {
    const unsigned t = t0 + c;
    cpAsyncCA<4>(&sl.prm[c][g], rw.params + (rw.p0 + (t >> gshift) * PSTRIDE));
    cpAsyncCA<4>(&sl.prm[c][g + 8], rw.params + (rw.p1 + (t >> gshift) * PSTRIDE));
  }
}

// issueCodes starts the copies of tiles t0..t0+U−1 below te of the lane's
// two rows into sl: its spans and (lanes c < U) tile c's params. Only
// weights are read: gemv_q5 issues the first steps before the dependency
// wait where early is set.
template <int BITS, int U>
__device__ __forceinline__ void issueCodes(Slot<BITS, U>& sl, const Rows& rw, int t0, int te, int gshift, int lane) {
  constexpr int V = kVec<BITS>;
#pragma unroll
  for (int u = 0; u < U; u++) {
    const unsigned t = t0 + u;
    if (int(t) >= te) break;  // warp-uniform
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const u32* src = rw.words + ((r ? rw.w1 : rw.w0) + t * (kTile / 32 * BITS));
#pragma unroll
      for (int i = 0; i < Slot<BITS, U>::kCopies; i++) {
        if constexpr (V == 4) cpAsync16(&sl.w[u][r][i][4 * lane], src + 4 * i);
        else cpAsyncCA<4>(&sl.w[u][r][i][lane], src + i);
      }
    }
  }
  issueParams(sl, rw, t0, te, gshift, lane);
}

// issueX starts the copies of x's float4 lane of tiles t0..t0+U−1 below te.
template <int BITS, int U>
__device__ __forceinline__ void issueX(Slot<BITS, U>& sl, const float* __restrict__ x, int t0, int te, int lane) {
#pragma unroll
  for (int u = 0; u < U; u++) {
    if (t0 + u >= te) break;  // warp-uniform
    cpAsyncCA<16>(&sl.x[u][lane], x + (t0 + u) * kTile + 4 * lane);
  }
}

// stageXSlot is stageXFrom with x's float4 from the lane's own copies in
// the slot instead of global memory.
template <int BITS, int U>
__device__ __forceinline__ void stageXSlot(XStage<U>& xs, const Slot<BITS, U>& sl, int t0, int te, int lane) {
  stageXFrom<U>(xs, t0, te, lane, [&](int u) { return sl.x[u][lane]; });
}

// readStep reads the lane's spans and its rows' params of a slot into a
// Step (tiles past the warp's run read stale words that tileDot skips).
template <int BITS, int U>
__device__ __forceinline__ void readStep(Step<BITS, U>& st, const Slot<BITS, U>& sl, int lane) {
  constexpr int V = kVec<BITS>;
  const int g = lane / 4;
#pragma unroll
  for (int u = 0; u < U; u++) {
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
      for (int i = 0; i < Slot<BITS, U>::kCopies; i++) {
        if constexpr (V == 4) {
          const uint4 v = *reinterpret_cast<const uint4*>(&sl.w[u][r][i][4 * lane]);
          st.a[u][r].w[4 * i] = v.x, st.a[u][r].w[4 * i + 1] = v.y, st.a[u][r].w[4 * i + 2] = v.z, st.a[u][r].w[4 * i + 3] = v.w;
        } else {
          st.a[u][r].w[i] = sl.w[u][r][i][lane];
        }
      }
    st.sz[u][0] = sl.prm[u][g];
    st.sz[u][1] = sl.prm[u][g + 8];
  }
}

// Coalesced copies (COAL, int4 and int8: v5.1). issueCodes has each lane
// copy its own 16-byte units, 8 rows a warp instruction at 64 bytes a row
// (int4): half of every 128-byte line each request asks for. Here a slot's
// codes are 16 rows of kRowBytes = 128 contiguous bytes (U tiles of a row),
// and warp instruction i copies rows 4i..4i+3, 8 lanes a row, whole lines;
// lane (g, c) then reads its spans from the rows (unit j of a row at place
// j ^ kSwizzle·(row & 1), so both the copies and the mma lanes' 16-byte
// reads of a quarter warp hit 8 different bank groups).
template <int BITS>
constexpr int kSwizzle = BITS == 8 ? 1 : 4;

// CoalRows is a lane's 4 rows of the coalesced copies (rows 4i + lane/8 of
// its row group, past N read as N − 1) as word offsets of its 16-byte unit
// (lane % 8) in tile 0.
struct CoalRows {
  unsigned w[4];
};

// issueCodesCoal is issueCodes' codes with the coalesced copies (the
// params by issueParams, as issueCodes). TSTRIDE is the words a tile
// advances a row's place: kTile / 32 · BITS in wq's layout, kRows ·
// 32 / U in the tiled one (a row group's step of U tiles one contiguous
// run of kRows lines); PSTRIDE issueParams'.
template <int BITS, int U, unsigned TSTRIDE = kTile / 32 * BITS, unsigned PSTRIDE = 1>
__device__ __forceinline__ void issueCodesCoal(Slot<BITS, U>& sl, const u32* __restrict__ words, const CoalRows& cr, const Rows& rw, int t0,
                                               int te, int gshift, int lane) {
  constexpr int kRowWords = U * 4 * BITS;  // 128 bytes
  static_assert(kRowWords == 32, "a coalesced row is one 128-byte line");
  u32(*rows)[kRowWords] = reinterpret_cast<u32(*)[kRowWords]>(&sl.w[0][0][0][0]);
  const int j = lane % 8, r0 = lane / 8;
  const int pos = j ^ (kSwizzle<BITS> * (r0 & 1));
  if (t0 + j / BITS < te) {  // the unit's tile is in the warp's run
#pragma unroll
    for (int i = 0; i < 4; i++) cpAsync16(&rows[4 * i + r0][4 * pos], words + (cr.w[i] + unsigned(t0) * TSTRIDE));
  }
  issueParams<BITS, U, PSTRIDE>(sl, rw, t0, te, gshift, lane);
}

// readStepCoal is readStep over the coalesced rows.
template <int BITS, int U>
__device__ __forceinline__ void readStepCoal(Step<BITS, U>& st, const Slot<BITS, U>& sl, int lane) {
  constexpr int kRowWords = U * 4 * BITS;
  const u32(*rows)[kRowWords] = reinterpret_cast<const u32(*)[kRowWords]>(&sl.w[0][0][0][0]);
  const int g = lane / 4, c = lane % 4, swz = kSwizzle<BITS> * (g & 1);
#pragma unroll
  for (int u = 0; u < U; u++) {
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
      for (int i = 0; i < BITS / 4; i++) {
        const int j = (u * BITS + c * BITS / 4 + i) ^ swz;
        const uint4 v = *reinterpret_cast<const uint4*>(&rows[g + 8 * r][4 * j]);
        st.a[u][r].w[4 * i] = v.x, st.a[u][r].w[4 * i + 1] = v.y, st.a[u][r].w[4 * i + 2] = v.z, st.a[u][r].w[4 * i + 3] = v.w;
      }
    st.sz[u][0] = sl.prm[u][g];
    st.sz[u][1] = sl.prm[u][g + 8];
  }
}

// The tiled layout (v6, gemvq6.go PackTiles; GPU-private: the CPU, DEC,
// v3-v5 read wq's layout; gemvq.cu's v2 and dequantization have tiled
// forms, so it is an int4 weight's only device copy by default, session
// 15c). A weight's codes
// are cut into blocks of (row group of kRows rows, step of U =
// kStageTiles<BITS> tiles), stored block after block, a row group's steps
// in order: block (rg, st) is kRows lines of 128 bytes, line r holding row
// 16·rg + r's words 32·st..32·st+31 of wq's row (zeros past the row's end
// and for rows past N). The params are [row group][group][kRows] (scale,
// zero) pairs. So a warp's ring step (v5.1's coalesced copies) is one
// contiguous 2 KB run, and its slice of K one contiguous stream; the slot
// it fills holds the same words as v5.1's: the same sums, bit for bit.
// int8 (session 16): the same formula with a step of one tile (a line is
// a row's 128 channels), so a block is 16 rows x 128 channels, 2 KB, and
// v6.1 int8's sums are v5.1 int8's and, at a split whose slices start at
// the same tiles, v4.1's (the same tileDot, tile after tile).
// int3 (session 15d, v6.1 only): a block (rg, st) is 16 rows' 24 words (two
// tiles of 12), 1536 bytes, stored in the order v6.1's lanes read them
// (gemvq.cu tiledRow/tiledSpan): lane (g, c)'s 12 words of the step, tile u
// of rows g and g+8, spans of 3 words, at 12·(4g + c) + 6u + 3r. The warp
// copies the block whole (three 512-byte runs, 16 bytes a lane), each lane
// then reads its 12 words as three 16-byte loads at 48·lane (a quarter
// warp's 8 lanes 48 bytes apart: 8 different groups of 4 banks).
template <int BITS>
constexpr unsigned kTiledStepWords = kRows * kStageTiles<BITS> * (kTile / 32) * BITS;  // a block (rg, st): 2 KB (int4, int8), 1536 B (int3)

// ============================================================================
// v5.2 and v6.1 (LEAN, session 15b): gemv_q5's loop with fewer instructions
// a step, the same copies, reads and sums (so v5.1's and v6's bits). v5.1's
// int4 step is ~390 SASS instructions for its 2 tiles (NVRTC 12.5, sm_90;
// docs/perf/gemvq.md "Session 15b"): 144 unpack the codes, 24 HMMA, ~45
// stage x, ~85 issue the next step's copies (the shared window and the
// slot's address rebuilt, the kernel's pointers reloaded from the constant
// bank, each global address rebuilt from the tile, a branch a tile), ~30
// read the slot, ~20 apply the scales, ~15 keep the ring. LEAN keeps the
// copies' and the reads' places as 32-bit shared addresses in registers
// (a slot's size added a step), the sources as pointers advanced a step
// (the tiled layout's 4 copies of a step one pointer and immediates), and
// runs the warp's whole steps (every tile below te) through stageX and
// tileDot without their per-tile tests, so the two tiles' chains may
// interleave; only a slice's last, partial step keeps them.

// cpAsyncIf copies BYTES to the shared address s where on: CG (16 bytes,
// codes) bypasses L1, else through L1 (x, params), as cpAsync16 and
// cpAsyncCA. A predicated copy, not a branch, so that the copies of a step
// issue back to back (a copy of source size 0 instead, zeros where off:
// the same count, 12 more registers).
template <int BYTES, bool CG>
__device__ __forceinline__ void cpAsyncIf(bool on, u32 s, const void* g) {
  if constexpr (CG)
    asm volatile("{ .reg .pred p;\n setp.ne.b32 p, %0, 0;\n @p cp.async.cg.shared.global [%1], [%2], %3; }" ::"r"(int(on)), "r"(s), "l"(g),
                 "n"(BYTES)
                 : "memory");
  else
    asm volatile("{ .reg .pred p;\n setp.ne.b32 p, %0, 0;\n @p cp.async.ca.shared.global [%1], [%2], %3; }" ::"r"(int(on)), "r"(s), "l"(g),
                 "n"(BYTES)
                 : "memory");
}

// ldsV4 and ldsU32 read 16 and 4 bytes at the shared address a.
__device__ __forceinline__ uint4 ldsV4(u32 a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ u32 ldsU32(u32 a) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}

// Lean<BITS, U, TILED, TSTRIDE, PSTRIDE, XSLOT> is a lane's places of v5.1's
// coalesced copies (issueCodesCoal, issueParams, issueX) and reads
// (readStepCoal, stageXSlot) as offsets in a slot, and the sources of the
// next step it copies: codes and params (tc) and x (tx) advance apart, as
// the prologue issues the codes of its steps before the dependency wait and
// their x after it. XSLOT false (v6.2, gemv_q7): the slots hold no x (a
// slot is Slot's w and prm only, kX bytes) and xs is not called.
template <int BITS, int U, bool TILED, unsigned TSTRIDE, unsigned PSTRIDE, bool XSLOT = true>
struct Lean {
  using SlotT = Slot<BITS, U>;
  static constexpr u32 kPrm = sizeof(SlotT::w), kX = kPrm + sizeof(SlotT::prm);  // Slot's members in order, no padding
  static constexpr u32 kSlot = XSLOT ? u32(sizeof(SlotT)) : kX;
  static_assert(kX + sizeof(SlotT::x) == sizeof(SlotT), "Slot is w, prm, x back to back");
  static constexpr bool k3 = BITS == 3;      // int3 over the tiled layout: the block copied whole, a lane's 12 words read at 48·lane
  static_assert(!k3 || TILED, "int3's LEAN step reads the tiled layout");
  static constexpr int kCW = TILED ? 1 : 4;   // code pointers (tiled: copy i at +kRows·32/4·i words)
  static constexpr int kNC = k3 ? 3 : 4;      // 16-byte copies a lane a step (the block's 512-byte runs)
  static constexpr int kRowB = 128;           // a coalesced row's bytes
  static constexpr int kJ = k3 ? 3 : U * BITS / 4;  // 16-byte units a lane reads of a row a step (int3: of its 12 words)
  const u32* cw[kCW];
  const u32* prm;  // the params (Rows.params); rows g, g+8 at words p0, p1 (lanes c < U)
  unsigned p0, p1;
  const float* xp;  // x's float4 of the lane in tile tx
  int tc, tx;
  int jt;         // the tile of the lane's copied unit (issueCodesCoal's j / BITS)
  u32 dC, dP, dX; // the lane's copy places in a slot
  u32 dR[kJ];     // the lane's 16-byte reads of row g (row g + 8 at +8 rows)

  __device__ __forceinline__ Lean(const u32* __restrict__ words, const CoalRows& cr, const Rows& rw, const float* __restrict__ x, int tb,
                                  int lane) {
    const int j = lane % 8, r0 = lane / 8, g = lane / 4, c = lane % 4;
#pragma unroll
    for (int i = 0; i < kCW; i++) cw[i] = words + (cr.w[i] + unsigned(tb) * TSTRIDE);
    prm = rw.params, p0 = rw.p0, p1 = rw.p1;
    xp = x + tb * kTile + 4 * lane;
    tc = tb, tx = tb, jt = k3 ? 0 : j / BITS;
    dC = k3 ? u32(16 * lane) : u32(r0 * kRowB + 16 * (j ^ (kSwizzle<BITS> * (r0 & 1))));
    dP = kPrm + u32(4 * (c * kRows + g));
    dX = kX + u32(16 * lane);
    const int swz = kSwizzle<BITS> * (g & 1);
    if constexpr (k3) {
#pragma unroll
      for (int i = 0; i < kJ; i++) dR[i] = u32(48 * lane + 16 * i);
    } else {
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int i = 0; i < BITS / 4; i++) dR[u * (BITS / 4) + i] = u32(g * kRowB + 16 * ((u * BITS + c * BITS / 4 + i) ^ swz));
    }
  }

  // codes starts the copies of step tc's codes and params into the slot at
  // s (tiles below te; issueCodesCoal's and issueParams' copies) and moves
  // on a step.
  __device__ __forceinline__ void codes(u32 s, int te, int gshift, int lane) {
    const int c = lane % 4;
    const bool on = tc + jt < te;  // int3: the step's block, whole (a tile past K is the block's zeros)
#pragma unroll
    for (int i = 0; i < kNC; i++) cpAsyncIf<16, true>(on, s + dC + u32(4 * i * kRowB), TILED ? cw[0] + i * 4 * 32 : cw[i]);
    const bool pon = c < U && tc + c < te;
    const unsigned gi = (unsigned(tc + c) >> gshift) * PSTRIDE;
    cpAsyncIf<4, false>(pon, s + dP, prm + (p0 + gi));
    cpAsyncIf<4, false>(pon, s + dP + 4 * 8, prm + (p1 + gi));
    tc += U;
#pragma unroll
    for (int i = 0; i < kCW; i++) cw[i] += U * TSTRIDE;
  }

  // xs starts the copies of step tx's x into the slot at s (issueX's) and
  // moves on a step.
  __device__ __forceinline__ void xs(u32 s, int te) {
#pragma unroll
    for (int u = 0; u < U; u++) cpAsyncIf<16, false>(tx + u < te, s + dX + u32(u * 32 * 16), xp + u * kTile);
    tx += U, xp += U * kTile;
  }

  // read reads the lane's spans and params of the slot at s into st
  // (readStepCoal's reads).
  __device__ __forceinline__ void read(Step<BITS, U>& st, u32 s, int lane) const {
    const int g = lane / 4;
    if constexpr (k3) {  // word f = 4m + e of the lane's 12: tile f / 6, row half f % 6 / 3, span word f % 3
#pragma unroll
      for (int m = 0; m < kJ; m++) {
        const uint4 v = ldsV4(s + dR[m]);
        const u32 e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
          const int f = 4 * m + q;
          st.a[f / 6][f % 6 / 3].w[f % 3] = e[q];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
#pragma unroll
      for (int r = 0; r < 2 && !k3; r++)
#pragma unroll
        for (int i = 0; i < BITS / 4; i++) {
          const uint4 v = ldsV4(s + dR[u * (BITS / 4) + i] + u32(8 * r * kRowB));
          st.a[u][r].w[4 * i] = v.x, st.a[u][r].w[4 * i + 1] = v.y, st.a[u][r].w[4 * i + 2] = v.z, st.a[u][r].w[4 * i + 3] = v.w;
        }
      st.sz[u][0] = ldsU32(s + kPrm + u32(4 * (u * kRows + g)));
      st.sz[u][1] = ldsU32(s + kPrm + u32(4 * (u * kRows + g + 8)));
    }
  }
};

// leanStep is one step of v5.2's loop over the slot at rd (tiles t..t+U−1,
// all below te where FULL), the step kRing − 1 ahead copied into the slot at
// wr: gemv_q5's step with Lean's places.
template <int BITS, int U, bool FULL, bool XC = false, typename L>
__device__ __forceinline__ void leanStep(float (&acc)[2], L& lc, XStage<U>& xs, u32 rd, u32 wr, int t, int te, int gshift, int lane) {
  cpAsyncWait<kRing - 2>();
  __syncwarp();  // every lane's copies of this step (the params) are visible; slot wr's last reads are done
  lc.codes(wr, te, gshift, lane);  // step t + (kRing − 1)·U: its tiles past te copy nothing
  lc.xs(wr, te);
  cpAsyncCommit();
  Step<BITS, U> st;
  lc.read(st, rd, lane);
  stageXFrom<U, FULL>(xs, t, te, lane, [&](int u) {
    const uint4 v = ldsV4(rd + lc.dX + u32(u * 32 * 16));
    return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
  });
  tileDot<BITS, U, FULL, XC>(acc, st, xs, t, te, lane);
}

// leanLoop is gemv_q5's prologue and loop with Lean's places (LEAN): the
// same copies into the same slots, the same reads and sums (XC: tileDot's).
template <int BITS, int U, bool TILED, unsigned TSTRIDE, unsigned PSTRIDE, bool XC = false>
__device__ __forceinline__ void leanLoop(float (&acc)[2], void* ring, XStage<U>& xs, const float* __restrict__ x, const u32* __restrict__ words,
                                         const CoalRows& cr, const Rows& rw, int tb, int te, int gshift, int early, int lane) {
  using L = Lean<BITS, U, TILED, TSTRIDE, PSTRIDE>;
  L lc(words, cr, rw, x, tb, lane);
  const u32 r0 = sharedAddr(ring), rEnd = r0 + kRing * L::kSlot;
  if (early) {
#pragma unroll
    for (int s = 0; s < kRing - 1; s++) lc.codes(r0 + s * L::kSlot, te, gshift, lane);
  }
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) {
#pragma unroll
    for (int s = 0; s < kRing - 1; s++) lc.codes(r0 + s * L::kSlot, te, gshift, lane);
  }
#pragma unroll
  for (int s = 0; s < kRing - 1; s++) {
    lc.xs(r0 + s * L::kSlot, te);
    cpAsyncCommit();
  }
  u32 rd = r0, wr = r0 + (kRing - 1) * L::kSlot;
  int t = tb;
  for (; t + U <= te; t += U) {
    leanStep<BITS, U, true, XC>(acc, lc, xs, rd, wr, t, te, gshift, lane);
    rd = rd + L::kSlot == rEnd ? r0 : rd + L::kSlot;
    wr = wr + L::kSlot == rEnd ? r0 : wr + L::kSlot;
  }
  if (t < te) leanStep<BITS, U, false, XC>(acc, lc, xs, rd, wr, t, te, gshift, lane);
  cpAsyncWait<0>();
}

// gemv_q5: grid (ceil(N / (kRows·kWarps/S))), block kThreads, dynamic
// shared memory ringBytes >= kWarps·kRingBytes<BITS>. Warp w takes row
// group w / S and slice w % S of its K steps (v4's); gshift is log2(G/128),
// K a multiple of G. early: issue the first kRing − 1 steps' codes and
// params before the dependency wait. COAL: the coalesced copies of the
// codes (int4, int8), else each lane's own. TILED (v6, with COAL, int4 and
// int8): words and params in the tiled layout above. LOADS (a bench
// diagnostic, `bench gemvq --diag`): the same copies with no math, the
// words read back from the ring and XOR-ed into y (nonsense values: only
// the time means anything). LEAN (v5.2, over TILED v6.1; with COAL, not
// LOADS): leanLoop's step, the same bits with fewer instructions. XC
// (v6.1c, session 24; with LEAN): the codes by codesSpanX, int3's in place
// (v6.2's unpack: 362 -> ~326 SASS instructions an int3 step; the same
// codes, so the same bits; int4 and int8 unchanged).
template <int BITS, int S, bool COAL, bool TILED = false, bool LOADS = false, bool LEAN = false, bool XC = false>
__global__ void __launch_bounds__(kThreads, kMinBlocks5) gemv_q5(const float* __restrict__ x, const u32* __restrict__ words,
                                                       const u16* __restrict__ params, const float* __restrict__ bias,
                                                       float* __restrict__ y, int N, int K, int gshift, int early, int ringBytes) {
  constexpr int U = kStageTiles<BITS>;
  constexpr int kGroups = kWarps / S;  // row groups per CTA
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  // kCoal: the coalesced copies (int4, int8; int3's 48-byte tiles keep the
  // lanes' own).
  constexpr bool kCoal = COAL && BITS % 4 == 0;
  static_assert(!TILED || kCoal || (BITS == 3 && LEAN), "the tiled layout is read by the coalesced copies (int3: LEAN's)");
  // Words a tile advances a row's place, and a row's params a group.
  constexpr unsigned kTStride = TILED ? kTiledStepWords<BITS> / U : kTile / 32 * BITS;
  constexpr unsigned kPStride = TILED ? kRows : 1;
  if (ringBytes < kWarps * kRingBytes<BITS>) __trap();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % S;
  const int g = lane / 4, c = lane % 4;
  const int rg = blockIdx.x * kGroups + warp / S, n0 = rg * kRows;
  const int tiles = K / kTile, steps = (tiles + U - 1) / U, per = (steps + S - 1) / S;
  const int tb = min(tiles, slice * per * U), te = min(tiles, (slice + 1) * per * U);
  const int rowWords = K / 32 * BITS, groups = tiles >> gshift;
  const int na = min(n0 + g, N - 1), nb = min(n0 + g + 8, N - 1);
  const u32* prm = reinterpret_cast<const u32*>(params);
  const Rows rw = TILED ? Rows{words, prm, 0, 0, unsigned(rg * groups * kRows + g), unsigned(rg * groups * kRows + g + 8)}
                        : Rows{words, prm, unsigned(na * rowWords + c * BITS), unsigned(nb * rowWords + c * BITS), unsigned(na * groups),
                               unsigned(nb * groups)};
  CoalRows cr;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if constexpr (TILED) cr.w[i] = unsigned(rg * steps) * kTiledStepWords<BITS> + unsigned(4 * i + lane / 8) * 32 + lane % 8 * 4;
    else cr.w[i] = unsigned(min(n0 + 4 * i + lane / 8, N - 1) * rowWords + lane % 8 * 4);
  }
  extern __shared__ __align__(16) unsigned char gemvq5Ring[];
  Slot<BITS, U>* ring = reinterpret_cast<Slot<BITS, U>*>(gemvq5Ring) + warp * kRing;
  __shared__ XStage<U> xs[kWarps];
  if constexpr (LEAN) {
    static_assert((kCoal || (TILED && BITS == 3)) && !LOADS, "LEAN is v5.1's coalesced step with its math (int3: over the tiled layout)");
    float acc[2] = {0.f, 0.f};
    leanLoop<BITS, U, TILED, kTStride, kPStride, XC>(acc, ring, xs[warp], x, words, cr, rw, tb, te, gshift, early, lane);
    storeRows<S>(acc, y, bias, N, n0, warp, slice, lane, g, c);
    return;
  }
  if (early) {
#pragma unroll
    for (int s = 0; s < kRing - 1; s++) {
      if constexpr (kCoal) issueCodesCoal<BITS, U, kTStride, kPStride>(ring[s], words, cr, rw, tb + s * U, te, gshift, lane);
      else issueCodes(ring[s], rw, tb + s * U, te, gshift, lane);
    }
  }
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) {
#pragma unroll
    for (int s = 0; s < kRing - 1; s++) {
      if constexpr (kCoal) issueCodesCoal<BITS, U, kTStride, kPStride>(ring[s], words, cr, rw, tb + s * U, te, gshift, lane);
      else issueCodes(ring[s], rw, tb + s * U, te, gshift, lane);
    }
  }
  // One commit group a step: the prologue's first group also holds every
  // prologue step's codes, so step j's data is complete once all but the
  // newest kRing − 2 groups are.
#pragma unroll
  for (int s = 0; s < kRing - 1; s++) {
    issueX(ring[s], x, tb + s * U, te, lane);
    cpAsyncCommit();
  }
  float acc[2] = {0.f, 0.f};
  u32 fold = 0;  // LOADS: the words read, XOR-ed
  int rd = 0, wr = kRing - 1;  // the slots read and filled this step
  for (int t = tb; t < te; t += U) {
    cpAsyncWait<kRing - 2>();
    __syncwarp();  // every lane's copies of this step (the params) are visible; slot wr's last reads are done
    const int tn = t + (kRing - 1) * U;
    if (tn < te) {
      if constexpr (kCoal) issueCodesCoal<BITS, U, kTStride, kPStride>(ring[wr], words, cr, rw, tn, te, gshift, lane);
      else issueCodes(ring[wr], rw, tn, te, gshift, lane);
      issueX(ring[wr], x, tn, te, lane);
    }
    cpAsyncCommit();
    Step<BITS, U> st;
    if constexpr (kCoal) readStepCoal(st, ring[rd], lane);
    else readStep(st, ring[rd], lane);
    if constexpr (LOADS) {
#pragma unroll
      for (int u = 0; u < U; u++) {
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
          for (int i = 0; i < BITS; i++) fold ^= st.a[u][r].w[i];
        fold ^= st.sz[u][0] ^ st.sz[u][1] ^ __float_as_uint(ring[rd].x[u][lane].x);
      }
    } else {
      stageXSlot<BITS, U>(xs[warp], ring[rd], t, te, lane);
      tileDot<BITS, U>(acc, st, xs[warp], t, te, lane);
    }
    rd = rd + 1 == kRing ? 0 : rd + 1;
    wr = wr + 1 == kRing ? 0 : wr + 1;
  }
  cpAsyncWait<0>();
  if constexpr (LOADS) acc[0] = __uint_as_float(fold & 0x3fffffffu);  // finite
  storeRows<S>(acc, y, bias, N, n0, warp, slice, lane, g, c);
}

// ============================================================================
// v6.2 (gemv_q7, session 23): v6.1 with x split once a CTA. v6.1's int4 step
// (312 SASS instructions for 2 tiles, NVRTC 12.5) spends ~40 on stageX (each
// warp splitting its slot's float4 of x into hi and lo and storing them for
// the mma lanes, two __syncwarp), ~8 on x's copies into the ring and ~15 on
// Σx (an mma chain with A = ones, its ones rebuilt, a shuffle a tile), every
// step, in every warp of the slice. Here the CTA splits x once after the
// dependency wait, every tile of K into shared memory in the layout the mma
// lanes read (XTile), and sums each tile's Σx once by the same mma chain
// (sx); a step is then the codes' copies, the slot's reads, the unpack, the
// codes' mma and the scales. The ring's slots hold no x (Lean's XSLOT
// false: 2176 bytes of int4 a slot instead of 3200), so the CTA's shared
// memory is kWarps rings of R slots plus K/128 XTiles of 512 bytes and
// K/128 floats: R 5 on K 4096 (101 KB of int4), R 3 on K 14336 (110 KB), at
// least 80 KB so that two CTAs an SM, not three, run it (gemvq6.go
// gemvq7Ring picks R, gemvq7MinShared: three lost back to back). The prologue
// commits each step's copies as its own group (v6.1's first group holds
// every prologue step's codes), so the first step waits for its own 2 KB.
//
// The same sums as v6.1, bit for bit: B's columns hold the same hi and lo
// at the same k for every tile (tiles past a warp's run hold x instead of
// v6.1's zeros, in columns whose sums no lane uses: the mma's columns are
// independent), Σx of a tile is the same chain of 8 mma over the same
// column (the chain here sums 4 tiles in B's 8 columns, v6.1's 2 tiles
// twice), and the accumulator's fma are tileDot's in its order.

// XTile is one tile of x split for the mma lanes: hi[q][c] the 4 half2 of
// channels 32c+8q..+7 (XStage's hi of one tile), lo likewise but at
// lo[q ^ 1][c], so that a quarter warp's 16-byte reads of one tile (lanes
// g = 2m hi, g = 2m+1 lo, c = 0..3) fall in the two halves of the banks
// without XStage's pad.
struct XTile {
  uint4 hi[4][4];
  uint4 lo[4][4];
};

// kXChain is the tiles one Σx mma chain sums (B's 8 columns: hi and lo of
// 4 tiles); the CTA's XTiles are a multiple of it, the ones past K zeros.
constexpr int kXChain = 4;

// xTiles is the XTiles a CTA holds for K/kTile tiles.
__device__ __forceinline__ int xTiles(int tiles) { return (tiles + kXChain - 1) / kXChain * kXChain; }

// splitXCTA splits x (tiles tiles of kTile floats) into the CTA's xt (a
// multiple of kXChain) XTiles at xs (zeros past tiles: warp w takes tiles
// w, w + kWarps, ..., kLoads loads in flight, lane l channels 4l..4l+3 as
// stageXFrom), then sums Σx of every tile into sx (warp w chains w, w +
// kWarps, ...: lanes g = 2m read tile 4b + m's hi, g = 2m+1 its lo, the
// mma with A = ones sums each column, lane c = 0..3 of row 0 keeps tile 4b
// + c's Σhi + 2⁻¹¹·Σlo, tileDot's sxl). Every thread of the CTA calls it
// (two barriers).
__device__ __forceinline__ void splitXCTA(XTile* xs, float* sx, const float* __restrict__ x, int tiles, int xt, int warp, int lane) {
  constexpr int kLoads = 4;
  const int c = lane / 8, q = lane % 8 / 2, h = lane % 2;
  for (int t0 = warp; t0 < xt; t0 += kLoads * kWarps) {
    float4 v[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; i++) {
      const int t = t0 + i * kWarps;
      v[i] = t < tiles ? *reinterpret_cast<const float4*>(x + t * kTile + 4 * lane) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int i = 0; i < kLoads; i++) {
      const int t = t0 + i * kWarps;
      if (t >= xt) break;
      u32 h0, l0, h1, l1;
      split2(v[i].x, v[i].y, h0, l0);
      split2(v[i].z, v[i].w, h1, l1);
      reinterpret_cast<uint2*>(&xs[t].hi[q][c])[h] = make_uint2(h0, h1);
      reinterpret_cast<uint2*>(&xs[t].lo[q ^ 1][c])[h] = make_uint2(l0, l1);
    }
  }
  __syncthreads();
  const int g = lane / 4, cc = lane % 4, p = g & 1;
  for (int b = warp; b < xt / kXChain; b += kWarps) {
    const XTile& xt4 = xs[kXChain * b + g / 2];
    u32 xb[16];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const uint4 v = p ? xt4.lo[j ^ 1][cc] : xt4.hi[j][cc];
      xb[4 * j] = v.x, xb[4 * j + 1] = v.y, xb[4 * j + 2] = v.z, xb[4 * j + 3] = v.w;
    }
    float e[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 8; j++) gemvq::mmaA4(e, gemvq::kOnes, gemvq::kOnes, gemvq::kOnes, gemvq::kOnes, xb[2 * j], xb[2 * j + 1]);
    if (g == 0) sx[kXChain * b + cc] = fmaf(e[1], kLoUnscale, e[0]);
  }
  __syncthreads();
}

// tileDotX is tileDot with B read from the CTA's XTiles (tile t0 + u at the
// shared address xa + 512·(t0 + u)) and Σx from sx: the same mma chains
// and fma in the same order. xl is the lane's place in an XTile: lo's half
// for g odd, lane c's 16 bytes; q's unit is at xl + 64·(q ^ (g & 1)).
template <int BITS, int U, bool FULL>
__device__ __forceinline__ void tileDotX(float (&acc)[2], const Step<BITS, U>& st, u32 xa, u32 xl, const float* sx, int t0, int te, int lane) {
  static_assert(U == 1 || U == 2 || U == 4, "B's 8 columns hold the hi and lo of at most 4 tiles");
  const int g = lane / 4, p = g & 1;
#pragma unroll
  for (int u = 0; u < U; u++) {
    if (!FULL && t0 + u >= te) break;  // warp-uniform
    u32 w0[16], w1[16], xb[16];
    codesSpanX<BITS>(w0, st.a[u][0]);
    codesSpanX<BITS>(w1, st.a[u][1]);
    const int tu = (u + g / 2) % U;
    const u32 a = xa + u32(sizeof(XTile)) * u32(t0 + tu) + xl;
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const uint4 v = ldsV4(a + u32(64 * q) + (q & 1 ? -u32(64 * p) : u32(64 * p)));
      xb[4 * q] = v.x, xb[4 * q + 1] = v.y, xb[4 * q + 2] = v.z, xb[4 * q + 3] = v.w;
    }
    float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 8; j++) gemvq::mmaA4(d, w0[2 * j], w1[2 * j], w0[2 * j + 1], w1[2 * j + 1], xb[2 * j], xb[2 * j + 1]);
    const float s = sx[t0 + u];
    const float2 sz0 = h2x2(st.sz[u][0]), sz1 = h2x2(st.sz[u][1]);  // (scale, zero)
    acc[0] = fmaf(sz0.x, fmaf(d[1], kLoUnscale, d[0]), fmaf(sz0.y, s, acc[0]));
    acc[1] = fmaf(sz1.x, fmaf(d[3], kLoUnscale, d[2]), fmaf(sz1.y, s, acc[1]));
  }
}

// xStep is one step of v6.2's loop over the slot at rd (tiles t..t+U−1, all
// below te where FULL), the step R − 1 ahead copied into the slot at wr.
template <int BITS, int U, int R, bool FULL, typename L>
__device__ __forceinline__ void xStep(float (&acc)[2], L& lc, u32 xa, u32 xl, const float* sx, u32 rd, u32 wr, int t, int te, int gshift,
                                      int lane) {
  cpAsyncWait<R - 2>();
  __syncwarp();  // every lane's copies of this step (the params) are visible; slot wr's last reads are done
  lc.codes(wr, te, gshift, lane);  // step t + (R − 1)·U: its tiles past te copy nothing
  cpAsyncCommit();
  Step<BITS, U> st;
  lc.read(st, rd, lane);
  tileDotX<BITS, U, FULL>(acc, st, xa, xl, sx, t, te, lane);
}

// gemv_q7 (v6.2): gemv_q5<BITS, S, true, true, false, true>'s grid, CTA,
// split and sums over the tiled layout, x split once a CTA (above). Dynamic
// shared memory: xTiles(K/kTile) XTiles, as many floats of Σx, then kWarps
// rings of R slots of Lean<…, false>::kSlot bytes (smem, checked: the kernel
// traps if it is smaller).

template <int BITS, int S, int R>
__global__ void __launch_bounds__(kThreads, kMinBlocks5) gemv_q7(const float* __restrict__ x, const u32* __restrict__ words,
                                                       const u16* __restrict__ params, const float* __restrict__ bias,
                                                       float* __restrict__ y, int N, int K, int gshift, int early, int smem) {
  constexpr int U = kStageTiles<BITS>;
  constexpr int kGroups = kWarps / S;  // row groups per CTA
  constexpr unsigned kTStride = kTiledStepWords<BITS> / U, kPStride = kRows;
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  static_assert(R >= 2, "a ring of at least two slots");
  using L = Lean<BITS, U, true, kTStride, kPStride, false>;
  const int tiles = K / kTile, xt = xTiles(tiles);
  if (smem < int(xt * (sizeof(XTile) + sizeof(float)) + kWarps * R * L::kSlot)) __trap();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % S;
  const int g = lane / 4, c = lane % 4;
  const int rg = blockIdx.x * kGroups + warp / S, n0 = rg * kRows;
  const int steps = (tiles + U - 1) / U, per = (steps + S - 1) / S;
  const int tb = min(tiles, slice * per * U), te = min(tiles, (slice + 1) * per * U);
  const int groups = tiles >> gshift;
  const Rows rw{words, reinterpret_cast<const u32*>(params), 0, 0, unsigned(rg * groups * kRows + g), unsigned(rg * groups * kRows + g + 8)};
  CoalRows cr;
#pragma unroll
  for (int i = 0; i < 4; i++) cr.w[i] = unsigned(rg * steps) * kTiledStepWords<BITS> + unsigned(4 * i + lane / 8) * 32 + lane % 8 * 4;
  extern __shared__ __align__(16) unsigned char gemvq7Smem[];
  XTile* xs = reinterpret_cast<XTile*>(gemvq7Smem);
  float* sx = reinterpret_cast<float*>(xs + xt);
  L lc(words, cr, rw, x, tb, lane);
  const u32 r0 = sharedAddr(sx + xt) + u32(warp * R) * L::kSlot, rEnd = r0 + R * L::kSlot;
  if (early) {
#pragma unroll
    for (int s = 0; s < R - 1; s++) {
      lc.codes(r0 + s * L::kSlot, te, gshift, lane);
      cpAsyncCommit();
    }
  }
  gridDependencyWait();
  gridLaunchDependents();
  if (!early) {
#pragma unroll
    for (int s = 0; s < R - 1; s++) {
      lc.codes(r0 + s * L::kSlot, te, gshift, lane);
      cpAsyncCommit();
    }
  }
  splitXCTA(xs, sx, x, tiles, xt, warp, lane);
  const u32 xa = sharedAddr(xs), xl = u32((g & 1) * sizeof(XTile::hi) + 16 * c);
  float acc[2] = {0.f, 0.f};
  u32 rd = r0, wr = r0 + (R - 1) * L::kSlot;
  int t = tb;
  for (; t + U <= te; t += U) {
    xStep<BITS, U, R, true>(acc, lc, xa, xl, sx, rd, wr, t, te, gshift, lane);
    rd = rd + L::kSlot == rEnd ? r0 : rd + L::kSlot;
    wr = wr + L::kSlot == rEnd ? r0 : wr + L::kSlot;
  }
  if (t < te) xStep<BITS, U, R, false>(acc, lc, xa, xl, sx, rd, wr, t, te, gshift, lane);
  cpAsyncWait<0>();
  storeRows<S>(acc, y, bias, N, n0, warp, slice, lane, g, c);
}

// gemv_q5_moe is gemv_q5's LEAN step (v5.2 over wq's layout, v6.1 over the
// tiled one) for the experts a mixture's tokens chose (moe.go's packed
// path): grid (ceil(N / (kRows·kWarps/S)), J·P) for J projections of the
// same shape (gate and up: J 2) and P pairs, CTA (b, q) is gemv_q5's CTA b
// over projection j = q / P's weight of expert e = idx[p], p = q % P (its
// words and params at wtab[2jE + e] and ptab[2jE + e]), with x's row p /
// xdiv (xdiv k: each token's x for its k slots; 1: one row a pair) and y's
// row q (projection j's P rows after projection j−1's). The same sums as
// gemv_q5<BITS, S, true, TILED, false, true> over that weight, bit for bit.
// The addresses depend on the router's output (the kernel ahead), so
// nothing is copied before the dependency wait (early 0). A route out of
// [0, E) writes NaN to the CTA's rows.
template <int BITS, int S, bool TILED>
__global__ void __launch_bounds__(kThreads, kMinBlocks5)
    gemv_q5_moe(const float* __restrict__ x, const unsigned long long* __restrict__ wtab, const unsigned long long* __restrict__ ptab,
                const int* __restrict__ idx, float* __restrict__ y, int N, int K, int gshift, int xdiv, int E, int P, int ringBytes) {
  constexpr int U = kStageTiles<BITS>;
  constexpr int kGroups = kWarps / S;
  constexpr unsigned kTStride = TILED ? kTiledStepWords<BITS> / U : kTile / 32 * BITS;
  constexpr unsigned kPStride = TILED ? kRows : 1;
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  static_assert(BITS % 4 == 0 || (TILED && BITS == 3), "LEAN's widths: int4, int8 (either layout), int3 (tiled)");
  if (ringBytes < kWarps * kRingBytes<BITS>) __trap();
  gridDependencyWait();
  const int q = blockIdx.y, p = q % P, e = idx[p];
  const size_t tab = size_t(q / P) * 2 * E;
  y += size_t(q) * N;
  if (e < 0 || e >= E) {
    const int n = blockIdx.x * kGroups * kRows + threadIdx.x;
    if (threadIdx.x < kGroups * kRows && n < N) y[n] = __int_as_float(0x7fffffff);
    return;
  }
  x += size_t(p / xdiv) * K;
  const u32* words = reinterpret_cast<const u32*>(wtab[tab + e]);
  const u16* params = reinterpret_cast<const u16*>(ptab[tab + e]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % S;
  const int g = lane / 4, c = lane % 4;
  const int rg = blockIdx.x * kGroups + warp / S, n0 = rg * kRows;
  const int tiles = K / kTile, steps = (tiles + U - 1) / U, per = (steps + S - 1) / S;
  const int tb = min(tiles, slice * per * U), te = min(tiles, (slice + 1) * per * U);
  const int rowWords = K / 32 * BITS, groups = tiles >> gshift;
  const int na = min(n0 + g, N - 1), nb = min(n0 + g + 8, N - 1);
  const u32* prm = reinterpret_cast<const u32*>(params);
  const Rows rw = TILED ? Rows{words, prm, 0, 0, unsigned(rg * groups * kRows + g), unsigned(rg * groups * kRows + g + 8)}
                        : Rows{words, prm, unsigned(na * rowWords + c * BITS), unsigned(nb * rowWords + c * BITS), unsigned(na * groups),
                               unsigned(nb * groups)};
  CoalRows cr;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if constexpr (TILED) cr.w[i] = unsigned(rg * steps) * kTiledStepWords<BITS> + unsigned(4 * i + lane / 8) * 32 + lane % 8 * 4;
    else cr.w[i] = unsigned(min(n0 + 4 * i + lane / 8, N - 1) * rowWords + lane % 8 * 4);
  }
  extern __shared__ __align__(16) unsigned char gemvq5Ring[];
  Slot<BITS, U>* ring = reinterpret_cast<Slot<BITS, U>*>(gemvq5Ring) + warp * kRing;
  __shared__ XStage<U> xs[kWarps];
  float acc[2] = {0.f, 0.f};
  leanLoop<BITS, U, TILED, kTStride, kPStride>(acc, ring, xs[warp], x, words, cr, rw, tb, te, gshift, 0, lane);
  storeRows<S>(acc, y, nullptr, N, n0, warp, slice, lane, g, c);
}

// tile_pack writes the tiled layout (above; gemvq.go PackTiles, its
// reference) of a weight in wq's layout: tw [ceil(N/kRows)][steps][kRows][32]
// words (int3: each block in v6.1's read order; int8: steps of one tile),
// tp [ceil(N/kRows)][K/G][kRows]
// (scale, zero) pairs, one thread a
// word (a grid-stride loop over both).
template <int BITS>
__global__ void tile_pack(const u32* __restrict__ words, const u32* __restrict__ params, u32* __restrict__ tw, u32* __restrict__ tp, int N,
                          int K, int G) {
  constexpr int U = kStageTiles<BITS>;
  gridDependencyWait();
  gridLaunchDependents();
  const int rowWords = K / 32 * BITS, steps = (K / kTile + U - 1) / U, groups = K / G, rgs = (N + kRows - 1) / kRows;
  const long long nw = (long long)rgs * steps * kTiledStepWords<BITS>, np = (long long)rgs * groups * kRows;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nw + np; i += (long long)gridDim.x * blockDim.x) {
    if (i < nw) {
      const long long b = i / kTiledStepWords<BITS>;
      const int st = int(b % steps), rg = int(b / steps);
      int n, k;
      if constexpr (BITS == 3) {  // lane l = w / 12's word f = w % 12: tile f / 6, row g + 8·(f % 6 / 3), span word f % 3
        const int w = int(i % kTiledStepWords<3>), l = w / 12, f = w % 12;
        n = rg * kRows + l / 4 + 8 * (f % 6 / 3), k = (st * U + f / 6) * 12 + l % 4 * 3 + f % 3;
      } else {
        const int w = int(i % 32), r = int(i / 32 % kRows);
        n = rg * kRows + r, k = st * 32 + w;
      }
      tw[i] = n < N && k < rowWords ? words[(long long)n * rowWords + k] : 0u;
    } else {
      const long long j = i - nw, b = j / kRows;
      const int n = int(b / groups) * kRows + int(j % kRows);
      tp[j] = n < N ? params[(long long)n * groups + b % groups] : 0u;
    }
  }
}

}  // namespace gemvq4

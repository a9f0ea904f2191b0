// gemvq6dec.cu: v6.1 with DEC in its CTAs (session 18, issue #22; docs/perf/dec.md
// "Session 18"). gemv_q6_dec is gemvq4.cu's gemv_q5 over the tiled layout
// with the LEAN step (v6.1: the same copies, sums and store of the base, so
// the same bits), plus one DEC warp a CTA that computes the dynamic error
// compensation of the CTA's own outputs while the kernelWarps base warps
// stream the weights:
//
//   - the selection is made before the launch, once per x (a list of
//     nsel increasing input channels sel, wq.SelectApprox's list; the DEC
//     warp copies their values x[sel] with their rows); the DEC warp never
//     ranks anything;
//   - the residual Rᵀ [K][N] (int4, groups of wq.ResidualGroup outputs,
//     wq's packed rows, device memory) is input-major: a selected channel's
//     residuals for the CTA's kOut outputs are contiguous (kOut/2 bytes, one
//     (scale, zero) pair), so the warp copies whole 8- or 16-byte units;
//   - the warp stages the rows' slices into a double buffer of shared
//     memory with cp.async (a batch in flight while it sums the other), and
//     each lane sums its outputs' terms in the list's order with
//     wq.Compensate's rounding (one rounded product, one rounded add a term:
//     __fmul_rn, __fadd_rn; ŵ = s·q + z exact as fma because s·q is exact);
//   - the sums go to shared memory, and the CTA's one barrier (the base's
//     split reduction) orders them before the epilogue, which writes
//     y = (Σ slices + bias) + comp with one rounded add: wq.Compensate's bits
//     on top of v6.1's. No flags, no part buffer, no extra launch.
//
// The CTA has kThreads + 32 threads, the launch bounds keep v6.1's 2 CTAs an
// SM (at most 112 registers a thread), and the DEC buffers take 2 ·
// GEMVQ6DEC_BUF bytes of dynamic shared memory after the base's ring.
//
// Session 22b (docs/perf/dec.md "Session 22b"): gemv_q6_dec<BITS, S, TAIL>.
// TAIL false is the above. The one DEC warp issues every row's copies and
// products at ~40-110 cycles a row, so at k 32-64 it ends long after the
// base. TAIL true leaves the DEC warp idle while the base streams; after
// the base's barrier (the rings are free then) every warp of the CTA forms
// the listed rows' products into the rings (decTailProducts: a lane a row,
// its slice in one to four 16-byte loads), and the DEC warp adds them in
// list order (decTailSum, one rounded add a term): the same terms in the
// same order, so the same bits. GEMVQ6DEC.Launch picks the form by the
// list's length and the split.

#include "gemvq4.cu"
#include "dec.cu"  // select_topk_cta (select_q6); built with DEC_NO_SELFTEST

namespace gemvq4 {

// GEMVQ6DEC_BUF is the bytes of one of the DEC warp's two staging buffers
// (an NVRTC -D knob; gemvq6dec.go's gemvq6DECBuf mirrors the default). Two
// CTAs of v6.1 int4 leave ~3.5 KB an SM's CTA free of the 228 KB.
#ifndef GEMVQ6DEC_BUF
#define GEMVQ6DEC_BUF 1792
#endif
constexpr int kDecBufBytes = GEMVQ6DEC_BUF;

// GEMVQ6DEC_DIAG=1 (a bench diagnostic, an NVRTC -D knob): the base warps
// skip their loop (no weights read, sums 0), so the kernel's time is the DEC
// warp's alone; 2: that, and the DEC warp copies only the first two batches
// and sums every batch (its sums alone, nonsense values); 3: the DEC warp
// copies every batch and sums none (its copies alone).
#ifndef GEMVQ6DEC_DIAG
#define GEMVQ6DEC_DIAG 0
#endif

// GEMVQ6DEC_WARPS (an NVRTC -D knob): 1, one DEC warp copies and sums; 2,
// a copier warp stages the batches and a summer warp sums them, handing
// the two buffers over through named barriers (decPair).
#ifndef GEMVQ6DEC_WARPS
#define GEMVQ6DEC_WARPS 1
#endif
constexpr int kDecWarps = GEMVQ6DEC_WARPS;
static_assert(kDecWarps == 1 || kDecWarps == 2, "one or two DEC warps");
constexpr int kDecThreads = kThreads + 32 * kDecWarps;  // the base warps and the DEC warps
constexpr int kResGroup = 128;              // wq.ResidualGroup: outputs a residual (scale, zero) pair covers

// DecStage<S> is the DEC warp's geometry at split S: the CTA's kOut
// outputs (kWarps / S row groups of kRows), a row's slice of kRowWords
// int4 words copied as kCopies units of kCopy bytes, kRows1 rows a buffer
// (codes [kRows1][kRowWords], then params [kRows1] u32, then x [kRows1]
// float), kP outputs a lane (contiguous, in one word) on kLanes lanes.
template <int S>
struct DecStage {
  static constexpr int kOut = kRows * kWarps / S;
  static constexpr int kRowWords = kOut / 8;
  static constexpr int kCopy = kRowWords >= 4 ? 16 : 4 * kRowWords;
  static constexpr int kCopies = 4 * kRowWords / kCopy;
  static constexpr int kRows1 = kDecBufBytes / (4 * kRowWords + 8);
  static constexpr int kPrmOff = 4 * kRowWords * kRows1, kXOff = kPrmOff + 4 * kRows1;
  static constexpr int kP = kOut >= 32 ? kOut / 32 : 1;
  static constexpr int kLanes = kOut / kP;
  static_assert(kResGroup % kOut == 0, "a CTA's outputs lie in one residual group");
  static_assert(kRows1 >= 8, "a buffer holds a few rows");
  static_assert(kDecBufBytes % 16 == 0 && (4 * kRowWords) % kCopy == 0, "16-byte aligned copies");
};

// cpAsyncCAs copies BYTES (4, 8 or 16) from g to the shared address s
// through L1.
template <int BYTES>
__device__ __forceinline__ void cpAsyncCAs(u32 s, const void* g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(g), "n"(BYTES) : "memory");
}

// ldsF32 reads a float at the shared address a.
__device__ __forceinline__ float ldsF32(u32 a) { return __uint_as_float(ldsU32(a)); }

// kDecIt<S> is the rows a lane copies of a batch (a lane a row, 32 apart).
template <int S>
constexpr int kDecIt = (DecStage<S>::kRows1 + 31) / 32;

// decList loads the channels of batch b's rows the lane copies into ks
// (0 past the list): a batch ahead of its copies, so that their addresses
// are ready when decIssue runs.
template <int S>
__device__ __forceinline__ void decList(unsigned (&ks)[kDecIt<S>], int b, const int* __restrict__ sel, int nsel, int lane) {
  const int r0 = b * DecStage<S>::kRows1, rn = min(DecStage<S>::kRows1, nsel - r0);
#pragma unroll
  for (int j = 0; j < kDecIt<S>; j++) {
    const int i = lane + 32 * j;
    ks[j] = i < rn ? unsigned(__ldg(sel + r0 + i)) : 0u;
  }
}

// decIssue starts the copies of batch b of the list (rows b·kRows1 ..,
// below nsel; their channels in ks, decList's) into buffer b % 2 at buf: a
// lane a row, each row's codes (kCopies units), its (scale, zero) pair and
// its x, x[k] (session 19: read from x itself, so the list is all a
// selection writes). Batches past the list copy nothing.
template <int S>
__device__ __forceinline__ void decIssue(u32 buf, int b, const unsigned (&ks)[kDecIt<S>], const float* __restrict__ x, int nsel,
                                         const u32* __restrict__ wbase, const u32* __restrict__ pbase, unsigned rowW, unsigned rowP,
                                         int lane) {
  using D = DecStage<S>;
  const u32 s = buf + u32((b & 1) * kDecBufBytes);
  const int r0 = b * D::kRows1, rn = min(D::kRows1, nsel - r0);
#pragma unroll
  for (int j = 0; j < kDecIt<S>; j++) {
    const int i = lane + 32 * j;
    if (i < rn) {
      const u32* src = wbase + ks[j] * rowW;
#pragma unroll
      for (int c = 0; c < D::kCopies; c++) cpAsyncCAs<D::kCopy>(s + u32(4 * D::kRowWords * i + c * D::kCopy), src + c * (D::kCopy / 4));
      cpAsyncCAs<4>(s + u32(D::kPrmOff + 4 * i), pbase + ks[j] * rowP);
      cpAsyncCAs<4>(s + u32(D::kXOff + 4 * i), x + ks[j]);
    }
  }
}

// decRow adds row r's terms of the buffer at s to the lane's sums:
// acc[p] += fl(x·fl(s·q + z)) for its outputs, q the nibble at shift sh[p]
// of the lane's word wi.
template <int S>
__device__ __forceinline__ void decRow(float (&acc)[DecStage<S>::kP], u32 s, int r, int wi, const int (&sh)[DecStage<S>::kP]) {
  using D = DecStage<S>;
  const u32 w = ldsU32(s + u32(4 * (D::kRowWords * r + wi)));
  const u32 pz = ldsU32(s + u32(D::kPrmOff + 4 * r));
  const float xk = ldsF32(s + u32(D::kXOff + 4 * r));
  const float sc = h2f(u16(pz & 0xffffu)), z = h2f(u16(pz >> 16));
#pragma unroll
  for (int p = 0; p < D::kP; p++) {
    // The code as a float: 2²³ + q minus 2²³, exact.
    const float q = __uint_as_float(0x4b000000u | ((w >> sh[p]) & 0xfu)) - 8388608.f;
    acc[p] = __fadd_rn(acc[p], __fmul_rn(xk, fmaf(sc, q, z)));
  }
}

// decRows8 adds rows r..r+7 of the buffer at s at 16 outputs a CTA (split
// 8, where decRow leaves half the warp idle): lanes 0-15 form the products
// of rows r..r+3 for output lane, lanes 16-31 those of rows r+4..r+7 for
// output lane − 16, and lanes 0-15 add their four, then the upper half's
// four, in row order: decRow's terms in decRow's order (the same bits) with
// half the instructions a row. acc is meaningful in lanes 0-15.
__device__ __forceinline__ void decRows8(float& acc, u32 s, int r, int lane) {
  using D = DecStage<8>;
  const int o = lane & 15, wi = o / 8, e = o % 8, sh = (e & 1) * 16 + (e >> 1) * 4;
  const int r0 = r + 4 * (lane >> 4);
  float pr[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const u32 w = ldsU32(s + u32(4 * (D::kRowWords * (r0 + j) + wi)));
    const u32 pz = ldsU32(s + u32(D::kPrmOff + 4 * (r0 + j)));
    const float xk = ldsF32(s + u32(D::kXOff + 4 * (r0 + j)));
    const float q = __uint_as_float(0x4b000000u | ((w >> sh) & 0xfu)) - 8388608.f;
    pr[j] = __fmul_rn(xk, fmaf(h2f(u16(pz & 0xffffu)), q, h2f(u16(pz >> 16))));
  }
#pragma unroll
  for (int j = 0; j < 4; j++) acc = __fadd_rn(acc, pr[j]);
#pragma unroll
  for (int j = 0; j < 4; j++) acc = __fadd_rn(acc, __shfl_down_sync(0xffffffffu, pr[j], 16));
}

// decSum adds the rn rows of the buffer at s to the lane's sums in row
// order: decRows8 eight rows at a time at split 8, decRow otherwise.
template <int S>
__device__ __forceinline__ void decSum(float (&acc)[DecStage<S>::kP], u32 s, int rn, int wi, const int (&sh)[DecStage<S>::kP], int lane) {
  using D = DecStage<S>;
  int r = 0;
  if constexpr (D::kOut == 16) {
    for (; r + 8 <= rn; r += 8) decRows8(acc[0], s, r, lane);
  }
  if (lane < D::kLanes) {
    for (; r + 4 <= rn; r += 4) {
#pragma unroll
      for (int j = 0; j < 4; j++) decRow<S>(acc, s, r + j, wi, sh);
    }
    for (; r < rn; r++) decRow<S>(acc, s, r, wi, sh);
  }
}

// decWarp is the DEC warp's whole work: the compensation of the CTA's kOut
// outputs from cta0 for the nsel listed rows, written to comp[0, kOut) in
// shared memory (comp aliases buffer 0, written after the last batch).
template <int S>
__device__ __forceinline__ void decWarp(float* comp, u32 buf, const int* __restrict__ sel, const float* __restrict__ x, int nsel,
                                        const u32* __restrict__ rw, const u32* __restrict__ rp, int N, int cta0, int lane) {
  using D = DecStage<S>;
  const unsigned rowW = unsigned(N) / 8, rowP = unsigned(N) / kResGroup;
  const u32* wbase = rw + cta0 / 8;
  const u32* pbase = rp + cta0 / kResGroup;
  const int o0 = lane * D::kP, wi = o0 / 8;
  int sh[D::kP];
#pragma unroll
  for (int p = 0; p < D::kP; p++) {
    const int e = (o0 + p) % 8;  // wq's int4 word: element 2m at bits 4m, 2m + 1 at 16 + 4m
    sh[p] = (e & 1) * 16 + (e >> 1) * 4;
  }
  float acc[D::kP];
#pragma unroll
  for (int p = 0; p < D::kP; p++) acc[p] = 0.f;
  const int nb = (nsel + D::kRows1 - 1) / D::kRows1;
  unsigned ks[kDecIt<S>];
  decList<S>(ks, 0, sel, nsel, lane);
  decIssue<S>(buf, 0, ks, x, nsel, wbase, pbase, rowW, rowP, lane);
  cpAsyncCommit();
  decList<S>(ks, 1, sel, nsel, lane);
  decIssue<S>(buf, 1, ks, x, nsel, wbase, pbase, rowW, rowP, lane);
  cpAsyncCommit();
  decList<S>(ks, 2, sel, nsel, lane);  // loaded while batch 0 is summed
  for (int b = 0; b < nb; b++) {
    cpAsyncWait<1>();
    __syncwarp();  // every lane's copies of batch b are visible
    const u32 s = buf + u32((b & 1) * kDecBufBytes);
    const int rn = min(D::kRows1, nsel - b * D::kRows1);
    if constexpr (GEMVQ6DEC_DIAG != 3) decSum<S>(acc, s, rn, wi, sh, lane);
    __syncwarp();  // batch b's reads are done before its buffer is refilled
    if constexpr (GEMVQ6DEC_DIAG != 2) decIssue<S>(buf, b + 2, ks, x, nsel, wbase, pbase, rowW, rowP, lane);
    cpAsyncCommit();
    decList<S>(ks, b + 3, sel, nsel, lane);
  }
  cpAsyncWait<0>();
  __syncwarp();
  if (lane < D::kLanes) {
#pragma unroll
    for (int p = 0; p < D::kP; p++) comp[o0 + p] = acc[p];
  }
}

// DecTail<S> is the tail's geometry at split S (TAIL): a pass takes
// kRowsT rows of the list; each output's products of the pass are a row of
// kPitch floats (≡ 4 words mod 32: a quarter-warp's 16-byte reads of eight
// outputs' rows are free of bank conflicts) at output place σ(o) = (o %
// kP)·kLanes + o / kP (lane l's p-th output at p·kLanes + l), kBytes in all
// at the start of the freed rings. A unit is 32 consecutive rows (a lane a
// row: its stores go to consecutive banks) by kQ code words of the row's
// slice, read in one 8- or 16-byte load (kUR units a row); the kTW warps of
// the CTA take kUT units each at most.
template <int S>
struct DecTail {
  using D = DecStage<S>;
  static constexpr int kRowsT = 20480 / D::kOut;
  static constexpr int kPitch = kRowsT + 4;
  static constexpr int kQ = D::kRowWords < 4 ? D::kRowWords : 4;
  static constexpr int kUR = D::kRowWords / kQ;
  static constexpr int kUnits = kRowsT / 32 * kUR;
  static constexpr int kTW = kDecThreads / 32;
  static constexpr int kUT = (kUnits + kTW - 1) / kTW;
  static constexpr int kBytes = 4 * D::kOut * kPitch;
  static constexpr int kStep = 16 / D::kP;  // rows a summing step: four 16-byte reads a lane
  static_assert(kRowsT % 32 == 0 && kPitch % 32 == 4, "whole units, conflict-free rows");
  static_assert(kQ == 2 || kQ == 4, "a unit's words are one 8- or 16-byte load");
  static_assert(kBytes <= kWarps * kRingBytes<3> && kBytes <= kWarps * kRingBytes<4>, "a pass's products fit in the freed rings");
};

// DecWords<Q> is Q code words read in one load.
template <int Q>
struct DecWords {
  u32 w[Q];
};

// decLoadWords reads Q (2 or 4) u32 words at g (8- or 16-byte aligned)
// through the read-only path.
template <int Q>
__device__ __forceinline__ DecWords<Q> decLoadWords(const u32* g) {
  DecWords<Q> r;
  if constexpr (Q == 4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(g));
    r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(g));
    r.w[0] = v.x, r.w[1] = v.y;
  }
  return r;
}

// stsF32 writes v at the shared address a.
__device__ __forceinline__ void stsF32(u32 a, float v) { asm volatile("st.shared.f32 [%0], %1;" ::"r"(a), "f"(v) : "memory"); }

// decTailProducts forms the products of list rows r0 .. r0 + n − 1 (n <=
// kRowsT) for the CTA's outputs into the products at prod (DecTail's
// places), every warp of the CTA its units: each lane loads its row's
// channel, then its kQ code words (one load), (scale, zero) pair and x,
// every unit's loads in flight together, then writes the words' 8·kQ terms
// fl(x·fl(s·q + z)), decRow's terms bit for bit.
template <int S>
__device__ __forceinline__ void decTailProducts(u32 prod, const int* __restrict__ sel, const float* __restrict__ x, int r0, int n,
                                                const u32* __restrict__ rw, const u32* __restrict__ rp, int N, int cta0, int warp, int lane) {
  using D = DecStage<S>;
  using T = DecTail<S>;
  const unsigned rowW = unsigned(N) / 8, rowP = unsigned(N) / kResGroup;
  const u32* wbase = rw + cta0 / 8;
  const u32* pbase = rp + cta0 / kResGroup;
  unsigned k[T::kUT];
#pragma unroll
  for (int j = 0; j < T::kUT; j++) {
    const int u = warp + T::kTW * j, r = 32 * (u / T::kUR) + lane;
    k[j] = u < T::kUnits && r < n ? unsigned(__ldg(sel + r0 + r)) : ~0u;
  }
  DecWords<T::kQ> w[T::kUT];
  u32 pz[T::kUT];
  float xk[T::kUT];
#pragma unroll
  for (int j = 0; j < T::kUT; j++) {
    const int u = warp + T::kTW * j;
    if (k[j] != ~0u) {
      w[j] = decLoadWords<T::kQ>(wbase + k[j] * rowW + unsigned(T::kQ * (u % T::kUR)));
      pz[j] = __ldg(pbase + k[j] * rowP);
      xk[j] = __ldg(x + k[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < T::kUT; j++) {
    const int u = warp + T::kTW * j, r = 32 * (u / T::kUR) + lane;
    if (k[j] != ~0u) {
      const float sc = h2f(u16(pz[j] & 0xffffu)), z = h2f(u16(pz[j] >> 16));
      // Output o = o0 + 8·i + e (o0 = 8·kQ·(u % kUR)) sits at σ(o) = (e %
      // kP)·kLanes + o0/kP + 8·i/kP + e/kP (kP divides 8): the unit's first
      // place plus a constant an element.
      const u32 at = prod + u32(4 * ((8 * T::kQ * (u % T::kUR) / D::kP) * T::kPitch + r));
#pragma unroll
      for (int i = 0; i < T::kQ; i++) {
#pragma unroll
        for (int e = 0; e < 8; e++) {
          const float q = __uint_as_float(0x4b000000u | ((w[j].w[i] >> ((e & 1) * 16 + (e >> 1) * 4)) & 0xfu)) - 8388608.f;
          stsF32(at + u32(4 * ((e % D::kP) * D::kLanes + 8 * i / D::kP + e / D::kP) * T::kPitch), __fmul_rn(xk[j], fmaf(sc, q, z)));
        }
      }
    }
  }
}

// decTailLoad reads the lane's kStep rows from r of its outputs' products
// (kP outputs, 4 / kP 16-byte reads each).
template <int S>
__device__ __forceinline__ void decTailLoad(uint4 (&v)[DecStage<S>::kP][4 / DecStage<S>::kP], const u32 (&a)[DecStage<S>::kP], int r) {
  using D = DecStage<S>;
#pragma unroll
  for (int p = 0; p < D::kP; p++) {
#pragma unroll
    for (int i = 0; i < 4 / D::kP; i++) v[p][i] = ldsV4(a[p] + u32(4 * (r + 4 * i)));
  }
}

// decTailAdd adds decTailLoad's rows to acc, each output's in row order.
template <int S>
__device__ __forceinline__ void decTailAdd(float (&acc)[DecStage<S>::kP], const uint4 (&v)[DecStage<S>::kP][4 / DecStage<S>::kP]) {
  using D = DecStage<S>;
#pragma unroll
  for (int p = 0; p < D::kP; p++) {
#pragma unroll
    for (int i = 0; i < 4 / D::kP; i++) {
      acc[p] = __fadd_rn(acc[p], __uint_as_float(v[p][i].x));
      acc[p] = __fadd_rn(acc[p], __uint_as_float(v[p][i].y));
      acc[p] = __fadd_rn(acc[p], __uint_as_float(v[p][i].z));
      acc[p] = __fadd_rn(acc[p], __uint_as_float(v[p][i].w));
    }
  }
}

// decTailSum adds the n rows of products at prod to the DEC warp's sums
// acc (lane l's outputs l·kP + p, as decRun's), in row order: one rounded
// add a term, so the sums continue decRun's chain bit for bit. At one
// output a lane the next step's reads are issued before this step's adds.
template <int S>
__device__ __forceinline__ void decTailSum(float (&acc)[DecStage<S>::kP], u32 prod, int n, int lane) {
  using D = DecStage<S>;
  using T = DecTail<S>;
  if (lane >= D::kLanes) return;
  u32 a[D::kP];
#pragma unroll
  for (int p = 0; p < D::kP; p++) a[p] = prod + u32(4 * (p * D::kLanes + lane) * T::kPitch);
  int r = 0;
  if constexpr (D::kP > 1) {
    // kP chains a lane hide each other's latency: no read ahead.
    for (; r + T::kStep <= n; r += T::kStep) {
      uint4 v[D::kP][4 / D::kP];
      decTailLoad<S>(v, a, r);
      decTailAdd<S>(acc, v);
    }
  } else if (n >= T::kStep) {
    uint4 v[D::kP][4 / D::kP];
    decTailLoad<S>(v, a, 0);
    for (; r + 2 * T::kStep <= n; r += T::kStep) {
      uint4 u[D::kP][4 / D::kP];
      decTailLoad<S>(u, a, r + T::kStep);
      decTailAdd<S>(acc, v);
#pragma unroll
      for (int p = 0; p < D::kP; p++) {
#pragma unroll
        for (int i = 0; i < 4 / D::kP; i++) v[p][i] = u[p][i];
      }
    }
    decTailAdd<S>(acc, v);
    r += T::kStep;
  }
  for (; r < n; r++) {
#pragma unroll
    for (int p = 0; p < D::kP; p++) acc[p] = __fadd_rn(acc[p], ldsF32(a[p] + u32(4 * r)));
  }
}

// Named barriers of decPair (0 is __syncthreads'): buffer i full (the
// copier's copies landed) and empty (the summer is done with it).
constexpr int kBarFull = 1, kBarEmpty = 3;
__device__ __forceinline__ void barArrive(int id) { asm volatile("bar.arrive %0, 64;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void barSync(int id) { asm volatile("bar.sync %0, 64;" ::"r"(id) : "memory"); }

// decPair is decWarp on two warps (GEMVQ6DEC_WARPS=2): the copier (role
// 0) issues the batches into the two buffers and publishes each once its
// copies landed; the summer (role 1) sums them in list order, as decWarp,
// and writes comp. The same terms in the same order: decWarp's bits.
template <int S>
__device__ __forceinline__ void decPair(int role, float* comp, u32 buf, const int* __restrict__ sel, const float* __restrict__ x, int nsel,
                                        const u32* __restrict__ rw, const u32* __restrict__ rp, int N, int cta0, int lane) {
  using D = DecStage<S>;
  const int nb = (nsel + D::kRows1 - 1) / D::kRows1;
  if (role == 0) {
    const unsigned rowW = unsigned(N) / 8, rowP = unsigned(N) / kResGroup;
    const u32* wbase = rw + cta0 / 8;
    const u32* pbase = rp + cta0 / kResGroup;
    unsigned ks[kDecIt<S>];
    decList<S>(ks, 0, sel, nsel, lane);
    decIssue<S>(buf, 0, ks, x, nsel, wbase, pbase, rowW, rowP, lane);
    cpAsyncCommit();
    decList<S>(ks, 1, sel, nsel, lane);
    decIssue<S>(buf, 1, ks, x, nsel, wbase, pbase, rowW, rowP, lane);
    cpAsyncCommit();
    decList<S>(ks, 2, sel, nsel, lane);
    for (int b = 0; b < nb; b++) {
      cpAsyncWait<1>();
      __syncwarp();
      barArrive(kBarFull + (b & 1));  // batch b is in buffer b % 2
      if (b + 2 < nb) {
        barSync(kBarEmpty + (b & 1));  // the summer is done with batch b
        decIssue<S>(buf, b + 2, ks, x, nsel, wbase, pbase, rowW, rowP, lane);
        decList<S>(ks, b + 3, sel, nsel, lane);
      }
      cpAsyncCommit();
    }
    cpAsyncWait<0>();
    return;
  }
  const int o0 = lane * D::kP, wi = o0 / 8;
  int sh[D::kP];
#pragma unroll
  for (int p = 0; p < D::kP; p++) {
    const int e = (o0 + p) % 8;
    sh[p] = (e & 1) * 16 + (e >> 1) * 4;
  }
  float acc[D::kP];
#pragma unroll
  for (int p = 0; p < D::kP; p++) acc[p] = 0.f;
  for (int b = 0; b < nb; b++) {
    barSync(kBarFull + (b & 1));
    const u32 s = buf + u32((b & 1) * kDecBufBytes);
    const int rn = min(D::kRows1, nsel - b * D::kRows1);
    decSum<S>(acc, s, rn, wi, sh, lane);
    __syncwarp();
    if (b + 2 < nb) barArrive(kBarEmpty + (b & 1));
  }
  if (lane < D::kLanes) {
#pragma unroll
    for (int p = 0; p < D::kP; p++) comp[o0 + p] = acc[p];
  }
}

// decTail is every warp's part of the tail (TAIL, after the base's barrier,
// the rings free): for each pass of the list the warps form its products
// at prod, and the DEC warp (warp kWarps) adds them to its sums in list
// order; then it writes them to comp[0, kOut), published by the last
// barrier.
template <int S>
__device__ __forceinline__ void decTail(float* comp, u32 prod, const int* __restrict__ sel, const float* __restrict__ x, int nsel,
                                        const u32* __restrict__ rw, const u32* __restrict__ rp, int N, int cta0, int warp, int lane) {
  using D = DecStage<S>;
  using T = DecTail<S>;
  float acc[D::kP];
#pragma unroll
  for (int p = 0; p < D::kP; p++) acc[p] = 0.f;
  for (int r0 = 0; r0 < nsel; r0 += T::kRowsT) {
    const int n = min(T::kRowsT, nsel - r0);
    decTailProducts<S>(prod, sel, x, r0, n, rw, rp, N, cta0, warp, lane);
    __syncthreads();  // the pass's products are written
    if (warp == kWarps) decTailSum<S>(acc, prod, n, lane);
    if (r0 + T::kRowsT < nsel) __syncthreads();  // and read, before the next pass writes
  }
  if (warp == kWarps && lane < D::kLanes) {
#pragma unroll
    for (int p = 0; p < D::kP; p++) comp[lane * D::kP + p] = acc[p];
  }
  __syncthreads();  // comp is written
}

// gemv_q6_dec: grid (N / (kRows·kWarps/S)), block kDecThreads, dynamic
// shared memory ringBytes (>= kWarps·kRingBytes<BITS>) + 2·kDecBufBytes.
// The base warps are gemv_q5<BITS, S, true, true, false, true>'s (v6.1 over
// the tiled layout: words, params), the last warp DEC's: y = v6.1's y +
// the compensation of the nsel rows sel (their x, x[sel]) of the int4 residual (rw,
// rp: wq's packed rows of Rᵀ [K][rn] for the outputs [rlo, rlo + rn), rlo
// and rn multiples of 128), added once to those outputs; the other CTAs'
// outputs, and every output with nsel = 0, are v6.1's y (a joined launch
// whose parts have DEC or not: docs/perf/dec.md, "Session 23"). TAIL: the
// DEC warp idle until the base's barrier, then the list over every warp
// (decTail), its barriers after the base's.
template <int BITS, int S, bool TAIL>
__global__ void __launch_bounds__(kDecThreads, kMinBlocks5)
    gemv_q6_dec(const float* __restrict__ x, const u32* __restrict__ words, const u16* __restrict__ params, const float* __restrict__ bias,
                float* __restrict__ y, int N, int K, int gshift, int early, int ringBytes, const int* __restrict__ sel, int nsel,
                const u32* __restrict__ rw, const u32* __restrict__ rp, int rlo, int rn) {
  constexpr int U = kStageTiles<BITS>;
  constexpr int kGroups = kWarps / S;
  static_assert(kWarps % S == 0, "splits must divide the CTA's warps");
  constexpr unsigned kTStride = kTiledStepWords<BITS> / U;
  constexpr unsigned kPStride = kRows;
  using D = DecStage<S>;
  extern __shared__ __align__(16) unsigned char gemvq6dRing[];
  __shared__ XStage<U> xs[kWarps];
  __shared__ float part[kWarps][kRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* comp = reinterpret_cast<float*>(gemvq6dRing + ringBytes);
  // The CTA's outputs from cta0 lie all inside the residual's or all
  // outside (rlo and rn are whole CTAs): outside, no DEC (uniform a CTA,
  // so decTail's barriers stay uniform).
  const int cta0 = blockIdx.x * D::kOut;
  if (cta0 < rlo || cta0 >= rlo + rn) nsel = 0;
  if (warp >= kWarps) {
    gridDependencyWait();
    gridLaunchDependents();
    if constexpr (TAIL) {
      __syncthreads();  // the base's split reduction: the rings are free
      if (nsel > 0) decTail<S>(comp, sharedAddr(gemvq6dRing), sel, x, nsel, rw, rp, rn, cta0 - rlo, warp, lane);
    } else {
      if constexpr (kDecWarps == 2) {
        if (nsel > 0) decPair<S>(warp - kWarps, comp, sharedAddr(comp), sel, x, nsel, rw, rp, rn, cta0 - rlo, lane);
      } else {
        if (nsel > 0) decWarp<S>(comp, sharedAddr(comp), sel, x, nsel, rw, rp, rn, cta0 - rlo, lane);
      }
      __syncthreads();  // the base's split reduction: comp is written
    }
    return;
  }
  if (ringBytes < kWarps * kRingBytes<BITS>) __trap();
  const int slice = warp % S, g = lane / 4, c = lane % 4;
  const int rg = blockIdx.x * kGroups + warp / S, n0 = rg * kRows;
  const int tiles = K / kTile, steps = (tiles + U - 1) / U, per = (steps + S - 1) / S;
  const int tb = min(tiles, slice * per * U), te = min(tiles, (slice + 1) * per * U);
  const int groups = tiles >> gshift;
  const u32* prm = reinterpret_cast<const u32*>(params);
  const Rows rws{words, prm, 0, 0, unsigned(rg * groups * kRows + g), unsigned(rg * groups * kRows + g + 8)};
  CoalRows cr;
#pragma unroll
  for (int i = 0; i < 4; i++) cr.w[i] = unsigned(rg * steps) * kTiledStepWords<BITS> + unsigned(4 * i + lane / 8) * 32 + lane % 8 * 4;
  Slot<BITS, U>* ring = reinterpret_cast<Slot<BITS, U>*>(gemvq6dRing) + warp * kRing;
  float acc[2] = {0.f, 0.f};
  if constexpr (GEMVQ6DEC_DIAG >= 1) {
    gridDependencyWait();
    gridLaunchDependents();
  } else {
    leanLoop<BITS, U, true, kTStride, kPStride>(acc, ring, xs[warp], x, words, cr, rws, tb, te, gshift, early, lane);
  }
  // storeRows<S>'s reduction and store, with the compensation added last.
  if (c == 0) part[warp][g] = acc[0], part[warp][g + 8] = acc[1];
  __syncthreads();
  if constexpr (TAIL) {
    if (nsel > 0) decTail<S>(comp, sharedAddr(gemvq6dRing), sel, x, nsel, rw, rp, rn, cta0 - rlo, warp, lane);
  }
  if (slice != 0 || lane >= kRows) return;
  const int n = n0 + lane;
  if (n >= N) return;
  float v = part[warp][lane];
#pragma unroll
  for (int s = 1; s < S; s++) v += part[warp + s][lane];
  v = v + (bias ? bias[n] : 0.f);
  y[n] = nsel > 0 ? __fadd_rn(v, comp[(warp / S) * kRows + lane]) : v;
}

}  // namespace gemvq4

namespace gemvq4 {

// dec_join_rows copies the K rows of w u32 words at src (one after another)
// to words [off, off + w) of the rows of dw words at dst: the residual rows
// of a joined group's weights side by side (kernels.GEMVQ6DEC.JoinRows), so
// that one list and one gemv_q6_dec launch compensate the whole group.
__global__ void dec_join_rows(const u32* __restrict__ src, u32* __restrict__ dst, int K, int w, int dw, int off) {
  gridDependencyWait();
  const long long n = (long long)K * w;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long k = i / w;
    dst[k * dw + off + (i - k * w)] = src[i];
  }
}

}  // namespace gemvq4

namespace gemvq4 {

// select_q6 is dec.cu's select_topk as a programmatic dependent (grid
// (chunks, T), kSelectThreads threads): it waits for the kernel that wrote
// x, then lets the launch after it (gemv_q6_dec, which reads the list only
// after its own dependency wait, i.e. once this grid is done) start at once,
// so that the GEMV's CTAs are resident and their first weight loads in
// flight while the selection runs. The same list, bit for bit.
__global__ void __launch_bounds__(dec::kSelectThreads) select_q6(const dec::Args a) {
  gridDependencyWait();
  gridLaunchDependents();
  dec::select_topk_cta(a);
}

}  // namespace gemvq4

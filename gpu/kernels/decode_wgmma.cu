// decode_wgmma.cu: the Hopper variant of decode_mma.cu (v3): the same
// function over the same kv.MMA blocks, with
//   - a producer warp that streams each tile's K codes, V codes and their
//     (scale, zero) pairs into a ring of ST shared-memory stages with 1-D
//     TMA bulk copies (cp.async.bulk, completion counted in bytes on an
//     mbarrier), so the bytes in flight cost no registers and do not wait
//     for the compute of the tile before;
//   - one consumer warpgroup (4 warps) that runs both products as wgmma
//     m64n8k16 with A from registers: the codes are unpacked exactly as in
//     decode_mma.cu (the kv.MMA fragment of a warp is the A fragment of its
//     16 rows of a wgmma), and the B operands (the scaled queries, and the
//     probabilities) sit in shared memory as K-major core matrices;
//       scores  S^T[64 tokens x 8 rows] = K[64 x D] · Q^T[D x 8]   (warp w: tokens 16w..)
//       output  O^T[64 ch x 8 rows]    += V^T[64 ch x 64 tokens] · P^T (warp w: channels 16w..)
//     so the warpgroup shares one online softmax (the tile's max is merged
//     through shared memory) and each warp keeps only its own channels of O:
//     8 accumulator floats per 64 channels instead of decode_mma.cu's
//     D/4 per warp.
// A tile is MW m64 blocks (64·MW tokens; MW = 2 for low-bit formats where
// two ring stages fit in a third of an SM's shared memory): block m+1 is
// unpacked while block m's wgmmas run, and the warpgroup's two barriers
// per tile are paid once per 128 tokens. MINB caps the registers for that
// many CTAs per SM (3 at D <= 128: 128 registers; int8 2: 168).
// Scales are folded as in decode_mma.cu: KC into the query B operand (one
// refold per key group), KT on the score accumulators, V's into P (one P
// operand per 64-channel slice's value group, so V groups must be >= 64
// channels). The fp16 residual block runs through the same tile code with
// its operands read straight from global memory. The split partials have
// decode_mma.cu's layout; the last CTA of a row chunk merges them
// (finishSplits), or decode_combine does past 64 splits. The fragment
// layout, the unpack, the online softmax and the merges are the decode
// family's, in bitdecode.cuh; this file needs nothing of decode_mma.cu.
//
// Versions (H100, Hq=32 Hkv=8 D=128; docs/perf/decode-attention.md):
//   v3.0  64-token tiles, no register cap: correct; faster than mma.sync
//         for fp16 at 1 x 8K and int8 at 16 x 32K, slower for every other
//         low-bit format (int2 128 x 8K 33% of the read ceiling vs 53%).
//   v3.0b MW = 2, 3 CTAs per SM: 128 x 8K int4 KT 81 -> 93%, KC 64 -> 74%,
//         int2 34 -> 41%.
//   v2.6  (shared with decode_mma.cu) two-instruction unpack; int8 at 2 CTAs per
//         SM: 128 x 8K int8 92 -> 97%.
//   v3.2  every consumer thread arrives on a stage's empty barrier (one
//         lane per warp after __syncwarp left compute-sanitizer racecheck
//         unable to order the other lanes' ring reads before the next bulk
//         copy): racecheck clean, same time.
//   v3.3  (decode_wgmma.go) one sequence of 16-bit K/V planned at two CTAs
//         an SM: 1 x 32K 58.6 -> 53.8 us (75 -> 82% of the read ceiling).
//   v3.4  the fused merge's loads ahead (mergeSplits, finishSplits' bits):
//         1 x 1K 11.9 -> 11.0 us, 1 x 32K 53.8 -> 53.4.
//   v3.5  (session 17) as decode_mma.cu's v2.16: the producer copies the
//         tiles of oldBlocks before gridDependencyWait, the consumers wait
//         before the query; t0's block-table entry beside lens; the merge's
//         count by lastArrivalRel. Same bits. As a programmatic dependent the
//         fp16 B = 1 step at 128K ran 0.21 ms slower (11.47 -> 11.68 ms, two
//         pairs on the H100): the one-sequence plan's two CTAs an SM are not
//         enforced by its shared memory. So decode_wgmma.go plans it as an
//         ordinary launch by default (DecodeTuning.PDL, PDLAuto); the waits
//         are then no-ops.
//   kernels.PickDecodeKernel keeps it where it measured faster: fp16/bf16,
//   int4 KT, int8 (DecodeAuto).

#include "bitdecode.cuh"

namespace wg {

typedef unsigned long long u64;

constexpr int kConsumerWarps = 4;                       // one warpgroup
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;               // + the producer warp
constexpr int kTileTokens = kConsumerWarps * kFragTokens;    // 64: the wgmma M of the scores (a tile is MW of them)
constexpr int kCoreBytes = 128;                         // 8 rows x 16 bytes: one core matrix
constexpr int kStepBytes = 2 * kCoreBytes;              // one k16 step of a B operand (N = 8)
constexpr int kSlice = 64;                              // channels per output wgmma (its M)
constexpr int kBarConsumers = 1;                        // named barrier of the warpgroup

BD_DEVICE u32 smemAddr(const void* p) { return u32(__cvta_generic_to_shared(p)); }

// mbarrier and TMA bulk copy (PTX ISA 8.0, sm_90).
BD_DEVICE void mbarInit(u64* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smemAddr(bar)), "r"(count) : "memory");
}
BD_DEVICE void mbarExpectTx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smemAddr(bar)), "r"(bytes) : "memory");
}
BD_DEVICE void mbarArrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smemAddr(bar)) : "memory");
}
BD_DEVICE void mbarWait(u64* bar, u32 parity) {
  // Labels are local to the { } scope, so every inlined copy has its own.
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT;\n}" ::"r"(smemAddr(bar)),
      "r"(parity)
      : "memory");
}
BD_DEVICE void bulkCopy(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smemAddr(dst)),
               "l"(src), "r"(bytes), "r"(smemAddr(bar))
               : "memory");
}
BD_DEVICE void consumerSync() { asm volatile("bar.sync %0, %1;" ::"n"(kBarConsumers), "n"(kConsumers) : "memory"); }

// descB is the wgmma descriptor of a K-major B operand of one k16 step at
// smem p: two core matrices (k 0-7, k 8-15) 128 bytes apart, no swizzle.
// N = 8 has one core matrix along N, so the leading (K) and stride (N)
// offsets are both 128 bytes and either reading of them is the same.
BD_DEVICE unsigned long long descB(const void* p) {
  const unsigned long long a = (smemAddr(p) & 0x3ffff) >> 4;
  constexpr unsigned long long off = kCoreBytes >> 4;
  return a | (off << 16) | (off << 32);
}

BD_DEVICE void wgFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
BD_DEVICE void wgCommit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
BD_DEVICE void wgWait() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// wgmma m64n8k16 with A from registers (the mma.sync A fragment of the
// warp's 16 rows) and B from shared memory: c += A·B.
template <bool BF>
BD_DEVICE void wgmma(float c[4], const u32 a[4], unsigned long long b) {
  if (BF) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %9, 0;\n"
        " wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
        : "memory");
  } else {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %9, 0;\n"
        " wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
        : "memory");
  }
}

// loadGroupAny reads lane's words of a 16-token group from shared or
// global memory (a generic pointer; the kv.MMA chunk order).
template <int D, int BITS>
BD_DEVICE void loadGroupAny(const u8* p, int lane, u32 w[Frag<D, BITS>::kWords]) {
  loadGroupShared<D, BITS>(p, lane, w);
}

// loadSlice returns the 4 A registers of channel block mb (16 channels) of
// a V group at p, unpacked: lane's codes 8mb..8mb+7 in fragment order.
template <int D, int BITS>
BD_DEVICE void loadSlice(const u8* p, int lane, int mb, u32 h[4]) {
  using F = Frag<D, BITS>;
  const int inLane = mb * BITS;  // 8 codes of BITS bits per block per lane
  auto at = [&](int byte) { return p + ((byte / F::kChunk) * 32 + lane) * F::kChunk + byte % F::kChunk; };
  if constexpr (BITS == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(at(inLane));
    h[0] = v.x, h[1] = v.y, h[2] = v.z, h[3] = v.w;
  } else if constexpr (BITS == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(at(inLane));
    const u32 w[2] = {v.x, v.y};
#pragma unroll
    for (int r = 0; r < 4; r++) h[r] = code<BITS>(w[r / 2], 0, r % 2);
  } else {
    constexpr int kPairs = 16 / BITS;
    const u32 w = *reinterpret_cast<const u32*>(at(inLane / 4 * 4));
    const int p0 = (mb * 4) % kPairs;
#pragma unroll
    for (int r = 0; r < 4; r++) h[r] = code<BITS>(w, w >> 8, p0 + r);
  }
}

// State is the warpgroup's online softmax, as one lane holds it
// (bitdecode.cuh): the running max of rows 2q, 2q+1 (log2 domain; the same
// in every warp), the lane's share of their denominators and of the value
// zeros' sums, and the O^T accumulators of the warp's channels: acc[i] =
// (ch 64i+16w+g | +8, rows 2q | 2q+1).
template <int D, int VG>
using State = OnlineSoftmaxZ<D / kSlice, VG>;

// Shared is the consumers' shared memory besides the ring.
template <int D, int VGB, int MW>
struct Shared {
  alignas(128) u8 qB[D / 16][kStepBytes];                       // B of the scores: the (scaled) queries
  alignas(128) u8 pB[VGB][MW * kTileTokens / 16][kStepBytes];   // B of the output: P^T per value group
  float redM[2][kConsumerWarps][kQueryRows];                    // tile maxima, double-buffered by tile parity
  float redL[kConsumerWarps][kQueryRows];
  float redZ[kConsumerWarps][kQueryRows][VGB];
};

// storeB writes a lane's B fragment pair (b0: k 2q,2q+1; b1: k 2q+8,2q+9;
// row g) of one k16 step into its K-major core matrices.
BD_DEVICE void storeB(u8* step, int g, int q, u32 b0, u32 b1) {
  *reinterpret_cast<u32*>(step + g * 16 + q * 4) = b0;
  *reinterpret_cast<u32*>(step + kCoreBytes + g * 16 + q * 4) = b1;
}

// tileWG computes one tile of 64·MW tokens starting at token tok0: K and V
// groups at kdat and vdat (shared memory for packed tiles, global for the
// residual; group j at +j·groupBytes), K and V (scale, zero) pairs of the
// tile's tokens at kpar and vpar (KT and low-bit V only). nGroups bounds
// the groups that exist (the residual block's end); the rest read as zero
// and are masked. The B operand of the scores must be in sh.qB.
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, bool BF, int VGB, int MW>
BD_DEVICE void tileWG(State<D, VG>& st, Shared<D, VGB, MW>& sh, const u8* kdat, const u8* vdat, const u8* kpar, const u8* vpar,
                    int nGroups, int tok0, int tEnd, const int limit[2], int span, const float biasC[2], const float qsumC[2][KG],
                    int parity, int warp, int lane) {
  const int g = lane / 4, q = lane % 4;
  constexpr int KGA = KBITS < 16 && !KC ? KG : 1;
  constexpr int kSteps = MW * kConsumerWarps;  // 16-token groups of the tile
  // Scores: in M-block m, warp w holds tokens 64m+16w..+15 (group 4m+w).
  // Block m+1 is unpacked while block m's wgmmas run.
  float c[MW][KGA][4];
  {
    u32 a[MW][Frag<D, KBITS>::kRegs];
#pragma unroll
    for (int m = 0; m < MW; m++) {
      u32 w[Frag<D, KBITS>::kWords];
      const int grp = kConsumerWarps * m + warp;
      if (grp < nGroups) {
        loadGroupAny<D, KBITS>(kdat + grp * Frag<D, KBITS>::kGroupBytes, lane, w);
      } else {
#pragma unroll
        for (int i = 0; i < Frag<D, KBITS>::kWords; i++) w[i] = 0;
      }
      unpack<D, KBITS>(w, a[m]);
#pragma unroll
      for (int k = 0; k < KGA; k++) c[m][k][0] = c[m][k][1] = c[m][k][2] = c[m][k][3] = 0.f;
      wgFence();
#pragma unroll
      for (int kb = 0; kb < D / 16; kb++) wgmma<BF>(c[m][kb * 16 * KGA / D], &a[m][4 * kb], descB(sh.qB[kb]));
      wgCommit();
    }
    wgWait();
  }
  float s[MW][4];
#pragma unroll
  for (int m = 0; m < MW; m++) {
    const int t16 = 16 * (kConsumerWarps * m + warp);
    if (KBITS < 16 && !KC) {  // per-token scales: s_t·(Q·codes) + z_t·ΣQ per channel group
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int t = t16 + g + 8 * half;
        float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
        for (int k = 0; k < KGA; k++) {
          const u32 v = *reinterpret_cast<const u32*>(kpar + 4 * (t * KG + k));
          const float sc = h2f(u16(v & 0xffff)), z = h2f(u16(v >> 16));
          acc0 += sc * c[m][k][2 * half] + z * qsumC[0][k];
          acc1 += sc * c[m][k][2 * half + 1] + z * qsumC[1][k];
        }
        s[m][2 * half] = acc0;
        s[m][2 * half + 1] = acc1;
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; e++) s[m][e] = c[m][0][e] + biasC[e & 1];
    }
    // The attention soft-cap (bitdecode.cuh's BD_SOFTCAP), before the mask.
#ifdef BD_SOFTCAP
#pragma unroll
    for (int e = 0; e < 4; e++) s[m][e] = softcapScore(s[m][e]);
#endif
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int t = tok0 + t16 + g + 8 * (e >> 1);
      if (t >= tEnd || t > limit[e & 1] || limit[e & 1] - t >= span) s[m][e] = kNegInf;
    }
  }
  // The tile's max of rows 2q, 2q+1 over the warpgroup.
  float mx[2];
#pragma unroll
  for (int r = 0; r < 2; r++) mx[r] = warpRowMax(s, r);
  if (g == 0) {
    sh.redM[parity][warp][2 * q] = mx[0];
    sh.redM[parity][warp][2 * q + 1] = mx[1];
  }
  consumerSync();
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float v = kNegInf;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; w++) v = fmaxf(v, sh.redM[parity][w][2 * q + r]);
    st.fold(r, s, v, alpha);
  }
  st.rescale(alpha);
  // P^T (times the value scales, per value group) into the B operands: the
  // warp's tokens of M-block m are k16 step 4m+w.
  constexpr int kPB = VBITS < 16 ? VG : 1;
#pragma unroll
  for (int m = 0; m < MW; m++) {
    const int step = kConsumerWarps * m + warp;
#pragma unroll
    for (int k = 0; k < kPB; k++) {
      float p[4];
      if (VBITS < 16) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
          const int t = 16 * step + g + 8 * half;
          const u32 v = *reinterpret_cast<const u32*>(vpar + 4 * (t * VG + k));
          const float sc = h2f(u16(v & 0xffff)), z = h2f(u16(v >> 16));
          p[2 * half] = s[m][2 * half] * sc;
          p[2 * half + 1] = s[m][2 * half + 1] * sc;
          st.zacc[0][k] += s[m][2 * half] * z;
          st.zacc[1][k] += s[m][2 * half + 1] * z;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++) p[e] = s[m][e];
      }
      storeB(sh.pB[k][step], g, q, trans8x8(pack2T<BF>(p[0], p[1])), trans8x8(pack2T<BF>(p[2], p[3])));
    }
  }
  // Values: warp w supplies channels 64i+16w.. of every token group.
  u32 a[D / kSlice][kSteps][4];
#pragma unroll
  for (int i = 0; i < D / kSlice; i++)
#pragma unroll
    for (int j = 0; j < kSteps; j++) {
      if (j < nGroups) {
        loadSlice<D, VBITS>(vdat + j * Frag<D, VBITS>::kGroupBytes, lane, 4 * i + warp, a[i][j]);
      } else {
        a[i][j][0] = a[i][j][1] = a[i][j][2] = a[i][j][3] = 0;
      }
    }
  fenceProxyAsync();
  consumerSync();  // every warp's P is in shared memory
  wgFence();
#pragma unroll
  for (int i = 0; i < D / kSlice; i++) {
    const int k = VBITS < 16 ? i * kSlice / (D / VG) : 0;  // the value group of slice i
#pragma unroll
    for (int j = 0; j < kSteps; j++) wgmma<BF>(st.acc[i], a[i][j], descB(sh.pB[k][j]));
  }
  wgCommit();
  wgWait();
}

// writeQ stores the queries times per-channel factors sc (or 1) as the B
// operand of the scores; warp w writes the k16 steps w, w+4, ...
template <int D, bool BF>
BD_DEVICE void writeQ(u8 (*qB)[kStepBytes], const float qf[D / 16][4], const float* sc, int warp, int lane) {
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int kb = 0; kb < D / 16; kb++) {
    if (kb % kConsumerWarps != warp) continue;
    const float s0 = sc ? sc[4 * kb] : 1.f, s1 = sc ? sc[4 * kb + 1] : 1.f;
    const float s2 = sc ? sc[4 * kb + 2] : 1.f, s3 = sc ? sc[4 * kb + 3] : 1.f;
    storeB(qB[kb], g, q, pack2T<BF>(qf[kb][0] * s0, qf[kb][1] * s1), pack2T<BF>(qf[kb][2] * s2, qf[kb][3] * s3));
  }
}

// kMergePre is how many of a thread's split partials mergeSplits loads
// before the weights are known (registers: 4 floats each).
constexpr int kMergePre = 16;

// mergeSplits is bitdecode.cuh's finishSplits for the consumer warpgroup,
// whose loads v3.4 scheduled ahead (v2.5's operations in their order, so
// their bits): the last CTA of a row chunk reads each split's (max,
// denominator) once as a pair where v3.3 read the max twice, and loads its
// first kMergePre partials of O while the weights are made, so the merge
// waits for two or three L2 round trips where v3.3's waited for five or six (1 x 32K, 43 splits: the fused merge cost ~6 us
// over the split kernel alone under ncu, session 16). It counts with one
// thread's release and acquire (lastArrivalRel, v3.5) unless kMergeFenceSC.
template <int D, int RMAX>
BD_DEVICE void mergeSplits(const float* partO, const float* partML, int* counter, u16* __restrict__ out, float* __restrict__ out32,
                           size_t part0, int nSplits, int b, int h, int row0, int nrows, int group, int Hq, int Tq, int tid) {
  finishSplits<D, RMAX, false, kMergePre, !kMergeFenceSC>(
      partO, partML, counter, out, out32, part0, nSplits, b, h, row0, nrows, group, Hq, Tq, tid, [] { consumerSync(); },
      [](int, float, float) {});
}

// decode_wgmma is decode_mma's split kernel (same grid, arguments and
// partials) for tiles of 64·MW tokens through an ST-stage TMA ring.
//   KBITS/VBITS, KC, KG, VG, BF as in decode_mma; ST ring stages; MW m64
//   blocks per tile; MINB CTAs per SM the registers must allow.
//   counters, out: the fused merge (finishSplits), or nullptr; out32 its
//   output widened to float32 (storeOut), or nullptr.
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, bool BF, int ST, int MW, int MINB>
__global__ void __launch_bounds__(kThreads, MINB) decode_wgmma(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const u8* __restrict__ resK, const u8* __restrict__ resV, const int* __restrict__ resSlots,
    const int* __restrict__ lens, const u16* __restrict__ qIn, float* __restrict__ partO, float* __restrict__ partML,
    int Hq, int Hkv, int Tq, int Nr, int splitLenArg, int splitBase, int splitCap, int splitMax, int maxSplits, int rowChunks,
    int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV, float scaleLog2, int window,
    int* __restrict__ counters, u16* __restrict__ out, float* __restrict__ out32) {
  constexpr int VGB = VBITS < 16 ? VG : 1;
  constexpr int TT = MW * kTileTokens;  // tokens per tile
  constexpr int kKCode = TT * D * KBITS / 8, kVCode = TT * D * VBITS / 8;
  constexpr int kKPar = KBITS == 16 ? 0 : (KC ? D * 4 : TT * KG * 4);
  constexpr int kVPar = VBITS == 16 ? 0 : TT * VG * 4;
  constexpr int kStage = kKCode + kVCode + kKPar + kVPar;
  static_assert(kStage % 128 == 0, "stage alignment");

  extern __shared__ __align__(128) u8 smem[];
  u8* ring = smem;
  Shared<D, VGB, MW>& sh = *reinterpret_cast<Shared<D, VGB, MW>*>(smem + ST * kStage);
  u64* full = reinterpret_cast<u64*>(smem + ST * kStage + ((sizeof(Shared<D, VGB, MW>) + 15) / 16) * 16);
  u64* empty = full + ST;

  {
    u32 have;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(have));
    if (have < ST * kStage + ((sizeof(Shared<D, VGB, MW>) + 15) / 16) * 16 + 2 * ST * 8) __trap();  // the planner's size is wrong
  }
  const int split = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y / rowChunks, rc = blockIdx.y % rowChunks;
  // v3.5: the first tile's block-table entry (t0's block, known before the
  // length) is read beside lens, not after it; with per-sequence splits
  // (splitCap > 0) t0 is guessed from splitLenArg, the split of the launch's
  // longest sequence, and a wrong guess reads the table again.
  const int blk0 = split * splitLenArg / Nr;
  const int entry0 = blk0 < maxBlocks ? blockTable[b * maxBlocks + blk0] : 0;
  const int L = lens[b];
  const int splitLen = seqSplitLen(L, splitLenArg, splitBase, splitCap, splitMax);
  const int t0 = split * splitLen;
  if (t0 >= L) return;
  const int t1 = min(L, t0 + splitLen);
  const int nPacked = L / Nr;
  const int packedEnd = min(t1, nPacked * Nr);
  const int nTiles = max(0, packedEnd - t0) / TT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < ST; s++) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], kConsumers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  auto blockOf = [&](int ti, int& within) -> const u8* {
    const int tok = t0 + ti * TT, blk = tok / Nr;
    within = tok - blk * Nr;
    return pool + (size_t(blk == blk0 ? entry0 : blockTable[b * maxBlocks + blk]) * Hkv + h) * blockBytes;
  };

  if (warp == kConsumerWarps) {
    // Producer: one lane streams the tiles into the ring.
    if (lane == 0) {
      // v3.5: a programmatic dependent of the kernel ahead (decode_wgmma.go:
      // the program is GridDependent). The tiles of oldBlocks (none of this
      // launch's new tokens: the append or pack ahead does not write them)
      // are copied before the dependency wait; the first tile past them
      // waits first (bitdecode.cuh's kPDLEarly).
      const int old = kPDLEarly ? oldBlocks(L, Tq, Nr) : 0;
      bool waited = false;
      for (int ti = 0; ti < nTiles; ti++) {
        const int s = ti % ST, n = ti / ST;
        if (n > 0) mbarWait(&empty[s], (n - 1) & 1);
        if (!waited && (t0 + ti * TT) / Nr >= old) {
          gridDependencyWait();
          waited = true;
        }
        int within;
        const u8* half = blockOf(ti, within);
        u8* dst = ring + s * kStage;
        mbarExpectTx(&full[s], kStage);
        bulkCopy(dst, half + (within / kFragTokens) * Frag<D, KBITS>::kGroupBytes, kKCode, &full[s]);
        bulkCopy(dst + kKCode, half + kBytes + (within / kFragTokens) * Frag<D, VBITS>::kGroupBytes, kVCode, &full[s]);
        if (kKPar > 0) {
          const int off = KC ? (within / gK) * D * 4 : within * KG * 4;
          bulkCopy(dst + kKCode + kVCode, half + kParamsOff + off, kKPar, &full[s]);
        }
        if (kVPar > 0) bulkCopy(dst + kKCode + kVCode + kKPar, half + kBytes + vParamsOff + within * VG * 4, kVPar, &full[s]);
      }
    }
    return;
  }

  // Consumers.
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * kQueryRows, nrows = min(kQueryRows, R - row0);
  const int g = lane / 4, qd = lane % 4;
  gridDependencyWait();    // q (the append's), the residual, the outputs
  gridLaunchDependents();  // the producer's first copies are issued (or wait on the same)
  float qf[D / 16][4];
  loadQueryFrag<D>(qIn, b, Tq, Hq, h, group, row0, nrows, g, qd, scaleLog2, qf);
  int limit[2];
  causalLimits(limit, row0, nrows, qd, L, Tq, group);
  const int span = windowSpan(window);
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
  const float zeroC[2] = {0.f, 0.f};
  float biasC[2] = {0.f, 0.f};
  constexpr bool kScaledQ = KBITS < 16 && KC;
  if (!kScaledQ) writeQ<D, BF>(sh.qB, qf, nullptr, warp, lane);

  State<D, VG> st;
  st.init();

  int parity = 0, curGroup = -1;
  for (int ti = 0; ti < nTiles; ti++) {
    const int s = ti % ST;
    mbarWait(&full[s], (ti / ST) & 1);
    const u8* stage = ring + s * kStage;
    const int tok = t0 + ti * TT;
    bool qChanged = ti == 0;
    if (kScaledQ && tok / gK != curGroup) {
      // Key scales per channel: refold the queries for the new key group.
      curGroup = tok / gK;
      const u8* par = stage + kKCode + kVCode;
      float sc[D / 4];
      float bias = 0.f;
#pragma unroll
      for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
        for (int hi = 0; hi < 2; hi++) {
          const int c = 16 * kb + 2 * qd + 8 * hi;
          const uint2 pz = *reinterpret_cast<const uint2*>(par + 4 * c);
          sc[4 * kb + 2 * hi] = h2f(u16(pz.x & 0xffff));
          sc[4 * kb + 2 * hi + 1] = h2f(u16(pz.y & 0xffff));
          bias += qf[kb][2 * hi] * h2f(u16(pz.x >> 16)) + qf[kb][2 * hi + 1] * h2f(u16(pz.y >> 16));
        }
      writeQ<D, BF>(sh.qB, qf, sc, warp, lane);
      toC(quadSum(bias), qd, biasC);
      qChanged = true;
    }
    if (qChanged) {
      fenceProxyAsync();
      consumerSync();  // the query operand is complete
    }
    tileWG<D, KBITS, VBITS, KC, KG, VG, BF, VGB, MW>(st, sh, stage, stage + kKCode, stage + kKCode + kVCode, stage + kKCode + kVCode + kKPar,
                                                   TT / kFragTokens, tok, t1, limit, span, kScaledQ ? biasC : zeroC, qsumC, parity, warp, lane);
    parity ^= 1;
    // Every consumer thread releases its own reads of the stage (an arrive
    // orders only the arriving thread's accesses; v3.2: one lane per warp
    // after __syncwarp left racecheck unable to order the other lanes'
    // reads before the next bulk copy into the stage).
    mbarArrive(&empty[s]);
  }

  // Residual tokens: fp16 in mma order, read from global memory.
  if (t1 > packedEnd) {
    if (kScaledQ || BF || nTiles == 0) {
      // Every warp is past the P barrier of the last packed tile, so past
      // its last scores wgmma: the query operand can be rewritten.
      writeQ<D, false>(sh.qB, qf, nullptr, warp, lane);
      fenceProxyAsync();
      consumerSync();
    }
    const size_t off = (size_t(resSlots ? resSlots[b] : b) * Hkv + h) * Nr * D * 2;
    const int resStart = nPacked * Nr;
    float qsum1[2][1] = {{0.f}, {0.f}};
    for (int tok = max(t0, packedEnd); tok < t1; tok += TT) {
      const int within = tok - resStart;
      const int fb = (within / kFragTokens) * kFragTokens * D * 2;
      const int nGroups = min(TT / kFragTokens, (min(t1, resStart + Nr) - tok + kFragTokens - 1) / kFragTokens);
      tileWG<D, 16, 16, false, 1, VG, false, VGB, MW>(st, sh, resK + off + fb, resV + off + fb, nullptr, nullptr, nGroups, tok, t1, limit, span,
                                                zeroC, qsum1, parity, warp, lane);
      parity ^= 1;
    }
  }

  // Denominators and value zeros: sum the lanes of each row (xor over g),
  // then the warps in order through shared memory.
  st.sumRows();
  if (g == 0) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      sh.redL[warp][2 * qd + r] = st.l[r];
#pragma unroll
      for (int k = 0; k < VGB; k++) sh.redZ[warp][2 * qd + r][k] = VBITS < 16 ? st.zacc[r][k] : 0.f;
    }
  }
  consumerSync();
  const size_t part = (size_t(b) * Hkv * rowChunks + blockIdx.y) * maxSplits + split;
#pragma unroll
  for (int i = 0; i < D / kSlice; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int c = kSlice * i + 16 * warp + g + 8 * (e >> 1), r = 2 * qd + (e & 1);
      float v = st.acc[i][e];
      if (VBITS < 16) {
        float z = 0.f;
#pragma unroll
        for (int w = 0; w < kConsumerWarps; w++) z += sh.redZ[w][r][c * VG / D];
        v += z;
      }
      partO[(part * kQueryRows + r) * D + c] = v;
    }
  if (warp == 0 && g == 0) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float l = 0.f;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; w++) l += sh.redL[w][2 * qd + r];
      partML[(part * kQueryRows + 2 * qd + r) * 2] = st.m[r];
      partML[(part * kQueryRows + 2 * qd + r) * 2 + 1] = l;
    }
  }
  if (counters) {  // the last split merges (finishSplits' arithmetic, bitdecode.cuh)
    mergeSplits<D, kQueryRows>(partO, partML, &counters[size_t(b) * Hkv * rowChunks + blockIdx.y], out, out32, part - split,
                               (L + splitLen - 1) / splitLen, b, h, row0, nrows, group, Hq, Tq, threadIdx.x);
  }
}

}  // namespace wg

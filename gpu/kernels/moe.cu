// moe.cu: a mixture of experts on the device (Mixtral, Qwen2-MoE,
// Qwen3-MoE), with no host round trip: the router's choice stays in device
// memory and the expert GEMVs read it, so a decode step replays as one CUDA
// graph whatever the tokens choose. backend/cpu's host routing
// (model.RouteTokens, Llama.moeHost) is the reference:
//
//   moe_route    per token t: p = softmax(logits[t,:]) (max subtracted,
//                expf, summed lane-strided then by a shuffle tree, IEEE
//                division); the k largest p (equal values: the lower index
//                first); with norm each divided by their sum (in that
//                descending order). The k
//                slots are written sorted by expert index: idx [T, k],
//                w [T, k], so that the sum below runs in transformers'
//                expert order.
//   moe_gate_up  act[t·k+j, n] = silu(x[t]·Wg[e]ᵀ[n]) · (x[t]·Wu[e]ᵀ[n]),
//                e = idx[t,j]; Wg[e], Wu[e] [IE, H] fp16, from the pointer
//                tables gate[E], up[E].
//   moe_down     out[t, n] = Σ_j (w[t,j] · (act[t·k+j]·Wd[e]ᵀ[n])), each
//                product rounded before its add, from 0 in slot order;
//                then, with a shared expert, + sigmoid(sg[t])·shared[t, n].
//                Wd[e] [H, IE] fp16 from down[E].
//
// The GEMVs are one warp per output element (a row of the weight read
// once per token and slot, lanes striding over K two halves at a time): the
// bytes of the k chosen experts per token, no more, at decode; a prefill
// reads each chosen row once per token; from 4 rows an expert the backend
// takes the grouped path below instead (v2, docs/perf/moe.md).

#include "bitdecode.cuh"

// kMoEMaxK is the most experts a token may choose (moe_route's local arrays).
constexpr int kMoEMaxK = 32;
// kMoEWarps is the warps per block of the GEMVs.
constexpr int kMoEWarps = 8;
// kRouteLocal is the router's probabilities a lane keeps in registers:
// up to 256 experts (Qwen3-30B-A3B's 128) are chosen without recomputing.
constexpr int kRouteLocal = 8;

// moeProb is token t's probability of expert i: expf(l - mx) / sum.
__device__ __forceinline__ float moeProb(float l, float mx, float sum) { return __fdiv_rn(expf(__fsub_rn(l, mx)), sum); }

// moeWarpMax and moeWarpSum reduce over a warp by xor shuffles (a fixed
// order: every lane gets the same bits).
__device__ __forceinline__ float moeWarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float moeWarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// moe_route: a warp per token, lanes striding over the experts; each of the
// k rounds takes the warp's largest unchosen probability (ties: the lower
// index), which every lane then holds.
extern "C" __global__ void moe_route(int* __restrict__ idx, float* __restrict__ w, const float* __restrict__ logits,
                                     int T, int E, int k, int norm) {
  const int lane = threadIdx.x & 31;
  const long long t = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= T) return;
  const float* l = logits + t * E;
  float mx = kNegInf;
  for (int i = lane; i < E; i += 32) mx = fmaxf(mx, l[i]);
  mx = moeWarpMax(mx);
  float sum = 0.0f;
  for (int i = lane; i < E; i += 32) sum = __fadd_rn(sum, expf(__fsub_rn(l[i], mx)));
  sum = moeWarpSum(sum);
  int sel[kMoEMaxK];
  float val[kMoEMaxK];
  float s = 0.0f;
  // Up to kRouteLocal·32 experts, each lane keeps its probabilities in
  // registers (a chosen one marked -1: probabilities are >= 0); beyond,
  // each round recomputes them and skips the chosen.
  const bool local = E <= kRouteLocal * 32;
  float pl[kRouteLocal];
#pragma unroll
  for (int q = 0; q < kRouteLocal; q++) {
    const int i = lane + 32 * q;
    pl[q] = local && i < E ? moeProb(l[i], mx, sum) : -1.0f;
  }
  for (int j = 0; j < k; j++) {
    int best = -1;
    float bp = 0.0f;
    if (local) {
#pragma unroll
      for (int q = 0; q < kRouteLocal; q++) {
        if (pl[q] >= 0.0f && (best < 0 || pl[q] > bp)) best = lane + 32 * q, bp = pl[q];  // strict: the lower index keeps a tie
      }
    } else {
      for (int i = lane; i < E; i += 32) {
        bool taken = false;
        for (int q = 0; q < j; q++) taken |= sel[q] == i;
        if (taken) continue;
        const float p = moeProb(l[i], mx, sum);
        if (best < 0 || p > bp) best = i, bp = p;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const int ob = __shfl_xor_sync(0xffffffffu, best, o);
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      if (ob >= 0 && (best < 0 || op > bp || (op == bp && ob < best))) best = ob, bp = op;
    }
    sel[j] = best, val[j] = bp;
    s = __fadd_rn(s, bp);
#pragma unroll
    for (int q = 0; q < kRouteLocal; q++) {
      if (lane + 32 * q == best) pl[q] = -1.0f;
    }
  }
  if (lane != 0) return;
  if (norm) {
    for (int j = 0; j < k; j++) val[j] = __fdiv_rn(val[j], s);
  }
  // Insertion sort of the slots by expert index.
  for (int j = 1; j < k; j++) {
    const int e = sel[j];
    const float v = val[j];
    int q = j - 1;
    for (; q >= 0 && sel[q] > e; q--) sel[q + 1] = sel[q], val[q + 1] = val[q];
    sel[q + 1] = e, val[q + 1] = v;
  }
  for (int j = 0; j < k; j++) idx[t * k + j] = sel[j], w[t * k + j] = val[j];
}

// moeDot is one warp's x·row over K (row fp16, x float32), the lanes'
// partial sums reduced by shuffles; every lane returns the sum.
__device__ __forceinline__ float moeDot(const float* __restrict__ x, const u16* __restrict__ row, int K) {
  float acc = 0.0f;
  const int lane = threadIdx.x & 31;
  if ((K & 1) == 0) {
    const u32* r2 = reinterpret_cast<const u32*>(row);
    const float2* x2 = reinterpret_cast<const float2*>(x);
    for (int i = lane; i < K / 2; i += 32) {
      const float2 wv = h2x2(__ldg(r2 + i));
      const float2 xv = x2[i];
      acc = __fadd_rn(acc, __fmul_rn(wv.x, xv.x));
      acc = __fadd_rn(acc, __fmul_rn(wv.y, xv.y));
    }
  } else {
    for (int i = lane; i < K; i += 32) acc = __fadd_rn(acc, __fmul_rn(h2f(__ldg(row + i)), x[i]));
  }
  for (int o = 16; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  return acc;
}

// moe_gate_up: grid (T·k, ceil(IE / kMoEWarps)), a warp per output n.
extern "C" __global__ void moe_gate_up(float* __restrict__ act, const float* __restrict__ x, const int* __restrict__ idx,
                                       const unsigned long long* __restrict__ gate, const unsigned long long* __restrict__ up,
                                       int k, int H, int IE, int E) {
  const int n = blockIdx.y * kMoEWarps + (threadIdx.x >> 5);
  const long long r = blockIdx.x;  // t·k + j
  if (n >= IE) return;
  const int e = idx[r];
  if (e < 0 || e >= E) {
    if ((threadIdx.x & 31) == 0) act[r * IE + n] = __int_as_float(0x7fffffff);  // NaN: a bad route shows
    return;
  }
  const float* xr = x + (r / k) * H;
  const float g = moeDot(xr, reinterpret_cast<const u16*>(gate[e]) + (long long)n * H, H);
  const float u = moeDot(xr, reinterpret_cast<const u16*>(up[e]) + (long long)n * H, H);
  if ((threadIdx.x & 31) == 0) act[r * IE + n] = __fmul_rn(silu(g), u);
}

// moe_down: grid (T, ceil(H / kMoEWarps)), a warp per output n of token t.
// shared and sg are null without a shared expert.
extern "C" __global__ void moe_down(float* __restrict__ out, const float* __restrict__ act, const int* __restrict__ idx,
                                    const float* __restrict__ w, const unsigned long long* __restrict__ down,
                                    const float* __restrict__ shared, const float* __restrict__ sg, int k, int H, int IE, int E) {
  const int n = blockIdx.y * kMoEWarps + (threadIdx.x >> 5);
  const long long t = blockIdx.x;
  if (n >= H) return;
  float y = 0.0f;
  for (int j = 0; j < k; j++) {
    const long long r = t * k + j;
    const int e = idx[r];
    float d = __int_as_float(0x7fffffff);
    if (e >= 0 && e < E) d = moeDot(act + r * IE, reinterpret_cast<const u16*>(down[e]) + (long long)n * IE, IE);
    y = __fadd_rn(y, __fmul_rn(w[r], d));
  }
  if (shared != nullptr) {
    const float g = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-sg[t])));
    y = __fadd_rn(y, __fmul_rn(g, shared[t * H + n]));
  }
  if ((threadIdx.x & 31) == 0) out[t * H + n] = y;
}

// ============================================================================
// The grouped path (v2): a prefill chunk or a large batch, tokens grouped by
// expert on the device, each expert's rows multiplied as one tiled GEMM on
// the tensor cores, so each expert's weights are read once per tile of
// kGM rows instead of once per (token, slot). Every buffer is sized for
// the worst case (P = T·k pairs, at most ceil(P / kGM) + E row tiles), so
// the launches do not depend on the choice and a decode batch still
// replays as a CUDA graph.
//
//   moe_group       one block: counts of each expert's pairs (shared
//                   atomics: a count is order-free), their exclusive prefix
//                   sum off[E+1], each pair's place pos[p] (expert by
//                   expert, pairs in (token, slot) order within: warp 0
//                   ranks 32 pairs at a time), rows[q] = the pair at place
//                   q, and the tile table tiles[i] = (expert, first place,
//                   end of the expert's places), e = -1 for unused tiles.
//                   A pair of a bad expert index has pos -1 (NaN out).
//   moe_gather      xs[q, :] = fp16(x[rows[q] / k, :]), round to nearest.
//   moe_gemm_gu     act16[q, n] = fp16(silu(xs[q]·Wg[e][n]) · (xs[q]·Wu[e][n]))
//   moe_gemm_down   ys[q, n] = act16[q]·Wd[e][n] (float32)
//   moe_combine     out[t, n] = Σ_j w[t,j]·ys[pos[t·k+j], n], each product
//                   rounded, from 0 in slot order (expert order, as
//                   moe_down and the CPU), + sigmoid(sg[t])·shared[t, n].
//
// The GEMMs: a CTA of kGWarps warps computes kGM rows x kGN outputs of one
// tile, K in steps of kGK through a kGStages-deep cp.async ring; each warp
// 32 rows x 32 outputs as 2 x 4 mma.m16n8k16 (fp16 in, fp32 accumulate, K
// in order). An output element depends on its own row and weight row only,
// so its bits do not depend on which other tokens share the tile. Rows
// past the tile's end read the expert's last row and are not written.
// Needs H % kGN == 0 and IE % kGN == 0 (the Go side falls back to v1).
//
// v3: the tile's rows MT are 64, 32 or 16, chosen per launch by the Go side
// from the sizes (the average rows an expert, T·k/E), so that an expert of
// a few rows does not pay for 64 (the launches still depend on the sizes
// only). The warps split the CTA's MT x kGN as moeWarpsN(MT) across the
// outputs; every element still gets the same mmas over K in the same
// order, so all three give the same bits. The smaller tiles' stages are
// smaller, so their rings are deeper (moeStages: the most under 48 KB).

constexpr int kGM = 64;       // rows (token, slot pairs) per tile, the largest
constexpr int kGN = 64;       // output channels per CTA
constexpr int kGK = 32;       // k per pipeline step
constexpr int kGPad = 8;      // halves of padding per smem row (conflict-free 32-bit fragment loads)
constexpr int kGRow = kGK + kGPad;
constexpr int kGStages = 3;   // cp.async ring depth
constexpr int kGWarps = 4;    // 2 x 2 warps of 32 x 32 at MT 64
// kGSmem is the static shared memory a GEMM CTA may take.
constexpr int kGSmem = 48 * 1024;

// moeWarpsN is the warps across the kGN outputs of an MT-row tile: 2
// (warps of 16·MT/32 rows x 32 outputs) at MT 64 and 32, 4 (16 x 16) at 16.
__host__ __device__ constexpr int moeWarpsN(int MT) { return MT >= 32 ? 2 : 4; }
// moeStages is the ring depth of an MT-row tile with NB weight tiles: as
// deep as kGSmem holds, at most 8, below kGM rows.
// MT kGM keeps v2's kGStages (its kernels unchanged).
__host__ __device__ constexpr int moeStages(int MT, int NB) {
  return MT == kGM ? kGStages
                   : (kGSmem / ((MT + NB * kGN) * kGRow * 2) < 8 ? kGSmem / ((MT + NB * kGN) * kGRow * 2) : 8);
}
static_assert(moeStages(kGM, 2) * (kGM + 2 * kGN) * kGRow * 2 <= kGSmem, "v2's ring");
// kMoEGroupMaxE is the most experts moe_group counts in shared memory.
constexpr int kMoEGroupMaxE = 1024;

extern "C" __global__ void moe_group(int* __restrict__ rows, int* __restrict__ pos, int4* __restrict__ tiles,
                                     const int* __restrict__ idx, int P, int E, int tilesMax, int tm) {
  __shared__ int cnt[kMoEGroupMaxE];
  __shared__ int off[kMoEGroupMaxE + 1];
  __shared__ int tb[kMoEGroupMaxE + 1];
  __shared__ int run[kMoEGroupMaxE];
  const int tid = threadIdx.x;
  for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0, run[e] = 0;
  for (int q = tid; q < P; q += blockDim.x) rows[q] = -1;
  __syncthreads();
  for (int p = tid; p < P; p += blockDim.x) {
    const int e = idx[p];
    if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (tid == 0) {
    int o = 0, t = 0;
    for (int e = 0; e < E; e++) {
      off[e] = o, tb[e] = t;
      o += cnt[e], t += (cnt[e] + tm - 1) / tm;
    }
    off[E] = o, tb[E] = t;
  }
  __syncthreads();
  if (tid < 32) {
    const unsigned lt = (1u << tid) - 1u;
    for (int base = 0; base < P; base += 32) {
      const int p = base + tid;
      const int e = p < P ? idx[p] : -1;
      const bool ok = p < P && e >= 0 && e < E;
      const unsigned act = __ballot_sync(0xffffffffu, ok);
      const unsigned same = __match_any_sync(0xffffffffu, ok ? e : -1) & act;
      if (p < P && !ok) pos[p] = -1;
      if (ok) {
        const int q = off[e] + run[e] + __popc(same & lt);
        pos[p] = q, rows[q] = p;
      }
      __syncwarp();
      if (ok && (same & lt) == 0) run[e] += __popc(same);  // the group's lowest lane
      __syncwarp();
    }
  }
  for (int e = tid; e < E; e += blockDim.x) {
    for (int i = tb[e]; i < tb[e + 1]; i++) tiles[i] = make_int4(e, off[e] + (i - tb[e]) * tm, off[e + 1], 0);
  }
  for (int i = tb[E] + tid; i < tilesMax; i += blockDim.x) tiles[i] = make_int4(-1, 0, 0, 0);
}

// moe_gather: grid (P), a block of threads over H (H % 4 == 0).
extern "C" __global__ void moe_gather(u16* __restrict__ xs, const float* __restrict__ x, const int* __restrict__ rows, int k, int H) {
  const int q = blockIdx.x;
  const int p = rows[q];
  if (p < 0) return;
  const float4* src = reinterpret_cast<const float4*>(x + (long long)(p / k) * H);
  uint2* dst = reinterpret_cast<uint2*>(xs + (long long)q * H);
  for (int i = threadIdx.x; i < H / 4; i += blockDim.x) {
    const float4 v = src[i];
    dst[i] = make_uint2(pack2(v.x, v.y), pack2(v.z, v.w));
  }
}

// moeLoadTile queues one pipeline step's copies: the A rows [r0, r0 + MT)
// (clamped to rEnd - 1) and NB weight tiles of kGN rows from n0, k0..k0+kGK.
template <int NB, int MT>
__device__ __forceinline__ void moeLoadTile(u16* sa, u16* sb, const u16* __restrict__ A, int K, int r0, int rEnd,
                                            const u16* const* W, int n0, int k0) {
  const int tid = threadIdx.x;
  constexpr int chunks = kGK / 8;  // 16-byte chunks per row
  for (int c = tid; c < MT * chunks; c += kGWarps * 32) {
    const int r = c / chunks, kc = c % chunks;
    const int row = min(r0 + r, rEnd - 1);
    cpAsync16(sa + r * kGRow + kc * 8, A + (long long)row * K + k0 + kc * 8);
  }
#pragma unroll
  for (int b = 0; b < NB; b++) {
    for (int c = tid; c < kGN * chunks; c += kGWarps * 32) {
      const int r = c / chunks, kc = c % chunks;
      cpAsync16(sb + (b * kGN + r) * kGRow + kc * 8, W[b] + (long long)(n0 + r) * K + k0 + kc * 8);
    }
  }
}

// moeLdm4 is ldmatrix .x4: four 8x8 fp16 matrices, lane l giving the
// address of row l % 8 of matrix l / 8 (16 bytes each).
__device__ __forceinline__ void moeLdm4(u32 (&r)[4], const u16* p) {
  u32 s;
  asm("{ .reg .u64 a;\n cvta.to.shared.u64 a, %1;\n cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

// MoEWarp is the geometry of a warp's block in an MT-row tile: WN warps
// across the outputs, I 16-row and J 8-output mma blocks, from (wm, wn).
template <int MT>
struct MoEWarp {
  static constexpr int WN = moeWarpsN(MT), I = MT / 16 / (kGWarps / WN), J = kGN / 8 / WN;
  static_assert(I >= 1 && J % 2 == 0 && I * 16 * (kGWarps / WN) == MT, "tile geometry");
  static __device__ __forceinline__ int wm() { return (int)(threadIdx.x >> 5) / WN * 16 * I; }
  static __device__ __forceinline__ int wn() { return (int)(threadIdx.x >> 5) % WN * 8 * J; }
};

// moeGemmTile accumulates a warp's (16·I) x (8·J) block of NB products over
// K through an S-deep ring. LDM loads the fragments with ldmatrix (6
// instructions a 16-k step for gate/up at MT 64 instead of 24 32-bit
// loads); the same operands reach the same mmas in the same order, so the
// bits are the same.
template <int NB, bool LDM, int MT, int S>
__device__ __forceinline__ void moeGemmTile(float (&acc)[NB][MoEWarp<MT>::I][MoEWarp<MT>::J][4], u16* smem,
                                            const u16* __restrict__ A, int K, int r0, int rEnd, const u16* const* W, int n0) {
  constexpr int I = MoEWarp<MT>::I, J = MoEWarp<MT>::J;
  constexpr int stageA = MT * kGRow, stageB = NB * kGN * kGRow, stage = stageA + stageB;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int wm = MoEWarp<MT>::wm(), wn = MoEWarp<MT>::wn();
#pragma unroll
  for (int b = 0; b < NB; b++)
#pragma unroll
    for (int i = 0; i < I; i++)
#pragma unroll
      for (int j = 0; j < J; j++)
#pragma unroll
        for (int c = 0; c < 4; c++) acc[b][i][j][c] = 0.0f;
  const int steps = K / kGK;
#pragma unroll
  for (int s = 0; s < S - 1; s++) {
    if (s < steps) moeLoadTile<NB, MT>(smem + s * stage, smem + s * stage + stageA, A, K, r0, rEnd, W, n0, s * kGK);
    cpAsyncCommit();
  }
  for (int s = 0; s < steps; s++) {
    cpAsyncWait<S - 2>();
    __syncthreads();
    const int nx = s + S - 1;
    if (nx < steps) {
      u16* st = smem + (nx % S) * stage;
      moeLoadTile<NB, MT>(st, st + stageA, A, K, r0, rEnd, W, n0, nx * kGK);
    }
    cpAsyncCommit();
    const u16* sa = smem + (s % S) * stage;
    const u16* sb = sa + stageA;
#pragma unroll
    for (int kk = 0; kk < kGK; kk += 16) {
      u32 a[I][4];
      if (LDM) {
#pragma unroll
        for (int i = 0; i < I; i++) moeLdm4(a[i], sa + (wm + 16 * i + (lane & 15)) * kGRow + kk + (lane >> 4) * 8);
#pragma unroll
        for (int b = 0; b < NB; b++) {
#pragma unroll
          for (int j = 0; j < J; j += 2) {
            u32 bb[4];
            moeLdm4(bb, sb + (b * kGN + wn + 8 * j + (lane & 7) + ((lane >> 4) << 3)) * kGRow + kk + ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int i = 0; i < I; i++) {
              mma16816(acc[b][i][j], a[i], bb[0], bb[1]);
              mma16816(acc[b][i][j + 1], a[i], bb[2], bb[3]);
            }
          }
        }
        continue;
      }
#pragma unroll
      for (int i = 0; i < I; i++) {
        const u16* r = sa + (wm + 16 * i + g) * kGRow + kk + 2 * q;
        a[i][0] = *reinterpret_cast<const u32*>(r);
        a[i][1] = *reinterpret_cast<const u32*>(r + 8 * kGRow);
        a[i][2] = *reinterpret_cast<const u32*>(r + 8);
        a[i][3] = *reinterpret_cast<const u32*>(r + 8 * kGRow + 8);
      }
#pragma unroll
      for (int b = 0; b < NB; b++) {
#pragma unroll
        for (int j = 0; j < J; j++) {
          const u16* r = sb + (b * kGN + wn + 8 * j + g) * kGRow + kk + 2 * q;
          const u32 b0 = *reinterpret_cast<const u32*>(r);
          const u32 b1 = *reinterpret_cast<const u32*>(r + 8);
#pragma unroll
          for (int i = 0; i < I; i++) mma16816(acc[b][i][j], a[i], b0, b1);
        }
      }
    }
  }
  cpAsyncWait<0>();
}

// moeTileOut walks a tile's accumulator fragments as moeGemmTile leaves
// them in this thread: for each of its rows inside the tile (tile.y to
// tile.z) and each of its column pairs, out(row, n, i, j, h) with n the
// pair's first output column and acc[.][i][j][2h], [2h + 1] its values.
template <int MT, typename F>
__device__ __forceinline__ void moeTileOut(const int4 tile, int n0, F out) {
  constexpr int I = MoEWarp<MT>::I, J = MoEWarp<MT>::J;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int wm = MoEWarp<MT>::wm(), wn = MoEWarp<MT>::wn();
#pragma unroll
  for (int i = 0; i < I; i++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = tile.y + wm + 16 * i + g + 8 * h;
      if (row >= tile.z) continue;
#pragma unroll
      for (int j = 0; j < J; j++) out(row, n0 + wn + 8 * j + 2 * q, i, j, h);
    }
}

// moeGemmGU is moe_gemm_gu: grid (tilesMax, IE / kGN), tiles of MT rows.
template <bool LDM, int MT>
__device__ __forceinline__ void moeGemmGU(u16* __restrict__ act16, const u16* __restrict__ xs, const int4* __restrict__ tiles,
                                          const unsigned long long* __restrict__ gate,
                                          const unsigned long long* __restrict__ up, int H, int IE) {
  constexpr int S = moeStages(MT, 2), I = MoEWarp<MT>::I, J = MoEWarp<MT>::J;
  __shared__ __align__(16) u16 smem[S * (MT + 2 * kGN) * kGRow];
  const int4 tile = tiles[blockIdx.x];
  if (tile.x < 0) return;
  const int n0 = blockIdx.y * kGN;
  const u16* W[2] = {reinterpret_cast<const u16*>(gate[tile.x]), reinterpret_cast<const u16*>(up[tile.x])};
  float acc[2][I][J][4];
  moeGemmTile<2, LDM, MT, S>(acc, smem, xs, H, tile.y, tile.z, W, n0);
  moeTileOut<MT>(tile, n0, [&](int row, int n, int i, int j, int h) {
    const float a0 = __fmul_rn(silu(acc[0][i][j][2 * h]), acc[1][i][j][2 * h]);
    const float a1 = __fmul_rn(silu(acc[0][i][j][2 * h + 1]), acc[1][i][j][2 * h + 1]);
    *reinterpret_cast<u32*>(act16 + (long long)row * IE + n) = pack2(a0, a1);
  });
}

// moeGemmDown is moe_gemm_down: grid (tilesMax, H / kGN), tiles of MT rows.
template <bool LDM, int MT>
__device__ __forceinline__ void moeGemmDown(float* __restrict__ ys, const u16* __restrict__ act16, const int4* __restrict__ tiles,
                                            const unsigned long long* __restrict__ down, int H, int IE) {
  constexpr int S = moeStages(MT, 1), I = MoEWarp<MT>::I, J = MoEWarp<MT>::J;
  __shared__ __align__(16) u16 smem[S * (MT + kGN) * kGRow];
  const int4 tile = tiles[blockIdx.x];
  if (tile.x < 0) return;
  const int n0 = blockIdx.y * kGN;
  const u16* W[1] = {reinterpret_cast<const u16*>(down[tile.x])};
  float acc[1][I][J][4];
  moeGemmTile<1, LDM, MT, S>(acc, smem, act16, IE, tile.y, tile.z, W, n0);
  moeTileOut<MT>(tile, n0, [&](int row, int n, int i, int j, int h) {
    *reinterpret_cast<float2*>(ys + (long long)row * H + n) = make_float2(acc[0][i][j][2 * h], acc[0][i][j][2 * h + 1]);
  });
}

#define MOE_GEMM_GU(name, ldm, mt)                                                                                       \
  extern "C" __global__ void __launch_bounds__(kGWarps * 32)                                                           \
      name(u16* __restrict__ act16, const u16* __restrict__ xs, const int4* __restrict__ tiles,                         \
           const unsigned long long* __restrict__ gate, const unsigned long long* __restrict__ up, int H, int IE) { \
    moeGemmGU<ldm, mt>(act16, xs, tiles, gate, up, H, IE);                                                              \
  }
#define MOE_GEMM_DOWN(name, ldm, mt)                                                                                       \
  extern "C" __global__ void __launch_bounds__(kGWarps * 32)                                                             \
      name(float* __restrict__ ys, const u16* __restrict__ act16, const int4* __restrict__ tiles,                         \
           const unsigned long long* __restrict__ down, int H, int IE) {                                                  \
    moeGemmDown<ldm, mt>(ys, act16, tiles, down, H, IE);                                                                  \
  }
MOE_GEMM_GU(moe_gemm_gu, false, 64)
MOE_GEMM_GU(moe_gemm_gu_ldm, true, 64)
MOE_GEMM_GU(moe_gemm_gu_m32, true, 32)
MOE_GEMM_GU(moe_gemm_gu_m16, true, 16)
MOE_GEMM_DOWN(moe_gemm_down, false, 64)
MOE_GEMM_DOWN(moe_gemm_down_ldm, true, 64)
MOE_GEMM_DOWN(moe_gemm_down_m32, true, 32)
MOE_GEMM_DOWN(moe_gemm_down_m16, true, 16)

// moe_combine: grid (T, ceil(H / 256)), a thread per output n. pos null:
// the pairs' outputs in (token, slot) order, ys row t·k + j (the packed
// experts' GEMVs, moe.go).
extern "C" __global__ void moe_combine(float* __restrict__ out, const float* __restrict__ ys, const int* __restrict__ pos,
                                       const float* __restrict__ w, const float* __restrict__ shared,
                                       const float* __restrict__ sg, int k, int H) {
  const long long t = blockIdx.x;
  const int n = blockIdx.y * blockDim.x + threadIdx.x;
  if (n >= H) return;
  float y = 0.0f;
  for (int j = 0; j < k; j++) {
    const int q = pos != nullptr ? pos[t * k + j] : int(t * k + j);
    const float d = q >= 0 ? ys[(long long)q * H + n] : __int_as_float(0x7fffffff);
    y = __fadd_rn(y, __fmul_rn(w[t * k + j], d));
  }
  if (shared != nullptr) {
    const float gs = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-sg[t])));
    y = __fadd_rn(y, __fmul_rn(gs, shared[t * H + n]));
  }
  out[t * H + n] = y;
}

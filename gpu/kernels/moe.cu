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
// reads each chosen row once per token (correct, not fast: docs/gpu.md).

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

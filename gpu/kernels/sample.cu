// sample.cu: greedy decoding's next token on the device, so that a decode
// step's logits need not cross PCIe (docs/perf/decode-step.md v23).
//
//   argmax_rows  dst[r] = argmax(src[r, :]) for src [R, V] float32, dst [R]
//                int32: exactly model.Argmax (model/batch.go), the host's
//                greedy token:
//                  - the first index of the largest value (a later equal
//                    value never wins; -0 and +0 are equal);
//                  - a NaN is never larger than anything and never wins,
//                    but a NaN at index 0 is kept: the result is then 0
//                    (model.Argmax starts at 0 and only moves to a value
//                    greater than the current best, which nothing is
//                    greater than NaN);
//                  - so with src[r, 0] not NaN the result is the first
//                    index of the maximum over the row's non-NaN values
//                    (-Inf rows: 0), and with src[r, 0] NaN it is 0.
//
// Work: one block of kArgmaxThreads threads a row (grid R). Each thread
// scans its elements in increasing index order (float4 j = tid, tid +
// kArgmaxThreads, ... where V is a multiple of 4 and the rows 16-byte
// aligned; scalar otherwise), keeping its best (value, index) with a strict
// '>' (so the first of equal values); the block then combines the threads'
// pairs by warp shuffles and one shared-memory round with better(), which is
// commutative and associative on (value, index) pairs (the larger value, the
// smaller index among equal values, NaN as "no candidate"): the result does
// not depend on the combining order, and so is a function of the row alone.
//
// Cost: R x V x 4 bytes read once (28 MB at 55 x 128256, ~10 us at the
// read ceiling spread over 55 SMs; one row's 501 KiB on one SM at B = 1),
// against the same bytes over PCIe at ~50 GB/s pinned (v22: ~0.55 ms) and
// R x 4 bytes copied back.
//
// Versions:
//   v1 one block a row, float4 loads, kArgmaxUnroll loads in flight a
//      thread (this file). Not profiled alone; the step it ends, against
//      the logits downloaded whole (2026-11-26, H100, bench model --ctx
//      32k --batch max, decode-step.md v23): int4 55 rows 31.35-31.51 ->
//      30.00-30.07 ms, int2 100 rows 38.22-38.33 -> 35.83-35.85, fp16 15
//      rows 28.54-28.86 -> 27.90-27.95. A row split over several blocks
//      (B = 1: one SM reads the whole 501 KiB row) is not built.
//
//   softcap_rows  x[i] = c·tanhf(x[i]·inv) for i < n, inv = 1/c as float32:
//                the final logit soft-cap (Gemma 2's final_logit_softcapping,
//                session 23), in place before argmax_rows reads the logits
//                or they are copied to the host: x·inv, CUDA's tanhf (2 ulp),
//                times c (the host's rows: c·tanh(x/c) in float64).
//
// Go wrapper: kernels.Sample.ArgmaxRows and SoftcapRows (sample.go); tests
// gpu/kernels/sample_test.go (against model.Argmax's rule on rows with
// ties, NaNs, ±Inf, ±0 and awkward V; the cap against float64 tanh).

#include "bitdecode.cuh"

// kArgmaxThreads is argmax_rows's block size (sample.go's argmaxThreads):
// a whole SM's worth of loads in flight for one row.
constexpr int kArgmaxThreads = 1024;
// kArgmaxUnroll is how many float4 loads a thread issues before it compares
// them: 1024 threads x 4 x 16 bytes = 64 KiB in flight a row.
constexpr int kArgmaxUnroll = 4;
constexpr int kArgmaxWarps = kArgmaxThreads / 32;

// kArgmaxNaN is the value of "no candidate yet".
#define kArgmaxNaN __int_as_float(0x7fc00000)
// kNoIndex is the index of "no candidate yet" (value NaN): larger than any.
constexpr int kNoIndex = 0x7fffffff;

BD_DEVICE bool isNaN(float v) { return v != v; }

// better reports whether the pair (vb, ib) beats (va, ia): a NaN value is
// no candidate; otherwise the larger value, and among equal values (-0 ==
// +0) the smaller index.
BD_DEVICE bool better(float va, int ia, float vb, int ib) {
  if (isNaN(vb)) return false;
  if (isNaN(va)) return true;
  return vb > va || (vb == va && ib < ia);
}

// take updates a thread's best with element i of value v, visited in
// increasing index order: a strict '>' keeps the first of equal values.
BD_DEVICE void take(float& bv, int& bi, float v, int i) {
  if (!isNaN(v) && (isNaN(bv) || v > bv)) {
    bv = v;
    bi = i;
  }
}

// warpBest leaves the warp's best (value, index) in every lane: better()
// does not depend on the order the pairs meet in.
BD_DEVICE void warpBest(float& bv, int& bi) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (better(bv, bi, ov, oi)) {
      bv = ov;
      bi = oi;
    }
  }
}

// argmax_rows: grid (R), block kArgmaxThreads. dst [R] int32, src [R, V]
// float32; vec4 != 0 where V % 4 == 0 and src is 16-byte aligned.
extern "C" __global__ void __launch_bounds__(kArgmaxThreads)
    argmax_rows(int* __restrict__ dst, const float* __restrict__ src, int V, int vec4) {
  __shared__ float sv[kArgmaxWarps];
  __shared__ int si[kArgmaxWarps];
  const float* x = src + (long long)blockIdx.x * V;
  const int tid = threadIdx.x;
  float bv = kArgmaxNaN;
  int bi = kNoIndex;
  if (vec4) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int V4 = V / 4;
    int j = tid;
    for (; j + (kArgmaxUnroll - 1) * kArgmaxThreads < V4; j += kArgmaxUnroll * kArgmaxThreads) {
      float4 a[kArgmaxUnroll];
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; u++) a[u] = x4[j + u * kArgmaxThreads];
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; u++) {
        const int i = 4 * (j + u * kArgmaxThreads);
        take(bv, bi, a[u].x, i);
        take(bv, bi, a[u].y, i + 1);
        take(bv, bi, a[u].z, i + 2);
        take(bv, bi, a[u].w, i + 3);
      }
    }
    for (; j < V4; j += kArgmaxThreads) {
      const float4 a = x4[j];
      take(bv, bi, a.x, 4 * j);
      take(bv, bi, a.y, 4 * j + 1);
      take(bv, bi, a.z, 4 * j + 2);
      take(bv, bi, a.w, 4 * j + 3);
    }
  } else {
    for (int i = tid; i < V; i += kArgmaxThreads) take(bv, bi, x[i], i);
  }
  // The warp's best, then the block's: better() does not depend on the order.
  warpBest(bv, bi);
  const int warp = tid / 32, lane = tid % 32;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (warp != 0) return;
  bv = lane < kArgmaxWarps ? sv[lane] : kArgmaxNaN;
  bi = lane < kArgmaxWarps ? si[lane] : kNoIndex;
  warpBest(bv, bi);
  if (lane == 0) {
    // A NaN first value stays model.Argmax's answer (nothing is greater
    // than it); so does 0 for a row of NaNs alone (bi still kNoIndex).
    dst[blockIdx.x] = (isNaN(x[0]) || bi == kNoIndex) ? 0 : bi;
  }
}

// kSoftcapThreads is softcap_rows' block size (sample.go's softcapThreads).
constexpr int kSoftcapThreads = 256;

// softcap_rows: grid (ceil(n / kSoftcapThreads)), block kSoftcapThreads.
// x [n] float32 in place: x[i] = c·tanhf(x[i]·inv), inv = 1/c.
extern "C" __global__ void __launch_bounds__(kSoftcapThreads)
    softcap_rows(float* __restrict__ x, int n, float c, float inv) {
  const int i = blockIdx.x * kSoftcapThreads + threadIdx.x;
  if (i < n) x[i] = c * tanhf(x[i] * inv);
}

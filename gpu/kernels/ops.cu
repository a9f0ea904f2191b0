// ops.cu: the elementwise, gather and normalization kernels of a Llama
// forward pass (everything but the GEMMs, which are cuBLASLt's, and
// attention, which is decode.cu's), for backend/cuda.
//
// Each kernel computes exactly what package backend/cpu computes (the
// reference: backend/cpu/ops.go), in the same floating-point order where the
// CPU's is fixed:
//
//   f32_to_f16   y[i] = fp16(x[i])                  round to nearest even
//   bf16_to_f16  y[i] = fp16(float(x[i]))           exact unless |x| > 65504
//   f16_to_f32   y[i] = float(x[i])                 exact
//   bf16_to_f32  y[i] = float(x[i])                 exact
//   embedding_f16  dst[t,:] = float(table[ids[t],:])  table [V, K] fp16
//   rows_f32     dst[r,:] = src[idx[r],:]           src [T, K], dst [R, K]
//   rmsnorm      y[g,:] = w ⊙ (x[g,:] · r), r = 1/sqrt(mean(x[g,:]²) + eps)
//                over groups of G consecutive elements (G = len(w))
//   rope         HF rotate_half, x [T, C] with C a multiple of D = 2·half:
//                θ = float(pos[t])·invFreq[i] (float32 product),
//                x'[i] = x[i]·cos θ − x[i+half]·sin θ,
//                x'[i+half] = x[i+half]·cos θ + x[i]·sin θ
//   swiglu       dst[i] = silu(gate[i])·up[i], silu(g) = g/(1+e^−g)
//   geglu        dst[i] = gelu_tanh(gate[i])·up[i] (bitdecode.cuh's geluTanh)
//   scale        dst[i] = x[i]·s
//   add          dst[i] = a[i] + b[i]
//   add_rmsnorm  h = h + delta, then x = rmsnorm(h): add then rmsnorm's bits
//   rope_qk      rmsnorm of each head of q and k (optional), then rope of
//                both, one block per head: the separate kernels' bits
//   add_bias     y[t,n] += bias[n], y [T, N]
//   split_cols   d_g[t,:] = y[t, o_g : o_g+N_g] (+ bias_g), y [T, ΣN_g]: one
//                GEMM's output over joined weights, to each weight's tensor
//   swiglu_cols  split_cols of y [T, 2N] into gate and up, then swiglu
//                or geglu (and dst's fp16 copy, optional)
//   rope_cols    split_cols of y [T, Nq+Nk+Nv] into q, k, v, then rope_qk
//                without norms on q and k
//   hadamard     x[r,:] = kv.Rotate(x[r,:]), rows of D (a power of two)
//   f16_to_f32_hadamard  y[r,:] = kv.Rotate(float(x[r,:])), x fp16
//
// Data: row-major float32 activations, int32 ids/positions/row indices,
// fp16 or bf16 as raw 16-bit patterns (no cuda_fp16.h: conversions are
// bitdecode.cuh's inline PTX cvt).
//
// Work: the elementwise kernels use grid-stride loops (opsThreads = 256 threads,
// the grid sized by the Go wrapper); every output element is written by one
// thread, so results do not depend on the grid. The gathers use one block
// per output row. rmsnorm uses one block per group; each thread sums the
// squares of its strided elements in double, then a fixed shared-memory tree
// combines the partial sums (no atomics), so the result is bitwise
// deterministic for a given G (the block size is a function of G only). The
// double accumulation matches backend/cpu, which also sums in float64 and
// rounds the mean once. rope uses one block per row: the block first computes
// cos and sin of the row's half angles into shared memory (in double from the
// float32 angle, rounded once, as backend/cpu does), then rotates every head.
//
// Floating point: products and sums that backend/cpu rounds one by one are
// written with __fmul_rn / __fadd_rn / __fsub_rn so that NVCC does not fuse
// them into FMAs, keeping the GPU within an ulp or two of the CPU. swiglu's
// silu is float32 expf (max 2 ulp, no fast math) and an IEEE division.
//
// Versions:
//   v1 scalar, one element per thread per step. Measured on the H100 (ncu,
//      a 4096 row, B = 1): rmsnorm 11.8 us (one block; its store loop pays a
//      memory latency per element), rope 4.1, add 2.4, swiglu 2.8.
//   v2 add_rmsnorm and rope_qk fuse the add with the next norm
//      and the q/k norms with both RoPEs (docs/perf/decode-step.md v4):
//      add_rmsnorm keeps its row in registers (6.2 us), rope_qk runs a block
//      per head (3.3 us); norm_scale's last tree levels are warp shuffles.
//   v3 rmsnorm (the first layer's norm) takes add_rmsnorm's register path
//      (docs/perf/decode-step.md v5).
//   v4 every kernel is a programmatic dependent (startDependent;
//      the program is GridDependent): it may be scheduled during the tail
//      of the kernel ahead of it and waits for it before any memory access
//      (docs/perf/decode-step.md v6).
//   v5 add_rmsnorm_cluster: on Hopper, rows of 1024-8192
//      elements take add_rmsnorm over a cluster of 8 CTAs (its own
//      summation order; docs/perf/decode-step.md v7).
//   v6 f16_to_f32_hadamard: a rotated KV cache's attention
//      output converted and rotated back in one launch (decode-step.md v8).
//   v7 f16_to_f32_hadamard_warp: the same, one warp per row of
//      32-256, butterflies by warp shuffles, no barrier (decode-step.md v10).
//   v8 split_cols and swiglu_cols: the outputs of one cuBLASLt
//      GEMM over a LinearGroup's joined weights (decode-step.md v17).
//   v9 add_rmsnorm(_cluster) and swiglu_cols write the fp16
//      copy of their output where the next op is a cuBLASLt GEMM over it,
//      and rope_cols folds split_cols into rope_qk (decode-step.md v19).
//   v10 add_rmsnorm_cluster reads h and w before its dependency wait where
//      its early argument says the kernel ahead writes neither (normLoad;
//      the same bits; decode-step.md v21).
//   v11 (this file) f16_to_f32_hadamard(_warp) write the fp16 copy of their
//      output too where yh is set (a rotated KV cache's attention output,
//      read next by o's cuBLASLt GEMM: f32_to_f16's bits, one launch a
//      layer fewer; decode-step.md v22).
//   + add_rmsnorm_cluster_sel (session 19b, docs/perf/dec.md; the default
//      at one row with DEC since session 20, BITDECODE_NO_DEC_NORM_SELECT
//      turns it off): add_rmsnorm_cluster
//      that also writes DEC's list of x (wq.SelectApprox), so the q6 GEMV
//      after it needs no selection launch.
//
// Go wrapper and tests: gpu/kernels/ops.go, ops_test.go (against float64
// references); backend/cuda's tests check them against backend/cpu.

#include "bitdecode.cuh"

// kNormMaxThreads is rmsnorm's largest block (a power of two; the tree
// reduction halves it). The Go wrapper picks min(nextPow2(G), this), at
// least 32.
constexpr int kNormMaxThreads = 256;

// kNormRegs is how many elements per thread rmsnorm and add_rmsnorm keep in
// registers (rows of up to kNormRegs·kNormMaxThreads = 8192 take that path).
constexpr int kNormRegs = 32;

// startDependent opens every kernel of this file: ops.cu is a GridDependent
// program (ops.go), so a kernel may start while the one ahead of it still
// runs; it waits for it before touching memory, then lets the next kernel's
// CTAs onto the SMs its own leave free (one block per row uses few).
BD_DEVICE void startDependent() {
  gridDependencyWait();
  gridLaunchDependents();
}

// startDependentFirst is startDependent with the two calls swapped (v12):
// the next kernel's CTAs may become resident, and issue their early weight
// loads, while this kernel still waits for the one ahead of it. Correct
// because a dependent's own wait returns only once this kernel has
// completed, which it does only after its wait: a kernel two launches
// behind still sees every write before it. The trigger takes effect once
// every CTA of the grid has called it, so a many-wave grid lets nothing in
// before its last wave. Only f16_to_f32_hadamard(_warp) open with it: after
// the rotated formats' decode_mma, o's first wave is then resident during
// the attention's tail (decode-step.md v28: int4's B = 1 step -0.03 to
// -0.06 ms, int2's unchanged); after decode_wgmma, f16_to_f32 with it cost
// fp16's step 0.05-0.23 ms, and every ops.cu kernel with it bought the
// low-bit formats nothing more.
BD_DEVICE void startDependentFirst() {
  gridLaunchDependents();
  gridDependencyWait();
}

// A canonical quiet NaN for outputs of invalid indices (ids out of range):
// the host checks indices first, so this only marks a bug loudly.
#define kNaN __int_as_float(0x7fc00000)

extern "C" __global__ void f32_to_f16(u16* __restrict__ y, const float* __restrict__ x, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = f2h(x[i]);
}

extern "C" __global__ void bf16_to_f16(u16* __restrict__ y, const u16* __restrict__ x, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = f2h(bf2f(x[i]));
}

extern "C" __global__ void f16_to_f32(float* __restrict__ y, const u16* __restrict__ x, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = h2f(x[i]);
}

// fill_normal_f16 writes n pseudo-random fp16 values of standard deviation
// std (a sum of four uniforms: nearly Gaussian, bounded by 3.5 std), a fixed
// hash of (seed, index): random weights of realistic scale for benchmarks.
extern "C" __global__ void fill_normal_f16(u16* __restrict__ y, long long n, unsigned seed, float std) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    u32 x = u32(i) * 0x9e3779b9u ^ u32(i >> 32) * 0x85ebca6bu ^ seed;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
      sum += float(x >> 8) * (1.f / 16777216.f) - 0.5f;
    }
    y[i] = f2h(sum * 1.7320508f * std);
  }
}

extern "C" __global__ void bf16_to_f32(float* __restrict__ y, const u16* __restrict__ x, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = bf2f(x[i]);
}

// embedding_f16: grid (T), block opsThreads (ops.go, 256). dst [T, K] float32,
// table [V, K] fp16, ids [T] int32.
extern "C" __global__ void embedding_f16(float* __restrict__ dst, const u16* __restrict__ table,
                                         const int* __restrict__ ids, int K, int V) {
  startDependent();
  const long long t = blockIdx.x;
  const int id = ids[t];
  float* out = dst + t * K;
  if (id < 0 || id >= V) {
    for (int k = threadIdx.x; k < K; k += blockDim.x) out[k] = kNaN;
    return;
  }
  const u16* row = table + (long long)id * K;
  for (int k = threadIdx.x; k < K; k += blockDim.x) out[k] = h2f(row[k]);
}

// rows_f32: grid (R), block opsThreads (ops.go, 256). dst [R, K], src [T, K], idx [R].
extern "C" __global__ void rows_f32(float* __restrict__ dst, const float* __restrict__ src,
                                    const int* __restrict__ idx, int K, int T) {
  startDependent();
  const long long r = blockIdx.x;
  const int i = idx[r];
  float* out = dst + r * K;
  if (i < 0 || i >= T) {
    for (int k = threadIdx.x; k < K; k += blockDim.x) out[k] = kNaN;
    return;
  }
  const float* row = src + (long long)i * K;
  for (int k = threadIdx.x; k < K; k += blockDim.x) out[k] = row[k];
}

// norm_scale returns rmsnorm's r = 1/sqrt(mean + eps) for a group of G
// elements from each thread's sum ss of the squares of its strided elements
// (i = threadIdx.x, + blockDim.x, ...): a fixed shared-memory tree over the
// block (partial holds blockDim.x doubles; block_sum returns the root in
// every thread), so the result is a function of (the values, G,
// blockDim.x) only. Every thread of the block must call it; its first
// barrier orders the caller's reads of the group before any write that
// follows.
//
// The tree: at each level s = blockDim.x/2, ..., 1, partial[l] += partial[l
// + s] for l < s. The levels s >= 32 go through shared memory with a barrier
// each; the last five run in warp 0 with shuffles, which add the same pairs
// in the same order (lane l < s reads lane l + s's value of the level
// before), so the sum is the shared-memory tree's to the bit.
__device__ __forceinline__ double block_sum(double ss, double* partial) {
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int s = blockDim.x / 2; s >= 32; s /= 2) {
    if (int(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x < 32) {
    double v = partial[threadIdx.x];
#pragma unroll
    for (int s = 16; s > 0; s /= 2) v += __shfl_down_sync(0xffffffffu, v, s);
    if (threadIdx.x == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

// norm_r is rmsnorm's r for a group of G elements whose squares sum to sum.
// As backend/cpu: the mean rounded once to float32, eps added in float32,
// the reciprocal square root in double rounded once.
__device__ __forceinline__ float norm_r(double sum, int G, float eps) {
  const float mean = float(sum / double(G));
  return float(1.0 / sqrt(double(__fadd_rn(mean, eps))));
}

__device__ __forceinline__ float norm_scale(double ss, double* partial, int G, float eps) {
  return norm_r(block_sum(ss, partial), G, eps);
}

// rmsnorm: grid (groups), block a power of two <= kNormMaxThreads. y and x
// [groups, G] (y may be x), w [G]. Each thread reads and writes the same
// elements, and all reads of the sum happen before any write, so in place
// is safe.
//
// As add_rmsnorm: up to kNormRegs elements per thread (G <=
// kNormRegs·blockDim.x) stay in registers, every load of x and w issued
// before any store of y (the strided loop's store of y[i] may alias the
// next x, so each element paid a memory latency: 11.8 us on a 4096 row).
// Each thread sums its elements in the loop's order, so both paths give
// the same bits.
extern "C" __global__ void rmsnorm(float* y, const float* x, const float* __restrict__ w, int G, float eps) {
  startDependent();
  __shared__ double partial[kNormMaxThreads];
  const long long g = blockIdx.x;
  const float* xs = x + g * G;
  float* ys = y + g * G;
  const int tid = threadIdx.x, nt = blockDim.x;
  double ss = 0;
  if (G <= kNormRegs * nt) {
    float v[kNormRegs], wv[kNormRegs];
#pragma unroll
    for (int j = 0; j < kNormRegs; j++) {
      const int i = tid + j * nt;
      v[j] = 0.f;
      wv[j] = 0.f;
      if (i < G) {
        v[j] = xs[i];
        wv[j] = w[i];
      }
    }
#pragma unroll
    for (int j = 0; j < kNormRegs; j++) {
      if (tid + j * nt < G) {
        const double dv = v[j];
        ss += dv * dv;
      }
    }
    const float r = norm_scale(ss, partial, G, eps);
#pragma unroll
    for (int j = 0; j < kNormRegs; j++) {
      const int i = tid + j * nt;
      if (i < G) ys[i] = __fmul_rn(wv[j], __fmul_rn(v[j], r));
    }
    return;
  }
  for (int i = threadIdx.x; i < G; i += blockDim.x) {
    const double v = xs[i];
    ss += v * v;
  }
  const float r = norm_scale(ss, partial, G, eps);
  for (int i = threadIdx.x; i < G; i += blockDim.x) ys[i] = __fmul_rn(w[i], __fmul_rn(xs[i], r));
}

// add_rmsnorm: grid (groups), block as rmsnorm's for G. h, x and delta
// [groups, G], w [G]: h = h + delta, then x = rmsnorm(h) with rmsnorm's
// partition, sums and tree, so the bits are those of add then rmsnorm.
// Where xh [groups, G] fp16 is set, it gets f32_to_f16 of x too (the input
// of the cuBLASLt GEMM after it: backend/gpu's fp16 fold). Each
// thread reads delta and h at its own elements and writes h there before
// the barrier in norm_scale, and x there after it: x may be delta. h must
// be neither (x = h would lose the sum, which the model keeps).
//
// Up to kNormRegs elements per thread (G <= kNormRegs·blockDim.x: hidden
// sizes to 8192) stay in registers: all loads of h, delta and w are issued
// before any store, so the row costs one memory latency instead of one per
// element (a strided loop must reload after each store, as h, x and delta
// may alias in the compiler's view). The element order of each thread's
// sum is the loop's, so both paths give the same bits.
extern "C" __global__ void add_rmsnorm(float* h, float* x, const float* delta, const float* __restrict__ w, int G,
                                       float eps, u16* __restrict__ xh) {
  startDependent();
  __shared__ double partial[kNormMaxThreads];
  const long long g = blockIdx.x;
  float* hs = h + g * G;
  float* xs = x + g * G;
  const float* ds = delta + g * G;
  const int tid = threadIdx.x, nt = blockDim.x;
  double ss = 0;
  if (G <= kNormRegs * nt) {
    float v[kNormRegs], wv[kNormRegs];
#pragma unroll
    for (int j = 0; j < kNormRegs; j++) {
      const int i = tid + j * nt;
      v[j] = 0.f;
      wv[j] = 0.f;
      if (i < G) {
        v[j] = __fadd_rn(hs[i], ds[i]);
        wv[j] = w[i];
      }
    }
#pragma unroll
    for (int j = 0; j < kNormRegs; j++) {
      const int i = tid + j * nt;
      if (i < G) {
        hs[i] = v[j];
        const double dv = v[j];
        ss += dv * dv;
      }
    }
    const float r = norm_scale(ss, partial, G, eps);
#pragma unroll
    for (int j = 0; j < kNormRegs; j++) {
      const int i = tid + j * nt;
      if (i < G) {
        const float y = __fmul_rn(wv[j], __fmul_rn(v[j], r));
        xs[i] = y;
        if (xh != nullptr) xh[g * G + i] = f2h(y);
      }
    }
    return;
  }
  for (int i = threadIdx.x; i < G; i += blockDim.x) {
    const float v = __fadd_rn(hs[i], ds[i]);
    hs[i] = v;
    const double dv = v;
    ss += dv * dv;
  }
  const float r = norm_scale(ss, partial, G, eps);
  for (int i = threadIdx.x; i < G; i += blockDim.x) {
    const float y = __fmul_rn(w[i], __fmul_rn(hs[i], r));
    xs[i] = y;
    if (xh != nullptr) xh[g * G + i] = f2h(y);
  }
}

// hadamardRowF16 reads one row of D = 32·E fp16 values (lane l: x[off +
// 32·e], off = the row's start + l) and rotates it in the warp's registers
// (bitdecode.cuh's walshHadamardWarp): v[e] is the row's unscaled output
// at lane + 32·e (the callers scale it as they store it, so that
// f16_to_f32_hadamard_warp's code stays as it was before it shared this).
// f16_to_f32_hadamard_warp's and f16_to_f32_hadamard_sel's rows.
template <int E>
BD_DEVICE void hadamardRowF16(float (&v)[E], const u16* __restrict__ x, long long off, int lane) {
#pragma unroll
  for (int e = 0; e < E; e++) v[e] = h2f(x[off + 32 * e]);
  walshHadamardWarp<E>(v, lane);
}

// add_rmsnorm_cluster (Hopper): add_rmsnorm's results over kNormCluster
// CTAs per row, a thread block cluster, instead of one (one CTA on one SM
// was latency-bound: 6.1 us for a 4096 row, docs/perf/decode-step.md v7).
// Grid (groups · kNormCluster), block kNormClusterThreads; rows of
// kNormCluster·kNormClusterThreads to that times kNormClusterRegs
// elements (ops.go's NormClusterMinG, NormClusterMaxG). CTA c
// of a row's cluster takes the slice [c·S, min(G, (c+1)·S)), S =
// ceil(G / kNormCluster); its thread l the slice's elements l, l +
// kNormClusterThreads, ... (up to kNormClusterRegs, in registers). The sum
// of squares: each thread's in double in that order, each CTA's by
// block_sum's tree, then the cluster's: every CTA adds the kNormCluster
// CTA sums in rank order (0 + s0 + s1 + ...) read from their shared
// memory, so every CTA gets the same r. A different order from rmsnorm's,
// so x may differ from add then rmsnorm where the two double sums round
// the float32 mean differently (r then by an ulp); ops_test.go emulates
// this order to the bit. Aliasing as add_rmsnorm's: x may be delta; xh
// as add_rmsnorm's.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr int kNormCluster = 8;
constexpr int kNormClusterThreads = 128;
constexpr int kNormClusterRegs = 8;

// clusterLoadF64 reads the double at p (shared memory) of CTA rank of the cluster.
BD_DEVICE double clusterLoadF64(const double* p, u32 rank) {
  const u32 local = u32(__cvta_generic_to_shared(p));
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(remote) : "memory");
  return v;
}

// normLoad reads a cluster CTA's thread's elements of h and w (its slice's
// tid, tid + kNormClusterThreads, ...; 0 outside [lo, hi)) into hv and wv.
// With early add_rmsnorm_cluster calls it before its dependency wait: h
// and w must then not be written by the kernel right ahead (the residual
// and the norm's weight of a decode step, where that kernel is the GEMV
// writing delta; Ops.AddRMSNormHalfEarly, decode-step.md v21).
BD_DEVICE void normLoad(float (&hv)[kNormClusterRegs], float (&wv)[kNormClusterRegs], const float* hs,
                        const float* __restrict__ w, int lo, int hi, int tid) {
#pragma unroll
  for (int j = 0; j < kNormClusterRegs; j++) {
    const int i = lo + tid + j * kNormClusterThreads;
    hv[j] = 0.f;
    wv[j] = 0.f;
    if (i < hi) {
      hv[j] = hs[i];
      wv[j] = w[i];
    }
  }
}

// DEC's selection where x is produced (session 19b, docs/perf/dec.md):
// wq.SelectApprox's constants, as dec.cu's kChunkChannels, kBucketShift
// and kBuckets. add_rmsnorm_cluster_sel's CTA of rank c ranks the row's
// chunk c (rows of up to NormClusterMaxG = 8 chunks), each thread
// kSelPer consecutive channels of it.
constexpr int kSelChunk = 1024;       // wq.ChunkChannels
constexpr int kSelBucketShift = 20;   // wq's bucketShift: 8 buckets per octave
constexpr int kSelBuckets = 256;      // wq's bucketCount
constexpr int kSelPer = kSelChunk / kNormClusterThreads;  // 8 channels a thread
constexpr int kNormClusterWarps = kNormClusterThreads / 32;
static_assert(kSelPer % 4 == 0, "16-byte loads of a thread's channels");
static_assert(kNormCluster * kSelChunk >= kNormCluster * kNormClusterThreads * kNormClusterRegs, "a chunk a CTA");

// selChunkSelect is wq.ChunkSelect (dec.cu's chunk_select) for kChunk <= 1024.
BD_DEVICE int selChunkSelect(int kChunk, int c) {
  if (kChunk <= 0 || c <= 0) return 0;
  const int k = (kChunk * c + kSelChunk - 1) / kSelChunk;
  return k < c ? k : c;
}

// selectChunk writes wq.SelectApprox's list of one chunk of c channels
// (c0 its first, kc = ChunkSelect(kChunk, c) >= 1 of them taken) to out
// [kc], in increasing order, in a CTA of THREADS threads (128 or 256):
// thread t holds the chunk's channels t·PER + m (m < PER = 1024/THREADS)
// in v, those at or past c ignored. Session 20b's version: one CTA
// barrier (session 19b's took five). Before it each warp builds its own
// 256-bucket histogram relative to its own key maximum wmax (bucket
// min(wmax − key, 255); zeroed, filled by shared atomics, ordered by
// __syncwarp alone) and publishes wmax. After it every warp, redundantly,
// takes keyMax = max wmax and walks the chunk's buckets b = keyMax − key
// 32 at a time: lane l's bucket count is the sum over warps w of w's
// histogram at b − (keyMax − wmax_w) (never w's clipped last bucket, as
// b < 255 there; bucket 255 holds the rest and always reaches kc), one
// warp scan finds B, the first bucket whose inclusive count reaches kc,
// and the count above it; the same loads summed over the warps before
// this one give their channels below B and in B. A warp scan of each
// thread's packed (below B, in B) counts then gives every taken channel
// its place: the channels before it below B plus min(the channels before
// it in B, fill), fill = kc − (count above B): the first fill channels of
// bucket B in channel order, as wq's scan takes them
// (normsel_internal_test.go's model, checked against wq). Every thread
// must call it (it synchronizes); hist holds kSelBuckets ints a warp
// (16-byte aligned), wmax THREADS/32.
template <int THREADS>
BD_DEVICE void selectChunk(const float (&v)[kSelChunk / THREADS], int c, int kc, int c0, int* __restrict__ out,
                           int* hist, int* wmax) {
  constexpr int PER = kSelChunk / THREADS, WARPS = THREADS / 32, WCH = 32 * PER;
  constexpr unsigned kAll = 0xffffffffu;
  static_assert(THREADS * PER == kSelChunk && kSelBuckets == 32 * 8, "the ranking's partition");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int* hw = hist + warp * kSelBuckets;
  reinterpret_cast<int4*>(hw)[lane] = make_int4(0, 0, 0, 0);  // this warp's 256 buckets
  reinterpret_cast<int4*>(hw)[lane + 32] = make_int4(0, 0, 0, 0);
  int key[PER];
  int m = -1;
#pragma unroll
  for (int j = 0; j < PER; j++) {
    key[j] = tid * PER + j < c ? int((__float_as_uint(v[j]) & 0x7fffffffu) >> kSelBucketShift) : -1;
    m = max(m, key[j]);
  }
  m = __reduce_max_sync(kAll, m);
  __syncwarp();  // the warp's zeros before any of its atomics
#pragma unroll
  for (int j = 0; j < PER; j++)
    if (key[j] >= 0) atomicAdd(&hw[min(m - key[j], kSelBuckets - 1)], 1);
  if (lane == 0) wmax[warp] = m;
  __syncthreads();  // the one barrier: every warp's histogram and maximum
  int wm[WARPS], keyMax = -1;
#pragma unroll
  for (int w = 0; w < WARPS; w++) {
    wm[w] = wmax[w];
    keyMax = max(keyMax, wm[w]);
  }
  // B, the count above it, and the earlier warps' channels below B
  // (early, summed over lanes) and in B (earlyIn).
  int B = kSelBuckets - 1, above = 0, early = 0, earlyIn = 0, base = 0;
#pragma unroll 1
  for (int s = 0; s < kSelBuckets / 32; s++) {
    const int bk = s * 32 + lane;
    int tot = kSelChunk, pre = 0;  // bucket 255: the rest, always reaching kc
    if (bk < kSelBuckets - 1) {
      tot = 0;
#pragma unroll
      for (int w = 0; w < WARPS; w++) {
        const int i = bk - (keyMax - wm[w]);  // <= 254: never w's clipped bucket
        const int n = wm[w] >= 0 && i >= 0 ? hist[w * kSelBuckets + i] : 0;
        tot += n;
        if (w < warp) pre += n;
      }
    }
    const int incl = warpInclusiveSum(tot, lane);
    const unsigned reach = __ballot_sync(kAll, base + incl >= kc);
    if (reach != 0) {  // the same for the whole warp
      const int l = __ffs(reach) - 1;
      B = s * 32 + l;
      above = base + __shfl_sync(kAll, incl - tot, l);
      earlyIn = __shfl_sync(kAll, pre, l);
      if (lane < l) early += pre;
      break;
    }
    early += pre;
    base += __shfl_sync(kAll, incl, 31);
  }
  early = __reduce_add_sync(kAll, early);
  if (B == kSelBuckets - 1) earlyIn = min(c, warp * WCH) - early;  // the earlier warps' channels in the rest
  const int fill = kc - above;
  int b[PER], below = 0, in = 0;
#pragma unroll
  for (int j = 0; j < PER; j++) {
    b[j] = key[j] >= 0 ? min(keyMax - key[j], kSelBuckets - 1) : kSelBuckets;
    below += b[j] < B;
    in += b[j] == B;
  }
  const int packed = below | in << 16;  // each count <= 1024
  const int pex = warpInclusiveSum(packed, lane) - packed;
  int nb = early + (pex & 0xffff), ni = earlyIn + (pex >> 16);
#pragma unroll
  for (int j = 0; j < PER; j++) {
    const int ch = c0 + tid * PER + j;
    if (b[j] < B) {
      out[nb + min(ni, fill)] = ch;
      nb++;
    } else if (b[j] == B) {
      if (ni < fill) out[nb + ni] = ch;
      ni++;
    }
  }
}

// addRMSNormCluster is add_rmsnorm_cluster's body (SEL false) and
// add_rmsnorm_cluster_sel's (SEL true): the same h, x and xh, bit for bit;
// with SEL it also writes each row's DEC list of x for k_chunk kChunk
// (1-1024; wq.SelectApprox, the list dec.cu's select_topk writes) to sel
// [rows][selStride] (selStride = wq's selected channels of a G row), the
// list gemvq6dec.cu's gemv_q6_dec reads, with no selection launch of its
// own (session 19b, docs/perf/dec.md). No cluster barrier more than the
// plain kernel's two: every CTA leaves its slice of h + delta and of w in
// shared memory before the first (the one that publishes the CTAs' sums);
// after it, CTA c reads chunk c's 1024 channels of both from the CTAs that
// hold them (distributed shared memory; a chunk spans two CTAs of a 4096
// row) with the sums, before its second arrive (which then also says it
// has read them), makes their x with the row's r as their own CTA does
// (the same bits) and ranks them (selectChunk) while the second barrier
// completes. With SEL, G % 32 == 0 (slices of whole 16-byte loads).
// Without SEL the sel arguments are unused and the kernel's code is the
// plain kernel's as it was before the two shared a body (the SEL parts
// are discarded at compile time, their shared memory with them).
template <bool SEL>
__device__ __forceinline__ void addRMSNormCluster(float* h, float* x, const float* delta, const float* __restrict__ w, int G,
                                 float eps, u16* __restrict__ xh, int early, int* __restrict__ sel, int selStride,
                                 int kChunk) {
  const u32 rank = clusterRank();
  const long long g = blockIdx.x / kNormCluster;
  const int S = (G + kNormCluster - 1) / kNormCluster;
  const int lo = int(rank) * S, hi = min(G, lo + S);
  float* hs = h + g * G;
  float* xs = x + g * G;
  const float* ds = delta + g * G;
  const int tid = threadIdx.x;
  float v[kNormClusterRegs], wv[kNormClusterRegs];
  if (early) normLoad(v, wv, hs, w, lo, hi, tid);
  startDependent();
  __shared__ double partial[kNormClusterThreads];
  __shared__ double ctaSum;
  // With SEL: this CTA's slice of h + delta and of w, read by the CTA
  // ranking it, and selectChunk's histograms.
  float *vs = nullptr, *ws = nullptr;
  int *hist = nullptr, *wmax = nullptr;
  if constexpr (SEL) {
    __shared__ __align__(16) float vsBuf[kNormClusterThreads * kNormClusterRegs];
    __shared__ __align__(16) float wsBuf[kNormClusterThreads * kNormClusterRegs];
    __shared__ __align__(16) int histBuf[kNormClusterWarps * kSelBuckets];
    __shared__ int wmaxBuf[kNormClusterWarps];
    vs = vsBuf, ws = wsBuf, hist = histBuf, wmax = wmaxBuf;
  }
  if (!early) normLoad(v, wv, hs, w, lo, hi, tid);
#pragma unroll
  for (int j = 0; j < kNormClusterRegs; j++) {
    const int i = lo + tid + j * kNormClusterThreads;
    if (i < hi) v[j] = __fadd_rn(v[j], ds[i]);
  }
  double ss = 0;
#pragma unroll
  for (int j = 0; j < kNormClusterRegs; j++) {
    const int i = lo + tid + j * kNormClusterThreads;
    if (i < hi) {
      hs[i] = v[j];
      if constexpr (SEL) {
        vs[i - lo] = v[j];
        ws[i - lo] = wv[j];
      }
      const double dv = v[j];
      ss += dv * dv;
    }
  }
  const double cta = block_sum(ss, partial);
  if (tid == 0) ctaSum = cta;
  clusterArrive();  // release: this CTA's sum (and slice), before any CTA reads them
  clusterWait();
  double total = 0;
#pragma unroll
  for (int c = 0; c < kNormCluster; c++) total += clusterLoadF64(&ctaSum, u32(c));
  // With SEL, chunk rank's channels c0 + tid·kSelPer + q (the same for the
  // whole CTA).
  [[maybe_unused]] int c0 = 0, c = 0, kc = 0;
  [[maybe_unused]] float cv[kSelPer], cw[kSelPer];
  if constexpr (SEL) {
    c0 = int(rank) * kSelChunk, c = min(kSelChunk, G - c0);
    kc = c0 < G ? selChunkSelect(kChunk, c) : 0;
    if (kc > 0) {
#pragma unroll
      for (int q = 0; q < kSelPer; q += 4) {
        const int i = c0 + tid * kSelPer + q;  // 4 channels of one CTA's slice (S % 4 == 0)
        float4 fv = make_float4(0.f, 0.f, 0.f, 0.f), fw = fv;
        if (i < G) {
          const int owner = i / S;
          fv = clusterLoadF32x4(&vs[i - owner * S], u32(owner));
          fw = clusterLoadF32x4(&ws[i - owner * S], u32(owner));
        }
        cv[q] = fv.x;
        cv[q + 1] = fv.y;
        cv[q + 2] = fv.z;
        cv[q + 3] = fv.w;
        cw[q] = fw.x;
        cw[q + 1] = fw.y;
        cw[q + 2] = fw.z;
        cw[q + 3] = fw.w;
      }
    }
  }
  clusterArrive();  // this CTA has read every CTA's sum (and the slices it ranks)
  const float r = norm_r(total, G, eps);
#pragma unroll
  for (int j = 0; j < kNormClusterRegs; j++) {
    const int i = lo + tid + j * kNormClusterThreads;
    if (i < hi) {
      const float y = __fmul_rn(wv[j], __fmul_rn(v[j], r));
      xs[i] = y;
      if (xh != nullptr) xh[g * G + i] = f2h(y);
    }
  }
  if constexpr (SEL) {
    if (kc > 0) {
      float cx[kSelPer];  // x of the chunk's channels: the bits their own CTA stores
#pragma unroll
      for (int q = 0; q < kSelPer; q++) cx[q] = __fmul_rn(cw[q], __fmul_rn(cv[q], r));
      int* out = sel + g * selStride + (long long)rank * selChunkSelect(kChunk, kSelChunk);
      selectChunk<kNormClusterThreads>(cx, c, kc, c0, out, hist, wmax);
    }
  }
  clusterWait();  // no CTA leaves (its shared memory) before every CTA has read it
}

static_assert(kNormCluster == 8, "add_rmsnorm_cluster's __cluster_dims__ spells kNormCluster");
extern "C" __global__ void __cluster_dims__(8, 1, 1)
    add_rmsnorm_cluster(float* h, float* x, const float* delta, const float* __restrict__ w, int G, float eps,
                        u16* __restrict__ xh, int early) {
  addRMSNormCluster<false>(h, x, delta, w, G, eps, xh, early, nullptr, 0, 0);
}

// add_rmsnorm_cluster_sel is add_rmsnorm_cluster that also writes each
// row's DEC list of x (addRMSNormCluster<true>).
extern "C" __global__ void __cluster_dims__(8, 1, 1)
    add_rmsnorm_cluster_sel(float* h, float* x, const float* delta, const float* __restrict__ w, int G, float eps,
                            u16* __restrict__ xh, int early, int* __restrict__ sel, int selStride, int kChunk) {
  addRMSNormCluster<true>(h, x, delta, w, G, eps, xh, early, sel, selStride, kChunk);
}

// o's input with DEC's list (session 19b): the attention output's
// conversion to float32 (f16_to_f32, or f16_to_f32_hadamard(_warp) for a
// rotated KV format) that also writes each token's DEC list of its output
// (wq.SelectApprox at k_chunk kChunk) for the q6 GEMV of o after it. Grid
// (chunks, T), kSelCTA threads: CTA (ch, t) converts token t's channels
// [ch·1024, ch·1024 + c) of its row of rowLen, keeps them in shared memory
// and ranks them (selectChunk<kSelCTA>), writing the chunk's part of the
// list at sel + t·selStride + ch·ChunkSelect(kChunk, 1024).
constexpr int kSelCTA = 256;

// selOutChunk ranks the chunk held in cs (c values) at the end of the o-input
// kernels (every thread; after the barrier that publishes cs).
BD_DEVICE void selOutChunk(const float* cs, int c, int c0, int t, int* __restrict__ sel, int selStride, int kChunk,
                           int* hist, int* wmax) {
  constexpr int PER = kSelChunk / kSelCTA;
  const int kc = selChunkSelect(kChunk, c);
  if (kc == 0) return;  // the same for the whole CTA
  float v[PER];
#pragma unroll
  for (int q = 0; q < PER; q++) v[q] = int(threadIdx.x) * PER + q < c ? cs[threadIdx.x * PER + q] : 0.f;
  int* out = sel + (long long)t * selStride + (long long)(c0 / kSelChunk) * selChunkSelect(kChunk, kSelChunk);
  selectChunk<kSelCTA>(v, c, kc, c0, out, hist, wmax);
}

// hadamardRowsSel is f16ToF32HadamardRow over the chunk's c/D rows of D =
// 32·E (warp w: rows w, w + 8, ...): the same operations, the same bits,
// each output also kept in cs at its place in the chunk.
template <int E>
BD_DEVICE void hadamardRowsSel(float* __restrict__ y, const u16* __restrict__ x, long long base, int c, float s,
                               float* cs) {
  constexpr int D = 32 * E;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int r = warp; r * D < c; r += kSelCTA / 32) {
    const long long off = base + (long long)r * D + lane;
    float v[E];
    hadamardRowF16<E>(v, x, off, lane);
#pragma unroll
    for (int e = 0; e < E; e++) {
      const float o = __fmul_rn(v[e], s);
      y[off + 32 * e] = o;
      cs[r * D + lane + 32 * e] = o;
    }
  }
}

// f16_to_f32_hadamard_sel: f16_to_f32_hadamard_warp's y (D = 32, 64, 128
// or 256; rowLen a multiple of D) and each token's DEC list.
extern "C" __global__ void __launch_bounds__(kSelCTA)
    f16_to_f32_hadamard_sel(float* __restrict__ y, const u16* __restrict__ x, int rowLen, int D, float s,
                            int* __restrict__ sel, int selStride, int kChunk) {
  startDependentFirst();  // as f16_to_f32_hadamard_warp
  __shared__ float cs[kSelChunk];
  __shared__ __align__(16) int hist[kSelCTA / 32 * kSelBuckets];
  __shared__ int wmax[kSelCTA / 32];
  const int t = blockIdx.y, c0 = blockIdx.x * kSelChunk, c = min(kSelChunk, rowLen - c0);
  const long long base = (long long)t * rowLen + c0;
  switch (D) {
    case 32: hadamardRowsSel<1>(y, x, base, c, s, cs); break;
    case 64: hadamardRowsSel<2>(y, x, base, c, s, cs); break;
    case 128: hadamardRowsSel<4>(y, x, base, c, s, cs); break;
    case 256: hadamardRowsSel<8>(y, x, base, c, s, cs); break;
  }
  __syncthreads();
  selOutChunk(cs, c, c0, t, sel, selStride, kChunk, hist, wmax);
}

// f16_to_f32_sel: f16_to_f32's y over T rows of rowLen and each token's
// DEC list.
extern "C" __global__ void __launch_bounds__(kSelCTA)
    f16_to_f32_sel(float* __restrict__ y, const u16* __restrict__ x, int rowLen, int* __restrict__ sel, int selStride,
                   int kChunk) {
  startDependent();  // as f16_to_f32
  __shared__ float cs[kSelChunk];
  __shared__ __align__(16) int hist[kSelCTA / 32 * kSelBuckets];
  __shared__ int wmax[kSelCTA / 32];
  const int t = blockIdx.y, c0 = blockIdx.x * kSelChunk, c = min(kSelChunk, rowLen - c0);
  const long long base = (long long)t * rowLen + c0;
  for (int i = threadIdx.x; i < c; i += kSelCTA) {
    const float v = h2f(x[base + i]);
    y[base + i] = v;
    cs[i] = v;
  }
  __syncthreads();
  selOutChunk(cs, c, c0, t, sel, selStride, kChunk, hist, wmax);
}
#endif

// rope: grid (T), block opsThreads (ops.go, 256), dynamic shared memory 2·half floats.
// x [T, C] in place, pos [T], invFreq [half].
extern "C" __global__ void rope(float* x, const int* __restrict__ pos, const float* __restrict__ invFreq,
                                int C, int half) {
  startDependent();
  extern __shared__ float cs[];  // cos [half] then sin [half]
  const long long t = blockIdx.x;
  const float p = float(pos[t]);
  ropeTable(cs, p, invFreq, half);
  __syncthreads();
  float* row = x + t * C;
  const int pairs = C / 2;  // (head, i) pairs: C/(2·half) heads of half each
  for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
    const int h = j / half, i = j - h * half;
    float* lo = row + h * 2 * half + i;
    float* hi = lo + half;
    const float x1 = *lo, x2 = *hi, c = cs[i], s = cs[half + i];
    ropeRotate(x1, x2, c, s, *lo, *hi);
  }
}

// rope_qk: grid (T, Hq + Hk), block rmsnorm's for G = D = 2·half (ops.go),
// dynamic shared memory 2·half floats. q [T, Hq·D] and k [T, Hk·D] in
// place, pos [T], invFreq [half], qnorm and knorm [D] (both null: no norm).
// Block (t, j) takes head j of q's row t (j < Hq) or head j − Hq of k's: it
// computes the row's cos and sin as rope does, normalizes the head as
// rmsnorm with G = D does (the same block size, so the same sums and tree)
// where the norm weights are set, and rotates it as rope does: the bits of
// rmsnorm(q), rmsnorm(k), rope(q), rope(k). The norm's sums read the head
// before norm_scale's barrier; each thread then reads and writes only its
// own pairs (i, i + half).
extern "C" __global__ void rope_qk(float* q, float* k, const int* __restrict__ pos, const float* __restrict__ invFreq,
                                   const float* __restrict__ qnorm, const float* __restrict__ knorm, int Hq, int Hk,
                                   int half, float eps) {
  startDependent();
  __shared__ double partial[kNormMaxThreads];
  extern __shared__ float cs[];  // cos [half] then sin [half]
  const long long t = blockIdx.x;
  const int j = blockIdx.y;
  const int D = 2 * half;
  float* head;
  const float* w;
  if (j < Hq) {
    head = q + (t * Hq + j) * D;
    w = qnorm;
  } else {
    head = k + (t * Hk + (j - Hq)) * D;
    w = knorm;
  }
  const float p = float(pos[t]);
  ropeTable(cs, p, invFreq, half);
  float r = 0.f;
  if (w != nullptr) {  // the same for the whole block
    double ss = 0;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      const double v = head[i];
      ss += v * v;
    }
    r = norm_scale(ss, partial, D, eps);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float x1 = head[i], x2 = head[i + half];
    if (w != nullptr) {
      x1 = __fmul_rn(w[i], __fmul_rn(x1, r));
      x2 = __fmul_rn(w[i + half], __fmul_rn(x2, r));
    }
    const float c = cs[i], s = cs[half + i];
    ropeRotate(x1, x2, c, s, head[i], head[i + half]);
  }
}

// swiglu: grid-stride; dst may alias gate or up.
extern "C" __global__ void swiglu(float* dst, const float* gate, const float* up, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    dst[i] = __fmul_rn(silu(gate[i]), up[i]);
  }
}

// geglu: grid-stride; dst may alias gate or up. swiglu with geluTanh.
extern "C" __global__ void geglu(float* dst, const float* gate, const float* up, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = __fmul_rn(geluTanh(gate[i]), up[i]);
}

// scale: grid-stride; dst may alias x.
extern "C" __global__ void scale(float* dst, const float* x, float s, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = __fmul_rn(x[i], s);
}

// add: grid-stride; dst may alias a or b.
extern "C" __global__ void add(float* dst, const float* a, const float* b, long long n) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = __fadd_rn(a[i], b[i]);
}

// add_bias: grid-stride over y [T, N]; bias [N].
extern "C" __global__ void add_bias(float* __restrict__ y, const float* __restrict__ bias, long long n, int N) {
  startDependent();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = __fadd_rn(y[i], bias[i % N]);
}

// split_cols: grid-stride over the float4s of y [T, N0 + N1 + N2] (each N a
// multiple of 4, every pointer 16-byte aligned; N2 = 0 for two outputs):
// the output of one GEMM over weights stored one after another (backend/gpu's
// joined LinearGroup), each weight's columns copied to its own tensor:
// d_g[t, j] = y[t, o_g + j], plus bias_g[j] where bias_g is set (__fadd_rn,
// add_bias's bits). y does not alias the outputs.
extern "C" __global__ void split_cols(const float* __restrict__ y, float* __restrict__ d0, float* __restrict__ d1,
                                      float* __restrict__ d2, const float* __restrict__ b0,
                                      const float* __restrict__ b1, const float* __restrict__ b2, int N0, int N1,
                                      int N2, long long n4) {
  startDependent();
  const int q0 = N0 / 4, q1 = N1 / 4, q2 = N2 / 4, q = q0 + q1 + q2;  // float4s of a row
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    const long long t = i / q;
    int c = int(i - t * q);
    float* d = d0;
    const float* b = b0;
    int w = q0;
    if (c >= q0 + q1) {
      c -= q0 + q1, d = d2, b = b2, w = q2;
    } else if (c >= q0) {
      c -= q0, d = d1, b = b1, w = q1;
    }
    float4 v = reinterpret_cast<const float4*>(y)[i];
    if (b != nullptr) {
      v = add4(v, reinterpret_cast<const float4*>(b)[c]);
    }
    reinterpret_cast<float4*>(d)[t * w + c] = v;
  }
}

// glu_mul is swiglu's (act kActSiLU) or geglu's (kActGeluTanh) arithmetic
// for one element: act(g)·u.
BD_DEVICE float glu_mul(int act, float g, float u) { return __fmul_rn(gluAct(act, g), u); }

// gluCols4 is swiglu_cols' (and swiglu_cols_sel's) work on one float4:
// columns 4c .. 4c + 3 of row t of y [T, 2N] (q = N / 4), g from gate's
// half (+ bg), u from up's (+ bu), stored to gate and up at float4 i where
// those are set; it returns act(g)·u (glu_mul), which the caller stores.
BD_DEVICE float4 gluCols4(const float* __restrict__ y, float* gate, float* up, const float* __restrict__ bg,
                          const float* __restrict__ bu, int q, long long t, int c, long long i, int act) {
  const float4* row = reinterpret_cast<const float4*>(y) + t * 2 * q;
  float4 g = row[c], u = row[q + c];
  if (bg != nullptr) g = add4(g, reinterpret_cast<const float4*>(bg)[c]);
  if (bu != nullptr) u = add4(u, reinterpret_cast<const float4*>(bu)[c]);
  if (gate != nullptr) reinterpret_cast<float4*>(gate)[i] = g;
  if (up != nullptr) reinterpret_cast<float4*>(up)[i] = u;
  return make_float4(glu_mul(act, g.x, u.x), glu_mul(act, g.y, u.y), glu_mul(act, g.z, u.z), glu_mul(act, g.w, u.w));
}

// swiglu_cols: grid-stride over the float4s of gate's half of y [T, 2N] (gate's
// N columns, then up's; N a multiple of 4, every pointer 16-byte aligned):
// split_cols of y into gate and up followed by swiglu(dst, gate, up), in one
// pass: g = y[t, j] (+ bg[j]), u = y[t, N + j] (+ bu[j]), dst[t, j] =
// silu(g)·u with swiglu's bits, gate[t, j] = g and up[t, j] = u where those
// are set (the caller passes null for the one dst replaces), and dh[t, j] =
// f32_to_f16 of dst where dh [T, N] fp16 (8-byte aligned) is set: the input
// of the down GEMM after it, without a conversion launch. y aliases none.
// act kActGeluTanh makes it geglu's (dst = gelu_tanh(g)·u with geglu's bits).
extern "C" __global__ void swiglu_cols(const float* __restrict__ y, float* dst, float* gate, float* up,
                                       const float* __restrict__ bg, const float* __restrict__ bu, int N,
                                       long long n4, u16* __restrict__ dh, int act) {
  startDependent();
  const int q = N / 4;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    const long long t = i / q;
    const float4 d = gluCols4(y, gate, up, bg, bu, q, t, int(i - t * q), i, act);
    reinterpret_cast<float4*>(dst)[i] = d;
    if (dh != nullptr)
      reinterpret_cast<uint2*>(dh)[i] =
          make_uint2(u32(f2h(d.x)) | (u32(f2h(d.y)) << 16), u32(f2h(d.z)) | (u32(f2h(d.w)) << 16));
  }
}

// selectRowChunk is the GLU kernels' DEC list (swiglu_cols_sel, swiglu_sel):
// thread l's float4 d of the c channels from c0 of row t (zeros past c) ranked
// with the CTA's others into row t's list in sel (selectChunk<kSelCTA>),
// k_chunk kChunk; hist and wmax the CTA's shared scratch.
__device__ __forceinline__ void selectRowChunk(float4 d, int c, int c0, int t, int* __restrict__ sel, int selStride,
                                               int kChunk, int* hist, int* wmax) {
  float v[4] = {d.x, d.y, d.z, d.w};
  const int kc = selChunkSelect(kChunk, c);
  if (kc > 0) {  // the same for the whole CTA
    int* out = sel + (long long)t * selStride + (long long)blockIdx.x * selChunkSelect(kChunk, kSelChunk);
    selectChunk<kSelCTA>(v, c, kc, c0, out, hist, wmax);
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// swiglu_cols_sel (session 19b): swiglu_cols's dst, gate and up (no fp16
// copy; the same operations, the same bits) that also writes each row's
// DEC list of dst (wq.SelectApprox at k_chunk kChunk) to sel + t·selStride
// + ch·ChunkSelect(kChunk, 1024), for down's q6 GEMV after it (gate|up's
// joined GEMV at one row, then this split): grid (chunks of N, T),
// kSelCTA threads, thread l of CTA (ch, t) the float4 of row t's channels
// ch·1024 + 4l .. + 3, ranked in registers (selectChunk<kSelCTA>).
extern "C" __global__ void __launch_bounds__(kSelCTA)
    swiglu_cols_sel(const float* __restrict__ y, float* dst, float* gate, float* up, const float* __restrict__ bg,
                    const float* __restrict__ bu, int N, int act, int* __restrict__ sel, int selStride, int kChunk) {
  startDependent();
  __shared__ __align__(16) int hist[kSelCTA / 32 * kSelBuckets];
  __shared__ int wmax[kSelCTA / 32];
  const int t = blockIdx.y, c0 = blockIdx.x * kSelChunk, c = min(kSelChunk, N - c0);
  const int q = N / 4, cc = c0 / 4 + int(threadIdx.x);
  float4 d = make_float4(0.f, 0.f, 0.f, 0.f);
  if (int(threadIdx.x) * 4 < c) {
    const long long i = (long long)t * q + cc;
    d = gluCols4(y, gate, up, bg, bu, q, t, cc, i, act);
    reinterpret_cast<float4*>(dst)[i] = d;
  }
  selectRowChunk(d, c, c0, t, sel, selStride, kChunk, hist, wmax);
}

// swiglu_sel (session 24, docs/perf/dec.md): swiglu's dst (geglu's with
// act kActGeluTanh; the same operations, the same bits) over gate and up
// [T, N] apart (gate|up's GEMVs not joined: no DEC on them), that also
// writes each row's DEC list of dst as swiglu_cols_sel does, for down's q6
// GEMV after it, which then needs no select_q6 launch. Grid (chunks of N,
// T), kSelCTA threads, thread l of CTA (ch, t) the float4 of row t's
// channels ch·1024 + 4l .. + 3 (N a multiple of 4, pointers 16-byte
// aligned); dst may alias gate or up (each thread reads its float4 of both
// before writing it).
extern "C" __global__ void __launch_bounds__(kSelCTA)
    swiglu_sel(float* dst, const float* gate, const float* up, int N, int act, int* __restrict__ sel, int selStride,
               int kChunk) {
  startDependent();
  __shared__ __align__(16) int hist[kSelCTA / 32 * kSelBuckets];
  __shared__ int wmax[kSelCTA / 32];
  const int t = blockIdx.y, c0 = blockIdx.x * kSelChunk, c = min(kSelChunk, N - c0);
  const int cc = c0 / 4 + int(threadIdx.x);
  float4 d = make_float4(0.f, 0.f, 0.f, 0.f);
  if (int(threadIdx.x) * 4 < c) {
    const long long i = (long long)t * (N / 4) + cc;
    const float4 g = reinterpret_cast<const float4*>(gate)[i], u = reinterpret_cast<const float4*>(up)[i];
    d = make_float4(glu_mul(act, g.x, u.x), glu_mul(act, g.y, u.y), glu_mul(act, g.z, u.z), glu_mul(act, g.w, u.w));
    reinterpret_cast<float4*>(dst)[i] = d;
  }
  selectRowChunk(d, c, c0, t, sel, selStride, kChunk, hist, wmax);
}
#endif

// rope_cols: split_cols of y [T, Hq·D + Hk·D + Nv] (one GEMM's output over
// q's, k's and v's joined weights) into q [T, Hq·D], k [T, Hk·D] and v [T,
// Nv] (Nv = 0: no v) with their biases (bq, bk, bv; null for none), then
// rope_qk without norms on q and k, in one pass: the bits of split_cols
// then rope_qk (the bias add's __fadd_rn, then the same rotation with cos
// and sin computed as rope_qk does, per block in shared memory). Grid (T,
// Hq + Hk + vBlocks), block rope_qk's (ops.go), dynamic shared memory
// 2·half floats: block (t, j < Hq + Hk) takes head j of q|k's row t (q's
// heads, then k's: y's column order), a block j >= Hq + Hk the float4s
// (j − Hq − Hk)·blockDim.x + threadIdx.x, + vBlocks·blockDim.x, ... of v's
// row t. Nv and the row of y are multiples of 4 and y, v and bv 16-byte
// aligned (split_cols's float4s); y aliases none of the outputs.
extern "C" __global__ void rope_cols(const float* __restrict__ y, float* __restrict__ q, float* __restrict__ k,
                                     float* __restrict__ v, const float* __restrict__ bq,
                                     const float* __restrict__ bk, const float* __restrict__ bv,
                                     const int* __restrict__ pos, const float* __restrict__ invFreq, int Hq, int Hk,
                                     int Nv, int half) {
  startDependent();
  extern __shared__ float cs[];  // cos [half] then sin [half]
  const long long t = blockIdx.x;
  const int j = blockIdx.y;
  const int D = 2 * half;
  const int H = Hq + Hk;
  const long long N = (long long)H * D + Nv;  // y's row
  const float* yr = y + t * N;
  if (j >= H) {
    const int q4 = Nv / 4;
    const float4* src = reinterpret_cast<const float4*>(yr + (long long)H * D);
    float4* dst = reinterpret_cast<float4*>(v + t * Nv);
    for (int c = (j - H) * int(blockDim.x) + int(threadIdx.x); c < q4; c += (int(gridDim.y) - H) * int(blockDim.x)) {
      float4 x = src[c];
      if (bv != nullptr) x = add4(x, reinterpret_cast<const float4*>(bv)[c]);
      dst[c] = x;
    }
    return;
  }
  const float* src = yr + (long long)j * D;
  float* head;
  const float* b;
  if (j < Hq) {
    head = q + (t * Hq + j) * D;
    b = bq != nullptr ? bq + (long long)j * D : nullptr;
  } else {
    head = k + (t * Hk + (j - Hq)) * D;
    b = bk != nullptr ? bk + (long long)(j - Hq) * D : nullptr;
  }
  const float p = float(pos[t]);
  ropeTable(cs, p, invFreq, half);
  __syncthreads();
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float x1 = src[i], x2 = src[i + half];
    if (b != nullptr) {
      x1 = __fadd_rn(x1, b[i]);
      x2 = __fadd_rn(x2, b[i + half]);
    }
    const float c = cs[i], s = cs[half + i];
    ropeRotate(x1, x2, c, s, head[i], head[i + half]);
  }
}

// hadamard: grid (rows), block D/2 threads (ops.go), dynamic shared memory D
// floats. x [rows, D] float32 in place: each row becomes kv.Rotate of it,
// the orthonormal Walsh-Hadamard transform with kv's rounding: butterflies
// h = 1, 2, 4, ... in float32 (bitdecode.cuh's walshHadamard), then every
// element times s = float32(1/sqrt(D)). Same order, same bits as the CPU.
extern "C" __global__ void hadamard(float* x, int D, float s) {
  startDependent();
  extern __shared__ float hv[];
  float* row = x + (long long)blockIdx.x * D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) hv[i] = row[i];
  __syncthreads();
  walshHadamard<1>(hv, D);
  for (int i = threadIdx.x; i < D; i += blockDim.x) row[i] = __fmul_rn(hv[i], s);
}

// f16_to_f32_hadamard: y = kv.Rotate(float(x)) row by row, x [rows, D] fp16,
// y [rows, D] float32: f16_to_f32 then hadamard in one launch (a rotated KV
// format's attention output, back from the decode kernels' fp16;
// docs/perf/decode-step.md v8), the same operations, so the same bits.
// Where yh [rows, D] fp16 is set it gets f32_to_f16 of y too (v11).
// Grid (rows), block D/2 threads, dynamic shared memory D floats.
extern "C" __global__ void f16_to_f32_hadamard(float* __restrict__ y, const u16* __restrict__ x, int D, float s,
                                               u16* __restrict__ yh) {
  startDependentFirst();
  extern __shared__ float hv[];
  const long long off = (long long)blockIdx.x * D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) hv[i] = h2f(x[off + i]);
  __syncthreads();
  walshHadamard<1>(hv, D);
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = __fmul_rn(hv[i], s);
    y[off + i] = v;
    if (yh != nullptr) yh[off + i] = f2h(v);
  }
}

// f16ToF32HadamardRow is f16_to_f32_hadamard_warp's body for D = 32·E.
template <int E>
BD_DEVICE void f16ToF32HadamardRow(float* __restrict__ y, const u16* __restrict__ x, int rows, float s,
                                   u16* __restrict__ yh) {
  const int lane = threadIdx.x % 32, r = blockIdx.x * kRotWarps + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp
  const long long off = (long long)r * (32 * E) + lane;
  float v[E];
  hadamardRowF16<E>(v, x, off, lane);
#pragma unroll
  for (int e = 0; e < E; e++) {
    const float o = __fmul_rn(v[e], s);
    y[off + 32 * e] = o;
    if (yh != nullptr) yh[off + 32 * e] = f2h(o);
  }
}

// f16_to_f32_hadamard_warp: f16_to_f32_hadamard for D = 32, 64, 128 or
// 256 (other D write nothing; the Go side launches f16_to_f32_hadamard for
// them), the same bits, one warp per row (kRotWarps rows a block, grid
// ceil(rows / kRotWarps)): bitdecode.cuh's walshHadamardWarp, in registers,
// no barrier (docs/perf/decode-step.md v10). yh as f16_to_f32_hadamard's.
extern "C" __global__ void __launch_bounds__(kRotWarps * 32)
    f16_to_f32_hadamard_warp(float* __restrict__ y, const u16* __restrict__ x, int rows, int D, float s,
                             u16* __restrict__ yh) {
  startDependentFirst();
  switch (D) {
    case 32: f16ToF32HadamardRow<1>(y, x, rows, s, yh); break;
    case 64: f16ToF32HadamardRow<2>(y, x, rows, s, yh); break;
    case 128: f16ToF32HadamardRow<4>(y, x, rows, s, yh); break;
    case 256: f16ToF32HadamardRow<8>(y, x, rows, s, yh); break;
  }
}

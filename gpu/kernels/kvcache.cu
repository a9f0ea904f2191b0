// kvcache.cu: the write side of the GPU KV cache: new tokens' K and V go
// into the fp16 residual blocks of their sequences, in kv.MMA order, where
// decode_mma.cu reads them and pack.cu quantizes them once a block is full
// (the residual is fp16 for every format, bf16 ones included: pack.cu
// converts when it writes a bf16 block).
//
//   k, v      [T][Hkv*D] float32: the new tokens' keys (RoPE applied) and values
//   slot, row [T] int32: token t goes to residual slot slot[t], token row
//             row[t] (its position mod Nr); slot < 0 skips the token
//   resK/resV [slots][Hkv][Nr][D] fp16, kv.MMA order
//
// kv.MMA order of a 16-bit [Nr][D] half (kv/mma.go, mmaPos with 16-bit
// codes; bitdecode.cuh's fragIndex): token t, channel c is halfword
//   grp*16*D + (k/8*32 + lane)*8 + k%8,   grp = t/16,
// keys (A operand of S^T = K·Q^T, rows = tokens):
//   lane = (t%8)*4 + (c%8)/2,  k = (c/16)*8 + ((t%16)/8 + 2*((c%16)/8))*2 + c%2
// values (A operand of O^T = V^T·P^T, rows = channels):
//   lane = (c%8)*4 + (t%8)/2,  k = (c/16)*8 + ((c%16)/8 + 2*((t%16)/8))*2 + t%2
//
// kv_append_rot is kv_append for rotated formats: q, k and v rotated
// (kv.Rotate) on the way, one block per row; kv_append_rot_warp the same
// with one warp per row for D = 32-256 (warp shuffles, no barriers).
//
// kv_append_rope is ops.cu's rope_cols and kv_append(_rot) in one launch:
// it reads the joined q|k|v GEMM's output, applies the biases and RoPE and
// writes what attention reads (q's fp16 copy, the residual's keys and
// values), never the float32 q, k and v (decode-step.md v24).
//
// kv_fill_random writes pseudo-random KV-like values (a fixed hash of the
// index, so runs repeat bit for bit) for benchmarks that need a long cache
// without running a model over it.
//
// Programmatic dependent launch (docs/perf/decode-attention.md, session 17):
// kvcache.cu is a GridDependent program (header.go). Every kernel waits for
// the kernel ahead of it (the q|k|v GEMV that wrote k, v and q) before it
// reads or writes anything (but kv_append_rope's RoPE positions and
// frequencies, which no kernel writes), then lets the attention kernel queued after it
// be scheduled at once (gridLaunchDependents): decode_mma.cu's CTAs start
// under the append and read the blocks packed in earlier steps before their
// own wait (decode_wgmma.cu's launch after it by default: DecodeTuning.PDL's
// PDLAuto).
//
// Go wrapper: kvcache.go; tested through engine's GPU cache tests.

#include "bitdecode.cuh"

namespace kvc {

constexpr int kThreads = 256;

// kv_append: one thread per (token, KV head, channel), and per element of
// q [nq] float32 (nq 0: none), which it converts to fp16 into qh: the
// decode kernels' query, with f32_to_f16's bits (ops.cu), in this launch
// instead of one of its own (docs/perf/decode-step.md v7d). The grid
// covers max(T·Hkv·D, nq).
extern "C" __global__ void __launch_bounds__(kThreads) kv_append(const float* __restrict__ k, const float* __restrict__ v,
                                                       const int* __restrict__ slot, const int* __restrict__ row,
                                                       u16* __restrict__ resK, u16* __restrict__ resV, int T, int Hkv, int D, int Nr,
                                                       const float* __restrict__ q, u16* __restrict__ qh, long nq) {
  gridDependencyWait();  // k, v, q: the kernel ahead's outputs
  gridLaunchDependents();
  const long i = long(blockIdx.x) * kThreads + threadIdx.x;
  if (i < nq) qh[i] = f2h(q[i]);
  const long n = long(T) * Hkv * D;
  if (i >= n) return;
  const int t = int(i / (long(Hkv) * D)), hc = int(i % (long(Hkv) * D));
  const int h = hc / D, c = hc % D;
  const int s = slot[t];
  if (s < 0) return;
  const size_t base = (size_t(s) * Hkv + h) * Nr * D;
  resK[base + fragIndex(row[t], c, D, false)] = f2h(k[i]);
  resV[base + fragIndex(row[t], c, D, true)] = f2h(v[i]);
}

// kv_append_rot: kv_append for a rotated KV format (kv.Rotate on q, k and
// v before the cache sees them): each row of D is rotated in shared memory
// (bitdecode.cuh's walshHadamard, then the scale s = float32(1/sqrt(D)))
// and rounded to fp16, the bits of ops.cu's hadamard in place followed by
// kv_append; q, k and v are only read, so the rounds of one batch may each
// rotate the rows they write (docs/perf/decode-step.md v8). Grid
// (T·(Hq + Hkv)): token t's blocks are its Hq query heads (none when Hq is
// 0: q [T][Hq*D] float32 to qh, fp16) then its Hkv KV heads (the head's key
// and value rows side by side in shared memory, skipped when slot[t] < 0).
// Block D/2 threads (one butterfly pair each), dynamic shared memory 2·D
// floats.
extern "C" __global__ void kv_append_rot(const float* __restrict__ k, const float* __restrict__ v,
                                         const int* __restrict__ slot, const int* __restrict__ row,
                                         u16* __restrict__ resK, u16* __restrict__ resV, int T, int Hkv, int D, int Nr,
                                         const float* __restrict__ q, u16* __restrict__ qh, int Hq, float s) {
  gridDependencyWait();  // k, v, q: the kernel ahead's outputs
  gridLaunchDependents();
  extern __shared__ float hs[];  // [2][D]: q, or k then v
  const int t = blockIdx.x / (Hq + Hkv), j = blockIdx.x % (Hq + Hkv);
  if (j < Hq) {
    const size_t off = (size_t(t) * Hq + j) * D;
    for (int c = threadIdx.x; c < D; c += blockDim.x) hs[c] = q[off + c];
    __syncthreads();
    walshHadamard<1>(hs, D);
    for (int c = threadIdx.x; c < D; c += blockDim.x) qh[off + c] = f2h(__fmul_rn(hs[c], s));
    return;
  }
  const int h = j - Hq, sl = slot[t];
  if (sl < 0) return;  // the whole block: no barrier skipped by part of it
  const size_t off = (size_t(t) * Hkv + h) * D;
  for (int c = threadIdx.x; c < D; c += blockDim.x) hs[c] = k[off + c], hs[D + c] = v[off + c];
  __syncthreads();
  walshHadamard<2>(hs, D);
  const size_t base = (size_t(sl) * Hkv + h) * Nr * D;
  const int r = row[t];
  for (int c = threadIdx.x; c < D; c += blockDim.x) {
    resK[base + fragIndex(r, c, D, false)] = f2h(__fmul_rn(hs[c], s));
    resV[base + fragIndex(r, c, D, true)] = f2h(__fmul_rn(hs[D + c], s));
  }
}

// storeResidualWarp writes a warp's key and value rows (lane holds elements
// 32·e + lane) into row r of their residual block at base, times s when
// scaled (a rotated format's 1/sqrt(D)), rounded to fp16.
template <int E>
BD_DEVICE void storeResidualWarp(u16* __restrict__ resK, u16* __restrict__ resV, size_t base, int r, const float (&kx)[E],
                                 const float (&vx)[E], int lane, bool scaled, float s) {
  constexpr int D = 32 * E;
#pragma unroll
  for (int e = 0; e < E; e++) {
    const int c = 32 * e + lane;
    resK[base + fragIndex(r, c, D, false)] = f2h(scaled ? __fmul_rn(kx[e], s) : kx[e]);
    resV[base + fragIndex(r, c, D, true)] = f2h(scaled ? __fmul_rn(vx[e], s) : vx[e]);
  }
}

// appendRotRows is kv_append_rot_warp's body for D = 32·E: row
// blockIdx.x·kRotWarps + warp of kv_append_rot's grid (the same rows, one
// warp each), walshHadamardWarp instead of the block's butterflies.
template <int E>
BD_DEVICE void appendRotRows(const float* __restrict__ k, const float* __restrict__ v, const int* __restrict__ slot,
                             const int* __restrict__ row, u16* __restrict__ resK, u16* __restrict__ resV, int T, int Hkv,
                             int Nr, const float* __restrict__ q, u16* __restrict__ qh, int Hq, float s) {
  constexpr int D = 32 * E;
  const int lane = threadIdx.x % 32, rw = blockIdx.x * kRotWarps + threadIdx.x / 32;
  if (rw >= T * (Hq + Hkv)) return;  // the whole warp
  const int t = rw / (Hq + Hkv), j = rw % (Hq + Hkv);
  if (j < Hq) {
    const size_t off = (size_t(t) * Hq + j) * D + lane;
    float x[E];
#pragma unroll
    for (int e = 0; e < E; e++) x[e] = q[off + 32 * e];
    walshHadamardWarp<E>(x, lane);
#pragma unroll
    for (int e = 0; e < E; e++) qh[off + 32 * e] = f2h(__fmul_rn(x[e], s));
    return;
  }
  const int h = j - Hq, sl = slot[t];
  if (sl < 0) return;  // the whole warp
  const size_t off = (size_t(t) * Hkv + h) * D + lane;
  float kx[E], vx[E];
#pragma unroll
  for (int e = 0; e < E; e++) kx[e] = k[off + 32 * e], vx[e] = v[off + 32 * e];
  walshHadamardWarp<E>(kx, lane);
  walshHadamardWarp<E>(vx, lane);
  storeResidualWarp<E>(resK, resV, (size_t(sl) * Hkv + h) * Nr * D, row[t], kx, vx, lane, true, s);
}

// kv_append_rot_warp: kv_append_rot for D = 32, 64, 128 or 256 (other D
// return at once; the Go side launches kv_append_rot for them), the same
// rows and bits, one warp per row (kRotWarps rows a block, grid
// ceil(T·(Hq + Hkv) / kRotWarps)): the butterflies in registers with warp
// shuffles, no shared memory, no barrier (docs/perf/decode-step.md v10).
extern "C" __global__ void __launch_bounds__(kRotWarps * 32)
    kv_append_rot_warp(const float* __restrict__ k, const float* __restrict__ v, const int* __restrict__ slot,
                       const int* __restrict__ row, u16* __restrict__ resK, u16* __restrict__ resV, int T, int Hkv, int D,
                       int Nr, const float* __restrict__ q, u16* __restrict__ qh, int Hq, float s) {
  gridDependencyWait();  // k, v, q: the kernel ahead's outputs
  gridLaunchDependents();
  switch (D) {
    case 32: appendRotRows<1>(k, v, slot, row, resK, resV, T, Hkv, Nr, q, qh, Hq, s); break;
    case 64: appendRotRows<2>(k, v, slot, row, resK, resV, T, Hkv, Nr, q, qh, Hq, s); break;
    case 128: appendRotRows<4>(k, v, slot, row, resK, resV, T, Hkv, Nr, q, qh, Hq, s); break;
    case 256: appendRotRows<8>(k, v, slot, row, resK, resV, T, Hkv, Nr, q, qh, Hq, s); break;
  }
}

// appendRoPERows is kv_append_rope's body for D = 32·E (E even, so that
// lane `lane` holds both halves of its RoPE pairs: element i = 32·e + lane
// of the first half is x[e], i + D/2 is x[e + E/2]). Row j of token t
// (blockIdx.x) is blockIdx.y·kRotWarps + warp: j < Hq query head j, else KV
// head j − Hq, whose key and value the warp takes together.
template <int E>
BD_DEVICE void appendRoPERows(const float* __restrict__ y, const float* __restrict__ bq, const float* __restrict__ bk,
                              const float* __restrict__ bv, const float* __restrict__ cs, const int* __restrict__ slot,
                              const int* __restrict__ row, u16* __restrict__ resK, u16* __restrict__ resV,
                              u16* __restrict__ qh, int Hq, int Hkv, int Nr, bool rot, float s) {
  constexpr int D = 32 * E, H = E / 2, half = D / 2;
  const int lane = threadIdx.x % 32, j = blockIdx.y * kRotWarps + threadIdx.x / 32;
  const long long t = blockIdx.x;
  const float* yr = y + t * (long long)(Hq + 2 * Hkv) * D;  // q's heads, k's, v's (rope_cols's y)
  float x[E];
#pragma unroll
  for (int e = 0; e < E; e++) x[e] = yr[(long long)j * D + 32 * e + lane];
  const float* b = j < Hq ? (bq != nullptr ? bq + (long long)j * D : nullptr)
                          : (bk != nullptr ? bk + (long long)(j - Hq) * D : nullptr);
  if (b != nullptr) {
#pragma unroll
    for (int e = 0; e < E; e++) x[e] = __fadd_rn(x[e], b[32 * e + lane]);
  }
#pragma unroll
  for (int e = 0; e < H; e++) {
    const int i = 32 * e + lane;
    ropeRotate(x[e], x[e + H], cs[i], cs[half + i], x[e], x[e + H]);
  }
  if (j < Hq) {
    if (rot) walshHadamardWarp<E>(x, lane);
    const long long off = (t * Hq + j) * D + lane;
#pragma unroll
    for (int e = 0; e < E; e++) qh[off + 32 * e] = f2h(rot ? __fmul_rn(x[e], s) : x[e]);
    return;
  }
  const int h = j - Hq, sl = slot[t];
  if (sl < 0) return;  // the whole warp
  float vx[E];
  const float* vr = yr + (long long)(Hq + Hkv + h) * D + lane;
#pragma unroll
  for (int e = 0; e < E; e++) vx[e] = vr[32 * e];
  if (bv != nullptr) {
#pragma unroll
    for (int e = 0; e < E; e++) vx[e] = __fadd_rn(vx[e], bv[(long long)h * D + 32 * e + lane]);
  }
  if (rot) {
    walshHadamardWarp<E>(x, lane);
    walshHadamardWarp<E>(vx, lane);
  }
  storeResidualWarp<E>(resK, resV, (size_t(sl) * Hkv + h) * Nr * D, row[t], x, vx, lane, rot, s);
}

// kv_append_rope: ops.cu's rope_cols followed by kv_append (rot false) or
// kv_append_rot (rot true, scale s) in one pass, for D = 64, 128 or 256
// (other D return at once; the Go side refuses them): y [T, (Hq + 2·Hkv)·D]
// float32 is the joined q|k|v GEMM's output, bq, bk, bv the biases (null
// for none), pos [T] and invFreq [D/2] RoPE's; each query head is biased,
// rotated by RoPE (rope_cols's cos, sin and ropeRotate), rotated by kv.Rotate
// where rot is set, and rounded into qh [T, Hq·D] fp16; each KV head's key
// the same, its value biased (and rotated), both into the residual at
// slot[t], row[t] (skipped where slot[t] < 0), kv.MMA order. The bits of
// the two kernels run one after the other (the float32 q, k and v between
// them are not written: model.Attention lets Attend overwrite them and the
// forward pass does not read them after). Grid (T, ceil((Hq + Hkv) /
// kRotWarps)), block kRotWarps warps (a row each); the block's threads
// first compute token t's cos and sin (dynamic shared memory D floats) once
// for its rows, before their dependency wait (docs/perf/decode-step.md v24).
extern "C" __global__ void __launch_bounds__(kRotWarps * 32)
    kv_append_rope(const float* __restrict__ y, const float* __restrict__ bq, const float* __restrict__ bk,
                   const float* __restrict__ bv, const int* __restrict__ pos, const float* __restrict__ invFreq,
                   const int* __restrict__ slot, const int* __restrict__ row, u16* __restrict__ resK,
                   u16* __restrict__ resV, u16* __restrict__ qh, int Hq, int Hkv, int D, int Nr, int rot, float s) {
  // pos (uploaded before the step's kernels) and invFreq (a weight) are
  // not written by the kernels ahead: the table goes before the wait.
  extern __shared__ float cs[];  // cos [D/2] then sin [D/2]
  ropeTable(cs, float(pos[blockIdx.x]), invFreq, D / 2);
  gridDependencyWait();  // y: the GEMM ahead's output
  gridLaunchDependents();
  __syncthreads();
  if (int(blockIdx.y) * kRotWarps + int(threadIdx.x) / 32 >= Hq + Hkv) return;  // the whole warp
  switch (D) {
    case 64: appendRoPERows<2>(y, bq, bk, bv, cs, slot, row, resK, resV, qh, Hq, Hkv, Nr, rot != 0, s); break;
    case 128: appendRoPERows<4>(y, bq, bk, bv, cs, slot, row, resK, resV, qh, Hq, Hkv, Nr, rot != 0, s); break;
    case 256: appendRoPERows<8>(y, bq, bk, bv, cs, slot, row, resK, resV, qh, Hq, Hkv, Nr, rot != 0, s); break;
  }
}

// kv_fill_random: n fp16 values; channel c of every row gets a Gaussian-
// like value (sum of four uniforms) with standard deviation std, and one
// channel in 16 is an outlier channel scaled by 8 (as real keys have).
extern "C" __global__ void __launch_bounds__(kThreads) kv_fill_random(u16* __restrict__ dst, long n, int D, u32 seed, float std) {
  gridDependencyWait();  // dst: the pack ahead may still read it (the fill's last chunk)
  gridLaunchDependents();
  const long i = long(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  float sum = 0.f;
  u32 x = u32(i) * 0x9e3779b9u ^ (u32(i >> 32) * 0x85ebca6bu) ^ seed;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    sum += float(x >> 8) * (1.f / 16777216.f) - 0.5f;
  }
  float val = sum * 1.7320508f * std;  // var of the sum of 4 U(-.5,.5) is 1/3
  if (int(i % D) % 16 == 5) val *= 8.f;
  dst[i] = f2h(val);
}

}  // namespace kvc

// bitdecode.cuh: what the kernel families of gpu/kernels share. Every .cu
// file includes it; the Go wrappers hand it to NVRTC as an in-memory header
// (cuda.Program.Headers, kernelHeaders in header.go), so its text is part of
// every CUBIN cache key and a change here recompiles every kernel.
//
//   1. types and conversions: fp16/bf16 <-> float, packed f16x2/bf16x2 pairs;
//   2. inline-PTX wrappers: read-only and streaming loads, prmt and lop3,
//      f16x2 arithmetic, mma.sync.m16n8k16 (fp16 and bf16), movmatrix,
//      cp.async (Hopper-only wrappers, wgmma, mbarrier and the TMA bulk copy,
//      stay in decode_wgmma.cu, the one file that targets sm_90a only);
//   3. the kv.MMA fragment layout (kv/mma.go, the one definition of the packed
//      order): the geometry of a 16-token fragment group, the place of an
//      element, a lane's loads of a group and the exact unpack of its codes;
//   4. the online softmax of the decode family (decode.cu v1, decode_mma.cu,
//      decode_wgmma.cu and planes.cu): the state of a warp's query rows in the
//      mma C layout and its update per tile, and v1's one-warp-per-row step;
//   5. the merge of partial softmax results: a CTA's warps, then the splits of
//      a row (decode_combine, planes' combine, and finishSplits, the merge the
//      last split of a row chunk runs inside the tensor-core split kernels);
//   6. the butterflies of kv.Rotate's Walsh-Hadamard transform over rows in
//      shared memory (ops.cu's hadamard kernels, kvcache.cu's kv_append_rot).
// Only what two or more files use lives here; a file's own helpers stay in it.
// The merges fix their summation order by the shape alone (no atomics into
// results), so every kernel built on them is bitwise deterministic.
//
// Constants mirrored in Go (kQueryRows, kFragTokens, kMaxSplits,
// kFuseMaxSplits) are checked against decode.go and planes.go by
// header_internal_test.go. Format layouts are not defined here: they come
// from package kv through the Go wrappers (template arguments and offsets).

#pragma once

#define BD_DEVICE __device__ __forceinline__

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

// kNegInf is -infinity: the running max of a row that has seen no token.
#define kNegInf (-__int_as_float(0x7f800000))

// ============================================================================
// 1. Conversions (inline PTX: no cuda_fp16.h needed).

BD_DEVICE float h2f(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
// h2x2 widens a half2 (low half first) to two floats (exact).
BD_DEVICE float2 h2x2(u32 h) {
  float lo, hi;
  asm("{ .reg .f16 a, b;\n mov.b32 {a, b}, %2;\n cvt.f32.f16 %0, a;\n cvt.f32.f16 %1, b; }" : "=f"(lo), "=f"(hi) : "r"(h));
  return make_float2(lo, hi);
}
BD_DEVICE u16 f2h(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
BD_DEVICE u16 f2bf(float f) {
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
// bf2f is exact: a bf16 is the top half of a float.
BD_DEVICE float bf2f(u16 h) { return __int_as_float(int(u32(h) << 16)); }

// pack2 rounds (lo, hi) to the f16x2 with lo in the low 16 bits.
BD_DEVICE u32 pack2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// pack2T packs two floats as the mma operand type: fp16, or bf16 for
// bf16-stored K/V (BF).
template <bool BF>
BD_DEVICE u32 pack2T(float lo, float hi) {
  if (!BF) return pack2(lo, hi);
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// ropeCosSin is RoPE's cos and sin at position p for inverse frequency f:
// the angle p·f in float (rounded, never contracted into an fma), its cos
// and sin in double, each rounded to float. The one definition for every
// RoPE kernel (ops.cu's tables, gemv.cu's pair).
BD_DEVICE void ropeCosSin(float p, float f, float& c, float& s) {
  const double theta = __fmul_rn(p, f);
  c = float(cos(theta));
  s = float(sin(theta));
}
// ropeRotate rotates the pair (x1, x2) of a head by the angle whose cos and
// sin are c and s: (x1·c − x2·s, x2·c + x1·s), each product and sum rounded
// (never fused into an fma), the rotation of every RoPE kernel.
BD_DEVICE void ropeRotate(float x1, float x2, float c, float s, float& lo, float& hi) {
  lo = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
  hi = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}
// add4 is a + b per lane, each sum rounded (a bias added to four columns).
BD_DEVICE float4 add4(float4 a, float4 b) {
  return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w));
}
// The activations of a gated MLP (act of swiglu_cols and of gemv.cu's
// pair epilogue): silu (SwiGLU, Llama) or gelu_tanh (GeGLU, Gemma).
constexpr int kActSiLU = 0;
constexpr int kActGeluTanh = 1;
// silu is ops.cu's swiglu activation: g/(1 + e^−g) with float expf and an
// IEEE division.
BD_DEVICE float silu(float g) { return __fdiv_rn(g, __fadd_rn(1.0f, expf(-g))); }
// geluTanh is transformers' gelu_pytorch_tanh as backend/cpu's geluTanhF64
// computes it: g/(1 + e^x) with x = −2√(2/π)·(g + 0.044715·g³), in double
// (each product and sum rounded, never fused), rounded once to float.
BD_DEVICE float geluTanh(float g) {
  const double d = g;
  const double x = __dmul_rn(-1.5957691216057307117597842, __dadd_rn(d, __dmul_rn(0.044715, __dmul_rn(__dmul_rn(d, d), d))));
  return __double2float_rn(__ddiv_rn(d, __dadd_rn(exp(x), 1.0)));
}
// gluAct is activation act (kActSiLU or kActGeluTanh) of the gate g.
BD_DEVICE float gluAct(int act, float g) { return act == kActGeluTanh ? geluTanh(g) : silu(g); }
// ropeTable writes position p's cos [half] then sin [half] into cs, the
// block's threads striding over i (the caller synchronizes after).
BD_DEVICE void ropeTable(float* cs, float p, const float* __restrict__ invFreq, int half) {
  for (int i = threadIdx.x; i < half; i += blockDim.x) ropeCosSin(p, invFreq[i], cs[i], cs[half + i]);
}

// ============================================================================
// 2. PTX wrappers.

BD_DEVICE u32 prmt(u32 a, u32 b, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
// lop3AndOr is (a & b) | c in one instruction (lop3 truth table 0xea).
BD_DEVICE u32 lop3AndOr(u32 a, u32 b, u32 c) {
  u32 r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
BD_DEVICE u32 hsub2(u32 a, u32 b) {
  u32 r;
  asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
BD_DEVICE u32 hfma2(u32 a, u32 b, u32 c) {
  u32 r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
// trans8x8 transposes an 8x8 matrix of 16-bit elements across the warp
// (movmatrix): from the mma C layout to the B operand layout.
BD_DEVICE u32 trans8x8(u32 x) {
  u32 r;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(r) : "r"(x));
  return r;
}

// Read-only global loads through the non-coherent path, 16, 8 and 4 bytes.
BD_DEVICE void ldg128(const void* p, u32& a, u32& b, u32& c, u32& d) {
  asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(p));
}
BD_DEVICE void ldg64(const void* p, u32& a, u32& b) {
  asm("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(a), "=r"(b) : "l"(p));
}
BD_DEVICE u32 ldg32(const void* p) {
  u32 a;
  asm("ld.global.nc.u32 %0, [%1];" : "=r"(a) : "l"(p));
  return a;
}
// ldgStream loads 16 read-once bytes (weights) without allocating in L1.
BD_DEVICE uint4 ldgStream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Programmatic dependent launch (Hopper; docs/perf/decode-step.md v6). A
// kernel of a program compiled with cuda.Program.GridDependent may start
// while the kernel ahead of it on the stream still runs: every thread calls
// gridDependencyWait before its first read of memory an earlier kernel
// writes and before its first global write (it returns once the kernels
// ahead have completed and their writes are visible), and may call
// gridLaunchDependents once it no longer needs the SMs to itself (the next
// kernel's CTAs are then scheduled as soon as every CTA of this grid has
// called it or exited). Both are no-ops before sm_90, where such kernels
// launch as any other.
BD_DEVICE void gridDependencyWait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

BD_DEVICE void gridLaunchDependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Thread-block clusters (Hopper; ops.cu's clustered norm, linear.cu's
// clustered tiled GEMM): the CTA's rank in its cluster, the cluster
// barrier's halves and a read of another CTA's shared memory. Only kernels
// compiled for sm_90 and up may call them.
BD_DEVICE u32 clusterRank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// The cluster barrier's halves; arrive releases and wait acquires (their
// default semantics) this thread's and the cluster's memory accesses.
BD_DEVICE void clusterArrive() { asm volatile("barrier.cluster.arrive.aligned;" ::: "memory"); }
BD_DEVICE void clusterWait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

// clusterLoadF32x4 reads the four floats at p (shared memory, 16-byte
// aligned; a float or float4 pointer) of CTA rank of the cluster.
template <class T>
BD_DEVICE float4 clusterLoadF32x4(const T* p, u32 rank) {
  const u32 local = u32(__cvta_generic_to_shared(p));
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

// The decode kernels as programmatic dependents (decode_mma.cu,
// decode_wgmma.cu; docs/perf/decode-attention.md, session 17). A launch's
// kernel ahead (the KV append, or the pack of the block its tokens fill)
// writes q, the residual and the blocks that hold the launch's Tq new
// tokens, never the blocks before them: oldBlocks of a sequence of L tokens
// are read before the dependency wait when kPDLEarly, everything else after
// it. BD_PDL_EARLY=0 (DecodeTuning.PDL = PDLWait) makes every thread wait
// first.
#ifndef BD_PDL_EARLY
#define BD_PDL_EARLY 1
#endif
constexpr bool kPDLEarly = BD_PDL_EARLY != 0;

// oldBlocks is how many leading packed blocks of a sequence of L tokens
// (Nr tokens each) hold none of the launch's Tq newest tokens.
BD_DEVICE int oldBlocks(int L, int Tq, int Nr) { return (L - Tq) / Nr; }

// mma16816 is mma.sync.m16n8k16 with fp16 operands and fp32 accumulators:
// c += A·B, A in registers a[0..3] (row-major 16x16), B in b0, b1 (16x8).
BD_DEVICE void mma16816(float c[4], const u32 a[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// mma16816bf is mma16816 with bf16 operands.
BD_DEVICE void mma16816bf(float c[4], const u32 a[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// mmaT is mma16816 on the operand type of the K/V storage: bf16 when BF.
template <bool BF>
BD_DEVICE void mmaT(float c[4], const u32 a[4], u32 b0, u32 b1) {
  if (BF) mma16816bf(c, a, b0, b1);
  else mma16816(c, a, b0, b1);
}

// cp.async: 16-byte global -> shared copies that complete in the background
// (groups committed and waited for in order).
BD_DEVICE void cpAsync16(void* smem, const void* gmem) {
  u32 s;
  asm("{ .reg .u64 a;\n cvta.to.shared.u64 a, %1;\n cvt.u32.u64 %0, a; }" : "=r"(s) : "l"(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
BD_DEVICE void cpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
BD_DEVICE void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// fenceProxyAsync makes this thread's generic-proxy writes to shared memory
// (stores, cp.async copies it has waited for) visible to the async proxy's
// reads (wgmma's operands, the TMA): decode_wgmma.cu, skinny.cu's v3.
BD_DEVICE void fenceProxyAsync() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// ============================================================================
// 3. The kv.MMA fragment layout (kv/mma.go).
//
// A packed half (K or V of one KV head's block) is a run of groups of
// kFragTokens tokens. In a group, lane (g, q) = (lane/4, lane%4) of a warp
// holds the elements of its mma.m16n8k16 A fragments, element kk being
//   keys   (ROLE 0): token 16·grp + g + 8·hiRow, channel 16·blk + 2q + lo + 8·hiCol
//   values (ROLE 1): channel 16·blk + g + 8·hiRow, token 16·grp + 2q + lo + 8·hiCol
// with blk = kk/8, a = (kk%8)/2, hiRow = a%2, hiCol = a/2, lo = kk%2 (keys are
// the A operand of S^T = K·Q^T, values of O^T = V^T·P^T). A lane stores its
// elements as 32-bit words of 32/BITS codes, code p of word w being element
// w·32/BITS + p at bit (p%2)·16 + (p/2)·BITS; its bytes are cut into chunks
// of min(16, lane bytes) that the 32 lanes interleave, so each lane loads
// its own fragments with 16-byte loads in the order it consumes them.

// kFragTokens is the tokens of a fragment group: the mma's M extent for the
// keys and K extent for the values (Go: decode.go and planes.go use 16).
constexpr int kFragTokens = 16;
// kQueryRows is the query rows of one CTA of the tensor-core kernels: the
// mma's N extent (Go: mmaRows, planesRows).
constexpr int kQueryRows = 8;
// kMagic is the f16x2 (1024, 1024): a code c in the low mantissa bits of
// 1024 reads 1024 + c exactly.
constexpr u32 kMagic = 0x64006400u;

// Frag is the geometry of a fragment group of BITS-bit codes, head dim D.
template <int D, int BITS>
struct Frag {
  static constexpr int kLaneBytes = D / 2 * BITS / 8;               // one lane's share of a group
  static constexpr int kChunk = kLaneBytes < 16 ? kLaneBytes : 16;  // bytes per load
  static constexpr int kChunks = kLaneBytes / kChunk;
  static constexpr int kWords = kLaneBytes / 4;
  static constexpr int kGroupBytes = kFragTokens * D * BITS / 8;
  static constexpr int kRegs = D / 16 * 4;  // half2 registers
  static constexpr int kPerWord = 32 / BITS;
};

// fragElem returns the token and channel of fragment element kk of lane
// (g, q) in group grp (the packer's direction).
template <int ROLE>
BD_DEVICE void fragElem(int grp, int g, int q, int kk, int& t, int& c) {
  const int blk = kk / 8, a = (kk % 8) / 2, lo = kk % 2, hiRow = a % 2, hiCol = a / 2;
  if (ROLE == 0) {
    t = grp * 16 + g + 8 * hiRow;
    c = blk * 16 + 2 * q + lo + 8 * hiCol;
  } else {
    c = blk * 16 + g + 8 * hiRow;
    t = grp * 16 + 2 * q + lo + 8 * hiCol;
  }
}

// fragIndex returns the element index of (token t, channel c) in an fp16
// half of D channels in fragment order (the writer's direction; kv.MMA of
// 16-bit elements: one 8-element chunk per lane and 8 elements).
BD_DEVICE int fragIndex(int t, int c, int D, bool values) {
  const int grp = t / 16, tt = t % 16;
  int lane, k;
  if (!values) {
    lane = (tt % 8) * 4 + (c % 8) / 2;
    k = (c / 16) * 8 + (tt / 8 + 2 * ((c % 16) / 8)) * 2 + c % 2;
  } else {
    lane = (c % 8) * 4 + (tt % 8) / 2;
    k = (c / 16) * 8 + ((c % 16) / 8 + 2 * (tt / 8)) * 2 + tt % 2;
  }
  return grp * 16 * D + (k / 8 * 32 + lane) * 8 + k % 8;
}

// loadGroup reads lane's words of the group at p (global memory, read-only).
template <int D, int BITS>
BD_DEVICE void loadGroup(const u8* __restrict__ p, int lane, u32 w[Frag<D, BITS>::kWords]) {
  using F = Frag<D, BITS>;
#pragma unroll
  for (int j = 0; j < F::kChunks; j++) {
    const u8* src = p + (j * 32 + lane) * F::kChunk;
    if (F::kChunk == 16) {
      ldg128(src, w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
    } else if (F::kChunk == 8) {
      ldg64(src, w[2 * j], w[2 * j + 1]);
    } else {
      w[j] = ldg32(src);
    }
  }
}

// loadGroupShared is loadGroup through a generic pointer (a group staged in
// shared memory, or the residual in global memory).
template <int D, int BITS>
BD_DEVICE void loadGroupShared(const u8* p, int lane, u32 w[Frag<D, BITS>::kWords]) {
  using F = Frag<D, BITS>;
#pragma unroll
  for (int j = 0; j < F::kChunks; j++) {
    const u8* src = p + (j * 32 + lane) * F::kChunk;
    if (F::kChunk == 16) {
      const uint4 v = *reinterpret_cast<const uint4*>(src);
      w[4 * j] = v.x, w[4 * j + 1] = v.y, w[4 * j + 2] = v.z, w[4 * j + 3] = v.w;
    } else if (F::kChunk == 8) {
      const uint2 v = *reinterpret_cast<const uint2*>(src);
      w[2 * j] = v.x, w[2 * j + 1] = v.y;
    } else {
      w[j] = *reinterpret_cast<const u32*>(src);
    }
  }
}

// code returns register position p of a word w of BITS-bit codes (the
// codes at bits [p·BITS, p·BITS + BITS) of each 16-bit half) as a half2 of
// exact integers; w8 is w >> 8, shared by the word's upper positions. After
// unrolling, p is a constant and this is two instructions per register:
//   int8:       a byte permute puts each half's byte under the fp16 exponent
//               of 1024 (0x64cc = 1024 + c), then one subtract;
//   int4, int2: a code of the low byte, masked in place under 1024, reads
//               1024 + c·2^s (0x6400 | c << s; exact, the mantissa holds bits
//               0..9), and one fma (x·2^-s - 1024·2^-s) returns c exactly.
//               The high byte's codes do the same from w8.
// (v2.6: the shift per register this replaces cost int2 23 instructions per
// word instead of 17, int4 11 instead of 9.)
template <int BITS>
BD_DEVICE u32 code(u32 w, u32 w8, int p) {
  static_assert(BITS == 2 || BITS == 4 || BITS == 8, "code widths");
  if constexpr (BITS == 8) return hsub2(prmt(w, 0x64646464u, p == 0 ? 0x4240u : 0x4341u), kMagic);
  constexpr int kLow = BITS < 8 ? 8 / BITS : 1;  // positions in the low byte of a half
  const int s = (p % kLow) * BITS;
  const u32 x = lop3AndOr(p < kLow ? w : w8, (((1u << BITS) - 1) << s) * 0x10001u, kMagic);
  if (s == 0) return hsub2(x, kMagic);
  const u32 scale = u32(15 - s) << 10, bias = 0x8000u | (u32(25 - s) << 10);  // fp16 2^-s, -2^(10-s)
  return hfma2(x, scale * 0x10001u, bias * 0x10001u);
}

// unpack turns lane's words into half2 registers in fragment order: register
// j holds codes 2j and 2j+1, exact small integers (or the fp16 values).
template <int D, int BITS>
BD_DEVICE void unpack(const u32 w[Frag<D, BITS>::kWords], u32 h[Frag<D, BITS>::kRegs]) {
  if constexpr (BITS == 16) {
#pragma unroll
    for (int j = 0; j < Frag<D, BITS>::kRegs; j++) h[j] = w[j];
  } else {
    constexpr int kPairs = 16 / BITS;  // register pairs per word
#pragma unroll
    for (int i = 0; i < Frag<D, BITS>::kWords; i++) {
      const u32 w8 = w[i] >> 8;
#pragma unroll
      for (int p = 0; p < kPairs; p++) h[i * kPairs + p] = code<BITS>(w[i], w8, p);
    }
  }
}

// param reads the (scale, zero) pair i of a packed half's parameters at
// half + off (package kv: fp16 pairs, scale in the low half), through the
// non-coherent path (NC, the tensor-core kernels) or a plain load (decode.cu
// v1, whose measured code keeps it).
template <bool NC = true>
BD_DEVICE void param(const u8* __restrict__ half, int off, int i, float& s, float& z) {
  const u32 v = NC ? ldg32(half + off + 4 * i) : *reinterpret_cast<const u32*>(half + off + 4 * i);
  s = h2f(u16(v & 0xffff));
  z = h2f(u16(v >> 16));
}

// quadSum sums v over the 4 lanes of a quad (same g).
BD_DEVICE float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// toC moves a per-row value held by the quad of row g to the C layout's
// rows 2q and 2q+1.
BD_DEVICE void toC(float v, int q, float out[2]) {
  out[0] = __shfl_sync(0xffffffffu, v, (2 * q) * 4);
  out[1] = __shfl_sync(0xffffffffu, v, (2 * q + 1) * 4);
}

// loadQueryFrag reads query row g of a CTA's row chunk (row row0 + g of KV
// head h: token i = row / group, head h·group + row % group; zero beyond
// nrows), scaled by scale·log2(e), as the lane's B-fragment channels of the
// scores: qf[kb][e] is channel 16kb + 2q + (e & 1) + 8(e >> 1).
//   q [B][Tq][Hq][D] fp16
template <int D>
BD_DEVICE void loadQueryFrag(const u16* q, int b, int Tq, int Hq, int h, int group, int row0, int nrows, int g, int qd,
                             float scaleLog2, float (&qf)[D / 16][4]) {
  const int row = row0 + g, i = row / group, hq = h * group + row % group;
  const u16* qp = q + ((size_t(b) * Tq + i) * Hq + hq) * D;
#pragma unroll
  for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int c = 16 * kb + 2 * qd + (e & 1) + 8 * (e >> 1);
      qf[kb][e] = g < nrows ? h2f(qp[c]) * scaleLog2 : 0.f;
    }
}

// windowSpan is how many tokens up to its last visible one a query row of
// a layer with sliding window window sees (0: no window, every token): a
// token t of a row whose last visible token is limit is masked where
// limit - t >= span, so a row at position p sees [p - window + 1, p] (the
// rule of package attn's Params.Window). Without a window the span is
// INT_MAX, and no real row (limit < INT_MAX) masks a token by it.
BD_DEVICE int windowSpan(int window) { return window > 0 ? window : 0x7fffffff; }

// The attention soft-cap (Gemma 2's attn_logit_softcapping, session 23):
// each score s becomes c·tanh(s/c) after the softmax scale and before the
// mask, the running max and the exp. The decode kernels' scores are in
// log2 units (the query is scaled by scale·log2(e)), and
// c·tanh(s/c)·log2(e) = c'·tanh(s·log2(e)/c') with c' = c·log2(e), so the
// launcher (decode.go's softcapOptions) defines BD_SOFTCAP as c' (a float
// literal) where the model has a cap. Without it nothing of the cap is
// compiled: the kernels guard it with #ifdef (not if constexpr on a
// namespace-scope constant, which NVRTC emits as a constant-bank symbol,
// changing every cubin), so they compile as before, byte for byte. The
// tanh is CUDA's tanhf (2 ulp, the CUDA Math API's bound; no fast math
// here), in float32: relative error ~3·2^-24 with the multiply by 1/c'.
#ifdef BD_SOFTCAP
// softcapScore returns the soft-capped score c'·tanh(s/c') (c': BD_SOFTCAP).
BD_DEVICE float softcapScore(float s) { return (BD_SOFTCAP) * tanhf(s * (1.f / (BD_SOFTCAP))); }
#endif

// causalLimits returns the last token rows 2q and 2q+1 of a row chunk may
// see (query token i of a sequence of L tokens sees tokens <= L - Tq + i);
// rows beyond nrows see everything (their results are not written).
BD_DEVICE void causalLimits(int (&limit)[2], int row0, int nrows, int qd, int L, int Tq, int group) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = row0 + 2 * qd + r;
    limit[r] = 2 * qd + r < nrows ? L - Tq + row / group : 0x7fffffff;
  }
}

// ============================================================================
// 4. Online softmax.
//
// Scores are in the log2 domain (scale·log2(e) folded into the query), so
// probabilities are exp2(s - m). A tile's scores s[mt][e] are in the C layout
// of S^T (tokens x rows): lane (g, q) holds tokens g (e = 0, 1) and g+8
// (e = 2, 3) of fragment group mt, for rows 2q (e even) and 2q+1 (e odd).

// warpRowMax returns the tile's max of row 2q+r over the warp (the 8 lanes
// of each row: xor over g).
template <int MT>
BD_DEVICE float warpRowMax(const float (&s)[MT][4], int r) {
  float mx = kNegInf;
#pragma unroll
  for (int mt = 0; mt < MT; mt++) mx = fmaxf(mx, fmaxf(s[mt][r], s[mt][r + 2]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
  return mx;
}

// warpInclusiveSum returns x summed over lanes 0..lane of the full warp
// (lane: the caller's lane index), a Hillis-Steele scan of five
// __shfl_up_sync steps; the exclusive sum is the result minus x.
template <typename T>
BD_DEVICE T warpInclusiveSum(T x, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const T y = __shfl_up_sync(0xffffffffu, x, off);
    if (lane >= off) x += y;
  }
  return x;
}

// ex2 is 2^x by the SFU alone (ex2.approx.ftz.f32): exp2f wraps the same
// instruction in a range fix for results below 2^-126 (three instructions
// more per call). In the online softmax a probability or a rescale factor
// below 2^-126 of its row's running max then becomes 0: the max's own term
// is 1 and the denominator is at least 1, so no fp32 sum of these terms can
// see the difference, and such a probability rounds to fp16 0 for the P·V
// mma either way. The tensor-core decode loops use it (decode_mma.cu v2.12,
// planes.cu v2.8: OnlineSoftmax::fold<MT, true>).
BD_DEVICE float ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// exp2Of is exp2f, or ex2 where kEx2.
template <bool kEx2>
BD_DEVICE float exp2Of(float x) {
  if constexpr (kEx2) {
    return ex2(x);
  } else {
    return exp2f(x);
  }
}

// OnlineSoftmax is one lane's share of the online softmax of query rows 2q
// and 2q+1: their running max m, the lane's part of their denominators l,
// and NACC blocks of O^T accumulators in the C layout (acc[i][e]: rows
// 2q + (e & 1); the channels are the kernel's).
template <int NACC>
struct OnlineSoftmax {
  float m[2], l[2];
  float acc[NACC][4];

  BD_DEVICE void init() {
    m[0] = m[1] = kNegInf;
    l[0] = l[1] = 0.f;
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  }
  // fold takes row 2q+r of a tile whose max over the tile (every lane and
  // warp that shares the row) is mx: the running max becomes max(m, mx),
  // the row's scores become probabilities and join the denominator, and
  // alpha[r] is the factor that rescales what was accumulated before.
  // kEx2 takes the powers of two by ex2 instead of exp2f.
  template <int MT, bool kEx2 = false>
  BD_DEVICE void fold(int r, float (&s)[MT][4], float mx, float (&alpha)[2]) {
    const float mNew = fmaxf(m[r], mx);
    if (mNew == kNegInf) {
      alpha[r] = 1.f;
#pragma unroll
      for (int mt = 0; mt < MT; mt++) s[mt][r] = s[mt][r + 2] = 0.f;
    } else {
      alpha[r] = exp2Of<kEx2>(m[r] - mNew);
      float sum = 0.f;
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        s[mt][r] = exp2Of<kEx2>(s[mt][r] - mNew);
        s[mt][r + 2] = exp2Of<kEx2>(s[mt][r + 2] - mNew);
        sum += s[mt][r] + s[mt][r + 2];
      }
      l[r] = l[r] * alpha[r] + sum;
    }
    m[r] = mNew;
  }
  // rescale multiplies the accumulators by the rows' alpha.
  BD_DEVICE void rescale(const float alpha[2]) {
#pragma unroll
    for (int i = 0; i < NACC; i++) {
      acc[i][0] *= alpha[0];
      acc[i][1] *= alpha[1];
      acc[i][2] *= alpha[0];
      acc[i][3] *= alpha[1];
    }
  }
  // sumRows sums the denominators over the 8 lanes of each row (xor over g),
  // in a fixed order.
  BD_DEVICE void sumRows() {
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
      for (int off = 4; off < 32; off *= 2) l[r] += __shfl_xor_sync(0xffffffffu, l[r], off);
  }
  // storeRows puts the rows' max and (summed) denominator in warp's slots
  // of redM and redL for mergeWarps (lanes g = 0 hold them).
  template <int WARPS, int ROWS>
  BD_DEVICE void storeRows(float (&redM)[WARPS][ROWS], float (&redL)[WARPS][ROWS], int warp, int g, int qd) const {
    if (g == 0) {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        redM[warp][2 * qd + r] = m[r];
        redL[warp][2 * qd + r] = l[r];
      }
    }
  }
};

// foldTile runs a warp's online softmax over a tile of scores s for rows 2q
// and 2q+1 (each row's tile max over the warp): s becomes probabilities and
// st's accumulators (an OnlineSoftmax or OnlineSoftmaxZ) are rescaled;
// alpha receives the rows' factors. kEx2: the powers of two by ex2.
template <bool kEx2 = false, typename ST, int MT>
BD_DEVICE void foldTile(ST& st, float (&s)[MT][4], float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) st.template fold<MT, kEx2>(r, s, warpRowMax(s, r), alpha);
  st.rescale(alpha);
}

// OnlineSoftmaxZ adds the sums of the value zeros of VG channel groups
// (values quantized per token: out = Σ p·s·codes + Σ p·z), which the max
// rescales like the accumulators.
template <int NACC, int VG>
struct OnlineSoftmaxZ : OnlineSoftmax<NACC> {
  float zacc[2][VG];

  BD_DEVICE void init() {
    OnlineSoftmax<NACC>::init();
#pragma unroll
    for (int k = 0; k < VG; k++) zacc[0][k] = zacc[1][k] = 0.f;
  }
  BD_DEVICE void rescale(const float alpha[2]) {
    OnlineSoftmax<NACC>::rescale(alpha);
#pragma unroll
    for (int k = 0; k < VG; k++) {
      zacc[0][k] *= alpha[0];
      zacc[1][k] *= alpha[1];
    }
  }
  // sumRows sums the denominators and the zeros over the 8 lanes of each row.
  BD_DEVICE void sumRows() {
#pragma unroll
    for (int r = 0; r < 2; r++) {
#pragma unroll
      for (int off = 4; off < 32; off *= 2) this->l[r] += __shfl_xor_sync(0xffffffffu, this->l[r], off);
#pragma unroll
      for (int k = 0; k < VG; k++)
#pragma unroll
        for (int off = 4; off < 32; off *= 2) zacc[r][k] += __shfl_xor_sync(0xffffffffu, zacc[r][k], off);
    }
  }
};

// softmaxRowsV1 is the online-softmax step of the CUDA-core kernels (decode.cu
// v1, planes' split_v1): one warp per row r of the tile's scores sc[r][0..63]
// (two per lane) turns them into probabilities in place and updates the row's
// running max mrow and denominator lrow; alpha[r] rescales the row's
// accumulators.
template <int RMAX, int THREADS>
BD_DEVICE void softmaxRowsV1(float (&sc)[RMAX][64], float* alpha, float* mrow, float* lrow, int tid) {
  const int warp = tid / 32, lane = tid % 32;
  for (int r = warp; r < RMAX; r += THREADS / 32) {
    const float s0 = sc[r][lane], s1 = sc[r][lane + 32];
    float m = fmaxf(s0, s1);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    const float mOld = mrow[r], mNew = fmaxf(mOld, m);
    float a = 1.f, p0 = 0.f, p1 = 0.f;
    if (mNew != kNegInf) {
      a = exp2f(mOld - mNew);
      p0 = exp2f(s0 - mNew);
      p1 = exp2f(s1 - mNew);
    }
    float sum = p0 + p1;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    sc[r][lane] = p0;
    sc[r][lane + 32] = p1;
    __syncwarp();
    if (lane == 0) {
      alpha[r] = a;
      mrow[r] = mNew;
      lrow[r] = lrow[r] * a + sum;
    }
  }
}

// initRowsV1 starts the rows of a CUDA-core split: running max -inf and
// denominator 0 (shared, one thread per row), accumulators 0.
template <int RMAX, int CHUNK>
BD_DEVICE void initRowsV1(float* mrow, float* lrow, float (&acc)[RMAX][CHUNK], int tid) {
  if (tid < RMAX) {
    mrow[tid] = kNegInf;
    lrow[tid] = 0.f;
  }
#pragma unroll
  for (int r = 0; r < RMAX; r++)
#pragma unroll
    for (int k = 0; k < CHUNK; k++) acc[r][k] = 0.f;
}

// accumulateV1 adds probability sc[r][tt] times the token's CHUNK values x
// to each row's accumulators.
template <int RMAX, int CHUNK>
BD_DEVICE void accumulateV1(float (&acc)[RMAX][CHUNK], const float (&sc)[RMAX][64], int tt, const float (&x)[CHUNK]) {
#pragma unroll
  for (int r = 0; r < RMAX; r++) {
    const float p = sc[r][tt];
#pragma unroll
    for (int k = 0; k < CHUNK; k++) acc[r][k] = fmaf(p, x[k], acc[r][k]);
  }
}

// rescaleV1 multiplies each row's accumulators by the row's alpha.
template <int RMAX, int CHUNK>
BD_DEVICE void rescaleV1(float (&acc)[RMAX][CHUNK], const float* alpha) {
#pragma unroll
  for (int r = 0; r < RMAX; r++) {
    const float a = alpha[r];
#pragma unroll
    for (int k = 0; k < CHUNK; k++) acc[r][k] *= a;
  }
}

// ============================================================================
// 5. Merges.
//
// A split's partial of a query row is its unnormalized output O (float32 per
// channel), its running max m (log2 domain) and its denominator l:
//   partO  [B][Hkv*rowChunks][maxSplits][RMAX][D]
//   partML [B][Hkv*rowChunks][maxSplits][RMAX][2]
// Merging partials (m_i, l_i, O_i) in a fixed order: M = max m_i,
// w_i = exp2(m_i - M) (0 for a partial that saw nothing), out = Σ w_i·O_i /
// Σ w_i·l_i.

// kMaxSplits bounds the splits of one row (the combine's shared memory).
constexpr int kMaxSplits = 1024;
// kFuseMaxSplits bounds the splits a split kernel merges itself (the shared
// memory of finishSplits' weights); more go to decode_combine.
constexpr int kFuseMaxSplits = 64;
// kMergeThreads is the threads of the merges: the 4 warps of a split CTA of
// the tensor-core kernels (the wgmma kernel's consumer warpgroup) and of a
// combine CTA.
constexpr int kMergeThreads = 128;

// mergeWarpRow merges the WARPS warps' results of a split CTA for row r,
// channel c (each warp ran its own online softmax over its tiles; redO,
// redM, redL hold their O, max and denominators per row) in warp order: m
// = the warps' max, a_w = exp2(m_w - m) (0 for a warp that saw nothing),
// o = Σ a_w·O_w and l = Σ a_w·l_w, each an fmaf chain from +0.
template <int D, int WARPS, int ROWS>
BD_DEVICE void mergeWarpRow(const float (&redO)[WARPS][ROWS][D], const float (&redM)[WARPS][ROWS], const float (&redL)[WARPS][ROWS],
                            int r, int c, float& m, float& o, float& l) {
  m = kNegInf;
#pragma unroll
  for (int w = 0; w < WARPS; w++) m = fmaxf(m, redM[w][r]);
  o = 0.f, l = 0.f;
#pragma unroll
  for (int w = 0; w < WARPS; w++) {
    const float a = redM[w][r] == kNegInf ? 0.f : exp2f(redM[w][r] - m);
    o = fmaf(redO[w][r][c], a, o);
    l = fmaf(redL[w][r], a, l);
  }
}

// mergeWarps merges the WARPS warps' results of a split CTA (mergeWarpRow)
// and writes the split's partial `part`. Called by every thread of the CTA
// after the results are in shared memory.
template <int D, int WARPS, int ROWS>
BD_DEVICE void mergeWarps(const float (&redO)[WARPS][ROWS][D], const float (&redM)[WARPS][ROWS], const float (&redL)[WARPS][ROWS],
                          float* partO, float* partML, size_t part) {
  for (int idx = threadIdx.x; idx < ROWS * D; idx += WARPS * 32) {
    const int r = idx / D, c = idx % D;
    float m, o, l;
    mergeWarpRow<D, WARPS, ROWS>(redO, redM, redL, r, c, m, o, l);
    partO[part * ROWS * D + idx] = o;
    if (c == 0) {
      partML[(part * ROWS + r) * 2] = m;
      partML[(part * ROWS + r) * 2 + 1] = l;
    }
  }
}

// mergeWarpRow4 is mergeWarpRow for channels c..c+3 of row r at once (c a
// multiple of 4): the row's max and the warps' weights are made once for
// the four, and each warp's four outputs come in one float4 load. Each
// channel gets the same operations on the same values in the same order
// (the max over the warps in order, a = exp2f(m_w - m) or 0, o and l by
// fmaf from 0 in warp order), so the same bits as mergeWarpRow.
template <int D, int WARPS, int ROWS>
BD_DEVICE void mergeWarpRow4(const float (&redO)[WARPS][ROWS][D], const float (&redM)[WARPS][ROWS], const float (&redL)[WARPS][ROWS],
                             int r, int c, float& m, float4& o, float& l) {
  m = kNegInf;
#pragma unroll
  for (int w = 0; w < WARPS; w++) m = fmaxf(m, redM[w][r]);
  o = make_float4(0.f, 0.f, 0.f, 0.f), l = 0.f;
#pragma unroll
  for (int w = 0; w < WARPS; w++) {
    const float a = redM[w][r] == kNegInf ? 0.f : exp2f(redM[w][r] - m);
    const float4 v = *reinterpret_cast<const float4*>(&redO[w][r][c]);
    o.x = fmaf(v.x, a, o.x), o.y = fmaf(v.y, a, o.y), o.z = fmaf(v.z, a, o.z), o.w = fmaf(v.w, a, o.w);
    l = fmaf(redL[w][r], a, l);
  }
}

// mergeWarps4 is mergeWarps by (row, 4 channels) pieces (mergeWarpRow4,
// float4 stores): session 19's timeline measured mergeWarps' loop of eight
// dependent (max, exp2f, fmaf) chains per thread (D 128) at 1.1-1.7 us a
// CTA, on the path of every split's end; here two pieces of four channels,
// unrolled (NVRTC 12.5: the same registers and spills as mergeWarps at
// int4 KC and KT, int2 and k4v2; finishOneSplit written alike spilled 32
// more bytes at int2, so it keeps mergeWarpRow). The same values as
// mergeWarps, so the same bits. redO must be 16-byte aligned. Called by
// every thread of the CTA after the results are in shared memory.
template <int D, int WARPS, int ROWS>
BD_DEVICE void mergeWarps4(const float (&redO)[WARPS][ROWS][D], const float (&redM)[WARPS][ROWS], const float (&redL)[WARPS][ROWS],
                           float* partO, float* partML, size_t part) {
  constexpr int kPieces = ROWS * D / 4, kThreads = WARPS * 32;
  static_assert(D % 4 == 0 && kPieces % kThreads == 0, "whole float4 pieces for every thread");
#pragma unroll
  for (int i = 0; i < kPieces / kThreads; i++) {
    const int idx = threadIdx.x + i * kThreads, r = idx / (D / 4), c = idx % (D / 4) * 4;
    float m, l;
    float4 o;
    mergeWarpRow4<D, WARPS, ROWS>(redO, redM, redL, r, c, m, o, l);
    *reinterpret_cast<float4*>(&partO[(part * ROWS + r) * D + c]) = o;
    if (c == 0) {
      partML[(part * ROWS + r) * 2] = m;
      partML[(part * ROWS + r) * 2 + 1] = l;
    }
  }
}

// writeLanePartials ends a CUDA-core split (decode.cu v1, planes' split_v1)
// of CTA (split, blockIdx.y, b): the TL token lanes' accumulators acc (CHUNK
// channels from c of each row) are summed in lane order through red, and the
// split's partial is written with the rows' running max and denominator.
template <int D, int RMAX, int TL, int CHUNK, int THREADS>
BD_DEVICE void writeLanePartials(float (&red)[TL][RMAX][D], const float (&acc)[RMAX][CHUNK], int laneT, int c, int tid,
                                 const float* mrow, const float* lrow, float* partO, float* partML, int b, int Hkv,
                                 int rowChunks, int maxSplits, int split) {
#pragma unroll
  for (int r = 0; r < RMAX; r++)
#pragma unroll
    for (int k = 0; k < CHUNK; k++) red[laneT][r][c + k] = acc[r][k];
  __syncthreads();
  const size_t part = (size_t(b) * Hkv * rowChunks + blockIdx.y) * maxSplits + split;
  for (int idx = tid; idx < RMAX * D; idx += THREADS) {
    const int r = idx / D, cc = idx % D;
    float o = 0.f;
#pragma unroll
    for (int l = 0; l < TL; l++) o += red[l][r][cc];
    partO[part * RMAX * D + idx] = o;
  }
  if (tid < RMAX) {
    partML[(part * RMAX + tid) * 2] = mrow[tid];
    partML[(part * RMAX + tid) * 2 + 1] = lrow[tid];
  }
}

// storeOut writes one output element of the merges: its fp16 value at
// out[i] and, where out32 is not null, that value widened to float32 at
// out32[i] (the bits of ops.cu's f16_to_f32 of it, the launch a cache whose
// format needs no rotation back then skips: decode-step.md v39).
BD_DEVICE void storeOut(u16* __restrict__ out, float* __restrict__ out32, size_t i, float v) {
  const u16 h = f2h(v);
  out[i] = h;
  if (out32 != nullptr) out32[i] = h2f(h);
}

// combineRow merges row r's nSplits partials from part0, in split order,
// by one CTA of kMergeThreads threads, and writes the fp16 output row of
// (sequence b, KV head h, row row0 + r), and its float32 widening to out32
// where that is not null (storeOut):
//   1. M = max over splits of the running max (a tree: max is exact);
//   2. w_s = exp2(m_s - M) in shared memory, L = Σ l_s·w_s (warp 0, each
//      lane a fixed stride, then a fixed shuffle tree);
//   3. every thread sums partO[s][r][c]·w_s for its channels, unrolled so
//      that several loads are in flight, times 1/L.
// EMPTY allows rows that saw no token (L = 0: zeros out). final(row, M, L)
// runs between 2 and 3 (planes' combine keeps them for its mass pass).
template <int D, int RMAX, bool EMPTY, typename FINAL>
BD_DEVICE void combineRow(const float* partO, const float* partML, u16* out, float* out32, size_t part0, int nSplits, int r, int b,
                          int h, int row0, int group, int Hq, int Tq, FINAL final) {
  __shared__ float w[kMaxSplits];
  __shared__ float red[kMergeThreads / 32];
  __shared__ float total;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  float m = kNegInf;
  for (int s = tid; s < nSplits; s += kMergeThreads) m = fmaxf(m, partML[((part0 + s) * RMAX + r) * 2]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = red[0];
#pragma unroll
  for (int i = 1; i < kMergeThreads / 32; i++) m = fmaxf(m, red[i]);
  for (int s = tid; s < nSplits; s += kMergeThreads) {
    const float ms = partML[((part0 + s) * RMAX + r) * 2];
    w[s] = ms == kNegInf ? 0.f : exp2f(ms - m);
  }
  __syncthreads();
  if (warp == 0) {
    float l = 0.f;
    for (int s = lane; s < nSplits; s += 32) l = fmaf(partML[((part0 + s) * RMAX + r) * 2 + 1], w[s], l);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) total = l;
  }
  __syncthreads();
  const float inv = EMPTY ? (total > 0.f ? 1.f / total : 0.f) : 1.f / total;
  const int row = row0 + r, i = row / group, hq = h * group + row % group;
  final(row, m, total);
  for (int c = tid; c < D; c += kMergeThreads) {
    const float* po = partO + part0 * RMAX * D + r * D + c;
    float o = 0.f;
#pragma unroll 8
    for (int s = 0; s < nSplits; s++) o = fmaf(po[size_t(s) * RMAX * D], w[s], o);
    storeOut(out, out32, ((size_t(b) * Tq + i) * Hq + hq) * D + c, o * inv);
  }
}

// seqSplitLen is the split length of a sequence of L tokens (decode.go's
// seqSplitLen, the same rule): splitLen where splitCap is 0 (one length for
// every sequence); else splitBase·2^k tokens, k the smallest with
// L <= splitCap·splitBase·2^k, but at most splitMax. Either way it depends
// on the sequence's own length only, so its bits do not depend on its batch.
BD_DEVICE int seqSplitLen(int L, int splitLen, int splitBase, int splitCap, int splitMax) {
  if (splitCap == 0) return splitLen;
  int s = splitBase;
  while (s < splitMax && L > splitCap * s) s *= 2;
  return s;
}

// decode_combine merges the splits of one query row in split order and
// writes the fp16 output (combineRow): one CTA per (KV head and row chunk,
// sequence, row). The decode family's second launch (v1 always; the
// tensor-core kernels past kFuseMaxSplits splits).
//   lens [B] int32: the rows of sequence b have ⌈L_b / S_b⌉ splits, S_b its
//        seqSplitLen
//   out  [B][Tq][Hq][D] fp16
//   out32 [B][Tq][Hq][D] float32, out widened, or nullptr (storeOut)
template <int D, int RMAX>
__global__ void __launch_bounds__(kMergeThreads) decode_combine(
    const float* __restrict__ partO, const float* __restrict__ partML, const int* __restrict__ lens,
    u16* __restrict__ out, float* __restrict__ out32, int Hq, int Hkv, int Tq, int splitLen, int splitBase, int splitCap, int splitMax, int maxSplits,
    int rowChunks) {
  gridDependencyWait();  // the partials of the split kernel ahead (a no-op unless launched as a dependent)
  const int b = blockIdx.y, h = blockIdx.x / rowChunks, rc = blockIdx.x % rowChunks, r = blockIdx.z;
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * RMAX, nrows = min(RMAX, R - row0);
  if (r >= nrows) return;
  const int L = lens[b], sl = seqSplitLen(L, splitLen, splitBase, splitCap, splitMax);
  const int nSplits = (L + sl - 1) / sl;
  const size_t part0 = (size_t(b) * Hkv * rowChunks + blockIdx.x) * maxSplits;
  combineRow<D, RMAX, false>(partO, partML, out, out32, part0, nSplits, r, b, h, row0, group, Hq, Tq, [](int, float, float) {});
}

// The fused merge's marks (session 26; the timeline's sub-phases of the
// count and the merge): a hook's mark(i) runs in thread 0 where phase i
// ends. kMarkReleased: the release fence before the count; kMarkWeights:
// the merging CTA's weights made (the barrier after them passed);
// kMarkMerged: its outputs written.
constexpr int kMarkReleased = 0;
constexpr int kMarkWeights = 1;
constexpr int kMarkMerged = 2;

// NoArrivedHook is finishSplits' default arrived hook: nothing, and no
// marks.
struct NoArrivedHook {
  BD_DEVICE void operator()(bool) const {}
  BD_DEVICE void mark(int) const {}
};

// lastArrival ends a split CTA's part of a fused merge: once its partials
// are visible it counts itself done on counter and returns, to every thread
// sync synchronizes, whether it was the last of the nSplits; the last one's
// reads of the others' partials then follow their writes.
template <typename SYNC>
BD_DEVICE bool lastArrival(int* counter, int nSplits, int tid, SYNC sync) {
  __shared__ int last;
  __threadfence();  // this CTA's partials are visible before its count
  sync();
  if (tid == 0) last = atomicAdd(counter, 1) == nSplits - 1;
  sync();
  if (!last) return false;
  __threadfence();
  return true;
}

// lastArrivalRel is lastArrival with one thread's fences (CUTLASS's
// GenericBarrier, cutlass/barrier.h: a CTA barrier, then fence.acq_rel.gpu
// and the count by thread 0) instead of every thread's __threadfence
// (fence.sc.gpu) before and after the count: the barrier orders the CTA's
// partial stores before thread 0's release, and the last CTA's thread 0
// acquires (the count it read, then its fence) before the barrier that lets
// its threads read the other splits' partials. The same count and the same
// last CTA's merge, so the same bits (decode_mma.cu v2.16, decode_wgmma.cu
// v3.5; kMergeFenceSC compiles lastArrival's instead).
#ifndef BD_MERGE_FENCE_SC
#define BD_MERGE_FENCE_SC 0
#endif
constexpr bool kMergeFenceSC = BD_MERGE_FENCE_SC != 0;
template <typename SYNC, typename MARK = NoArrivedHook>
BD_DEVICE bool lastArrivalRel(int* counter, int nSplits, int tid, SYNC sync, MARK mark = MARK()) {
  __shared__ int last;
  sync();  // every thread's partials are written (CTA scope)
  if (tid == 0) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");  // release: the CTA's partials before the count
    mark.mark(kMarkReleased);
    const bool l = atomicAdd(counter, 1) == nSplits - 1;
    if (l) asm volatile("fence.acq_rel.gpu;" ::: "memory");  // acquire: the other splits' partials after it
    last = l;
  }
  sync();
  return last;
}


// The launch timeline (session 19; compiled only with -DBD_TIMELINE=1, the
// planner's DecodeTuning.Timeline): tlClock is the GPU's nanosecond timer
// (%globaltimer, one clock for every SM), tlSM the SM a thread runs on.
// decode_timeline_stamp writes the timer once, from one thread, just before
// a timed launch: the kernel ahead has ended when it runs, so a CTA's entry
// less the stamp is the launch's start latency.
#ifndef BD_TIMELINE
#define BD_TIMELINE 0
#endif
#if BD_TIMELINE
BD_DEVICE unsigned long long tlClock() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
BD_DEVICE unsigned tlSM() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}
__global__ void decode_timeline_stamp(unsigned long long* t) {
  gridDependencyWait();  // a no-op unless launched as a dependent: then after the kernel ahead
  t[0] = tlClock();
}
// A timed kernel (decode_mma, planes' split_mma) takes one more parameter,
// tl (BD_TL_PARAM), a launch's region of 64-bit words: word 0 is
// decode_timeline_stamp's time, then kTLWords words per CTA from word
// kTLHead, in blockIdx order (x fastest; tlRecord). A CTA writes the timer
// at its entry and at its phases' ends (BD_TL_MARK): the words below, warps
// their own (+ warp); a word a kernel never writes reads 0 (Go zeroes the
// regions). decode_timeline.go mirrors the layout (timelineHead,
// timelineWords, tlEntry..tlLast) and reads it back (TimelineCTA).
constexpr int kTLHead = 8;       // words before the first CTA's: word 0 the stamp
constexpr int kTLWords = 24;     // words per CTA
constexpr int kTLEntry = 0;      // the CTA's entry
constexpr int kTLInfo = 1;       // tlInfo's word, or ~0: no tokens (Go skips the CTA)
constexpr int kTLPrologue = 2;   // + warp: the warp's setup done, its tile loop starts
constexpr int kTLLoop = 10;      // + warp: the warp's tiles done
constexpr int kTLWarpsDone = 14; // the warp-merge barrier passed
constexpr int kTLPartial = 15;   // the split's partial written
constexpr int kTLArrived = 16;   // the merge's count returned
constexpr int kTLExit = 17;      // the CTA's exit
constexpr int kTLLast = 18;      // 1: this CTA merged its row chunk's splits
constexpr int kTLMarks = 19;     // + kMark*: the count's release fence, the merge's weights, its outputs (session 26)
constexpr int kTLLens = 22;      // thread 0: lens (and the guessed table entry) returned (session 28; decode_mma only)
constexpr int kTLQuery = 23;     // thread 0: its query loads returned (session 28; decode_mma only)
#define BD_TL_PARAM , unsigned long long* __restrict__ tl
#define BD_TL_MARK(i, cond)         \
  do {                              \
    if (cond) tlRec[i] = tlClock(); \
  } while (0)
// tlRecord returns the calling CTA's kTLWords words of region tl.
BD_DEVICE unsigned long long* tlRecord(unsigned long long* tl) {
  return tl + kTLHead + ((size_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * kTLWords;
}
// tlInfo is a CTA's kTLInfo word: its SM (bits 0-15), its tiles (16-39)
// and its tiles per warp (40-63); Go: TimelineCTA.SM, Tiles, PerWarp.
BD_DEVICE unsigned long long tlInfo(int tiles, int perWarp) {
  return tlSM() | (unsigned long long)(tiles) << 16 | (unsigned long long)(perWarp) << 40;
}
// TLArrivedHook is finishSplits' arrived hook in a timed kernel: thread 0
// marks the count's return (kTLArrived) and whether its CTA merges
// (kTLLast) in the CTA's record rec. BD_TL_ARRIVED is the kernel's hook:
// this one on tlRec, else NoArrivedHook.
struct TLArrivedHook {
  unsigned long long* rec;
  BD_DEVICE void operator()(bool last) const {
    if (threadIdx.x == 0) rec[kTLArrived] = tlClock(), rec[kTLLast] = last;
  }
  BD_DEVICE void mark(int i) const {
    if (threadIdx.x == 0) rec[kTLMarks + i] = tlClock();
  }
};
#define BD_TL_ARRIVED TLArrivedHook{tlRec}
#else
#define BD_TL_PARAM
#define BD_TL_MARK(i, cond) \
  do {                      \
  } while (0)
#define BD_TL_ARRIVED NoArrivedHook()
#endif

// finishSplits is decode_combine folded into the split kernels (decode_mma
// v2.5, decode_wgmma, planes' split_mma): every CTA of a (row chunk,
// sequence) counts itself done on counter after writing its partials; the
// last one merges the splits of its rows in split order with
// decode_combine's arithmetic, writes the fp16 output (and its float32
// widening to out32 where that is not null, as storeOut) and resets the
// counter for the next launch. Which CTA is last varies from run to run;
// the order of the merge does not, so the bits do not either. Called by
// the kMergeThreads threads that wrote the partials; sync synchronizes
// exactly them (__syncthreads, or a named barrier where a producer warp has
// left). part0 is split 0's partial index. EMPTY and final(row, M, L) are
// combineRow's (planes' split_mma: rows that saw no token get zeros, and
// M, L are kept for its mass pass). REL (the decode kernels, unless
// kMergeFenceSC) counts with lastArrivalRel instead of lastArrival.
//
// Its loads are scheduled ahead (decode_wgmma v3.4, planes v2.10, decode_mma
// v2.17; v2.5-v2.16's order of operations, so their bits): the last CTA
// reads each split's (max, denominator) once, as a pair, and loads the
// first AHEAD partials of O of its first (row, 4 channels) before the
// weights are made, so that the merge waits for about two L2 round trips
// where reading the max twice and the partials after the weights waited for
// four or five. AHEAD float4 registers per thread: the merge runs after the
// tile loop, whose registers are free by then.
//
// arrived(last), when given (a timed kernel's TLArrivedHook, BD_TIMELINE),
// runs in every thread once the count has said whether this CTA merges;
// the default does nothing.
template <int D, int RMAX, bool EMPTY, int AHEAD, bool REL = false, typename SYNC, typename FINAL, typename ARRIVED = NoArrivedHook>
BD_DEVICE void finishSplits(const float* partO, const float* partML, int* counter, u16* __restrict__ out, float* __restrict__ out32, size_t part0,
                            int nSplits, int b, int h, int row0, int nrows, int group, int Hq, int Tq, int tid, SYNC sync,
                            FINAL final, ARRIVED arrived = ARRIVED()) {
  static_assert(D % 4 == 0 && kFuseMaxSplits <= 64, "float4 channels; two splits a lane");
  __shared__ float w[RMAX][kFuseMaxSplits];
  __shared__ float inv[RMAX];
  bool isLast;
  if constexpr (REL) {
    isLast = lastArrivalRel(counter, nSplits, tid, sync, arrived);
  } else {
    isLast = lastArrival(counter, nSplits, tid, sync);
  }
  arrived(isLast);
  if (!isLast) return;
  // The first AHEAD partials of this thread's first (row, 4 channels).
  const bool has = tid < nrows * D / 4;
  float4 pre[AHEAD];
  {
    const int r = tid / (D / 4), c = tid % (D / 4) * 4;
    const float4* po = reinterpret_cast<const float4*>(partO + (part0 * RMAX + r) * D + c);
#pragma unroll
    for (int s = 0; s < AHEAD; s++)
      if (has && s < nSplits) pre[s] = __ldcg(&po[size_t(s) * RMAX * D / 4]);
  }
  const int lane = tid % 32, warp = tid / 32;
  for (int r = warp; r < nrows; r += kMergeThreads / 32) {  // one warp per row: weights and denominator
    float2 ml[2];  // splits lane and lane + 32
    float m = kNegInf;
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int s = lane + 32 * i;
      if (s < nSplits) {
        ml[i] = __ldcg(reinterpret_cast<const float2*>(&partML[((part0 + s) * RMAX + r) * 2]));
        m = fmaxf(m, ml[i].x);
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0.f;
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int s = lane + 32 * i;
      if (s < nSplits) {
        const float ws = ml[i].x == kNegInf ? 0.f : exp2f(ml[i].x - m);
        w[r][s] = ws;
        l = fmaf(ml[i].y, ws, l);
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) {
      inv[r] = EMPTY ? (l > 0.f ? 1.f / l : 0.f) : 1.f / l;
      final(row0 + r, m, l);
    }
  }
  sync();
  arrived.mark(kMarkWeights);
  for (int idx = tid; idx < nrows * D / 4; idx += kMergeThreads) {
    const int r = idx / (D / 4), c = idx % (D / 4) * 4;
    const float4* po = reinterpret_cast<const float4*>(partO + (part0 * RMAX + r) * D + c);
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    int s0 = 0;
    if (idx == tid) {
#pragma unroll
      for (int s = 0; s < AHEAD; s++)
        if (s < nSplits) {
          const float ws = w[r][s];
          o.x = fmaf(pre[s].x, ws, o.x), o.y = fmaf(pre[s].y, ws, o.y), o.z = fmaf(pre[s].z, ws, o.z), o.w = fmaf(pre[s].w, ws, o.w);
        }
      s0 = min(AHEAD, nSplits);
    }
#pragma unroll 16
    for (int s = s0; s < nSplits; s++) {
      const float4 v = __ldcg(&po[size_t(s) * RMAX * D / 4]);
      const float ws = w[r][s];
      o.x = fmaf(v.x, ws, o.x), o.y = fmaf(v.y, ws, o.y), o.z = fmaf(v.z, ws, o.z), o.w = fmaf(v.w, ws, o.w);
    }
    const int row = row0 + r, i = row / group, hq = h * group + row % group;
    const size_t at = ((size_t(b) * Tq + i) * Hq + hq) * D + c;
    const u16 hx = f2h(o.x * inv[r]), hy = f2h(o.y * inv[r]), hz = f2h(o.z * inv[r]), hw = f2h(o.w * inv[r]);
    u16* dst = out + at;
    dst[0] = hx, dst[1] = hy, dst[2] = hz, dst[3] = hw;
    if (out32 != nullptr)  // storeOut's widening, four channels in one store (c is a multiple of 4)
      *reinterpret_cast<float4*>(out32 + at) = make_float4(h2f(hx), h2f(hy), h2f(hz), h2f(hw));
  }
  arrived.mark(kMarkMerged);
  if (tid == 0) *counter = 0;
}

// walshHadamard runs kv.Rotate's butterflies over NROWS rows of D floats
// (D a power of two) in shared memory, rows D apart: stages h = 1, 2, 4, ...
// < D in float32, each pair (j, j+h) read and written by one thread (the
// block's threads take the D/2 pairs in a strided loop), so a stage has no
// race; every stage ends with a barrier, so all threads of the block call
// it. The caller scales by float32(1/sqrt(D)) (__fmul_rn) after: the same
// operations in the same order as the CPU's, so the same bits.
template <int NROWS>
BD_DEVICE void walshHadamard(float* hv, int D) {
  for (int h = 1; h < D; h *= 2) {
    for (int p = threadIdx.x; p < D / 2; p += blockDim.x) {
      const int j = (p / h) * 2 * h + (p % h);
#pragma unroll
      for (int r = 0; r < NROWS; r++) {
        float* x = hv + r * D;
        const float a = x[j], b = x[j + h];
        x[j] = __fadd_rn(a, b);
        x[j + h] = __fsub_rn(a, b);
      }
    }
    __syncthreads();
  }
}

// kRotWarps is the warps per block (one row each) of the kernels that rotate
// rows with walshHadamardWarp (ops.cu's f16_to_f32_hadamard_warp,
// kvcache.cu's kv_append_rot_warp; ops.go's rotWarps).
constexpr int kRotWarps = 4;

// walshHadamardWarp runs walshHadamard's butterflies over one row of
// D = 32·E floats held by a warp in registers, no shared memory and no
// barrier: element c = 32·e + lane is v[e] of lane `lane`. Stages h = 1..16
// pair lanes (an __shfl_xor_sync each: the lower element of a pair becomes
// a + b, the upper a − b, a the lower's value), stages h = 32..D/2 pair
// v[e] with v[e + h/32] in the lane; the stages run in walshHadamard's
// order with its operations, so the same bits. All 32 lanes call it.
template <int E>
BD_DEVICE void walshHadamardWarp(float (&v)[E], int lane) {
#pragma unroll
  for (int h = 1; h < 32; h *= 2) {
    const bool upper = lane & h;
#pragma unroll
    for (int e = 0; e < E; e++) {
      const float o = __shfl_xor_sync(0xffffffffu, v[e], h);
      v[e] = upper ? __fsub_rn(o, v[e]) : __fadd_rn(v[e], o);
    }
  }
#pragma unroll
  for (int h = 1; h < E; h *= 2) {
#pragma unroll
    for (int e = 0; e < E; e++) {
      if (!(e & h)) {
        const float a = v[e], b = v[e + h];
        v[e] = __fadd_rn(a, b);
        v[e + h] = __fsub_rn(a, b);
      }
    }
  }
}

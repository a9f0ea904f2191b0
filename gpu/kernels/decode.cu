// decode.cu: split-KV decode attention over bitdecode's KV cache.
//
// Computes, for every sequence b, query token i < Tq and query head hq,
//
//   out[b,i,hq,:] = softmax_t( scale · q[b,i,hq,:] · K[b,t,h,:] ) · V[b,t,h,:]
//
// over the cached tokens t <= L_b - Tq + i, where h = hq / (Hq/Hkv) is the
// KV head the query head shares (GQA/MQA; the Hugging Face repeat_kv order).
//
// Data (all device memory):
//   pool       packed blocks, [nBlocks][Hkv][blockBytes]: for each KV head the
//              K half (kBytes) then the V half, each in package kv's canonical
//              layout: data [Nr][D] token-major (sub-byte codes little-endian
//              in each byte, even channel in the low bits), then fp16
//              (scale, zero) pairs at kParamsOff / vParamsOff:
//                K per channel (KC): [Nr/gK][D]    K per token (KT): [Nr][D/gK]
//                V per token:        [Nr][D/gV]
//              fp16 blocks (KBITS/VBITS == 16) are plain [Nr][D] halves.
//   blockTable [B][maxBlocks] int32: block i of sequence b is pool block
//              blockTable[b*maxBlocks+i] (paged KV; contiguous caches use 0,1,2..)
//   resK, resV [slots][Hkv][Nr][D] fp16: the residual blocks (L_b % Nr tokens)
//   resSlots   [B] int32: sequence b's residual is slot resSlots[b]; null
//              means slot b (a paged cache keeps residuals in a slot pool)
//   lens       [B] int32: L_b, cached tokens including the Tq query tokens
//   q          [B][Tq][Hq][D] fp16;  out [B][Tq][Hq][D] fp16
//   partO      [B][Hkv*rowChunks][maxSplits][RMAX][D] float32, unnormalized
//   partML     [B][Hkv*rowChunks][maxSplits][RMAX][2] float32: running max
//              (log2 domain) and denominator of each split
//
// Work: decode_split has one CTA of kThreads threads per (split, KV head and
// row chunk, sequence). The query rows of a KV head (its Hq/Hkv heads times Tq
// tokens) are packed together (the seed's query transformation): every K/V
// byte a CTA loads serves all its rows. Rows beyond RMAX go to further row
// chunks. Inside a CTA, thread tid owns 8 channels (chunk = tid % kTPR, kTPR =
// D/8 threads per token row) of the tokens tid / kTPR, tid/kTPR + kTL, ...
// of each kTile-token tile:
//   1. scores: each thread dequantizes its 8 K values of a token, multiplies
//      with its 8 query values per row, and the kTPR threads of the token
//      reduce with shuffles; scores go to shared memory;
//   2. softmax: one warp per row updates the running max / denominator (exp2
//      with log2(e) folded into the query) and turns scores into weights;
//   3. values: each thread rescales its accumulators and adds weight · V for
//      its 8 channels of its tokens.
// At the end the kTL token lanes are summed in a fixed order through shared
// memory. decode_combine (bitdecode.cuh) merges the splits of each row in
// split order (log-sum-exp), so results are bitwise deterministic: no atomics.
// The softmax step and the merges are the decode family's, in bitdecode.cuh
// (planes.cu's split_v1 runs the same ones).
//
// Versions:
//   v1 (this file) CUDA-core dequantize + FMA; 8 channels per thread; loads of
//      8 elements (16 B for fp16, 4 B for int4, 2 B for int2). The correct
//      baseline; the tensor-core version (KERNELS.md) replaces it per format.
//
// Go wrapper and tests: gpu/kernels/decode.go, decode_test.go (against the
// float64 reference in package attn).

#include "bitdecode.cuh"

constexpr int kThreads = 128;  // threads per CTA: 4 warps
constexpr int kTile = 64;      // tokens per tile (two per lane in the softmax warp)
constexpr int kChunk = 8;      // channels per thread

struct __align__(16) V4 { u32 x, y, z, w; };
struct __align__(8) V2 { u32 x, y; };

// loadCodes8 returns the 8 codes of channels [c, c+8) of a packed row as
// floats. BITS is 8, 4 or 2.
template <int BITS>
BD_DEVICE void loadCodes8(const u8* row, int c, float x[8]) {
  if (BITS == 8) {
    const V2 v = *reinterpret_cast<const V2*>(row + c);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      x[k] = float((v.x >> (8 * k)) & 0xff);
      x[4 + k] = float((v.y >> (8 * k)) & 0xff);
    }
  } else if (BITS == 4) {
    const u32 v = *reinterpret_cast<const u32*>(row + c / 2);
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] = float((v >> (4 * k)) & 0xf);
  } else {
    const u32 v = *reinterpret_cast<const u16*>(row + c / 4);
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] = float((v >> (2 * k)) & 0x3);
  }
}

BD_DEVICE void loadHalf8(const u16* p, float x[8]) {
  const V4 v = *reinterpret_cast<const V4*>(p);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    x[2 * k] = h2f(u16(w[k] & 0xffff));
    x[2 * k + 1] = h2f(u16(w[k] >> 16));
  }
}

// loadToken8 dequantizes channels [c, c+8) of token t of one K or V half
// (or of the fp16 residual) into x.
//   BITS      element bits of the packed half (16: fp16)
//   PERCHAN   true for keys quantized per channel (KC)
template <int D, int BITS, bool PERCHAN>
BD_DEVICE void loadToken8(const u8* half, int paramsOff, int g, int t, int c, float x[8]) {
  if (BITS == 16) {
    loadHalf8(reinterpret_cast<const u16*>(half) + t * D + c, x);
    return;
  }
  constexpr int rowBytes = D * BITS / 8;
  loadCodes8<BITS>(half + t * rowBytes, c, x);
  if (PERCHAN) {  // pairs [t/g][D]: 8 consecutive channels, 8 pairs
#pragma unroll
    for (int k = 0; k < 8; k++) {
      float s, z;
      param<false>(half, paramsOff, (t / g) * D + c + k, s, z);
      x[k] = fmaf(s, x[k], z);
    }
  } else {  // pairs [t][D/g]; g >= 8 so one pair covers the 8 channels
    float s, z;
    param<false>(half, paramsOff, t * (D / g) + c / g, s, z);
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] = fmaf(s, x[k], z);
  }
}

template <int D, int KBITS, int VBITS, bool KC, int RMAX>
__global__ void __launch_bounds__(kThreads) decode_split(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const u16* __restrict__ resK, const u16* __restrict__ resV, const int* __restrict__ resSlots,
    const int* __restrict__ lens, const u16* __restrict__ q, float* __restrict__ partO, float* __restrict__ partML,
    int Hq, int Hkv, int Tq, int Nr, int splitLenArg, int splitBase, int splitCap, int splitMax, int maxSplits, int rowChunks,
    int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV, float scaleLog2, int window) {
  constexpr int kTPR = D / kChunk;       // threads per token row
  constexpr int kTL = kThreads / kTPR;   // token lanes
  static_assert(kTPR <= 32 && kTile % kTL == 0, "tile must split evenly over token lanes");

  __shared__ float sc[RMAX][kTile];
  __shared__ float alpha[RMAX], mrow[RMAX], lrow[RMAX];
  __shared__ float red[kTL][RMAX][D];

  const int split = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y / rowChunks, rc = blockIdx.y % rowChunks;
  const int L = lens[b];
  const int splitLen = seqSplitLen(L, splitLenArg, splitBase, splitCap, splitMax);
  const int t0 = split * splitLen;
  if (t0 >= L) return;  // this sequence has fewer splits
  const int t1 = min(L, t0 + splitLen);
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * RMAX, nrows = min(RMAX, R - row0);
  const int tid = threadIdx.x, chunk = tid % kTPR, lane_t = tid / kTPR;
  const int c = chunk * kChunk;
  const int span = windowSpan(window);

  // Query rows, scaled by scale·log2(e) so the softmax can use exp2.
  float qr[RMAX][kChunk];
  int limit[RMAX];  // last visible token of each row
#pragma unroll
  for (int r = 0; r < RMAX; r++) {
    const int row = row0 + r, i = row / group, hq = h * group + row % group;
    limit[r] = r < nrows ? L - Tq + i : -1;
    float x[kChunk];
    if (r < nrows) {
      loadHalf8(q + ((size_t(b) * Tq + i) * Hq + hq) * D + c, x);
    } else {
#pragma unroll
      for (int k = 0; k < kChunk; k++) x[k] = 0.f;
    }
#pragma unroll
    for (int k = 0; k < kChunk; k++) qr[r][k] = x[k] * scaleLog2;
  }
  float acc[RMAX][kChunk];
  initRowsV1(mrow, lrow, acc, tid);

  const int nPacked = L / Nr;
  const size_t resOff = (size_t(resSlots ? resSlots[b] : b) * Hkv + h) * Nr * D;
  const u8* resKb = reinterpret_cast<const u8*>(resK + resOff);
  const u8* resVb = reinterpret_cast<const u8*>(resV + resOff);

  for (int tile = t0; tile < t1; tile += kTile) {
    // 1. Scores.
    for (int tt = lane_t; tt < kTile; tt += kTL) {
      const int t = tile + tt;
      float x[kChunk];
      if (t < t1) {
        const int blk = t / Nr, within = t - blk * Nr;
        if (blk < nPacked) {
          const u8* half = pool + (size_t(blockTable[b * maxBlocks + blk]) * Hkv + h) * blockBytes;
          loadToken8<D, KBITS, KC>(half, kParamsOff, gK, within, c, x);
        } else {
          loadToken8<D, 16, false>(resKb, 0, 0, within, c, x);
        }
      } else {
#pragma unroll
        for (int k = 0; k < kChunk; k++) x[k] = 0.f;
      }
#pragma unroll
      for (int r = 0; r < RMAX; r++) {
        float p = 0.f;
#pragma unroll
        for (int k = 0; k < kChunk; k++) p = fmaf(qr[r][k], x[k], p);
#pragma unroll
        for (int off = kTPR / 2; off > 0; off /= 2) p += __shfl_xor_sync(0xffffffffu, p, off);
#ifdef BD_SOFTCAP
        p = softcapScore(p);  // the attention soft-cap (bitdecode.cuh), before the mask
#endif
        if (chunk == 0) sc[r][tt] = (t < t1 && t <= limit[r] && limit[r] - t < span) ? p : kNegInf;
      }
    }
    __syncthreads();
    // 2. Online softmax, one warp per row.
    softmaxRowsV1<RMAX, kThreads>(sc, alpha, mrow, lrow, tid);
    __syncthreads();
    // 3. Values.
    rescaleV1(acc, alpha);
    for (int tt = lane_t; tt < kTile; tt += kTL) {
      const int t = tile + tt;
      if (t >= t1) break;
      float x[kChunk];
      const int blk = t / Nr, within = t - blk * Nr;
      if (blk < nPacked) {
        const u8* half = pool + (size_t(blockTable[b * maxBlocks + blk]) * Hkv + h) * blockBytes + kBytes;
        loadToken8<D, VBITS, false>(half, vParamsOff, gV, within, c, x);
      } else {
        loadToken8<D, 16, false>(resVb, 0, 0, within, c, x);
      }
      accumulateV1(acc, sc, tt, x);
    }
    __syncthreads();
  }

  // Sum the token lanes in a fixed order and write this split's partials.
  writeLanePartials<D, RMAX, kTL, kChunk, kThreads>(red, acc, lane_t, c, tid, mrow, lrow, partO, partML, b, Hkv, rowChunks,
                                                    maxSplits, split);
}

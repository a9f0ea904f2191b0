// dec.cu: dynamic error compensation (DEC, DecDEC) of a linear layer over
// packed low-bit weights: after the base GEMV has written y = x·Ŵᵀ (+ bias),
// add back the quantization residual of the few input channels whose
// activations are largest, reading only those channels' residual rows from
// host memory mapped into the device (zero-copy PCIe reads). The numbers are
// those of package wq (wq/dec.go, wq/doc.go "Dynamic error compensation"),
// bit for bit.
//
//   x      [T][K] float32 (device), y [T][N] float32 (device, holds the base)
//   words  Rᵀ [K][N]'s packed rows (wq layout, one row per input channel):
//          int4: N/8 words per row, int8: N/4, fp16: N/2 (mapped host memory)
//   params [K][N/128] (scale, zero) fp16 pairs of the int4/int8 rows (mapped
//          host memory), null for fp16
//   sel    [T][S] int32 scratch (device): the selected channels of each
//          token, in increasing order; S = Σ over chunks of kc (below)
//
// 1. select_topk, one CTA of 1024 threads per (chunk of 1024 input channels,
//    token), thread i owning channel c0+i: wq.SelectApprox exactly.
//    key = float32 bits of |x| >> 20; keyMax = the chunk's largest (block
//    max); bucket b = min(keyMax − key, 255); a shared-memory histogram
//    (atomics: counts do not depend on order); an inclusive scan of the 256
//    counts finds B, the unique bucket where the running count first reaches
//    kc = min(c, ceil(k_chunk·c/1024)) (wq.ChunkSelect), and fill = kc − the
//    count above it. A channel is taken if b < B, or if b == B and fewer
//    than fill channels of bucket B precede it; both "precede" counts are
//    block-wide exclusive prefix sums of ballots, so the fill and the output
//    positions follow channel order, never timing. Chunk j's kc channels go
//    to sel[t][j·kc_full ...] (every chunk before the last is full).
//
// 2. compensate<ELEM, W>, grid (n_tb, T): CTA b owns a slice of the outputs
//    (whole units of kUnit = 32 outputs, n_tb slices as equal as units
//    allow). Its threads stream the slice's part of the selected rows
//    (codes and params) from host memory into shared memory in batches of
//    rows of at most one per thread: every thread issues up to kLoads
//    16-byte loads (twice that in CTAs of kMinThreads threads) and
//    kSerialParamLoads 4-byte param loads (consecutive threads read consecutive
//    addresses, so a warp's loads coalesce), and the next batch's loads are
//    issued before
//    the current batch is summed, so PCIe latency overlaps the math. Then
//    each thread, owning W packed words of the slice (8 int4, 4 int8 or 2
//    fp16 outputs per word), adds for each row in increasing selected order
//        r̂  = __fadd_rn(__fmul_rn(float(s), float(q)), float(z))   (fp16: the value)
//        dec = __fadd_rn(dec, __fmul_rn(x_k, r̂))
//    (explicit _rn: no fused multiply-add may change the bits), and finally
//    y_n = __fadd_rn(y_n, dec_n): wq.Compensate's sum, bit for bit.
//
// 3. fused mode: the DEC CTAs run in the same grid as the base GEMV, at the
//    lowest blockIdx (resident first), and no CTA waits on one that may
//    not be running (docs/perf/dec.md has the design and its costs). A DEC CTA
//    (blockIdx.x < a.blocks) calls
//        dec::fused_cta<ELEM, P, THREADS>(a, blockIdx.x, smem)
//    with smem = at least dec::fused_smem_bytes(THREADS) bytes of 16-byte
//    aligned shared memory. Per token it selects the channels itself when
//    a.sel is null (select_chunks: one warp per 1024-input chunk, the list
//    in shared memory, wq.SelectApprox exactly; DEC CTA 0 also writes the
//    list to a.selOut when set, for later launches over the same x), or
//    reads a.sel, a list made before the launch (a select_topk launch when
//    S > kSelMax, or an earlier fused launch's a.selOut over the same x
//    and k_chunk: the DEC CTAs then start with the list), sums its slice's
//    compensation from host memory into registers (accumulate_out: P
//    consecutive outputs per thread, eight or four rows in flight, the
//    same per-output order and bits as 2.). The one-trip protocol (v6):
//    a.part [T][N] (device) holds kPartEmpty in every word between
//    launches. The DEC CTA stores every token's sums but the last to part;
//    then it claims each tile of kTile = 16 outputs, atomicCAS(flag, 0 ->
//    1), and stores the last token's sums to part. A base CTA owning a
//    tile loads its part words (dec::part_load, early: at the start of its
//    last batch) and writes y = base, or __fadd_rn(base, part) when every
//    word of the tile is the DEC CTA's (dec::part_ready, voted over the
//    CTA; dec::tile_value): then the DEC CTA has claimed the tile and is
//    done with it, and the base CTA resets the words to kPartEmpty and the
//    flag to 0 (dec::tile_close), with no flag read and no fence: one
//    round trip, hidden behind its last batch. Otherwise tile_close makes
//    its stores visible and does atomicCAS(flag, 0 -> 2): if that finds 1
//    (the DEC CTA claimed the tile meanwhile) the base CTA adds part into y
//    as the words arrive (the DEC CTA is resident and stores them without
//    waiting on anybody) and resets them and the flag; if it succeeds, the
//    DEC CTA's claim (an acquire CAS: no fence after it, v7) finds 2 and it
//    adds every token's sums into y itself
//    (the last from registers) and resets the words and the flag. Exactly
//    one side adds, with the same single float32 add as serial mode (the
//    same bits); the side that comes second leaves part empty and the flag
//    0 for the next launch or graph replay.
//    Slices are whole 32-output units, so no tile has two DEC CTAs.
//    A tile is one base CTA's outputs: kTile = 16 for gemvq.cu's
//    gemv_q_dec, 16/S for gemvq3.cu's gemv_q3_dec (fused_cta's and
//    tile_close's TILE; a flag per tile, kernels.DECFlagWords).
//    dec::fused_cta_any<THREADS, PMAX, ALL>(a, blockIdx.x, smem) does the
//    same with ELEM and P read from a.elem and a.wpt (kernels.DECFusedArgs
//    fills them), instantiating P <= PMAX and int4 only unless ALL
//    (registers: the kernel's count is that of its largest path). fused_selftest is such a grid
//    with trivial base CTAs (they copy a precomputed base output) to test
//    the protocol.
//
// Go wrapper: dec.go; tests: dec_test.go (wq.SelectApprox, wq.Compensate).

#include "bitdecode.cuh"

namespace dec {

// Element types: the values of wq.Elem, so the Go side names instantiations
// with the enum's number.
constexpr int kFP16 = 1;
constexpr int kInt8 = 2;
constexpr int kInt4 = 3;

constexpr int kChunkChannels = 1024;  // wq.ChunkChannels
constexpr int kBucketShift = 20;      // wq's bucketShift: 8 buckets per octave
constexpr int kBuckets = 256;         // wq's bucketCount
constexpr int kSelectThreads = kChunkChannels;

constexpr int kThreads = 256;   // threads of a compensate CTA
constexpr int kUnit = 32;       // outputs per slice unit (slices are whole units)
constexpr int kTile = 16;       // outputs per tile flag (fused mode)
constexpr int kGroup = 128;     // wq.ResidualGroup: outputs per (scale, zero)
constexpr int kLoads = 4;       // 16-byte code loads per thread per batch (twice that in CTAs of kMinThreads)
constexpr int kParamLoads = 1;  // 4-byte param loads per thread per batch (twice that in CTAs of kMinThreads and in serial mode)
constexpr int kMinThreads = 128;  // the fewest threads of a DEC CTA (rows per batch at most: its threads)
constexpr int kSelMax = 1024;   // fused mode: selected channels per token kept in shared memory

// Args is everything a DEC launch reads, passed by value (96 bytes; the Go
// side packs it: dec.go's DECLaunch.args).
struct Args {
  const float* x;    // [T][K]
  float* y;          // [T][N]
  int* sel;          // [T][S]
  const u32* words;  // Rᵀ codes, mapped host memory
  const u32* params; // Rᵀ (scale, zero) pairs, mapped host memory; null for fp16
  u32* flags;        // [N/16] tile states (fused mode); null otherwise
  float* part;       // [T][N] the compensation (fused mode); null otherwise
  int* selOut;       // fused mode, DEC CTAs that select: CTA 0 writes each token's list here ([T][S]) for later launches over the same x; null: not kept
  int N, K, T, S;
  int kChunk;        // channels per 1024, at most 1024
  int blocks;        // n_tb: DEC CTAs
  int elem;          // the residual's element type (kFP16, kInt8, kInt4), for fused_cta_any
  int wpt;           // serial mode: W, packed words per thread; fused mode: P, outputs per thread (fused_cta_any)
};
static_assert(sizeof(Args) == 96, "dec.go packs Args as 96 bytes");

// Fmt describes one residual element type: outputs per packed 32-bit word
// and whether rows have (scale, zero) params.
template <int E>
struct Fmt;
template <>
struct Fmt<kInt4> {
  static constexpr int kPerWord = 8;
  static constexpr bool kParams = true;
};
template <>
struct Fmt<kInt8> {
  static constexpr int kPerWord = 4;
  static constexpr bool kParams = true;
};
template <>
struct Fmt<kFP16> {
  static constexpr int kPerWord = 2;
  static constexpr bool kParams = false;
};

// loads_per_thread is the 16-byte code loads per thread per batch of a CTA
// of threads threads: kLoads, doubled in the smallest CTAs (the same bytes
// in flight as a CTA of twice the threads, within the fused kernels' 48 KB).
__host__ __device__ constexpr int loads_per_thread(int threads) { return threads <= kMinThreads ? 2 * kLoads : kLoads; }

// param_loads is the 4-byte param loads per thread per batch of a fused
// DEC CTA of threads threads: kParamLoads, doubled in the smallest CTAs
// (they have the shared memory; gemv_q_dec<S = 8>'s 256-thread CTAs do
// not). A batch holds at most threads·param_loads/np rows, np the (scale,
// zero) groups a slice spans.
__host__ __device__ constexpr int param_loads(int threads) { return threads <= kMinThreads ? 2 * kParamLoads : kParamLoads; }

// kSerialParamLoads is the param loads per thread per batch of serial
// mode's compensate (its own kernel: shared memory to spare).
constexpr int kSerialParamLoads = 2 * kParamLoads;

// smem_bytes is the shared memory stage needs with THREADS threads and pl
// param loads per thread: codes (loads_per_thread 16-byte chunks per
// thread), params (as float32 pairs), x values and two buffers of row
// indices.
__host__ __device__ constexpr int smem_bytes(int threads, int pl) {
  return threads * loads_per_thread(threads) * 16 + threads * pl * 8 + threads * 4 + 2 * threads * 4;
}

// fused_smem_bytes is the shared memory of a fused-mode DEC CTA: that of
// accumulate_out, then the token's selection list (kSelMax ints). The
// selection's per-warp histograms alias accumulate_out's code buffer.
__host__ __device__ constexpr int fused_smem_bytes(int threads) {
  return smem_bytes(threads, param_loads(threads)) + kSelMax * 4;
}

// Loads from the mapped host memory: plain global loads (L2 may keep the
// lines; the residual never changes).
__device__ __forceinline__ uint4 ld_host4(const u32* p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ u32 ld_host(const u32* p) {
  u32 v;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// Reads and writes of y and part in fused mode, and reads of a flag waited
// on: strong (relaxed, GPU scope), through L2 like ld/st.global.cg (both compile to
// LDG/STG.E.STRONG.GPU). Never weak loads: a weak load may be merged with an
// earlier one of the same address, and a wait loop over one dropped. v6's
// NaN (docs/perf/dec.md, v6.1): with ld.global.cg, ptxas folded add_part's
// `while (empty) reload` into its first load, so a base CTA whose DEC CTA
// had claimed the tile but not yet stored its words added kPartEmpty (a
// NaN) into y.
__device__ __forceinline__ float ld_gpu(const float* p) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u32 ld_gpu(const u32* p) {
  u32 v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_gpu(float* p, float v) { asm volatile("st.relaxed.gpu.global.f32 [%0], %1;" : : "l"(p), "f"(v) : "memory"); }

// cas_acquire is atomicCAS with acquire semantics at GPU scope (the DEC
// CTAs' claim of a tile, fused mode): when it finds 2, the base CTA's
// stores to y (made visible by its fence before its own CAS, the release)
// are visible to this thread, and through the CTA barrier after the claims
// to every thread of the CTA: no fence after the claim (v7; v6 paid a
// membar.gl there).
__device__ __forceinline__ u32 cas_acquire(u32* p, u32 cmp, u32 v) {
  u32 old;
  asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(cmp), "r"(v) : "memory");
  return old;
}

// globaltimer returns the GPU's nanosecond timer (fused_selftest's late
// mode).
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// chunk_select is wq.ChunkSelect for kChunk <= 1024.
__host__ __device__ __forceinline__ int chunk_select(int kChunk, int c) {
  if (kChunk <= 0 || c <= 0) return 0;
  const int k = (kChunk * c + kChunkChannels - 1) / kChunkChannels;
  return k < c ? k : c;
}

// slice returns DEC CTA b's outputs in units of kUnit: [u0, u1).
__device__ __forceinline__ void slice(int N, int blocks, int b, int& u0, int& u1) {
  const int units = N / kUnit;
  u0 = int((long long)b * units / blocks);
  u1 = int((long long)(b + 1) * units / blocks);
}

// value returns output o (0..kPerWord−1 of the word's outputs, in output
// order) of a packed residual word as float32: the wq layout (doc.go) with
// the low half holding even outputs, the high half odd ones.
template <int E>
__device__ __forceinline__ float value(u32 w, int o, float s, float z) {
  if (E == kFP16) return h2f(u16(o ? w >> 16 : w & 0xffffu));
  u32 q;
  if (E == kInt4) {
    q = (w >> ((o & 1) * 16 + (o >> 1) * 4)) & 0xfu;
  } else {  // int8: bytes 0, 1, 2, 3 hold outputs 0, 2, 1, 3
    q = (w >> ((o & 1) * 16 + (o >> 1) * 8)) & 0xffu;
  }
  return __fadd_rn(__fmul_rn(s, float(q)), z);  // s·q is exact; one rounding, as wq.Dequant
}

// block_rank returns, for a CTA of exactly 1024 threads, the number of
// threads below this one whose f is true (an exclusive prefix sum of
// ballots: deterministic). warpv holds 32 ints of shared memory.
__device__ __forceinline__ int block_rank(bool f, int* warpv) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 m = __ballot_sync(0xffffffffu, f);
  __syncthreads();  // warpv may still be read by a previous call
  if (lane == 0) warpv[warp] = __popc(m);
  __syncthreads();
  if (warp == 0) {
    const int v = warpv[lane];
    const int incl = warpInclusiveSum(v, lane);
    warpv[lane] = incl - v;
  }
  __syncthreads();
  return warpv[warp] + __popc(m & ((1u << lane) - 1u));
}

// select_topk_cta is select_topk's body: it writes the channels
// wq.SelectApprox selects for one (chunk, token) = (blockIdx.x, blockIdx.y)
// into a.sel (see the file comment), in a CTA of kSelectThreads threads.
// Also gemvq6dec.cu's select_q6 (a programmatic dependent).
__device__ __forceinline__ void select_topk_cta(const Args& a) {
  __shared__ int hist[kBuckets];
  __shared__ int warpv[32];
  __shared__ int shMax, shB, shFill;
  const int chunk = blockIdx.x, t = blockIdx.y, i = threadIdx.x;
  const int lane = i & 31, warp = i >> 5;
  const int c0 = chunk * kChunkChannels;
  const int c = min(kChunkChannels, a.K - c0);
  const int kc = chunk_select(a.kChunk, c);
  if (kc == 0) return;  // the same for the whole CTA
  const bool valid = i < c;
  int key = -1;
  if (valid) key = int((__float_as_uint(a.x[size_t(t) * a.K + c0 + i]) & 0x7fffffffu) >> kBucketShift);
  if (i < kBuckets) hist[i] = 0;

  // keyMax: warp maxima, then warp 0 over them.
  int m = key;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) warpv[warp] = m;
  __syncthreads();  // also publishes hist's zeros
  if (warp == 0) {
    int v = warpv[lane];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (lane == 0) shMax = v;
  }
  __syncthreads();
  const int b = valid ? min(shMax - key, kBuckets - 1) : kBuckets;
  if (valid) atomicAdd(&hist[b], 1);
  __syncthreads();

  // Inclusive scan of the 256 counts: warps 0..7 scan their 32 entries,
  // then add the totals of the warps before them; each thread rewrites only
  // its own entry between barriers.
  if (i < kBuckets) {
    const int incl = warpInclusiveSum(hist[i], lane);
    if (lane == 31) warpv[warp] = incl;
    hist[i] = incl;
  }
  __syncthreads();
  if (i < kBuckets) {
    int cum = hist[i];
    for (int w = 0; w < warp; w++) cum += warpv[w];
    hist[i] = cum;
  }
  __syncthreads();
  // B is the unique bucket where the running count first reaches kc (it
  // exists: the count over all 256 buckets is c >= kc), as wq's loop finds.
  if (i < kBuckets) {
    const int cum = hist[i], prev = i == 0 ? 0 : hist[i - 1];
    if (cum >= kc && prev < kc) {
      shB = i;
      shFill = kc - prev;
    }
  }
  __syncthreads();
  const int B = shB, fill = shFill;
  const bool inB = valid && b == B;
  const int rankB = block_rank(inB, warpv);
  const bool take = valid && (b < B || (inB && rankB < fill));
  const int pos = block_rank(take, warpv);
  if (take) a.sel[size_t(t) * a.S + size_t(chunk) * chunk_select(a.kChunk, kChunkChannels) + pos] = c0 + i;
}

// select_topk writes the channels wq.SelectApprox selects for one (chunk,
// token) = (blockIdx.x, blockIdx.y) into a.sel (see the file comment).
__global__ void __launch_bounds__(kSelectThreads) select_topk(const Args a) { select_topk_cta(a); }

// stage runs the batched pipeline that brings token t's selected residual
// rows of the slice [u0, u1) into shared memory and calls sum(rows, sw,
// sf, sx) for each batch once it is there: sw holds the batch's rows of
// codes (nch 16-byte chunks per row), sf their (scale, zero) pairs already
// converted to float32 (np per row; int4/int8 only), sx the rows' x values.
// sel is the token's a.S selected channels, increasing (global or shared
// memory). All THREADS threads of the CTA must call it (it synchronizes);
// smem holds smem_bytes(THREADS, PL) bytes, 16-byte aligned; PL is the
// param loads per thread per batch.
template <int E, int THREADS, int PL, class Sum>
__device__ __forceinline__ void stage(const Args& a, int t, int u0, int u1, unsigned char* smem, const int* sel, Sum&& sum) {
  static_assert(THREADS >= kMinThreads && THREADS % 32 == 0, "a thread per row of a batch");
  using F = Fmt<E>;
  constexpr int kPer = F::kPerWord;
  constexpr int kWordsPerUnit = kUnit / kPer;
  constexpr int kChunksPerUnit = kWordsPerUnit / 4;
  const int tid = threadIdx.x;
  const int rowWords = a.N / kPer;
  const int nch = (u1 - u0) * kChunksPerUnit;  // 16-byte chunks per row of the slice
  const int g0 = F::kParams ? u0 * kUnit / kGroup : 0;
  const int np = F::kParams ? (u1 * kUnit - 1) / kGroup + 1 - g0 : 0;  // params per row
  const int paramRow = a.N / kGroup;
  constexpr int kL = loads_per_thread(THREADS);
  int rmax = min(THREADS, THREADS * kL / nch);
  if (F::kParams) rmax = min(rmax, THREADS * PL / np);

  uint4* sw = reinterpret_cast<uint4*>(smem);
  float2* sf = reinterpret_cast<float2*>(smem + THREADS * kL * 16);
  float* sx = reinterpret_cast<float*>(sf + THREADS * PL);
  int* ks = reinterpret_cast<int*>(sx + THREADS);  // [2][THREADS]

  const float* x = a.x + size_t(t) * a.K;
  const u32* words = a.words + u0 * kWordsPerUnit;
  const u32* params = F::kParams ? a.params + g0 : nullptr;
  const int nb = (a.S + rmax - 1) / rmax;  // batches; all but the last have rmax rows

  // The pipeline: iteration b stores batch b's loads (issued in iteration
  // b − 1) into shared memory, issues batch b + 1's loads, and sums batch
  // b while they are in flight. Batch b + 1's row indices reach ks[(b+1)&1]
  // in iteration b's store phase, from selr, read one iteration earlier.
  uint4 rw[kL];
  u32 rp[PL];
  float xr = 0.f;
  if (tid < min(rmax, a.S)) ks[tid] = sel[tid];
  int selr = nb > 1 && tid < min(rmax, a.S - rmax) ? sel[rmax + tid] : 0;
  __syncthreads();
  for (int b = -1; b < nb; b++) {
    const int rows = b >= 0 ? min(rmax, a.S - b * rmax) : 0;
    if (b >= 0) {
      __syncthreads();  // the previous batch's sums are done with sw, sf, sx
#pragma unroll
      for (int j = 0; j < kL; j++) {
        const int i = tid + j * THREADS;
        if (i < rows * nch) sw[i] = rw[j];
      }
      if (F::kParams) {
#pragma unroll
        for (int j = 0; j < PL; j++) {
          const int i = tid + j * THREADS;
          if (i < rows * np) sf[i] = make_float2(h2f(u16(rp[j] & 0xffffu)), h2f(u16(rp[j] >> 16)));
        }
      }
      if (tid < rows) sx[tid] = xr;
      if (b + 1 < nb && tid < min(rmax, a.S - (b + 1) * rmax)) ks[((b + 1) & 1) * THREADS + tid] = selr;
      __syncthreads();
    }
    if (b + 1 < nb) {
      // Issue batch b + 1: its codes, params and x values.
      const int* ksb = ks + ((b + 1) & 1) * THREADS;
      const int nrows = min(rmax, a.S - (b + 1) * rmax);
#pragma unroll
      for (int j = 0; j < kL; j++) {
        const int i = tid + j * THREADS;
        if (i < nrows * nch) {
          const int r = i / nch, c = i - r * nch;
          rw[j] = ld_host4(words + size_t(ksb[r]) * rowWords + c * 4);
        }
      }
      if (F::kParams) {
#pragma unroll
        for (int j = 0; j < PL; j++) {
          const int i = tid + j * THREADS;
          if (i < nrows * np) {
            const int r = i / np, g = i - r * np;
            rp[j] = ld_host(params + size_t(ksb[r]) * paramRow + g);
          }
        }
      }
      if (tid < nrows) xr = x[ksb[tid]];
      selr = b + 2 < nb && tid < min(rmax, a.S - (b + 2) * rmax) ? sel[(b + 2) * rmax + tid] : 0;
    }
    if (b < 0) continue;
    sum(rows, sw, sf, sx);
  }
}

// accumulate sums token t's compensation of the outputs of units [u0, u1)
// into acc, one packed word (kPerWord outputs) after another per thread
// (v3; serial mode's compensate, the reference fused mode is tested
// against): acc[w][o] is output u0·kUnit + (threadIdx.x + w·THREADS)·kPerWord
// + o. The arguments are stage's.
template <int E, int W, int THREADS>
__device__ __forceinline__ void accumulate(const Args& a, int t, int u0, int u1, unsigned char* smem, const int* sel,
                                           float (&acc)[W][Fmt<E>::kPerWord]) {
  using F = Fmt<E>;
  constexpr int kPer = F::kPerWord;
  constexpr int kWordsPerUnit = kUnit / kPer;
  const int tid = threadIdx.x;
#pragma unroll
  for (int w = 0; w < W; w++)
#pragma unroll
    for (int o = 0; o < kPer; o++) acc[w][o] = 0.f;
  const int sliceWords = (u1 - u0) * kWordsPerUnit;
  if (sliceWords > W * THREADS) __trap();  // the Go side picks W >= the slice
  if (a.S <= 0 || u0 >= u1) return;
  const int nch = (u1 - u0) * (kWordsPerUnit / 4);
  const int g0 = F::kParams ? u0 * kUnit / kGroup : 0;
  const int np = F::kParams ? (u1 * kUnit - 1) / kGroup + 1 - g0 : 0;

  // Each owned word's param index within a row's slice (fixed per thread).
  int gi[W];
#pragma unroll
  for (int w = 0; w < W; w++) gi[w] = F::kParams ? (u0 * kUnit + (tid + w * THREADS) * kPer) / kGroup - g0 : 0;

  stage<E, THREADS, kSerialParamLoads>(a, t, u0, u1, smem, sel, [&](int rows, const uint4* sw, const float2* sf, const float* sx) {
    for (int r = 0; r < rows; r++) {
      const float xk = sx[r];
      const u32* roww = reinterpret_cast<const u32*>(sw + r * nch);
#pragma unroll
      for (int w = 0; w < W; w++) {
        const int j = tid + w * THREADS;
        if (j < sliceWords) {
          const u32 word = roww[j];
          float s = 0.f, z = 0.f;
          if (F::kParams) {
            const float2 sz = sf[r * np + gi[w]];
            s = sz.x;
            z = sz.y;
          }
#pragma unroll
          for (int o = 0; o < kPer; o++) acc[w][o] = __fadd_rn(acc[w][o], __fmul_rn(xk, value<E>(word, o, s, z)));
        }
      }
    }
  });
}

// shift returns the bit offset of output o (0..kPerWord−1, output order) in
// a packed residual word (value's layout).
template <int E>
__host__ __device__ constexpr int shift(int o) {
  return E == kFP16 ? o * 16 : E == kInt4 ? (o & 1) * 16 + (o >> 1) * 4 : (o & 1) * 16 + (o >> 1) * 8;
}

// value_at is value<E> with the output's bit offset sh, through the 2^23
// magic (the code as a float32 with no I2F) and one fma: s·q is exact in
// float32 (an fp16 scale has 11 significant bits, a code at most 8), so
// fma(s, q, z) has the bits of __fadd_rn(__fmul_rn(s, q), z).
template <int E>
__device__ __forceinline__ float value_at(u32 w, int sh, float s, float z) {
  if (E == kFP16) return h2f(u16(w >> sh));
  constexpr u32 kMask = E == kInt4 ? 0xfu : 0xffu;
  const float q = __fsub_rn(__uint_as_float(((w >> sh) & kMask) | 0x4b000000u), 8388608.f);  // exact
  return __fmaf_rn(s, q, z);
}

// kRowsInFlight is how many rows accumulate_out loads before their sums:
// eight where a thread owns at most two outputs (one word per row: the
// loop is the latency of a few shared loads and five dependent ops per
// row, and only two warps of a 64-output slice work; v6), four up to four
// words per row, fewer where they would take too many registers.
template <int KW, int P>
constexpr int kRowsInFlight = P <= 2 ? 8 : KW <= 4 ? 4 : KW <= 8 ? 2 : 1;

// accumulate_out sums token t's compensation of the outputs of units [u0,
// u1) into acc (v4, fused mode; docs/perf/dec.md): thread i owns the P
// consecutive outputs u0·kUnit + i·P + p (p < P; P a power of two <= 32, so
// they lie in one (scale, zero) group), part of one packed word when P <
// kPerWord (the word's threads read it as a broadcast), whole words
// otherwise. Rows are summed kRowsInFlight at a time, loaded before the
// arithmetic; every output still adds the rows in increasing selected
// order, so acc has accumulate's (and wq.Compensate's) bits. The arguments
// are stage's. Rejected (#v8-split, docs/perf/dec.md): at P = 1, the warps
// past the slice computing the products into shared memory while the
// slice's warps add them in order (rows 37 -> 21 cycles on q/o, but +0.7-1.5
// us of fixed cost, and CUDA 13's code for the P = 2 loop slower).
template <int E, int P, int THREADS>
__device__ __forceinline__ void accumulate_out(const Args& a, int t, int u0, int u1, unsigned char* smem, const int* sel,
                                               float (&acc)[P]) {
  using F = Fmt<E>;
  constexpr int kPer = F::kPerWord;
  constexpr int kWordsPerUnit = kUnit / kPer;
  constexpr int KW = P >= kPer ? P / kPer : 1;  // words per row and thread
  constexpr int RU = kRowsInFlight<KW, P>;
  static_assert(P >= 1 && P <= kUnit && (P & (P - 1)) == 0, "P is a power of two <= kUnit");
  const int tid = threadIdx.x;
#pragma unroll
  for (int p = 0; p < P; p++) acc[p] = 0.f;
  const int nOut = (u1 - u0) * kUnit;
  if (nOut > P * THREADS) __trap();  // the Go side picks P >= the slice / THREADS
  if (a.S <= 0 || u0 >= u1) return;
  const int nch = (u1 - u0) * (kWordsPerUnit / 4);
  const int g0 = F::kParams ? u0 * kUnit / kGroup : 0;
  const int np = F::kParams ? (u1 * kUnit - 1) / kGroup + 1 - g0 : 0;
  const int o0 = tid * P;  // the thread's first output in the slice
  const bool active = o0 < nOut;
  const int j0 = o0 / kPer;  // its first word in a row of the slice
  const int gi = F::kParams ? (u0 * kUnit + o0) / kGroup - g0 : 0;
  // Bit offsets of the thread's outputs within their word, when P < kPerWord
  // (the outputs o0 % kPer ... of word j0).
  int sh[P < kPer ? P : 1];
#pragma unroll
  for (int p = 0; p < (P < kPer ? P : 1); p++) sh[p] = shift<E>(o0 % kPer + p);

  stage<E, THREADS, param_loads(THREADS)>(a, t, u0, u1, smem, sel,
                                          [&](int rows, const uint4* sw, const float2* sf, const float* sx) {
    if (!active) return;
    // add sums row r's term into acc, given its words, (scale, zero) and x.
    auto add = [&](const u32 (&w)[KW], float2 sz, float xk) {
#pragma unroll
      for (int p = 0; p < P; p++) {
        float v;
        if constexpr (P < kPer) {
          v = value_at<E>(w[0], sh[p], sz.x, sz.y);
        } else {
          v = value_at<E>(w[p / kPer], shift<E>(p % kPer), sz.x, sz.y);
        }
        acc[p] = __fadd_rn(acc[p], __fmul_rn(xk, v));
      }
    };
    // load reads row r's words and (scale, zero).
    auto load = [&](int r, u32 (&w)[KW], float2& sz) {
      const u32* roww = reinterpret_cast<const u32*>(sw + r * nch) + j0;
      if constexpr (KW % 4 == 0) {
#pragma unroll
        for (int i = 0; i < KW; i += 4) {
          const uint4 v = *reinterpret_cast<const uint4*>(roww + i);
          w[i] = v.x, w[i + 1] = v.y, w[i + 2] = v.z, w[i + 3] = v.w;
        }
      } else if constexpr (KW == 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(roww);
        w[0] = v.x, w[1] = v.y;
      } else {
        w[0] = roww[0];
      }
      sz = F::kParams ? sf[r * np + gi] : make_float2(0.f, 0.f);
    };
    int r = 0;
    if constexpr (RU >= 4) {
      for (; r + RU <= rows; r += RU) {
        float xv[RU];
#pragma unroll
        for (int q = 0; q < RU; q += 4) {
          const float4 v = *reinterpret_cast<const float4*>(sx + r + q);  // r % 4 == 0: aligned
          xv[q] = v.x, xv[q + 1] = v.y, xv[q + 2] = v.z, xv[q + 3] = v.w;
        }
        u32 w[RU][KW];
        float2 sz[RU];
#pragma unroll
        for (int u = 0; u < RU; u++) load(r + u, w[u], sz[u]);
#pragma unroll
        for (int u = 0; u < RU; u++) add(w[u], sz[u], xv[u]);
      }
    } else if constexpr (RU == 2) {
      for (; r + 2 <= rows; r += 2) {
        const float2 xv = *reinterpret_cast<const float2*>(sx + r);
        u32 w[2][KW];
        float2 sz[2];
        load(r, w[0], sz[0]);
        load(r + 1, w[1], sz[1]);
        add(w[0], sz[0], xv.x);
        add(w[1], sz[1], xv.y);
      }
    }
    for (; r < rows; r++) {
      u32 w[KW];
      float2 sz;
      load(r, w, sz);
      add(w, sz, sx[r]);
    }
  });
}

// add_out adds acc (from accumulate) to y[t] once: y_n = y_n + dec_n.
template <int E, int W, int THREADS>
__device__ __forceinline__ void add_out(const Args& a, int t, int u0, int u1, const float (&acc)[W][Fmt<E>::kPerWord]) {
  constexpr int kPer = Fmt<E>::kPerWord;
  const int sliceWords = (u1 - u0) * (kUnit / kPer);
  float* y = a.y + size_t(t) * a.N + u0 * kUnit;
#pragma unroll
  for (int w = 0; w < W; w++) {
    const int j = threadIdx.x + w * THREADS;
    if (j < sliceWords) {
#pragma unroll
      for (int o = 0; o < kPer; o++) {
        float* p = y + j * kPer + o;
        *p = __fadd_rn(*p, acc[w][o]);
      }
    }
  }
}

// compensate adds token blockIdx.y's compensation to the outputs of DEC CTA
// blockIdx.x's slice (serial mode: y already holds the base output).
template <int E, int W>
__global__ void __launch_bounds__(kThreads) compensate(const Args a) {
  __shared__ __align__(16) unsigned char smem[smem_bytes(kThreads, kSerialParamLoads)];
  int u0, u1;
  slice(a.N, a.blocks, blockIdx.x, u0, u1);
  if (u0 >= u1) return;
  float acc[W][Fmt<E>::kPerWord];
  accumulate<E, W, kThreads>(a, blockIdx.y, u0, u1, smem, a.sel + size_t(blockIdx.y) * a.S, acc);
  add_out<E, W, kThreads>(a, blockIdx.y, u0, u1, acc);
}

// select_chunks writes token t's selection (wq.SelectApprox, the rule of
// select_topk, file comment 1.) to list[0 .. a.S): warp w takes chunks w,
// w + THREADS/32, ...; in a chunk, lane l owns channels c0 + 32j + l
// (j = 0..31), so "channel order" is (j, lane) order and every count of
// channels before this one is a running popc of ballots. hist holds
// THREADS/32 warp-private histograms of kBuckets ints. All THREADS threads
// call it; the caller synchronizes before reading list.
// Not inlined: fused_cta_any instantiates fused_cta once per (element
// type, W), and one copy of the selection per kernel is enough (it runs
// once per token).
template <int THREADS>
__device__ __noinline__ void select_chunks(const Args& a, int t, int* list, int* hist) {
  constexpr int kWarps = THREADS / 32;
  constexpr int kPerLane = kChunkChannels / 32;       // 32 channels per lane
  constexpr int kBucketsPerLane = kBuckets / 32;      // 8 buckets per lane
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const u32 below = (1u << lane) - 1u;
  int* h = hist + warp * kBuckets;
  const float* x = a.x + size_t(t) * a.K;
  const int chunks = (a.K + kChunkChannels - 1) / kChunkChannels;
  const int kcFull = chunk_select(a.kChunk, kChunkChannels);
  for (int chunk = warp; chunk < chunks; chunk += kWarps) {
    const int c0 = chunk * kChunkChannels;
    const int c = min(kChunkChannels, a.K - c0);
    const int kc = chunk_select(a.kChunk, c);  // warp-uniform, > 0 when S > 0
#pragma unroll
    for (int i = 0; i < kBucketsPerLane; i++) h[lane * kBucketsPerLane + i] = 0;
    int key[kPerLane];
    int m = -1;
#pragma unroll
    for (int j = 0; j < kPerLane; j++) {
      const int ch = 32 * j + lane;
      key[j] = ch < c ? int((__float_as_uint(__ldg(x + c0 + ch)) & 0x7fffffffu) >> kBucketShift) : -1;
      m = max(m, key[j]);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    __syncwarp();  // the zeros before the adds
    // key becomes the bucket (kBuckets for channels past c).
#pragma unroll
    for (int j = 0; j < kPerLane; j++) {
      key[j] = key[j] < 0 ? kBuckets : min(m - key[j], kBuckets - 1);
      if (key[j] < kBuckets) atomicAdd(&h[key[j]], 1);
    }
    __syncwarp();
    // B: the bucket where the running count first reaches kc. Lane l sums
    // buckets 8l..8l+7; the lane whose range crosses kc finds B in it.
    int cnt[kBucketsPerLane], sum = 0;
#pragma unroll
    for (int i = 0; i < kBucketsPerLane; i++) cnt[i] = h[lane * kBucketsPerLane + i], sum += cnt[i];
    const int incl = warpInclusiveSum(sum, lane);
    const int excl = incl - sum;
    const u32 hit = __ballot_sync(0xffffffffu, excl < kc && incl >= kc);  // exactly one lane
    int B = 0, fill = 0;
    if (excl < kc && incl >= kc) {
      int run = excl;
#pragma unroll
      for (int i = 0; i < kBucketsPerLane; i++) {
        if (run < kc && run + cnt[i] >= kc) B = lane * kBucketsPerLane + i, fill = kc - run;  // once: run only grows
        run += cnt[i];
      }
    }
    const int src = __ffs(hit) - 1;
    B = __shfl_sync(0xffffffffu, B, src);
    fill = __shfl_sync(0xffffffffu, fill, src);
    // Take b < B, and the first `fill` channels of bucket B in channel
    // order; positions in channel order.
    int* out = list + chunk * kcFull;
    int inB = 0, pos = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; j++) {
      const bool isB = key[j] == B;
      const u32 mB = __ballot_sync(0xffffffffu, isB);
      const bool take = key[j] < B || (isB && inB + __popc(mB & below) < fill);
      const u32 mT = __ballot_sync(0xffffffffu, take);
      if (take) out[pos + __popc(mT & below)] = c0 + 32 * j + lane;
      inB += __popc(mB);
      pos += __popc(mT);
    }
  }
}

// kPartEmpty is the bit pattern of an empty part word (fused mode): a NaN
// no float32 arithmetic produces (the GPU's NaN results are 0x7fffffff), so
// a value the DEC CTA stores is never taken for it (part_store turns that
// exact pattern into 0x7fffffff, the same NaN for every add). part holds it
// before every launch; whoever consumes a word resets it.
constexpr u32 kPartEmpty = 0xffffffffu;

// part_store stores a compensation value to part (fused mode).
__device__ __forceinline__ void part_store(float* p, float v) {
  st_gpu(p, __float_as_uint(v) == kPartEmpty ? __uint_as_float(0x7fffffffu) : v);
}

// part_clear resets a consumed part word to empty, for the next launch.
__device__ __forceinline__ void part_clear(float* p) { st_gpu(p, __uint_as_float(kPartEmpty)); }

// part_load is a base CTA's first step in fused mode (v6, the one-trip
// protocol; every thread with an element of the tile calls it, before the
// CTA's reduction, so the load's latency overlaps it): element p of part,
// through L2.
__device__ __forceinline__ float part_load(const Args& a, size_t p) { return ld_gpu(a.part + p); }

// part_peek is part_load for a load issued inside a GEMV's hot loop
// (gemvq3.cu's base CTAs, at the start of their last step): the same
// strong load, without the compiler memory clobber, so it does not pin the
// loop's own loads and stores around it. Its value is read only after the
// CTA's barriers; a word it finds empty is loaded again (part_load).
__device__ __forceinline__ float part_peek(const Args& a, size_t p) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(a.part + p));
  return v;
}

// part_ready reports whether a part_load value is the DEC CTA's (not
// empty). A base CTA writes tile_value with present = every element of its
// tile ready (__syncthreads_and): then the DEC CTA has claimed the tile
// (flag 1, its CAS comes before its stores of the last token's part) and
// will not touch it again.
__device__ __forceinline__ bool part_ready(float v) { return __float_as_uint(v) != kPartEmpty; }

// tile_value is what a base CTA writes to y: its base value, plus the
// compensation when the whole tile was present: the same single float32
// add as serial mode.
__device__ __forceinline__ float tile_value(bool present, float part, float base) {
  return present ? __fadd_rn(base, part) : base;
}

// add_part adds part into y for every token of one tile, through L2,
// waiting for each word the DEC CTA has yet to store (it claimed the tile
// and is resident: its stores come without waiting on anybody), and resets
// part to empty.
template <int TILE = kTile>
__device__ __forceinline__ void add_part(const Args& a, int tile, int i0, int step) {
  for (int i = i0; i < a.T * TILE; i += step) {
    const size_t p = size_t(i / TILE) * a.N + tile * TILE + i % TILE;
    float v = ld_gpu(a.part + p);
    while (!part_ready(v)) v = ld_gpu(a.part + p);
    st_gpu(a.y + p, __fadd_rn(ld_gpu(a.y + p), v));
    part_clear(a.part + p);
  }
}

// tile_close is a base CTA's last step in fused mode, after its stores to y
// for the tile (every thread calls it; present as for tile_value; scratch
// is one u32 of shared memory). Present: the compensation is in y; reset
// the tile's part words and its flag (the DEC CTA set it to 1 before those
// stores and is done with the tile), with no fence. Else: make the stores
// visible, atomicCAS(flag, 0 -> 2); if that finds 1 (the DEC CTA claimed
// the tile meanwhile) add part into y as it arrives (add_part), reset the
// flag; if it succeeds, the DEC CTA adds its sums into y when it comes.
// TILE is the tile's outputs (kTile: gemvq.cu's base CTAs; gemvq3.cu's own
// 16/S rows).
template <int TILE = kTile>
__device__ __forceinline__ void tile_close(const Args& a, int tile, bool present, u32* scratch) {
  if (present) {  // the same for the whole CTA
    for (int i = threadIdx.x; i < a.T * TILE; i += blockDim.x) part_clear(a.part + size_t(i / TILE) * a.N + tile * TILE + i % TILE);
    if (threadIdx.x == 0) a.flags[tile] = 0;
    return;
  }
  __threadfence();  // each thread's stores to y
  __syncthreads();
  if (threadIdx.x == 0) *scratch = atomicCAS(a.flags + tile, 0u, 2u);
  __syncthreads();
  if (*scratch == 1) {
    add_part<TILE>(a, tile, threadIdx.x, blockDim.x);
    if (threadIdx.x == 0) a.flags[tile] = 0;
  }
}

// fused_cta is the DEC CTAs' side of fused mode (file comment, 3.; v6's
// one-trip protocol): DEC CTA b (0 <= b < a.blocks, the grid's lowest
// blockIdx values) selects (if a.sel is null) and sums (accumulate_out, P
// outputs per thread) its slice's compensation token by token, storing
// every token's but the last to a.part. With the last token's sums in
// registers it claims each tile of the slice, CAS(flag, 0 -> 1) with
// acquire (cas_acquire), a thread per tile: claimed tiles get the last token's sums in part (the
// base CTA, reading part, adds them, or waits for them if its own CAS found
// the claim); tiles whose base CTA wrote y first (the CAS finds 2) get
// every token's sums added into y here (the last from registers), their
// part words reset and their flag reset. No fence on the claimed path.
// THREADS must be the kernel's blockDim.x; P must cover the slice (dec.go's
// decOutputs). lateNs (fused_selftest's late mode; 0 in the real kernels):
// the CTA waits that many nanoseconds between its claims and its stores, so
// base CTAs find their tiles claimed with the words still missing. TILE is
// the outputs of a tile (one base CTA's, one flag): kTile for gemvq.cu's
// base CTAs, 4-16 for gemvq3.cu's (a divisor of kUnit).
template <int E, int P, int THREADS, int TILE = kTile>
__device__ __forceinline__ void fused_cta(const Args& a, int b, unsigned char* smem, unsigned lateNs = 0) {
  static_assert(kUnit % TILE == 0, "a slice is whole tiles");
  int u0, u1;
  slice(a.N, a.blocks, b, u0, u1);
  if (u0 >= u1) return;
  int* list = reinterpret_cast<int*>(smem + smem_bytes(THREADS, param_loads(THREADS)));
  const int nOut = (u1 - u0) * kUnit;
  const int o0 = threadIdx.x * P;  // the thread's first output in the slice
  constexpr int kTilesPerUnit = kUnit / TILE;
  const int tiles = (u1 - u0) * kTilesPerUnit;  // <= 32·THREADS/TILE ints (P <= 32), inside stage's code buffer
  u32* flags = a.flags + u0 * kTilesPerUnit;
  // second[i]: tile i's base CTA wrote y first, so this CTA adds into it
  // (shared memory aliasing stage's code buffer, once the sums are done).
  int* second = reinterpret_cast<int*>(smem);
  const size_t s0 = size_t(u0) * kUnit;  // the slice's first output
  for (int t = 0; t < a.T; t++) {
    const int* sel = list;
    if (a.sel != nullptr) {
      sel = a.sel + size_t(t) * a.S;
    } else {
      __syncthreads();  // the previous token's sums are done with smem
      select_chunks<THREADS>(a, t, list, reinterpret_cast<int*>(smem));
      __syncthreads();
      if (a.selOut != nullptr && b == 0) {
        // Keep the list for later launches over the same x (plain stores:
        // they read it after this launch ends; nobody waits for them here).
        int* out = a.selOut + size_t(t) * a.S;
        for (int i = threadIdx.x; i < a.S; i += THREADS) out[i] = list[i];
      }
    }
    float acc[P];
    accumulate_out<E, P, THREADS>(a, t, u0, u1, smem, sel, acc);
    if (t + 1 < a.T) {
      // Not the last token: to part now (the base CTA reads a tile as
      // present only once the last token's words are there too).
      if (o0 < nOut) {  // then all P outputs are in the slice (nOut is a multiple of kUnit >= P)
#pragma unroll
        for (int p = 0; p < P; p++) part_store(a.part + size_t(t) * a.N + s0 + o0 + p, acc[p]);
      }
      continue;
    }
    // The last token: claim the tiles, then store or add.
    __syncthreads();  // the sums are done with smem
    bool any = false;
    for (int i = threadIdx.x; i < tiles; i += THREADS) {
      const bool s2 = cas_acquire(flags + i, 0u, 1u) == 2u;  // acquire: the base CTA's y
      second[i] = s2;
      any |= s2;
    }
    any = __syncthreads_or(any);  // orders each claim's acquire before every thread's reads of y
    if (lateNs != 0) {
      const unsigned long long t0 = globaltimer();
      while (globaltimer() - t0 < lateNs) __nanosleep(1000);
    }
    if (o0 < nOut) {
#pragma unroll
      for (int p = 0; p < P; p++) {
        const size_t o = s0 + o0 + p;
        if (second[(o0 + p) / TILE]) {
          for (int tt = 0; tt < t; tt++) {  // earlier tokens: from part, which this thread stored
            const size_t q = size_t(tt) * a.N + o;
            st_gpu(a.y + q, __fadd_rn(ld_gpu(a.y + q), ld_gpu(a.part + q)));
            part_clear(a.part + q);
          }
          const size_t q = size_t(t) * a.N + o;
          st_gpu(a.y + q, __fadd_rn(ld_gpu(a.y + q), acc[p]));  // serial mode's add
        } else {
          part_store(a.part + size_t(t) * a.N + o, acc[p]);
        }
      }
    }
    if (any) {
      for (int i = threadIdx.x; i < tiles; i += THREADS)
        if (second[i]) flags[i] = 0;  // the base CTA's CAS was its last touch
    }
  }
}

// fused_cta_any is fused_cta with the element type and P (outputs per
// thread) taken from a.elem and a.wpt at run time (kernels.DECFusedArgs
// fills them for THREADS), so a base kernel needs no template parameter for
// them. Only P <= PMAX and int4 residuals, plus int8 and fp16 ones with
// ALL, are instantiated: the kernel's registers are those of its largest
// path, and its compile time grows with each.
template <int THREADS, int PMAX, bool ALL, int TILE = kTile>
__device__ __forceinline__ void fused_cta_any(const Args& a, int b, unsigned char* smem, unsigned lateNs = 0) {
#define DEC_FUSED_CASE(E, P)                                                    \
  case (E) * 64 + (P):                                                          \
    if constexpr ((P) <= PMAX && ((E) == kInt4 || ALL)) {                       \
      fused_cta<E, ((P) <= PMAX ? (P) : 1), THREADS, TILE>(a, b, smem, lateNs); \
      return;                                                                   \
    }                                                                           \
    break;
#define DEC_FUSED_CASES(E) \
  DEC_FUSED_CASE(E, 1) DEC_FUSED_CASE(E, 2) DEC_FUSED_CASE(E, 4) DEC_FUSED_CASE(E, 8) DEC_FUSED_CASE(E, 16) DEC_FUSED_CASE(E, 32)
  switch (a.elem * 64 + a.wpt) {
    DEC_FUSED_CASES(kInt4)
    DEC_FUSED_CASES(kInt8)
    DEC_FUSED_CASES(kFP16)
  }
#undef DEC_FUSED_CASES
#undef DEC_FUSED_CASE
  __trap();  // a launch the Go side would not build
}

// fused_selftest is a fused grid whose base CTAs (blockIdx.x >= a.blocks,
// one tile each) copy ybase into y instead of computing a GEMV: the
// protocol of fused mode with a known base, for tests; its DEC CTAs go
// through fused_cta_any. lateNs > 0 (the late mode) forces the path where
// the base CTA finds its tile claimed but the words missing: the DEC CTAs
// wait lateNs nanoseconds between their claims and their stores, and each
// base CTA waits for its tile's claim (at most kLateWaitNs) before it
// reads part, so it writes the base, finds the claim with its CAS and must
// wait in add_part for the words.
// DEC_NO_SELFTEST (an NVRTC -D option: every program but
// kernels.LoadDECSelfTest's, none of which launches it) leaves the
// self-test out (it is the largest kernel here, ~1 MB of SASS: ~20 s of
// NVRTC 12.5 on one core, against ~1.4 s for the rest of dec.cu).
#ifndef DEC_NO_SELFTEST
constexpr unsigned long long kLateWaitNs = 100000000ull;  // 0.1 s: past it the base CTA goes on (the protocol's CAS path), never hangs
__global__ void __launch_bounds__(kThreads) fused_selftest(const Args a, const float* __restrict__ ybase, unsigned lateNs) {
  __shared__ __align__(16) unsigned char smem[fused_smem_bytes(kThreads)];
  __shared__ u32 scratch;
  if (int(blockIdx.x) < a.blocks) {
    fused_cta_any<kThreads, kUnit, true>(a, blockIdx.x, smem, lateNs);
    return;
  }
  const int tile = int(blockIdx.x) - a.blocks;
  if (lateNs != 0) {
    if (threadIdx.x == 0) {
      const unsigned long long t0 = globaltimer();
      while (ld_gpu(a.flags + tile) == 0 && globaltimer() - t0 < kLateWaitNs) __nanosleep(100);
    }
    __syncthreads();
  }
  // The tile's T·kTile elements, a thread each.
  if (a.T * kTile > kThreads) __trap();  // T <= 16; the Go side allows 8
  const int i = threadIdx.x;
  const bool mine = i < a.T * kTile;
  const size_t p = size_t(i / kTile) * a.N + tile * kTile + i % kTile;
  const float pv = mine ? part_load(a, p) : 0.f;
  const bool present = __syncthreads_and(!mine || part_ready(pv));
  if (mine) st_gpu(a.y + p, tile_value(present, pv, ybase[p]));
  tile_close(a, tile, present, &scratch);
}
#endif

}  // namespace dec

// planes.cu: split-KV decode attention over the bit-plane KV format ("bw",
// read-time precision tiers; docs/bitweaver.md, kv/planes.go).
//
//   out[b,i,hq,:] = softmax_t(scale · q[b,i,hq,:]·K[b,t,h,:]) · V[b,t,h,:]
//
// over the tokens t <= L_b - Tq + i that the tier-sorted index lists for KV
// head h = hq / (Hq/Hkv), each read at its tier: HIGH (16 bits: planes 0, 1
// and 2), MEDIUM (8 bits: planes 0 and 1, low byte filled with adj8), LOW (4
// bits: plane 0, low 12 bits filled with adj4); MEDIUM and LOW reads go
// through the subnormal filter and the saturation of kv.Recon.Read. EVICTED
// tokens are not in the index and are never read.
//
// Data (all device memory):
//   pool       plane blocks, [nBlocks][Hkv][blockBytes], blockBytes = 4·Nr·D;
//              one KV head's block is kv.PlaneLayout (the one definition):
//                K half at 0, V half at 2·Nr·D, each:
//                  plane 0 (bits 15..12) [Nr][D/2] at 0
//                  plane 1 (bits 11..8)  [Nr][D/2] at Nr·D/2
//                  plane 2 (bits 7..0)   [Nr][D]   at Nr·D
//                nibble of channel c in byte c/2 of the token's slice, even c
//                in the low nibble; plane-2 byte c is channel c.
//   blockTable [B][maxBlocks] int32: token t of sequence b lives in pool block
//              blockTable[b*maxBlocks + t/Nr], slot t%Nr
//   lens       [B] int32: L_b, cached tokens including the Tq query tokens
//   index      [B][Hkv][idxStride] int32: the tier-sorted index (TierIndex in
//              planes.go, attn.TierIndex): the positions of the HIGH tokens
//              ascending, then the MEDIUM ones, then the LOW ones
//   counts     [B][Hkv][4] int32: tokens per tier (HIGH, MEDIUM, LOW, EVICTED)
//   q          [B][Tq][Hq][D] fp16;  out [B][Tq][Hq][D] fp16
//   partO      [B][Hkv*rowChunks][maxSplits][RMAX][D] float32, unnormalized
//   partML     [B][Hkv*rowChunks][maxSplits][RMAX][2] float32: running max
//              (log2 domain) and denominator of each split
//   scores     [B][Hkv][R][idxStride] float32 (R = Hq/Hkv·Tq; only when the
//              attention mass is asked for): the log2-domain score of every
//              (query row, index entry)
//   finalML    [B][Hkv][R][2] float32: each row's final max and denominator
//   mass       [B][Hkv][massStride] float32: H2O attention mass, accumulated
//
// Position space. Each tier run of a (sequence, KV head) is cut into groups
// of kGroup = 16 index entries (the last group of a run may be partial), and
// the groups are laid end to end: HIGH groups, MEDIUM groups, LOW groups. A
// group is homogeneous (one tier: one set of planes for the whole warp). A
// (sequence, KV head) spans padLen = 16·(⌈nH/16⌉ + ⌈nM/16⌉ + ⌈nL/16⌉)
// positions; splits cover splitLen positions each (a multiple of kTile = 64),
// so both kernels and the combine agree on which split holds which entries.
//
// Kernels:
//   split_mma  (v2.2, tensor cores) one CTA of 4 warps per (split, KV head x row
//              chunk of 8 query rows, sequence). Each warp takes a contiguous
//              run of groups and walks it in tiles of MT groups of one tier
//              (MTH, MTM, MTL per tier). Operand roles as decode_mma.cu:
//                scores  S^T[16 tokens x 8 rows] += K[16 tok x 16 ch]·Q^T[16 ch x 8 rows]
//                output  O^T[16 ch x 8 rows]     += V^T[16 ch x 16 tok]·P^T[16 tok x 8 rows]
//              The A fragments are rebuilt in registers from the plane bytes
//              (byte permutes, no tables). Because a dot product does not care
//              in which order its channels come, the K operand's channel order
//              is chosen so that lane (g, q) rebuilds channels [q·D/4, (q+1)·D/4)
//              of tokens g and g+8 from contiguous bytes (16-byte loads at
//              D = 128 for planes 0/1, 2 x 16 for plane 2), and the query's B
//              fragment is permuted to match (kChanK). V^T pairs two tokens in
//              each half2 (the mma's K extent is tokens), so lane (g, q) rebuilds
//              channels [g·D/8, (g+1)·D/8) of tokens 2q, 2q+1, 2q+8, 2q+9 (8-byte
//              loads of planes 0/1 at D = 128) and its output channels are
//              permuted back when the warps are merged (kChanV).
//              Latency (v2.1): a software pipeline in registers (Pipe): a
//              tile's index entries are fetched two tiles ahead and its
//              block-table entries one tile ahead, so a tile waits only for
//              its planes; with PF (bit 0 HIGH, opt-in; bit 1 MEDIUM, v2.5),
//              runs of tiles of that tier are double-buffered in registers
//              (the next tile's planes load while the current one computes),
//              as decode_mma.cu does for fp16. A warp's groups are
//              a HIGH, a MEDIUM and a LOW run in that order, walked by one
//              loop per tier: with one loop dispatching on the tier, ptxas
//              allocated the union of the three paths (CUDA 13, sm_90, D =
//              128, MT 1/2/4: 255 registers and 440 B of spills; one loop per
//              tier: 236, no spills; two CTAs per SM either way).
//              Tiles are MTH/MTM/MTL groups by tier (planes.go: a 256-byte
//              lane budget, at D = 128 HIGH 1, MEDIUM 2, LOW 4; LOW 2 for
//              formats that read MEDIUM tokens). The warps share a CTA's
//              groups by tier cost (warpBound, v2.2).
//              Versions (H100, Hq 32, Hkv 8, D 128, 128 x 8K tokens, all-HIGH /
//              all-MEDIUM / h20:m40:l40, us, against fp16 1398 us):
//                v2   index a tile ahead, one dispatch loop (CUDA 13 ptxas: 255
//                     registers, 440 B spilled): 2328 / 1402 / 2089 (2026-11-25);
//                v2.1 the pipeline and the per-tier loops (236 registers, no
//                     spills): 1456 / 876 / 1534, 1.31-1.70x v2 over the grid
//                     (bench/results/2026-11-25-h100-bw-4);
//                v2.2 warps balanced by tier cost (4/2/1), one lop3 per top-byte
//                     merge (232 registers at MT 1/2/4, 203 at 1/2/2): 1452 / 828
//                     / 1446 at MT 1/2/4, 807 (m100) and 1329 (h20:m40:l40) at
//                     MT 1/2/2, the planner's rule for formats that read MEDIUM
//                     (fp16 1424 us in that run; bench/results/2026-11-25-h100-bw-5);
//                v2.3 LOW rebuilt as sign and exponent (no HMUL2), one division
//                     by Nr per entry, MEDIUM/LOW token addresses computed once
//                     by the lane holding the entry (loadTopGroup): static SASS
//                     of the LOW loop at MT 4 2364 -> 1827 instructions, MEDIUM
//                     at MT 2 1746 -> 1638 (NVRTC 11.8); and warp weights 5/3/2
//                     (the groups' measured times): 1441 / 783 / 1020 (all-LOW
//                     580; fp16 1398 us in that run;
//                     bench/results/2026-11-25-h100-bw-6);
//                v2.4 splits: the wave rule (planes.go planesSplitLen: one full
//                     wave of CTAs at few (sequence, KV head) pairs, about four
//                     waves at many), cut at equal costs by the tier weights
//                     (splitBound) rather than equal positions, and merged by
//                     the last split CTA (finishSplits) instead of a combine
//                     launch when there are at most kFuseMaxSplits (239
//                     registers at MT 1/2/4, 209 at 1/2/2): 1.06-1.13x v2.3 at
//                     1 x 128K and 16 x 32K, 1.05-1.18x at 1 x 8K, the same at
//                     128 x 8K (all-16-bit 195.8 us at 1 x 128K against fp16's
//                     186.5; bench/results/2026-11-25-h100-bw-7);
//                v2.5: runs of MEDIUM and LOW tiles double-buffered (PF bits
//                     1, 2; opt-in: all-8-bit within 1.5%, mixes 4-16%
//                     slower); v2.6 splits: one wave at many pairs too (16 x
//                     32K: 2 splits instead of 8, all-8-bit 1.07x, 1.847x
//                     fp16; bench/results/2026-11-25-h100-bw-9);
//                v2.7 the tile loop's bookkeeping: the block of an index
//                     entry by a multiply and a shift (divNr) instead of a
//                     division by the run-time Nr, a tile's run bounds looked
//                     up once (fetchAhead), padding K rows (and LOW V tokens)
//                     read the group's first token instead of being tested
//                     and zeroed (padAddress): static SASS of the LOW loop at
//                     MT 4 1733 -> 1480 instructions, at MT 2 945 -> 814
//                     (NVRTC 11.8; bench/results/2026-11-25-h100-bw-10);
//                v2.8 the online softmax's exp2 by the SFU alone (ex2,
//                     foldTile<true>: 18 calls per tile, 3 instructions each
//                     fewer), the index and block-table loads of the
//                     pipeline predicated instead of branched around
//                     (fetchAhead, resolveTable): LOW loop at MT 4 1480 ->
//                     1357, at MT 2 814 -> 755, MEDIUM at MT 2 1168 (v2.6)
//                     -> 1010, HIGH 706 -> 649.
//                v2.10 the prologue's and epilogue's dependent trips (session
//                     12): counts, offsets, length and query loaded together
//                     at entry, the query converted in the shadow of the
//                     first index loads (startPipe's meanwhile), the
//                     sequence's block-table row prefetched into L2
//                     (prefetchTable), the partials of the real rows only,
//                     and the last CTA's merge with its loads ahead
//                     (finishSplits): the same bits
//                     (docs/bitweaver.md, session 12).
//                v2.12 a mixed (sequence, KV head)'s tiles dealt in equal
//                     shares of every tier: to the warps of a CTA of more
//                     than one tier in turn (Walk), and with few splits
//                     (planes.go planesDeal) to the splits too (dealPart),
//                     instead of contiguous shares by the tier weights:
//                     h20:m40:l40 at 128 x 8K 876.8 -> 838.8 us, 16 x 32K
//                     432.2 -> 421.4 (85.7%, 85.2% of the ceiling); uniform
//                     reads unchanged, bit for bit (docs/bitweaver.md,
//                     session 13; bench/results/2026-11-26-h100-bw-13).
//                v2.13 the split's end (session 14, measured by the launch
//                     timeline, BD_TIMELINE): the warp merge by (row, 4
//                     channels) pieces (mergeWarpRow4, one per thread at 4
//                     rows) and the merge's count with one thread's
//                     acq_rel fences (lastArrivalRel): the same bits;
//                     against the timeline alone, both instrumented, 1 x
//                     8K 0.5-0.8 us and 1 x 128K 0.5-1.3 us faster (all-8-bit
//                     110.5 -> 109.2 us), one run each
//                     (docs/bitweaver.md, session 14;
//                     bench/results/2026-11-26-h100-bw-14).
//   split_v1   (v1, CUDA cores) decode.cu's v1 over the same positions: 8
//              channels per thread, scalar reconstruction (the kv.Recon.Read
//              rule, element by element), shuffle reductions. The simple
//              baseline the tensor-core kernel is checked against.
//   combine    merges the splits of each query row in split order (log-sum-exp,
//              decode_combine's merge plus the padLen split count) and
//              writes the final max and denominator for the mass pass:
//              split_v1's always, split_mma's past kFuseMaxSplits splits
//              (below that its last split CTA merges: bitdecode.cuh's finishSplits with EMPTY;
//              since v2.10 with its loads ahead, the same arithmetic).
//   mass       one thread per index entry (a grid-stride loop, the CTAs capped):
//              mass[t] += Σ_rows exp2(s - M)/L over the group's query rows in
//              row order (with every > 1, the rows of the sampled query tokens
//              only: kv.MassSampled).
// Every result is bitwise deterministic: the one atomic (lastArrival's count
// of a row chunk's finished splits) picks which CTA merges, not the order. The online
// softmax (both kernels), the merge of a CTA's warps and the merge of the
// splits are the decode family's (bitdecode.cuh), as are the fragment-layout
// helpers and the PTX wrappers; this file keeps what is its own: the tier
// runs, the plane loads and the reconstruction.
//
// Reconstruction (kv.Recon.Read; fp16, filter on, fill adj4 with bits 11..10
// not both set: the FAST path; everything else takes the exact integer path):
//   MEDIUM: top byte | adj8, then mul.ftz.f16x2 by 1.0: the exponent is fully
//           read, so "exponent bits read all zero" is "subnormal or zero", which
//           ftz flushes (to ±0: equal to the +0 of Read in every sum).
//   LOW:    nibble<<12 alone (v2.3: sign and exponent, no fill, no ftz) is
//           Read's value divided by 2^a2·(1 + m/1024) (a2 = adj4 bits 11..10:
//           the two exponent bits the read misses; m = adj4 & 0x3FF: the
//           mantissa, the same for every LOW element), with the exponent
//           4·nibble[14..12]; a nibble with those bits zero rebuilds as ±0,
//           which is the filter. The constant goes on the fp32 score and on
//           the probability of the value mma (Recon.lowScale; v2.2 kept the
//           mantissa in the half and filtered with mul.ftz, 64 HMUL2 per
//           group more).
//   generic: top byte/nibble and fill exactly as Read, then the filter and the
//           saturation on both halves of a word at once (fixPair).
//
// Go wrapper and tests: planes.go, planes_test.go (against attn.ReferencePlanes).

#include "bitdecode.cuh"

namespace planes {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kGroup = kFragTokens;  // index entries per group: the mma M (K) / K (V) extent
constexpr int kTile = 64;      // positions per tile of split_v1; splitLen is a multiple
constexpr int kChunk = 8;      // channels per thread in split_v1
constexpr int kHigh = 0, kMedium = 1, kLow = 2;  // kv.High, kv.Medium, kv.Low

// ftz1 multiplies both fp16 halves by 1.0 with subnormals flushed to zero
// (with prefetchTable's prefetch, the only inline PTX of this file; the
// rest is bitdecode.cuh's).
BD_DEVICE u32 ftz1(u32 x) {
  u32 r;
  asm("mul.ftz.f16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(0x3C003C00u));
  return r;
}

// selHi is (a & 0xF0F0F0F0) | (b & 0x0F0F0F0F) in one instruction (lop3,
// truth table 0xe4 with the mask as c): written out, the compiler gave an
// and, then an and-or (v2.2).
BD_DEVICE u32 selHi(u32 a, u32 b) {
  u32 r;
  asm("lop3.b32 %0, %1, %2, 0xF0F0F0F0, 0xe4;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// ldWords loads N bytes (4, 8 or a multiple of 16; aligned to min(N, 16))
// into N/4 words.
template <int N>
BD_DEVICE void ldWords(const u8* p, u32* w) {
  static_assert(N == 4 || N == 8 || N % 16 == 0, "load size");
  if (N % 16 == 0) {
#pragma unroll
    for (int i = 0; i < N / 16; i++) ldg128(p + 16 * i, w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  } else if (N == 8) {
    ldg64(p, w[0], w[1]);
  } else {
    w[0] = ldg32(p);
  }
}

// kLineBytes is the L2 line prefetchTable asks for.
constexpr int kLineBytes = 128;

// prefetchTable asks L2 for the lines of a sequence's block-table row
// (maxBlocks int32 entries at row) that fall to CTA cta of the ctas that
// read it: line i goes to CTA i % ctas, one line per thread and pass
// (v2.10). The split CTAs' first table loads wait on their index entries
// (DRAM); with the row in L2 by then, they take an L2 trip instead of a
// DRAM one. Addresses stay inside the row; a prefetch is a hint (no
// result, no fault on a valid address).
BD_DEVICE void prefetchTable(const int* row, int maxBlocks, int cta, int ctas) {
  const int rowBytes = maxBlocks * 4, lines = (rowBytes + kLineBytes - 1) / kLineBytes;
  for (int i = cta + int(threadIdx.x) * ctas; i < lines; i += ctas * int(blockDim.x)) {
    const char* p = reinterpret_cast<const char*>(row) + min(i * kLineBytes, rowBytes - 4);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
  }
}

// Bit fields of the element types (kv/planes.go).
template <bool BF>
struct Elem {
  static constexpr u32 kExp = BF ? 0x7F80u : 0x7C00u;        // exponent field
  static constexpr u32 kMaxFinite = BF ? 0x7F7Fu : 0x7BFFu;  // largest finite value
};

// BD_DEVICE toFloat converts a 16-bit element to float.
template <bool BF>
BD_DEVICE float toFloat(u32 h) {
  return BF ? __int_as_float(int(h << 16)) : h2f(u16(h));
}

// readElem is kv.Recon.Read for the bits h a read at tier fetched (the
// other bits of h are zero): the scalar rule split_v1 applies per element.
template <bool BF>
BD_DEVICE u32 readElem(u32 h, int tier, u32 adj8, u32 adj4, bool filter) {
  if (tier == kHigh) return h;
  const u32 R = tier == kMedium ? 0xFF00u : 0xF000u;
  const u32 x = (h & R) | (tier == kMedium ? adj8 : adj4);
  const u32 E = Elem<BF>::kExp;
  const u32 got = h & E & R;
  if (filter && got == 0) return 0;
  if ((E & ~R) != 0 && got == (E & R) && (x & E) == E) return (h & 0x8000u) | Elem<BF>::kMaxFinite;
  return x;
}

// Fix holds what the generic path needs to apply the filter and the
// saturation of one tier to words of two elements.
struct Fix {
  u32 er2;     // (exponent & read mask) in both halves
  u32 mf2;     // max finite in both halves
  bool filter, sat;
};

// makeFix returns the Fix of a partial tier (kMedium or kLow) with fill f.
template <bool BF>
BD_DEVICE Fix makeFix(int tier, u32 f, bool filter) {
  const u32 R = tier == kMedium ? 0xFF00u : 0xF000u, E = Elem<BF>::kExp;
  Fix x;
  x.er2 = (E & R) * 0x10001u;
  x.mf2 = Elem<BF>::kMaxFinite * 0x10001u;
  x.filter = filter;
  const u32 unread = E & ~R & 0xFFFFu;
  x.sat = unread != 0 && (f & unread) == unread;
  return x;
}

// fixPair applies kv.Recon's filter and saturation to both halves of w, a
// filled partial read: a half whose read exponent bits are all zero becomes
// 0; one whose read exponent bits are all ones, when the fill sets the
// unread ones, becomes ±max finite. Per 16-bit half, (v + 0x7FFF) has bit 15
// set iff v != 0 (v < 0x8000: no carry out), and prmt's sign mode (selector
// 0xBB99) spreads bits 15 and 31 over their halves.
BD_DEVICE u32 fixPair(u32 w, const Fix& f) {
  const u32 got = w & f.er2;
  if (f.filter) w &= prmt(got + 0x7FFF7FFFu, 0, 0xBB99);
  if (f.sat) {
    const u32 notSat = prmt((got ^ f.er2) + 0x7FFF7FFFu, 0, 0xBB99);
    w = (w & notSat) | (~notSat & ((w & 0x80008000u) | f.mf2));
  }
  return w;
}

// padGroups returns the groups of a (sequence, KV head) with counts c.
BD_DEVICE int padGroups(const int* c) {
  return (c[0] + kGroup - 1) / kGroup + (c[1] + kGroup - 1) / kGroup + (c[2] + kGroup - 1) / kGroup;
}

// Runs locates a (sequence, KV head)'s tier runs in group and entry space.
// Index storage. Entry e (HIGH run, then MEDIUM, then LOW) is stored at
// slot(e): each run is contiguous and ascending in the index, starting at
// the run's offset (offsets [B][Hkv][4] int32: HIGH, MEDIUM, LOW, unused).
// Without an offsets array the runs lie end to end in entry order (offsets
// 0, nH, nH+nM: TierIndex in planes.go). The engine keeps a persistent index
// whose last stored run is the tier new tokens get, so appending a token
// writes one entry and moves none (append, retier below).
struct Runs {
  int g1, g2, g3;  // group ends of the HIGH, MEDIUM and LOW runs
  int e1, e2, e3;  // entry ends (nH, nH+nM, nH+nM+nL)
  int oH, oM, oL;  // storage offsets of the HIGH, MEDIUM and LOW runs
  BD_DEVICE void init(const int* c, const int* off) {
    e1 = c[0];
    e2 = e1 + c[1];
    e3 = e2 + c[2];
    g1 = (c[0] + kGroup - 1) / kGroup;
    g2 = g1 + (c[1] + kGroup - 1) / kGroup;
    g3 = g2 + (c[2] + kGroup - 1) / kGroup;
    if (off != nullptr) {
      oH = off[0], oM = off[1], oL = off[2];
    } else {
      oH = 0, oM = e1, oL = e2;
    }
  }
  // slot returns where entry e (< e3) is stored in the index.
  BD_DEVICE int slot(int e) const { return e < e1 ? oH + e : e < e2 ? oM + (e - e1) : oL + (e - e2); }
  BD_DEVICE int tier(int gi) const { return gi < g1 ? kHigh : gi < g2 ? kMedium : kLow; }
  BD_DEVICE int groupEnd(int tier) const { return tier == kHigh ? g1 : tier == kMedium ? g2 : g3; }
  // run returns the first group, the entry bounds [eb, ee) and the storage
  // offset of tier run t: entry e of the run (eb <= e < ee) is stored at
  // off + e - eb (slot).
  BD_DEVICE void run(int t, int& g0, int& eb, int& ee, int& off) const {
    if (t == kHigh) {
      g0 = 0, eb = 0, ee = e1, off = oH;
    } else if (t == kMedium) {
      g0 = g1, eb = e1, ee = e2, off = oM;
    } else {
      g0 = g2, eb = e2, ee = e3, off = oL;
    }
  }
  // entries returns group gi's first entry and its number of entries (<= 16).
  BD_DEVICE void entries(int gi, int& e0, int& n) const {
    int g0, eb, ee;
    if (gi < g1) {
      g0 = 0, eb = 0, ee = e1;
    } else if (gi < g2) {
      g0 = g1, eb = e1, ee = e2;
    } else {
      g0 = g2, eb = e2, ee = e3;
    }
    e0 = eb + (gi - g0) * kGroup;
    n = min(kGroup, ee - e0);
  }
};

// ============================================================================
// split_mma: tensor cores.

// Geo is the per-lane geometry of head dim D.
template <int D>
struct Geo {
  static_assert(D == 64 || D == 128 || D == 256, "head dim");
  static constexpr int kKTop = D / 32;  // words of plane 0 (or 1) per K token: D/4 channels
  static constexpr int kKLow = D / 16;  // words of plane 2 per K token
  static constexpr int kVTop = D / 64;  // words of plane 0 (or 1) per V token: D/8 channels
  static constexpr int kVLow = D / 32;  // words of plane 2 per V token
  static constexpr int kRegs = D / 8;   // half2 registers per K token or V token pair
  static constexpr int kKB = D / 16;    // k blocks (QK) and m blocks (PV)
};

// kChanK(i, e) is the channel, within lane q's quarter, of element e of K
// register i: word j of plane 0 (channels 8j..8j+7) gives registers 4j..4j+3
// holding channels (8j, 8j+2), (8j+4, 8j+6), (8j+1, 8j+3), (8j+5, 8j+7).
BD_DEVICE constexpr int kChanK(int i, int e) {
  return 8 * (i / 4) + ((i % 4) == 0 ? 0 : (i % 4) == 1 ? 4 : (i % 4) == 2 ? 1 : 5) + 2 * e;
}
// kChanV(i) is the channel, within lane g's eighth, of V register i: word j
// gives registers 8j..8j+7 holding channels 8j + {0, 2, 1, 3, 4, 6, 5, 7}.
BD_DEVICE constexpr int kChanV(int i) {
  return 8 * (i / 8) + ((i % 8) == 0 ? 0 : (i % 8) == 1 ? 2 : (i % 8) == 2 ? 1 : (i % 8) == 3 ? 3
                        : (i % 8) == 4 ? 4 : (i % 8) == 5 ? 6 : (i % 8) == 6 ? 5 : 7);
}

// topBytes turns a plane-0 word x0 and a plane-1 word x1 (or, for LOW, the
// fill's nibble in every nibble) into the top bytes of the even (e) and odd
// (o) nibbles: e byte i = top byte of the low nibble of byte i, o byte i =
// top byte of the high nibble.
// Two instructions each: a shift and a bit select (for LOW, whose x1 is the
// same nibble everywhere, x1 >> 4 is x1 in the low nibbles: one for o).
template <int T>
BD_DEVICE void topBytes(u32 x0, u32 x1, u32& e, u32& o) {
  e = selHi(x0 << 4, x1);
  o = selHi(x0, T == kLow ? x1 : x1 >> 4);
}

// GroupRaw is one lane's plane words of one group at tier T: K tokens m = g
// and g+8 (channels of its quarter), V tokens m = 2q, 2q+1, 2q+8, 2q+9
// (channels of its eighth). Planes a tier does not read are one unused word.
template <int D, int T>
struct GroupRaw {
  using G = Geo<D>;
  u32 k0[2][G::kKTop];
  u32 k1[2][T <= kMedium ? G::kKTop : 1];
  u32 k2[2][T == kHigh ? G::kKLow : 1];
  u32 v0[4][G::kVTop];
  u32 v1[4][T <= kMedium ? G::kVTop : 1];
  u32 v2[4][T == kHigh ? G::kVLow : 1];
};

// Tier constants of the reconstruction, set once per CTA.
struct Recon {
  u32 y8, y4;     // the low-byte fill of MEDIUM (adj8) and LOW (adj4) in every byte
  u32 c4;         // LOW's plane-1 stand-in: fill bits 11..8 in every nibble (FAST: unused)
  float lowScale; // FAST: 2^a2·(1 + (adj4 & 0x3FF)/1024) (bare), else 1
  Fix fixM, fixL; // generic path
};

// Tok locates one token: its block (of one KV head) in the pool and its slot.
struct Tok {
  int slot;    // pool block * Hkv + h, or -1: no token (padding)
  int within;  // slot in the block
};

// loadPlaneGroup issues the loads of one group at tier T. kTok[2]/vTok[4] locate
// the lane's tokens; missing tokens read as zero words.
template <int D, int T>
BD_DEVICE void loadPlaneGroup(GroupRaw<D, T>& r, const u8* __restrict__ pool, int Nr, const Tok kTok[2], const Tok vTok[4],
                         int g, int q) {
  using G = Geo<D>;
  const size_t blockBytes = size_t(4) * Nr * D;
  const int p1 = Nr * D / 2, p2 = Nr * D, vh = 2 * Nr * D;  // plane 1, plane 2, V half
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (kTok[i].slot >= 0) {
      const u8* base = pool + size_t(kTok[i].slot) * blockBytes;
      const int top = kTok[i].within * (D / 2) + q * (G::kKTop * 4);
      ldWords<G::kKTop * 4>(base + top, r.k0[i]);
      if constexpr (T <= kMedium) ldWords<G::kKTop * 4>(base + p1 + top, r.k1[i]);
      if constexpr (T == kHigh) ldWords<G::kKLow * 4>(base + p2 + kTok[i].within * D + q * (G::kKLow * 4), r.k2[i]);
    } else {
#pragma unroll
      for (int j = 0; j < G::kKTop; j++) r.k0[i][j] = 0;
      if constexpr (T <= kMedium) {
#pragma unroll
        for (int j = 0; j < G::kKTop; j++) r.k1[i][j] = 0;
      }
      if constexpr (T == kHigh) {
#pragma unroll
        for (int j = 0; j < G::kKLow; j++) r.k2[i][j] = 0;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if (vTok[i].slot >= 0) {
      const u8* base = pool + size_t(vTok[i].slot) * blockBytes + vh;
      const int top = vTok[i].within * (D / 2) + g * (G::kVTop * 4);
      ldWords<G::kVTop * 4>(base + top, r.v0[i]);
      if constexpr (T <= kMedium) ldWords<G::kVTop * 4>(base + p1 + top, r.v1[i]);
      if constexpr (T == kHigh) ldWords<G::kVLow * 4>(base + p2 + vTok[i].within * D + g * (G::kVLow * 4), r.v2[i]);
    } else {
#pragma unroll
      for (int j = 0; j < G::kVTop; j++) r.v0[i][j] = 0;
      if constexpr (T <= kMedium) {
#pragma unroll
        for (int j = 0; j < G::kVTop; j++) r.v1[i][j] = 0;
      }
      if constexpr (T == kHigh) {
#pragma unroll
        for (int j = 0; j < G::kVLow; j++) r.v2[i][j] = 0;
      }
    }
  }
}

// bare reports whether tier T is rebuilt as sign and exponent only: LOW on
// the FAST path (v2.3). Read's value is ±2^(4·n + a2 - 15)·(1 + m/1024)
// (n = nibble bits 14..12 >= 1, a2 = adj4 bits 11..10, m = adj4 & 0x3FF):
// the half nibble<<12, nothing else, is ±2^(4·n - 15), and the constant
// 2^a2·(1 + m/1024) goes on the fp32 score and the probability
// (Recon.lowScale). A nibble with n = 0 rebuilds as ±0: the filter, with
// no mul.ftz (64 HMUL2 fewer per group).
template <bool FAST, int T>
BD_DEVICE constexpr bool bare() {
  return FAST && T == kLow;
}

// loadTopGroup is loadPlaneGroup for MEDIUM and LOW (v2.3), from each
// token's address (plane 0 of its K half), which the lane that holds the
// token's index entry computes once (issueTile): the 64-bit address
// arithmetic is not repeated by every lane that reads the token. Every K
// address is a real token's (v2.7: a padding row reads the group's first
// token, padAddress), as is every LOW V address; a MEDIUM V address of 0
// (no token) reads as zero words.
template <int D, int T>
BD_DEVICE void loadTopGroup(GroupRaw<D, T>& r, int Nr, const unsigned long long kAt[2], const unsigned long long vAt[4],
                            int g, int q) {
  static_assert(T != kHigh, "HIGH reads plane 2: loadPlaneGroup");
  using G = Geo<D>;
  const int p1 = Nr * D / 2, vh = 2 * Nr * D;  // plane 1, V half
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const u8* top = reinterpret_cast<const u8*>(kAt[i]) + q * (G::kKTop * 4);
    ldWords<G::kKTop * 4>(top, r.k0[i]);
    if constexpr (T == kMedium) ldWords<G::kKTop * 4>(top + p1, r.k1[i]);
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if (T == kLow || vAt[i] != 0) {
      const u8* top = reinterpret_cast<const u8*>(vAt[i]) + vh + g * (G::kVTop * 4);
      ldWords<G::kVTop * 4>(top, r.v0[i]);
      if constexpr (T == kMedium) ldWords<G::kVTop * 4>(top + p1, r.v1[i]);
    } else {
#pragma unroll
      for (int j = 0; j < G::kVTop; j++) r.v0[i][j] = 0;
      if constexpr (T == kMedium) {
#pragma unroll
        for (int j = 0; j < G::kVTop; j++) r.v1[i][j] = 0;
      }
    }
  }
}

// finish applies the partial tiers' filter (FAST: ftz) or the generic fix.
template <bool BF, bool FAST, int T>
BD_DEVICE u32 finish(u32 w, const Recon& rc) {
  if (T == kHigh || bare<FAST, T>()) return w;
  if (FAST) return ftz1(w);
  return fixPair(w, T == kMedium ? rc.fixM : rc.fixL);
}

// rebuildK turns K token i's words into kRegs half2 registers (kChanK order).
template <int D, bool BF, bool FAST, int T>
BD_DEVICE void rebuildK(const GroupRaw<D, T>& r, int i, const Recon& rc, u32 h[Geo<D>::kRegs]) {
#pragma unroll
  for (int j = 0; j < Geo<D>::kKTop; j++) {
    u32 x1 = bare<FAST, T>() ? 0u : rc.c4, y0, y1;
    if constexpr (T <= kMedium) x1 = r.k1[i][j];
    if constexpr (T == kHigh) {
      y0 = r.k2[i][2 * j];
      y1 = r.k2[i][2 * j + 1];
    } else {
      y0 = y1 = T == kMedium ? rc.y8 : bare<FAST, T>() ? 0u : rc.y4;
    }
    u32 e, o;
    topBytes<T>(r.k0[i][j], x1, e, o);
    h[4 * j + 0] = finish<BF, FAST, T>(prmt(y0, e, 0x5240), rc);  // channels 8j, 8j+2
    h[4 * j + 1] = finish<BF, FAST, T>(prmt(y1, e, 0x7260), rc);  // 8j+4, 8j+6
    h[4 * j + 2] = finish<BF, FAST, T>(prmt(y0, o, 0x5341), rc);  // 8j+1, 8j+3
    h[4 * j + 3] = finish<BF, FAST, T>(prmt(y1, o, 0x7361), rc);  // 8j+5, 8j+7
  }
}

// rebuildV turns the V token pair (a, b) into kRegs half2 registers (kChanV
// order), each (token a, token b) of one channel.
template <int D, bool BF, bool FAST, int T>
BD_DEVICE void rebuildV(const GroupRaw<D, T>& r, int a, int b, const Recon& rc, u32 h[Geo<D>::kRegs]) {
#pragma unroll
  for (int j = 0; j < Geo<D>::kVTop; j++) {
#pragma unroll
    for (int half = 0; half < 2; half++) {  // channels 8j..8j+3, then 8j+4..8j+7
      const u32 sel = half == 0 ? 0x5410u : 0x7632u;
      const u32 x0 = prmt(r.v0[a][j], r.v0[b][j], sel);
      u32 x1 = bare<FAST, T>() ? 0u : rc.c4;
      if constexpr (T <= kMedium) x1 = prmt(r.v1[a][j], r.v1[b][j], sel);
      u32 e, o;  // e = [a c0, a c2, b c0, b c2], o = [a c1, a c3, b c1, b c3] (c relative to the half)
      topBytes<T>(x0, x1, e, o);
      u32 ye, yo;  // the low bytes in e's and o's order
      if constexpr (T == kHigh) {
        ye = prmt(r.v2[a][2 * j + half], r.v2[b][2 * j + half], 0x6420);
        yo = prmt(r.v2[a][2 * j + half], r.v2[b][2 * j + half], 0x7531);
      } else {
        ye = yo = T == kMedium ? rc.y8 : bare<FAST, T>() ? 0u : rc.y4;
      }
      h[8 * j + 4 * half + 0] = finish<BF, FAST, T>(prmt(ye, e, 0x6240), rc);  // c0
      h[8 * j + 4 * half + 1] = finish<BF, FAST, T>(prmt(ye, e, 0x7351), rc);  // c2
      h[8 * j + 4 * half + 2] = finish<BF, FAST, T>(prmt(yo, o, 0x6240), rc);  // c1
      h[8 * j + 4 * half + 3] = finish<BF, FAST, T>(prmt(yo, o, 0x7351), rc);  // c3
    }
  }
}

// WarpState is one warp's online softmax, the decode family's
// (bitdecode.cuh). Lane (g, q) holds rows 2q and 2q+1: running max m (log2
// domain), its share of the denominator l, and O^T accumulators acc[mb] =
// (channel kChanV(2mb) of its eighth, rows 2q, 2q+1), (channel kChanV(2mb+1),
// rows 2q, 2q+1).
template <int D>
using WarpState = OnlineSoftmax<D / 16>;

// Ctx is what every tile of a CTA shares.
struct Ctx {
  const u8* pool;
  const int* table;  // this sequence's block table row
  const int* index;  // this (sequence, KV head)'s index
  float* scores;     // this (sequence, KV head)'s first row of this chunk, or null
  int Nr, Hkv, h, nrows, idxStride;
  u32 nrMagic;       // t / Nr = umulhi(t, nrMagic) >> nrShift for 0 <= t < 2^31 (divNr, v2.7)
  int nrShift;
  int limit[2];      // last visible token of rows 2q, 2q+1
};

// divNr returns t / Nr for 0 <= t < 2^31 by a multiply and a shift
// (Granlund and Montgomery's invariant division, N = 31: nrMagic =
// ceil(2^(31+l) / Nr), nrShift = l - 1, l = ceil(log2 Nr); planes.go
// planesDivMagic computes them and TestPlanesDivMagic checks them for every
// block size): v2.6 divided by the run-time Nr, about 30 instructions per
// index entry in the tile loop.
BD_DEVICE int divNr(int t, const Ctx& cx) { return int(__umulhi(u32(t), cx.nrMagic) >> cx.nrShift); }

// Ahead is a tile's index entries and block-table entries, a software
// pipeline in registers (v2.1): the index entries are fetched two tiles
// before the tile is processed (fetchAhead), the block-table entries one
// tile before (resolveTable), so that a tile waits only for its planes:
// neither the index load (DRAM) nor the table load that depends on it is on
// the tile's critical path. It holds the tile's tier, its groups, and this
// lane's entry (lane % 16) of each with the entry's block.
template <int MTX>
struct Ahead {
  int tier, n;    // kDone: past the warp's last tile
  int g;          // its first group
  int first;      // the first entry of its first group (group i starts 16·i later)
  int tok[MTX];   // this lane's entry: a token position, or -1
  int block[MTX]; // its pool block (the block table's entry), after resolveTable
  int within[MTX];// its slot in the block, after resolveTable
};

// kDone is the tier of the position past a warp's last tile.
constexpr int kDone = 3;

// Walk is a warp's tiles (v2.12): for each tier, tiles of MT groups that
// start at first, first + step, ... below end (the last one cut at end),
// HIGH's, then MEDIUM's, then LOW's. A warp of a contiguous share (v2.2's
// warpBound) steps by MT through its groups of each tier; a dealt share
// (planes.go planesDeal) takes every kWarps-th tile of the CTA's part of
// each tier, so that every warp reads the same mix of tiers.
struct Walk {
  int first[3], end[3], step[3];  // HIGH, MEDIUM, LOW; an empty tier has first >= end
  // settle moves (t, g) past the tiers that are done: t = kDone past the last.
  BD_DEVICE void settle(int& t, int& g) const {
    if (t == kHigh && g >= end[0]) t = kMedium, g = first[1];
    if (t == kMedium && g >= end[1]) t = kLow, g = first[2];
    if (t == kLow && g >= end[2]) t = kDone;
  }
  // next moves (t, g) (t < kDone) to the tile after the one at g.
  BD_DEVICE void next(int& t, int& g) const {
    g += t == kHigh ? step[0] : t == kMedium ? step[1] : step[2];
    settle(t, g);
  }
  BD_DEVICE int endOf(int t) const { return t == kHigh ? end[0] : t == kMedium ? end[1] : end[2]; }
};

// fetchAhead describes the tile of tier t at group g (t = kDone: none): up
// to MT groups of its tier (MTH, MTM or MTL), within the walk's end of the
// tier, and loads this lane's index entries. The tile lies in one tier
// run, whose bounds and storage offset are looked up once per tile (v2.7;
// Runs::entries and Runs::slot per group before).
template <int MTH, int MTM, int MTL, int MTX>
BD_DEVICE void fetchAhead(Ahead<MTX>& a, const Runs& runs, const Walk& w, const Ctx& cx, int t, int g, int lane) {
  a.tier = t;
  a.g = g;
  const int mt = t == kHigh ? MTH : t == kMedium ? MTM : MTL;
  a.n = t == kDone ? 0 : min(mt, w.endOf(t) - g);
  int g0, eb, ee, off;
  runs.run(t, g0, eb, ee, off);
  a.first = eb + (g - g0) * kGroup;
  // One predicated load per group, no branch (v2.8): a group past the tile
  // (i >= n) or an entry past the run reads nothing and gets -1.
#pragma unroll
  for (int i = 0; i < MTX; i++) {
    const int e = a.first + i * kGroup + lane % kGroup;  // this lane's entry of group i
    a.tok[i] = -1;
    if (i < a.n && e < ee) a.tok[i] = cx.index[off + e - eb];
  }
}

// resolveTable issues the block-table loads of a's entries; issueTile
// consumes them a tile later. One division by Nr per entry gives the block
// and the slot within it (v2.3: issueTile took a second one).
template <int MTX>
BD_DEVICE void resolveTable(Ahead<MTX>& a, const Ctx& cx) {
// An entry of -1 (none; every entry of a group past the tile) gets block 0
// by a predicated load, and the slot of position 0 (v2.8: no branch).
#pragma unroll
  for (int i = 0; i < MTX; i++) {
    const int t = max(a.tok[i], 0), blk = divNr(t, cx);
    a.within[i] = t - blk * cx.Nr;
    a.block[i] = 0;
    if (a.tok[i] >= 0) a.block[i] = cx.table[blk];
  }
}

// Pipe is a warp's pipeline state: cur describes the next tile to issue
// (entries and blocks loaded), nxt the tile after it (entries loaded).
template <int MTX>
struct Pipe {
  Ahead<MTX> cur, nxt;
};

// startPipe fills the pipeline at the walk's first tile, (t, g) (t <
// kDone). meanwhile() runs between the first index loads and their use
// (v2.10: split_mma makes its query fragments there, in the shadow of that
// DRAM trip).
template <int MTH, int MTM, int MTL, int MTX, typename F>
BD_DEVICE void startPipe(Pipe<MTX>& p, const Runs& runs, const Walk& w, const Ctx& cx, int t, int g, int lane,
                         F meanwhile) {
  fetchAhead<MTH, MTM, MTL, MTX>(p.cur, runs, w, cx, t, g, lane);
  meanwhile();
  resolveTable<MTX>(p.cur, cx);
  w.next(t, g);
  fetchAhead<MTH, MTM, MTL, MTX>(p.nxt, runs, w, cx, t, g, lane);
}

// advance moves the pipeline past the tile cur described (issued): cur
// takes nxt's entries and issues their table loads, nxt fetches the entries
// of the tile after. cur.tier is kDone past the warp's last tile.
template <int MTH, int MTM, int MTL, int MTX>
BD_DEVICE void advance(Pipe<MTX>& p, const Runs& runs, const Walk& w, const Ctx& cx, int lane) {
  p.cur = p.nxt;
  if (p.cur.tier != kDone) {
    resolveTable<MTX>(p.cur, cx);
    int t = p.cur.tier, g = p.cur.g;
    w.next(t, g);
    fetchAhead<MTH, MTM, MTL, MTX>(p.nxt, runs, w, cx, t, g, lane);
  }
}

// Tile is one warp tile of n (<= MT) groups of tier T: the lane's plane
// words and the token positions of its K rows g, g+8 (-1: none).
template <int D, int T, int MT>
struct Tile {
  GroupRaw<D, T> raw[MT];
  int kTok[MT][2];
  int e0[MT];
  int n;
};

// issueTile gives every lane the slots of its K and V tokens (from a's
// resolved blocks, by shuffles) and issues the tile's plane loads. a may be
// overwritten afterwards.
template <int D, int T, int MT, int MTX>
BD_DEVICE void issueTile(Tile<D, T, MT>& t, const Ahead<MTX>& a, const Ctx& cx, int lane) {
  const int g = lane / 4, q = lane % 4;
  t.n = a.n;
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    if (mt >= a.n) break;  // a partial tile (end of a run or of the warp's range)
    t.e0[mt] = a.first + mt * kGroup;
    const int tok = a.tok[mt];
    if constexpr (T != kHigh) {
      // The address of this lane's token (plane 0 of its K half), 0: none.
      unsigned long long at = 0;
      if (tok >= 0)
        at = reinterpret_cast<unsigned long long>(cx.pool + (size_t(a.block[mt]) * cx.Hkv + cx.h) * (size_t(4) * cx.Nr * D) +
                                                  a.within[mt] * (D / 2));
      // padAddress (v2.7): a lane without a token takes the group's first
      // token's address (entry 0, lane 0: a group has at least one entry),
      // so that the reads whose values cannot matter need no test and no
      // zeroing: a padding K row's score is -inf whatever it reads
      // (computeTile: kTok < 0), and a LOW value is always finite (Read
      // saturates), so a padding V token's probability 0 adds an exact 0
      // (the same bits as the zero words it read before). MEDIUM values may
      // be ±Inf or NaN: MEDIUM's V padding still reads zeros (address 0).
      const unsigned long long padAddress = __shfl_sync(0xffffffffu, at, 0);
      const unsigned long long atAny = tok >= 0 ? at : padAddress;
      unsigned long long kAt[2], vAt[4];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const int src = g + 8 * i;
        t.kTok[mt][i] = __shfl_sync(0xffffffffu, tok, src);
        kAt[i] = __shfl_sync(0xffffffffu, atAny, src);
      }
#pragma unroll
      for (int i = 0; i < 4; i++) vAt[i] = __shfl_sync(0xffffffffu, T == kLow ? atAny : at, 2 * q + (i & 1) + 8 * (i >> 1));
      loadTopGroup<D, T>(t.raw[mt], cx.Nr, kAt, vAt, g, q);
      continue;
    }
    int slot = -1, within = 0;
    if (tok >= 0) {
      within = a.within[mt];
      slot = a.block[mt] * cx.Hkv + cx.h;
    }
    Tok kTok[2], vTok[4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int src = g + 8 * i;
      t.kTok[mt][i] = __shfl_sync(0xffffffffu, tok, src);
      kTok[i].slot = __shfl_sync(0xffffffffu, slot, src);
      kTok[i].within = __shfl_sync(0xffffffffu, within, src);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int src = 2 * q + (i & 1) + 8 * (i >> 1);
      vTok[i].slot = __shfl_sync(0xffffffffu, slot, src);
      vTok[i].within = __shfl_sync(0xffffffffu, within, src);
    }
    loadPlaneGroup<D, T>(t.raw[mt], cx.pool, cx.Nr, kTok, vTok, g, q);
  }
}

// computeTile runs a loaded tile through the scores, the online softmax
// and the values.
template <int D, bool BF, bool FAST, int T, int MT>
BD_DEVICE void computeTile(WarpState<D>& st, const Tile<D, T, MT>& t, const Ctx& cx, const Recon& rc,
                           const u32 bq[D / 16][2], int lane) {
  using G = Geo<D>;
  const int g = lane / 4, q = lane % 4;
  const int n = t.n;
  // Scores.
  float s[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    if (mt >= n) {
      s[mt][0] = s[mt][1] = s[mt][2] = s[mt][3] = kNegInf;
      continue;
    }
    u32 h0[G::kRegs], h1[G::kRegs];
    rebuildK<D, BF, FAST, T>(t.raw[mt], 0, rc, h0);
    rebuildK<D, BF, FAST, T>(t.raw[mt], 1, rc, h1);
    float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int kb = 0; kb < G::kKB; kb++) {
      const u32 a[4] = {h0[2 * kb], h1[2 * kb], h0[2 * kb + 1], h1[2 * kb + 1]};
      mmaT<BF>(c, a, bq[kb][0], bq[kb][1]);
    }
    const float sc = (FAST && T == kLow) ? rc.lowScale : 1.f;
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int tok = t.kTok[mt][e >> 1];
      s[mt][e] = (tok < 0 || tok > cx.limit[e & 1]) ? kNegInf : c[e] * sc;
    }
    if (cx.scores != nullptr) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = 2 * q + (e & 1), m = g + 8 * (e >> 1);
        if (r < cx.nrows && t.kTok[mt][e >> 1] >= 0) cx.scores[size_t(r) * cx.idxStride + t.e0[mt] + m] = s[mt][e];
      }
    }
  }
  // Online softmax for rows 2q, 2q+1 (the decode family's, bitdecode.cuh,
  // with ex2).
  float alpha[2];
  foldTile<true>(st, s, alpha);
  // Values.
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    if (mt >= n) break;
    u32 pa[G::kRegs], pb[G::kRegs];
    rebuildV<D, BF, FAST, T>(t.raw[mt], 0, 1, rc, pa);  // tokens 2q, 2q+1
    rebuildV<D, BF, FAST, T>(t.raw[mt], 2, 3, rc, pb);  // tokens 2q+8, 2q+9
    const float sc = (FAST && T == kLow) ? rc.lowScale : 1.f;
    // (token g | g+8, rows 2q, 2q+1) -> B: (tokens 2q.. | 2q+8.., row g)
    const u32 b0 = trans8x8(pack2T<BF>(s[mt][0] * sc, s[mt][1] * sc));
    const u32 b1 = trans8x8(pack2T<BF>(s[mt][2] * sc, s[mt][3] * sc));
#pragma unroll
    for (int mb = 0; mb < G::kKB; mb++) {
      const u32 a[4] = {pa[2 * mb], pa[2 * mb + 1], pb[2 * mb], pb[2 * mb + 1]};
      mmaT<BF>(st.acc[mb], a, b0, b1);
    }
  }
}

// oneTile processes the tile p.cur describes (tier T): it issues the
// tile's plane loads, advances the pipeline (the next tile's table loads,
// the entries of the one after) while they are in flight, and computes the
// tile.
template <int D, bool BF, bool FAST, int T, int MT, int MTH, int MTM, int MTL, int MTX>
BD_DEVICE void oneTile(WarpState<D>& st, Pipe<MTX>& p, const Runs& runs, const Walk& w, const Ctx& cx,
                       const Recon& rc, const u32 bq[D / 16][2], int lane) {
  Tile<D, T, MT> t;
  issueTile<D, T, MT, MTX>(t, p.cur, cx, lane);
  advance<MTH, MTM, MTL, MTX>(p, runs, w, cx, lane);
  computeTile<D, BF, FAST, T, MT>(st, t, cx, rc, bq, lane);
}

// tierRun processes consecutive tiles of tier T (MT groups each), the
// first of which p.cur describes, with register double buffering: the next
// tile's planes are loaded before the current one is computed (decode_mma.cu's
// kPrefetch for fp16). HIGH runs take it with PF bit 0 (opt-in), MEDIUM
// runs with PF bit 1 (v2.5). It returns with p.cur describing the tile
// after the run.
template <int D, bool BF, bool FAST, int T, int MT, int MTH, int MTM, int MTL, int MTX>
BD_DEVICE void tierRun(WarpState<D>& st, Pipe<MTX>& p, const Runs& runs, const Walk& w, const Ctx& cx,
                       const Recon& rc, const u32 bq[D / 16][2], int lane) {
  Tile<D, T, MT> ta, tb;
  issueTile<D, T, MT, MTX>(ta, p.cur, cx, lane);
  advance<MTH, MTM, MTL, MTX>(p, runs, w, cx, lane);
  for (;;) {
    bool more = p.cur.tier == T;
    if (more) {
      issueTile<D, T, MT, MTX>(tb, p.cur, cx, lane);
      advance<MTH, MTM, MTL, MTX>(p, runs, w, cx, lane);
    }
    computeTile<D, BF, FAST, T, MT>(st, ta, cx, rc, bq, lane);
    if (!more) return;
    more = p.cur.tier == T;
    if (more) {
      issueTile<D, T, MT, MTX>(ta, p.cur, cx, lane);
      advance<MTH, MTM, MTL, MTX>(p, runs, w, cx, lane);
    }
    computeTile<D, BF, FAST, T, MT>(st, tb, cx, rc, bq, lane);
    if (!more) return;
  }
}

BD_DEVICE constexpr int max3(int a, int b, int c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

// warpBound returns where warp w's groups start in the CTA's groups [g0,
// g1) (w = kWarps: g1), so that the warps get equal shares of the weighted
// cost Σ wt[tier] over their groups (v2.2): the groups are a HIGH, a MEDIUM
// and a LOW run, so the cost is piecewise linear in the group and its
// inverse is three divisions. Equal weights, or groups of one tier, keep
// v2.1's split (equal numbers of groups, the last warp's share the
// shortest; the same bits as v2.1).
BD_DEVICE int warpBound(const Runs& runs, int g0, int g1, int w, const int wt[3]) {
  if (w >= kWarps) return g1;
  const int a = min(max(runs.g1, g0), g1), b = min(max(runs.g2, a), g1);  // MEDIUM and LOW runs start
  const bool oneTier = (a == g1) || (a == g0 && (b == g0 || b == g1));
  if (oneTier || (wt[0] == wt[1] && wt[1] == wt[2])) return min(g1, g0 + w * ((g1 - g0 + kWarps - 1) / kWarps));
  const int cH = wt[0] * (a - g0), cM = wt[1] * (b - a), cL = wt[2] * (g1 - b);
  const int T = (cH + cM + cL) * w / kWarps;  // the cost before warp w's first group
  if (T <= cH) return g0 + (T + wt[0] - 1) / wt[0];
  if (T <= cH + cM) return a + (T - cH + wt[1] - 1) / wt[1];
  return min(g1, b + (T - cH - cM + wt[2] - 1) / wt[2]);
}

// splitBound returns where split s of n starts in a (sequence, KV head)'s
// groups [0, g3) (s = n: g3) when the splits take equal shares of the
// weighted cost Σ wt[tier] over their groups (v2.4): warpBound's inverse of
// the piecewise linear cost over the whole HIGH, MEDIUM and LOW runs, in 64
// bits (groups x weight x splits may pass 2^31). The bounds never decrease
// in s, so the splits tile [0, g3); a split may be empty (a group heavier
// than a share), and then writes the empty partial (max -inf, sum 0) that
// the combine skips.
BD_DEVICE int splitBound(const Runs& runs, int s, int n, const int wt[3]) {
  if (s >= n) return runs.g3;
  const long long cH = (long long)wt[0] * runs.g1, cM = (long long)wt[1] * (runs.g2 - runs.g1);
  const long long cL = (long long)wt[2] * (runs.g3 - runs.g2);
  const long long T = (cH + cM + cL) * s / n;  // the cost before split s's first group
  if (T <= cH) return int((T + wt[0] - 1) / wt[0]);
  if (T <= cH + cM) return runs.g1 + int((T - cH + wt[1] - 1) / wt[1]);
  return min(runs.g3, runs.g2 + int((T - cH - cM + wt[2] - 1) / wt[2]));
}

// kMergeAhead is how many split partials of O a thread of the merging CTA
// loads before the weights are known (finishSplits, v2.10): 1 x 128K
// has 32-33 splits, so all of them at once.
constexpr int kMergeAhead = 32;

// Bits of split_mma's mode (planes.go planesDeal): kCostSplits cuts a
// (sequence, KV head)'s groups into splits of equal cost by the tier
// weights (v2.4; else equal positions, v2.3); kDealWarps deals the tiles of
// a CTA whose groups hold more than one tier to its warps in turn (v2.12;
// else warpBound's contiguous shares, v2.2); kDealSplits gives every split
// of a (sequence, KV head) with more than one tier the same share of each
// tier's tiles (v2.12; else kCostSplits decides), its warps dealt.
constexpr int kCostSplits = 1, kDealWarps = 2, kDealSplits = 4;

// dealPart returns where split s of n starts in the tiles [0, tiles) of one
// tier run when the splits take equal shares of it; phase (< n) staggers
// the tiers' roundings so that the splits' extra tiles fall on different
// splits. dealPart(0) = 0, dealPart(n) = tiles.
BD_DEVICE int dealPart(int tiles, int s, int n, int phase) {
  return int(((long long)tiles * s + phase) / n);
}

// The launch timeline (session 14; only with -DBD_TIMELINE=1, planes.go's
// PlanesTuning.Timeline, so the default kernel is unchanged): decode_mma's
// instrument, its region and marks bitdecode.cuh's (kTLHead, BD_TL_MARK),
// read back by decode_timeline.go. Each warp writes its own prologue (the
// pipeline filled, the query made) and loop (its tiles done), no first
// tile. The info word says kWarps "tiles" and 1 per warp, so that every
// warp counts once (a warp's tiles are a walk, not a run).

// MINB is the CTAs per SM the registers must allow (__launch_bounds__; 1:
// ptxas's choice, 2 at D = 128). PF's bit 0 double-buffers HIGH runs, bit
// 1 MEDIUM runs (tierRun).
template <int D, bool BF, bool FAST, int MTH, int MTM, int MTL, int PF, int MINB>
__global__ void __launch_bounds__(kThreads, MINB) split_mma(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const int* __restrict__ lens, const int* __restrict__ index, const int* __restrict__ counts,
    const int* __restrict__ offsets, int idxStride,
    const u16* __restrict__ q, float* __restrict__ partO, float* __restrict__ partML, float* __restrict__ scores,
    int Hq, int Hkv, int Tq, int Nr, unsigned nrMagic, int nrShift, int splitLen, int maxSplits, int rowChunks,
    int adj8, int adj4, int filter, float scaleLog2, int wtH, int wtM, int wtL, int mode,
    int* __restrict__ counters, u16* __restrict__ out, float* __restrict__ finalML BD_TL_PARAM) {
  static_assert(!(BF && FAST), "the ftz path is fp16 only");
#if BD_TIMELINE
  unsigned long long* const tlRec = tlRecord(tl);
#endif
  BD_TL_MARK(kTLEntry, threadIdx.x == 0);
  __shared__ __align__(16) float redO[kWarps][kQueryRows][D];  // float4 reads (the warp merge, v2.13)
  __shared__ float redM[kWarps][kQueryRows], redL[kWarps][kQueryRows];

  const int split = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y / rowChunks, rc = blockIdx.y % rowChunks;
  const int bh = b * Hkv + h;
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * kQueryRows, nrows = min(kQueryRows, R - row0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, qd = lane % 4;
  // v2.10: every load that depends on no other is issued here, together:
  // the counts and offsets, the length, the query's raw words (converted
  // after the pipeline's first loads are out), and the L2 prefetch of the
  // block table; v2.9 waited for the counts, then the length, then the
  // query, one L2 trip each, before its first index load.
  int cnt[3], off[3];
#pragma unroll
  for (int t = 0; t < 3; t++) cnt[t] = counts[4 * bh + t];
  if (offsets != nullptr) {
#pragma unroll
    for (int t = 0; t < 3; t++) off[t] = offsets[4 * bh + t];
  }
  const int L = lens[b];
  u32 qw[D / 8] = {};  // this lane's quarter of query row g: D/4 halves
  if (g < nrows) {
    const int row = row0 + g, i = row / group, hq = h * group + row % group;
    const u16* qp = q + ((size_t(b) * Tq + i) * Hq + hq) * D + qd * (D / 4);
#pragma unroll
    for (int c = 0; c < D / 4; c += 8) ldWords<16>(reinterpret_cast<const u8*>(qp + c), &qw[c / 2]);
  }
  prefetchTable(blockTable + size_t(b) * maxBlocks, maxBlocks, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x * gridDim.y);
  if (offsets == nullptr) off[0] = 0, off[1] = cnt[0], off[2] = cnt[0] + cnt[1];  // Runs::init's default
  Runs runs;
  runs.init(cnt, off);
  // The (sequence, KV head) has nSplits splits (the combine's count: its
  // positions over splitLen; at least one, so that the merge in the last
  // split (finishSplits) also writes the zeros of a head with no entry);
  // split s covers groups [g0, g1): equal costs by the tier weights
  // (kCostSplits, v2.4) or equal positions (v2.3); with kDealSplits and
  // more than one tier, part[t] of each tier run t instead (v2.12).
  const int nSplits = max(1, (runs.g3 * kGroup + splitLen - 1) / splitLen);
  if (split >= nSplits) {  // this (sequence, KV head) has fewer splits
#if BD_TIMELINE
    if (threadIdx.x == 0) tlRec[kTLInfo] = ~0ull;  // no tokens: Go skips the CTA
#endif
    return;
  }
#if BD_TIMELINE
  if (threadIdx.x == 0) tlRec[kTLInfo] = tlInfo(kWarps, 1);
#endif
  const int wt[3] = {wtH, wtM, wtL};
  const int runB[3] = {0, runs.g1, runs.g2}, runE[3] = {runs.g1, runs.g2, runs.g3}, mts[3] = {MTH, MTM, MTL};
  const bool mixed = (runs.g1 > 0) + (runs.g2 > runs.g1) + (runs.g3 > runs.g2) > 1;
  int g0 = 0, g1 = 0;
  int partB[3], partE[3];  // the CTA's groups of each tier
  if ((mode & kDealSplits) && mixed) {
#pragma unroll
    for (int t = 0; t < 3; t++) {
      const int tiles = (runE[t] - runB[t] + mts[t] - 1) / mts[t], phase = t * nSplits / 3;
      partB[t] = min(runE[t], runB[t] + mts[t] * dealPart(tiles, split, nSplits, phase));
      partE[t] = min(runE[t], runB[t] + mts[t] * dealPart(tiles, split + 1, nSplits, phase));
    }
  } else {
    if (mode & kCostSplits) {
      g0 = splitBound(runs, split, nSplits, wt), g1 = splitBound(runs, split + 1, nSplits, wt);
    } else {
      g0 = split * (splitLen / kGroup), g1 = min(runs.g3, g0 + splitLen / kGroup);
    }
#pragma unroll
    for (int t = 0; t < 3; t++) partB[t] = max(g0, runB[t]), partE[t] = min(g1, runE[t]);
  }

  Ctx cx;
  cx.pool = pool;
  cx.table = blockTable + size_t(b) * maxBlocks;
  cx.index = index + size_t(bh) * idxStride;
  cx.scores = scores ? scores + (size_t(bh) * R + row0) * idxStride : nullptr;
  cx.Nr = Nr, cx.Hkv = Hkv, cx.h = h, cx.nrows = nrows, cx.idxStride = idxStride;
  cx.nrMagic = nrMagic, cx.nrShift = nrShift;
  causalLimits(cx.limit, row0, nrows, qd, L, Tq, group);

  Recon rcn;
  rcn.y8 = u32(adj8 & 0xFF) * 0x01010101u;
  rcn.y4 = u32(adj4 & 0xFF) * 0x01010101u;
  rcn.c4 = u32((adj4 >> 8) & 0xF) * 0x11111111u;
  rcn.lowScale = FAST ? float(1 << ((adj4 >> 10) & 3)) * (1.f + float(adj4 & 0x3FF) / 1024.f) : 1.f;  // exact
  rcn.fixM = makeFix<BF>(kMedium, u32(adj8), filter != 0);
  rcn.fixL = makeFix<BF>(kLow, u32(adj4), filter != 0);

  // Each warp takes a contiguous run of the split's groups, of equal cost
  // by the tier weights (warpBound), and walks it in tiles of one tier;
  // or, with kDealWarps (kDealSplits) and a CTA of more than one tier, the
  // CTA's tiles (MT groups from each part's start) numbered HIGH's, then
  // MEDIUM's, then LOW's are dealt to the warps in turn (v2.12): each warp
  // reads the same share of every tier, whatever the tiers' costs.
  constexpr int MTX = max3(MTH, MTM, MTL);
  const int ctaTiers = (partB[0] < partE[0]) + (partB[1] < partE[1]) + (partB[2] < partE[2]);
  Walk walk;
  if (((mode & kDealSplits) && mixed) || ((mode & kDealWarps) && ctaTiers > 1)) {
    int before = 0;  // the CTA's tiles of the tiers before t
#pragma unroll
    for (int t = 0; t < 3; t++) {
      const int tiles = (max(0, partE[t] - partB[t]) + mts[t] - 1) / mts[t];
      walk.first[t] = partB[t] + mts[t] * ((warp - before) & (kWarps - 1));
      walk.end[t] = partE[t];
      walk.step[t] = kWarps * mts[t];
      before += tiles;
    }
  } else {
    const int wBegin = warpBound(runs, g0, g1, warp, wt), wEnd = warpBound(runs, g0, g1, warp + 1, wt);
#pragma unroll
    for (int t = 0; t < 3; t++) {
      walk.first[t] = max(wBegin, runB[t]);
      walk.end[t] = min(wEnd, runE[t]);
      walk.step[t] = mts[t];
    }
  }
  int t0 = kHigh, gFirst = walk.first[0];
  walk.settle(t0, gFirst);
  // B fragments of the query row g (zero beyond nrows), scaled by
  // scale·log2(e), in the kChanK order of the lane's quarter: made while
  // the warp's first index loads are in flight (v2.10). The empty asm
  // takes the raw words as its outputs after those loads (its memory
  // clobber keeps them ahead), so the compiler cannot hoist the
  // conversion back above them (v2.10's first build did: ~160
  // instructions on the chain).
  u32 bq[D / 16][2];
  auto makeQuery = [&] {
#pragma unroll
    for (int i = 0; i < D / 8; i++) asm volatile("" : "+r"(qw[i])::"memory");
    float x[D / 4];
#pragma unroll
    for (int c = 0; c < D / 4; c += 2) {
      x[c] = g < nrows ? h2f(u16(qw[c / 2] & 0xffff)) * scaleLog2 : 0.f;
      x[c + 1] = g < nrows ? h2f(u16(qw[c / 2] >> 16)) * scaleLog2 : 0.f;
    }
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
      for (int hi = 0; hi < 2; hi++) bq[kb][hi] = pack2T<BF>(x[kChanK(2 * kb + hi, 0)], x[kChanK(2 * kb + hi, 1)]);
  };
  Pipe<MTX> pipe;
  if (t0 != kDone) {
    startPipe<MTH, MTM, MTL, MTX>(pipe, runs, walk, cx, t0, gFirst, lane, makeQuery);
  } else {
    pipe.cur.tier = kDone;
    makeQuery();  // unused by a warp without groups; made so that bq is always defined
  }
  BD_TL_MARK(kTLPrologue + warp, lane == 0);

  WarpState<D> st;
  st.init();
  // The warp's groups are a HIGH run, a MEDIUM run and a LOW run (each
  // possibly empty), in that order: one loop per tier, so that the register
  // allocation is each tier's, not their union's (v2.1).
  if (PF & 1) {
    if (pipe.cur.tier == kHigh) tierRun<D, BF, FAST, kHigh, MTH, MTH, MTM, MTL, MTX>(st, pipe, runs, walk, cx, rcn, bq, lane);
  } else {
    while (pipe.cur.tier == kHigh) oneTile<D, BF, FAST, kHigh, MTH, MTH, MTM, MTL, MTX>(st, pipe, runs, walk, cx, rcn, bq, lane);
  }
  if (PF & 2) {
    if (pipe.cur.tier == kMedium) tierRun<D, BF, FAST, kMedium, MTM, MTH, MTM, MTL, MTX>(st, pipe, runs, walk, cx, rcn, bq, lane);
  } else {
    while (pipe.cur.tier == kMedium) oneTile<D, BF, FAST, kMedium, MTM, MTH, MTM, MTL, MTX>(st, pipe, runs, walk, cx, rcn, bq, lane);
  }
  if (PF & 4) {
    if (pipe.cur.tier == kLow) tierRun<D, BF, FAST, kLow, MTL, MTH, MTM, MTL, MTX>(st, pipe, runs, walk, cx, rcn, bq, lane);
  } else {
    while (pipe.cur.tier == kLow) oneTile<D, BF, FAST, kLow, MTL, MTH, MTM, MTL, MTX>(st, pipe, runs, walk, cx, rcn, bq, lane);
  }

  BD_TL_MARK(kTLLoop + warp, lane == 0);
  // Warp totals: denominators summed over the 8 lanes of each row (xor over g).
  st.sumRows();
#pragma unroll
  for (int mb = 0; mb < D / 16; mb++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int c = g * (D / 8) + kChanV(2 * mb + (e >> 1)), r = 2 * qd + (e & 1);
      redO[warp][r][c] = st.acc[mb][e];
    }
  st.storeRows(redM, redL, warp, g, qd);
  __syncthreads();
  BD_TL_MARK(kTLWarpsDone, threadIdx.x == 0);
  // Merge the warps in order and write the partials of the chunk's nrows
  // real rows (v2.10; mergeWarps wrote all kQueryRows, which nothing reads
  // past nrows). v2.13: by (row, 4 channels) pieces (the decode family's
  // mergeWarpRow4, decode_mma v2.18; float4 stores): one piece per thread
  // at 4 rows and D = 128, where mergeWarpRow took four dependent (max,
  // exp2f, fmaf) chains per thread; the same values in the same order, so
  // the same bits.
  const size_t part = (size_t(b) * Hkv * rowChunks + blockIdx.y) * maxSplits + split;
  static_assert(D % 4 == 0, "float4 pieces");
  for (int idx = threadIdx.x; idx < nrows * (D / 4); idx += kThreads) {
    const int r = idx / (D / 4), c = idx % (D / 4) * 4;
    float m, l;
    float4 o;
    mergeWarpRow4<D, kWarps, kQueryRows>(redO, redM, redL, r, c, m, o, l);
    *reinterpret_cast<float4*>(&partO[(part * kQueryRows + r) * D + c]) = o;
    if (c == 0) {
      partML[(part * kQueryRows + r) * 2] = m;
      partML[(part * kQueryRows + r) * 2 + 1] = l;
    }
  }
  BD_TL_MARK(kTLPartial, threadIdx.x == 0);
  // v2.4: the last split merges, no combine launch; v2.10: with its loads
  // ahead (bitdecode.cuh's finishSplits: v2.5's bits); v2.13: counted with
  // one thread's release and acquire fences (lastArrivalRel, decode_mma
  // v2.16) instead of every thread's fence.sc before and after the count:
  // the same count and merge, so the same bits.
  if (counters != nullptr) {
    finishSplits<D, kQueryRows, true, kMergeAhead, true>(
        partO, partML, &counters[size_t(b) * Hkv * rowChunks + blockIdx.y], out, nullptr, part - split, nSplits, b, h, row0, nrows,
        group, Hq, Tq, threadIdx.x, [] { __syncthreads(); },
        [&](int row, float m, float l) {
          if (finalML != nullptr) {
            finalML[(size_t(bh) * R + row) * 2] = m;
            finalML[(size_t(bh) * R + row) * 2 + 1] = l;
          }
        },
        BD_TL_ARRIVED);
  }
  BD_TL_MARK(kTLExit, threadIdx.x == 0);
}

// ============================================================================
// split_v1: CUDA cores (decode.cu's v1 over the position space).

// posEntry maps position p to its index entry (or -1 for padding) and tier.
BD_DEVICE int posEntry(const Runs& runs, int p, int& tier) {
  const int gi = p / kGroup;
  tier = runs.tier(gi);
  int e0, n;
  runs.entries(gi, e0, n);
  return p % kGroup < n ? e0 + p % kGroup : -1;
}

// loadPlaneToken8 rebuilds channels [c, c+8) of token (slot, within) of one half
// (0: K, 1: V) at tier as floats, reading only the tier's planes.
template <int D, bool BF>
BD_DEVICE void loadPlaneToken8(const u8* __restrict__ pool, int Nr, int slot, int within, int half, int c, int tier,
                          u32 adj8, u32 adj4, bool filter, float x[kChunk]) {
  const u8* base = pool + size_t(slot) * (size_t(4) * Nr * D) + size_t(half) * 2 * Nr * D;
  const u32 p0 = ldg32(base + within * (D / 2) + c / 2);
  const u32 p1 = tier <= kMedium ? ldg32(base + Nr * D / 2 + within * (D / 2) + c / 2) : 0u;
  u32 lo0 = 0, lo1 = 0;
  if (tier == kHigh) ldg64(base + Nr * D + within * D + c, lo0, lo1);
#pragma unroll
  for (int k = 0; k < kChunk; k++) {
    const u32 lo = ((k < 4 ? lo0 : lo1) >> (8 * (k % 4))) & 0xFF;
    const u32 hbits = ((p0 >> (4 * k)) & 0xF) << 12 | ((p1 >> (4 * k)) & 0xF) << 8 | lo;
    x[k] = toFloat<BF>(readElem<BF>(hbits, tier, adj8, adj4, filter));
  }
}

template <int D, bool BF, int RMAX>
__global__ void __launch_bounds__(kThreads) split_v1(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const int* __restrict__ lens, const int* __restrict__ index, const int* __restrict__ counts,
    const int* __restrict__ offsets, int idxStride,
    const u16* __restrict__ q, float* __restrict__ partO, float* __restrict__ partML, float* __restrict__ scores,
    int Hq, int Hkv, int Tq, int Nr, unsigned nrMagic, int nrShift, int splitLen, int maxSplits, int rowChunks,
    int adj8, int adj4, int filter, float scaleLog2, int wtH, int wtM, int wtL, int costSplits,
    int* __restrict__ counters, u16* __restrict__ out, float* __restrict__ finalML) {
  // nrMagic, nrShift, wtH, wtM, wtL, costSplits (split_mma's mode), counters, out, finalML:
  // split_mma's division by Nr, warp weights, split geometry and fused
  // merge, unused (one launch signature; split_v1 divides by Nr, cuts equal
  // positions and leaves the merge to combine).
  constexpr int kTPR = D / kChunk;      // threads per token row
  constexpr int kTL = kThreads / kTPR;  // token lanes
  static_assert(kTPR <= 32 && kTile % kTL == 0, "tile must split evenly over token lanes");

  __shared__ float sc[RMAX][kTile];
  __shared__ float alpha[RMAX], mrow[RMAX], lrow[RMAX];
  __shared__ float red[kTL][RMAX][D];

  const int split = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y / rowChunks, rc = blockIdx.y % rowChunks;
  const int bh = b * Hkv + h;
  Runs runs;
  runs.init(counts + 4 * bh, offsets ? offsets + 4 * bh : nullptr);
  const int p0 = split * splitLen, pEnd = runs.g3 * kGroup;
  if (p0 >= pEnd) return;
  const int p1 = min(pEnd, p0 + splitLen);
  const int L = lens[b];
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * RMAX, nrows = min(RMAX, R - row0);
  const int tid = threadIdx.x, chunk = tid % kTPR, lane_t = tid / kTPR;
  const int c = chunk * kChunk;
  const int* idx = index + size_t(bh) * idxStride;
  const int* table = blockTable + size_t(b) * maxBlocks;
  const u32 a8 = u32(adj8), a4 = u32(adj4);
  const bool filt = filter != 0;

  float qr[RMAX][kChunk];
  int limit[RMAX];
#pragma unroll
  for (int r = 0; r < RMAX; r++) {
    const int row = row0 + r, i = row / group, hq = h * group + row % group;
    limit[r] = r < nrows ? L - Tq + i : -1;
    if (r < nrows) {
      u32 w[4];
      ldWords<16>(reinterpret_cast<const u8*>(q + ((size_t(b) * Tq + i) * Hq + hq) * D + c), w);
#pragma unroll
      for (int k = 0; k < 4; k++) {
        qr[r][2 * k] = h2f(u16(w[k] & 0xffff)) * scaleLog2;
        qr[r][2 * k + 1] = h2f(u16(w[k] >> 16)) * scaleLog2;
      }
    } else {
#pragma unroll
      for (int k = 0; k < kChunk; k++) qr[r][k] = 0.f;
    }
  }
  float acc[RMAX][kChunk];
  initRowsV1(mrow, lrow, acc, tid);

  for (int tile = p0; tile < p1; tile += kTile) {
    // 1. Scores.
    for (int tt = lane_t; tt < kTile; tt += kTL) {
      const int p = tile + tt;
      int tier = kHigh, e = -1, tok = -1;
      if (p < p1) e = posEntry(runs, p, tier);
      float x[kChunk];
      if (e >= 0) {
        tok = idx[runs.slot(e)];
        const int blk = tok / Nr;
        loadPlaneToken8<D, BF>(pool, Nr, table[blk] * Hkv + h, tok - blk * Nr, 0, c, tier, a8, a4, filt, x);
      } else {
#pragma unroll
        for (int k = 0; k < kChunk; k++) x[k] = 0.f;
      }
#pragma unroll
      for (int r = 0; r < RMAX; r++) {
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < kChunk; k++) s = fmaf(qr[r][k], x[k], s);
#pragma unroll
        for (int off = kTPR / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
        s = (e >= 0 && tok <= limit[r]) ? s : kNegInf;
        if (chunk == 0) {
          sc[r][tt] = s;
          if (scores != nullptr && e >= 0 && r < nrows) scores[(size_t(bh) * R + row0 + r) * idxStride + e] = s;
        }
      }
    }
    __syncthreads();
    // 2. Online softmax, one warp per row (decode.cu's, bitdecode.cuh).
    softmaxRowsV1<RMAX, kThreads>(sc, alpha, mrow, lrow, tid);
    __syncthreads();
    // 3. Values.
    rescaleV1(acc, alpha);
    for (int tt = lane_t; tt < kTile; tt += kTL) {
      const int p = tile + tt;
      if (p >= p1) break;
      int tier;
      const int e = posEntry(runs, p, tier);
      if (e < 0) continue;
      const int tok = idx[runs.slot(e)], blk = tok / Nr;
      float x[kChunk];
      loadPlaneToken8<D, BF>(pool, Nr, table[blk] * Hkv + h, tok - blk * Nr, 1, c, tier, a8, a4, filt, x);
      accumulateV1(acc, sc, tt, x);
    }
    __syncthreads();
  }

  // Sum the token lanes in a fixed order and write this split's partials.
  writeLanePartials<D, RMAX, kTL, kChunk, kThreads>(red, acc, lane_t, c, tid, mrow, lrow, partO, partML, b, Hkv, rowChunks,
                                                    maxSplits, split);
}

// ============================================================================
// combine: decode_combine (bitdecode.cuh's combineRow) with the split count
// of the position space and the final (max, denominator) of every row
// written for the mass pass. One CTA per (KV head and row chunk, sequence,
// row). A row that sees no token (everything it may see is evicted) gets
// zeros.
template <int D, int RMAX>
__global__ void __launch_bounds__(kThreads) combine(
    const float* __restrict__ partO, const float* __restrict__ partML, const int* __restrict__ counts,
    u16* __restrict__ out, float* __restrict__ finalML, int Hq, int Hkv, int Tq, int splitLen, int maxSplits,
    int rowChunks) {
  static_assert(kThreads == kMergeThreads, "combine runs the decode family's merge");
  const int b = blockIdx.y, h = blockIdx.x / rowChunks, rc = blockIdx.x % rowChunks, r = blockIdx.z;
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * RMAX, nrows = min(RMAX, R - row0);
  if (r >= nrows) return;
  const int nSplits = (padGroups(counts + 4 * (b * Hkv + h)) * kGroup + splitLen - 1) / splitLen;
  const size_t part0 = (size_t(b) * Hkv * rowChunks + blockIdx.x) * maxSplits;
  combineRow<D, RMAX, true>(partO, partML, out, nullptr, part0, nSplits, r, b, h, row0, group, Hq, Tq, [&](int row, float m, float total) {
    if (finalML != nullptr && threadIdx.x == 0) {
      finalML[((size_t(b) * Hkv + h) * R + row) * 2] = m;
      finalML[((size_t(b) * Hkv + h) * R + row) * 2 + 1] = total;
    }
  });
}

// mass adds each read token's attention probability, summed over the R query
// rows of its KV head in row order, to mass[b][h][t]. One thread per index
// entry, a grid-stride loop over the (sequence, KV head)'s entries; grid
// (at most entries / kThreads, Hkv, B): the host caps the CTAs (planes.go
// planesMassCTAs), so a launch sized for a long stride but few entries
// does not start CTAs that exit at once. Entries are distinct tokens, so
// no two threads touch one element. Sampling (every > 1, kv.MassSampled):
// row r belongs to query token i = r / (R/Tq) at position lens[b] - Tq + i,
// and only the rows of positions p with p % every == every - 1 add.
__global__ void __launch_bounds__(kThreads) mass(
    const float* __restrict__ scores, const float* __restrict__ finalML, const int* __restrict__ index,
    const int* __restrict__ counts, const int* __restrict__ offsets, float* __restrict__ massOut,
    const int* __restrict__ lens, int Hkv, int R, int Tq, int every, int idxStride, int massStride) {
  const int b = blockIdx.z, h = blockIdx.y, bh = b * Hkv + h;
  const int group = R / Tq, pos0 = lens[b] - Tq;  // query token 0's position
  Runs runs;
  runs.init(counts + 4 * bh, offsets ? offsets + 4 * bh : nullptr);
  for (int e = blockIdx.x * kThreads + threadIdx.x; e < runs.e3; e += gridDim.x * kThreads) {
    float sum = 0.f;
    for (int r = 0; r < R; r++) {
      if (every > 1 && (pos0 + r / group) % every != every - 1) continue;  // not sampled
      const float m = finalML[(size_t(bh) * R + r) * 2], l = finalML[(size_t(bh) * R + r) * 2 + 1];
      const float s = scores[(size_t(bh) * R + r) * idxStride + e];
      if (l > 0.f && s != kNegInf) sum += exp2f(s - m) / l;
    }
    massOut[size_t(bh) * massStride + index[size_t(bh) * idxStride + runs.slot(e)]] += sum;
  }
}

// write splits new tokens into their blocks' planes (the engine's append):
// token t's K and V rows, float32 rounded to fp16 (bf16 when bf16 != 0),
// go to slot within[t] of pool block block[t] (skipped when block[t] < 0),
// kv.PlaneLayout.Split's bytes. One thread per (token, KV head, channel
// pair): it writes one byte of planes 0 and 1 and two of plane 2, in K and V.
//   k, v  [T][Hkv*D] float32;  block, within [T] int32
__global__ void __launch_bounds__(kThreads) write(
    const float* __restrict__ k, const float* __restrict__ v, const int* __restrict__ block, const int* __restrict__ within,
    u8* __restrict__ pool, int T, int Hkv, int D, int Nr, int bf16) {
  const long i = long(blockIdx.x) * kThreads + threadIdx.x;
  const int pairs = D / 2;
  if (i >= long(T) * Hkv * pairs) return;
  const int t = int(i / (long(Hkv) * pairs)), hp = int(i % (long(Hkv) * pairs));
  const int h = hp / pairs, c = 2 * (hp % pairs);
  const int blk = block[t];
  if (blk < 0) return;
  const int w = within[t];
  u8* base = pool + (size_t(blk) * Hkv + h) * (size_t(4) * Nr * D);
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const float* src = (half == 0 ? k : v) + (size_t(t) * Hkv + h) * D + c;
    const u32 h0 = bf16 ? f2bf(src[0]) : f2h(src[0]);
    const u32 h1 = bf16 ? f2bf(src[1]) : f2h(src[1]);
    u8* hb = base + size_t(half) * 2 * Nr * D;
    hb[w * (D / 2) + c / 2] = u8((h0 >> 12) | ((h1 >> 12) << 4));
    hb[Nr * D / 2 + w * (D / 2) + c / 2] = u8(((h0 >> 8) & 0xF) | (((h1 >> 8) & 0xF) << 4));
    *reinterpret_cast<u16*>(hb + Nr * D + w * D + c) = u16((h0 & 0xFF) | ((h1 & 0xFF) << 8));
  }
}


// ============================================================================
// Re-tiering on the device (kvcache.TierPolicy.Retier, engine's GPU cache).
//
// A (sequence slot, layer) of the engine's persistent arrays, sl = slot ·
// layers + layer, holds per KV head h (bh = sl·Hkv + h):
//   mass    [bh][stride] float32  the accumulated attention mass
//   index   [bh][stride] int32    the tier-sorted index (Runs' storage)
//   counts  [bh][4] int32         tokens per tier (HIGH, MEDIUM, LOW, EVICTED)
//   offsets [bh][4] int32         storage offsets of the HIGH, MEDIUM, LOW runs
//
// retier: one CTA of kRetierThreads per (KV head, job). The candidates are
// the tokens t in [sinks, win) (the sinks and the window stay HIGH); each
// has the policy's 64-bit rank key (rankKey: the mass's order key in the
// high word, the position in the low word; distinct, smaller = worse). The
// host gives the cumulative counts kE <= kL <= kM (<= win - sinks) of the
// policy's fill from the bottom, so a candidate of rank r is EVICTED if
// r < kE, LOW if r < kL, MEDIUM if r < kM, else HIGH: with T(k) the key of
// rank k, "r < k" is "key < T(k)". The three T(k) are found together by a
// radix select over the key, 8 bits per pass from the top (4 passes over
// the mass key, then only the position bits a position < win can set):
// per pass, a 256-bin histogram of the keys that match the selection's
// prefix so far (shared atomics, one per distinct digit of a warp: counts
// are integers, so the result is exact and deterministic), then one warp
// per selection scans it for the bin holding its remaining rank. Then the
// tokens are compacted into the index in chunks of kRetierThreads
// (ballots and a scan over the warps, positions ascending within each run),
// the runs stored HIGH, MEDIUM, LOW with the run of tier `last` (the tier
// new tokens get) moved to the end, so that append writes after it.
// Job words (kRetierJob): sl, n (tokens), sinks, win, kE, kL, kM, last.
constexpr int kRetierThreads = 1024;
constexpr int kRetierWarps = kRetierThreads / 32;
constexpr int kRetierJob = 8;
constexpr int kDigitBits = 8, kBins = 1 << kDigitBits;
constexpr int kSelects = 3;  // the thresholds of EVICTED, LOW and MEDIUM
typedef unsigned long long u64;

// massKey is rankKey's high word: an unsigned order of float32 masses in
// which NaN is below every number and -0 equals +0.
BD_DEVICE u32 massKey(float m) {
  const u32 b = __float_as_uint(m);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0;  // NaN
  if ((b & 0x7FFFFFFFu) == 0) return 0x80000000u;  // ±0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__global__ void __launch_bounds__(kRetierThreads) retier(const int* __restrict__ jobs, const float* __restrict__ mass,
                                                         int* __restrict__ index, int* __restrict__ counts,
                                                         int* __restrict__ offsets, int Hkv, int stride) {
  __shared__ u32 hist[kSelects][kBins];
  __shared__ u64 prefix[kSelects];
  __shared__ int remain[kSelects];
  __shared__ int wcnt[kRetierWarps][3], wbase[kRetierWarps][3];
  __shared__ int run[3];
  const int* job = jobs + kRetierJob * blockIdx.y;
  const int sl = job[0], n = job[1], sinks = job[2], win = job[3], last = job[7];
  const int k[kSelects] = {job[4], job[5], job[6]};
  const size_t bh = size_t(sl) * Hkv + blockIdx.x;
  const float* m = mass + bh * stride;
  int* idx = index + bh * stride;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int nc = win - sinks;
  if (tid < kSelects) {
    prefix[tid] = 0;
    remain[tid] = k[tid];
  }
  // Passes: digits of the mass key (bits 63..32), then of the position.
  const int posBits = win > 1 ? 32 - __clz(win - 1) : 0;
  const int posPasses = (posBits + kDigitBits - 1) / kDigitBits;
  // A selection of rank 0 or of every candidate needs no threshold.
  bool anyOn = false;
#pragma unroll
  for (int j = 0; j < kSelects; j++) anyOn = anyOn || (0 < k[j] && k[j] < nc);
  u64 mask = 0;
  for (int pass = 0; anyOn && pass < 32 / kDigitBits + posPasses; pass++) {
    const int shift = pass < 32 / kDigitBits ? 64 - kDigitBits * (pass + 1) : kDigitBits * (32 / kDigitBits + posPasses - 1 - pass);
    for (int i = tid; i < kSelects * kBins; i += kRetierThreads) (&hist[0][0])[i] = 0;
    __syncthreads();
    u64 pre[kSelects];
    bool on[kSelects];
#pragma unroll
    for (int j = 0; j < kSelects; j++) {
      pre[j] = prefix[j];
      on[j] = 0 < k[j] && k[j] < nc;
    }
    // Warp-uniform loop (the ballots below need every lane).
    for (int base = sinks + warp * 32; base < win; base += kRetierThreads) {
      const int t = base + lane;
      const bool in = t < win;
      const u64 key = in ? (u64(massKey(m[t])) << 32 | u32(t)) : 0;
      const u32 d = u32(key >> shift) & (kBins - 1);
#pragma unroll
      for (int j = 0; j < kSelects; j++) {
        const bool hit = in && on[j] && (key & mask) == pre[j];
        const u32 hm = __ballot_sync(0xffffffffu, hit);
        if (hit) {
          const u32 peers = __match_any_sync(hm, d);
          if (lane == __ffs(peers) - 1) atomicAdd(&hist[j][d], u32(__popc(peers)));
        }
      }
    }
    __syncthreads();
    // One warp per selection: lane i holds bins [8i, 8i+8).
    if (warp < kSelects && on[warp]) {
      constexpr int kPer = kBins / 32;
      u32 c[kPer], sum = 0;
#pragma unroll
      for (int i = 0; i < kPer; i++) {
        c[i] = hist[warp][lane * kPer + i];
        sum += c[i];
      }
      const u32 incl = warpInclusiveSum(sum, lane);
      const u32 r = u32(remain[warp]);
      u32 below = incl - sum;
      if (below <= r && r < incl) {  // exactly one lane
#pragma unroll
        for (int i = 0; i < kPer; i++) {
          if (r < below + c[i]) {
            prefix[warp] = pre[warp] | (u64(lane * kPer + i) << shift);
            remain[warp] = int(r - below);
            break;
          }
          below += c[i];
        }
      }
    }
    mask |= u64(kBins - 1) << shift;
    __syncthreads();
  }
  // Thresholds: a candidate with key < thr[j] has rank < k[j].
  u64 thr[kSelects];
#pragma unroll
  for (int j = 0; j < kSelects; j++) thr[j] = k[j] <= 0 ? 0 : k[j] < nc ? prefix[j] : ~u64(0);
  // Run sizes and storage: HIGH, MEDIUM, LOW in order, `last`'s run at the end.
  const int cnt[3] = {n - k[2], k[2] - k[1], k[1] - k[0]};
  int off[3];
  {
    int o = 0;
    for (int t = 0; t < 3; t++) {
      if (t == last) continue;
      off[t] = o;
      o += cnt[t];
    }
    off[last] = o;
  }
  if (tid < 3) run[tid] = 0;
  __syncthreads();
  for (int c0 = 0; c0 < n; c0 += kRetierThreads) {
    const int t = c0 + tid;
    int tier = -1;  // none (past the end, or EVICTED)
    if (t < n) {
      if (t < sinks || t >= win) {
        tier = kHigh;
      } else {
        const u64 key = u64(massKey(m[t])) << 32 | u32(t);
        tier = key < thr[0] ? -1 : key < thr[1] ? kLow : key < thr[2] ? kMedium : kHigh;
      }
    }
    u32 bal[3], below = (1u << lane) - 1;
#pragma unroll
    for (int x = 0; x < 3; x++) bal[x] = __ballot_sync(0xffffffffu, tier == x);
    if (lane < 3) wcnt[warp][lane] = __popc(bal[lane]);
    __syncthreads();
    if (tid < 3) {
      int o = run[tid];
      for (int w = 0; w < kRetierWarps; w++) {
        wbase[w][tid] = o;
        o += wcnt[w][tid];
      }
      run[tid] = o;
    }
    __syncthreads();
    if (tier >= 0) idx[off[tier] + wbase[warp][tier] + __popc(bal[tier] & below)] = t;
  }
  if (tid == 0) {
    int* c = counts + 4 * bh;
    int* o = offsets + 4 * bh;
    c[0] = cnt[0], c[1] = cnt[1], c[2] = cnt[2], c[3] = k[0];
    o[0] = off[0], o[1] = off[1], o[2] = off[2], o[3] = 0;
  }
}

// retier_v2 is retier (v1) with two changes (PlanesRetier.V2 selects it; the
// engine ran v1 until retier_v3, below, which keeps v2's rule):
//  - no position passes: the selections run over the 32-bit mass key only
//    (4 passes), leaving each threshold as (mass key T, remaining rank q
//    among the candidates whose key is T); a candidate with key T is below
//    it iff fewer than q such candidates come before it, which the
//    compaction (in position order) counts with one more ballot and scan;
//  - the histogram loop loads kRetierUnroll keys before it counts any, so
//    a warp waits for one load latency per kRetierUnroll candidates (v1: a
//    pass waited ~1 us per 32·kRetierWarps candidates; measured below).
// v1 on the H100 (one layer, 8 KV heads, B = 1, 2026-11-25): 42 us for 8K
// tokens (h20:m40:l40), 594 us for 128K: latency-bound, 6 passes.
constexpr int kRetierUnroll = 4;
__global__ void __launch_bounds__(kRetierThreads) retier_v2(const int* __restrict__ jobs, const float* __restrict__ mass,
                                                            int* __restrict__ index, int* __restrict__ counts,
                                                            int* __restrict__ offsets, int Hkv, int stride) {
  __shared__ u32 hist[kSelects][kBins];
  __shared__ u32 prefix[kSelects];
  __shared__ int remain[kSelects];
  __shared__ int wcnt[kRetierWarps][kSelects], wbase[kRetierWarps][kSelects];
  __shared__ int run[kSelects];
  const int* job = jobs + kRetierJob * blockIdx.y;
  const int sl = job[0], n = job[1], sinks = job[2], win = job[3], last = job[7];
  const int k[kSelects] = {job[4], job[5], job[6]};
  const size_t bh = size_t(sl) * Hkv + blockIdx.x;
  const float* m = mass + bh * stride;
  int* idx = index + bh * stride;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int nc = win - sinks;
  if (tid < kSelects) {
    prefix[tid] = 0;
    remain[tid] = k[tid];
  }
  bool on[kSelects];
  bool anyOn = false;
#pragma unroll
  for (int j = 0; j < kSelects; j++) {
    on[j] = 0 < k[j] && k[j] < nc;  // else: no candidate (k <= 0) or every one (k >= nc) is below
    anyOn = anyOn || on[j];
  }
  u32 mask = 0;
  for (int pass = 0; anyOn && pass < 32 / kDigitBits; pass++) {
    const int shift = 32 - kDigitBits * (pass + 1);
    for (int i = tid; i < kSelects * kBins; i += kRetierThreads) (&hist[0][0])[i] = 0;
    __syncthreads();
    u32 pre[kSelects];
#pragma unroll
    for (int j = 0; j < kSelects; j++) pre[j] = prefix[j];
    // Warp-uniform loop (the ballots below need every lane).
    for (int base = sinks + warp * 32; base < win; base += kRetierUnroll * kRetierThreads) {
      u32 key[kRetierUnroll];
#pragma unroll
      for (int u = 0; u < kRetierUnroll; u++) {
        const int t = base + u * kRetierThreads + lane;
        key[u] = t < win ? massKey(m[t]) : 0;
      }
#pragma unroll
      for (int u = 0; u < kRetierUnroll; u++) {
        const bool in = base + u * kRetierThreads + lane < win;
        const u32 d = (key[u] >> shift) & (kBins - 1);
#pragma unroll
        for (int j = 0; j < kSelects; j++) {
          const bool hit = in && on[j] && (key[u] & mask) == pre[j];
          const u32 hm = __ballot_sync(0xffffffffu, hit);
          if (hit) {
            const u32 peers = __match_any_sync(hm, d);
            if (lane == __ffs(peers) - 1) atomicAdd(&hist[j][d], u32(__popc(peers)));
          }
        }
      }
    }
    __syncthreads();
    // One warp per selection: lane i holds bins [8i, 8i+8).
    if (warp < kSelects && on[warp]) {
      constexpr int kPer = kBins / 32;
      u32 c[kPer], sum = 0;
#pragma unroll
      for (int i = 0; i < kPer; i++) {
        c[i] = hist[warp][lane * kPer + i];
        sum += c[i];
      }
      const u32 incl = warpInclusiveSum(sum, lane);
      const u32 r = u32(remain[warp]);
      u32 below = incl - sum;
      if (below <= r && r < incl) {  // exactly one lane
#pragma unroll
        for (int i = 0; i < kPer; i++) {
          if (r < below + c[i]) {
            prefix[warp] = pre[warp] | (u32(lane * kPer + i) << shift);
            remain[warp] = int(r - below);
            break;
          }
          below += c[i];
        }
      }
    }
    mask |= u32(kBins - 1) << shift;
    __syncthreads();
  }
  // Thresholds (T, q): with on[j], candidate t is below selection j iff
  // key < T, or key == T and fewer than q candidates of key T precede t.
  u32 thr[kSelects];
  int q[kSelects];
#pragma unroll
  for (int j = 0; j < kSelects; j++) {
    thr[j] = prefix[j];
    q[j] = remain[j];
  }
  const int cnt[3] = {n - k[2], k[2] - k[1], k[1] - k[0]};
  int off[3];
  {
    int o = 0;
    for (int t = 0; t < 3; t++) {
      if (t == last) continue;
      off[t] = o;
      o += cnt[t];
    }
    off[last] = o;
  }
  __shared__ int tieRun[kSelects], tieW[kRetierWarps][kSelects];
  if (tid < kSelects) run[tid] = tieRun[tid] = 0;
  __syncthreads();
  const u32 lanesBelow = (1u << lane) - 1;
  for (int c0 = 0; c0 < n; c0 += kRetierThreads) {
    const int t = c0 + tid;
    const bool cand = t < n && t >= sinks && t < win;
    const u32 key = cand ? massKey(m[t]) : 0;
    // Ties: candidates of key thr[j] before t (this chunk's, by warp and lane).
    u32 tb[kSelects];
#pragma unroll
    for (int j = 0; j < kSelects; j++) tb[j] = __ballot_sync(0xffffffffu, cand && on[j] && key == thr[j]);
    if (lane < kSelects) tieW[warp][lane] = __popc(tb[lane]);
    __syncthreads();
    if (tid < kSelects) {
      int o = tieRun[tid];
      for (int w = 0; w < kRetierWarps; w++) {
        const int x = tieW[w][tid];
        tieW[w][tid] = o;
        o += x;
      }
      tieRun[tid] = o;
    }
    __syncthreads();
    bool below[kSelects];
#pragma unroll
    for (int j = 0; j < kSelects; j++) {
      if (!on[j]) {
        below[j] = k[j] >= nc;  // k <= 0: none; k >= nc: every candidate
      } else {
        below[j] = key < thr[j] || (key == thr[j] && tieW[warp][j] + __popc(tb[j] & lanesBelow) < q[j]);
      }
    }
    int tier = -1;  // none (past the end, or EVICTED)
    if (t < n) {
      if (!cand) {
        tier = kHigh;
      } else {
        tier = below[0] ? -1 : below[1] ? kLow : below[2] ? kMedium : kHigh;
      }
    }
    u32 bal[3];
#pragma unroll
    for (int x = 0; x < 3; x++) bal[x] = __ballot_sync(0xffffffffu, tier == x);
    if (lane < 3) wcnt[warp][lane] = __popc(bal[lane]);
    __syncthreads();
    if (tid < 3) {
      int o = run[tid];
      for (int w = 0; w < kRetierWarps; w++) {
        wbase[w][tid] = o;
        o += wcnt[w][tid];
      }
      run[tid] = o;
    }
    __syncthreads();
    if (tier >= 0) idx[off[tier] + wbase[warp][tier] + __popc(bal[tier] & lanesBelow)] = t;
  }
  if (tid == 0) {
    int* c = counts + 4 * bh;
    int* o = offsets + 4 * bh;
    c[0] = cnt[0], c[1] = cnt[1], c[2] = cnt[2], c[3] = k[0];
    o[0] = off[0], o[1] = off[1], o[2] = off[2], o[3] = 0;
  }
}

// retier_v3 is retier_v2's rule (thresholds of the 32-bit mass key, ties at
// a threshold ranked by position in the compaction) with less work per
// candidate (PlanesRetier's default, the GPU cache's; docs/bitweaver.md,
// "The re-tier's passes"):
//  - digits of kV3Bits (11, 11, 10): 3 passes over the mass instead of 4
//    (v2) or 6-7 (v1: 4 over the mass key, then the position's bits);
//  - a pass counts each distinct prefix once: the selections still being
//    refined whose prefixes are equal share one histogram (the first pass
//    has one for all three), and a key matches at most one distinct
//    prefix, so a candidate costs one ballot, one match and at most one
//    atomic per pass (v1, v2: one of each per selection);
//  - a selection whose remaining rank is 0 after a pass is done: its
//    threshold is its prefix with the low bits 0 (no candidate with that
//    prefix is below it), and later passes skip it;
//  - kV3Unroll keys per lane in flight, the next ones loaded before the
//    current ones are counted;
//  - the compaction takes chunks of kV3Chunk candidates (kV3Unroll per
//    thread, each warp a contiguous run of them) between two barriers, and
//    ranks ties only for a selection whose threshold is tied (remaining
//    rank > 0 after the last pass: two more barriers per chunk).
constexpr int kV3Passes = 3;
constexpr int kV3MaxBits = 11;
constexpr int kV3Bins = 1 << kV3MaxBits;
constexpr int kV3Unroll = 4;
constexpr int kV3Chunk = kRetierThreads * kV3Unroll;
constexpr int kV3None = 3;  // compaction's tier code of a token not stored (past n, or EVICTED)

// v3Bits is the width of pass p's digit (kV3Bits: 11, 11, 10 from the top).
BD_DEVICE int v3Bits(int pass) { return pass < 2 ? 11 : 10; }

__global__ void __launch_bounds__(kRetierThreads, 2) retier_v3(const int* __restrict__ jobs, const float* __restrict__ mass,
                                                               int* __restrict__ index, int* __restrict__ counts,
                                                               int* __restrict__ offsets, int Hkv, int stride) {
  __shared__ __align__(16) u32 hist[kSelects][kV3Bins];
  __shared__ u32 prefixS[kSelects];
  __shared__ int remainS[kSelects];
  __shared__ int wcnt[kRetierWarps][kSelects], wbase[kRetierWarps][kSelects];
  __shared__ int runS[kSelects], offS[kSelects];
  const int* job = jobs + kRetierJob * blockIdx.y;
  const int sl = job[0], n = job[1], sinks = job[2], win = job[3], last = job[7];
  const int k0 = job[4], k1 = job[5], k2 = job[6];
  const size_t bh = size_t(sl) * Hkv + blockIdx.x;
  const float* m = mass + bh * stride;
  int* idx = index + bh * stride;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int nc = win - sinks;
  // Selection j (EVICTED, LOW, MEDIUM threshold): on while it has a
  // threshold to find (0 < k < nc), act while it is being refined.
  const bool on0 = 0 < k0 && k0 < nc, on1 = 0 < k1 && k1 < nc, on2 = 0 < k2 && k2 < nc;
  bool act0 = on0, act1 = on1, act2 = on2;
  u32 pre0 = 0, pre1 = 0, pre2 = 0;
  int rem0 = k0, rem1 = k1, rem2 = k2;
  if (tid < kSelects) {
    prefixS[tid] = 0;
    remainS[tid] = tid == 0 ? k0 : tid == 1 ? k1 : k2;
  }
  u32 mask = 0;
  int shift = 32;
  for (int pass = 0; pass < kV3Passes && (act0 || act1 || act2); pass++) {
    const int bits = v3Bits(pass);
    shift -= bits;
    const u32 dmask = (1u << bits) - 1;
    // Distinct prefixes: selection j counts unless an earlier active one has its prefix.
    const int src1 = act0 && pre0 == pre1 ? 0 : 1;
    const int src2 = act0 && pre0 == pre2 ? 0 : act1 && pre1 == pre2 ? 1 : 2;
    const bool uq0 = act0, uq1 = act1 && src1 == 1, uq2 = act2 && src2 == 2;
    for (int i = tid; i < kSelects * kV3Bins / 4; i += kRetierThreads) reinterpret_cast<uint4*>(&hist[0][0])[i] = make_uint4(0, 0, 0, 0);
    __syncthreads();
    // Warp-uniform loop (the ballots below need every lane); the next
    // kV3Unroll keys load before the current ones are counted.
    int base = sinks + warp * 32;
    u32 key[kV3Unroll];
#pragma unroll
    for (int u = 0; u < kV3Unroll; u++) {
      const int t = base + u * kRetierThreads + lane;
      key[u] = t < win ? massKey(m[t]) : 0;
    }
    for (; base < win; base += kV3Chunk) {
      u32 next[kV3Unroll];
#pragma unroll
      for (int u = 0; u < kV3Unroll; u++) {
        const int t = base + kV3Chunk + u * kRetierThreads + lane;
        next[u] = t < win ? massKey(m[t]) : 0;
      }
#pragma unroll
      for (int u = 0; u < kV3Unroll; u++) {
        const u32 kk = key[u], hi = kk & mask;
        const int s = uq0 && hi == pre0 ? 0 : uq1 && hi == pre1 ? 1 : uq2 && hi == pre2 ? 2 : -1;
        const bool hit = base + u * kRetierThreads + lane < win && s >= 0;
        const u32 hm = __ballot_sync(0xffffffffu, hit);
        if (hit) {
          const u32 bin = u32(s) * kV3Bins + ((kk >> shift) & dmask);
          const u32 peers = __match_any_sync(hm, bin);
          if (lane == __ffs(peers) - 1) atomicAdd(&hist[0][0] + bin, u32(__popc(peers)));
        }
        key[u] = next[u];
      }
    }
    __syncthreads();
    // One warp per active selection scans its prefix's histogram: lane i
    // holds bins [i·per, (i+1)·per), read starting at a lane-dependent bin
    // (fewer bank conflicts; the sum does not care).
    const bool mine = warp == 0 ? act0 : warp == 1 ? act1 : warp == 2 ? act2 : false;
    if (mine) {
      const int src = warp == 0 ? 0 : warp == 1 ? src1 : src2;
      const int per = (1 << bits) / 32, per4 = per / 4;
      const uint4* h4 = reinterpret_cast<const uint4*>(&hist[src][lane * per]);
      u32 sum = 0;
      for (int i = 0; i < per4; i++) {
        const uint4 v = h4[(i + lane) & (per4 - 1)];
        sum += v.x + v.y + v.z + v.w;
      }
      const u32 incl = warpInclusiveSum(sum, lane);
      // The selection's prefix and rank from the registers every thread
      // holds (no read of prefixS or remainS here: one lane writes them).
      const u32 r = u32(warp == 0 ? rem0 : warp == 1 ? rem1 : rem2);
      const u32 pw = warp == 0 ? pre0 : warp == 1 ? pre1 : pre2;
      u32 below = incl - sum;
      if (below <= r && r < incl) {  // exactly one lane
        const u32* h = &hist[src][lane * per];
        for (int i = 0; i < per; i++) {
          if (r < below + h[i]) {
            prefixS[warp] = pw | (u32(lane * per + i) << shift);
            remainS[warp] = int(r - below);
            break;
          }
          below += h[i];
        }
      }
    }
    mask |= dmask << shift;
    __syncthreads();
    pre0 = prefixS[0], pre1 = prefixS[1], pre2 = prefixS[2];
    rem0 = remainS[0], rem1 = remainS[1], rem2 = remainS[2];
    act0 = act0 && rem0 != 0, act1 = act1 && rem1 != 0, act2 = act2 && rem2 != 0;
  }
  // Thresholds (T, q) = (pre, rem): candidate t is below selection j iff
  // key < T, or key == T and fewer than q candidates of key T precede t
  // (only a selection still active after the last pass, its threshold
  // tied, has q > 0). A selection without a threshold gets T = ~0 if every
  // candidate is below it (k >= nc: every key is below ~0, +Inf's being
  // 0xFF800000) and T = 0 if none is (k <= 0).
  if (!on0) pre0 = k0 >= nc ? ~0u : 0u;
  if (!on1) pre1 = k1 >= nc ? ~0u : 0u;
  if (!on2) pre2 = k2 >= nc ? ~0u : 0u;
  const bool tie0 = act0, tie1 = act1, tie2 = act2, anyTie = act0 || act1 || act2;
  if (tid < kSelects) {
    const int cnt[3] = {n - k2, k2 - k1, k1 - k0};
    int o = 0;
    for (int t = 0; t < 3; t++) {
      if (t == last) continue;
      if (t == tid) offS[tid] = o;
      o += cnt[t];
    }
    if (tid == last) offS[tid] = o;
    runS[tid] = 0;
  }
  // Warp 0 scans the warps' counts of each chunk; the running totals of
  // the runs (runS) and of the tied candidates (tieRun) are read and
  // written by its lane 31 only and reach the other lanes by a shuffle (a
  // total read by the whole warp and written by one lane would race within
  // the warp).
  __shared__ int tieRun[kSelects], tieW[kRetierWarps][kSelects];
  if (tid < kSelects) tieRun[tid] = 0;
  __syncthreads();
  const u32 lanesBelow = (1u << lane) - 1;
  for (int c0 = 0; c0 < n; c0 += kV3Chunk) {
    // This warp's tokens: c0 + warp·32·U + u·32 + lane, ascending in (u, lane).
    const int wt = c0 + warp * 32 * kV3Unroll + lane;
    u32 key[kV3Unroll];
#pragma unroll
    for (int u = 0; u < kV3Unroll; u++) {
      const int t = wt + 32 * u;
      key[u] = t < n && t >= sinks && t < win ? massKey(m[t]) : 0;
    }
    // Ties (only when a threshold is tied): this warp's candidates of key
    // T, scanned over the warps; tb0..2 then count the ones before t.
    int tb0 = 0, tb1 = 0, tb2 = 0;
    if (anyTie) {
#pragma unroll
      for (int u = 0; u < kV3Unroll; u++) {
        const int t = wt + 32 * u;
        const bool cand = t < n && t >= sinks && t < win;
        tb0 += __popc(__ballot_sync(0xffffffffu, cand && tie0 && key[u] == pre0));
        tb1 += __popc(__ballot_sync(0xffffffffu, cand && tie1 && key[u] == pre1));
        tb2 += __popc(__ballot_sync(0xffffffffu, cand && tie2 && key[u] == pre2));
      }
      if (lane == 0) tieW[warp][0] = tb0, tieW[warp][1] = tb1, tieW[warp][2] = tb2;
      __syncthreads();
      if (warp == 0) {
#pragma unroll
        for (int j = 0; j < kSelects; j++) {
          const int x = tieW[lane][j];
          const int incl = warpInclusiveSum(x, lane);
          const int run = __shfl_sync(0xffffffffu, lane == 31 ? tieRun[j] : 0, 31);
          tieW[lane][j] = run + incl - x;
          if (lane == 31) tieRun[j] = run + incl;
        }
      }
      __syncthreads();
      tb0 = tieW[warp][0], tb1 = tieW[warp][1], tb2 = tieW[warp][2];
    }
    // Tiers: 2 bits per token (kHigh, kMedium, kLow or kV3None).
    u32 tiers = 0;
    int c[3] = {0, 0, 0};
#pragma unroll
    for (int u = 0; u < kV3Unroll; u++) {
      const int t = wt + 32 * u;
      const bool cand = t < n && t >= sinks && t < win;
      const u32 kk = key[u];
      bool b0 = kk < pre0, b1 = kk < pre1, b2 = kk < pre2;
      if (anyTie) {
        const bool e0 = cand && tie0 && kk == pre0, e1 = cand && tie1 && kk == pre1, e2 = cand && tie2 && kk == pre2;
        const u32 m0 = __ballot_sync(0xffffffffu, e0), m1 = __ballot_sync(0xffffffffu, e1), m2 = __ballot_sync(0xffffffffu, e2);
        b0 = b0 || (e0 && tb0 + __popc(m0 & lanesBelow) < rem0);
        b1 = b1 || (e1 && tb1 + __popc(m1 & lanesBelow) < rem1);
        b2 = b2 || (e2 && tb2 + __popc(m2 & lanesBelow) < rem2);
        tb0 += __popc(m0), tb1 += __popc(m1), tb2 += __popc(m2);
      }
      const int tier = t >= n ? kV3None : !cand ? kHigh : b0 ? kV3None : b1 ? kLow : b2 ? kMedium : kHigh;
      tiers |= u32(tier) << (2 * u);
#pragma unroll
      for (int x = 0; x < 3; x++) c[x] += __popc(__ballot_sync(0xffffffffu, tier == x));
    }
    if (lane == 0) wcnt[warp][0] = c[0], wcnt[warp][1] = c[1], wcnt[warp][2] = c[2];
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int x = 0; x < 3; x++) {
        const int v = wcnt[lane][x];
        const int incl = warpInclusiveSum(v, lane);
        const int run = __shfl_sync(0xffffffffu, lane == 31 ? runS[x] : 0, 31);
        wbase[lane][x] = offS[x] + run + incl - v;
        if (lane == 31) runS[x] = run + incl;
      }
    }
    __syncthreads();
    int b[3] = {wbase[warp][0], wbase[warp][1], wbase[warp][2]};
#pragma unroll
    for (int u = 0; u < kV3Unroll; u++) {
      const int tier = (tiers >> (2 * u)) & 3;
#pragma unroll
      for (int x = 0; x < 3; x++) {
        const u32 bal = __ballot_sync(0xffffffffu, tier == x);
        if (tier == x) idx[b[x] + __popc(bal & lanesBelow)] = wt + 32 * u;
        b[x] += __popc(bal);
      }
    }
  }
  if (tid == 0) {
    const int cnt[3] = {n - k2, k2 - k1, k1 - k0};
    int* cn = counts + 4 * bh;
    int* o = offsets + 4 * bh;
    cn[0] = cnt[0], cn[1] = cnt[1], cn[2] = cnt[2], cn[3] = k0;
    o[0] = offS[0], o[1] = offS[1], o[2] = offS[2], o[3] = 0;
  }
}

// append adds the batch's new tokens to the persistent index: sequence j's
// tokens [pos, pos+len) join the run of tier nt, which is the last run
// stored (retier puts it there; an empty index has every run at 0), so the
// entries go right after it and nothing moves. One CTA per (KV head, layer,
// sequence of the batch); job words (kAppendJob): slot, pos, len, nt.
constexpr int kAppendJob = 4;
__global__ void __launch_bounds__(kThreads) append(const int* __restrict__ jobs, int* __restrict__ index,
                                                   int* __restrict__ counts, int* __restrict__ offsets, int Hkv,
                                                   int layers, int stride) {
  const int* job = jobs + kAppendJob * blockIdx.z;
  const int slot = job[0], pos = job[1], len = job[2], nt = job[3];
  const size_t bh = (size_t(slot) * layers + blockIdx.y) * Hkv + blockIdx.x;
  int* c = counts + 4 * bh;
  const int start = offsets[4 * bh + nt] + c[nt];
  for (int j = threadIdx.x; j < len; j += kThreads) index[bh * stride + start + j] = pos + j;
  __syncthreads();  // every thread has read c[nt]
  if (threadIdx.x == 0) c[nt] += len;
}

}  // namespace planes

// decode_mma.cu: tensor-core split-KV decode attention over bitdecode's
// low-bit KV cache (BitDecoding's design, our own code).
//
//   out[b,i,hq,:] = softmax_t(scale · q[b,i,hq,:]·K[b,t,h,:]) · V[b,t,h,:],  t <= L_b - Tq + i
//
// Operand roles (KERNELS.md §4): the query rows of a KV head (Hq/Hkv heads x
// Tq tokens, at most 8 per CTA; more go to further row chunks) are the N=8
// side of mma.sync.m16n8k16, so a GQA group of 4-8 wastes nothing on M:
//   scores  S^T[16 tokens x 8 rows] += K[16 tokens x 16 ch] · Q^T[16 ch x 8 rows]
//   output  O^T[16 ch x 8 rows]     += V^T[16 ch x 16 tokens] · P^T[16 tokens x 8 rows]
// K and V blocks are stored in kv's mma order (kv/mma.go): each lane loads
// its own A fragments with 16-byte loads, in the order it consumes them, and
// unpacks two codes per instruction pair (shift + lop3 with the fp16 magic
// 1024, then one f16x2 subtract: exact integers). Scales never enter the
// inner loop:
//   K per channel (KC): B = fp16(Q ⊙ s[g,:]), one bias Q·z[g,:] per row,
//                       recomputed once per key group of G tokens;
//   K per token (KT):   S = s_t·(Q·codes) + z_t·ΣQ per channel group;
//   V per token:        B = fp16(p_t·s_t) per channel group, plus Σ p_t·z_t.
// The fp16 residual block (newest L % Nr tokens, kept in mma order too) is the
// same code with 16-bit codes and no scales.
//
// Work: a CTA of 4 warps per (split of whole blocks, KV head x row chunk,
// sequence). Each warp runs its own online softmax over tiles of 16·MT
// tokens (tiles w, w+4, ...), so warps never wait for each other; the P
// fragments go from the S^T accumulator layout to the B operand layout of
// the second mma with movmatrix.trans. At the end the 4 warps are merged in
// a fixed order through shared memory and the split's partial (unnormalized
// O, running max, denominator) goes to global memory; the last CTA of the
// row chunk to finish merges the splits in order (finishSplits; past 64
// splits decode_combine does, in a second launch). The only atomic is that
// counter: which CTA merges varies, the merge's order does not, so the
// result is bitwise deterministic. A row chunk of a sequence with a single
// split skips all of that: its CTA writes the output (finishOneSplit).
//
// Versions (H100, Hq=32 Hkv=8 D=128; us and fraction of the 3.02 TB/s read
// ceiling; docs/perf/decode-attention.md has every step):
//   v1 decode.cu: CUDA cores, 8 channels per thread, shuffle reductions.
//      fp16 (128,8K) 3148 us 45%; int4 3663 us 10%: issue-bound.
//   v2   tensor cores, fragment-ordered blocks, folded scales, warps on
//        interleaved tiles, one-CTA-per-row-chunk combine.
//        fp16 (128,8K) 1408 us 101%; int4 KC 614 us 62%, KT 430 us 88%.
//   v2.1 contiguous tile runs per warp (one refold per key group), parallel
//        combine, at least 4 tiles per warp per split: (1,8K) int4 53 -> 23 us,
//        fp16 56 -> 29 us; int4 KC (128,8K) 70%.
//   v2.2 register double buffering of the next tile: fp16 (16,32K) 91 -> 96%;
//        rejected for low-bit formats (occupancy, see kPrefetch).
//   v2.3 bigger tiles for low-bit formats (256 lane bytes: int8 MT=2, int4 4,
//        int2 8): int8 (128,8K) 80 -> 92%, int4 KC 67 -> 76%, int2 46 -> 53%.
//   v2.4 cp.async staging of the code bytes through a per-warp ring (template
//        parameter ST): slower (int4 KC 76 -> 74%, int2 (16,32K) -9%); off by
//        default; replaced by v2.11's ring.
//   v2.5 the merge of the splits folded into this kernel (finishSplits,
//        bitdecode.cuh: the last CTA of a row chunk merges, in split order):
//        (1,8K) int4 KC 18.4 -> 16.4 us. v3.1 (decode.go) plans the splits
//        for whole waves: one for a single sequence, about four otherwise.
//   v3   the Hopper variant, decode_wgmma.cu (TMA ring + wgmma).
//   v2.6 two instructions per unpacked register (code: masks in place, an
//        fma for the scaled positions, a byte permute for int8), int2 tiles
//        of 4 groups at 168 registers: int4 KC (128,8K) 77 -> 83%, int2
//        52 -> 58%, k4v2 66 -> 69%; wgmma int8 92 -> 97%.
//   v2.7 low-bit formats pipeline each warp's tiles in place: as soon as a
//        group's codes (and KT/V pairs) are consumed, the next tile's are
//        loaded into the same registers, and the warp's first tile and KC
//        key pairs are requested before the query setup; the KC pairs of a
//        warp's next key group are staged in shared memory by cp.async.
//        Same arithmetic, same bits; 254-255 registers, 2 CTAs/SM, int2 at
//        MT 8: int4 KC (128,8K) 83 -> 90%, int4 KT 81 -> 93% (now mma's
//        for all but one short sequence), int2 58 -> 64%, k4v2 69 -> 79%
//        (docs/perf/decode-attention.md, session 7).
//   v2.8 K·q on int8 tensor cores for int2 and int4 keys (Q8K): the codes
//        widened to bytes by masks, the query in 16-bit fixed point (two
//        m16n8k32, exact in int32): 2-4x lower error against the float64
//        reference, k4v2 +1-3%, int4 +0-2%, int2 tied (session 8).
//   v2.9 P·V on int8 tensor cores for int2 values (P8V, valuesI8): the
//        codes widened to bytes by a shift, two permutes and four masks per
//        word, the weights p·s in 20-bit fixed point per row and tile (three
//        bytes, three m16n8k32, exact in int32; session 9): correct, but
//        2-8% slower for int2 and k4v2 (2.5x the tensor time of the
//        fp16 P·V, per-tile conversion, spills); off by default.
//   v2.11 the cp.async ring (ST > 0, Ring): each warp's tiles, with their
//        pairs, staged in shared memory ST-1 ahead, each group read just
//        before its mma (164-225 registers, int2/k4v2/int4 KC at 3 CTAs per
//        SM without spills), redO in the ring. Bitwise equal to v2.7's
//        pipeline, but 2-17% slower at 2 CTAs and tied to 23% slower at 3
//        (session 11); off by default (BITDECODE_DECODE_STAGES).
//   v2.12 fewer instructions per element in the tile loop (session 12): int2
//        and int4 values enter the P·V mma as fp16 subnormals (unpackV: one
//        and per register; unscaleV after the loop), the mask only in tiles
//        that need it, the pipeline's positions stepped instead of divided,
//        ex2 for exp2f (foldEx2), no rescale when no row's max rises, rni by
//        an fp32 add: executed instructions per tile int2 2114 -> 1594, k4v2
//        1142 -> 859, int4 KC 1122 -> 843, KT 958 -> 695 (NVRTC 11.8 SASS).
//        At the >= 64 MiB rows int2 1.09-1.14x (128 x 8K 63 -> 73% of the
//        ceiling), k4v2 1.03-1.05x (81 -> 86%), int4 KC 1.01-1.02x, KT a tie;
//        not bitwise (unpackV).
//   v2.13 the KC refold's own chain and count (session 13): the max of
//        |q·s| and each row's tile max as trees, the fixed-point query packed
//        in 4 permutes per 4 values (were 6), and int2's staged key pairs
//        widened to floats once per warp (8 conversions per lane, were 64):
//        static loop int2 1748 -> 1690 instructions, k4v2 1183 -> 1168, int4
//        KC 1141 -> 1125 (NVRTC 11.8); same bits as v2.12. H100: int2
//        1.002-1.010x at the >= 64 MiB rows (128 x 8K 72.8 -> 73.6%), k4v2
//        and int4 KC ties. ncu: CUDA 13's int2 spill (the loop counter,
//        reloaded behind the value loads) holds ~19% of the warps' stall
//        samples: the next thing to remove.
//   v2.15 a row chunk whose sequence has one split (128 x 8K, int2 at max
//        batch) writes its output from the CTA (finishOneSplit): no partial,
//        fence, counter or merge; the same bits (session 15). H100, 128 x
//        8K: int2 1.045x (72.5 -> 75.9% of the ceiling), k4v2 1.032x (85.6
//        -> 88.5%), int4 KC 1.033x (92.5 -> 95.7%), KT 1.033x (94.1 ->
//        97.4%); int2 at max batch (100 x 32K) 38.8 -> 38.5 ms a step.
//   v2.16 (session 17) a programmatic dependent of the KV append or pack
//        ahead of it in the step: lens, the block table and each warp's
//        first tile of the blocks packed before the launch's tokens are read
//        before gridDependencyWait (oldBlocks), the query and residual after;
//        the warp's first block-table entry is read beside lens (guessed for
//        a whole split); the fused merge counts with one thread's acq_rel
//        fences (lastArrivalRel). Same bits. H100, B = 1 step: int4 32K 6.50
//        -> 6.40 ms, 128K 7.66 -> 7.59, int2 32K 6.39 -> 6.33, 128K 7.10 ->
//        7.05 (two alternated pairs; one earlier pair had int4 32K +0.13);
//        bench attn (a spin ahead: no overlap) within +-0.5 us.
//   v2.17 (session 18) the fused merge's loads ahead (bitdecode.cuh's
//        finishSplits as planes' v2.10 and decode_wgmma's v3.4 schedule
//        it): the last CTA reads each split's (max, denominator) once as a
//        pair and its first kMergeAheadMMA partials of O before the weights
//        are made: about two L2 round trips where v2.5-v2.16 waited for
//        four or five. Same bits (v2.5's operations in their order).
//   v2.18 (session 19) the warp merge that writes a split's partial by (row,
//        4 channels) pieces (bitdecode.cuh's mergeWarps4): the max and the
//        warps' weights once per piece, float4 loads and stores; the same
//        bits. The launch timeline (BD_TIMELINE) measured the old one-channel
//        loop at 1.1-2.1 us of every one-sequence CTA's ~4.5 us tail.
//   v2.21 (session 21-int2) the tile loop's instructions: the pipeline's
//        pair loads from one base pointer a tile (pairBase; 4 instructions a
//        load were the int offset's sign extension and 64-bit add), int2's
//        refold rounding q·s·inv by one fma (rniMul16): the int2 loop 1717 ->
//        1615 static instructions (NVRTC 12.5), k4v2 1141 -> 1125. H100:
//        int2 1.7-2.1% faster at the >= 64 MiB rows (128 x 8K 74.2 -> 75.0%
//        of the ceiling), k4v2 a tie. The next block asked of L2 ahead
//        (prefetch.global.L2) made int2 6-9% and k4v2 30-42% slower: dropped.
//   v2.24 (session 24) int2 keys whose key group is one tile (LA) refold the
//        query for tile i+1 after tile i's softmax, in the basic block of
//        its P·V (refoldLA), with the query floats parked in redO (no spill
//        on CUDA 13, where main spilled 48 / 84 bytes); the same bits. H100:
//        int2 1.08-1.09x at 55 and 100 x 32K and 128 x 8K (100 x 32K 798 ->
//        735 us, 77.8 -> 84.1-85.2% of the ceiling), 1.05-1.07x at 16 x
//        32K, 32 x 8K, 8 x 32K, 1 x 128K; on where a split gives a warp >= 4
//        tiles (decode.go's mmaLA: one sequence at 8K and 32K was 0.2-0.3 us
//        slower). The next tile's scores there too (mode 2, 116 / 108 bytes
//        of spill) were 5-6% slower than main: dropped.
//   v2.33 (session 30) plans of one split length for every sequence
//        (splitCap 0, all but the batch-invariant mode's) compile without
//        the per-sequence split rule (BD_SEQ_SPLITS=0, kSeqSplits): its
//        register had made CUDA 13 spill int2's look-ahead kernel (28 / 32
//        bytes) since the rule came in; the same bits.
//   v2.34 (session 31) the per-sequence look-ahead kernel (the
//        batch-invariant mode's from 32K) with a leaner tile loop
//        (kSeqLean: BD_SEQ_LEAN=1): CUDA 13 28 / 32 -> 0 / 0 bytes of
//        spill, int2 batch-invariant 100 x 32K 885 -> 835 us, 8 x 32K 84 ->
//        81, 1 x 128K 43.0 -> 40.8; the same bits.
// The fragment layout, the unpack, the online softmax and the merges are the
// decode family's, in bitdecode.cuh.
// Go wrapper and tests: decode.go (planMMA), decode_test.go.

#include "bitdecode.cuh"

namespace mma {

// kSeqSplits (v2.33): the kernel reads per-sequence splits (splitCap > 0:
// each sequence's split from its own length, seqSplitLen). Compiled with
// -DBD_SEQ_SPLITS=0 (decode.go's mmaFixedSplitDefine, every plan whose
// splitCap is 0) the split length is the kernel argument itself, a
// constant-bank operand, where seqSplitLen's value held a register from
// the sequence's length to the split count after the tile loop: on CUDA
// 13's ptxas that made int2's look-ahead kernel spill 28 / 32 bytes (it had
// none before the per-sequence splits), int2 100 x 32K 735 -> 762 us and 1 x
// 128K 41.2-41.7 -> 42.8 us (docs/perf/decode-attention.md, session 30).
// The same values either way, so the same bits.
#ifndef BD_SEQ_SPLITS
#define BD_SEQ_SPLITS 1
#endif
constexpr bool kSeqSplits = BD_SEQ_SPLITS != 0;

// kSeqLean (v2.34): the per-sequence kernel (kSeqSplits, the batch-invariant
// mode's) with a tile loop that holds fewer values: its packed tiles'
// mask without the split's end (kNoEnd), the loop in two copies (one for a
// warp whose tiles are all full, without the mask's values), and what the
// code after the loop needs (the split's range, the residual's, the mask's
// limits) parked in shared memory rather than held through the loop.
// Compiled in by -DBD_SEQ_LEAN=1 (decode.go's mmaSeqLeanDefine,
// MMATuning.SeqLean); without it the code is that of before, byte for byte.
// The rule's values had made CUDA 13 spill int2's look-ahead kernel (28 / 32
// bytes, 6 local loads a tile: session 30); v2.34 has none (CUDA 13: 0 / 0;
// int2 batch-invariant 100 x 32K 885 -> 835 us, 1 x 128K 43.0 -> 40.8:
// docs/perf/decode-attention.md, session 31). The same values either way,
// so the same bits.
#ifndef BD_SEQ_LEAN
#define BD_SEQ_LEAN 0
#endif
constexpr bool kSeqLean = kSeqSplits && BD_SEQ_LEAN != 0;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// kNoEnd is the packed tiles' end in tile's mask with kSeqLean: none. A
// packed tile ends at or before the split's packed end, itself at or
// before the split's end t1, so t >= t1 never masks a packed token; t1
// there kept the split's end in a register through the loop.
constexpr int kNoEnd = 0x7fffffff;

// WarpState is one warp's online softmax over its tiles (bitdecode.cuh):
// lane (g, q) holds rows 2q and 2q+1, and O^T accumulators acc[mb] =
// (ch 16mb+g, rows 2q/2q+1), (ch 16mb+g+8, rows 2q/2q+1).
template <int D, int VG>
using WarpState = OnlineSoftmaxZ<D / 16, VG>;

// TileRaw is one tile's packed K and V words of one lane, loaded ahead of
// their use, and (where the kernel preloads them, PP in tile) the (scale,
// zero) words its tokens g and g+8 of each group need: the KT key pairs
// (kp, KG per token) and the value pairs (vp, VG per token).
template <int D, int KBITS, int VBITS, int MT, int KG = 1, int VG = 1>
struct TileRaw {
  u32 k[MT][Frag<D, KBITS>::kWords];
  u32 v[MT][Frag<D, VBITS>::kWords];
  u32 kp[MT][2][KG];
  u32 vp[MT][2][VG];
};

template <int D, int KBITS, int VBITS, int MT, int KG, int VG>
BD_DEVICE void loadTile(TileRaw<D, KBITS, VBITS, MT, KG, VG>& raw, const u8* __restrict__ kdat, const u8* __restrict__ vdat, int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    loadGroup<D, KBITS>(kdat + mt * Frag<D, KBITS>::kGroupBytes, lane, raw.k[mt]);
    loadGroup<D, VBITS>(vdat + mt * Frag<D, VBITS>::kGroupBytes, lane, raw.v[mt]);
  }
}

// TilePos is where a tile of a packed block is: its block's K and V halves
// and its first token's offset in the block (a multiple of kFragTokens).
struct TilePos {
  const u8* khalf;
  const u8* vhalf;
  int within;
};

// v2.11: the cp.async ring. Each warp streams its tiles through ST slots of
// shared memory, ST-1 tiles ahead of the one it computes; tile() reads each
// fragment group's words (and its (scale, zero) words) from the slot just
// before the group's mma, so only one group at a time lives in registers
// instead of a whole tile (v2.7's in-place pipeline held MT groups plus the
// next tile's, 254 registers). A slot is one tile of the packed block, in
// the global layout: the K groups, the V groups, the tile's KT pairs, its
// value pairs and, when the tile opens a key group (KC), the group's D key
// pairs. Every region is a multiple of 16 bytes; the lanes copy it with
// 16-byte cp.async at lane·16 + 512·i, which for D >= 128 (16-byte lane
// chunks) are exactly the bytes each lane later reads. (v2.4's ring copied
// only the codes and loaded the whole tile into registers again.)
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, int MT>
struct Ring {
  static constexpr int kTT = MT * kFragTokens;
  static constexpr int kK = 0;                                                       // K groups
  static constexpr int kV = kK + MT * Frag<D, KBITS>::kGroupBytes;                   // V groups
  static constexpr int kKP = kV + MT * Frag<D, VBITS>::kGroupBytes;                  // KT pairs
  static constexpr int kVP = kKP + (KBITS < 16 && !KC ? kTT * 4 * KG : 0);           // value pairs
  static constexpr int kKC = kVP + (VBITS < 16 ? kTT * 4 * VG : 0);                  // KC pairs
  static constexpr int kSlot = kKC + (KBITS < 16 && KC ? 4 * D : 0);                 // Go: mmaRingSlot
  static_assert(kV % 16 == 0 && kKP % 16 == 0 && kVP % 16 == 0 && kKC % 16 == 0 && kSlot % 16 == 0, "16-byte regions");
};

// copyAsync starts the copy of N bytes (a multiple of 16) from global src to
// shared dst by the 32 lanes of a warp, 16 bytes per cp.async.
template <int N>
BD_DEVICE void copyAsync(u8* dst, const u8* __restrict__ src, int lane) {
#pragma unroll
  for (int o = lane * 16; o < N; o += 32 * 16) cpAsync16(dst + o, src + o);
}

// ringKGroup reads group mt's K words (and KT pairs of tokens g, g+8) of the
// tile in slot into raw.
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, int MT>
BD_DEVICE void ringKGroup(TileRaw<D, KBITS, VBITS, MT, KG, VG>& raw, int mt, const u8* slot, int lane) {
  using R = Ring<D, KBITS, VBITS, KC, KG, VG, MT>;
  loadGroupShared<D, KBITS>(slot + R::kK + mt * Frag<D, KBITS>::kGroupBytes, lane, raw.k[mt]);
  if (KBITS < 16 && !KC) {
#pragma unroll
    for (int hf = 0; hf < 2; hf++)
#pragma unroll
      for (int k = 0; k < KG; k++)
        raw.kp[mt][hf][k] = *reinterpret_cast<const u32*>(slot + R::kKP + 4 * ((mt * kFragTokens + lane / 4 + 8 * hf) * KG + k));
  }
}

// ringVGroup is ringKGroup for the values: V words and value pairs.
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, int MT>
BD_DEVICE void ringVGroup(TileRaw<D, KBITS, VBITS, MT, KG, VG>& raw, int mt, const u8* slot, int lane) {
  using R = Ring<D, KBITS, VBITS, KC, KG, VG, MT>;
  loadGroupShared<D, VBITS>(slot + R::kV + mt * Frag<D, VBITS>::kGroupBytes, lane, raw.v[mt]);
  if (VBITS < 16) {
#pragma unroll
    for (int hf = 0; hf < 2; hf++)
#pragma unroll
      for (int k = 0; k < VG; k++)
        raw.vp[mt][hf][k] = *reinterpret_cast<const u32*>(slot + R::kVP + 4 * ((mt * kFragTokens + lane / 4 + 8 * hf) * VG + k));
  }
}

// Flag carries a compile-time bool through a generic lambda's argument.
template <bool B>
struct Flag {
  static constexpr bool value = B;
};

// splitParam turns a (scale, zero) word of package kv (fp16 pairs, scale in
// the low half) into floats: param's arithmetic on a preloaded word.
BD_DEVICE void splitParam(u32 v, float& s, float& z) {
  s = h2f(u16(v & 0xffff));
  z = h2f(u16(v >> 16));
}

// v2.8: K·q on int8 tensor cores (mma.sync.m16n8k32, u8 codes x 8-bit
// query halves, int32 accumulators) for int2 and int4 keys. The kv.MMA
// words widen to bytes with masks alone: in an int2 word, w & 0x03030303
// holds the codes of token g at channels 32j+2q, 32j+16+2q, 32j+2q+1,
// 32j+17+2q (word j), w & 0x0c0c0c0c the same channels of token g+8 times
// 4, and w >> 4 the channels 8 above; in an int4 word (16-channel block kb),
// w & 0x0f0f0f0f is token g at 16kb+2q, +8, +1, +9 and w & 0xf0f0f0f0 token
// g+8 times 16. So the A fragment of one m16n8k32 (rows g, g+8; k 4q.. and
// 16+4q..) is one int2 word or two int4 words; the query's B fragment puts
// the same channels in the same byte order, and the factor on token g+8 is
// taken out of its accumulators afterwards (an exact power of two).
//
// The query side is q'_c = q_c·s_c (keys per channel, per key group) or q_c
// (per token) in 16-bit fixed point per row: n_c = rn(q'_c·kQ8Max/max|q'|),
// Δ = max|q'|/kQ8Max, stored as a signed high byte (n >> 8) and an unsigned
// low byte (n & 255); two mmas give Σ code·hi and Σ code·lo exactly and
// the score is Δ·(256·Σhi + Σlo). Its error against the exact q' is at most
// Δ/2 per channel for the rounding of n, plus |q'|·1.5·2^-22 <= Δ·1.5·2^-7
// for the float scaling (the approximate reciprocal, 2^-23, and three
// roundings), so at most Δ/2 (1 + 2^-5) Σ_c code_c for the score: the term
// the test's bound adds (decode_test.go, q8ScoreTerm).

// kQ8Max is the largest |n| of the fixed-point query: 2^15 - 1, so that
// n >> 8 fits a signed byte.
constexpr float kQ8Max = 32767.f;

// mmaI8 is mma.sync.m16n8k32 with unsigned 8-bit A and signed (S) or
// unsigned B: c += A·B in int32, exact.
template <bool S>
BD_DEVICE void mmaI8(int c[4], const u32 a[4], u32 b0, u32 b1) {
  if (S)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// I8 is the int8 path's geometry for BITS-bit keys: the masks of token g's
// codes and of token g+8's (scaled by kUp) in a word.
template <int BITS>
struct I8 {
  static_assert(BITS == 2 || BITS == 4, "int8 K·q widens int2 and int4 codes");
  static constexpr u32 kLow = BITS == 2 ? 0x03030303u : 0x0f0f0f0fu;
  static constexpr u32 kHigh = BITS == 2 ? 0x0c0c0c0cu : 0xf0f0f0f0u;
  static constexpr float kDown = BITS == 2 ? 0.25f : 0.0625f;  // 1 / kUp
};

// widen8 returns the A fragment of m16n8k32 number j (channels 32j..32j+31)
// from a lane's K words: one int2 word (a shift and four masks) or two int4
// words (two masks each).
template <int BITS>
BD_DEVICE void widen8(const u32* w, int j, u32 a[4]) {
  if (BITS == 2) {
    const u32 x = w[j], y = x >> 4;
    a[0] = x & I8<BITS>::kLow, a[1] = x & I8<BITS>::kHigh, a[2] = y & I8<BITS>::kLow, a[3] = y & I8<BITS>::kHigh;
  } else {
    const u32 x = w[2 * j], y = w[2 * j + 1];
    a[0] = x & I8<BITS>::kLow, a[1] = x & I8<BITS>::kHigh, a[2] = y & I8<BITS>::kLow, a[3] = y & I8<BITS>::kHigh;
  }
}

// Q8 is the query rows' B operand of the int8 path: the high and low bytes
// of n for each m16n8k32 and, in the C layout, Δ of rows 2q (e even) and
// 2q+1 (e odd), divided by kUp for tokens g+8 (e >= 2).
template <int D>
struct Q8 {
  u32 hi[D / 32][2], lo[D / 32][2];
  float dq[4];
};

// kRoundMagic is 1.5·2^23: for |x| < 2^22, the float x + kRoundMagic has
// the ulp 1, so the addition rounds x to the nearest integer n, ties to even
// (cvt.rni's n), and its low 16 bits are n's (two's complement).
constexpr float kRoundMagic = 12582912.f;

// rni16 returns a word whose low 16 bits are rn(x) for |x| <= 2^15 (v2.12:
// one fp32 add, where cvt.rni.s32.f32 took the conversion pipe at a quarter
// of the rate; same n).
BD_DEVICE u32 rni16(float x) { return __float_as_uint(__fadd_rn(x, kRoundMagic)); }

// rniMul16 returns a word whose low 16 bits are rn(x·y) for |x·y| <= 2^15
// (session 21): one fma, the product exact inside it, where rni16(x·y)
// rounded the product to a float first (an fmul and an fadd). So n is the
// nearest integer to x·y itself: makeQ8's error per channel is at most 1/2 +
// 32767·2^-22 of Δ (the rounding of q·s and the approximate reciprocal in
// inv), inside the Δ/2 (1 + 2^-5) the bound allows, and one rounding less
// than before; n differs from rni16's where fl(x·y) crossed a half.
BD_DEVICE u32 rniMul16(float x, float y) { return __float_as_uint(__fmaf_rn(x, y, kRoundMagic)); }

// makeQ8 quantizes q'_c = qf·sc of row g (the lane's B channels, as makeB
// reads them) to Q8 for BITS-bit keys: the row's max |q'| over its quad.
template <int D, int BITS>
BD_DEVICE void makeQ8(const float qf[D / 16][4], const float* sc, int qd, Q8<D>& o) {
  // v2.13: the max as a tree (depth 5 for D = 128, was a chain of 32):
  // fmaxf is exact and ignores a NaN beside a number, and the final max
  // with 0 maps an all-NaN row to 0 as the chain from 0 did: the same mx.
  float m[D / 16];
#pragma unroll
  for (int kb = 0; kb < D / 16; kb++) {
    const float a0 = fabsf(qf[kb][0] * sc[4 * kb]), a1 = fabsf(qf[kb][1] * sc[4 * kb + 1]);
    const float a2 = fabsf(qf[kb][2] * sc[4 * kb + 2]), a3 = fabsf(qf[kb][3] * sc[4 * kb + 3]);
    m[kb] = fmaxf(fmaxf(a0, a1), fmaxf(a2, a3));
  }
  if constexpr (D / 16 >= 16) {
#pragma unroll
    for (int i = 0; i < 8; i++) m[i] = fmaxf(m[i], m[i + 8]);
  }
  if constexpr (D / 16 >= 8) {
#pragma unroll
    for (int i = 0; i < 4; i++) m[i] = fmaxf(m[i], m[i + 4]);
  }
  m[0] = fmaxf(fmaxf(m[0], m[2]), fmaxf(m[1], m[3]));
  float mx = fmaxf(0.f, m[0]);
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  float rcp;  // 1/mx within 2^-23 (rcp.approx; 0 -> +inf, then inv 0)
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(rcp) : "f"(mx));
  const float inv = mx > 0.f ? kQ8Max * rcp : 0.f, delta = mx * (1.f / kQ8Max);
#pragma unroll
  for (int j = 0; j < D / 32; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      u32 n[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        // byte i of b_h: int2 (word j) channels 32j+2q, +16, +1, +17 (+8 for
        // b1); int4 (words 2j, 2j+1 for b0, b1) 16kb+2q, +8, +1, +9.
        const int kb = BITS == 2 ? 2 * j + (i & 1) : 2 * j + h;
        const int e = BITS == 2 ? 2 * h + (i >> 1) : ((i & 1) << 1) | (i >> 1);
        // session 21: int2 keys (a refold every tile) by one fma; int4 keys
        // keep rni16 of the product, and their bits.
        const float qs = qf[kb][e] * sc[4 * kb + e];
        n[i] = BITS == 2 ? rniMul16(qs, inv) : rni16(qs * inv);
      }
      // v2.13: (n0.b0, n1.b0, n0.b1, n1.b1) and the same of n2, n3, then
      // their low and high halves: 4 permutes for 4 values (were 6).
      const u32 a = prmt(n[0], n[1], 0x5140u), c = prmt(n[2], n[3], 0x5140u);
      o.lo[j][h] = prmt(a, c, 0x5410u);
      o.hi[j][h] = prmt(a, c, 0x7632u);
    }
  float d[2];
  toC(delta, qd, d);
  o.dq[0] = d[0], o.dq[1] = d[1], o.dq[2] = d[0] * I8<BITS>::kDown, o.dq[3] = d[1] * I8<BITS>::kDown;
}

// pairBase is where lane's token g of the tile at within (its first token in
// the block half at half) finds its G (scale, zero) words: the tile's token
// g + t, word k is at pairBase + 4 (t·G + k), t and k constants after
// unrolling, so the loads take them as immediates (session 21).
BD_DEVICE const u8* pairBase(const u8* half, int paramsOff, int within, int G, int lane) {
  return half + paramsOff + size_t(4 * G) * size_t(within + lane / 4);
}

// loadKGroup loads fragment group mt of the tile at pos into raw: the lane's
// K words and, with PP and per-token keys, the KT pairs of tokens g, g+8.
template <int D, int KBITS, bool KC, int KG, bool PP, int VBITS, int MT, int VG>
BD_DEVICE void loadKGroup(TileRaw<D, KBITS, VBITS, MT, KG, VG>& raw, int mt, const TilePos& pos, int kParamsOff, int lane) {
  loadGroup<D, KBITS>(pos.khalf + (pos.within / kFragTokens + mt) * Frag<D, KBITS>::kGroupBytes, lane, raw.k[mt]);
  if (PP && KBITS < 16 && !KC) {
    // session 21: one base pointer per tile and lane, the group's and half's
    // offsets constant (the loads' immediates), where each pair's int offset
    // was sign-extended and added to the 64-bit pointer apart (4 instructions
    // a load).
    const u8* base = pairBase(pos.khalf, kParamsOff, pos.within, KG, lane);
#pragma unroll
    for (int hf = 0; hf < 2; hf++)
#pragma unroll
      for (int k = 0; k < KG; k++) raw.kp[mt][hf][k] = ldg32(base + 4 * ((mt * kFragTokens + 8 * hf) * KG + k));
  }
}

// loadVGroup is loadKGroup for the values: the lane's V words and, with PP,
// the value pairs of tokens g and g+8 (the scores' C layout, which p·s
// follows).
template <int D, int VBITS, int VG, bool PP, int KBITS, int MT, int KG>
BD_DEVICE void loadVGroup(TileRaw<D, KBITS, VBITS, MT, KG, VG>& raw, int mt, const TilePos& pos, int vParamsOff, int lane) {
  loadGroup<D, VBITS>(pos.vhalf + (pos.within / kFragTokens + mt) * Frag<D, VBITS>::kGroupBytes, lane, raw.v[mt]);
  if (PP && VBITS < 16) {
    const u8* base = pairBase(pos.vhalf, vParamsOff, pos.within, VG, lane);  // session 21, as loadKGroup
#pragma unroll
    for (int hf = 0; hf < 2; hf++)
#pragma unroll
      for (int k = 0; k < VG; k++) raw.vp[mt][hf][k] = ldg32(base + 4 * ((mt * kFragTokens + 8 * hf) * VG + k));
  }
}

// v2.9: P·V on int8 tensor cores for int2 values (one (scale, zero) pair per
// token: VG = 1). The O^T mma takes V^T as A (channels on M, tokens on k) and
// P^T as B. Byte b of a lane's value word i holds the codes of channel block
// mb = 2i + (b & 1), tokens 2q + (b >> 1) (+8 for the upper two codes), at
// bits 2a: a = 0 channel g, 1 channel g+8, 2 channel g token +8, 3 channel
// g+8 token +8 (kv.MMA, bitdecode.cuh fragElem). With y = w >> 4,
//   e = prmt(w, y, 0x6420) (0x7531 for mb 2i+1) = bytes w.b0, w.b2, y.b0, y.b2,
//   e & 0x03030303 is channel g at tokens 2q, 2q+1, 2q+8, 2q+9,
//   e & 0x0c0c0c0c channel g+8 at the same tokens, times 4:
// rows g and g+8, k = 4q..4q+3 of an m16n8k16 A fragment, with k 4q+j the
// group's token 2q, 2q+1, 2q+8, 2q+9 for j = 0..3; two groups (tokens k and
// 16 + k) make one m16n8k32. So a word of 16 codes widens in 7 instructions
// (a shift, two permutes, four masks; the fp16 path's unpack took 17). The
// probabilities' B side uses the same token order, which movmatrix gives:
// after trans8x8, lane (g, q) holds tokens 2q, 2q+1 (and 2q+8, 2q+9) of row
// g, as for the fp16 mma.
//
// The weights w_t = p_t·s_t (p = exp2(score - running max) <= 1, s the
// token's value scale; zeros accumulate apart as before) become unsigned
// fixed point per row and tile: Δ = 2^(E-19) for W = max_t w_t in [2^E,
// 2^(E+1)), so n_t = rn(w_t/Δ) <= 2^20, one fma (w·2^(19-E) + 2^23: the
// float's low bytes are n, rounded to nearest once). n splits into three
// bytes (kPV8Pieces), three u8 x u8 mmas summed exactly in int32:
// Σ n·code·4 <= 128 tokens · 12 · 2^20 < 2^31 for tiles of at most 128
// tokens (MT <= 8). Then acc += Δ·float(2^16 c2 + 2^8 c1 + c0) (Δ/4 on
// channel g+8): Δ exact, one float rounding of the tile's sum.
//
// Error against the exact weights (the test's pv8ValueTerm): |n_t Δ - w_t|
// <= Δ/2 <= 2^-20 W_tile, and W_tile <= pmax_tile·smax_tile. Over a split's
// tiles, Σ_tile pmax_tile <= l (each tile's largest p is one of the
// denominator's terms), so the output's error, divided by l, is at most
// 2^-20 · max_tile (smax_tile · Σ_{t in tile} code_t,c) <= 2^-20 · 384 ·
// smax for int2 (3 · 128 tokens), against the fp16 path's 2^-11 of each
// weight. Two pieces (2^-16) would be 2^-16 · 384 · smax, which at the
// test data's smax (MaxAbsV / 2 to / 3) passes 2^-11 · MaxAbsV: three.

// kPV8Pieces is the bytes of the fixed-point weights (n <= 2^20).
constexpr int kPV8Pieces = 3;

// kPV8Exp is log2 of the largest n: Δ = 2^(E - kPV8Exp + 1) for W in
// [2^E, 2^(E+1)).
constexpr int kPV8Exp = 20;

// valuesI8 is tile's value side on int8 tensor cores (v2.9, above) for int2
// values with VG = 1: s holds the tile's probabilities p (C layout).
template <int D, int MT, bool PP, class ST, class RAW>
BD_DEVICE void valuesI8(ST& st, RAW& raw, const float (&s)[MT][4], const u8* __restrict__ vhalf, int vParamsOff, int within0, int lane) {
  static_assert(MT % 2 == 0 && MT <= 8, "int8 P·V: pairs of groups, at most 128 tokens per tile");
  const int g = lane / 4;
  // Weights w = p·s per token; zeros apart (as the fp16 path).
  float w[MT][4];
  float W[2] = {0.f, 0.f};
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      float sc, z;
      if (PP) splitParam(raw.vp[mt][half][0], sc, z);
      else param(vhalf, vParamsOff, within0 + mt * kFragTokens + g + 8 * half, sc, z);
      w[mt][2 * half] = s[mt][2 * half] * sc;
      w[mt][2 * half + 1] = s[mt][2 * half + 1] * sc;
      st.zacc[0][0] += s[mt][2 * half] * z;
      st.zacc[1][0] += s[mt][2 * half + 1] * z;
      W[0] = fmaxf(W[0], w[mt][2 * half]);
      W[1] = fmaxf(W[1], w[mt][2 * half + 1]);
    }
  // Δ and 1/Δ per row (powers of two: the exponent of the row's W over the
  // tile's 16 tokens of each of the 8 lanes of a row).
  float inv[2], dv[4];
#pragma unroll
  for (int r = 0; r < 2; r++) {
#pragma unroll
    for (int off = 4; off < 32; off *= 2) W[r] = fmaxf(W[r], __shfl_xor_sync(0xffffffffu, W[r], off));
    const int be = max(int(__float_as_uint(W[r]) >> 23), kPV8Exp);  // W >= 0; W = 0 gives n = 0
    inv[r] = __uint_as_float(u32(127 + kPV8Exp - 1 + 127 - be) << 23);
    dv[r] = __uint_as_float(u32(be - kPV8Exp + 1) << 23);
  }
  dv[2] = dv[0] * 0.25f, dv[3] = dv[1] * 0.25f;  // channel g+8's codes are times 4
  // The B pieces: bytes 0, 1, 2 of n for tokens 2q, 2q+1, 2q+8, 2q+9 of row g.
  u32 pc[kPV8Pieces][MT];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    u32 n[4];
#pragma unroll
    for (int e = 0; e < 4; e++) n[e] = __float_as_uint(fmaf(w[mt][e], inv[e & 1], 8388608.f));  // 2^23 + n
    const u32 l01 = trans8x8(prmt(n[0], n[1], 0x5410u)), l23 = trans8x8(prmt(n[2], n[3], 0x5410u));
    const u32 h01 = trans8x8(prmt(n[0], n[1], 0x7632u)), h23 = trans8x8(prmt(n[2], n[3], 0x7632u));
    pc[0][mt] = prmt(l01, l23, 0x6420u);
    pc[1][mt] = prmt(l01, l23, 0x7531u);
    pc[2][mt] = prmt(h01, h23, 0x6420u);
  }
  // Word i of each group: channel blocks 2i (hb 0) and 2i+1 (hb 1), one at
  // a time (12 int32 sums live, not 24: int2 at MT 8 spilled 104 bytes).
#pragma unroll
  for (int i = 0; i < Frag<D, 2>::kWords; i++)
#pragma unroll
    for (int hb = 0; hb < 2; hb++) {
      int c[kPV8Pieces][4];
#pragma unroll
      for (int k = 0; k < kPV8Pieces; k++)
#pragma unroll
        for (int e = 0; e < 4; e++) c[k][e] = 0;
#pragma unroll
      for (int pr = 0; pr < MT / 2; pr++) {
        const u32 x0 = raw.v[2 * pr][i], x1 = raw.v[2 * pr + 1][i];
        const u32 sel = hb ? 0x7531u : 0x6420u;
        const u32 e0 = prmt(x0, x0 >> 4, sel), e1 = prmt(x1, x1 >> 4, sel);
        const u32 a[4] = {e0 & 0x03030303u, e0 & 0x0c0c0c0cu, e1 & 0x03030303u, e1 & 0x0c0c0c0cu};
#pragma unroll
        for (int k = 0; k < kPV8Pieces; k++) mmaI8<false>(c[k], a, pc[k][2 * pr], pc[k][2 * pr + 1]);
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int sum = (c[2][e] << 16) + (c[1][e] << 8) + c[0][e];  // < 2^31, exact
        st.acc[2 * i + hb][e] = fmaf(float(sum), dv[e], st.acc[2 * i + hb][e]);
      }
    }
}

// v2.12: int2 and int4 values enter the P·V mma as fp16 subnormals. A code
// c masked in place under a zero exponent reads c·2^(b-24), b its lowest
// bit in the 16-bit half, exactly (the mma takes subnormal fp16 inputs, and
// its products are exact). So a register costs one lop3 (an and), not two
// instructions (bitdecode.cuh's code: the mask under the magic 1024 and an
// fma or a subtract): int2 10 instructions per word of 16 codes instead of
// 17, int4 5 per word of 8 instead of 9. The factor must be the same for
// the two token halves of an A fragment row (a0/a2: channel g, a1/a3:
// channel g+8, tokens 2q.. and 2q+8..), since they share the row's
// accumulator; it may differ between the rows and between channel blocks:
//   int2 word i (blocks 2i, 2i+1), codes at bits 2p..2p+1 of each half:
//     block 2i:   a0 = w & 3, a2 = (w >> 4) & 3           channel g    2^-24
//                 a1 = w & 0xc, a3 = (w >> 4) & 0xc       channel g+8  2^-22
//     block 2i+1: a0 = w & 0x300, a2 = (w >> 4) & 0x300    channel g    2^-16
//                 a1 = (w >> 4) & 0xc0, a3 = (w >> 8) & 0xc0  channel g+8  2^-18
//   int4 word i (block i):
//     a0 = w & 0xf, a2 = (w >> 8) & 0xf                  channel g    2^-24
//     a1 = w & 0xf0, a3 = (w >> 8) & 0xf0                channel g+8  2^-20
// (each mask on both 16-bit halves). The accumulators then hold the output
// times that power of two, and unscaleV's exact multiply after the loop
// takes it out. In exact scaling that would give the old bits back; on the
// H100 it does not quite: the outputs moved by about one fp16 ulp in 5 of 16
// bench rows (session 12), apparently because the mma's accumulation is not
// invariant under the scaling with subnormal operands. Session 15 measured
// it alone (kScaledV off and on, the rest of the kernel the same;
// TestGPUDecodeScaledValuesULPs): 3.4-9.7% of the outputs of int2, k4v2, int4
// KC/KT and k8v4 differ, 70-84% of those by one fp16 ulp, a few by hundreds
// (outputs near 0); int8 values, not scaled, are bitwise equal. The float64
// reference tests pass with their tolerances unchanged either way.

// kScaledV switches the scaled values on (v2.12, the default). Compiled with
// -DBD_SCALED_V=0 (decode.go: MMATuning.V211Unpack) the kernel takes
// v2.11's unpack instead (bitdecode.cuh's code, exact integers under 1024)
// and no unscaleV, so a test can run both on one input and measure the
// difference (TestGPUDecodeScaledValuesULPs).
#ifndef BD_SCALED_V
#define BD_SCALED_V 1
#endif
constexpr bool kScaledV = BD_SCALED_V != 0;

// unpackV turns a lane's V words of BITS-bit codes into the scaled fp16
// subnormal registers above (fragment order, as unpack).
template <int D, int BITS>
BD_DEVICE void unpackV(const u32 w[Frag<D, BITS>::kWords], u32 h[Frag<D, BITS>::kRegs]) {
  static_assert(BITS == 2 || BITS == 4, "scaled values: int2 and int4");
#pragma unroll
  for (int i = 0; i < Frag<D, BITS>::kWords; i++) {
    const u32 x = w[i], y = x >> 4, z = x >> 8;
    if (BITS == 2) {
      h[8 * i + 0] = x & 0x00030003u, h[8 * i + 1] = x & 0x000c000cu;
      h[8 * i + 2] = y & 0x00030003u, h[8 * i + 3] = y & 0x000c000cu;
      h[8 * i + 4] = x & 0x03000300u, h[8 * i + 5] = y & 0x00c000c0u;
      h[8 * i + 6] = y & 0x03000300u, h[8 * i + 7] = z & 0x00c000c0u;
    } else {
      h[4 * i + 0] = x & 0x000f000fu, h[4 * i + 1] = x & 0x00f000f0u;
      h[4 * i + 2] = z & 0x000f000fu, h[4 * i + 3] = z & 0x00f000f0u;
    }
  }
}

// unscaleV multiplies O^T accumulators acc[mb][e] (channel 16mb + g +
// 8(e >> 1)) of scaled BITS-bit values by the inverse of unpackV's factor:
// exact (powers of two).
template <int D, int BITS, int NACC>
BD_DEVICE void unscaleV(float (&acc)[NACC][4]) {
#pragma unroll
  for (int mb = 0; mb < NACC; mb++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const bool hi = e >> 1;  // channel g+8
      const float f = BITS == 4 ? (hi ? 1048576.f : 16777216.f)                        // 2^20, 2^24
                                : mb % 2 ? (hi ? 262144.f : 65536.f) : (hi ? 4194304.f : 16777216.f);  // 2^18, 2^16; 2^22, 2^24
      acc[mb][e] *= f;
    }
}

// rowMaxTree is bitdecode.cuh's warpRowMax with the lane's 2·MT scores
// reduced as a tree (v2.13; was a chain of 2·MT): fmaxf is exact and
// ignores a NaN beside a number, and the max with -inf first maps an
// all-NaN lane to -inf as the chain from -inf did: the same max.
template <int MT>
BD_DEVICE float rowMaxTree(const float (&s)[MT][4], int r) {
  float m[MT];
#pragma unroll
  for (int mt = 0; mt < MT; mt++) m[mt] = fmaxf(s[mt][r], s[mt][r + 2]);
  if constexpr (MT >= 8) {
#pragma unroll
    for (int i = 0; i < 4; i++) m[i] = fmaxf(m[i], m[i + 4]);
  }
  if constexpr (MT >= 4) {
#pragma unroll
    for (int i = 0; i < 2; i++) m[i] = fmaxf(m[i], m[i + 2]);
  }
  if constexpr (MT >= 2) m[0] = fmaxf(m[0], m[1]);
  float mx = fmaxf(kNegInf, m[0]);
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
  return mx;
}

// foldEx2 is bitdecode.cuh's foldTile<true> (OnlineSoftmax::fold with ex2
// for rows 2q and 2q+1, then the accumulators' and zeros' rescale) with the
// row max by rowMaxTree and the rescale skipped where it would multiply by 1.
template <typename ST, int MT>
BD_DEVICE void foldEx2(ST& st, float (&s)[MT][4], float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) st.template fold<MT, true>(r, s, rowMaxTree(s, r), alpha);
  // Most tiles raise no row's max: then every alpha is 1 and the rescale
  // (a multiply by 1) is skipped, warp-uniformly.
  if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) st.rescale(alpha);
}

// NoMid is tile's default mid: nothing between the softmax and the values.
struct NoMid {
  BD_DEVICE void operator()() const {}
};

// RG (v2.11): raw's groups come from the ring slot at slot, each read just
// before its use (PP must be set: the pairs come with them).
// mid (v2.24) runs after the tile's softmax, before its values, in the same
// basic block as the P·V mmas (the look-ahead refold of the next tile).
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, int MT, bool BF, bool PP = false, bool NX = false, bool Q8K = false,
          bool P8V = false, bool RG = false, class MID = NoMid>
BD_DEVICE void tile(WarpState<D, VG>& st, TileRaw<D, KBITS, VBITS, MT, KG, VG>& raw,
                    const u8* __restrict__ khalf, const u8* __restrict__ vhalf, int kParamsOff, int vParamsOff,
                    int gK, int gV, int within0, int tok0, int tEnd, const int limit[2], int span,
                    const u32 bq[D / 16][2], const float biasC[2], const float qsumC[2][KG], int lane,
                    const TilePos& next = TilePos{nullptr, nullptr, 0}, const Q8<D>* q8 = nullptr, const u8* slot = nullptr,
                    bool full = false, const MID& mid = MID{}) {
  static_assert(!RG || (PP && !NX), "the ring's tiles carry their pairs and have no in-place next tile");
  const int g = lane / 4, q = lane % 4;
  float s[MT][4];
  // Scores.
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    if constexpr (RG) ringKGroup<D, KBITS, VBITS, KC, KG, VG, MT>(raw, mt, slot, lane);
    float c[KG][4];
    if constexpr (Q8K) {  // v2.8: int8 mmas on the widened codes, exact in int32
      int ch[KG][4], cl[KG][4];
#pragma unroll
      for (int k = 0; k < KG; k++)
#pragma unroll
        for (int e = 0; e < 4; e++) ch[k][e] = cl[k][e] = 0;
#pragma unroll
      for (int j = 0; j < D / 32; j++) {
        u32 a[4];
        widen8<KBITS>(raw.k[mt], j, a);
        const int k = KC ? 0 : j * 32 * KG / D;
        mmaI8<true>(ch[k], a, q8->hi[j][0], q8->hi[j][1]);
        mmaI8<false>(cl[k], a, q8->lo[j][0], q8->lo[j][1]);
      }
#pragma unroll
      for (int k = 0; k < KG; k++)
#pragma unroll
        for (int e = 0; e < 4; e++) c[k][e] = float(ch[k][e] * 256 + cl[k][e]) * q8->dq[e];
    } else {
      u32 a[Frag<D, KBITS>::kRegs];
      unpack<D, KBITS>(raw.k[mt], a);
#pragma unroll
      for (int k = 0; k < KG; k++) c[k][0] = c[k][1] = c[k][2] = c[k][3] = 0.f;
#pragma unroll
      for (int kb = 0; kb < D / 16; kb++) mmaT<BF>(c[KBITS < 16 && !KC ? kb * 16 * KG / D : 0], &a[4 * kb], bq[kb][0], bq[kb][1]);
    }
    if (KBITS < 16 && !KC) {  // per-token scales: s_t·(Q·codes) + z_t·ΣQ per channel group
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int t = within0 + mt * kFragTokens + g + 8 * half;
        float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
        for (int k = 0; k < KG; k++) {
          float sc, z;
          if (PP) splitParam(raw.kp[mt][half][k], sc, z);
          else param(khalf, kParamsOff, t * KG + k, sc, z);
          acc0 += sc * c[k][2 * half] + z * qsumC[0][k];
          acc1 += sc * c[k][2 * half + 1] + z * qsumC[1][k];
        }
        s[mt][2 * half] = acc0;
        s[mt][2 * half + 1] = acc1;
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; e++) s[mt][e] = c[0][e] + biasC[e & 1];
    }
    if (NX) loadKGroup<D, KBITS, KC, KG, PP>(raw, mt, next, kParamsOff, lane);
  }
  // The attention soft-cap (bitdecode.cuh's BD_SOFTCAP), before the mask.
#ifdef BD_SOFTCAP
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int e = 0; e < 4; e++) s[mt][e] = softcapScore(s[mt][e]);
#endif
  // Mask padding past the end, tokens after a query token's position and
  // tokens before its sliding window (windowSpan) (v2.12: not in a full
  // tile, which every row sees whole: a warp-uniform branch around the
  // whole tile's tests).
  if (!full) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int t = tok0 + mt * kFragTokens + g + 8 * (e >> 1);
        if (t >= tEnd || t > limit[e & 1] || limit[e & 1] - t >= span) s[mt][e] = kNegInf;
      }
  }
  // Online softmax for rows 2q, 2q+1 (v2.12: with ex2, foldEx2).
  float alpha[2];
  foldEx2(st, s, alpha);
  mid();
  // Values.
  if constexpr (P8V) {
    if constexpr (RG) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++) ringVGroup<D, KBITS, VBITS, KC, KG, VG, MT>(raw, mt, slot, lane);
    }
    valuesI8<D, MT, PP>(st, raw, s, vhalf, vParamsOff, within0, lane);
    if (NX) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++) loadVGroup<D, VBITS, VG, PP>(raw, mt, next, vParamsOff, lane);
    }
  } else {
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    if constexpr (RG) ringVGroup<D, KBITS, VBITS, KC, KG, VG, MT>(raw, mt, slot, lane);
    u32 a[Frag<D, VBITS>::kRegs];
    if constexpr (kScaledV && (VBITS == 2 || VBITS == 4) && !BF) unpackV<D, VBITS>(raw.v[mt], a);  // v2.12: scaled codes
    else unpack<D, VBITS>(raw.v[mt], a);
#pragma unroll
    for (int k = 0; k < VG; k++) {
      float p[4];
      if (VBITS < 16) {  // p·s per token and channel group; zeros accumulate apart
#pragma unroll
        for (int half = 0; half < 2; half++) {
          const int t = within0 + mt * kFragTokens + g + 8 * half;
          float sc, z;
          if (PP) splitParam(raw.vp[mt][half][k], sc, z);
          else param(vhalf, vParamsOff, t * VG + k, sc, z);
          p[2 * half] = s[mt][2 * half] * sc;
          p[2 * half + 1] = s[mt][2 * half + 1] * sc;
          st.zacc[0][k] += s[mt][2 * half] * z;
          st.zacc[1][k] += s[mt][2 * half + 1] * z;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++) p[e] = s[mt][e];
      }
      // (token g | g+8, rows 2q, 2q+1) -> B: (tokens 2q.. | 2q+8.., row g)
      const u32 b0 = trans8x8(pack2T<BF>(p[0], p[1]));
      const u32 b1 = trans8x8(pack2T<BF>(p[2], p[3]));
#pragma unroll
      for (int mb = k * D / 16 / VG; mb < (k + 1) * D / 16 / VG; mb++) mmaT<BF>(st.acc[mb], &a[4 * mb], b0, b1);
    }
    if (NX) loadVGroup<D, VBITS, VG, PP>(raw, mt, next, vParamsOff, lane);
  }
  }
}

// Fill B fragments of the (scaled) queries: lane's channels of k-block kb are
// 16kb + 2q, +1 (b0) and 16kb + 2q + 8, +9 (b1), for row g.
template <int D, bool BF = false>
BD_DEVICE void makeB(const float qf[D / 16][4], const float* sc, u32 bq[D / 16][2]) {
#pragma unroll
  for (int kb = 0; kb < D / 16; kb++) {
    bq[kb][0] = pack2T<BF>(qf[kb][0] * sc[4 * kb], qf[kb][1] * sc[4 * kb + 1]);
    bq[kb][1] = pack2T<BF>(qf[kb][2] * sc[4 * kb + 2], qf[kb][3] * sc[4 * kb + 3]);
  }
}

// kMergeAheadMMA is how many split partials of O a thread of the merging
// CTA loads before the merge's weights are known (v2.17, finishSplits):
// 32, every split of a one-sequence plan up to 128K (splitBlocks' one wave
// of 264 slots at 8 CTAs a split), as planes' kMergeAhead. 32 float4
// registers, free after the tile loop.
constexpr int kMergeAheadMMA = 32;

// finishOneSplit (v2.15) ends the CTA of a row chunk whose sequence has a
// single split, where the plan fuses the merge (counters): it writes the
// fp16 output rows directly, with no partial, fence, counter or merge pass.
// The bits are those of that split's partial merged by finishSplits (and by
// decode_combine, the same arithmetic), because each step is the same
// operation on the same values:
//   1. (o, m, l) per row and channel: mergeWarps' warp merge, its code and
//      order (it would store them to partO and partML, exact floats);
//   2. finishSplits' max over one split: lane 0 holds fmaxf(-inf, m), the
//      other lanes -inf, and the shuffle tree of fmaxf keeps it: M =
//      fmaxf(-inf, m) (m itself, -inf for a NaN m);
//   3. its weight ws = (m == -inf ? 0 : exp2f(m - M)): 1 for a finite m (the
//      same exp2f of 0), 0 for a row that saw nothing, NaN otherwise;
//   4. its denominator: lane 0 takes fmaf(l, ws, +0), the others +0, and the
//      shuffle tree adds them. Rounding to nearest, fmaf(x, y, +0) is never
//      -0 (an exact -0 plus +0 is +0), and s + (+0) = s for every s but -0
//      (a NaN stays a NaN), so the tree returns fmaf(l, ws, +0) unchanged;
//      inv = 1 / that (IEEE division in both, the program's own flags);
//   5. its output: o' = fmaf(o, ws, +0), the sum of one split from +0 (not o
//      itself: o = -0 gives +0 there), written as f2h(o' · inv).
// So with a finite m the output is f2h((o + 0) · (1 / l)): a multiplication
// by the reciprocal of the row sum, not a division, as the merge does it.
// Every thread of the CTA calls it once redO, redM and redL are complete.
// out32, where not null, gets the output widened to float32 (storeOut).
template <int D, int WARPS, int ROWS>
BD_DEVICE void finishOneSplit(const float (&redO)[WARPS][ROWS][D], const float (&redM)[WARPS][ROWS], const float (&redL)[WARPS][ROWS],
                              u16* __restrict__ out, float* __restrict__ out32, int b, int h, int row0, int nrows, int group, int Hq,
                              int Tq) {
  for (int idx = threadIdx.x; idx < nrows * D; idx += WARPS * 32) {
    const int r = idx / D, c = idx % D;
    // 1. mergeWarps' merge (bitdecode.cuh's mergeWarpRow).
    float m, o, l;
    mergeWarpRow<D, WARPS, ROWS>(redO, redM, redL, r, c, m, o, l);
    // 2-5. finishSplits with nSplits = 1.
    const float mAll = fmaxf(kNegInf, m);
    const float ws = m == kNegInf ? 0.f : exp2f(m - mAll);
    const float inv = 1.f / fmaf(l, ws, 0.f);
    const int row = row0 + r, i = row / group, hq = h * group + row % group;
    storeOut(out, out32, ((size_t(b) * Tq + i) * Hq + hq) * D + c, fmaf(o, ws, 0.f) * inv);
  }
}

// The launch timeline (session 19; only with -DBD_TIMELINE=1, decode.go's
// DecodeTuning.Timeline, so the default kernel is unchanged): the region's
// layout and the marks are bitdecode.cuh's (kTLHead, BD_TL_MARK);
// decode_mma writes every word, and besides them each warp's first tile
// computed, kTLFirst + warp.
#if BD_TIMELINE
constexpr int kTLFirst = 6;  // + warp: its first tile computed (Go: tlFirst)
#endif

// MINB is the CTAs per SM the registers must allow (__launch_bounds__).
// Q8K: keys by the int8 path (v2.8; int2 and int4 keys, KT groups of 32
// channels or more).
// P8V: values by the int8 path (v2.9; int2 values, one pair per token).
// LA (v2.24): int2 keys per channel whose key group is one tile (gK = 16·MT,
// the planner's mmaLA) refold the query for tile i+1 under tile i's P·V,
// with the query floats in the warp's slice of redO (see the loop).
template <int D, int KBITS, int VBITS, bool KC, int KG, int VG, int MT, bool BF, int ST, int MINB, bool Q8K = false, bool P8V = false,
          bool LA = false>
__global__ void __launch_bounds__(kThreads, MINB) decode_mma(
    const u8* __restrict__ pool, const int* __restrict__ blockTable, int maxBlocks,
    const u8* __restrict__ resK, const u8* __restrict__ resV, const int* __restrict__ resSlots,
    const int* __restrict__ lens, const u16* __restrict__ q, float* __restrict__ partO, float* __restrict__ partML,
    int Hq, int Hkv, int Tq, int Nr, int splitLenArg, int splitBase, int splitCap, int splitMax, int maxSplits, int rowChunks,
    int blockBytes, int kBytes, int kParamsOff, int vParamsOff, int gK, int gV, float scaleLog2, int window,
    int* __restrict__ counters, u16* __restrict__ out, float* __restrict__ out32 BD_TL_PARAM) {
#if BD_TIMELINE
  unsigned long long* const tlRec = tlRecord(tl);
#endif
  BD_TL_MARK(kTLEntry, threadIdx.x == 0);
  static_assert(KBITS == 16 || KC || KG >= 1, "key groups");
  static_assert(!Q8K || ((KBITS == 2 || KBITS == 4) && !BF && (KC || D / KG % 32 == 0)), "int8 K·q: int2/int4 keys, KT groups of 32k channels");
  static_assert(!P8V || (VBITS == 2 && VG == 1 && MT % 2 == 0 && MT <= 8 && !BF), "int8 P·V: int2 values, one pair per token, 2-8 groups");
  static_assert(ST == 0 || (ST >= 2 && KBITS + VBITS < 32), "the ring: 2 or more stages, low-bit formats");
  static_assert(!LA || (KBITS == 2 && KC && Q8K && !P8V && ST == 0 && D <= 128 && !BF), "look-ahead refold: int2 keys per channel, int8 K·q, the pipeline");
  // v2.11: with the ring (ST > 0), the warp-merge buffer redO lives in the
  // ring's shared memory (the planner sizes it for both), written only after
  // every warp has left the ring (a barrier), so a third CTA per SM fits.
  __shared__ __align__(16) float redOs[ST > 0 ? 1 : kWarps][kQueryRows][ST > 0 ? 4 : D];  // float4 reads (the warp merge, v2.18)
  extern __shared__ __align__(16) u8 ring[];
  float(&redO)[kWarps][kQueryRows][D] = *reinterpret_cast<float(*)[kWarps][kQueryRows][D]>(ST > 0 ? static_cast<void*>(ring) : static_cast<void*>(redOs));
  __shared__ float redM[kWarps][kQueryRows], redL[kWarps][kQueryRows];

  const int split = blockIdx.x, b = blockIdx.z;
  const int h = blockIdx.y / rowChunks, rc = blockIdx.y % rowChunks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, qd = lane % 4;
  constexpr int TT = MT * kFragTokens;
  // v2.16: the block-table entry of the warp's first tile, guessed for a
  // split of whole tiles (every split but a sequence's last), is read beside
  // lens rather than after it: one dependent trip fewer before the first
  // tile's load (entryFirst below; a wrong guess reads the table again).
  // With per-sequence splits (splitCap > 0) the guess takes splitLenArg,
  // the split of the launch's longest sequence.
  const int specBlk = (split * splitLenArg + warp * ((splitLenArg / TT + kWarps - 1) / kWarps) * TT) / Nr;
  const int specEntry = specBlk < maxBlocks ? blockTable[b * maxBlocks + specBlk] : 0;
  const int L = lens[b];
  const int splitLen = kSeqSplits ? seqSplitLen(L, splitLenArg, splitBase, splitCap, splitMax) : splitLenArg;  // v2.33
  const int t0 = split * splitLen;
  if (t0 >= L) {
#if BD_TIMELINE
    if (threadIdx.x == 0) tlRec[kTLInfo] = ~0ull;  // no tokens: Go skips the CTA
#endif
    return;
  }
  BD_TL_MARK(kTLLens, threadIdx.x == 0);  // after the branch on L: its load has returned
  const int t1 = min(L, t0 + splitLen);
  const int group = Hq / Hkv, R = group * Tq;
  const int row0 = rc * kQueryRows, nrows = min(kQueryRows, R - row0);

  const int nPacked = L / Nr;
  const int packedEnd = min(t1, nPacked * Nr);
  // Packed tiles: t0 is a multiple of Nr and TT divides Nr, so tiles never
  // straddle blocks and key groups (G >= 16) never straddle a fragment group.
  // Each warp takes a contiguous run of tiles, so it refolds the key scales
  // once per key group rather than once per tile.
  const int nTiles = max(0, packedEnd - t0) / TT;
  const int perWarp = (nTiles + kWarps - 1) / kWarps;
  const int tileBegin = warp * perWarp, tileEnd = min(nTiles, (warp + 1) * perWarp);
#if BD_TIMELINE
  if (threadIdx.x == 0) tlRec[kTLInfo] = tlInfo(nTiles, perWarp);
#endif
  // at returns the place of the tile that starts at token tok of the sequence.
  auto at = [&](int tok) -> TilePos {
    const int blk = tok / Nr;
    const u8* half = pool + (size_t(blockTable[b * maxBlocks + blk]) * Hkv + h) * blockBytes;
    return TilePos{half, half + kBytes, tok - blk * Nr};
  };
  // atFirst is at for the warp's first tile, from the guessed entry if right.
  auto atFirst = [&](int tok) -> TilePos {
    const int blk = tok / Nr;
    const u8* half = pool + (size_t(blk == specBlk ? specEntry : blockTable[b * maxBlocks + blk]) * Hkv + h) * blockBytes;
    return TilePos{half, half + kBytes, tok - blk * Nr};
  };
  // v2.2: register double buffering pays for fp16 (v2.1: (16,32K) 91% ->
  // 96% of the read ceiling) but costs low-bit formats occupancy (224
  // registers, 2 CTAs/SM; int4 KT (128,8K) 85% -> 73%). v2.7: low-bit
  // formats pipeline in place instead (tile's NX): the next tile's groups
  // are loaded into the registers the current tile has just consumed.
  constexpr bool kPrefetch = KBITS == 16 && VBITS == 16;
  constexpr bool kPipe = !kPrefetch && ST == 0;
  constexpr bool kKC = KBITS < 16 && KC;
  // PP: the pipeline also preloads a tile's (scale, zero) words where they
  // are few (a register per token and group; kt32/v32 would take 64).
  constexpr bool kPP = kPipe && (KBITS < 16 && !KC ? KG : 0) + (VBITS < 16 ? VG : 0) <= 2;
  // v2.7: the key pairs of a warp's next key group (KC), staged in shared
  // memory by cp.async while the warp runs the group before it, so the
  // refold reads them without a DRAM round trip.
  // v2.13 (kWiden: int2 keys, whose every tile refolds): the copy lands in
  // the upper half (words D..2D-1); widenPairs then turns it into floats
  // (s_c, z_c) at words 2c, 2c+1. (int4 KC and k4v2 refold every second
  // tile; there it spilled on NVRTC 11.8, so they keep the fp16 pairs, as
  // D = 256 does: 580 bytes of spill stores there, against 236.)
  constexpr bool kWiden = kKC && kPipe && KBITS == 2 && D <= 128;
  __shared__ __align__(16) u32 kcPairs[kWarps][kKC && kPipe ? (kWiden ? 2 * D : D) : 4];
  auto stagePairs = [&](const u8* khalf, int gi) {  // key group gi of the block half at khalf
    const u8* src = khalf + kParamsOff + 4 * gi * D;
#pragma unroll
    for (int o = lane * 16; o < 4 * D; o += 32 * 16) cpAsync16(reinterpret_cast<u8*>(kcPairs[warp] + (kWiden ? D : 0)) + o, src + o);
    cpAsyncCommit();
  };
  // widenPairs (v2.13) waits for the staged pairs and converts them to
  // floats once per warp: a lane widens the 16 bytes it copied (4
  // channels), where every lane used to widen its own 32 channels' pairs,
  // the same for all 8 rows g (64 conversions per lane and refold, now 8).
  // The floats are the same values, so the refold's bits are unchanged.
  auto widenPairs = [&] {
    cpAsyncWait<0>();
    __syncwarp();
    constexpr int kChunks = D / 4, kPer = (kChunks + 31) / 32;  // 16-byte chunks: 4 channels each
    float f[kPer][8];
#pragma unroll
    for (int i = 0; i < kPer; i++) {
      const int ch = lane + 32 * i;
      if (ch < kChunks) {
        const uint4 v = *reinterpret_cast<const uint4*>(&kcPairs[warp][D + 4 * ch]);
        const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; k++) f[i][2 * k] = h2f(u16(w[k] & 0xffff)), f[i][2 * k + 1] = h2f(u16(w[k] >> 16));
      }
    }
    __syncwarp();  // every lane has read its raw words before the floats overwrite them
#pragma unroll
    for (int i = 0; i < kPer; i++) {
      const int ch = lane + 32 * i;
      if (ch < kChunks) {
        float4* dst = reinterpret_cast<float4*>(&kcPairs[warp][8 * ch]);
        dst[0] = make_float4(f[i][0], f[i][1], f[i][2], f[i][3]);
        dst[1] = make_float4(f[i][4], f[i][5], f[i][6], f[i][7]);
      }
    }
    __syncwarp();
  };
  // v2.11: the ring (ST > 0), ST slots per warp (Ring: one tile each).
  using RingT = Ring<D, KBITS, VBITS, KC, KG, VG, MT>;
  constexpr int kST = ST > 0 ? ST : 1;
  u8* mine = ring + warp * kST * RingT::kSlot;
  // issue starts the copies of tile ti into slot si (not committed).
  auto issue = [&](int ti, int si) {
    const int tok = t0 + ti * TT;
    const TilePos p = at(tok);
    u8* dst = mine + si * RingT::kSlot;
    copyAsync<MT * Frag<D, KBITS>::kGroupBytes>(dst + RingT::kK, p.khalf + (p.within / kFragTokens) * Frag<D, KBITS>::kGroupBytes, lane);
    copyAsync<MT * Frag<D, VBITS>::kGroupBytes>(dst + RingT::kV, p.vhalf + (p.within / kFragTokens) * Frag<D, VBITS>::kGroupBytes, lane);
    if (KBITS < 16 && !KC) copyAsync<RingT::kVP - RingT::kKP>(dst + RingT::kKP, p.khalf + kParamsOff + 4 * p.within * KG, lane);
    if (VBITS < 16) copyAsync<RingT::kKC - RingT::kVP>(dst + RingT::kVP, p.vhalf + vParamsOff + 4 * p.within * VG, lane);
    // The key group's pairs where compute refolds: the warp's first tile
    // and every tile that opens a key group.
    if (kKC && (ti == tileBegin || tok / gK != (tok - TT) / gK))
      copyAsync<RingT::kSlot - RingT::kKC>(dst + RingT::kKC, p.khalf + kParamsOff + 4 * (p.within / gK) * D, lane);
  };
  // v2.16: a programmatic dependent of the kernel ahead (decode.go: the
  // program is GridDependent). lens and the block table were uploaded
  // before the step; the tiles requested before the query setup are read
  // before the dependency wait too where their blocks are oldBlocks (none of
  // this launch's new tokens: the append or pack ahead does not write them),
  // else the warp waits first. The query, the residual and every write come
  // after the wait.
  {
    const int pre = ST > 0 ? min(tileEnd, tileBegin + kST - 1) : kPipe ? min(tileEnd, tileBegin + 1) : tileBegin;
    if (!kPDLEarly || (pre > tileBegin && (t0 + (pre - 1) * TT) / Nr >= oldBlocks(L, Tq, Nr))) gridDependencyWait();
  }
  if (ST > 0) {
    // The warp's first ST-1 tiles are requested before the query setup.
#pragma unroll
    for (int i = 0; i < kST - 1; i++) {
      if (tileBegin + i < tileEnd) issue(tileBegin + i, i);
      cpAsyncCommit();
    }
  }
  TileRaw<D, KBITS, VBITS, MT, KG, VG> raw;
  if (kPipe && tileBegin < tileEnd) {
    // The warp's first tile and key pairs are requested before the query
    // setup, which then runs under their DRAM round trip.
    const TilePos p = atFirst(t0 + tileBegin * TT);
    if (kKC) stagePairs(p.khalf, p.within / gK);
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      loadKGroup<D, KBITS, KC, KG, kPP>(raw, mt, p, kParamsOff, lane);
      loadVGroup<D, VBITS, VG, kPP>(raw, mt, p, vParamsOff, lane);
    }
  }

  gridDependencyWait();    // q (the append's), the residual, the outputs
  gridLaunchDependents();  // the loads ahead are issued: the next kernel may be scheduled

  // Queries of row g (zero beyond nrows), scaled by scale·log2(e), for the
  // lane's B-fragment channels.
  float qf[D / 16][4];
  loadQueryFrag<D>(q, b, Tq, Hq, h, group, row0, nrows, g, qd, scaleLog2, qf);
#if BD_TIMELINE
  if (threadIdx.x == 0) {
    asm volatile("" ::"f"(qf[0][0]));  // the mark waits for the lane's query values (volatile asm keeps its order)
    tlRec[kTLQuery] = tlClock();
  }
#endif
  int limit[2];  // last visible token of rows 2q, 2q+1 (beyond nrows: all)
  causalLimits(limit, row0, nrows, qd, L, Tq, group);
  const int span = windowSpan(window);
#if BD_SEQ_SPLITS && BD_SEQ_LEAN
  // v2.34 (kSeqLean): the values the code after the tile loop needs, parked
  // in the warp's slot of shared memory rather than held in registers
  // through the loop (lane 0 the warp's, lanes 0-3 their rows' limits).
  __shared__ int seqPark[kWarps][16];
  if (lane == 0) {
    seqPark[warp][0] = t0, seqPark[warp][1] = t1, seqPark[warp][2] = packedEnd, seqPark[warp][3] = nPacked * Nr;
    seqPark[warp][4] = span, seqPark[warp][5] = L, seqPark[warp][6] = splitLen;
  }
  if (lane < 4) seqPark[warp][8 + 2 * lane] = limit[0], seqPark[warp][9 + 2 * lane] = limit[1];
#endif
  float ones[D / 4];
#pragma unroll
  for (int i = 0; i < D / 4; i++) ones[i] = 1.f;
  // v2.24 (LA): the query floats wait in the warp's slice of redO (32 lanes x
  // D/4 floats, lane-contiguous 16-byte words: no bank conflicts), written
  // only after the residual, instead of D/4 registers through the loop; the
  // refold and the residual's plain operand read them back (the same floats).
  float4* const qPark = reinterpret_cast<float4*>(&redO[warp][0][0]);
  if constexpr (LA) {
    static_assert(kQueryRows * D == 32 * (D / 4), "a warp's redO slice holds its lanes' query floats");
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++) qPark[kb * 32 + lane] = make_float4(qf[kb][0], qf[kb][1], qf[kb][2], qf[kb][3]);
  }
  auto unpark = [&](float (&qv)[D / 16][4]) {
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++) {
      const float4 v = qPark[kb * 32 + lane];
      qv[kb][0] = v.x, qv[kb][1] = v.y, qv[kb][2] = v.z, qv[kb][3] = v.w;
    }
  };
  u32 bPlain[D / 16][2];
  if constexpr (!LA) makeB<D>(qf, ones, bPlain);
  u32 bPlainT[D / 16][2];  // the packed blocks' operand type (bf16 for bf16 storage)
  makeB<D, BF>(qf, ones, bPlainT);
  Q8<D> q8;  // v2.8: the int8 path's query (per channel: refolded with the key scales)
  if (Q8K && !(KBITS < 16 && KC)) makeQ8<D, (Q8K ? KBITS : 2)>(qf, ones, qd, q8);
  float zeroC[2] = {0.f, 0.f};
  // ΣQ per KT channel group, in C layout.
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

  WarpState<D, VG> st;
  st.init();
  BD_TL_MARK(kTLPrologue + warp, lane == 0);

  int curGroup = -1;
  u32 bScaled[D / 16][2];
  float biasC[2] = {0.f, 0.f};
  constexpr int kFragBytes = Frag<D, KBITS>::kGroupBytes, vFragBytes = Frag<D, VBITS>::kGroupBytes;
  auto load = [&](TileRaw<D, KBITS, VBITS, MT, KG, VG>& r, int ti) {
    const TilePos p = at(t0 + ti * TT);
    loadTile<D, KBITS, VBITS, MT>(r, p.khalf + (p.within / kFragTokens) * kFragBytes, p.vhalf + (p.within / kFragTokens) * vFragBytes, lane);
  };
  // compute runs tile ti from r; with nx true (the pipeline), the next
  // tile's (at next) groups replace r's as they are consumed; with the ring,
  // r's groups are read from slot as they are used.
  // v2.12: compute takes the tile's place p and, keys per channel, the key
  // group gi of p's block that the tile opens (-1: none, the scales stay);
  // stage(), in the pipeline, then requests the next key group's pairs.
  auto compute = [&](TileRaw<D, KBITS, VBITS, MT, KG, VG>& r, int ti, auto nx, const TilePos& p, int gi, const TilePos& next,
                     const u8* slot, bool full, auto stage, const auto& mid) {
    constexpr bool NX = decltype(nx)::value;
    constexpr bool RG = ST > 0 && !NX;  // (the other loops are instantiated, never run, with the ring)
    const int tok = t0 + ti * TT;
    if (kKC) {
      // Key scales per channel: refold Q when the tile opens a key group.
      if (gi >= 0) {
        if (NX) {  // the pairs were staged in kcPairs[warp]
          if constexpr (kWiden) {
            widenPairs();
          } else {
            cpAsyncWait<0>();
            __syncwarp();
          }
        }
        float sc[D / 4];
        float bias = 0.f;
#pragma unroll
        for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
          for (int hi = 0; hi < 2; hi++) {  // channels 16kb+2q+8hi, +1: one 8-byte pair of pairs
            const int c = 16 * kb + 2 * qd + 8 * hi;
            float s0, z0, s1, z1;
            if (NX && kWiden) {  // v2.13: widened (widenPairs)
              const float4 v = *reinterpret_cast<const float4*>(&kcPairs[warp][2 * c]);
              s0 = v.x, z0 = v.y, s1 = v.z, z1 = v.w;
            } else {
              u32 p0, p1;
              if (RG) {
                const uint2 v = *reinterpret_cast<const uint2*>(slot + RingT::kKC + 4 * c);
                p0 = v.x, p1 = v.y;
              } else if (NX) {
                const uint2 v = *reinterpret_cast<const uint2*>(&kcPairs[warp][c]);
                p0 = v.x, p1 = v.y;
              } else {
                ldg64(p.khalf + kParamsOff + 4 * (gi * D + c), p0, p1);
              }
              s0 = h2f(u16(p0 & 0xffff)), z0 = h2f(u16(p0 >> 16));
              s1 = h2f(u16(p1 & 0xffff)), z1 = h2f(u16(p1 >> 16));
            }
            sc[4 * kb + 2 * hi] = s0;
            sc[4 * kb + 2 * hi + 1] = s1;
            bias += qf[kb][2 * hi] * z0 + qf[kb][2 * hi + 1] * z1;
          }
        if (NX) {
          __syncwarp();  // every lane has read the pairs before they are replaced
          stage();
        }
        if (Q8K) makeQ8<D, (Q8K ? KBITS : 2)>(qf, sc, qd, q8);
        else makeB<D>(qf, sc, bScaled);
        toC(quadSum(bias), qd, biasC);
      }
    }
    tile<D, KBITS, VBITS, KC, KG, VG, MT, BF, (NX && kPP) || RG, NX, Q8K, P8V, RG>(st, r, p.khalf, p.vhalf, kParamsOff, vParamsOff, gK, gV, p.within,
                                                                               tok, kSeqLean ? kNoEnd : t1, limit, span, kKC ? bScaled : bPlainT, kKC ? biasC : zeroC, qsumC,
                                                                               lane, next, &q8, slot, full, mid);
  };
  // v2.12: every row of the chunk sees the tokens before visEnd (row0's
  // causal limit, the split's end), so a tile below it skips tile's mask;
  // with a sliding window, only from visBegin on (the chunk's last row's
  // first visible token; the least int without a window).
  const int visEnd = min(t1, L - Tq + row0 / group + 1);
  const int visBegin = window > 0 ? L - Tq + (row0 + nrows - 1) / group - window + 1 : -0x7fffffff - 1;
  auto full = [&](int ti) { return t0 + (ti + 1) * TT <= visEnd && t0 + ti * TT >= visBegin; };
  // opens is the key group tile ti (at p) opens, by divisions (the ring's
  // and fp16's loops; the pipeline steps instead): -1 if none.
  auto opens = [&](int ti, const TilePos& p) {
    const int kgrp = (t0 + ti * TT) / gK;
    if (!kKC || kgrp == curGroup) return -1;
    curGroup = kgrp;
    return p.within / gK;
  };
  auto noStage = [] {};
  if (ST > 0) {
    // v2.11: tile ti is in slot cur; ti + ST - 1 goes into the slot tile
    // ti - 1 has just left (every lane past it: the __syncwarp below).
    int cur = 0;
    for (int ti = tileBegin; ti < tileEnd; ti++) {
      if (ti + kST - 1 < tileEnd) issue(ti + kST - 1, cur == 0 ? kST - 1 : cur - 1);
      cpAsyncCommit();
      cpAsyncWait<kST - 1>();  // tile ti's group has landed (this lane's copies)
      __syncwarp();            // and every lane's (the pairs are read across lanes)
      TileRaw<D, KBITS, VBITS, MT, KG, VG> r;
      const TilePos p = at(t0 + ti * TT);
      compute(r, ti, Flag<false>(), p, opens(ti, p), TilePos{}, mine + cur * RingT::kSlot, full(ti), noStage, NoMid{});
      __syncwarp();  // every lane has read the slot before it is refilled
      cur = cur + 1 == kST ? 0 : cur + 1;
    }
    cpAsyncWait<0>();
  } else if (kPrefetch && tileBegin < tileEnd) {
    TileRaw<D, KBITS, VBITS, MT, KG, VG> r0, r1;
    load(r0, tileBegin);
    for (int ti = tileBegin; ti < tileEnd; ti += 2) {
      if (ti + 1 < tileEnd) load(r1, ti + 1);
      const TilePos p0 = at(t0 + ti * TT);
      compute(r0, ti, Flag<false>(), p0, opens(ti, p0), TilePos{}, nullptr, full(ti), noStage, NoMid{});
      if (ti + 1 >= tileEnd) break;
      if (ti + 2 < tileEnd) load(r0, ti + 2);
      const TilePos p1 = at(t0 + (ti + 1) * TT);
      compute(r1, ti + 1, Flag<false>(), p1, opens(ti + 1, p1), TilePos{}, nullptr, full(ti + 1), noStage, NoMid{});
    }
  } else if (kPipe && tileBegin < tileEnd) {
#if BD_SEQ_SPLITS && BD_SEQ_LEAN
    // v2.34 (kSeqLean): the loop runs as one of two copies, allFull the
    // copy for a warp whose every tile is full (every decode step's, Tq 1
    // without a window), whose tiles take no mask: it keeps neither visEnd
    // and visBegin nor the mask's limits and span in registers (the code
    // after the loop reads what it needs from seqPark), so the per-sequence
    // split rule's values do not push the loop's state into local memory.
    auto& fullTile = full;
    auto pipeline = [&](auto allFull) {
      auto full = [&](int ti) { return decltype(allFull)::value || fullTile(ti); };
#else
    {
#endif
    // v2.12: the tiles' places step through the block table (a tile never
    // straddles a block: Nr is a multiple of TT), and the key group by a
    // running remainder, instead of dividing by Nr and gK at every tile.
    // half is the K half of packed block blk of the sequence.
    auto half = [&](int blk) { return pool + (size_t(blockTable[b * maxBlocks + blk]) * Hkv + h) * blockBytes; };
    const int tok0 = t0 + tileBegin * TT;
    int blk = tok0 / Nr;
    TilePos cur = at(tok0);
    int gi = 0, gRem = 0;  // KC: the key group of cur in its block, and cur's tokens into it
    if (kKC) gi = cur.within / gK, gRem = cur.within - gi * gK;
    bool open = true;  // cur opens a key group (the warp's first tile does)
    // v2.24 (LA: a key group is a tile): stageAfter stages the key pairs of
    // the tile after p (in block pblk of the sequence), the next block's
    // first group when p ends its block; where that tile does not exist
    // (exists false), a group of p's own block instead, so the copy is
    // unconditional and the look-ahead refold that reads it (the warp's last
    // tile's, whose q8 no tile uses) stays branch-free.
    auto stageAfter = [&](const TilePos& p, int pblk, bool exists) {
      const bool nb = p.within + TT == Nr;
      stagePairs(nb && exists ? half(pblk + 1) : p.khalf, nb ? 0 : p.within / TT + 1);
    };
    // refoldLA is compute's refold with the parked query floats: the same
    // operations in the same order (makeQ8's q8 and the bias's biasC, bit
    // for bit), from the pairs staged a tile earlier; stage() then requests
    // the pairs of the tile after.
    auto refoldLA = [&](auto stage) {
      widenPairs();
      float qv[D / 16][4];
      unpark(qv);
      float sc[D / 4];
      float bias = 0.f;
#pragma unroll
      for (int kb = 0; kb < D / 16; kb++)
#pragma unroll
        for (int hi = 0; hi < 2; hi++) {
          const int c = 16 * kb + 2 * qd + 8 * hi;
          const float4 v = *reinterpret_cast<const float4*>(&kcPairs[warp][2 * c]);
          const float s0 = v.x, z0 = v.y, s1 = v.z, z1 = v.w;
          sc[4 * kb + 2 * hi] = s0;
          sc[4 * kb + 2 * hi + 1] = s1;
          bias += qv[kb][2 * hi] * z0 + qv[kb][2 * hi + 1] * z1;
        }
      __syncwarp();  // every lane has read the pairs before they are replaced
      stage();
      makeQ8<D, (Q8K ? KBITS : 2)>(qv, sc, qd, q8);
      toC(quadSum(bias), qd, biasC);
    };
    if constexpr (LA) refoldLA([&] { stageAfter(cur, blk, tileBegin + 1 < tileEnd); });
    for (int ti = tileBegin; ti < tileEnd; ti++) {
      // The last tile's "next" is itself again (L1/L2 hits): no branch in
      // the unrolled group loops. The block table entry is read either way.
      const bool more = ti + 1 < tileEnd, nb = more && cur.within + TT == Nr;
      const u8* nh = half(blk + nb);
      const TilePos next{nh, nh + kBytes, more ? (nb ? 0 : cur.within + TT) : cur.within};
      // The next key group's pairs, staged while this one runs, if the
      // warp reaches it: in cur's block, or the next block's first.
      auto stage = [&] {
        const int w = cur.within - gRem + gK;
        if (t0 + ti * TT - gRem + gK < t0 + tileEnd * TT) {
          if (w < Nr) stagePairs(cur.khalf, gi + 1);
          else stagePairs(half(blk + 1), 0);
        }
      };
      if constexpr (LA) {
        // v2.24: no refold ahead of the scores; the next tile's (whose pairs
        // were staged a tile ago) runs after this tile's softmax, among its
        // P·V mmas, and stages the pairs of the tile after next.
        auto mid = [&] { refoldLA([&] { stageAfter(next, blk + nb, ti + 2 < tileEnd); }); };
        compute(raw, ti, Flag<true>(), cur, -1, next, nullptr, full(ti), stage, mid);
      } else {
        compute(raw, ti, Flag<true>(), cur, kKC && open ? gi : -1, next, nullptr, full(ti), stage, NoMid{});
      }
      BD_TL_MARK(kTLFirst + warp, lane == 0 && ti == tileBegin);
      if (kKC) {
        gRem += TT;
        open = gRem >= gK;
        if (open) gRem -= gK, gi++;
        if (nb) gi = 0, gRem = 0, open = true;
      }
      blk += nb;
      cur = next;
    }
#if BD_SEQ_SPLITS && BD_SEQ_LEAN
    };
    // The warp's tiles are contiguous: all full if the first starts at or
    // after visBegin and the last ends at or before visEnd.
    if (t0 + tileBegin * TT >= visBegin && t0 + tileEnd * TT <= visEnd) pipeline(Flag<true>());
    else pipeline(Flag<false>());
#else
    }
#endif
  }
  BD_TL_MARK(kTLLoop + warp, lane == 0);
  // The split's range, the residual's tokens, the mask's limits and the
  // split count after the loop: v2.34 (kSeqLean) reads them back from the
  // warp's slot (volatile: loads from shared memory, never the registers of
  // before the loop; every lane past the stores: the __syncwarp), no
  // division. Otherwise (every other kernel: the code of before v2.34) the
  // values from before the loop.
#if BD_SEQ_SPLITS && BD_SEQ_LEAN
  __syncwarp();
  const volatile int* park = seqPark[warp];
  const int s0 = park[0], s1 = park[1], sPackedEnd = park[2], resStartR = park[3], spanR = park[4], Lr = park[5], sLen = park[6];
  const int limitR[2] = {park[8 + 2 * qd], park[9 + 2 * qd]};
#else
  const int Lr = L, sLen = splitLen, s0 = t0, s1 = t1, sPacked = nPacked, sPackedEnd = packedEnd, spanR = span;
  const int(&limitR)[2] = limit;
#endif
  // v2.12: the packed tiles' values were scaled (unpackV): unscale before
  // the residual's fp16 values join the same accumulators.
  if constexpr (kScaledV && (VBITS == 2 || VBITS == 4) && !P8V && !BF) unscaleV<D, VBITS>(st.acc);
  // Residual tokens (fp16, mma order), one 16-token group per tile.
  if (s1 > sPackedEnd) {
    if constexpr (LA) {  // v2.24: the plain operand from the parked floats (makeB's bits)
      float qv[D / 16][4];
      unpark(qv);
      makeB<D>(qv, ones, bPlain);
    }
    const size_t off = (size_t(resSlots ? resSlots[b] : b) * Hkv + h) * Nr * D * 2;
#if BD_SEQ_SPLITS && BD_SEQ_LEAN
    const int resStart = resStartR;
#else
    const int resStart = sPacked * Nr;
#endif
    float qsum1[2][1] = {{0.f}, {0.f}};
    WarpState<D, 1> rs;  // residual uses unscaled values: a state without groups
    rs.m[0] = st.m[0]; rs.m[1] = st.m[1]; rs.l[0] = st.l[0]; rs.l[1] = st.l[1];
#pragma unroll
    for (int mb = 0; mb < D / 16; mb++)
#pragma unroll
      for (int e = 0; e < 4; e++) rs.acc[mb][e] = st.acc[mb][e];
    rs.zacc[0][0] = rs.zacc[1][0] = 0.f;
    for (int tok = max(s0, sPackedEnd) + warp * kFragTokens; tok < s1; tok += kWarps * kFragTokens) {
      const int within = tok - resStart;
      const int fb = (within / kFragTokens) * kFragTokens * D * 2;
      TileRaw<D, 16, 16, 1> raw;
      loadTile<D, 16, 16, 1>(raw, resK + off + fb, resV + off + fb, lane);
      tile<D, 16, 16, false, 1, 1, 1, false>(rs, raw, nullptr, nullptr, 0, 0, 1, 1, within, tok, s1, limitR, spanR, bPlain, zeroC, qsum1, lane);
    }
    // The residual tiles rescaled acc and zacc alike only through alpha: carry
    // the zeros' scale by replaying the max change on zacc.
    if (VG > 0) {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const float a = (st.m[r] == kNegInf) ? 1.f : exp2f(st.m[r] - rs.m[r]);
#pragma unroll
        for (int k = 0; k < VG; k++) st.zacc[r][k] *= a;
      }
    }
    st.m[0] = rs.m[0]; st.m[1] = rs.m[1]; st.l[0] = rs.l[0]; st.l[1] = rs.l[1];
#pragma unroll
    for (int mb = 0; mb < D / 16; mb++)
#pragma unroll
      for (int e = 0; e < 4; e++) st.acc[mb][e] = rs.acc[mb][e];
  }

  // Warp totals: denominators and value zeros summed over the 8 lanes of
  // each row (xor over g); zeros folded into the accumulators.
  st.sumRows();
  if (ST > 0) __syncthreads();  // every warp has left the ring that redO shares
#pragma unroll
  for (int mb = 0; mb < D / 16; mb++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int c = 16 * mb + g + 8 * (e >> 1), r = 2 * qd + (e & 1);
      float v = st.acc[mb][e];
      if (VBITS < 16) v += st.zacc[e & 1][c * VG / D];
      redO[warp][r][c] = v;
    }
  st.storeRows(redM, redL, warp, g, qd);
  __syncthreads();
  BD_TL_MARK(kTLWarpsDone, threadIdx.x == 0);
  const int nSplits = (Lr + sLen - 1) / sLen;
  if (counters && nSplits == 1) {  // v2.15: the row chunk's only split writes the output itself
    finishOneSplit<D, kWarps, kQueryRows>(redO, redM, redL, out, out32, b, h, row0, nrows, group, Hq, Tq);
    BD_TL_MARK(kTLExit, threadIdx.x == 0);
    return;
  }
  // Merge the warps in order.
  const size_t part = (size_t(b) * Hkv * rowChunks + blockIdx.y) * maxSplits + split;
  mergeWarps4<D, kWarps, kQueryRows>(redO, redM, redL, partO, partML, part);  // v2.18
  BD_TL_MARK(kTLPartial, threadIdx.x == 0);
  if (counters) {  // v2.5: the last split merges; v2.17: its loads ahead (finishSplits, bitdecode.cuh)
    finishSplits<D, kQueryRows, false, kMergeAheadMMA, !kMergeFenceSC>(
        partO, partML, &counters[size_t(b) * Hkv * rowChunks + blockIdx.y], out, out32, part - split, nSplits, b, h, row0, nrows, group, Hq,
        Tq, threadIdx.x, [] { __syncthreads(); }, [](int, float, float) {}, BD_TL_ARRIVED);
  }
  BD_TL_MARK(kTLExit, threadIdx.x == 0);
}

}  // namespace mma

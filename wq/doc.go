// Package wq ("weight quantization") defines the low-bit formats of
// bitdecode's linear-layer weights: the spec a user types (--weights int4,
// --weights int3:gptq, ...), the packed layout a GPU GEMV reads, the
// reference quantizers (round-to-nearest and GPTQ), the dequantization that
// defines every format's numbers, the byte accounting, and dynamic error
// compensation (DEC, seed 002): the residual W − Ŵ, quantized again, and the
// per-step choice of the input channels whose residual rows are added back.
//
// The name mirrors package kv: kv holds the formats of the KV cache, wq those
// of the weights; both sit below backend/, which runs them, and above
// nothing but internal/half. wq knows no device and no model: a backend
// receives a packed Matrix (and optionally a DEC residual) and decides how to
// multiply by it; the model only ever sees "a linear layer".
//
// # Formats
//
// A weight W [N, K] (N outputs, K inputs, the PyTorch nn.Linear layout) is
// stored row by row. Integer formats (int8, int4, int3) quantize each row in
// groups of G consecutive input channels (G = 128 unless the spec says
// otherwise; K must be a multiple of G), each group with its own fp16
// (scale, zero) pair. fp16 stores the values themselves.
//
// # Round to nearest (RTN), step by step
//
// The input of every quantizer is fp16: checkpoint weights are rounded to
// fp16 first (round to nearest even; exact for bf16 weights of magnitude
// >= 2^-14, the fp16 normal range, and within 2^-25 below it). With b bits
// and L = 2^b − 1, over the G fp16 values w_1..w_G of one group:
//
//	lo, hi  = min w_i, max w_i                       (exact)
//	scale32 = (hi − lo) / float32(L)                 (float32, round to nearest even)
//	s       = fp16(scale32)                          (round to nearest even)
//	z       = fp16(lo) = lo                          (exact: lo is an fp16 value)
//	q_i     = 0                                      if s == 0
//	q_i     = clamp(rint((w_i − z) / float32(s)), 0, L)   otherwise
//	                                                 (float32 subtract and divide,
//	                                                  each rounded to nearest even;
//	                                                  rint rounds ties to even)
//	ŵ_i     = float32(float32(s)·float32(q_i)) + float32(z)
//	                                                 (the product is exact in
//	                                                  float32; one rounding in the add)
//
// These are the rules of package kv, so one dequantizer serves both caches
// and weights. ErrorBound gives the largest |w − ŵ| they allow.
//
// A GPU kernel that dequantizes in half2 arithmetic (hfma2 of the code with
// s and z) rounds ŵ to fp16: its value differs from the reference ŵ by at most
// one fp16 ulp of ŵ; kernels computing ŵ in float32 reproduce it exactly.
//
// # GPTQ
//
// The calibrated method is GPTQ (Frantar et al., 2022), chosen over AWQ
// because it produces exactly the RTN format (same codes, same fp16 (scale,
// zero) pairs, same GEMV), needs from the calibration text only one
// statistic per linear input, H = Σ x xᵀ, and is strongest where we need it
// most, at 3 bits. AWQ's per-input-channel scales would either have to be
// folded into the preceding op (not possible for every layer without model
// surgery) or cost an extra multiply of x in every GEMV.
//
// For one weight, with H the sum of x xᵀ over the calibration tokens:
//
//  1. channels never active (H_kk = 0) get H_kk = 1;
//  2. H += λ·I with λ = 0.01·mean(diag H) (dampening);
//  3. U = upper Cholesky factor of H⁻¹ (Uᵀ U = H⁻¹);
//  4. each row w (independently, in float64) is walked in increasing k:
//     at the first channel of a group, that group's (s, z) come from the RTN
//     rules applied to the group's current values rounded to fp16; then
//     q_k = code of w_k under (s, z), e = (w_k − ŵ_k) / U_kk, and
//     w_j −= e·U_kj for every j > k (the error is pushed onto the channels
//     not yet quantized, weighted by how they correlate with channel k).
//
// Columns are processed in their natural order (no act-order), so groups
// stay contiguous and the format is unchanged.
//
// # Packed layout (the one place it is defined)
//
// This is the layout every backend receives. The CUDA backend may keep a
// device-private permutation of it (gpu/kernels' tiled layout, PackTiles:
// int4 weights of 2048+ rows without DEC, each GEMV ring step one contiguous
// block); its words are these words, reordered, so every number below holds.
//
// Row n of a packed matrix is RowWords(K) little-endian uint32 words,
// rows one after the other: word i of row n is Words[n·RowWords + i]. A row
// is cut into blocks of E consecutive input channels stored in WB words:
//
//	format  E   WB  bits  block of channels k0..k0+E−1
//	fp16    2   1   16    bits 0..15: k0, bits 16..31: k0+1 (fp16 bit patterns)
//	int8    4   1   8     bits 0..7: k0, 8..15: k0+2, 16..23: k0+1, 24..31: k0+3
//	int4    8   1   4     nibble p (p = 0..3) of the low half: k0+2p,
//	                      nibble p of the high half: k0+2p+1
//	int3    32  3   3     word j (j = 0,1,2): field p (p = 0..4) of the low
//	                      half, bits 3p..3p+2: k0+10j+2p; the same field of
//	                      the high half, bits 16+3p..16+3p+2: k0+10j+2p+1;
//	                      bit 15 of word j: bit j of k0+30's code;
//	                      bit 31 of word j: bit j of k0+31's code
//
// The rule behind every row: the low 16 bits of a word hold the even channel
// of each pair, the high 16 bits the odd one, at the same bit offset. So one
// shift and one AND with a mask of the form 0x000f000f (int4), 0x00070007
// (int3) or 0x00ff00ff (int8) leaves the codes of channels (2m, 2m+1) in the
// low bits of the two halves of a register; OR-ing 0x64006400 (lop3 does
// shift-free AND and OR in one instruction) makes the half2 (1024+q, 1024+q′);
// subtracting (1024, 1024) gives the exact codes, and one hfma2 with (s, s)
// and (z, z) gives (ŵ, ŵ′), rounded once to fp16 (folding the 1024 into
// the zero instead, z − 1024·s, would round that term at 1024 times the
// scale). These pairs are the A operand of gpu/kernels/gemvq.cu's mma,
// whose B operand takes x's channels in the same pairs. int3 puts 30
// codes in such fields (five pairs per word, like int4's four) and spreads
// the last two over the three spare bits 15 and 31, gathered by three
// shift-and-mask steps once per 32 channels: 3 bits per weight and almost the
// unpack cost of int4. Bit planes would cost three gathers per pair.
//
// Scales and zeros are stored apart from the codes: Params holds, for row n
// and group g, the fp16 scale at Params[2·(n·K/G + g)] and the fp16 zero
// right after it, so one 32-bit load gives a (scale, zero) half2 pair.
// A row's bytes: K·bits/8 of codes plus 4·K/G of params (RowBytes).
//
// # Dynamic error compensation (DEC)
//
// The residual R = W − Ŵ is stored transposed, Rᵀ [K, N] (one row per input
// channel, so the rows of the channels a step selects are contiguous), in a
// format of its own: int4 with groups of 128 output channels (the RTN rules
// above applied to fp16(R)), or fp16. A step with activations x [K] computes
//
//	y = x·Ŵᵀ (the base GEMV), then y_n += Σ_{k ∈ S} x_k · R̂_kn
//
// with S the selected channels. S is chosen per chunk of ChunkChannels = 1024
// consecutive input channels (the last chunk may be shorter, c channels): a
// chunk selects kc = min(c, ceil(KChunk·c/1024)) channels by an approximate
// top-k of |x| (see SelectApprox: a magnitude histogram with 8 buckets per
// octave and an in-order fill of the boundary bucket), so every selected
// channel's |x| is at least 8/9 of every unselected one's.
// The compensation is summed per output in increasing k in float32 (each
// term x_k·R̂_kn rounded to float32 before the add: no fused multiply-add)
// and added once to the base output; with no channel selected the base
// output is returned untouched. gpu/kernels/dec.cu reproduces the selection
// and these sums bit for bit, reading R̂'s selected rows from host memory.
package wq

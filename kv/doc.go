// Package kv defines the formats of bitdecode's KV cache: the spec a user
// types (--kv int4, --kv k8v4:kt64, ...), the packed byte layout of a block of
// tokens for each format, the reference quantize, pack and dequantize
// routines whose numbers every other implementation (the CPU attention in
// package attn, the GPU kernels) must reproduce, the Hadamard rotation, and
// the memory accounting that admission control, logs and `bitdecode inspect`
// all read.
//
// # The cache of one KV head
//
// A sequence's cache for one KV head is a list of packed blocks of Nr tokens
// each, followed by a residual block that holds the newest (fewer than Nr)
// tokens in fp16. When the residual block fills, it is quantized and packed
// as a whole and a new, empty residual block starts. Prefill packs whole
// blocks directly and leaves the remainder in the residual block.
//
// # Quantization (integer element types)
//
// Asymmetric min/max quantization with b bits over a group of fp16 values
// x_1..x_n (the inputs are fp16, so every step below is defined on exactly
// representable float32 values and a CUDA kernel reproduces it bit for bit):
//
//	lo, hi  = min x_i, max x_i                       (exact)
//	scale32 = (hi - lo) / float32(2^b - 1)           (float32, round to nearest even)
//	s       = fp16(scale32)                          (round to nearest even)
//	z       = fp16(lo) = lo                          (exact: lo is an fp16 value)
//	q_i     = 0                                      if s == 0
//	q_i     = clamp(rint((x_i - z) / float32(s)), 0, 2^b - 1)  otherwise
//	                                                 (float32 subtract and divide,
//	                                                  each rounded to nearest even;
//	                                                  rint rounds ties to even)
//	x̂_i     = float32(float32(s) * float32(q_i)) + float32(z)   (two roundings, no FMA)
//
// The error bound that tests use follows from these steps (see ErrorBound):
// half a quantization step, plus what rounding the scale to fp16 can add at
// the top of the range, plus float32 rounding.
//
// Groups: keys are quantized either per channel over groups of G consecutive
// tokens ("kc", KIVI/BitDecoding channel-wise) or per token over groups of G
// consecutive channels ("kt", tensor-wise); values always per token over
// groups of G channels.
//
// Float element types (fp16, bf16, fp8 e4m3/e5m2) are converted element by
// element with round to nearest even; fp8 saturates to its largest finite value.
//
// # Bit planes (bw: read-time precision tiers)
//
// The "bw" format keeps K and V in fp16 (or bf16) but splits every element
// when it is written into three planes stored apart: plane 0 holds bits
// 15..12 (sign and the top three exponent bits), plane 1 bits 11..8, plane
// 2 bits 7..0 (PlaneLayout is the one definition of where each byte goes).
// There is no residual block: a token is in the planes as soon as it is
// written, in a block of Nr tokens (blkN) that may be partly filled. Each
// token has a Tier: High reads all three planes (exact), Medium planes 0
// and 1, Low plane 0 only, Evicted nothing. Recon.Read defines the value a
// partial read yields, bit for bit: the missing bits are filled with the
// adjustment term (Adj8 for bits 7..0, Adj4 for bits 11..0), a read whose
// exponent bits are all zero becomes 0 (the subnormal filter), and a fill
// that would make an inf/NaN pattern from an exponent not fully read
// saturates to the largest finite value. Tiers are chosen by the engine's
// policy; this package defines only the numbers and the bytes read per
// tier (PlaneLayout.TierBytes, PlaneReadBytes).
package kv

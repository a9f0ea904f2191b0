// Package attn computes attention over bitdecode's KV cache: the decode step
// (a few new query tokens per sequence against everything cached) and causal
// prefill over a chunk of prompt tokens, on the CPU, for every format of
// package kv, plus the float64 reference that every implementation (this
// package's fast path and the GPU kernels) is tested against.
//
// Shapes use the project's letters: B sequences, Hq query heads, Hkv KV heads
// (Hq a multiple of Hkv; query head h reads KV head h/(Hq/Hkv), the Hugging
// Face repeat_kv order), D the head dimension, L a sequence's cached length,
// Nr the residual block size, Tq the query tokens per sequence.
//
// The cache of one sequence and one layer is a Seq: packed blocks of Nr tokens
// (each [Hkv] heads of kv.Format.BlockBytes(), K half then V half) followed by
// the fp16 residual block. The fast path reads each block once for the R =
// Group·Tq query rows that share it, never materializing a float copy of the
// cache, and runs in parallel over sequences, KV heads and KV splits with a
// log-sum-exp merge in a fixed order, so its result does not depend on the
// number of threads.
//
// # Kernels
//
// The inner loops (kernels.go) have a pure-Go version, which is the fallback
// and the reference, and AVX2 and AVX-512 assembly chosen at each call from
// internal/cpufeat (cpufeat.Force selects a lower level; the purego build tag
// and other architectures run pure Go). Per block (block.go):
//   - float keys (fp16, bf16, fp8): scores by fp32 FMA, 8 tokens per tile;
//     fp16 rows are converted in registers, two query rows per pass;
//   - integer keys: with AVX-512 VNNI, int8 dot products (VPDPBUSD) of the
//     byte codes (int4 read as packed nibbles; int2 read packed, its codes
//     split by shift and mask against a query in VPERMB order, where the
//     CPU has AVX-512 VBMI, cpufeat.VBMI) with the query quantized per
//     row to int8 (15 bits in two halves for int8 keys), per key group for
//     per-channel keys, whose scales are folded into the query and zeros
//     into one bias per row; without VNNI, the codes as float32 and FMA;
//   - softmax in float32 with a vector exp;
//   - values: float rows by FMA; int4 and int2 codes with VNNI and VBMI by
//     u8 weights p·s_t, four tokens per 32-bit lane (VPDPBUSD, pvU8: the
//     codes gathered from the packed rows by VPERMT2B/VPERMB), the weights'
//     rounding times the codes' midpoint folded into the zeros' sums; other
//     integer codes with VNNI by int16 weights (VPDPWSSD), else as float32
//     codes times their scale; the zeros' share Σ p·z per group is summed
//     apart.
//
// The integer paths' error against the reference is bounded in the tests by
// the query's and the weights' quantization steps on top of float32
// rounding; TestQueryQuantVsFormatError and TestValueQuantVsFormatError
// check that the query's and the u8 weights' shares stay below the error of
// the KV format itself.
package attn

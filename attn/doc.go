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
// the fp16 residual block. The fast path dequantizes on the fly, folding the
// scales out of the inner loop (scores use Q scaled per key group; values are
// weighted by probabilities times scales), never materializing a float copy
// of the cache, and runs in parallel over sequences, KV heads and KV splits
// with a log-sum-exp merge in a fixed order, so its result does not depend
// on the number of threads.
package attn

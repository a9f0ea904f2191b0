// Package kvcache holds bitdecode's KV caches behind one interface, Cache:
// what the model's attention writes new keys and values into and reads them
// back from, and what the engine's scheduler admits requests by.
//
// A cache stores one kv.Format (package kv defines the formats, their packed
// layouts and accounting; package attn computes attention over them on the
// CPU). This package owns everything between a format and a running
// engine:
//
//   - Paged, the CPU cache of every format but bw: per (sequence, layer)
//     an attn.Cache whose packed blocks are views of a shared pool, each
//     sequence with a 16-bit residual slot; sized (a block pool with
//     reference-counted blocks and copy-free sharing of identical prompt
//     prefixes, for the scheduler) or unbounded (run, eval). It applies
//     each layer's sliding window (model.Config.LayerWindows) through
//     attn.Params.Window (the GPU paged cache, gpukv.Paged, through its
//     kernels' DecodeShape.Window); the bit-plane caches (bw) do not, and
//     refuse a sequence longer than the smallest window (WindowLimit,
//     CheckWindow).
//   - Planes, the CPU cache of the bit-plane format (bw, read-time
//     precision tiers) with its tier maps, attention mass and TierPolicy
//     (H2O heavy hitters extended to tiers), sized or unbounded alike.
//   - TPCache, the cache of a tensor-parallel backend (backend/tp): one
//     cache per rank (the rank's device's own, made by New), over the
//     rank's query and KV heads, driven in step.
//   - BlockAllocator and PrefixKey (the block pool's books) and
//     reserveBatch (the all-or-nothing admission of a batch), shared by both.
//
// Caches that live in a device's memory come from the device's own package,
// which registers a Provider: kvcache/gpukv for the CUDA backend. New picks
// the provider that serves a backend, else a CPU cache. The engine calls New
// and sees only Cache, never a concrete type or backend.
package kvcache

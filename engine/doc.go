// Package engine runs generation: it owns sequences and their low-bit KV
// caches, feeds the model batches (prefill, then one token per step) and
// samples the next tokens. The model sees the cache only through
// model.Attention; the cache's format (package kv) and attention (package
// attn) are chosen here.
//
// For one sequence, Generate drives a KVCache. For serving, a Scheduler runs
// continuous batching over a BlockCache: PagedCache keeps every layer's
// packed blocks in one pool managed by a BlockAllocator (reference counts,
// copy-free sharing of identical prompt prefixes), admits requests by free
// blocks, and preempts the youngest sequence when the pool runs out.
// PlaneCache (the bit-plane format, read-time precision tiers) is a
// BlockCache too when made by NewPagedPlaneCache; as a TieredCache it takes
// a request's own tier policy (Request.KVTiers) and reports TierStats.
package engine

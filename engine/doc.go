// Package engine runs generation: it owns sequences and their low-bit KV
// caches, feeds the model batches (prefill, then one token per step) and
// samples the next tokens. The model sees the cache only through
// model.Attention; the cache's format (package kv) and attention (package
// attn) are chosen here. Continuous batching and the paged block manager
// (issue #6) will grow here too.
package engine

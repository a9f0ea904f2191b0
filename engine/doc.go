// Package engine runs generation: it opens a model for a command, owns the
// sequences, feeds the model batches (prefill, then one token per step) and
// samples the next tokens.
//
// Open is the one call every command makes: it resolves the device (a GPU
// when one is usable, else the CPU with one line saying why), reads the
// checkpoint's tokenizer, settings and DEC tuning once, calibrates GPTQ
// formats (package eval), loads the weights (package model) and, on
// request, builds the KV cache from a spec (package kvcache, which asks the
// backend for its own cache).
//
// For one sequence, Generate drives a kvcache.Cache. For serving, a
// Scheduler runs continuous batching over a sized cache: it admits requests
// by free blocks, reuses cached prompt prefixes, preempts the youngest
// sequence when the pool runs out, and applies a request's own precision
// tiers (Request.KVTiers) where the cache has them (bw). The engine knows no
// concrete backend or cache type.
package engine

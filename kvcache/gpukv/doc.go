// Package gpukv holds the KV caches of the CUDA backend (backend/gpu): the
// packed low-bit caches in GPU memory behind kvcache.Cache. Linking it
// (the bitdecode command imports it) registers them with kvcache.New, so
// that a model opened on the GPU gets its cache from the backend it runs
// on; the engine never names these types.
//
// Paged keeps every format but bw: a pool of packed blocks in kv.MMA order
// and 16-bit residual slots, written by the fused quantize/pack kernel and
// read by the tensor-core decode attention (gpu/kernels), each decode step
// replayable as a CUDA graph; sequences with a common prompt prefix share
// its blocks (by canonical prefill chunks, so that a cached prefix holds
// the bits its computation would write). Planes keeps the bit-plane (bw)
// format and its read-time precision tiers (gpu/kernels/planes.cu) for run
// and eval. Their host-side bookkeeping (pagedBook, blockPool) is pure Go
// in pool.go; both use the per-batch device buffers (gpuBuffers).
package gpukv

// Package gpu implements backend.Backend on an NVIDIA GPU, through the
// cgo-free runtime of package gpu/cuda and the kernels of package
// gpu/kernels. Nothing here needs the CUDA toolkit to build; New fails with
// an error wrapping gpu/cuda's ErrNoDriver or ErrNoDevice where there is no
// GPU, so callers can fall back to package backend/cpu.
//
// # Storage
//
// Tensors live in device memory. Activations are float32 and every op
// computes on F32 tensors, with the semantics of backend/cpu (the
// reference); F16 and BF16 tensors can be allocated, uploaded and downloaded
// (rounding to nearest even on upload, on the host) but not computed on. I32
// tensors (token ids, positions, row indices) also keep the host copy given
// to UploadInt32, so Embedding and Rows check indices on the host, as the CPU
// backend does, before any kernel reads them.
//
// Weights of two dimensions (the matrices of Linear, and the token
// embedding, which tied models also use as lm_head) are stored once, in
// fp16, converted on the device from F32, BF16 or F16 checkpoint data. BF16
// values convert exactly (fp16 has more significand bits) as long as they lie
// within fp16's range (±65504; smaller than 2⁻¹⁴ they lose bits as fp16
// subnormals); a finite value beyond it makes LoadWeight fail with an error
// naming the weight, rather than load an infinity. Embedding gathers from the
// fp16 table, so with F32 checkpoints the embeddings are fp16-rounded.
// Weights of other ranks (norm weights, biases, RoPE frequencies) are stored
// in float32, exactly as the CPU backend stores them.
//
// # Ops
//
// Linear has three paths for fp16 weights, chosen in one place (fp16Path).
// Batches of 1-2 rows (K a multiple of 8) run gemv.cu: a warp reads each
// weight row once, multiplies by x in float32 and adds the bias in the same
// kernel (its results differ from the CPU's only by float32 summation
// order, and by the fp16 rounding of W for F32 checkpoints); LinearGroup
// runs q/k/v or gate/up through it as one launch, one split-K factor for
// the group. Batches of up to 16 rows run linear.cu, the tensor-core kernel
// whose result for a row is bitwise independent of the batch (x rounded to
// fp16 in the kernel); LinearGroup runs q/k/v or gate/up through it as one
// launch. Above 8 rows a launch of at least 96 MiB of weights (gate, up,
// down and the lm_head at 8B shapes) takes cuBLASLt instead, faster there
// (decode-step.md v15), and so does a joined group of at least 48 MiB
// (q|k|v at 8B shapes, v17b). Larger batches
// convert x to fp16 with a kernel, multiply with cuBLASLt (fp16 inputs, fp32
// accumulation and output: Y[T,N] = X[T,K]·W[N,K]ᵀ) and add the bias with a
// kernel. JoinWeights (backend.WeightJoiner, called by the model loader for
// q|k|v and gate|up) places a group's matrices one after another in one
// allocation; LinearGroup on cuBLASLt then runs one GEMM over the group's
// concatenated channels, and ops.cu's split_cols copies each weight's
// columns and bias to its output, or swiglu_cols folds the SwiGLU queued
// right after it (join.go; decode-step.md v17), and rope_cols the RoPEQK
// without norms. Where the op queued right before a cuBLASLt GEMM wrote x
// and can write its fp16 copy too (AddRMSNorm, the SwiGLU folded into
// gate|up's split, a KV cache's attention output through EnqueueOut, or
// EnqueueOutWith where it is rotated back in float32: v22), the
// GEMM reads that copy and x's conversion is not launched (half.go; the
// same bits; decode-step.md v19). The fp16 rounding of x costs at most about 2⁻¹¹ relative to
// Σ|x_k·w_k|. Options.NoGEMV (BITDECODE_NO_GEMV=1) sends every batch to
// cuBLASLt; Options.BatchInvariant (BITDECODE_BATCH_INVARIANT=1, serve's
// default on the GPU) sends every batch to linear.cu, so that a row's
// logits do not depend on the rows computed beside it, and refuses packed
// weights; the rows the model names as a prefill chunk (backend.ChunkRows)
// run apart on the default choice for the chunk's length (chunk.go: their
// bits depend on the chunk, never on the batch; Options.NoChunkPath for
// comparisons). Embedding, Rows, RMSNorm,
// RoPE, SwiGLU and Add are the kernels of gpu/kernels/ops.cu; they follow the
// CPU's arithmetic (float64 sums of squares in RMSNorm, float64 cos and sin of
// the float32 RoPE angle, unfused float32 products) and agree with it to an
// ulp or two; SwiGLU's silu uses float32 expf. SwiGLU of a decode
// LinearGroup's two outputs, and RoPEQK without norms of its first two,
// queued right after it, run in that gemv.cu launch's epilogue instead
// (fuse.go; the bits of the separate ops). All kernels are
// deterministic: no atomics, reduction orders fixed by the shapes.
//
// # Low-bit weights and DEC
//
// LoadQuantWeight keeps int4 and int8 matrices packed (wq's layout; int4
// and int8 matrices of 2048+ rows without DEC in a GPU-private tiled layout
// instead, their only device copy: qlinear.go tiledLayout, Options.GEMVQWQ,
// Options.GEMVQInt8V4):
// decode-sized batches run gpu/kernels/gemvq.cu, prefill dequantizes to
// fp16 and multiplies with cuBLASLt; int3 and fp16 matrices are dequantized
// to fp16 at load. A DEC residual (wq.DEC: Rᵀ [K, N] in int4, int8 or fp16)
// is copied into pinned host memory mapped into the device and never
// uploaded: after the base product, Linear queues one more op that runs
// gpu/kernels/dec.cu for every row of x, the per-chunk approximate top-k of
// |x| (wq.SelectApprox exactly) and the compensation, whose thread blocks
// read only the selected residual rows over PCIe (zero-copy) and add
// wq.Compensate's sums, bit for bit, to the base output. Decode batches
// select into a small per-weight device scratch (so the op replays in a
// CUDA graph); prefill batches into Linear's scratch. Prefill is
// compensated too, token by token, as on the CPU. The thread blocks (n_tb)
// come from wq.DEC.Blocks (tuned per shape by 'bitdecode tune dec'), else a
// default.
//
// Options.DECMode (BITDECODE_DEC_MODE) "fused", the default for int4
// residuals of packed weights, launches gemvq.cu's gemv_q_dec: the DEC thread
// blocks inside the base GEMV's grid select the channels themselves, read the
// residual rows while the base CTAs stream the weights, and meet them per
// output tile through a flag, whichever side comes second adding the
// compensation (gpu/kernels/dec.cu; docs/perf/dec.md); "serial" (the default
// for int8 and fp16 residuals and prefill) runs DEC as its own kernels after the base
// GEMV; "concurrent" runs them on a second, highest-priority stream beside
// it, joined by one add. All three give the same bits. Options.DECBlocks
// (BITDECODE_DEC_BLOCKS=n) overrides n_tb for every DEC weight, for
// experiments.
//
// # Settings
//
// The backend reads no environment variable: Open takes Options, which a
// program fills once at its edge with ParseOptions(os.LookupEnv) (the
// backend's variables, the kernel planners' kernels.Tuning and gpu/cuda's
// Config; docs/gpu.md has the table). New is Open with the default Options.
//
// # Streams, ordering and errors
//
// Every op appends its launches to the backend's op queue and returns at
// once; the queue runs on the device's owner thread, on the device's
// stream, in one gpu/cuda Device.Do every 32 ops (a decode step's first
// kernels run while the rest is queued) and at Do, Download and Sync,
// replaying CUDA graphs where the same ops ran before (graph.go).
// UploadInt32 queues its copy with the ops; Upload copies through the
// stream and waits for it; Download waits for it: each sees the ops issued
// before it. As in
// backend/cpu, an op records its first error (a shape mismatch, an index out
// of range, a failed launch) and later ops do nothing until Sync; Err reports
// the recorded error without waiting, Download and Sync wait for the stream
// and also report errors of the queued work.
//
// Freed tensors return their memory to a pool that Alloc reuses by size, so
// a forward pass that allocates the same shapes every step allocates device
// memory only on its first step. All ops run on one stream, so a buffer
// reused this way is never touched by two ops at once. Close frees
// everything and closes the device.
package gpu

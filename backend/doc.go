// Package backend defines the small set of tensor operations that a model's
// forward pass is written in, so that a model never knows which device runs
// it. Package backend/cpu implements it in pure Go; a CUDA implementation
// (device memory, asynchronous streams, low-bit weights) is meant to follow
// without changing the interface or the models.
//
// # Tensors, weights and the host
//
// A [Tensor] is an activation buffer owned by a [Backend]: its elements live
// wherever the backend keeps them (host memory, device memory) and are only
// reached through [Backend.Upload], [Backend.UploadInt32] and
// [Backend.Download]. A [Weight] is a backend-owned, read-only parameter made
// once from host data by [Backend.LoadWeight]; the backend chooses its storage
// (float32 on the CPU today, bf16 or a low-bit quantized format later), so a
// model only ever asks for "a linear layer".
//
// Every op views a tensor as a row-major matrix: the last dimension is the
// row width (cols) and all other dimensions together are the rows. Models in
// this project keep activations two-dimensional, [T, X] for T tokens.
//
// # Ordering and errors
//
// The ops of one Backend form a single ordered stream, as a CUDA stream does:
// they may run asynchronously, and they must be issued from one goroutine at a
// time. Ops do not return errors; the first failure (a shape mismatch, a token
// id out of range, a device error) is recorded, later ops are skipped, and the
// error is reported by [Backend.Err], [Backend.Download] and [Backend.Sync].
// This keeps a forward pass readable as equations and matches how device
// errors surface anyway. Shapes of every op are checked.
//
// # Determinism
//
// Implementations must be deterministic: the same inputs give bitwise
// identical outputs on every run, whatever the number of threads.
//
// # Tensor parallelism
//
// A device that can open several backends (one per GPU) as a group
// ([OpenGroup], [Communicator]) runs one model over them through
// backend/tp, itself a Backend. The model names how each weight splits
// ([Split]: rows, cols, vocab, or whole on every rank), and the loader hands
// the split to a backend that shards ([SplitLoader], [QuantSplitLoader] and
// the random counterparts); a backend without those interfaces loads every
// weight whole, as before.
//
// Attention is deliberately not an op here: a model hands the new q, k and v
// of each layer to a KV cache (package model's Attention interface), which
// owns the cache's format and its kernels.
package backend

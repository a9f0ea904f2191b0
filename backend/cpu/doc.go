// Package cpu implements backend.Backend on the CPU, in Go with SIMD
// assembly (AVX-512 and AVX2, chosen at run time by internal/cpufeat) and a
// pure-Go path that is the reference of every kernel and the whole backend
// under the purego tag or on other architectures. No cgo.
//
// Weights are used in their stored precision (weight.go): a matrix keeps the
// checkpoint's F32, F16 or BF16 elements, or int8 codes with a scale per
// group of columns, and LoadWeightView / LoadInt8WeightView read a memory-
// mapped checkpoint in place; wq's packed low-bit matrices stay packed
// (qlinear.go, qdot.go). Vectors are widened to float32. Activations are
// float32; F16 and BF16 tensors can be allocated, uploaded and downloaded
// (rounding to nearest even on upload) but the ops compute on F32 tensors
// only. Ops run synchronously on the calling goroutine, fanning work out to
// the persistent worker team of internal/team (up to Threads goroutines,
// the caller's included).
//
// Every output element is computed by exactly one goroutine in an order that
// depends only on the shapes, so results are bitwise identical whatever the
// thread count. Linear goes further: each output is summed in one canonical
// order over the input dimension (dot.go), the same at every SIMD level and
// for every batch, so a token's result does not depend on the level or on
// which other tokens share its batch (prefill and decode agree bit for
// bit). See matmul.go for the tiling and docs/perf/cpu-linear.md for the
// measured speed.
package cpu

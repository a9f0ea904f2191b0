// Package cpu implements backend.Backend in pure Go (no cgo, no assembly).
//
// Weights are stored as float32 (bf16 and fp16 checkpoints are widened
// exactly at load). Activations are float32; F16 and BF16 tensors can be
// allocated, uploaded and downloaded (rounding to nearest even on upload) but
// the ops compute on F32 tensors only. Ops run synchronously on the calling
// goroutine, fanning work out to a fixed number of worker goroutines.
//
// Every output element is computed by exactly one goroutine in an order that
// depends only on the shapes, so results are bitwise identical whatever the
// thread count. Linear goes further: each output is one sequential float32
// sum over the input dimension, so a token's result also does not depend on
// which other tokens share its batch (prefill and decode agree bit for bit).
// See matmul.go for the kernel and its measured speed.
package cpu

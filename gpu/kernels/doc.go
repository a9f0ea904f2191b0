// Package kernels holds bitdecode's CUDA kernels (.cu sources embedded with
// go:embed, compiled at run time by NVRTC through package gpu/cuda) and their
// Go launch wrappers. A wrapper validates the shape, picks the template
// instantiation from a whitelist (anything else is an error naming the
// shape) and launches; the callers above (backend/gpu, benchmarks) own the
// buffers. Layout constants come from package kv through plain structs here,
// so the kernels and the Go packer read one definition.
package kernels

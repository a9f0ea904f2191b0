// Package kernels holds bitdecode's CUDA kernels (.cu sources embedded with
// go:embed, compiled at run time by NVRTC through package gpu/cuda) and their
// Go launch wrappers. A wrapper validates the shape, picks the template
// instantiation from a whitelist (anything else is an error naming the
// shape) and launches; the callers above (backend/gpu, benchmarks) own the
// buffers. Layout constants come from package kv through plain structs here,
// so the kernels and the Go packer read one definition.
//
// Every .cu file includes bitdecode.cuh, the header all kernel families
// share (conversions, PTX wrappers, the kv.MMA fragment layout, the decode
// family's online softmax and merges), handed to NVRTC in memory. The
// planners' knobs are data: a Tuning (one struct per planner, zero = the
// measured defaults) that ParseTuning fills from the environment at a
// program's edge and the caller passes to PlanDecodeWith, PlanPlanesWith,
// PlanPackWith and PlanPrefill; the package itself reads no environment
// variable. Prefill chunks of many query rows take prefill.cu (PlanPrefill,
// PrefillRoute) instead of the decode kernels.
package kernels

// Package gpu is the root of bitdecode's GPU code. It holds no code itself.
//
// Its sub-packages split the work:
//
//   - gpu/cuda: the CUDA runtime in pure Go (no cgo, no nvcc at build time).
//     It dlopens libcuda.so.1, NVRTC and cuBLASLt through purego, owns the
//     primary context on one locked OS thread, compiles kernels at run time
//     and caches their CUBINs, launches kernels, captures CUDA graphs and runs
//     dense GEMMs.
//   - gpu/kernels: the .cu sources (embedded with go:embed) and their Go
//     launch wrappers, compiled and launched through gpu/cuda.
//
// Backends (backend/cuda) build on both; nothing above the backend layer
// imports these packages.
package gpu

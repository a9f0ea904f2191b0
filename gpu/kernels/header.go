// header.go: the CUDA header every kernel program of this package is
// compiled with (bitdecode.cuh), and the one constructor of those programs.

package kernels

import (
	_ "embed"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

//go:embed bitdecode.cuh
var headerSource string

// headerName is the name the .cu files #include.
const headerName = "bitdecode.cuh"

// gridDependent names the programs whose every kernel waits for the kernel
// ahead of it on the stream (bitdecode.cuh's gridDependencyWait, in every
// thread, before any global memory access that kernel could conflict
// with): program makes them cuda.Program.GridDependent, so cuda.Ctx.Launch
// starts their kernels as programmatic dependents. The other programs'
// kernels (attention, packing, DEC, gemvq) launch as before.
// TestGridDependentKernelsWait checks every __global__ function of these
// sources.
var gridDependent = map[string]bool{"ops.cu": true, "gemv.cu": true, "linear.cu": true, "skinny.cu": true}

// program returns the NVRTC program of source src named name, with
// bitdecode.cuh (and the extra headers, e.g. dec.cu for gemvq_dec) handed
// to NVRTC in memory: the .cu files #include them by name, and their texts
// are part of the program's CUBIN cache key. A program named in
// gridDependent is GridDependent.
func program(name, src string, exprs, opts []string, extra ...cuda.Header) cuda.Program {
	headers := append([]cuda.Header{{Name: headerName, Source: headerSource}}, extra...)
	return cuda.Program{Name: name, Source: src, Headers: headers, Exprs: exprs, Options: opts,
		GridDependent: gridDependent[name]}
}

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

// program returns the NVRTC program of source src named name, with
// bitdecode.cuh (and the extra headers, e.g. dec.cu for gemvq_dec) handed
// to NVRTC in memory: the .cu files #include them by name, and their texts
// are part of the program's CUBIN cache key.
func program(name, src string, exprs, opts []string, extra ...cuda.Header) cuda.Program {
	headers := append([]cuda.Header{{Name: headerName, Source: headerSource}}, extra...)
	return cuda.Program{Name: name, Source: src, Headers: headers, Exprs: exprs, Options: opts}
}

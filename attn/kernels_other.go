//go:build !(amd64 || arm64) || purego

package attn

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// asmKernels reports whether this build has assembly kernels: it has none.
const asmKernels = false

// kernelsFor returns the pure-Go kernels: this build has no assembly.
func kernelsFor(cpufeat.Level, bool, bool) *kernels { return &genericKernels }

//go:build !amd64 || purego

package attn

import "github.com/bitdecode/bitdecode/internal/cpufeat"

// kernelsFor returns the pure-Go kernels: this build has no assembly.
func kernelsFor(cpufeat.Level, bool, bool) *kernels { return &genericKernels }

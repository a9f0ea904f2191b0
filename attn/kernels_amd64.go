//go:build !purego

package attn

import "github.com/bitdecode/bitdecode/internal/cpufeat"

func kernelsFor(l cpufeat.Level, vnni bool) *kernels { return &genericKernels }

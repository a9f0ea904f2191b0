//go:build !amd64 || purego

package cpufeat

// detect reports Generic: this build has no assembly kernels.
func detect() Features { return Features{} }

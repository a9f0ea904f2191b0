//go:build !(amd64 || arm64) || purego

package cpufeat

// archLevels is the chain of a build without assembly: Generic alone.
var archLevels = []Level{Generic}

// detect reports Generic: this build has no assembly kernels.
func detect() Features { return Features{} }

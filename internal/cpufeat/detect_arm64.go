//go:build arm64 && !purego

package cpufeat

import "golang.org/x/sys/cpu"

// archLevels is arm64's chain of levels.
var archLevels = []Level{Generic, NEON}

func detect() Features {
	a := cpu.ARM64
	var f Features
	if a.HasASIMD {
		f.Max = NEON
		f.DotProd = a.HasASIMDDP
	}
	return f
}

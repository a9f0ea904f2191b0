//go:build amd64 && !purego

package cpufeat

import "golang.org/x/sys/cpu"

// archLevels is amd64's chain of levels.
var archLevels = []Level{Generic, AVX2, AVX512}

func detect() Features {
	x := cpu.X86
	var f Features
	if x.HasAVX2 && x.HasFMA && x.HasBMI2 {
		f.Max = AVX2
	}
	if f.Max == AVX2 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512DQ {
		f.Max = AVX512
		f.VNNI = x.HasAVX512VNNI
		f.BF16 = x.HasAVX512BF16
		f.VBMI = x.HasAVX512VBMI
	}
	return f
}

// Package cpufeat says which SIMD level the CPU kernels of bitdecode (package
// attn's decode attention, backend/cpu's linear layers) run at, and lets
// tests and benchmarks force a lower one.
//
// The level is detected once from the CPU (golang.org/x/sys/cpu). On amd64,
// AVX-512 needs F, BW, VL and DQ (and reports VNNI and BF16 separately),
// AVX2 needs FMA too; AVX-512 VBMI (byte permutes and VPMULTISHIFTQB) is
// reported like VNNI. On arm64 the level is NEON (Advanced SIMD, which every
// ARMv8-A CPU has), with the dot-product extension (SDOT) reported
// separately. Built with the purego tag, or on an architecture without
// assembly kernels, the level is Generic: the pure-Go code, which is also
// every kernel's reference. A kernel package dispatches on Active() at each
// call, so Force takes effect at once.
package cpufeat

import (
	"fmt"
	"sync/atomic"
)

// Level is a SIMD instruction set level of the CPU kernels.
type Level int32

// The levels. Each architecture has its own chain, Generic first, in
// increasing order (a CPU that runs one runs those before it): Generic, AVX2,
// AVX512 on amd64; Generic, NEON on arm64; Generic elsewhere. Levels of
// different chains do not compare: test a level for equality, never with <
// or >, outside code built for one architecture.
const (
	// Generic is pure Go: no assembly.
	Generic Level = iota
	// AVX2 is AVX2 with FMA3 (x86-64-v3): 256-bit vectors.
	AVX2
	// AVX512 is AVX-512 F, BW, VL and DQ (x86-64-v4): 512-bit vectors.
	AVX512
	// NEON is arm64's Advanced SIMD (ASIMD): 128-bit vectors.
	NEON

	// NumLevels is the number of levels: the size of a table indexed by
	// Level.
	NumLevels = int(NEON) + 1
)

// String returns the level's name as flags and logs spell it.
func (l Level) String() string {
	switch l {
	case Generic:
		return "generic"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	case NEON:
		return "neon"
	}
	return fmt.Sprintf("Level(%d)", int32(l))
}

// ParseLevel parses a level's name ("generic", "avx2", "avx512", "neon"),
// whatever the architecture: Force maps a level this one lacks to Generic.
func ParseLevel(s string) (Level, error) {
	for l := range Level(NumLevels) {
		if l.String() == s {
			return l, nil
		}
	}
	return Generic, fmt.Errorf("cpufeat: unknown SIMD level %q (want generic, avx2, avx512 or neon)", s)
}

// Features are the CPU's SIMD features that the kernels use.
type Features struct {
	// Max is the highest level the CPU (and this build) runs.
	Max Level
	// VNNI reports AVX-512 VNNI (VPDPBUSD: int8 dot products) on an AVX512
	// CPU.
	VNNI bool
	// BF16 reports AVX-512 BF16 (VDPBF16PS) on an AVX512 CPU.
	BF16 bool
	// VBMI reports AVX-512 VBMI (VPERMB, VPERMT2B, VPMULTISHIFTQB: byte
	// permutes and bit-field extraction) on an AVX512 CPU.
	VBMI bool
	// DotProd reports the arm64 dot-product extension (FEAT_DotProd: SDOT
	// and UDOT) on a NEON CPU.
	DotProd bool
}

// detected is what the CPU offers; active the level the kernels use now.
var (
	detected = detect()
	active   atomic.Int32
)

func init() { active.Store(int32(detected.Max)) }

// Detected returns the CPU's features (Generic under the purego tag).
func Detected() Features { return detected }

// Active returns the level the kernels run at: the detected one, or lower
// after Force.
func Active() Level { return Level(active.Load()) }

// VNNI reports whether the kernels may use AVX-512 VNNI now: the CPU has it
// and the active level is AVX512.
func VNNI() bool { return Active() == AVX512 && detected.VNNI }

// BF16 reports whether the kernels may use AVX-512 BF16 now.
func BF16() bool { return Active() == AVX512 && detected.BF16 }

// VBMI reports whether the kernels may use AVX-512 VBMI now: the CPU has it
// and the active level is AVX512.
func VBMI() bool { return Active() == AVX512 && detected.VBMI }

// DotProd reports whether the kernels may use arm64's SDOT now: the CPU has
// it and the active level is NEON.
func DotProd() bool { return Active() == NEON && detected.DotProd }

// rank returns l's place in this architecture's chain (archLevels), or -1
// if the chain lacks it.
func rank(l Level) int {
	for i, a := range archLevels {
		if a == l {
			return i
		}
	}
	return -1
}

// Force makes the kernels run at level l, or at the detected level if that
// comes before l in the chain, or at Generic if l is another
// architecture's level (avx2 on arm64), and returns the level now active and a function that restores
// the previous one. Tests use it to run every path the CPU has; the
// bitdecode command's --simd flag uses it to compare them. It must not be
// called while kernels run on other goroutines.
func Force(l Level) (got Level, restore func()) {
	prev := active.Load()
	got = Generic
	if r := rank(l); r >= 0 {
		got = archLevels[min(r, rank(detected.Max))]
	}
	active.Store(int32(got))
	return got, func() { active.Store(prev) }
}

// Levels returns the levels this CPU runs, Generic first: its chain up to
// the detected level.
func Levels() []Level {
	return append([]Level(nil), archLevels[:rank(detected.Max)+1]...)
}

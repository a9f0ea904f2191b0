package bench

import (
	"testing"

	"github.com/bitdecode/bitdecode/internal/cpufeat"
)

// TestReadSum: every level's read loop reads every word (the XOR of all
// words folded the same way is independent of the vector width).
func TestReadSum(t *testing.T) {
	s := make([]uint64, 4*readStepWords)
	for i := range s {
		s[i] = uint64(i+1) * 0x9e3779b97f4a7c15
	}
	var want uint64
	for _, x := range s {
		want ^= x
	}
	for _, l := range cpufeat.Levels() {
		_, restore := cpufeat.Force(l)
		got := readSum(s)
		restore()
		if l != cpufeat.Generic && got != want {
			t.Errorf("%v: readSum = %#x, want the XOR of all words %#x", l, got, want)
		}
	}
	if g := ReadBandwidth(1<<20, 2, 2); !(g > 0) {
		t.Errorf("ReadBandwidth = %g", g)
	}
}

package eval

import (
	"fmt"
	"testing"
)

func TestReuseProbes(t *testing.T) {
	// Tokens: "func", " parse", "Header", "(", filler x5, " parse", "Header", " x", " parse", "Header"
	pieces := []string{"func", " parse", "Header", "("}
	for range 5 {
		pieces = append(pieces, " ;")
	}
	pieces = append(pieces, " parse", "Header", " x", " parse", "Header")
	// Gap 5: the reuse at token 9 (previous at 1) qualifies, its second
	// token 10 is the probe; the reuse at 12 follows 9 by 3 < 5: not a probe.
	got := ReuseProbes(pieces, 5)
	if fmt.Sprint(got) != "[10]" {
		t.Errorf("ReuseProbes(gap 5) = %v, want [10]", got)
	}
	if got := ReuseProbes(pieces, 100); len(got) != 0 {
		t.Errorf("ReuseProbes(gap 100) = %v, want none", got)
	}
	// Short names never count.
	if got := ReuseProbes([]string{"ab", "cd", " x", " ab", "cd"}, 1); len(got) != 0 {
		t.Errorf("short identifier: %v, want none", got)
	}
}

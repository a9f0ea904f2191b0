package bench

import (
	"math"
	"testing"
)

func TestOtherCores(t *testing.T) {
	a := cpuSample{busy: 100, self: 10, ok: true}
	b := cpuSample{busy: 100.9, self: 10.6, ok: true}
	// 0.9 s busy, 0.6 of it this process's, over 0.3 s: one other core.
	if got := otherCores(a, b, 0.3); math.Abs(got-1) > 1e-9 {
		t.Errorf("otherCores = %v, want 1", got)
	}
	// This process's time above the machine's (tick rounding): 0, not negative.
	if got := otherCores(a, cpuSample{busy: 100.5, self: 10.6, ok: true}, 0.3); got != 0 {
		t.Errorf("otherCores = %v, want 0", got)
	}
	if got := otherCores(cpuSample{}, b, 0.3); !math.IsNaN(got) {
		t.Errorf("otherCores without a first sample = %v, want NaN", got)
	}
	if s := readCPU(); s.ok && (s.busy <= 0 || s.self <= 0) {
		t.Errorf("readCPU = %+v: a live process has CPU time", s)
	}
}

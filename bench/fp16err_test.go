package bench

import (
	"math"
	"testing"

	"github.com/bitdecode/bitdecode/internal/half"
)

// TestMaxAbsErrFP16 checks the GPU rows' error column: the largest
// difference over want's elements, a NaN output as +Inf.
func TestMaxAbsErrFP16(t *testing.T) {
	want := []float32{1, -2, 0.5}
	got := []uint16{half.FromFloat32(1.25), half.FromFloat32(-2), half.FromFloat32(0.5), half.FromFloat32(100)}
	if m := maxAbsErrFP16(got, want); m != 0.25 {
		t.Errorf("maxAbsErrFP16 = %g, want 0.25 (the extra element is not compared)", m)
	}
	got[1] = 0x7e00 // fp16 NaN
	if m := maxAbsErrFP16(got, want); !math.IsInf(m, 1) {
		t.Errorf("maxAbsErrFP16 with a NaN = %g, want +Inf", m)
	}
	if f := fp16ToFloat32s(got[:1]); len(f) != 1 || f[0] != 1.25 {
		t.Errorf("fp16ToFloat32s = %v, want [1.25]", f)
	}
}

package backend

import (
	"math"
	"testing"
)

func TestNumElements(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		want  int
	}{
		{[]int{3}, 3},
		{[]int{2, 3, 4}, 24},
		{nil, -1},
		{[]int{0, 3}, -1},
		{[]int{-2}, -1},
		{[]int{math.MaxInt, 2}, -1},
		{[]int{1 << 20, 1 << 20, 1 << 20}, -1},
	} {
		if got := NumElements(tc.shape); got != tc.want {
			t.Errorf("NumElements(%v) = %d, want %d", tc.shape, got, tc.want)
		}
	}
}

func TestMatrix(t *testing.T) {
	for _, tc := range []struct {
		shape      []int
		rows, cols int
	}{{[]int{5}, 1, 5}, {[]int{2, 3}, 2, 3}, {[]int{2, 3, 4}, 6, 4}, {nil, 0, 0}} {
		if r, c := Matrix(tc.shape); r != tc.rows || c != tc.cols {
			t.Errorf("Matrix(%v) = %d, %d; want %d, %d", tc.shape, r, c, tc.rows, tc.cols)
		}
	}
}

func TestDType(t *testing.T) {
	for _, tc := range []struct {
		d    DType
		name string
		size int
	}{{F32, "F32", 4}, {F16, "F16", 2}, {BF16, "BF16", 2}, {I32, "I32", 4}, {DType(99), "DType(99)", 0}} {
		if tc.d.String() != tc.name || tc.d.Size() != tc.size {
			t.Errorf("%d: String %q Size %d, want %q %d", int(tc.d), tc.d.String(), tc.d.Size(), tc.name, tc.size)
		}
	}
}

package backend

import (
	"errors"
	"testing"
)

// TestChecks: each shared check accepts a fitting call and refuses a
// misfitting one with a ShapeError naming the op (or, for index values, an
// error naming the value).
func TestChecks(t *testing.T) {
	w := Named{Name: "model.w", Shape: []int{4, 3}}
	bias := Named{Name: "model.b", Shape: []int{4}}
	ok := []error{
		CheckEmbedding([]int{2, 3}, w, 2),
		CheckTokenIDs([]int32{0, 3}, w),
		CheckRows([]int{2, 3}, []int{5, 3}, 2, false),
		CheckRowIndices([]int32{0, 4}, []int{5, 3}),
		CheckLinear([]int{2, 4}, []int{2, 3}, w, bias, false),
		CheckLinear([]int{2, 4}, []int{2, 3}, w, Named{}, false),
		CheckRMSNorm([]int{2, 8}, []int{2, 8}, Named{Name: "n", Shape: []int{4}}),
		CheckRoPE([]int{3, 8}, 3, Named{Name: "f", Shape: []int{2}}),
		CheckPositions([]int32{0, 7}),
		CheckAddRMSNorm([]int{2, 8}, []int{2, 8}, []int{16}, Named{Name: "n", Shape: []int{4}}, false),
		CheckRoPEQK([]int{3, 8}, []int{3, 4}, 3, Named{Name: "f", Shape: []int{2}}, Named{}, Named{}, false),
		CheckRoPEQK([]int{3, 8}, []int{3, 4}, 3, Named{Name: "f", Shape: []int{2}}, Named{Name: "qn", Shape: []int{4}}, Named{Name: "kn", Shape: []int{4}}, false),
		CheckElementwise("Add", []int{2, 3}, []int{6}, []int{3, 2}),
	}
	for i, err := range ok {
		if err != nil {
			t.Errorf("fitting call %d refused: %v", i, err)
		}
	}
	shape := []error{
		CheckEmbedding([]int{2, 4}, w, 2),
		CheckEmbedding([]int{2, 3}, w, 3),
		CheckRows([]int{2, 3}, []int{5, 4}, 2, false),
		CheckRows([]int{2, 3}, []int{5, 3}, 2, true),
		CheckLinear([]int{2, 4}, []int{2, 3}, w, Named{Name: "b", Shape: []int{3}}, false),
		CheckLinear([]int{2, 5}, []int{2, 3}, w, Named{}, false),
		CheckLinear([]int{3, 4}, []int{2, 3}, w, Named{}, false),
		CheckLinear([]int{2, 4}, []int{2, 3}, w, Named{}, true),
		CheckRMSNorm([]int{2, 8}, []int{2, 8}, Named{Name: "n", Shape: []int{3}}),
		CheckRMSNorm([]int{2, 4}, []int{2, 8}, Named{Name: "n", Shape: []int{4}}),
		CheckRoPE([]int{3, 8}, 2, Named{Name: "f", Shape: []int{2}}),
		CheckRoPE([]int{3, 6}, 3, Named{Name: "f", Shape: []int{2}}),
		CheckElementwise("Add", []int{2, 3}, []int{6}, []int{5}),
		CheckAddRMSNorm([]int{2, 8}, []int{2, 8}, []int{16}, Named{Name: "n", Shape: []int{3}}, false),
		CheckAddRMSNorm([]int{2, 8}, []int{2, 8}, []int{15}, Named{Name: "n", Shape: []int{4}}, false),
		CheckAddRMSNorm([]int{2, 8}, []int{1, 16}, []int{16}, Named{Name: "n", Shape: []int{4}}, false),
		CheckAddRMSNorm([]int{2, 8}, []int{2, 8}, []int{16}, Named{Name: "n", Shape: []int{4}}, true),
		CheckRoPEQK([]int{3, 8}, []int{2, 4}, 3, Named{Name: "f", Shape: []int{2}}, Named{}, Named{}, false),
		CheckRoPEQK([]int{3, 8}, []int{3, 6}, 3, Named{Name: "f", Shape: []int{2}}, Named{}, Named{}, false),
		CheckRoPEQK([]int{3, 8}, []int{3, 8}, 3, Named{Name: "f", Shape: []int{2}}, Named{}, Named{}, true),
		CheckRoPEQK([]int{3, 8}, []int{3, 4}, 3, Named{Name: "f", Shape: []int{2}}, Named{Name: "qn", Shape: []int{4}}, Named{}, false),
		CheckRoPEQK([]int{3, 8}, []int{3, 4}, 3, Named{Name: "f", Shape: []int{2}}, Named{Name: "qn", Shape: []int{4}}, Named{Name: "kn", Shape: []int{8}}, false),
	}
	for i, err := range shape {
		var se *ShapeError
		if !errors.As(err, &se) {
			t.Errorf("misfitting call %d: %v, want a ShapeError", i, err)
		}
	}
	for i, err := range []error{
		CheckTokenIDs([]int32{0, 4}, w),
		CheckTokenIDs([]int32{-1}, w),
		CheckRowIndices([]int32{5}, []int{5, 3}),
		CheckPositions([]int32{3, -2}),
	} {
		if err == nil {
			t.Errorf("out-of-range value %d accepted", i)
		}
	}
}

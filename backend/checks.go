package backend

// The argument checks every backend makes before an op runs: whether the
// shapes fit, and whether the index values are in range. A backend calls
// these with its tensors' and weights' shapes, so that the CPU and CUDA
// backends accept and refuse the same calls with the same messages.

import "fmt"

// Named is a weight as the checks see it: its checkpoint name (for
// messages) and its shape.
type Named struct {
	Name  string
	Shape []int
}

func (w Named) String() string { return fmt.Sprintf("%s %v", w.Name, w.Shape) }

func shapeErr(op, format string, args ...any) error {
	return &ShapeError{Op: op, Detail: fmt.Sprintf(format, args...)}
}

// CheckEmbedding checks dst [T, K] gathered from table [V, K] by n ids.
func CheckEmbedding(dst []int, table Named, n int) error {
	T, K := Matrix(dst)
	if len(table.Shape) != 2 || table.Shape[1] != K || n != T {
		return shapeErr("Embedding", "dst %v, table %v, %d ids", dst, table, n)
	}
	return nil
}

// CheckTokenIDs checks that every id indexes a row of table [V, K].
func CheckTokenIDs(ids []int32, table Named) error {
	V := table.Shape[0]
	for t, v := range ids {
		if v < 0 || int(v) >= V {
			return fmt.Errorf("backend: Embedding: token id %d at row %d out of range [0, %d) of %s", v, t, V, table.Name)
		}
	}
	return nil
}

// CheckRows checks dst [R, K] gathered from src [T, K] (not the same
// tensor: alias) by n row indices.
func CheckRows(dst, src []int, n int, alias bool) error {
	R, K := Matrix(dst)
	_, K2 := Matrix(src)
	if K != K2 || n != R || alias {
		return shapeErr("Rows", "dst %v, src %v, %d indices (dst and src distinct: %t)", dst, src, n, !alias)
	}
	return nil
}

// CheckRowIndices checks that every index selects a row of src [T, K].
func CheckRowIndices(idx []int32, src []int) error {
	T, _ := Matrix(src)
	for _, v := range idx {
		if v < 0 || int(v) >= T {
			return fmt.Errorf("backend: Rows: row index %d out of range [0, %d)", v, T)
		}
	}
	return nil
}

// CheckLinear checks dst [T, N] = x [T, K] · w [N, K]ᵀ + bias [N] (bias
// optional: a zero Named; dst and x distinct: alias false).
func CheckLinear(dst, x []int, w, bias Named, alias bool) error {
	if bias.Shape != nil && (len(bias.Shape) != 1 || len(w.Shape) != 2 || bias.Shape[0] != w.Shape[0]) {
		return shapeErr("Linear", "bias %v for weight %v", bias, w)
	}
	T, K := Matrix(x)
	T2, N := Matrix(dst)
	if len(w.Shape) != 2 || w.Shape[0] != N || w.Shape[1] != K || T != T2 || alias {
		return shapeErr("Linear", "dst %v, x %v, weight %v (dst and x distinct: %t)", dst, x, w, !alias)
	}
	return nil
}

// CheckLinearGroup checks the form of a LinearGroup call: one output per
// weight, no biases or one entry per weight, and no output that is x or
// another output. Each layer is then checked with CheckLinear.
func CheckLinearGroup(dsts []Tensor, x Tensor, ws, biases []Weight) error {
	n := len(ws)
	if n < 1 || len(dsts) != n || (biases != nil && len(biases) != n) {
		return shapeErr("LinearGroup", "%d weights, %d outputs, %d biases (want one output each, and no biases or one entry each)", n, len(dsts), len(biases))
	}
	for i, d := range dsts {
		if d == nil || d == x {
			return shapeErr("LinearGroup", "output %d is nil or the input", i)
		}
		for _, e := range dsts[:i] {
			if d == e {
				return shapeErr("LinearGroup", "output %d is also an earlier output", i)
			}
		}
	}
	return nil
}

// BiasAt returns biases[i], or nil when biases is nil (LinearGroup's
// "no biases").
func BiasAt(biases []Weight, i int) Weight {
	if biases == nil {
		return nil
	}
	return biases[i]
}

// CheckRMSNorm checks dst = RMSNorm(x) with weight [G] over groups of G
// (x's rows a multiple of G; dst as many elements as x).
func CheckRMSNorm(dst, x []int, w Named) error {
	_, C := Matrix(x)
	if len(w.Shape) != 1 || w.Shape[0] <= 0 || C%w.Shape[0] != 0 || NumElements(dst) != NumElements(x) {
		return shapeErr("RMSNorm", "dst %v, x %v, weight %v", dst, x, w)
	}
	return nil
}

// CheckRoPE checks x [T, C] rotated at n positions with invFreq [half]
// (C a multiple of the head dim 2·half).
func CheckRoPE(x []int, n int, invFreq Named) error {
	T, C := Matrix(x)
	if len(invFreq.Shape) != 1 || invFreq.Shape[0] <= 0 || C%(2*invFreq.Shape[0]) != 0 || n != T {
		return shapeErr("RoPE", "x %v, %d positions, invFreq %v", x, n, invFreq)
	}
	return nil
}

// CheckAddRMSNorm checks h = h + delta, x = RMSNorm(h) with weight [G]:
// h and x [T, C] with C a multiple of G, delta as many elements as h, and h
// distinct from x and delta (alias true when it is not).
func CheckAddRMSNorm(h, x, delta []int, w Named, alias bool) error {
	T, C := Matrix(h)
	T2, C2 := Matrix(x)
	if len(w.Shape) != 1 || w.Shape[0] <= 0 || C%w.Shape[0] != 0 || T != T2 || C != C2 ||
		NumElements(delta) != NumElements(h) || alias {
		return shapeErr("AddRMSNorm", "h %v, x %v, delta %v, weight %v (h distinct from x and delta: %t)", h, x, delta, w, !alias)
	}
	return nil
}

// CheckRoPEQK checks q [T, Hq·D] and k [T, Hk·D] rotated at n positions
// with invFreq [D/2], normalized per head by qNorm and kNorm [D] (both
// zero Named for none), q and k distinct (alias true when they are not).
func CheckRoPEQK(q, k []int, n int, invFreq, qNorm, kNorm Named, alias bool) error {
	if CheckRoPE(q, n, invFreq) != nil || CheckRoPE(k, n, invFreq) != nil || alias {
		return shapeErr("RoPEQK", "q %v, k %v, %d positions, invFreq %v (q and k distinct: %t)", q, k, n, invFreq, !alias)
	}
	if (qNorm.Shape == nil) != (kNorm.Shape == nil) {
		return shapeErr("RoPEQK", "q norm %v and k norm %v: both or neither", qNorm, kNorm)
	}
	if qNorm.Shape == nil {
		return nil
	}
	D := 2 * invFreq.Shape[0]
	for _, w := range []Named{qNorm, kNorm} {
		if len(w.Shape) != 1 || w.Shape[0] != D {
			return shapeErr("RoPEQK", "norm weight %v for heads of %d", w, D)
		}
	}
	return nil
}

// CheckPositions checks that no position is negative.
func CheckPositions(pos []int32) error {
	for _, v := range pos {
		if v < 0 {
			return fmt.Errorf("backend: RoPE: negative position %d", v)
		}
	}
	return nil
}

// CheckElementwise checks dst = f(x, y) over tensors of one size.
func CheckElementwise(op string, dst, x, y []int) error {
	if n := NumElements(dst); n != NumElements(x) || n != NumElements(y) {
		return shapeErr(op, "dst %v, inputs %v and %v", dst, x, y)
	}
	return nil
}

// CheckF32 checks that tensor t, an operand of op on the named device's
// backend, holds float32 values: the ops compute on F32 tensors only.
func CheckF32(op, device string, t fmt.Stringer, dtype DType) error {
	if dtype != F32 {
		return shapeErr(op, "tensor %v: the %s backend computes on F32 tensors only", t, device)
	}
	return nil
}

// CheckI32 checks that the index tensor t of op holds int32 values.
func CheckI32(op string, t fmt.Stringer, dtype DType) error {
	if dtype != I32 {
		return shapeErr(op, "index tensor %v is not I32", t)
	}
	return nil
}

// pool.go: which pooled buffer an Alloc reuses. The pool hands out the
// lowest free address of the size asked for, so that a decode step that
// allocates its tensors in the same order as the step before gets the same
// addresses, whatever order they were freed in: its ops' graph keys are
// the same. The first step allocates fresh memory, the second takes it
// from the pool (new addresses), the third is captured and every later one
// replayed (bench model's step line shows it: bench/results/
// 2026-11-25-h100x2-tpgraph).
//
// A stack (the last freed buffer first) does not do that: the addresses
// rotate between the tensors of one size from step to step, with a period
// of the rotation's cycles. At TP 1 (model.Forward's arena frees in
// allocation order) that period was 2; at TP 2 backend/tp allocates a
// rank's parts in the order ops first write them and frees Embedding's
// per-rank ids with the ids, which made the int32 tensors' period 3 and the
// step's 6: the first 6 steps ran op by op, the next 6 were captured, and a
// 16-step benchmark after 3 warm-up steps timed 9 of its 16 steps before
// any replay (issue #23, docs/scale.md).

package gpu

import "github.com/bitdecode/bitdecode/gpu/cuda"

// poolTake removes the lowest address from list (which must not be empty)
// and returns it with the rest of the list (in no particular order).
func poolTake(list []cuda.DevicePtr) (cuda.DevicePtr, []cuda.DevicePtr) {
	low := 0
	for i, p := range list {
		if p < list[low] {
			low = i
		}
	}
	p := list[low]
	last := len(list) - 1
	list[low] = list[last]
	return p, list[:last]
}

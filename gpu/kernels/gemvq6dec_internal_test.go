package kernels

import "testing"

// TestGEMVQ6DECForm checks which form of gemv_q6_dec Launch runs (session
// 22b): by default the tail from gemvq6DECTailRows selected rows at splits
// 2-8 and never at split 1, but (session 24) the DEC warp's up to
// gemvq6DECPrefetchedRows rows where the base is loaded before the wait;
// TailNever and TailAlways whatever the list.
func TestGEMVQ6DECForm(t *testing.T) {
	cases := []struct {
		tail       GEMVQ6DECTail
		nsel, S    int
		prefetched bool
		want       int
	}{
		{TailAuto, 0, 8, false, 0},
		{TailAuto, gemvq6DECTailRows - 1, 8, false, 0},
		{TailAuto, gemvq6DECTailRows, 8, false, 1},
		{TailAuto, 896, 8, false, 1},
		{TailAuto, 256, 4, false, 1},
		{TailAuto, 256, 2, false, 1},
		{TailAuto, 256, 1, false, 0},
		{TailAuto, 4096, 1, false, 0},
		{TailAuto, gemvq6DECTailRows, 8, true, 0},
		{TailAuto, gemvq6DECPrefetchedRows, 8, true, 0},
		{TailAuto, gemvq6DECPrefetchedRows + 1, 8, true, 1},
		{TailAuto, 1024, 8, true, 1},
		{TailNever, 896, 8, false, 0},
		{TailAlways, 1, 1, false, 1},
		{TailAlways, 0, 8, true, 1},
	}
	for _, c := range cases {
		d := &GEMVQ6DEC{Tail: c.tail}
		if got := d.form(c.nsel, c.S, c.prefetched); got != c.want {
			t.Errorf("Tail %d, %d rows at split %d (prefetched %v): form %d, want %d", c.tail, c.nsel, c.S, c.prefetched, got, c.want)
		}
	}
}

// TestGEMVQ6DECPrefetched checks which bases load a warp's whole slice
// before the wait (Llama-3.1-8B's shapes at their splits): o and k/v (K
// 4096 at split 8: 2 steps a warp) do, q|k|v at split 4 (4 steps), down
// (K 14336 at split 8: 7 steps) and gate|up at split 1 do not, and none
// without early loads.
func TestGEMVQ6DECPrefetched(t *testing.T) {
	for _, c := range []struct {
		bits, K, S int
		early      bool
		want       bool
	}{
		{4, 4096, 8, true, true}, {3, 4096, 8, true, true}, {4, 4096, 8, false, false},
		{4, 4096, 4, true, false}, {4, 14336, 8, true, false}, {4, 4096, 1, true, false}, {4, 2048, 4, true, true},
	} {
		if got := gemvq6DECPrefetched(c.bits, c.K, c.S, c.early); got != c.want {
			t.Errorf("int%d K %d split %d early %v: prefetched %v, want %v", c.bits, c.K, c.S, c.early, got, c.want)
		}
	}
}

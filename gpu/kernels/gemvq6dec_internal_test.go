package kernels

import "testing"

// TestGEMVQ6DECForm checks which form of gemv_q6_dec Launch runs (session
// 22b): by default the tail from gemvq6DECTailRows selected rows at splits
// 2-8 and never at split 1; TailNever and TailAlways whatever the list.
func TestGEMVQ6DECForm(t *testing.T) {
	cases := []struct {
		tail    GEMVQ6DECTail
		nsel, S int
		want    int
	}{
		{TailAuto, 0, 8, 0},
		{TailAuto, gemvq6DECTailRows - 1, 8, 0},
		{TailAuto, gemvq6DECTailRows, 8, 1},
		{TailAuto, 896, 8, 1},
		{TailAuto, 256, 4, 1},
		{TailAuto, 256, 2, 1},
		{TailAuto, 256, 1, 0},
		{TailAuto, 4096, 1, 0},
		{TailNever, 896, 8, 0},
		{TailAlways, 1, 1, 1},
		{TailAlways, 0, 8, 1},
	}
	for _, c := range cases {
		d := &GEMVQ6DEC{Tail: c.tail}
		if got := d.form(c.nsel, c.S); got != c.want {
			t.Errorf("Tail %d, %d rows at split %d: form %d, want %d", c.tail, c.nsel, c.S, got, c.want)
		}
	}
}

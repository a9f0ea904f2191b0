// decrun_internal_test.go checks decRun, which weights of a joined group
// share its DEC launch (DEC by projection): no GPU needed.
package gpu

import (
	"testing"

	"github.com/bitdecode/bitdecode/wq"
)

// TestDECRun: the weights with DEC must be one run of whole residual
// groups; the run's outputs are [lo, lo + n) of the joined weight.
func TestDECRun(t *testing.T) {
	w := func(n int, dec bool) *weight {
		cw := &weight{shape: []int{n, 4096}}
		if dec {
			cw.dec = &decWeight{kChunk: 64}
		}
		return cw
	}
	for _, c := range []struct {
		name          string
		ws            []*weight
		i0, i1, lo, n int
		ok            bool
	}{
		{"v of q|k|v", []*weight{w(4096, false), w(1024, false), w(1024, true)}, 2, 3, 5120, 1024, true},
		{"q|k|v", []*weight{w(4096, true), w(1024, true), w(1024, true)}, 0, 3, 0, 6144, true},
		{"k|v", []*weight{w(4096, false), w(1024, true), w(1024, true)}, 1, 3, 4096, 2048, true},
		{"gate of gate|up", []*weight{w(14336, true), w(14336, false)}, 0, 1, 0, 14336, true},
		{"q and v, not k", []*weight{w(4096, true), w(1024, false), w(1024, true)}, 0, 0, 0, 0, false},
		{"none", []*weight{w(4096, false), w(1024, false)}, 0, 0, 0, 0, false},
		{"not whole groups", []*weight{w(64, false), w(1024, true)}, 1, 2, 64, 1024, false},
	} {
		i0, i1, lo, n, ok := decRun(c.ws)
		if ok != c.ok || (ok && (i0 != c.i0 || i1 != c.i1 || lo != c.lo || n != c.n)) {
			t.Errorf("%s: decRun = %d, %d, [%d, +%d), %v; want %d, %d, [%d, +%d), %v", c.name, i0, i1, lo, n, ok, c.i0, c.i1, c.lo, c.n, c.ok)
		}
	}
	if wq.ResidualGroup != 128 {
		t.Fatalf("the cases assume residual groups of 128 outputs, not %d", wq.ResidualGroup)
	}
}

package cpu

import (
	"testing"

	"github.com/bitdecode/bitdecode/internal/hugepage"
)

// TestHugeArena checks the arena's bookkeeping: copies keep their bytes,
// are hugeAlign-aligned and do not overlap; a chunk the arena has left is
// unmapped when its last weight is freed, never before; the chunk being
// filled stays mapped; EnvHugePages parses as documented.
func TestHugeArena(t *testing.T) {
	defer func(on bool) { hugePagesOn = on }(hugePagesOn)
	hugePagesOn = true
	var a hugeArena
	src := make([]byte, 3000)
	for i := range src {
		src[i] = byte(i * 7)
	}
	c1, k1 := a.copyIn(src)
	if k1 == nil {
		t.Skip("no huge-page memory on this system")
	}
	c2, k2 := a.copyIn(src[:100])
	if k2 != k1 {
		t.Fatal("a small second weight took a new chunk")
	}
	for i, v := range src {
		if c1[i] != v {
			t.Fatalf("copy byte %d = %d, want %d", i, c1[i], v)
		}
	}
	p1, p2 := uintptr(unsafePointer(&c1[0])), uintptr(unsafePointer(&c2[0]))
	if p1%hugepage.Size != 0 || p2%hugeAlign != 0 || p2 < p1+uintptr(len(c1)) {
		t.Errorf("placement: first at %#x (want a %d boundary), second at %#x (want %d-aligned, after the first's %d bytes)", p1, hugepage.Size, p2, hugeAlign, len(c1))
	}
	// A weight larger than what is left takes a new chunk; the first stays
	// mapped while it holds weights.
	big := make([]byte, hugeChunkMin)
	_, k3 := a.copyIn(big)
	if k3 == k1 || k3 == nil {
		t.Fatal("a weight larger than the chunk's rest did not take a new chunk")
	}
	k1.release()
	if k1.mapping == nil {
		t.Fatal("the first chunk was unmapped while it still held a weight")
	}
	k2.release()
	if k1.mapping != nil {
		t.Error("the first chunk is still mapped after its last weight was freed")
	}
	k3.release()
	if k3.mapping == nil {
		t.Error("the chunk being filled was unmapped")
	}
	hugePagesOn = false
	if c, k := a.copyIn(src); k != nil || &c[0] != &src[0] {
		t.Error("with huge pages off, copyIn copied")
	}
	for _, tc := range []struct {
		v       string
		set, on bool
		bad     bool
	}{{"", false, true, false}, {"", true, true, false}, {"on", true, true, false}, {"off", true, false, false}, {"yes", true, false, true}} {
		on, err := parseHugePages(tc.v, tc.set)
		if (err != nil) != tc.bad || (!tc.bad && on != tc.on) {
			t.Errorf("parseHugePages(%q, %v) = %v, %v", tc.v, tc.set, on, err)
		}
	}
}

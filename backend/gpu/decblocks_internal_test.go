// decblocks_internal_test.go checks decBlocks, the n_tb a DEC weight gets:
// no GPU needed.
package gpu

import (
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/wq"
)

// TestDECDefaultBlocks checks the default n_tb on the Llama-3.1-8B shapes
// (one CTA per decTermsPerBlock terms, 8 to 64, on the device; 8 for host
// residuals), that an explicit value wins (the backend-wide one over the
// weight's), and that one out of the shape's range is refused.
func TestDECDefaultBlocks(t *testing.T) {
	for _, c := range []struct {
		N, K, kChunk int
		dev, host    int
	}{
		{4096, 4096, 8, 16, 8},   // S 32: 131072 terms
		{4096, 4096, 64, 64, 8},  // S 256: capped at 64
		{1024, 4096, 8, 8, 8},    // S 32: 4 -> at least 8
		{1024, 4096, 64, 32, 8},  // S 256
		{14336, 4096, 8, 56, 8},  // S 32
		{4096, 14336, 64, 64, 8}, // S 896: capped
	} {
		S := kernels.DECSelected(c.K, c.kChunk)
		for _, onDevice := range []bool{true, false} {
			want := c.host
			if onDevice {
				want = c.dev
			}
			got, err := decBlocks(wq.Int4, c.N, S, onDevice, 0, 0)
			if err != nil || got != want {
				t.Errorf("%dx%d k_chunk %d device %v: n_tb %d, %v; want %d", c.N, c.K, c.kChunk, onDevice, got, err, want)
			}
		}
	}
	if got, err := decBlocks(wq.Int4, 4096, 256, true, 12, 20); err != nil || got != 20 {
		t.Errorf("explicit n_tb: %d, %v; want the backend-wide 20", got, err)
	}
	if got, err := decBlocks(wq.Int4, 4096, 256, true, 12, 0); err != nil || got != 12 {
		t.Errorf("the weight's n_tb: %d, %v; want 12", got, err)
	}
	if _, err := decBlocks(wq.Int4, 4096, 256, true, kernels.DECMaxBlocks(4096)+1, 0); err == nil {
		t.Error("n_tb past one per 32 outputs accepted")
	}
}

// TestDECListsInGroup checks which fused DEC launches of a LinearGroup keep
// their selection lists and which read an earlier one's (decListFor): the
// first of each (K, k_chunk, T) keeps them in its own scratch, the later
// ones read that scratch; outside a group, or over another x, nobody shares.
func TestDECListsInGroup(t *testing.T) {
	var b Backend
	q := &decWeight{kChunk: 64, sel: 0x1000}
	k := &decWeight{kChunk: 64, sel: 0x2000}
	v := &decWeight{kChunk: 32, sel: 0x3000}
	u := &decWeight{kChunk: 32, sel: 0x4000}
	type got struct {
		sel          uint64
		listed, keep bool
	}
	call := func(x uint64, dw *decWeight) got {
		sel, listed, keep := b.decListFor(cuda.DevicePtr(x), dw, 4096, 1)
		return got{uint64(sel), listed, keep}
	}
	if g := call(0x9000, q); g != (got{0x1000, false, false}) {
		t.Fatalf("outside a group: %+v", g)
	}
	b.decGroup(0x9000)
	for i, c := range []struct {
		x    uint64
		dw   *decWeight
		want got
	}{
		{0x9000, q, got{0x1000, false, true}}, // first at k 64: keeps
		{0x9000, k, got{0x1000, true, false}}, // reads q's
		{0x9000, v, got{0x3000, false, true}}, // first at k 32: keeps
		{0x9000, u, got{0x3000, true, false}}, // reads v's
		{0x8000, k, got{0x2000, false, false}},
	} {
		if g := call(c.x, c.dw); g != c.want {
			t.Errorf("call %d: %+v, want %+v", i, g, c.want)
		}
	}
	b.decGroup(0)
	if g := call(0x9000, k); g != (got{0x2000, false, false}) {
		t.Fatalf("after the group: %+v", g)
	}
}

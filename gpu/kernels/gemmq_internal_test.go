package kernels

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestGEMMQConfigs checks gemmq.go's tilings without a GPU: int4's and
// int3's first three are the three they were before int8 (the same
// template arguments with one block a step and one warp group, the same
// shared memory) and the next three the same with two warp groups
// (session 17), every tiling's ring fits one CTA's shared memory on an
// H100 (227 KB) and its CTA 1024 threads, int8's step is one tile (128
// channels) a block and its slot at one block holds the codes of int4's
// (16 KB), and the rule picks among its gemmqRule list for the weight's
// size the tiling that pads the tokens least.
func TestGEMMQConfigs(t *testing.T) {
	const h100Shared = 227 << 10
	old := []struct{ nt, wn, stages, smem int }{{4, 1, 3, 3 * 34816}, {4, 2, 3, 3 * 52224}, {8, 2, 2, 2 * 87040}}
	for _, bits := range []int{4, 3} {
		cfgs := gemmqConfigs[gemmqBitsIndex(bits)]
		if len(cfgs) < 2*len(old) {
			t.Fatalf("int%d: %d tilings, want at least %d", bits, len(cfgs), 2*len(old))
		}
		for i := range 2 * len(old) {
			o, c, ks := old[i%len(old)], cfgs[i], 1+i/len(old)
			smem := o.smem
			if bits == 3 {
				smem -= o.stages * gemmqRGs * gemvqRows * 8 * 4 // 24 words a row, not 32
			}
			if c.nt != o.nt || c.wn != o.wn || c.stages != o.stages || c.blocks != 1 || c.ks != ks || c.sharedBytes(bits) != smem || c.stepChannels(bits) != 256 {
				t.Errorf("int%d tiling %d: %+v, %d bytes, step %d: want %+v, one block of 256 channels, %d warp groups", bits, i, c, c.sharedBytes(bits), c.stepChannels(bits), o, ks)
			}
			if e := gemmqExpr(bits, c); !strings.HasSuffix(e, fmt.Sprintf(", 1, %d>", ks)) {
				t.Errorf("int%d tiling %d: %s, want one block a step, %d warp groups", bits, i, e, ks)
			}
		}
	}
	for bi, b := range gemmqBits {
		for ci, c := range gemmqConfigs[bi] {
			if s := c.sharedBytes(b); s > h100Shared {
				t.Errorf("int%d tiling %d (%+v): %d bytes of shared memory, over %d", b, ci, c, s, h100Shared)
			}
			if c.threads() > 1024 || c.ks < 1 || c.stepChannels(b)/gemvqTile%c.ks != 0 {
				t.Errorf("int%d tiling %d (%+v): %d threads, or the step's tiles not split evenly", b, ci, c, c.threads())
			}
			if c.nt%2 != 0 || c.blocks < 1 || c.stepChannels(b) > 2*gemvqTile {
				t.Errorf("int%d tiling %d (%+v): n-tiles not paired or a step of %d channels", b, ci, c, c.stepChannels(b))
			}
		}
	}
	c8 := gemmqConfigs[gemmqBitsIndex(8)]
	if got := gemmqSlotBytes(8, 32, 1) - gemmqSlotBytes(4, 32, 1); got != -32*gemmqXRow*2 {
		t.Errorf("int8's slot at one block differs from int4's by %d bytes, want only the x of one tile less", got)
	}
	for _, c := range c8 {
		if want := 128 * c.blocks; c.stepChannels(8) != want {
			t.Errorf("int8 %+v: a step of %d channels, want %d", c, c.stepChannels(8), want)
		}
	}
	for bi, b := range gemmqBits {
		for large, nk := range []int{4096 * 4096, 14336 * 4096} {
			for T := GEMMQMinRows; T <= GEMMQMaxRows; T++ {
				ci := gemmqConfigFor(T, nk/4096, 4096, b)
				rule := gemmqRule[bi][large]
				if !slices.Contains(rule, ci) {
					t.Fatalf("int%d N·K %d T=%d: tiling %d, not in the rule's %v", b, nk, T, ci, rule)
				}
				tc := gemmqConfigs[bi][ci].tokens()
				for _, o := range rule {
					if oc := gemmqConfigs[bi][o].tokens(); (T+oc-1)/oc*oc-T < (T+tc-1)/tc*tc-T {
						t.Errorf("int%d N·K %d T=%d: tiling %d (%d tokens) pads more than %d (%d)", b, nk, T, ci, tc, o, oc)
					}
				}
			}
		}
	}
	if GEMMQConfigsFor(8) != len(c8) || GEMMQConfigsFor(5) != 0 || GEMMQConfigs() != len(gemmqConfigs[0]) {
		t.Errorf("GEMMQConfigsFor(8) %d, (5) %d, GEMMQConfigs() %d", GEMMQConfigsFor(8), GEMMQConfigsFor(5), GEMMQConfigs())
	}
}

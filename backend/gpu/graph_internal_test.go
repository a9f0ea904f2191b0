package gpu

import "testing"

// TestGraphDirectWhy checks the reason GraphStats.LastDirect gives for a
// flush run op by op, without a device: replay decides before it launches.
func TestGraphDirectWhy(t *testing.T) {
	keyed := func(name string, n int) []queuedOp {
		ops := make([]queuedOp, n)
		for i := range ops {
			ops[i] = queuedOp{op: name, key: []uint64{uint64(i)}}
		}
		return ops
	}
	g := newGraphCache(false)
	short := keyed("Add", graphMinOps-1)
	short[0].op, short[len(short)-1].op = "Embedding", "Argmax"
	if got, want := g.directWhy(short), "short: 15 ops from Embedding to Argmax"; got != want {
		t.Errorf("short flush: %q, want %q", got, want)
	}
	unkeyed := keyed("Linear", graphMinOps+4)
	unkeyed[7] = queuedOp{op: "GPU KV cache: zero residual slots"}
	if got, want := g.directWhy(unkeyed), "no key: GPU KV cache: zero residual slots"; got != want {
		t.Errorf("flush with an op without a key: %q, want %q", got, want)
	}
	first := keyed("Linear", graphMinOps)
	if ran := g.replay(nil, 0, first); ran != graphNone {
		t.Fatalf("first sight: replay = %d, want graphNone", ran)
	}
	if got, want := g.directWhy(first), "first sight"; got != want {
		t.Errorf("first sight: %q, want %q", got, want)
	}
	g.entries[g.sum(g.flatKey(first))].bad = true
	if got, want := g.directWhy(first), "capture failed"; got != want {
		t.Errorf("a sequence whose capture failed: %q, want %q", got, want)
	}
	if got, want := newGraphCache(true).directWhy(first), "graphs off"; got != want {
		t.Errorf("graphs off: %q, want %q", got, want)
	}
}

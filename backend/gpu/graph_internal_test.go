package gpu

import "testing"

// TestGraphDirectWhy checks the reason replay gives GraphStats.LastDirect
// for a flush run op by op, without a device: replay decides before it
// launches.
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
	why := func(g *graphCache, ops []queuedOp) string {
		ran, why := g.replay(nil, 0, ops)
		if ran != graphNone {
			t.Fatalf("replay = %d, want graphNone", ran)
		}
		return why
	}
	if got, want := why(g, short), "short: 15 ops from Embedding to Argmax"; got != want {
		t.Errorf("short flush: %q, want %q", got, want)
	}
	unkeyed := keyed("Linear", graphMinOps+4)
	unkeyed[7] = queuedOp{op: "GPU KV cache: zero residual slots"}
	if got, want := why(g, unkeyed), "no key: GPU KV cache: zero residual slots"; got != want {
		t.Errorf("flush with an op without a key: %q, want %q", got, want)
	}
	first := keyed("Linear", graphMinOps)
	if got, want := why(g, first), "first sight"; got != want {
		t.Errorf("first sight: %q, want %q", got, want)
	}
	g.entries[g.sum(g.flatKey(first))].bad = true
	if got, want := why(g, first), "capture failed"; got != want {
		t.Errorf("a sequence whose capture failed: %q, want %q", got, want)
	}
	if got, want := why(newGraphCache(true), first), "graphs off"; got != want {
		t.Errorf("graphs off: %q, want %q", got, want)
	}
}

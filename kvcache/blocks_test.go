package kvcache

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestBlockAllocatorRandom runs random interleavings of Alloc, Retain,
// Release, Register and Lookup against a shadow model of the reference
// counts: after every operation the allocator's invariants hold (Check),
// every count equals the model's, a double free is refused without effect,
// and at the end, with every reference released, all blocks are free.
func TestBlockAllocatorRandom(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 1 + r.IntN(40)
		a := NewBlockAllocator(n)
		refs := make([]int, n) // the model
		var held []int         // one entry per reference we own
		keys := map[PrefixKey]bool{}
		var keyList []PrefixKey
		for step := 0; step < 3000; step++ {
			switch op := r.IntN(6); {
			case op == 0: // alloc
				k := r.IntN(5)
				free := 0
				for _, c := range refs {
					if c == 0 {
						free++
					}
				}
				ids, err := a.Alloc(k)
				if k > free {
					if !errors.Is(err, ErrOutOfBlocks) || ids != nil {
						t.Fatalf("seed %d step %d: alloc %d with %d free: %v %v", seed, step, k, free, ids, err)
					}
					break
				}
				if err != nil || len(ids) != k {
					t.Fatalf("seed %d step %d: alloc %d with %d free: %v %v", seed, step, k, free, ids, err)
				}
				for _, id := range ids {
					if refs[id] != 0 {
						t.Fatalf("seed %d step %d: alloc returned block %d with %d references", seed, step, id, refs[id])
					}
					refs[id] = 1
					held = append(held, id)
				}
			case op == 1 && len(held) > 0: // retain
				id := held[r.IntN(len(held))]
				if err := a.Retain(id); err != nil {
					t.Fatal(err)
				}
				refs[id]++
				held = append(held, id)
			case op == 2 && len(held) > 0: // release
				i := r.IntN(len(held))
				id := held[i]
				held[i] = held[len(held)-1]
				held = held[:len(held)-1]
				if err := a.Release(id); err != nil {
					t.Fatal(err)
				}
				refs[id]--
				if refs[id] == 0 { // a second release must be refused
					if err := a.Release(id); err == nil {
						t.Fatalf("seed %d step %d: double free of %d accepted", seed, step, id)
					}
				}
			case op == 3 && len(held) > 0: // register
				id := held[r.IntN(len(held))]
				k := NextPrefixKey(PrefixKey{}, []int{r.IntN(30)})
				if err := a.Register(id, k); err != nil {
					t.Fatal(err)
				}
				if !keys[k] {
					keys[k] = true
					keyList = append(keyList, k)
				}
			case op == 4 && len(keyList) > 0: // lookup
				k := keyList[r.IntN(len(keyList))]
				if id, ok := a.Lookup(k); ok {
					refs[id]++
					held = append(held, id)
				}
			case op == 5: // bad ids are refused
				if a.Retain(-1) == nil || a.Release(n) == nil || a.Register(n+3, PrefixKey{}) == nil {
					t.Fatal("bad block id accepted")
				}
			}
			if err := a.Check(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			free := 0
			for id, c := range refs {
				if a.Refs(id) != c {
					t.Fatalf("seed %d step %d: block %d has %d references, want %d", seed, step, id, a.Refs(id), c)
				}
				if c == 0 {
					free++
				}
			}
			if a.Free() != free || a.Used() != n-free {
				t.Fatalf("seed %d step %d: free %d used %d, want %d %d", seed, step, a.Free(), a.Used(), free, n-free)
			}
		}
		for _, id := range held {
			if err := a.Release(id); err != nil {
				t.Fatal(err)
			}
		}
		if a.Free() != n || a.Check() != nil {
			t.Fatalf("seed %d: %d of %d blocks free at the end", seed, a.Free(), n)
		}
	}
}

// TestBlockAllocatorPrefixCache checks the prefix cache: a freed registered
// block is found again by its key (and leaves the free list), and is
// forgotten once it is handed out for other tokens.
func TestBlockAllocatorPrefixCache(t *testing.T) {
	a := NewBlockAllocator(2)
	ids, _ := a.Alloc(1)
	k := NextPrefixKey(PrefixKey{}, []int{1, 2, 3})
	if err := a.Register(ids[0], k); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ids[0]); err != nil {
		t.Fatal(err)
	}
	if a.Free() != 2 || a.Cached() != 1 {
		t.Fatalf("free %d cached %d, want 2 1", a.Free(), a.Cached())
	}
	id, ok := a.Lookup(k)
	if !ok || id != ids[0] || a.Refs(id) != 1 || a.Free() != 1 {
		t.Fatalf("lookup = %d %v, refs %d, free %d", id, ok, a.Refs(id), a.Free())
	}
	if _, ok := a.Lookup(NextPrefixKey(PrefixKey{}, []int{1, 2, 4})); ok {
		t.Fatal("lookup of another prefix hit")
	}
	_ = a.Release(id)
	// Two allocations take the other free block first, then the cached one,
	// which must forget its key.
	if _, err := a.Alloc(2); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Lookup(k); ok {
		t.Fatal("key still found after its block was reused")
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	// Chained keys differ when an earlier block differs.
	k1 := NextPrefixKey(NextPrefixKey(PrefixKey{}, []int{1}), []int{2})
	k2 := NextPrefixKey(NextPrefixKey(PrefixKey{}, []int{3}), []int{2})
	if k1 == k2 {
		t.Fatal("prefix keys ignore the parent")
	}
}

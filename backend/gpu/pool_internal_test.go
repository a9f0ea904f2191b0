package gpu

// The pool's reuse policy (pool.go) over the allocations of a decode step
// as one rank of backend/tp makes them at TP 2 (Llama-3.1-8B shapes, 64
// rows): from the second step on, every tensor must get the address it got
// the step before, so that the step's graph keys repeat; the stack policy
// it replaced rotates them with a period of 6 steps. CPU only.

import (
	"maps"
	"testing"

	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// tpStepAllocs is one rank's step at TP 2: the parts in the order ops first
// write them (backend/tp allocates lazily; Embedding's per-rank ids come
// after the residual h), with their rounded sizes; tpStepFrees is the order
// model.Forward's arena frees them (the ids' part, then its local ids).
var (
	tpStepAllocs = []struct {
		name string
		size int
	}{
		{"ids", 512}, {"pos", 512}, {"rows", 512}, {"h", 1 << 20}, {"local", 512},
		{"x", 1 << 20}, {"q", 512 << 10}, {"k", 128 << 10}, {"v", 128 << 10},
		{"o", 512 << 10}, {"gate", 1792 << 10}, {"up", 1792 << 10}, {"hOut", 1 << 20},
		{"logits", 64 * 64136 * 4},
	}
	tpStepFrees = []string{"ids", "local", "pos", "rows", "h", "x", "q", "k", "v", "o", "gate", "up", "hOut", "logits"}
)

// simulateSteps runs n steps of tpStepAllocs and tpStepFrees over a pool
// that reuses with take (fresh addresses from a bump allocator when the
// pool has none), and returns each step's addresses.
func simulateSteps(n int, take func([]cuda.DevicePtr) (cuda.DevicePtr, []cuda.DevicePtr)) []map[string]cuda.DevicePtr {
	pool := map[int][]cuda.DevicePtr{}
	next := cuda.DevicePtr(1 << 30)
	var steps []map[string]cuda.DevicePtr
	for range n {
		addr, size := map[string]cuda.DevicePtr{}, map[string]int{}
		for _, a := range tpStepAllocs {
			if list := pool[a.size]; len(list) > 0 {
				addr[a.name], pool[a.size] = take(list)
			} else {
				addr[a.name] = next
				next += cuda.DevicePtr(a.size)
			}
			size[a.name] = a.size
		}
		for _, name := range tpStepFrees {
			pool[size[name]] = append(pool[size[name]], addr[name])
		}
		steps = append(steps, addr)
	}
	return steps
}

func TestPoolStableAddresses(t *testing.T) {
	if len(tpStepFrees) != len(tpStepAllocs) {
		t.Fatalf("%d frees for %d allocations", len(tpStepFrees), len(tpStepAllocs))
	}
	const n = 14
	steps := simulateSteps(n, poolTake)
	for s := 2; s < n; s++ {
		if !maps.Equal(steps[s], steps[1]) {
			t.Fatalf("lowest-address pool: step %d's addresses %v differ from step 1's %v", s, steps[s], steps[1])
		}
	}
	// The stack it replaced: the whole step's addresses repeat only every
	// 6 steps (the int32 tensors every 3, the others every 2).
	lifo := func(list []cuda.DevicePtr) (cuda.DevicePtr, []cuda.DevicePtr) {
		return list[len(list)-1], list[:len(list)-1]
	}
	steps = simulateSteps(n, lifo)
	period := 0
	for p := 1; p < n-1 && period == 0; p++ {
		if maps.Equal(steps[1], steps[1+p]) {
			period = p
		}
	}
	if period != 6 {
		t.Errorf("stack pool: the step's addresses repeat every %d steps; the analysis in pool.go says 6", period)
	}
}

func TestPoolTake(t *testing.T) {
	list := []cuda.DevicePtr{0x3000, 0x1000, 0x4000, 0x2000}
	var got []cuda.DevicePtr
	for len(list) > 0 {
		var p cuda.DevicePtr
		p, list = poolTake(list)
		got = append(got, p)
	}
	want := []cuda.DevicePtr{0x1000, 0x2000, 0x3000, 0x4000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("poolTake order %#x, want %#x", got, want)
		}
	}
}

// gemvq3_internal_test.go checks gemvq3SplitFor, v3's split rule, on the
// Llama-3.1-8B layer shapes against the splits `bench gemvq` measured best
// (or within 0.4 us of it) for v3.2 on the H100
// (bench/results/2026-11-26-h100-gemvq-14, call 2), and its limits (a
// slice keeps a step of K).
// gemvq4SplitFor, v4's, and gemvq5SplitFor, v5's, likewise (TestGEMVQ4SplitFor,
// TestGEMVQ5SplitFor).
package kernels

import "testing"

func TestGEMVQ3SplitFor(t *testing.T) {
	const h100 = 24 * 132 // warps an H100 holds of v3 at one row (6 CTAs of 4 warps an SM)
	checkSplits(t, gemvq3SplitFor, h100, []splitCase{
		{"int4 gate/up", 14336, 4096, 4, 2}, {"int4 down", 4096, 14336, 4, 2},
		{"int4 q/o", 4096, 4096, 4, 2}, {"int4 k/v", 1024, 4096, 4, 4},
		{"int8 gate/up", 14336, 4096, 8, 2}, {"int8 down", 4096, 14336, 8, 1},
		{"int8 q/o", 4096, 4096, 8, 1}, {"int8 k/v", 1024, 4096, 8, 4},
		{"int3 gate/up", 14336, 4096, 3, 2}, {"int3 down", 4096, 14336, 3, 2},
		{"past a wave, one step", 40000, 1024, 4, 1}, {"one step", 100, 1024, 4, 1}, {"two steps", 100, 2048, 4, 2}, {"a partial third", 100, 2100, 4, 2},
	})
}

// TestGEMVQ4SplitFor checks gemvq4SplitFor, v4's split rule, on the
// Llama-3.1-8B layer shapes at the H100's v4 slots (2 CTAs of 8 warps an
// SM at 128 registers) and its limits. On int8, the width Launch gives v4,
// these are the best splits call 2 measured
// (bench/results/2026-11-26-h100-gemvq-15/call2: gate/up S 2 25.2 us, down
// S 8 25.4, q/o S 8 11.6); on int4 too (gate/up S 2 19.9, down S 8 19.9).
func TestGEMVQ4SplitFor(t *testing.T) {
	const h100 = 16 * 132
	checkSplits(t, gemvq4SplitFor, h100, []splitCase{
		{"int4 gate/up", 14336, 4096, 4, 2}, {"int4 down", 4096, 14336, 4, 8}, {"int4 q/o", 4096, 4096, 4, 8},
		{"int8 gate/up", 14336, 4096, 8, 2}, {"int8 down", 4096, 14336, 8, 8}, {"int3 gate/up", 14336, 4096, 3, 2},
		{"one step", 4096, 512, 4, 1}, {"two steps of int8", 4096, 512, 8, 2},
	})
}

// TestGEMVQ5SplitFor checks gemvq5SplitFor, v5's split rule, on the
// Llama-3.1-8B layer shapes at the H100's v5 slots (2 CTAs of 8 warps an
// SM by the rings' shared memory) against session 14's call 2
// (bench/results/2026-11-26-h100-gemvq-16/call2, int4 v5.1: gate/up S 2
// 19.9 us, the best; down S 8 18.9, the best; call 1's q/o S 8 9.8, S 4
// the same), and gemvq5RingBytes: 2 CTAs' rings and static shared memory
// (9.2 KB) within the H100's 228 KB an SM, and the -DGEMVQ5_STAGES= knob.
func TestGEMVQ5SplitFor(t *testing.T) {
	const h100 = 16 * 132
	checkSplits(t, gemvq5SplitFor, h100, []splitCase{
		{"int4 gate/up", 14336, 4096, 4, 2}, {"int4 down", 4096, 14336, 4, 8}, {"int4 q/o", 4096, 4096, 4, 8},
		{"one step", 4096, 256, 4, 1}, {"two steps of int8", 4096, 256, 8, 2},
	})
	for _, bits := range gemvqBits {
		if b := gemvq5RingBytes(bits, nil); 2*(b+9216+1024) > 228<<10 {
			t.Errorf("int%d: a CTA's rings take %d bytes: 2 CTAs do not fit an SM", bits, b)
		}
	}
	if a, b := gemvq5RingBytes(4, nil), gemvq5RingBytes(4, []string{"-DGEMVQ5_STAGES=3"}); b != a/4*3 {
		t.Errorf("-DGEMVQ5_STAGES=3: %d bytes, want %d", b, a/4*3)
	}
}

// splitCase is a layer shape and the split a split rule should give it.
type splitCase struct {
	name          string
	N, K, bits, S int
}

// checkSplits checks split rule f at slots warps against cases.
func checkSplits(t *testing.T, f func(N, K, bits, slots int) int, slots int, cases []splitCase) {
	t.Helper()
	for _, c := range cases {
		if got := f(c.N, c.K, c.bits, slots); got != c.S {
			t.Errorf("%s [%d, %d] int%d: split %d, want %d", c.name, c.N, c.K, c.bits, got, c.S)
		}
	}
}

// Tests of fp16Path, the one place that picks the kernel of an fp16
// linear layer (no GPU needed: the choice depends on the options and the
// shape only).
package gpu

import "testing"

func TestFP16PathByShape(t *testing.T) {
	// Llama-3.1-8B's launches: the q|k|v and gate|up groups, o, down and
	// lm_head, each as (N summed over the group's weights, K).
	const (
		qkvN, gateUpN, lmN = 6144, 2 * 14336, 128256
	)
	for _, c := range []struct {
		name    string
		opts    Options
		T, N, K int
		joined  bool
		want    linearPath
	}{
		{"T=1 gate|up", Options{}, 1, gateUpN, 4096, false, pathGEMV},
		{"T=2 lm_head", Options{}, 2, lmN, 4096, false, pathGEMV},
		{"T=4 gate|up", Options{}, 4, gateUpN, 4096, false, pathMMA},
		{"T=8 lm_head", Options{}, 8, lmN, 4096, false, pathMMA},
		{"T=9 gate|up", Options{}, 9, gateUpN, 4096, false, pathCublas},
		{"T=15 gate alone", Options{}, 15, 14336, 4096, false, pathCublas},
		{"T=15 down", Options{}, 15, 4096, 14336, false, pathCublas},
		{"T=15 lm_head", Options{}, 15, lmN, 4096, false, pathCublas},
		{"T=15 q|k|v", Options{}, 15, qkvN, 4096, false, pathMMA},
		{"T=15 o", Options{}, 15, 4096, 4096, false, pathMMA},
		// Llama-3-70B's q|k|v (160 MiB); k alone (16 MiB) where the
		// group runs one by one; joined groups (join.go) from 48 MiB.
		{"T=15 70B q|k|v", Options{}, 15, 8192 + 2*1024, 8192, false, pathCublas},
		{"T=15 70B k alone", Options{}, 15, 1024, 8192, false, pathMMA},
		{"T=15 q|k|v joined", Options{}, 15, qkvN, 4096, true, pathCublas},
		{"T=9 q|k|v joined", Options{}, 9, qkvN, 4096, true, pathCublas},
		{"T=8 q|k|v joined", Options{}, 8, qkvN, 4096, true, pathMMA},
		{"T=2 q|k|v joined", Options{}, 2, qkvN, 4096, true, pathGEMV},
		{"T=15 32 MiB joined", Options{}, 15, 4096, 4096, true, pathMMA},
		{"batch-invariant T=15 q|k|v joined", Options{BatchInvariant: true}, 15, qkvN, 4096, true, pathMMA},
		{"T=16 o", Options{}, 16, 4096, 4096, false, pathMMA},
		{"T=17 o", Options{}, 17, 4096, 4096, false, pathCublas},
		{"K not a multiple of 8", Options{}, 4, 4096, 4100, false, pathCublas},
		{"no gemv", Options{NoGEMV: true}, 1, 4096, 4096, false, pathCublas},
		{"mma decode", Options{MMADecode: true}, 1, 4096, 4096, false, pathMMA},
		{"batch-invariant T=15 gate|up", Options{BatchInvariant: true}, 15, gateUpN, 4096, false, pathMMA},
		{"batch-invariant T=64", Options{BatchInvariant: true}, 64, lmN, 4096, false, pathMMA},
	} {
		b := &Backend{opts: c.opts}
		if got := b.fp16Path(c.T, c.N, c.K, c.joined); got != c.want {
			t.Errorf("%s: fp16Path(%d, %d, %d, %v) = %d, want %d", c.name, c.T, c.N, c.K, c.joined, got, c.want)
		}
	}
}

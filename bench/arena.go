package bench

import (
	"math/rand/v2"

	"github.com/bitdecode/bitdecode/attn"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/internal/half"
)

// devArena holds the device buffers of one benchmark point (or timer) and
// frees them together.
type devArena struct {
	dev  *cuda.Device
	ptrs []cuda.DevicePtr
}

// alloc returns n bytes of device memory (at least 16), freed with the
// arena.
func (a *devArena) alloc(n int) (cuda.DevicePtr, error) {
	p, err := a.dev.Alloc(max(n, 16))
	if err == nil {
		a.ptrs = append(a.ptrs, p)
	}
	return p, err
}

// upload returns a device copy of src, freed with the arena.
func (a *devArena) upload(src []byte) (cuda.DevicePtr, error) {
	p, err := a.alloc(len(src))
	if err != nil {
		return 0, err
	}
	return p, a.dev.HtoD(p, src)
}

// free releases every buffer.
func (a *devArena) free() {
	for _, p := range a.ptrs {
		a.dev.Free(p)
	}
	a.ptrs = nil
}

// rotatedTables returns the block tables of sets rotated copies of a batch
// of B sequences with n blocks each: set s addresses pool blocks
// [s·B·n, (s+1)·B·n), in order, or shuffled with paged.
func rotatedTables(r *rand.Rand, sets, B, n int, paged bool) [][]int32 {
	out := make([][]int32, sets)
	for s := range out {
		base := s * B * n
		perm := r.Perm(B * n)
		t := make([]int32, B*n)
		for i := range t {
			if paged {
				t[i] = int32(base + perm[i])
			} else {
				t[i] = int32(base + i)
			}
		}
		out[s] = t
	}
	return out
}

// sameLens returns B sequence lengths of l tokens.
func sameLens(B, l int) []int32 {
	lens := make([]int32, B)
	for i := range lens {
		lens[i] = int32(l)
	}
	return lens
}

// queriesFP16 returns B sequences' fp16 queries of shape sh, scaled against
// keys k as syntheticQ scales them.
func queriesFP16(r *rand.Rand, k []float32, sh attn.Shape, B int) []uint16 {
	qh := make([]uint16, B*sh.Hq*sh.D)
	qf := syntheticQ(r, [][]float32{k}, sh)
	for i := range qh {
		qh[i] = half.FromFloat32(qf[i%len(qf)])
	}
	return qh
}

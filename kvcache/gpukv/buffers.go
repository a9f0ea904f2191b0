package gpukv

import (
	"encoding/binary"
	"fmt"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/cuda"
)

// gpuBuffers are the per-batch device buffers a GPU cache (Paged,
// Planes) grows on demand: fp16 copies of q and out, and the batch's
// int32 tables (each cache defines their layout).
type gpuBuffers struct {
	be  *gpu.Backend
	dev *cuda.Device

	qh, oh    cuda.DevicePtr // fp16 q and out, [maxT][Hq*D]
	maxT      int
	meta      cuda.DevicePtr // the batch's int32 tables
	metaWords int
}

// reserveScratch makes the fp16 q/out buffers hold T tokens of tokenHalves
// halves each (growing to at least minT tokens and doubling); what names the
// cache in errors.
func (g *gpuBuffers) reserveScratch(T, minT, tokenHalves int, what string) error {
	if T <= g.maxT {
		return nil
	}
	T = max(T, 2*g.maxT, minT)
	bytes := T * tokenHalves * 2
	return g.be.Do(func(x *cuda.Ctx) error {
		if err := g.be.SyncStream(x, g.dev.Stream()); err != nil { // queued kernels may use the old buffers
			return err
		}
		for _, p := range []*cuda.DevicePtr{&g.qh, &g.oh} {
			if *p != 0 {
				if err := x.Free(*p); err != nil {
					return err
				}
				*p = 0
			}
			var err error
			if *p, err = x.Alloc(bytes); err != nil {
				return fmt.Errorf("gpukv: %s scratch for %d tokens: %w", what, T, err)
			}
		}
		g.maxT = T
		return nil
	})
}

// upload copies the batch's int32 tables to the device, in stream order:
// a queued copy (gpu.Backend.EnqueueUpload, no hand-off to the owner
// thread), after growing the buffer where it is too small.
func (g *gpuBuffers) upload(words []int32) error {
	buf := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(w))
	}
	if len(words) > g.metaWords {
		err := g.be.Do(func(x *cuda.Ctx) error {
			if g.meta != 0 {
				if err := x.Synchronize(); err != nil {
					return err
				}
				if err := x.Free(g.meta); err != nil {
					return err
				}
				g.meta = 0
			}
			n := max(len(words), 2*g.metaWords)
			var err error
			if g.meta, err = x.Alloc(4 * n); err != nil {
				return err
			}
			g.metaWords = n
			return nil
		})
		if err != nil {
			return err
		}
	}
	g.be.EnqueueUpload("GPU KV cache tables", g.meta, buf)
	return nil
}

// take returns the buffers' device memory and forgets it, for freeing.
func (g *gpuBuffers) take() []cuda.DevicePtr {
	ptrs := []cuda.DevicePtr{g.qh, g.oh, g.meta}
	g.qh, g.oh, g.meta = 0, 0, 0
	return ptrs
}

// attentionPtrs returns the device pointers of Attend's float32 q, k, v and
// out tensors; what names the cache in errors.
func attentionPtrs(be *gpu.Backend, what string, q, k, v, out backend.Tensor) ([4]cuda.DevicePtr, error) {
	var ptr [4]cuda.DevicePtr
	for i, t := range []backend.Tensor{q, k, v, out} {
		if t.DType() != backend.F32 {
			return ptr, fmt.Errorf("gpukv: %s: tensor %d is %v, want F32", what, i, t.DType())
		}
		var err error
		if ptr[i], err = be.Ptr(t); err != nil {
			return ptr, fmt.Errorf("gpukv: %s: %w", what, err)
		}
	}
	return ptr, nil
}

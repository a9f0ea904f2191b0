package gpukv

import (
	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/backend/gpu"
	"github.com/bitdecode/bitdecode/gpu/kernels"
	"github.com/bitdecode/bitdecode/kv"
	"github.com/bitdecode/bitdecode/kvcache"
	"github.com/bitdecode/bitdecode/model"
)

// provider makes the caches of the CUDA backend for kvcache.New.
type provider struct{}

func init() { kvcache.Register(provider{}) }

// Serves reports whether be is the CUDA backend.
func (provider) Serves(be backend.Backend) bool {
	_, ok := be.(*gpu.Backend)
	return ok
}

// New returns a Planes cache for a bit-plane (bw) spec, a Paged one for the
// others.
func (provider) New(be backend.Backend, cfg *model.Config, spec kv.Spec, o kvcache.Options) (kvcache.Cache, error) {
	gb := be.(*gpu.Backend)
	if spec.Planes.On {
		return kvcache.AsCache(NewPlanes(gb, cfg, spec, o))
	}
	return kvcache.AsCache(NewPaged(gb, cfg, spec, o))
}

// PadHeadDim returns the head dim the GPU caches hold a model of head dim d
// at (kernels.PadHeadDim: the next the kernels take; model.Config.PadHeads
// pads the heads at load), and whether there is one.
func PadHeadDim(d int) (dp int, ok bool) { return kernels.PadHeadDim(d) }

// DescribeDecode says which GPU decode kernel reads format f (the one
// Paged plans on this GPU generation, Hopper first), or why none does, for
// 'bitdecode inspect kv'.
func DescribeDecode(f kv.Format) string {
	if f.Rotate && !f.Planes.On {
		return kernels.DescribeDecode(unrotated(f)) + "; q, k, v and the output rotated around it by the cache (ops.cu hadamard, kv.Rotate's bits)"
	}
	return kernels.DescribeDecode(f)
}

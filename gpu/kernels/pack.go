package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
)

//go:embed pack.cu
var packSource string

// packThreads is pack.cu's kThreads; packMaxGroups its kMaxGroups.
const (
	packThreads   = 1024
	packMaxGroups = 4096
)

// PackPlan quantizes and packs full fp16 residual blocks into packed blocks
// of one format, on the GPU (pack.cu), in kv.MMA order.
type PackPlan struct {
	f      kv.Format
	fn     cuda.Function // pack_block
	paged  cuda.Function // pack_paged
	kG, vG int
	smem   int // dynamic shared memory: one staged half
}

// packMaxStage bounds the staged half (Nr*D*2 bytes) by the H100's 227 KiB
// of shared memory per block less the static group arrays.
const packMaxStage = 192 << 10

// PlanPack compiles the pack kernels for format f.
func PlanPack(dev *cuda.Device, f kv.Format) (*PackPlan, error) {
	lay, err := LayoutFor(f)
	if err != nil {
		return nil, err
	}
	p := &PackPlan{f: f, kG: max(f.K.Group, 1), vG: max(f.V.Group, 1)}
	for _, h := range []kv.TensorLayout{f.K, f.V} {
		if h.Params > packMaxGroups {
			return nil, fmt.Errorf("kernels: pack: %d groups per block exceed %d", h.Params, packMaxGroups)
		}
	}
	p.smem = f.Residual * f.D * 2
	if p.smem > packMaxStage {
		return nil, fmt.Errorf("kernels: pack: a residual half of %d tokens x %d channels (%d bytes) exceeds the %d-byte stage", f.Residual, f.D, p.smem, packMaxStage)
	}
	targs := fmt.Sprintf("<%d, %d, %d, %t, %t>", f.D, lay.KBits, lay.VBits, lay.KPerChannel && lay.KBits < 16, lay.BF16)
	expr, paged := "pack::pack_block"+targs, "pack::pack_paged"+targs
	mod, err := dev.Compile(cuda.Program{Name: "pack.cu", Source: packSource, Exprs: []string{expr, paged}})
	if err != nil {
		return nil, err
	}
	if p.fn, err = mod.Function(expr); err != nil {
		return nil, err
	}
	if p.paged, err = mod.Function(paged); err != nil {
		return nil, err
	}
	err = dev.Do(func(c *cuda.Ctx) error {
		if err := c.SetMaxDynamicShared(p.fn, p.smem); err != nil {
			return err
		}
		return c.SetMaxDynamicShared(p.paged, p.smem)
	})
	return p, err
}

// Launch packs heads blocks (sequence-major KV heads): resK and resV hold
// each head's full residual block ([heads][Nr][D] fp16, kv.MMA order), dst
// receives the packed blocks ([heads][BlockBytes]). One launch.
func (p *PackPlan) Launch(c *cuda.Ctx, st cuda.Stream, resK, resV, dst cuda.DevicePtr, heads int) error {
	f := p.f
	return c.Launch(p.fn, cuda.Dim3{X: heads, Y: 2}, cuda.Dim3{X: packThreads}, p.smem, st,
		resK, resV, dst, int32(f.Residual), int32(f.BlockBytes()), int32(f.K.Bytes),
		int32(f.K.ParamsOffset), int32(f.V.ParamsOffset), int32(p.kG), int32(p.vG))
}

// LaunchPaged packs n full residual blocks of a paged cache in one launch:
// item i's residual is slot srcSlots[i] of resK/resV ([slots][hkv][Nr][D]
// fp16, kv.MMA order) and its packed block goes to pool block dstBlocks[i]
// (pool: [blocks][hkv][BlockBytes]). srcSlots and dstBlocks are [n] int32
// on the device.
func (p *PackPlan) LaunchPaged(c *cuda.Ctx, st cuda.Stream, resK, resV, srcSlots, dstBlocks, pool cuda.DevicePtr, n, hkv int) error {
	if n <= 0 {
		return nil
	}
	f := p.f
	return c.Launch(p.paged, cuda.Dim3{X: n * hkv, Y: 2}, cuda.Dim3{X: packThreads}, p.smem, st,
		resK, resV, srcSlots, dstBlocks, pool, int32(hkv), int32(f.Residual), int32(f.BlockBytes()), int32(f.K.Bytes),
		int32(f.K.ParamsOffset), int32(f.V.ParamsOffset), int32(p.kG), int32(p.vG))
}

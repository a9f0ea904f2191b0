package kernels

import (
	_ "embed"
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/kv"
)

//go:embed pack.cu
var packSource string

// packThreads is pack.cu's kThreads.
const packThreads = 256

// packMaxSlices bounds the slices one half is cut into (pack.cu v4).
const packMaxSlices = 32

// PackPlan quantizes and packs full fp16 residual blocks into packed blocks
// of one format, on the GPU (pack.cu), in kv.MMA order.
type PackPlan struct {
	f         kv.Format
	fn        cuda.Function // pack_block
	paged     cuda.Function // pack_paged
	kG, vG    int
	maxGroups int // the larger half's quantization groups per block
	smem      int // dynamic shared memory: one staged half, then the groups' (s, z)
	sms       int // the GPU's SMs, for the slicing of small launches
	maxSlices int // slices that still give every thread a word of the smaller half
	fixed     int // PackTuning.Slices, or 0: slices by packSlices
}

// PlanPack is PlanPackWith the default tuning (the zero PackTuning).
func PlanPack(dev *cuda.Device, f kv.Format) (*PackPlan, error) {
	return PlanPackWith(dev, f, PackTuning{})
}

// PlanPackWith compiles the pack kernels for format f, tuned by t.
func PlanPackWith(dev *cuda.Device, f kv.Format, t PackTuning) (*PackPlan, error) {
	lay, err := LayoutFor(f)
	if err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	p := &PackPlan{f: f, kG: max(f.K.Group, 1), vG: max(f.V.Group, 1), maxGroups: max(f.K.Params, f.V.Params), sms: dev.SMs()}
	for _, g := range []int{p.kG, p.vG} {
		if g != 1 && (g < 16 || g&(g-1) != 0) {
			return nil, fmt.Errorf("kernels: pack: quantization groups of %d: the GPU packer needs a power of two of at least 16", g)
		}
	}
	p.smem = f.Residual*f.D*2 + 8*p.maxGroups
	if p.smem > dev.MaxSharedPerBlock() {
		return nil, fmt.Errorf("kernels: pack: a residual half of %d tokens x %d channels and its %d groups need %d bytes of shared memory; the GPU allows %d per CTA (use a smaller residual block)",
			f.Residual, f.D, p.maxGroups, p.smem, dev.MaxSharedPerBlock())
	}
	words := f.Residual * f.D * min(lay.KBits, lay.VBits) / 32
	p.maxSlices = max(1, min(packMaxSlices, words/packThreads))
	p.fixed = t.Slices
	prog, expr, paged := packProgram(f.D, lay)
	mod, err := dev.Compile(prog)
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

// packProgram returns pack.cu's program for head dim d and layout lay, and
// its pack_block and pack_paged kernels' name expressions.
func packProgram(d int, lay DecodeLayout) (prog cuda.Program, expr, paged string) {
	targs := fmt.Sprintf("<%d, %d, %d, %t, %t>", d, lay.KBits, lay.VBits, lay.KPerChannel && lay.KBits < 16, lay.BF16)
	expr, paged = "pack::pack_block"+targs, "pack::pack_paged"+targs
	return program("pack.cu", packSource, []string{expr, paged}, nil), expr, paged
}

// Launch packs heads blocks (sequence-major KV heads): resK and resV hold
// each head's full residual block ([heads][Nr][D] fp16, kv.MMA order), dst
// receives the packed blocks ([heads][BlockBytes]). One launch.
func (p *PackPlan) Launch(c *cuda.Ctx, st cuda.Stream, resK, resV, dst cuda.DevicePtr, heads int) error {
	f := p.f
	return c.Launch(p.fn, cuda.Dim3{X: heads, Y: 2, Z: p.slices(heads)}, cuda.Dim3{X: packThreads}, p.smem, st,
		resK, resV, dst, int32(f.Residual), int32(f.BlockBytes()), int32(f.K.Bytes),
		int32(f.K.ParamsOffset), int32(f.V.ParamsOffset), int32(p.kG), int32(p.vG), int32(p.maxGroups))
}

// slices returns how many CTAs share each half of a launch of heads blocks:
// enough for about two CTAs per SM (a decode step's pack of one block per
// head of a few sequences would otherwise run on a few SMs), at most one
// per packThreads words of the smaller half.
func (p *PackPlan) slices(heads int) int {
	if p.fixed > 0 {
		return p.fixed
	}
	return packSlices(heads, p.sms, p.maxSlices)
}

// packSlices is slices for a GPU of sms SMs.
func packSlices(heads, sms, maxSlices int) int {
	items := 2 * heads
	return max(1, min(maxSlices, (2*sms+items-1)/items))
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
	return c.Launch(p.paged, cuda.Dim3{X: n * hkv, Y: 2, Z: p.slices(n * hkv)}, cuda.Dim3{X: packThreads}, p.smem, st,
		resK, resV, srcSlots, dstBlocks, pool, int32(hkv), int32(f.Residual), int32(f.BlockBytes()), int32(f.K.Bytes),
		int32(f.K.ParamsOffset), int32(f.V.ParamsOffset), int32(p.kG), int32(p.vG), int32(p.maxGroups))
}

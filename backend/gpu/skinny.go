// skinny.go: where the cuBLASLt path's GEMM runs on skinny.cu instead
// (kernels.Skinny, the weight-streaming GEMM of 17-128 rows; Options.Skinny),
// its split-K workspace, and SkinnyAuto's timed choice.

package gpu

import (
	"fmt"

	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

const (
	// skinnyMinRows and kernels.SkinnyMaxRows bound the rows whose
	// cuBLASLt GEMMs (Linear's launchGEMM, a joined group's one GEMM) may
	// run on skinny.cu: more than linear.cu's narrow kernel takes, at most
	// one CTA's tokens.
	skinnyMinRows = kernels.LinearNarrowMaxRows + 1
	// skinnyWorkspaceBytes is skinny.cu's split-K workspace, allocated and
	// zeroed when the backend opens (each launch leaves its counters zero;
	// its address never changes, so graphs captured over it stay valid). A
	// shape whose split's partials need more runs at the largest split
	// that fits; the split, and so the bits, depend on the shape alone.
	skinnyWorkspaceBytes = 32 << 20
	// skinnyRowBucket is SkinnyAuto's bucket of row counts timed once.
	skinnyRowBucket = 16
	// skinnyAutoMargin is how much faster skinny.cu must time than
	// cuBLASLt for SkinnyAuto to keep it.
	skinnyAutoMargin = 0.97
)

// loadSkinny compiles skinny.cu and allocates its zeroed workspace.
func loadSkinny(dev *cuda.Device) (*kernels.Skinny, cuda.DevicePtr, error) {
	sk, err := kernels.LoadSkinny(dev)
	if err != nil {
		return nil, 0, err
	}
	var ws cuda.DevicePtr
	err = dev.Do(func(c *cuda.Ctx) error {
		p, err := c.Alloc(skinnyWorkspaceBytes)
		if err != nil {
			return err
		}
		if err := c.Memset32Async(p, 0, skinnyWorkspaceBytes/4, dev.Stream()); err != nil {
			c.Free(p)
			return err
		}
		ws = p
		return c.SyncStream(dev.Stream())
	})
	if err != nil {
		return nil, 0, fmt.Errorf("skinny.cu's split-K workspace of %d bytes: %w", skinnyWorkspaceBytes, err)
	}
	return sk, ws, nil
}

// skinnyPlan is how a cuBLASLt-path GEMM runs on skinny.cu: ok false where
// cuBLASLt keeps it; else its split and workspace (0 at split 1).
type skinnyPlan struct {
	ok    bool
	split int
	ws    cuda.DevicePtr
}

// skinnyKey is a shape and row bucket of SkinnyAuto's choices.
type skinnyKey struct{ bucket, N, K int }

// planSkinny returns the skinnyPlan of a GEMM of xh [T, K] (fp16) by w [N,
// K]ᵀ. Only the cuBLASLt path asks, so the batch-invariant mode (linear.cu)
// never runs skinny.cu. In SkinnyAuto the first ask of a shape and row
// bucket times both kernels on xh and w (the values in xh do not matter).
func (b *Backend) planSkinny(T, N, K int, xh, w cuda.DevicePtr) (skinnyPlan, error) {
	if b.skinny == nil || T < skinnyMinRows || T > kernels.SkinnyMaxRows || K%8 != 0 {
		return skinnyPlan{}, nil
	}
	S := b.skinny.SkinnySplit(T, N, K)
	for S > 1 && kernels.SkinnyWorkspaceBytes(T, N, S) > skinnyWorkspaceBytes {
		S--
	}
	if kernels.CheckSkinnyShape(T, N, K, S) != nil {
		return skinnyPlan{}, nil
	}
	p := skinnyPlan{ok: true, split: S}
	if S > 1 {
		p.ws = b.skws
	}
	if b.opts.skinnyMode() != SkinnyAuto {
		return p, nil
	}
	key := skinnyKey{(T - 1) / skinnyRowBucket, N, K}
	b.skMu.Lock()
	defer b.skMu.Unlock()
	pick, ok := b.skPick[key]
	if !ok {
		var err error
		if pick, err = b.timeSkinny(p, T, N, K, xh, w); err != nil {
			return skinnyPlan{}, fmt.Errorf("timing skinny.cu against cuBLASLt at [%d, %d] x [%d, %d]ᵀ: %w", T, K, N, K, err)
		}
		b.skPick[key] = pick
	}
	if !pick {
		return skinnyPlan{}, nil
	}
	return p, nil
}

// timeSkinny reports whether skinny.cu by plan p runs the GEMM at least
// skinnyAutoMargin faster than cuBLASLt's (the median of 5 runs each after
// one, most of L2 evicted before each by zeroing the workspace, which
// leaves its counters zero), into an output of its own: the queued ops
// have not run yet, and xh and w are only read. Where that output does not
// fit in the GPU's memory (a batch sized to fill it), cuBLASLt is kept.
func (b *Backend) timeSkinny(p skinnyPlan, T, N, K int, xh, w cuda.DevicePtr) (bool, error) {
	var pick bool
	err := b.Do(func(c *cuda.Ctx) error {
		y, err := c.Alloc(4 * T * N)
		if err != nil {
			return nil // not timed: cuBLASLt
		}
		defer c.Free(y)
		prep := func(int) error { return c.Memset32Async(b.skws, 0, skinnyWorkspaceBytes/4, b.stream) }
		g := cuda.GEMMShape{M: T, N: N, K: K, In: cuda.F16, Out: cuda.F32}
		lt, err := c.MedianUSPrep(b.stream, 1, 5, prep, func(int) error { return c.GEMM(b.stream, g, y, xh, w) })
		if err != nil {
			return err
		}
		sk, err := c.MedianUSPrep(b.stream, 1, 5, prep, func(int) error { return b.launchSkinny(c, p, y, xh, w, 0, T, N, K) })
		if err != nil {
			return err
		}
		pick = sk < skinnyAutoMargin*lt
		return nil
	})
	return pick, err
}

// launchSkinny runs y = xh·wᵀ + bias (bias may be 0) on skinny.cu by plan p.
func (b *Backend) launchSkinny(c *cuda.Ctx, p skinnyPlan, y, xh, w, bias cuda.DevicePtr, T, N, K int) error {
	return b.skinny.Launch(c, b.stream, y, xh, w, bias, p.ws, T, N, K, p.split, false)
}

// sample.go: backend.Argmaxer, greedy decoding's next token picked on the
// device (sample.cu's argmax_rows) and the R token ids copied back instead
// of R x Vocab logits (docs/perf/decode-step.md v23).

package gpu

import (
	"cmp"
	"fmt"
	"math"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/gpu/cuda"
	"github.com/bitdecode/bitdecode/gpu/kernels"
)

// sampleKernels compiles sample.cu on first use.
func (b *Backend) sampleKernels() (*kernels.Sample, error) {
	b.sampleOnce.Do(func() { b.sampleK, b.sampleErr = kernels.LoadSample(b.dev) })
	return b.sampleK, b.sampleErr
}

// ArgmaxRows implements backend.Argmaxer: one argmax_rows launch, a block
// a row of src. dst's host copy of uploaded values is dropped (the kernel
// writes it), so it is no index tensor until the next UploadInt32.
func (b *Backend) ArgmaxRows(dst, src backend.Tensor) {
	const op = "ArgmaxRows"
	if b.failed() {
		return
	}
	d, err1 := b.tensorOf(op, dst)
	s, err2 := b.f32(op, src)
	if err := cmp.Or(err1, err2); err != nil {
		b.fail(err)
		return
	}
	R, V := s.matrix()
	if err := backend.CheckI32(op, d, d.dtype); err != nil {
		b.fail(err)
		return
	}
	if d.n != R {
		b.fail(&backend.ShapeError{Op: op, Detail: fmt.Sprintf("dst %v for the %d rows of src %v", d, R, s)})
		return
	}
	k, err := b.sampleKernels()
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: %w", op, err))
		return
	}
	d.host = nil
	b.launch(op, func(c *cuda.Ctx) error {
		return k.ArgmaxRows(c, b.stream, d.ptr, s.ptr, R, V)
	}, u64(d.ptr), u64(s.ptr), u64(R), u64(V))
}

// DownloadInt32 implements backend.Argmaxer. It waits for the ops queued
// so far; a device error from them is recorded as the pending op error.
func (b *Backend) DownloadInt32(dst []int32, src backend.Tensor) error {
	t, err := b.downloadSource("DownloadInt32", src)
	if err != nil {
		return err
	}
	if t.dtype != backend.I32 {
		return fmt.Errorf("backend/gpu: DownloadInt32: tensor %v as int32", t)
	}
	if len(dst) != t.n {
		return fmt.Errorf("backend/gpu: DownloadInt32: tensor %v of %d elements into %d values", t, t.n, len(dst))
	}
	return b.copyOut("DownloadInt32", t, cuda.Bytes(dst), false)
}

// Softcap implements backend.Softcapper: one softcap_rows launch over x in
// place (the final logit soft-cap, before ArgmaxRows and the downloads).
func (b *Backend) Softcap(x backend.Tensor, c float32) {
	const op = "Softcap"
	if b.failed() {
		return
	}
	t, err := b.f32(op, x)
	if err != nil {
		b.fail(err)
		return
	}
	k, err := b.sampleKernels()
	if err != nil {
		b.fail(fmt.Errorf("backend/gpu: %s: %w", op, err))
		return
	}
	t.host = nil
	b.launch(op, func(ctx *cuda.Ctx) error {
		return k.SoftcapRows(ctx, b.stream, t.ptr, t.n, c)
	}, u64(t.ptr), u64(t.n), u64(uint64(math.Float32bits(c))))
}

var (
	_ backend.Argmaxer   = (*Backend)(nil)
	_ backend.Softcapper = (*Backend)(nil)
)

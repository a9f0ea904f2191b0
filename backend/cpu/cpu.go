package cpu

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/bitdecode/bitdecode/backend"
	"github.com/bitdecode/bitdecode/internal/half"
)

// Backend is the CPU backend (Go with SIMD assembly; see the package
// documentation). Create it with New.
type Backend struct {
	threads int

	mu  sync.Mutex
	err error // first op error since the last Sync

	huge hugeArena // matrix weights' memory (hugepages.go)
}

var _ backend.Backend = (*Backend)(nil)

// New returns a CPU backend that runs each op on up to threads goroutines;
// threads <= 0 means runtime.GOMAXPROCS(0).
func New(threads int) *Backend {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Backend{threads: threads}
}

// Threads returns the number of goroutines an op may use.
func (b *Backend) Threads() int { return b.threads }

// Name implements backend.Backend.
func (b *Backend) Name() string { return fmt.Sprintf("cpu (%d threads)", b.threads) }

// tensor is the CPU backend's backend.Tensor: exactly one of the slices is
// set, according to dtype.
type tensor struct {
	owner *Backend
	shape []int
	dtype backend.DType
	f32   []float32 // F32
	i32   []int32   // I32
	u16   []uint16  // F16, BF16 bit patterns
	freed bool
}

func (t *tensor) Shape() []int         { return slices.Clone(t.shape) }
func (t *tensor) DType() backend.DType { return t.dtype }
func (t *tensor) String() string       { return fmt.Sprintf("%v%v", t.dtype, t.shape) }

// Alloc implements backend.Backend.
func (b *Backend) Alloc(dtype backend.DType, shape ...int) (backend.Tensor, error) {
	n := backend.NumElements(shape)
	if n < 0 {
		return nil, fmt.Errorf("cpu: alloc %v%v: invalid shape", dtype, shape)
	}
	t := &tensor{owner: b, shape: slices.Clone(shape), dtype: dtype}
	switch dtype {
	case backend.F32:
		t.f32 = make([]float32, n)
	case backend.I32:
		t.i32 = make([]int32, n)
	case backend.F16, backend.BF16:
		t.u16 = make([]uint16, n)
	default:
		return nil, fmt.Errorf("cpu: alloc %v%v: unsupported dtype", dtype, shape)
	}
	return t, nil
}

// Free implements backend.Backend.
func (b *Backend) Free(t backend.Tensor) {
	if ct, ok := t.(*tensor); ok && ct.owner == b {
		ct.f32, ct.i32, ct.u16, ct.freed = nil, nil, nil, true
	}
}

// tensorOf returns the CPU tensor behind t, checking owner and liveness.
func (b *Backend) tensorOf(op string, t backend.Tensor) (*tensor, error) {
	ct, ok := t.(*tensor)
	switch {
	case t == nil || (ok && ct == nil):
		return nil, fmt.Errorf("cpu: %s: nil tensor", op)
	case !ok || ct.owner != b:
		return nil, fmt.Errorf("cpu: %s: tensor %T is not from this backend", op, t)
	case ct.freed:
		return nil, fmt.Errorf("cpu: %s: tensor %v used after Free", op, ct.shape)
	}
	return ct, nil
}

// weightOf returns the CPU weight behind w, checking its owner.
func (b *Backend) weightOf(op string, w backend.Weight) (*weight, error) {
	cw, ok := w.(*weight)
	switch {
	case w == nil || (ok && cw == nil):
		return nil, fmt.Errorf("cpu: %s: nil weight", op)
	case b.quantWeight(w) != nil:
		return nil, fmt.Errorf("cpu: %s: weight %s is a quantized linear weight (only Linear takes it)", op, w.Name())
	case !ok || cw.owner != b:
		return nil, fmt.Errorf("cpu: %s: weight %T is not from this backend", op, w)
	case cw.freed:
		return nil, fmt.Errorf("cpu: %s: weight %s used after FreeWeight", op, cw.name)
	}
	return cw, nil
}

// Upload implements backend.Backend.
func (b *Backend) Upload(dst backend.Tensor, src []float32) error {
	t, err := b.tensorOf("Upload", dst)
	if err != nil {
		return err
	}
	if n := backend.NumElements(t.shape); len(src) != n {
		return fmt.Errorf("cpu: Upload: %d values into tensor %v of %d elements", len(src), t, n)
	}
	switch t.dtype {
	case backend.F32:
		copy(t.f32, src)
	case backend.F16:
		for i, v := range src {
			t.u16[i] = half.FromFloat32(v)
		}
	case backend.BF16:
		for i, v := range src {
			t.u16[i] = half.BF16FromFloat32(v)
		}
	default:
		return fmt.Errorf("cpu: Upload: float32 values into tensor %v", t)
	}
	return nil
}

// UploadInt32 implements backend.Backend.
func (b *Backend) UploadInt32(dst backend.Tensor, src []int32) error {
	t, err := b.tensorOf("UploadInt32", dst)
	if err != nil {
		return err
	}
	if t.dtype != backend.I32 {
		return fmt.Errorf("cpu: UploadInt32: into tensor %v", t)
	}
	if len(src) != len(t.i32) {
		return fmt.Errorf("cpu: UploadInt32: %d values into tensor %v", len(src), t)
	}
	copy(t.i32, src)
	return nil
}

// Download implements backend.Backend.
func (b *Backend) Download(dst []float32, src backend.Tensor) error {
	if err := b.Err(); err != nil {
		return err
	}
	t, err := b.tensorOf("Download", src)
	if err != nil {
		return err
	}
	if n := backend.NumElements(t.shape); len(dst) != n {
		return fmt.Errorf("cpu: Download: tensor %v of %d elements into %d values", t, n, len(dst))
	}
	switch t.dtype {
	case backend.F32:
		copy(dst, t.f32)
	case backend.F16:
		for i, h := range t.u16 {
			dst[i] = half.ToFloat32(h)
		}
	case backend.BF16:
		for i, h := range t.u16 {
			dst[i] = half.BF16ToFloat32(h)
		}
	default:
		return fmt.Errorf("cpu: Download: tensor %v as float32", t)
	}
	return nil
}

// Float32s returns the host memory behind an F32 tensor of this backend, for
// CPU-only code (such as a CPU attention kernel) that wants to read or write
// activations without copies. The slice is valid until the tensor is freed.
// It is not part of backend.Backend: device backends have no such memory.
func (b *Backend) Float32s(t backend.Tensor) ([]float32, error) {
	ct, err := b.tensorOf("Float32s", t)
	if err != nil {
		return nil, err
	}
	if ct.dtype != backend.F32 {
		return nil, fmt.Errorf("cpu: Float32s: tensor %v is not F32", ct)
	}
	return ct.f32, nil
}

// FreeWeight implements backend.Backend.
func (b *Backend) FreeWeight(w backend.Weight) {
	if b.freeQuant(w) {
		return
	}
	if cw, ok := w.(*weight); ok && cw != nil && cw.owner == b {
		cw.free()
	}
}

// fail records err as the pending op error unless one is pending already.
func (b *Backend) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// failed reports whether an op error is pending (ops then do nothing).
func (b *Backend) failed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err != nil
}

// Err implements backend.Backend.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Sync implements backend.Backend. The CPU backend runs ops synchronously, so
// Sync only reports and clears the pending error.
func (b *Backend) Sync() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.err
	b.err = nil
	return err
}

// Close implements backend.Backend. Memory is returned to the garbage
// collector when tensors and weights become unreachable, so Close has
// nothing to release.
func (b *Backend) Close() error { return nil }
